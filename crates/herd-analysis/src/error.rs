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
    /// The statistics error is part of the message, not a `source`: a chain printed with `{:#}`
    /// would say it twice.
    #[error("{origin}: {context}: {error}")]
    Statistics { origin: String, context: String, error: StatsError },
    #[error("{file}: {problem}")]
    Io { file: String, problem: String },
    /// A result folder (run folders, plain tables) that cannot be read as one.
    #[error("{path}: {problem}\n  fix: {fix}")]
    Folder { path: String, problem: String, fix: String },
    /// A run folder herd-store refuses (newer format, corrupt part); its message carries the fix.
    #[error("{path}: {source}")]
    Store {
        path: String,
        #[source]
        source: herd_store::StoreError,
    },
    #[error(
        "the papers' headline numbers (data/paper-headlines.toml): {0}\n  fix: correct the file; each entry needs id, study, quantity, paper, replicates_if, does_not_replicate_if and source, and may give a positive effect"
    )]
    Headlines(String),
}

/// Attaches the table and what was being computed to a statistics error.
pub(crate) fn stats_context(
    origin: &str,
    context: impl FnOnce() -> String,
) -> impl FnOnce(StatsError) -> AnalysisError {
    let origin = origin.to_owned();
    move |error| AnalysisError::Statistics { origin, context: context(), error }
}

/// The `note` of a row whose statistic is undefined because every value is equal (constant input,
/// every difference zero, a regressor or outcome without variation).
pub const EVERY_VALUE_EQUAL: &str = "every value equal";
/// The `note` of a fit whose design is singular: a regressor with every value equal, or one that
/// repeats the others.
pub const COLLINEAR_REGRESSORS: &str = "every value equal or collinear in a regressor";
/// The `note` of a row whose statistic is undefined because it has too few units for the test.
pub const TOO_FEW_UNITS: &str = "too few units";

/// Why `e` leaves a statistic undefined on this input (the `note` its row carries, its statistic and p
/// null), or `None` when `e` is a failure the analysis must report (bad input, a bug).
pub fn undefined_reason(e: &StatsError) -> Option<&'static str> {
    match e {
        StatsError::ConstantInput { .. } | StatsError::AllZeroDifferences => Some(EVERY_VALUE_EQUAL),
        StatsError::SingularDesign { .. } => Some(COLLINEAR_REGRESSORS),
        StatsError::TooFewObservations { .. } | StatsError::EmptyInput => Some(TOO_FEW_UNITS),
        _ => None,
    }
}
