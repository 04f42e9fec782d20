//! Area under a curve.

use crate::error::{StatsError, check_finite, check_same_length};

/// `numpy.trapezoid(y, x)`: Σ (x[i+1] − x[i])·(y[i] + y[i+1])/2. Fewer than two points give 0,
/// as numpy; `x` need not be increasing (decreasing x gives a negative area, as numpy).
pub fn trapezoid(y: &[f64], x: &[f64]) -> Result<f64, StatsError> {
    check_same_length("x", y.len(), x.len())?;
    check_finite(y, "y")?;
    check_finite(x, "x")?;
    Ok(x.windows(2).zip(y.windows(2)).map(|(xs, ys)| (xs[1] - xs[0]) * (ys[0] + ys[1]) / 2.0).sum())
}

/// `numpy.trapezoid(y, dx=dx)` for equally spaced points.
pub fn trapezoid_uniform(y: &[f64], dx: f64) -> Result<f64, StatsError> {
    check_finite(y, "y")?;
    if !dx.is_finite() {
        return Err(StatsError::NonFinite { what: "dx" });
    }
    Ok(y.windows(2).map(|w| dx * (w[0] + w[1]) / 2.0).sum())
}
