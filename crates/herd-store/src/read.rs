//! Reading the tables of one or more run folders, checked: every part against its record's digest and
//! row count, every run's records against its manifest's totals, and every unit once, within a run and
//! across the runs read together.

use crate::error::StoreError;
use crate::manifest::Manifest;
use crate::records::{COMMITTED, MANIFEST, StoredRecord, read_part, read_records};
use crate::records::{RecordJudge, duplicate_in_records, read_manifest};
use crate::schema::Table;
use polars::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// How [`read_table_with`] treats a unit stored twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Keep the first copy of each unit (in the order of the folders, then of the records) instead of
    /// refusing the read. Runs that overlap by design (a run and its own shard) are refused either way.
    pub dedupe: bool,
}

/// A table read from run folders, checked, as one Parquet file in memory.
///
/// The rows leave herd-store as Parquet bytes, not as a polars frame: the contract between the store
/// and its readers is the file format (polars, arrow or pandas decode it), so no crate is tied to the
/// polars version the store writes with, and herd-analysis decodes it with the reader it uses for a
/// user's own Parquet files.
#[derive(Debug, Default)]
pub struct TableRead {
    /// The rows of every committed part, in folder and batch order, columns aligned (a column some
    /// parts lack is null there) and second copies left out; uncompressed. `None` when no folder has
    /// rows of the table.
    pub parquet: Option<Vec<u8>>,
    /// The number of rows in `parquet`.
    pub rows: usize,
    /// Units left out as second copies (only with [`ReadOptions::dedupe`]).
    pub duplicate_units_dropped: u64,
}

/// The committed parts of `table` in a run directory, in batch order.
pub fn committed_parts(dir: &Path, table: Table) -> Result<Vec<PathBuf>, StoreError> {
    let mut parts: Vec<PathBuf> = read_records(dir)?
        .into_iter()
        .filter(|r| r.record.rows.get(&table).is_some_and(|&n| n > 0))
        .map(|r| r.record.part_path(dir, table))
        .collect();
    parts.sort();
    parts.dedup();
    Ok(parts)
}

/// `table` of one or more run directories (shards merge by concatenation) as Parquet bytes, committed
/// parts only and every check of [`read_table_with`] made; a unit stored twice is an error. `None` when
/// no directory has rows of it.
pub fn read_table(dirs: &[PathBuf], table: Table) -> Result<Option<Vec<u8>>, StoreError> {
    read_table_with(dirs, table, ReadOptions::default()).map(|read| read.parquet)
}

/// `table` of one or more run directories, checked once per read: each part's size, SHA-256 and row
/// count against its commit record (records of store format 1 have no digests: those parts are only
/// parsed and counted), each run's records against its manifest's totals (a deleted or copied record
/// is an error), runs that overlap by design (a run beside its own shard, one shard twice) refused,
/// and each unit read once (a second copy is an error unless `options.dedupe`).
pub fn read_table_with(dirs: &[PathBuf], table: Table, options: ReadOptions) -> Result<TableRead, StoreError> {
    let (frame, duplicate_units_dropped) = read_frame_with(dirs, table, options)?;
    let Some(mut frame) = frame else { return Ok(TableRead { duplicate_units_dropped, ..TableRead::default() }) };
    let rows = frame.height();
    let mut parquet = Vec::new();
    ParquetWriter::new(&mut parquet)
        .with_compression(ParquetCompression::Uncompressed)
        .finish(&mut frame)
        .map_err(|e| StoreError::Polars { table: table.name(), problem: format!("encoding the rows read: {e}") })?;
    Ok(TableRead { parquet: Some(parquet), rows, duplicate_units_dropped })
}

/// [`read_table_with`] before the rows are encoded: the frame (for the store's own reads, such as a
/// resumed session's baseline candidates) and the number of units left out.
pub(crate) fn read_frame_with(
    dirs: &[PathBuf],
    table: Table,
    options: ReadOptions,
) -> Result<(Option<DataFrame>, u64), StoreError> {
    let runs = dirs.iter().map(|dir| RunRead::open(dir, options)).collect::<Result<Vec<_>, _>>()?;
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if let Some(why) = overlap(a, b) {
                return Err(StoreError::Overlap { first: a.dir.clone(), second: b.dir.clone(), why });
            }
            if let Some(differences) = shards_differ(a, b) {
                return Err(StoreError::ShardInputs { first: a.dir.clone(), second: b.dir.clone(), differences });
            }
        }
    }
    let (dropped, duplicate_units_dropped) = duplicates_across(&runs, options)?;
    let mut frame: Option<DataFrame> = None;
    for (r, run) in runs.iter().enumerate() {
        for (k, stored) in run.records.iter().enumerate() {
            if stored.record.rows.get(&table).is_none_or(|&n| n == 0) {
                continue;
            }
            let part = stored.record.part_path(&run.dir, table);
            let mut next = read_part(&run.dir, &stored.record, table).map_err(|fault| StoreError::Damaged {
                part: part.clone(),
                record: stored.path.clone(),
                problem: fault.to_string(),
            })?;
            let corrupt = |e: PolarsError| StoreError::Corrupt { path: part.clone(), problem: e.to_string() };
            if let Some(units) = dropped.get(&(r, k)) {
                next = without_units(&next, units).map_err(corrupt)?;
            }
            match &mut frame {
                None => frame = Some(next),
                Some(acc) => {
                    let next = align_columns(acc, next).map_err(corrupt)?;
                    acc.vstack_mut(&next).map_err(corrupt)?;
                }
            }
        }
    }
    if let Some(frame) = &mut frame {
        frame.align_chunks();
    }
    Ok((frame, duplicate_units_dropped))
}

/// One run folder as read: its manifest and the records it is read by.
struct RunRead {
    dir: PathBuf,
    manifest: Manifest,
    records: Vec<StoredRecord>,
}

impl RunRead {
    fn open(dir: &Path, options: ReadOptions) -> Result<Self, StoreError> {
        let manifest_path = dir.join(MANIFEST);
        if !manifest_path.exists() {
            return Err(StoreError::NotARun(dir.to_path_buf()));
        }
        let manifest = read_manifest(&manifest_path)?;
        let mut records = read_records(dir)?;
        if let Some(duplicate) = duplicate_in_records(&records) {
            if !options.dedupe {
                return Err(duplicate);
            }
            // A copied record commits the same batch (the same part) again: keep the first.
            let mut batches = BTreeSet::new();
            records.retain(|s| batches.insert(s.record.batch.clone()));
        }
        let judge = RecordJudge::of(&manifest);
        if let Some((stored, problem)) = records.iter().find_map(|s| judge.problem(s).map(|p| (s, p))) {
            return Err(StoreError::BadRecord { record: stored.path.clone(), problem });
        }
        if let Some(problem) = totals_problem(&manifest, &records) {
            return Err(StoreError::Counts { dir: dir.to_path_buf(), problem });
        }
        Ok(RunRead { dir: dir.to_path_buf(), manifest, records })
    }
}

/// What the commit records of a run add up to.
#[derive(Debug, PartialEq)]
struct Totals {
    batches: Option<u64>,
    units: u64,
    rows: BTreeMap<String, u64>,
}

impl Totals {
    fn of<'r>(records: impl Iterator<Item = &'r StoredRecord>, with_batches: bool) -> Self {
        let mut totals = Totals { batches: with_batches.then_some(0), units: 0, rows: BTreeMap::new() };
        for stored in records {
            totals.batches = totals.batches.map(|b| b + 1);
            totals.units += stored.record.units.len() as u64;
            for (table, &n) in stored.record.rows.iter().filter(|(_, n)| **n > 0) {
                *totals.rows.entry(table.name().to_owned()).or_default() += n;
            }
        }
        totals
    }

    fn of_manifest(manifest: &Manifest) -> Self {
        Totals {
            batches: manifest.batches,
            units: manifest.units_stored,
            rows: manifest.rows.iter().filter(|(_, n)| **n > 0).map(|(t, n)| (t.clone(), *n)).collect(),
        }
    }
}

impl std::fmt::Display for Totals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(batches) = self.batches {
            write!(f, "{batches} batches, ")?;
        }
        write!(f, "{} units", self.units)?;
        for (table, n) in &self.rows {
            write!(f, ", {n} {table} rows")?;
        }
        Ok(())
    }
}

/// Why the commit records do not add up to the manifest's totals, if they do not. The manifest is
/// updated after each record, so while a session runs (or after it was killed) the newest record may
/// not be counted yet; format 1 manifests of such sessions hold the totals of the session's start and
/// cannot be compared.
pub(crate) fn totals_problem(manifest: &Manifest, records: &[StoredRecord]) -> Option<String> {
    let running = manifest.sessions.last().is_some_and(|s| s.status == "running");
    if manifest.batches.is_none() && running {
        return None;
    }
    let with_batches = manifest.batches.is_some();
    let claimed = Totals::of_manifest(manifest);
    let found = Totals::of(records.iter(), with_batches);
    if found == claimed {
        return None;
    }
    if running && let Some(newest) = records.iter().max_by_key(|s| s.record.seq) {
        let earlier = Totals::of(records.iter().filter(|s| !std::ptr::eq(*s, newest)), with_batches);
        if earlier == claimed {
            return None;
        }
    }
    let why = if found.units < claimed.units {
        "a commit record is missing (deleted, or lost with its file)"
    } else if found.units > claimed.units {
        "commit records were added that herd did not write (copied from another folder?)"
    } else {
        "the records were changed after their commit"
    };
    Some(format!("manifest.json counts {claimed}, but {COMMITTED}/ holds {found}: {why}"))
}

/// `k/n` of a shard, `None` for a whole run.
fn shard_of(text: &str) -> Option<(u64, u64)> {
    let (k, n) = text.split_once('/')?;
    Some((k.trim().parse().ok()?, n.trim().parse().ok()?))
}

/// Why two runs cannot be read together, if they cannot: one experiment file run twice with one
/// model and backend, where the shards share units.
fn overlap(a: &RunRead, b: &RunRead) -> Option<String> {
    if a.dir == b.dir || a.dir.canonicalize().ok().is_some_and(|d| Some(d) == b.dir.canonicalize().ok()) {
        return Some("it is the same folder, given twice".into());
    }
    let (x, y) = (&a.manifest.identity, &b.manifest.identity);
    if (&x.experiment, &x.experiment_sha256, &x.model, &x.backend)
        != (&y.experiment, &y.experiment_sha256, &y.model, &y.backend)
    {
        return None;
    }
    let run = format!("experiment {} with model {} ({} backend)", x.experiment, x.model, x.backend);
    match (shard_of(&x.shard), shard_of(&y.shard)) {
        _ if x.shard == y.shard => Some(format!("both are shard {} of {run} (a copy of one run folder?)", x.shard)),
        (None, _) | (_, None) => Some(format!(
            "one is the whole of {run}, the other its shard {}",
            if shard_of(&x.shard).is_some() { &x.shard } else { &y.shard }
        )),
        (Some((_, n)), Some((_, m))) if n != m => {
            Some(format!("shards {} and {} of {run} come from different splits and share units", x.shard, y.shard))
        }
        _ => None,
    }
}

/// Units that appear in more than one run of the same experiment and model. Without `dedupe` the first
/// is an error naming both records; with it, the later copies are returned by (run, record) to be left
/// out, with their number.
type Dropped = HashMap<(usize, usize), BTreeSet<String>>;
/// Per unit of one experiment and model: the run (by index) and commit record that hold its first copy.
type FirstCopies<'a> = HashMap<&'a str, (usize, &'a Path)>;

fn duplicates_across(runs: &[RunRead], options: ReadOptions) -> Result<(Dropped, u64), StoreError> {
    let mut seen: HashMap<(&str, &str), FirstCopies<'_>> = HashMap::new();
    let mut dropped: Dropped = HashMap::new();
    let mut first: Option<(String, PathBuf, PathBuf)> = None;
    let mut n = 0u64;
    for (r, run) in runs.iter().enumerate() {
        let key = (run.manifest.identity.experiment.as_str(), run.manifest.identity.model.as_str());
        let units = seen.entry(key).or_default();
        for (k, stored) in run.records.iter().enumerate() {
            for unit in &stored.record.units {
                match units.get(unit.as_str()) {
                    // Every shard computes the baseline candidates its trials draw from, so shards of
                    // one split hold the same (deterministic) candidate units: one copy is kept, and
                    // that is no error.
                    Some(&(earlier_run, _))
                        if unit.starts_with(SHARED_BY_SHARDS_PREFIX) && same_split(&runs[earlier_run], run) =>
                    {
                        dropped.entry((r, k)).or_default().insert(unit.clone());
                    }
                    Some(&(_, earlier)) => {
                        n += 1;
                        if first.is_none() {
                            first = Some((unit.clone(), earlier.to_path_buf(), stored.path.clone()));
                        }
                        dropped.entry((r, k)).or_default().insert(unit.clone());
                    }
                    None => {
                        units.insert(unit, (r, &stored.path));
                    }
                }
            }
        }
    }
    match first {
        Some((unit, first, second)) if !options.dedupe => Err(StoreError::DuplicateUnit {
            unit,
            sources: Box::new([first, second]),
            detail: format!(
                "{}\n  fix: read only one of the two runs, or pass --dedupe to keep the first copy of each unit",
                if n > 1 { format!(" (and {} more units)", n - 1) } else { String::new() }
            ),
        }),
        _ => Ok((dropped, n)),
    }
}

/// Units id prefix of the baseline candidates (herd-runner's `baseline` module): the one kind of unit
/// that every shard of a run computes, since each shard's trials draw from the same filtered pools.
pub const SHARED_BY_SHARDS_PREFIX: &str = "baseline/";

/// Whether `a` and `b` are distinct shards of one split of one run.
fn same_split(a: &RunRead, b: &RunRead) -> bool {
    let (x, y) = (&a.manifest.identity, &b.manifest.identity);
    let splits = (shard_of(&x.shard), shard_of(&y.shard));
    (&x.experiment, &x.experiment_sha256, &x.model, &x.backend)
        == (&y.experiment, &y.experiment_sha256, &y.model, &y.backend)
        && matches!(splits, (Some((i, n)), Some((j, m))) if n == m && i != j)
}

/// How the inputs of two shards of one split differ, if they do: shards merge into one run's tables,
/// so they must have been computed from the same banks, parameters and model files. Shards of folders
/// written before herd recorded inputs cannot be compared.
fn shards_differ(a: &RunRead, b: &RunRead) -> Option<String> {
    let (x, y) = (&a.manifest.inputs, &b.manifest.inputs);
    if !same_split(a, b) || x.is_empty() || y.is_empty() {
        return None;
    }
    let differences = crate::manifest::input_differences(x, y);
    (!differences.is_empty()).then(|| differences.join("; "))
}

/// `frame` without the rows of `units`.
fn without_units(frame: &DataFrame, units: &BTreeSet<String>) -> PolarsResult<DataFrame> {
    let ids = frame.column("unit_id")?.str()?;
    let keep: BooleanChunked = ids.iter().map(|id| Some(!id.is_some_and(|id| units.contains(id)))).collect();
    frame.filter(&keep)
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
