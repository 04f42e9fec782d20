//! Every way building figures or the report can fail; messages name the file and the fix.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("{path}: {problem}\n  fix: {fix}")]
    Results { path: String, problem: String, fix: String },
    /// A run folder herd-store refuses (newer format, corrupt part); its message carries the fix.
    #[error("{path}: {source}")]
    Store {
        path: String,
        #[source]
        source: herd_store::StoreError,
    },
    #[error(transparent)]
    Analysis(#[from] herd_analysis::AnalysisError),
    #[error("{path}: {problem}")]
    Io { path: String, problem: String },
    #[error("drawing figure `{figure}`: {problem}")]
    Draw { figure: String, problem: String },
    #[error(
        "the papers' headline numbers (data/paper-headlines.toml): {0}\n  fix: correct the file; each entry needs id, study, quantity, paper, replicates_if, does_not_replicate_if and source, and may give a positive effect"
    )]
    Headlines(String),
    #[error("rendering the report template: {0}")]
    Template(String),
}

impl ReportError {
    pub(crate) fn io(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Self::Io { path: path.display().to_string(), problem: e.to_string() }
    }
}
