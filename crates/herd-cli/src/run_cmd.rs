//! `herd run`: one experiment file through one model into a run folder (Parquet trial tables, manifest);
//! rerunning the same command resumes.

use crate::model_cmd::load_registry;
use crate::server_args::ServerArgs;
use anyhow::{Context, Result, bail};
use herd_design::{Experiment, ExperimentFile, Shard, bank_files, load_experiment};
use herd_infer::{
    Backend, DeviceChoice, LoadOptions, LocalModel, ModelEntry, ModelFiles, ModelSampling, ModelSource,
    SamplingFallback, SimAgent, SimParams, VisionModel, WeightChoice, locate_model, model_sampling,
};
use herd_runner::{RunOptions, RunSummary, run_experiment, shard_units};
use herd_store::{FileRecord, Manifest, RunIdentity, RunStore};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// herd's own candle inference on this machine (CPU, or CUDA/Metal when built with the feature).
    Candle,
    /// OpenAI-compatible inference servers (`--endpoint URL`, repeatable): vLLM, SGLang, llama.cpp.
    Openai,
    /// A simulated agent with stated effects (`--sim FILE`), for power analysis and pipeline checks.
    Sim,
}

impl BackendKind {
    fn name(self) -> &'static str {
        match self {
            BackendKind::Candle => "candle",
            BackendKind::Openai => "openai",
            BackendKind::Sim => "sim",
        }
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Experiment file (TOML), e.g. data/experiments/conformity.quick.toml.
    #[arg(long)]
    pub experiment: PathBuf,
    /// Model alias from the registry (see `herd models`); ignored by the sim backend.
    #[arg(long, default_value = "smollm2-135m")]
    pub model: String,
    /// Who answers: candle (a model on this machine), openai (a model on inference servers) or sim (a
    /// simulated agent).
    #[arg(long, value_enum, default_value = "candle")]
    pub backend: BackendKind,
    /// The simulated agent's parameters (TOML: [conformity], [allocation], seed); defaults when absent.
    #[arg(long)]
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
    /// No progress bars (logs and CI).
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// The backend a run uses, with what the manifest records about it.
pub struct LoadedBackend {
    pub backend: Box<dyn Backend>,
    pub entry: Option<ModelEntry>,
    pub files: Vec<FileRecord>,
    pub model_record: serde_json::Value,
    /// The model's sampling defaults where the backend reads more than the registry (an HF folder's
    /// generation_config.json); `None` keeps the registry's.
    pub sampling_defaults: Option<ModelSampling>,
    pub sampling_fallback: SamplingFallback,
}

pub fn load_backend(
    kind: BackendKind,
    model: &str,
    sim: Option<&Path>,
    device: DeviceChoice,
    weights: Option<WeightChoice>,
    registry: Option<&Path>,
    server: &ServerArgs,
) -> Result<LoadedBackend> {
    match kind {
        BackendKind::Openai => {
            let registry = load_registry(registry)?;
            let entry = registry.get(model)?.clone();
            let backend = server.connect(&entry)?;
            // The options name the key's variable, never the key.
            let model_record = serde_json::json!({"entry": entry, "server": backend.options()});
            // A server applies its own defaults to whatever is not sent (the run manifest says which).
            Ok(LoadedBackend {
                backend: Box::new(backend),
                entry: Some(entry),
                files: Vec::new(),
                model_record,
                sampling_defaults: None,
                sampling_fallback: SamplingFallback::Server,
            })
        }
        BackendKind::Sim => {
            let params: SimParams = match sim {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading the sim parameters {}", path.display()))?;
                    toml::from_str(&text).with_context(|| {
                        format!("{}: not valid sim parameters (see `herd run --help`)", path.display())
                    })?
                }
                None => SimParams::default(),
            };
            let model_record = serde_json::json!({"alias": "sim", "parameters": params});
            let files = sim.map(|p| file_record("sim parameters", p, true)).transpose()?.into_iter().collect();
            Ok(LoadedBackend {
                backend: Box::new(SimAgent::new(params)),
                entry: None,
                files,
                model_record,
                sampling_defaults: None,
                sampling_fallback: SamplingFallback::HfDefaults,
            })
        }
        BackendKind::Candle => {
            let registry = load_registry(registry)?;
            let entry = registry.get(model)?.clone();
            let files = locate_model(&entry)?;
            let options = LoadOptions { device, weights, ..Default::default() };
            let context = || format!("loading `{model}` from {}", files.path().display());
            let backend: Box<dyn Backend> = if entry.vision {
                Box::new(VisionModel::load(&entry, &files, &options).with_context(context)?)
            } else {
                Box::new(LocalModel::load(&entry, &files, &options).with_context(context)?)
            };
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
            let model_record = serde_json::json!({"entry": entry, "device": format!("{device:?}")});
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
            })
        }
    }
}

fn file_record(role: &str, path: &Path, hash: bool) -> Result<FileRecord> {
    let bytes = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
    let sha256 = if hash { Some(herd_infer::sha256_file(path)?) } else { None };
    Ok(FileRecord { role: role.into(), path: path.display().to_string(), bytes, sha256 })
}

fn parameters(file: &ExperimentFile) -> serde_json::Value {
    match &file.experiment {
        Experiment::Conformity(e) => serde_json::to_value(e),
        Experiment::MinimalGroup(e) => serde_json::to_value(e),
    }
    .unwrap_or(serde_json::Value::Null)
}

pub fn run(args: RunArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    let loaded = load_backend(
        args.backend,
        &args.model,
        args.sim.as_deref(),
        args.device,
        args.weights,
        args.registry.as_deref(),
        &args.server,
    )?;
    let summary = run_loaded(&file, loaded, args.backend, args.shard, &args.out, !args.quiet)?;
    print_summary(&summary, &args.out);
    if !summary.failed.is_empty() {
        let last = summary.notes.get("last_backend_failure").and_then(|v| v.as_str()).unwrap_or("");
        bail!(
            "{} units failed at the backend; rerun the same command to retry them\n  last failure: {last}",
            summary.failed.len()
        );
    }
    Ok(())
}

/// Runs `file` with a loaded backend into the run folder `out`.
pub fn run_loaded(
    file: &ExperimentFile,
    loaded: LoadedBackend,
    kind: BackendKind,
    shard: Shard,
    out: &Path,
    progress: bool,
) -> Result<RunSummary> {
    let LoadedBackend { mut backend, entry, files: model_files, model_record, sampling_defaults, sampling_fallback } =
        loaded;
    let info = backend.info();
    let meta = file.experiment.meta();
    let identity = RunIdentity {
        experiment: meta.name.clone(),
        study: meta.study.as_str().into(),
        experiment_sha256: file.sha256.clone(),
        model: info.model.clone(),
        backend: kind.name().into(),
        shard: if shard.count > 1 { shard.to_string() } else { "all".into() },
    };
    let mut files = vec![FileRecord {
        role: "experiment".into(),
        path: file.path.display().to_string(),
        bytes: std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(0),
        sha256: Some(file.sha256.clone()),
    }];
    for (role, written) in bank_files(&file.experiment) {
        files.push(file_record(role, &file.resolve(&written), true)?);
    }
    files.extend(model_files);
    let defaults = RunOptions::for_model(entry.as_ref(), info.vision);
    let options = RunOptions {
        shard: (shard.count > 1).then_some(shard),
        progress,
        sampling_defaults: sampling_defaults.unwrap_or_else(|| defaults.sampling_defaults.clone()),
        sampling_fallback,
        ..defaults
    };
    let manifest = Manifest {
        experiment_file: file.path.display().to_string(),
        parameters: parameters(file),
        model: serde_json::json!({"backend": info, "registry": model_record, "run_options": {
            "modality": format!("{:?}", options.modality).to_lowercase(),
            "reasoning_modes": options.reasoning_modes,
            "baseline_override": options.baseline_override,
        }}),
        files,
        units_total: shard_units(file, options.shard).len() as u64,
        compute: Some(serde_json::to_value(&info.compute)?),
        ..Manifest::new(identity)
    };
    let mut store = RunStore::open(out, manifest, &info.device)?;
    if store.orphans_removed() > 0 {
        eprintln!("removed {} unfinished files of an interrupted session", store.orphans_removed());
    }
    let result = run_experiment(file, backend.as_mut(), &mut store, &options);
    let status = match &result {
        Ok(s) if s.complete() => "complete".to_owned(),
        Ok(_) => "incomplete".to_owned(),
        Err(e) => format!("failed: {e}"),
    };
    // A run stopped by failures still records what it ran, skipped and failed, so a user sees why.
    if let Some(summary) = result.as_ref().ok().or_else(|| result.as_ref().err().and_then(|e| e.partial_summary())) {
        let m = store.manifest_mut();
        m.skipped = summary.skipped.clone();
        m.failed = summary.failed.clone();
        m.notes.extend(summary.notes.clone());
        m.experiment_units_stored = summary.units_already_stored + summary.units_run;
    }
    store.finish(&status)?;
    Ok(result?)
}

pub fn print_summary(summary: &RunSummary, out: &Path) {
    println!(
        "{} units: {} already stored, {} run now, {} skipped, {} failed",
        summary.units_total,
        summary.units_already_stored,
        summary.units_run,
        summary.skipped.iter().map(|s| s.units).sum::<u64>(),
        summary.failed.len()
    );
    for skip in &summary.skipped {
        println!("  skipped {} units: {} (e.g. {})", skip.units, skip.reason, skip.examples.join(", "));
    }
    for (name, note) in &summary.notes {
        println!("  {name}: {note}");
    }
    println!("results in {} (tables: */*.parquet; manifest.json)", out.display());
}
