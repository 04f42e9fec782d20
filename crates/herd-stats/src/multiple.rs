//! Multiple-comparison adjustment.

use crate::error::StatsError;

/// Benjamini–Hochberg adjusted p-values (q-values), identical to statsmodels
/// `multipletests(p, method="fdr_bh")[1]`: q₍ᵢ₎ = min over j ≥ i of p₍ⱼ₎·m/j, capped at 1,
/// returned in input order.
///
/// NaN policy: NaN (or any value outside [0, 1]) is an error; filter missing tests out before
/// adjusting, since a NaN p-value has no rank among the others. An empty slice gives an empty
/// vector.
pub fn benjamini_hochberg(p_values: &[f64]) -> Result<Vec<f64>, StatsError> {
    check_p_values(p_values)?;
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    // statsmodels sorts with a stable mergesort; ties give equal q-values either way.
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let mut adjusted = vec![0.0; m];
    let mut running_min = f64::INFINITY;
    for rank in (0..m).rev() {
        let i = order[rank];
        let ecdf_factor = (rank + 1) as f64 / m as f64;
        running_min = running_min.min(p_values[i] / ecdf_factor);
        adjusted[i] = running_min.min(1.0);
    }
    Ok(adjusted)
}

/// Holm's step-down adjusted p-values (family-wise error), identical to statsmodels
/// `multipletests(p, method="holm")[1]`: p₍ᵢ₎·(m − i + 1) for the i-th smallest, made monotone by
/// a running maximum from the smallest up, capped at 1, returned in input order. Same NaN policy as
/// [`benjamini_hochberg`].
pub fn holm(p_values: &[f64]) -> Result<Vec<f64>, StatsError> {
    check_p_values(p_values)?;
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let mut adjusted = vec![0.0; m];
    let mut running_max: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running_max = running_max.max(p_values[i] * (m - rank) as f64);
        adjusted[i] = running_max.min(1.0);
    }
    Ok(adjusted)
}

fn check_p_values(p_values: &[f64]) -> Result<(), StatsError> {
    match p_values.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        Some(&bad) if bad.is_nan() => Err(StatsError::NonFinite { what: "p-values" }),
        Some(&bad) => Err(StatsError::InvalidPValue(bad)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn nan_is_rejected() {
        assert!(benjamini_hochberg(&[0.1, f64::NAN]).is_err());
        assert!(benjamini_hochberg(&[0.1, 1.5]).is_err());
        assert!(holm(&[0.1, f64::NAN]).is_err());
    }

    #[test]
    fn monotone_in_p() {
        let q = benjamini_hochberg(&[0.04, 0.01, 0.03, 0.02]).unwrap();
        assert!(q.iter().all(|&v| (v - 0.04).abs() < 1e-15));
    }
}
