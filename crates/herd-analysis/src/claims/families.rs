//! Rules over rows and headlines taken together. A null claim's rows are one family: the paper's
//! "no significant difference" is refuted only where Holm's adjusted p is below 0.05, so that one
//! chance rejection among a dozen model × task rows does not read "does not replicate". And a null
//! claim that compares or bounds an effect the paper found elsewhere (tasks alike in their rising
//! curves, the gap closing at equal groups) says nothing where the run lacks that effect: it reads
//! "inconclusive", naming the missing effect, never "replicates".

use herd_stats::holm;

use super::evidence::{Claim, Row, judge};
use super::{HeadlineComparison, Verdict};

/// Judges a headline's null rows (those inside the paper's population, with a p) as one family:
/// each carries Holm's adjusted p, and a row that its raw p alone refuted is judged again on it.
pub(super) fn judge_null_family(rows: &mut [Row]) {
    let family: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            let r = &rows[i];
            matches!(r.claim, Some(Claim::Null { .. }))
                && r.verdict != Verdict::NotPaperPopulation
                && r.evidence.p.is_some_and(|p| (0.0..=1.0).contains(&p))
        })
        .collect();
    if family.len() < 2 {
        return;
    }
    let p: Vec<f64> = family.iter().filter_map(|&i| rows[i].evidence.p).collect();
    let Ok(adjusted) = holm(&p) else { return };
    for (&i, adjusted) in family.iter().zip(adjusted) {
        let row = &mut rows[i];
        row.evidence.family_p = Some((adjusted, family.len()));
        // Holm only raises p: a row its raw p did not refute keeps its verdict and reason.
        if let (Verdict::DoesNotReplicate, Some(claim)) = (row.verdict, row.claim) {
            (row.verdict, row.reason) = judge(&row.evidence, claim);
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::evidence::Evidence;

    fn null_row(label: &str, p: f64, interval: (f64, f64)) -> Row {
        let mut e = Evidence::new("Welch's t", 30, "trial indices");
        e.estimate = Some((interval.0 + interval.1) / 2.0);
        e.p = Some(p);
        e.interval = Some(interval);
        e.interval_name = "95% Welch t-interval";
        Row::judged(label, "", e, Claim::Null { margin: 0.10 })
    }

    #[test]
    fn one_chance_rejection_among_many_null_rows_does_not_refute_the_claim() {
        // Six rows, one at p = 0.02 (its interval inside the margin): alone it refutes; with Holm over
        // six (0.02 · 6 = 0.12) it does not, and the row reads as the equivalence it is.
        let mut rows: Vec<Row> =
            (0..5).map(|i| null_row(&format!("r{i}"), 0.3 + 0.1 * i as f64, (-0.05, 0.05))).collect();
        rows.push(null_row("chance", 0.02, (0.005, 0.06)));
        assert_eq!(rows[5].verdict, Verdict::DoesNotReplicate);
        judge_null_family(&mut rows);
        assert_eq!(rows[5].verdict, Verdict::Replicates, "{}", rows[5].reason);
        assert!(rows[5].reason.contains("p = 0.020, Holm over 6 rows p = 0.120 ≥ 0.05"), "{}", rows[5].reason);
        assert_eq!(rows[5].evidence.family_p, Some((0.12, 6)));
        // A row significant after Holm still refutes it.
        let mut rows: Vec<Row> = (0..5).map(|i| null_row(&format!("r{i}"), 0.5, (-0.05, 0.05))).collect();
        rows.push(null_row("real", 0.001, (0.04, 0.09)));
        judge_null_family(&mut rows);
        assert_eq!(rows[5].verdict, Verdict::DoesNotReplicate);
        assert!(rows[5].reason.contains("Holm over 6 rows p = 0.006"), "{}", rows[5].reason);
        // One row is no family: its raw p decides.
        let mut one = vec![null_row("alone", 0.02, (0.005, 0.06))];
        judge_null_family(&mut one);
        assert_eq!((one[0].verdict, one[0].evidence.family_p), (Verdict::DoesNotReplicate, None));
    }
}
