//! A run directory: tables as folders of Parquet parts, one part per committed batch, and a commit
//! record per batch that is the resume index.
//!
//! ```text
//! DIR/manifest.json
//! DIR/conformity_trials/<batch>.parquet        (one folder per table; read them with a glob)
//! DIR/committed/<batch>.json                   (the units of the batch, its row counts and digests)
//! ```
//!
//! A batch is committed by writing each of its parts (temporary name, fsync, rename), then its commit
//! record the same way, then the manifest with the run's new totals. A batch is stored if and only if
//! its record exists and its parts match the record's digests: parts without a record are what a kill
//! left behind, and opening the directory removes them; a batch whose parts were damaged after the
//! commit is run again. So a kill at any moment loses at most the batch in flight and never leaves a
//! half-written file or a unit stored twice.

use crate::error::StoreError;
use crate::manifest::{Manifest, STORE_FORMAT, Session, compute_differences, git_commit, input_differences, now};
use crate::records::{
    COMMITTED, CommitRecord, HashingWriter, MANIFEST, PartDigest, RecordJudge, StoredRecord, batch_id, check_part,
    duplicate_in_records, inputs_digest, io, is_batch_id, is_herd_temporary, read_manifest, read_records,
    read_records_lenient,
};
use crate::schema::{BaselineCandidateRow, Table, TableRow};
use polars::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The units of one batch and their rows, ready to commit.
#[derive(Default)]
pub struct Batch {
    units: Vec<String>,
    frames: Vec<(Table, DataFrame)>,
    counts: BTreeMap<String, u64>,
}

impl Batch {
    pub fn new(units: Vec<String>) -> Self {
        Batch { units, frames: Vec::new(), counts: BTreeMap::new() }
    }

    /// Adds rows of one table (nothing when `rows` is empty).
    pub fn add<R: TableRow>(&mut self, rows: &[R]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let frame =
            R::frame(rows).map_err(|e| StoreError::Polars { table: R::TABLE.name(), problem: e.to_string() })?;
        self.frames.push((R::TABLE, frame));
        for (name, n) in R::counts(rows) {
            *self.counts.entry(name.to_owned()).or_default() += n;
        }
        Ok(())
    }

    pub fn units(&self) -> &[String] {
        &self.units
    }

    fn id(&self) -> String {
        batch_id(&self.units)
    }
}

/// An open run directory: at most one process writes it at a time (an OS file lock, released on exit or
/// kill).
pub struct RunStore {
    dir: PathBuf,
    manifest: Manifest,
    done: BTreeSet<String>,
    rows: BTreeMap<Table, u64>,
    counts: BTreeMap<String, u64>,
    batches: u64,
    next_seq: u64,
    orphans_removed: usize,
    repairs: Vec<String>,
    foreign: Vec<PathBuf>,
    /// The digest of the run's input fingerprint every record of this session carries.
    inputs_digest: String,
    _lock: File,
}

/// Writes `path` so that it is either absent, its old content, or the full new content; `write`
/// fills the temporary file and returns what the caller wants to keep (a part's digest).
fn write_atomic<T>(path: &Path, write: impl FnOnce(&mut File) -> Result<T, StoreError>) -> Result<T, StoreError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let result = (|| {
        let mut file = File::create(&tmp).map_err(io(&tmp, "create"))?;
        let kept = write(&mut file)?;
        file.sync_all().map_err(io(&tmp, "sync"))?;
        std::fs::rename(&tmp, path).map_err(io(path, "rename into place"))?;
        if let Some(parent) = path.parent() {
            // The rename is durable once the directory entry is.
            File::open(parent).and_then(|d| d.sync_all()).map_err(io(parent, "sync"))?;
        }
        Ok(kept)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), StoreError> {
    write_atomic(path, |file| {
        let mut buffer = serde_json::to_vec_pretty(value).map_err(|e| StoreError::io(path, "write", e.into()))?;
        buffer.push(b'\n');
        file.write_all(&buffer).map_err(io(path, "write"))
    })
}

/// Writes one part, hashing the bytes on their way to disk.
fn write_part(path: &Path, table: Table, frame: &mut DataFrame) -> Result<PartDigest, StoreError> {
    write_atomic(path, |file| {
        let mut writer = HashingWriter::new(&mut *file);
        let written = ParquetWriter::new(&mut writer).finish(frame);
        if let Some(cause) = writer.error.take() {
            // What failed was the disk, whatever polars calls it.
            return Err(StoreError::io(path, "write", cause));
        }
        written.map_err(|e| StoreError::Polars { table: table.name(), problem: e.to_string() })?;
        Ok(writer.digest())
    })
}

impl RunStore {
    /// Opens (creating if needed) a run directory for `manifest.identity`. An existing directory must hold
    /// the same run (experiment bytes, model, backend, shard); its stored units become the resume index,
    /// batches whose parts fail their digests are dropped to be run again, and whatever a killed
    /// session left half-done is removed (only herd's own names: other files stay, listed by
    /// [`RunStore::foreign_files`]).
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
        let mut previous_totals = None;
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
            // Format 2 introduced the input fingerprint: a manifest of format 2 or later without one was
            // edited, and a resume could no longer tell whether the banks or parameters changed. Folders
            // of format 1 take this session's.
            if previous.store_format >= 2 && previous.inputs.is_empty() && !manifest.inputs.is_empty() {
                return Err(StoreError::LostFingerprint { path: manifest_path });
            }
            let differences = input_differences(&previous.inputs, &manifest.inputs);
            if !differences.is_empty() {
                return Err(StoreError::DifferentInputs {
                    dir: dir.to_path_buf(),
                    differences: differences.join("; "),
                });
            }
            // Format 1 wrote its totals only at a session's start and end: nothing to compare.
            previous_totals = previous.batches.map(|_| previous.units_stored);
            // Records name their run and inputs from format 3 on; an older folder's records do from the
            // first commit of this session (set below, once the records are known).
            manifest.identified_from =
                if previous.store_format >= 3 { Some(previous.identified_from.unwrap_or(1)) } else { Some(u64::MAX) };
            previous_sessions = previous.sessions;
        } else if read_records(dir)?.iter().any(|r| !r.record.units.is_empty()) {
            return Err(StoreError::Corrupt {
                path: manifest_path,
                problem: "stored batches but no manifest; the directory was not written by `herd run`".into(),
            });
        }

        manifest.store_format = STORE_FORMAT;
        manifest.run_id = manifest.identity.run_id();
        manifest.identified_from = manifest.identified_from.or(Some(1));
        let (mut records, unreadable) = read_records_lenient(dir)?;
        let mut repairs = Vec::new();
        // A record herd wrote that no longer parses (truncated, overwritten) is dropped like a damaged
        // part: its parts go as orphans and its units are run again. A file of another name is the
        // user's: refused, not removed.
        for bad in unreadable {
            let stem = bad.path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let is_folder = std::fs::symlink_metadata(&bad.path).is_ok_and(|m| m.is_dir());
            if !is_batch_id(stem) || is_folder {
                return Err(StoreError::BadRecord {
                    record: bad.path,
                    problem: format!(
                        "not a readable commit record ({}), and not named like one of herd's",
                        bad.problem
                    ),
                });
            }
            std::fs::remove_file(&bad.path).map_err(io(&bad.path, "remove"))?;
            repairs.push(format!(
                "{}: not a readable commit record ({}); removed, and its batch's units are run again",
                bad.path.display(),
                bad.problem
            ));
        }
        if let Some(duplicate) = duplicate_in_records(&records) {
            return Err(duplicate);
        }
        let mut units_dropped = 0;
        // A resume makes every check a read makes (RecordJudge::problem, then each part's size, digest and
        // rows): what a read would refuse is dropped here and its units run again.
        let judge = RecordJudge::of(&manifest);
        records.retain(|stored| match verify_for_resume(dir, stored, &judge) {
            Ok(()) => true,
            Err(problem) => {
                repairs.push(problem);
                units_dropped += stored.record.units.len() as u64;
                false
            }
        });
        let mut store_rows: BTreeMap<Table, u64> = BTreeMap::new();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut done = BTreeSet::new();
        let mut batches = BTreeSet::new();
        let mut last_seq = 0;
        for StoredRecord { record, .. } in &records {
            done.extend(record.units.iter().cloned());
            for (table, n) in &record.rows {
                *store_rows.entry(*table).or_default() += n;
            }
            for (name, n) in &record.counts {
                *counts.entry(name.clone()).or_default() += n;
            }
            batches.insert(record.batch.clone());
            last_seq = last_seq.max(record.seq.unwrap_or(0));
        }
        let stored_now = done.len() as u64;
        if let Some(promised) = previous_totals.filter(|&n| n > stored_now + units_dropped) {
            repairs.push(format!(
                "{}: the manifest counted {promised} committed units, the commit records hold {stored_now}: a record \
                 was removed, so its units are run again",
                dir.join(COMMITTED).display()
            ));
        }
        for session in &mut previous_sessions {
            if session.status == "running" {
                session.status = "interrupted".into();
            }
        }
        // A kill between a batch's record and the manifest's update leaves that batch uncounted; it
        // belongs to the session that was killed.
        if let (Some(counted), Some(last)) = (previous_totals, previous_sessions.last_mut())
            && last.status == "interrupted"
        {
            last.units_run += stored_now.saturating_sub(counted);
        }
        let (orphans_removed, foreign) = remove_orphans(dir, &batches)?;

        previous_sessions.push(Session {
            started: now(),
            ended: None,
            herd_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: git_commit().into(),
            device: device.into(),
            compute: manifest.compute.clone(),
            units_already_stored: stored_now,
            units_run: 0,
            status: "running".into(),
        });
        manifest.sessions = previous_sessions;
        let n_records = records.len() as u64;
        let next_seq = last_seq.max(n_records) + 1;
        if manifest.identified_from == Some(u64::MAX) {
            manifest.identified_from = Some(next_seq);
        }
        let inputs_digest = inputs_digest(&manifest.inputs);
        let mut store = RunStore {
            dir: dir.to_path_buf(),
            manifest,
            done,
            rows: store_rows,
            counts,
            batches: n_records,
            next_seq,
            orphans_removed,
            repairs,
            foreign,
            inputs_digest,
            _lock: lock,
        };
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

    /// Parts of batches a killed session did not commit, and herd's temporary files, removed when the
    /// directory was opened.
    pub fn orphans_removed(&self) -> usize {
        self.orphans_removed
    }

    /// Batches dropped when the directory was opened because their files failed verification (each
    /// line names the file, the record and what was wrong); their units are run again.
    pub fn repairs(&self) -> &[String] {
        &self.repairs
    }

    /// Files in the table folders and `committed/` that herd did not write: left in place (herd reads
    /// only committed parts), worth a warning since a glob over the folder reads them too.
    pub fn foreign_files(&self) -> &[PathBuf] {
        &self.foreign
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
        let mut parts = BTreeMap::new();
        for (table, frame) in &batch.frames {
            let folder = self.dir.join(table.name());
            std::fs::create_dir_all(&folder).map_err(io(&folder, "create"))?;
            let path = folder.join(format!("{id}.parquet"));
            let mut frame = frame.clone();
            parts.insert(*table, write_part(&path, *table, &mut frame)?);
            *rows.entry(*table).or_insert(0) += frame.height() as u64;
        }
        let committed = self.dir.join(COMMITTED);
        std::fs::create_dir_all(&committed).map_err(io(&committed, "create"))?;
        let record = CommitRecord {
            batch: id.clone(),
            units: batch.units,
            rows,
            committed: now(),
            parts,
            seq: Some(self.next_seq),
            counts: batch.counts,
            run: Some(self.manifest.run_id.clone()),
            inputs: Some(self.inputs_digest.clone()),
        };
        write_json(&committed.join(format!("{id}.json")), &record)?;
        self.next_seq += 1;
        self.batches += 1;
        for (table, n) in &record.rows {
            *self.rows.entry(*table).or_default() += n;
        }
        for (name, n) in &record.counts {
            *self.counts.entry(name.clone()).or_default() += n;
        }
        let n_units = record.units.len() as u64;
        self.done.extend(record.units);
        if let Some(session) = self.manifest.sessions.last_mut() {
            session.units_run += n_units;
        }
        // The totals follow every commit, so that a record deleted later is visible (and a killed
        // session shows what it stored).
        self.update_counts();
        write_json(&self.dir.join(MANIFEST), &self.manifest)
    }

    fn update_counts(&mut self) {
        self.manifest.units_stored = self.done.len() as u64;
        self.manifest.rows = self.rows.iter().map(|(t, n)| (t.name().to_owned(), *n)).collect();
        self.manifest.batches = Some(self.batches);
        self.manifest.counts = self.counts.clone();
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
        let dirs = std::slice::from_ref(&self.dir);
        let (frame, _) =
            crate::read::read_frame_with(dirs, Table::BaselineCandidates, crate::read::ReadOptions::default())?;
        let Some(frame) = frame else {
            return Ok(Vec::new());
        };
        baseline_rows(&frame)
            .map_err(|e| StoreError::Polars { table: Table::BaselineCandidates.name(), problem: e.to_string() })
    }
}

/// Checks a record and its parts before a session trusts them, as a read would: a failing batch's
/// record is removed (its parts then go as orphans) and the returned line says what was wrong.
fn verify_for_resume(dir: &Path, stored: &StoredRecord, judge: &RecordJudge<'_>) -> Result<(), String> {
    let record = &stored.record;
    let drop_record = |problem: String| -> String {
        match std::fs::remove_file(&stored.path) {
            Ok(()) => format!("{problem}; its {} units are run again", record.units.len()),
            Err(e) => format!(
                "{problem}; could not remove the record ({e}): remove {} by hand to run its units again",
                stored.path.display()
            ),
        }
    };
    if let Some(problem) = judge.problem(stored) {
        return Err(drop_record(problem));
    }
    for (table, &n) in &record.rows {
        if n == 0 {
            continue;
        }
        if let Err(fault) = check_part(dir, record, *table) {
            return Err(drop_record(format!(
                "{}: {fault} (committed by {})",
                record.part_path(dir, *table).display(),
                stored.path.display()
            )));
        }
    }
    Ok(())
}

/// Removes what a killed session left: herd's temporary files, and parts named like herd's batches
/// that have no commit record. Every other file in a table folder or `committed/` is left in place and
/// returned, for a warning.
fn remove_orphans(dir: &Path, committed: &BTreeSet<String>) -> Result<(usize, Vec<PathBuf>), StoreError> {
    let mut removed = 0;
    let mut foreign = Vec::new();
    let table_folders = Table::ALL.iter().map(|t| (dir.join(t.name()), true));
    for (folder, holds_parts) in table_folders.chain([(dir.join(COMMITTED), false), (dir.to_path_buf(), false)]) {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        let in_root = folder == dir;
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let parquet = path.extension().is_some_and(|e| e == "parquet");
            let json = path.extension().is_some_and(|e| e == "json");
            let herd_part = holds_parts && parquet && is_batch_id(stem);
            if is_herd_temporary(&path) || (herd_part && !committed.contains(stem)) {
                std::fs::remove_file(&path).map_err(io(&path, "remove"))?;
                removed += 1;
            } else if !in_root && !herd_part && (!json || holds_parts) {
                foreign.push(path);
            }
        }
    }
    Ok((removed, foreign))
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
