//! GEE (Gaussian, independence working correlation) against statsmodels 0.15
//! `smf.gee(..., cov_struct=Independence()).fit()`, with and without one intercept per stratum
//! (`+ C(decider)`), and what the sum constraint of a minimal-group society does to the exchangeable
//! fit (`gee_independence_cases` in `golden/generate.py`).

mod common;

use common::*;
use herd_stats::{
    Formula, GeeOptions, StatsError, WorkingCorrelation, gee_gaussian_exchangeable, gee_gaussian_independence,
    gee_gaussian_independence_within,
};

#[test]
fn matches_statsmodels() {
    let fixture = load("gee_independence");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 5);
    for case in all {
        let label = case["label"].as_str().unwrap();
        let (design, y) = design_of(case, case["formula"].as_str().unwrap());
        let fit = gee_gaussian_independence(&design, &y, &ids(case, "groups"), &GeeOptions::default())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!((fit.working_correlation, fit.rho, fit.absorbed), (WorkingCorrelation::Independence, 0.0, 0));
        assert_gee_matches(&fit, &case["expected"], label);
    }
}

#[test]
fn matches_statsmodels_with_an_intercept_per_decider() {
    let fixture = load("gee_independence");
    let all = cases(&fixture, "within");
    assert_eq!(all.len(), 2);
    for case in all {
        let label = case["label"].as_str().unwrap();
        let (design, y) = design_of(case, case["formula"].as_str().unwrap());
        let strata = ids(case, "strata");
        let fit = gee_gaussian_independence_within(&design, &y, &ids(case, "groups"), &strata, &GeeOptions::default())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let deciders = strata.iter().collect::<std::collections::BTreeSet<_>>().len();
        assert_eq!(fit.absorbed, deciders, "{label}");
        // statsmodels' parameters: the intercept, a dummy per decider but the first, the others.
        let n_params = case["expected"]["n_params"].as_u64().unwrap() as usize;
        assert_eq!(fit.coefficients.len() + deciders, n_params, "{label}");
        assert_gee_matches(&fit, &case["expected"], label);
    }
}

/// Societies whose every decider splits 100 points: the exchangeable fit degenerates (its ρ at the
/// bound −1/(n − 1) pins `same_group` near 0 with a collapsed SE; just above the bound it is shrunk),
/// and the independence fit with each decider's intercept recovers the planted effect with an SE of
/// the seed-level SE's size. Each fit also matches statsmodels.
#[test]
fn sum_constrained_planted_data() {
    let fixture = load("gee_independence");
    let all = cases(&fixture, "planted");
    assert_eq!(all.len(), 3);
    let options = GeeOptions::default();
    for case in all {
        let label = case["label"].as_str().unwrap();
        let (design, y) = design_of(case, case["formula"].as_str().unwrap());
        let (groups, strata) = (ids(case, "groups"), ids(case, "strata"));
        let effect = num(&case["effect"]);
        let seed_mean = num(&case["seed_level"]["mean"]);
        let seed_se = num(&case["seed_level"]["se"]);

        // The sum constraint, as planted: every decider's points sum to 100.
        let mut sums = std::collections::BTreeMap::new();
        for (d, v) in strata.iter().zip(&y) {
            *sums.entry(d).or_insert(0.0) += v;
        }
        assert!(sums.values().all(|s| (s - 100.0).abs() < 1e-9), "{label}");

        let exchangeable = gee_gaussian_exchangeable(&design, &y, &groups, &options).unwrap();
        assert_gee_matches(&exchangeable, &case["exchangeable"], &format!("{label} exchangeable"));
        let independence = gee_gaussian_independence(&design, &y, &groups, &options).unwrap();
        assert_gee_matches(&independence, &case["independence"], &format!("{label} independence"));
        let within = gee_gaussian_independence_within(&design, &y, &groups, &strata, &options).unwrap();
        assert_gee_matches(&within, &case["independence_within_decider"], &format!("{label} within"));

        let size = num(&case["society_size"]);
        let bound = -1.0 / (size * (size - 1.0) - 1.0);
        let ex = exchangeable.coefficient("same_group").unwrap();
        if num(&case["noise"]) > 2.0 {
            assert!((exchangeable.rho - bound).abs() < 0.01 * bound.abs(), "{label}: rho {}", exchangeable.rho);
            assert!(ex.robust_se < 0.05 * seed_se && ex.estimate.abs() < 0.05, "{label}: {ex:?}");
        } else {
            assert!(exchangeable.rho < 0.8 * bound && ex.estimate < effect - 5.0 * seed_se, "{label}: {ex:?}");
        }
        let w = within.coefficient("same_group").unwrap();
        assert!((w.estimate - effect).abs() < 3.0 * w.robust_se, "{label}: {w:?}");
        assert!((w.estimate - seed_mean).abs() < seed_se, "{label}: {w:?} vs seed-level {seed_mean}");
        assert!((0.5..2.0).contains(&(w.robust_se / seed_se)), "{label}: {w:?} vs seed-level SE {seed_se}");
        let i = independence.coefficient("same_group").unwrap();
        assert!((0.5..2.0).contains(&(i.robust_se / seed_se)), "{label}: {i:?} vs seed-level SE {seed_se}");
    }
}

#[test]
fn absorbing_rejects_what_the_intercepts_explain() {
    let formula = Formula::parse("y ~ a + b").unwrap();
    let a = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let b = [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    let y = [3.0, 1.0, 2.5, 0.5, 4.0, 1.5, 2.0, 2.5];
    let (design, y) = formula.build(&[("y", &y), ("a", &a), ("b", &b)]).unwrap();
    let groups = [1, 1, 1, 1, 2, 2, 2, 2];
    let options = GeeOptions::default();
    // `b` is constant within each stratum: collinear with the intercepts.
    let strata = [1, 1, 2, 2, 3, 3, 4, 4];
    assert!(matches!(
        gee_gaussian_independence_within(&design, &y, &groups, &strata, &options),
        Err(StatsError::SingularDesign { rank: 1, columns: 2 })
    ));
    // A stratum across two clusters.
    let across = [1, 1, 2, 2, 2, 3, 4, 4];
    assert!(matches!(
        gee_gaussian_independence_within(&design, &y, &groups, &across, &options),
        Err(StatsError::InvalidArgument(_))
    ));
    assert!(gee_gaussian_independence_within(&design, &y, &groups, &strata[..7], &options).is_err());
    // One stratum per row: nothing varies within a stratum.
    let singletons = [1, 2, 3, 4, 5, 6, 7, 8];
    let (design_a, y_a) = Formula::parse("y ~ a").unwrap().build(&[("y", &y), ("a", &a)]).unwrap();
    assert!(matches!(
        gee_gaussian_independence_within(&design_a, &y_a, &groups, &singletons, &options),
        Err(StatsError::SingularDesign { rank: 0, columns: 1 })
    ));
    // Only the intercept: nothing is left once it is absorbed.
    let (design_1, y_1) = Formula::parse("y ~ 1").unwrap().build(&[("y", &y)]).unwrap();
    assert!(matches!(
        gee_gaussian_independence_within(&design_1, &y_1, &groups, &strata, &options),
        Err(StatsError::InvalidArgument(_))
    ));
}

#[test]
fn an_exact_fit_has_its_estimates_and_undefined_errors() {
    // Every decider splits its points the same way: the intercepts and same_group explain them.
    let same = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    let points: Vec<f64> = same.iter().map(|s| 30.0 + 10.0 * s).collect();
    let (design, y) =
        Formula::parse("points ~ same_group").unwrap().build(&[("points", &points), ("same_group", &same)]).unwrap();
    let groups = [1, 1, 1, 2, 2, 2, 3, 3, 3];
    let fit = gee_gaussian_independence_within(&design, &y, &groups, &groups, &GeeOptions::default()).unwrap();
    let slope = fit.coefficient("same_group").unwrap();
    assert!((slope.estimate - 10.0).abs() < 1e-12 && slope.robust_se.is_nan() && !fit.converged);
    let fit = gee_gaussian_independence(&design, &y, &groups, &GeeOptions::default()).unwrap();
    assert!((fit.coefficient("same_group").unwrap().estimate - 10.0).abs() < 1e-12 && fit.rho == 0.0);
    assert!(fit.coefficient("same_group").unwrap().robust_se.is_nan());
}
