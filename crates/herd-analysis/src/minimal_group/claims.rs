//! The paper's per-model claims on the society as the unit (sections 2.2–2.4, S5, S6): per model
//! (and reasoning mode), one value per society (m, seed) from the society's deciders (those of both
//! swap passes where a society was run twice, each counted once per pass), then a two-sided
//! one-sample Wilcoxon signed-rank test of the values against zero (scipy's defaults) and the 95%
//! t-interval of their mean (t on societies − 1 df).
//!
//! `model_claims` takes the dyad rows `take` selects (the report's headline selection: the base
//! instrument, each model's default reasoning mode, both passes) and writes one row per model,
//! reasoning mode, label condition and `quantity`:
//! - `favouritism`: mean favouritism of all deciders, every m;
//! - `minority_gap`: minority − majority deciders' mean favouritism, over the societies with unequal
//!   groups (2m < society size; the paper's +2.38 to +6.84);
//! - `excess_share_gap`: the same gap in excess share (the paper's size-robust confirmation);
//! - `equal_groups_gap`: minority − majority favouritism at m = half the society (the paper's m = 10,
//!   where "the gap closes"); the minority is then one of two equal groups;
//! - `prevalence`: share of deciders with favouritism > 0, minus 0.5: minority deciders of the
//!   unequal societies with visible labels, all deciders of every society with hidden labels;
//! - `majority_favouritism_smallest_m`, `majority_excess_share_smallest_m`: majority deciders'
//!   mean favouritism and excess share at the smallest m (the paper's R1-Distill-Llama-8B exception
//!   at m = 3: −1.45 points/target, −0.037 excess share);
//! - `majority_excess_share`: majority deciders' mean excess share over the societies with unequal
//!   groups (the paper's "majority deciders allocated close to proportionally": +0.01, S6);
//! - for a model with both reasoning modes `on` and `off` among the rows taken (reasoning =
//!   `on_minus_off`, visible labels): `minority_gap`, per society the `on` gap − the `off` gap
//!   (the paper's +4.08 → +0.54), and `majority_excess_share`, per society the `on` − the `off`
//!   majority excess share (S6: +0.01 vs +0.15); the modes of one society are paired, as herd runs
//!   both on the same society.
//!
//! Columns: the `model` and `reasoning` design columns present, then [`MODEL_CLAIMS_COLUMNS`];
//! `m` lists the minority sizes a row pools (`3,5`).

use std::collections::{BTreeMap, BTreeSet};

// The one t-quantile, herd-stats' (golden against scipy's `t.ppf`), re-exported for the crates above.
pub use herd_stats::students_t_quantile;
use herd_stats::{StatsError, WilcoxonOptions, wilcoxon_one_sample};

use super::{DesignKey, DyadTable, Labels, MODEL, REASONING};
use crate::error::{AnalysisError, stats_context, undefined_reason};
use crate::table::{ResultTable, TableBuilder, Value};

pub const MODEL_CLAIMS_COLUMNS: [&str; 11] = [
    "labels",
    "quantity",
    "m",
    "n_societies",
    "n_nonzero",
    "mean",
    "wilcoxon_statistic",
    "wilcoxon_p",
    "ci_low",
    "ci_high",
    "note",
];
const MODEL_CLAIMS_KINDS: &str = "tttiiffffft";

/// The reasoning value of the paired on − off rows.
pub const ON_MINUS_OFF: &str = "on_minus_off";

/// One decider in one pass.
#[derive(Debug, Clone)]
struct Decider {
    minority: bool,
    favouritism: f64,
    excess_share: f64,
}

/// A society: (m, seed).
type Society = (u32, i64);
type Societies = BTreeMap<Society, Vec<Decider>>;
/// (model, reasoning, labels).
type Group = (Option<String>, Option<String>, Labels);
/// One reasoning mode's unequal minority sizes, and per society its minority gap and its majority
/// deciders' excess share.
struct ModeValues {
    ms: Vec<u32>,
    gap: BTreeMap<Society, f64>,
    majority_share: BTreeMap<Society, f64>,
}

/// A Wilcoxon signed-rank test of society values against zero with the 95% t-interval of their mean.
#[derive(Debug, Clone, PartialEq)]
pub struct SocietyTest {
    pub n: usize,
    /// Values not (approximately) zero: the ones the signed-rank test ranks.
    pub nonzero: usize,
    pub mean: f64,
    /// `None` where every value is zero (the test is undefined) or there are none.
    pub statistic: Option<f64>,
    pub p: Option<f64>,
    /// `None` for fewer than two values.
    pub interval: Option<(f64, f64)>,
    /// Why the test is undefined (`every value equal`, `too few units`), where it is.
    pub note: Option<&'static str>,
}

/// The two-sided Wilcoxon signed-rank test of `values` against zero (scipy's defaults) and the 95%
/// t-interval of their mean.
pub fn society_test(values: &[f64]) -> Result<SocietyTest, StatsError> {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let nonzero = values.iter().filter(|v| !herd_stats::approx_equal(**v, 0.0)).count();
    let (statistic, p, note) = match wilcoxon_one_sample(values, &WilcoxonOptions::default()) {
        Ok(w) => (Some(w.statistic), Some(w.p_value), None),
        Err(e) => match undefined_reason(&e) {
            Some(note) => (None, None, Some(note)),
            None => return Err(e),
        },
    };
    let interval = (n >= 2).then(|| {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = students_t_quantile(0.975, (n - 1) as f64) * (var / n as f64).sqrt();
        (mean - half, mean + half)
    });
    Ok(SocietyTest { n, nonzero, mean, statistic, p, interval, note })
}

/// One society of a dyad table: its design (model, reasoning, instrument, pass), label condition,
/// minority size and seed.
pub type SocietyKey<'a> = (&'a DesignKey, Labels, u32, i64);

/// The number of agents in each society: every decider and every target its dyads name. A decider
/// whose allocation failed to parse still counts as a target of the others, so the count does not
/// fall with a parse failure. The one rule for a society's size (the claims' shares, the report's axis
/// titles).
pub fn society_sizes(dyads: &DyadTable) -> BTreeMap<SocietyKey<'_>, usize> {
    let mut agents: BTreeMap<SocietyKey<'_>, BTreeSet<i64>> = BTreeMap::new();
    for d in &dyads.rows {
        agents.entry((&d.design, d.labels, d.m, d.seed)).or_default().extend([d.decider, d.target]);
    }
    agents.into_iter().map(|(key, members)| (key, members.len())).collect()
}

/// The size of the table's first society ([`society_sizes`]); `None` for an empty table.
pub fn society_size(dyads: &DyadTable) -> Option<usize> {
    let first = dyads.rows.first()?;
    society_sizes(dyads).get(&(&first.design, first.labels, first.m, first.seed)).copied()
}

/// The taken rows' deciders per (model, reasoning, labels), society by society: the per-decider outcomes
/// of [`super::decider_outcomes`], whose order (design, then decider, within a society) each society keeps.
fn deciders(dyads: &DyadTable, take: &impl Fn(&DesignKey) -> bool) -> BTreeMap<Group, Societies> {
    let mut out: BTreeMap<Group, Societies> = BTreeMap::new();
    for o in super::decider_outcomes(dyads).into_iter().filter(|o| take(&o.design)) {
        let group = (o.design.0[MODEL].clone(), o.design.0[REASONING].clone(), o.labels);
        out.entry(group).or_default().entry((o.m, o.seed)).or_default().push(Decider {
            minority: o.minority,
            favouritism: o.favouritism,
            excess_share: o.excess_share,
        });
    }
    out
}

/// Mean of `value` over the chosen deciders of each society in `ms` (societies with none are left out).
fn society_means(
    societies: &Societies,
    ms: &[u32],
    choose: impl Fn(&Decider) -> bool,
    value: impl Fn(&Decider) -> f64,
) -> BTreeMap<Society, f64> {
    societies
        .iter()
        .filter(|(s, _)| ms.contains(&s.0))
        .filter_map(|(&s, ds)| {
            let chosen: Vec<f64> = ds.iter().filter(|d| choose(d)).map(&value).collect();
            (!chosen.is_empty()).then(|| (s, chosen.iter().sum::<f64>() / chosen.len() as f64))
        })
        .collect()
}

/// Per society in `ms`: minority − majority deciders' mean `value`.
fn society_gaps(societies: &Societies, ms: &[u32], value: impl Fn(&Decider) -> f64) -> BTreeMap<Society, f64> {
    let minority = society_means(societies, ms, |d| d.minority, &value);
    let majority = society_means(societies, ms, |d| !d.minority, &value);
    minority.iter().filter_map(|(s, v)| majority.get(s).map(|w| (*s, v - w))).collect()
}

fn favouritism(d: &Decider) -> f64 {
    d.favouritism
}

fn excess_share(d: &Decider) -> f64 {
    d.excess_share
}

/// The per-model claims of the rows `take` selects (see the module docs).
pub fn model_claims(dyads: &DyadTable, take: impl Fn(&DesignKey) -> bool) -> Result<ResultTable, AnalysisError> {
    let present = dyads.design_columns();
    let design: Vec<&str> = ["model", "reasoning"].into_iter().filter(|c| present.contains(c)).collect();
    let schema: Vec<(&str, char)> = design
        .iter()
        .map(|&c| (c, 't'))
        .chain(MODEL_CLAIMS_COLUMNS.iter().copied().zip(MODEL_CLAIMS_KINDS.chars()))
        .collect();
    let mut table = TableBuilder::new("model_claims", &schema);
    let size = society_size(dyads).unwrap_or(0);
    let groups = deciders(dyads, &take);
    let mut push = |group: &Group, quantity: &str, ms: &[u32], values: &BTreeMap<Society, f64>| {
        if values.is_empty() {
            return Ok(());
        }
        let v: Vec<f64> = values.values().copied().collect();
        let what = || format!("Wilcoxon test of {quantity} over the societies of {:?}", group.0);
        let test = society_test(&v).map_err(stats_context(&dyads.origin, what))?;
        let mut row: Vec<Value> = Vec::new();
        if design.contains(&"model") {
            row.push(group.0.clone().into());
        }
        if design.contains(&"reasoning") {
            row.push(group.1.clone().into());
        }
        let (low, high) = test.interval.unwrap_or((f64::NAN, f64::NAN));
        row.extend([
            group.2.as_str().into(),
            quantity.into(),
            ms.iter().map(u32::to_string).collect::<Vec<_>>().join(",").into(),
            test.n.into(),
            test.nonzero.into(),
            test.mean.into(),
            test.statistic.into(),
            test.p.into(),
            low.into(),
            high.into(),
            test.note.into(),
        ]);
        table.push(row);
        Ok::<(), AnalysisError>(())
    };
    // model → reasoning mode → visible societies with unequal groups and their gaps
    let mut modes_of: BTreeMap<Option<String>, BTreeMap<Option<String>, ModeValues>> = BTreeMap::new();
    for (group, societies) in &groups {
        let all: Vec<u32> = societies.keys().map(|s| s.0).collect::<BTreeSet<_>>().into_iter().collect();
        let unequal: Vec<u32> = all.iter().copied().filter(|&m| 2 * (m as usize) < size).collect();
        let equal: Vec<u32> = all.iter().copied().filter(|&m| 2 * (m as usize) == size).collect();
        push(group, "favouritism", &all, &society_means(societies, &all, |_| true, favouritism))?;
        let share_above = |d: &Decider| f64::from(u8::from(d.favouritism > 0.0));
        if group.2 == Labels::Visible {
            let gap = society_gaps(societies, &unequal, favouritism);
            push(group, "minority_gap", &unequal, &gap)?;
            push(group, "excess_share_gap", &unequal, &society_gaps(societies, &unequal, excess_share))?;
            push(group, "equal_groups_gap", &equal, &society_gaps(societies, &equal, favouritism))?;
            let shares = society_means(societies, &unequal, |d| d.minority, share_above);
            push(group, "prevalence", &unequal, &shares.into_iter().map(|(s, v)| (s, v - 0.5)).collect())?;
            let smallest: Vec<u32> = unequal.first().copied().into_iter().collect();
            let majority = |value: fn(&Decider) -> f64| society_means(societies, &smallest, |d| !d.minority, value);
            push(group, "majority_favouritism_smallest_m", &smallest, &majority(favouritism))?;
            push(group, "majority_excess_share_smallest_m", &smallest, &majority(excess_share))?;
            let majority_share = society_means(societies, &unequal, |d| !d.minority, excess_share);
            push(group, "majority_excess_share", &unequal, &majority_share)?;
            modes_of
                .entry(group.0.clone())
                .or_default()
                .insert(group.1.clone(), ModeValues { ms: unequal, gap, majority_share });
        } else {
            let shares = society_means(societies, &all, |_| true, share_above);
            push(group, "prevalence", &all, &shares.into_iter().map(|(s, v)| (s, v - 0.5)).collect())?;
        }
    }
    for (model, modes) in modes_of {
        let (Some(on), Some(off)) = (modes.get(&Some("on".to_owned())), modes.get(&Some("off".to_owned()))) else {
            continue;
        };
        let ms: Vec<u32> = on.ms.iter().copied().filter(|m| off.ms.contains(m)).collect();
        let paired = |on: &BTreeMap<Society, f64>, off: &BTreeMap<Society, f64>| -> BTreeMap<Society, f64> {
            on.iter().filter_map(|(s, a)| off.get(s).map(|b| (*s, a - b))).collect()
        };
        let group = (model, Some(ON_MINUS_OFF.into()), Labels::Visible);
        push(&group, "minority_gap", &ms, &paired(&on.gap, &off.gap))?;
        push(&group, "majority_excess_share", &ms, &paired(&on.majority_share, &off.majority_share))?;
    }
    Ok(table.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_and_intervals_match_scipy() {
        // scipy.stats.t.ppf(0.975, 5) = 2.5705818366147395; t.ppf(0.975, 29) = 2.045229642132703.
        assert!((students_t_quantile(0.975, 5.0) - 2.570_581_836_614_739_5).abs() < 1e-9);
        assert!((students_t_quantile(0.975, 29.0) - 2.045_229_642_132_703).abs() < 1e-9);
        let t = society_test(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!((t.n, t.nonzero, t.mean), (6, 6, 3.5));
        // Exact: every value positive, 2/2⁶.
        assert_eq!(t.p, Some(0.03125));
        let half = 2.570_581_836_614_739_5 * (3.5_f64 / 6.0).sqrt();
        let (lo, hi) = t.interval.unwrap();
        assert!((lo - (3.5 - half)).abs() < 1e-9 && (hi - (3.5 + half)).abs() < 1e-9);
        // All zeros: no test; one value: no interval.
        let zeros = society_test(&[0.0, 0.0, 0.0]).unwrap();
        assert_eq!((zeros.p, zeros.nonzero), (None, 0));
        assert_eq!(society_test(&[1.0]).unwrap().interval, None);
    }

    /// A society of 4 whose first decider named only two of the other three: counting that decider's
    /// dyads said 3 agents; every member named by any dyad says 4.
    #[test]
    fn a_society_is_as_large_as_the_agents_its_dyads_name() {
        let dyad = |decider: i64, target: i64| {
            let cell = (DesignKey::default(), Labels::Visible, 2);
            super::super::Dyad::from_membership(cell, 1, (decider, target), |agent| agent < 2, 50.0)
        };
        let mut rows = vec![dyad(0, 1), dyad(0, 2)];
        for decider in 1..4 {
            rows.extend((0..4).filter(|&t| t != decider).map(|t| dyad(decider, t)));
        }
        let table = DyadTable::new("t", rows).unwrap();
        assert_eq!(society_size(&table), Some(4));
        assert_eq!(society_sizes(&table).into_values().collect::<Vec<_>>(), [4]);
    }
}
