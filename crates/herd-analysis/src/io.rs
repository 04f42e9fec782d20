//! Reading trial tables and writing result tables, CSV or Parquet (polars). With [`crate::study`] and
//! `quality`, the only code of herd-analysis that touches files or polars; the analyses
//! themselves take and return plain structs, and no polars type is public.

use std::path::{Path, PathBuf};

use herd_store::{AllocationDyadRow, ConformityTrialRow, Table};
use polars::prelude::*;

/// How a trial table is read: with [`ReadOptions::dedupe`], the second copy of a unit is left out
/// instead of refusing the table.
pub use herd_store::ReadOptions;

use crate::conformity::{ConformityTable, ConformityTrial};
use crate::error::AnalysisError;
use crate::minimal_group::{DESIGN_COLUMNS, DesignKey, Dyad, DyadTable, Labels};
use crate::table::{ColumnValues, ResultTable};

/// File formats herd reads and writes, chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Csv,
    Parquet,
}

impl TableFormat {
    pub fn of(path: &Path) -> Result<Self, AnalysisError> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("csv") => Ok(Self::Csv),
            Some("parquet" | "pq") => Ok(Self::Parquet),
            _ => Err(AnalysisError::Io {
                file: path.display().to_string(),
                problem: "unknown table format\n  fix: give a .csv or .parquet file".into(),
            }),
        }
    }
}

pub(crate) fn io_error(path: &Path, e: impl std::fmt::Display) -> AnalysisError {
    AnalysisError::Io { file: path.display().to_string(), problem: e.to_string() }
}

/// Reads a CSV (header row; types inferred from every row) or Parquet file.
pub(crate) fn read_frame(path: &Path) -> Result<DataFrame, AnalysisError> {
    if !path.exists() {
        return Err(does_not_exist(path));
    }
    // Only a regular file is read: a FIFO in a table's place would block the read forever, and a
    // device such as /dev/zero would fill memory.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Err(AnalysisError::Io {
            file: path.display().to_string(),
            problem: "is not a regular file (a folder, FIFO, socket or device)\n  fix: give the table file itself \
                      (.csv or .parquet), or a folder holding it"
                .into(),
        });
    }
    match TableFormat::of(path)? {
        TableFormat::Csv => {
            let frame = CsvReadOptions::default()
                .with_has_header(true)
                .with_infer_schema_length(None)
                .try_into_reader_with_file_path(Some(path.to_path_buf()))
                .and_then(|r| r.finish())
                .map_err(|e| io_error(path, e))?;
            // A header alone types every column as text, which would be reported as a wrong type.
            if frame.height() == 0 {
                return Err(AnalysisError::Io {
                    file: path.display().to_string(),
                    problem: "has no rows (only a header)\n  fix: give a table with at least one data row".into(),
                });
            }
            Ok(frame)
        }
        TableFormat::Parquet => {
            let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
            parquet_frame(file, &path.display().to_string())
        }
    }
}

/// Decodes a table herd-store read and checked (its Parquet bytes, [`herd_store::TableRead`]) with
/// the reader a user's own Parquet file goes through; `origin` names the run folders in errors.
pub(crate) fn decode_stored(parquet: Vec<u8>, origin: &str) -> Result<DataFrame, AnalysisError> {
    parquet_frame(std::io::Cursor::new(parquet), origin)
}

/// The one Parquet decoder of herd-analysis: a user's file and herd-store's checked bytes alike.
fn parquet_frame(reader: impl polars::io::mmap::MmapBytesReader, origin: &str) -> Result<DataFrame, AnalysisError> {
    ParquetReader::new(reader)
        .finish()
        .map_err(|e| AnalysisError::Io { file: origin.to_owned(), problem: e.to_string() })
}

/// `DIR/<table>.parquet`, else `DIR/<table>.csv`, where `dir` is a folder of plain tables (no
/// `manifest.json`: written by polars, pandas or `herd analyze`'s readers rather than `herd run`).
pub fn plain_table_file(dir: &Path, table: Table) -> Option<PathBuf> {
    if dir.join("manifest.json").is_file() {
        return None;
    }
    ["parquet", "csv"].iter().map(|ext| dir.join(format!("{}.{ext}", table.name()))).find(|p| p.is_file())
}

pub(crate) fn does_not_exist(path: &Path) -> AnalysisError {
    AnalysisError::Io {
        file: path.display().to_string(),
        problem: "does not exist\n  fix: check the path: give the table file (.csv or .parquet), a folder holding \
                  it, or a `herd run` folder"
            .into(),
    }
}

/// The columns that identify one row of `table` (one trial, decider or dyad of one unit): the design
/// of the row, and its experiment and unit id where the table has them. The run id is left out, so
/// that the rows of a run and of its own shard (another run id) are the same units.
fn unit_key(table: Table) -> Vec<&'static str> {
    /// One decider of one society; a dyad is one of its targets.
    const DECIDER: &[&str] =
        &["experiment", "unit_id", "model", "reasoning", "instrument", "swap_pass", "labels", "m", "seed", "decider"];
    match table {
        Table::ConformityTrials => vec![
            "experiment",
            "unit_id",
            "model",
            "modality",
            "task",
            "family",
            "level",
            "n",
            "seed",
            "paraphrase",
            "image_id",
        ],
        Table::AllocationDeciders => DECIDER.to_vec(),
        Table::AllocationDyads => [DECIDER, &["target"]].concat(),
        Table::BaselineCandidates => vec!["unit_id", "model", "task", "pool", "candidate", "image_id"],
    }
}

/// A plain table with every unit once: a row whose key ([`unit_key`]) an earlier row has is an error
/// naming both rows, or, with `options.dedupe`, left out (their number is returned).
pub(crate) fn plain_without_duplicates(
    frame: DataFrame,
    table: Table,
    origin: &str,
    options: ReadOptions,
) -> Result<(DataFrame, u64), AnalysisError> {
    let columns: Vec<Column> = unit_key(table)
        .iter()
        .filter_map(|name| frame.column(name).ok())
        .map(|c| c.cast(&DataType::String))
        .collect::<PolarsResult<_>>()
        .map_err(|e| AnalysisError::Io { file: origin.to_owned(), problem: e.to_string() })?;
    if columns.is_empty() {
        return Ok((frame, 0));
    }
    let values: Vec<Vec<Option<&str>>> = columns
        .iter()
        .map(|c| c.str().map(|s| s.iter().collect()))
        .collect::<PolarsResult<_>>()
        .map_err(|e| AnalysisError::Io { file: origin.to_owned(), problem: e.to_string() })?;
    let mut first_row: std::collections::HashMap<Vec<Option<&str>>, usize> =
        std::collections::HashMap::with_capacity(frame.height());
    let mut keep = Vec::with_capacity(frame.height());
    let mut duplicates: Vec<(usize, usize)> = Vec::new();
    for i in 0..frame.height() {
        let key: Vec<Option<&str>> = values.iter().map(|v| v[i]).collect();
        match first_row.get(&key) {
            Some(&first) => {
                duplicates.push((first, i));
                keep.push(false);
            }
            None => {
                first_row.insert(key, i);
                keep.push(true);
            }
        }
    }
    let Some(&(first, second)) = duplicates.first() else { return Ok((frame, 0)) };
    if !options.dedupe {
        let key = columns
            .iter()
            .zip(&values)
            .filter_map(|(c, v)| v[first].map(|value| format!("{} {value}", c.name())))
            .collect::<Vec<_>>()
            .join(", ");
        let more = duplicates.len() - 1;
        return Err(AnalysisError::Io {
            file: origin.to_owned(),
            problem: format!(
                "rows {} and {} are the same unit ({key}){}: a unit read twice counts twice in every mean and \
                 shrinks every standard error\n  fix: remove the repeated rows (or the second of two concatenated \
                 tables), or pass --dedupe to keep the first row of each unit",
                first + 1,
                second + 1,
                if more > 0 { format!(" and {more} more rows repeat earlier ones") } else { String::new() }
            ),
        });
    }
    let mask: BooleanChunked = keep.into_iter().map(Some).collect();
    let frame =
        frame.filter(&mask).map_err(|e| AnalysisError::Io { file: origin.to_owned(), problem: e.to_string() })?;
    Ok((frame, duplicates.len() as u64))
}

/// Typed access to the columns of a frame read from `origin`, with errors naming file, column and
/// fix.
pub(crate) struct Columns<'a> {
    frame: &'a DataFrame,
    origin: String,
}

impl<'a> Columns<'a> {
    pub fn new(frame: &'a DataFrame, origin: impl Into<String>) -> Self {
        Self { frame, origin: origin.into() }
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn height(&self) -> usize {
        self.frame.height()
    }

    pub fn has(&self, name: &str) -> bool {
        self.frame.column(name).is_ok()
    }

    fn get(&self, name: &str, what: &str) -> Result<&Column, AnalysisError> {
        self.frame.column(name).map_err(|_| AnalysisError::MissingColumn {
            origin: self.origin.clone(),
            column: name.to_owned(),
            fix: format!(
                "add a `{name}` column ({what}); the file has {}",
                self.frame.get_column_names().iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            ),
        })
    }

    fn wrong_type(&self, name: &str, column: &Column, expected: &str, what: &str) -> AnalysisError {
        AnalysisError::WrongType {
            origin: self.origin.clone(),
            column: name.to_owned(),
            expected: expected.to_owned(),
            found: column.dtype().to_string(),
            fix: format!("write `{name}` as {expected} ({what}); check for stray text in the column"),
        }
    }

    fn no_nulls<T>(&self, name: &str, values: Vec<Option<T>>) -> Result<Vec<T>, AnalysisError> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| AnalysisError::InvalidValue {
                    origin: self.origin.clone(),
                    column: name.to_owned(),
                    row: i + 1,
                    problem: "missing value".into(),
                    fix: format!("give `{name}` a value in every row"),
                })
            })
            .collect()
    }

    /// The column cast to `target` after checking that its type is one `accepts` takes: the one path every
    /// typed reader below goes through, so they differ only in what they accept and what a null means.
    fn cast(
        &self,
        name: &str,
        what: &str,
        expected: &str,
        accepts: fn(&DataType) -> bool,
        target: DataType,
    ) -> Result<Column, AnalysisError> {
        let column = self.get(name, what)?;
        if !(accepts(column.dtype()) || matches!(column.dtype(), DataType::Null)) {
            return Err(self.wrong_type(name, column, expected, what));
        }
        column.cast(&target).map_err(|_| self.wrong_type(name, column, expected, what))
    }

    /// A text column that may have missing values; integer and boolean columns are accepted and written
    /// as text.
    pub fn text_nullable(&self, name: &str, what: &str) -> Result<Vec<Option<String>>, AnalysisError> {
        let accepts = |t: &DataType| matches!(t, DataType::String) || t.is_integer() || t.is_bool();
        let column = self.cast(name, what, "text", accepts, DataType::String)?;
        let values = column.str().map_err(|_| self.wrong_type(name, &column, "text", what))?;
        Ok(values.iter().map(|v| v.map(str::to_owned)).collect())
    }

    /// A text column.
    pub fn text(&self, name: &str, what: &str) -> Result<Vec<String>, AnalysisError> {
        self.no_nulls(name, self.text_nullable(name, what)?)
    }

    /// A text column whose missing values read as "" (e.g. `level` of a family without levels).
    pub fn text_or_empty(&self, name: &str, what: &str) -> Result<Vec<String>, AnalysisError> {
        Ok(self.text_nullable(name, what)?.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// An integer column that may have missing values.
    pub fn integer_nullable(&self, name: &str, what: &str) -> Result<Vec<Option<i64>>, AnalysisError> {
        let column = self.cast(name, what, "integers", DataType::is_integer, DataType::Int64)?;
        Ok(column.i64().map_err(|_| self.wrong_type(name, &column, "integers", what))?.iter().collect())
    }

    /// An integer column.
    pub fn integer(&self, name: &str, what: &str) -> Result<Vec<i64>, AnalysisError> {
        self.no_nulls(name, self.integer_nullable(name, what)?)
    }

    /// A numeric column (integers widened) that may have missing values.
    pub fn float_nullable(&self, name: &str, what: &str) -> Result<Vec<Option<f64>>, AnalysisError> {
        let column = self.cast(name, what, "numbers", DataType::is_primitive_numeric, DataType::Float64)?;
        Ok(column.f64().map_err(|_| self.wrong_type(name, &column, "numbers", what))?.iter().collect())
    }

    /// A numeric column (integers widened), finite in every row.
    pub fn float(&self, name: &str, what: &str) -> Result<Vec<f64>, AnalysisError> {
        let values = self.no_nulls(name, self.float_nullable(name, what)?)?;
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(AnalysisError::InvalidValue {
                origin: self.origin.clone(),
                column: name.to_owned(),
                row: i + 1,
                problem: format!("{} is not a finite number", values[i]),
                fix: format!("`{name}` must be finite in every row"),
            });
        }
        Ok(values)
    }

    /// `read(self)` where the frame has column `name`, else `None` (optional columns).
    pub fn optional<T>(
        &self,
        name: &str,
        read: impl FnOnce(&Self) -> Result<T, AnalysisError>,
    ) -> Result<Option<T>, AnalysisError> {
        if self.has(name) { read(self).map(Some) } else { Ok(None) }
    }

    /// A 0/1 indicator (integers 0 and 1, or booleans).
    pub fn flag(&self, name: &str, what: &str) -> Result<Vec<bool>, AnalysisError> {
        let column = self.get(name, what)?;
        if column.dtype().is_bool() {
            let values: Vec<Option<bool>> =
                column.bool().map_err(|_| self.wrong_type(name, column, "0/1", what))?.iter().collect();
            return self.no_nulls(name, values);
        }
        if !column.dtype().is_integer() {
            return Err(self.wrong_type(name, column, "0/1", what));
        }
        self.integer(name, what)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(AnalysisError::InvalidValue {
                    origin: self.origin.clone(),
                    column: name.to_owned(),
                    row: i + 1,
                    problem: format!("{other} is not 0 or 1"),
                    fix: format!("`{name}` is an indicator: write 0 or 1"),
                }),
            })
            .collect()
    }
}

/// Every value of a probability column in [0, 1] (nulls allowed: an undefined p_wrong_ab); the first
/// that is not is an error naming the file, column and row (from 1). A p_wrong of 7.5 would otherwise
/// average into curves above 1.
fn probabilities(
    origin: &str,
    column: &str,
    values: impl IntoIterator<Item = Option<f64>>,
) -> Result<(), AnalysisError> {
    let bad = values.into_iter().enumerate().find(|(_, v)| v.is_some_and(|p| !(0.0..=1.0).contains(&p)));
    match bad {
        Some((i, Some(p))) => Err(AnalysisError::InvalidValue {
            origin: origin.to_owned(),
            column: column.to_owned(),
            row: i + 1,
            problem: format!("{p} is not a probability"),
            fix: format!("`{column}` is a probability: every value must lie in [0, 1]"),
        }),
        _ => Ok(()),
    }
}

/// `society.pool` of the experiment a run manifest records.
pub(crate) fn manifest_pool(manifest: &herd_store::Manifest) -> Option<f64> {
    manifest.parameters.get("society").and_then(|s| s.get("pool")).and_then(|p| p.as_f64())
}

/// The dyads of a run held in memory (a power analysis's replications), as [`read_dyads`](crate::study::read_dyads) would read
/// them from the run's Parquet.
pub fn dyads_from_rows(origin: &str, rows: &[AllocationDyadRow]) -> Result<DyadTable, AnalysisError> {
    let dyads = rows
        .iter()
        .enumerate()
        .map(|(i, r)| -> Result<Dyad, AnalysisError> {
            Ok(Dyad {
                design: DesignKey([
                    Some(r.model.clone()),
                    Some(r.reasoning.clone()),
                    Some(r.instrument.clone()),
                    Some(r.swap_pass.clone()),
                ]),
                labels: labels(origin, i, &r.labels)?,
                m: minority_size(origin, i, r.m)?,
                seed: r.seed,
                decider: r.decider,
                target: r.target,
                minority_decider: r.minority_decider,
                minority_target: r.minority_target,
                same_group: r.same_group,
                points: r.points,
                target_position: Some(r.target_position),
                filled: Some(r.filled),
                target_group: Some(r.target_group.clone()),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    DyadTable::new(origin, dyads)
}

/// The label condition of row `i` (from 0) of a dyad table.
fn labels(origin: &str, i: usize, text: &str) -> Result<Labels, AnalysisError> {
    Labels::parse(text).ok_or_else(|| AnalysisError::InvalidValue {
        origin: origin.into(),
        column: "labels".into(),
        row: i + 1,
        problem: format!("{text:?} is not a label condition"),
        fix: "write `visible` or `hidden`".into(),
    })
}

/// The minority size of row `i` (from 0), checked: both converters of the dyad table (from a frame,
/// from rows in memory) take it from here, so they accept the same values.
fn minority_size(origin: &str, i: usize, m: i64) -> Result<u32, AnalysisError> {
    u32::try_from(m).ok().filter(|&v| v >= 1).ok_or_else(|| AnalysisError::InvalidValue {
        origin: origin.to_owned(),
        column: "m".into(),
        row: i + 1,
        problem: format!("minority size {m}"),
        fix: "m is the number of minority agents, a positive integer".into(),
    })
}

/// The number of confederates N of row `i` (from 0), checked, for both converters of the trial table.
fn confederates(origin: &str, i: usize, n: i64) -> Result<u32, AnalysisError> {
    u32::try_from(n).map_err(|_| AnalysisError::InvalidValue {
        origin: origin.to_owned(),
        column: "n".into(),
        row: i + 1,
        problem: format!("N = {n}"),
        fix: "N is the number of confederates, 0 or more".into(),
    })
}

/// Converts a frame with the `allocation_dyads` columns.
pub(crate) fn dyads_from_frame(frame: &DataFrame, origin: String) -> Result<DyadTable, AnalysisError> {
    let c = Columns::new(frame, origin);
    let labels_text = c.text("labels", "visible or hidden")?;
    let m = c.integer("m", "minority size")?;
    let seed = c.integer("seed", "society seed")?;
    let decider = c.integer("decider", "decider id")?;
    let target = c.integer("target", "target id")?;
    let minority_decider = c.flag("minority_decider", "1 if the decider is in the minority")?;
    let minority_target = c.flag("minority_target", "1 if the target is in the minority")?;
    let same_group = c.flag("same_group", "1 if decider and target share a group")?;
    let points = c.float("points", "points after renormalisation")?;
    let mut design: Vec<Option<Vec<String>>> = Vec::new();
    for name in DESIGN_COLUMNS {
        design.push(c.optional(name, |c| c.text(name, "a design factor"))?);
    }
    let target_position =
        c.optional("target_position", |c| c.float("target_position", "the target's position in the roster"))?;
    let filled =
        c.optional("filled", |c| c.flag("filled", "1 if the allocation is a uniform fill after a parse failure"))?;
    let target_group = target_groups(&c)?;
    let mut rows = Vec::with_capacity(c.height());
    for i in 0..c.height() {
        let labels = labels(c.origin(), i, &labels_text[i])?;
        let m_value = minority_size(c.origin(), i, m[i])?;
        let mut key: [Option<String>; 4] = Default::default();
        for (slot, column) in key.iter_mut().zip(&design) {
            *slot = column.as_ref().map(|v| v[i].clone());
        }
        rows.push(Dyad {
            design: DesignKey(key),
            labels,
            m: m_value,
            seed: seed[i],
            decider: decider[i],
            target: target[i],
            minority_decider: minority_decider[i],
            minority_target: minority_target[i],
            same_group: same_group[i],
            points: points[i],
            target_position: target_position.as_ref().map(|v| v[i]),
            filled: filled.as_ref().map(|v| v[i]),
            target_group: target_group.as_ref().map(|v| v[i].clone()),
        });
    }
    DyadTable::new(c.origin(), rows)
}

/// The optional `target_group` column: absent (tables written before herd recorded group names, or
/// a column with no value at all) reads as `None`, which leaves the token-receipt rows out; a column
/// with values in some rows only is an error, as token receipt by name would silently rest on part
/// of the societies.
fn target_groups(c: &Columns<'_>) -> Result<Option<Vec<String>>, AnalysisError> {
    if !c.has("target_group") {
        return Ok(None);
    }
    let values = c.text_nullable("target_group", "the nonce name of the target's group in this pass")?;
    if values.iter().all(Option::is_none) {
        return Ok(None);
    }
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.ok_or_else(|| AnalysisError::InvalidValue {
                origin: c.origin().to_owned(),
                column: "target_group".into(),
                row: i + 1,
                problem: "missing value (other rows name the target's group)".into(),
                fix: "rows from runs before herd recorded group names lack them: rerun those societies into a \
                      fresh folder, or drop the `target_group` column to analyse without token receipt"
                    .into(),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Converts a result table to a polars frame.
fn to_frame(table: &ResultTable) -> Result<DataFrame, AnalysisError> {
    let columns: Vec<Column> = table
        .columns
        .iter()
        .map(|(name, values)| match values {
            ColumnValues::Text(v) => Column::new(name.as_str().into(), v),
            ColumnValues::Float(v) => Column::new(name.as_str().into(), v),
            ColumnValues::Integer(v) => Column::new(name.as_str().into(), v),
        })
        .collect();
    DataFrame::new(table.n_rows(), columns)
        .map_err(|e| AnalysisError::Io { file: table.name.clone(), problem: e.to_string() })
}

/// Reads a result table that [`write_tables`] wrote as Parquet (`name` from the file stem): text,
/// float and integer columns in the written order, nulls kept. A column of another type is refused.
pub(crate) fn read_result_table(path: &Path, bytes: Vec<u8>) -> Result<ResultTable, AnalysisError> {
    let origin = path.display().to_string();
    let frame = parquet_frame(std::io::Cursor::new(bytes), &origin)?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut columns = Vec::with_capacity(frame.width());
    for column in frame.columns() {
        let wrong = |expected: &str| AnalysisError::WrongType {
            origin: origin.clone(),
            column: column.name().to_string(),
            expected: expected.into(),
            found: column.dtype().to_string(),
            fix: "the analysis folder was not written by this herd: run `herd analyze` again".into(),
        };
        let values = match column.dtype() {
            DataType::String => ColumnValues::Text(
                column.str().map_err(|_| wrong("text"))?.iter().map(|v| v.map(str::to_owned)).collect(),
            ),
            DataType::Float64 => ColumnValues::Float(column.f64().map_err(|_| wrong("numbers"))?.iter().collect()),
            DataType::Int64 => ColumnValues::Integer(column.i64().map_err(|_| wrong("integers"))?.iter().collect()),
            _ => return Err(wrong("text, 64-bit floats or 64-bit integers")),
        };
        columns.push((column.name().to_string(), values));
    }
    Ok(ResultTable { name, columns })
}

/// Writes `DIR/<name>.csv` and `DIR/<name>.parquet` for each table; returns the paths written.
pub fn write_tables<'t>(
    dir: &Path,
    tables: impl IntoIterator<Item = &'t ResultTable>,
) -> Result<Vec<PathBuf>, AnalysisError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let mut written = Vec::new();
    for table in tables {
        let mut frame = to_frame(table)?;
        let csv = dir.join(format!("{}.csv", table.name));
        write_atomic(&csv, |file| CsvWriter::new(file).finish(&mut frame).map_err(|e| e.to_string()))?;
        written.push(csv);
        let parquet = dir.join(format!("{}.parquet", table.name));
        write_atomic(&parquet, |file| {
            ParquetWriter::new(file).finish(&mut frame).map(|_| ()).map_err(|e| e.to_string())
        })?;
        written.push(parquet);
    }
    Ok(written)
}

/// Writes `path` through a temporary `.<name>.tmp` beside it, synced and then renamed over it: a kill or
/// a full disk mid-write leaves the previous table (or none), never half of one that reads as whole.
pub(crate) fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> Result<(), String>,
) -> Result<(), AnalysisError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
        write(&mut file)?;
        file.sync_all().map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())
    })();
    result.map_err(|problem| {
        let _ = std::fs::remove_file(&tmp);
        io_error(path, problem)
    })
}

/// The trials of a run held in memory (a power analysis's replications), as [`read_conformity_trials`](crate::study::read_conformity_trials)
/// would read them from the run's Parquet (trials whose probability is only a bound left out).
pub fn conformity_from_rows(origin: &str, rows: &[ConformityTrialRow]) -> Result<ConformityTable, AnalysisError> {
    probabilities(origin, "p_wrong_full", rows.iter().map(|r| Some(r.p_wrong_full)))?;
    probabilities(origin, "p_wrong_ab", rows.iter().map(|r| r.p_wrong_ab))?;
    let trials = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.p_bound)
        .map(|(i, r)| {
            Ok(ConformityTrial {
                model: r.model.clone(),
                task: r.task.clone(),
                family: r.family.clone(),
                level: r.level.clone().unwrap_or_default(),
                n: confederates(origin, i, r.n)?,
                seed: r.seed,
                paraphrase: r.paraphrase.clone(),
                p_wrong_full: r.p_wrong_full,
                p_wrong_ab: r.p_wrong_ab,
                difficulty_level: r.difficulty_level,
                difficulty_index: Some(r.difficulty_index),
                image_id: Some(r.image_id.clone()),
                correct_label: Some(r.correct_label.clone()),
                logit_a: Some(r.logit_a),
                logit_b: Some(r.logit_b),
            })
        })
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    Ok(ConformityTable { origin: origin.into(), rows: trials })
}

/// Converts a frame with the `conformity_trials` columns.
pub(crate) fn conformity_from_frame(frame: &DataFrame, origin: String) -> Result<ConformityTable, AnalysisError> {
    let c = Columns::new(frame, origin);
    let model = c.text("model", "model name")?;
    let task = c.text("task", "lines, color or dots")?;
    let family = c.text("family", "experiment family, e.g. group_size")?;
    let level = c.text_or_empty("level", "condition level; empty for families without levels")?;
    let n = c.integer("n", "number of confederates N")?;
    let seed = c.integer("seed", "trial index within the cell")?;
    let p_wrong_full = c.float("p_wrong_full", "1 − P(correct) over the whole vocabulary")?;
    let optional_float = |name: &str, what: &str| c.optional(name, |c| c.float_nullable(name, what));
    let optional_text = |name: &str, what: &str| c.optional(name, |c| c.text_nullable(name, what));
    let p_wrong_ab = optional_float("p_wrong_ab", "P(wrong)/(P(A)+P(B))")?;
    probabilities(c.origin(), "p_wrong_full", p_wrong_full.iter().copied().map(Some))?;
    if let Some(values) = &p_wrong_ab {
        probabilities(c.origin(), "p_wrong_ab", values.iter().copied())?;
    }
    let paraphrase = optional_text("paraphrase", "paraphrase id")?;
    let difficulty_level =
        c.optional("difficulty_level", |c| c.integer_nullable("difficulty_level", "difficulty level"))?;
    let difficulty_index = optional_float("difficulty_index", "difficulty index of the image")?;
    let image_id = optional_text("image_id", "image id")?;
    let correct_label = optional_text("correct_label", "A or B")?;
    let logit_a = optional_float("logit_a", "raw logit of A")?;
    let logit_b = optional_float("logit_b", "raw logit of B")?;
    // A trial whose answer probability is only a bound (an openai server returned an answer, or one of
    // its spellings, outside its top-k) has no p_wrong to average: it is left out here, and
    // herd-report's quality table counts it per model and task.
    let bounded = c.optional("p_bound", |c| c.flag("p_bound", "1 if a probability is only a bound"))?;
    let mut rows = Vec::with_capacity(c.height());
    for i in 0..c.height() {
        if bounded.as_ref().is_some_and(|b| b[i]) {
            continue;
        }
        let n_value = confederates(c.origin(), i, n[i])?;
        rows.push(ConformityTrial {
            model: model[i].clone(),
            task: task[i].clone(),
            family: family[i].clone(),
            level: level[i].clone(),
            n: n_value,
            seed: seed[i],
            paraphrase: paraphrase.as_ref().and_then(|v| v[i].clone()),
            p_wrong_full: p_wrong_full[i],
            p_wrong_ab: p_wrong_ab.as_ref().and_then(|v| v[i]),
            difficulty_level: difficulty_level.as_ref().and_then(|v| v[i]),
            difficulty_index: difficulty_index.as_ref().and_then(|v| v[i]),
            image_id: image_id.as_ref().and_then(|v| v[i].clone()),
            correct_label: correct_label.as_ref().and_then(|v| v[i].clone()),
            logit_a: logit_a.as_ref().and_then(|v| v[i]),
            logit_b: logit_b.as_ref().and_then(|v| v[i]),
        });
    }
    Ok(ConformityTable { origin: c.origin().to_owned(), rows })
}
