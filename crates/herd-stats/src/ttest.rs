//! One-sample t test and z tests.

use crate::bootstrap::sample_std;
use crate::distributions::{Alternative, normal_p_value, students_t_p_value};
use crate::error::{StatsError, check_finite};

/// Outcome of a one-sample t test.
#[derive(Debug, Clone, PartialEq)]
pub struct TTestResult {
    pub t: f64,
    pub df: f64,
    pub p_value: f64,
    pub mean: f64,
    /// Standard error of the mean, sd(ddof = 1)/√n.
    pub se: f64,
}

/// `scipy.stats.ttest_1samp(sample, popmean, alternative=...)`. The p-value comes from the
/// tail itself (never 1 − cdf), so values far below 1e-16 keep their relative accuracy.
pub fn ttest_one_sample(sample: &[f64], popmean: f64, alternative: Alternative) -> Result<TTestResult, StatsError> {
    check_finite(sample, "sample")?;
    if !popmean.is_finite() {
        return Err(StatsError::NonFinite { what: "popmean" });
    }
    let n = sample.len();
    if n < 2 {
        return Err(StatsError::TooFewObservations { needed: 2, got: n });
    }
    let mean = sample.iter().sum::<f64>() / n as f64;
    let se = sample_std(sample)? / (n as f64).sqrt();
    if se == 0.0 {
        return Err(StatsError::ConstantInput { what: "sample" });
    }
    let t = (mean - popmean) / se;
    let df = (n - 1) as f64;
    Ok(TTestResult { t, df, p_value: students_t_p_value(t, df, alternative), mean, se })
}

/// p-value of a standard-normal statistic `z` (two-sided: 2·P(Z > |z|); greater: P(Z > z);
/// less: P(Z < z)), from the normal survival function.
pub fn z_test(z: f64, alternative: Alternative) -> Result<f64, StatsError> {
    if z.is_nan() {
        return Err(StatsError::NonFinite { what: "z" });
    }
    Ok(normal_p_value(z, alternative))
}
