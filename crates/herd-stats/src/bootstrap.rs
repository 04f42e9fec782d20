//! Seed-level (cluster) bootstrap.
//!
//! Clusters (e.g. society seeds) are resampled with replacement; the statistic is a closure
//! that receives the resampled cluster indices (duplicates included) and returns one number.
//! Resampling is reproducible from a `u64` seed (ChaCha20); [`bootstrap_replay`] takes an explicit
//! index matrix instead, e.g. the one numpy drew, so results can be compared with Python.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::error::{StatsError, check_finite};

/// Bootstrap replicates of a statistic.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapResult {
    /// The statistic on each resample, in resample order.
    pub replicates: Vec<f64>,
}

impl BootstrapResult {
    /// Bootstrap standard error: sample standard deviation of the replicates, ddof = 1
    /// (`numpy.std(replicates, ddof=1)`). Needs at least two replicates.
    pub fn standard_error(&self) -> Result<f64, StatsError> {
        sample_std(&self.replicates)
    }

    /// Percentile confidence interval at `level` (e.g. 0.95): the (1−level)/2 and (1+level)/2
    /// quantiles with numpy's default linear interpolation.
    pub fn percentile_interval(&self, level: f64) -> Result<(f64, f64), StatsError> {
        if !(level > 0.0 && level < 1.0) {
            return Err(StatsError::InvalidArgument(format!("confidence level must be in (0, 1), got {level}")));
        }
        let alpha = 1.0 - level;
        Ok((
            percentile(&self.replicates, 100.0 * alpha / 2.0)?,
            percentile(&self.replicates, 100.0 * (1.0 - alpha / 2.0))?,
        ))
    }
}

/// Resamples `n_clusters` clusters with replacement `n_resamples` times (seeded ChaCha20) and
/// evaluates `statistic` on each resample.
pub fn cluster_bootstrap<F>(
    n_clusters: usize,
    n_resamples: usize,
    seed: u64,
    statistic: F,
) -> Result<BootstrapResult, StatsError>
where
    F: FnMut(&[usize]) -> f64,
{
    let indices = cluster_resamples(n_clusters, n_resamples, seed)?;
    bootstrap_replay(n_clusters, &indices, statistic)
}

/// The resamples [`cluster_bootstrap`] draws (one row of cluster indices per resample), for
/// reuse with [`bootstrap_replay`] when several statistics share a seed and cluster count.
pub fn cluster_resamples(n_clusters: usize, n_resamples: usize, seed: u64) -> Result<Vec<Vec<usize>>, StatsError> {
    if n_clusters == 0 || n_resamples == 0 {
        return Err(StatsError::EmptyInput);
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    Ok((0..n_resamples).map(|_| (0..n_clusters).map(|_| rng.random_range(0..n_clusters)).collect()).collect())
}

/// Evaluates `statistic` on given resamples (one row of cluster indices per resample).
pub fn bootstrap_replay<F>(
    n_clusters: usize,
    indices: &[Vec<usize>],
    mut statistic: F,
) -> Result<BootstrapResult, StatsError>
where
    F: FnMut(&[usize]) -> f64,
{
    if indices.is_empty() {
        return Err(StatsError::EmptyInput);
    }
    let mut replicates = Vec::with_capacity(indices.len());
    for (resample, row) in indices.iter().enumerate() {
        if let Some(&bad) = row.iter().find(|&&i| i >= n_clusters) {
            return Err(StatsError::InvalidArgument(format!(
                "cluster index {bad} out of range for {n_clusters} clusters in resample {resample}"
            )));
        }
        let value = statistic(row);
        if !value.is_finite() {
            return Err(StatsError::NonFiniteStatistic { resample });
        }
        replicates.push(value);
    }
    Ok(BootstrapResult { replicates })
}

/// Sample standard deviation with ddof = 1.
pub fn sample_std(values: &[f64]) -> Result<f64, StatsError> {
    check_finite(values, "values")?;
    let n = values.len();
    if n < 2 {
        return Err(StatsError::TooFewObservations { needed: 2, got: n });
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    Ok((ss / (n - 1) as f64).sqrt())
}

/// `numpy.percentile(values, q)` with the default `method="linear"`; `q` in [0, 100].
pub fn percentile(values: &[f64], q: f64) -> Result<f64, StatsError> {
    check_finite(values, "values")?;
    if values.is_empty() {
        return Err(StatsError::EmptyInput);
    }
    if !(0.0..=100.0).contains(&q) {
        return Err(StatsError::InvalidArgument(format!("percentile must be in [0, 100], got {q}")));
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let position = (sorted.len() - 1) as f64 * (q / 100.0);
    let lower = position.floor() as usize;
    let upper = (lower + 1).min(sorted.len() - 1);
    let t = position - lower as f64;
    let (a, b) = (sorted[lower], sorted[upper]);
    // numpy's _lerp: interpolate from the nearer end.
    Ok(if t >= 0.5 { b - (b - a) * (1.0 - t) } else { a + (b - a) * t })
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn same_seed_same_resamples() {
        let mean = |idx: &[usize]| idx.iter().map(|&i| i as f64).sum::<f64>() / idx.len() as f64;
        let a = cluster_bootstrap(30, 50, 7, mean).unwrap();
        let b = cluster_bootstrap(30, 50, 7, mean).unwrap();
        let c = cluster_bootstrap(30, 50, 8, mean).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rejects_bad_indices_and_nan() {
        assert!(bootstrap_replay(2, &[vec![0, 2]], |_| 1.0).is_err());
        assert!(bootstrap_replay(2, &[vec![0, 1]], |_| f64::NAN).is_err());
        assert!(percentile(&[], 50.0).is_err());
    }
}
