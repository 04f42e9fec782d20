//! The claims × models matrix, shown under the scorecard when a study ran on several models: one row
//! per claim the run tests, one column per model, each cell that model's verdict on the claim (its
//! own rows under the claim's rule, herd-analysis's `per_model`); a model without rows of its own for
//! a claim (a claim pooled over models) has an empty cell.

use serde::Serialize;

use herd_analysis::claims::{HeadlineComparison, Verdict};

use crate::scorecard::verdict_class;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MatrixCell {
    /// The verdict's CSS class; empty where the model has no row of its own.
    pub badge: String,
    pub text: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MatrixRow {
    pub id: String,
    pub claim: String,
    pub cells: Vec<MatrixCell>,
}

/// One study's matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StudyMatrix {
    pub title: &'static str,
    pub models: Vec<String>,
    pub rows: Vec<MatrixRow>,
}

/// The matrix of each study whose tested claims name two models or more, studies in `studies` order
/// (`(id, title)`).
pub(crate) fn matrices(comparisons: &[HeadlineComparison], studies: &[(&str, &'static str)]) -> Vec<StudyMatrix> {
    studies
        .iter()
        .filter_map(|(study, title)| {
            let tested: Vec<&HeadlineComparison> = comparisons
                .iter()
                .filter(|c| c.headline.study == *study && c.verdict != Verdict::NotInRun && c.number.is_some())
                .collect();
            let mut models: Vec<String> =
                tested.iter().flat_map(|c| c.per_model.iter().map(|m| m.model.clone())).collect();
            models.sort_unstable();
            models.dedup();
            if models.len() < 2 {
                return None;
            }
            let rows = tested
                .iter()
                .map(|c| MatrixRow {
                    id: c.headline.id.clone(),
                    claim: c.headline.short_claim().to_owned(),
                    cells: models
                        .iter()
                        .map(|model| match c.per_model.iter().find(|m| &m.model == model) {
                            Some(m) => MatrixCell { badge: verdict_class(m.verdict), text: m.verdict.text() },
                            None => MatrixCell { badge: String::new(), text: "—" },
                        })
                        .collect(),
                })
                .collect();
            Some(StudyMatrix { title, models, rows })
        })
        .collect()
}
