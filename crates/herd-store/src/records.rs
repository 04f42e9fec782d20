//! Commit records and the checks of what they commit: each record names its batch's units, the rows
//! and the SHA-256 of every part it commits, so a part changed, truncated or lost after its commit is
//! found when the run is read, resumed or verified.

use crate::error::StoreError;
use crate::manifest::{Manifest, STORE_FORMAT};
use crate::schema::Table;
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) const COMMITTED: &str = "committed";
pub(crate) const MANIFEST: &str = "manifest.json";

/// The digest of one committed part, computed over the bytes as they were written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PartDigest {
    pub sha256: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CommitRecord {
    pub batch: String,
    pub units: Vec<String>,
    pub rows: BTreeMap<Table, u64>,
    pub committed: u64,
    /// Every part's digest (store format 2; empty in records of format 1, which cannot be verified).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<Table, PartDigest>,
    /// 1-based commit number within the run (format 2): the newest record is the one a kill may have
    /// committed before the manifest's totals caught up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The batch's share of the manifest's `counts`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// The run that committed it, its manifest's `run_id` (store format 3): a record (and the parts it
    /// names) copied in from another run is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The SHA-256 of the run's input fingerprint when the batch was computed ([`inputs_digest`] of the
    /// manifest's `inputs`; store format 3): a batch computed from other banks, sim parameters or model
    /// files is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
}

impl CommitRecord {
    pub fn part_path(&self, dir: &Path, table: Table) -> PathBuf {
        dir.join(table.name()).join(format!("{}.parquet", self.batch))
    }
}

/// A commit record and the file it was read from.
#[derive(Debug, Clone)]
pub(crate) struct StoredRecord {
    pub path: PathBuf,
    pub record: CommitRecord,
}

pub(crate) fn io<'p>(path: &'p Path, action: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + 'p {
    move |source| StoreError::io(path, action, source)
}

/// The id of the batch of `units`: content-derived, so recomputing the same units after a kill overwrites
/// rather than duplicates.
pub(crate) fn batch_id(units: &[String]) -> String {
    let mut hash = Sha256::new();
    for unit in units {
        hash.update((unit.len() as u64).to_le_bytes());
        hash.update(unit.as_bytes());
    }
    format!("b{}", &hex::encode(hash.finalize())[..20])
}

/// A batch id as herd makes them: `b` and 20 lowercase hex digits.
pub(crate) fn is_batch_id(stem: &str) -> bool {
    stem.len() == 21
        && stem.starts_with('b')
        && stem[1..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A temporary name herd's atomic writes use (`.<name>.tmp` for a part, record, manifest or the write
/// probe); a user's own dot-files are not among them.
pub(crate) fn is_herd_temporary(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else { return false };
    if inner == MANIFEST || inner == ".write-probe" {
        return true;
    }
    inner.strip_suffix(".parquet").or_else(|| inner.strip_suffix(".json")).is_some_and(is_batch_id)
}

/// Largest commit record read: a record lists its batch's unit ids, a few kilobytes; a file far
/// larger in its place is damage, not a record.
const MAX_RECORD_BYTES: u64 = 64 << 20;

/// A file in `committed/` that should be a commit record and cannot be read as one, and why.
#[derive(Debug, Clone)]
pub(crate) struct UnreadableRecord {
    pub path: PathBuf,
    pub problem: String,
}

/// The commit records of a run folder, by file name. A record that cannot be parsed is an error
/// naming it (a resume drops it instead: [`read_records_lenient`]); files in `committed/` that are not
/// records (`*.json`) are left for the caller's foreign-file warnings.
pub(crate) fn read_records(dir: &Path) -> Result<Vec<StoredRecord>, StoreError> {
    let (records, unreadable) = read_records_lenient(dir)?;
    match unreadable.into_iter().next() {
        Some(bad) => Err(StoreError::BadRecord {
            record: bad.path,
            problem: format!("not a readable commit record ({})", bad.problem),
        }),
        None => Ok(records),
    }
}

/// The commit records that read, and the files that should be records but do not: not regular files
/// (a FIFO would block the read), too large, or not a record's JSON.
pub(crate) fn read_records_lenient(dir: &Path) -> Result<(Vec<StoredRecord>, Vec<UnreadableRecord>), StoreError> {
    use std::io::Read;
    let committed = dir.join(COMMITTED);
    if !committed.exists() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&committed)
        .map_err(io(&committed, "list"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !is_herd_temporary(p))
        .collect();
    paths.sort();
    let (mut records, mut unreadable) = (Vec::with_capacity(paths.len()), Vec::new());
    for path in paths {
        let meta = std::fs::metadata(&path).map_err(io(&path, "read"))?;
        let problem = if !meta.is_file() {
            "not a regular file (a folder, FIFO, socket or device stands where herd wrote a record)".to_owned()
        } else if meta.len() > MAX_RECORD_BYTES {
            format!("{} bytes, far more than any commit record", meta.len())
        } else {
            let mut text = String::new();
            let read = std::fs::File::open(&path).and_then(|f| f.take(MAX_RECORD_BYTES).read_to_string(&mut text));
            match read.map_err(|e| e.to_string()).and_then(|_| serde_json::from_str(&text).map_err(|e| e.to_string())) {
                Ok(record) => {
                    records.push(StoredRecord { path, record });
                    continue;
                }
                Err(problem) => problem,
            }
        };
        unreadable.push(UnreadableRecord { path, problem });
    }
    Ok((records, unreadable))
}

/// A writer that hashes what it passes on, so a part's digest costs no second read. It keeps the
/// first I/O error it saw: polars reports a failed write as a thrift or parquet error, and the
/// cause (a full disk) must reach the user.
pub(crate) struct HashingWriter<W> {
    inner: W,
    hash: Sha256,
    bytes: u64,
    pub error: Option<std::io::Error>,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter { inner, hash: Sha256::new(), bytes: 0, error: None }
    }

    pub fn digest(self) -> PartDigest {
        PartDigest { sha256: hex::encode(self.hash.finalize()), bytes: self.bytes }
    }

    fn keep<T>(&mut self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result
            && self.error.is_none()
        {
            self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
        result
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.inner.write(buf);
        let n = self.keep(result)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.inner.flush();
        self.keep(result)
    }
}

/// What is wrong with one committed part.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PartFault {
    Missing,
    Size { recorded: u64, found: u64 },
    Digest { recorded: String, found: String },
    Unreadable(String),
    Rows { recorded: u64, found: u64 },
}

impl std::fmt::Display for PartFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartFault::Missing => f.write_str("missing"),
            PartFault::Size { recorded, found } => {
                write!(f, "{found} bytes, but {recorded} were committed (truncated or appended to)")
            }
            PartFault::Digest { recorded, found } => write!(
                f,
                "its bytes changed after the commit (sha256 {}…, committed {}…)",
                &found[..12.min(found.len())],
                &recorded[..12.min(recorded.len())]
            ),
            PartFault::Unreadable(problem) => write!(f, "not a readable Parquet file ({problem})"),
            PartFault::Rows { recorded, found } => write!(f, "{found} rows, but {recorded} were committed"),
        }
    }
}

/// A record herd wrote with digests (store format 2 numbers its records: `seq`) that has lost the digest
/// of a table it committed rows of: edited, so its parts could not be checked. `None` for a sound record
/// and for records of format 1 (no `seq`, no digests), which are read unverified as before.
pub(crate) fn lost_digests(stored: &StoredRecord) -> Option<String> {
    let record = &stored.record;
    record.seq?;
    let missing: Vec<&str> = record
        .rows
        .iter()
        .filter(|(table, n)| **n > 0 && !record.parts.contains_key(*table))
        .map(|(table, _)| table.name())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{}: a commit record of store format 2 without the digest of its {} part(s): the record was edited, \
             so what it commits cannot be checked",
            stored.path.display(),
            missing.join(", ")
        )
    })
}

/// The SHA-256 of an input fingerprint (the manifest's `inputs`), as commit records carry it: of its
/// canonical JSON (names in order).
pub(crate) fn inputs_digest(inputs: &BTreeMap<String, String>) -> String {
    let json = serde_json::to_vec(inputs).unwrap_or_default();
    hex::encode(Sha256::digest(&json))
}

/// What a folder's manifest says every commit record must match, worked out once per read, resume or
/// verification and then asked of each record ([`RecordJudge::problem`]).
pub(crate) struct RecordJudge<'m> {
    run_id: &'m str,
    /// The digest of the manifest's input fingerprint; `None` where it has none (folders from before
    /// herd recorded one), so records' input digests cannot be compared.
    inputs: Option<String>,
    /// The first commit number whose record must name its run and inputs: store format 3 records carry
    /// them from the folder's start (or from where a format-3 herd resumed an older folder, recorded in
    /// the manifest); `None` for folders of older formats, whose records are identified only when they
    /// do carry the fields.
    identified_from: Option<u64>,
}

impl<'m> RecordJudge<'m> {
    pub fn of(manifest: &'m Manifest) -> Self {
        RecordJudge {
            run_id: &manifest.run_id,
            inputs: (!manifest.inputs.is_empty()).then(|| inputs_digest(&manifest.inputs)),
            identified_from: (manifest.store_format >= 3).then(|| manifest.identified_from.unwrap_or(1)),
        }
    }

    /// What is wrong with a commit record itself, before its parts are looked at: a read refuses it, a
    /// resume drops it (its units are run again) and `herd verify` lists it. The record lost the digests
    /// of parts it commits; its units were edited (they no longer give its batch id); it is filed under
    /// another batch's name; or it belongs to another run, or to other inputs, than the folder's
    /// manifest.
    pub fn problem(&self, stored: &StoredRecord) -> Option<String> {
        if let Some(problem) = lost_digests(stored) {
            return Some(problem);
        }
        let record = &stored.record;
        let path = stored.path.display();
        let stem = stored.path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        if stem != record.batch {
            return Some(format!(
                "{path}: holds batch {}, but herd names a record after its batch (a copy?)",
                record.batch
            ));
        }
        if batch_id(&record.units) != record.batch {
            return Some(format!(
                "{path}: its list of units was changed after the commit (it no longer gives batch id {})",
                record.batch
            ));
        }
        // A record without a commit number is of store format 1, which a folder begun by format 3 never
        // held: one rewritten to look older (no digests, no run) to escape the checks.
        if record.seq.is_none() && self.identified_from == Some(1) {
            return Some(format!(
                "{path}: a commit record without its commit number, in a folder begun by store format 3 (which \
                 numbers every record): the record was edited, so what it commits cannot be checked"
            ));
        }
        let must_identify = self.identified_from.is_some_and(|from| record.seq.unwrap_or(0) >= from);
        match &record.run {
            Some(run) if run != self.run_id => {
                return Some(format!(
                    "{path}: committed by another run ({run}; this folder holds {}): a record and its parts were \
                     copied in from another run folder",
                    self.run_id
                ));
            }
            None if must_identify => {
                return Some(format!(
                    "{path}: a commit record of store format 3 without its run id: the record was edited, so whose \
                     rows it commits cannot be told"
                ));
            }
            _ => {}
        }
        match (&record.inputs, &self.inputs) {
            (Some(inputs), Some(expected)) if inputs != expected => Some(format!(
                "{path}: its rows were computed from other inputs (fingerprint sha256 {}…) than the run's (sha256 \
                 {}…): a batch of a run with other banks, sim parameters or model files was copied in",
                &inputs[..inputs.len().min(12)],
                &expected[..12]
            )),
            (None, _) if must_identify => Some(format!(
                "{path}: a commit record of store format 3 without its input fingerprint: the record was edited, \
                 so what its rows were computed from cannot be told"
            )),
            _ => None,
        }
    }
}

/// The bytes of one committed part of `record`, checked against its size and digest when the record
/// has them (format 2).
fn checked_bytes(dir: &Path, record: &CommitRecord, table: Table) -> Result<Vec<u8>, PartFault> {
    use std::io::Read;
    let path = record.part_path(dir, table);
    // Opened only as a regular file whose size is the recorded one: a FIFO put in a part's place would
    // block the read forever, and /dev/zero (or a huge file) would fill memory.
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PartFault::Missing),
        Err(e) => return Err(PartFault::Unreadable(e.to_string())),
    };
    if !meta.is_file() {
        return Err(PartFault::Unreadable(
            "not a regular file (a folder, FIFO, socket or device stands where herd wrote a part)".into(),
        ));
    }
    let digest = record.parts.get(&table);
    if let Some(digest) = digest
        && meta.len() != digest.bytes
    {
        return Err(PartFault::Size { recorded: digest.bytes, found: meta.len() });
    }
    // The read stops one byte past the expected size, so a file that grows after the check is caught
    // without being read whole; parts of format 1 records (no digest) are read up to their size now.
    let limit = digest.map_or(meta.len(), |d| d.bytes).saturating_add(1);
    let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize);
    let read = std::fs::File::open(&path).and_then(|file| file.take(limit).read_to_end(&mut bytes));
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PartFault::Missing),
        Err(e) => return Err(PartFault::Unreadable(e.to_string())),
    }
    if let Some(digest) = digest {
        if bytes.len() as u64 != digest.bytes {
            return Err(PartFault::Size { recorded: digest.bytes, found: bytes.len() as u64 });
        }
        let found = hex::encode(Sha256::digest(&bytes));
        if found != digest.sha256 {
            return Err(PartFault::Digest { recorded: digest.sha256.clone(), found });
        }
    }
    Ok(bytes)
}

/// Reads one committed part of `record`: size and digest checked before parsing, the row count
/// after. The bytes parsed are the bytes hashed: one read.
pub(crate) fn read_part(dir: &Path, record: &CommitRecord, table: Table) -> Result<DataFrame, PartFault> {
    let bytes = checked_bytes(dir, record, table)?;
    let frame =
        ParquetReader::new(std::io::Cursor::new(bytes)).finish().map_err(|e| PartFault::Unreadable(e.to_string()))?;
    let recorded = record.rows.get(&table).copied().unwrap_or(0);
    if frame.height() as u64 != recorded {
        return Err(PartFault::Rows { recorded, found: frame.height() as u64 });
    }
    Ok(frame)
}

/// Checks one committed part without decoding its rows: size and digest (when the record has them),
/// then the row count from the Parquet footer against the record's, so a record whose counts were
/// edited is found here as in a read.
pub(crate) fn check_part(dir: &Path, record: &CommitRecord, table: Table) -> Result<(), PartFault> {
    let bytes = checked_bytes(dir, record, table)?;
    let found = ParquetReader::new(std::io::Cursor::new(bytes))
        .num_rows()
        .map_err(|e| PartFault::Unreadable(e.to_string()))? as u64;
    let recorded = record.rows.get(&table).copied().unwrap_or(0);
    if found != recorded {
        return Err(PartFault::Rows { recorded, found });
    }
    Ok(())
}

/// Two records holding one unit: a copied record (or a part of another run's committed/ copied in),
/// named by both files. `None` when every unit is in one record only.
pub(crate) fn duplicate_in_records(records: &[StoredRecord]) -> Option<StoreError> {
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    let mut first_duplicate: Option<(String, PathBuf, PathBuf)> = None;
    let mut more = 0usize;
    for stored in records {
        for unit in &stored.record.units {
            if let Some(first) = seen.insert(unit, &stored.path) {
                if first_duplicate.is_none() {
                    first_duplicate = Some((unit.clone(), first.to_path_buf(), stored.path.clone()));
                } else {
                    more += 1;
                }
                seen.insert(unit, first);
            }
        }
    }
    let (unit, first, second) = first_duplicate?;
    let copy = [&first, &second]
        .into_iter()
        .find(|p| {
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            records.iter().any(|r| &r.path == *p && r.record.batch != stem)
        })
        .unwrap_or(&second)
        .clone();
    Some(StoreError::DuplicateUnit {
        unit,
        sources: Box::new([first, second]),
        detail: format!(
            "{}\n  fix: a commit record was copied: remove {} (herd names each record after its batch), then read the \
             run again",
            if more > 0 { format!(" (and {more} more units)") } else { String::new() },
            copy.display()
        ),
    })
}

/// Reads a run's `manifest.json`, refusing a newer store format before deserialising it.
pub(crate) fn read_manifest(path: &Path) -> Result<Manifest, StoreError> {
    let text = std::fs::read_to_string(path).map_err(io(path, "read"))?;
    // Read the format first: a newer layout may not deserialise into this version's types.
    let format = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("store_format").and_then(serde_json::Value::as_u64));
    if let Some(format) = format.filter(|&f| f > u64::from(STORE_FORMAT)) {
        return Err(StoreError::NewerFormat { path: path.to_path_buf(), found: format, supported: STORE_FORMAT });
    }
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), problem: e.to_string() })
}
