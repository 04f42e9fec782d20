//! The minimal-group paper's analyses over an allocation dyad table (one row per decider × target).
//!
//! A *cell* is one combination of the optional design columns present (`model`, `reasoning`,
//! `instrument`, `swap_pass`) with `labels` and `m`; a *seed* is one society. Per decider:
//! favouritism = mean points per in-group target − mean points per out-group target; excess share =
//! share of the decider's points given to its own group − (in-group targets)/(targets).
//! Seed-level statistics average deciders within a society (all, minority, majority), so the seed is
//! the unit of every test, as in the paper.
//!
//! Swap passes: where a society was run twice with the group names swapped, the main estimates use
//! both passes: the cell pooling them has `swap_pass` = `both` and `passes` = `both`; its seed means
//! average a society's deciders over both passes, and its GEE fits pool both passes with the society
//! as the cluster. Each pass on its own stays as a robustness row (`passes` = `per_pass`). Without
//! a second pass the table's cells are the main ones (`passes` = `single`). Every table has the
//! `passes` column right after the design columns; main rows are those with `passes` ≠ `per_pass`.
//!
//! Tables (columns listed in [`SEED_TESTS_COLUMNS`] etc., preceded by the present design columns):
//! - `seed_tests`: one-sample Wilcoxon signed-rank test against zero over seeds (scipy defaults),
//!   rank-biserial r, seeds above and below zero, and Benjamini–Hochberg q over two families (main
//!   rows and each pass's per-pass rows are separate families): `q_paper_family`, the paper's
//!   (per measure, label arm, reasoning mode and instrument: the minority- and majority-decider
//!   blocks of every model and m; null for the other decider sets), and `q_all_cells` (every cell of
//!   one measure and decider set). `default_reasoning` is 1 where the row's reasoning mode is its
//!   model's default (thinking `on` where the model has it, else its only mode; 1 without a
//!   `reasoning` column), so "k of n cells" counts the paper's cells.
//! - `gee`: Gaussian GEE clustered by society, robust SEs; the paper's exchangeable working
//!   correlation but where `working_correlation` says `independence` (`absorbed` = `decider`: with
//!   an intercept per decider, not reported). `analysis` = `cell`: per cell
//!   `points ~ same_group` and `points ~ same_group * minority_decider` (clusters: seeds);
//!   `labels_pooled`: `* visible` over the cells of a design combination (labels = m = `pooled`);
//!   `m_pooled`: `points ~ same_group` per design combination and label condition pooled over m
//!   (m = `pooled`), the paper's per-model favouritism, which the headlines judge: independence
//!   working correlation and an intercept per decider, as the sum constraint degenerates the
//!   exchangeable fit across minority sizes (`gee.rs`, docs/deviations.md), so its only row is
//!   `same_group`;
//!   `reasoning_control`: the paper's control, per model (and instrument, pass role) on visible
//!   labels pooled over m, `points ~ same_group * reasoning` (reasoning = 1 for `on`, 0 for `off`;
//!   reasoning = m = `pooled`), whose `same_group:reasoning` is the paper's −1.50;
//!   `reasoning_three_way`: `* minority_decider * reasoning` per label condition. Pooled fits
//!   cluster by society (m, seed): a society's label arms, reasoning modes and passes are one
//!   cluster. `se_bootstrap` (main `cell` and `reasoning_control` rows): seed-level cluster
//!   bootstrap of the coefficient, refitting on each resample of the seeds.
//! - `bootstrap`: seed-level cluster bootstrap of mean favouritism and of the mean
//!   minority − majority favouritism gap; SE with ddof 1 and a percentile interval.
//! - `robustness`: prevalence (share of deciders with favouritism > 0), extreme allocations (zero
//!   points to every out-group target), position effect (GEE coefficient of `target_position` in
//!   `points ~ same_group * minority_decider + target_position`), position balance (mean presented
//!   position of in- and out-group targets and their per-society difference), token receipt (mean
//!   points per target by the target's group name, and the SD across names; needs the optional
//!   `target_group` column) and swap-pass difference (second − first pass in sorted order, per
//!   seed, Wilcoxon; `swap_pass` = `difference`), each with uniform fills included and, when a
//!   `filled` column is present, excluded. The checks and their columns are listed in
//!   `robustness.rs`'s module docs.
//!
//! Beside the four tables, [`model_claims`] writes the paper's per-model claims on the society as
//! the unit (minority gap, excess-share gap, the gap at equal groups, prevalence, the majority
//! reversal at the smallest m, the reasoning modes' gaps) for the rows a caller selects: the
//! report's headline table judges them.

mod bootstrap;
mod cells;
mod claims;
mod deciders;
mod gee;
mod nonce_labels;
mod robustness;
mod seed_tests;

use herd_stats::GeeOptions;

use self::bootstrap::{BOOTSTRAP_KINDS, Resamples, bootstrap_rows};
use self::cells::{Cell, build_cells, seed_means_of};
pub use self::claims::{
    MODEL_CLAIMS_COLUMNS, ON_MINUS_OFF, SocietyKey, SocietyTest, model_claims, society_size, society_sizes,
    society_test, students_t_quantile,
};
pub use self::deciders::{DeciderOutcome, decider_outcomes};
use self::gee::{FitPlan, GEE_KINDS, gee_rows, plan_gee};
pub use self::nonce_labels::{
    NetSpread, SwapPassDifference, TokenReceiptSpread, swap_pass_differences, token_receipt_spreads,
};
use self::robustness::{plan_position_fits, robustness_table};
pub use self::seed_tests::default_reasoning;
use self::seed_tests::seed_tests_table;
use crate::error::AnalysisError;
use crate::table::{ResultTable, TableBuilder, Value};

/// The optional design columns, in output order. Every analysis is done per combination of those
/// present.
pub const DESIGN_COLUMNS: [&str; 4] = ["model", "reasoning", "instrument", "swap_pass"];
const MODEL: usize = 0;
const REASONING: usize = 1;
const SWAP_PASS: usize = 3;

pub const SEED_TESTS_COLUMNS: [&str; 17] = [
    "passes",
    "default_reasoning",
    "labels",
    "m",
    "deciders",
    "measure",
    "n_seeds",
    "n_seeds_positive",
    "n_seeds_negative",
    "mean",
    "median",
    "wilcoxon_statistic",
    "wilcoxon_p",
    "rank_biserial",
    "q_paper_family",
    "q_all_cells",
    "note",
];
pub const GEE_COLUMNS: [&str; 17] = [
    "passes",
    "analysis",
    "labels",
    "m",
    "formula",
    "working_correlation",
    "absorbed",
    "term",
    "n_clusters",
    "coef",
    "se_robust",
    "se_bootstrap",
    "se_naive",
    "z",
    "p",
    "rho",
    "scale",
];
pub const BOOTSTRAP_COLUMNS: [&str; 9] =
    ["passes", "labels", "m", "quantity", "estimate", "se", "ci_low", "ci_high", "resamples"];
pub const ROBUSTNESS_COLUMNS: [&str; 14] = [
    "passes",
    "labels",
    "m",
    "fills",
    "check",
    "deciders",
    "target_group",
    "n",
    "estimate",
    "se",
    "statistic",
    "p",
    "formula",
    "note",
];

/// Per-cell formulas of the `gee` table.
pub const CELL_FORMULAS: [&str; 2] = ["points ~ same_group", "points ~ same_group * minority_decider"];
/// Formulas pooled over the cells of a design combination.
pub const POOLED_VISIBLE_FORMULAS: [&str; 2] =
    ["points ~ same_group * visible", "points ~ same_group * minority_decider * visible"];
/// The paper's reasoning control (visible labels, pooled over m and reasoning modes).
pub const REASONING_CONTROL_FORMULA: &str = "points ~ same_group * reasoning";
/// The three-way reasoning model, per label condition.
pub const POOLED_REASONING_FORMULA: &str = "points ~ same_group * minority_decider * reasoning";
pub const POSITION_FORMULA: &str = "points ~ same_group * minority_decider + target_position";

/// Whether group labels were shown: herd-design's, the experiment file's own label arm.
pub use herd_design::Labels;

/// Whether a result row (seed_tests, gee, bootstrap) is a main estimate: each society's passes
/// pooled (`passes` = `both`, or `single` with one pass); each pass alone (`per_pass`) is robustness.
pub fn is_main_row(table: &crate::ResultTable, r: usize) -> bool {
    table.text("passes", r) != Some("per_pass")
}

/// Values of the optional design columns ([`DESIGN_COLUMNS`] order); `None` where the column is
/// absent from the table.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DesignKey(pub [Option<String>; 4]);

/// One allocation dyad: what `decider` gave `target`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dyad {
    pub design: DesignKey,
    pub labels: Labels,
    pub m: u32,
    pub seed: i64,
    pub decider: i64,
    pub target: i64,
    pub minority_decider: bool,
    pub minority_target: bool,
    pub same_group: bool,
    pub points: f64,
    pub target_position: Option<f64>,
    pub filled: Option<bool>,
    /// The nonce name the target's group carried in this pass (optional column `target_group`; the
    /// `robustness` table's token receipt needs it).
    pub target_group: Option<String>,
}

impl Dyad {
    /// The dyad `decider` → `target` of a society whose membership `minority` gives (whether an agent is
    /// in the minority), so that its three group flags agree; no optional column (position, fill, name).
    pub fn from_membership(
        (design, labels, m): (DesignKey, Labels, u32),
        seed: i64,
        (decider, target): (i64, i64),
        minority: impl Fn(i64) -> bool,
        points: f64,
    ) -> Self {
        let (minority_decider, minority_target) = (minority(decider), minority(target));
        Dyad {
            design,
            labels,
            m,
            seed,
            decider,
            target,
            minority_decider,
            minority_target,
            same_group: minority_decider == minority_target,
            points,
            target_position: None,
            filled: None,
            target_group: None,
        }
    }
}

/// A validated dyad table: every row has the same optional columns.
#[derive(Debug, Clone)]
pub struct DyadTable {
    /// Where the rows came from (a file path), used in every error message.
    pub origin: String,
    pub rows: Vec<Dyad>,
    present_design: [bool; 4],
    has_target_position: bool,
    has_filled: bool,
    has_target_group: bool,
}

impl DyadTable {
    /// Checks that the optional columns are present in every row or in none.
    pub fn new(origin: impl Into<String>, rows: Vec<Dyad>) -> Result<Self, AnalysisError> {
        let origin = origin.into();
        let Some(first) = rows.first() else {
            return Err(AnalysisError::EmptyCell {
                origin,
                cell: "the table".into(),
                what: "rows".into(),
                fix: "pass a dyad table with at least one society".into(),
            });
        };
        let present_design = first.design.0.clone().map(|v| v.is_some());
        let has_target_position = first.target_position.is_some();
        let has_filled = first.filled.is_some();
        let has_target_group = first.target_group.is_some();
        for (i, row) in rows.iter().enumerate() {
            for (j, name) in DESIGN_COLUMNS.iter().enumerate() {
                if row.design.0[j].is_some() != present_design[j] {
                    return Err(missing_value(&origin, name, i));
                }
            }
            if row.target_position.is_some() != has_target_position {
                return Err(missing_value(&origin, "target_position", i));
            }
            if row.filled.is_some() != has_filled {
                return Err(missing_value(&origin, "filled", i));
            }
            if row.target_group.is_some() != has_target_group {
                return Err(missing_value(&origin, "target_group", i));
            }
        }
        Ok(Self { origin, rows, present_design, has_target_position, has_filled, has_target_group })
    }

    /// Names of the optional design columns present.
    pub fn design_columns(&self) -> Vec<&'static str> {
        DESIGN_COLUMNS.iter().zip(self.present_design).filter_map(|(n, present)| present.then_some(*n)).collect()
    }

    pub fn has_target_position(&self) -> bool {
        self.has_target_position
    }

    pub fn has_filled(&self) -> bool {
        self.has_filled
    }

    pub fn has_target_group(&self) -> bool {
        self.has_target_group
    }
}

fn missing_value(origin: &str, column: &str, row: usize) -> AnalysisError {
    AnalysisError::InvalidValue {
        origin: origin.to_owned(),
        column: column.to_owned(),
        row: row + 1,
        problem: "missing value".into(),
        fix: format!("give `{column}` a value in every row, or drop the column"),
    }
}

/// How bootstrap resamples are drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum BootstrapPlan {
    /// `resamples` draws of the seeds with replacement from ChaCha20 seeded with `seed`; every cell
    /// uses the same stream, so cells with equally many seeds share their resamples.
    Seeded { resamples: usize, seed: u64 },
    /// Given resamples (rows of seed indices into the cell's seeds in ascending seed order), e.g.
    /// the ones numpy drew, for exact comparison.
    Replay(Vec<Vec<usize>>),
}

/// Analysis parameters; the defaults are the paper's.
#[derive(Debug, Clone, PartialEq)]
pub struct MinimalGroupOptions {
    /// Points each decider distributes.
    pub pool: f64,
    /// Largest allowed |Σ points − pool| per decider.
    pub pool_tolerance: f64,
    pub bootstrap: BootstrapPlan,
    /// Level of the bootstrap percentile interval.
    pub confidence: f64,
    pub gee: GeeOptions,
    /// Whether to bootstrap the main GEE fits of each cell and the reasoning control over seeds
    /// (`se_bootstrap`, else null): one refit per resample, with [`Self::bootstrap`]'s resamples,
    /// which makes it the slowest part of the analysis, so off by default (`herd analyze` turns it on).
    pub gee_bootstrap: bool,
}

impl Default for MinimalGroupOptions {
    fn default() -> Self {
        Self {
            pool: 100.0,
            pool_tolerance: 1e-4,
            bootstrap: BootstrapPlan::Seeded { resamples: 2000, seed: 20_240_501 },
            confidence: 0.95,
            gee: GeeOptions::default(),
            gee_bootstrap: false,
        }
    }
}

/// The four result tables.
#[derive(Debug, Clone, PartialEq)]
pub struct MinimalGroupTables {
    pub seed_tests: ResultTable,
    pub gee: ResultTable,
    pub bootstrap: ResultTable,
    pub robustness: ResultTable,
}

impl MinimalGroupTables {
    pub fn all(&self) -> [&ResultTable; 4] {
        [&self.seed_tests, &self.gee, &self.bootstrap, &self.robustness]
    }

    /// The `seed_tests` table's rows, typed.
    pub fn seed_test_rows(&self) -> Vec<crate::rows::SeedTest> {
        crate::rows::TableRow::all(&self.seed_tests)
    }

    /// The `gee` table's rows, typed.
    pub fn gee_terms(&self) -> Vec<crate::rows::GeeTerm> {
        crate::rows::TableRow::all(&self.gee)
    }

    /// The `bootstrap` table's rows, typed.
    pub fn bootstrap_estimates(&self) -> Vec<crate::rows::BootstrapEstimate> {
        crate::rows::TableRow::all(&self.bootstrap)
    }

    /// The `robustness` table's rows, typed.
    pub fn robustness_checks(&self) -> Vec<crate::rows::RobustnessCheck> {
        crate::rows::TableRow::all(&self.robustness)
    }

    /// The tables from a stored analysis ([`crate::stored`]), found by name; `origin` names it in errors.
    pub fn from_tables(tables: Vec<ResultTable>, origin: &str) -> Result<Self, AnalysisError> {
        let mut take = crate::table::taker(tables, origin);
        Ok(Self {
            seed_tests: take("seed_tests")?,
            gee: take("gee")?,
            bootstrap: take("bootstrap")?,
            robustness: take("robustness")?,
        })
    }
}

const MEASURES: [&str; 2] = ["favouritism", "excess_share"];
const DECIDER_SETS: [&str; 4] = ["all", "minority", "majority", "minority_minus_majority"];

/// Runs every minimal-group analysis.
pub fn analyze_minimal_group(
    table: &DyadTable,
    options: &MinimalGroupOptions,
) -> Result<MinimalGroupTables, AnalysisError> {
    analyze_minimal_group_with_progress(table, options, &mut |_, _| {})
}

/// Only the main rows (`passes` ≠ `per_pass`) of the `seed_tests` table (seed-level Wilcoxon,
/// rank-biserial, BH): the paper's primary test, and all a power analysis needs from each simulated
/// replication. Their q-values equal the full table's (families never mix main and per-pass rows).
pub fn minimal_group_seed_tests(
    table: &DyadTable,
    options: &MinimalGroupOptions,
) -> Result<ResultTable, AnalysisError> {
    let cells = build_cells(table, options)?;
    let main: Vec<&Cell> = cells.iter().filter(|c| c.key.passes.is_main()).collect();
    let seed_means = main.iter().map(|cell| seed_means_of(table, cell)).collect::<Result<Vec<_>, _>>()?;
    seed_tests_table(table, &table.design_columns(), &main, &seed_means.iter().collect::<Vec<_>>())
}

/// As [`analyze_minimal_group`], calling `progress(done, total)` after each cell and pooled fit.
pub fn analyze_minimal_group_with_progress(
    table: &DyadTable,
    options: &MinimalGroupOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<MinimalGroupTables, AnalysisError> {
    if !(options.pool > 0.0 && options.pool.is_finite()) {
        return Err(AnalysisError::InvalidValue {
            origin: table.origin.clone(),
            column: "points".into(),
            row: 0,
            problem: format!("pool {} is not a positive number", options.pool),
            fix: "set the pool to the points each decider distributes (100 in the paper)".into(),
        });
    }
    let cells = build_cells(table, options)?;
    let design_columns = table.design_columns();
    let total = cells.len() * 3 + 2;
    let mut done = 0;

    let mut seed_means = Vec::with_capacity(cells.len());
    for cell in &cells {
        seed_means.push(seed_means_of(table, cell)?);
    }
    let seed_tests = seed_tests_table(
        table,
        &design_columns,
        &cells.iter().collect::<Vec<_>>(),
        &seed_means.iter().collect::<Vec<_>>(),
    )?;
    done += cells.len();
    progress(done, total);

    // The GEE fits (per cell, pooled, position effect) are independent and most of the work: plan
    // them in the order of the tables, run them on all cores, and read the results back in that
    // order, so the tables and the first error reported do not depend on the number of threads.
    let mut plan = FitPlan::default();
    let gee_entries = plan_gee(table, &design_columns, &cells, &mut plan);
    if !options.gee_bootstrap {
        for job in &mut plan.jobs {
            job.bootstrap = false;
        }
    }
    let position_jobs = plan_position_fits(table, &cells, &mut plan);
    let mut resamples = Resamples::new(&options.bootstrap);
    plan.prepare_resamples(table, &mut resamples);
    // Progress units: one per cell, then the visible and the reasoning pools.
    let mut remaining = vec![0usize; cells.len() + 2];
    for &unit in plan.units.iter().flatten() {
        remaining[unit] += 1;
    }
    for _ in remaining.iter().filter(|&&r| r == 0) {
        done += 1;
        progress(done, total);
    }
    let mut fits = plan.run(table, options, &resamples, |unit| {
        remaining[unit] -= 1;
        if remaining[unit] == 0 {
            done += 1;
            progress(done, total);
        }
    });

    let mut gee = TableBuilder::new("gee", &schema(&design_columns, &GEE_COLUMNS, GEE_KINDS));
    gee_rows(gee_entries, &mut fits, &mut gee)?;

    let mut bootstrap = TableBuilder::new("bootstrap", &schema(&design_columns, &BOOTSTRAP_COLUMNS, BOOTSTRAP_KINDS));
    for (cell, means) in cells.iter().zip(&seed_means) {
        bootstrap_rows(table, &design_columns, cell, means, options, &mut resamples, &mut bootstrap)?;
        done += 1;
        progress(done, total);
    }

    let robustness = robustness_table(table, &design_columns, &cells, &position_jobs, &mut fits)?;
    progress(total, total);
    Ok(MinimalGroupTables { seed_tests, gee: gee.finish(), bootstrap: bootstrap.finish(), robustness })
}

fn schema<'a>(design: &[&'a str], columns: &[&'a str], kinds: &str) -> Vec<(&'a str, char)> {
    debug_assert_eq!(columns.len(), kinds.len());
    design.iter().map(|&d| (d, 't')).chain(columns.iter().copied().zip(kinds.chars())).collect()
}

fn design_values(design: &DesignKey, present: &[&str]) -> Vec<Value> {
    DESIGN_COLUMNS
        .iter()
        .zip(&design.0)
        .filter(|(name, _)| present.contains(name))
        .map(|(_, v)| Value::from(v.clone()))
        .collect()
}
