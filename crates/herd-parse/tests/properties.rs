//! Property tests: no input panics, and every produced allocation is non-negative,
//! over the recipients only, and sums to the pool.

use std::collections::BTreeMap;

use herd_parse::{
    AllocationParse, ParseStatus, Roster, parse_allocation, parse_answer, recipients, round_to_pool, strip_reasoning,
};
use proptest::prelude::*;

fn roster() -> Roster {
    Roster::with_default_ids(20).expect("20 ids")
}

/// The invariant every parse must satisfy.
fn check_invariants(p: &AllocationParse, roster: &Roster, decider: &str, pool: f64) {
    match &p.allocation {
        None => assert_eq!(p.status, ParseStatus::Failed, "{p:?}"),
        Some(a) => {
            assert!(p.status != ParseStatus::Failed || p.filled, "{p:?}");
            let mut want = recipients(roster, decider);
            want.sort_unstable();
            let keys: Vec<&str> = a.keys().map(String::as_str).collect();
            assert_eq!(keys, want, "allocation keys must be exactly the recipients");
            for (k, v) in a {
                assert!(v.is_finite() && *v >= 0.0, "{k} = {v}");
            }
            let sum: f64 = a.values().sum();
            assert!((sum - pool).abs() <= 1e-9 * pool, "sum {sum} != pool {pool}");
        }
    }
    if p.status == ParseStatus::Ok {
        assert!(p.reason.is_none() && p.repairs.is_empty() && p.failure.is_none());
    } else {
        assert!(p.reason.is_some(), "{p:?}");
    }
    assert_eq!(p.failure.is_some(), p.status == ParseStatus::Failed, "{p:?}");
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..=20).prop_map(|n| format!("agent_{n:02}")),
        (1u32..=20).prop_map(|n| format!("{n}")),
        (1u32..=20).prop_map(|n| format!("Agent {n}")),
        (1u32..=20).prop_map(|n| format!("P{n}")),
        (0u32..200).prop_map(|n| format!("agent_{n}")),
        "[a-zA-Z_ ]{0,12}",
        any::<String>(),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..=100).prop_map(|n| n.to_string()),
        (0u32..=100).prop_map(|n| format!("\"{n}\"")),
        any::<f64>().prop_map(|f| format!("{f:e}")),
        (-1000.0f64..1000.0).prop_map(|f| f.to_string()),
        Just("NaN".to_owned()),
        Just("-Infinity".to_owned()),
        Just("1e400".to_owned()),
        Just("1.7e308".to_owned()),
        Just("null".to_owned()),
        Just("-0".to_owned()),
        Just("+.5".to_owned()),
        "[0-9eE.+%-]{1,8}",
    ]
}

/// JSON-ish text: objects with realistic and broken keys, values and separators,
/// wrapped in prose, traces and fences, possibly truncated.
fn jsonish() -> impl Strategy<Value = String> {
    let entry =
        (key(), number(), prop::sample::select(vec!["\"", "'", ""])).prop_map(|(k, v, q)| format!("{q}{k}{q}: {v}"));
    let object =
        (prop::collection::vec(entry, 0..25), prop::sample::select(vec![", ", ",", "\n", ",\n  "]), any::<bool>())
            .prop_map(|(es, sep, trailing)| format!("{{{}{}}}", es.join(sep), if trailing { "," } else { "" }));
    (
        prop::collection::vec(object, 1..3),
        prop::sample::select(vec![
            "",
            "<think>",
            "</think>",
            "<think>hmm</think>",
            "```json\n",
            "Here you go: ",
            "{",
            "}",
            "<|im_end|>",
            "◁think▷",
            "## Thought\n",
            "## Solution\n",
            "'",
            "\"",
        ]),
        prop::sample::select(vec!["", "```", "</think>", "<think>", "}", " thanks!", "{\"a\":"]),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(objects, pre, post, cut, truncate)| {
            let mut s = format!("{pre}{}{post}", objects.join("\n"));
            if truncate && !s.is_empty() {
                let mut at = cut.index(s.len());
                while !s.is_char_boundary(at) {
                    at -= 1;
                }
                s.truncate(at);
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600),
                                   decider in 1u32..=20) {
        let r = roster();
        let d = format!("agent_{decider:02}");
        let p = parse_allocation(&bytes, &r, &d, 100.0);
        check_invariants(&p, &r, &d, 100.0);
        let filled = p.with_uniform_fill(&r, &d, 100.0);
        check_invariants(&filled, &r, &d, 100.0);
        prop_assert!(filled.allocation.is_some());
        let _ = parse_answer(&bytes);
        let _ = strip_reasoning(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn jsonish_strings_keep_invariants(text in jsonish(), decider in 1u32..=20,
                                       pool in prop::sample::select(vec![100.0, 1.0, 7.5, 1000.0])) {
        let r = roster();
        let d = format!("agent_{decider:02}");
        let p = parse_allocation(&text, &r, &d, pool);
        check_invariants(&p, &r, &d, pool);
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        let r = roster();
        let p = parse_allocation(&text, &r, "agent_01", 100.0);
        check_invariants(&p, &r, "agent_01", 100.0);
        let a = parse_answer(&text);
        prop_assert_eq!(a.answer.is_some(), a.status != ParseStatus::Failed);
    }

    /// A well-formed allocation is read back exactly (up to renormalisation).
    #[test]
    fn wellformed_allocations_round_trip(values in prop::collection::btree_map(2u32..=20, 0u32..=100, 1..19)) {
        prop_assume!(values.values().any(|v| *v > 0));
        let r = roster();
        let obj: BTreeMap<String, u32> =
            values.iter().map(|(k, v)| (format!("agent_{k:02}"), *v)).collect();
        let text = serde_json::to_string(&obj).expect("json");
        let p = parse_allocation(&text, &r, "agent_01", 100.0);
        check_invariants(&p, &r, "agent_01", 100.0);
        let sum: u32 = obj.values().sum();
        if sum == 100 {
            prop_assert_eq!(p.status, ParseStatus::Ok);
        } else {
            prop_assert_eq!(p.status, ParseStatus::Repaired);
        }
        let a = p.allocation.expect("allocation");
        for (k, v) in &obj {
            let want = f64::from(*v) * 100.0 / f64::from(sum);
            prop_assert!((a[k] - want).abs() < 1e-9, "{} = {}, want {}", k, a[k], want);
        }
    }

    #[test]
    fn rounding_preserves_the_pool(values in prop::collection::vec(prop_oneof![
                                        0.0f64..100.0, Just(0.0), any::<f64>()], 1..30),
                                   pool in 0u32..10_000) {
        let m: BTreeMap<String, f64> =
            values.iter().enumerate().map(|(i, v)| (format!("k{i:02}"), *v)).collect();
        match round_to_pool(&m, pool) {
            None => prop_assert!(m.values().all(|v| !(v.is_finite() && *v > 0.0))),
            Some(rounded) => {
                prop_assert_eq!(rounded.values().map(|v| u64::from(*v)).sum::<u64>(), u64::from(pool));
                prop_assert_eq!(rounded.len(), m.len());
            }
        }
    }
}

#[test]
fn adversarial_sizes_are_fast() {
    let r = roster();
    let inputs = [
        "{".repeat(200_000),
        "}".repeat(200_000),
        "{\"a\":".repeat(100_000),
        "{'".repeat(100_000),
        "<think>".repeat(50_000),
        "</think>".repeat(50_000),
        "<|".repeat(100_000),
        "```".repeat(100_000),
        format!("{{{}}}", "\"agent_02\": 1, ".repeat(50_000)),
        "{} ".repeat(100_000),
        "A B ".repeat(50_000),
    ];
    let start = std::time::Instant::now();
    for s in &inputs {
        let p = parse_allocation(s, &r, "agent_01", 100.0);
        check_invariants(&p, &r, "agent_01", 100.0);
        let _ = parse_answer(s);
    }
    // Generous bound (debug build, shared CI cores): quadratic behaviour on these
    // inputs would take minutes.
    assert!(start.elapsed().as_secs() < 20, "took {:?}", start.elapsed());
}
