//! The robustness figure reads out the paper's remaining robustness numbers from the stored fixture
//! (two instruments, both swap passes, group names on every row): the paraphrase counts beside the
//! original instrument's, the largest token-receipt SD and the position balance.

mod common;

use common::{Variant, stored_results};
use herd_analysis::ResultTable;
use herd_analysis::load_results;
use herd_report::minimal_group_figures;

/// Main visible model × m × decider-block cells of `instrument` in the default reasoning mode, and
/// how many have a positive seed-level mean.
fn favouritism_cells(t: &ResultTable, instrument: &str) -> (usize, usize) {
    let rows: Vec<usize> = (0..t.n_rows())
        .filter(|&r| {
            t.text("labels", r) == Some("visible")
                && t.text("measure", r) == Some("favouritism")
                && matches!(t.text("deciders", r), Some("minority" | "majority"))
                && t.text("instrument", r) == Some(instrument)
                && t.text("passes", r) != Some("per_pass")
                && t.number("default_reasoning", r) == Some(1.0)
        })
        .collect();
    (rows.iter().filter(|&&r| t.number("mean", r).unwrap() > 0.0).count(), rows.len())
}

#[test]
fn the_robustness_figure_reads_paraphrase_counts_token_receipt_and_position_balance() {
    let dir = tempfile::tempdir().unwrap();
    let results = load_results(&stored_results(dir.path(), Variant::Planted), &mut |_| {}).unwrap();
    let m = results.minimal_group.as_ref().expect("the fixture has a minimal-group run");
    let figure = minimal_group_figures(&m.dyads, &m.tables)
        .into_iter()
        .filter_map(Result::ok)
        .find(|f| f.name == "favouritism_across_swap_pass_and_paraphrase")
        .expect("the fixture has two instruments and two passes");
    let reading = &figure.reading;

    // One model (thinking on is its default) × m ∈ {3, 5} × two decider blocks; model × m GEE fits.
    let (base_positive, base_cells) = favouritism_cells(&m.tables.seed_tests, "base");
    let (positive, cells) = favouritism_cells(&m.tables.seed_tests, "paraphrase");
    assert_eq!((base_cells, cells), (4, 4));
    let expected = format!(
        "Instrument paraphrase: positive favouritism in {positive} of {cells} visible cells (model × m × decider group; base: {base_positive} of {base_cells}) and a positive GEE same_group coefficient in 2 of 2 model × m cells (base: 2 of 2)."
    );
    assert!(reading.contains(&expected), "{reading}\nshould contain\n{expected}");

    // The largest SD across names over the main visible cells (both passes pooled, fills included).
    let r = &m.tables.robustness;
    let sds: Vec<f64> = (0..r.n_rows())
        .filter(|&i| r.text("check", i) == Some("token_receipt_sd") && r.text("fills", i) == Some("included"))
        .map(|i| {
            assert_eq!((r.text("labels", i), r.text("passes", i)), (Some("visible"), Some("both")));
            assert_eq!(r.number("n", i), Some(4.0), "two name pairs over the societies");
            r.number("estimate", i).unwrap()
        })
        .collect();
    assert_eq!(sds.len(), 2 * 2 * 2, "reasoning × instrument × m");
    let largest = sds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let expected = format!("SD across names at most {largest:.3} points/target over 8 cells");
    assert!(reading.contains(&expected), "{reading}\nshould contain\n{expected}");

    assert!(reading.contains("Presented positions: in- minus out-group mean position within ±"), "{reading}");
}
