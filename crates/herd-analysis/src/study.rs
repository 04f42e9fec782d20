//! A study's rows read the one way `herd analyze` and `herd report` both read them: from a
//! [`TrialSource`] (a plain table file, or run folders read together, verified by herd-store) into
//! the typed tables the analyses take ([`ConformityTable`], [`DyadTable`]), with the quality table a
//! report shows beside them ([`ConformityInput::quality`], [`MinimalGroupInput::quality`]). No
//! polars type leaves this module: callers see herd's own tables only.

use std::path::{Path, PathBuf};

use herd_store::{ReadOptions, Table, read_run_manifest, read_table_with};
use polars::prelude::DataFrame;

use crate::conformity::ConformityTable;
use crate::error::AnalysisError;
use crate::io::{
    conformity_from_frame, decode_stored, does_not_exist, dyads_from_frame, io_error, manifest_pool, plain_table_file,
    plain_without_duplicates, read_frame,
};
use crate::minimal_group::DyadTable;
use crate::quality;
use crate::table::ResultTable;

/// Bootstrap resamples of the seeds per cell (`herd analyze minimal-group --resamples`'s default,
/// and what `herd report` uses).
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
/// Seed of the bootstrap resampling stream (`herd analyze minimal-group --bootstrap-seed`'s default,
/// and what `herd report` uses).
pub const BOOTSTRAP_SEED: u64 = 20_240_501;

fn not_found(dir: &Path, problem: &str) -> AnalysisError {
    AnalysisError::Folder {
        path: dir.display().to_string(),
        problem: problem.to_owned(),
        fix: "pass a run folder (`herd run --out DIR`) or what `cargo xtask replicate --out DIR` wrote; a copy of the \
              folder from another machine is enough (its */*.parquet parts and manifest.json)"
            .into(),
    }
}

/// Run folders in `dir`: `dir` itself, `dir/runs/*` (replicate's layout) or `dir/*`.
pub fn find_run_folders(dir: &Path) -> Result<Vec<PathBuf>, AnalysisError> {
    if !dir.exists() {
        return Err(not_found(dir, "no such folder"));
    }
    if !dir.is_dir() {
        return Err(not_found(dir, "is a file, not a folder of runs"));
    }
    if dir.join("manifest.json").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut found = Vec::new();
    for parent in [dir.join("runs"), dir.to_path_buf()] {
        let Ok(entries) = std::fs::read_dir(&parent) else { continue };
        let mut runs: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.join("manifest.json").is_file()).collect();
        runs.sort();
        found.extend(runs);
    }
    if found.is_empty() {
        let problem = if std::fs::read_dir(dir).map(|mut e| e.next().is_none()).unwrap_or(false) {
            "the folder is empty"
        } else {
            "no run folder here (none of DIR, DIR/runs/*, DIR/* has a manifest.json)"
        };
        return Err(not_found(dir, problem));
    }
    Ok(found)
}

/// Where a study's trial table is read from.
#[derive(Debug, Clone)]
pub struct TrialSource {
    place: Place,
    /// The name errors and the typed tables give the rows.
    origin: String,
}

#[derive(Debug, Clone)]
enum Place {
    /// A plain table file (CSV or Parquet); tables that go with it are read from its folder.
    File(PathBuf),
    /// Run folders read together (shards merge by concatenation).
    Runs(Vec<PathBuf>),
}

impl TrialSource {
    /// A plain table file (CSV or Parquet), whatever its name. The tables that go with it
    /// (`baseline_candidates`, `allocation_deciders`) are read from beside it when its folder is a
    /// folder of plain tables.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self { origin: path.display().to_string(), place: Place::File(path) }
    }

    /// `table`'s committed parts of each run folder in `dirs`, read together and verified.
    pub fn runs(dirs: Vec<PathBuf>, table: Table) -> Self {
        Self { origin: origin(&dirs, table), place: Place::Runs(dirs) }
    }

    /// `herd analyze`'s input: `path` is a table file (CSV or Parquet), a folder of plain tables
    /// (`DIR/<table>.parquet` or `.csv`), one `herd run` folder, or a folder of run folders (those holding
    /// `table`'s rows, found as `herd report` finds them). Rows are named by `path`.
    pub fn at(path: &Path, table: Table) -> Result<Self, AnalysisError> {
        if !path.exists() {
            return Err(does_not_exist(path));
        }
        let origin = path.display().to_string();
        if !path.is_dir() {
            return Ok(Self::file(path));
        }
        if let Some(file) = plain_table_file(path, table) {
            return Ok(Self { place: Place::File(file), origin });
        }
        if path.join("manifest.json").is_file() {
            return Ok(Self { place: Place::Runs(vec![path.to_path_buf()]), origin });
        }
        // A folder of run folders (`cargo xtask replicate`'s OUT, or OUT/runs): the runs holding the
        // table, read together, as `herd report` reads them.
        let runs = find_run_folders(path).ok().unwrap_or_default();
        let mut holding = Vec::new();
        for run in runs {
            if !herd_store::committed_parts(&run, table).map_err(|e| io_error(&run, e))?.is_empty() {
                holding.push(run);
            }
        }
        if holding.is_empty() {
            return Err(AnalysisError::Io {
                file: origin,
                problem: format!(
                    "neither a run folder (no manifest.json), a folder of run folders holding {0} rows, nor a folder \
                     of plain tables (no {0}.parquet or {0}.csv)\n  fix: pass a `herd run` folder, a folder of them \
                     (e.g. what `cargo xtask replicate` wrote), the table file itself, or a folder holding {0}.parquet",
                    table.name()
                ),
            });
        }
        Ok(Self { place: Place::Runs(holding), origin })
    }

    /// The name errors and the typed tables give the rows.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The run folders read, empty for a plain table.
    pub fn run_folders(&self) -> &[PathBuf] {
        match &self.place {
            Place::File(_) => &[],
            Place::Runs(dirs) => dirs,
        }
    }

    /// The trial table, each unit once (a plain table's repeated unit is refused, or left out with
    /// `options.dedupe`; run folders are checked by herd-store), and how many units were left out.
    fn read(&self, table: Table, options: ReadOptions) -> Result<(DataFrame, u64, String), AnalysisError> {
        match &self.place {
            Place::File(file) => {
                if !file.exists() {
                    return Err(does_not_exist(file));
                }
                let (frame, dropped) =
                    plain_without_duplicates(read_frame(file)?, table, &file.display().to_string(), options)?;
                let bytes = std::fs::read(file).map_err(|e| io_error(file, e))?;
                Ok((frame, dropped, input_digest(&bytes, options)))
            }
            Place::Runs(dirs) => {
                let read = read_table_with(dirs, table, options).map_err(|e| io_error(&dirs[0], e))?;
                let parquet = read.parquet.ok_or_else(|| AnalysisError::Io {
                    file: dirs[0].display().to_string(),
                    problem: format!(
                        "the run has no {table} rows yet\n  fix: run the experiment first (`herd run … --out {}`)",
                        dirs[0].display()
                    ),
                })?;
                let digest = input_digest(&parquet, options);
                Ok((decode_stored(parquet, &origin(dirs, table))?, read.duplicate_units_dropped, digest))
            }
        }
    }

    /// A table that goes with the trial table (`baseline_candidates`, `allocation_deciders`) and the
    /// name of where it came from; `None` where the source has none.
    pub(crate) fn companion(
        &self,
        table: Table,
        options: ReadOptions,
    ) -> Result<Option<(DataFrame, String)>, AnalysisError> {
        match &self.place {
            Place::File(file) => file
                .parent()
                .and_then(|dir| plain_table_file(dir, table))
                .map(|f| read_frame(&f).map(|frame| (frame, f.display().to_string())))
                .transpose(),
            Place::Runs(dirs) => {
                let read = read_table_with(dirs, table, options).map_err(|e| io_error(&dirs[0], e))?;
                let origin = origin(dirs, table);
                read.parquet.map(|parquet| Ok((decode_stored(parquet, &origin)?, origin))).transpose()
            }
        }
    }
}

/// What an analysis was computed from: the SHA-256 of the trial table's bytes as read (a plain file's
/// bytes; the Parquet herd-store returned after its checks) and whether second copies were left out.
/// A stored analysis is read back only for the same digest ([`crate::stored`]).
fn input_digest(bytes: &[u8], options: ReadOptions) -> String {
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(bytes));
    if options.dedupe { format!("sha256:{hash}+dedupe") } else { format!("sha256:{hash}") }
}

/// `dir/<table>` for each run folder, joined with ` + `: the name of a table read from several runs.
fn origin(dirs: &[PathBuf], table: Table) -> String {
    dirs.iter().map(|d| d.join(table.name()).display().to_string()).collect::<Vec<_>>().join(" + ")
}

/// A conformity study's trials as read.
#[derive(Debug)]
pub struct ConformityInput {
    /// The trials the analyses average (those whose probability is only a bound left out).
    pub trials: ConformityTable,
    /// Units left out as second copies under [`ReadOptions::dedupe`].
    pub dropped: u64,
    /// What the trials were read from, as a stored analysis records it ([`crate::stored`]).
    pub digest: String,
    /// The trial table as stored, for [`Self::quality`] (it counts the bounded trials too).
    frame: DataFrame,
    source: TrialSource,
}

impl ConformityInput {
    /// Per model × task: trials, mean P(A)+P(B), share of bounded probabilities, baseline acceptance
    /// (from the `baseline_candidates` table that goes with the trials, where there is one).
    pub fn quality(&self, options: ReadOptions) -> Result<ResultTable, AnalysisError> {
        let baseline = self.source.companion(Table::BaselineCandidates, options)?;
        quality::conformity(&self.frame, self.source.origin(), baseline)
    }
}

/// Reads the `conformity_trials` table of `source`.
pub fn read_conformity(source: TrialSource, options: ReadOptions) -> Result<ConformityInput, AnalysisError> {
    let (frame, dropped, digest) = source.read(Table::ConformityTrials, options)?;
    let trials = conformity_from_frame(&frame, source.origin.clone())?;
    Ok(ConformityInput { trials, dropped, digest, frame, source })
}

/// A minimal-group study's dyads as read.
#[derive(Debug)]
pub struct MinimalGroupInput {
    pub dyads: DyadTable,
    /// Units left out as second copies under [`ReadOptions::dedupe`].
    pub dropped: u64,
    /// What the dyads were read from, as a stored analysis records it ([`crate::stored`]).
    pub digest: String,
    /// The pool every decider's points sum to, as the run folders recorded it (their experiment's
    /// `society.pool`); `None` for a plain table or runs that did not record one.
    pub pool: Option<f64>,
    source: TrialSource,
}

impl MinimalGroupInput {
    /// The pool the analysis checks every decider against: the one the runs recorded, else `given`
    /// (`herd analyze --pool` for a plain table), else the paper's 100. A `given` pool that contradicts
    /// the runs' is an error naming both. `herd analyze` and `herd report` both take it from here.
    pub fn pool_or(&self, given: Option<f64>) -> Result<f64, AnalysisError> {
        match (self.pool, given) {
            (Some(run), Some(given)) if run != given => Err(AnalysisError::Io {
                file: self.source.origin().to_owned(),
                problem: format!(
                    "--pool {given}: the run records a pool of {run} points (its experiment's society.pool)\n  fix: \
                     leave out --pool for a run folder, or give --pool {run}"
                ),
            }),
            (Some(run), _) => Ok(run),
            (None, given) => Ok(given.unwrap_or(crate::MinimalGroupOptions::default().pool)),
        }
    }

    /// Per model × reasoning × instrument: deciders, parse success, fills, QC flags (from the
    /// `allocation_deciders` table that goes with the dyads; no rows where there is none).
    pub fn quality(&self, options: ReadOptions) -> Result<ResultTable, AnalysisError> {
        quality::minimal_group(self.source.companion(Table::AllocationDeciders, options)?)
    }
}

/// Reads the `allocation_dyads` table of `source` and the pool its runs recorded; runs that recorded
/// different pools are an error, since one analysis checks every decider against one pool.
pub fn read_minimal_group(source: TrialSource, options: ReadOptions) -> Result<MinimalGroupInput, AnalysisError> {
    let (frame, dropped, digest) = source.read(Table::AllocationDyads, options)?;
    let dyads = dyads_from_frame(&frame, source.origin.clone())?;
    drop(frame);
    let pool = recorded_pool(source.run_folders())?;
    Ok(MinimalGroupInput { dyads, dropped, digest, pool, source })
}

/// The one pool `runs` recorded, or `None` where none did.
fn recorded_pool(runs: &[PathBuf]) -> Result<Option<f64>, AnalysisError> {
    let mut pool: Option<(f64, &PathBuf)> = None;
    for run in runs {
        let manifest = read_run_manifest(run).map_err(|e| io_error(run, e))?;
        let Some(recorded) = manifest_pool(&manifest) else { continue };
        match pool {
            Some((first, path)) if first != recorded => {
                return Err(AnalysisError::Io {
                    file: run.display().to_string(),
                    problem: format!(
                        "its society.pool is {recorded}, but {} has {first}\n  fix: report runs with different \
                         pools separately",
                        path.display()
                    ),
                });
            }
            Some(_) => {}
            None => pool = Some((recorded, run)),
        }
    }
    Ok(pool.map(|(p, _)| p))
}

/// Reads an `allocation_dyads` table (CSV or Parquet) into a [`DyadTable`].
pub fn read_dyads(path: &Path) -> Result<DyadTable, AnalysisError> {
    read_dyads_with(path, ReadOptions::default()).map(|(table, _)| table)
}

/// [`read_dyads`], with the number of duplicate units left out under `options.dedupe`.
pub fn read_dyads_with(path: &Path, options: ReadOptions) -> Result<(DyadTable, u64), AnalysisError> {
    let input = read_minimal_group(TrialSource::at(path, Table::AllocationDyads)?, options)?;
    Ok((input.dyads, input.dropped))
}

/// Reads a `conformity_trials` table (CSV or Parquet).
pub fn read_conformity_trials(path: &Path) -> Result<ConformityTable, AnalysisError> {
    read_conformity_trials_with(path, ReadOptions::default()).map(|(table, _)| table)
}

/// [`read_conformity_trials`], with the number of duplicate units left out under `options.dedupe`.
pub fn read_conformity_trials_with(path: &Path, options: ReadOptions) -> Result<(ConformityTable, u64), AnalysisError> {
    let input = read_conformity(TrialSource::at(path, Table::ConformityTrials)?, options)?;
    Ok((input.trials, input.dropped))
}
