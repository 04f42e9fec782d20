/// Why a run stopped. Messages come from the layer that knows the fix (experiment file, bank, model,
/// store) and name the unit where one was being run.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Design(#[from] herd_design::DesignErrors),
    #[error(transparent)]
    Prompt(#[from] herd_prompts::PromptError),
    #[error(transparent)]
    Stimulus(#[from] herd_stimuli::StimulusError),
    #[error(transparent)]
    Store(#[from] herd_store::StoreError),
    #[error(
        "{unit}: {source}\n  the backend failed several times in a row, so the run stopped; stored units are kept: fix the model or server, then rerun the same command to resume"
    )]
    // Boxed: an inference error is large, and every runner result carries this enum.
    Backend { unit: String, source: Box<herd_backend::BackendError> },
    #[error("{0}")]
    Plan(String),
    /// The run stopped early; `summary` says what it had run, skipped and failed by then.
    #[error("{cause}")]
    Stopped { summary: Box<crate::RunSummary>, cause: Box<RunnerError> },
}

impl RunnerError {
    /// What a stopped run had done, for its manifest.
    pub fn partial_summary(&self) -> Option<&crate::RunSummary> {
        match self {
            RunnerError::Stopped { summary, .. } => Some(summary),
            _ => None,
        }
    }
}

pub type Result<T, E = RunnerError> = std::result::Result<T, E>;
