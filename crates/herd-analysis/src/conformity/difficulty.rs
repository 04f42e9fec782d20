//! The difficulty family's tables: Spearman ρ of AUC on difficulty level, and fig. 3b's hexagon-binned OLS.

use std::collections::BTreeMap;

use herd_stats::{Alternative, Formula, OlsFit, ols, spearman};

use super::curves::{CurveKey, curve_auc};
use super::summaries::min_max;
use super::{ConformityTable, ConformityTrial, PWrong, mean};
use crate::error::{AnalysisError, TOO_FEW_UNITS, stats_context, undefined_reason};
use crate::table::{ResultTable, TableBuilder, Value};

pub(super) fn spearman_table(
    table: &ConformityTable,
    level_auc: &BTreeMap<(&str, CurveKey), f64>,
) -> Result<ResultTable, AnalysisError> {
    let mut out = TableBuilder::new(
        "difficulty_spearman",
        &[("model", 't'), ("task", 't'), ("measure", 't'), ("n_levels", 'i'), ("rho", 'f'), ("p", 'f'), ("note", 't')],
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
        // undefined, written as null (as scipy returns NaN for constant input) with the reason in `note`.
        let (rho, p, note) = if x.len() < 3 {
            (f64::NAN, f64::NAN, Some(TOO_FEW_UNITS))
        } else {
            match spearman(&x, &y, Alternative::TwoSided) {
                Ok(r) => (r.rho, r.p_value, None),
                Err(e) => match undefined_reason(&e) {
                    Some(note) => (f64::NAN, f64::NAN, Some(note)),
                    None => {
                        return Err(stats_context(&table.origin, || {
                            format!("Spearman of AUC on difficulty (model={model}, task={task}, {measure})")
                        })(e));
                    }
                },
            }
        };
        out.push(vec![model.into(), task.into(), measure.into(), x.len().into(), rho.into(), p.into(), note.into()]);
    }
    Ok(out.finish())
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

/// What an image's conformity reads in fig. 3b's regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageConformity {
    /// The AUC of the image's whole p_wrong(N) curve, N = 0 included: the paper's measure and the
    /// `difficulty_ols` table's.
    WholeCurve,
    /// The curve without its N = 0 point: the AUC over N > 0 (trapezoid divided by that N range), or
    /// with a single N > 0 the p_wrong there (the same mean height of a one-point curve). The
    /// performance regressor is the correct answer's logit in the N = 0 trial, and that trial's
    /// p_wrong is a function of the same logits, so a whole-curve AUC shares its noise with
    /// performance: an agent whose conformity does not depend on performance at all still gets a
    /// negative β_performance. Without N = 0 the two read different trials of the image.
    WithoutBaseline,
}

/// One task's fig. 3b regression (conformity ~ difficulty + performance over occupied hexagons).
pub(crate) struct TaskFit {
    pub task: String,
    /// Occupied hexagons: the fit's points.
    pub n: usize,
    /// The fit, or why it is undefined (every hexagon's conformity alike, collinear regressors).
    pub fit: Result<OlsFit, &'static str>,
    /// The design's terms (`Intercept`, `difficulty`, `performance`).
    pub terms: Vec<String>,
}

/// Fig. 3b's regression per task on the difficulty family's trials of the (model, task) pairs that
/// `keep` takes, with each image's conformity read as `reading`. Empty where the run has no
/// difficulty trials or they lack the image, difficulty index or logits the regression needs; a
/// task with fewer than four occupied hexagons has no fit.
pub(crate) fn difficulty_fits(
    table: &ConformityTable,
    m: PWrong,
    reading: ImageConformity,
    keep: &dyn Fn(&str, &str) -> bool,
) -> Result<Vec<TaskFit>, AnalysisError> {
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
        return Ok(Vec::new());
    }
    let formula = Formula::parse("conformity ~ difficulty + performance")
        .map_err(stats_context(&table.origin, || "OLS formula".into()))?;
    let (measure, pick) = (m.column(), |t: &ConformityTrial| t.p_wrong(m).unwrap_or(f64::NAN));
    // The paper's unit (S4's degrees of freedom; fig. 3b): images, min-max normalised within their
    // model, pooled over models and binned in hexagons of (performance, difficulty); one point per
    // occupied hexagon, the mean of its images.
    // task → model → image → its trials
    let mut tasks: BTreeMap<&str, BTreeMap<&str, BTreeMap<&str, PoolImage>>> = BTreeMap::new();
    for t in difficulty.iter().filter(|t| keep(&t.model, &t.task)) {
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
    let mut fits = Vec::new();
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
                let conformity = match reading {
                    ImageConformity::WholeCurve => area,
                    ImageConformity::WithoutBaseline => {
                        // The image ran N = 0 and a second N (checked above), so N > 0 has a point.
                        let rest: BTreeMap<u32, Vec<f64>> =
                            image.curve.range(1..).map(|(&n, v)| (n, v.clone())).collect();
                        curve_auc(&rest).unwrap_or_else(|| rest.values().next().map_or(f64::NAN, |v| mean(v)))
                    }
                };
                c.push(conformity);
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
        let fit = match ols(&design, &y) {
            Ok(fit) => Ok(fit),
            // Every hexagon's conformity alike, or a regressor without variation (or repeating the
            // other): the fit is undefined, and says why.
            Err(e) => Err(undefined_reason(&e).ok_or_else(|| stats_context(&table.origin, context)(e))?),
        };
        fits.push(TaskFit { task: task.to_owned(), n: conformity.len(), fit, terms: design.column_names.clone() });
    }
    Ok(fits)
}

pub(super) fn ols_table(table: &ConformityTable, measures: &[PWrong]) -> Result<ResultTable, AnalysisError> {
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
            ("note", 't'),
        ],
    );
    for &m in measures {
        let measure = m.column();
        for TaskFit { task, n, fit, terms } in difficulty_fits(table, m, ImageConformity::WholeCurve, &|_, _| true)? {
            let task = task.as_str();
            match fit {
                Ok(fit) => {
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
                            Value::Null,
                        ]);
                    }
                }
                // Each term's row says why the fit is undefined, its numbers null.
                Err(note) => {
                    for term in &terms {
                        let mut row = vec![task.into(), measure.into(), term.as_str().into()];
                        row.extend([f64::NAN.into(), f64::NAN.into(), f64::NAN.into(), f64::NAN.into()]);
                        row.extend([f64::NAN.into(), n.into(), note.into()]);
                        out.push(row);
                    }
                }
            }
        }
    }
    Ok(out.finish())
}
