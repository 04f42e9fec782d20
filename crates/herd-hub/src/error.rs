use std::path::PathBuf;

/// What can go wrong fetching from the Hub. Each message says what happened and what to do, because the
/// CLI shows it as it is; none ever contains the token.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "`{repo}` is gated on {endpoint}: {reason}\n  fix: open {endpoint}/{repo} while logged in and accept its licence, then give herd a token that can read it: `hf auth login` (it writes $HF_HOME/token, which herd reads) or HF_TOKEN=hf_…; then run the same command again"
    )]
    Gated { repo: String, endpoint: String, reason: String },
    #[error(
        "`{repo}` was not found on {endpoint}{}\n  fix: check the repo id in the registry (`herd models`), or for a private repo give herd a token (`hf auth login` or HF_TOKEN)",
        if *.with_token { " with the token given" } else { " (no token was given)" }
    )]
    RepoNotFound { repo: String, endpoint: String, with_token: bool },
    #[error("`{repo}` has no revision `{revision}` on {endpoint}\n  fix: name a branch, tag or commit of the repo")]
    RevisionNotFound { repo: String, revision: String, endpoint: String },
    #[error("`{repo}` has no file {file} at {revision}\n  fix: {fix}")]
    EntryNotFound { repo: String, revision: String, file: String, fix: String },
    #[error(
        "`{repo}` is not in the Hub cache {cache} and HF_HUB_OFFLINE forbids downloading it\n  fix: unset HF_HUB_OFFLINE on a machine that reaches the Hub, or copy the cache folder models--{} here",
        repo.replace('/', "--")
    )]
    Offline { repo: String, cache: PathBuf },
    #[error("{url}: the Hub answered {status}: {message}\n  fix: {fix}")]
    Http { url: String, status: u16, message: String, fix: String },
    #[error(
        "{url}: {problem}\n  fix: check that this machine reaches the Hub (HF_ENDPOINT sets another address); run the same command again to resume"
    )]
    Network { url: String, problem: String },
    #[error(
        "{url}: {problem} (not the Hub's protocol)\n  fix: check HF_ENDPOINT: it must be a Hugging Face Hub or a mirror of it"
    )]
    Protocol { url: String, problem: String },
    #[error(
        "{file} of `{repo}` arrived as {actual} but the Hub's etag says {expected}; the download was discarded\n  fix: run the same command again; if it recurs, a proxy or mirror is altering the file"
    )]
    Checksum { repo: String, file: String, expected: String, actual: String },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

pub type Result<T, E = HubError> = std::result::Result<T, E>;

pub(crate) fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> HubError {
    let path = path.into();
    move |source| HubError::Io { path, source }
}
