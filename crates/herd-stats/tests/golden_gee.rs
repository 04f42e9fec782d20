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
        let formula = Formula::parse(case["formula"].as_str().unwrap()).unwrap();
        let columns: Vec<(String, Vec<f64>)> =
            case["columns"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), nums(v))).collect();
        let borrowed: Vec<(&str, &[f64])> = columns.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        let (design, y) = formula.build(&borrowed).unwrap();
        let groups: Vec<i64> = case["groups"].as_array().unwrap().iter().map(|g| g.as_i64().unwrap()).collect();
        let fit = gee_gaussian_exchangeable(&design, &y, &groups, &GeeOptions::default())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let e = &case["expected"];
        let names: Vec<&str> = e["names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(design.column_names, names, "{label}: patsy column names");
        assert_close(fit.rho, num(&e["rho"]), ESTIMATE_ABS_FLOOR, &format!("{label} rho"));
        assert_close(fit.scale, num(&e["scale"]), 0.0, &format!("{label} scale"));
        assert_eq!(fit.converged, e["converged"].as_bool().unwrap(), "{label}");
        assert_eq!(fit.iterations as u64, e["iterations"].as_u64().unwrap(), "{label} iterations");
        let robust_cov = e["robust_cov"].as_array().unwrap();
        for (j, c) in fit.coefficients.iter().enumerate() {
            let w = |key: &str| format!("{label} {} {key}", c.name);
            assert_close(c.estimate, num(&e["params"][j]), ESTIMATE_ABS_FLOOR, &w("estimate"));
            assert_close(c.robust_se, num(&e["robust_se"][j]), 0.0, &w("robust se"));
            assert_close(c.naive_se, num(&e["naive_se"][j]), 0.0, &w("naive se"));
            assert_close(c.robust_z, num(&e["robust_z"][j]), ESTIMATE_ABS_FLOOR, &w("z"));
            assert_p(c.robust_p, num(&e["robust_p"][j]), &w("p"));
            for (l, v) in nums(&robust_cov[j]).iter().enumerate() {
                assert_close(fit.robust_covariance[(j, l)], *v, 1e-14, &w("robust cov"));
            }
        }
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
