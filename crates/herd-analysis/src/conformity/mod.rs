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

mod curves;
mod deltas;
mod difficulty;
mod group_size;
mod summaries;

use std::collections::BTreeMap;

use herd_stats::sample_std;

use crate::error::AnalysisError;
use crate::table::{ResultTable, TableBuilder};
use curves::{CurveKey, curve_auc, curve_level, curve_row, saturation_n};
pub use curves::{auc, unit_aucs};
pub use deltas::SOCIAL_MEAN;
use deltas::deltas_table;
pub use difficulty::DIFFICULTY_HEXBIN_GRIDSIZE;
pub(crate) use difficulty::{ImageConformity, TaskFit, difficulty_fits};
use difficulty::{ols_table, spearman_table};
pub use group_size::{GroupSizeRise, group_size_rises};
pub use summaries::{CurveMean, NormalisedImage, curves_by_key, normalised_images};

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

    /// The `curves` table's rows, typed.
    pub fn curve_points(&self) -> Vec<crate::rows::CurvePoint> {
        crate::rows::TableRow::all(&self.curves)
    }

    /// The `auc` table's rows, typed.
    pub fn curve_aucs(&self) -> Vec<crate::rows::CurveAuc> {
        crate::rows::TableRow::all(&self.auc)
    }

    /// The `deltas` table's rows, typed.
    pub fn auc_deltas(&self) -> Vec<crate::rows::AucDelta> {
        crate::rows::TableRow::all(&self.deltas)
    }

    /// The `difficulty_spearman` table's rows, typed.
    pub fn difficulty_rhos(&self) -> Vec<crate::rows::DifficultyRho> {
        crate::rows::TableRow::all(&self.difficulty_spearman)
    }

    /// The `difficulty_ols` table's rows, typed.
    pub fn difficulty_fits(&self) -> Vec<crate::rows::DifficultyFit> {
        crate::rows::TableRow::all(&self.difficulty_ols)
    }

    /// The tables from a stored analysis ([`crate::stored`]), found by name; `origin` names it in errors.
    pub fn from_tables(tables: Vec<ResultTable>, origin: &str) -> Result<Self, AnalysisError> {
        let mut take = crate::table::taker(tables, origin);
        Ok(Self {
            curves: take("curves")?,
            auc: take("auc")?,
            deltas: take("deltas")?,
            difficulty_spearman: take("difficulty_spearman")?,
            difficulty_ols: take("difficulty_ols")?,
        })
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
