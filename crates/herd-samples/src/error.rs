use std::path::PathBuf;

/// Why the samples page could not be written. A sample whose prompt cannot be re-rendered is not an
/// error: the page shows it with the reason (see [`crate::PromptCheck`]).
#[derive(Debug, thiserror::Error)]
pub enum SamplesError {
    #[error("{path}: {source}")]
    Store { path: PathBuf, source: herd_store::StoreError },
    #[error("{origin}: column `{column}`: {problem}\n  fix: {fix}")]
    Column { origin: String, column: String, problem: String, fix: String },
    #[error("{path}: {problem}\n  fix: {fix}")]
    Write { path: PathBuf, problem: String, fix: String },
    #[error("the samples page template: {0}")]
    Template(String),
}

impl SamplesError {
    pub(crate) fn write(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        SamplesError::Write {
            path: path.to_path_buf(),
            problem: e.to_string(),
            fix: "check that the output folder is writable and the disk has room".into(),
        }
    }
}
