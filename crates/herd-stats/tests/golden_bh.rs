//! Benjamini–Hochberg against statsmodels `multipletests(method="fdr_bh")`.

mod common;

use common::*;
use herd_stats::benjamini_hochberg;

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
