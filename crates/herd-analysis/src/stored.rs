//! A study's analysis kept beside the runs it analysed, so that `herd report` (and `herd run`'s quick
//! look) read what `herd analyze` computed instead of computing it again.
//!
//! The folder is `<result folder>/analysis/<study>/` ([`analysis_dir`]): the result tables as CSV and
//! Parquet ([`crate::io::write_tables`]) and `analysis.json`, written last, which records what the
//! tables were computed from (the input's digest: [`crate::study::ConformityInput::digest`]), how
//! (resamples, seeds, whether the GEE fits were bootstrapped, the pool), by which herd, and each
//! Parquet table's row count and SHA-256. A stored analysis is read back only when all of that still
//! holds: other trials, another herd or an edited table make it stale, and it is computed again
//! (never shown). Only the Parquet copies are read; the CSVs are for people.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::error::AnalysisError;
use crate::io::{io_error, read_result_table, write_atomic, write_tables};
use crate::table::ResultTable;

/// Bumped whenever a table's columns or meaning change, so older stored analyses read as stale.
pub const ANALYSIS_FORMAT: u32 = 2;
/// The record beside the tables.
pub const ANALYSIS_RECORD: &str = "analysis.json";

/// The two studies, as their analysis folders are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Study {
    Conformity,
    MinimalGroup,
}

impl Study {
    pub fn name(self) -> &'static str {
        match self {
            Self::Conformity => "conformity",
            Self::MinimalGroup => "minimal-group",
        }
    }
}

/// `<folder>/analysis/<study>`: where the analysis of the runs under `folder` is kept.
pub fn analysis_dir(folder: &Path, study: Study) -> PathBuf {
    folder.join("analysis").join(study.name())
}

/// How an analysis was computed; a stored analysis answers only for the same settings where they
/// change the numbers (`bootstrap` and `gee_bootstrap` are read as they were: a report says which).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSettings {
    /// Seed-bootstrap resamples per cell and the stream's seed (minimal groups).
    #[serde(default)]
    pub bootstrap: Option<(usize, u64)>,
    /// Whether the main GEE fits were refitted on each resample (the gee table's `se_bootstrap`).
    #[serde(default)]
    pub gee_bootstrap: bool,
    /// The pool every decider's points were checked against (minimal groups).
    #[serde(default)]
    pub pool: Option<f64>,
}

impl AnalysisSettings {
    /// The settings of a minimal-group analysis run with `options` (a replayed bootstrap records none).
    pub fn of_minimal_group(options: &crate::MinimalGroupOptions) -> Self {
        let bootstrap = match options.bootstrap {
            crate::BootstrapPlan::Seeded { resamples, seed } => Some((resamples, seed)),
            crate::BootstrapPlan::Replay(_) => None,
        };
        Self { bootstrap, gee_bootstrap: options.gee_bootstrap, pool: Some(options.pool) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableRecord {
    rows: usize,
    sha256: String,
}

/// `analysis.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalysisRecord {
    format: u32,
    herd_version: String,
    study: String,
    /// The digest of the trial table analysed.
    input: String,
    settings: AnalysisSettings,
    tables: BTreeMap<String, TableRecord>,
}

/// What [`read_stored`] found.
#[derive(Debug)]
pub enum Stored {
    /// The tables (by name) and the settings they were computed with.
    Current(Vec<ResultTable>, AnalysisSettings),
    /// An analysis is there but does not answer for this input: why.
    Stale(String),
    /// No analysis there.
    Missing,
}

fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// The analysis stored in `dir` if it was computed from `input` (a digest) by this herd with a pool of
/// `pool` (minimal groups) and no table has changed since; otherwise why not.
pub fn read_stored(dir: &Path, study: Study, input: &str, pool: Option<f64>) -> Result<Stored, AnalysisError> {
    let path = dir.join(ANALYSIS_RECORD);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(Stored::Missing) };
    let record: AnalysisRecord = match serde_json::from_str(&text) {
        Ok(record) => record,
        Err(e) => return Ok(Stored::Stale(format!("{}: not an analysis record herd reads ({e})", path.display()))),
    };
    let stale = if record.format != ANALYSIS_FORMAT || record.herd_version != version() {
        Some(format!("written by herd {} (analysis format {})", record.herd_version, record.format))
    } else if record.study != study.name() {
        Some(format!("it is the {} analysis", record.study))
    } else if record.input != input {
        Some("computed from other trials than the runs now hold".to_owned())
    } else if record.settings.pool != pool {
        Some(format!("computed with a pool of {:?}, the runs record {pool:?}", record.settings.pool))
    } else {
        None
    };
    if let Some(why) = stale {
        return Ok(Stored::Stale(why));
    }
    let mut tables = Vec::with_capacity(record.tables.len());
    for (name, expected) in &record.tables {
        let file = dir.join(format!("{name}.parquet"));
        let Ok(bytes) = std::fs::read(&file) else {
            return Ok(Stored::Stale(format!("{} is missing", file.display())));
        };
        if hex::encode(sha2::Sha256::digest(&bytes)) != expected.sha256 {
            return Ok(Stored::Stale(format!("{} changed after it was written", file.display())));
        }
        let table = read_result_table(&file, bytes)?;
        if table.n_rows() != expected.rows {
            return Ok(Stored::Stale(format!(
                "{} holds {} rows, not {}",
                file.display(),
                table.n_rows(),
                expected.rows
            )));
        }
        tables.push(table);
    }
    Ok(Stored::Current(tables, record.settings))
}

/// Writes `tables` (CSV and Parquet) and then `analysis.json` into `dir`; returns the paths written.
pub fn write_stored(
    dir: &Path,
    study: Study,
    input: &str,
    settings: &AnalysisSettings,
    tables: &[&ResultTable],
) -> Result<Vec<PathBuf>, AnalysisError> {
    // The old record goes first: a kill mid-write leaves no record, never one vouching for new tables.
    let record_path = dir.join(ANALYSIS_RECORD);
    if record_path.exists() {
        std::fs::remove_file(&record_path).map_err(|e| io_error(&record_path, e))?;
    }
    let mut written = write_tables(dir, tables.iter().copied())?;
    let mut records = BTreeMap::new();
    for table in tables {
        let file = dir.join(format!("{}.parquet", table.name));
        let bytes = std::fs::read(&file).map_err(|e| io_error(&file, e))?;
        let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
        records.insert(table.name.clone(), TableRecord { rows: table.n_rows(), sha256 });
    }
    let record = AnalysisRecord {
        format: ANALYSIS_FORMAT,
        herd_version: version(),
        study: study.name().to_owned(),
        input: input.to_owned(),
        settings: settings.clone(),
        tables: records,
    };
    let json = serde_json::to_string_pretty(&record).map_err(|e| io_error(&record_path, e))?;
    write_atomic(&record_path, |file| std::io::Write::write_all(file, json.as_bytes()).map_err(|e| e.to_string()))?;
    written.push(record_path);
    Ok(written)
}
