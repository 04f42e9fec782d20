//! Seed-level cluster bootstrap: the resamples (drawn once per number of seeds, or replayed) and the
//! `bootstrap` table of seed-mean favouritism and minority − majority gap.

use std::collections::BTreeMap;

use herd_stats::{BootstrapResult, StatsError, bootstrap_replay, cluster_resamples};

use super::cells::{Cell, SeedMeans, mean};
use super::{BootstrapPlan, DyadTable, MinimalGroupOptions};
use crate::error::{AnalysisError, stats_context};
use crate::table::TableBuilder;

pub(super) const BOOTSTRAP_KINDS: &str = "ttitffffi";

/// Resamples of seed indices by number of seeds. Seeded plans use one stream for every cell and
/// fit, so equally many seeds give the same resamples: drawn once per count.
pub(super) struct Resamples<'o> {
    plan: &'o BootstrapPlan,
    drawn: BTreeMap<usize, Result<Vec<Vec<usize>>, StatsError>>,
}

impl<'o> Resamples<'o> {
    pub(super) fn new(plan: &'o BootstrapPlan) -> Self {
        Self { plan, drawn: BTreeMap::new() }
    }

    /// Draws the resamples of `n` seeds if the plan is seeded and they are not drawn yet.
    pub(super) fn prepare(&mut self, n: usize) {
        if let BootstrapPlan::Seeded { resamples, seed } = self.plan {
            self.drawn.entry(n).or_insert_with(|| cluster_resamples(n, *resamples, *seed));
        }
    }

    /// The resamples of `n` seeds (prepared before); `what` names the bootstrap for errors.
    pub(super) fn get(
        &self,
        n: usize,
        origin: &str,
        what: impl Fn() -> String,
    ) -> Result<&[Vec<usize>], AnalysisError> {
        match self.plan {
            BootstrapPlan::Seeded { .. } => match self.drawn.get(&n).expect("resamples prepared before use") {
                Ok(indices) => Ok(indices),
                Err(e) => Err(stats_context(origin, what)(e.clone())),
            },
            BootstrapPlan::Replay(indices) => match indices.iter().find(|r| r.len() != n) {
                Some(row) => Err(AnalysisError::InvalidValue {
                    origin: origin.to_owned(),
                    column: "seed".into(),
                    row: 0,
                    problem: format!("a replayed resample has {} seeds but the {} has {n}", row.len(), what()),
                    fix: "replay resamples drawn for this cell's number of seeds".into(),
                }),
                None => Ok(indices),
            },
        }
    }
}

/// The `bootstrap` rows of one cell: mean favouritism and mean minority − majority gap over seeds.
pub(super) fn bootstrap_rows(
    table: &DyadTable,
    design_columns: &[&str],
    cell: &Cell,
    means: &SeedMeans,
    options: &MinimalGroupOptions,
    resamples: &mut Resamples<'_>,
    out: &mut TableBuilder,
) -> Result<(), AnalysisError> {
    let n = means.seeds.len();
    resamples.prepare(n);
    for (quantity, values) in [("favouritism", &means.values[0][0]), ("minority_minus_majority", &means.values[0][3])] {
        let context = || format!("bootstrap of {quantity} in {}", cell.key.describe());
        let statistic = |idx: &[usize]| idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64;
        let indices =
            resamples.get(n, &table.origin, || format!("bootstrap of {quantity} in {}", cell.key.describe()))?;
        let result: BootstrapResult =
            bootstrap_replay(n, indices, statistic).map_err(stats_context(&table.origin, context))?;
        let se = result.standard_error().map_err(stats_context(&table.origin, context))?;
        let (low, high) =
            result.percentile_interval(options.confidence).map_err(stats_context(&table.origin, context))?;
        let mut row = cell.key.row_start(design_columns);
        row.extend([
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
