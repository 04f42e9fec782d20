//! Fetching the files herd loads from one repo revision into the cache: the plan (which files, how many
//! bytes, how many already here), then each file through its lock, resumed from its `.incomplete` blob,
//! checked against its etag, and linked into `snapshots/<commit>/`.

use crate::HubConfig;
use crate::cache::{RepoCache, check_repo_path, is_commit};
use crate::client::{Client, FileMeta, Transfer, is_transient};
use crate::error::{HubError, Result, io_error};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The files herd reads from a model folder beside the weights: the model's config, tokenizer and chat
/// template (herd-infer, herd-chat), the processors of the vision families (herd-vision) and the
/// safetensors index. Only those the repo has are fetched.
const METADATA_FILES: [&str; 10] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "preprocessor_config.json",
    "processor_config.json",
    INDEX_FILE,
];
/// herd-tensor's names: weights are the shards the index maps, else one `model.safetensors`.
const INDEX_FILE: &str = "model.safetensors.index.json";
const SINGLE_WEIGHTS: &str = "model.safetensors";

/// What a fetch reports as it goes (the CLI draws a progress bar from it).
#[derive(Debug)]
pub enum Progress<'a> {
    /// Before any weight is fetched: the files, their total size and how much of it is already cached.
    Planned { repo: &'a str, commit: &'a str, files: usize, total_bytes: u64, cached_bytes: u64 },
    /// A file starts downloading (`resumed_from` bytes of it were already here).
    File { name: &'a str, size: u64, resumed_from: u64 },
    /// Bytes arrived.
    Bytes(u64),
    /// A transfer failed and is retried from where it stopped.
    Retrying { name: &'a str, attempt: u32, problem: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedFile {
    pub name: String,
    pub size: u64,
    /// Bytes this fetch downloaded for it (0: it was cached).
    pub downloaded: u64,
}

/// A repo revision present in the cache: `dir` is `snapshots/<commit>`, an HF model folder.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub repo: String,
    pub commit: String,
    pub dir: PathBuf,
    /// The files fetched or found (empty when offline: nothing was asked of the Hub).
    pub files: Vec<FetchedFile>,
}

impl Snapshot {
    pub fn downloaded_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.downloaded).sum()
    }
}

/// The files herd loads among a repo's files: [`METADATA_FILES`] it has, and the weights: the shards
/// the index's `weight_map` names, else `model.safetensors`. `index` is the index file's JSON where the
/// repo has one. Names that would leave the snapshot folder are dropped.
pub fn wanted_files(repo_files: &[String], index: Option<&serde_json::Value>) -> Vec<String> {
    let present: BTreeSet<&str> = repo_files.iter().map(String::as_str).collect();
    let mut wanted: Vec<String> =
        METADATA_FILES.iter().filter(|name| present.contains(**name)).map(|name| name.to_string()).collect();
    let shards: BTreeSet<String> = match index.and_then(|i| i.get("weight_map")).and_then(|m| m.as_object()) {
        Some(map) => map.values().filter_map(|v| v.as_str()).map(str::to_string).collect(),
        None if present.contains(SINGLE_WEIGHTS) => BTreeSet::from([SINGLE_WEIGHTS.to_string()]),
        None => BTreeSet::new(),
    };
    wanted.extend(shards);
    wanted.retain(|name| check_repo_path(name));
    wanted
}

/// Fetches the files herd loads from `repo` at `revision` (a branch, tag or commit) into the Hub cache
/// and returns the snapshot folder. Files already in the cache are not downloaded again; a blob left
/// `.incomplete` by a killed or cut transfer is resumed with Range; each file is checked against its etag
/// before it enters the cache. With `HF_HUB_OFFLINE` the cache alone answers.
pub fn fetch_snapshot(
    config: &HubConfig,
    repo: &str,
    revision: &str,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Snapshot> {
    let cache = RepoCache::new(&config.cache, repo);
    if config.offline {
        let commit = if is_commit(revision) { Some(revision.to_string()) } else { cache.read_ref(revision) };
        return match commit.map(|c| (cache.snapshot(&c), c)) {
            Some((dir, commit)) if dir.is_dir() => Ok(Snapshot { repo: repo.into(), commit, dir, files: Vec::new() }),
            _ => Err(HubError::Offline { repo: repo.into(), cache: config.cache.clone() }),
        };
    }
    let client = Client::new(config);
    let info = with_retries(config, repo, progress, || client.model_info(repo, revision))?;
    if info.gated && config.token.is_none() {
        return Err(HubError::Gated {
            repo: repo.into(),
            endpoint: client.endpoint().into(),
            reason: "its files are served only to users who accepted its licence, and no token was given".into(),
        });
    }
    let commit = info.commit.as_str();
    let names: Vec<String> = info.siblings.iter().map(|s| s.name.clone()).collect();
    for required in ["config.json", "tokenizer.json"] {
        if !names.iter().any(|n| n == required) {
            return Err(HubError::EntryNotFound {
                repo: repo.into(),
                revision: revision.into(),
                file: required.into(),
                fix: "herd loads a model from its config.json, tokenizer.json and safetensors weights; this repo is not in that form (a GGUF-only repo needs a `path` source in the registry)".into(),
            });
        }
    }
    let size_of = |name: &str| info.siblings.iter().find(|s| s.name == name).and_then(|s| s.size);
    let mut files = Vec::new();
    // The index names the weight shards, so it comes first (a few kilobytes); then the plan is whole.
    let index = if names.iter().any(|n| n == INDEX_FILE) {
        // Before the plan, only its retries are worth reporting (its bytes count as cached in the plan).
        let mut retries_only = |event: Progress<'_>| {
            if let Progress::Retrying { .. } = event {
                progress(event)
            }
        };
        let fetched =
            fetch_file(config, &client, &cache, repo, commit, INDEX_FILE, size_of(INDEX_FILE), &mut retries_only)?;
        let path = cache.pointer(commit, INDEX_FILE);
        let text = std::fs::read_to_string(&path).map_err(io_error(&path))?;
        files.push(fetched);
        Some(serde_json::from_str::<serde_json::Value>(&text).map_err(|e| HubError::Protocol {
            url: client.resolve_url(repo, commit, INDEX_FILE),
            problem: format!("{INDEX_FILE} is not JSON: {e}"),
        })?)
    } else {
        None
    };
    let wanted = wanted_files(&names, index.as_ref());
    if !wanted.iter().any(|n| n.ends_with(".safetensors")) {
        return Err(HubError::EntryNotFound {
            repo: repo.into(),
            revision: revision.into(),
            file: SINGLE_WEIGHTS.into(),
            fix: format!("herd loads safetensors weights: {SINGLE_WEIGHTS}, or the shards {INDEX_FILE} names"),
        });
    }
    let total_bytes = wanted.iter().map(|n| size_of(n).unwrap_or(0)).sum();
    let cached_bytes =
        wanted.iter().filter(|n| cache.pointer(commit, n).is_file()).map(|n| size_of(n).unwrap_or(0)).sum();
    progress(Progress::Planned { repo, commit, files: wanted.len(), total_bytes, cached_bytes });
    for name in wanted.iter().filter(|n| n.as_str() != INDEX_FILE || index.is_none()) {
        files.push(fetch_file(config, &client, &cache, repo, commit, name, size_of(name), progress)?);
    }
    cache.write_ref(revision, commit)?;
    Ok(Snapshot { repo: repo.into(), commit: commit.into(), dir: cache.snapshot(commit), files })
}

/// Runs a request again after transient failures (network, 429, 5xx), the delay doubling each time.
fn with_retries<T>(
    config: &HubConfig,
    what: &str,
    progress: &mut dyn FnMut(Progress<'_>),
    mut request: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut attempt = 0;
    loop {
        match request() {
            Err(e) if is_transient(&e) && attempt < config.retries => {
                attempt += 1;
                progress(Progress::Retrying { name: what, attempt, problem: e.to_string() });
                std::thread::sleep(config.retry_delay * 2u32.saturating_pow(attempt - 1));
            }
            other => return other,
        }
    }
}

/// One file into the cache: found through its pointer, or its blob (shared with another revision), or
/// downloaded under the blob's lock.
#[allow(clippy::too_many_arguments)]
fn fetch_file(
    config: &HubConfig,
    client: &Client,
    cache: &RepoCache,
    repo: &str,
    commit: &str,
    name: &str,
    listed_size: Option<u64>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<FetchedFile> {
    let pointer = cache.pointer(commit, name);
    if let Ok(meta) = std::fs::metadata(&pointer)
        && meta.is_file()
        && listed_size.is_none_or(|size| size == meta.len())
    {
        return Ok(FetchedFile { name: name.into(), size: meta.len(), downloaded: 0 });
    }
    let meta = with_retries(config, name, progress, || client.file_meta(repo, commit, name))?;
    let blob = cache.blob(&meta.etag);
    let have = |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == meta.size);
    let mut downloaded = 0;
    if !have(&blob) {
        let _lock = cache.lock(&meta.etag)?;
        // Another process may have finished it while this one waited for the lock.
        if !have(&blob) {
            downloaded = download_blob(config, client, cache, repo, name, &meta, progress)?;
        }
    }
    cache.link(commit, name, &meta.etag)?;
    Ok(FetchedFile { name: name.into(), size: meta.size, downloaded })
}

/// Downloads a blob into `<etag>.incomplete` (resuming what is there), checks it and renames it into
/// place. Returns the bytes downloaded.
fn download_blob(
    config: &HubConfig,
    client: &Client,
    cache: &RepoCache,
    repo: &str,
    name: &str,
    meta: &FileMeta,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<u64> {
    let partial = cache.incomplete(&meta.etag);
    let parent = partial.parent().expect("a blob has a parent");
    std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&partial)
        .map_err(io_error(&partial))?;
    let length = |file: &std::fs::File| file.metadata().map(|m| m.len()).map_err(io_error(&partial));
    if length(&file)? > meta.size {
        file.set_len(0).map_err(io_error(&partial))?;
    }
    progress(Progress::File { name, size: meta.size, resumed_from: length(&file)? });
    let mut downloaded = 0u64;
    let mut attempt = 0;
    while length(&file)? < meta.size {
        let from = length(&file)?;
        let mut count = |n: u64| {
            downloaded += n;
            progress(Progress::Bytes(n));
        };
        match client.download(&meta.location, from, &mut file, &mut count) {
            Ok(Transfer::Done) if length(&file)? >= meta.size => break,
            Ok(Transfer::Done) => {
                return Err(HubError::Network {
                    url: meta.location.clone(),
                    problem: format!("the transfer ended at {} of {} bytes", length(&file)?, meta.size),
                });
            }
            Ok(Transfer::StartOver) => file.set_len(0).map_err(io_error(&partial))?,
            Err(e) if is_transient(&e) && attempt < config.retries => {
                attempt += 1;
                progress(Progress::Retrying { name, attempt, problem: e.to_string() });
                std::thread::sleep(config.retry_delay * 2u32.saturating_pow(attempt - 1));
            }
            Err(e) => return Err(e),
        }
    }
    drop(file);
    let actual_size = std::fs::metadata(&partial).map_err(io_error(&partial))?.len();
    let digest = content_digest(&partial, &meta.etag)?;
    if actual_size != meta.size || digest.as_ref().is_some_and(|d| *d != meta.etag) {
        let _ = std::fs::remove_file(&partial);
        return Err(HubError::Checksum {
            repo: repo.into(),
            file: name.into(),
            expected: format!("{} bytes, etag {}", meta.size, meta.etag),
            actual: format!("{actual_size} bytes, digest {}", digest.unwrap_or_else(|| "not computed".into())),
        });
    }
    let blob = cache.blob(&meta.etag);
    std::fs::rename(&partial, &blob).map_err(io_error(&blob))?;
    Ok(downloaded)
}

/// The digest the etag is of: SHA-256 for an LFS file's 64-hex etag, the git blob id (SHA-1 of
/// `blob LEN\0` and the bytes) for a 40-hex one; `None` for any other etag (only the size is checked).
fn content_digest(path: &Path, etag: &str) -> Result<Option<String>> {
    let hex_etag = etag.bytes().all(|b| b.is_ascii_hexdigit());
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let len = file.metadata().map_err(io_error(path))?.len();
    let mut feed = |update: &mut dyn FnMut(&[u8])| -> Result<()> {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).map_err(io_error(path))?;
            if n == 0 {
                return Ok(());
            }
            update(&buf[..n]);
        }
    };
    Ok(match etag.len() {
        64 if hex_etag => {
            let mut hasher = Sha256::new();
            feed(&mut |bytes| hasher.update(bytes))?;
            Some(hex::encode(hasher.finalize()))
        }
        40 if hex_etag => {
            let mut hasher = Sha1::new();
            hasher.update(format!("blob {len}\0").as_bytes());
            feed(&mut |bytes| hasher.update(bytes))?;
            Some(hex::encode(hasher.finalize()))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn wanted_files_are_what_herd_loads() {
        let repo = names(&[
            "README.md",
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "consolidated.safetensors",
            "original/params.json",
        ]);
        let index = json!({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}});
        assert_eq!(
            wanted_files(&repo, Some(&index)),
            names(&[
                "config.json",
                "tokenizer.json",
                "tokenizer_config.json",
                "model.safetensors.index.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
            ])
        );
        let single = names(&["config.json", "tokenizer.json", "model.safetensors", "other.safetensors"]);
        assert_eq!(wanted_files(&single, None), names(&["config.json", "tokenizer.json", "model.safetensors"]));
        // A hostile index cannot name a path outside the snapshot.
        let hostile = json!({"weight_map": {"a": "../../../../etc/cron.d/x"}});
        assert_eq!(wanted_files(&single, Some(&hostile)), names(&["config.json", "tokenizer.json"]));
    }

    #[test]
    fn digests_are_the_hubs_etags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello\n").unwrap();
        // `git hash-object` of "hello\n".
        assert_eq!(
            content_digest(&path, "ce013625030ba8dba906f756967f9e9ca394464a").unwrap().as_deref(),
            Some("ce013625030ba8dba906f756967f9e9ca394464a")
        );
        assert_eq!(
            content_digest(&path, &"0".repeat(64)).unwrap().as_deref(),
            Some("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
        );
        assert_eq!(content_digest(&path, "opaque-etag").unwrap(), None);
    }
}
