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
    if v.is_finite() && v >= 0.0 { format!("+{}", num(v)) } else { num(v) }
}

/// A p-value as papers print it.
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        "n/a".into()
    } else if p == 0.0 {
        "0".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}
