//! The trial tables: one row type per table, whose field names are the column names analysis reads
//! (the table contracts of ARCHITECTURE.md's herd-store entry). Columns may be added; none may be renamed.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

/// A table herd writes, and the folder it lives in under a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    ConformityTrials,
    AllocationDeciders,
    AllocationDyads,
    /// Every image scored for a model's baseline pool, accepted or not.
    BaselineCandidates,
}

impl Table {
    pub const ALL: [Table; 4] =
        [Table::ConformityTrials, Table::AllocationDeciders, Table::AllocationDyads, Table::BaselineCandidates];

    pub fn name(self) -> &'static str {
        match self {
            Table::ConformityTrials => "conformity_trials",
            Table::AllocationDeciders => "allocation_deciders",
            Table::AllocationDyads => "allocation_dyads",
            Table::BaselineCandidates => "baseline_candidates",
        }
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One conformity trial: a prompt with N confederates, scored at the answer position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConformityTrialRow {
    pub run_id: String,
    pub unit_id: String,
    pub experiment: String,
    pub model: String,
    pub backend: String,
    /// `vision` (the image) or `text` (its text rendering).
    pub modality: String,
    pub task: String,
    pub family: String,
    pub level: Option<String>,
    pub n: i64,
    /// Trial index within the cell (the paraphrase index in the normative family).
    pub seed: i64,
    pub paraphrase: Option<String>,
    /// The confederates' replies in order, e.g. `BBAB`.
    pub confederate_answers: String,
    pub wrong_replies: i64,
    pub correct_label: String,
    pub image_id: String,
    /// The image's drawn parameters as JSON (lengths, colours, counts, boxes).
    pub image_params: String,
    pub difficulty_level: Option<i64>,
    pub difficulty_index: f64,
    pub prompt_hash: String,
    pub p_correct: f64,
    pub p_wrong_full: f64,
    /// `None` when neither answer has any probability mass.
    pub p_wrong_ab: Option<f64>,
    pub logit_a: f64,
    pub logit_b: f64,
    pub mass_ab: f64,
    /// True when the correct or the wrong answer's probability is only a bound (a server returned its
    /// top-k tokens without that answer, or without one of its spellings); such trials are left out of
    /// p_wrong by default and counted in the report's quality table.
    pub p_bound: bool,
    /// `upper` (an answer outside the top-k: its probability is at most what the server left out),
    /// `lower` (an answer with only some spellings in the top-k), or empty when exact. Upper wins
    /// when the two answers differ.
    pub p_bound_kind: String,
    /// `A:49 B:33`: the vocabulary tokens summed for each answer.
    pub answer_token_ids: String,
    pub prompt_tokens: i64,
    pub reused_tokens: i64,
    pub latency_s: f64,
}

/// One decider of one society pass: what the model wrote and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocationDeciderRow {
    pub run_id: String,
    pub unit_id: String,
    pub experiment: String,
    pub model: String,
    pub backend: String,
    pub reasoning: String,
    pub instrument: String,
    pub labels: String,
    pub m: i64,
    pub seed: i64,
    /// `original` or `swapped` (group names exchanged between the groups).
    pub swap_pass: String,
    /// 1-based agent number; `decider_id` is the id the model saw.
    pub decider: i64,
    pub decider_id: String,
    pub minority_decider: bool,
    /// The nonce name of the decider's group in this pass (the one its prompt names when labels are
    /// visible; recorded in both label arms, which share the society).
    pub decider_group: String,
    pub prompt_hash: String,
    pub raw_output: String,
    /// Reasoning a server returned apart from the answer (`reasoning_content`); `None` where the
    /// reasoning, if any, is part of `raw_output`.
    pub reasoning_output: Option<String>,
    pub stripped_output: String,
    /// `ok`, or why the output could not be used (then `filled` is true and points are uniform).
    pub parse_status: String,
    pub filled: bool,
    /// QC flags raised while parsing (repairs, renormalisation), comma-separated.
    pub qc_flags: String,
    pub finish_reason: String,
    pub prompt_tokens: i64,
    pub tokens_generated: i64,
    pub latency_s: f64,
}

/// One decider → target pair with the points given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocationDyadRow {
    pub run_id: String,
    pub unit_id: String,
    pub experiment: String,
    pub model: String,
    pub backend: String,
    pub reasoning: String,
    pub instrument: String,
    pub labels: String,
    pub m: i64,
    pub seed: i64,
    pub swap_pass: String,
    pub decider: i64,
    pub target: i64,
    pub target_id: String,
    pub minority_decider: bool,
    pub minority_target: bool,
    pub same_group: bool,
    /// Nonce names of the decider's and the target's groups in this pass: what the prompt shows when
    /// labels are visible (the swap pass exchanges them), recorded in both label arms, which share the
    /// society, so token receipt can be analysed by name.
    pub decider_group: String,
    pub target_group: String,
    /// 1-based position of the target in the decider's presented roster.
    pub target_position: f64,
    /// After renormalisation to the pool.
    pub points: f64,
    pub filled: bool,
}

/// One candidate image scored at N = 0 for a model's baseline pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineCandidateRow {
    pub run_id: String,
    pub unit_id: String,
    pub model: String,
    pub task: String,
    /// `general` or `d01`, `d02`, … (difficulty level).
    pub pool: String,
    pub candidate: i64,
    pub image_id: String,
    pub correct_label: String,
    pub p_correct: f64,
    pub p_correct_ab: Option<f64>,
    pub logit_correct: f64,
    pub accepted: bool,
}

/// The frame a batch's rows are written from: sealed (a public trait in a private module), so that
/// [`TableRow`] can be a bound of `Batch::add` while no polars type is part of herd-store's API.
pub(crate) mod sealed {
    use polars::prelude::{DataFrame, PolarsResult};

    pub trait ToFrame: Sized {
        fn frame(rows: &[Self]) -> PolarsResult<DataFrame>;
    }
}

/// Builds a frame column by column from rows; `$name` is both the field and the column name.
macro_rules! frame {
    ($rows:expr, $($field:ident),* $(,)?) => {{
        let rows = $rows;
        DataFrame::new(rows.len(), vec![
            $( Column::new(stringify!($field).into(), rows.iter().map(|r| r.$field.clone()).collect::<Vec<_>>()) ),*
        ])
    }};
}

/// Rows that form one of the trial tables.
pub trait TableRow: Sized + sealed::ToFrame {
    const TABLE: Table;
    fn unit_id(&self) -> &str;
    /// Counts of these rows that the manifest sums over every batch of every session (its `counts`):
    /// kept in the commit records, so a killed session's share is not lost.
    fn counts(_rows: &[Self]) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

impl sealed::ToFrame for ConformityTrialRow {
    fn frame(rows: &[Self]) -> PolarsResult<DataFrame> {
        frame!(
            rows,
            run_id,
            unit_id,
            experiment,
            model,
            backend,
            modality,
            task,
            family,
            level,
            n,
            seed,
            paraphrase,
            confederate_answers,
            wrong_replies,
            correct_label,
            image_id,
            image_params,
            difficulty_level,
            difficulty_index,
            prompt_hash,
            p_correct,
            p_wrong_full,
            p_wrong_ab,
            logit_a,
            logit_b,
            mass_ab,
            p_bound,
            p_bound_kind,
            answer_token_ids,
            prompt_tokens,
            reused_tokens,
            latency_s,
        )
    }
}

impl TableRow for ConformityTrialRow {
    const TABLE: Table = Table::ConformityTrials;
    fn unit_id(&self) -> &str {
        &self.unit_id
    }
}

impl sealed::ToFrame for AllocationDeciderRow {
    fn frame(rows: &[Self]) -> PolarsResult<DataFrame> {
        frame!(
            rows,
            run_id,
            unit_id,
            experiment,
            model,
            backend,
            reasoning,
            instrument,
            labels,
            m,
            seed,
            swap_pass,
            decider,
            decider_id,
            minority_decider,
            decider_group,
            prompt_hash,
            raw_output,
            reasoning_output,
            stripped_output,
            parse_status,
            filled,
            qc_flags,
            finish_reason,
            prompt_tokens,
            tokens_generated,
            latency_s,
        )
    }
}

impl TableRow for AllocationDeciderRow {
    const TABLE: Table = Table::AllocationDeciders;
    fn unit_id(&self) -> &str {
        &self.unit_id
    }
    fn counts(rows: &[Self]) -> Vec<(&'static str, u64)> {
        let filled = rows.iter().filter(|r| r.filled).count() as u64;
        vec![(DECIDERS_COUNT, rows.len() as u64), (FILLED_COUNT, filled)]
    }
}

/// The manifest count of deciders whose output was parsed (usable or filled), over all sessions.
pub const DECIDERS_COUNT: &str = "allocation/deciders";
/// The manifest count of deciders given a uniform fill after an unusable output, over all sessions.
pub const FILLED_COUNT: &str = "allocation/filled";

impl sealed::ToFrame for AllocationDyadRow {
    fn frame(rows: &[Self]) -> PolarsResult<DataFrame> {
        frame!(
            rows,
            run_id,
            unit_id,
            experiment,
            model,
            backend,
            reasoning,
            instrument,
            labels,
            m,
            seed,
            swap_pass,
            decider,
            target,
            target_id,
            minority_decider,
            minority_target,
            same_group,
            decider_group,
            target_group,
            target_position,
            points,
            filled,
        )
    }
}

impl TableRow for AllocationDyadRow {
    const TABLE: Table = Table::AllocationDyads;
    fn unit_id(&self) -> &str {
        &self.unit_id
    }
}

impl sealed::ToFrame for BaselineCandidateRow {
    fn frame(rows: &[Self]) -> PolarsResult<DataFrame> {
        frame!(
            rows,
            run_id,
            unit_id,
            model,
            task,
            pool,
            candidate,
            image_id,
            correct_label,
            p_correct,
            p_correct_ab,
            logit_correct,
            accepted,
        )
    }
}

impl TableRow for BaselineCandidateRow {
    const TABLE: Table = Table::BaselineCandidates;
    fn unit_id(&self) -> &str {
        &self.unit_id
    }
}
