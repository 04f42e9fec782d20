//! What can go wrong behind the contract. Engine errors (candle, tokenizers, servers) arrive boxed in
//! [`BackendError::Engine`], so this crate names no engine.

use std::path::PathBuf;

/// Everything that can go wrong finding, fetching or asking a model. Messages name the file or alias and
/// say how to fix it, because they are shown to users as they are.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{file}: {problem}\n  fix: {fix}")]
    Registry { file: PathBuf, problem: String, fix: String },
    #[error("model `{alias}` is not available: {problem}\n  fix: {fix}")]
    ModelMissing { alias: String, problem: String, fix: String },
    #[error("{file}: {problem}")]
    ModelFile { file: PathBuf, problem: String },
    #[error("fetching `{alias}` failed: {problem}\n  fix: {fix}")]
    Fetch { alias: String, problem: String, fix: String },
    #[error("request: {0}")]
    Request(String),
    #[error(
        "the backend returned {returned} results for {requested} requests; the batch is marked failed (rerun to retry it)"
    )]
    Incomplete { requested: usize, returned: usize },
    /// The request's answer is not in hand yet: a batch file holds none for its unit (the request went,
    /// or goes, to the export file). Not a failure: the unit awaits a later import.
    #[error("{0}: no answer in the batch file yet")]
    Pending(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// An engine's own error (a local model's, a server's), with its message as the engine wrote it.
    #[error(transparent)]
    Engine(Box<dyn std::error::Error + Send + Sync>),
}

pub type Result<T, E = BackendError> = std::result::Result<T, E>;

pub(crate) fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> BackendError {
    let path = path.into();
    move |source| BackendError::Io { path, source }
}

pub(crate) fn model_file(file: impl Into<PathBuf>, problem: impl std::fmt::Display) -> BackendError {
    BackendError::ModelFile { file: file.into(), problem: problem.to_string() }
}
