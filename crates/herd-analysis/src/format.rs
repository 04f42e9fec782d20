//! How numbers are written wherever herd prints them (claims, figure readings, tables): one
//! spelling of an estimate, a signed difference and a p-value.

/// A number for a reading: 3 significant decimals (scientific below 0.001), `n/a` when undefined.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    if v != 0.0 && v.abs() < 0.001 {
        return format!("{v:.1e}");
    }
    format!("{v:.3}")
}

/// [`num`] with a `+` on non-negative values, for differences.
pub fn signed(v: f64) -> String {
    // −0.0 ≥ 0 too, and would print "+-0.000".
    if v.is_finite() && v >= 0.0 { format!("+{}", num(v.abs())) } else { num(v) }
}

/// How a p-value of exactly 0 is written: below what the computation resolves. herd-stats takes every
/// tail through `erfc` or the incomplete beta, so its 0 is an underflow far below this; a p read from a
/// table computed as `1 − cdf` (as other tools may) cannot resolve values below double precision's
/// 2.2e-16. Either way the true p is positive and below 1e-16 (R's `format.pval` prints `< 2.2e-16`).
pub const P_ZERO: &str = "< 1e-16";

/// A p-value as papers print it; a p of exactly 0 as [`P_ZERO`], never `0`. After `p = `, use
/// [`p_is`], which writes `p < 1e-16` there.
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        "n/a".into()
    } else if p == 0.0 {
        P_ZERO.into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// `p = 0.012`, `p = 3.1e-5`, or `p < 1e-16` for a p of exactly 0 (see [`P_ZERO`]).
pub fn p_is(p: f64) -> String {
    if p == 0.0 { format!("p {P_ZERO}") } else { format!("p = {}", p_value(p)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_zero_prints_once_signed() {
        assert_eq!(signed(-0.0), "+0.000");
        assert_eq!(signed(0.25), "+0.250");
        assert_eq!(signed(-0.25), "-0.250");
    }

    #[test]
    fn a_p_of_zero_is_never_printed_as_zero() {
        assert_eq!(p_value(0.0), "< 1e-16");
        assert_eq!(p_is(0.0), "p < 1e-16");
        assert_eq!(p_is(0.0123), "p = 0.012");
        assert_eq!(p_is(3.14e-5), "p = 3.1e-5");
        assert_eq!(p_is(f64::NAN), "p = n/a");
        // The smallest positive double is a p, not a zero.
        assert_eq!(p_value(f64::from_bits(1)), "4.9e-324");
    }
}
