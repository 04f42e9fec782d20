//! What each decider did, for readers that show deciders rather than seeds (the report's
//! distributions and seed-level bars): the paper's per-decider favouritism, excess share and
//! all-zero out-group allocation, one value per decider of every cell. The analyses compute the same
//! quantities per cell with the table's checks (`cells.rs`); this view assumes a table that passed them.

use std::collections::BTreeMap;

use super::{DesignKey, DyadTable, Labels};

/// One decider's allocation, summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct DeciderOutcome {
    pub design: DesignKey,
    pub labels: Labels,
    pub m: u32,
    pub seed: i64,
    pub decider: i64,
    pub minority: bool,
    /// Mean points per in-group target minus mean points per out-group target.
    pub favouritism: f64,
    /// Share of the points given to the in-group minus its share of the targets.
    pub excess_share: f64,
    /// Every out-group target got 0 points.
    pub extreme: bool,
}

/// Every decider of `table` with targets of both groups, in (design, labels, m, seed, decider) order.
pub fn decider_outcomes(table: &DyadTable) -> Vec<DeciderOutcome> {
    #[derive(Default)]
    struct Sums {
        in_sum: f64,
        n_in: usize,
        out_sum: f64,
        n_out: usize,
        out_all_zero: bool,
        minority: bool,
    }
    let mut sums: BTreeMap<(DesignKey, Labels, u32, i64, i64), Sums> = BTreeMap::new();
    for d in &table.rows {
        let e = sums.entry((d.design.clone(), d.labels, d.m, d.seed, d.decider)).or_insert_with(|| Sums {
            out_all_zero: true,
            minority: d.minority_decider,
            ..Sums::default()
        });
        if d.same_group {
            e.in_sum += d.points;
            e.n_in += 1;
        } else {
            e.out_sum += d.points;
            e.n_out += 1;
            e.out_all_zero &= d.points == 0.0;
        }
    }
    sums.into_iter()
        .filter(|(_, s)| s.n_in > 0 && s.n_out > 0)
        .map(|((design, labels, m, seed, decider), s)| {
            let total = s.in_sum + s.out_sum;
            let in_share = if total > 0.0 { s.in_sum / total } else { 0.0 };
            DeciderOutcome {
                design,
                labels,
                m,
                seed,
                decider,
                minority: s.minority,
                favouritism: s.in_sum / s.n_in as f64 - s.out_sum / s.n_out as f64,
                excess_share: in_share - s.n_in as f64 / (s.n_in + s.n_out) as f64,
                extreme: s.out_all_zero,
            }
        })
        .collect()
}
