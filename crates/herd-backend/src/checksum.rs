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

fn identity(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    let mtime =
        meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    Ok(format!("{} {}", meta.len(), mtime))
}

/// Whether `path` has the SHA-256 `expected`. Hashing a 1 GB model takes seconds, so a passed check is
/// recorded beside the file and trusted while the file keeps the size and modification time it had then;
/// any change to either hashes it again.
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

/// The SHA-256 a passed check recorded for `path`, if the file still has the size and modification
/// time it had then (see [`has_sha256`]); hashes nothing.
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
