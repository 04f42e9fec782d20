//! Prepared weights: the int8 matrices requantised from a GGUF file, kept in herd's cache so that a load
//! maps them instead of requantising (about 12 s for Qwen2.5-Coder-1.5B), and where a load's time goes
//! ([`LoadReport`]).
//!
//! A file `prepared/<gguf stem>-<source id>.int8-v<layout>.bin` holds:
//!
//! | bytes | |
//! |---|---|
//! | 0..8 | `HERDPREP` |
//! | 8..12 | [`FILE_VERSION`], little-endian |
//! | 12..16 | header length `h` |
//! | 16..24 | checksum of the header bytes |
//! | 24..24 + h | header (JSON): source file (path, size, modification time, SHA-256 where a passed check recorded one), int8 layout version, payload length, and per matrix its key, shape, part offsets (from the payload's start) and checksum |
//! | from 24 + h rounded up to 4096 | the payload: each matrix's quants, scales and minimums, every part 64-byte aligned |
//!
//! The layout is the same for every CPU path (herd-kernels' tiles all read it), so one file serves
//! them all. A file is used only if every header field matches this build and the source file as it is
//! now, and the file has the stated length; the matrices' checksums are verified whenever the file
//! differs in size or modification time from the last passed verification (recorded in
//! `FILE.checked`, like the models' `.sha256-checked`), which reading 2 GB would otherwise cost at every
//! load. Anything else makes the load prepare the weights again, warn in one line, and replace the file
//! (written under a temporary name and renamed, so readers never see a partial file and a mapping
//! keeps the file it opened).

use herd_backend::recorded_sha256;
use herd_kernels::{INT8_LAYOUT_VERSION, Int8Matrix, MappedFile, checksum};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"HERDPREP";
/// The container's version (header fields, alignment, checksum: 2 is XXH3-64); the matrices' own layout is
/// [`herd_kernels::INT8_LAYOUT_VERSION`].
pub(crate) const FILE_VERSION: u32 = 2;
const PREAMBLE: usize = 24;
/// The payload starts at a page boundary.
const PAGE: u64 = 4096;
const PART_ALIGN: u64 = 64;

/// Where prepared weights are kept between loads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PreparedCache {
    /// `prepared/` in herd's cache folder ([`herd_backend::herd_cache_dir`]).
    #[default]
    Herd,
    /// Prepare the weights at every load and keep nothing.
    Off,
    /// This folder.
    In(PathBuf),
}

impl PreparedCache {
    fn dir(&self) -> Option<PathBuf> {
        match self {
            PreparedCache::Herd => Some(herd_backend::herd_cache_dir().join("prepared")),
            PreparedCache::Off => None,
            PreparedCache::In(dir) => Some(dir.clone()),
        }
    }
}

/// What a load did with prepared weights.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PreparedStatus {
    /// Nothing prepared is cached for this load (dense or native weights, an HF folder, another device,
    /// or [`PreparedCache::Off`]).
    #[default]
    NotUsed,
    /// Mapped from this file.
    Read(PathBuf),
    /// Prepared from the model file and written to this file; `replaced` says why a file that was
    /// there could not be used.
    Written { path: PathBuf, replaced: Option<String> },
    /// Prepared, but the file could not be written (the next load prepares again).
    NotWritten { path: PathBuf, problem: String },
}

/// Where a load's time went, phase by phase (summed where a phase recurs per tensor), and what happened
/// to the prepared weights. `HERD_LOAD_TIMING=1` prints it to stderr after each load.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// `(phase, seconds)` in the order the phases first ran.
    pub phases: Vec<(&'static str, f64)>,
    pub total_s: f64,
    pub prepared: PreparedStatus,
}

impl LoadReport {
    pub(crate) fn add(&mut self, phase: &'static str, elapsed: Duration) {
        let s = elapsed.as_secs_f64();
        match self.phases.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, total)) => *total += s,
            None => self.phases.push((phase, s)),
        }
    }

    /// Runs `f`, adding its time to `phase`.
    pub(crate) fn time<T>(&mut self, phase: &'static str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add(phase, start.elapsed());
        out
    }

    /// One line: the total, each phase, and the prepared weights' file.
    pub fn summary(&self) -> String {
        let phases: Vec<String> = self.phases.iter().map(|(p, s)| format!("{p} {s:.3} s")).collect();
        let prepared = match &self.prepared {
            PreparedStatus::NotUsed => String::new(),
            PreparedStatus::Read(path) => format!("; prepared weights read from {}", path.display()),
            PreparedStatus::Written { path, .. } => format!("; prepared weights written to {}", path.display()),
            PreparedStatus::NotWritten { path, problem } => {
                format!("; prepared weights not written to {}: {problem}", path.display())
            }
        };
        format!("load {:.3} s: {}{prepared}", self.total_s, phases.join(", "))
    }
}

/// The model file a prepared file was made from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Source {
    path: String,
    size: u64,
    mtime_ns: u64,
    /// Where a passed check (`.sha256-checked`) recorded it for the file as it is.
    sha256: Option<String>,
}

impl Source {
    pub(crate) fn of(file: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(file)?;
        let path = std::fs::canonicalize(file)?;
        Ok(Self {
            path: path.to_string_lossy().into_owned(),
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
            sha256: recorded_sha256(file),
        })
    }

    /// The same bytes: by SHA-256 where both know it (a copy elsewhere is the same source), else by
    /// path, size and modification time.
    fn same_as(&self, other: &Source) -> bool {
        match (&self.sha256, &other.sha256) {
            (Some(a), Some(b)) => a == b && self.size == other.size,
            _ => self.path == other.path && self.size == other.size && self.mtime_ns == other.mtime_ns,
        }
    }

    /// 16 hex digits naming the source in file names.
    fn id(&self) -> String {
        match &self.sha256 {
            Some(sha) => sha[..16].to_string(),
            None => hex::encode(&Sha256::digest(format!("{}\0{}\0{}", self.path, self.size, self.mtime_ns))[..8]),
        }
    }
}

fn mtime_ns(meta: &std::fs::Metadata) -> u64 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as u64)
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    int8_layout: u32,
    format: String,
    block: usize,
    source: Source,
    payload_len: u64,
    matrices: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    key: String,
    rows: usize,
    cols: usize,
    /// Byte offsets of quants, scales and minimums from the payload's start.
    offsets: [u64; 3],
    /// [`checksum`] of the three parts' checksums, each over its bytes.
    checksum: u64,
}

/// Prepared matrices mapped from a file, by key (a tensor name; `NAME#i` for the `i`-th part of a
/// fused tensor that is split).
pub(crate) struct Prepared {
    pub path: PathBuf,
    pub matrices: HashMap<String, Arc<Int8Matrix>>,
}

/// Where the prepared weights of `source` (the GGUF `file`) live under `cache`; `None` when off.
pub(crate) fn path_for(cache: &PreparedCache, file: &Path, source: &Source) -> Option<PathBuf> {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    Some(cache.dir()?.join(format!("{stem}-{}.int8-v{INT8_LAYOUT_VERSION}.bin", source.id())))
}

fn matrix_checksum(m: &Int8Matrix) -> u64 {
    let parts = m.parts();
    let sums: Vec<u8> =
        [parts.quants, parts.scales, parts.mins].iter().flat_map(|p| checksum(p).to_le_bytes()).collect();
    checksum(&sums)
}

fn check_record_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".checked");
    path.with_file_name(name)
}

fn file_identity(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    Some(format!("{} {}", meta.len(), mtime_ns(&meta)))
}

/// Reads the prepared file at `path`: `Ok(None)` where there is none, `Err(why)` where it cannot be used.
/// `shapes` are the model file's tensors (`[rows, cols]` by name), which every matrix must fit.
pub(crate) fn read(
    path: &Path,
    source: &Source,
    shapes: &HashMap<String, (usize, usize)>,
) -> Result<Option<Prepared>, String> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    let map = MappedFile::open(&file).map_err(|e| format!("cannot map it: {e}"))?;
    let bytes = map.bytes();
    if bytes.len() < PREAMBLE || &bytes[..8] != MAGIC {
        return Err("it is not a prepared-weights file (too short or wrong magic)".into());
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    if word(8) != FILE_VERSION {
        return Err(format!("it has container version {}, this herd writes {FILE_VERSION}", word(8)));
    }
    let header_len = word(12) as usize;
    let header_bytes = bytes.get(PREAMBLE..PREAMBLE + header_len).ok_or("its header is cut short")?;
    if checksum(header_bytes) != u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")) {
        return Err("its header fails its checksum".into());
    }
    let header: Header = serde_json::from_slice(header_bytes).map_err(|e| format!("its header is unreadable: {e}"))?;
    if header.int8_layout != INT8_LAYOUT_VERSION || header.format != "int8" || header.block != herd_kernels::BLOCK {
        return Err(format!(
            "it holds int8 layout {} (block {}), this herd uses {INT8_LAYOUT_VERSION} (block {})",
            header.int8_layout,
            header.block,
            herd_kernels::BLOCK
        ));
    }
    if !header.source.same_as(source) {
        return Err(format!(
            "it was prepared from another file ({}, {} bytes)",
            header.source.path, header.source.size
        ));
    }
    let payload = (PREAMBLE + header_len) as u64;
    let payload = payload.next_multiple_of(PAGE);
    if payload.checked_add(header.payload_len) != Some(bytes.len() as u64) {
        return Err(format!(
            "it has {} bytes, its header says {}",
            bytes.len(),
            payload.saturating_add(header.payload_len)
        ));
    }
    let mut matrices = HashMap::new();
    for e in &header.matrices {
        let base = e.key.split('#').next().unwrap_or(&e.key);
        let fits = shapes
            .get(base)
            .is_some_and(|&(rows, cols)| cols == e.cols && if base == e.key { rows == e.rows } else { e.rows <= rows });
        if !fits {
            return Err(format!("its matrix `{}` ({} × {}) does not match the model file", e.key, e.rows, e.cols));
        }
        let offsets = e.offsets.map(|o| o.saturating_add(payload));
        let m = Int8Matrix::from_mapped(&map, e.rows, e.cols, offsets)
            .map_err(|err| format!("matrix `{}`: {err}", e.key))?;
        matrices.insert(e.key.clone(), (Arc::new(m), e.checksum));
    }
    // The checksums cost a read of every byte: only where the file changed since they last passed.
    let record = check_record_path(path);
    let identity = file_identity(path);
    if identity.is_none() || std::fs::read_to_string(&record).ok().as_deref().map(str::trim) != identity.as_deref() {
        let bad: Vec<&String> =
            matrices.par_iter().filter(|(_, (m, sum))| matrix_checksum(m) != *sum).map(|(k, _)| k).collect();
        if let Some(key) = bad.first() {
            return Err(format!(
                "its matrix `{key}` fails its checksum{}",
                if bad.len() > 1 { format!(" ({} matrices do)", bad.len()) } else { String::new() }
            ));
        }
        if let Some(identity) = identity {
            let _ = std::fs::write(&record, identity + "\n");
        }
    }
    Ok(Some(Prepared { path: path.to_path_buf(), matrices: matrices.into_iter().map(|(k, (m, _))| (k, m)).collect() }))
}

/// Writes `matrices` (by key) as the prepared file at `path`: under a temporary name, synced, then
/// renamed into place; files in that folder prepared earlier from the same path are removed.
pub(crate) fn write(path: &Path, source: &Source, matrices: &[(String, Arc<Int8Matrix>)]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut at = 0;
    let mut entries = Vec::with_capacity(matrices.len());
    let sums: Vec<u64> = matrices.par_iter().map(|(_, m)| matrix_checksum(m)).collect();
    for ((key, m), checksum) in matrices.iter().zip(sums) {
        let parts = m.parts();
        let mut offsets = [0u64; 3];
        for (offset, part) in offsets.iter_mut().zip([parts.quants, parts.scales, parts.mins]) {
            *offset = at;
            at = (at + part.len() as u64).next_multiple_of(PART_ALIGN);
        }
        entries.push(Entry { key: key.clone(), rows: m.rows(), cols: m.cols(), offsets, checksum });
    }
    let header = Header {
        int8_layout: INT8_LAYOUT_VERSION,
        format: "int8".into(),
        block: herd_kernels::BLOCK,
        source: source.clone(),
        payload_len: at,
        matrices: entries,
    };
    let header_bytes = serde_json::to_vec(&header).map_err(std::io::Error::other)?;
    let header_len = u32::try_from(header_bytes.len()).map_err(std::io::Error::other)?;
    let payload = ((PREAMBLE + header_bytes.len()) as u64).next_multiple_of(PAGE);
    let tmp =
        dir.join(format!(".{}.tmp-{}", path.file_name().unwrap_or_default().to_string_lossy(), std::process::id()));
    let written = (|| {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        out.write_all(MAGIC)?;
        out.write_all(&FILE_VERSION.to_le_bytes())?;
        out.write_all(&header_len.to_le_bytes())?;
        out.write_all(&checksum(&header_bytes).to_le_bytes())?;
        out.write_all(&header_bytes)?;
        let mut pos = (PREAMBLE + header_bytes.len()) as u64;
        for ((_, m), e) in matrices.iter().zip(&header.matrices) {
            let parts = m.parts();
            for (offset, part) in e.offsets.iter().zip([parts.quants, parts.scales, parts.mins]) {
                out.write_all(&vec![0u8; (payload + offset - pos) as usize])?;
                out.write_all(part)?;
                pos = payload + offset + part.len() as u64;
            }
        }
        out.write_all(&vec![0u8; (payload + at - pos) as usize])?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok::<_, std::io::Error>(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)?;
    // Verified as written: the checksums came from the matrices in memory.
    if let Some(identity) = file_identity(path) {
        let _ = std::fs::write(check_record_path(path), identity + "\n");
    }
    remove_other_versions(path, source);
    Ok(())
}

/// The source path a prepared file's header names (reading the header only), if it has a readable one.
fn prepared_from(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut preamble = [0u8; PREAMBLE];
    file.read_exact(&mut preamble).ok()?;
    if &preamble[..8] != MAGIC {
        return None;
    }
    let mut header = vec![0u8; u32::from_le_bytes(preamble[12..16].try_into().ok()?) as usize];
    file.read_exact(&mut header).ok()?;
    let header: serde_json::Value = serde_json::from_slice(&header).ok()?;
    Some(header["source"]["path"].as_str()?.to_string())
}

/// Removes `STEM-<other id>.int8-v*.bin` (and their records) beside `path` that were prepared from the
/// same model file path: weights of its earlier contents, or of earlier layouts, that no load will read
/// again. (Files of the same name elsewhere keep theirs.)
fn remove_other_versions(path: &Path, source: &Source) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    // `name` is STEM-<16 hex>.int8-v…; match the same STEM followed by 16 hex digits and `.int8-v`.
    let Some(stem_len) = name.find(".int8-v").and_then(|i| i.checked_sub(17)) else { return };
    let stem = &name[..stem_len + 1];
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let other = entry.file_name();
        let Some(other) = other.to_str() else { continue };
        let base = other.strip_suffix(".checked").unwrap_or(other);
        let rest = base.strip_prefix(stem);
        let same_model = rest.is_some_and(|r| {
            r.len() > 16
                && r[..16].bytes().all(|b| b.is_ascii_hexdigit())
                && r[16..].starts_with(".int8-v")
                && r.ends_with(".bin")
        });
        if same_model && base != name && prepared_from(&dir.join(base)).is_some_and(|p| p == source.path) {
            let _ = std::fs::remove_file(dir.join(base));
            let _ = std::fs::remove_file(check_record_path(&dir.join(base)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source { path: "/m/a.gguf".into(), size: 10, mtime_ns: 5, sha256: None }
    }

    fn matrices() -> Vec<(String, Arc<Int8Matrix>)> {
        let w: Vec<f32> = (0..40 * 64).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
        vec![
            ("a.weight".into(), Arc::new(Int8Matrix::quantize(&w, 40, 64).unwrap())),
            ("b.weight#1".into(), Arc::new(Int8Matrix::quantize(&w[..16 * 64], 16, 64).unwrap())),
        ]
    }

    fn shapes() -> HashMap<String, (usize, usize)> {
        HashMap::from([("a.weight".to_string(), (40, 64)), ("b.weight".to_string(), (32, 64))])
    }

    #[test]
    fn written_files_read_back_bit_for_bit_and_damage_is_refused_by_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a-0123456789abcdef.int8-v1.x.bin");
        write(&path, &source(), &matrices()).unwrap();
        let read_back = read(&path, &source(), &shapes()).unwrap().unwrap();
        for (key, m) in matrices() {
            let got = &read_back.matrices[&key];
            assert_eq!(
                (got.parts().quants, got.parts().scales, got.parts().mins),
                (m.parts().quants, m.parts().scales, m.parts().mins),
                "{key}"
            );
        }
        let original = std::fs::read(&path).unwrap();
        // File times tick coarsely (a few ms): each rewrite moves the time on, as a later write would.
        let tick = std::cell::Cell::new(1);
        let rewrite = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let later = std::time::SystemTime::now() + Duration::from_secs(tick.get());
            tick.set(tick.get() + 1);
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
        };
        let refused = |bytes: &[u8], src: &Source| {
            rewrite(bytes);
            read(&path, src, &shapes()).err().unwrap_or_else(|| panic!("accepted"))
        };
        let mut flipped = original.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(refused(&flipped, &source()).contains("fails its checksum"));
        assert!(refused(&original[..original.len() - 1], &source()).contains("bytes, its header says"));
        let mut header = original.clone();
        header[30] ^= 1;
        assert!(refused(&header, &source()).contains("header fails its checksum"));
        assert!(refused(b"nonsense", &source()).contains("not a prepared-weights file"));
        let other = Source { mtime_ns: 6, ..source() };
        assert!(refused(&original, &other).contains("another file"));
        let mut versioned = original.clone();
        versioned[8] = 99;
        assert!(refused(&versioned, &source()).contains("container version 99"));
        // The same bytes again are accepted (their checksums are verified again: the file changed).
        rewrite(&original);
        assert!(read(&path, &source(), &shapes()).unwrap().is_some());
        let mut small = shapes();
        small.insert("a.weight".into(), (39, 64));
        assert!(read(&path, &source(), &small).err().unwrap().contains("does not match the model file"));
        assert!(read(&dir.path().join("absent.bin"), &source(), &shapes()).unwrap().is_none());
    }

    #[test]
    fn a_source_is_the_same_by_sha256_where_known_else_by_path_size_and_time() {
        let a = Source { sha256: Some("ab".repeat(32)), ..source() };
        assert!(a.same_as(&Source { path: "/elsewhere.gguf".into(), mtime_ns: 9, ..a.clone() }));
        assert!(!a.same_as(&Source { sha256: Some("cd".repeat(32)), ..a.clone() }));
        assert!(!source().same_as(&Source { path: "/m/b.gguf".into(), ..source() }));
        assert!(source().same_as(&source()));
    }

    #[test]
    fn writing_removes_earlier_files_of_the_same_model_path_only() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let earlier = Source { mtime_ns: 1, ..source() };
        let elsewhere = Source { path: "/n/a.gguf".into(), ..source() };
        write(&at("a-00000000000000aa.int8-v1.x.bin"), &earlier, &matrices()).unwrap();
        write(&at("a-00000000000000cc.int8-v1.x.bin"), &elsewhere, &matrices()).unwrap();
        write(&at("a-extra-00000000000000aa.int8-v1.x.bin"), &earlier, &matrices()).unwrap();
        std::fs::write(at("a-00000000000000dd.int8-v0.x.bin"), b"unreadable").unwrap();
        write(&at("a-00000000000000bb.int8-v1.x.bin"), &source(), &matrices()).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".checked"))
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "a-00000000000000bb.int8-v1.x.bin",
                "a-00000000000000cc.int8-v1.x.bin",
                "a-00000000000000dd.int8-v0.x.bin",
                "a-extra-00000000000000aa.int8-v1.x.bin"
            ]
        );
        assert!(!at("a-00000000000000aa.int8-v1.x.bin.checked").exists());
    }
}
