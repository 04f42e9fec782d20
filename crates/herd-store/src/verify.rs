//! `herd verify`: every check a read makes, made on the whole run folder at once, and reported as a list
//! rather than stopping at the first problem.

use crate::error::StoreError;
use crate::read::totals_problem;
use crate::records::duplicate_in_records;
use crate::records::read_manifest;
use crate::records::{
    COMMITTED, MANIFEST, RecordJudge, StoredRecord, is_batch_id, is_herd_temporary, read_part, read_records_lenient,
};
use crate::schema::Table;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What `herd verify` found in a run folder.
#[derive(Debug, Default)]
pub struct Verification {
    pub dir: PathBuf,
    pub store_format: u32,
    pub records: usize,
    /// Parts whose size, SHA-256, Parquet structure and row count were checked against their record.
    pub parts_verified: usize,
    /// Parts of store-format-1 records, which carry no digests: parsed and counted, but a changed value
    /// in them cannot be seen.
    pub parts_unverifiable: usize,
    /// Damage: each line names the file and what is wrong. A run with any is not read by herd.
    pub problems: Vec<String>,
    /// Things worth knowing that do not stop a read (files herd did not write, leftovers of a kill).
    pub notes: Vec<String>,
    /// The run's digest: SHA-256 over `manifest.json` and every commit record (which hold every part's
    /// digest), so one line kept elsewhere pins the whole folder ([`run_digest`]).
    pub digest: String,
    /// Experiment units the sound records hold (baseline candidates, shared by shards, not counted).
    pub units_stored: u64,
    /// Units of the experiment (this shard's share), as the manifest states them.
    pub units_total: u64,
    /// Units the runner skipped and recorded why (by design or otherwise).
    pub units_skipped: u64,
    /// The last session's status (`running` for a session that was killed), if any ran.
    pub last_status: Option<String>,
}

impl Verification {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether every unit of the experiment is stored or was skipped with its reason recorded, and the
    /// last session ended.
    pub fn is_complete(&self) -> bool {
        self.units_stored + self.units_skipped >= self.units_total
            && self.last_status.as_deref().is_some_and(|s| s != "running")
    }
}

/// Checks a run folder: its manifest, every commit record (parsable, named after its batch, each unit
/// in one record), every committed part (present, size, SHA-256, Parquet, rows), and the records'
/// totals against the manifest's. Errors only when `dir` is not a run folder at all.
pub fn verify_run(dir: &Path) -> Result<Verification, StoreError> {
    let manifest_path = dir.join(MANIFEST);
    if !manifest_path.is_file() {
        return Err(StoreError::NotARun(dir.to_path_buf()));
    }
    let manifest = read_manifest(&manifest_path)?;
    let mut v = Verification { dir: dir.to_path_buf(), store_format: manifest.store_format, ..Verification::default() };
    let records = readable_records(dir, &mut v)?;
    v.records = records.len();
    v.digest = run_digest(dir, &records)?;
    if let Some(duplicate) = duplicate_in_records(&records) {
        v.problems.push(duplicate.to_string().lines().next().unwrap_or_default().to_owned());
    }
    let judge = RecordJudge::of(&manifest);
    v.units_total = manifest.units_total;
    v.units_skipped = manifest.skipped.iter().map(|s| s.units).sum();
    v.last_status = manifest.sessions.last().map(|s| s.status.clone());
    let mut experiment_units = BTreeSet::new();
    for stored in &records {
        if let Some(problem) = judge.problem(stored) {
            v.problems.push(problem);
            continue;
        }
        experiment_units
            .extend(stored.record.units.iter().filter(|u| !u.starts_with(crate::read::SHARED_BY_SHARDS_PREFIX)));
        for (table, &n) in &stored.record.rows {
            if n == 0 {
                continue;
            }
            if stored.record.parts.contains_key(table) {
                v.parts_verified += 1;
            } else {
                v.parts_unverifiable += 1;
            }
            if let Err(fault) = read_part(dir, &stored.record, *table) {
                v.problems.push(format!(
                    "{}: {fault} (committed by {})",
                    stored.record.part_path(dir, *table).display(),
                    stored.path.display()
                ));
            }
        }
    }
    v.units_stored = experiment_units.len() as u64;
    if let Some(problem) = totals_problem(&manifest, &records) {
        v.problems.push(problem);
    }
    if v.parts_unverifiable > 0 {
        v.notes.push(format!(
            "{} parts were committed by a herd of store format 1, whose records carry no digests: they were parsed \
             and counted, but a changed value in them cannot be detected (rerun the experiment into a new --out to \
             have every part verifiable)",
            v.parts_unverifiable
        ));
    }
    inputs(&manifest, &mut v);
    leftovers(dir, &records, &mut v);
    Ok(v)
}

/// The digest of a run folder as it stands: SHA-256 over `manifest.json`'s bytes and then each commit
/// record's name and bytes, in name order (each length-prefixed). The records hold every part's
/// SHA-256, so a change anywhere in what the run committed changes it; kept outside the folder, it
/// detects what the folder's own digests cannot: a forger who rewrote parts and recomputed their
/// records. Every session of `herd run` changes it (the manifest records the session).
fn run_digest(dir: &Path, records: &[StoredRecord]) -> Result<String, StoreError> {
    let mut hash = Sha256::new();
    let mut add = |name: &str, path: &Path| -> Result<(), StoreError> {
        let bytes = std::fs::read(path).map_err(crate::records::io(path, "read"))?;
        for field in [name.as_bytes(), &bytes] {
            hash.update((field.len() as u64).to_le_bytes());
            hash.update(field);
        }
        Ok(())
    };
    add(MANIFEST, &dir.join(MANIFEST))?;
    let mut paths: Vec<&Path> = records.iter().map(|s| s.path.as_path()).collect();
    paths.sort();
    for path in paths {
        add(&path.file_name().unwrap_or_default().to_string_lossy(), path)?;
    }
    Ok(format!("sha256:{}", hex::encode(hash.finalize())))
}

/// What a resume would find of the run's inputs. The input fingerprint itself is recomputed by
/// `herd run` (it needs the run's arguments: the sim file, the model); here the files the manifest
/// names are hashed again where they still exist, so an edited bank is reported before a resume is
/// refused for it.
fn inputs(manifest: &crate::manifest::Manifest, v: &mut Verification) {
    if manifest.inputs.is_empty() && manifest.store_format >= 2 {
        v.problems.push(format!(
            "{}: has no input fingerprint (`inputs`), which every manifest of store format 2 or later records: it \
             was edited, and a resume is refused",
            v.dir.join(MANIFEST).display()
        ));
    } else if manifest.inputs.is_empty() {
        v.notes.push(
            "manifest.json has no input fingerprint (written before herd recorded one): a resume cannot tell \
             whether banks, sentence files or sim parameters changed"
                .into(),
        );
    }
    for file in &manifest.files {
        let Some(recorded) = &file.sha256 else { continue };
        let path = Path::new(&file.path);
        // Model weights are gigabytes and checked by every load; the small files are hashed here.
        if !path.is_file() || std::fs::metadata(path).is_ok_and(|m| m.len() > 64 << 20) {
            continue;
        }
        if let Ok(bytes) = std::fs::read(path)
            && hex::encode(Sha256::digest(&bytes)) != *recorded
        {
            v.notes.push(format!(
                "{} ({}) changed since the run recorded it: the stored units were computed from the old file, and \
                 `herd run` into this folder will refuse to resume with the new one (restore it, or run into a new --out)",
                file.path, file.role
            ));
        }
    }
}

/// The records that parse; each one that does not is a problem.
fn readable_records(dir: &Path, v: &mut Verification) -> Result<Vec<StoredRecord>, StoreError> {
    let (records, unreadable) = read_records_lenient(dir)?;
    for bad in unreadable {
        v.problems.push(format!("{}: not a readable commit record ({})", bad.path.display(), bad.problem));
    }
    Ok(records)
}

/// Notes on files a read ignores: parts and temporary files of an interrupted session (the next
/// `herd run` removes them), and files herd did not write (left alone).
fn leftovers(dir: &Path, records: &[StoredRecord], v: &mut Verification) {
    let batches: BTreeSet<&str> = records.iter().map(|s| s.record.batch.as_str()).collect();
    let (mut unfinished, mut foreign) = (0usize, Vec::new());
    for folder in Table::ALL.iter().map(|t| dir.join(t.name())).chain([dir.join(COMMITTED)]) {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        let holds_parts = !folder.ends_with(COMMITTED);
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if is_herd_temporary(&path)
                || (holds_parts && ext == "parquet" && is_batch_id(stem) && !batches.contains(stem))
            {
                unfinished += 1;
            } else if (holds_parts && !(ext == "parquet" && is_batch_id(stem))) || (!holds_parts && ext != "json") {
                foreign.push(path);
            }
        }
    }
    if unfinished > 0 {
        v.notes.push(format!(
            "{unfinished} files of an interrupted session (no commit record); reads ignore them and the next `herd run` \
             into this folder removes them"
        ));
    }
    for path in foreign {
        v.notes.push(format!(
            "{}: not written by herd; herd reads only committed parts, but a glob over the folder would read it too",
            path.display()
        ));
    }
}
