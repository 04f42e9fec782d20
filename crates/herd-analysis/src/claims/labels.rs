//! The scorecard's claim labels in the run's own terms. Two of the minimal-group paper's claims name
//! its design's minority sizes ("the gap closes at m = 10", "the majority reverses at m = 3" in
//! societies of 20); a variant with other sizes is judged at its own equal and smallest m, so its label
//! says so ("closes at m = 5 of 10"), and the paper's number stays in the paper's column.

use std::collections::BTreeSet;

use crate::minimal_group::society_size;
use crate::results::Results;

use super::PaperHeadline;

/// The paper's society size and the minority sizes its labels name.
const PAPER_SIZE: usize = 20;
const PAPER_EQUAL_M: u32 = 10;
const PAPER_SMALLEST_M: u32 = 3;

/// The run's society size and its minority sizes, where it ran minimal groups.
fn design(results: &Results) -> Option<(usize, BTreeSet<u32>)> {
    let dyads = &results.minimal_group.as_ref()?.dyads;
    let size = society_size(dyads)?;
    Some((size, dyads.rows.iter().map(|d| d.m).collect()))
}

/// `headline`'s scorecard label in the run's terms: unchanged unless the run's sizes differ from the
/// paper's where the label names them.
pub(super) fn in_run_terms(headline: &mut PaperHeadline, results: &Results) {
    let Some((size, ms)) = design(results) else { return };
    let (paper_m, run_m) = match headline.id.as_str() {
        "gap_closes_equal_groups" => (PAPER_EQUAL_M, ms.iter().copied().find(|&m| 2 * m as usize == size)),
        "majority_reversal" => (PAPER_SMALLEST_M, ms.iter().copied().find(|&m| (2 * m as usize) < size)),
        _ => return,
    };
    let Some(run_m) = run_m else { return };
    if (run_m, size) == (paper_m, PAPER_SIZE) {
        return;
    }
    if let Some(claim) = &mut headline.claim {
        *claim = claim.replace(&format!("at m = {paper_m}"), &format!("at m = {run_m} of {size}"));
    }
}
