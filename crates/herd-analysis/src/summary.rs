//! The summary arithmetic that claims and figures share: means with 95% t-intervals over
//! independent units.

use herd_stats::sample_std;

/// Normal quantile of the 95% intervals (scipy's norm.ppf(0.975)).
pub const Z95: f64 = 1.959_963_984_540_054;

/// Student's t quantile (lower-tail probability `q`): herd-stats' `students_t_quantile`, golden
/// against scipy's `t.ppf`.
pub fn t_quantile(q: f64, df: f64) -> f64 {
    herd_stats::students_t_quantile(q, df)
}

/// Two-sided p of a t statistic with `df` degrees of freedom: 2·P(T ≤ −|t|).
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    2.0 * herd_stats::students_t_cdf(-t.abs(), df)
}

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

/// The median of `values` (numpy's linear interpolation); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    herd_stats::percentile(&sorted, 50.0).unwrap_or(f64::NAN)
}
