//! A figure as data (a chart specification and a one-line reading of it), and the summary
//! arithmetic figures share: means with 95% t-intervals over independent units.

use herd_analysis::ResultTable;
use herd_stats::sample_std;

use crate::chart::{Chart, render};
use crate::error::ReportError;

/// Normal quantile of the 95% intervals drawn (scipy's norm.ppf(0.975)).
pub const Z95: f64 = 1.959_963_984_540_054;

/// One figure of the report: file stem, title, what it shows, and how it reads for this run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// File stem, e.g. `p_wrong_by_group_size_per_model`.
    pub name: &'static str,
    /// Where the paper shows it, e.g. `conformity paper, fig. 2a`.
    pub paper_figure: &'static str,
    pub title: String,
    /// One line saying what this run's figure shows, with its numbers.
    pub reading: String,
    pub chart: Chart,
}

impl Figure {
    /// PNG bytes and SVG text of the figure ([`crate::FIGURE_WIDTH`] × [`crate::FIGURE_HEIGHT`]).
    pub fn render(&self) -> Result<(Vec<u8>, String), ReportError> {
        render(self.name, &self.chart)
    }
}

/// A figure that a run's data cannot support, and why (e.g. the family was not run).
#[derive(Debug, Clone, PartialEq)]
pub struct AbsentFigure {
    pub name: &'static str,
    pub paper_figure: &'static str,
    pub reason: String,
}

pub type FigureResult = Result<Figure, AbsentFigure>;

/// Mean and 95% t-interval (mean ± t₀.₉₇₅(n − 1)·SE, SE from the sample sd) of independent values;
/// no interval for fewer than two. On few units (two trials, four seeds) the normal ±1.96·SE would
/// claim far more than the data give (t₀.₉₇₅(1) = 12.7).
pub fn mean_interval(values: &[f64]) -> (f64, Option<(f64, f64)>) {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    if values.len() < 2 {
        return (mean, None);
    }
    match sample_std(values) {
        Ok(sd) => {
            let half = t_quantile(0.975, (values.len() - 1) as f64) * sd / (values.len() as f64).sqrt();
            (mean, Some((mean - half, mean + half)))
        }
        Err(_) => (mean, None),
    }
}

/// Student's t quantile (lower-tail probability `q`): herd-stats' `students_t_quantile`, golden
/// against scipy's `t.ppf`.
pub fn t_quantile(q: f64, df: f64) -> f64 {
    herd_stats::students_t_quantile(q, df)
}

/// `95% t-interval over 8 trials` (or `over 6–8 trials` where the counts differ): what a band is.
pub fn band_name(counts: impl Iterator<Item = usize>, unit: &str) -> String {
    let (lo, hi) = counts.fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if hi == 0 {
        return "no interval".into();
    }
    let n = if lo == hi { lo.to_string() } else { format!("{lo}–{hi}") };
    format!("95% t-interval over {n} {unit}")
}

/// Row indices of `table` where every `(column, value)` matches (text columns).
/// Whether a minimal-group result row is a main estimate: herd-analysis writes each society's passes
/// pooled (`passes` = `both`, or `single` with one pass) and each pass alone as robustness (`per_pass`).
pub fn is_main_row(table: &ResultTable, r: usize) -> bool {
    table.text("passes", r) != Some("per_pass")
}

pub fn rows_where(table: &ResultTable, conditions: &[(&str, &str)]) -> Vec<usize> {
    (0..table.n_rows()).filter(|&r| conditions.iter().all(|(c, v)| table.text(c, r) == Some(*v))).collect()
}

/// A number for a reading: 3 significant decimals, a sign when asked.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    if v != 0.0 && v.abs() < 0.001 {
        return format!("{v:.1e}");
    }
    format!("{v:.3}")
}

pub fn signed(v: f64) -> String {
    if v.is_finite() && v >= 0.0 { format!("+{}", num(v)) } else { num(v) }
}

/// A p-value as papers print it.
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        "n/a".into()
    } else if p == 0.0 {
        "0".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}
