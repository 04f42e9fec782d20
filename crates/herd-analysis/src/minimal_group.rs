//! The minimal-group paper's analyses over an allocation dyad table (one row per decider × target).
//!
//! A *cell* is one combination of the optional design columns present (`model`, `reasoning`,
//! `instrument`, `swap_pass`) with `labels` and `m`; a *seed* is one society. Per decider:
//! favouritism = mean points per in-group target − mean points per out-group target; excess share =
//! share of the decider's points given to its own group − (in-group targets)/(targets).
//! Seed-level statistics average deciders within a society (all, minority, majority), so the seed is
//! the unit of every test, as in the paper.
//!
//! Tables (columns listed in [`SEED_TESTS_COLUMNS`] etc., preceded by the present design columns):
//! - `seed_tests`: one-sample Wilcoxon signed-rank test against zero over seeds (scipy defaults),
//!   rank-biserial r, and Benjamini–Hochberg q over every cell sharing `measure` and `deciders`.
//! - `gee`: exchangeable Gaussian GEE clustered by society, per cell (`points ~ same_group`,
//!   `points ~ same_group * minority_decider`), pooled over the cells of a design combination with
//!   `* visible` (labels = m = `pooled`; clusters are (labels, m, seed)), and, when `reasoning` has
//!   the levels `on` and `off`, pooled over reasoning modes and m per labels with `* reasoning`
//!   (reasoning = `pooled`, m = `pooled`; reasoning is 1 for `on`).
//! - `bootstrap`: seed-level cluster bootstrap of mean favouritism and of the mean
//!   minority − majority favouritism gap; SE with ddof 1 and a percentile interval.
//! - `robustness`: prevalence (share of deciders with favouritism > 0), extreme allocations (zero
//!   points to every out-group target), position effect (GEE coefficient of `target_position` in
//!   `points ~ same_group * minority_decider + target_position`) and swap-pass difference (second
//!   − first pass in sorted order, per seed, Wilcoxon), each with uniform fills included and, when
//!   a `filled` column is present, excluded.

use std::borrow::Cow;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use herd_stats::{
    BootstrapResult, Formula, GeeFit, GeeOptions, StatsError, WilcoxonOptions, benjamini_hochberg,
    bootstrap_replay, cluster_resamples, gee_gaussian_exchangeable, percentile, sample_std,
    wilcoxon_one_sample,
};

use crate::error::{AnalysisError, stats_context};
use crate::table::{ResultTable, TableBuilder, Value};

/// The optional design columns, in output order. Every analysis is done per combination of those
/// present.
pub const DESIGN_COLUMNS: [&str; 4] = ["model", "reasoning", "instrument", "swap_pass"];

pub const SEED_TESTS_COLUMNS: [&str; 11] = [
    "labels",
    "m",
    "deciders",
    "measure",
    "n_seeds",
    "mean",
    "median",
    "wilcoxon_statistic",
    "wilcoxon_p",
    "rank_biserial",
    "bh_q",
];
pub const GEE_COLUMNS: [&str; 11] = [
    "labels", "m", "formula", "term", "coef", "se_robust", "se_naive", "z", "p", "rho", "scale",
];
pub const BOOTSTRAP_COLUMNS: [&str; 8] = [
    "labels",
    "m",
    "quantity",
    "estimate",
    "se",
    "ci_low",
    "ci_high",
    "resamples",
];
pub const ROBUSTNESS_COLUMNS: [&str; 11] = [
    "labels", "m", "fills", "check", "deciders", "n", "estimate", "se", "statistic", "p",
    "formula",
];

/// Per-cell formulas of the `gee` table.
pub const CELL_FORMULAS: [&str; 2] = [
    "points ~ same_group",
    "points ~ same_group * minority_decider",
];
/// Formulas pooled over the cells of a design combination.
pub const POOLED_VISIBLE_FORMULAS: [&str; 2] = [
    "points ~ same_group * visible",
    "points ~ same_group * minority_decider * visible",
];
pub const POOLED_REASONING_FORMULA: &str = "points ~ same_group * minority_decider * reasoning";
pub const POSITION_FORMULA: &str = "points ~ same_group * minority_decider + target_position";

/// Whether group labels were shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Labels {
    Visible,
    Hidden,
}

impl Labels {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Visible => "visible",
            Self::Hidden => "hidden",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "visible" => Some(Self::Visible),
            "hidden" => Some(Self::Hidden),
            _ => None,
        }
    }
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
        }
        Ok(Self {
            origin,
            rows,
            present_design,
            has_target_position,
            has_filled,
        })
    }

    /// Names of the optional design columns present.
    pub fn design_columns(&self) -> Vec<&'static str> {
        DESIGN_COLUMNS
            .iter()
            .zip(self.present_design)
            .filter_map(|(n, present)| present.then_some(*n))
            .collect()
    }

    pub fn has_target_position(&self) -> bool {
        self.has_target_position
    }

    pub fn has_filled(&self) -> bool {
        self.has_filled
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
}

impl Default for MinimalGroupOptions {
    fn default() -> Self {
        Self {
            pool: 100.0,
            pool_tolerance: 1e-4,
            bootstrap: BootstrapPlan::Seeded {
                resamples: 2000,
                seed: 20_240_501,
            },
            confidence: 0.95,
            gee: GeeOptions::default(),
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
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct CellKey {
    design: DesignKey,
    labels: Labels,
    m: u32,
}

impl CellKey {
    fn describe(&self) -> String {
        let mut parts = vec![format!("labels={}", self.labels.as_str()), format!("m={}", self.m)];
        for (name, value) in DESIGN_COLUMNS.iter().zip(&self.design.0) {
            if let Some(v) = value {
                parts.push(format!("{name}={v}"));
            }
        }
        format!("cell ({})", parts.join(", "))
    }
}

/// What one decider did.
#[derive(Debug, Clone)]
struct DeciderSummary {
    seed: i64,
    minority: bool,
    filled: bool,
    favouritism: f64,
    excess_share: f64,
    extreme: bool,
}

struct Cell {
    key: CellKey,
    /// Row indices into the table, in table order.
    rows: Vec<usize>,
    deciders: Vec<DeciderSummary>,
    /// For each of `rows`, the index of its decider in `deciders`.
    decider_of_row: Vec<usize>,
}

/// Seed-level means of one cell, seeds ascending.
struct SeedMeans {
    seeds: Vec<i64>,
    /// [measure][deciders] → one value per seed; measure 0 favouritism, 1 excess share;
    /// deciders 0 all, 1 minority, 2 majority, 3 minority − majority.
    values: [[Vec<f64>; 4]; 2],
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

/// Only the `seed_tests` table (seed-level Wilcoxon, rank-biserial, BH): the paper's primary test, and
/// all a power analysis needs from each simulated replication.
pub fn minimal_group_seed_tests(table: &DyadTable, options: &MinimalGroupOptions) -> Result<ResultTable, AnalysisError> {
    let cells = build_cells(table, options)?;
    let seed_means = cells.iter().map(|cell| seed_means_of(table, cell)).collect::<Result<Vec<_>, _>>()?;
    seed_tests_table(table, &table.design_columns(), &cells, &seed_means)
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
    let seed_tests = seed_tests_table(table, &design_columns, &cells, &seed_means)?;
    done += cells.len();
    progress(done, total);

    // The GEE fits (per cell, pooled, position effect) are independent and most of the work: plan
    // them in the order of the tables, run them on all cores, and read the results back in that
    // order, so the tables and the first error reported do not depend on the number of threads.
    let mut plan = FitPlan::default();
    let gee_entries = plan_gee(table, &design_columns, &cells, &mut plan);
    let position_jobs = plan_position_fits(table, &cells, &mut plan);
    // Progress units: one per cell, then the visible and the reasoning pools.
    let mut remaining = vec![0usize; cells.len() + 2];
    for &unit in plan.units.iter().flatten() {
        remaining[unit] += 1;
    }
    for _ in remaining.iter().filter(|&&r| r == 0) {
        done += 1;
        progress(done, total);
    }
    let mut fits = plan.run(table, options, |unit| {
        remaining[unit] -= 1;
        if remaining[unit] == 0 {
            done += 1;
            progress(done, total);
        }
    });

    let mut gee = TableBuilder::new("gee", &schema(&design_columns, &GEE_COLUMNS, GEE_KINDS));
    for entry in gee_entries {
        let fit = fits.get(entry.fit?)?;
        push_gee_rows(&mut gee, &entry.design, &entry.labels, &entry.m, entry.formula, fit);
    }

    let mut bootstrap = TableBuilder::new(
        "bootstrap",
        &schema(&design_columns, &BOOTSTRAP_COLUMNS, BOOTSTRAP_KINDS),
    );
    let mut drawn = BTreeMap::new();
    for (cell, means) in cells.iter().zip(&seed_means) {
        bootstrap_rows(table, &design_columns, cell, means, options, &mut drawn, &mut bootstrap)?;
        done += 1;
        progress(done, total);
    }

    let robustness = robustness_table(table, &design_columns, &cells, &position_jobs, &mut fits)?;
    progress(total, total);
    Ok(MinimalGroupTables {
        seed_tests,
        gee: gee.finish(),
        bootstrap: bootstrap.finish(),
        robustness,
    })
}

/// Runs `work(k)` for every k in `order` (a permutation of `0..len`) on all cores and returns the
/// results indexed by k; `finished(k)` runs on this thread as each completes. Each result
/// depends only on its k, so the output is the same for any number of threads.
fn parallel_map<R: Send>(
    len: usize,
    order: &[usize],
    work: impl Fn(usize) -> R + Sync,
    mut finished: impl FnMut(usize),
) -> Vec<R> {
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(len).collect();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(order.len());
    if workers <= 1 {
        for &k in order {
            results[k] = Some(work(k));
            finished(k);
        }
    } else {
        let next = AtomicUsize::new(0);
        let (sender, receiver) = mpsc::channel();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let sender = sender.clone();
                let (next, work) = (&next, &work);
                scope.spawn(move || {
                    while let Some(&k) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if sender.send((k, work(k))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(sender);
            for (k, result) in receiver {
                results[k] = Some(result);
                finished(k);
            }
        });
    }
    // A worker that panicked has already re-raised its panic when the scope ended.
    results.into_iter().map(|r| r.expect("every job ran")).collect()
}

/// Groups `items` by `key`: groups in ascending key order, items in input order within a group
/// (what collecting into a BTreeMap of Vecs gives), looking a key up only where it changes, as
/// rows arrive in runs of one cell, seed and decider.
fn group_runs<K: Ord + Copy>(
    items: impl IntoIterator<Item = usize>,
    key: impl Fn(usize) -> K,
) -> Vec<(K, Vec<usize>)> {
    let mut groups: Vec<(K, Vec<usize>)> = Vec::new();
    let mut index: BTreeMap<K, usize> = BTreeMap::new();
    let mut last: Option<usize> = None;
    for item in items {
        let k = key(item);
        let g = match last {
            Some(g) if groups[g].0 == k => g,
            _ => *index.entry(k).or_insert_with(|| {
                groups.push((k, Vec::new()));
                groups.len() - 1
            }),
        };
        groups[g].1.push(item);
        last = Some(g);
    }
    groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    groups
}

const SEED_TESTS_KINDS: &str = "tittiffffff";
const GEE_KINDS: &str = "ttttfffffff";
const BOOTSTRAP_KINDS: &str = "titffffi";
const ROBUSTNESS_KINDS: &str = "titttifffft";

fn schema<'a>(design: &[&'a str], columns: &[&'a str], kinds: &str) -> Vec<(&'a str, char)> {
    design
        .iter()
        .map(|&d| (d, 't'))
        .chain(columns.iter().copied().zip(kinds.chars()))
        .collect()
}

fn design_values(design: &DesignKey, present: &[&str]) -> Vec<Value> {
    DESIGN_COLUMNS
        .iter()
        .zip(&design.0)
        .filter(|(name, _)| present.contains(name))
        .map(|(_, v)| Value::from(v.clone()))
        .collect()
}

fn build_cells(table: &DyadTable, options: &MinimalGroupOptions) -> Result<Vec<Cell>, AnalysisError> {
    let groups = group_runs(0..table.rows.len(), |i| {
        let row = &table.rows[i];
        (&row.design, row.labels, row.m)
    });
    let order: Vec<usize> = (0..groups.len()).collect();
    let summaries = parallel_map(
        groups.len(),
        &order,
        |c| {
            let ((design, labels, m), rows) = &groups[c];
            let key = CellKey {
                design: (*design).clone(),
                labels: *labels,
                m: *m,
            };
            summarise_deciders(table, &key, rows, options).map(|summary| (key, summary))
        },
        |_| {},
    );
    groups
        .into_iter()
        .zip(summaries)
        .map(|((_, rows), summary)| {
            let (key, (deciders, decider_of_row)) = summary?;
            Ok(Cell {
                key,
                rows,
                deciders,
                decider_of_row,
            })
        })
        .collect()
}

/// The deciders of one cell in (seed, decider) order, and each row's index among them.
fn summarise_deciders(
    table: &DyadTable,
    key: &CellKey,
    rows: &[usize],
    options: &MinimalGroupOptions,
) -> Result<(Vec<DeciderSummary>, Vec<usize>), AnalysisError> {
    let origin = &table.origin;
    let by_decider = group_runs(0..rows.len(), |k| {
        let d = &table.rows[rows[k]];
        (d.seed, d.decider)
    });
    let mut decider_of_row = vec![0; rows.len()];
    let mut out = Vec::with_capacity(by_decider.len());
    for (index, ((seed, decider), positions)) in by_decider.into_iter().enumerate() {
        let first = &table.rows[rows[positions[0]]];
        let (mut in_sum, mut out_sum, mut total) = (0.0, 0.0, 0.0);
        let (mut n_in, mut n_out) = (0usize, 0usize);
        let mut extreme = true;
        let mut filled = false;
        for &k in &positions {
            decider_of_row[k] = index;
            let i = rows[k];
            let d = &table.rows[i];
            if d.minority_decider != first.minority_decider {
                return Err(AnalysisError::InvalidValue {
                    origin: origin.clone(),
                    column: "minority_decider".into(),
                    row: i + 1,
                    problem: format!(
                        "decider {decider} of seed {seed} is both minority and majority in {}",
                        key.describe()
                    ),
                    fix: "minority_decider must be the same in every row of one decider".into(),
                });
            }
            if d.same_group != (d.minority_decider == d.minority_target) {
                return Err(AnalysisError::InvalidValue {
                    origin: origin.clone(),
                    column: "same_group".into(),
                    row: i + 1,
                    problem: format!(
                        "same_group = {} but minority_decider = {} and minority_target = {}",
                        u8::from(d.same_group),
                        u8::from(d.minority_decider),
                        u8::from(d.minority_target)
                    ),
                    fix: "same_group is 1 exactly when decider and target are in the same group".into(),
                });
            }
            if !d.points.is_finite() || d.points < 0.0 {
                return Err(AnalysisError::InvalidValue {
                    origin: origin.clone(),
                    column: "points".into(),
                    row: i + 1,
                    problem: format!("points = {}", d.points),
                    fix: "points must be finite and non-negative (the parsed, renormalised allocation)".into(),
                });
            }
            total += d.points;
            filled |= d.filled.unwrap_or(false);
            if d.same_group {
                in_sum += d.points;
                n_in += 1;
            } else {
                out_sum += d.points;
                n_out += 1;
                extreme &= d.points == 0.0;
            }
        }
        if (total - options.pool).abs() > options.pool_tolerance {
            return Err(AnalysisError::PointsDoNotSumToPool {
                origin: origin.clone(),
                cell: key.describe(),
                seed,
                decider,
                sum: total,
                pool: options.pool,
            });
        }
        if n_in == 0 || n_out == 0 {
            return Err(AnalysisError::EmptyCell {
                origin: origin.clone(),
                cell: format!("decider {decider} of seed {seed} in {}", key.describe()),
                what: if n_in == 0 { "in-group target" } else { "out-group target" }.into(),
                fix: "favouritism needs targets of both groups: use m ≥ 2 and check that no target rows are missing".into(),
            });
        }
        let n_targets = (n_in + n_out) as f64;
        out.push(DeciderSummary {
            seed,
            minority: first.minority_decider,
            filled,
            favouritism: in_sum / n_in as f64 - out_sum / n_out as f64,
            excess_share: in_sum / total - n_in as f64 / n_targets,
            extreme,
        });
    }
    Ok((out, decider_of_row))
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn seed_means_of(table: &DyadTable, cell: &Cell) -> Result<SeedMeans, AnalysisError> {
    let mut by_seed: BTreeMap<i64, Vec<&DeciderSummary>> = BTreeMap::new();
    for d in &cell.deciders {
        by_seed.entry(d.seed).or_default().push(d);
    }
    let mut values: [[Vec<f64>; 4]; 2] = Default::default();
    for (seed, deciders) in &by_seed {
        for (measure, pick) in [
            (0, (|d: &DeciderSummary| d.favouritism) as fn(&DeciderSummary) -> f64),
            (1, |d: &DeciderSummary| d.excess_share),
        ] {
            let all: Vec<f64> = deciders.iter().map(|d| pick(d)).collect();
            let minority: Vec<f64> = deciders.iter().filter(|d| d.minority).map(|d| pick(d)).collect();
            let majority: Vec<f64> = deciders.iter().filter(|d| !d.minority).map(|d| pick(d)).collect();
            for (set, group) in [("minority", &minority), ("majority", &majority)] {
                if group.is_empty() {
                    return Err(AnalysisError::EmptyCell {
                        origin: table.origin.clone(),
                        cell: format!("seed {seed} of {}", cell.key.describe()),
                        what: format!("{set} decider"),
                        fix: "every society needs deciders of both groups (1 ≤ m < society size)".into(),
                    });
                }
            }
            let (min_mean, maj_mean) = (mean(&minority), mean(&majority));
            values[measure][0].push(mean(&all));
            values[measure][1].push(min_mean);
            values[measure][2].push(maj_mean);
            values[measure][3].push(min_mean - maj_mean);
        }
    }
    Ok(SeedMeans {
        seeds: by_seed.keys().copied().collect(),
        values,
    })
}

fn seed_tests_table(
    table: &DyadTable,
    design_columns: &[&str],
    cells: &[Cell],
    seed_means: &[SeedMeans],
) -> Result<ResultTable, AnalysisError> {
    struct Row {
        cell: usize,
        measure: usize,
        set: usize,
        n: usize,
        mean: f64,
        median: f64,
        statistic: f64,
        p: f64,
        rank_biserial: f64,
    }
    let mut rows = Vec::new();
    for (ci, (cell, means)) in cells.iter().zip(seed_means).enumerate() {
        for measure in 0..2 {
            for set in 0..4 {
                let values = &means.values[measure][set];
                let context = || {
                    format!(
                        "Wilcoxon test of {} ({} deciders) in {}",
                        MEASURES[measure],
                        DECIDER_SETS[set],
                        cell.key.describe()
                    )
                };
                let median = percentile(values, 50.0).map_err(stats_context(&table.origin, context))?;
                let (statistic, p, rank_biserial) =
                    match wilcoxon_one_sample(values, &WilcoxonOptions::default()) {
                        Ok(w) => (w.statistic, w.p_value, w.rank_biserial),
                        // Every seed mean exactly zero: the test is undefined (scipy gives NaN).
                        Err(StatsError::AllZeroDifferences) => (f64::NAN, f64::NAN, f64::NAN),
                        Err(e) => return Err(stats_context(&table.origin, context)(e)),
                    };
                rows.push(Row {
                    cell: ci,
                    measure,
                    set,
                    n: values.len(),
                    mean: mean(values),
                    median,
                    statistic,
                    p,
                    rank_biserial,
                });
            }
        }
    }
    // BH across every cell of one measure and decider set.
    let mut q = vec![f64::NAN; rows.len()];
    for measure in 0..2 {
        for set in 0..4 {
            let members: Vec<usize> = (0..rows.len())
                .filter(|&i| rows[i].measure == measure && rows[i].set == set && rows[i].p.is_finite())
                .collect();
            let ps: Vec<f64> = members.iter().map(|&i| rows[i].p).collect();
            let adjusted = benjamini_hochberg(&ps).map_err(stats_context(&table.origin, || {
                format!("Benjamini–Hochberg over {} ({})", MEASURES[measure], DECIDER_SETS[set])
            }))?;
            for (&i, qv) in members.iter().zip(adjusted) {
                q[i] = qv;
            }
        }
    }
    let mut out = TableBuilder::new(
        "seed_tests",
        &schema(design_columns, &SEED_TESTS_COLUMNS, SEED_TESTS_KINDS),
    );
    for (row, qv) in rows.iter().zip(q) {
        let key = &cells[row.cell].key;
        let mut values = design_values(&key.design, design_columns);
        values.extend([
            key.labels.as_str().into(),
            key.m.into(),
            DECIDER_SETS[row.set].into(),
            MEASURES[row.measure].into(),
            row.n.into(),
            row.mean.into(),
            row.median.into(),
            row.statistic.into(),
            row.p.into(),
            row.rank_biserial.into(),
            qv.into(),
        ]);
        out.push(values);
    }
    Ok(out.finish())
}

/// One GEE fit: table rows, formula, cluster id and an optional extra numeric column.
struct FitJob<'a> {
    rows: Cow<'a, [usize]>,
    formula: &'static str,
    cluster: ClusterBy,
    extra: Option<Extra>,
    /// What is being fitted, for error messages.
    context: String,
}

/// The GEE fits of one analysis, in the order the tables use them.
#[derive(Default)]
struct FitPlan<'a> {
    jobs: Vec<FitJob<'a>>,
    /// The progress unit each job counts towards (none for position fits).
    units: Vec<Option<usize>>,
}

impl<'a> FitPlan<'a> {
    fn push(&mut self, job: FitJob<'a>, unit: Option<usize>) -> usize {
        self.jobs.push(job);
        self.units.push(unit);
        self.jobs.len() - 1
    }

    /// Runs every fit on all cores; `finished(unit)` is called on this thread as each fit of a
    /// progress unit completes.
    fn run(
        &self,
        table: &DyadTable,
        options: &MinimalGroupOptions,
        mut finished: impl FnMut(usize),
    ) -> FitResults {
        // Largest first, so that the fits left at the end are small ones.
        let mut order: Vec<usize> = (0..self.jobs.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(self.jobs[k].rows.len()));
        let columns = FitColumns::new(table, &self.jobs);
        let results = parallel_map(
            self.jobs.len(),
            &order,
            |k| run_fit(table, &columns, &self.jobs[k], options),
            |k| {
                if let Some(unit) = self.units[k] {
                    finished(unit);
                }
            },
        );
        FitResults(results.into_iter().map(Some).collect())
    }
}

/// Fit results by job. The tables are read in order and stop at the first error, as if the fits
/// had run one after another.
struct FitResults(Vec<Option<Result<GeeFit, AnalysisError>>>);

impl FitResults {
    fn get(&mut self, job: usize) -> Result<&GeeFit, AnalysisError> {
        if let Some(Err(_)) = self.0[job]
            && let Some(Err(e)) = self.0[job].take()
        {
            return Err(e);
        }
        match &self.0[job] {
            Some(Ok(fit)) => Ok(fit),
            _ => unreachable!("a fit is read again after its error was returned"),
        }
    }
}

/// Clusters: the seed within a cell; (labels, m, seed) across cells; (reasoning, m, seed) across
/// reasoning modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClusterBy {
    Seed,
    LabelsMSeed,
    ReasoningMSeed,
}

impl ClusterBy {
    /// The cluster id, ordered as the key it encodes (labels and booleans in their own order).
    fn key(self, d: &Dyad) -> (i64, i64, i64) {
        match self {
            Self::Seed => (d.seed, 0, 0),
            Self::LabelsMSeed => {
                let labels = match d.labels {
                    Labels::Visible => 0,
                    Labels::Hidden => 1,
                };
                (labels, i64::from(d.m), d.seed)
            }
            Self::ReasoningMSeed => (i64::from(reasoning_on(d)), i64::from(d.m), d.seed),
        }
    }
}

/// Formula columns beyond points, same_group and minority_decider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extra {
    Visible,
    Reasoning,
    TargetPosition,
}

impl Extra {
    fn name(self) -> &'static str {
        match self {
            Self::Visible => "visible",
            Self::Reasoning => "reasoning",
            Self::TargetPosition => "target_position",
        }
    }

    fn value(self, d: &Dyad) -> f64 {
        match self {
            Self::Visible => f64::from(u8::from(d.labels == Labels::Visible)),
            Self::Reasoning => f64::from(u8::from(reasoning_on(d))),
            Self::TargetPosition => d.target_position.unwrap_or(f64::NAN),
        }
    }
}

fn reasoning_on(d: &Dyad) -> bool {
    d.design.0[1].as_deref() == Some("on")
}

/// The formula columns and cluster ids of every table row, read once for all fits.
struct FitColumns {
    points: Vec<f64>,
    same_group: Vec<f64>,
    minority_decider: Vec<f64>,
    extras: Vec<(Extra, Vec<f64>)>,
    clusters: Vec<(ClusterBy, Vec<(i64, i64, i64)>)>,
}

impl FitColumns {
    fn new(table: &DyadTable, jobs: &[FitJob<'_>]) -> Self {
        let rows = &table.rows;
        let mut extras: Vec<(Extra, Vec<f64>)> = Vec::new();
        let mut clusters: Vec<(ClusterBy, Vec<(i64, i64, i64)>)> = Vec::new();
        for job in jobs {
            if let Some(extra) = job.extra
                && !extras.iter().any(|(e, _)| *e == extra)
            {
                extras.push((extra, rows.iter().map(|d| extra.value(d)).collect()));
            }
            if !clusters.iter().any(|(c, _)| *c == job.cluster) {
                clusters.push((job.cluster, rows.iter().map(|d| job.cluster.key(d)).collect()));
            }
        }
        Self {
            points: rows.iter().map(|d| d.points).collect(),
            same_group: rows.iter().map(|d| f64::from(u8::from(d.same_group))).collect(),
            minority_decider: rows.iter().map(|d| f64::from(u8::from(d.minority_decider))).collect(),
            extras,
            clusters,
        }
    }
}

/// `column` at `rows`: borrowed when the rows are one run of the table (a cell of a table sorted
/// by cell, or all of it), else gathered.
fn pick<'c, T: Copy>(column: &'c [T], rows: &[usize], run: Option<&Range<usize>>) -> Cow<'c, [T]> {
    match run {
        Some(run) => Cow::Borrowed(&column[run.clone()]),
        None => Cow::Owned(rows.iter().map(|&i| column[i]).collect()),
    }
}

/// Fits one planned GEE.
fn run_fit(
    table: &DyadTable,
    columns: &FitColumns,
    job: &FitJob<'_>,
    options: &MinimalGroupOptions,
) -> Result<GeeFit, AnalysisError> {
    let to_error = |e| stats_context(&table.origin, || job.context.clone())(e);
    let parsed = Formula::parse(job.formula).map_err(to_error)?;
    let rows = &job.rows[..];
    let run = rows
        .first()
        .map(|&start| start..start + rows.len())
        .filter(|run| rows.iter().copied().eq(run.clone()));
    let run = run.as_ref();
    let points = pick(&columns.points, rows, run);
    let same_group = pick(&columns.same_group, rows, run);
    let minority_decider = pick(&columns.minority_decider, rows, run);
    let mut data: Vec<(&str, &[f64])> = vec![
        ("points", &points),
        ("same_group", &same_group),
        ("minority_decider", &minority_decider),
    ];
    let extra = job.extra.map(|extra| {
        let (_, values) = columns.extras.iter().find(|(e, _)| *e == extra).expect("read for every job");
        (extra.name(), pick(values, rows, run))
    });
    if let Some((name, values)) = &extra {
        data.push((name, values));
    }
    let (_, ids) = columns.clusters.iter().find(|(c, _)| *c == job.cluster).expect("read for every job");
    let clusters = pick(ids, rows, run);
    let (design, y) = parsed.build(&data).map_err(to_error)?;
    gee_gaussian_exchangeable(&design, &y, &clusters, &options.gee).map_err(to_error)
}

/// Rows of the `gee` table from one fit, or the error that stops the analysis there.
struct GeeEntry {
    design: Vec<Value>,
    labels: String,
    m: String,
    formula: &'static str,
    fit: Result<usize, AnalysisError>,
}

/// Plans the `gee` table: per cell, pooled over labels, pooled over reasoning modes.
fn plan_gee<'a>(
    table: &DyadTable,
    design_columns: &[&str],
    cells: &'a [Cell],
    plan: &mut FitPlan<'a>,
) -> Vec<GeeEntry> {
    let mut entries = Vec::new();
    for (unit, cell) in cells.iter().enumerate() {
        for formula in CELL_FORMULAS {
            let job = FitJob {
                rows: Cow::Borrowed(&cell.rows),
                formula,
                cluster: ClusterBy::Seed,
                extra: None,
                context: format!("{} {formula}", cell.key.describe()),
            };
            entries.push(GeeEntry {
                design: design_values(&cell.key.design, design_columns),
                labels: cell.key.labels.as_str().into(),
                m: cell.key.m.to_string(),
                formula,
                fit: Ok(plan.push(job, Some(unit))),
            });
        }
    }
    plan_pooled_visible(design_columns, cells, plan, cells.len(), &mut entries);
    plan_pooled_reasoning(table, design_columns, cells, plan, cells.len() + 1, &mut entries);
    entries
}

fn push_gee_rows(
    out: &mut TableBuilder,
    design: &[Value],
    labels: &str,
    m: &str,
    formula: &str,
    fit: &herd_stats::GeeFit,
) {
    for c in &fit.coefficients {
        let mut values: Vec<Value> = design.iter().map(clone_value).collect();
        values.extend([
            labels.into(),
            m.into(),
            formula.into(),
            c.name.as_str().into(),
            c.estimate.into(),
            c.robust_se.into(),
            c.naive_se.into(),
            c.robust_z.into(),
            c.robust_p.into(),
            fit.rho.into(),
            fit.scale.into(),
        ]);
        out.push(values);
    }
}

fn clone_value(v: &Value) -> Value {
    match v {
        Value::Text(t) => Value::Text(t.clone()),
        Value::Float(f) => Value::Float(*f),
        Value::Integer(i) => Value::Integer(*i),
    }
}

fn plan_pooled_visible<'a>(
    design_columns: &[&str],
    cells: &'a [Cell],
    plan: &mut FitPlan<'a>,
    unit: usize,
    entries: &mut Vec<GeeEntry>,
) {
    let mut by_design: BTreeMap<&DesignKey, Vec<&Cell>> = BTreeMap::new();
    for cell in cells {
        by_design.entry(&cell.key.design).or_default().push(cell);
    }
    for (design, members) in by_design {
        let labels: BTreeSet<Labels> = members.iter().map(|c| c.key.labels).collect();
        if labels.len() < 2 {
            continue;
        }
        let mut rows: Vec<usize> = members.iter().flat_map(|c| c.rows.iter().copied()).collect();
        rows.sort_unstable();
        for formula in POOLED_VISIBLE_FORMULAS {
            let job = FitJob {
                rows: Cow::Owned(rows.clone()),
                formula,
                cluster: ClusterBy::LabelsMSeed,
                extra: Some(Extra::Visible),
                context: format!("{formula} pooled over the cells of {:?}", design.0),
            };
            entries.push(GeeEntry {
                design: design_values(design, design_columns),
                labels: "pooled".into(),
                m: "pooled".into(),
                formula,
                fit: Ok(plan.push(job, Some(unit))),
            });
        }
    }
}

fn plan_pooled_reasoning<'a>(
    table: &DyadTable,
    design_columns: &[&str],
    cells: &'a [Cell],
    plan: &mut FitPlan<'a>,
    unit: usize,
    entries: &mut Vec<GeeEntry>,
) {
    if !design_columns.contains(&"reasoning") {
        return;
    }
    let mut by_design: BTreeMap<(DesignKey, Labels), Vec<&Cell>> = BTreeMap::new();
    for cell in cells {
        let mut pooled = cell.key.design.clone();
        pooled.0[1] = Some("pooled".into());
        by_design.entry((pooled, cell.key.labels)).or_default().push(cell);
    }
    for ((design, labels), members) in by_design {
        let levels: BTreeSet<&str> = members
            .iter()
            .filter_map(|c| c.key.design.0[1].as_deref())
            .collect();
        if levels.len() < 2 {
            continue;
        }
        let mut entry = GeeEntry {
            design: design_values(&design, design_columns),
            labels: labels.as_str().into(),
            m: "pooled".into(),
            formula: POOLED_REASONING_FORMULA,
            fit: Ok(0),
        };
        if levels != BTreeSet::from(["off", "on"]) {
            let row = members[0].rows[0];
            entry.fit = Err(AnalysisError::InvalidValue {
                origin: table.origin.clone(),
                column: "reasoning".into(),
                row: row + 1,
                problem: format!("reasoning levels {levels:?}"),
                fix: "use `on` (thinking) and `off` (thinking disabled), herd's reasoning modes".into(),
            });
            entries.push(entry);
            return;
        }
        let mut rows: Vec<usize> = members.iter().flat_map(|c| c.rows.iter().copied()).collect();
        rows.sort_unstable();
        let job = FitJob {
            rows: Cow::Owned(rows),
            formula: POOLED_REASONING_FORMULA,
            cluster: ClusterBy::ReasoningMSeed,
            extra: Some(Extra::Reasoning),
            context: format!("{POOLED_REASONING_FORMULA} pooled over reasoning modes ({})", labels.as_str()),
        };
        entry.fit = Ok(plan.push(job, Some(unit)));
        entries.push(entry);
    }
}

fn fill_settings(table: &DyadTable) -> &'static [&'static str] {
    if table.has_filled() {
        &["included", "excluded"]
    } else {
        &["included"]
    }
}

/// Position-effect fits per cell and fill setting, as (job, rows fitted); none without
/// `target_position`. Excluding fills that no decider has fits the same rows, so that reuses the
/// inclusion's fit.
fn plan_position_fits<'a>(
    table: &DyadTable,
    cells: &'a [Cell],
    plan: &mut FitPlan<'a>,
) -> Vec<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(cells.len());
    for cell in cells {
        let mut jobs: Vec<(usize, usize)> = Vec::new();
        if table.has_target_position() {
            for &fill in fill_settings(table) {
                let rows: Vec<usize> = cell
                    .rows
                    .iter()
                    .zip(&cell.decider_of_row)
                    .filter(|&(_, &d)| fill == "included" || !cell.deciders[d].filled)
                    .map(|(&i, _)| i)
                    .collect();
                let n = rows.len();
                let job = match jobs.first() {
                    Some(&(job, included)) if included == n => job,
                    _ => plan.push(
                        FitJob {
                            rows: Cow::Owned(rows),
                            formula: POSITION_FORMULA,
                            cluster: ClusterBy::Seed,
                            extra: Some(Extra::TargetPosition),
                            context: format!("position effect in {} (fills {fill})", cell.key.describe()),
                        },
                        None,
                    ),
                };
                jobs.push((job, n));
            }
        }
        out.push(jobs);
    }
    out
}

fn bootstrap_rows(
    table: &DyadTable,
    design_columns: &[&str],
    cell: &Cell,
    means: &SeedMeans,
    options: &MinimalGroupOptions,
    drawn: &mut BTreeMap<usize, Vec<Vec<usize>>>,
    out: &mut TableBuilder,
) -> Result<(), AnalysisError> {
    let n = means.seeds.len();
    for (quantity, values) in [
        ("favouritism", &means.values[0][0]),
        ("minority_minus_majority", &means.values[0][3]),
    ] {
        let context = || format!("bootstrap of {quantity} in {}", cell.key.describe());
        let statistic = |idx: &[usize]| idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64;
        let result: BootstrapResult = match &options.bootstrap {
            BootstrapPlan::Seeded { resamples, seed } => {
                // Every cell and quantity uses the same stream, so equally many seeds give the
                // same resamples: draw them once per seed count.
                let indices = match drawn.entry(n) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => {
                        let indices = cluster_resamples(n, *resamples, *seed);
                        e.insert(indices.map_err(stats_context(&table.origin, context))?)
                    }
                };
                bootstrap_replay(n, indices, statistic)
            }
            BootstrapPlan::Replay(indices) => {
                if let Some(row) = indices.iter().find(|r| r.len() != n) {
                    return Err(AnalysisError::InvalidValue {
                        origin: table.origin.clone(),
                        column: "seed".into(),
                        row: 0,
                        problem: format!(
                            "a replayed resample has {} seeds but {} has {n}",
                            row.len(),
                            cell.key.describe()
                        ),
                        fix: "replay resamples drawn for this cell's number of seeds".into(),
                    });
                }
                bootstrap_replay(n, indices, statistic)
            }
        }
        .map_err(stats_context(&table.origin, context))?;
        let se = result.standard_error().map_err(stats_context(&table.origin, context))?;
        let (low, high) = result
            .percentile_interval(options.confidence)
            .map_err(stats_context(&table.origin, context))?;
        let mut row = design_values(&cell.key.design, design_columns);
        row.extend([
            cell.key.labels.as_str().into(),
            cell.key.m.into(),
            quantity.into(),
            mean(values).into(),
            se.into(),
            low.into(),
            high.into(),
            result.replicates.len().into(),
        ]);
        out.push(row);
    }
    Ok(())
}

fn robustness_table(
    table: &DyadTable,
    design_columns: &[&str],
    cells: &[Cell],
    position_jobs: &[Vec<(usize, usize)>],
    fits: &mut FitResults,
) -> Result<ResultTable, AnalysisError> {
    let mut out = TableBuilder::new(
        "robustness",
        &schema(design_columns, &ROBUSTNESS_COLUMNS, ROBUSTNESS_KINDS),
    );
    let fills = fill_settings(table);
    let nan = f64::NAN;
    for (cell, jobs) in cells.iter().zip(position_jobs) {
        for (fi, &fill) in fills.iter().enumerate() {
            let keep = |d: &DeciderSummary| fill == "included" || !d.filled;
            let mut push = |check: &str, deciders: &str, n: usize, estimate: f64, se: f64, statistic: f64, p: f64, formula: Option<&str>| {
                let mut row = design_values(&cell.key.design, design_columns);
                row.extend([
                    cell.key.labels.as_str().into(),
                    cell.key.m.into(),
                    fill.into(),
                    check.into(),
                    deciders.into(),
                    n.into(),
                    estimate.into(),
                    se.into(),
                    statistic.into(),
                    p.into(),
                    Value::Text(formula.map(str::to_owned)),
                ]);
                out.push(row);
            };
            for (set, filter) in [
                ("all", (|_: &DeciderSummary| true) as fn(&DeciderSummary) -> bool),
                ("minority", |d: &DeciderSummary| d.minority),
                ("majority", |d: &DeciderSummary| !d.minority),
            ] {
                let chosen: Vec<&DeciderSummary> =
                    cell.deciders.iter().filter(|d| keep(d) && filter(d)).collect();
                let n = chosen.len();
                let share = |f: fn(&DeciderSummary) -> bool| {
                    if n == 0 {
                        nan
                    } else {
                        chosen.iter().filter(|d| f(d)).count() as f64 / n as f64
                    }
                };
                push("prevalence", set, n, share(|d| d.favouritism > 0.0), nan, nan, nan, None);
                push("extreme_allocations", set, n, share(|d| d.extreme), nan, nan, nan, None);
            }
            if let Some(&(job, n_rows)) = jobs.get(fi) {
                let c = fits
                    .get(job)?
                    .coefficient("target_position")
                    .expect("the position formula has a target_position term");
                push(
                    "position_effect",
                    "all",
                    n_rows,
                    c.estimate,
                    c.robust_se,
                    c.robust_z,
                    c.robust_p,
                    Some(POSITION_FORMULA),
                );
            }
        }
    }
    if design_columns.contains(&"swap_pass") {
        swap_pass_rows(table, design_columns, cells, fills, &mut out)?;
    }
    Ok(out.finish())
}

fn swap_pass_rows(
    table: &DyadTable,
    design_columns: &[&str],
    cells: &[Cell],
    fills: &[&str],
    out: &mut TableBuilder,
) -> Result<(), AnalysisError> {
    let mut by_pair: BTreeMap<CellKey, Vec<&Cell>> = BTreeMap::new();
    for cell in cells {
        let mut key = cell.key.clone();
        key.design.0[3] = Some("difference".into());
        by_pair.entry(key).or_default().push(cell);
    }
    for (key, passes) in by_pair {
        if passes.len() != 2 {
            continue;
        }
        for &fill in fills {
            let seed_favouritism = |cell: &Cell| -> BTreeMap<i64, f64> {
                let mut sums: BTreeMap<i64, (f64, usize)> = BTreeMap::new();
                for d in cell.deciders.iter().filter(|d| fill == "included" || !d.filled) {
                    let e = sums.entry(d.seed).or_default();
                    e.0 += d.favouritism;
                    e.1 += 1;
                }
                sums.into_iter().map(|(s, (sum, n))| (s, sum / n as f64)).collect()
            };
            let first = seed_favouritism(passes[0]);
            let second = seed_favouritism(passes[1]);
            let differences: Vec<f64> = first
                .iter()
                .filter_map(|(seed, a)| second.get(seed).map(|b| b - a))
                .collect();
            if differences.is_empty() {
                return Err(AnalysisError::EmptyCell {
                    origin: table.origin.clone(),
                    cell: key.describe(),
                    what: "seed run in both swap passes".into(),
                    fix: "the swap-pass difference pairs the passes by seed: run both passes of the same societies".into(),
                });
            }
            let context = || format!("swap-pass difference in {}", key.describe());
            let n = differences.len();
            let se = if n >= 2 {
                sample_std(&differences).map_err(stats_context(&table.origin, context))? / (n as f64).sqrt()
            } else {
                f64::NAN
            };
            let (statistic, p) = match wilcoxon_one_sample(&differences, &WilcoxonOptions::default()) {
                Ok(w) => (w.statistic, w.p_value),
                Err(StatsError::AllZeroDifferences) => (f64::NAN, f64::NAN),
                Err(e) => return Err(stats_context(&table.origin, context)(e)),
            };
            let mut row = design_values(&key.design, design_columns);
            row.extend([
                key.labels.as_str().into(),
                key.m.into(),
                fill.into(),
                "swap_pass_difference".into(),
                "all".into(),
                n.into(),
                mean(&differences).into(),
                se.into(),
                statistic.into(),
                p.into(),
                Value::Text(None),
            ]);
            out.push(row);
        }
    }
    Ok(())
}
