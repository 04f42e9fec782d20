//! The stored rows a sample shows, decoded from the Parquet bytes herd-store read and checked: only
//! the columns the page needs. Columns added to the store after a run was made may be missing from
//! older folders; those read as absent (an empty flag), never as an error.

use std::path::Path;

use herd_store::{ReadOptions, Table, read_table_with};
use polars::prelude::{Column, DataFrame, DataType, ParquetReader, SerReader};

use crate::error::SamplesError;

/// One conformity trial as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRow {
    pub run_id: String,
    pub unit_id: String,
    pub model: String,
    pub modality: String,
    pub task: String,
    pub family: String,
    pub level: Option<String>,
    /// The difficulty family's level (1 the easiest); `None` in the other families.
    pub difficulty_level: Option<i64>,
    pub n: i64,
    pub seed: i64,
    pub confederate_answers: String,
    pub correct_label: String,
    pub image_id: String,
    pub image_params: String,
    pub prompt_hash: String,
    pub p_correct: f64,
    pub p_wrong_full: f64,
    pub p_wrong_ab: Option<f64>,
    pub logit_a: f64,
    pub logit_b: f64,
    pub mass_ab: f64,
    pub p_bound: bool,
    pub p_bound_kind: String,
}

/// One decider of one society pass as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DeciderRow {
    pub run_id: String,
    pub unit_id: String,
    pub model: String,
    pub reasoning: String,
    pub instrument: String,
    pub labels: String,
    pub m: i64,
    pub seed: i64,
    pub swap_pass: String,
    pub decider: i64,
    pub decider_id: String,
    pub minority_decider: bool,
    pub decider_group: String,
    pub prompt_hash: String,
    pub raw_output: String,
    pub reasoning_output: Option<String>,
    pub parse_status: String,
    pub filled: bool,
    pub qc_flags: String,
    pub finish_reason: String,
}

/// One decider → target allocation as stored (after renormalisation to the pool).
#[derive(Debug, Clone, PartialEq)]
pub struct DyadRow {
    pub unit_id: String,
    pub decider: i64,
    pub target_id: String,
    pub target_group: String,
    pub same_group: bool,
    pub target_position: f64,
    pub points: f64,
}

/// A table of one run folder, read verified by herd-store; `None` when the run has no such rows.
fn frame(dir: &Path, table: Table, options: ReadOptions) -> Result<Option<DataFrame>, SamplesError> {
    let read = read_table_with(&[dir.to_path_buf()], table, options)
        .map_err(|source| SamplesError::Store { path: dir.to_path_buf(), source })?;
    let Some(parquet) = read.parquet else { return Ok(None) };
    let origin = format!("{}/{table}", dir.display());
    let frame = ParquetReader::new(std::io::Cursor::new(parquet)).finish().map_err(|e| SamplesError::Column {
        origin,
        column: "<all>".into(),
        problem: format!("the checked Parquet bytes do not decode: {e}"),
        fix: "run `herd verify` on the folder".into(),
    })?;
    Ok(Some(frame))
}

/// Typed column access with errors naming the table and column.
struct Columns<'a> {
    frame: &'a DataFrame,
    origin: String,
}

impl Columns<'_> {
    fn column(&self, name: &str, dtype: DataType) -> Result<Option<Column>, SamplesError> {
        let Ok(column) = self.frame.column(name) else { return Ok(None) };
        column.cast(&dtype).map(Some).map_err(|e| SamplesError::Column {
            origin: self.origin.clone(),
            column: name.into(),
            problem: format!("is {}, not {dtype}: {e}", column.dtype()),
            fix: "report on a run folder written by herd (`herd verify` checks it)".into(),
        })
    }

    fn missing(&self, name: &str) -> SamplesError {
        SamplesError::Column {
            origin: self.origin.clone(),
            column: name.into(),
            problem: "missing".into(),
            fix: "report on a run folder written by herd (`herd verify` checks it)".into(),
        }
    }

    fn texts(&self, name: &str) -> Result<Option<Vec<Option<String>>>, SamplesError> {
        let Some(column) = self.column(name, DataType::String)? else { return Ok(None) };
        let values = column.str().map_err(|_| self.missing(name))?;
        Ok(Some(values.iter().map(|v| v.map(str::to_owned)).collect()))
    }

    /// A text column every herd run has.
    fn text(&self, name: &str) -> Result<Vec<String>, SamplesError> {
        let values = self.texts(name)?.ok_or_else(|| self.missing(name))?;
        Ok(values.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// A text column that may be null, or absent from an older folder (then every value is `None`).
    fn text_nullable(&self, name: &str) -> Result<Vec<Option<String>>, SamplesError> {
        Ok(self.texts(name)?.unwrap_or_else(|| vec![None; self.frame.height()]))
    }

    /// A text column an older folder may lack (read as empty).
    fn text_or_empty(&self, name: &str) -> Result<Vec<String>, SamplesError> {
        Ok(self.text_nullable(name)?.into_iter().map(Option::unwrap_or_default).collect())
    }

    fn floats(&self, name: &str) -> Result<Vec<Option<f64>>, SamplesError> {
        let column = self.column(name, DataType::Float64)?.ok_or_else(|| self.missing(name))?;
        Ok(column.f64().map_err(|_| self.missing(name))?.iter().collect())
    }

    fn float(&self, name: &str) -> Result<Vec<f64>, SamplesError> {
        Ok(self.floats(name)?.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
    }

    fn integers(&self, name: &str) -> Result<Vec<Option<i64>>, SamplesError> {
        let column = self.column(name, DataType::Int64)?.ok_or_else(|| self.missing(name))?;
        Ok(column.i64().map_err(|_| self.missing(name))?.iter().collect())
    }

    fn integer(&self, name: &str) -> Result<Vec<i64>, SamplesError> {
        Ok(self.integers(name)?.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// A flag an older folder may lack (read as false).
    fn flag(&self, name: &str) -> Result<Vec<bool>, SamplesError> {
        let Some(column) = self.column(name, DataType::Boolean)? else { return Ok(vec![false; self.frame.height()]) };
        Ok(column.bool().map_err(|_| self.missing(name))?.iter().map(Option::unwrap_or_default).collect())
    }
}

fn columns<'a>(frame: &'a DataFrame, dir: &Path, table: Table) -> Columns<'a> {
    Columns { frame, origin: format!("{}/{table}", dir.display()) }
}

/// The conformity trials of the run folder `dir`.
pub fn trials(dir: &Path, options: ReadOptions) -> Result<Vec<TrialRow>, SamplesError> {
    let Some(frame) = frame(dir, Table::ConformityTrials, options)? else { return Ok(Vec::new()) };
    let c = columns(&frame, dir, Table::ConformityTrials);
    let (run_id, unit_id, model, modality) =
        (c.text("run_id")?, c.text("unit_id")?, c.text("model")?, c.text("modality")?);
    let (task, family, level, n, seed) =
        (c.text("task")?, c.text("family")?, c.text_nullable("level")?, c.integer("n")?, c.integer("seed")?);
    let difficulty_level = c.integers("difficulty_level")?;
    let (answers, correct, image_id, image_params, hash) = (
        c.text("confederate_answers")?,
        c.text("correct_label")?,
        c.text("image_id")?,
        c.text("image_params")?,
        c.text("prompt_hash")?,
    );
    let (p_correct, p_wrong_full, p_wrong_ab, logit_a, logit_b, mass_ab) = (
        c.float("p_correct")?,
        c.float("p_wrong_full")?,
        c.floats("p_wrong_ab")?,
        c.float("logit_a")?,
        c.float("logit_b")?,
        c.float("mass_ab")?,
    );
    let (p_bound, p_bound_kind) = (c.flag("p_bound")?, c.text_or_empty("p_bound_kind")?);
    Ok((0..frame.height())
        .map(|i| TrialRow {
            run_id: run_id[i].clone(),
            unit_id: unit_id[i].clone(),
            model: model[i].clone(),
            modality: modality[i].clone(),
            task: task[i].clone(),
            family: family[i].clone(),
            level: level[i].clone(),
            difficulty_level: difficulty_level[i],
            n: n[i],
            seed: seed[i],
            confederate_answers: answers[i].clone(),
            correct_label: correct[i].clone(),
            image_id: image_id[i].clone(),
            image_params: image_params[i].clone(),
            prompt_hash: hash[i].clone(),
            p_correct: p_correct[i],
            p_wrong_full: p_wrong_full[i],
            p_wrong_ab: p_wrong_ab[i],
            logit_a: logit_a[i],
            logit_b: logit_b[i],
            mass_ab: mass_ab[i],
            p_bound: p_bound[i],
            p_bound_kind: p_bound_kind[i].clone(),
        })
        .collect())
}

/// The deciders of the run folder `dir`.
pub fn deciders(dir: &Path, options: ReadOptions) -> Result<Vec<DeciderRow>, SamplesError> {
    let Some(frame) = frame(dir, Table::AllocationDeciders, options)? else { return Ok(Vec::new()) };
    let c = columns(&frame, dir, Table::AllocationDeciders);
    let (run_id, unit_id, model) = (c.text("run_id")?, c.text("unit_id")?, c.text("model")?);
    let (reasoning, instrument, labels, m, seed, swap_pass) = (
        c.text("reasoning")?,
        c.text("instrument")?,
        c.text("labels")?,
        c.integer("m")?,
        c.integer("seed")?,
        c.text("swap_pass")?,
    );
    let (decider, decider_id, minority, group) =
        (c.integer("decider")?, c.text("decider_id")?, c.flag("minority_decider")?, c.text_or_empty("decider_group")?);
    let (hash, raw, reasoning_output, status, filled, flags, finish) = (
        c.text("prompt_hash")?,
        c.text("raw_output")?,
        c.text_nullable("reasoning_output")?,
        c.text("parse_status")?,
        c.flag("filled")?,
        c.text_or_empty("qc_flags")?,
        c.text_or_empty("finish_reason")?,
    );
    Ok((0..frame.height())
        .map(|i| DeciderRow {
            run_id: run_id[i].clone(),
            unit_id: unit_id[i].clone(),
            model: model[i].clone(),
            reasoning: reasoning[i].clone(),
            instrument: instrument[i].clone(),
            labels: labels[i].clone(),
            m: m[i],
            seed: seed[i],
            swap_pass: swap_pass[i].clone(),
            decider: decider[i],
            decider_id: decider_id[i].clone(),
            minority_decider: minority[i],
            decider_group: group[i].clone(),
            prompt_hash: hash[i].clone(),
            raw_output: raw[i].clone(),
            reasoning_output: reasoning_output[i].clone(),
            parse_status: status[i].clone(),
            filled: filled[i],
            qc_flags: flags[i].clone(),
            finish_reason: finish[i].clone(),
        })
        .collect())
}

/// The allocations of the run folder `dir`.
pub fn dyads(dir: &Path, options: ReadOptions) -> Result<Vec<DyadRow>, SamplesError> {
    let Some(frame) = frame(dir, Table::AllocationDyads, options)? else { return Ok(Vec::new()) };
    let c = columns(&frame, dir, Table::AllocationDyads);
    let (unit_id, decider, target_id, target_group) =
        (c.text("unit_id")?, c.integer("decider")?, c.text("target_id")?, c.text_or_empty("target_group")?);
    let (same_group, position, points) = (c.flag("same_group")?, c.float("target_position")?, c.float("points")?);
    Ok((0..frame.height())
        .map(|i| DyadRow {
            unit_id: unit_id[i].clone(),
            decider: decider[i],
            target_id: target_id[i].clone(),
            target_group: target_group[i].clone(),
            same_group: same_group[i],
            target_position: position[i],
            points: points[i],
        })
        .collect())
}
