//! The HTTP/1.1 request reading the loopback servers share (the hostile server and the fault proxy):
//! one exchange per connection, a Content-Length body, nothing else of HTTP.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

/// Reads one HTTP/1.1 request: its head (at most 1 MiB) and a Content-Length body (at most 64 MB);
/// `None` when the client closes or sends no full request within 30 s.
pub(crate) fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 || data.len() > 1 << 20 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0).min(64 << 20);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    Some((head, data[head_end..head_end + length].to_vec()))
}

/// The value of header `name` (any case) in a request head.
pub(crate) fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned())
    })
}
