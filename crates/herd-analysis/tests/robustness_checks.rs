//! The nonce-label and roster-position checks of the `robustness` table on societies built so that
//! the answer is known: a name with a valence of its own shows up in token receipt, and only there;
//! a roster that lists one group first shows up in position balance. (Every number is also compared
//! with pandas/scipy in `golden.rs`.)

use std::path::PathBuf;

use herd_analysis::study::read_dyads;
use herd_analysis::{
    AnalysisError, BootstrapPlan, DesignKey, Dyad, DyadTable, Labels, MinimalGroupOptions, ResultTable,
    analyze_minimal_group,
};

const SIZE: i64 = 8;
const MINORITY: i64 = 3;
const SEEDS: i64 = 10;
const PAIRS: [[&str; 2]; 2] = [["Kalvo", "Tesim"], ["Dravin", "Pulek"]];

struct Design {
    /// Extra weight every decider gives targets named Kalvo, on top of 1 (+ 0.6 for the in-group).
    valence: f64,
    /// Rosters in id order for every seed (unbalanced: the minority, agents 0–2, is listed first), or
    /// reversed in odd seeds (each seed's in − out position difference cancels the previous one's).
    reverse_odd_seeds: bool,
    names: bool,
}

/// Both passes of `SEEDS` societies of 8 (minority: agents 0–2) with visible labels; each society
/// carries one name pair, the minority's name first in the original pass and swapped in the other.
fn table(design: &Design) -> DyadTable {
    let mut rows = Vec::new();
    for seed in 0..SEEDS {
        let pair = PAIRS[(seed % 2) as usize];
        for pass in ["original", "swapped"] {
            let name = |minority: bool| pair[usize::from(minority == (pass == "swapped"))];
            for decider in 0..SIZE {
                let minority = |agent: i64| agent < MINORITY;
                let mut targets: Vec<i64> = (0..SIZE).filter(|&t| t != decider).collect();
                if design.reverse_odd_seeds && seed % 2 == 1 {
                    targets.reverse();
                }
                let weight = |t: i64| {
                    let same = minority(t) == minority(decider);
                    // Fixed per decider and target (the same in every society and pass): exactly fitted
                    // points would leave the GEE no residual to estimate its correlation from.
                    let noise = 0.3 * (1.3 * decider as f64 + 2.1 * t as f64).sin();
                    1.0 + noise
                        + if same { 0.6 } else { 0.0 }
                        + if name(minority(t)) == "Kalvo" { design.valence } else { 0.0 }
                };
                let total: f64 = targets.iter().map(|&t| weight(t)).sum();
                for (position, &target) in targets.iter().enumerate() {
                    let cell = (DesignKey([None, None, None, Some(pass.into())]), Labels::Visible, MINORITY as u32);
                    rows.push(Dyad {
                        target_position: Some(position as f64 + 1.0),
                        target_group: design.names.then(|| name(minority(target)).to_owned()),
                        ..Dyad::from_membership(cell, seed, (decider, target), minority, 100.0 * weight(target) / total)
                    });
                }
            }
        }
    }
    DyadTable::new("synthetic", rows).unwrap()
}

fn robustness(table: &DyadTable) -> ResultTable {
    let options =
        MinimalGroupOptions { bootstrap: BootstrapPlan::Seeded { resamples: 20, seed: 1 }, ..Default::default() };
    analyze_minimal_group(table, &options).unwrap().robustness
}

/// The rows of `check` in the main cell (both passes pooled).
fn main_rows(t: &ResultTable, check: &str) -> Vec<usize> {
    (0..t.n_rows()).filter(|&r| t.text("check", r) == Some(check) && t.text("passes", r) == Some("both")).collect()
}

fn one(t: &ResultTable, check: &str, column: &str) -> f64 {
    let rows = main_rows(t, check);
    assert_eq!(rows.len(), 1, "{check}: {rows:?}");
    t.number(column, rows[0]).unwrap_or(f64::NAN)
}

#[test]
fn a_valenced_name_shows_in_token_receipt_and_neutral_names_do_not() {
    // Without valence, both passes give every name the minority's and the majority's receipts once
    // in each society, and the societies are alike: all names receive the same.
    let neutral = robustness(&table(&Design { valence: 0.0, reverse_odd_seeds: false, names: true }));
    assert_eq!(one(&neutral, "token_receipt_sd", "n"), 4.0);
    assert!(one(&neutral, "token_receipt_sd", "estimate").abs() < 1e-9);
    let receipts = main_rows(&neutral, "token_receipt");
    let names: Vec<&str> = receipts.iter().map(|&r| neutral.text("target_group", r).unwrap()).collect();
    assert_eq!(names, ["Dravin", "Kalvo", "Pulek", "Tesim"]);
    // Each name's dyads: in the 5 societies carrying its pair, the 3 minority targets' 7 receipts in
    // one pass and the 5 majority targets' in the other.
    for &r in &receipts {
        assert_eq!(neutral.number("n", r), Some(5.0 * (3.0 * 7.0 + 5.0 * 7.0)));
    }
    // Token receipt is the check of visible labels pooled over both passes: no per-pass rows.
    assert!(
        (0..neutral.n_rows())
            .all(|r| neutral.text("check", r) != Some("token_receipt") || neutral.text("passes", r) == Some("both"))
    );

    let valenced = robustness(&table(&Design { valence: 0.5, reverse_odd_seeds: false, names: true }));
    let sd = one(&valenced, "token_receipt_sd", "estimate");
    assert!(sd > 0.3, "a valenced name raises the SD across names: {sd}");
    let receipts = main_rows(&valenced, "token_receipt");
    let top = receipts
        .iter()
        .max_by(|&&a, &&b| valenced.number("estimate", a).unwrap().total_cmp(&valenced.number("estimate", b).unwrap()))
        .unwrap();
    assert_eq!(valenced.text("target_group", *top), Some("Kalvo"));
}

#[test]
fn a_roster_listing_one_group_first_shows_in_position_balance() {
    let ordered = robustness(&table(&Design { valence: 0.0, reverse_odd_seeds: false, names: false }));
    let (inside, outside) =
        (one(&ordered, "position_in_group", "estimate"), one(&ordered, "position_out_group", "estimate"));
    // Every seed has the same rosters, so the seed-level difference is the pooled one.
    let difference = one(&ordered, "position_balance", "estimate");
    assert!(
        (difference - (inside - outside)).abs() < 1e-9 && difference.abs() > 0.1,
        "{inside} − {outside} vs {difference}"
    );
    assert_eq!(one(&ordered, "position_balance", "n"), SEEDS as f64);
    assert!(one(&ordered, "position_balance", "p") < 0.01);
    // In- and out-group dyads of one society: 3·2 + 5·4 in-group, 2·3·5 out-group, over both passes.
    assert_eq!(one(&ordered, "position_in_group", "n"), (SEEDS * 2 * (3 * 2 + 5 * 4)) as f64);
    assert_eq!(one(&ordered, "position_out_group", "n"), (SEEDS * 2 * (2 * 3 * 5)) as f64);
    // No names, no token receipt; everything else is still there.
    assert!(main_rows(&ordered, "token_receipt").is_empty() && main_rows(&ordered, "token_receipt_sd").is_empty());
    assert!(!main_rows(&ordered, "prevalence").is_empty());

    let balanced = robustness(&table(&Design { valence: 0.0, reverse_odd_seeds: true, names: false }));
    let (inside, outside) =
        (one(&balanced, "position_in_group", "estimate"), one(&balanced, "position_out_group", "estimate"));
    assert!((inside - outside).abs() < 1e-9, "{inside} vs {outside}");
    assert!(one(&balanced, "position_balance", "estimate").abs() < 1e-9);
    assert!(one(&balanced, "position_balance", "p") > 0.5);
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("herd-analysis-robustness");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// One society of 4 (minority: agents 0 and 1), even split, with a `target_group` cell per row.
fn csv(group: impl Fn(usize, i64) -> String) -> String {
    let mut s =
        String::from("labels,m,seed,decider,target,minority_decider,minority_target,same_group,points,target_group\n");
    let mut row = 0;
    for d in 0..4_i64 {
        for t in (0..4).filter(|&t| t != d) {
            let (md, mt) = (i64::from(d < 2), i64::from(t < 2));
            s.push_str(&format!(
                "visible,2,1,{d},{t},{md},{mt},{},33.333333333,{}\n",
                i64::from(md == mt),
                group(row, mt)
            ));
            row += 1;
        }
    }
    s
}

#[test]
fn target_group_is_optional_but_must_be_complete() {
    let name = |mt: i64| if mt == 1 { "Kalvo".to_owned() } else { "Tesim".to_owned() };
    let full = read_dyads(&write("names.csv", &csv(|_, mt| name(mt)))).unwrap();
    assert!(full.has_target_group());
    // An empty column is a table without names.
    let empty = read_dyads(&write("empty_names.csv", &csv(|_, _| String::new()))).unwrap();
    assert!(!empty.has_target_group());

    let partial = write("partial_names.csv", &csv(|row, mt| if row == 4 { String::new() } else { name(mt) }));
    let e = read_dyads(&partial).unwrap_err();
    let message = e.to_string();
    assert!(
        matches!(e, AnalysisError::InvalidValue { ref column, row: 5, .. } if column == "target_group"),
        "{message}"
    );
    assert!(message.contains("partial_names.csv") && message.contains("fix:"), "{message}");

    let mut rows = table(&Design { valence: 0.0, reverse_odd_seeds: false, names: true }).rows;
    rows[7].target_group = None;
    let e = DyadTable::new("mixed", rows).unwrap_err();
    assert!(matches!(e, AnalysisError::InvalidValue { ref column, row: 8, .. } if column == "target_group"), "{e}");
}
