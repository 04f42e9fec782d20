//! The two papers' figures and a report, regenerated from a run's stored Parquet alone.
//!
//! It words and draws what herd-analysis computed: [`herd_analysis::load_results`] reads a result
//! folder (a `herd run` folder, or `cargo xtask replicate`'s `OUT/runs/<study>/`) with each study's
//! analysis (read back from `analysis/<study>/` or computed once), and
//! [`herd_analysis::compare_headlines`] judges the papers' claims on it; no model or experiment file is
//! needed, so a folder copied from another machine is enough. [`write_report`] draws every figure as
//! PNG and SVG into `OUT/figures/` and writes `OUT/report.html` and its Markdown twin `OUT/report.md`:
//! the opening scorecard (per study, one line per paper claim with the run's number and verdict badge,
//! [`scorecard`]), the run manifests, parse and QC rates, each study's tables, every figure with a
//! one-line reading, and the claims with their verdicts and the test and n each rests on;
//! `OUT/deviations.md` beside them lists where herd differs from the papers.
//!
//! Figures are values first: each function named after what it shows (e.g.
//! [`p_wrong_by_group_size_per_model`]) turns trial rows and analysis tables into a [`Figure`], a
//! chart specification with its reading, or an [`AbsentFigure`] saying why the run cannot show it;
//! [`Figure::render`] draws it (plotters) at [`FIGURE_WIDTH`] × [`FIGURE_HEIGHT`]. Series differ
//! by colour (Okabe–Ito), marker and dash, so figures read in greyscale and for colour-blind readers.
//!
//! ```
//! use herd_analysis::{ConformityOptions, ConformityTable, ConformityTrial, PWrong, analyze_conformity};
//! use herd_report::{FIGURE_HEIGHT, FIGURE_WIDTH, p_wrong_by_group_size_per_model};
//!
//! // Two trials per N for one model: conformity grows with the number of confederates.
//! let rows = [0_u32, 2, 5, 10]
//!     .iter()
//!     .flat_map(|&n| (0..2).map(move |seed| ConformityTrial {
//!         model: "demo".into(), task: "lines".into(), family: "group_size".into(), level: String::new(),
//!         n, seed, paraphrase: None, p_wrong_full: 0.05 + 0.08 * f64::from(n) + 0.01 * seed as f64,
//!         p_wrong_ab: None, difficulty_level: None, difficulty_index: None, image_id: None,
//!         correct_label: None, logit_a: None, logit_b: None,
//!     }))
//!     .collect();
//! let trials = ConformityTable { origin: "example".into(), rows };
//! let tables = analyze_conformity(&trials, &ConformityOptions::default())?;
//! let figure = p_wrong_by_group_size_per_model(&trials, &tables, PWrong::Full).expect("the table has group_size trials");
//! assert!(figure.reading.contains("demo from 0.055 at N = 0 to 0.855 at N = 10"));
//! let (png, svg) = figure.render()?;
//! let image = image::load_from_memory(&png).unwrap();
//! assert_eq!((image.width(), image.height()), (FIGURE_WIDTH, FIGURE_HEIGHT));
//! assert!(svg.starts_with("<svg"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chart;
mod conformity;
mod error;
mod explain;
mod facts;
mod figure;
mod matrix;
mod minimal_group;
mod report;
mod scorecard;
mod terminal;

pub use chart::{
    Bar, BarChart, BarSeries, Chart, FIGURE_HEIGHT, FIGURE_WIDTH, Heatmap, LineChart, LineSeries, PaperBand, Point,
};
pub use conformity::{
    auc_by_difficulty, auc_by_source_strength_per_task, conformity_by_difficulty_and_performance, conformity_figures,
    p_wrong_by_group_size_per_model, p_wrong_by_group_size_per_task, p_wrong_by_source_strength, p_wrong_by_unanimity,
    p_wrong_near_vs_far, p_wrong_same_vs_different_group, proximity_auc_differences,
    public_minus_private_auc_per_model,
};
pub use error::ReportError;
pub use explain::summary_line;
pub use facts::grouped;
pub use figure::{AbsentFigure, Figure, FigureResult};
pub use minimal_group::minimal_group_figures;
pub use report::{ReportOptions, WrittenReport, markdown_cell, write_report, write_report_with};
pub use scorecard::{ScorecardRow, StudyScorecard, samples_link, scorecard};
pub use terminal::claims_lines;
