//! The calibration tally: verdict counts per claim over replications, and the Wilson intervals of
//! their rates against statsmodels (`golden/calibration.py`).

use herd_analysis::calibration::{Calibration, VERDICTS, wilson_interval};
use herd_analysis::{HeadlineComparison, Verdict, paper_headlines};

#[test]
fn wilson_intervals_match_statsmodels() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/calibration.json");
    let golden: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = golden["wilson"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let (k, n) = (case["k"].as_u64().unwrap() as u32, case["n"].as_u64().unwrap() as u32);
        let (low, high) = wilson_interval(k, n);
        for (ours, theirs) in [(low, case["low"].as_f64().unwrap()), (high, case["high"].as_f64().unwrap())] {
            assert!((ours - theirs).abs() <= 1e-6 * theirs.abs().max(1e-6), "k = {k}, n = {n}: {ours} vs {theirs}");
        }
    }
}

fn comparison(id: &str, verdict: Verdict) -> HeadlineComparison {
    let headline = paper_headlines().unwrap().into_iter().find(|h| h.id == id).unwrap();
    HeadlineComparison {
        headline,
        this_run: String::new(),
        verdict,
        basis: String::new(),
        number: None,
        undefined: None,
        per_model: Vec::new(),
    }
}

#[test]
fn verdicts_are_counted_per_claim_and_merged_across_workers() {
    let mut first = Calibration::default();
    first.add(&[comparison("hidden_floor", Verdict::Replicates), comparison("group_size_rise", Verdict::Inconclusive)]);
    first.add(&[
        comparison("hidden_floor", Verdict::DoesNotReplicate),
        comparison("group_size_rise", Verdict::Replicates),
    ]);
    let mut second = Calibration::default();
    second.add(&[comparison("group_size_rise", Verdict::Replicates), comparison("hidden_floor", Verdict::Replicates)]);
    first.merge(second);
    let ordered = first.ordered_as(&["group_size_rise", "hidden_floor"]);
    let ids: Vec<&str> = ordered.claims.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["group_size_rise", "hidden_floor"]);
    let (_, rise) = &ordered.claims[0];
    assert_eq!((rise.replications(), rise.count(Verdict::Replicates), rise.count(Verdict::Inconclusive)), (3, 2, 1));
    assert_eq!(rise.study, "conformity");
    let (_, floor) = &ordered.claims[1];
    assert_eq!((floor.count(Verdict::Replicates), floor.count(Verdict::DoesNotReplicate)), (2, 1));
    let (rate, (low, high)) = floor.rate(Verdict::Replicates);
    assert!((rate - 2.0 / 3.0).abs() < 1e-12 && low < rate && rate < high);
    assert_eq!(VERDICTS.len(), 5, "every verdict has a column");
}
