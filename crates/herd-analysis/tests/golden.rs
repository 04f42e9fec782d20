//! Every number of both analyses against pandas / scipy / statsmodels on the committed synthetic
//! tables (`golden/generate.py` wrote the data and the expected results).

use std::path::PathBuf;

use herd_analysis::study::{read_conformity_trials, read_dyads};
use herd_analysis::{
    BootstrapPlan, ConformityOptions, DIFFICULTY_HEXBIN_GRIDSIZE, MinimalGroupOptions, ResultTable, analyze_conformity,
    analyze_minimal_group, minimal_group_seed_tests,
};
use herd_stats::{Alternative, students_t_p_value};
use serde_json::Value;

const REL_TOL: f64 = 1e-6;
/// Absolute floor for values that are zero in theory (hidden-label effects, p-values far below
/// 1e-12 compared with an absolute tolerance).
const ABS_FLOOR: f64 = 1e-10;

fn path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join(relative)
}

fn load(relative: &str) -> Value {
    let p = path(relative);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

fn rust_key(table: &ResultTable, row: usize, column: &str) -> String {
    if let Some(t) = table.text(column, row) {
        return t.to_owned();
    }
    match table.number(column, row) {
        Some(v) if v.fract() == 0.0 => format!("{}", v as i64),
        Some(v) => format!("{v}"),
        None => String::new(),
    }
}

fn json_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => format!("{}", n.as_f64().unwrap()),
        },
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Compares every expected record with the Rust row of the same key.
fn compare(table: &ResultTable, expected: &Value, keys: &[&str]) {
    let records = expected.as_array().expect("records");
    assert_eq!(table.n_rows(), records.len(), "{}: row count", table.name);
    assert!(!records.is_empty(), "{}: no golden rows", table.name);
    let mut checked = 0;
    for record in records {
        let record = record.as_object().expect("record object");
        let key: Vec<String> = keys.iter().map(|k| json_key(record.get(*k).unwrap_or(&Value::Null))).collect();
        let row = (0..table.n_rows())
            .find(|&r| keys.iter().zip(&key).all(|(k, v)| rust_key(table, r, k) == *v))
            .unwrap_or_else(|| panic!("{}: no herd row for {keys:?} = {key:?}", table.name));
        for (column, value) in record {
            if keys.contains(&column.as_str()) {
                continue;
            }
            assert!(table.column(column).is_some(), "{}: herd has no column {column}", table.name);
            let what = format!("{} {key:?} {column}", table.name);
            match value {
                Value::String(s) => assert_eq!(table.text(column, row), Some(s.as_str()), "{what}"),
                Value::Null => {
                    let actual = table.number(column, row).or_else(|| table.text(column, row).map(|_| 0.0));
                    assert!(actual.is_none(), "{what}: herd {actual:?}, reference null");
                }
                Value::Number(n) => {
                    let expected = n.as_f64().unwrap();
                    let actual =
                        table.number(column, row).unwrap_or_else(|| panic!("{what}: herd null, reference {expected}"));
                    let tolerance = f64::max(REL_TOL * expected.abs(), ABS_FLOOR);
                    assert!(
                        (actual - expected).abs() <= tolerance,
                        "{what}: herd {actual:e} vs reference {expected:e}"
                    );
                    checked += 1;
                }
                other => panic!("{what}: unexpected {other}"),
            }
        }
    }
    assert!(checked > 0);
}

#[test]
fn minimal_group_matches_statsmodels() {
    let dyads = read_dyads(&path("data/dyads.csv")).expect("committed dyads read");
    assert_eq!(dyads.design_columns(), ["model", "reasoning", "swap_pass"]);
    let indices: Vec<Vec<usize>> = serde_json::from_value(load("data/bootstrap_indices.json")).unwrap();
    let options = MinimalGroupOptions {
        bootstrap: BootstrapPlan::Replay(indices),
        gee_bootstrap: true,
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group(&dyads, &options).expect("analysis");
    let golden = load("golden/minimal_group.json");
    let design = ["model", "reasoning", "swap_pass", "passes"];
    let with =
        |rest: &[&'static str]| -> Vec<&'static str> { design.iter().copied().chain(rest.iter().copied()).collect() };
    compare(&tables.seed_tests, &golden["seed_tests"], &with(&["labels", "m", "deciders", "measure"]));
    compare(&tables.gee, &golden["gee"], &with(&["analysis", "labels", "m", "formula", "term"]));
    compare(&tables.bootstrap, &golden["bootstrap"], &with(&["labels", "m", "quantity"]));
    compare(
        &tables.robustness,
        &golden["robustness"],
        &with(&["labels", "m", "fills", "check", "deciders", "target_group"]),
    );
}

#[test]
fn conformity_matches_scipy() {
    let trials = read_conformity_trials(&path("data/conformity_trials.csv")).expect("committed trials read");
    let tables = analyze_conformity(&trials, &ConformityOptions::default()).expect("analysis");
    let golden = load("golden/conformity.json");
    compare(&tables.curves, &golden["curves"], &["model", "task", "family", "level", "measure", "n"]);
    compare(&tables.auc, &golden["auc"], &["model", "task", "family", "level", "measure"]);
    compare(&tables.deltas, &golden["deltas"], &["model", "task", "family", "measure", "level_a", "level_b"]);
    compare(&tables.difficulty_spearman, &golden["difficulty_spearman"], &["model", "task", "measure"]);
    compare(&tables.difficulty_ols, &golden["difficulty_ols"], &["task", "measure", "term"]);
}

/// The difficulty regression's unit (docs/deviations.md, "Difficulty regression unit"): herd's t
/// distribution gives S4's printed p at the residual df `conformity_claims.py` inverted, per task and
/// term, and both terms of a task's fit agree on one df (n = df + 3 points, not 12 models × 10 levels).
#[test]
fn s4_p_values_fix_the_difficulty_regression_df() {
    let golden = load("golden/conformity_claims.json");
    let fits = golden["s4_fits"].as_array().expect("s4_fits");
    let mut residual = std::collections::BTreeMap::new();
    for fit in fits {
        residual.insert(fit["task"].as_str().expect("task").to_owned(), fit["residual_df"].as_f64().expect("df"));
    }
    assert_eq!(residual.len(), 3);
    for row in golden["s4"].as_array().expect("s4") {
        let (t, p) = (row["t"].as_f64().expect("t"), row["p"].as_f64().expect("p"));
        let df = residual[row["task"].as_str().expect("task")];
        let ours = students_t_p_value(t, df, Alternative::TwoSided);
        // herd's t distribution against scipy's at the inverted df, then against the paper's rounding.
        let scipy = row["p_at_df_best"].as_f64().expect("p_at_df_best");
        if row["df_best"].as_f64() == Some(df) {
            assert!((ours - scipy).abs() <= REL_TOL * scipy, "{row}: {ours} vs scipy {scipy}");
        }
        // S4 prints t to three decimals and p to three significant digits.
        let near = [t.abs() - 0.0005, t.abs(), t.abs() + 0.0005]
            .iter()
            .any(|&tt| (students_t_p_value(tt, df, Alternative::TwoSided) - p).abs() <= 0.005 * p);
        assert!(near, "{row}: S4's p is not reached at df {df}");
    }
    // Not models × levels: the three tasks' residual df differ.
    assert_eq!((residual["lines"], residual["color"], residual["dots"]), (111.0, 129.0, 97.0));
    // The colour task's 132 points exceed what a gridsize-10 hexagon grid holds; herd's grid holds them.
    let capacity = |g: u64| {
        golden["hexbin_capacity"]
            .as_array()
            .expect("capacity")
            .iter()
            .find(|c| c["gridsize"].as_u64() == Some(g))
            .and_then(|c| c["hexagons"].as_f64())
            .expect("gridsize listed")
    };
    assert!(capacity(10) < 132.0);
    assert!(capacity(u64::from(DIFFICULTY_HEXBIN_GRIDSIZE)) >= 132.0);
    assert_eq!(golden["gridsize"].as_u64(), Some(u64::from(DIFFICULTY_HEXBIN_GRIDSIZE)));
}

#[test]
fn planted_effects_are_found() {
    let dyads = read_dyads(&path("data/dyads.csv")).unwrap();
    let options = MinimalGroupOptions {
        bootstrap: BootstrapPlan::Seeded { resamples: 300, seed: 3 },
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group(&dyads, &options).unwrap();
    // Average favouritism over the main cells (both passes pooled, or the only pass) of each label
    // condition: clearly positive when labels are visible, near zero when hidden (per-cell seed
    // means are noisy with societies of 6).
    let t = &tables.seed_tests;
    let (mut visible, mut hidden) = (Vec::new(), Vec::new());
    for row in 0..t.n_rows() {
        if t.text("deciders", row) == Some("all")
            && t.text("measure", row) == Some("favouritism")
            && t.text("passes", row) != Some("per_pass")
        {
            let mean = t.number("mean", row).unwrap();
            match t.text("labels", row) {
                Some("visible") => visible.push(mean),
                _ => hidden.push(mean),
            }
        }
    }
    let average = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert_eq!((visible.len(), hidden.len()), (6, 6));
    assert!(average(&visible) > 5.0, "visible favouritism {visible:?}");
    assert!(average(&hidden).abs() < 2.0, "hidden favouritism {hidden:?}");
}

#[test]
fn power_analysis_gets_the_main_rows_of_seed_tests() {
    let dyads = read_dyads(&path("data/dyads.csv")).unwrap();
    let options = MinimalGroupOptions {
        bootstrap: BootstrapPlan::Seeded { resamples: 50, seed: 3 },
        ..MinimalGroupOptions::default()
    };
    let full = analyze_minimal_group(&dyads, &options).unwrap().seed_tests;
    let main = minimal_group_seed_tests(&dyads, &options).unwrap();
    let rows: Vec<usize> = (0..full.n_rows()).filter(|&r| full.text("passes", r) != Some("per_pass")).collect();
    assert_eq!(main.n_rows(), rows.len());
    assert!(rows.len() < full.n_rows(), "the committed table has per-pass rows");
    assert_eq!(
        main.columns.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        full.columns.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    // Families never mix main and per-pass rows, so the q-values are the full table's.
    for (i, &r) in rows.iter().enumerate() {
        for (name, _) in &full.columns {
            assert_eq!(main.text(name, i), full.text(name, r), "{name}");
            assert_eq!(main.number(name, i), full.number(name, r), "{name}");
        }
    }
}

/// The minimal-group headlines' per-model claims (`model_claims`: society values, Wilcoxon, t-interval)
/// against `reference.minimal_group_claims` (golden/minimal_group_claims.json): on the headline
/// selection (each model's default reasoning mode, both passes) and on every mode (the on − off gap).
#[test]
fn minimal_group_claims_match_scipy() {
    let dyads = read_dyads(&path("data/dyads.csv")).expect("committed dyads read");
    let golden = load("golden/minimal_group_claims.json");
    let defaults = herd_analysis::minimal_group::default_reasoning(&dyads).expect("a reasoning column");
    let headline = herd_analysis::minimal_group::model_claims(&dyads, |k| {
        defaults.get(&k.0[0]).and_then(Option::as_ref).is_some_and(|d| k.0[1].as_ref() == Some(d))
    })
    .expect("headline claims");
    let keys = ["model", "reasoning", "labels", "quantity"];
    compare(&headline, &golden["headline"], &keys);
    let all_modes = herd_analysis::minimal_group::model_claims(&dyads, |_| true).expect("claims of every mode");
    compare(&all_modes, &golden["all_modes"], &keys);
    // The reasoning control's paired gap is there, and the per-model minority gap and prevalence are
    // the quantities the headlines print.
    let quantities: Vec<&str> = (0..all_modes.n_rows()).filter_map(|r| all_modes.text("quantity", r)).collect();
    for q in [
        "minority_gap",
        "prevalence",
        "equal_groups_gap",
        "excess_share_gap",
        "majority_favouritism_smallest_m",
        "majority_excess_share",
    ] {
        assert!(quantities.contains(&q), "{q}");
    }
    assert!((0..all_modes.n_rows()).any(|r| all_modes.text("reasoning", r) == Some("on_minus_off")));
}
