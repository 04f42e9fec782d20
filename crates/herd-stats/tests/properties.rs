//! Invariants that hold for any input, checked with proptest.

use herd_stats::{Alternative, WilcoxonOptions, ZeroMethod, benjamini_hochberg, wilcoxon_one_sample, wilcoxon_paired};
use proptest::prelude::*;

proptest! {
    #[test]
    fn bh_q_values_are_bounded_and_order_preserving(p in prop::collection::vec(0.0f64..=1.0, 1..40)) {
        let q = benjamini_hochberg(&p).unwrap();
        for i in 0..p.len() {
            prop_assert!(q[i] >= p[i] && q[i] <= 1.0);
            for j in 0..p.len() {
                if p[i] < p[j] {
                    prop_assert!(q[i] <= q[j]);
                }
            }
        }
    }

    #[test]
    fn wilcoxon_is_antisymmetric_in_the_pair(
        pairs in prop::collection::vec((-20i32..20, -20i32..20), 1..40),
        zero in 0usize..3,
    ) {
        let x: Vec<f64> = pairs.iter().map(|p| f64::from(p.0) / 4.0).collect();
        let y: Vec<f64> = pairs.iter().map(|p| f64::from(p.1) / 4.0).collect();
        prop_assume!(x != y);
        let zero_method = [ZeroMethod::Wilcox, ZeroMethod::Pratt, ZeroMethod::Zsplit][zero];
        let greater = WilcoxonOptions { zero_method, alternative: Alternative::Greater, ..Default::default() };
        let less = WilcoxonOptions { alternative: Alternative::Less, ..greater };
        let two = WilcoxonOptions { alternative: Alternative::TwoSided, ..greater };
        let forward = wilcoxon_paired(&x, &y, &greater).unwrap();
        let backward = wilcoxon_paired(&y, &x, &less).unwrap();
        prop_assert!((forward.p_value - backward.p_value).abs() <= 1e-12);
        prop_assert!((forward.rank_biserial + backward.rank_biserial).abs() <= 1e-12);
        prop_assert!(forward.rank_biserial.abs() <= 1.0);
        let t1 = wilcoxon_paired(&x, &y, &two).unwrap();
        let t2 = wilcoxon_paired(&y, &x, &two).unwrap();
        prop_assert!((t1.p_value - t2.p_value).abs() <= 1e-12);
        prop_assert!((0.0..=1.0).contains(&t1.p_value));
        let d: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
        prop_assert_eq!(wilcoxon_one_sample(&d, &two).unwrap().p_value, t1.p_value);
    }
}
