//! llama.cpp's own server (`llama-server`, C++) with several slots on 127.0.0.1, a sampler of how many
//! of its slots are busy (`GET /slots`) and a plain client as the peer: `cargo xtask bench serve`
//! prints the occupancy and requests/s herd reaches against the peer's on the same requests.
//! Unlike llama-cpp-python's server ([`crate::llama_server`]), which answers one request at a time, it
//! decodes one sequence per slot in a shared batch and queues the requests beyond its slots, as vLLM
//! queues beyond its batch. The binary is built once by `xtask/llama-cpp-server.sh`.

use crate::llama_server::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Context tokens per slot: a conformity prompt and its scored token use a few hundred.
const CONTEXT_PER_SLOT: usize = 2048;

pub struct SlotServer {
    child: Child,
    pub port: u16,
    pub slots: usize,
    log: PathBuf,
}

impl SlotServer {
    /// Starts `binary` (a `llama-server`) serving the GGUF `model` with `slots` parallel sequences on a
    /// free port, and waits until `/health` answers 200 (the model is loaded).
    pub fn start(binary: &Path, model: &Path, slots: usize, threads: usize) -> Result<Self, String> {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("herd-llama-cpp-server-{port}.log"));
        let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new(binary)
            .arg("--model")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--parallel", &slots.to_string(), "--ctx-size", &(slots * CONTEXT_PER_SLOT).to_string()])
            .args(["--threads", &threads.to_string(), "--slots"])
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let mut server = SlotServer { child, port, slots, log };
        let started = Instant::now();
        loop {
            if crate::http::get(port, "/health", Duration::from_secs(2)).is_some_and(|(status, _)| status == 200) {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("{} exited ({status}) before answering: {}", binary.display(), server.log_text()));
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err(format!("{} did not answer within 2 minutes: {}", binary.display(), server.log_text()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `/slots` every `every` on a thread of its own until [`SlotSampler::finish`].
    pub fn sample_slots(&self, every: Duration) -> SlotSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let port = self.port;
        let slots = self.slots;
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut samples = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    // A poll that fails (the server busy past the timeout) is no sample, not an idle one.
                    if let Some((200, body)) = crate::http::get(port, "/slots", Duration::from_secs(5))
                        && let Ok(busy) = busy_slots(&body)
                    {
                        samples.push(busy);
                    }
                    std::thread::sleep(every);
                }
                SlotOccupancy { slots, samples }
            })
        };
        SlotSampler { stop, thread }
    }
}

impl Drop for SlotServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct SlotSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<SlotOccupancy>,
}

impl SlotSampler {
    pub fn finish(self) -> SlotOccupancy {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the slot sampler does not panic")
    }
}

/// The peer of a client under test: `connections` threads, each posting the next of `requests` (a path
/// and a JSON body, e.g. the lines of `herd run --backend batch --export`) and waiting for its answer,
/// with no logic of its own. Returns the requests answered 200 and the seconds from the first post to
/// the last answer.
pub fn plain_client(port: u16, requests: &[(String, Vec<u8>)], connections: usize) -> (usize, f64) {
    let next = AtomicUsize::new(0);
    let answered = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..connections.max(1) {
            scope.spawn(|| {
                while let Some((path, body)) = requests.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Some((200, _)) = crate::http::post_json(port, path, body, Duration::from_secs(600)) {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (answered.into_inner(), started.elapsed().as_secs_f64())
}

/// The busy slots of each `/slots` poll, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotOccupancy {
    pub slots: usize,
    pub samples: Vec<usize>,
}

impl SlotOccupancy {
    /// The polls from the first to the last that found a slot busy: the span in which the client had
    /// work for the server (before it, herd plans and starts; after it, herd commits and exits).
    fn serving(&self) -> &[usize] {
        let first = self.samples.iter().position(|&b| b > 0);
        let last = self.samples.iter().rposition(|&b| b > 0);
        match (first, last) {
            (Some(first), Some(last)) => &self.samples[first..=last],
            _ => &[],
        }
    }

    /// The mean share of slots busy over the serving span; `None` when no poll found a slot busy.
    pub fn mean_busy(&self) -> Option<f64> {
        let serving = self.serving();
        (!serving.is_empty() && self.slots > 0)
            .then(|| serving.iter().sum::<usize>() as f64 / (serving.len() * self.slots) as f64)
    }

    /// The share of the serving span's polls that found every slot busy.
    pub fn all_busy(&self) -> Option<f64> {
        let serving = self.serving();
        (!serving.is_empty())
            .then(|| serving.iter().filter(|&&b| b >= self.slots).count() as f64 / serving.len() as f64)
    }

    /// The polls in the serving span.
    pub fn serving_polls(&self) -> usize {
        self.serving().len()
    }
}

/// The number of slots `/slots` reports busy (`is_processing`); an error names what the reply lacks.
pub fn busy_slots(body: &[u8]) -> Result<usize, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("/slots is not JSON: {e}"))?;
    let slots = value.as_array().ok_or("/slots is not an array of slots")?;
    slots.iter().try_fold(0, |busy, slot| match slot.get("is_processing").and_then(serde_json::Value::as_bool) {
        Some(processing) => Ok(busy + usize::from(processing)),
        None => Err(format!("a slot of /slots has no boolean is_processing: {slot}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity_server::{Capacity, CapacityServer};

    #[test]
    fn busy_slots_counts_the_slots_processing() {
        let body = br#"[{"id":0,"n_ctx":2048,"is_processing":true,"id_task":7},{"id":1,"is_processing":false},{"id":2,"is_processing":true}]"#;
        assert_eq!(busy_slots(body), Ok(2));
        assert!(busy_slots(br#"[{"id":0}]"#).unwrap_err().contains("is_processing"));
        assert!(busy_slots(br#"{"error":"slots endpoint disabled"}"#).unwrap_err().contains("not an array"));
    }

    #[test]
    fn the_plain_client_posts_every_request_once_on_at_most_its_connections() {
        let mut capacity = Capacity::new(2, Duration::from_millis(10), Duration::from_millis(10));
        capacity.record = true;
        let server = CapacityServer::start(capacity);
        let requests: Vec<(String, Vec<u8>)> = (0..12)
            .map(|i| {
                let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{i}"}}],"max_tokens":1,"logprobs":true,"top_logprobs":20}}"#);
                ("/v1/chat/completions".to_owned(), body.into_bytes())
            })
            .collect();
        let (answered, seconds) = plain_client(server.port, &requests, 3);
        assert_eq!(answered, 12);
        assert!(seconds > 0.0);
        let mut recorded = server.stats.recorded.lock().unwrap().clone();
        recorded.sort();
        let mut sent = requests.clone();
        sent.sort();
        assert_eq!(recorded, sent, "each request reaches the server once, as exported");
        assert!(server.stats.peak_open.load(Ordering::Relaxed) <= 3, "no more at once than its connections");
    }

    #[test]
    fn occupancy_counts_the_span_in_which_the_server_had_work() {
        // Idle while herd starts and after it ends; within the span, 3 of 4 polls have all 4 slots busy.
        let occupancy = SlotOccupancy { slots: 4, samples: vec![0, 0, 4, 4, 2, 4, 0, 0] };
        assert_eq!(occupancy.serving_polls(), 4);
        assert_eq!(occupancy.mean_busy(), Some(14.0 / 16.0));
        assert_eq!(occupancy.all_busy(), Some(0.75));
        let idle = SlotOccupancy { slots: 4, samples: vec![0, 0] };
        assert_eq!((idle.mean_busy(), idle.all_busy()), (None, None));
    }
}
