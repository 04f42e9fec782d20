//! The conformity paper's population. Its claims are about images a model solves alone: only images
//! with p_correct(0) = 1 enter a model's pool (its code: ≥ 0.95, 0.8 / 0.75 for its weakest models).
//! A model at or near chance at N = 0 (herd's quick model puts 0.58 on A whether A or B is correct)
//! is not that population: a rise of p_wrong with N there is crowd-following from chance, a
//! different estimand. Such a model's rows get their own verdict, with its baseline accuracy per
//! task, and keep the crowd-following reading beside it as herd's own description.

use std::collections::BTreeMap;

use super::evidence::Row;
use super::{Outcome, Verdict};
use crate::figure::num;
use crate::results::Results;

/// Baseline accuracy below which a model × task is outside the paper's population: the lowest
/// filter threshold the paper's code used (0.75, for its weakest models).
pub(crate) const POPULATION_MIN: f64 = 0.75;

/// Per model and task: the mean two-way P(correct) = P(correct) / (P(A) + P(B)) over the group-size
/// family's N = 0 trials, the plain baseline prompt on the model's pool (one minus `p_wrong_ab`; one
/// minus `p_wrong_full` where the trials lack the two-way measure), and the number of those trials.
/// Empty for a run without the group-size family.
pub(crate) fn baseline_accuracy(results: &Results) -> BTreeMap<String, BTreeMap<String, (f64, usize)>> {
    let mut sums: BTreeMap<String, BTreeMap<String, (f64, usize)>> = BTreeMap::new();
    let Some(c) = results.conformity.as_ref() else { return sums };
    for t in c.trials.rows.iter().filter(|t| t.n == 0 && t.family == "group_size") {
        let Some(wrong) = t.p_wrong_ab.or(Some(t.p_wrong_full)).filter(|p| p.is_finite()) else { continue };
        let e = sums.entry(t.model.clone()).or_default().entry(t.task.clone()).or_default();
        e.0 += 1.0 - wrong;
        e.1 += 1;
    }
    for tasks in sums.values_mut() {
        for (sum, n) in tasks.values_mut() {
            *sum /= *n as f64;
        }
    }
    sums
}

/// The share of candidate images that passed the baseline filter, per model and task, where the
/// run kept its baseline table (the quality table's `baseline_accepted_share`).
fn accepted_share(results: &Results, model: &str, task: &str) -> Option<f64> {
    let q = &results.conformity.as_ref()?.quality;
    (0..q.n_rows())
        .find(|&r| q.text("model", r) == Some(model) && q.text("task", r) == Some(task))
        .and_then(|r| q.number("baseline_accepted_share", r))
}

/// Gives every row on a model × task below [`POPULATION_MIN`] the verdict "not the paper's
/// population" (its own verdict kept in the reason as the crowd-following reading), and says in the
/// summary what the population is. Rows pooled over models (labels that do not start with a model)
/// are left as they are.
pub(crate) fn mark(outcome: &mut Outcome, results: &Results) {
    let accuracy = baseline_accuracy(results);
    let mut outside: Vec<String> = Vec::new();
    for row in &mut outcome.rows {
        let mut parts = row.label.split(" · ");
        let (Some(model), task) = (parts.next(), parts.next()) else { continue };
        let Some(tasks) = accuracy.get(model) else { continue };
        let low: Vec<String> = tasks
            .iter()
            .filter(|(t, _)| task.is_none_or(|task| task == t.as_str()))
            .filter(|(_, (a, _))| *a < POPULATION_MIN)
            .map(|(t, (a, n))| {
                let filter = accepted_share(results, model, t)
                    .map_or(String::new(), |s| format!(", {:.0}% of candidate images passed the filter", 100.0 * s));
                format!("{t} {} over {n} trials at N = 0{filter}", num(*a))
            })
            .collect();
        if low.is_empty() {
            continue;
        }
        let description = format!("baseline accuracy {}", low.join("; "));
        let listed = format!("{model}: {description}");
        if !outside.contains(&listed) {
            outside.push(listed);
        }
        mark_row(row, &description);
    }
    if !outside.is_empty() {
        let note = format!(
            "Population: the paper's claim is on images a model solves alone (p_correct(0) = 1; its code ≥ 0.95, \
             0.75 for its weakest models); below {POPULATION_MIN} at N = 0 a model follows a crowd from chance. {}",
            outside.join("; ")
        );
        outcome.summary = if outcome.summary.is_empty() { note } else { format!("{note}. {}", outcome.summary) };
    }
}

fn mark_row(row: &mut Row, description: &str) {
    row.reason = format!(
        "{description} (< {POPULATION_MIN}): not the paper's population; as crowd-following from that baseline \
         (herd's descriptive reading) the row {}: {}",
        row.verdict.text(),
        row.reason
    );
    row.verdict = Verdict::NotPaperPopulation;
}
