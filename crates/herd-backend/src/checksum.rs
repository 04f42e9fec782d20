//! SHA-256 checks of model files, recorded beside each file so that a 1 GB model is hashed once, not at
//! every load.

use crate::error::{Result, io_error};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_error(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The record of a passed check beside a cached file: `FILE.sha256-checked` holds the digest, the size and
/// the modification time the file had when it was hashed.
fn check_record_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256-checked");
    path.with_file_name(name)
}

/// What a recorded check is trusted by: the file's size, modification time and a sampled digest (see
/// [`sampled_digest`]), so bit rot or an edit that keeps the size and time is still found where it
/// touches a sampled window.
fn identity(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    let mtime =
        meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    Ok(format!("{} {} {}", meta.len(), mtime, sampled_digest(path, meta.len())?))
}

/// Windows a sampled digest reads, and how long each is: 1 MiB of the file, the first and last bytes
/// among them (milliseconds a load, where the whole SHA-256 of a 1 GB model takes seconds).
const SAMPLE_WINDOWS: u64 = 16;
const SAMPLE_WINDOW_BYTES: u64 = 64 << 10;

/// SHA-256 (first 16 hex digits) of [`SAMPLE_WINDOWS`] evenly spaced windows of the file: the whole file
/// when it is no longer than they are.
fn sampled_digest(path: &Path, len: u64) -> Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; SAMPLE_WINDOW_BYTES as usize];
    let last_start = len.saturating_sub(SAMPLE_WINDOW_BYTES);
    let mut previous_end = 0;
    for i in 0..SAMPLE_WINDOWS {
        // Windows overlap on short files; each byte is read once, in order.
        let start = (last_start * i / (SAMPLE_WINDOWS - 1)).max(previous_end);
        let end = (start + SAMPLE_WINDOW_BYTES).min(len);
        if start >= end {
            continue;
        }
        file.seek(SeekFrom::Start(start)).map_err(io_error(path))?;
        let window = &mut buf[..(end - start) as usize];
        file.read_exact(window).map_err(io_error(path))?;
        hasher.update(window);
        previous_end = end;
    }
    Ok(hex::encode(hasher.finalize())[..16].to_string())
}

/// Whether `path` has the SHA-256 `expected`. Hashing a 1 GB model takes seconds, so a passed check is
/// recorded beside the file and trusted while the file keeps the size, modification time and sampled
/// digest it had then (the sample is read at every load); any change to one of them hashes it again.
pub fn has_sha256(path: &Path, expected: &str) -> Result<bool> {
    let record = check_record_path(path);
    let current = format!("{expected} {}", identity(path)?);
    if std::fs::read_to_string(&record).is_ok_and(|r| r.trim() == current) {
        return Ok(true);
    }
    let _ = std::fs::remove_file(&record);
    if sha256_file(path)? != expected {
        return Ok(false);
    }
    record_check(path, expected)?;
    Ok(true)
}

/// The SHA-256 a passed check recorded for `path`, if the file still has the size, modification time and
/// sampled digest it had then (see [`has_sha256`]); hashes only the sample.
pub fn recorded_sha256(path: &Path) -> Option<String> {
    let record = std::fs::read_to_string(check_record_path(path)).ok()?;
    let (digest, rest) = record.trim().split_once(' ')?;
    (rest == identity(path).ok()? && digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| digest.to_string())
}

/// Records that `path`, as it is now, has the SHA-256 `digest` (see [`has_sha256`]). Best effort: a
/// read-only cache only means hashing again at the next load.
pub(crate) fn record_check(path: &Path, digest: &str) -> Result<()> {
    let _ = std::fs::write(check_record_path(path), format!("{digest} {}\n", identity(path)?));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_changed_under_the_same_size_and_time_is_hashed_again() {
        let dir = std::env::temp_dir().join(format!("herd-checksum-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.gguf");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let digest = sha256_file(&path).unwrap();
        assert!(has_sha256(&path, &digest).unwrap());
        assert_eq!(recorded_sha256(&path).as_deref(), Some(digest.as_str()));
        // Bit rot: one byte flips in the middle window, and the time is put back as it was.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let mut rotten = bytes.clone();
        let middle = (3_000_000 - SAMPLE_WINDOW_BYTES as usize) * 7 / 15 + 10;
        rotten[middle] ^= 0x40;
        std::fs::write(&path, &rotten).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        assert_eq!(recorded_sha256(&path), None, "the record no longer vouches for the file");
        assert!(!has_sha256(&path, &digest).unwrap(), "the whole file was hashed again");
        std::fs::write(&path, &bytes).unwrap();
        assert!(has_sha256(&path, &digest).unwrap());
        // A file shorter than the sample is sampled whole.
        let small = dir.join("small");
        std::fs::write(&small, b"tiny").unwrap();
        assert_eq!(sampled_digest(&small, 4).unwrap(), hex::encode(Sha256::digest(b"tiny"))[..16]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
