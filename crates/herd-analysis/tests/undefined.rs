//! Undefined statistics are rows, never errors (issue 42, item 2): a table without variation analyses,
//! and each row whose statistic is undefined has it and its p null, with the reason in `note`.

use herd_analysis::minimal_group::model_claims;
use herd_analysis::{
    ConformityOptions, ConformityTable, ConformityTrial, DesignKey, Dyad, DyadTable, EVERY_VALUE_EQUAL, Labels,
    MinimalGroupOptions, ResultTable, TOO_FEW_UNITS, analyze_conformity, analyze_minimal_group,
};

fn trial(family: &str, level: &str, n: u32, seed: i64, p_wrong: f64) -> ConformityTrial {
    ConformityTrial {
        model: "m".into(),
        task: "lines".into(),
        family: family.into(),
        level: level.into(),
        n,
        seed,
        paraphrase: Some(format!("p{seed}")),
        p_wrong_full: p_wrong,
        p_wrong_ab: Some(p_wrong),
        difficulty_level: None,
        difficulty_index: None,
        image_id: None,
        correct_label: None,
        logit_a: None,
        logit_b: None,
    }
}

/// Every row of `table` with `note` = `reason` has null `statistics`; returns how many there are.
fn noted(table: &ResultTable, reason: &str, statistics: &[&str]) -> usize {
    let rows: Vec<usize> = (0..table.n_rows()).filter(|&r| table.text("note", r) == Some(reason)).collect();
    for &r in &rows {
        for s in statistics {
            assert_eq!(table.number(s, r), None, "{} row {r}: {s}", table.name);
        }
    }
    rows.len()
}

#[test]
fn a_conformity_table_without_variation_gives_rows_that_say_why() {
    // Every level and N alike (a flat agent): the contrasts' differences are all zero.
    let mut rows = Vec::new();
    for (family, levels) in [("ethnicity", ["same", "different"]), ("normative", ["public", "private"])] {
        for level in levels {
            for n in [0, 5] {
                for seed in 0..6 {
                    rows.push(trial(family, level, n, seed, 0.25));
                }
            }
        }
    }
    // One unit only: too few for a test.
    for level in ["near", "far"] {
        for n in [0, 5] {
            rows.push(trial("spatial", level, n, 0, 0.25 + f64::from(n) * 0.01 * f64::from(u8::from(level == "near"))));
        }
    }
    let table = ConformityTable { origin: "flat".into(), rows };
    let tables = analyze_conformity(&table, &ConformityOptions::default()).expect("undefined is a row, not an error");
    let deltas = &tables.deltas;
    let statistics = ["t", "df", "t_p", "z", "z_p"];
    // Two families × two measures, every difference zero.
    assert_eq!(noted(deltas, EVERY_VALUE_EQUAL, &statistics), 4);
    assert_eq!(noted(deltas, TOO_FEW_UNITS, &[&statistics[..], &["se"]].concat()), 2);
    for r in 0..deltas.n_rows() {
        assert!(deltas.number("delta", r).is_some(), "the mean difference is defined");
    }
}

#[test]
fn uniform_allocations_give_seed_tests_and_claims_rows_that_say_why() {
    // Every decider splits the pool evenly: favouritism is zero in every society.
    let mut rows = Vec::new();
    for labels in [Labels::Visible, Labels::Hidden] {
        for seed in 0..6_i64 {
            for decider in 0..4_i64 {
                let minority = |agent: i64| agent < 2;
                for target in (0..4).filter(|&t| t != decider) {
                    let cell = (DesignKey::default(), labels, 2);
                    rows.push(Dyad::from_membership(cell, seed, (decider, target), minority, 100.0 / 3.0));
                }
            }
        }
    }
    let table = DyadTable::new("uniform", rows).unwrap();
    let tables = analyze_minimal_group(&table, &MinimalGroupOptions::default()).expect("an exact fit is a result");
    let seed_tests = &tables.seed_tests;
    let favouritism: Vec<usize> =
        (0..seed_tests.n_rows()).filter(|&r| seed_tests.text("measure", r) == Some("favouritism")).collect();
    assert!(!favouritism.is_empty());
    for &r in &favouritism {
        assert_eq!(seed_tests.text("note", r), Some(EVERY_VALUE_EQUAL), "seed_tests row {r}");
    }
    assert!(
        noted(seed_tests, EVERY_VALUE_EQUAL, &["wilcoxon_statistic", "wilcoxon_p", "rank_biserial", "q_all_cells"])
            >= favouritism.len()
    );
    // The tables with tests carry the reason column.
    for t in [&tables.seed_tests, &tables.robustness] {
        assert!(t.column("note").is_some(), "{}: no note column", t.name);
    }
    let claims = model_claims(&table, |_| true).unwrap();
    let row = (0..claims.n_rows())
        .find(|&r| claims.text("quantity", r) == Some("favouritism") && claims.text("labels", r) == Some("visible"))
        .unwrap();
    assert_eq!(claims.text("note", row), Some(EVERY_VALUE_EQUAL));
    assert_eq!(claims.number("wilcoxon_p", row), None);
    assert_eq!(claims.number("mean", row), Some(0.0));
}
