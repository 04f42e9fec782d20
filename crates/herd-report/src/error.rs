//! Every way building figures or the report can fail; messages name the file and the fix.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    #[error(transparent)]
    Analysis(#[from] herd_analysis::AnalysisError),
    #[error("{path}: {problem}")]
    Io { path: String, problem: String },
    #[error("drawing figure `{figure}`: {problem}")]
    Draw { figure: String, problem: String },
    #[error("rendering the report template: {0}")]
    Template(String),
}

impl ReportError {
    pub(crate) fn io(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Self::Io { path: path.display().to_string(), problem: e.to_string() }
    }
}
