//! The `robustness` table: one row per cell (design columns, `passes`, `labels`, `m`), fill
//! setting (`fills`: uniform fills `included`, and `excluded` when the table has `filled`) and
//! `check`. Columns not listed for a check are null.
//!
//! | `check` | rows | `n` | `estimate` | `se`, `statistic`, `p` |
//! |---|---|---|---|---|
//! | `prevalence` | every cell; `deciders` all, minority, majority | deciders | share with favouritism > 0 | |
//! | `extreme_allocations` | as prevalence | deciders | share giving every out-group target 0 | |
//! | `position_effect` | every cell, with `target_position` | dyads | GEE coefficient of `target_position` | robust SE, z, p; `formula` |
//! | `position_in_group`, `position_out_group` | as position_effect | dyads | mean presented position of in- (out-) group targets | |
//! | `position_balance` | as position_effect | seeds | mean over seeds of (in-group − out-group mean position) | SE (ddof 1), Wilcoxon W, p |
//! | `token_receipt` | main visible cells, with `target_group`; one row per name in `target_group` | dyads | mean points per target received by targets of that name | |
//! | `token_receipt_sd` | as token_receipt, one row | names | SD (ddof 1) of the names' mean receipts | |
//! | `swap_pass_difference` | cells with two passes, `swap_pass` = `difference` | seeds | mean over seeds of second − first pass favouritism | SE (ddof 1), Wilcoxon W, p |
//!
//! Token receipt is the paper's nonce-label check ("token-receipt standard deviations were at most
//! 0.24 points/target"): a name with a valence of its own would draw more (or fewer) points
//! whichever group carries it. It is computed per cell, as the swap-pass difference the paper
//! reports beside it, so "at most" is the largest over cells, and only in main cells with visible
//! labels: a hidden arm shows no name, and a single pass of a swapped design ties each name to one
//! group in a society, so its receipt would mix the name with group membership and favouritism;
//! pooling both passes gives every name both roles in every society (docs/deviations.md). The SD
//! uses ddof 1, as pandas' `std`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use herd_stats::{WilcoxonOptions, sample_std, wilcoxon_one_sample};

use super::cells::{Cell, CellKey, DeciderSummary, Passes, mean};
use super::gee::{ClusterBy, Estimator, Extra, FitJob, FitPlan, FitResults};
use super::{DyadTable, Labels, POSITION_FORMULA, ROBUSTNESS_COLUMNS, SWAP_PASS, schema};
use crate::error::{AnalysisError, TOO_FEW_UNITS, stats_context, undefined_reason};
use crate::table::{ResultTable, TableBuilder, Value};

const ROBUSTNESS_KINDS: &str = "ttittttifffftt";

/// One row's values after the cell, fill and check columns.
struct Measure<'a> {
    deciders: &'a str,
    target_group: Option<&'a str>,
    n: usize,
    estimate: f64,
    se: f64,
    statistic: f64,
    p: f64,
    formula: Option<&'a str>,
    /// Why the test is undefined (`every value equal`, `too few units`), where a test is.
    note: Option<&'static str>,
}

impl<'a> Measure<'a> {
    /// A descriptive row over all deciders: an estimate and its n, no test.
    fn describe(n: usize, estimate: f64) -> Self {
        let nan = f64::NAN;
        Self {
            deciders: "all",
            target_group: None,
            n,
            estimate,
            se: nan,
            statistic: nan,
            p: nan,
            formula: None,
            note: None,
        }
    }

    /// The `robustness` row of this measure in cell `key`, fill setting `fill` and check `check`.
    fn row(&self, key: &CellKey, design_columns: &[&str], fill: &str, check: &str) -> Vec<Value> {
        let mut row = key.row_start(design_columns);
        row.extend([
            fill.into(),
            check.into(),
            self.deciders.into(),
            Value::Text(self.target_group.map(str::to_owned)),
            self.n.into(),
            self.estimate.into(),
            self.se.into(),
            self.statistic.into(),
            self.p.into(),
            Value::Text(self.formula.map(str::to_owned)),
            self.note.into(),
        ]);
        row
    }
}

fn fill_settings(table: &DyadTable) -> &'static [&'static str] {
    if table.has_filled() { &["included", "excluded"] } else { &["included"] }
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
                            estimator: Estimator::Exchangeable,
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
    let mut out = TableBuilder::new("robustness", &schema(design_columns, &ROBUSTNESS_COLUMNS, ROBUSTNESS_KINDS));
    let fills = fill_settings(table);
    for (cell, jobs) in cells.iter().zip(position_jobs) {
        for (fi, &fill) in fills.iter().enumerate() {
            let keep = |d: &DeciderSummary| fill == "included" || !d.filled;
            let mut push = |check: &str, m: Measure<'_>| out.push(m.row(&cell.key, design_columns, fill, check));
            for (set, filter) in [
                ("all", (|_: &DeciderSummary| true) as fn(&DeciderSummary) -> bool),
                ("minority", |d: &DeciderSummary| d.minority),
                ("majority", |d: &DeciderSummary| !d.minority),
            ] {
                let chosen: Vec<&DeciderSummary> = cell.deciders.iter().filter(|d| keep(d) && filter(d)).collect();
                let n = chosen.len();
                let share = |f: fn(&DeciderSummary) -> bool| {
                    if n == 0 { f64::NAN } else { chosen.iter().filter(|d| f(d)).count() as f64 / n as f64 }
                };
                push("prevalence", Measure { deciders: set, ..Measure::describe(n, share(|d| d.favouritism > 0.0)) });
                push("extreme_allocations", Measure { deciders: set, ..Measure::describe(n, share(|d| d.extreme)) });
            }
            if let Some(&(job, n_rows)) = jobs.get(fi) {
                let c = fits
                    .get(job)?
                    .fit
                    .coefficient("target_position")
                    .expect("the position formula has a target_position term");
                push(
                    "position_effect",
                    Measure {
                        se: c.robust_se,
                        statistic: c.robust_z,
                        p: c.robust_p,
                        formula: Some(POSITION_FORMULA),
                        ..Measure::describe(n_rows, c.estimate)
                    },
                );
            }
            let rows: Vec<usize> = cell
                .rows
                .iter()
                .zip(&cell.decider_of_row)
                .filter(|&(_, &d)| keep(&cell.deciders[d]))
                .map(|(&i, _)| i)
                .collect();
            if table.has_target_position() {
                let balance = position_balance(table, &rows);
                push("position_in_group", Measure::describe(balance.n_in, balance.mean_in));
                push("position_out_group", Measure::describe(balance.n_out, balance.mean_out));
                let context = || format!("position balance in {} (fills {fill})", cell.key.describe());
                let (n, estimate, se, statistic, p, note) = seed_level_test(table, &balance.seed_differences, context)?;
                push("position_balance", Measure { se, statistic, p, note, ..Measure::describe(n, estimate) });
            }
            if table.has_target_group() && cell.key.passes.is_main() && cell.key.labels == Labels::Visible {
                let receipts = token_receipts(table, &rows);
                for (name, &(sum, n)) in &receipts {
                    push("token_receipt", Measure { target_group: Some(name), ..Measure::describe(n, sum / n as f64) });
                }
                let means: Vec<f64> = receipts.values().map(|&(sum, n)| sum / n as f64).collect();
                // Undefined (null) with fewer than two names, as pandas' std.
                let sd = if means.len() >= 2 {
                    sample_std(&means).map_err(stats_context(&table.origin, || {
                        format!("token receipt in {} (fills {fill})", cell.key.describe())
                    }))?
                } else {
                    f64::NAN
                };
                push("token_receipt_sd", Measure::describe(means.len(), sd));
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
            let differences: Vec<f64> = first.iter().filter_map(|(seed, a)| second.get(seed).map(|b| b - a)).collect();
            if differences.is_empty() {
                return Err(AnalysisError::EmptyCell {
                    origin: table.origin.clone(),
                    cell: key.describe(),
                    what: "seed run in both swap passes".into(),
                    fix: "the swap-pass difference pairs the passes by seed: run both passes of the same societies"
                        .into(),
                });
            }
            let context = || format!("swap-pass difference in {}", key.describe());
            let (n, estimate, se, statistic, p, note) = seed_level_test(table, &differences, context)?;
            let m = Measure { se, statistic, p, note, ..Measure::describe(n, estimate) };
            out.push(m.row(&key, design_columns, fill, "swap_pass_difference"));
        }
    }
    Ok(())
}

/// Seed-level summary of per-seed values, as the swap-pass difference: (n seeds, mean, SE with
/// ddof 1, Wilcoxon signed-rank W and p with scipy's defaults, the reason the test is undefined);
/// undefined parts are NaN (nulls in the table): all with no seed, the SE with one, the test when
/// every value is zero (`every value equal`) or there are too few seeds (`too few units`).
type SeedLevelTest = (usize, f64, f64, f64, f64, Option<&'static str>);

fn seed_level_test(
    table: &DyadTable,
    values: &[f64],
    context: impl Fn() -> String,
) -> Result<SeedLevelTest, AnalysisError> {
    let n = values.len();
    if n == 0 {
        return Ok((0, f64::NAN, f64::NAN, f64::NAN, f64::NAN, Some(TOO_FEW_UNITS)));
    }
    let se = if n >= 2 {
        sample_std(values).map_err(stats_context(&table.origin, &context))? / (n as f64).sqrt()
    } else {
        f64::NAN
    };
    let (statistic, p, note) = match wilcoxon_one_sample(values, &WilcoxonOptions::default()) {
        Ok(w) => (w.statistic, w.p_value, None),
        Err(e) => match undefined_reason(&e) {
            Some(note) => (f64::NAN, f64::NAN, Some(note)),
            None => return Err(stats_context(&table.origin, &context)(e)),
        },
    };
    Ok((n, mean(values), se, statistic, p, note))
}

/// Presented positions of in- and out-group targets among `rows`.
struct PositionBalance {
    n_in: usize,
    mean_in: f64,
    n_out: usize,
    mean_out: f64,
    /// Per seed (ascending): mean position of its in-group targets − of its out-group targets.
    seed_differences: Vec<f64>,
}

/// Whether in- and out-group targets were presented at the same positions on average (the
/// paper: "In- and out-group targets had balanced presented positions"). The test is over
/// societies, not dyads: membership is drawn once per society, so its dyads share one draw and
/// a dyad-level Welch t would count them as independent evidence; each society's in − out
/// difference has mean zero when roster position is independent of group, as the design makes
/// it, so a signed-rank test of those differences checks the randomisation with the society as
/// the unit, as every other test here.
fn position_balance(table: &DyadTable, rows: &[usize]) -> PositionBalance {
    // seed → [(sum, n) of out-group, (sum, n) of in-group]
    let mut by_seed: BTreeMap<i64, [(f64, usize); 2]> = BTreeMap::new();
    for &i in rows {
        let d = &table.rows[i];
        let position = d.target_position.expect("position balance runs only on tables with target_position");
        let e = &mut by_seed.entry(d.seed).or_default()[usize::from(d.same_group)];
        e.0 += position;
        e.1 += 1;
    }
    let total = |k: usize| by_seed.values().fold((0.0, 0), |(s, n), v| (s + v[k].0, n + v[k].1));
    let ((sum_in, n_in), (sum_out, n_out)) = (total(1), total(0));
    let ratio = |sum: f64, n: usize| if n == 0 { f64::NAN } else { sum / n as f64 };
    PositionBalance {
        n_in,
        mean_in: ratio(sum_in, n_in),
        n_out,
        mean_out: ratio(sum_out, n_out),
        seed_differences: by_seed
            .values()
            .filter(|[out, inside]| out.1 > 0 && inside.1 > 0)
            .map(|[out, inside]| inside.0 / inside.1 as f64 - out.0 / out.1 as f64)
            .collect(),
    }
}

/// Points received per target group name among `rows`: name → (sum of points, dyads), names sorted.
fn token_receipts<'t>(table: &'t DyadTable, rows: &[usize]) -> BTreeMap<&'t str, (f64, usize)> {
    let mut out: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for &i in rows {
        let d = &table.rows[i];
        let name = d.target_group.as_deref().expect("token receipt runs only on tables with target_group");
        let e = out.entry(name).or_default();
        e.0 += d.points;
        e.1 += 1;
    }
    out
}
