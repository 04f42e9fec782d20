//! The two papers' analyses over herd's trial tables: the minimal-group allocation probe
//! (seed-level Wilcoxon tests with BH, GEE, cluster bootstrap, robustness checks) and the Asch
//! conformity probe (p_wrong(N) curves, AUC, condition contrasts, difficulty and performance).
//!
//! Every statistic comes from [`herd_stats`], so the numbers match scipy and statsmodels (the
//! tests compare them with `tests/golden/generate.py`'s output). The analyses are pure functions
//! from typed rows ([`DyadTable`], [`ConformityTable`]) to tidy [`ResultTable`]s; [`io`] reads
//! CSV/Parquet into those rows and writes the results, and [`study`] is the one path from where a
//! study's rows are kept (a plain table, run folders) to those rows and their quality table, which
//! `herd analyze` and `herd report` both take. polars lives only there: no polars type is public.
//!
//! ```
//! use herd_analysis::{BootstrapPlan, DesignKey, Dyad, DyadTable, Labels, MinimalGroupOptions,
//!                     analyze_minimal_group};
//!
//! // Two societies of 4 agents (minority of 2) per label condition; deciders favour their group
//! // when labels are visible.
//! let mut rows = Vec::new();
//! for (labels, bias) in [(Labels::Visible, 20.0), (Labels::Hidden, 0.0)] {
//!     for seed in 0..6_i64 {
//!         for decider in 0..4_i64 {
//!             let minority = |agent: i64| agent < 2;
//!             let wobble = (seed as f64 * 0.37 + decider as f64 * 0.11).sin();
//!             let targets: Vec<i64> = (0..4).filter(|&t| t != decider).collect();
//!             // One in-group and two out-group targets: in-group gets (100 + 2·bias)/3.
//!             let in_points = (100.0 + 2.0 * (bias + wobble)) / 3.0;
//!             for &target in &targets {
//!                 let same = minority(target) == minority(decider);
//!                 let points = if same { in_points } else { (100.0 - in_points) / 2.0 };
//!                 let cell = (DesignKey::default(), labels, 2);
//!                 rows.push(Dyad::from_membership(cell, seed, (decider, target), minority, points));
//!             }
//!         }
//!     }
//! }
//! let table = DyadTable::new("example", rows)?;
//! let options = MinimalGroupOptions {
//!     bootstrap: BootstrapPlan::Seeded { resamples: 200, seed: 1 },
//!     ..MinimalGroupOptions::default()
//! };
//! let tables = analyze_minimal_group(&table, &options)?;
//! let t = &tables.seed_tests;
//! let visible_all = (0..t.n_rows())
//!     .find(|&r| t.text("labels", r) == Some("visible") && t.text("deciders", r) == Some("all")
//!         && t.text("measure", r) == Some("favouritism"))
//!     .unwrap();
//! assert!(t.number("mean", visible_all).unwrap() > 15.0);
//! let p = t.number("wilcoxon_p", visible_all).unwrap();
//! assert!((p - 0.03125).abs() < 1e-12); // exact: all six seeds positive, 2/2⁶
//! # Ok::<(), herd_analysis::AnalysisError>(())
//! ```

pub mod calibration;
pub mod claims;
pub mod conformity;
mod error;
pub mod format;
pub mod io;
pub mod minimal_group;
mod quality;
pub mod results;
pub mod rows;
pub mod stored;
pub mod study;
pub mod summary;
pub mod table;

pub use claims::{
    HeadlineComparison, ModelVerdict, PaperHeadline, RunNumber, Verdict, compare_headlines, paper_headlines,
};
pub use conformity::{
    ConformityOptions, ConformityTable, ConformityTables, ConformityTrial, DIFFICULTY_HEXBIN_GRIDSIZE, GroupSizeRise,
    PWrong, SOCIAL_MEAN, analyze_conformity, group_size_rises,
};
pub use error::{AnalysisError, COLLINEAR_REGRESSORS, EVERY_VALUE_EQUAL, TOO_FEW_UNITS, undefined_reason};
pub use minimal_group::{
    BootstrapPlan, DesignKey, Dyad, DyadTable, Labels, MinimalGroupOptions, MinimalGroupTables, analyze_minimal_group,
    analyze_minimal_group_with_progress, minimal_group_seed_tests,
};
pub use results::{
    ConformityResults, MinimalGroupResults, Provenance, Results, RunFolder, load_results, load_results_with,
};
pub use study::find_run_folders;
pub use table::{ColumnValues, ResultTable, TableBuilder, Value, rows_where};
