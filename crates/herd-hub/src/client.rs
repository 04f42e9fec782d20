//! The Hub's HTTP protocol, as `huggingface_hub` speaks it: a repo's revision and file list from
//! `/api/models/<repo>/revision/<rev>?blobs=true`; a file's commit, etag, size and download location from
//! a `HEAD` of `/<repo>/resolve/<commit>/<path>` (LFS files answer with a redirect to the CDN, their
//! etag in `X-Linked-Etag`); the bytes from that location, from an offset with `Range`.

use crate::HubConfig;
use crate::error::{HubError, Result};
use serde::Deserialize;
use std::io::{Read, Seek, Write};
use std::time::Duration;

/// A repo at one revision, as the model-info API describes it.
#[derive(Debug)]
pub(crate) struct ModelInfo {
    pub commit: String,
    /// The licence must be accepted before files can be read (`"gated": "auto"` or `"manual"`).
    pub gated: bool,
    pub siblings: Vec<Sibling>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Sibling {
    #[serde(rename = "rfilename")]
    pub name: String,
    #[serde(default)]
    pub size: Option<u64>,
}

#[derive(Deserialize)]
struct ModelInfoJson {
    sha: Option<String>,
    #[serde(default)]
    gated: serde_json::Value,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

/// What a `HEAD` of a file's resolve URL says.
#[derive(Debug)]
pub(crate) struct FileMeta {
    pub etag: String,
    pub size: u64,
    /// Where the bytes are: the CDN for LFS files, the resolve URL itself for the rest.
    pub location: String,
}

/// How a download ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Transfer {
    /// The body arrived whole (from the offset asked for, or from 0 where the server ignored Range).
    Done,
    /// The server refused the offset (416): the partial file is discarded and the download starts over.
    StartOver,
}

pub(crate) struct Client {
    agent: ureq::Agent,
    endpoint: String,
    /// `scheme://host[:port]` of the endpoint: the token goes to this origin only.
    origin: String,
    token: Option<String>,
}

impl Client {
    pub fn new(config: &HubConfig) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(20)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            // A stalled transfer is cut after a minute without a byte, then resumed by the retry.
            .timeout_per_read(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .user_agent(concat!("herd/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        let origin = origin(&config.endpoint).to_string();
        Client { agent, endpoint: config.endpoint.clone(), origin, token: config.token.clone() }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn authorize<B>(&self, url: &str, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) if same_origin(url, &self.origin) => request.header("Authorization", format!("Bearer {token}")),
            _ => request,
        }
    }

    pub fn model_info(&self, repo: &str, revision: &str) -> Result<ModelInfo> {
        let url = format!("{}/api/models/{repo}/revision/{}?blobs=true", self.endpoint, quote(revision, false));
        let mut response = self.authorize(&url, self.agent.get(&url)).call().map_err(network(&url))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(self.refusal(&url, repo, revision, None, &mut response));
        }
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| HubError::Network { url: url.clone(), problem: format!("reading the reply: {e}") })?;
        let info: ModelInfoJson = serde_json::from_str(&text).map_err(|e| HubError::Protocol {
            url: url.clone(),
            problem: format!("the model info is not JSON: {e}"),
        })?;
        let commit = info.sha.filter(|sha| crate::cache::is_commit(sha)).ok_or_else(|| HubError::Protocol {
            url: url.clone(),
            problem: "the model info names no commit (`sha`)".into(),
        })?;
        let gated = !matches!(info.gated, serde_json::Value::Null | serde_json::Value::Bool(false));
        Ok(ModelInfo { commit, gated, siblings: info.siblings })
    }

    /// `HEAD` of the file at `commit`, following relative redirects (a renamed repo) but not the CDN's.
    pub fn file_meta(&self, repo: &str, commit: &str, file: &str) -> Result<FileMeta> {
        let mut url = self.resolve_url(repo, commit, file);
        for _ in 0..5 {
            let request = self.agent.head(&url).header("Accept-Encoding", "identity").config().max_redirects(0).build();
            let mut response = self.authorize(&url, request).call().map_err(network(&url))?;
            let status = response.status().as_u16();
            let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
            let location = header("location");
            if (300..400).contains(&status) && location.as_deref().is_some_and(|l| l.starts_with('/')) {
                url = format!("{}{}", self.origin, location.unwrap_or_default());
                continue;
            }
            if !(200..400).contains(&status) {
                return Err(self.refusal(&url, repo, commit, Some(file), &mut response));
            }
            let etag = header("x-linked-etag").or_else(|| header("etag")).map(|e| normalize_etag(&e));
            let size = header("x-linked-size").or_else(|| header("content-length")).and_then(|s| s.trim().parse().ok());
            let (Some(etag), Some(size)) = (etag, size) else {
                return Err(HubError::Protocol { url, problem: "the reply has no ETag or no size".into() });
            };
            if !crate::cache::check_etag(&etag) {
                return Err(HubError::Protocol { url, problem: format!("the etag {etag:?} is not a blob id") });
            }
            let location = match location {
                Some(l) if l.starts_with('/') => format!("{}{l}", self.origin),
                Some(l) if (300..400).contains(&status) => l,
                _ => url.clone(),
            };
            return Ok(FileMeta { etag, size, location });
        }
        Err(HubError::Protocol { url, problem: "more than 5 redirects within the Hub".into() })
    }

    pub fn resolve_url(&self, repo: &str, revision: &str, file: &str) -> String {
        format!("{}/{repo}/resolve/{}/{}", self.endpoint, quote(revision, false), quote(file, true))
    }

    /// Downloads `url` into `out` from byte `from` (where `out` already holds that many), calling
    /// `on_bytes` as bytes arrive. A cut connection is an error; the bytes written so far stay in `out`.
    pub fn download(
        &self,
        url: &str,
        from: u64,
        out: &mut std::fs::File,
        on_bytes: &mut dyn FnMut(u64),
    ) -> Result<Transfer> {
        let mut request = self.agent.get(url).header("Accept-Encoding", "identity");
        if from > 0 {
            request = request.header("Range", format!("bytes={from}-"));
        }
        let request = request.config().max_redirects(5).build();
        let mut response = self.authorize(url, request).call().map_err(network(url))?;
        let status = response.status().as_u16();
        let write_error =
            |e: std::io::Error| HubError::Network { url: url.to_string(), problem: format!("writing: {e}") };
        match status {
            206 if from > 0 => {
                let start = response
                    .headers()
                    .get("content-range")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|r| r.strip_prefix("bytes "))
                    .and_then(|r| r.split('-').next())
                    .and_then(|s| s.trim().parse::<u64>().ok());
                if start != Some(from) {
                    return Err(HubError::Protocol {
                        url: url.into(),
                        problem: format!("asked for bytes from {from}, the reply starts at {start:?}"),
                    });
                }
                out.seek(std::io::SeekFrom::Start(from)).map_err(write_error)?;
            }
            // The whole file: a server that ignores Range answers 200, and the partial bytes are replaced.
            200 => {
                out.set_len(0).map_err(write_error)?;
                out.seek(std::io::SeekFrom::Start(0)).map_err(write_error)?;
            }
            416 => return Ok(Transfer::StartOver),
            _ => return Err(self.refusal(url, "", "", None, &mut response)),
        }
        let mut body = response.into_body().into_reader();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = body
                .read(&mut buf)
                .map_err(|e| HubError::Network { url: url.into(), problem: format!("the transfer broke off: {e}") })?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n]).map_err(write_error)?;
            on_bytes(n as u64);
        }
        out.flush().map_err(write_error)?;
        Ok(Transfer::Done)
    }

    /// The error a non-success reply stands for, from the Hub's `X-Error-Code` where it gives one.
    fn refusal(
        &self,
        url: &str,
        repo: &str,
        revision: &str,
        file: Option<&str>,
        response: &mut ureq::http::Response<ureq::Body>,
    ) -> HubError {
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let code = header("x-error-code").unwrap_or_default();
        let message = header("x-error-message").unwrap_or_else(|| {
            let body = response.body_mut().with_config().limit(64 << 10).read_to_string().unwrap_or_default();
            serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_else(|| body.chars().take(300).collect())
        });
        let endpoint = self.endpoint.clone();
        match (code.as_str(), status) {
            ("GatedRepo", _) => HubError::Gated { repo: repo.into(), endpoint, reason: message },
            ("RepoNotFound", _) | ("", 401) => {
                HubError::RepoNotFound { repo: repo.into(), endpoint, with_token: self.token.is_some() }
            }
            ("RevisionNotFound", _) => {
                HubError::RevisionNotFound { repo: repo.into(), revision: revision.into(), endpoint }
            }
            ("EntryNotFound", _) => HubError::EntryNotFound {
                repo: repo.into(),
                revision: revision.into(),
                file: file.unwrap_or(url).into(),
                fix: "the repo lists it but does not serve it: run the same command again later".into(),
            },
            _ => HubError::Http {
                url: url.into(),
                status,
                message,
                fix: if status == 429 || status >= 500 {
                    "the Hub is busy or failing: run the same command again in a while (it resumes)".into()
                } else {
                    "check HF_ENDPOINT and the repo id".into()
                },
            },
        }
    }
}

/// Whether a failure may pass if the same request is made again: a network failure, or the Hub busy.
pub(crate) fn is_transient(error: &HubError) -> bool {
    match error {
        HubError::Network { .. } => true,
        HubError::Http { status, .. } => *status == 429 || *status >= 500,
        _ => false,
    }
}

fn network(url: &str) -> impl FnOnce(ureq::Error) -> HubError {
    let url = url.to_string();
    move |e| HubError::Network { url, problem: e.to_string() }
}

/// `W/"abc"` → `abc`, as `huggingface_hub` normalises etags.
fn normalize_etag(etag: &str) -> String {
    etag.trim().trim_start_matches("W/").trim_matches('"').to_string()
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

fn same_origin(url: &str, origin_of_endpoint: &str) -> bool {
    origin(url).eq_ignore_ascii_case(origin_of_endpoint)
}

/// Percent-encodes a revision (`/` too: `refs/pr/1`) or a repo path (`/` kept), as the Hub's URLs need.
fn quote(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_origins_and_quoting() {
        assert_eq!(normalize_etag("W/\"abc\""), "abc");
        assert_eq!(normalize_etag("\"abc\""), "abc");
        assert_eq!(origin("http://127.0.0.1:8080/a/b"), "http://127.0.0.1:8080");
        assert_eq!(origin("https://huggingface.co"), "https://huggingface.co");
        assert!(same_origin("https://huggingface.co/x", "https://huggingface.co"));
        assert!(!same_origin("https://cdn-lfs.hf.co/x", "https://huggingface.co"));
        assert!(!same_origin("https://huggingface.co.evil.example/x", "https://huggingface.co"));
        assert_eq!(quote("refs/pr/1", false), "refs%2Fpr%2F1");
        assert_eq!(quote("sub dir/a+b.json", true), "sub%20dir/a%2Bb.json");
    }
}
