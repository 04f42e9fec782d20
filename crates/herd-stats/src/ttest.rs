//! One-sample and Welch two-sample t tests, and z tests.

use crate::bootstrap::sample_std;
use crate::distributions::{Alternative, normal_p_value, students_t_p_value, students_t_quantile};
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

/// Outcome of Welch's two-sample t test (unequal variances).
#[derive(Debug, Clone, PartialEq)]
pub struct WelchResult {
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    pub p_value: f64,
    /// mean(a) − mean(b).
    pub mean_difference: f64,
    /// √(var(a)/n_a + var(b)/n_b), variances with ddof = 1.
    pub se: f64,
}

impl WelchResult {
    /// The two-sided interval of mean(a) − mean(b) at `level` (scipy's
    /// `ttest_ind(..., equal_var=False).confidence_interval(level)` for a two-sided test).
    pub fn confidence_interval(&self, level: f64) -> (f64, f64) {
        let half = students_t_quantile(0.5 + level / 2.0, self.df) * self.se;
        (self.mean_difference - half, self.mean_difference + half)
    }
}

/// `scipy.stats.ttest_ind(a, b, equal_var=False, alternative=...)`: is mean(a) − mean(b) zero? For
/// two independent samples (trial indices of two tasks, or of two families whose images are drawn
/// apart), where no unit of one is paired with a unit of the other.
pub fn ttest_welch(a: &[f64], b: &[f64], alternative: Alternative) -> Result<WelchResult, StatsError> {
    check_finite(a, "a")?;
    check_finite(b, "b")?;
    for sample in [a, b] {
        if sample.len() < 2 {
            return Err(StatsError::TooFewObservations { needed: 2, got: sample.len() });
        }
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let (va, vb) = (sample_std(a)?.powi(2) / na, sample_std(b)?.powi(2) / nb);
    let se = (va + vb).sqrt();
    if se == 0.0 {
        return Err(StatsError::ConstantInput { what: "both samples" });
    }
    let mean_difference = mean(a) - mean(b);
    let t = mean_difference / se;
    let df = (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0));
    Ok(WelchResult { t, df, p_value: students_t_p_value(t, df, alternative), mean_difference, se })
}

/// p-value of a standard-normal statistic `z` (two-sided: 2·P(Z > |z|); greater: P(Z > z);
/// less: P(Z < z)), from the normal survival function.
pub fn z_test(z: f64, alternative: Alternative) -> Result<f64, StatsError> {
    if z.is_nan() {
        return Err(StatsError::NonFinite { what: "z" });
    }
    Ok(normal_p_value(z, alternative))
}
