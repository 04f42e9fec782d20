//! Every way an analysis can refuse its input. Messages name the table (its file), the column or
//! cell, and the fix.

use herd_stats::StatsError;
use thiserror::Error;

/// An analysis or IO failure; `origin` is the file the table came from (or a caller-given name).
#[derive(Debug, Error)]
pub enum AnalysisError {
    #[error("{origin}: missing column `{column}`\n  fix: {fix}")]
    MissingColumn { origin: String, column: String, fix: String },
    #[error("{origin}: column `{column}` has type {found}, expected {expected}\n  fix: {fix}")]
    WrongType { origin: String, column: String, expected: String, found: String, fix: String },
    #[error("{origin}: column `{column}`, row {row}: {problem}\n  fix: {fix}")]
    InvalidValue {
        origin: String,
        column: String,
        /// 1-based data row (the header is not counted).
        row: usize,
        problem: String,
        fix: String,
    },
    #[error(
        "{origin}: decider {decider} of {cell}, seed {seed} gives {sum} points in all, but the pool is {pool}\n  \
         fix: points must be the renormalised allocation (they sum to the pool for every decider); \
         check that no target row is missing or duplicated"
    )]
    PointsDoNotSumToPool { origin: String, cell: String, seed: i64, decider: i64, sum: f64, pool: f64 },
    #[error("{origin}: {cell} has no {what}\n  fix: {fix}")]
    EmptyCell { origin: String, cell: String, what: String, fix: String },
    #[error("{origin}: {context}: {source}")]
    Statistics {
        origin: String,
        context: String,
        #[source]
        source: StatsError,
    },
    #[error("{file}: {problem}")]
    Io { file: String, problem: String },
}

/// Attaches the table and what was being computed to a statistics error.
pub(crate) fn stats_context(
    origin: &str,
    context: impl FnOnce() -> String,
) -> impl FnOnce(StatsError) -> AnalysisError {
    let origin = origin.to_owned();
    move |source| AnalysisError::Statistics { origin, context: context(), source }
}
