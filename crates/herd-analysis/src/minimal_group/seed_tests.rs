//! The `seed_tests` table: one-sample Wilcoxon signed-rank tests of seed means against zero, with
//! Benjamini–Hochberg q-values over two families.

use std::collections::{BTreeMap, BTreeSet};

use herd_stats::{WilcoxonOptions, benjamini_hochberg, percentile, wilcoxon_one_sample};

use super::cells::{Cell, SeedMeans, mean};
use super::{DECIDER_SETS, DyadTable, MEASURES, MODEL, REASONING, SEED_TESTS_COLUMNS, design_values, schema};
use crate::error::{AnalysisError, stats_context, undefined_reason};
use crate::table::{ResultTable, TableBuilder, Value};

const SEED_TESTS_KINDS: &str = "titittiiiffffffft";

/// One test before the q-values.
struct Row {
    cell: usize,
    measure: usize,
    set: usize,
    n: usize,
    positive: usize,
    negative: usize,
    mean: f64,
    median: f64,
    statistic: f64,
    p: f64,
    rank_biserial: f64,
    /// Why the test is undefined (`every value equal`, `too few units`), where it is.
    note: Option<&'static str>,
}

/// The `seed_tests` table over `cells` (all of them, or the main ones only).
pub(super) fn seed_tests_table(
    table: &DyadTable,
    design_columns: &[&str],
    cells: &[&Cell],
    seed_means: &[&SeedMeans],
) -> Result<ResultTable, AnalysisError> {
    let mut rows = Vec::new();
    for (ci, (cell, means)) in cells.iter().zip(seed_means).enumerate() {
        for (measure, (measure_name, by_set)) in MEASURES.iter().zip(&means.values).enumerate() {
            for (set, (set_name, values)) in DECIDER_SETS.iter().zip(by_set).enumerate() {
                let context =
                    || format!("Wilcoxon test of {measure_name} ({set_name} deciders) in {}", cell.key.describe());
                let median = percentile(values, 50.0).map_err(stats_context(&table.origin, context))?;
                // scipy's defaults: method "auto", zero_method "wilcox", no continuity correction.
                let (statistic, p, rank_biserial, note) = match wilcoxon_one_sample(values, &WilcoxonOptions::default())
                {
                    Ok(w) => (w.statistic, w.p_value, w.rank_biserial, None),
                    // Every seed mean zero (the test is undefined: scipy gives NaN), or too few seeds.
                    Err(e) => match undefined_reason(&e) {
                        Some(note) => (f64::NAN, f64::NAN, f64::NAN, Some(note)),
                        None => return Err(stats_context(&table.origin, context)(e)),
                    },
                };
                rows.push(Row {
                    cell: ci,
                    measure,
                    set,
                    n: values.len(),
                    positive: values.iter().filter(|&&v| v > 0.0).count(),
                    negative: values.iter().filter(|&&v| v < 0.0).count(),
                    mean: mean(values),
                    median,
                    statistic,
                    p,
                    rank_biserial,
                    note,
                });
            }
        }
    }

    // The paper's family: per measure, label arm, reasoning mode (and instrument, and pass role),
    // the minority- and majority-decider blocks of every model and minority size. At m = half the
    // society the blocks are the groups as the design labels them (`minority_decider`).
    let paper_family = |row: &Row| {
        let key = &cells[row.cell].key;
        (1..=2).contains(&row.set).then(|| {
            let design = &key.design.0;
            (
                row.measure,
                key.labels,
                design[REASONING].clone(),
                design[2].clone(),
                key.pass_family().map(str::to_owned),
            )
        })
    };
    // Every cell of one measure and decider set (and pass role).
    let all_cells = |row: &Row| Some((row.measure, row.set, cells[row.cell].key.pass_family().map(str::to_owned)));
    let q_paper = bh_by_family(table, &rows, paper_family)?;
    let q_all = bh_by_family(table, &rows, all_cells)?;

    let defaults = default_reasoning(table);
    let mut out = TableBuilder::new("seed_tests", &schema(design_columns, &SEED_TESTS_COLUMNS, SEED_TESTS_KINDS));
    for ((row, q_paper), q_all) in rows.iter().zip(q_paper).zip(q_all) {
        let key = &cells[row.cell].key;
        let mut values = design_values(&key.design, design_columns);
        let default = match (&defaults, &key.design.0[REASONING]) {
            (None, _) => Some(1),
            (Some(defaults), reasoning) => defaults
                .get(&key.design.0[MODEL])
                .and_then(|d| d.as_ref())
                .map(|d| i64::from(Some(d) == reasoning.as_ref())),
        };
        values.extend([
            key.passes.as_str().into(),
            default.map_or(Value::Text(None), Value::from),
            key.labels.as_str().into(),
            key.m.into(),
            DECIDER_SETS[row.set].into(),
            MEASURES[row.measure].into(),
            row.n.into(),
            row.positive.into(),
            row.negative.into(),
            row.mean.into(),
            row.median.into(),
            row.statistic.into(),
            row.p.into(),
            row.rank_biserial.into(),
            q_paper.into(),
            q_all.into(),
            row.note.into(),
        ]);
        out.push(values);
    }
    Ok(out.finish())
}

/// Benjamini–Hochberg q over the rows sharing a family key (rows with `None` and undefined p get
/// NaN, i.e. null).
fn bh_by_family<K: Ord + std::fmt::Debug>(
    table: &DyadTable,
    rows: &[Row],
    family: impl Fn(&Row) -> Option<K>,
) -> Result<Vec<f64>, AnalysisError> {
    let mut families: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        if let Some(key) = family(row).filter(|_| row.p.is_finite()) {
            families.entry(key).or_default().push(i);
        }
    }
    let mut q = vec![f64::NAN; rows.len()];
    for (key, members) in families {
        let ps: Vec<f64> = members.iter().map(|&i| rows[i].p).collect();
        let adjusted = benjamini_hochberg(&ps)
            .map_err(stats_context(&table.origin, || format!("Benjamini–Hochberg over the family {key:?}")))?;
        for (&i, qv) in members.iter().zip(adjusted) {
            q[i] = qv;
        }
    }
    Ok(q)
}

/// Each model's default reasoning mode (`None` without a `reasoning` column): thinking `on` where
/// the model has it, else its only mode; undetermined (`None`) for several modes without `on`. The
/// paper's headline mode, shared by the `default_reasoning` column and the report's headline selection.
pub fn default_reasoning(table: &DyadTable) -> Option<BTreeMap<Option<String>, Option<String>>> {
    if !table.design_columns().contains(&"reasoning") {
        return None;
    }
    let mut levels: BTreeMap<&Option<String>, BTreeSet<&str>> = BTreeMap::new();
    let mut last = None;
    for d in &table.rows {
        let key = (&d.design.0[MODEL], &d.design.0[REASONING]);
        if last == Some(key) {
            continue;
        }
        last = Some(key);
        levels.entry(key.0).or_default().extend(key.1.as_deref());
    }
    Some(
        levels
            .into_iter()
            .map(|(model, modes)| {
                let default = if modes.contains("on") {
                    Some("on".to_owned())
                } else if modes.len() == 1 {
                    modes.first().map(|m| (*m).to_owned())
                } else {
                    None
                };
                (model.clone(), default)
            })
            .collect(),
    )
}
