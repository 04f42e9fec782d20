//! The noncentral F distribution (scipy's `ncf`) and the interval for its noncentrality that an observed
//! F gives: how large a sum of squared effects the F statistic of a one-way layout allows.
//!
//! No well-kept crate has it (statrs stops at the central F), so the CDF is the Poisson mixture of
//! regularised incomplete betas, summed outward from the Poisson mode, each term from statrs'
//! `beta_reg`; `golden/noncentral_f.json` checks it and the interval against scipy.

use statrs::function::beta::checked_beta_reg;
use statrs::function::gamma::ln_gamma;

/// P(F ≤ f) for the noncentral F with `d1` and `d2` degrees of freedom and noncentrality `nc` (scipy's
/// `ncf.cdf(f, d1, d2, nc)`): Σ_j Poisson(j; nc/2) · I_x(d1/2 + j, d2/2), x = d1·f / (d1·f + d2). NaN
/// unless `d1 > 0`, `d2 > 0`, `nc ≥ 0` and `f` is a number.
pub fn noncentral_f_cdf(f: f64, d1: f64, d2: f64, nc: f64) -> f64 {
    if !(d1 > 0.0 && d2 > 0.0 && nc >= 0.0 && nc.is_finite()) || f.is_nan() {
        return f64::NAN;
    }
    if f <= 0.0 {
        return 0.0;
    }
    if f == f64::INFINITY {
        return 1.0;
    }
    let x = d1 * f / (d1 * f + d2);
    let (a, b) = (d1 / 2.0, d2 / 2.0);
    let term = |j: f64| checked_beta_reg(a + j, b, x).unwrap_or(f64::NAN);
    let lambda = nc / 2.0;
    if lambda == 0.0 {
        return term(0.0);
    }
    // The Poisson weights from the mode outward (each from its neighbour), so that a large noncentrality
    // neither underflows the first weight nor needs thousands of terms where nothing is left. Below the
    // mode every term is summed: there the incomplete betas grow as the weights fall, and for a small F
    // the sum lies there. Above it both fall, so the sum stops once a term no longer counts.
    let mode = lambda.floor();
    let mode_weight = (-lambda + mode * lambda.ln() - ln_gamma(mode + 1.0)).exp();
    let mut sum = mode_weight * term(mode);
    let (mut weight, mut j) = (mode_weight, mode);
    while j > 0.0 {
        weight *= j / lambda;
        j -= 1.0;
        sum += weight * term(j);
    }
    let (mut weight, mut j) = (mode_weight, mode);
    loop {
        j += 1.0;
        weight *= lambda / j;
        let added = weight * term(j);
        sum += added;
        if added.is_nan() || added <= 1e-17 * sum || j > mode + 1e6 {
            break;
        }
    }
    sum.clamp(0.0, 1.0)
}

/// The interval of noncentralities consistent with an observed `f` at `level` (0.9: the 90% interval),
/// by inverting [`noncentral_f_cdf`], which falls as the noncentrality grows: the lower end has
/// P(F ≤ f) = (1 + level)/2, the upper end (1 − level)/2, each 0 where even a noncentrality of 0 leaves
/// P(F ≤ f) below it (an F that small is consistent with no effect). `None` unless the degrees of freedom
/// are positive, `f` is finite and non-negative and `0 < level < 1`.
pub fn noncentrality_interval(f: f64, d1: f64, d2: f64, level: f64) -> Option<(f64, f64)> {
    if !(d1 > 0.0 && d2 > 0.0 && f.is_finite() && f >= 0.0 && level > 0.0 && level < 1.0) {
        return None;
    }
    let solve = |p: f64| -> f64 {
        if noncentral_f_cdf(f, d1, d2, 0.0) <= p {
            return 0.0;
        }
        let mut hi = 1.0_f64;
        while noncentral_f_cdf(f, d1, d2, hi) > p {
            hi *= 2.0;
            if hi > 1e12 {
                return f64::NAN;
            }
        }
        let mut lo = 0.0_f64;
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            if noncentral_f_cdf(f, d1, d2, mid) > p { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    };
    let (low, high) = (solve((1.0 + level) / 2.0), solve((1.0 - level) / 2.0));
    (low.is_finite() && high.is_finite()).then_some((low, high))
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_noncentrality_of_zero_is_the_central_f_and_more_of_it_moves_the_mass_up() {
        // scipy.stats.f.cdf(2.0, 3, 10) = 0.8219925926248245
        assert!((noncentral_f_cdf(2.0, 3.0, 10.0, 0.0) - 0.8219925926248245).abs() < 1e-12);
        let cdfs: Vec<f64> = [0.0, 1.0, 5.0, 50.0].iter().map(|&nc| noncentral_f_cdf(2.0, 3.0, 10.0, nc)).collect();
        assert!(cdfs.windows(2).all(|w| w[1] < w[0]), "{cdfs:?}");
        assert_eq!(noncentral_f_cdf(0.0, 3.0, 10.0, 4.0), 0.0);
        assert!(noncentral_f_cdf(1.0, 0.0, 10.0, 4.0).is_nan());
    }

    #[test]
    fn an_f_below_its_null_median_bounds_the_noncentrality_from_zero() {
        let (low, high) = noncentrality_interval(0.5, 10.0, 80.0, 0.9).unwrap();
        assert_eq!(low, 0.0);
        assert!(high > 0.0 && (noncentral_f_cdf(0.5, 10.0, 80.0, high) - 0.05).abs() < 1e-9);
        assert!(noncentrality_interval(f64::NAN, 10.0, 80.0, 0.9).is_none());
    }
}
