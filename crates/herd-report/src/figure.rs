//! A figure as data: a chart specification and a one-line reading of it. The numbers' spelling and
//! the summary arithmetic figures share come from herd-analysis (`format`, `summary`), which the
//! claims use too.

pub use herd_analysis::format::{num, p_is, p_value, signed};
pub use herd_analysis::summary::mean_interval;

use crate::chart::{Chart, render};
use crate::error::ReportError;

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

/// `95% t-interval over 8 trials` (or `over 6–8 trials` where the counts differ): what a band is.
pub fn band_name(counts: impl Iterator<Item = usize>, unit: &str) -> String {
    let (lo, hi) = counts.fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if hi == 0 {
        return "no interval".into();
    }
    let n = if lo == hi { lo.to_string() } else { format!("{lo}–{hi}") };
    format!("95% t-interval over {n} {unit}")
}
