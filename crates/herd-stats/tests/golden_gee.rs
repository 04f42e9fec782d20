//! GEE (Gaussian, exchangeable) against statsmodels 0.15 `smf.gee(...).fit()`.

mod common;

use common::*;
use herd_stats::{Formula, GeeOptions, gee_gaussian_exchangeable};

#[test]
fn matches_statsmodels() {
    let fixture = load("gee");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 6);
    let mut saw_lower_bound_rho = false;
    for case in all {
        let label = case["label"].as_str().unwrap();
        let (design, y) = design_of(case, case["formula"].as_str().unwrap());
        let groups = ids(case, "groups");
        let fit = gee_gaussian_exchangeable(&design, &y, &groups, &GeeOptions::default())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_gee_matches(&fit, &case["expected"], label);
        let max_cluster = {
            let mut counts = std::collections::BTreeMap::new();
            for g in &groups {
                *counts.entry(g).or_insert(0usize) += 1;
            }
            *counts.values().max().unwrap() as f64
        };
        let lower_bound = -1.0 / (max_cluster - 1.0);
        if fit.rho < 0.9 * lower_bound {
            saw_lower_bound_rho = true;
            assert!(fit.rho > lower_bound, "{label}: rho below its bound");
        }
    }
    assert!(saw_lower_bound_rho, "a design with rho near −1/(n−1) must be covered");
}

#[test]
fn rejects_singular_and_mismatched() {
    let formula = Formula::parse("y ~ a + b").unwrap();
    let a = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0];
    let (design, y) = formula.build(&[("y", &[1.0, 2.0, 3.0, 4.0, 5.0, 7.0]), ("a", &a), ("b", &a)]).unwrap();
    let groups = [1, 1, 2, 2, 3, 3];
    assert!(matches!(
        gee_gaussian_exchangeable(&design, &y, &groups, &GeeOptions::default()),
        Err(herd_stats::StatsError::SingularDesign { .. })
    ));
    assert!(gee_gaussian_exchangeable(&design, &y, &groups[..5], &GeeOptions::default()).is_err());
}

#[test]
fn an_exact_fit_returns_its_estimates_with_undefined_errors_instead_of_hanging() {
    // Every decider filled uniformly: the same points in every row, as a cell whose outputs all
    // failed to parse gives. ρ is 0/0 here; statsmodels returns the OLS estimates with NaN SEs.
    let formula = Formula::parse("points ~ same_group").unwrap();
    let same = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0];
    let (design, y) = formula.build(&[("points", &[100.0 / 19.0; 8]), ("same_group", &same)]).unwrap();
    let groups = [1, 1, 2, 2, 3, 3, 4, 4];
    let fit =
        gee_gaussian_exchangeable(&design, &y, &groups, &GeeOptions::default()).expect("an exact fit is a result");
    let slope = fit.coefficient("same_group").unwrap();
    assert!(
        slope.estimate.abs() < 1e-12 && (fit.coefficient("Intercept").unwrap().estimate - 100.0 / 19.0).abs() < 1e-12
    );
    assert!(slope.robust_se.is_nan() && slope.robust_p.is_nan() && fit.rho.is_nan() && !fit.converged);
    // An exact fit with a slope (points = 2 + 3·same_group) is exact too.
    let line: Vec<f64> = same.iter().map(|s| 2.0 + 3.0 * s).collect();
    let (design, y) = formula.build(&[("points", &line), ("same_group", &same)]).unwrap();
    let fit = gee_gaussian_exchangeable(&design, &y, &groups, &GeeOptions::default()).unwrap();
    assert!((fit.coefficient("same_group").unwrap().estimate - 3.0).abs() < 1e-12);
    assert!(fit.coefficient("same_group").unwrap().robust_se.is_nan());
}
