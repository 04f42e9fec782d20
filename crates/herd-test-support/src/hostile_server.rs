//! A hostile OpenAI-compatible server: it answers every chat or completions request with one kind of bad
//! reply (or a good one), chosen by its [`Mode`], which a test may change while it runs. It serves
//! 127.0.0.1 only (std::net, a thread per connection, one exchange per connection) and stops when
//! dropped. What it saw is kept: requests, the last `Authorization` header, the bytes of reply it sent.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http::{header, read_request};

/// The reply every request gets. Scoring requests (those asking for `logprobs`) get the log-probabilities
/// named; generation requests get `{}` as their content (and, for [`Mode::LongReasoning`], the
/// reasoning text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A well-formed reply: `A` −0.7, ` A` −4, `B` −1.2, `The` −3 (a mass of 0.87).
    Good,
    /// float32 rounding of a confident model: `A` 0.0, ` A` −17, `B` −19 (mass 1 + 4.7e-8).
    OverOneRounding,
    /// Every log-probability 0: `A` and `B` each at probability 1.
    AllZero,
    /// `A` and `B` both −0.01: a mass of 1.98.
    NearOneTwice,
    /// `A`'s log-probability written as the bare word `NaN` (Python's `json.dumps`), not JSON.
    NanText,
    /// `A`'s log-probability missing (`null`).
    NanMissing,
    /// Neither answer among the top tokens (`The` −1.5, `Hello` −3): each is bounded by the mass left out
    /// (0.73), so the two bounds sum past 1 unless the sum is bounded too.
    AnswersMissing,
    /// A good reply's top tokens followed by this many more (log-probability −30 each), whatever was asked.
    LongList(usize),
    /// A generation reply whose `reasoning_content` is this many bytes (Content-Length given; the
    /// body is streamed, and the server stops writing when the client closes).
    LongReasoning(usize),
    /// HTTP 401 whose error body echoes the request's `Authorization` header, as LiteLLM-style
    /// gateways do ("Received API Key = Bearer sk-…").
    EchoKey,
    /// HTTP 307 to this URL (another host, say): a client must not carry the request, or its key, there.
    Redirect(&'static str),
}

/// A conformity experiment small enough to run against a hostile server in a second: one task, two
/// images, N = 0, 2, 5, no baseline filter. `@DATA@` stands for the checkout's `data` folder.
pub const TINY_CONFORMITY: &str = r#"
[experiment]
name = "hostile-conformity"
study = "conformity"
seed = 5
[prompts]
bank = "@DATA@/banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines"]
general_pool_size = 2
[baseline_filter]
enabled = false
[trials]
n_values = [0, 2, 5]
trials_per_n = 2
[families.group_size]
"#;

pub struct HostileServer {
    pub port: u16,
    mode: Arc<Mutex<Mode>>,
    stop: Arc<AtomicBool>,
    /// Requests answered so far.
    pub requests: Arc<AtomicUsize>,
    /// Reply bytes written (headers and body) to every client, in total; a client that stops reading
    /// stops this growing.
    pub bytes_sent: Arc<AtomicU64>,
    /// The last request's `Authorization` header.
    pub last_authorization: Arc<Mutex<Option<String>>>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl HostileServer {
    pub fn start(mode: Mode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("hostile server port");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let mode = Arc::new(Mutex::new(mode));
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let bytes_sent = Arc::new(AtomicU64::new(0));
        let last_authorization = Arc::new(Mutex::new(None));
        let shared = (mode.clone(), stop.clone(), requests.clone(), bytes_sent.clone(), last_authorization.clone());
        let accept = std::thread::spawn(move || {
            let (mode, stop, requests, bytes_sent, authorization) = shared;
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let mode = *mode.lock().unwrap();
                        let (stop, requests, bytes_sent, authorization) =
                            (stop.clone(), requests.clone(), bytes_sent.clone(), authorization.clone());
                        std::thread::spawn(move || {
                            serve(client, mode, &stop, &requests, &bytes_sent, &authorization);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        HostileServer { port, mode, stop, requests, bytes_sent, last_authorization, accept: Some(accept) }
    }

    /// Changes the reply of the requests that arrive from now on.
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Writes `parts` in turn as one reply with the given status; stops at the first failed write (the
/// client closed). Counts what was written.
fn respond(client: &mut TcpStream, status: &str, parts: &[&[u8]], sent: &AtomicU64) {
    let length: usize = parts.iter().map(|p| p.len()).sum();
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    let mut write = |bytes: &[u8]| -> bool {
        for chunk in bytes.chunks(64 << 10) {
            if client.write_all(chunk).is_err() {
                return false;
            }
            sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        true
    };
    if !write(head.as_bytes()) {
        return;
    }
    for part in parts {
        if !write(part) {
            return;
        }
    }
    let _ = client.flush();
}

/// The top log-probabilities of a mode, as (token, logprob written as JSON).
fn top_of(mode: Mode) -> Vec<(String, String)> {
    let pairs: &[(&str, &str)] = match mode {
        Mode::OverOneRounding => &[("A", "0.0"), (" A", "-17.0"), ("B", "-19.0")],
        Mode::AllZero => &[("A", "0.0"), ("B", "0.0")],
        Mode::NearOneTwice => &[("A", "-0.01"), ("B", "-0.01")],
        Mode::NanText => &[("A", "NaN"), ("B", "-1.2")],
        Mode::NanMissing => &[("A", "null"), ("B", "-1.2")],
        Mode::AnswersMissing => &[("The", "-1.5"), ("Hello", "-3.0")],
        _ => &[("A", "-0.7"), (" A", "-4.0"), ("B", "-1.2"), ("The", "-3.0")],
    };
    let mut top: Vec<(String, String)> = pairs.iter().map(|(t, l)| ((*t).to_owned(), (*l).to_owned())).collect();
    if let Mode::LongList(extra) = mode {
        // Equal lengths, so that comparing two costs a full comparison.
        top.extend((0..extra).map(|i| (format!("{i:06}"), "-30".to_owned())));
    }
    top
}

fn score_body(mode: Mode, completions: bool) -> String {
    let top = top_of(mode);
    let token = serde_json::to_string(&top[0].0).unwrap();
    if completions {
        let entries: Vec<String> =
            top.iter().map(|(t, lp)| format!("{}:{lp}", serde_json::to_string(t).unwrap())).collect();
        format!(
            r#"{{"choices":[{{"text":{token},"logprobs":{{"tokens":[{token}],"top_logprobs":[{{{}}}]}},"finish_reason":"length"}}],"usage":{{"prompt_tokens":12,"completion_tokens":1}}}}"#,
            entries.join(",")
        )
    } else {
        let entries: Vec<String> = top
            .iter()
            .map(|(t, lp)| format!(r#"{{"token":{},"logprob":{lp}}}"#, serde_json::to_string(t).unwrap()))
            .collect();
        format!(
            r#"{{"choices":[{{"message":{{"role":"assistant","content":{token}}},"logprobs":{{"content":[{{"token":{token},"logprob":{},"top_logprobs":[{}]}}]}},"finish_reason":"length"}}],"usage":{{"prompt_tokens":12,"completion_tokens":1}}}}"#,
            top[0].1,
            entries.join(",")
        )
    }
}

fn serve(
    mut client: TcpStream,
    mode: Mode,
    stop: &AtomicBool,
    requests: &AtomicUsize,
    sent: &AtomicU64,
    authorization: &Mutex<Option<String>>,
) {
    let Some((head, body)) = read_request(&mut client) else { return };
    if stop.load(Ordering::Relaxed) {
        return;
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let auth = header(&head, "authorization");
    *authorization.lock().unwrap() = auth.clone();
    let _ = client.set_write_timeout(Some(Duration::from_secs(30)));
    if mode == Mode::EchoKey {
        let reply = serde_json::json!({"error": {
            "message": format!(
                "Authentication Error, Invalid proxy server token passed. Received API Key = {}, Key Hash (Token)=0f1e2d. Unable to find token in cache or `LiteLLM_VerificationTokenTable`",
                auth.as_deref().unwrap_or("")
            ),
            "type": "auth_error", "param": "None", "code": "401",
        }});
        respond(&mut client, "401 Unauthorized", &[reply.to_string().as_bytes()], sent);
        return;
    }
    if let Mode::Redirect(location) = mode {
        let head = format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = client.write_all(head.as_bytes());
        sent.fetch_add(head.len() as u64, Ordering::SeqCst);
        return;
    }
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let completions = !path.ends_with("/chat/completions");
    let scoring = completions || request.get("logprobs").is_some_and(|v| v == &serde_json::json!(true));
    if scoring {
        respond(&mut client, "200 OK", &[score_body(mode, completions).as_bytes()], sent);
        return;
    }
    match mode {
        Mode::LongReasoning(bytes) => {
            let start = br#"{"choices":[{"message":{"role":"assistant","content":"{}","reasoning_content":""#;
            let end = br#""},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":2}}"#;
            let filler = vec![b'x'; bytes];
            respond(&mut client, "200 OK", &[start, &filler, end], sent);
        }
        _ => {
            let reply = r#"{"choices":[{"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":2}}"#;
            respond(&mut client, "200 OK", &[reply.as_bytes()], sent);
        }
    }
}
