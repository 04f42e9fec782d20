//! The HTTP/1.1 the loopback fixtures share: reading a request (the hostile server, the fault proxy and
//! the capacity server: a Content-Length body, nothing else of HTTP) and a one-exchange client, `GET`
//! and `POST` (the llama.cpp servers' health and slots, the plain client's requests), on the same
//! readers of a head and a body.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

/// Reads one HTTP/1.1 request: its head (at most 1 MiB) and a Content-Length body (at most 64 MB);
/// `None` when the client closes or sends no full request within 30 s.
pub(crate) fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut data = Vec::new();
    let head_end = read_head(stream, &mut data, 1 << 20)?;
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0).min(64 << 20);
    read_to(stream, &mut data, head_end + length)?;
    Some((head, data[head_end..head_end + length].to_vec()))
}

/// Reads from `stream` into `data` until it holds a whole message head; where the head ends (after its
/// blank line). `None` when the peer closes first or sends more than `max_head` bytes without one.
pub(crate) fn read_head(stream: &mut TcpStream, data: &mut Vec<u8>, max_head: usize) -> Option<usize> {
    loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(at + 4);
        }
        if data.len() > max_head || !read_more(stream, data)? {
            return None;
        }
    }
}

/// Reads until `data` holds `len` bytes; `None` when the peer closes first.
fn read_to(stream: &mut TcpStream, data: &mut Vec<u8>, len: usize) -> Option<()> {
    while data.len() < len {
        if !read_more(stream, data)? {
            return None;
        }
    }
    Some(())
}

/// Appends what `stream` has next to `data`: `false` at the peer's close, `None` on an error or timeout.
fn read_more(stream: &mut TcpStream, data: &mut Vec<u8>) -> Option<bool> {
    let mut buf = [0u8; 8192];
    let n = stream.read(&mut buf).ok()?;
    data.extend_from_slice(&buf[..n]);
    Some(n > 0)
}

/// The value of header `name` (any case) in a request head.
pub(crate) fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned())
    })
}

/// `GET path` on 127.0.0.1:`port` with `Connection: close`: the status and the body, or `None` when
/// nothing answers within `timeout`. For polling a server's health and state, not for large bodies.
pub(crate) fn get(port: u16, path: &str, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    exchange(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").into_bytes(),
        timeout,
    )
}

/// `POST path` of a JSON `body`, as [`get`].
pub(crate) fn post_json(port: u16, path: &str, body: &[u8], timeout: Duration) -> Option<(u16, Vec<u8>)> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    exchange(port, &request, timeout)
}

/// Sends one request on a fresh connection and reads its reply: a Content-Length body, a chunked one,
/// or (with neither) up to the server's close. A server that keeps the connection open past its reply
/// (as the capacity server does) is not waited for.
fn exchange(port: u16, request: &[u8], timeout: Duration) -> Option<(u16, Vec<u8>)> {
    use std::io::Write;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.write_all(request).ok()?;
    let mut reply = Vec::new();
    let head_end = read_head(&mut stream, &mut reply, 1 << 20)?;
    let head = String::from_utf8_lossy(&reply[..head_end]).into_owned();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    if let Some(length) = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()) {
        read_to(&mut stream, &mut reply, head_end + length)?;
        return Some((status, reply[head_end..head_end + length].to_vec()));
    }
    if header(&head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            if let Some(body) = dechunk(&reply[head_end..]) {
                return Some((status, body));
            }
            if !read_more(&mut stream, &mut reply)? {
                return None;
            }
        }
    }
    while read_more(&mut stream, &mut reply)? {}
    Some((status, reply[head_end..].to_vec()))
}

/// The payload of a chunked body (hex size line, data, CRLF; a zero size ends it).
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined_and_a_cut_one_refused() {
        assert_eq!(dechunk(b"4\r\n[{\"a\r\n6;ext=1\r\n\":1}]\n\r\n0\r\n\r\n").as_deref(), Some(&b"[{\"a\":1}]\n"[..]));
        assert_eq!(dechunk(b"a\r\nshort\r\n"), None);
    }
}
