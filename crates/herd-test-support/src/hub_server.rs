//! A loopback stand-in for the Hugging Face Hub, serving model repositories as huggingface.co serves them
//! to `huggingface_hub` and to herd-hub: model info (`/api/models/...`), `resolve` URLs (plain git files
//! with their blob id as ETag, LFS files redirected to a second listener standing for the CDN, with
//! `X-Linked-Etag`/`X-Linked-Size`), Range requests, the Hub's error codes (`RepoNotFound`,
//! `RevisionNotFound`, `EntryNotFound`, `GatedRepo`) and gated repositories that need an allowed token.
//! It can cut the next file bodies short, as a network cut mid-file does, and counts what it served.
//! Point a client at it with `HF_ENDPOINT=`[`HubServer::endpoint`]. It serves 127.0.0.1 only and stops
//! when dropped.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// One file of a repository; `name` is its path in the repository (`/` separates subfolders).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// A model repository with a single commit, which both `main` and the commit hash name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubRepo {
    /// "org/name".
    pub id: String,
    /// 40 lowercase hex chars.
    pub commit: String,
    pub files: Vec<HubFile>,
    /// Licence must be accepted: resolve requests need `Authorization: Bearer <token>` with a token in
    /// [`HubServer`]'s allowed set ([`HubServer::allow_token`]). Model info is served to anyone.
    pub gated: bool,
}

impl HubRepo {
    /// A public repository; its commit is derived from the files' names and bytes (the first 40 hex
    /// digits of a SHA-256 over them), so the same files always make the same commit.
    pub fn new(id: &str, files: Vec<(String, Vec<u8>)>) -> Self {
        let mut hash = Sha256::new();
        for (name, bytes) in &files {
            hash.update((name.len() as u64).to_le_bytes());
            hash.update(name.as_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        }
        let commit = hex::encode(hash.finalize())[..40].to_owned();
        let files = files.into_iter().map(|(name, bytes)| HubFile { name, bytes }).collect();
        HubRepo { id: id.to_owned(), commit, files, gated: false }
    }

    /// The same repository behind a licence: its `gated` field set.
    pub fn gated(mut self) -> Self {
        self.gated = true;
        self
    }

    /// Whether a file is stored with git LFS on the Hub: here, names ending in `.safetensors` (as on the
    /// Hub, where weights are LFS and JSON files plain git).
    pub fn is_lfs(name: &str) -> bool {
        name.ends_with(".safetensors")
    }

    /// The etag a client checks the file against (unquoted): the SHA-256 of the bytes (hex) for an LFS
    /// file, else its git blob id (SHA-1 of `blob {len}\0` + bytes, hex). None if there is no such file.
    pub fn etag(&self, name: &str) -> Option<String> {
        let file = self.file(name)?;
        Some(if Self::is_lfs(name) { sha256_hex(&file.bytes) } else { git_blob_id(&file.bytes) })
    }

    fn file(&self, name: &str) -> Option<&HubFile> {
        self.files.iter().find(|f| f.name == name)
    }

    fn has_revision(&self, revision: &str) -> bool {
        revision == "main" || revision == self.commit
    }
}

/// The tiny random llama checkpoint of [`crate::tiny_text`] as a Hub repository would hold a larger model:
/// its weights in two shards named by `model.safetensors.index.json` (the embedding and layer 0, then
/// the rest), its config, generation config and tokenizer files, plus files herd must not fetch (a
/// README and a `consolidated.safetensors` the index does not name, as Mistral's repos carry).
pub fn tiny_sharded_repo(id: &str) -> HubRepo {
    use crate::tiny_text::{SEED, TinyFamily, checkpoint_files, safetensors_bytes, tensors};
    let family = TinyFamily::Llama;
    let all = tensors(family, SEED);
    let first = |name: &str| name == "model.embed_tokens.weight" || name.starts_with("model.layers.0.");
    let shard_names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
    let (one, two): (std::collections::BTreeMap<_, _>, std::collections::BTreeMap<_, _>) =
        all.clone().into_iter().partition(|(name, _)| first(name));
    let weight_map: serde_json::Map<String, Value> =
        all.keys().map(|name| (name.clone(), json!(shard_names[usize::from(!first(name))]))).collect();
    let total_size: usize = all.values().map(|(_, data)| data.len() * 4).sum();
    let index = json!({"metadata": {"total_size": total_size}, "weight_map": weight_map});
    let mut files: Vec<(String, Vec<u8>)> = checkpoint_files(family, SEED)
        .into_iter()
        .filter(|(name, _)| *name != "model.safetensors")
        .map(|(name, bytes)| (name.to_owned(), bytes))
        .collect();
    files.push(("model.safetensors.index.json".into(), serde_json::to_vec_pretty(&index).expect("json")));
    files.push((shard_names[0].into(), safetensors_bytes(&one)));
    files.push((shard_names[1].into(), safetensors_bytes(&two)));
    files.push((
        "README.md".into(),
        b"# tiny-llama
A tiny random checkpoint for herd's tests.
"
        .to_vec(),
    ));
    files.push(("consolidated.safetensors".into(), safetensors_bytes(&two)));
    HubRepo::new(id, files)
}

/// The running server: the Hub on `port`, its CDN (where LFS downloads are redirected) on `cdn_port`.
pub struct HubServer {
    /// The Hub ("huggingface.co").
    pub port: u16,
    /// A second listener standing for the CDN host that LFS downloads are redirected to.
    pub cdn_port: u16,
    shared: Arc<Shared>,
    accept: Vec<JoinHandle<()>>,
}

/// What the connection threads share.
struct Shared {
    repos: Vec<HubRepo>,
    /// (SHA-256 hex, repo index, file index) of every LFS file: what the CDN serves.
    lfs: Vec<(String, usize, usize)>,
    cdn_port: u16,
    stop: AtomicBool,
    tokens: Mutex<HashSet<String>>,
    /// (file bodies still to cut, bytes each sends before the cut).
    cuts: Mutex<(usize, u64)>,
    body_bytes: AtomicU64,
    body_requests: AtomicUsize,
    log: Mutex<Vec<String>>,
    /// File bodies go out at most this many bytes a second (`None`: as fast as the socket takes them).
    throttle: Mutex<Option<u64>>,
}

impl HubServer {
    pub fn start(repos: Vec<HubRepo>) -> Self {
        let hub = TcpListener::bind("127.0.0.1:0").expect("hub port");
        let cdn = TcpListener::bind("127.0.0.1:0").expect("cdn port");
        let port = hub.local_addr().unwrap().port();
        let cdn_port = cdn.local_addr().unwrap().port();
        let mut lfs = Vec::new();
        for (r, repo) in repos.iter().enumerate() {
            for (f, file) in repo.files.iter().enumerate() {
                if HubRepo::is_lfs(&file.name) {
                    lfs.push((sha256_hex(&file.bytes), r, f));
                }
            }
        }
        let shared = Arc::new(Shared {
            repos,
            lfs,
            cdn_port,
            stop: AtomicBool::new(false),
            tokens: Mutex::new(HashSet::new()),
            cuts: Mutex::new((0, 0)),
            body_bytes: AtomicU64::new(0),
            body_requests: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
            throttle: Mutex::new(None),
        });
        let accept = vec![accept_loop(hub, shared.clone(), false), accept_loop(cdn, shared.clone(), true)];
        HubServer { port, cdn_port, shared, accept }
    }

    /// `http://127.0.0.1:{port}`: the value of `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Lets `token` read gated repositories.
    pub fn allow_token(&self, token: &str) {
        self.shared.tokens.lock().unwrap().insert(token.to_owned());
    }

    /// The next `n` file-body responses (on the Hub or the CDN listener, GET with a body) send only
    /// `after_bytes` of the body, then drop the connection (the headers announce the full
    /// Content-Length), as a network cut mid-file does. A body no longer than `after_bytes` goes out
    /// whole, and still uses up one of the `n`.
    pub fn cut_next_bodies(&self, n: usize, after_bytes: u64) {
        *self.shared.cuts.lock().unwrap() = (n, after_bytes);
    }

    /// File bodies (on either listener) go out at most `bytes_per_second` from now on, in 4 KiB pieces
    /// (`None`: at full speed), so that a test can kill a client mid-file.
    pub fn throttle(&self, bytes_per_second: Option<u64>) {
        *self.shared.throttle.lock().unwrap() = bytes_per_second.filter(|&b| b > 0);
    }

    /// File-body bytes written to sockets (not JSON API bodies), on both listeners.
    pub fn body_bytes_served(&self) -> u64 {
        self.shared.body_bytes.load(Ordering::SeqCst)
    }

    /// GETs that began sending a file body (200 or 206), on both listeners.
    pub fn body_requests(&self) -> usize {
        self.shared.body_requests.load(Ordering::SeqCst)
    }

    /// One line per request on either listener, in arrival order: `METHOD PATH-AND-QUERY`, followed by
    /// ` RANGE` (the Range header's value) when the request had one.
    pub fn requests(&self) -> Vec<String> {
        self.shared.log.lock().unwrap().clone()
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.accept.drain(..) {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, cdn: bool) -> JoinHandle<()> {
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !shared.stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let shared = shared.clone();
                    std::thread::spawn(move || handle(stream, &shared, cdn));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    })
}

struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads the request line and headers (requests to the Hub have no bodies).
fn read_request(stream: &mut TcpStream) -> Option<Request> {
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut data = Vec::new();
    let head_end = crate::http::read_head(stream, &mut data, 64 * 1024)? - 4;
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target) = (request_line.next()?.to_owned(), request_line.next()?.to_owned());
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
    Some(Request { method, target, headers })
}

/// A response before it is written: `body` is the whole body the GET would carry, `file` whether it is
/// a file body (counted, and cut when armed) rather than JSON.
struct Response<'a> {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Cow<'a, [u8]>,
    file: bool,
}

fn handle(mut stream: TcpStream, shared: &Shared, cdn: bool) {
    let Some(request) = read_request(&mut stream) else { return };
    let mut line = format!("{} {}", request.method, request.target);
    if let Some(range) = request.header("range") {
        line = format!("{line} {range}");
    }
    shared.log.lock().unwrap().push(line);
    let response = match route(&request, shared, cdn) {
        Ok(response) => response,
        Err((status, code, message)) => {
            let body = Cow::Owned(serde_json::to_vec(&json!({ "error": message })).unwrap());
            let mut headers = vec![("Content-Type", "application/json".to_owned())];
            if let Some(code) = code {
                headers.push(("X-Error-Code", code.to_owned()));
                headers.push(("X-Error-Message", message));
            }
            Response { status, headers, body, file: false }
        }
    };
    send(&mut stream, shared, request.method == "HEAD", response);
}

/// An error reply: status, `X-Error-Code` (None: none sent) and message.
type Failure = (&'static str, Option<&'static str>, String);

fn route<'a>(request: &Request, shared: &'a Shared, cdn: bool) -> Result<Response<'a>, Failure> {
    let not_found = || ("404 Not Found", None, "Not Found".to_owned());
    if request.method != "GET" && request.method != "HEAD" {
        return Err(not_found());
    }
    let (path, query) = request.target.split_once('?').unwrap_or((&request.target, ""));
    let segments: Vec<String> = path.strip_prefix('/').unwrap_or(path).split('/').map(percent_decode).collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    if cdn {
        return match segs.as_slice() {
            ["repos", sha256, _basename] => {
                let &(_, r, f) = shared.lfs.iter().find(|(s, _, _)| s == sha256).ok_or_else(not_found)?;
                let bytes = &shared.repos[r].files[f].bytes;
                Ok(file_response(request, bytes, sha256, Vec::new()))
            }
            _ => Err(not_found()),
        };
    }
    match segs.as_slice() {
        ["api", "models", org, name] => model_info(shared, &format!("{org}/{name}"), "main", query),
        ["api", "models", org, name, "revision", revision] => {
            model_info(shared, &format!("{org}/{name}"), revision, query)
        }
        [org, name, "resolve", revision, file @ ..] if !file.is_empty() => {
            resolve(request, shared, &format!("{org}/{name}"), revision, &file.join("/"))
        }
        _ => Err(not_found()),
    }
}

fn find_repo<'a>(shared: &'a Shared, id: &str, revision: &str) -> Result<&'a HubRepo, Failure> {
    let repo = shared.repos.iter().find(|r| r.id == id).ok_or((
        "401 Unauthorized",
        Some("RepoNotFound"),
        "Repository not found".to_owned(),
    ))?;
    if !repo.has_revision(revision) {
        return Err(("404 Not Found", Some("RevisionNotFound"), format!("Invalid rev id: {revision}")));
    }
    Ok(repo)
}

fn model_info<'a>(shared: &'a Shared, id: &str, revision: &str, query: &str) -> Result<Response<'a>, Failure> {
    let repo = find_repo(shared, id, revision)?;
    let blobs = query.split('&').any(|kv| {
        kv.split_once('=').is_some_and(|(k, v)| k == "blobs" && (v.eq_ignore_ascii_case("true") || v == "1"))
    });
    let siblings: Vec<Value> = repo
        .files
        .iter()
        .map(|f| {
            if !blobs {
                return json!({ "rfilename": f.name });
            }
            let size = f.bytes.len();
            if HubRepo::is_lfs(&f.name) {
                let pointer = lfs_pointer(&f.bytes);
                json!({
                    "rfilename": f.name,
                    "size": size,
                    "blobId": git_blob_id(pointer.as_bytes()),
                    "lfs": { "sha256": sha256_hex(&f.bytes), "size": size, "pointerSize": pointer.len() },
                })
            } else {
                json!({ "rfilename": f.name, "size": size, "blobId": git_blob_id(&f.bytes) })
            }
        })
        .collect();
    let info = json!({
        "id": repo.id,
        "modelId": repo.id,
        "sha": repo.commit,
        "gated": if repo.gated { json!("manual") } else { json!(false) },
        "private": false,
        "siblings": siblings,
    });
    let body = Cow::Owned(serde_json::to_vec(&info).unwrap());
    Ok(Response { status: "200 OK", headers: vec![("Content-Type", "application/json".to_owned())], body, file: false })
}

fn resolve<'a>(
    request: &Request,
    shared: &'a Shared,
    id: &str,
    revision: &str,
    name: &str,
) -> Result<Response<'a>, Failure> {
    let repo = shared.repos.iter().find(|r| r.id == id).ok_or((
        "401 Unauthorized",
        Some("RepoNotFound"),
        "Repository not found".to_owned(),
    ))?;
    if repo.gated {
        let token = request.header("authorization").and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        match token {
            None => {
                let message = format!(
                    "Access to model {id} is restricted. You must have access to it and be authenticated to access it. Please log in."
                );
                return Err(("401 Unauthorized", Some("GatedRepo"), message));
            }
            Some(token) if !shared.tokens.lock().unwrap().contains(token) => {
                let message = format!(
                    "Access to model {id} is restricted and you are not in the authorized list. Visit https://huggingface.co/{id} to ask for access."
                );
                return Err(("403 Forbidden", Some("GatedRepo"), message));
            }
            Some(_) => {}
        }
    }
    let repo = find_repo(shared, id, revision)?;
    let file = repo.file(name).ok_or(("404 Not Found", Some("EntryNotFound"), "Entry not found".to_owned()))?;
    let commit = ("X-Repo-Commit", repo.commit.clone());
    if !HubRepo::is_lfs(name) {
        return Ok(file_response(request, &file.bytes, &git_blob_id(&file.bytes), vec![commit]));
    }
    let sha256 = sha256_hex(&file.bytes);
    let basename = name.rsplit('/').next().unwrap_or(name);
    let location =
        format!("http://127.0.0.1:{}/repos/{sha256}/{}?signature=test", shared.cdn_port, percent_encode(basename));
    // On the Hub the redirect's own ETag is the LFS pointer's blob id: a client must read X-Linked-Etag.
    let pointer_id = git_blob_id(lfs_pointer(&file.bytes).as_bytes());
    let headers = vec![
        commit,
        ("Location", location),
        ("X-Linked-Etag", format!("\"{sha256}\"")),
        ("X-Linked-Size", file.bytes.len().to_string()),
        ("ETag", format!("\"{pointer_id}\"")),
    ];
    Ok(Response { status: "302 Found", headers, body: Cow::Borrowed(&[]), file: false })
}

/// 200 with the whole file, 206 with the slice a satisfiable Range asks for, 416 past the end.
fn file_response<'a>(
    request: &Request,
    bytes: &'a [u8],
    etag: &str,
    mut headers: Vec<(&'static str, String)>,
) -> Response<'a> {
    headers.push(("ETag", format!("\"{etag}\"")));
    headers.push(("Accept-Ranges", "bytes".to_owned()));
    headers.push(("Content-Type", "application/octet-stream".to_owned()));
    let total = bytes.len() as u64;
    match parse_range(request.header("range"), total) {
        Range::Whole => Response { status: "200 OK", headers, body: Cow::Borrowed(bytes), file: true },
        Range::Slice(start, end) => {
            headers.push(("Content-Range", format!("bytes {start}-{end}/{total}")));
            let body = Cow::Borrowed(&bytes[start as usize..=end as usize]);
            Response { status: "206 Partial Content", headers, body, file: true }
        }
        Range::Unsatisfiable => {
            headers.push(("Content-Range", format!("bytes */{total}")));
            Response { status: "416 Range Not Satisfiable", headers, body: Cow::Borrowed(&[]), file: false }
        }
    }
}

enum Range {
    Whole,
    /// Inclusive byte positions.
    Slice(u64, u64),
    Unsatisfiable,
}

/// `bytes=START-`, `bytes=START-END` (inclusive, END clamped to the last byte) and `bytes=-SUFFIX`. A
/// header that is missing, malformed or asks for several ranges is ignored (the whole file), as RFC 9110
/// allows.
fn parse_range(header: Option<&str>, total: u64) -> Range {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else { return Range::Whole };
    let Some((start, end)) = spec.trim().split_once('-') else { return Range::Whole };
    if spec.contains(',') {
        return Range::Whole;
    }
    let (start, end) = (start.trim(), end.trim());
    if start.is_empty() {
        return match end.parse::<u64>() {
            Ok(0) => Range::Unsatisfiable,
            Ok(_) if total == 0 => Range::Unsatisfiable,
            Ok(suffix) => Range::Slice(total.saturating_sub(suffix), total - 1),
            Err(_) => Range::Whole,
        };
    }
    let Ok(start) = start.parse::<u64>() else { return Range::Whole };
    let end = if end.is_empty() {
        u64::MAX
    } else {
        match end.parse::<u64>() {
            Ok(end) if end >= start => end,
            _ => return Range::Whole,
        }
    };
    if start >= total { Range::Unsatisfiable } else { Range::Slice(start, end.min(total - 1)) }
}

/// Writes the response: headers with the full Content-Length, then (not for HEAD) the body, or only its
/// first bytes when a cut is armed; then closes the connection.
fn send(stream: &mut TcpStream, shared: &Shared, head_only: bool, response: Response<'_>) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
    let mut head = format!("HTTP/1.1 {}\r\n", response.status);
    for (name, value) in &response.headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += &format!("Content-Length: {}\r\nConnection: close\r\n\r\n", response.body.len());
    if stream.write_all(head.as_bytes()).is_err() || head_only {
        let _ = stream.flush();
        let _ = stream.shutdown(Shutdown::Both);
        return;
    }
    let mut body: &[u8] = &response.body;
    let mut cut = false;
    if response.file {
        shared.body_requests.fetch_add(1, Ordering::SeqCst);
        let mut cuts = shared.cuts.lock().unwrap();
        if cuts.0 > 0 {
            cuts.0 -= 1;
            cut = true;
            body = &body[..body.len().min(usize::try_from(cuts.1).unwrap_or(usize::MAX))];
        }
    }
    let throttle = if response.file { *shared.throttle.lock().unwrap() } else { None };
    let piece = if throttle.is_some() { 4 * 1024 } else { 64 * 1024 };
    for chunk in body.chunks(piece) {
        if shared.stop.load(Ordering::Relaxed) || stream.write_all(chunk).is_err() {
            break;
        }
        if response.file {
            shared.body_bytes.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        if let Some(rate) = throttle {
            let _ = stream.flush();
            std::thread::sleep(Duration::from_secs_f64(chunk.len() as f64 / rate as f64));
        }
    }
    let _ = stream.flush();
    let _ = stream.shutdown(if cut { Shutdown::Both } else { Shutdown::Write });
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The pointer git stores in place of an LFS file.
fn lfs_pointer(bytes: &[u8]) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n", sha256_hex(bytes), bytes.len())
}

/// Git's blob id: SHA-1 of `blob {len}\0` followed by the bytes, hex.
fn git_blob_id(bytes: &[u8]) -> String {
    let mut data = format!("blob {}\0", bytes.len()).into_bytes();
    data.extend_from_slice(bytes);
    hex::encode(sha1::Sha1::digest(&data))
}

/// Decodes `%XX` escapes in a path segment; a malformed escape is kept as written.
fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = segment.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Escapes every byte but RFC 3986's unreserved characters.
fn percent_encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Reply {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }

        fn json(&self) -> Value {
            serde_json::from_slice(&self.body).unwrap()
        }
    }

    /// One raw HTTP/1.1 request; the reply is read to EOF (or a reset).
    fn call(port: u16, method: &str, target: &str, headers: &[(&str, &str)]) -> Reply {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut request = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
        for (k, v) in headers {
            request += &format!("{k}: {v}\r\n");
        }
        request += "\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        let mut data = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => data.extend_from_slice(&buf[..n]),
            }
        }
        let at = data.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete head");
        let head = String::from_utf8(data[..at].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines
            .map(|l| l.split_once(':').unwrap())
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        Reply { status, headers, body: data[at + 4..].to_vec() }
    }

    fn weights() -> Vec<u8> {
        (0..5000u32).map(|i| (i * 7 % 251) as u8).collect()
    }

    fn repo() -> HubRepo {
        HubRepo::new(
            "org/tiny",
            vec![
                ("config.json".to_owned(), br#"{"model_type": "llama"}"#.to_vec()),
                ("model.safetensors".to_owned(), weights()),
                ("sub/extra.json".to_owned(), b"{}".to_vec()),
            ],
        )
    }

    fn server() -> (HubServer, HubRepo) {
        let repo = repo();
        (
            HubServer::start(vec![
                repo.clone(),
                HubRepo::new("org/locked", vec![("a.json".into(), b"[1]".to_vec())]).gated(),
            ]),
            repo,
        )
    }

    #[test]
    fn blob_ids_are_git_sha1() {
        // `git hash-object` of an empty file and of "hello\n".
        assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(git_blob_id(b"hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
        let repo = repo();
        assert_eq!(repo.commit.len(), 40);
        assert!(repo.commit.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(repo.etag("model.safetensors").unwrap(), sha256_hex(&weights()));
        assert_eq!(repo.etag("config.json").unwrap(), git_blob_id(br#"{"model_type": "llama"}"#));
        assert_eq!(repo.etag("missing.json"), None);
    }

    #[test]
    fn model_info_with_and_without_blobs() {
        let (hub, repo) = server();
        let plain = call(hub.port, "GET", "/api/models/org/tiny/revision/main", &[]);
        assert_eq!(plain.status, 200);
        assert_eq!(plain.header("content-type"), Some("application/json"));
        let info = plain.json();
        assert_eq!(info["id"], "org/tiny");
        assert_eq!(info["modelId"], "org/tiny");
        assert_eq!(info["sha"], repo.commit.as_str());
        assert_eq!(info["gated"], false);
        assert_eq!(info["private"], false);
        let siblings = info["siblings"].as_array().unwrap();
        assert_eq!(siblings.len(), 3);
        assert_eq!(siblings[2], json!({ "rfilename": "sub/extra.json" }));

        let target = format!("/api/models/org/tiny/revision/{}?blobs=true&expand=x", repo.commit);
        let info = call(hub.port, "GET", &target, &[]).json();
        let siblings = info["siblings"].as_array().unwrap();
        assert_eq!(siblings[0]["rfilename"], "config.json");
        assert_eq!(siblings[0]["size"], 23);
        assert_eq!(siblings[0]["blobId"], repo.etag("config.json").unwrap().as_str());
        assert!(siblings[0].get("lfs").is_none());
        let weights = &siblings[1];
        assert_eq!(weights["size"], 5000);
        assert_eq!(weights["lfs"]["sha256"], repo.etag("model.safetensors").unwrap().as_str());
        assert_eq!(weights["lfs"]["size"], 5000);
        assert_eq!(weights["lfs"]["pointerSize"], 129);
        let blob_id = weights["blobId"].as_str().unwrap();
        assert_eq!(blob_id.len(), 40);
        assert_ne!(blob_id, &repo.etag("model.safetensors").unwrap()[..40]);
        assert!(siblings[2].get("lfs").is_none());

        // Without a revision the Hub answers for main; a gated repo's info needs no token.
        assert_eq!(call(hub.port, "GET", "/api/models/org/tiny", &[]).json()["sha"], repo.commit.as_str());
        let locked = call(hub.port, "GET", "/api/models/org/locked/revision/main", &[]);
        assert_eq!((locked.status, locked.json()["gated"].clone()), (200, json!("manual")));
    }

    #[test]
    fn head_of_a_plain_file() {
        let (hub, repo) = server();
        let reply = call(hub.port, "HEAD", "/org/tiny/resolve/main/config.json", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("etag").unwrap(), format!("\"{}\"", repo.etag("config.json").unwrap()));
        assert_eq!(reply.header("x-repo-commit"), Some(repo.commit.as_str()));
        assert_eq!(reply.header("content-length"), Some("23"));
        assert_eq!(reply.header("accept-ranges"), Some("bytes"));
        assert!(reply.body.is_empty());
        assert_eq!(hub.body_requests(), 0);

        // A subfolder, with the revision given as the commit and an escaped name.
        let target = format!("/org/tiny/resolve/{}/sub/%65xtra.json", repo.commit);
        let reply = call(hub.port, "GET", &target, &[]);
        assert_eq!((reply.status, reply.body.as_slice()), (200, &b"{}"[..]));
        assert_eq!((hub.body_requests(), hub.body_bytes_served()), (1, 2));
    }

    #[test]
    fn lfs_file_redirects_to_the_cdn() {
        let (hub, repo) = server();
        for method in ["HEAD", "GET"] {
            let reply = call(hub.port, method, "/org/tiny/resolve/main/model.safetensors", &[]);
            assert_eq!(reply.status, 302);
            let sha256 = repo.etag("model.safetensors").unwrap();
            let location = format!("http://127.0.0.1:{}/repos/{sha256}/model.safetensors?signature=test", hub.cdn_port);
            assert_eq!(reply.header("location"), Some(location.as_str()));
            assert_eq!(reply.header("x-linked-etag").unwrap(), format!("\"{sha256}\""));
            assert_eq!(reply.header("x-linked-size"), Some("5000"));
            assert_ne!(reply.header("etag"), reply.header("x-linked-etag"));
            assert_eq!(reply.header("x-repo-commit"), Some(repo.commit.as_str()));
            assert_eq!(reply.header("content-length"), Some("0"));
            assert!(reply.body.is_empty());
        }
        let sha256 = repo.etag("model.safetensors").unwrap();
        let target = format!("/repos/{sha256}/model.safetensors?signature=test");
        let head = call(hub.cdn_port, "HEAD", &target, &[]);
        assert_eq!((head.status, head.header("content-length")), (200, Some("5000")));
        let reply = call(hub.cdn_port, "GET", &target, &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, weights());
        assert_eq!(reply.header("etag").unwrap(), format!("\"{sha256}\""));
        assert_eq!(reply.header("accept-ranges"), Some("bytes"));
        assert_eq!((hub.body_requests(), hub.body_bytes_served()), (1, 5000));
        assert_eq!(call(hub.cdn_port, "GET", &format!("/repos/{}/x?signature=test", "0".repeat(64)), &[]).status, 404);
        assert_eq!(call(hub.cdn_port, "GET", "/api/models/org/tiny", &[]).status, 404);

        let log = hub.requests();
        assert_eq!(log[0], "HEAD /org/tiny/resolve/main/model.safetensors");
        assert_eq!(log[3], format!("GET {target}"));
    }

    #[test]
    fn ranges() {
        let (hub, repo) = server();
        let reply = call(hub.port, "GET", "/org/tiny/resolve/main/config.json", &[("Range", "bytes=5-")]);
        assert_eq!(reply.status, 206);
        assert_eq!(reply.body, &br#"{"model_type": "llama"}"#[5..]);
        assert_eq!(reply.header("content-range"), Some("bytes 5-22/23"));
        assert_eq!(reply.header("content-length"), Some("18"));
        assert_eq!(reply.header("x-repo-commit"), Some(repo.commit.as_str()));

        let target = format!("/repos/{}/model.safetensors?signature=test", repo.etag("model.safetensors").unwrap());
        let reply = call(hub.cdn_port, "GET", &target, &[("range", "bytes=100-199")]);
        assert_eq!((reply.status, reply.header("content-range")), (206, Some("bytes 100-199/5000")));
        assert_eq!(reply.body, &weights()[100..200]);
        let reply = call(hub.cdn_port, "GET", &target, &[("RANGE", "bytes=4990-9999")]);
        assert_eq!((reply.status, reply.body.len()), (206, 10));
        let reply = call(hub.cdn_port, "GET", &target, &[("Range", "bytes=5000-")]);
        assert_eq!((reply.status, reply.header("content-range")), (416, Some("bytes */5000")));
        assert!(reply.body.is_empty());
        assert_eq!(hub.body_requests(), 3);
        assert_eq!(hub.body_bytes_served(), 18 + 100 + 10);
        assert_eq!(hub.requests()[1], format!("GET {target} bytes=100-199"));
    }

    #[test]
    fn gated_repo_needs_an_allowed_token() {
        let (hub, _) = server();
        let target = "/org/locked/resolve/main/a.json";
        let reply = call(hub.port, "GET", target, &[]);
        assert_eq!((reply.status, reply.header("x-error-code")), (401, Some("GatedRepo")));
        let message = "Access to model org/locked is restricted. You must have access to it and be authenticated to access it. Please log in.";
        assert_eq!(reply.header("x-error-message"), Some(message));
        assert_eq!(reply.json()["error"], message);

        hub.allow_token("hf_good");
        let reply = call(hub.port, "HEAD", target, &[("Authorization", "Bearer hf_bad")]);
        assert_eq!((reply.status, reply.header("x-error-code")), (403, Some("GatedRepo")));
        assert!(reply.header("x-error-message").unwrap().contains("not in the authorized list"));
        assert!(reply.header("x-error-message").unwrap().contains("https://huggingface.co/org/locked"));

        let reply = call(hub.port, "GET", target, &[("authorization", "Bearer hf_good")]);
        assert_eq!((reply.status, reply.body.as_slice()), (200, &b"[1]"[..]));
    }

    #[test]
    fn unknown_repo_revision_file_and_path() {
        let (hub, _) = server();
        for target in ["/api/models/org/nope/revision/main", "/org/nope/resolve/main/config.json"] {
            let reply = call(hub.port, "GET", target, &[]);
            assert_eq!((reply.status, reply.header("x-error-code")), (401, Some("RepoNotFound")));
            assert_eq!(reply.header("x-error-message"), Some("Repository not found"));
            assert_eq!(reply.json(), json!({ "error": "Repository not found" }));
        }
        for target in ["/api/models/org/tiny/revision/v2", "/org/tiny/resolve/v2/config.json"] {
            let reply = call(hub.port, "GET", target, &[]);
            assert_eq!((reply.status, reply.header("x-error-code")), (404, Some("RevisionNotFound")));
            assert!(reply.json()["error"].is_string());
        }
        let reply = call(hub.port, "HEAD", "/org/tiny/resolve/main/missing.json", &[]);
        assert_eq!((reply.status, reply.header("x-error-code")), (404, Some("EntryNotFound")));
        assert_eq!(reply.header("x-error-message"), Some("Entry not found"));
        let reply = call(hub.port, "GET", "/org/tiny/blob/main/config.json", &[]);
        assert_eq!((reply.status, reply.header("x-error-code")), (404, None));
        assert!(reply.json()["error"].is_string());
        assert_eq!(call(hub.port, "POST", "/api/models/org/tiny", &[]).status, 404);
    }

    #[test]
    fn cut_bodies_stop_after_the_given_bytes() {
        let (hub, repo) = server();
        let target = format!("/repos/{}/model.safetensors?signature=test", repo.etag("model.safetensors").unwrap());
        hub.cut_next_bodies(2, 1000);
        let reply = call(hub.cdn_port, "GET", &target, &[]);
        assert_eq!((reply.status, reply.header("content-length")), (200, Some("5000")));
        assert_eq!(reply.body, &weights()[..1000]);
        // The second cut also applies to a ranged request (and to the Hub listener alike).
        let reply = call(hub.cdn_port, "GET", &target, &[("Range", "bytes=1000-")]);
        assert_eq!((reply.status, reply.header("content-length")), (206, Some("4000")));
        assert_eq!(reply.body, &weights()[1000..2000]);
        let reply = call(hub.cdn_port, "GET", &target, &[("Range", "bytes=2000-")]);
        assert_eq!(reply.body, &weights()[2000..]);
        assert_eq!((hub.body_requests(), hub.body_bytes_served()), (3, 5000));
    }
}
