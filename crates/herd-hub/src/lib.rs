//! herd's Hugging Face Hub client: fetches the files herd loads from a model repository (config,
//! tokenizer, chat template, processor configs, and the safetensors shards the index names) into the
//! Hub cache that Python's `huggingface_hub` and the `hf` CLI use, in their layout
//! (`models--org--name/{blobs,snapshots/<commit>,refs}`, locks under `.locks/`), so herd and the HF tools
//! share files. A download killed or cut off resumes with a Range request from its `.incomplete` blob;
//! every file is checked against the Hub's etag (SHA-256 for LFS files, the git blob id for the rest)
//! before it enters the cache; a second fetch downloads nothing.
//!
//! It reads the environment as `huggingface_hub` does ([`HubConfig::from_env`]): `HF_ENDPOINT`,
//! `HF_TOKEN` or the token file (`HF_TOKEN_PATH`, `$HF_HOME/token`), `HF_HUB_OFFLINE`. Gated repositories
//! (Gemma 3) are refused with the licence page and the login step before any weight is requested.
//!
//! ```no_run
//! use herd_hub::{HubConfig, fetch_snapshot};
//!
//! let config = HubConfig::from_env("/root/.cache/huggingface/hub".into(), "/root/.cache/huggingface".as_ref());
//! let snapshot = fetch_snapshot(&config, "Qwen/Qwen3-8B", "main", &mut |_| {})?;
//! println!("{} files in {}", snapshot.files.len(), snapshot.dir.display());
//! # Ok::<(), herd_hub::HubError>(())
//! ```
//!
//! Why herd's own client rather than the `hf-hub` crate: that crate's blocking API is built on ureq 2
//! (herd's HTTP stack is ureq 3, so a second client and TLS stack would be compiled), and herd needs
//! what it leaves out: resuming a cut download with Range, checking every file against its etag, the
//! Hub's gating errors worded with the fix, and the token kept off redirects to the CDN.

mod cache;
mod client;
mod error;
mod snapshot;

pub use cache::{RepoCache, repo_folder_name};
pub use error::{HubError, Result};
pub use snapshot::{FetchedFile, Progress, Snapshot, fetch_snapshot, wanted_files};

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The Hub's address when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where the Hub is and who asks: the environment's settings, as `huggingface_hub` reads them.
#[derive(Clone)]
pub struct HubConfig {
    /// `HF_ENDPOINT` without a trailing slash, else [`DEFAULT_ENDPOINT`].
    pub endpoint: String,
    /// The Hub cache folder (`HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`;
    /// herd-backend's `hf_hub_cache_dir` is the one reading of those variables).
    pub cache: PathBuf,
    /// `HF_TOKEN`, else the token file (`HF_TOKEN_PATH`, else `<hf_home>/token`, where `hf auth login`
    /// writes). Sent only to the endpoint's own host.
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE`: never touch the network; a repo is found in the cache or not at all.
    pub offline: bool,
    /// A cut or failed transfer is retried this many times (resuming where it stopped) before the fetch
    /// fails; the delay doubles from `retry_delay` each time.
    pub retries: u32,
    pub retry_delay: Duration,
}

impl std::fmt::Debug for HubConfig {
    /// The token is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("endpoint", &self.endpoint)
            .field("cache", &self.cache)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("offline", &self.offline)
            .finish()
    }
}

impl HubConfig {
    /// The environment's settings, with `cache` as the Hub cache folder and `hf_home` as
    /// `huggingface_hub`'s home (where `hf auth login` writes the token; herd-backend's `hf_home_dir` and
    /// `hf_hub_cache_dir` are the one reading of `HF_HOME`, `HF_HUB_CACHE` and `XDG_CACHE_HOME`).
    pub fn from_env(cache: PathBuf, hf_home: &Path) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let endpoint = var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.into()).trim_end_matches('/').to_string();
        let token_file = std::env::var_os("HF_TOKEN_PATH")
            .filter(|v| !v.is_empty())
            .map_or_else(|| hf_home.join("token"), PathBuf::from);
        let token = var("HF_TOKEN").map(|t| t.trim().to_string()).or_else(|| read_token(token_file));
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| is_true(&v));
        HubConfig { endpoint, cache, token, offline, retries: 4, retry_delay: Duration::from_secs(1) }
    }
}

/// `huggingface_hub`'s truthy spellings of a boolean variable.
fn is_true(value: &str) -> bool {
    matches!(value.trim().to_ascii_uppercase().as_str(), "1" | "ON" | "YES" | "TRUE")
}

fn read_token(path: PathBuf) -> Option<String> {
    std::fs::read_to_string(Path::new(&path)).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_spellings_are_huggingface_hubs() {
        for yes in ["1", "on", "YES", "True"] {
            assert!(is_true(yes), "{yes}");
        }
        for no in ["0", "off", "no", "false", ""] {
            assert!(!is_true(no), "{no}");
        }
    }

    #[test]
    fn the_token_never_prints() {
        let config = HubConfig {
            endpoint: DEFAULT_ENDPOINT.into(),
            cache: "/tmp/hub".into(),
            token: Some("hf_secret".into()),
            offline: false,
            retries: 0,
            retry_delay: Duration::ZERO,
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("hf_secret") && shown.contains("<set>"), "{shown}");
    }
}
