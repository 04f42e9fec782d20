//! A run directory: tables as folders of Parquet parts, one part per committed batch, and a commit
//! record per batch that is the resume index.
//!
//! ```text
//! DIR/manifest.json
//! DIR/conformity_trials/<batch>.parquet        (one folder per table; read them with a glob)
//! DIR/committed/<batch>.json                   (the units of the batch and its row counts)
//! ```
//!
//! A batch is committed by writing each of its parts (temporary name, fsync, rename) and then its commit
//! record the same way. A batch is stored if and only if its record exists: parts without a record are
//! what a kill left behind, and opening the directory removes them. So a kill at any moment loses at most
//! the batch in flight and never leaves a half-written file or a unit stored twice.

use crate::error::StoreError;
use crate::manifest::{Manifest, STORE_FORMAT, Session, compute_differences, git_commit, now};
use crate::schema::{BaselineCandidateRow, Table, TableRow};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

const COMMITTED: &str = "committed";
const MANIFEST: &str = "manifest.json";

/// The units of one batch and their rows, ready to commit.
#[derive(Default)]
pub struct Batch {
    units: Vec<String>,
    frames: Vec<(Table, DataFrame)>,
}

impl Batch {
    pub fn new(units: Vec<String>) -> Self {
        Batch { units, frames: Vec::new() }
    }

    /// Adds rows of one table (nothing when `rows` is empty).
    pub fn add<R: TableRow>(&mut self, rows: &[R]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let frame =
            R::frame(rows).map_err(|e| StoreError::Polars { table: R::TABLE.name(), problem: e.to_string() })?;
        self.frames.push((R::TABLE, frame));
        Ok(())
    }

    pub fn units(&self) -> &[String] {
        &self.units
    }

    /// Content-derived, so recomputing the same units after a kill overwrites rather than duplicates.
    fn id(&self) -> String {
        let mut hash = Sha256::new();
        for unit in &self.units {
            hash.update((unit.len() as u64).to_le_bytes());
            hash.update(unit.as_bytes());
        }
        format!("b{}", &hex::encode(hash.finalize())[..20])
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct CommitRecord {
    batch: String,
    units: Vec<String>,
    rows: BTreeMap<Table, u64>,
    committed: u64,
}

/// An open run directory: at most one process writes it at a time (an OS file lock, released on exit or
/// kill).
pub struct RunStore {
    dir: PathBuf,
    manifest: Manifest,
    done: BTreeSet<String>,
    rows: BTreeMap<Table, u64>,
    orphans_removed: usize,
    _lock: File,
}

fn io<'p>(path: &'p Path, action: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + 'p {
    move |source| StoreError::Io { path: path.to_path_buf(), action, source }
}

/// Writes `bytes` to `path` so that `path` is either absent, its old content, or the full new content.
fn write_atomic(path: &Path, write: impl FnOnce(&mut File) -> Result<(), StoreError>) -> Result<(), StoreError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let result = (|| {
        let mut file = File::create(&tmp).map_err(io(&tmp, "create"))?;
        write(&mut file)?;
        file.sync_all().map_err(io(&tmp, "sync"))?;
        std::fs::rename(&tmp, path).map_err(io(path, "rename into place"))?;
        if let Some(parent) = path.parent() {
            // The rename is durable once the directory entry is.
            File::open(parent).and_then(|d| d.sync_all()).map_err(io(parent, "sync"))?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), StoreError> {
    write_atomic(path, |file| {
        serde_json::to_writer_pretty(&mut *file, value).map_err(|e| StoreError::Io {
            path: path.to_path_buf(),
            action: "write",
            source: std::io::Error::other(e),
        })?;
        file.write_all(b"\n").map_err(io(path, "write"))
    })
}

fn read_manifest(path: &Path) -> Result<Manifest, StoreError> {
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

fn read_records(dir: &Path) -> Result<Vec<CommitRecord>, StoreError> {
    let committed = dir.join(COMMITTED);
    if !committed.exists() {
        return Ok(Vec::new());
    }
    let mut records = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&committed)
        .map_err(io(&committed, "list"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !is_temporary(p))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(io(&path, "read"))?;
        let record: CommitRecord = serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt { path: path.clone(), problem: e.to_string() })?;
        records.push(record);
    }
    Ok(records)
}

fn is_temporary(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
}

impl RunStore {
    /// Opens (creating if needed) a run directory for `manifest.identity`. An existing directory must hold
    /// the same run (experiment bytes, model, backend, shard); its stored units become the resume index and
    /// whatever a killed session left half-done is removed.
    pub fn open(dir: &Path, mut manifest: Manifest, device: &str) -> Result<Self, StoreError> {
        if dir.exists() && !dir.is_dir() {
            return Err(StoreError::NotADirectory(dir.to_path_buf()));
        }
        std::fs::create_dir_all(dir).map_err(io(dir, "create"))?;
        std::fs::read_dir(dir).map_err(io(dir, "list"))?;
        let lock_path = dir.join(".lock");
        let lock =
            File::options().create(true).truncate(false).write(true).open(&lock_path).map_err(io(dir, "write in"))?;
        lock.try_lock().map_err(|_| StoreError::Busy(dir.to_path_buf()))?;
        write_atomic(&dir.join(".write-probe"), |f| f.write_all(b"probe").map_err(io(dir, "write in")))?;
        let _ = std::fs::remove_file(dir.join(".write-probe"));

        let manifest_path = dir.join(MANIFEST);
        let mut previous_sessions = Vec::new();
        if manifest_path.exists() {
            let previous = read_manifest(&manifest_path)?;
            if previous.identity != manifest.identity {
                return Err(StoreError::DifferentRun {
                    dir: dir.to_path_buf(),
                    stored: Box::new(previous.identity),
                    requested: Box::new(manifest.identity),
                });
            }
            // Folders written before herd recorded compute paths take this session's.
            if let (Some(stored), Some(requested)) = (&previous.compute, &manifest.compute) {
                let differences = compute_differences(stored, requested);
                if !differences.is_empty() {
                    return Err(StoreError::DifferentCompute {
                        dir: dir.to_path_buf(),
                        differences: differences.join("; "),
                    });
                }
            }
            previous_sessions = previous.sessions;
            for session in &mut previous_sessions {
                if session.status == "running" {
                    session.status = "interrupted".into();
                }
            }
        } else if read_records(dir)?.iter().any(|r| !r.units.is_empty()) {
            return Err(StoreError::Corrupt {
                path: manifest_path,
                problem: "stored batches but no manifest; the directory was not written by `herd run`".into(),
            });
        }

        let records = read_records(dir)?;
        let mut done = BTreeSet::new();
        let mut rows: BTreeMap<Table, u64> = BTreeMap::new();
        let mut batches = BTreeSet::new();
        for record in records {
            done.extend(record.units.iter().cloned());
            for (table, n) in &record.rows {
                *rows.entry(*table).or_default() += n;
            }
            batches.insert(record.batch);
        }
        let orphans_removed = remove_orphans(dir, &batches)?;

        previous_sessions.push(Session {
            started: now(),
            ended: None,
            herd_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: git_commit().into(),
            device: device.into(),
            compute: manifest.compute.clone(),
            units_already_stored: done.len() as u64,
            units_run: 0,
            status: "running".into(),
        });
        manifest.sessions = previous_sessions;
        manifest.store_format = STORE_FORMAT;
        manifest.run_id = manifest.identity.run_id();
        let mut store = RunStore { dir: dir.to_path_buf(), manifest, done, rows, orphans_removed, _lock: lock };
        store.update_counts();
        write_json(&manifest_path, &store.manifest)?;
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn run_id(&self) -> &str {
        &self.manifest.run_id
    }

    pub fn is_stored(&self, unit: &str) -> bool {
        self.done.contains(unit)
    }

    pub fn units_stored(&self) -> usize {
        self.done.len()
    }

    /// Parts of batches a killed session did not commit, removed when the directory was opened.
    pub fn orphans_removed(&self) -> usize {
        self.orphans_removed
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn manifest_mut(&mut self) -> &mut Manifest {
        &mut self.manifest
    }

    /// Stores a batch: after this returns, its units are stored exactly once, whatever happens next.
    pub fn commit(&mut self, batch: Batch) -> Result<(), StoreError> {
        if batch.units.is_empty() {
            return Ok(());
        }
        if let Some(unit) = batch.units.iter().find(|u| self.done.contains(*u)) {
            return Err(StoreError::AlreadyStored(unit.clone()));
        }
        let id = batch.id();
        let mut rows = BTreeMap::new();
        for (table, frame) in &batch.frames {
            let folder = self.dir.join(table.name());
            std::fs::create_dir_all(&folder).map_err(io(&folder, "create"))?;
            let path = folder.join(format!("{id}.parquet"));
            let mut frame = frame.clone();
            write_atomic(&path, |file| {
                ParquetWriter::new(file)
                    .finish(&mut frame)
                    .map(|_| ())
                    .map_err(|e| StoreError::Polars { table: table.name(), problem: e.to_string() })
            })?;
            *rows.entry(*table).or_insert(0) += frame.height() as u64;
        }
        let committed = self.dir.join(COMMITTED);
        std::fs::create_dir_all(&committed).map_err(io(&committed, "create"))?;
        let record = CommitRecord { batch: id.clone(), units: batch.units, rows, committed: now() };
        write_json(&committed.join(format!("{id}.json")), &record)?;
        for (table, n) in &record.rows {
            *self.rows.entry(*table).or_default() += n;
        }
        let n_units = record.units.len() as u64;
        self.done.extend(record.units);
        if let Some(session) = self.manifest.sessions.last_mut() {
            session.units_run += n_units;
        }
        Ok(())
    }

    fn update_counts(&mut self) {
        self.manifest.units_stored = self.done.len() as u64;
        self.manifest.rows = self.rows.iter().map(|(t, n)| (t.name().to_owned(), *n)).collect();
    }

    /// Ends the session: records its status and the final counts in the manifest.
    pub fn finish(&mut self, status: &str) -> Result<(), StoreError> {
        self.update_counts();
        if let Some(session) = self.manifest.sessions.last_mut() {
            session.ended = Some(now());
            session.status = status.into();
        }
        write_json(&self.dir.join(MANIFEST), &self.manifest)
    }

    /// The baseline candidates stored so far (to resume a pool without rescoring).
    pub fn baseline_candidates(&self) -> Result<Vec<BaselineCandidateRow>, StoreError> {
        let Some(frame) = read_table(std::slice::from_ref(&self.dir), Table::BaselineCandidates)? else {
            return Ok(Vec::new());
        };
        baseline_rows(&frame)
            .map_err(|e| StoreError::Polars { table: Table::BaselineCandidates.name(), problem: e.to_string() })
    }
}

fn remove_orphans(dir: &Path, committed: &BTreeSet<String>) -> Result<usize, StoreError> {
    let mut removed = 0;
    let table_folders = Table::ALL.iter().map(|t| (dir.join(t.name()), true));
    for (folder, holds_parts) in table_folders.chain([(dir.join(COMMITTED), false), (dir.to_path_buf(), false)]) {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let orphan = holds_parts && path.extension().is_some_and(|e| e == "parquet") && !committed.contains(stem);
            if is_temporary(&path) || orphan {
                std::fs::remove_file(&path).map_err(io(&path, "remove"))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// The committed parts of `table` in a run directory, in batch order.
pub fn committed_parts(dir: &Path, table: Table) -> Result<Vec<PathBuf>, StoreError> {
    let mut parts: Vec<PathBuf> = read_records(dir)?
        .into_iter()
        .filter(|r| r.rows.get(&table).is_some_and(|&n| n > 0))
        .map(|r| dir.join(table.name()).join(format!("{}.parquet", r.batch)))
        .collect();
    parts.sort();
    Ok(parts)
}

/// `table` of one or more run directories (shards merge by concatenation), committed parts only;
/// `None` when no directory has rows of it.
pub fn read_table(dirs: &[PathBuf], table: Table) -> Result<Option<DataFrame>, StoreError> {
    let mut frame: Option<DataFrame> = None;
    for dir in dirs {
        if !dir.join(MANIFEST).exists() {
            return Err(StoreError::NotARun(dir.clone()));
        }
        for part in committed_parts(dir, table)? {
            let file = File::open(&part).map_err(io(&part, "open"))?;
            let next = ParquetReader::new(file)
                .finish()
                .map_err(|e| StoreError::Corrupt { path: part.clone(), problem: e.to_string() })?;
            match &mut frame {
                None => frame = Some(next),
                Some(acc) => {
                    let corrupt = |e: PolarsError| StoreError::Corrupt { path: part.clone(), problem: e.to_string() };
                    let next = align_columns(acc, next).map_err(corrupt)?;
                    acc.vstack_mut(&next).map_err(corrupt)?;
                }
            }
        }
    }
    if let Some(frame) = &mut frame {
        frame.align_chunks();
    }
    Ok(frame)
}

/// Gives `acc` and `next` the same columns in `acc`'s order, a column one lacks being all null: tables
/// may gain columns (schema.rs), so a run resumed by a newer herd, or shards of two versions, hold
/// parts with and without them.
fn align_columns(acc: &mut DataFrame, mut next: DataFrame) -> PolarsResult<DataFrame> {
    if acc.get_column_names() == next.get_column_names() {
        return Ok(next);
    }
    for column in next.columns().to_vec() {
        if acc.column(column.name()).is_err() {
            acc.with_column(Column::full_null(column.name().clone(), acc.height(), column.dtype()))?;
        }
    }
    for column in acc.columns().to_vec() {
        if next.column(column.name()).is_err() {
            next.with_column(Column::full_null(column.name().clone(), next.height(), column.dtype()))?;
        }
    }
    next.select(acc.get_column_names_owned())
}

/// The manifest of a run directory.
pub fn read_run_manifest(dir: &Path) -> Result<Manifest, StoreError> {
    let path = dir.join(MANIFEST);
    if !path.exists() {
        return Err(StoreError::NotARun(dir.to_path_buf()));
    }
    read_manifest(&path)
}

fn baseline_rows(frame: &DataFrame) -> PolarsResult<Vec<BaselineCandidateRow>> {
    let text = |name: &str| -> PolarsResult<Vec<String>> {
        Ok(frame.column(name)?.str()?.iter().map(|v| v.unwrap_or_default().to_owned()).collect())
    };
    let float = |name: &str| -> PolarsResult<Vec<Option<f64>>> { Ok(frame.column(name)?.f64()?.iter().collect()) };
    let (run_id, unit_id, model, task, pool, image_id, correct_label) = (
        text("run_id")?,
        text("unit_id")?,
        text("model")?,
        text("task")?,
        text("pool")?,
        text("image_id")?,
        text("correct_label")?,
    );
    let candidate: Vec<Option<i64>> = frame.column("candidate")?.i64()?.iter().collect();
    let (p_correct, p_correct_ab, logit_correct) =
        (float("p_correct")?, float("p_correct_ab")?, float("logit_correct")?);
    let accepted: Vec<Option<bool>> = frame.column("accepted")?.bool()?.iter().collect();
    Ok((0..frame.height())
        .map(|i| BaselineCandidateRow {
            run_id: run_id[i].clone(),
            unit_id: unit_id[i].clone(),
            model: model[i].clone(),
            task: task[i].clone(),
            pool: pool[i].clone(),
            candidate: candidate[i].unwrap_or_default(),
            image_id: image_id[i].clone(),
            correct_label: correct_label[i].clone(),
            p_correct: p_correct[i].unwrap_or(f64::NAN),
            p_correct_ab: p_correct_ab[i],
            logit_correct: logit_correct[i].unwrap_or(f64::NAN),
            accepted: accepted[i].unwrap_or(false),
        })
        .collect())
}
