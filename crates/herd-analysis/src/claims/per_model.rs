//! Each claim's verdict per model, for the report's claims × models matrix when several models ran: a
//! model's rows (a conformity row resting on that model's trials alone, a minimal-group row whose label
//! names it) combined by the claim's own rule. Rows pooled over models belong to no model and enter only
//! the claim's overall verdict.

use super::evidence::{Combine, Row, combine};
use super::{HeadlineComparison, ModelVerdict, Verdict};
use crate::results::Results;

/// The models of the run's rows, in name order.
pub(super) fn run_models(results: &Results) -> Vec<String> {
    let conformity = results.conformity.iter().flat_map(|c| c.trials.rows.iter().map(|t| t.model.clone()));
    let minimal_group =
        results.minimal_group.iter().flat_map(|m| m.dyads.rows.iter().filter_map(|d| d.design.0[0].clone()));
    let mut models: Vec<String> = conformity.chain(minimal_group).collect();
    models.sort_unstable();
    models.dedup();
    models
}

/// The one model of `models` that `row` is about, if any.
fn row_model<'a>(row: &Row, models: &'a [String]) -> Option<&'a str> {
    if let Some((first, _)) = row.members.first() {
        return row
            .members
            .iter()
            .all(|(m, _)| m == first)
            .then(|| models.iter().find(|m| *m == first))
            .flatten()
            .map(String::as_str);
    }
    models.iter().find(|m| row.label == **m || row.label.starts_with(&format!("{m} · "))).map(String::as_str)
}

/// Per model of `models` with rows of its own, the verdict of those rows under `how`.
pub(super) fn per_model(rows: &[Row], how: Combine, models: &[String]) -> Vec<ModelVerdict> {
    models
        .iter()
        .filter_map(|model| {
            let own: Vec<Row> = rows.iter().filter(|r| row_model(r, models) == Some(model.as_str())).cloned().collect();
            (!own.is_empty()).then(|| ModelVerdict { model: model.clone(), verdict: combine(&own, how).0 })
        })
        .collect()
}

/// A null claim that presupposes another claim reads "inconclusive" for a model where the other claim
/// does not replicate, as its overall verdict does for the run (`families::presuppose`).
pub(super) fn presuppose(comparisons: &mut [HeadlineComparison], id: &str, needs: &str) {
    let needed: Vec<ModelVerdict> =
        comparisons.iter().find(|c| c.headline.id == needs).map(|c| c.per_model.clone()).unwrap_or_default();
    let Some(claim) = comparisons.iter_mut().find(|c| c.headline.id == id) else { return };
    for cell in claim.per_model.iter_mut().filter(|cell| cell.verdict == Verdict::Replicates) {
        let shown = needed.iter().any(|n| n.model == cell.model && n.verdict == Verdict::Replicates);
        if !shown {
            cell.verdict = Verdict::Inconclusive;
        }
    }
}
