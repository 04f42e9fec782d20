//! The result tables as typed rows: one struct per table, one field per column, so code that reads an
//! analysis (the claims, the report's figures) names fields instead of looking columns up by string.
//! A row struct is read from the [`ResultTable`] the analysis built or [`crate::stored`] read back, so a
//! table written by `herd analyze` and read back gives the same rows (the round-trip test).
//!
//! Nulls are read as the analysis wrote them: an undefined statistic is NaN in an `f64` field (its
//! `note` says why) or `None` in an `Option`; an optional design column the input lacked is `None`.

use crate::table::{ColumnValues, ResultTable};

/// How one column's value is read into a field.
pub trait Cell: Sized {
    fn read(column: Option<&ColumnValues>, row: usize) -> Self;
}

fn number(column: Option<&ColumnValues>, row: usize) -> Option<f64> {
    match column? {
        ColumnValues::Float(v) => *v.get(row)?,
        ColumnValues::Integer(v) => v.get(row)?.map(|i| i as f64),
        ColumnValues::Text(_) => None,
    }
}

impl Cell for Option<String> {
    fn read(column: Option<&ColumnValues>, row: usize) -> Self {
        match column? {
            ColumnValues::Text(v) => v.get(row)?.clone(),
            ColumnValues::Integer(v) => v.get(row)?.map(|i| i.to_string()),
            ColumnValues::Float(v) => v.get(row)?.map(|f| f.to_string()),
        }
    }
}

impl Cell for String {
    /// Empty where null: a text column that is always written (a key such as `model` or `term`).
    fn read(column: Option<&ColumnValues>, row: usize) -> Self {
        <Option<String>>::read(column, row).unwrap_or_default()
    }
}

impl Cell for f64 {
    /// NaN where null: an undefined statistic.
    fn read(column: Option<&ColumnValues>, row: usize) -> Self {
        number(column, row).unwrap_or(f64::NAN)
    }
}

impl Cell for Option<f64> {
    fn read(column: Option<&ColumnValues>, row: usize) -> Self {
        number(column, row)
    }
}

impl Cell for Option<i64> {
    fn read(column: Option<&ColumnValues>, row: usize) -> Self {
        number(column, row).map(|v| v as i64)
    }
}

impl Cell for usize {
    /// A count; 0 where null.
    fn read(column: Option<&ColumnValues>, row: usize) -> Self {
        number(column, row).map_or(0, |v| v as usize)
    }
}

/// A row struct read from a named table.
pub trait TableRow: Sized {
    /// The table's name (`curves`, `seed_tests`, …).
    const TABLE: &'static str;
    fn read(table: &ResultTable, row: usize) -> Self;

    /// Every row of `table`, in order.
    fn all(table: &ResultTable) -> Vec<Self> {
        (0..table.n_rows()).map(|r| Self::read(table, r)).collect()
    }
}

macro_rules! table_row {
    ($(#[$meta:meta])* $name:ident = $table:literal { $($(#[$fmeta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty),*
        }

        impl TableRow for $name {
            const TABLE: &'static str = $table;
            fn read(table: &ResultTable, row: usize) -> Self {
                Self { $($field: Cell::read(table.column(stringify!($field)), row)),* }
            }
        }
    };
}

table_row! {
    /// Mean p_wrong at one N of one curve (model × task × family × level), with its normal interval.
    CurvePoint = "curves" {
        model: String, task: String, family: String, level: String, measure: String,
        n: Option<i64>, trials: usize, mean: f64, sd: f64, se: f64, ci_low: f64, ci_high: f64,
    }
}

table_row! {
    /// The AUC of one curve, and where it saturates.
    CurveAuc = "auc" {
        model: String, task: String, family: String, level: String, measure: String,
        n_points: usize, auc: f64, saturation_n: Option<i64>,
    }
}

table_row! {
    /// An AUC difference between two levels of a family, tested over its pairing units.
    AucDelta = "deltas" {
        model: String, task: String, family: String, measure: String, level_a: String, level_b: String,
        pairing: String, alternative: String, n_pairs: usize, auc_a: f64, auc_b: f64, delta: f64, se: f64,
        t: f64, df: f64, t_p: f64, z: f64, z_p: f64, note: Option<String>,
    }
}

table_row! {
    /// Spearman's ρ between difficulty level and AUC for one model × task.
    DifficultyRho = "difficulty_spearman" {
        model: String, task: String, measure: String, n_levels: usize, rho: f64, p: f64, note: Option<String>,
    }
}

table_row! {
    /// One coefficient of a task's fig. 3b regression (AUC on difficulty and performance).
    DifficultyFit = "difficulty_ols" {
        task: String, measure: String, term: String, coef: f64, se: f64, t: f64, p: f64, r_squared: f64,
        n: usize, note: Option<String>,
    }
}

table_row! {
    /// A seed-level Wilcoxon test of one cell × deciders × measure.
    SeedTest = "seed_tests" {
        model: Option<String>, reasoning: Option<String>, instrument: Option<String>, swap_pass: Option<String>,
        passes: String, default_reasoning: Option<i64>, labels: String, m: Option<i64>, deciders: String,
        measure: String, n_seeds: usize, n_seeds_positive: usize, n_seeds_negative: usize, mean: f64, median: f64,
        wilcoxon_statistic: f64, wilcoxon_p: f64, rank_biserial: f64, q_paper_family: f64, q_all_cells: f64,
        note: Option<String>,
    }
}

table_row! {
    /// One coefficient of a GEE fit.
    GeeTerm = "gee" {
        model: Option<String>, reasoning: Option<String>, instrument: Option<String>, swap_pass: Option<String>,
        passes: String, analysis: String, labels: String, m: String, formula: String,
        working_correlation: String, absorbed: Option<String>, term: String, n_clusters: usize, coef: f64, se_robust: f64, se_bootstrap: Option<f64>, se_naive: f64, z: f64, p: f64,
        rho: f64, scale: f64,
    }
}

table_row! {
    /// A seed-bootstrap estimate of one cell.
    BootstrapEstimate = "bootstrap" {
        model: Option<String>, reasoning: Option<String>, instrument: Option<String>, swap_pass: Option<String>,
        passes: String, labels: String, m: Option<i64>, quantity: String, estimate: f64, se: f64, ci_low: f64,
        ci_high: f64, resamples: usize,
    }
}

table_row! {
    /// One robustness check of one cell, with fills included or excluded.
    RobustnessCheck = "robustness" {
        model: Option<String>, reasoning: Option<String>, instrument: Option<String>, swap_pass: Option<String>,
        passes: String, labels: String, m: Option<i64>, fills: String, check: String, deciders: Option<String>,
        target_group: Option<String>, n: Option<i64>, estimate: f64, se: f64, statistic: f64, p: f64,
        formula: Option<String>, note: Option<String>,
    }
}

/// Fewest paired units on which a reading uses the normal approximation (the `deltas` table's z-test,
/// the paper's); below it, the one-sample t-test with its df.
pub const NORMAL_MIN_UNITS: usize = 30;

impl AucDelta {
    /// 95% interval of the difference: the t quantile on the t-test's df, the normal from
    /// [`NORMAL_MIN_UNITS`] pairs on (or where the t-test has no df); `None` where the difference or its
    /// SE is undefined.
    pub fn interval95(&self) -> Option<(f64, f64)> {
        if !(self.se.is_finite() && self.delta.is_finite()) {
            return None;
        }
        let q = if self.n_pairs >= NORMAL_MIN_UNITS || self.df.is_nan() || self.df < 1.0 {
            crate::summary::Z95
        } else {
            crate::summary::t_quantile(0.975, self.df)
        };
        Some((self.delta - q * self.se, self.delta + q * self.se))
    }
}

impl SeedTest {
    /// A main estimate (each society's passes pooled), not a per-pass robustness row.
    pub fn is_main(&self) -> bool {
        self.passes != "per_pass"
    }
}

impl GeeTerm {
    pub fn is_main(&self) -> bool {
        self.passes != "per_pass"
    }
}

impl RobustnessCheck {
    pub fn is_main(&self) -> bool {
        self.passes != "per_pass"
    }
}
