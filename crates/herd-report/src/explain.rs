//! What opens the scorecard: a summary line (per study, how many claims got each verdict) and, per
//! study, one sentence for each kind of unusual verdict (not the paper's population, inconclusive, does
//! not replicate) saying why and what to run next. The why comes from herd-analysis (the population
//! gates' numbers, a verdict's undefined-statistic note); the next steps name models of herd's registry
//! and cite only what herd's documentation measured (docs/models.md, README's table of times).

use herd_analysis::claims::{HeadlineComparison, Verdict, low_baselines, models_outside};
use herd_analysis::results::Results;

use crate::scorecard::StudyScorecard;

/// The conformity paper's vision-language models in herd's registry, smallest first (docs/models.md).
const VISION_MODELS: [&str; 3] = ["qwen2.5-vl-3b", "qwen2.5-vl-7b", "qwen2.5-vl-32b"];

/// What docs/models.md measured for a vision model's memory, where it did.
fn vision_memory(model: &str) -> &'static str {
    match model {
        "qwen2.5-vl-3b" => "about 16 GB of memory in f32 on a CPU, docs/models.md",
        _ => "bf16 on a GPU, docs/models.md",
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `1 claim` / `3 claims`.
fn claims(n: usize) -> String {
    if n == 1 { "1 claim".to_owned() } else { format!("{n} claims") }
}

/// The claims of `study` the run tested with `verdict`.
fn with_verdict<'a>(
    comparisons: &'a [HeadlineComparison],
    study: &'a str,
    verdict: Verdict,
) -> impl Iterator<Item = &'a HeadlineComparison> + 'a {
    comparisons.iter().filter(move |c| c.headline.study == study && c.verdict == verdict && c.number.is_some())
}

/// The next step for conformity claims on models at chance: the smallest of the paper's vision models
/// the run did not already use.
fn conformity_population(results: &Results, n: usize) -> Option<String> {
    let low = low_baselines(results);
    if low.is_empty() {
        return None;
    }
    let described: Vec<String> = low
        .iter()
        .map(|l| {
            format!(
                "{} (two-way accuracy {:.2} over {} trials on {})",
                l.model,
                l.accuracy,
                l.trials,
                and_list(&l.tasks)
            )
        })
        .collect();
    let ran: Vec<&str> =
        results.conformity.iter().flat_map(|c| c.trials.rows.iter().map(|t| t.model.as_str())).collect();
    let next = match VISION_MODELS.iter().find(|m| !ran.contains(m)) {
        Some(model) => format!(
            "run one of the paper's vision-language models, e.g. `herd run --experiment data/experiments/conformity.quick.toml \
             --model {model} --device cuda --out runs/conformity-{model}` ({}; no run of it has been timed yet, README's \
             table)",
            vision_memory(model)
        ),
        None => "the paper's vision models all ran: see their baselines in the quality table".to_owned(),
    };
    let verb = if low.len() == 1 { "is" } else { "are" };
    Some(format!(
        "{} not the paper's population: {} {verb} at or near chance at N = 0 (chance is 0.50; the paper's claims \
         are on images a model solves alone, accuracy ≥ {}); {next}.",
        claims(n),
        and_list(&described),
        herd_analysis::claims::POPULATION_MIN
    ))
}

/// The next step for minimal-group claims on models outside the population: a reasoning model of the paper's.
fn minimal_group_population(results: &Results, n: usize) -> Option<String> {
    let outside = models_outside(results);
    if outside.is_empty() {
        return None;
    }
    let described: Vec<String> = outside.iter().map(|(model, why)| format!("{model}: {why}")).collect();
    Some(format!(
        "{} not the paper's population — {}; run one of the paper's reasoning models, e.g. `cargo xtask replicate \
         --profile full --model qwen3-8b --device cuda` on a GPU box (docs/replicating.md; no run of it has been \
         timed yet).",
        claims(n),
        described.join("; ")
    ))
}

/// One sentence per kind of unusual verdict in `study`, each naming its claims, why and the next step.
fn study_sentences(study: &str, comparisons: &[HeadlineComparison], results: &Results) -> Vec<String> {
    let mut sentences = Vec::new();
    let population = with_verdict(comparisons, study, Verdict::NotPaperPopulation).count();
    if population > 0 {
        let sentence = match study {
            "conformity" => conformity_population(results, population),
            "minimal_group" => minimal_group_population(results, population),
            _ => None,
        };
        sentences.push(sentence.unwrap_or_else(|| {
            format!("{} not the paper's population: their detail rows say which model and why.", claims(population))
        }));
    }
    // Inconclusive claims in one sentence, counted by why: the badges say which claims they are.
    let inconclusive: Vec<Option<&str>> =
        with_verdict(comparisons, study, Verdict::Inconclusive).map(|c| c.undefined.as_deref()).collect();
    if !inconclusive.is_empty() {
        let count = |keep: &dyn Fn(Option<&str>) -> bool| inconclusive.iter().filter(|n| keep(**n)).count();
        let too_few = count(&|n| n == Some(herd_analysis::TOO_FEW_UNITS));
        let equal = count(&|n| n == Some(herd_analysis::EVERY_VALUE_EQUAL));
        let wide = count(&|n| n.is_none());
        let other = inconclusive.len() - too_few - equal - wide;
        let parts: Vec<String> = [
            (too_few, "with too few units to reach p < 0.05 (more seeds decide them; `herd power` sizes them)"),
            (wide, "with an interval holding both zero and the paper's effect (more seeds narrow it)"),
            (equal, "with every value equal (nothing varies to test: the model answered alike throughout)"),
            (other, "for the reasons in their detail rows"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        sentences.push(format!("{} inconclusive: {}.", claims(inconclusive.len()), and_list(&parts)));
    }
    let against = with_verdict(comparisons, study, Verdict::DoesNotReplicate).count();
    if against > 0 {
        sentences.push(format!(
            "{} not replicated: against the paper, or short of its smallest effect (the detail rows give the test \
             and n).",
            claims(against)
        ));
    }
    sentences
}

/// Fills each study's `explanations` from `comparisons` and `results`.
pub(crate) fn explain(card: &mut [StudyScorecard], comparisons: &[HeadlineComparison], results: &Results) {
    for study in card.iter_mut() {
        study.explanations = study_sentences(&study.study, comparisons, results);
    }
}

/// A verdict's words agreeing with a count of claims: `1 replicates`, `3 replicate`, `2 do not replicate`.
fn agreed(word: &str, n: usize) -> &str {
    match (word, n) {
        (_, 1) => word,
        ("replicates", _) => "replicate",
        ("does not replicate", _) => "do not replicate",
        _ => word,
    }
}

/// `Conformity: 12 claims tested, 9 not the paper's population, 3 inconclusive; 3 not in this run.`
/// One clause per study, verdicts in the order of their first row.
pub fn summary_line(card: &[StudyScorecard]) -> String {
    let parts: Vec<String> = card
        .iter()
        .map(|study| {
            let mut counts: Vec<(&str, usize)> = Vec::new();
            for row in &study.rows {
                match counts.iter_mut().find(|(word, _)| *word == row.verdict_word) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((row.verdict_word, 1)),
                }
            }
            let tested = if study.rows.is_empty() {
                "no claim tested".to_owned()
            } else {
                let verdicts: Vec<String> =
                    counts.iter().map(|(word, n)| format!("{n} {}", agreed(word, *n))).collect();
                format!("{} tested, {}", claims(study.rows.len()), verdicts.join(", "))
            };
            let untested = match study.not_in_run.len() {
                0 => String::new(),
                n => format!("; {n} not in this run"),
            };
            format!("{}: {tested}{untested}", study.title)
        })
        .collect();
    format!("{}.", parts.join(". "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_each_studys_verdicts_in_the_order_they_appear() {
        let row = |word: &'static str| crate::scorecard::ScorecardRow {
            id: String::new(),
            claim: String::new(),
            paper: String::new(),
            this_run: String::new(),
            row: String::new(),
            badge: String::new(),
            verdict: word.to_owned(),
            verdict_word: word,
            samples: None,
            robustness: false,
        };
        let study = |title, rows, not_in_run: &[&str]| StudyScorecard {
            study: String::new(),
            title,
            rows,
            not_in_run: not_in_run.iter().map(|c| c.to_string()).collect(),
            not_in_run_why: String::new(),
            explanations: Vec::new(),
        };
        let card = [
            study(
                "Minimal groups",
                vec![row("replicates"), row("does not replicate"), row("replicates"), row("does not replicate")],
                &["a"],
            ),
            study("Conformity", vec![row("inconclusive")], &[]),
            study("Other", Vec::new(), &["b", "c"]),
        ];
        assert_eq!(
            summary_line(&card),
            "Minimal groups: 4 claims tested, 2 replicate, 2 do not replicate; 1 not in this run. Conformity: 1 claim \
             tested, 1 inconclusive. Other: no claim tested; 2 not in this run."
        );
    }

    #[test]
    fn lists_read_as_english() {
        assert_eq!(and_list(&[]), "");
        assert_eq!(and_list(&["a".into()]), "a");
        assert_eq!(and_list(&["a".into(), "b".into(), "c".into()]), "a, b and c");
        assert_eq!(claims(1), "1 claim");
        assert_eq!(claims(3), "3 claims");
        assert_eq!(agreed("replicates", 1), "replicates");
        assert_eq!(agreed("replicates", 6), "replicate");
        assert_eq!(agreed("does not replicate", 2), "do not replicate");
        assert_eq!(agreed("not the paper's population", 12), "not the paper's population");
    }
}
