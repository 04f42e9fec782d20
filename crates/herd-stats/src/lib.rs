//! Statistics for herd experiments, numerically matched to scipy 1.17.1 and statsmodels 0.15.0.
//!
//! Researchers publish what herd computes, so every function here reproduces a named
//! scipy / statsmodels / numpy call to within 1e-6 relative; golden values produced by
//! `tests/golden/generate.py` are checked by this crate's tests. All functions are pure (slices
//! in, structs out), reject bad input with [`StatsError`] instead of panicking, and treat NaN as
//! an error rather than propagating it.
//!
//! - [`wilcoxon`]: signed-rank test (one-sample and paired) with scipy's `zero_method`,
//!   `correction`, `alternative` and `method` resolution, plus the rank-biserial effect size.
//! - [`multiple`]: Benjamini–Hochberg q-values.
//! - [`gee`] + [`formula`]: exchangeable Gaussian GEE with robust and naive standard errors,
//!   design matrices from formulas such as `points ~ same_group * minority_decider`.
//! - [`bootstrap`]: seeded cluster bootstrap and replay of given resamples.
//! - [`correlation`], [`regression`], [`ttest`], [`auc`]: Spearman, OLS, one-sample and Welch t tests,
//!   z tests, trapezoid.
//! - [`noncentral_f`]: the noncentral F's CDF (scipy's `ncf.cdf`) and the interval of the
//!   noncentrality an observed F gives.
//!
//! Ties and zeros: values within `isclose(rel_tol=1e-9, abs_tol=1e-9)` of each other are tied
//! (see [`rank`]), so seed means that differ only by summation order always count as ties.
//!
//! ```
//! use herd_stats::{Alternative, WilcoxonOptions, benjamini_hochberg, wilcoxon_one_sample};
//!
//! // Mean favouritism per seed in one cell: is it shifted away from zero?
//! let favouritism = [2.1, 3.4, 0.7, 1.9, 4.2, -0.3, 2.8, 3.1, 1.2, 2.6];
//! let test = wilcoxon_one_sample(&favouritism, &WilcoxonOptions::default())?;
//! assert_eq!(test.r_minus, 1.0); // the one negative seed has the smallest |value|
//! assert!((test.p_value - 0.00390625).abs() < 1e-12); // exact: 2 · 2/1024
//! assert!((test.rank_biserial - 53.0 / 55.0).abs() < 1e-12);
//!
//! let q = benjamini_hochberg(&[test.p_value, 0.2, 0.03])?;
//! assert!(q[0] <= q[2] && q[2] <= q[1]);
//! let greater = WilcoxonOptions { alternative: Alternative::Greater, ..Default::default() };
//! assert!(wilcoxon_one_sample(&favouritism, &greater)?.p_value < test.p_value);
//! # Ok::<(), herd_stats::StatsError>(())
//! ```

pub mod auc;
pub mod bootstrap;
pub mod correlation;
pub mod distributions;
mod error;
pub mod formula;
pub mod gee;
mod linalg;
pub mod multiple;
pub mod noncentral_f;
pub mod rank;
pub mod regression;
pub mod ttest;
pub mod wilcoxon;

pub use auc::{trapezoid, trapezoid_uniform};
pub use bootstrap::{BootstrapResult, bootstrap_replay, cluster_bootstrap, cluster_resamples, percentile, sample_std};
pub use correlation::{SpearmanResult, pearson, spearman};
pub use distributions::{
    Alternative, normal_cdf, normal_p_value, normal_quantile, normal_sf, students_t_cdf, students_t_p_value,
    students_t_quantile, students_t_sf,
};
pub use error::StatsError;
pub use formula::{DesignMatrix, Formula};
pub use gee::{
    GeeCoefficient, GeeFit, GeeOptions, WorkingCorrelation, gee_gaussian_exchangeable, gee_gaussian_independence,
    gee_gaussian_independence_within,
};
pub use multiple::{benjamini_hochberg, holm};
pub use noncentral_f::{noncentral_f_cdf, noncentrality_interval};
pub use rank::{Ranking, TIE_TOLERANCE, approx_equal, average_ranks};
pub use regression::{OlsCoefficient, OlsFit, ols};
pub use ttest::{TTestResult, WelchResult, ttest_one_sample, ttest_welch, z_test};
pub use wilcoxon::{WilcoxonMethod, WilcoxonOptions, WilcoxonResult, ZeroMethod, wilcoxon_one_sample, wilcoxon_paired};
