//! Average ranks with a stated tie tolerance.
//!
//! Two values are the same value for ranking (and a difference is zero) when
//! `|a − b| ≤ max(1e-9 · max(|a|, |b|), 1e-9)`, i.e. Python's
//! `math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)`. Sorted values are linked to their
//! neighbour by that rule and a tie group is a maximal linked run. Seed means that are equal in
//! exact arithmetic but were summed in a different order differ by a few ulps; scipy, which ties
//! only on bit equality, would then switch between its exact and tie-corrected paths. herd does
//! not: such values always tie. On data without near-ties (all distinct values further apart than
//! the tolerance) the ranks are bit-identical to `scipy.stats.rankdata(method="average")`.

/// Relative and absolute tolerance under which two values count as tied.
pub const TIE_TOLERANCE: f64 = 1e-9;

/// `math.isclose(a, b, rel_tol=TIE_TOLERANCE, abs_tol=TIE_TOLERANCE)`.
pub fn approx_equal(a: f64, b: f64) -> bool {
    (a - b).abs() <= f64::max(TIE_TOLERANCE * a.abs().max(b.abs()), TIE_TOLERANCE)
}

/// Ranks and the sizes of the tie groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// Average rank (1-based) of every input value, in input order.
    pub ranks: Vec<f64>,
    /// Size of every tie group, smallest values first (singletons included).
    pub tie_sizes: Vec<usize>,
}

impl Ranking {
    pub fn has_ties(&self) -> bool {
        self.tie_sizes.iter().any(|&t| t > 1)
    }
}

/// Average ranks of finite `values`, ties as defined in the module docs.
pub fn average_ranks(values: &[f64]) -> Ranking {
    average_ranks_by(values, approx_equal)
}

/// Average ranks where `same(a, b)` decides whether sorted neighbours tie.
pub(crate) fn average_ranks_by(values: &[f64], same: impl Fn(f64, f64) -> bool) -> Ranking {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut tie_sizes = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && same(values[order[end - 1]], values[order[end]]) {
            end += 1;
        }
        // Same expression as scipy: first ordinal rank + (count − 1) / 2.
        let average = (start + 1) as f64 + ((end - start) as f64 - 1.0) / 2.0;
        for &i in &order[start..end] {
            ranks[i] = average;
        }
        tie_sizes.push(end - start);
        start = end;
    }
    Ranking { ranks, tie_sizes }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn scipy_rankdata_example() {
        let r = average_ranks(&[3.0, 2.0, 1.0, 2.0, 2.0, 2.0, 1.0]);
        assert_eq!(r.ranks, vec![7.0, 4.5, 1.5, 4.5, 4.5, 4.5, 1.5]);
        assert_eq!(r.tie_sizes, vec![2, 4, 1]);
        assert!(r.has_ties());
    }

    #[test]
    fn summation_order_differences_tie() {
        let a = 0.1 + 0.2 + 0.3;
        let b = 0.3 + 0.2 + 0.1;
        assert_ne!(a, b, "the premise: these differ in the last bit");
        let r = average_ranks(&[a, 5.0, b]);
        assert_eq!(r.ranks, vec![1.5, 3.0, 1.5]);
    }

    #[test]
    fn values_apart_do_not_tie() {
        let r = average_ranks(&[1.0, 1.0 + 1e-6, 2.0]);
        assert!(!r.has_ties());
    }
}
