//! Benjamini–Hochberg and Holm against statsmodels `multipletests(method="fdr_bh" | "holm")`.

mod common;

use common::*;
use herd_stats::{benjamini_hochberg, holm};

#[test]
fn matches_statsmodels() {
    let fixture = load("bh");
    let all = cases(&fixture, "cases");
    assert_eq!(all.len(), 33);
    for (k, case) in all.iter().enumerate() {
        let q = benjamini_hochberg(&nums(&case["p"])).unwrap();
        let expected = nums(&case["q"]);
        assert_eq!(q.len(), expected.len());
        for (i, (a, e)) in q.iter().zip(&expected).enumerate() {
            assert_p(*a, *e, &format!("case {k} q[{i}]"));
        }
    }
}

#[test]
fn holm_matches_statsmodels() {
    let fixture = load("bh");
    for (k, case) in cases(&fixture, "cases").iter().enumerate() {
        let adjusted = holm(&nums(&case["p"])).unwrap();
        let expected = nums(&case["holm"]);
        assert_eq!(adjusted.len(), expected.len());
        for (i, (a, e)) in adjusted.iter().zip(&expected).enumerate() {
            assert_p(*a, *e, &format!("case {k} holm[{i}]"));
        }
    }
}
