//! Shared helpers for the golden-value tests: fixtures are written by `golden/generate.py`.
#![allow(dead_code)]

use std::path::PathBuf;

use herd_stats::Alternative;
use serde_json::Value;

/// Relative tolerance against scipy / statsmodels.
pub const REL_TOL: f64 = 1e-6;
/// Absolute floor for quantities that can be ~0 through cancellation (estimates, z, ρ).
/// p-values never use it: they are compared purely relatively.
pub const ESTIMATE_ABS_FLOOR: f64 = 1e-10;

pub fn load(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("fixture is valid JSON")
}

pub fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("finite number"),
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        other => panic!("not a number: {other}"),
    }
}

pub fn nums(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(num).collect()
}

pub fn cases<'a>(fixture: &'a Value, key: &str) -> &'a Vec<Value> {
    fixture[key].as_array().unwrap_or_else(|| panic!("fixture has no {key:?} array"))
}

pub fn alternative(v: &Value) -> Alternative {
    match v.as_str().expect("alternative string") {
        "two-sided" => Alternative::TwoSided,
        "greater" => Alternative::Greater,
        "less" => Alternative::Less,
        other => panic!("unknown alternative {other}"),
    }
}

/// |actual − expected| ≤ max(REL_TOL·|expected|, abs_floor); infinities must match exactly.
pub fn close(actual: f64, expected: f64, abs_floor: f64) -> bool {
    if expected.is_infinite() || actual.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= f64::max(REL_TOL * expected.abs(), abs_floor)
}

#[track_caller]
pub fn assert_close(actual: f64, expected: f64, abs_floor: f64, what: &str) {
    assert!(
        close(actual, expected, abs_floor),
        "{what}: herd {actual:e} vs reference {expected:e} (rel err {:e})",
        ((actual - expected) / expected).abs()
    );
}

/// p-values: purely relative (an exact 0 must be matched by 0).
#[track_caller]
pub fn assert_p(actual: f64, expected: f64, what: &str) {
    assert_close(actual, expected, 0.0, what);
}

/// A GEE fit against statsmodels' (`fit_gee` / `fit_gee_independence` in `generate.py`): names,
/// estimates, robust and naive SEs, z, p, the robust covariance, ρ, scale, convergence and the
/// number of iterations.
#[track_caller]
pub fn assert_gee_matches(fit: &herd_stats::GeeFit, e: &Value, label: &str) {
    let names: Vec<&str> = e["names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let fitted: Vec<&str> = fit.coefficients.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(fitted, names, "{label}: patsy column names");
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
}

/// A case's `columns` built into `formula`'s design and response.
pub fn design_of(case: &Value, formula: &str) -> (herd_stats::DesignMatrix, Vec<f64>) {
    let formula = herd_stats::Formula::parse(formula).unwrap();
    let columns: Vec<(String, Vec<f64>)> =
        case["columns"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), nums(v))).collect();
    let borrowed: Vec<(&str, &[f64])> = columns.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    formula.build(&borrowed).unwrap()
}

/// A case's integer ids (`groups`, `strata`).
pub fn ids(case: &Value, key: &str) -> Vec<i64> {
    case[key].as_array().unwrap_or_else(|| panic!("no {key:?}")).iter().map(|g| g.as_i64().unwrap()).collect()
}
