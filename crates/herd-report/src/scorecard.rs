//! The scorecard that opens the report: per study, one line per paper claim the run tests (the
//! claim in a few words, the paper's number, this run's number with its interval and n, and the
//! verdict as a badge), and one line for all the claims it cannot test, with why. The detail of
//! every claim (rows, tests, rules) is the headline table below it, one link away.

use serde::Serialize;

use herd_analysis::claims::{HeadlineComparison, Verdict};

/// A claim the run tests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScorecardRow {
    /// The headline id; the detail table's row is `#headline-{id}`.
    pub id: String,
    pub claim: String,
    pub paper: String,
    /// This run's number: estimate, interval and n.
    pub this_run: String,
    /// Which row the number is, and of how many.
    pub row: String,
    /// The verdict's CSS class (`replicates`, `does_not_replicate`, …).
    pub badge: String,
    /// The verdict in words, with the reason where its statistics are undefined (`inconclusive: every
    /// value equal`).
    pub verdict: String,
    /// The verdict alone (`inconclusive`), the badge's text on the page, whose title is `verdict`.
    pub verdict_word: &'static str,
    /// The samples page filtered to the trials the claim rests on ([`samples_link`]); `None` where the
    /// report has no samples page beside it.
    pub samples: Option<String>,
    /// One of the papers' robustness checks, folded under the study's main claims.
    pub robustness: bool,
}

/// The link into the samples page (herd-samples' `samples.html`, whose fragment sets its filters) that
/// shows the trials headline `id` of `study` rests on: its families for a conformity claim, its label
/// and instrument arm for a minimal-group claim; the whole study where a claim spans it.
pub fn samples_link(study: &str, id: &str) -> String {
    let filter = match id {
        "group_size_rise" | "saturation" | "tasks_alike" => "family=group_size",
        "unanimity_dissent" => "family=unanimity",
        "difficulty_rho" | "difficulty_predicts" | "performance_effect" => "family=difficulty",
        "public_private" => "family=normative",
        "source_strength" | "source_order" => "family=source_strength",
        "same_group" | "identity_each" => "family=nationality,ethnicity,minimal_group",
        "neutral_between" => "family=group_size,nationality,ethnicity,minimal_group",
        "near_far" | "temporal_vs_spatial" => "family=spatial,temporal",
        "favouritism_visible"
        | "favouritism_per_pass"
        | "minority_gap"
        | "gap_closes_equal_groups"
        | "majority_proportional"
        | "reasoning_majority_share"
        | "minority_blocks_survive"
        | "roster_position"
        | "swap_pass_bound"
        | "token_receipt_bound" => "labels=visible&instrument=base",
        "hidden_floor" | "hidden_floor_reasoning" => "labels=hidden&instrument=base",
        "hidden_floor_paraphrase" => "labels=hidden&instrument=paraphrase",
        "favouritism_paraphrase" => "labels=visible&instrument=paraphrase",
        _ => "",
    };
    let study = format!("samples.html#study={study}");
    if filter.is_empty() { study } else { format!("{study}&{filter}") }
}

/// One study's part of the scorecard.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyScorecard {
    /// `conformity` or `minimal_group`.
    pub study: String,
    pub title: &'static str,
    pub rows: Vec<ScorecardRow>,
    /// The claims the run cannot test, each in a few words.
    pub not_in_run: Vec<String>,
    /// Why they are not in the run.
    pub not_in_run_why: String,
    /// One sentence per kind of unusual verdict: why, and what to run next (filled by the report from
    /// the results; empty from [`scorecard`] alone).
    pub explanations: Vec<String>,
}

/// The verdict's CSS class: its serde name.
pub fn verdict_class(verdict: Verdict) -> String {
    serde_json::to_value(verdict).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn study_title(study: &str) -> &'static str {
    match study {
        "conformity" => "Conformity",
        "minimal_group" => "Minimal groups",
        _ => "Other",
    }
}

/// The scorecard of `comparisons`: the studies in the order of the headline file, a study the run
/// tests before one it does not test at all (a minimal-group-only run opens with its own claims).
/// `absent_studies` names the studies not in the results at all (`conformity`, `minimal_group`).
pub fn scorecard(comparisons: &[HeadlineComparison], absent_studies: &[&str]) -> Vec<StudyScorecard> {
    let mut studies: Vec<StudyScorecard> = Vec::new();
    for c in comparisons {
        let study = c.headline.study.as_str();
        let index = match studies.iter().position(|s| s.study == study) {
            Some(i) => i,
            None => {
                let why = if absent_studies.contains(&study) {
                    format!("the results hold no {} run", study.replace('_', "-"))
                } else {
                    "the run lacks their family, condition or cells".to_owned()
                };
                studies.push(StudyScorecard {
                    study: study.to_owned(),
                    title: study_title(study),
                    rows: Vec::new(),
                    not_in_run: Vec::new(),
                    not_in_run_why: why,
                    explanations: Vec::new(),
                });
                studies.len() - 1
            }
        };
        let card = &mut studies[index];
        match (&c.number, c.verdict) {
            (Some(number), verdict) if verdict != Verdict::NotInRun => card.rows.push(ScorecardRow {
                id: c.headline.id.clone(),
                claim: c.headline.short_claim().to_owned(),
                paper: c.headline.short_paper_value().to_owned(),
                this_run: number.value_text(),
                row: number.row_text(),
                badge: verdict_class(verdict),
                verdict: c.verdict_text(),
                verdict_word: verdict.text(),
                samples: None,
                robustness: c.headline.robustness,
            }),
            _ => card.not_in_run.push(c.headline.short_claim().to_owned()),
        }
    }
    // Stable: studies the run tests keep their order, then the untested ones.
    studies.sort_by_key(|s| s.rows.is_empty());
    studies
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_analysis::claims::{PaperHeadline, RunNumber};

    fn comparison(id: &str, study: &str, verdict: Verdict) -> HeadlineComparison {
        let headline = PaperHeadline {
            id: id.into(),
            study: study.into(),
            quantity: format!("the long quantity of {id}"),
            paper: format!("the long finding of {id}"),
            replicates_if: String::new(),
            does_not_replicate_if: String::new(),
            effect: None,
            source: String::new(),
            claim: Some(format!("claim {id}")),
            paper_value: Some(format!("paper {id}")),
            robustness: false,
        };
        let number = (verdict != Verdict::NotInRun).then(|| RunNumber {
            label: "model-a".into(),
            value: String::new(),
            estimate: Some(0.5),
            interval: Some((0.25, 0.75)),
            interval_name: "95% t-interval",
            n: 8,
            unit: "seeds",
            rows: 2,
            magnitude: false,
        });
        HeadlineComparison {
            headline,
            this_run: String::new(),
            verdict,
            basis: String::new(),
            number,
            undefined: None,
            per_model: Vec::new(),
        }
    }

    #[test]
    fn claims_the_run_cannot_test_share_one_line_per_study() {
        let all = [
            comparison("a", "conformity", Verdict::NotInRun),
            comparison("b", "conformity", Verdict::Replicates),
            comparison("c", "conformity", Verdict::NotInRun),
            comparison("d", "minimal_group", Verdict::Inconclusive),
        ];
        let card = scorecard(&all, &[]);
        assert_eq!(card.len(), 2);
        assert_eq!(card[0].study, "conformity");
        assert_eq!(card[0].rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(card[0].not_in_run, ["claim a", "claim c"]);
        assert_eq!(card[0].not_in_run_why, "the run lacks their family, condition or cells");
        let row = &card[0].rows[0];
        assert_eq!((row.claim.as_str(), row.paper.as_str()), ("claim b", "paper b"));
        assert_eq!(row.this_run, "+0.500 [0.250, 0.750], 8 seeds");
        assert_eq!(row.row, "model-a (1 of 2 rows)");
        assert!(card[1].not_in_run.is_empty());
    }

    #[test]
    fn a_study_absent_from_the_results_comes_after_the_one_present() {
        let all = [
            comparison("a", "conformity", Verdict::NotInRun),
            comparison("b", "conformity", Verdict::NotInRun),
            comparison("c", "minimal_group", Verdict::Replicates),
        ];
        let card = scorecard(&all, &["conformity"]);
        assert_eq!(card.iter().map(|s| s.study.as_str()).collect::<Vec<_>>(), ["minimal_group", "conformity"]);
        assert!(card[1].rows.is_empty());
        assert_eq!(card[1].not_in_run, ["claim a", "claim b"]);
        assert_eq!(card[1].not_in_run_why, "the results hold no conformity run");
    }

    #[test]
    fn every_paper_claim_links_to_the_samples_of_its_study() {
        let headlines = herd_analysis::claims::paper_headlines().unwrap();
        for h in &headlines {
            let link = samples_link(&h.study, &h.id);
            assert!(link.starts_with(&format!("samples.html#study={}", h.study)), "{}: {link}", h.id);
        }
        assert_eq!(samples_link("conformity", "near_far"), "samples.html#study=conformity&family=spatial,temporal");
        assert_eq!(
            samples_link("minimal_group", "hidden_floor"),
            "samples.html#study=minimal_group&labels=hidden&instrument=base"
        );
    }

    #[test]
    fn each_verdict_has_its_own_badge() {
        let verdicts =
            [Verdict::Replicates, Verdict::DoesNotReplicate, Verdict::Inconclusive, Verdict::NotPaperPopulation];
        let all: Vec<_> =
            verdicts.iter().enumerate().map(|(i, v)| comparison(&i.to_string(), "conformity", *v)).collect();
        let card = scorecard(&all, &[]);
        let badges: Vec<(&str, &str)> = card[0].rows.iter().map(|r| (r.badge.as_str(), r.verdict.as_str())).collect();
        assert_eq!(
            badges,
            [
                ("replicates", "replicates"),
                ("does_not_replicate", "does not replicate"),
                ("inconclusive", "inconclusive"),
                ("not_paper_population", "not the paper's population"),
            ]
        );
        // The page styles every badge class it can write.
        let template = include_str!("../templates/report.html");
        for (badge, _) in badges {
            assert!(template.contains(&format!(".badge.{badge} ")), "no style for badge {badge}");
        }
    }
}
