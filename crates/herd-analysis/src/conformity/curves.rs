//! The `curves` and `auc` tables' pieces: a curve's key and level, its AUC (trapezoid over N / N range) and its saturation N.

use std::collections::BTreeMap;

use herd_stats::trapezoid;

use super::{ConformityTable, ConformityTrial, PWrong, mean};
use crate::table::Value;

/// (model, task, family, level)
pub(super) type CurveKey = (String, String, String, String);

/// The leading values of a `curves` or `auc` row: model, task, family, level and measure.
pub(super) fn curve_row(key: &CurveKey, measure: &str) -> Vec<Value> {
    [key.0.as_str(), key.1.as_str(), key.2.as_str(), key.3.as_str(), measure].map(Value::from).into()
}

pub(super) fn curve_level(t: &ConformityTrial) -> String {
    match (t.family.as_str(), t.level.is_empty(), t.difficulty_level) {
        ("difficulty", true, Some(d)) => d.to_string(),
        _ => t.level.clone(),
    }
}

/// Each unit's AUC (trapezoid of mean p_wrong over N, divided by the N range) for one model, task,
/// family and level (a level as the `auc` table names it, [`curve_level`]); units by trial index, or
/// by paraphrase when `by_paraphrase`. The unit AUCs the headlines' paired contrasts compare and the
/// figures' intervals over trial indices rest on.
#[allow(clippy::too_many_arguments)]
pub fn unit_aucs(
    trials: &ConformityTable,
    measure: PWrong,
    model: &str,
    task: &str,
    family: &str,
    level: &str,
    by_paraphrase: bool,
) -> BTreeMap<String, f64> {
    // The level compared without building each trial's `curve_level` (only a difficulty level needs it).
    let at_level = |t: &ConformityTrial| t.level == level || (t.level.is_empty() && curve_level(t) == level);
    let mut curves: BTreeMap<String, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for t in trials.rows.iter().filter(|t| t.model == model && t.task == task && t.family == family && at_level(t)) {
        let Some(p) = t.p_wrong(measure) else { continue };
        let unit = if by_paraphrase { t.paraphrase.clone().unwrap_or_default() } else { t.seed.to_string() };
        curves.entry(unit).or_default().entry(t.n).or_default().push(p);
    }
    curves.into_iter().filter_map(|(unit, curve)| curve_auc(&curve).map(|a| (unit, a))).collect()
}

/// Mean per N and the AUC of those means ([`auc`]).
pub(super) fn curve_auc(points: &BTreeMap<u32, Vec<f64>>) -> Option<f64> {
    auc(points.iter().map(|(&n, v)| (n, mean(v))))
}

/// The paper's AUC of a p_wrong(N) curve given as (N, p_wrong) in increasing N: the trapezoid over N
/// divided by the N range, so it lies in [0, 1]. `None` for fewer than two N. The one AUC of herd:
/// the `auc` table's curves, and the unit curves the report's paired contrasts compare.
pub fn auc(curve: impl IntoIterator<Item = (u32, f64)>) -> Option<f64> {
    let (ns, values): (Vec<f64>, Vec<f64>) = curve.into_iter().map(|(n, p)| (f64::from(n), p)).unzip();
    if ns.len() < 2 {
        return None;
    }
    let range = ns[ns.len() - 1] - ns[0];
    trapezoid(&values, &ns).ok().map(|a| a / range)
}

/// The first N whose rise from the curve's own baseline (its first N, normally N = 0) reaches 90% of
/// the rise at the largest N (the paper's "saturate around N ∼ 3–4"); `None` for a curve that does
/// not rise from its first N to its last, where saturation has no meaning. Measured from the
/// baseline, not from zero: a model at p_wrong 0.58 alone would otherwise "saturate at N = 0".
pub(super) fn saturation_n(points: &BTreeMap<u32, Vec<f64>>) -> Option<u32> {
    let means: Vec<(u32, f64)> = points.iter().map(|(&n, v)| (n, mean(v))).collect();
    let (&(_, first), &(_, last)) = (means.first()?, means.last()?);
    if last.partial_cmp(&first) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let threshold = first + SATURATION_SHARE * (last - first);
    means.iter().find(|&&(_, m)| m >= threshold).map(|&(n, _)| n)
}

/// Share of the rise at the largest N that counts as saturated.
const SATURATION_SHARE: f64 = 0.9;
