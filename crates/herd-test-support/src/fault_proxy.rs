//! A local HTTP proxy in front of a server that misbehaves on a fixed schedule: 429 with Retry-After,
//! 500, a hang past the client's timeout, a reply whose JSON is cut short, and a dropped connection.
//! Every other request is forwarded untouched. It serves 127.0.0.1 only and stops when dropped.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http::read_request;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Forward,
    TooManyRequests,
    ServerError,
    Hang,
    TruncatedJson,
    DroppedConnection,
}

pub struct FaultProxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    /// Requests seen, and how many of them were given a fault.
    pub requests: Arc<AtomicUsize>,
    pub faults: Arc<AtomicUsize>,
    /// The most requests at once that were forwarded upstream while their client still waited for the
    /// answer: what a client's concurrency limit bounds. A forward whose client gave up (a timeout, a
    /// finished run) runs on upstream but no longer counts, since the client's retry may overlap it; a
    /// hung or refused request is never forwarded, so never counted.
    pub peak_in_flight: Arc<AtomicUsize>,
    /// Requests forwarded upstream now: a client that gave up on one (timeout, or exit) leaves it here
    /// until the server answers.
    pub in_flight: Arc<AtomicUsize>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Request i (0-based) gets `schedule[i % schedule.len()]`; `hang` is how long a hung request is held.
    pub fn start(upstream_port: u16, schedule: Vec<Fault>, hang: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy port");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (requests, faults) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (stop2, requests2, faults2) = (stop.clone(), requests.clone(), faults.clone());
        let (open, peak_in_flight) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (peak2, in_flight) = (peak_in_flight.clone(), open.clone());
        let waiting = Arc::new(WaitingClients::default());
        let accept = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let i = requests2.fetch_add(1, Ordering::Relaxed);
                        let fault = schedule[i % schedule.len()];
                        if fault != Fault::Forward {
                            faults2.fetch_add(1, Ordering::Relaxed);
                        }
                        let (stop, open) = (stop2.clone(), open.clone());
                        let (waiting, peak) = (waiting.clone(), peak2.clone());
                        std::thread::spawn(move || {
                            let counters = Counters { open: &open, waiting: &waiting, peak: &peak };
                            serve(client, i, upstream_port, fault, hang, &stop, counters)
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FaultProxy { port, stop, requests, faults, peak_in_flight, in_flight, accept: Some(accept) }
    }

    /// Waits until no forward is open (at most `limit`); false if some still are.
    pub fn wait_until_idle(&self, limit: Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while self.in_flight.load(Ordering::SeqCst) > 0 {
            if std::time::Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Sends the request upstream as HTTP/1.0 (one exchange per connection, no chunking) and returns the
/// status line with headers, and the body.
fn forward(head: &str, body: &[u8], upstream_port: u16) -> Option<(String, Vec<u8>)> {
    let mut upstream = TcpStream::connect(("127.0.0.1", upstream_port)).ok()?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?.replacen("HTTP/1.1", "HTTP/1.0", 1);
    let mut out = format!("{request_line}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").to_ascii_lowercase();
        if name != "connection" && name != "content-length" {
            out += &format!("{line}\r\n");
        }
    }
    out += &format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    upstream.write_all(out.as_bytes()).ok()?;
    upstream.write_all(body).ok()?;
    let mut reply = Vec::new();
    upstream.read_to_end(&mut reply).ok()?;
    let at = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((String::from_utf8_lossy(&reply[..at]).into_owned(), reply[at + 4..].to_vec()))
}

fn respond(client: &mut TcpStream, status: &str, extra_headers: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = client.write_all(head.as_bytes());
    let _ = client.write_all(body);
    let _ = client.flush();
}

/// The clients whose requests are being forwarded now, by request number.
#[derive(Default)]
struct WaitingClients(Mutex<HashMap<usize, TcpStream>>);

impl WaitingClients {
    /// Adds a client whose request is about to be forwarded and returns how many clients wait now. Those
    /// that closed their connection since (gave up, or exited) are dropped first: a client closes before
    /// it retries, so its closed connection is seen here before the retry is counted.
    fn add(&self, request: usize, client: &TcpStream) -> usize {
        let mut waiting = self.0.lock().unwrap_or_else(|p| p.into_inner());
        waiting.retain(|_, c| still_connected(c));
        if let Ok(c) = client.try_clone()
            && still_connected(&c)
        {
            waiting.insert(request, c);
        }
        waiting.len()
    }

    fn remove(&self, request: usize) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&request);
    }
}

/// Whether the client has not closed its side. Peeks with a read timeout (a socket option that leaves
/// writes alone) rather than non-blocking mode, which would also make the reply's write non-blocking.
fn still_connected(client: &TcpStream) -> bool {
    let _ = client.set_read_timeout(Some(Duration::from_millis(1)));
    let mut byte = [0u8; 1];
    match client.peek(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        // Nothing to read before the timeout: still waiting. A reset: gone.
        Err(e) => matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

struct Counters<'a> {
    /// Forwards open upstream, whether or not their client still waits.
    open: &'a AtomicUsize,
    waiting: &'a WaitingClients,
    peak: &'a AtomicUsize,
}

fn serve(
    mut client: TcpStream,
    request: usize,
    upstream_port: u16,
    fault: Fault,
    hang: Duration,
    stop: &AtomicBool,
    counters: Counters<'_>,
) {
    let Some((head, body)) = read_request(&mut client) else { return };
    match fault {
        Fault::TooManyRequests => {
            respond(&mut client, "429 Too Many Requests", "Retry-After: 0\r\n", br#"{"error":"rate limited"}"#)
        }
        Fault::ServerError => respond(&mut client, "500 Internal Server Error", "", br#"{"error":"boom"}"#),
        Fault::Hang => {
            // Hold the request unanswered until the client gives up (closes) or `hang` has passed.
            let until = std::time::Instant::now() + hang;
            let _ = client.set_read_timeout(Some(Duration::from_millis(20)));
            let mut byte = [0u8; 1];
            while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
                if matches!(client.read(&mut byte), Ok(0)) {
                    break;
                }
            }
        }
        Fault::DroppedConnection => {
            let _ = client.shutdown(Shutdown::Both);
        }
        Fault::Forward | Fault::TruncatedJson => {
            counters.peak.fetch_max(counters.waiting.add(request, &client), Ordering::SeqCst);
            counters.open.fetch_add(1, Ordering::SeqCst);
            let reply = forward(&head, &body, upstream_port);
            counters.waiting.remove(request);
            counters.open.fetch_sub(1, Ordering::SeqCst);
            let Some((upstream_head, mut upstream_body)) = reply else {
                respond(&mut client, "502 Bad Gateway", "", br#"{"error":"upstream unreachable"}"#);
                return;
            };
            let status = upstream_head
                .lines()
                .next()
                .and_then(|l| l.split_once(' '))
                .map_or("502 Bad Gateway", |(_, s)| s)
                .to_owned();
            if fault == Fault::TruncatedJson {
                upstream_body.truncate(upstream_body.len() / 2);
            }
            respond(&mut client, &status, "", &upstream_body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that holds every request until `release` is set, then answers `{}`.
    fn held_upstream(release: Arc<AtomicBool>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let release = release.clone();
                std::thread::spawn(move || {
                    if read_request(&mut stream).is_some() {
                        while !release.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}");
                    }
                });
            }
        });
        port
    }

    fn send(port: u16) -> TcpStream {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        stream
    }

    fn wait_for_forwards(proxy: &FaultProxy, forwards: usize) {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while proxy.in_flight.load(Ordering::SeqCst) != forwards {
            assert!(std::time::Instant::now() < until, "{forwards} forwards never opened");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_forward_counts_while_its_client_waits_and_not_after_the_client_gave_up() {
        let release = Arc::new(AtomicBool::new(false));
        let proxy = FaultProxy::start(held_upstream(release.clone()), vec![Fault::Forward], Duration::ZERO);
        let peak = || proxy.peak_in_flight.load(Ordering::SeqCst);

        // A client that gives up (its timeout) and retries: both forwards run upstream, one client waits.
        let gave_up = send(proxy.port);
        wait_for_forwards(&proxy, 1);
        drop(gave_up);
        let mut retry = send(proxy.port);
        wait_for_forwards(&proxy, 2);
        assert_eq!(peak(), 1, "the abandoned forward no longer counts once its client closed");

        // Another client while the retry waits: two clients wait at once.
        let mut other = send(proxy.port);
        wait_for_forwards(&proxy, 3);
        assert_eq!(peak(), 2, "two clients waiting on forwards");

        release.store(true, Ordering::SeqCst);
        for client in [&mut retry, &mut other] {
            let mut reply = String::new();
            client.read_to_string(&mut reply).unwrap();
            assert!(reply.starts_with("HTTP/1.1 200") && reply.ends_with("{}"), "forwarded reply: {reply}");
        }
        assert!(proxy.wait_until_idle(Duration::from_secs(30)));
    }
}
