//! Rank correlation.

use crate::distributions::{Alternative, students_t_p_value};
use crate::error::{StatsError, check_finite, check_same_length};
use crate::rank::average_ranks;

/// Spearman's ρ with its p-value.
#[derive(Debug, Clone, PartialEq)]
pub struct SpearmanResult {
    pub rho: f64,
    /// t = ρ·√((n−2)/((1+ρ)(1−ρ))), infinite when |ρ| = 1.
    pub t: f64,
    pub p_value: f64,
    pub n: usize,
}

/// `scipy.stats.spearmanr(x, y, alternative=...)`: Pearson correlation of average ranks, p from
/// Student's t with n − 2 degrees of freedom. Ties use the tolerance of [`crate::rank`].
pub fn spearman(x: &[f64], y: &[f64], alternative: Alternative) -> Result<SpearmanResult, StatsError> {
    check_same_length("y", x.len(), y.len())?;
    check_finite(x, "x")?;
    check_finite(y, "y")?;
    let n = x.len();
    if n < 3 {
        return Err(StatsError::TooFewObservations { needed: 3, got: n });
    }
    let rx = average_ranks(x);
    let ry = average_ranks(y);
    if rx.tie_sizes.len() == 1 {
        return Err(StatsError::ConstantInput { what: "x" });
    }
    if ry.tie_sizes.len() == 1 {
        return Err(StatsError::ConstantInput { what: "y" });
    }
    let rho = pearson(&rx.ranks, &ry.ranks);
    let df = (n - 2) as f64;
    let t = rho * (df / ((rho + 1.0) * (1.0 - rho))).max(0.0).sqrt();
    Ok(SpearmanResult { rho, t, p_value: students_t_p_value(t, df, alternative), n })
}

/// Pearson correlation with numpy's `corrcoef` operation sequence: covariances scaled by
/// `1/(n−1)`, then divided by each standard deviation in turn, clipped to [−1, 1].
///
/// For ranks every centred sum is exact, so this reproduces scipy's ρ bit for bit, including its
/// rounding at perfect agreement (ρ may come out as 1 − 1e-16, and then the t transform gives a
/// tiny but nonzero p, exactly as scipy reports).
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    let inverse_dof = 1.0 / (n - 1.0);
    let (cxy, cxx, cyy) = (sxy * inverse_dof, sxx * inverse_dof, syy * inverse_dof);
    (cxy / cxx.sqrt() / cyy.sqrt()).clamp(-1.0, 1.0)
}
