//! What answers the runner's requests: a model behind herd-backend's [`Backend`] contract, which reads
//! the prompts, or the simulated agent, which reads what each trial is. The runner states every
//! request's facts; only the simulated agent is handed them.

use herd_backend::{
    AllocationFacts, Backend, BackendInfo, BatchFile, ConformityFacts, GenerateRequest, Generation, ScoreRequest,
    ScoreResult, SharedBackend, SimBackend,
};

/// The model or agent a run asks.
pub enum Respondent<'a> {
    /// A model (local, vision or a server): it answers from the prompts.
    Model(&'a mut dyn Backend),
    /// The simulated agent (or a test double that wraps it): it answers from each trial's facts.
    Sim(&'a mut dyn SimBackend),
}

impl Respondent<'_> {
    pub fn info(&self) -> BackendInfo {
        match self {
            Respondent::Model(backend) => backend.info(),
            Respondent::Sim(agent) => agent.info(),
        }
    }

    /// The model as a backend many batches may be in flight through at once, if it is one.
    pub(crate) fn shared(&self) -> Option<&dyn SharedBackend> {
        match self {
            Respondent::Model(backend) => backend.shared(),
            Respondent::Sim(_) => None,
        }
    }

    /// The model as a batch file (answers read from a file, requests written to one), if it is one.
    pub(crate) fn batch_file(&self) -> Option<&dyn BatchFile> {
        match self {
            Respondent::Model(backend) => backend.batch_file(),
            Respondent::Sim(_) => None,
        }
    }

    /// Scores `group`; `facts[i]` is what `group[i]`'s trial is.
    pub(crate) fn score(
        &mut self,
        group: &[ScoreRequest],
        facts: &[ConformityFacts],
    ) -> herd_backend::Result<Vec<ScoreResult>> {
        match self {
            Respondent::Model(backend) => backend.score(group),
            Respondent::Sim(agent) => agent.score_trials(group, facts),
        }
    }

    /// Samples one completion per request; `facts[i]` is what `batch[i]`'s decider is.
    pub(crate) fn generate(
        &mut self,
        batch: &[GenerateRequest],
        facts: &[AllocationFacts],
    ) -> herd_backend::Result<Vec<Generation>> {
        match self {
            Respondent::Model(backend) => backend.generate(batch),
            Respondent::Sim(agent) => agent.generate_trials(batch, facts),
        }
    }
}
