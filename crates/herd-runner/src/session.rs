//! A session of a run: the run's identity and manifest assembled from the experiment and what the
//! backend's loader recorded, the run folder opened (herd-store refuses another run, other inputs or a
//! newer format), the experiment run into it, and what the session did written back (skipped and failed
//! units, notes, the `--limit` mark, parse counts, status). `herd run` maps its flags onto a
//! [`SessionPlan`]; this is the one place a run folder's manifest is made.

use std::path::Path;

use herd_backend::{ModelEntry, ModelSampling, SamplingFallback};
use herd_design::{Experiment, ExperimentFile, Shard, bank_files};
use herd_store::{FileRecord, Manifest, RunIdentity, RunStore};

use crate::{Fingerprint, Respondent, Result, RunOptions, RunSummary, RunnerError, experiment_inputs, run_experiment};

/// The manifest note that marks a run a `--limit` session left unfinished.
pub const LIMITED_NOTE: &str = "limited";

/// What a session is run with beyond the experiment file: the backend's facts as its loader found them,
/// and the session's own choices.
pub struct SessionPlan<'a> {
    /// `candle`, `openai` or `sim`: the backend named in the run's identity.
    pub backend: &'a str,
    /// The model's registry entry (none for the simulated agent).
    pub entry: Option<&'a ModelEntry>,
    /// The model's files as the manifest records them.
    pub model_files: Vec<FileRecord>,
    /// The model's registry entry and load options as the manifest records them.
    pub model_record: serde_json::Value,
    /// The model's sampling defaults where the loader read more than the registry.
    pub sampling_defaults: Option<ModelSampling>,
    pub sampling_fallback: SamplingFallback,
    /// The backend's part of the input fingerprint (sim parameters, or model file and template options).
    pub backend_inputs: Fingerprint,
    pub shard: Shard,
    /// Draw progress bars on the terminal.
    pub progress: bool,
    /// A trial run: only the first N units.
    pub limit: Option<usize>,
    /// Units a local backend computes in one call ([`RunOptions::batch_units`]; at least 1).
    pub batch_units: usize,
    /// Takes secrets (an API key) out of a text before it reaches the manifest.
    pub redact: &'a dyn Fn(&str) -> String,
}

/// The experiment with every default resolved, as a run's manifest records it (`parameters`).
pub fn run_parameters(file: &ExperimentFile) -> serde_json::Value {
    match &file.experiment {
        Experiment::Conformity(e) => serde_json::to_value(e),
        Experiment::MinimalGroup(e) => serde_json::to_value(e),
    }
    .unwrap_or(serde_json::Value::Null)
}

/// A file's record for the manifest: its path, size and (when `hash`) SHA-256.
pub fn file_record(role: &str, path: &Path, hash: bool) -> Result<FileRecord> {
    let bytes = std::fs::metadata(path)
        .map_err(|e| RunnerError::Plan(format!("{}: cannot read the {role} file ({e})", path.display())))?
        .len();
    let sha256 = if hash {
        Some(herd_backend::sha256_file(path).map_err(|e| RunnerError::Plan(format!("{}: {e}", path.display())))?)
    } else {
        None
    };
    Ok(FileRecord { role: role.into(), path: path.display().to_string(), bytes, sha256 })
}

/// The session's status in the manifest: `complete`, `complete (N skipped by design: …)`, or
/// `incomplete (…)` saying what is missing.
pub fn session_status(summary: &RunSummary) -> String {
    let by_design: Vec<String> = summary
        .skipped
        .iter()
        .filter(|s| s.by_design)
        .map(|s| format!("{} skipped by design: {}", s.units, s.reason))
        .collect();
    if summary.complete() {
        return if by_design.is_empty() { "complete".into() } else { format!("complete ({})", by_design.join("; ")) };
    }
    let mut missing = Vec::new();
    if summary.left_by_limit > 0 {
        missing.push(format!("{} units left by --limit", summary.left_by_limit));
    }
    let other_skips: u64 = summary.skipped.iter().filter(|s| !s.by_design).map(|s| s.units).sum();
    if other_skips > 0 {
        missing.push(format!("{other_skips} skipped"));
    }
    if !summary.failed.is_empty() {
        missing.push(format!("{} failed", summary.failed.len()));
    }
    let awaiting = &summary.awaiting;
    if awaiting.units > 0 {
        missing.push(format!("{} units await a batch file's answers", awaiting.units));
    }
    if awaiting.baseline_candidates > 0 {
        missing.push(format!("{} baseline candidates await a batch file's answers", awaiting.baseline_candidates));
    }
    if awaiting.after_baseline > 0 {
        missing.push(format!("{} units wait for their baseline pools", awaiting.after_baseline));
    }
    missing.extend(by_design);
    format!("incomplete ({})", missing.join("; "))
}

/// Runs `file` with `respondent` into the run folder `out` as one session of that run; `warn` hears
/// what opening the folder repaired or found there.
pub fn run_session(
    file: &ExperimentFile,
    respondent: Respondent<'_>,
    plan: SessionPlan<'_>,
    out: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<RunSummary> {
    // A folder written before experiments were fingerprinted by their parsed content holds the hash of
    // the file's bytes: the unchanged file resumes it as before.
    let legacy;
    let file = match herd_store::read_run_manifest(out) {
        Ok(m) if m.identity.experiment_sha256 == file.file_sha256 && file.file_sha256 != file.sha256 => {
            legacy = ExperimentFile { sha256: file.file_sha256.clone(), ..file.clone() };
            &legacy
        }
        _ => file,
    };
    let info = respondent.info();
    let meta = file.experiment.meta();
    let identity = RunIdentity {
        experiment: meta.name.clone(),
        study: meta.study.as_str().into(),
        experiment_sha256: file.sha256.clone(),
        model: info.model.clone(),
        backend: plan.backend.into(),
        shard: if plan.shard.count > 1 { plan.shard.to_string() } else { "all".into() },
    };
    let mut files = vec![FileRecord {
        role: "experiment".into(),
        path: file.path.display().to_string(),
        bytes: std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(0),
        sha256: Some(file.file_sha256.clone()),
    }];
    let defaults = RunOptions::for_model(plan.entry, info.vision);
    let options = RunOptions {
        shard: (plan.shard.count > 1).then_some(plan.shard),
        progress: plan.progress,
        sampling_defaults: plan.sampling_defaults.unwrap_or_else(|| defaults.sampling_defaults.clone()),
        sampling_fallback: plan.sampling_fallback,
        limit: plan.limit,
        batch_units: plan.batch_units.max(1),
        ..defaults
    };
    let mut inputs = experiment_inputs(file, &options)?;
    inputs.extend(plan.backend_inputs);
    // The bank files' records take the digests the fingerprint just computed: one read of each file,
    // and the manifest's two accounts of a bank cannot disagree.
    for (role, written) in bank_files(&file.experiment) {
        let mut record = file_record(role, &file.resolve(&written), false)?;
        record.sha256 = inputs.get(role).cloned();
        files.push(record);
    }
    files.extend(plan.model_files);
    let compute = serde_json::to_value(&info.compute).map_err(|e| RunnerError::Plan(e.to_string()))?;
    let manifest = Manifest {
        experiment_file: file.path.display().to_string(),
        parameters: run_parameters(file),
        model: serde_json::json!({"backend": info, "registry": plan.model_record, "run_options": {
            "modality": options.modality.as_str(),
            "reasoning_modes": options.reasoning_modes,
            "baseline_override": options.baseline_override,
            "batch_units": options.batch_units,
        }}),
        files,
        units_total: crate::shard_units(file, options.shard).len() as u64,
        compute: Some(compute),
        inputs,
        ..Manifest::new(identity)
    };
    let mut store = RunStore::open(out, manifest, &info.device)?;
    if store.orphans_removed() > 0 {
        warn(format!("removed {} unfinished files of an interrupted session", store.orphans_removed()));
    }
    for repair in store.repairs() {
        warn(format!("warning: {repair}"));
    }
    for file in store.foreign_files() {
        warn(format!(
            "warning: {}: not written by herd; left in place (herd reads only committed parts, but a glob over the \
             folder reads it too: keep your own files outside the run's table folders)",
            file.display()
        ));
    }
    let result = run_experiment(file, respondent, &mut store, &options);
    // Failure texts come from servers: the API key, bearer tokens and URL credentials never reach the
    // manifest (the openai backend redacts its errors already; this holds for every note and status).
    let redact = plan.redact;
    let status = match &result {
        Ok(s) => session_status(s),
        Err(e) => redact(&format!("failed: {e}")),
    };
    // A run stopped by failures still records what it ran, skipped and failed, so a user sees why.
    if let Some(summary) = result.as_ref().ok().or_else(|| result.as_ref().err().and_then(|e| e.partial_summary())) {
        let m = store.manifest_mut();
        m.skipped = summary.skipped.clone();
        m.failed = summary.failed.clone();
        m.notes.extend(summary.notes.iter().map(|(k, v)| (k.clone(), redact_json(v, redact))));
        // A limited session says so in the run's own record; a later session that runs the rest
        // takes the mark away.
        if summary.left_by_limit > 0 {
            m.notes.insert(
                LIMITED_NOTE.into(),
                serde_json::json!({
                    "limit": plan.limit,
                    "units_left": summary.left_by_limit,
                    "fix": "rerun the same command without --limit to complete the run",
                }),
            );
        } else {
            m.notes.remove(LIMITED_NOTE);
        }
        // The session's parse counts cover its own units only; the store's counts cover every session's.
        if let Some(&deciders) = m.counts.get(herd_store::DECIDERS_COUNT).filter(|&&n| n > 0) {
            let filled = m.counts.get(herd_store::FILLED_COUNT).copied().unwrap_or(0);
            m.notes.insert(
                "allocation/parse".into(),
                serde_json::json!({"deciders": deciders, "filled": filled, "fill_rate": filled as f64 / deciders as f64}),
            );
        }
        m.experiment_units_stored = summary.units_already_stored + summary.units_run;
    }
    store.finish(&status)?;
    result
}

/// `value` with every string in it redacted.
fn redact_json(value: &serde_json::Value, redact: &dyn Fn(&str) -> String) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(redact(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_json(v, redact)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redact_json(v, redact))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_store::Skipped;

    fn skipped(units: u64, by_design: bool) -> Skipped {
        let reason =
            if by_design { "reasoning=on: no thinking mode" } else { "no lines image passed the baseline filter" };
        Skipped { reason: reason.into(), units, examples: vec!["u".into()], by_design }
    }

    #[test]
    fn skips_by_design_leave_a_run_complete_and_any_other_gap_leaves_it_incomplete() {
        let done = RunSummary { units_total: 32, units_run: 16, ..RunSummary::default() };
        assert_eq!(session_status(&done), "complete");
        let by_design = RunSummary { skipped: vec![skipped(16, true)], ..done.clone() };
        assert!(by_design.complete());
        assert_eq!(session_status(&by_design), "complete (16 skipped by design: reasoning=on: no thinking mode)");
        let other = RunSummary { skipped: vec![skipped(16, true), skipped(3, false)], ..done.clone() };
        assert!(!other.complete());
        assert!(
            session_status(&other).starts_with("incomplete (3 skipped; 16 skipped by design"),
            "{}",
            session_status(&other)
        );
        let failed = RunSummary { failed: vec!["u".into()], ..done.clone() };
        assert_eq!(session_status(&failed), "incomplete (1 failed)");
        let limited = RunSummary { left_by_limit: 22, ..done };
        assert!(!limited.complete());
        assert_eq!(session_status(&limited), "incomplete (22 units left by --limit)");
    }
}
