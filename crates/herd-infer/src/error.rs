use std::path::PathBuf;

/// Everything that can go wrong loading or running a model. Messages name the file or alias and say
/// how to fix it, because they are shown to users as they are.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error("{file}: {problem}\n  fix: {fix}")]
    Registry { file: PathBuf, problem: String, fix: String },
    #[error("model `{alias}` is not available: {problem}\n  fix: {fix}")]
    ModelMissing { alias: String, problem: String, fix: String },
    #[error("{file}: {problem}")]
    ModelFile { file: PathBuf, problem: String },
    #[error("fetching `{alias}` failed: {problem}\n  fix: {fix}")]
    Fetch { alias: String, problem: String, fix: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    Template(#[from] herd_chat::ChatTemplateError),
    #[error("request: {0}")]
    Request(String),
    #[error("constraint: {0}")]
    Constraint(String),
    #[error("sampling: {0}")]
    Sampling(String),
    #[error(
        "the backend returned {returned} results for {requested} requests; the batch is marked failed (rerun to retry it)"
    )]
    Incomplete { requested: usize, returned: usize },
    #[error("vision model: {0}")]
    Vision(#[from] herd_vision::VisionError),
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("server: {0}")]
    Server(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

pub type Result<T, E = InferError> = std::result::Result<T, E>;

pub(crate) fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> InferError {
    let path = path.into();
    move |source| InferError::Io { path, source }
}

pub(crate) fn model_file(file: impl Into<PathBuf>, problem: impl std::fmt::Display) -> InferError {
    InferError::ModelFile { file: file.into(), problem: problem.to_string() }
}
