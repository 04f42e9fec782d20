//! Rules over headlines taken together: a null claim that compares or bounds an effect the paper found
//! elsewhere (tasks alike in their rising curves, the gap closing at equal groups) says nothing where
//! the run lacks that effect: it reads "inconclusive", naming the missing effect, never "replicates".

use super::{HeadlineComparison, Verdict};

/// The null claims that presuppose an effect: (claim, the headline carrying the effect, the effect
/// in words).
const PRESUPPOSES: [(&str, &str, &str); 4] = [
    ("tasks_alike", "group_size_rise", "conformity rising with the wrong replies"),
    ("temporal_vs_spatial", "near_far", "a proximity effect (near above far)"),
    ("performance_effect", "difficulty_rho", "conformity rising with the image's difficulty"),
    ("gap_closes_equal_groups", "minority_gap", "a minority gap at unequal group sizes"),
];

/// A null claim whose presupposed effect does not replicate in this run reads "inconclusive"
/// instead of "replicates", saying which effect is missing.
pub(super) fn presuppose(comparisons: &mut [HeadlineComparison]) {
    for (id, needs, effect) in PRESUPPOSES {
        super::per_model::presuppose(comparisons, id, needs);
        let verdict_of = |id: &str| comparisons.iter().find(|c| c.headline.id == id).map(|c| c.verdict);
        let Some(needed) = verdict_of(needs) else { continue };
        if needed == Verdict::Replicates {
            continue;
        }
        let Some(claim) = comparisons.iter_mut().find(|c| c.headline.id == id) else { continue };
        if claim.verdict != Verdict::Replicates {
            continue;
        }
        claim.verdict = Verdict::Inconclusive;
        claim.undefined = Some(format!("presupposes {effect}, missing here"));
        claim.basis = format!(
            "presupposes {effect} (`{needs}`: {}), which this run does not show, so its null says nothing here; \
             its own rows replicate: {}",
            needed.text(),
            claim.basis
        );
    }
}
