//! Runs an experiment file through a model backend and stores its trial rows.
//!
//! The runner is the one place where the pure crates meet IO: it expands the design (herd-design), builds
//! each model's conformity image pools with the baseline filter, renders stimuli and prompts
//! (herd-stimuli, herd-prompts), asks the [`Respondent`] (a model behind herd-backend's contract, or the
//! simulated agent) for scores or generations, parses the
//! outputs (herd-parse) and hands rows to a [`TrialSink`] (a `herd_store::RunStore` on disk, or memory for
//! power analysis).
//!
//! Work is committed in *batches* that are also the backend's requests: one shard group of conformity
//! units (every N and level of one trial index, so the backend can reuse shared prompt prefixes), one
//! society pass (its 20 deciders as one generation batch), one chunk of baseline candidates. A batch is
//! stored whole or not at all, and its composition never depends on what is already stored, so a resumed
//! or sharded run computes exactly what an uninterrupted one does.
//!
//! A backend that takes many calls at once (`Backend::shared`: the openai backend's servers) gets many
//! batches in flight (the `pipeline` module): the plan is drawn as its slots free, each batch is committed
//! as it completes, in any order, and a failed request fails its own unit only. Local and simulated
//! backends keep one batch in flight, as before.
//!
//! A batch file (`Backend::batch_file`: the openai backend's requests written for an offline run, and its
//! answers read back) is handed the plan one batch at a time, in order: a unit whose answers the file
//! holds is stored as a live run would store it, and one without awaits a later import
//! ([`RunSummary::awaiting`]; its requests go to the export file), so a rerun writes only what is still
//! pending.
//!
//! ```no_run
//! use herd_backend::{SimAgent, SimParams};
//! use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
//!
//! let file = herd_design::load_experiment("data/experiments/minimal-group.quick.toml".as_ref())?;
//! let mut agent = SimAgent::new(SimParams::default());
//! let mut sink = MemorySink::default();
//! let summary = run_experiment(&file, Respondent::Sim(&mut agent), &mut sink, &RunOptions::default())?;
//! println!("{} units run, {} dyads", summary.units_run, sink.rows.dyads.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod baseline;
mod conformity;
mod error;
mod inputs;
mod minimal_group;
mod pipeline;
mod progress;
mod respondent;
mod session;
mod trial;

use herd_backend::{BackendError, BatchReport, SharedBackend, UnitStanding};
use herd_design::{Experiment, ExperimentFile, Shard, Unit, UnitPlan, expand};
use herd_prompts::Modality;
use herd_store::{
    AllocationDeciderRow, AllocationDyadRow, BaselineCandidateRow, Batch, ConformityTrialRow, RunStore, Skipped,
};
use std::collections::{BTreeMap, BTreeSet};

pub use baseline::BaselineRule;
pub use error::{Result, RunnerError};
pub use inputs::{Fingerprint, experiment_inputs, file_sha256, json_sha256, model_folder_sha256, sha256_hex};
pub use progress::{Progress, duration_text};
pub use respondent::Respondent;
pub use session::{LIMITED_NOTE, SessionPlan, file_record, run_parameters, run_session, session_status};

/// The rows of one batch (or of a whole run, in memory).
#[derive(Debug, Default, Clone)]
pub struct TrialRows {
    pub conformity: Vec<ConformityTrialRow>,
    pub deciders: Vec<AllocationDeciderRow>,
    pub dyads: Vec<AllocationDyadRow>,
    pub baseline: Vec<BaselineCandidateRow>,
}

/// Where a run's rows go.
pub trait TrialSink {
    fn is_stored(&self, unit: &str) -> bool;
    /// Stores the rows of `units` all together: afterwards every one of them is stored, or (on error)
    /// none.
    fn store(&mut self, units: Vec<String>, rows: TrialRows) -> Result<()>;
    /// Baseline candidates already stored, so a resumed pool is not scored again.
    fn stored_baseline(&self) -> Result<Vec<BaselineCandidateRow>>;
    fn run_id(&self) -> String;
}

impl TrialSink for RunStore {
    fn is_stored(&self, unit: &str) -> bool {
        RunStore::is_stored(self, unit)
    }

    fn store(&mut self, units: Vec<String>, rows: TrialRows) -> Result<()> {
        let mut batch = Batch::new(units);
        batch.add(&rows.conformity)?;
        batch.add(&rows.deciders)?;
        batch.add(&rows.dyads)?;
        batch.add(&rows.baseline)?;
        Ok(self.commit(batch)?)
    }

    fn stored_baseline(&self) -> Result<Vec<BaselineCandidateRow>> {
        Ok(self.baseline_candidates()?)
    }

    fn run_id(&self) -> String {
        RunStore::run_id(self).to_owned()
    }
}

/// Keeps rows in memory (power analysis, tests).
#[derive(Debug, Default)]
pub struct MemorySink {
    pub stored: BTreeSet<String>,
    pub rows: TrialRows,
}

impl TrialSink for MemorySink {
    fn is_stored(&self, unit: &str) -> bool {
        self.stored.contains(unit)
    }

    fn store(&mut self, units: Vec<String>, rows: TrialRows) -> Result<()> {
        self.stored.extend(units);
        self.rows.conformity.extend(rows.conformity);
        self.rows.deciders.extend(rows.deciders);
        self.rows.dyads.extend(rows.dyads);
        self.rows.baseline.extend(rows.baseline);
        Ok(())
    }

    fn stored_baseline(&self) -> Result<Vec<BaselineCandidateRow>> {
        Ok(self.rows.baseline.clone())
    }

    fn run_id(&self) -> String {
        "memory".into()
    }
}

/// How to run an experiment with one model.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Run only this shard's units.
    pub shard: Option<Shard>,
    /// `Vision` shows the rendered images; `Text` their text rendering (text-only models).
    pub modality: Modality,
    /// Reasoning modes the model can run (`on`, `off`); minimal-group cells of other modes are skipped.
    pub reasoning_modes: Vec<String>,
    /// Whether requests switch thinking per cell (models whose template has `enable_thinking`).
    pub switch_thinking: bool,
    /// The model's own baseline threshold, replacing the experiment's (weak models).
    pub baseline_override: Option<BaselineRule>,
    /// Most requests in one backend call when scoring baseline candidates.
    pub baseline_chunk: usize,
    /// Draw progress bars on the terminal.
    pub progress: bool,
    /// Give up after this many units in a row failed at the backend (a broken model or server).
    pub max_consecutive_failures: usize,
    /// The model's own sampling defaults (its generation_config.json or registry entry), which the
    /// experiment's [generation] overrides.
    pub sampling_defaults: herd_backend::ModelSampling,
    /// What a knob neither sets becomes: HF's default (local backends) or the server's (not sent).
    pub sampling_fallback: herd_backend::SamplingFallback,
    /// A trial run (`herd run --limit N`): only the first N units of the plan (of this shard) that the
    /// model runs; units it skips by design on the way are recorded as skipped, not counted.
    pub limit: Option<usize>,
    /// Units a local backend (a model on this machine, the simulated agent) computes in one call: that
    /// many societies' deciders decoded as one batch, that many images' trials scored together (a text
    /// model's; a vision model scores one image's trials per call). Each unit's results are what it gets
    /// alone, and each is still committed on its own. 1: one unit at a time. Servers ignore it (their
    /// concurrency is their own).
    pub batch_units: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            shard: None,
            modality: Modality::Text,
            reasoning_modes: vec!["on".into(), "off".into()],
            switch_thinking: false,
            baseline_override: None,
            baseline_chunk: 16,
            progress: false,
            max_consecutive_failures: 5,
            sampling_defaults: herd_backend::ModelSampling::none("none: no model (simulated agent)"),
            sampling_fallback: herd_backend::SamplingFallback::HfDefaults,
            limit: None,
            batch_units: 1,
        }
    }
}

impl RunOptions {
    /// The options a model implies: its modality, the reasoning modes it can run (and whether requests
    /// switch thinking), its own baseline rule and the registry's account of its sampling defaults (a
    /// caller with the model's files replaces these by `herd_backend::model_sampling`, which reads an HF
    /// folder's generation_config.json). `None` (the sim backend) runs every mode.
    pub fn for_model(entry: Option<&herd_backend::ModelEntry>, vision: bool) -> Self {
        let reasoning_modes = entry.map_or_else(|| vec!["on".into(), "off".into()], |e| e.reasoning.clone());
        RunOptions {
            modality: if vision { Modality::Vision } else { Modality::Text },
            switch_thinking: entry.is_some() && reasoning_modes.len() > 1,
            reasoning_modes,
            baseline_override: entry.and_then(|e| e.baseline_filter.as_ref()).map(|b| BaselineRule {
                enabled: b.enabled,
                min_p_correct: b.min_p_correct,
                two_way: b.measure == "ab",
            }),
            sampling_defaults: entry.map_or_else(|| RunOptions::default().sampling_defaults, |e| e.registry_sampling()),
            ..RunOptions::default()
        }
    }
}

impl RunOptions {
    /// Why this model does not run `unit` by design, if it does not: a minimal-group cell of a
    /// reasoning mode the model lacks (`reasoning=on` for a model with no thinking mode). Such a unit is
    /// recorded as skipped by design; the run is complete without it, and `--limit` does not count it.
    pub fn skipped_by_design(&self, unit: &Unit) -> Option<String> {
        let UnitPlan::Society(run) = &unit.plan else { return None };
        let mode = run.reasoning.as_str();
        if self.reasoning_modes.iter().any(|m| m == mode) {
            return None;
        }
        let why = if mode == "on" { "no thinking mode" } else { "thinking cannot be turned off" };
        Some(format!(
            "reasoning={mode}: {why} (the model runs only {}; see `reasoning` in data/models.toml)",
            self.reasoning_modes.join(", ")
        ))
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunSummary {
    /// Units of the experiment in this shard.
    pub units_total: u64,
    pub units_already_stored: u64,
    pub units_run: u64,
    pub skipped: Vec<Skipped>,
    /// Units whose backend request failed; a rerun retries them.
    pub failed: Vec<String>,
    /// Baseline acceptance rates, parse rates and other numbers worth a line in the manifest.
    pub notes: BTreeMap<String, serde_json::Value>,
    /// Units of the plan left unstored because of `RunOptions::limit` (none: the limit was not set, or
    /// reached no unit that was still to run).
    pub left_by_limit: u64,
    /// What awaits a batch file's answers (none unless the backend is a batch file).
    pub awaiting: Awaiting,
    /// What the session's batch files gave and took (the backend is a batch file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchReport>,
    /// Tokens the model generated for the units stored this session (a minimal-group run); `None` where
    /// the study generates nothing (a conformity trial is scored from next-token probabilities).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_generated: Option<u64>,
}

/// What a session through a batch file leaves for a later import: requests without answers yet (written
/// to the export file, when there is one) and units that cannot be planned before those answers come.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Awaiting {
    /// Units of the experiment whose requests have no answer yet.
    pub units: u64,
    /// Conformity baseline candidates likewise: a task's pools are built from their answers first.
    pub baseline_candidates: u64,
    /// Units of the experiment not planned yet: trials of a task whose baseline pools await answers (or
    /// a refused chunk's new answers).
    pub after_baseline: u64,
}

impl Awaiting {
    pub fn is_empty(&self) -> bool {
        *self == Awaiting::default()
    }
}

impl TrialRows {
    /// Tokens the model generated for these rows.
    fn tokens_generated(&self) -> u64 {
        self.deciders.iter().map(|d| d.tokens_generated.max(0) as u64).sum()
    }
}

impl RunSummary {
    /// Every unit of the plan is stored or skipped by design.
    pub fn complete(&self) -> bool {
        self.skipped.iter().all(|s| s.by_design)
            && self.failed.is_empty()
            && self.left_by_limit == 0
            && self.awaiting.is_empty()
    }

    /// Counts `tokens` generated for units stored this session.
    fn count_generated(&mut self, tokens: u64) {
        *self.tokens_generated.get_or_insert(0) += tokens;
    }

    /// Units skipped by design (the run is complete without them).
    pub fn skipped_by_design(&self) -> u64 {
        self.skipped.iter().filter(|s| s.by_design).map(|s| s.units).sum()
    }

    /// Records `units` as failed at the backend with `error`, whose message the manifest keeps.
    fn note_failure(&mut self, units: &[String], error: &BackendError) {
        // The last failure's message, so that a user sees why without a log (the manifest keeps it too).
        self.notes.insert(
            "last_backend_failure".into(),
            serde_json::json!(format!("{}: {error}", units.first().map_or("", String::as_str))),
        );
        self.failed.extend(units.iter().cloned());
    }

    fn skip(&mut self, reason: String, unit: &str, by_design: bool) {
        match self.skipped.iter_mut().find(|s| s.reason == reason) {
            Some(s) => {
                s.units += 1;
                if s.examples.len() < 3 {
                    s.examples.push(unit.to_owned());
                }
            }
            None => self.skipped.push(Skipped { reason, units: 1, examples: vec![unit.to_owned()], by_design }),
        }
    }
}

/// The units of `file` in `shard`, in expansion order.
pub fn shard_units(file: &ExperimentFile, shard: Option<Shard>) -> Vec<Unit> {
    expand(&file.experiment).into_iter().filter(|u| shard.is_none_or(|s| s.contains(u))).collect()
}

/// What every stage of a run works with: the experiment file, who answers, where rows go, the options,
/// the progress display and the summary being written.
pub(crate) struct RunContext<'r, 'a> {
    pub(crate) file: &'r ExperimentFile,
    pub(crate) respondent: Respondent<'a>,
    pub(crate) sink: &'r mut dyn TrialSink,
    pub(crate) options: &'r RunOptions,
    pub(crate) progress: &'r Progress,
    pub(crate) summary: &'r mut RunSummary,
}

/// Runs every unit of the experiment not yet stored in `sink`.
pub fn run_experiment(
    file: &ExperimentFile,
    respondent: Respondent<'_>,
    sink: &mut dyn TrialSink,
    options: &RunOptions,
) -> Result<RunSummary> {
    let mut units = shard_units(file, options.shard);
    // A batch file names every problem instead of stopping at a few in a row: its answers are all there.
    let batch_options;
    let options = if respondent.batch_file().is_some() {
        batch_options = RunOptions { max_consecutive_failures: usize::MAX, ..options.clone() };
        &batch_options
    } else {
        options
    };
    // The units of the plan, for placing a batch file's answers the session does not ask for.
    let planned: Option<BTreeSet<String>> = respondent.batch_file().map(|_| planned_units(file, &units, options));
    let progress = Progress::new(options.progress);
    let mut summary = RunSummary { units_total: units.len() as u64, ..RunSummary::default() };
    summary.units_already_stored = units.iter().filter(|u| sink.is_stored(&u.key.id())).count() as u64;
    if summary.units_already_stored > 0 {
        progress.println(format!(
            "resuming: {} of {} units already stored; running the other {}",
            summary.units_already_stored,
            summary.units_total,
            summary.units_total - summary.units_already_stored
        ));
    }
    if let Some(limit) = options.limit {
        // The first units of the plan the model runs, as `herd expand --jsonl` lists them (with the
        // units among them it skips by design, which cost nothing); the rest wait for a rerun.
        let end = units
            .iter()
            .enumerate()
            .filter(|(_, u)| options.skipped_by_design(u).is_none())
            .nth(limit)
            .map_or(units.len(), |(i, _)| i);
        summary.left_by_limit = units[end..].iter().filter(|u| !sink.is_stored(&u.key.id())).count() as u64;
        units.truncate(end);
    }
    let mut run = RunContext { file, respondent, sink, options, progress: &progress, summary: &mut summary };
    let mut outcome = match &file.experiment {
        Experiment::Conformity(exp) => conformity::run(&mut run, exp, units),
        Experiment::MinimalGroup(exp) => minimal_group::run(&mut run, exp, units),
    };
    if let (Ok(()), Some(batch), Some(planned)) = (&outcome, run.respondent.batch_file(), &planned) {
        let sink = &*run.sink;
        let standing = |unit: &str| {
            if sink.is_stored(unit) {
                UnitStanding::Stored
            } else if planned.contains(unit) {
                UnitStanding::Planned
            } else {
                UnitStanding::Unknown
            }
        };
        match batch.finish(&standing) {
            Ok(report) => {
                run.summary.notes.insert("batch".into(), serde_json::to_value(&report).unwrap_or_default());
                run.summary.batch = Some(report);
            }
            Err(error) => {
                outcome = Err(RunnerError::Backend { unit: "the batch file".into(), source: Box::new(error) })
            }
        }
    }
    progress.finish();
    match outcome {
        Ok(()) => Ok(summary),
        // What was run, skipped and failed before the stop still belongs in the run's manifest.
        Err(cause) => Err(RunnerError::Stopped { summary: Box::new(summary), cause: Box::new(cause) }),
    }
}

/// Counts consecutive backend failures and stops the run when the backend looks broken.
struct FailureGuard {
    in_a_row: usize,
    limit: usize,
}

impl FailureGuard {
    fn new(limit: usize) -> Self {
        FailureGuard { in_a_row: 0, limit: limit.max(1) }
    }

    fn record(&mut self, units: &[String], error: BackendError, summary: &mut RunSummary) -> Result<()> {
        self.in_a_row += 1;
        if self.in_a_row >= self.limit {
            summary.failed.extend(units.iter().cloned());
            return Err(RunnerError::Backend {
                unit: units.first().cloned().unwrap_or_default(),
                source: Box::new(error),
            });
        }
        summary.note_failure(units, &error);
        Ok(())
    }

    fn success(&mut self) {
        self.in_a_row = 0;
    }
}

/// A backend's results for `requested` requests, checked. A backend that returns another number of
/// results (a server's truncated batch, a bug) has failed the whole batch, like any backend error:
/// pairing what it did return with the requests would store some units and silently drop the rest.
pub(crate) fn all_results<T>(requested: usize, results: herd_backend::Result<Vec<T>>) -> herd_backend::Result<Vec<T>> {
    let results = results?;
    if results.len() != requested {
        return Err(BackendError::Incomplete { requested, returned: results.len() });
    }
    Ok(results)
}

/// Whether a request's error says its answer is not in hand yet (a batch file's), not that it failed.
pub(crate) fn is_pending(error: &BackendError) -> bool {
    matches!(error, BackendError::Pending(_))
}

/// Whether a batch's results await a batch file's answers: some are pending and none failed otherwise.
pub(crate) fn awaiting<T>(results: &[herd_backend::Result<T>]) -> bool {
    results.iter().any(|r| r.as_ref().is_err_and(is_pending))
        && results.iter().all(|r| r.as_ref().map_or_else(is_pending, |_| true))
}

/// The names a batch file's answers may carry in this run: every unit of the shard, and every chunk of
/// baseline candidates the conformity filter could score.
fn planned_units(file: &ExperimentFile, units: &[Unit], options: &RunOptions) -> BTreeSet<String> {
    let mut planned: BTreeSet<String> = units.iter().map(|u| u.key.id()).collect();
    if let Experiment::Conformity(exp) = &file.experiment {
        planned.extend(baseline::chunk_units(exp, options.baseline_chunk));
    }
    planned
}

/// A pipelined session's throughput and what each endpoint reached, for the run manifest.
fn record_throughput(summary: &mut RunSummary, throughput: &pipeline::Throughput, backend: &dyn SharedBackend) {
    summary.notes.insert("throughput".into(), serde_json::to_value(throughput).unwrap_or_default());
    summary.notes.insert("endpoints".into(), serde_json::to_value(backend.load().endpoints).unwrap_or_default());
}

/// A u64 seed from a stream key (sampling seeds for the backend).
fn seed_of(key: &herd_design::StreamKey) -> u64 {
    let digest = key.digest();
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}
