//! The conformity paper's population. Its claims are about images a model solves alone: only images
//! with p_correct(0) = 1 enter a model's pool (its code: ≥ 0.95, 0.8 / 0.75 for its weakest models).
//! A model at or near chance at N = 0 (herd's quick model puts 0.58 on A whether A or B is correct)
//! is not that population: a rise of p_wrong with N there is crowd-following from chance, a
//! different estimand. Such a model's rows get their own verdict, with its baseline accuracy per
//! task, and keep the crowd-following reading beside it as herd's own description.

use std::collections::BTreeMap;

use super::evidence::Row;
use super::{Outcome, Verdict};
use crate::format::num;
use crate::results::Results;

/// Baseline accuracy below which a model × task is outside the paper's population: the lowest
/// filter threshold the paper's code used (0.75, for its weakest models).
pub const POPULATION_MIN: f64 = 0.75;

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

/// A model whose baseline is below [`POPULATION_MIN`] on some tasks: outside the conformity paper's
/// population there, as the report's scorecard explains it.
#[derive(Debug, Clone, PartialEq)]
pub struct LowBaseline {
    pub model: String,
    /// The tasks below [`POPULATION_MIN`], in name order.
    pub tasks: Vec<String>,
    /// The mean two-way P(correct) over those tasks' N = 0 group-size trials (each trial weighs alike).
    pub accuracy: f64,
    /// How many N = 0 trials the mean is over.
    pub trials: usize,
}

/// Every model of the run with a task whose baseline accuracy (the mean [`mark`] gates rows on) is
/// below [`POPULATION_MIN`], in name order; empty without the group-size family.
pub fn low_baselines(results: &Results) -> Vec<LowBaseline> {
    baseline_accuracy(results)
        .into_iter()
        .filter_map(|(model, tasks)| {
            let low: Vec<(String, (f64, usize))> =
                tasks.into_iter().filter(|(_, (accuracy, _))| *accuracy < POPULATION_MIN).collect();
            let trials: usize = low.iter().map(|(_, (_, n))| n).sum();
            (trials > 0).then(|| LowBaseline {
                model,
                accuracy: low.iter().map(|(_, (a, n))| a * *n as f64).sum::<f64>() / trials as f64,
                tasks: low.into_iter().map(|(task, _)| task).collect(),
                trials,
            })
        })
        .collect()
}

/// The share of candidate images that passed the baseline filter, per model and task, where the
/// run kept its baseline table (the quality table's `baseline_accepted_share`).
fn accepted_share(results: &Results, model: &str, task: &str) -> Option<f64> {
    let q = &results.conformity.as_ref()?.quality;
    (0..q.n_rows())
        .find(|&r| q.text("model", r) == Some(model) && q.text("task", r) == Some(task))
        .and_then(|r| q.number("baseline_accepted_share", r))
}

/// The description of a model × task's baseline where it is below [`POPULATION_MIN`] (`lines 0.493
/// over 8 trials at N = 0, …`); empty where it is not, or where the run did not measure it (no
/// group-size family): nothing says it is outside.
fn low_tasks(
    results: &Results,
    accuracy: &BTreeMap<String, BTreeMap<String, (f64, usize)>>,
    model: &str,
    task: &str,
) -> Vec<String> {
    let Some(tasks) = accuracy.get(model) else { return Vec::new() };
    tasks
        .iter()
        .filter(|(t, _)| task == t.as_str())
        .filter(|(_, (a, _))| *a < POPULATION_MIN)
        .map(|(t, (a, n))| {
            let filter = accepted_share(results, model, t)
                .map_or(String::new(), |s| format!(", {:.0}% of candidate images passed the filter", 100.0 * s));
            format!("{t} {} over {n} trials at N = 0{filter}", num(*a))
        })
        .collect()
}

/// The summary line that says what the paper's population is and who is outside it.
fn population_note(outside: &[String]) -> String {
    format!(
        "Population: the paper's claim is on images a model solves alone (p_correct(0) = 1; its code ≥ 0.95, \
         0.75 for its weakest models); below {POPULATION_MIN} at N = 0 a model follows a crowd from chance. {}",
        outside.join("; ")
    )
}

fn prepend(summary: &mut String, note: String) {
    *summary = if summary.is_empty() { note } else { format!("{note}. {summary}") };
}

/// Gives every row resting on a model × task below [`POPULATION_MIN`] (its `members`) the verdict
/// "not the paper's population" (its own verdict kept in the reason as the crowd-following reading),
/// and says in the summary what the population is. A row pooled over models (a contrast, a
/// regression) has for members the pairs it pooled: those inside when [`pooled`] found any, so
/// that only a pool wholly outside is marked.
pub(crate) fn mark(outcome: &mut Outcome, results: &Results) {
    let accuracy = baseline_accuracy(results);
    let mut outside: Vec<String> = Vec::new();
    for row in &mut outcome.rows {
        // model → its members' tasks below the population's baseline, described
        let mut low: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (model, task) in &row.members {
            let tasks = low_tasks(results, &accuracy, model, task);
            if !tasks.is_empty() {
                low.entry(model.as_str()).or_default().extend(tasks);
            }
        }
        if low.is_empty() {
            continue;
        }
        let listed: Vec<String> =
            low.iter().map(|(model, tasks)| format!("{model}: baseline accuracy {}", tasks.join("; "))).collect();
        // A row of one model that its label names says it without the model's name.
        let one_model = row.members.iter().all(|(m, _)| m == &row.members[0].0);
        let description = match low.iter().next() {
            Some((model, tasks)) if one_model && row.label.starts_with(model) => {
                format!("baseline accuracy {}", tasks.join("; "))
            }
            _ => listed.join("; "),
        };
        for entry in listed {
            if !outside.contains(&entry) {
                outside.push(entry);
            }
        }
        mark_row(row, &description);
    }
    if !outside.is_empty() {
        prepend(&mut outcome.summary, population_note(&outside));
    }
}

/// The population of a contrast pooled over (model, task) `pairs`: the pairs inside it, and what to
/// say. Pairs outside are left out of the pool when any pair is inside (the summary names them);
/// when none is, every pair stays, and the rows pooled over them (whose members they are) get the
/// verdict "not the paper's population" from [`mark`], so an at-chance model never decides a pooled
/// claim either.
pub(crate) fn pooled(results: &Results, pairs: Vec<(String, String)>) -> Pooled {
    let accuracy = baseline_accuracy(results);
    let (mut inside, mut outside, mut descriptions) = (Vec::new(), Vec::new(), Vec::new());
    for (model, task) in pairs {
        let low = low_tasks(results, &accuracy, &model, &task);
        if low.is_empty() {
            inside.push((model, task));
        } else {
            descriptions.push(format!("{model}: baseline accuracy {}", low.join("; ")));
            outside.push((model, task));
        }
    }
    if inside.is_empty() {
        Pooled { pairs: outside, note: None }
    } else {
        let note = (!descriptions.is_empty())
            .then(|| format!("{}; left out of the pooled contrast", population_note(&descriptions)));
        Pooled { pairs: inside, note }
    }
}

/// [`pooled`]'s answer.
pub(crate) struct Pooled {
    /// The (model, task) pairs to pool: the rows' members.
    pub pairs: Vec<(String, String)>,
    /// The summary line naming the pairs left out, if any were.
    pub note: Option<String>,
}

impl Pooled {
    /// Says in `outcome`'s summary which pairs were left out, if any were.
    pub(crate) fn mark(self, outcome: &mut Outcome) {
        if let Some(note) = self.note {
            prepend(&mut outcome.summary, note);
        }
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
