//! An OpenAI-compatible server of known capacity: it holds one of `capacity` slots per request for a fixed
//! latency (per request kind), and requests beyond its capacity queue for a slot, as a batching inference
//! server does when it is full. Its ceiling is `capacity / latency` requests per second, which no client
//! can pass and a good one reaches: `cargo xtask bench serve` measures herd's share of it, and herd-cli's
//! pipeline tests run many units in flight through it.
//!
//! Optionally it answers a share of requests with 429 (Retry-After) in bursts, and fails every request
//! whose body hashes into a chosen share with a 500, the same request every time (so a unit fails however
//! often it is retried, until the share is set to 0). Scoring requests (`logprobs`) get `A` −0.2, `B` −2;
//! generations get an allocation that spreads the pool evenly over the schema's roster. With `varied`,
//! each answer depends on its request instead (so answers given to the wrong request show), and
//! [`reply_to`] gives any request's answer without a server (herd-cli's batch-file tests answer an
//! exported file with it); with `record`, the server keeps every request it answers ([`CapacityServer::
//! requests`]). It serves 127.0.0.1 only, keeps connections alive (one thread per connection) and stops
//! when dropped.

use crate::http::read_request;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct Capacity {
    /// Requests served at once; the rest wait for a slot.
    pub slots: usize,
    /// How long a scoring request (one asking for `logprobs`) holds its slot.
    pub score_latency: Duration,
    /// How long a generation holds its slot.
    pub generate_latency: Duration,
    /// Of every `period` requests, the first `burst` are answered 429 with `Retry-After: retry_after_s`
    /// without taking a slot (`period` 0: never).
    pub too_many: TooMany,
    /// Requests whose body's SHA-256 falls in this share (per mille) fail with 500, every time.
    pub fail_per_mille: u32,
    /// Each answer depends on its request's body ([`reply_to`]).
    pub varied: bool,
    /// Keep every answered request's path and body ([`CapacityServer::requests`]).
    pub record: bool,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct TooMany {
    pub period: usize,
    pub burst: usize,
    pub retry_after_s: f64,
}

impl Capacity {
    pub fn new(slots: usize, score_latency: Duration, generate_latency: Duration) -> Self {
        Capacity {
            slots,
            score_latency,
            generate_latency,
            too_many: TooMany::default(),
            fail_per_mille: 0,
            varied: false,
            record: false,
        }
    }
}

/// What a [`CapacityServer`] saw.
#[derive(Default)]
pub struct CapacityStats {
    /// Requests received (answered or refused).
    pub requests: AtomicUsize,
    /// Requests answered 200.
    pub answered: AtomicUsize,
    pub too_many: AtomicUsize,
    pub failed: AtomicUsize,
    /// Requests holding a slot or waiting for one now, and the most at once.
    pub open: AtomicUsize,
    pub peak_open: AtomicUsize,
    /// Connections accepted (a client that keeps them alive opens few).
    pub connections: AtomicU64,
    /// The path and body of every request answered 200, with `record`.
    pub recorded: Mutex<Vec<(String, Vec<u8>)>>,
}

pub struct CapacityServer {
    pub port: u16,
    pub stats: Arc<CapacityStats>,
    fail_per_mille: Arc<std::sync::atomic::AtomicU32>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// The slots: how many are taken, and a condition to wait for one.
struct Slots {
    taken: Mutex<usize>,
    freed: Condvar,
    total: usize,
}

impl Slots {
    fn hold(&self, latency: Duration) {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        while *taken >= self.total {
            taken = self.freed.wait(taken).unwrap_or_else(|p| p.into_inner());
        }
        *taken += 1;
        drop(taken);
        std::thread::sleep(latency);
        *self.taken.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.freed.notify_one();
    }
}

impl CapacityServer {
    pub fn start(capacity: Capacity) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("capacity server port");
        let port = listener.local_addr().expect("bound").port();
        listener.set_nonblocking(true).expect("non-blocking listener");
        let stats = Arc::new(CapacityStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let fail_per_mille = Arc::new(std::sync::atomic::AtomicU32::new(capacity.fail_per_mille));
        let slots = Arc::new(Slots { taken: Mutex::new(0), freed: Condvar::new(), total: capacity.slots.max(1) });
        let counter = Arc::new(AtomicUsize::new(0));
        let shared = (stats.clone(), stop.clone(), fail_per_mille.clone());
        let accept = std::thread::spawn(move || {
            let (stats, stop, fail_per_mille) = shared;
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let _ = client.set_nodelay(true);
                        stats.connections.fetch_add(1, Ordering::Relaxed);
                        let connection = Connection {
                            capacity: capacity.clone(),
                            slots: slots.clone(),
                            counter: counter.clone(),
                            stats: stats.clone(),
                            stop: stop.clone(),
                            fail_per_mille: fail_per_mille.clone(),
                        };
                        std::thread::spawn(move || connection.serve(client));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        CapacityServer { port, stats, fail_per_mille, stop, accept: Some(accept) }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The path and body of every request answered so far, in the order answered (with `record`).
    pub fn requests(&self) -> Vec<(String, Vec<u8>)> {
        self.stats.recorded.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes the share of requests that fail (0: none) for the requests that arrive from now on.
    pub fn set_fail_per_mille(&self, per_mille: u32) {
        self.fail_per_mille.store(per_mille, Ordering::SeqCst);
    }
}

impl Drop for CapacityServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Whether a request body falls in the failing share: the same body always does or always does not.
pub fn fails(body: &[u8], per_mille: u32) -> bool {
    let digest = Sha256::digest(body);
    u32::from(u16::from_le_bytes([digest[0], digest[1]])) % 1000 < per_mille
}

struct Connection {
    capacity: Capacity,
    slots: Arc<Slots>,
    counter: Arc<AtomicUsize>,
    stats: Arc<CapacityStats>,
    stop: Arc<AtomicBool>,
    fail_per_mille: Arc<std::sync::atomic::AtomicU32>,
}

impl Connection {
    fn serve(self, mut client: TcpStream) {
        let _ = client.set_write_timeout(Some(Duration::from_secs(30)));
        // One request after another on the connection, until the client closes it or goes quiet.
        while let Some((head, body)) = read_request(&mut client) {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            if !self.answer(&mut client, &head, &body) {
                return;
            }
        }
    }

    /// Answers one request; `false` when the connection broke.
    fn answer(&self, client: &mut TcpStream, head: &str, body: &[u8]) -> bool {
        let stats = &self.stats;
        let i = self.counter.fetch_add(1, Ordering::Relaxed);
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let TooMany { period, burst, retry_after_s } = self.capacity.too_many;
        if period > 0 && i % period < burst {
            stats.too_many.fetch_add(1, Ordering::Relaxed);
            let body = r#"{"error":{"message":"too many requests","type":"rate_limit"}}"#;
            return respond(client, "429 Too Many Requests", &format!("Retry-After: {retry_after_s}\r\n"), body);
        }
        if fails(body, self.fail_per_mille.load(Ordering::Relaxed)) {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            return respond(client, "500 Internal Server Error", "", r#"{"error":{"message":"injected failure"}}"#);
        }
        let request: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
        let latency = if scoring(&request) { self.capacity.score_latency } else { self.capacity.generate_latency };
        let open = stats.open.fetch_add(1, Ordering::Relaxed) + 1;
        stats.peak_open.fetch_max(open, Ordering::Relaxed);
        self.slots.hold(latency);
        stats.open.fetch_sub(1, Ordering::Relaxed);
        stats.answered.fetch_add(1, Ordering::Relaxed);
        if self.capacity.record {
            let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
            stats.recorded.lock().unwrap_or_else(|p| p.into_inner()).push((path, body.to_vec()));
        }
        respond(client, "200 OK", "", &reply_to(body, self.capacity.varied))
    }
}

/// Whether a request body asks for a score (`logprobs`) rather than a generation.
fn scoring(request: &serde_json::Value) -> bool {
    request.get("logprobs").is_some_and(|v| v == &serde_json::json!(true))
}

/// The body the server answers a request body with (a 200): a score or an allocation, the same every time
/// for the same body; `varied` makes it depend on the body (fixed answers otherwise).
pub fn reply_to(body: &[u8], varied: bool) -> String {
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let digest: Option<[u8; 32]> = varied.then(|| Sha256::digest(body).into());
    if scoring(&request) { score_reply(digest) } else { allocation_reply(&request, digest) }
}

fn respond(client: &mut TcpStream, status: &str, headers: &str, body: &str) -> bool {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    client.write_all(reply.as_bytes()).and_then(|()| client.flush()).is_ok()
}

/// `A` −0.2 and `B` −2; with a digest, P(A) from 0.05 to 0.95 by the digest and P(B) 0.9 of the rest.
fn score_reply(digest: Option<[u8; 32]>) -> String {
    let Some(digest) = digest else {
        return r#"{"choices":[{"message":{"role":"assistant","content":"A"},"logprobs":{"content":[{"token":"A","logprob":-0.2,"top_logprobs":[{"token":"A","logprob":-0.2},{"token":"B","logprob":-2.0}]}]},"finish_reason":"length"}],"usage":{"prompt_tokens":300,"completion_tokens":1}}"#.to_owned();
    };
    let x = f64::from(u16::from_le_bytes([digest[2], digest[3]])) / f64::from(u16::MAX);
    let (a, b) = (0.05 + 0.9 * x, 0.9 * (0.95 - 0.9 * x));
    let top = serde_json::json!([{"token": "A", "logprob": a.ln()}, {"token": "B", "logprob": b.ln()}]);
    let content = if a >= b { "A" } else { "B" };
    serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": content},
            "logprobs": {"content": [{"token": content, "logprob": a.max(b).ln(), "top_logprobs": top}]},
            "finish_reason": "length"}],
        "usage": {"prompt_tokens": 300 + u32::from(digest[4]), "completion_tokens": 1},
    })
    .to_string()
}

/// The pool spread evenly over the roster the request's schema names (the remainder to the first ids);
/// with a digest, some of one member's points moved to another, both chosen by the digest.
fn allocation_reply(request: &serde_json::Value, digest: Option<[u8; 32]>) -> String {
    let schema =
        request.pointer("/response_format/json_schema/schema").or_else(|| request.pointer("/response_format/schema"));
    let ids: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let pool = schema
        .and_then(|s| s.pointer(&format!("/properties/{}/maximum", ids.first().copied().unwrap_or(""))))
        .and_then(|m| m.as_u64())
        .unwrap_or(0);
    let n = ids.len().max(1) as u64;
    let mut points: Vec<u64> = (0..ids.len() as u64).map(|i| pool / n + u64::from(i < pool % n)).collect();
    if let Some(d) = digest.filter(|_| ids.len() > 1) {
        let to = usize::from(d[5]) % ids.len();
        let from = (to + 1) % ids.len();
        let moved = u64::from(d[6]) % (pool / n + 1);
        points[from] -= moved;
        points[to] += moved;
    }
    let allocation: serde_json::Map<String, serde_json::Value> =
        ids.iter().zip(&points).map(|(id, p)| ((*id).to_owned(), serde_json::json!(p))).collect();
    let content = serde_json::Value::Object(allocation).to_string();
    serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 60},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_spreads_the_pool_over_the_schema_roster() {
        let request = serde_json::json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {
            "required": ["a", "b", "c"],
            "properties": {"a": {"maximum": 100}, "b": {"maximum": 100}, "c": {"maximum": 100}},
        }}}});
        let content = |digest| -> serde_json::Value {
            let reply: serde_json::Value = serde_json::from_str(&allocation_reply(&request, digest)).unwrap();
            serde_json::from_str(reply["choices"][0]["message"]["content"].as_str().unwrap()).unwrap()
        };
        assert_eq!(content(None), serde_json::json!({"a": 34, "b": 33, "c": 33}));
        // Varied: still the whole pool, none negative, and another split for another request.
        let splits: std::collections::BTreeSet<String> = (0u8..20)
            .map(|i| {
                let mut digest = [0u8; 32];
                (digest[5], digest[6]) = (i, i.wrapping_mul(37));
                let split = content(Some(digest));
                let total: u64 = split.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
                assert_eq!(total, 100, "{split}");
                split.to_string()
            })
            .collect();
        assert!(splits.len() > 5, "{splits:?}");
    }

    #[test]
    fn a_varied_score_is_a_distribution_and_depends_on_the_request() {
        let request = |i: u32| serde_json::json!({"logprobs": true, "top_logprobs": 20, "i": i}).to_string();
        let mut p_a = std::collections::BTreeSet::new();
        for i in 0..50 {
            let body = request(i);
            assert_eq!(
                reply_to(body.as_bytes(), true),
                reply_to(body.as_bytes(), true),
                "the same body, the same answer"
            );
            let reply: serde_json::Value = serde_json::from_str(&reply_to(body.as_bytes(), true)).unwrap();
            let top = reply.pointer("/choices/0/logprobs/content/0/top_logprobs").unwrap().as_array().unwrap();
            let p: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap().exp()).collect();
            assert!(p.iter().sum::<f64>() <= 1.0 && p.iter().all(|&p| p > 0.0), "{p:?}");
            p_a.insert((p[0] * 1e6) as u64);
        }
        assert!(p_a.len() > 40, "P(A) varies with the request");
    }

    #[test]
    fn a_request_fails_always_or_never_and_the_share_is_near_the_one_asked() {
        let bodies: Vec<Vec<u8>> = (0..4000).map(|i| format!("{{\"seed\":{i}}}").into_bytes()).collect();
        let failing = bodies.iter().filter(|b| fails(b, 50)).count();
        assert!((120..280).contains(&failing), "{failing} of 4000 at 5 %");
        assert!(bodies.iter().all(|b| fails(b, 50) == fails(b, 50)));
        assert!(!bodies.iter().any(|b| fails(b, 0)));
    }

    #[test]
    fn requests_beyond_capacity_wait_for_a_slot() {
        let slots = Arc::new(Slots { taken: Mutex::new(0), freed: Condvar::new(), total: 2 });
        let started = std::time::Instant::now();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let slots = slots.clone();
                s.spawn(move || slots.hold(Duration::from_millis(50)));
            }
        });
        // Four requests on two slots take two rounds.
        assert!(started.elapsed() >= Duration::from_millis(100), "{:?}", started.elapsed());
    }
}
