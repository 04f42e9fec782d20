//! The `robustness` table: prevalence, extreme allocations, position effect (each with uniform
//! fills included and excluded) and the swap-pass difference.

use std::borrow::Cow;
use std::collections::BTreeMap;

use herd_stats::{StatsError, WilcoxonOptions, sample_std, wilcoxon_one_sample};

use super::cells::{Cell, CellKey, DeciderSummary, Passes, mean};
use super::gee::{ClusterBy, Extra, FitJob, FitPlan, FitResults};
use super::{DyadTable, POSITION_FORMULA, ROBUSTNESS_COLUMNS, SWAP_PASS, design_values, schema};
use crate::error::{AnalysisError, stats_context};
use crate::table::{ResultTable, TableBuilder, Value};

const ROBUSTNESS_KINDS: &str = "ttitttifffft";

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
pub(super) fn plan_position_fits<'a>(
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
                            bootstrap: false,
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

pub(super) fn robustness_table(
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
                    cell.key.passes.as_str().into(),
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
                    .fit
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
    for cell in cells.iter().filter(|c| c.key.passes == Passes::PerPass) {
        let mut key = cell.key.clone();
        key.design.0[SWAP_PASS] = Some("difference".into());
        key.passes = Passes::Both;
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
                key.passes.as_str().into(),
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
