//! Reading a reply body within a memory bound that holds however many requests are in flight.
//!
//! A reply is read up to `max_reply_bytes` (8 MB by default), and hundreds of requests may be in flight
//! at once: were every reply allowed to grow to the cap together, a server sending runaway replies would
//! make herd hold gigabytes. So the first [`SMALL_REPLY`] bytes of each reply are read freely (scoring and
//! allocation replies are a few kilobytes), and a reply that grows past them waits its turn among at most
//! [`LARGE_READERS`] at once: memory stays under in-flight × 256 KiB + 4 × the cap.

use std::io::Read;
use std::sync::{Condvar, Mutex};

/// Bytes of a reply read without waiting for a turn among the large ones.
pub(super) const SMALL_REPLY: usize = 256 << 10;
/// Replies read past [`SMALL_REPLY`] at once.
pub(super) const LARGE_READERS: usize = 4;

/// The turns of replies larger than [`SMALL_REPLY`].
pub(super) struct LargeReplies {
    reading: Mutex<usize>,
    done: Condvar,
}

/// A turn among the large replies, given back when dropped.
struct Turn<'a>(&'a LargeReplies);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.0.reading.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.0.done.notify_one();
    }
}

impl LargeReplies {
    pub(super) fn new() -> Self {
        LargeReplies { reading: Mutex::new(0), done: Condvar::new() }
    }

    fn turn(&self) -> Turn<'_> {
        let mut reading = self.reading.lock().unwrap_or_else(|p| p.into_inner());
        while *reading >= LARGE_READERS {
            reading = self.done.wait(reading).unwrap_or_else(|p| p.into_inner());
        }
        *reading += 1;
        Turn(self)
    }
}

/// Why a body was not read whole.
#[derive(Debug)]
pub(super) enum BodyError {
    /// Longer than the limit: not read further.
    OverLimit,
    /// A broken transfer, or text that is not UTF-8.
    Unreadable(String),
}

/// Reads `body` whole as UTF-8 text, refusing more than `limit` bytes, waiting for a turn among
/// `large` once it passes [`SMALL_REPLY`].
pub(super) fn read_body(mut body: impl Read, limit: u64, large: &LargeReplies) -> Result<String, BodyError> {
    let mut bytes = Vec::new();
    let mut turn = None;
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let n = match body.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BodyError::Unreadable(e.to_string())),
        };
        if (bytes.len() + n) as u64 > limit {
            return Err(BodyError::OverLimit);
        }
        if turn.is_none() && bytes.len() + n > SMALL_REPLY {
            turn = Some(large.turn());
        }
        bytes.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8(bytes).map_err(|e| BodyError::Unreadable(format!("not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_read_whole_up_to_its_limit_and_refused_past_it() {
        let large = LargeReplies::new();
        let text = "x".repeat(SMALL_REPLY * 2);
        assert_eq!(read_body(text.as_bytes(), text.len() as u64, &large).unwrap(), text);
        assert!(matches!(read_body(text.as_bytes(), text.len() as u64 - 1, &large), Err(BodyError::OverLimit)));
        assert!(matches!(read_body(&[0xff, 0xfe][..], 10, &large), Err(BodyError::Unreadable(_))));
        assert_eq!(*large.reading.lock().unwrap(), 0, "every turn was given back");
    }

    #[test]
    fn at_most_a_few_large_replies_are_read_at_once() {
        let large = LargeReplies::new();
        let turns: Vec<Turn<'_>> = (0..LARGE_READERS).map(|_| large.turn()).collect();
        let waited = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _turn = large.turn();
                assert!(waited.load(std::sync::atomic::Ordering::SeqCst), "a fifth turn waited for one to end");
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            waited.store(true, std::sync::atomic::Ordering::SeqCst);
            drop(turns);
        });
    }
}
