//! The dyad-level GEE fits: planned in table order, run on all cores, read back in order. Clusters
//! are always societies: herd runs a society's label arms, reasoning modes and swap passes on the
//! same membership, so those are one cluster, never one each.
//!
//! Every fit is the paper's (exchangeable working correlation) but `m_pooled`'s: pooled over m,
//! societies of different minority sizes are clusters of different compositions, and as each
//! decider's points sum to the pool the exchangeable ρ sits at its singular bound and pins
//! `same_group` near 0 with a collapsed SE (herd-stats' `gee` module docs). `m_pooled` is fitted
//! with the independence working correlation and an intercept per decider (a decider's baseline
//! per target is what the sum leaves, so it differs between deciders of the small and the large
//! group), cluster-robust by society: a weighted mean of the deciders' favouritism, each weighted
//! by in-group × out-group targets / targets (docs/deviations.md). Within one cell every society
//! has the same composition, and the exchangeable fit equals OLS there.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use herd_stats::{
    DesignMatrix, Formula, GeeFit, GeeOptions, gee_gaussian_exchangeable, gee_gaussian_independence_within, sample_std,
};

use super::bootstrap::Resamples;
use super::cells::{Cell, Passes, group_runs, parallel_map};
use super::{
    CELL_FORMULAS, DesignKey, Dyad, DyadTable, Labels, MinimalGroupOptions, POOLED_REASONING_FORMULA,
    POOLED_VISIBLE_FORMULAS, REASONING, REASONING_CONTROL_FORMULA, SWAP_PASS, design_values,
};
use crate::error::{AnalysisError, stats_context};
use crate::table::{TableBuilder, Value};

pub(super) const GEE_KINDS: &str = "ttttttttiffffffff";

/// The `analysis` column of the `gee` table.
pub(super) const CELL: &str = "cell";
pub(super) const LABELS_POOLED: &str = "labels_pooled";
pub(super) const REASONING_CONTROL: &str = "reasoning_control";
pub(super) const REASONING_THREE_WAY: &str = "reasoning_three_way";
pub(super) const M_POOLED: &str = "m_pooled";
/// The `absorbed` column of an `m_pooled` row: an intercept per decider.
pub(super) const DECIDER: &str = "decider";

/// How a job is fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Estimator {
    /// The paper's: exchangeable working correlation.
    Exchangeable,
    /// Independence working correlation with an intercept per decider (one decider's allocation in
    /// one pass), absorbed.
    IndependenceWithinDecider,
}

impl Estimator {
    /// Fits `design` on `y`; `deciders` gives each row's decider where they are absorbed.
    fn fit<C: Ord, D: Ord>(
        self,
        design: &DesignMatrix,
        y: &[f64],
        clusters: &[C],
        deciders: impl FnOnce() -> Vec<D>,
        options: &GeeOptions,
    ) -> Result<GeeFit, herd_stats::StatsError> {
        match self {
            Self::Exchangeable => gee_gaussian_exchangeable(design, y, clusters, options),
            Self::IndependenceWithinDecider => {
                gee_gaussian_independence_within(design, y, clusters, &deciders(), options)
            }
        }
    }
}

/// One decider's allocation within an `m_pooled` fit, whose rows share model, reasoning mode,
/// instrument and label arm: (m, seed, swap pass, decider), the pass as its index among the table's
/// passes. Its points sum to the pool. (A fit pooled over label arms or reasoning modes would need
/// those in the id too.)
type DeciderId = (i64, i64, usize, i64);

/// One GEE fit: table rows, formula, cluster id and an optional extra numeric column.
pub(super) struct FitJob<'a> {
    pub(super) rows: Cow<'a, [usize]>,
    pub(super) formula: &'static str,
    pub(super) cluster: ClusterBy,
    pub(super) extra: Option<Extra>,
    pub(super) estimator: Estimator,
    /// Whether to bootstrap the coefficients over seeds (refitting on each resample).
    pub(super) bootstrap: bool,
    /// What is being fitted, for error messages.
    pub(super) context: String,
}

/// A fit and, when bootstrapped, each coefficient's bootstrap SE (`None` where a refit failed).
pub(super) struct FitOutcome {
    pub(super) fit: GeeFit,
    pub(super) se_bootstrap: Option<Vec<f64>>,
}

/// The GEE fits of one analysis, in the order the tables use them.
#[derive(Default)]
pub(super) struct FitPlan<'a> {
    pub(super) jobs: Vec<FitJob<'a>>,
    /// The progress unit each job counts towards (none for position fits).
    pub(super) units: Vec<Option<usize>>,
}

impl<'a> FitPlan<'a> {
    pub(super) fn push(&mut self, job: FitJob<'a>, unit: Option<usize>) -> usize {
        self.jobs.push(job);
        self.units.push(unit);
        self.jobs.len() - 1
    }

    /// Draws the resamples every bootstrapped fit needs (one set per number of seeds).
    pub(super) fn prepare_resamples(&self, table: &DyadTable, resamples: &mut Resamples<'_>) {
        for job in self.jobs.iter().filter(|j| j.bootstrap) {
            let seeds: BTreeSet<i64> = job.rows.iter().map(|&i| table.rows[i].seed).collect();
            resamples.prepare(seeds.len());
        }
    }

    /// Runs every fit on all cores; `finished(unit)` is called on this thread as each fit of a
    /// progress unit completes.
    pub(super) fn run(
        &self,
        table: &DyadTable,
        options: &MinimalGroupOptions,
        resamples: &Resamples<'_>,
        mut finished: impl FnMut(usize),
    ) -> FitResults {
        // Largest first (bootstrapped fits count as many), so that the fits left at the end are
        // small ones.
        let mut order: Vec<usize> = (0..self.jobs.len()).collect();
        order.sort_by_key(|&k| {
            std::cmp::Reverse(self.jobs[k].rows.len() * if self.jobs[k].bootstrap { 100 } else { 1 })
        });
        let columns = FitColumns::new(table, &self.jobs);
        let results = parallel_map(
            self.jobs.len(),
            &order,
            |k| run_fit(table, &columns, &self.jobs[k], options, resamples),
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
pub(super) struct FitResults(Vec<Option<Result<FitOutcome, AnalysisError>>>);

impl FitResults {
    pub(super) fn get(&mut self, job: usize) -> Result<&FitOutcome, AnalysisError> {
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

/// Clusters: the seed within a cell (both passes of a society are one cluster), or the society
/// (m, seed) across cells pooled over labels, reasoning modes or m.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClusterBy {
    Seed,
    Society,
}

impl ClusterBy {
    fn key(self, d: &Dyad) -> (i64, i64) {
        match self {
            Self::Seed => (0, d.seed),
            Self::Society => (i64::from(d.m), d.seed),
        }
    }
}

/// Formula columns beyond points, same_group and minority_decider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Extra {
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
            Self::Reasoning => f64::from(u8::from(d.design.0[REASONING].as_deref() == Some("on"))),
            Self::TargetPosition => d.target_position.unwrap_or(f64::NAN),
        }
    }
}

/// The formula columns and cluster ids of every table row, read once for all fits.
struct FitColumns {
    points: Vec<f64>,
    same_group: Vec<f64>,
    minority_decider: Vec<f64>,
    extras: Vec<(Extra, Vec<f64>)>,
    clusters: Vec<(ClusterBy, Vec<(i64, i64)>)>,
    /// Each row's decider, where some job absorbs deciders' intercepts.
    deciders: Vec<DeciderId>,
}

impl FitColumns {
    fn new(table: &DyadTable, jobs: &[FitJob<'_>]) -> Self {
        let rows = &table.rows;
        let mut extras: Vec<(Extra, Vec<f64>)> = Vec::new();
        let mut clusters: Vec<(ClusterBy, Vec<(i64, i64)>)> = Vec::new();
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
        let deciders = if jobs.iter().any(|j| j.estimator == Estimator::IndependenceWithinDecider) {
            let passes: BTreeSet<Option<&str>> = rows.iter().map(|d| d.design.0[SWAP_PASS].as_deref()).collect();
            let passes: Vec<Option<&str>> = passes.into_iter().collect();
            rows.iter()
                .map(|d| {
                    let pass = passes.binary_search(&d.design.0[SWAP_PASS].as_deref()).expect("collected above");
                    (i64::from(d.m), d.seed, pass, d.decider)
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            points: rows.iter().map(|d| d.points).collect(),
            same_group: rows.iter().map(|d| f64::from(u8::from(d.same_group))).collect(),
            minority_decider: rows.iter().map(|d| f64::from(u8::from(d.minority_decider))).collect(),
            extras,
            clusters,
            deciders,
        }
    }

    fn cluster_ids(&self, by: ClusterBy) -> &[(i64, i64)] {
        &self.clusters.iter().find(|(c, _)| *c == by).expect("read for every job").1
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

/// `job`'s design matrix and response on `rows`.
fn design_of(
    parsed: &Formula,
    columns: &FitColumns,
    job: &FitJob<'_>,
    rows: &[usize],
) -> Result<(DesignMatrix, Vec<f64>), herd_stats::StatsError> {
    let run = rows.first().map(|&start| start..start + rows.len()).filter(|run| rows.iter().copied().eq(run.clone()));
    let run = run.as_ref();
    let points = pick(&columns.points, rows, run);
    let same_group = pick(&columns.same_group, rows, run);
    let minority_decider = pick(&columns.minority_decider, rows, run);
    let mut data: Vec<(&str, &[f64])> =
        vec![("points", &points), ("same_group", &same_group), ("minority_decider", &minority_decider)];
    let extra = job.extra.map(|extra| {
        let (_, values) = columns.extras.iter().find(|(e, _)| *e == extra).expect("read for every job");
        (extra.name(), pick(values, rows, run))
    });
    if let Some((name, values)) = &extra {
        data.push((name, values));
    }
    parsed.build(&data)
}

/// Fits one planned GEE (and bootstraps it when asked).
fn run_fit(
    table: &DyadTable,
    columns: &FitColumns,
    job: &FitJob<'_>,
    options: &MinimalGroupOptions,
    resamples: &Resamples<'_>,
) -> Result<FitOutcome, AnalysisError> {
    let to_error = |e| stats_context(&table.origin, || job.context.clone())(e);
    let parsed = Formula::parse(job.formula).map_err(to_error)?;
    let rows = &job.rows[..];
    let ids = columns.cluster_ids(job.cluster);
    let clusters: Vec<(i64, i64)> = rows.iter().map(|&i| ids[i]).collect();
    let (design, y) = design_of(&parsed, columns, job, rows).map_err(to_error)?;
    let deciders = || rows.iter().map(|&i| columns.deciders[i]).collect::<Vec<_>>();
    let fit = job.estimator.fit(&design, &y, &clusters, deciders, &options.gee).map_err(to_error)?;
    let se_bootstrap = if job.bootstrap {
        // Seeds, ascending, each with its positions in `rows`: the units the bootstrap resamples.
        let seeds = group_runs(0..rows.len(), |k| table.rows[rows[k]].seed);
        let indices = resamples.get(seeds.len(), &table.origin, || format!("bootstrap of {}", job.context))?;
        let deciders = match job.estimator {
            Estimator::Exchangeable => Vec::new(),
            Estimator::IndependenceWithinDecider => deciders(),
        };
        let sample = Sample { design: &design, y: &y, clusters: &clusters, deciders: &deciders };
        bootstrap_se(&sample, job.estimator, &seeds, indices, options)
    } else {
        None
    };
    Ok(FitOutcome { fit, se_bootstrap })
}

/// The rows one fit works on: design, response, cluster and (where absorbed) decider of each.
struct Sample<'s> {
    design: &'s DesignMatrix,
    y: &'s [f64],
    clusters: &'s [(i64, i64)],
    /// Empty unless the estimator absorbs deciders' intercepts.
    deciders: &'s [DeciderId],
}

/// Seed-level cluster bootstrap of a fit: each resample takes every row of the drawn seeds (a
/// seed drawn twice gives two clusters per society, and two deciders per decider), refits, and the
/// SE of each coefficient is the standard deviation of its estimates (ddof 1). `None` if a refit
/// fails.
fn bootstrap_se(
    sample: &Sample<'_>,
    estimator: Estimator,
    seeds: &[(i64, Vec<usize>)],
    indices: &[Vec<usize>],
    options: &MinimalGroupOptions,
) -> Option<Vec<f64>> {
    let Sample { design, y, clusters, deciders } = *sample;
    // One list per coefficient of the fit (absorbed intercepts have none).
    let mut estimates: Vec<Vec<f64>> = Vec::new();
    let (mut positions, mut resampled_y, mut resampled_clusters) = (Vec::new(), Vec::new(), Vec::new());
    let mut resampled_deciders = Vec::new();
    for resample in indices {
        positions.clear();
        resampled_y.clear();
        resampled_clusters.clear();
        resampled_deciders.clear();
        for (draw, &j) in resample.iter().enumerate() {
            for &k in &seeds[j].1 {
                positions.push(k);
                resampled_y.push(y[k]);
                resampled_clusters.push((draw as i64, clusters[k].0, clusters[k].1));
                if let Some(decider) = deciders.get(k) {
                    resampled_deciders.push((draw, *decider));
                }
            }
        }
        let resampled = DesignMatrix {
            column_names: design.column_names.clone(),
            matrix: design.matrix.select_rows(positions.iter()),
        };
        let fit = estimator
            .fit(&resampled, &resampled_y, &resampled_clusters, || resampled_deciders.clone(), &options.gee)
            .ok()?;
        if estimates.is_empty() {
            estimates = vec![Vec::with_capacity(indices.len()); fit.coefficients.len()];
        }
        for (e, c) in estimates.iter_mut().zip(&fit.coefficients) {
            e.push(c.estimate);
        }
    }
    estimates.iter().map(|e| sample_std(e).ok()).collect()
}

/// Rows of the `gee` table from one fit, or the error that stops the analysis there.
pub(super) struct GeeEntry {
    design: Vec<Value>,
    passes: Passes,
    analysis: &'static str,
    labels: String,
    m: String,
    formula: &'static str,
    fit: Result<usize, AnalysisError>,
}

/// Plans the `gee` table: per cell, pooled over labels, and the reasoning control and three-way
/// reasoning model pooled over reasoning modes.
pub(super) fn plan_gee<'a>(
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
                estimator: Estimator::Exchangeable,
                bootstrap: cell.key.passes.is_main(),
                context: format!("{} {formula}", cell.key.describe()),
            };
            entries.push(GeeEntry {
                design: design_values(&cell.key.design, design_columns),
                passes: cell.key.passes,
                analysis: CELL,
                labels: cell.key.labels.as_str().into(),
                m: cell.key.m.to_string(),
                formula,
                fit: Ok(plan.push(job, Some(unit))),
            });
        }
    }
    plan_pooled_visible(design_columns, cells, plan, cells.len(), &mut entries);
    plan_pooled_m(design_columns, cells, plan, cells.len(), &mut entries);
    plan_pooled_reasoning(table, design_columns, cells, plan, cells.len() + 1, &mut entries);
    entries
}

/// Appends the rows of every entry, stopping at the first error.
pub(super) fn gee_rows(
    entries: Vec<GeeEntry>,
    fits: &mut FitResults,
    out: &mut TableBuilder,
) -> Result<(), AnalysisError> {
    for entry in entries {
        let outcome = fits.get(entry.fit?)?;
        let fit = &outcome.fit;
        for (k, c) in fit.coefficients.iter().enumerate() {
            let se_bootstrap = outcome.se_bootstrap.as_ref().and_then(|se| se.get(k).copied()).unwrap_or(f64::NAN);
            let mut values: Vec<Value> = entry.design.to_vec();
            values.extend([
                entry.passes.as_str().into(),
                entry.analysis.into(),
                entry.labels.as_str().into(),
                entry.m.as_str().into(),
                entry.formula.into(),
                fit.working_correlation.as_str().into(),
                (fit.absorbed > 0).then_some(DECIDER).into(),
                c.name.as_str().into(),
                fit.n_clusters.into(),
                c.estimate.into(),
                c.robust_se.into(),
                se_bootstrap.into(),
                c.naive_se.into(),
                c.robust_z.into(),
                c.robust_p.into(),
                fit.rho.into(),
                fit.scale.into(),
            ]);
            out.push(values);
        }
    }
    Ok(())
}

/// All rows of `members`, in table order.
fn rows_of(members: &[&Cell]) -> Vec<usize> {
    let mut rows: Vec<usize> = members.iter().flat_map(|c| c.rows.iter().copied()).collect();
    rows.sort_unstable();
    rows
}

/// `* visible` fits pooled over the cells of each design combination (and pass role) with both
/// label conditions; a society's two arms are one cluster.
fn plan_pooled_visible<'a>(
    design_columns: &[&str],
    cells: &'a [Cell],
    plan: &mut FitPlan<'a>,
    unit: usize,
    entries: &mut Vec<GeeEntry>,
) {
    let mut by_design: BTreeMap<(&DesignKey, Passes), Vec<&Cell>> = BTreeMap::new();
    for cell in cells {
        by_design.entry((&cell.key.design, cell.key.passes)).or_default().push(cell);
    }
    for ((design, passes), members) in by_design {
        let labels: BTreeSet<Labels> = members.iter().map(|c| c.key.labels).collect();
        if labels.len() < 2 {
            continue;
        }
        let rows = rows_of(&members);
        for formula in POOLED_VISIBLE_FORMULAS {
            let job = FitJob {
                rows: Cow::Owned(rows.clone()),
                formula,
                cluster: ClusterBy::Society,
                extra: Some(Extra::Visible),
                estimator: Estimator::Exchangeable,
                bootstrap: false,
                context: format!("{formula} pooled over the cells of {:?}", design.0),
            };
            entries.push(GeeEntry {
                design: design_values(design, design_columns),
                passes,
                analysis: LABELS_POOLED,
                labels: "pooled".into(),
                m: "pooled".into(),
                formula,
                fit: Ok(plan.push(job, Some(unit))),
            });
        }
    }
}

/// `points ~ same_group` pooled over m per design combination, pass role and label condition
/// (m = `pooled`): the paper's per-model favouritism ("0.84–4.06 points/target across the four
/// models", every p < 10⁻²⁵, which only a dyad-level fit over a model's societies can give), so
/// that a model is judged on its own estimate, not on its weakest minority size. Clusters are
/// societies (m, seed); the working correlation is independence, with an intercept per decider
/// (module docs): the exchangeable fit degenerates under the sum constraint when societies of
/// different m are pooled.
fn plan_pooled_m<'a>(
    design_columns: &[&str],
    cells: &'a [Cell],
    plan: &mut FitPlan<'a>,
    unit: usize,
    entries: &mut Vec<GeeEntry>,
) {
    let mut by_design: BTreeMap<(&DesignKey, Passes, Labels), Vec<&Cell>> = BTreeMap::new();
    for cell in cells {
        by_design.entry((&cell.key.design, cell.key.passes, cell.key.labels)).or_default().push(cell);
    }
    let formula = CELL_FORMULAS[0];
    for ((design, passes, labels), members) in by_design {
        let job = FitJob {
            rows: Cow::Owned(rows_of(&members)),
            formula,
            cluster: ClusterBy::Society,
            extra: None,
            estimator: Estimator::IndependenceWithinDecider,
            bootstrap: false,
            context: format!("{formula} pooled over m ({}, {:?})", labels.as_str(), design.0),
        };
        entries.push(GeeEntry {
            design: design_values(design, design_columns),
            passes,
            analysis: M_POOLED,
            labels: labels.as_str().into(),
            m: "pooled".into(),
            formula,
            fit: Ok(plan.push(job, Some(unit))),
        });
    }
}

/// Fits pooled over reasoning modes `on` and `off` and over m (reasoning = `pooled`, m = `pooled`),
/// per combination of the other design columns and pass role: the paper's reasoning control
/// `points ~ same_group * reasoning` on visible labels (its `same_group:reasoning` is the change in
/// favouritism when thinking is on), then the three-way `* minority_decider * reasoning` per label
/// condition. A society's two modes (and passes) are one cluster.
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
    let mut by_design: BTreeMap<(DesignKey, Passes, Labels), Vec<&Cell>> = BTreeMap::new();
    for cell in cells {
        let mut pooled = cell.key.design.clone();
        pooled.0[REASONING] = Some("pooled".into());
        by_design.entry((pooled, cell.key.passes, cell.key.labels)).or_default().push(cell);
    }
    let mut planned: Vec<(DesignKey, Passes, Labels, Vec<&Cell>)> = Vec::new();
    for ((design, passes, labels), members) in by_design {
        let levels: BTreeSet<&str> = members.iter().filter_map(|c| c.key.design.0[REASONING].as_deref()).collect();
        if levels.len() < 2 {
            continue;
        }
        if levels != BTreeSet::from(["off", "on"]) {
            let row = members[0].rows[0];
            entries.push(GeeEntry {
                design: design_values(&design, design_columns),
                passes,
                analysis: REASONING_THREE_WAY,
                labels: labels.as_str().into(),
                m: "pooled".into(),
                formula: POOLED_REASONING_FORMULA,
                fit: Err(AnalysisError::InvalidValue {
                    origin: table.origin.clone(),
                    column: "reasoning".into(),
                    row: row + 1,
                    problem: format!("reasoning levels {levels:?}"),
                    fix: "use `on` (thinking) and `off` (thinking disabled), herd's reasoning modes".into(),
                }),
            });
            return;
        }
        planned.push((design, passes, labels, members));
    }
    let fits = planned
        .iter()
        .filter(|p| p.2 == Labels::Visible)
        .map(|p| (p, REASONING_CONTROL, REASONING_CONTROL_FORMULA))
        .chain(planned.iter().map(|p| (p, REASONING_THREE_WAY, POOLED_REASONING_FORMULA)));
    for ((design, passes, labels, members), analysis, formula) in fits {
        let job = FitJob {
            rows: Cow::Owned(rows_of(members)),
            formula,
            cluster: ClusterBy::Society,
            extra: Some(Extra::Reasoning),
            estimator: Estimator::Exchangeable,
            bootstrap: analysis == REASONING_CONTROL && passes.is_main(),
            context: format!("{formula} pooled over reasoning modes ({}, {:?})", labels.as_str(), design.0),
        };
        entries.push(GeeEntry {
            design: design_values(design, design_columns),
            passes: *passes,
            analysis,
            labels: labels.as_str().into(),
            m: "pooled".into(),
            formula,
            fit: Ok(plan.push(job, Some(unit))),
        });
    }
}
