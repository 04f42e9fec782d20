//! Tail probabilities used by the tests, all from `statrs`.
//!
//! Both tails are taken directly (`sf` for the upper tail, `cdf` for the lower; statrs evaluates
//! each through `erfc` or the regularised incomplete beta of that tail), never as `1 − cdf`, so
//! p-values far below 1e-16 keep their relative accuracy. `golden/ttest.json` checks statrs'
//! Student-t tails against scipy down to ~1e-300 and the normal tails to z = ±40.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Which tail(s) a test p-value is taken from (scipy's `alternative`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Alternative {
    #[default]
    TwoSided,
    /// The statistic is larger than under the null (upper tail).
    Greater,
    /// The statistic is smaller than under the null (lower tail).
    Less,
}

fn standard_normal() -> Normal {
    Normal::standard()
}

/// P(Z > z) for a standard normal Z.
pub fn normal_sf(z: f64) -> f64 {
    standard_normal().sf(z)
}

/// P(Z ≤ z) for a standard normal Z.
pub fn normal_cdf(z: f64) -> f64 {
    standard_normal().cdf(z)
}

fn students_t(df: f64) -> Option<StudentsT> {
    StudentsT::new(0.0, 1.0, df).ok()
}

/// P(T > t) for Student's t with `df` degrees of freedom (NaN unless `df > 0`).
pub fn students_t_sf(t: f64, df: f64) -> f64 {
    students_t(df).map_or(f64::NAN, |d| d.sf(t))
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom (NaN unless `df > 0`).
pub fn students_t_cdf(t: f64, df: f64) -> f64 {
    students_t(df).map_or(f64::NAN, |d| d.cdf(t))
}

/// The `q` quantile of Student's t with `df` degrees of freedom (scipy's `t.ppf`), by bisection on
/// the upper tail (`sf`, accurate where `1 − cdf` is not) rather than statrs' inverse, whose accuracy
/// is not documented; the lower half by symmetry. NaN unless `0 < q < 1` and `df > 0`.
pub fn students_t_quantile(q: f64, df: f64) -> f64 {
    if students_t(df).is_none() {
        return f64::NAN;
    }
    symmetric_quantile(q, |x| students_t_sf(x, df))
}

/// The `q` quantile of the standard normal (scipy's `norm.ppf`), by the same bisection on its upper
/// tail. NaN unless `0 < q < 1`.
pub fn normal_quantile(q: f64) -> f64 {
    symmetric_quantile(q, normal_sf)
}

/// The `q` quantile of a distribution symmetric about 0 with upper tail `sf`: bisection for the x > 0
/// with `sf(x)` the smaller tail, negated below the median.
fn symmetric_quantile(q: f64, sf: impl Fn(f64) -> f64) -> f64 {
    if !(q > 0.0 && q < 1.0) {
        return f64::NAN;
    }
    if q == 0.5 {
        return 0.0;
    }
    let upper = |tail: f64| {
        let mut hi = 1.0_f64;
        while sf(hi) > tail && hi < 1e300 {
            hi *= 2.0;
        }
        let mut lo = 0.0_f64;
        for _ in 0..2000 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            if sf(mid) > tail { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    };
    if q > 0.5 { upper(1.0 - q) } else { -upper(q) }
}

/// p-value of a statistic with a symmetric null distribution (scipy's `_get_pvalue`).
pub(crate) fn p_value(statistic: f64, alternative: Alternative, sf: impl Fn(f64) -> f64) -> f64 {
    match alternative {
        Alternative::Less => sf(-statistic),
        Alternative::Greater => sf(statistic),
        Alternative::TwoSided => 2.0 * sf(statistic.abs()),
    }
}

/// p-value of a z statistic.
pub fn normal_p_value(z: f64, alternative: Alternative) -> f64 {
    p_value(z, alternative, normal_sf)
}

/// p-value of a t statistic with `df` degrees of freedom.
pub fn students_t_p_value(t: f64, df: f64, alternative: Alternative) -> f64 {
    p_value(t, alternative, |x| students_t_sf(x, df))
}

#[cfg(test)]
mod unit {
    use super::*;

    /// scipy.stats.t.cdf(-50, 29) = 5.374311992786222e-30: the lower tail is not 1 − sf.
    #[test]
    fn far_lower_tail_is_relative_accurate() {
        let herd = students_t_cdf(-50.0, 29.0);
        assert!(((herd - 5.374311992786222e-30) / 5.374311992786222e-30).abs() < 1e-6);
        assert!(students_t_sf(f64::INFINITY, 5.0) == 0.0);
        assert!(students_t_sf(1.0, 0.0).is_nan());
    }
}
