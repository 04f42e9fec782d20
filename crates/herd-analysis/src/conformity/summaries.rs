//! Summaries of trials that the report's figures draw, computed here so that the report groups no
//! trials and computes no AUC: p_wrong(N) curves with t-interval bands under any grouping the figure
//! chooses, and the difficulty pool's images normalised as fig. 3b plots them.

use std::collections::BTreeMap;

use super::curves::curve_auc;
use super::{ConformityTrial, PWrong};
use crate::summary::mean_interval;

/// Mean p_wrong of the trials at one N, with its 95% t-interval over them (none for one trial).
#[derive(Debug, Clone, PartialEq)]
pub struct CurveMean {
    pub n: u32,
    pub mean: f64,
    pub interval: Option<(f64, f64)>,
    pub trials: usize,
}

/// p_wrong(N) of `trials` under `measure`, one curve per key `key_of` gives (trials where the
/// measure is undefined left out), points in increasing N.
pub fn curves_by_key<'a, K: Ord>(
    trials: impl IntoIterator<Item = &'a ConformityTrial>,
    measure: PWrong,
    key_of: impl Fn(&ConformityTrial) -> K,
) -> BTreeMap<K, Vec<CurveMean>> {
    let mut grouped: BTreeMap<K, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for t in trials {
        if let Some(p) = t.p_wrong(measure) {
            grouped.entry(key_of(t)).or_default().entry(t.n).or_default().push(p);
        }
    }
    grouped
        .into_iter()
        .map(|(key, points)| {
            let curve = points
                .into_iter()
                .map(|(n, values)| {
                    let (mean, interval) = mean_interval(&values);
                    CurveMean { n, mean, interval, trials: values.len() }
                })
                .collect();
            (key, curve)
        })
        .collect()
}

/// One difficulty-pool image as fig. 3b plots it: its conformity (AUC over N), difficulty index and
/// performance (logit of the correct answer at N = 0), each min-max normalised within its model and
/// task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormalisedImage {
    pub conformity: f64,
    pub difficulty: f64,
    pub performance: f64,
}

/// The difficulty family's images per (model, task), normalised within each. An image without trials
/// at N = 0 and a second N is left out, and so is a model × task whose images do not vary in one of
/// the three (it has no scale).
pub fn normalised_images(
    trials: &[ConformityTrial],
    measure: PWrong,
) -> BTreeMap<(String, String), Vec<NormalisedImage>> {
    // (model, task) → image → (N → p_wrong, difficulty index, correct logit at N = 0)
    type Image = (BTreeMap<u32, Vec<f64>>, Vec<f64>, Vec<f64>);
    let mut groups: BTreeMap<(&str, &str), BTreeMap<&str, Image>> = BTreeMap::new();
    for t in trials.iter().filter(|t| t.family == "difficulty") {
        let (Some(image), Some(index), Some(p)) = (t.image_id.as_deref(), t.difficulty_index, t.p_wrong(measure))
        else {
            continue;
        };
        let entry = groups.entry((t.model.as_str(), t.task.as_str())).or_default().entry(image).or_default();
        entry.0.entry(t.n).or_default().push(p);
        entry.1.push(index);
        if t.n == 0 {
            let correct = if t.correct_label.as_deref() == Some("A") { t.logit_a } else { t.logit_b };
            entry.2.extend(correct);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut out = BTreeMap::new();
    for ((model, task), images) in groups {
        let (mut conformity, mut difficulty, mut performance) = (Vec::new(), Vec::new(), Vec::new());
        for (curve, indices, logits) in images.values() {
            if curve.len() < 2 || logits.is_empty() {
                continue;
            }
            let Some(area) = curve_auc(curve) else { continue };
            conformity.push(area);
            difficulty.push(mean(indices));
            performance.push(mean(logits));
        }
        if !(min_max(&mut conformity) && min_max(&mut difficulty) && min_max(&mut performance)) {
            continue;
        }
        let normalised = (0..conformity.len())
            .map(|i| NormalisedImage {
                conformity: conformity[i],
                difficulty: difficulty[i],
                performance: performance[i],
            })
            .collect();
        out.insert((model.to_owned(), task.to_owned()), normalised);
    }
    out
}

/// Min-max normalisation in place; false when the values do not vary.
pub(super) fn min_max(values: &mut [f64]) -> bool {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if hi <= lo {
        return false;
    }
    for v in values.iter_mut() {
        *v = (*v - lo) / (hi - lo);
    }
    true
}
