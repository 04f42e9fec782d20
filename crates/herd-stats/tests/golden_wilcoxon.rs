//! Wilcoxon signed-rank against scipy 1.17.1 (`golden/wilcoxon.json`).

mod common;

use common::*;
use herd_stats::{Alternative, WilcoxonMethod, WilcoxonOptions, ZeroMethod, wilcoxon_one_sample, wilcoxon_paired};

fn options(case: &serde_json::Value) -> WilcoxonOptions {
    WilcoxonOptions {
        zero_method: match case["zero_method"].as_str().unwrap() {
            "wilcox" => ZeroMethod::Wilcox,
            "pratt" => ZeroMethod::Pratt,
            "zsplit" => ZeroMethod::Zsplit,
            other => panic!("zero_method {other}"),
        },
        correction: case["correction"].as_bool().unwrap(),
        alternative: alternative(&case["alternative"]),
        method: match case["method"].as_str().unwrap() {
            "auto" => WilcoxonMethod::Auto,
            "exact" => WilcoxonMethod::Exact,
            "asymptotic" => WilcoxonMethod::Asymptotic,
            other => panic!("method {other}"),
        },
    }
}

#[test]
fn matches_scipy_on_every_branch() {
    let fixture = load("wilcoxon");
    let datasets = cases(&fixture, "datasets");
    let all = cases(&fixture, "cases");
    assert!(all.len() > 5000, "only {} cases read", all.len());
    let mut seen_methods = std::collections::BTreeSet::new();
    for (k, case) in all.iter().enumerate() {
        let ds = &datasets[case["dataset"].as_u64().unwrap() as usize];
        let opts = options(case);
        let x = nums(&ds["x"]);
        let result = match ds["kind"].as_str().unwrap() {
            "one_sample" => wilcoxon_one_sample(&x, &opts),
            _ => wilcoxon_paired(&x, &nums(&ds["y"]), &opts),
        }
        .unwrap_or_else(|e| panic!("case {k} ({}): {e}", ds["label"]));
        let what = format!("case {k} {} {:?}", ds["label"], opts);
        let expected_method = match case["method_used"].as_str().unwrap() {
            "exact" => WilcoxonMethod::Exact,
            "asymptotic" => WilcoxonMethod::Asymptotic,
            "permutation" => WilcoxonMethod::Permutation,
            other => panic!("method_used {other}"),
        };
        assert_eq!(result.method_used, expected_method, "{what}");
        seen_methods.insert(format!("{expected_method:?}"));
        assert_close(result.statistic, num(&case["statistic"]), 0.0, &format!("{what} statistic"));
        assert_p(result.p_value, num(&case["pvalue"]), &format!("{what} p"));
        if let Some(z) = case.get("zstatistic") {
            let herd_z = result.z.expect("asymptotic result has z");
            assert_close(herd_z, num(z), ESTIMATE_ABS_FLOOR, &format!("{what} z"));
        }
        // Effect size follows from the reported rank sums.
        let (rp, rm) = (result.r_plus, result.r_minus);
        assert!((result.rank_biserial - (rp - rm) / (rp + rm)).abs() < 1e-12);
        if opts.alternative == Alternative::TwoSided {
            assert_eq!(result.statistic, rp.min(rm));
        }
    }
    assert_eq!(seen_methods.len(), 3, "fixtures must reach exact, permutation and asymptotic");
}

#[test]
fn summation_order_still_ties() {
    let fixture = load("wilcoxon");
    let t = &fixture["tie_robustness"];
    let tied = nums(&t["tied"]);
    let perturbed = nums(&t["perturbed"]);
    assert_ne!(tied[1], perturbed[1], "fixture premise: last-bit difference");
    let expected_p = num(&t["scipy_tied"]["pvalue"]);
    assert_ne!(expected_p, num(&t["scipy_perturbed"]["pvalue"]), "scipy flips paths");
    for values in [&tied, &perturbed] {
        let r = wilcoxon_one_sample(values, &WilcoxonOptions::default()).unwrap();
        assert!(r.has_ties);
        assert_eq!(r.method_used, WilcoxonMethod::Permutation);
        assert_p(r.p_value, expected_p, "tie-robust p");
        assert_eq!(r.statistic, num(&t["scipy_tied"]["statistic"]));
    }
}

#[test]
fn paired_zero_by_tolerance() {
    // 0.1 + 0.2 − 0.3 is 5.6e-17, not 0: a paired difference that is zero in exact arithmetic.
    let x = [0.1 + 0.2, 1.0, 2.0, 3.5];
    let y = [0.3, 0.0, 0.5, 1.0];
    let r = wilcoxon_paired(&x, &y, &WilcoxonOptions::default()).unwrap();
    assert_eq!(r.n_zero, 1);
    assert_eq!(r.r_plus + r.r_minus, 6.0, "three nonzero ranks under wilcox");
}

#[test]
fn rejects_bad_input() {
    let o = WilcoxonOptions::default();
    assert!(wilcoxon_one_sample(&[], &o).is_err());
    assert!(wilcoxon_one_sample(&[0.0, 0.0], &o).is_err());
    assert!(wilcoxon_one_sample(&[1.0, f64::NAN], &o).is_err());
    assert!(wilcoxon_paired(&[1.0, 2.0], &[1.0], &o).is_err());
    let perm = WilcoxonOptions { method: WilcoxonMethod::Permutation, ..o };
    assert!(wilcoxon_one_sample(&vec![1.0; 30], &perm).is_err());
}
