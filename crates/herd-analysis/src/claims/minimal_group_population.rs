//! The minimal-group paper's population: reasoning models (8–14B, thinking before they answer) whose
//! allocations parse as written (the paper's parse success exceeds 98.8%). A model with no reasoning
//! mode, or whose allocations were mostly rescaled or filled by the parser, is not that population:
//! its favouritism is read from points herd had to repair, or from a model that does not deliberate.
//! Its rows get the verdict "not the paper's population" with the numbers, and keep their own
//! reading beside it as herd's description.

use std::collections::BTreeMap;

use super::{Outcome, Verdict};
use crate::results::Results;

/// Share of a model's allocations parsed as written below which it is outside the population: most
/// of its points were rescaled or filled.
pub const PARSED_MIN: f64 = 0.5;

/// The models the run's minimal-group rows name, each once.
fn run_models(results: &Results) -> Vec<&str> {
    let Some(m) = results.minimal_group.as_ref() else { return Vec::new() };
    let mut models: Vec<&str> = m.dyads.rows.iter().filter_map(|d| d.design.0[0].as_deref()).collect();
    models.sort_unstable();
    models.dedup();
    models
}

/// Per model of `models` outside the population, why (with the numbers).
fn outside(results: &Results, models: &[&str]) -> BTreeMap<String, String> {
    let mut why: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Some(m) = results.minimal_group.as_ref() else { return BTreeMap::new() };
    // model → (deciders, parsed as written)
    let mut parsed: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let q = &m.quality;
    for r in 0..q.n_rows() {
        let (Some(model), Some(n), Some(share)) =
            (q.text("model", r), q.number("deciders", r), q.number("parsed_share", r))
        else {
            continue;
        };
        let e = parsed.entry(model.to_owned()).or_default();
        e.0 += n;
        e.1 += n * share;
    }
    for (model, (n, ok)) in parsed {
        if n > 0.0 && ok / n < PARSED_MIN {
            why.entry(model).or_default().push(format!(
                "{:.0}% of its {n} allocations parsed as written (the rest rescaled or filled; the paper's over 98.8%)",
                100.0 * ok / n
            ));
        }
    }
    for run in &m.runs {
        let model = &run.manifest.model;
        let modes: Option<Vec<&str>> = model
            .pointer("/run_options/reasoning_modes")
            .and_then(|v| v.as_array())
            .map(|modes| modes.iter().filter_map(|v| v.as_str()).collect());
        let Some(modes) = modes.filter(|modes| !modes.contains(&"on")) else { continue };
        let names = ["/registry/alias", "/backend/model"].map(|p| model.pointer(p).and_then(|v| v.as_str()));
        for name in names.into_iter().flatten() {
            let reasons = why.entry(name.to_owned()).or_default();
            let text = format!(
                "no reasoning mode (it runs only {}; the paper's models reason before they allocate)",
                modes.join(", ")
            );
            if !reasons.contains(&text) {
                reasons.push(text);
            }
        }
    }
    // Only the models the run's rows name (a manifest names the model twice: alias and backend id).
    why.into_iter()
        .filter(|(model, _)| models.contains(&model.as_str()))
        .map(|(model, w)| (model, w.join("; ")))
        .collect()
}

/// Per model of the run's minimal-group rows outside the paper's population, why, with the numbers
/// (the reasons [`mark`] writes into its rows), in name order.
pub fn models_outside(results: &Results) -> BTreeMap<String, String> {
    outside(results, &run_models(results))
}

/// Gives every row of a model outside the population (its label names the model) the verdict "not the
/// paper's population", its own verdict kept in the reason; a row pooled over models is marked when
/// every model of the run is outside. The summary says what the population is.
pub(crate) fn mark(outcome: &mut Outcome, results: &Results) {
    let models = run_models(results);
    let outside = outside(results, &models);
    if outside.is_empty() {
        return;
    }
    let all_outside = models.iter().all(|model| outside.contains_key(*model));
    for row in &mut outcome.rows {
        if row.verdict == Verdict::NotPaperPopulation {
            continue;
        }
        let named = models.iter().find(|model| row.label == **model || row.label.starts_with(&format!("{model} · ")));
        let description = match named {
            Some(model) => match outside.get(*model) {
                Some(why) => why.clone(),
                None => continue,
            },
            None if all_outside => {
                outside.iter().map(|(model, why)| format!("{model}: {why}")).collect::<Vec<_>>().join("; ")
            }
            None => continue,
        };
        row.reason = format!(
            "{description}: not the paper's population; as written the row {}: {}",
            row.verdict.text(),
            row.reason
        );
        row.verdict = Verdict::NotPaperPopulation;
    }
    let listed: Vec<String> = outside.iter().map(|(model, why)| format!("{model}: {why}")).collect();
    let note = format!(
        "Population: the paper's models are reasoning models whose allocations parse as written. {}",
        listed.join("; ")
    );
    outcome.summary = if outcome.summary.is_empty() { note } else { format!("{note}. {}", outcome.summary) };
}
