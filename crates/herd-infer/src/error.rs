use std::path::PathBuf;

/// Everything that can go wrong loading or running a model with herd's engines. Messages name the file
/// or alias and say how to fix it, because they are shown to users as they are. Through the
/// [`Backend`](herd_backend::Backend) contract an engine's error reaches the caller boxed
/// ([`herd_backend::BackendError::Engine`]); the contract's own errors pass through unboxed.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// The registry, a model's files on disk, a checksum: the contract's errors.
    #[error(transparent)]
    Backend(#[from] herd_backend::BackendError),
    #[error("{file}: {problem}")]
    ModelFile { file: PathBuf, problem: String },
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
    #[error("vision model: {0}")]
    Vision(#[from] herd_vision::VisionError),
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("server: {0}")]
    Server(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The model's memory estimate ([`crate::estimate_memory`]) is above the limit (the device's free
    /// memory, or `--max-memory`); `message` gives the estimate part by part, the limit with its source
    /// and the options, one a line.
    #[error("{message}")]
    DoesNotFit { alias: String, needed_bytes: u64, limit_bytes: u64, message: String },
}

pub type Result<T, E = InferError> = std::result::Result<T, E>;

/// An engine error as the contract carries it: the contract's own errors as they were, the engine's
/// boxed.
impl From<InferError> for herd_backend::BackendError {
    fn from(error: InferError) -> Self {
        match error {
            InferError::Backend(inner) => inner,
            InferError::Request(problem) => herd_backend::BackendError::Request(problem),
            other => herd_backend::BackendError::Engine(Box::new(other)),
        }
    }
}

pub(crate) fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> InferError {
    let path = path.into();
    move |source| InferError::Io { path, source }
}

pub(crate) fn model_file(file: impl Into<PathBuf>, problem: impl std::fmt::Display) -> InferError {
    InferError::ModelFile { file: file.into(), problem: problem.to_string() }
}
