//! Bootstrap, Spearman, OLS, t/z tests and trapezoid AUC against numpy / scipy / statsmodels.

mod common;

use common::*;
use herd_stats::{
    Alternative, Formula, bootstrap_replay, noncentral_f_cdf, noncentrality_interval, normal_quantile, ols, percentile,
    spearman, students_t_cdf, students_t_quantile, students_t_sf, trapezoid, trapezoid_uniform, ttest_one_sample,
    ttest_welch, z_test,
};

#[test]
fn bootstrap_replay_matches_numpy() {
    let fixture = load("bootstrap");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 4);
    for (k, case) in all.iter().enumerate() {
        let seed_means = nums(&case["seed_means"]);
        let gap = nums(&case["minority_gap"]);
        let indices: Vec<Vec<usize>> = case["indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row.as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as usize).collect())
            .collect();
        let difference = case["statistic"] == "mean_difference";
        let result = bootstrap_replay(seed_means.len(), &indices, |idx| {
            let total: f64 = idx.iter().map(|&i| if difference { gap[i] - seed_means[i] } else { seed_means[i] }).sum();
            total / idx.len() as f64
        })
        .unwrap();
        assert_eq!(result.replicates.len(), indices.len());
        for (a, e) in result.replicates.iter().zip(nums(&case["replicates_head"])) {
            assert_close(*a, e, ESTIMATE_ABS_FLOOR, &format!("case {k} replicate"));
        }
        assert_close(result.standard_error().unwrap(), num(&case["se"]), 0.0, "se");
        let (lo, hi) = result.percentile_interval(0.95).unwrap();
        assert_close(lo, num(&case["ci95"][0]), ESTIMATE_ABS_FLOOR, "ci95 lo");
        assert_close(hi, num(&case["ci95"][1]), ESTIMATE_ABS_FLOOR, "ci95 hi");
        let (lo, hi) = result.percentile_interval(0.90).unwrap();
        assert_close(lo, num(&case["ci90"][0]), ESTIMATE_ABS_FLOOR, "ci90 lo");
        assert_close(hi, num(&case["ci90"][1]), ESTIMATE_ABS_FLOOR, "ci90 hi");
        let median = percentile(&result.replicates, 50.0).unwrap();
        assert_close(median, num(&case["median"]), ESTIMATE_ABS_FLOOR, "median");
    }
}

#[test]
fn spearman_matches_scipy() {
    let fixture = load("spearman");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 26);
    for (k, case) in all.iter().enumerate() {
        let r = spearman(&nums(&case["x"]), &nums(&case["y"]), alternative(&case["alternative"])).unwrap();
        assert_close(r.rho, num(&case["rho"]), ESTIMATE_ABS_FLOOR, &format!("case {k} rho"));
        assert_p(r.p_value, num(&case["pvalue"]), &format!("case {k} p"));
    }
}

#[test]
fn ols_matches_statsmodels() {
    let fixture = load("ols");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 5);
    for (k, case) in all.iter().enumerate() {
        let columns: Vec<(String, Vec<f64>)> =
            case["columns"].as_object().unwrap().iter().map(|(name, v)| (name.clone(), nums(v))).collect();
        let borrowed: Vec<(&str, &[f64])> = columns.iter().map(|(name, v)| (name.as_str(), v.as_slice())).collect();
        let formula = Formula::parse(case["formula"].as_str().unwrap()).unwrap();
        let (design, y) = formula.build(&borrowed).unwrap();
        let fit = ols(&design, &y).unwrap();
        let names: Vec<&str> = case["names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(design.column_names, names);
        for (j, c) in fit.coefficients.iter().enumerate() {
            let w = format!("case {k} {}", c.name);
            assert_close(c.estimate, num(&case["params"][j]), ESTIMATE_ABS_FLOOR, &w);
            assert_close(c.se, num(&case["se"][j]), 0.0, &w);
            assert_close(c.t, num(&case["t"][j]), ESTIMATE_ABS_FLOOR, &w);
            assert_p(c.p_value, num(&case["p"][j]), &w);
            assert_close(c.se_hc3, num(&case["se_hc3"][j]), 0.0, &format!("{w} HC3"));
            assert_p(c.p_hc3, num(&case["p_hc3"][j]), &format!("{w} HC3"));
        }
        assert_close(fit.r_squared, num(&case["r_squared"]), 0.0, "r2");
        assert_close(fit.adj_r_squared, num(&case["adj_r_squared"]), 0.0, "adj r2");
        assert_close(fit.scale, num(&case["scale"]), 0.0, "scale");
    }
}

#[test]
fn welch_ttest_and_t_quantiles_match_scipy() {
    let fixture = load("welch");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 15);
    let mut smallest = 1.0_f64;
    for (k, case) in all.iter().enumerate() {
        let r = ttest_welch(&nums(&case["a"]), &nums(&case["b"]), alternative(&case["alternative"])).unwrap();
        assert_close(r.t, num(&case["t"]), ESTIMATE_ABS_FLOOR, &format!("case {k} t"));
        assert_close(r.df, num(&case["df"]), 0.0, &format!("case {k} df"));
        assert_p(r.p_value, num(&case["pvalue"]), &format!("case {k} p"));
        smallest = smallest.min(r.p_value);
        for (level, key) in [(0.95, "ci95"), (0.90, "ci90")] {
            if case.get(key).is_some() {
                let (lo, hi) = r.confidence_interval(level);
                assert_close(lo, num(&case[key][0]), ESTIMATE_ABS_FLOOR, &format!("case {k} {key} lo"));
                assert_close(hi, num(&case[key][1]), ESTIMATE_ABS_FLOOR, &format!("case {k} {key} hi"));
            }
        }
    }
    assert!(smallest < 1e-20, "a far-tail case must be covered");
    for case in cases(&fixture, "quantiles") {
        let (q, df) = (num(&case["q"]), num(&case["df"]));
        assert_close(students_t_quantile(q, df), num(&case["ppf"]), ESTIMATE_ABS_FLOOR, &format!("t.ppf({q}, {df})"));
    }
    let normal = cases(&fixture, "normal_quantiles");
    assert_eq!(normal.len(), 10);
    for case in normal {
        let q = num(&case["q"]);
        assert_close(normal_quantile(q), num(&case["ppf"]), ESTIMATE_ABS_FLOOR, &format!("norm.ppf({q})"));
    }
    // Too few observations or no variance are errors, not NaN.
    assert!(ttest_welch(&[1.0], &[1.0, 2.0], Alternative::TwoSided).is_err());
    assert!(ttest_welch(&[1.0, 1.0], &[2.0, 2.0], Alternative::TwoSided).is_err());
}

#[test]
fn ttest_and_z_match_scipy() {
    let fixture = load("ttest");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 36);
    let mut smallest = 1.0_f64;
    for (k, case) in all.iter().enumerate() {
        let r =
            ttest_one_sample(&nums(&case["sample"]), num(&case["popmean"]), alternative(&case["alternative"])).unwrap();
        assert_close(r.t, num(&case["t"]), ESTIMATE_ABS_FLOOR, &format!("case {k} t"));
        assert_eq!(r.df, num(&case["df"]));
        assert_p(r.p_value, num(&case["pvalue"]), &format!("case {k} p"));
        smallest = smallest.min(r.p_value);
    }
    assert!(smallest < 1e-20, "a far-tail case must be covered");

    let z_cases = cases(&fixture, "z_cases");
    assert_eq!(z_cases.len(), 36);
    for case in z_cases {
        let p = z_test(num(&case["z"]), alternative(&case["alternative"])).unwrap();
        assert_p(p, num(&case["pvalue"]), &format!("z {}", case["z"]));
    }

    let tails = cases(&fixture, "t_tail");
    assert_eq!(tails.len(), 35);
    for case in tails {
        let (t, df) = (num(&case["t"]), num(&case["df"]));
        assert_p(students_t_sf(t, df), num(&case["sf"]), &format!("t sf({t}, {df})"));
        assert_p(students_t_cdf(t, df), num(&case["cdf"]), &format!("t cdf({t}, {df})"));
    }
    assert!(z_test(f64::NAN, Alternative::TwoSided).is_err());
}

#[test]
fn trapezoid_matches_numpy() {
    let fixture = load("auc");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 6);
    for (k, case) in all.iter().enumerate() {
        let y = nums(&case["y"]);
        let area = trapezoid(&y, &nums(&case["x"])).unwrap();
        assert_close(area, num(&case["area"]), ESTIMATE_ABS_FLOOR, &format!("case {k}"));
        let uniform = trapezoid_uniform(&y, num(&case["dx"])).unwrap();
        assert_close(uniform, num(&case["area_uniform"]), ESTIMATE_ABS_FLOOR, &format!("case {k}"));
    }
    assert!(trapezoid(&[1.0, 2.0], &[0.0]).is_err());
}

#[test]
fn noncentral_f_matches_scipy() {
    let fixture = load("noncentral_f");
    let cdf = cases(&fixture, "cdf");
    assert_eq!(cdf.len(), 144);
    for case in cdf {
        let (f, d1, d2, nc) = (num(&case["f"]), num(&case["d1"]), num(&case["d2"]), num(&case["nc"]));
        let what = format!("ncf.cdf({f}, {d1}, {d2}, {nc})");
        assert_p(noncentral_f_cdf(f, d1, d2, nc), num(&case["cdf"]), &what);
    }
    let intervals = cases(&fixture, "intervals");
    assert_eq!(intervals.len(), 15);
    for case in intervals {
        let (f, d1, d2) = (num(&case["f"]), num(&case["d1"]), num(&case["d2"]));
        let (low, high) = noncentrality_interval(f, d1, d2, num(&case["level"])).unwrap();
        let what = format!("noncentrality interval of F = {f} on ({d1}, {d2})");
        assert_close(low, num(&case["low"]), 1e-9, &format!("{what}: low"));
        assert_close(high, num(&case["high"]), 1e-9, &format!("{what}: high"));
    }
}
