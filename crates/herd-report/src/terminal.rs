//! The claims as a terminal shows them at the end of `herd run`, `herd report` and `cargo xtask
//! replicate`: one line per claim the results test (the scorecard's claim, this run's number and the
//! verdict) and one line per study counting how its claims came out, the line a reader keeps.

use herd_analysis::claims::{HeadlineComparison, Verdict};

use crate::scorecard::scorecard;

/// The lines for `comparisons`: every scorecard row (`  Minimal groups · claim: number (row) — verdict`),
/// then one count per study that the results test (`  Minimal groups: 2 of 15 claims replicate, …`; a
/// conformity run says nothing of minimal groups). Empty when no claim is tested.
pub fn claims_lines(comparisons: &[HeadlineComparison]) -> Vec<String> {
    let studies = scorecard(comparisons, &[]);
    let mut lines: Vec<String> = studies
        .iter()
        .flat_map(|study| study.rows.iter().map(move |r| (study.title, r)))
        .map(|(title, r)| format!("  {title} · {}: {} ({}) — {}", r.claim, r.this_run, r.row, r.verdict))
        .collect();
    if lines.is_empty() {
        return lines;
    }
    lines.extend(
        studies
            .iter()
            .filter(|study| !study.rows.is_empty())
            .map(|study| format!("  {}: {}", study.title, verdict_counts(comparisons, &study.study))),
    );
    lines
}

/// `2 of 15 claims replicate, 8 do not, 3 inconclusive, 2 not the paper's population (1 not in this
/// run)`: how a study's claims came out.
fn verdict_counts(comparisons: &[HeadlineComparison], study: &str) -> String {
    let of: Vec<Verdict> = comparisons.iter().filter(|c| c.headline.study == study).map(|c| c.verdict).collect();
    let count = |v: Verdict| of.iter().filter(|&&x| x == v).count();
    let tested = of.len() - count(Verdict::NotInRun);
    let mut parts = vec![format!("{} of {tested} claims replicate", count(Verdict::Replicates))];
    for (verdict, words) in [
        (Verdict::DoesNotReplicate, "do not"),
        (Verdict::Inconclusive, "inconclusive"),
        (Verdict::NotPaperPopulation, "not the paper's population"),
    ] {
        if count(verdict) > 0 {
            parts.push(format!("{} {words}", count(verdict)));
        }
    }
    let absent = count(Verdict::NotInRun);
    let absent = if absent > 0 { format!(" ({absent} not in this run)") } else { String::new() };
    format!("{}{absent}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_analysis::claims::RunNumber;

    #[test]
    fn each_study_ends_with_how_its_claims_came_out() {
        let verdicts = [Verdict::Replicates, Verdict::DoesNotReplicate, Verdict::NotInRun, Verdict::NotPaperPopulation];
        let headlines = herd_analysis::paper_headlines().unwrap();
        // A minimal-group run: four of its claims, and a conformity claim it does not test.
        let conformity = headlines.iter().find(|h| h.study == "conformity").unwrap().clone();
        let comparisons: Vec<HeadlineComparison> = headlines
            .into_iter()
            .filter(|h| h.study == "minimal_group")
            .take(4)
            .zip(verdicts)
            .chain([(conformity, Verdict::NotInRun)])
            .map(|(headline, verdict)| HeadlineComparison {
                headline,
                this_run: String::new(),
                verdict,
                basis: String::new(),
                number: (verdict != Verdict::NotInRun).then(|| RunNumber {
                    label: "model-a".into(),
                    value: String::new(),
                    estimate: Some(1.0),
                    interval: Some((0.5, 1.5)),
                    interval_name: "95% t-interval",
                    n: 8,
                    unit: "seeds",
                    rows: 1,
                    magnitude: false,
                }),
                undefined: None,
                per_model: Vec::new(),
            })
            .collect();
        assert_eq!(
            verdict_counts(&comparisons, "minimal_group"),
            "1 of 3 claims replicate, 1 do not, 1 not the paper's population (1 not in this run)"
        );
        assert_eq!(verdict_counts(&comparisons, "conformity"), "0 of 0 claims replicate (1 not in this run)");
        let lines = claims_lines(&comparisons);
        // Three claims tested, one line each, then the study's count; no line for the untested study.
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(
            lines[..3]
                .iter()
                .all(|l| l.starts_with("  Minimal groups · ") && l.contains(": +1.000 [0.500, 1.500], 8 seeds (")),
            "{lines:#?}"
        );
        assert_eq!(
            lines[3],
            "  Minimal groups: 1 of 3 claims replicate, 1 do not, 1 not the paper's population (1 not in this run)"
        );
        assert!(claims_lines(&[]).is_empty());
    }
}
