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
