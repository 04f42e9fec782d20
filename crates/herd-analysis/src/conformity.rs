//! The conformity paper's analyses over a `conformity_trials` table (one row per trial).
//!
//! Columns read (DESIGN.md's contract): `model`, `task`, `family`, `level` (empty for families
//! without levels), `n` (number of confederates N), `seed` (trial index, which pairs the levels of a
//! family), `p_wrong_full`, optionally `p_wrong_ab` (analysed as a second measure), `paraphrase`
//! (normative family), `difficulty_level`, `difficulty_index`, `image_id`, `correct_label`,
//! `logit_a`, `logit_b` (difficulty family).
//!
//! Tables:
//! - `curves`: mean p_wrong per model × task × family × level × N, with sd (ddof 1), SE and a
//!   normal 95% interval mean ± 1.959964·SE. In the difficulty family the level is the difficulty
//!   level.
//! - `auc`: trapezoid of the curve over N divided by the N range (the paper's AUC in [0, 1]).
//! - `deltas`: AUC differences between conditions, per pairing unit (paraphrase for normative,
//!   seed otherwise): public − private (one-tailed, greater), same − different, near − far, each
//!   source − `participants` (two-sided); one-sample t test of the unit differences and z = mean/SE
//!   with its normal p.
//! - `difficulty_spearman`: Spearman ρ between difficulty level and AUC per model × task.
//! - `difficulty_ols`: per task, pooled over models, OLS of min-max normalised (within model) AUC
//!   on normalised difficulty index and normalised performance (logit of the correct answer at
//!   N = 0), one point per occupied hexagon of fig. 3b: each image's AUC, difficulty and
//!   performance are min-max normalised within its model, the images of all models are binned on
//!   matplotlib's hexagon grid of (performance, difficulty) ([`DIFFICULTY_HEXBIN_GRIDSIZE`]
//!   columns), and a hexagon's point is the mean of its images (the paper's unit: S4's 97–129
//!   residual degrees of freedom per task are its occupied hexagons, not models × levels). Empty
//!   when the table lacks `difficulty_level`, `difficulty_index`, `image_id`, `correct_label`,
//!   `logit_a` or `logit_b`.
//!
//! Besides the tables, [`group_size_rises`] is the test of "p_wrong rises with N" that the report's
//! headline and `herd power` share.

use std::collections::BTreeMap;

use herd_stats::{
    Alternative, Formula, StatsError, WilcoxonOptions, WilcoxonResult, ols, sample_std, spearman, trapezoid,
    ttest_one_sample, wilcoxon_one_sample, z_test,
};

use crate::error::{AnalysisError, stats_context};
use crate::table::{ResultTable, TableBuilder, Value};

/// One conformity trial.
#[derive(Debug, Clone, PartialEq)]
pub struct ConformityTrial {
    pub model: String,
    pub task: String,
    pub family: String,
    /// Condition level; empty for families without levels.
    pub level: String,
    pub n: u32,
    pub seed: i64,
    pub paraphrase: Option<String>,
    pub p_wrong_full: f64,
    pub p_wrong_ab: Option<f64>,
    pub difficulty_level: Option<i64>,
    pub difficulty_index: Option<f64>,
    pub image_id: Option<String>,
    pub correct_label: Option<String>,
    pub logit_a: Option<f64>,
    pub logit_b: Option<f64>,
}

/// The two readings of p_wrong the tables carry (`measure` column); herd-design's, since the experiment
/// file's `analysis.measure` names the one a report leads with (docs/deviations.md says why the default
/// is `Full`).
pub use herd_design::PWrong;

impl ConformityTrial {
    /// The trial's p_wrong under `measure`; `None` for `Ab` where neither answer had any mass.
    pub fn p_wrong(&self, measure: PWrong) -> Option<f64> {
        match measure {
            PWrong::Full => Some(self.p_wrong_full),
            PWrong::Ab => self.p_wrong_ab,
        }
    }
}

/// Trials and where they came from.
#[derive(Debug, Clone)]
pub struct ConformityTable {
    pub origin: String,
    pub rows: Vec<ConformityTrial>,
}

/// Analysis parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ConformityOptions {
    /// Normal quantile of the curve intervals (norm.ppf(0.975) for 95%).
    pub interval_z: f64,
    /// The neutral source every source level is compared with.
    pub source_base: String,
}

impl Default for ConformityOptions {
    fn default() -> Self {
        Self { interval_z: 1.959_963_984_540_054, source_base: "participants".into() }
    }
}

/// The result tables.
#[derive(Debug, Clone, PartialEq)]
pub struct ConformityTables {
    pub curves: ResultTable,
    pub auc: ResultTable,
    pub deltas: ResultTable,
    pub difficulty_spearman: ResultTable,
    pub difficulty_ols: ResultTable,
}

impl ConformityTables {
    pub fn all(&self) -> [&ResultTable; 5] {
        [&self.curves, &self.auc, &self.deltas, &self.difficulty_spearman, &self.difficulty_ols]
    }
}

/// (model, task, family, level)
type CurveKey = (String, String, String, String);

/// The leading values of a `curves` or `auc` row: model, task, family, level and measure.
fn curve_row(key: &CurveKey, measure: &str) -> Vec<Value> {
    [key.0.as_str(), key.1.as_str(), key.2.as_str(), key.3.as_str(), measure].map(Value::from).into()
}

fn curve_level(t: &ConformityTrial) -> String {
    match (t.family.as_str(), t.level.is_empty(), t.difficulty_level) {
        ("difficulty", true, Some(d)) => d.to_string(),
        _ => t.level.clone(),
    }
}

/// The measures analysed: `p_wrong_full` always, `p_wrong_ab` where every trial defines it.
fn measures(table: &ConformityTable) -> Vec<PWrong> {
    let mut out = vec![PWrong::Full];
    if table.rows.iter().all(|t| t.p_wrong_ab.is_some()) && !table.rows.is_empty() {
        out.push(PWrong::Ab);
    }
    out
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Mean per N and the AUC of those means (trapezoid over N / N range).
fn curve_auc(points: &BTreeMap<u32, Vec<f64>>) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let ns: Vec<f64> = points.keys().map(|&n| f64::from(n)).collect();
    let means: Vec<f64> = points.values().map(|v| mean(v)).collect();
    let range = ns[ns.len() - 1] - ns[0];
    trapezoid(&means, &ns).ok().map(|a| a / range)
}

/// The first N whose rise from the curve's own baseline (its first N, normally N = 0) reaches 90% of
/// the rise at the largest N (the paper's "saturate around N ∼ 3–4"); `None` for a curve that does
/// not rise from its first N to its last, where saturation has no meaning. Measured from the
/// baseline, not from zero: a model at p_wrong 0.58 alone would otherwise "saturate at N = 0".
fn saturation_n(points: &BTreeMap<u32, Vec<f64>>) -> Option<u32> {
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

/// Families whose same − different contrasts fig. 4d / S6 average.
const SOCIAL_FAMILIES: [&str; 3] = ["nationality", "ethnicity", "minimal_group"];

/// Runs every conformity analysis.
pub fn analyze_conformity(
    table: &ConformityTable,
    options: &ConformityOptions,
) -> Result<ConformityTables, AnalysisError> {
    if table.rows.is_empty() {
        return Err(AnalysisError::EmptyCell {
            origin: table.origin.clone(),
            cell: "the table".into(),
            what: "trials".into(),
            fix: "pass a conformity_trials table with at least one trial".into(),
        });
    }
    let measures = measures(table);
    let mut curves = TableBuilder::new(
        "curves",
        &[
            ("model", 't'),
            ("task", 't'),
            ("family", 't'),
            ("level", 't'),
            ("measure", 't'),
            ("n", 'i'),
            ("trials", 'i'),
            ("mean", 'f'),
            ("sd", 'f'),
            ("se", 'f'),
            ("ci_low", 'f'),
            ("ci_high", 'f'),
        ],
    );
    let mut auc = TableBuilder::new(
        "auc",
        &[
            ("model", 't'),
            ("task", 't'),
            ("family", 't'),
            ("level", 't'),
            ("measure", 't'),
            ("n_points", 'i'),
            ("auc", 'f'),
            ("saturation_n", 'i'),
        ],
    );
    // measure → curve → N → values
    let mut level_auc: BTreeMap<(&str, CurveKey), f64> = BTreeMap::new();
    for &m in &measures {
        let (measure, pick) = (m.column(), |t: &ConformityTrial| t.p_wrong(m).unwrap_or(f64::NAN));
        let mut by_curve: BTreeMap<CurveKey, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
        for t in &table.rows {
            by_curve
                .entry((t.model.clone(), t.task.clone(), t.family.clone(), curve_level(t)))
                .or_default()
                .entry(t.n)
                .or_default()
                .push(pick(t));
        }
        for (key, points) in by_curve {
            for (&n, values) in &points {
                let k = values.len();
                let m = mean(values);
                let sd = if k >= 2 { sample_std(values).unwrap_or(f64::NAN) } else { f64::NAN };
                let se = sd / (k as f64).sqrt();
                let mut row = curve_row(&key, measure);
                row.extend([
                    n.into(),
                    k.into(),
                    m.into(),
                    sd.into(),
                    se.into(),
                    (m - options.interval_z * se).into(),
                    (m + options.interval_z * se).into(),
                ]);
                curves.push(row);
            }
            let Some(area) = curve_auc(&points) else {
                return Err(AnalysisError::EmptyCell {
                    origin: table.origin.clone(),
                    cell: format!("curve (model={}, task={}, family={}, level={:?})", key.0, key.1, key.2, key.3),
                    what: "second value of N".into(),
                    fix: "an AUC needs trials at two or more values of N".into(),
                });
            };
            let mut row = curve_row(&key, measure);
            row.extend([points.len().into(), area.into(), saturation_n(&points).into()]);
            auc.push(row);
            level_auc.insert((measure, key), area);
        }
    }
    let deltas = deltas_table(table, options, &measures, &level_auc)?;
    let difficulty_spearman = spearman_table(table, &level_auc)?;
    let difficulty_ols = ols_table(table, &measures)?;
    Ok(ConformityTables { curves: curves.finish(), auc: auc.finish(), deltas, difficulty_spearman, difficulty_ols })
}

/// The test of "p_wrong rises with N" (the group-size family, the paper's fig. 2a), as the report's
/// headline and `herd power` both run it. The paper gives curves and no test; herd pairs, per model and
/// task, trial index k at the smallest N with trial index k at the largest N (images are drawn per N,
/// so the pairs are independent and their differences estimate the rise) and tests the differences,
/// pooled over the model's tasks, with a two-sided Wilcoxon signed-rank test.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSizeRise {
    pub model: String,
    /// The smallest and largest N of the model's tasks.
    pub n_low: u32,
    pub n_high: u32,
    /// Mean p_wrong of the paired trials at the smallest and at the largest N.
    pub mean_low: f64,
    pub mean_high: f64,
    /// `task#trial` → p_wrong at the largest N − p_wrong at the smallest.
    pub differences: BTreeMap<String, f64>,
}

impl GroupSizeRise {
    /// The test's alternative: a rise and a fall are both findings.
    pub const ALTERNATIVE: Alternative = Alternative::TwoSided;

    /// The Wilcoxon signed-rank test of the differences (scipy's defaults, two-sided).
    pub fn wilcoxon(&self) -> Result<WilcoxonResult, StatsError> {
        let differences: Vec<f64> = self.differences.values().copied().collect();
        wilcoxon_one_sample(&differences, &WilcoxonOptions { alternative: Self::ALTERNATIVE, ..Default::default() })
    }
}

/// Each model's [`GroupSizeRise`] under `measure`, in model order; a model none of whose tasks ran
/// two values of N has none.
pub fn group_size_rises(table: &ConformityTable, measure: PWrong) -> Vec<GroupSizeRise> {
    // model → task → N → trial index → p_wrong values
    type Curve = BTreeMap<u32, BTreeMap<i64, Vec<f64>>>;
    let mut curves: BTreeMap<&str, BTreeMap<&str, Curve>> = BTreeMap::new();
    for t in table.rows.iter().filter(|t| t.family == "group_size") {
        let Some(p) = t.p_wrong(measure) else { continue };
        let by_n = curves.entry(&t.model).or_default().entry(&t.task).or_default();
        by_n.entry(t.n).or_default().entry(t.seed).or_default().push(p);
    }
    let mut out = Vec::new();
    for (model, tasks) in curves {
        let (mut differences, mut low, mut high, mut ns) = (BTreeMap::new(), Vec::new(), Vec::new(), Vec::new());
        for (task, by_n) in tasks {
            let (Some((&n0, first)), Some((&n1, last))) = (by_n.first_key_value(), by_n.last_key_value()) else {
                continue;
            };
            if n0 == n1 {
                continue;
            }
            ns.extend([n0, n1]);
            for (seed, values) in last {
                if let Some(base) = first.get(seed) {
                    differences.insert(format!("{task}#{seed}"), mean(values) - mean(base));
                    low.push(mean(base));
                    high.push(mean(values));
                }
            }
        }
        let (Some(&n_low), Some(&n_high)) = (ns.iter().min(), ns.iter().max()) else { continue };
        out.push(GroupSizeRise {
            model: model.to_owned(),
            n_low,
            n_high,
            mean_low: mean(&low),
            mean_high: mean(&high),
            differences,
        });
    }
    out
}

/// The contrasts of one family: (level a, level b, pairing unit, alternative).
fn contrasts(
    family: &str,
    levels: &[String],
    options: &ConformityOptions,
) -> Vec<(String, String, &'static str, Alternative)> {
    let pair = |a: &str, b: &str, unit, alt| {
        (levels.iter().any(|l| l == a) && levels.iter().any(|l| l == b))
            .then(|| (a.to_owned(), b.to_owned(), unit, alt))
    };
    match family {
        "normative" => pair("public", "private", "paraphrase", Alternative::Greater).into_iter().collect(),
        "nationality" | "ethnicity" | "minimal_group" => {
            pair("same", "different", "seed", Alternative::TwoSided).into_iter().collect()
        }
        "spatial" | "temporal" => pair("near", "far", "seed", Alternative::TwoSided).into_iter().collect(),
        "source_strength" => levels
            .iter()
            .filter(|l| **l != options.source_base)
            .filter_map(|l| pair(l.as_str(), options.source_base.as_str(), "seed", Alternative::TwoSided))
            .collect(),
        _ => Vec::new(),
    }
}

fn deltas_table(
    table: &ConformityTable,
    options: &ConformityOptions,
    measures: &[PWrong],
    level_auc: &BTreeMap<(&str, CurveKey), f64>,
) -> Result<ResultTable, AnalysisError> {
    let mut out = TableBuilder::new(
        "deltas",
        &[
            ("model", 't'),
            ("task", 't'),
            ("family", 't'),
            ("measure", 't'),
            ("level_a", 't'),
            ("level_b", 't'),
            ("pairing", 't'),
            ("alternative", 't'),
            ("n_pairs", 'i'),
            ("auc_a", 'f'),
            ("auc_b", 'f'),
            ("delta", 'f'),
            ("se", 'f'),
            ("t", 'f'),
            ("df", 'f'),
            ("t_p", 'f'),
            ("z", 'f'),
            ("z_p", 'f'),
        ],
    );
    // (model, task, family) → level list
    let mut families: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    // (model, task, measure) → social family → (seed → same − different, AUC same, AUC different)
    type SocialContrast = (BTreeMap<String, f64>, f64, f64);
    let mut social: BTreeMap<(String, String, &str), BTreeMap<String, SocialContrast>> = BTreeMap::new();
    for t in &table.rows {
        let levels = families.entry((t.model.clone(), t.task.clone(), t.family.clone())).or_default();
        if !levels.contains(&t.level) {
            levels.push(t.level.clone());
        }
    }
    for ((model, task, family), mut levels) in families {
        levels.sort();
        for (a, b, unit, alternative) in contrasts(&family, &levels, options) {
            if unit == "paraphrase" && table.rows.iter().any(|t| t.family == family && t.paraphrase.is_none()) {
                return Err(AnalysisError::MissingColumn {
                    origin: table.origin.clone(),
                    column: "paraphrase".into(),
                    fix: "the normative contrast pairs public and private by paraphrase: add the paraphrase id of every normative trial".into(),
                });
            }
            for &m in measures {
                let (measure, pick) = (m.column(), |t: &ConformityTrial| t.p_wrong(m).unwrap_or(f64::NAN));
                // level → unit → N → values
                let mut units: BTreeMap<&str, BTreeMap<String, BTreeMap<u32, Vec<f64>>>> = BTreeMap::new();
                for t in table.rows.iter().filter(|t| {
                    t.model == model && t.task == task && t.family == family && (t.level == a || t.level == b)
                }) {
                    let id = if unit == "paraphrase" {
                        t.paraphrase.clone().unwrap_or_default()
                    } else {
                        t.seed.to_string()
                    };
                    let side = if t.level == a { "a" } else { "b" };
                    units.entry(side).or_default().entry(id).or_default().entry(t.n).or_default().push(pick(t));
                }
                let (Some(ua), Some(ub)) = (units.get("a"), units.get("b")) else { continue };
                let mut by_unit = BTreeMap::new();
                for (id, curve_a) in ua {
                    let Some(curve_b) = ub.get(id) else { continue };
                    if let (Some(x), Some(y)) = (curve_auc(curve_a), curve_auc(curve_b)) {
                        by_unit.insert(id.clone(), x - y);
                    }
                }
                let differences: Vec<f64> = by_unit.values().copied().collect();
                let cell = || format!("{family} {a} − {b} (model={model}, task={task}, {measure})");
                if differences.len() < 2 {
                    return Err(AnalysisError::EmptyCell {
                        origin: table.origin.clone(),
                        cell: cell(),
                        what: format!("two {unit}s with trials of both levels at two or more N"),
                        fix: format!("the contrast pairs {a} and {b} by {unit}: run both levels for the same {unit}s"),
                    });
                }
                let test = ttest_one_sample(&differences, 0.0, alternative)
                    .map_err(stats_context(&table.origin, || format!("t test of {}", cell())))?;
                let z = test.mean / test.se;
                let z_p = z_test(z, alternative).map_err(stats_context(&table.origin, cell))?;
                let key = |level: &str| (measure, (model.clone(), task.clone(), family.clone(), level.to_owned()));
                let auc_a = level_auc.get(&key(&a)).copied().unwrap_or(f64::NAN);
                let auc_b = level_auc.get(&key(&b)).copied().unwrap_or(f64::NAN);
                push_delta(
                    &mut out,
                    [&model, &task, &family, measure, &a, &b, unit],
                    alternative,
                    (auc_a, auc_b),
                    &test,
                    differences.len(),
                    (z, z_p),
                );
                if SOCIAL_FAMILIES.contains(&family.as_str()) {
                    social
                        .entry((model.clone(), task.clone(), measure))
                        .or_default()
                        .insert(family.clone(), (by_unit, auc_a, auc_b));
                }
            }
        }
    }
    // Fig. 4d / S6: the same − different difference averaged over the social families, per seed over
    // the families that seed has; only where two or more families ran (with one it is that family's
    // own row).
    for ((model, task, measure), by_family) in social {
        if by_family.len() < 2 {
            continue;
        }
        let mut per_seed: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for (by_unit, _, _) in by_family.values() {
            for (seed, d) in by_unit {
                per_seed.entry(seed).or_default().push(*d);
            }
        }
        let differences: Vec<f64> = per_seed.values().map(|v| mean(v)).collect();
        let cell = || format!("{SOCIAL_MEAN} same − different (model={model}, task={task}, {measure})");
        let test = ttest_one_sample(&differences, 0.0, Alternative::TwoSided)
            .map_err(stats_context(&table.origin, || format!("t test of {}", cell())))?;
        let z = test.mean / test.se;
        let z_p = z_test(z, Alternative::TwoSided).map_err(stats_context(&table.origin, cell))?;
        let aucs: Vec<&SocialContrast> = by_family.values().collect();
        let auc_same = aucs.iter().map(|c| c.1).sum::<f64>() / aucs.len() as f64;
        let auc_different = aucs.iter().map(|c| c.2).sum::<f64>() / aucs.len() as f64;
        push_delta(
            &mut out,
            [&model, &task, SOCIAL_MEAN, measure, "same", "different", "seed"],
            Alternative::TwoSided,
            (auc_same, auc_different),
            &test,
            differences.len(),
            (z, z_p),
        );
    }
    Ok(out.finish())
}

/// The `deltas` row of fig. 4d / S6's averaged social-proximity contrast.
pub const SOCIAL_MEAN: &str = "social_mean";

/// One `deltas` row: keys (model, task, family, measure, level a, level b, pairing unit), then the
/// test of the unit differences.
fn push_delta(
    out: &mut TableBuilder,
    keys: [&str; 7],
    alternative: Alternative,
    (auc_a, auc_b): (f64, f64),
    test: &herd_stats::TTestResult,
    n_pairs: usize,
    (z, z_p): (f64, f64),
) {
    let alternative = match alternative {
        Alternative::Greater => "greater",
        Alternative::Less => "less",
        Alternative::TwoSided => "two-sided",
    };
    let mut row: Vec<Value> = keys.iter().map(|&k| k.into()).collect();
    row.extend([
        alternative.into(),
        n_pairs.into(),
        auc_a.into(),
        auc_b.into(),
        test.mean.into(),
        test.se.into(),
        test.t.into(),
        test.df.into(),
        test.p_value.into(),
        z.into(),
        z_p.into(),
    ]);
    out.push(row);
}

fn spearman_table(
    table: &ConformityTable,
    level_auc: &BTreeMap<(&str, CurveKey), f64>,
) -> Result<ResultTable, AnalysisError> {
    let mut out = TableBuilder::new(
        "difficulty_spearman",
        &[("model", 't'), ("task", 't'), ("measure", 't'), ("n_levels", 'i'), ("rho", 'f'), ("p", 'f')],
    );
    // (model, task, measure) → (difficulty level, AUC)
    type Levels<'a> = BTreeMap<(&'a str, &'a str, &'a str), Vec<(f64, f64)>>;
    let mut groups: Levels<'_> = BTreeMap::new();
    for ((measure, (model, task, family, level)), &area) in level_auc {
        if family.as_str() != "difficulty" {
            continue;
        }
        let Ok(x) = level.parse::<f64>() else {
            return Err(AnalysisError::InvalidValue {
                origin: table.origin.clone(),
                column: "difficulty_level".into(),
                row: 0,
                problem: format!("difficulty level {level:?} is not a number"),
                fix: "give every difficulty-family trial a numeric difficulty_level".into(),
            });
        };
        groups.entry((model.as_str(), task.as_str(), *measure)).or_default().push((x, area));
    }
    for ((model, task, measure), mut points) in groups {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let x: Vec<f64> = points.iter().map(|p| p.0).collect();
        let y: Vec<f64> = points.iter().map(|p| p.1).collect();
        // Fewer than three levels with trials (a small run, or levels no image passed the baseline filter
        // for), or the same AUC at every level (a model that answers alike whatever the difficulty): ρ is
        // undefined, written as null, as scipy returns NaN for constant input.
        let (rho, p) = if x.len() < 3 {
            (f64::NAN, f64::NAN)
        } else {
            match spearman(&x, &y, Alternative::TwoSided) {
                Ok(r) => (r.rho, r.p_value),
                Err(herd_stats::StatsError::ConstantInput { .. }) => (f64::NAN, f64::NAN),
                Err(e) => {
                    return Err(stats_context(&table.origin, || {
                        format!("Spearman of AUC on difficulty (model={model}, task={task}, {measure})")
                    })(e));
                }
            }
        };
        out.push(vec![model.into(), task.into(), measure.into(), x.len().into(), rho.into(), p.into()]);
    }
    Ok(out.finish())
}

fn min_max(values: &mut [f64]) -> bool {
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

/// Columns of the matplotlib hexagon grid fig. 3b's regression bins the images in (`gridsize`; its rows
/// are `gridsize / √3`, truncated, as matplotlib's `hexbin` makes them). S4's residual degrees of freedom
/// (111 lines, 129 colour, 97 dots: 114, 132 and 100 occupied hexagons) exceed what a 10-column grid holds
/// (116 hexagons) in the colour task; 11 is the smallest grid that can hold all three. docs/deviations.md,
/// "Difficulty regression unit", and crates/herd-analysis/tests/golden/conformity_claims.py.
pub const DIFFICULTY_HEXBIN_GRIDSIZE: u32 = 11;

/// The hexagon of matplotlib's `Axes.hexbin` (matplotlib 3.x, `extent` = the data's range, which the
/// min-max normalisation makes [0, 1] on both axes) that holds the point (x, y): the nearer centre of
/// the two interleaved lattices, as (lattice, column, row). `np.round` rounds half to even, hence
/// `round_ties_even`.
fn hexagon(x: f64, y: f64, gridsize: u32) -> (u8, i64, i64) {
    let nx = f64::from(gridsize);
    let ny = (nx / 3f64.sqrt()).trunc();
    let padding = 1e-9;
    let (xmin, xmax, ymin, ymax) = (-padding, 1.0 + padding, 0.0, 1.0);
    let ix = (x - xmin) / ((xmax - xmin) / nx);
    let iy = (y - ymin) / ((ymax - ymin) / ny);
    let (ix1, iy1) = (ix.round_ties_even(), iy.round_ties_even());
    let (ix2, iy2) = (ix.floor(), iy.floor());
    let d1 = (ix - ix1).powi(2) + 3.0 * (iy - iy1).powi(2);
    let d2 = (ix - ix2 - 0.5).powi(2) + 3.0 * (iy - iy2 - 0.5).powi(2);
    if d1 < d2 { (1, ix1 as i64, iy1 as i64) } else { (2, ix2 as i64, iy2 as i64) }
}

/// One difficulty-pool image: its p_wrong per N, its difficulty index and the logit of its correct
/// answer at N = 0.
#[derive(Default)]
struct PoolImage {
    curve: BTreeMap<u32, Vec<f64>>,
    difficulty_index: Vec<f64>,
    correct_logit: Vec<f64>,
}

fn ols_table(table: &ConformityTable, measures: &[PWrong]) -> Result<ResultTable, AnalysisError> {
    let mut out = TableBuilder::new(
        "difficulty_ols",
        &[
            ("task", 't'),
            ("measure", 't'),
            ("term", 't'),
            ("coef", 'f'),
            ("se", 'f'),
            ("t", 'f'),
            ("p", 'f'),
            ("r_squared", 'f'),
            ("n", 'i'),
        ],
    );
    let difficulty: Vec<&ConformityTrial> = table.rows.iter().filter(|t| t.family == "difficulty").collect();
    let complete = difficulty.iter().all(|t| {
        t.difficulty_level.is_some()
            && t.difficulty_index.is_some()
            && t.image_id.is_some()
            && t.correct_label.is_some()
            && t.logit_a.is_some()
            && t.logit_b.is_some()
    });
    if difficulty.is_empty() || !complete {
        return Ok(out.finish());
    }
    let formula = Formula::parse("conformity ~ difficulty + performance")
        .map_err(stats_context(&table.origin, || "OLS formula".into()))?;
    for &m in measures {
        let (measure, pick) = (m.column(), |t: &ConformityTrial| t.p_wrong(m).unwrap_or(f64::NAN));
        // The paper's unit (S4's degrees of freedom; fig. 3b): images, min-max normalised within their
        // model, pooled over models and binned in hexagons of (performance, difficulty); one point per
        // occupied hexagon, the mean of its images.
        // task → model → image → its trials
        let mut tasks: BTreeMap<&str, BTreeMap<&str, BTreeMap<&str, PoolImage>>> = BTreeMap::new();
        for t in &difficulty {
            let image = tasks
                .entry(t.task.as_str())
                .or_default()
                .entry(t.model.as_str())
                .or_default()
                .entry(t.image_id.as_deref().unwrap_or_default())
                .or_default();
            image.curve.entry(t.n).or_default().push(pick(t));
            image.difficulty_index.push(t.difficulty_index.unwrap_or(f64::NAN));
            if t.n == 0 {
                let correct = if t.correct_label.as_deref() == Some("A") { t.logit_a } else { t.logit_b };
                image.correct_logit.push(correct.unwrap_or(f64::NAN));
            }
        }
        for (task, models) in tasks {
            // (normalised conformity, difficulty, performance) of every image of the task
            let mut images = Vec::new();
            for (model, pool) in models {
                let (mut c, mut d, mut p) = (Vec::new(), Vec::new(), Vec::new());
                for (id, image) in pool {
                    let (Some(area), false) = (curve_auc(&image.curve), image.correct_logit.is_empty()) else {
                        return Err(AnalysisError::EmptyCell {
                            origin: table.origin.clone(),
                            cell: format!("difficulty image {id} (model={model}, task={task})"),
                            what: "trials at N = 0 and a second N".into(),
                            fix: "the regression needs each difficulty-pool image at N = 0 (performance) and over N (conformity)".into(),
                        });
                    };
                    c.push(area);
                    d.push(mean(&image.difficulty_index));
                    p.push(mean(&image.correct_logit));
                }
                // Each model is min-max normalised on its own (the paper's pooling); a model with the same
                // conformity, difficulty or performance on every image has no scale and cannot enter the
                // pooled fit (the other models still can; with none left the task has no rows).
                let normalised = [&mut c, &mut d, &mut p].into_iter().all(|values| min_max(values));
                if !normalised {
                    continue;
                }
                images.extend((0..c.len()).map(|i| (c[i], d[i], p[i])));
            }
            // hexagon → (conformity, difficulty, performance) of its images
            let mut hexagons: BTreeMap<(u8, i64, i64), [Vec<f64>; 3]> = BTreeMap::new();
            for &(c, d, p) in &images {
                let cell = hexagons.entry(hexagon(p, d, DIFFICULTY_HEXBIN_GRIDSIZE)).or_default();
                cell[0].push(c);
                cell[1].push(d);
                cell[2].push(p);
            }
            let (conformity, difficulty_index, performance): (Vec<f64>, Vec<f64>, Vec<f64>) = {
                let column = |k: usize| hexagons.values().map(|cell| mean(&cell[k])).collect::<Vec<f64>>();
                (column(0), column(1), column(2))
            };
            // Three coefficients need at least four points; fewer occupied hexagons leave the fit
            // undefined and the task without rows.
            if conformity.len() < 4 {
                continue;
            }
            let context = || format!("OLS of conformity on difficulty and performance (task={task}, {measure})");
            let (design, y) = formula
                .build(&[
                    ("conformity", conformity.as_slice()),
                    ("difficulty", difficulty_index.as_slice()),
                    ("performance", performance.as_slice()),
                ])
                .map_err(stats_context(&table.origin, context))?;
            let fit = ols(&design, &y).map_err(stats_context(&table.origin, context))?;
            for c in &fit.coefficients {
                out.push(vec![
                    task.into(),
                    measure.into(),
                    c.name.as_str().into(),
                    c.estimate.into(),
                    c.se.into(),
                    c.t.into(),
                    c.p_value.into(),
                    fit.r_squared.into(),
                    fit.n_obs.into(),
                ]);
            }
        }
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(level: i64, n: u32, seed: i64, p_wrong: f64) -> ConformityTrial {
        ConformityTrial {
            model: "m".into(),
            task: "lines".into(),
            family: "difficulty".into(),
            level: String::new(),
            n,
            seed,
            paraphrase: None,
            p_wrong_full: p_wrong,
            p_wrong_ab: Some(p_wrong),
            difficulty_level: Some(level),
            difficulty_index: Some(level as f64),
            image_id: Some(format!("img-{level}-{seed}")),
            correct_label: Some("A".into()),
            logit_a: Some(1.0),
            logit_b: Some(0.0),
        }
    }

    #[test]
    fn saturation_is_the_first_n_at_ninety_percent_of_the_rise_and_null_for_a_flat_curve() {
        let curve =
            |points: &[(u32, f64)]| points.iter().map(|&(n, p)| (n, vec![p, p])).collect::<BTreeMap<u32, Vec<f64>>>();
        // 0.1 + 0.9 × (0.8 − 0.1) = 0.73: reached at N = 4 (0.74), not at N = 3 (0.72).
        assert_eq!(saturation_n(&curve(&[(0, 0.1), (2, 0.5), (3, 0.72), (4, 0.74), (10, 0.8)])), Some(4));
        // A curve starting high: 90% of its last value (0.576) is below its baseline, but 90% of its
        // rise (0.58 + 0.054) is first reached at N = 10, not at N = 0.
        assert_eq!(saturation_n(&curve(&[(0, 0.58), (2, 0.60), (5, 0.62), (10, 0.64)])), Some(10));
        assert_eq!(saturation_n(&curve(&[(0, 0.5), (5, 0.5), (10, 0.5)])), None, "a flat curve does not saturate");
        assert_eq!(saturation_n(&curve(&[(0, 0.6), (10, 0.3)])), None, "nor does a falling one");
    }

    #[test]
    fn the_same_auc_at_every_difficulty_gives_a_null_rho_not_an_error() {
        // A model that answers alike whatever the difficulty: every level has the same curve.
        let rows = (1..=4)
            .flat_map(|level| {
                (0..2).flat_map(move |seed| [0, 5].map(|n| trial(level, n, seed, if n == 0 { 0.2 } else { 0.6 })))
            })
            .collect();
        let table = ConformityTable { origin: "t.parquet".into(), rows };
        let tables = analyze_conformity(&table, &ConformityOptions::default()).unwrap();
        let s = &tables.difficulty_spearman;
        assert!(s.n_rows() > 0);
        for r in 0..s.n_rows() {
            assert_eq!(s.number("n_levels", r), Some(4.0));
            assert!(s.number("rho", r).is_none_or(f64::is_nan), "rho should be null: {:?}", s.number("rho", r));
        }
        // Nothing varies within the model, so it cannot be min-max normalised for the regression.
        assert_eq!(tables.difficulty_ols.n_rows(), 0);
    }
}
