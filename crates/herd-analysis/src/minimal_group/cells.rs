//! Cells (one combination of the design columns, labels and m), the swap-pass roles, and what
//! each decider and seed did.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use super::{DESIGN_COLUMNS, DesignKey, DyadTable, Labels, MinimalGroupOptions, SWAP_PASS, design_values};
use crate::error::AnalysisError;
use crate::table::Value;

/// Which swap passes a row of a result table rests on (its `passes` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Passes {
    /// Both passes of every society pooled (`swap_pass` = `both`): the main estimate when the
    /// societies were run with the group names swapped as well.
    Both,
    /// The societies' only pass (no `swap_pass` column, or one level in the cell): the main estimate.
    Single,
    /// One pass of a two-pass design (`swap_pass` names it): a robustness row.
    PerPass,
}

impl Passes {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Both => "both",
            Self::Single => "single",
            Self::PerPass => "per_pass",
        }
    }

    /// Whether rows of this role are the main estimates.
    pub(super) fn is_main(self) -> bool {
        self != Self::PerPass
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct CellKey {
    pub(super) design: DesignKey,
    pub(super) passes: Passes,
    pub(super) labels: Labels,
    pub(super) m: u32,
}

impl CellKey {
    /// The leading values of a result row about this cell: the design columns present, `passes`,
    /// `labels` and `m` (the `bootstrap` and `robustness` tables' order).
    pub(super) fn row_start(&self, design_columns: &[&str]) -> Vec<Value> {
        let mut row = design_values(&self.design, design_columns);
        row.extend([self.passes.as_str().into(), self.labels.as_str().into(), self.m.into()]);
        row
    }

    pub(super) fn describe(&self) -> String {
        let mut parts = vec![format!("labels={}", self.labels.as_str()), format!("m={}", self.m)];
        for (name, value) in DESIGN_COLUMNS.iter().zip(&self.design.0) {
            if let Some(v) = value {
                parts.push(format!("{name}={v}"));
            }
        }
        format!("cell ({})", parts.join(", "))
    }

    /// The BH family component of the pass role: the main rows form one family, each pass of the
    /// per-pass rows its own.
    pub(super) fn pass_family(&self) -> Option<&str> {
        match self.passes {
            Passes::PerPass => self.design.0[SWAP_PASS].as_deref(),
            Passes::Both | Passes::Single => Some("main"),
        }
    }
}

/// What one decider did.
#[derive(Debug, Clone)]
pub(super) struct DeciderSummary {
    pub(super) seed: i64,
    pub(super) minority: bool,
    pub(super) filled: bool,
    pub(super) favouritism: f64,
    pub(super) excess_share: f64,
    pub(super) extreme: bool,
}

pub(super) struct Cell {
    pub(super) key: CellKey,
    /// Row indices into the table, in table order.
    pub(super) rows: Vec<usize>,
    pub(super) deciders: Vec<DeciderSummary>,
    /// For each of `rows`, the index of its decider in `deciders`.
    pub(super) decider_of_row: Vec<usize>,
}

/// Seed-level means of one cell, seeds ascending.
pub(super) struct SeedMeans {
    pub(super) seeds: Vec<i64>,
    /// [measure][deciders] → one value per seed; measure 0 favouritism, 1 excess share;
    /// deciders 0 all, 1 minority, 2 majority, 3 minority − majority.
    pub(super) values: [[Vec<f64>; 4]; 2],
}

/// Every cell of the analysis in key order: without a `swap_pass` column (or where a cell has one
/// pass) the table's cells ([`Passes::Single`]); where a cell has two passes, the cell pooling both
/// passes of each society (`swap_pass` = `both`, [`Passes::Both`]) and each pass on its own
/// ([`Passes::PerPass`]). A pooled cell's deciders are those of both passes, so its seed means
/// average a society's deciders over both passes, and its GEE fits pool both passes with the
/// society as the cluster.
pub(super) fn build_cells(table: &DyadTable, options: &MinimalGroupOptions) -> Result<Vec<Cell>, AnalysisError> {
    let mut cells = pass_cells(table, options)?;
    if !table.design_columns().contains(&"swap_pass") {
        return Ok(cells);
    }
    let mut by_cell: BTreeMap<CellKey, Vec<usize>> = BTreeMap::new();
    for (i, cell) in cells.iter().enumerate() {
        let mut key = cell.key.clone();
        key.design.0[SWAP_PASS] = None;
        by_cell.entry(key).or_default().push(i);
    }
    let mut pooled = Vec::new();
    for (mut key, members) in by_cell {
        if members.len() < 2 {
            continue;
        }
        for &i in &members {
            cells[i].key.passes = Passes::PerPass;
        }
        key.design.0[SWAP_PASS] = Some("both".into());
        key.passes = Passes::Both;
        pooled.push(merge(key, members.iter().map(|&i| &cells[i])));
    }
    cells.extend(pooled);
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(cells)
}

/// One cell from the passes of a society: their rows in table order, their deciders pass after pass.
fn merge<'a>(key: CellKey, passes: impl Iterator<Item = &'a Cell>) -> Cell {
    let mut deciders = Vec::new();
    let mut rows: Vec<(usize, usize)> = Vec::new();
    for cell in passes {
        let offset = deciders.len();
        deciders.extend(cell.deciders.iter().cloned());
        rows.extend(cell.rows.iter().zip(&cell.decider_of_row).map(|(&r, &d)| (r, d + offset)));
    }
    rows.sort_unstable();
    Cell {
        key,
        rows: rows.iter().map(|&(r, _)| r).collect(),
        deciders,
        decider_of_row: rows.iter().map(|&(_, d)| d).collect(),
    }
}

/// The cells of one swap pass each (the table's own cells), in key order.
fn pass_cells(table: &DyadTable, options: &MinimalGroupOptions) -> Result<Vec<Cell>, AnalysisError> {
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
            let key = CellKey { design: (*design).clone(), passes: Passes::Single, labels: *labels, m: *m };
            summarise_deciders(table, &key, rows, options).map(|summary| (key, summary))
        },
        |_| {},
    );
    groups
        .into_iter()
        .zip(summaries)
        .map(|((_, rows), summary)| {
            let (key, (deciders, decider_of_row)) = summary?;
            Ok(Cell { key, rows, deciders, decider_of_row })
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
                fix: format!(
                    "favouritism needs targets of both groups: use m from {} to half the society (a minority of one \
                     has no in-group target; experiment files are held to the same range) and check that no target \
                     rows are missing",
                    herd_design::MIN_MINORITY_SIZE
                ),
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

pub(super) fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

pub(super) fn seed_means_of(table: &DyadTable, cell: &Cell) -> Result<SeedMeans, AnalysisError> {
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
    Ok(SeedMeans { seeds: by_seed.keys().copied().collect(), values })
}

/// Runs `work(k)` for every k in `order` (a permutation of `0..len`) on all cores and returns the
/// results indexed by k; `finished(k)` runs on this thread as each completes. Each result
/// depends only on its k, so the output is the same for any number of threads.
pub(super) fn parallel_map<R: Send>(
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
pub(super) fn group_runs<K: Ord + Copy>(
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
    groups.sort_unstable_by_key(|g| g.0);
    groups
}
