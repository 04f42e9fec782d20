//! Table-driven corpus: every line of `tests/fixtures/*.jsonl` is a raw model output
//! and its expected parse. See `tests/fixtures/README.md` for the format.

use std::collections::BTreeMap;

use herd_parse::{ParseStatus, Roster, parse_allocation, parse_answer};
use serde_json::Value;

const ALLOCATIONS: &str = include_str!("fixtures/allocations.jsonl");
const ANSWERS: &str = include_str!("fixtures/answers.jsonl");

fn cases(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}", i + 1)))
        .collect()
}

fn raw_bytes(case: &Value) -> Vec<u8> {
    if let Some(s) = case["raw"].as_str() {
        return s.as_bytes().to_vec();
    }
    let hex = case["raw_hex"].as_str().expect("raw or raw_hex");
    assert!(hex.len().is_multiple_of(2), "odd hex length");
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
}

fn status(s: &str) -> ParseStatus {
    match s {
        "ok" => ParseStatus::Ok,
        "repaired" => ParseStatus::Repaired,
        "failed" => ParseStatus::Failed,
        other => panic!("unknown status {other}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn allocation_corpus() {
    let cases = cases(ALLOCATIONS);
    assert!(cases.len() >= 60, "corpus has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let source = case["source"].as_str().expect("source");
        assert!(matches!(source, "synthetic" | "smollm2"), "{name}: unknown source {source}");
        let roster = match case.get("ids").and_then(Value::as_array) {
            Some(ids) => Roster::new(ids.iter().map(|v| v.as_str().expect("id").to_owned())).expect("roster"),
            None => Roster::with_default_ids(20).expect("roster"),
        };
        let decider = case["decider"].as_str().expect("decider");
        let pool = case.get("pool").and_then(Value::as_f64).unwrap_or(100.0);
        let p = parse_allocation(raw_bytes(case), &roster, decider, pool);
        let e = &case["expect"];
        let mut bad = Vec::new();

        if p.status != status(e["status"].as_str().expect("status")) {
            bad.push(format!("status {} (reason {:?})", p.status, p.reason));
        }
        if let Some(f) = e.get("failure").and_then(Value::as_str) {
            let got = p.failure.as_ref().map(|f| f.code());
            if got != Some(f) {
                bad.push(format!("failure {got:?}, want {f}"));
            }
        }
        if let Some(want) = e.get("repairs").and_then(Value::as_array) {
            let want: Vec<&str> = want.iter().filter_map(Value::as_str).collect();
            let got: Vec<&str> = p.repairs.iter().map(|r| r.code()).collect();
            let (mut w, mut g) = (want.clone(), got.clone());
            w.sort_unstable();
            g.sort_unstable();
            if w != g {
                bad.push(format!("repairs {got:?}, want {want:?}"));
            }
        }
        if let Some(d) = e.get("dropped_keys").and_then(Value::as_u64)
            && u64::from(p.dropped_keys) != d
        {
            bad.push(format!("dropped_keys {}, want {d}", p.dropped_keys));
        }
        if let Some(s) = e.get("raw_sum").and_then(Value::as_f64)
            && !p.raw_sum.is_some_and(|r| close(r, s))
        {
            bad.push(format!("raw_sum {:?}, want {s}", p.raw_sum));
        }
        match (&p.allocation, e.get("allocation").and_then(Value::as_object)) {
            (Some(a), want) => {
                // Invariants: all recipients, non-negative, sum to the pool.
                let recipients = herd_parse::recipients(&roster, decider);
                let keys: Vec<&str> = a.keys().map(String::as_str).collect();
                let mut r = recipients.clone();
                r.sort_unstable();
                if keys != r {
                    bad.push(format!("keys {keys:?} are not the recipients"));
                }
                let sum: f64 = a.values().sum();
                if !close(sum, pool) || a.values().any(|v| *v < 0.0 || !v.is_finite()) {
                    bad.push(format!("allocation sums to {sum}"));
                }
                if p.status == ParseStatus::Failed && !p.filled {
                    bad.push("failed parse carries an allocation".into());
                }
                let want: BTreeMap<String, f64> = want
                    .map(|w| w.iter().map(|(k, v)| (k.clone(), v.as_f64().expect("number"))).collect())
                    .unwrap_or_default();
                if e.get("allocation").is_none() {
                    bad.push("allocation present but not expected".into());
                }
                for (k, v) in a {
                    let w = want.get(k).copied().unwrap_or(0.0);
                    if !close(*v, w) {
                        bad.push(format!("{k} = {v}, want {w}"));
                    }
                }
                for k in want.keys() {
                    if !a.contains_key(k) {
                        bad.push(format!("{k} missing"));
                    }
                }
            }
            (None, Some(_)) => bad.push(format!("no allocation ({:?})", p.reason)),
            (None, None) => {}
        }
        if p.status != ParseStatus::Ok && p.reason.is_none() {
            bad.push("no reason on a non-ok parse".into());
        }
        if !bad.is_empty() {
            failures.push(format!("{name}: {}", bad.join("; ")));
        }
    }
    assert_all_passed(&failures);
}

#[test]
fn answer_corpus() {
    let cases = cases(ANSWERS);
    assert!(cases.len() >= 20, "corpus has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let p = parse_answer(raw_bytes(case));
        let e = &case["expect"];
        let mut bad = Vec::new();
        if p.status != status(e["status"].as_str().expect("status")) {
            bad.push(format!("status {} ({:?})", p.status, p.reason));
        }
        let want = e.get("answer").and_then(Value::as_str);
        let got = p.answer.map(|c| c.to_string());
        if got.as_deref() != want {
            bad.push(format!("answer {got:?}, want {want:?}"));
        }
        if let Some(f) = e.get("failure").and_then(Value::as_str) {
            let got = p.failure.map(|f| f.code());
            if got != Some(f) {
                bad.push(format!("failure {got:?}, want {f}"));
            }
        }
        if !bad.is_empty() {
            failures.push(format!("{name}: {}", bad.join("; ")));
        }
    }
    assert_all_passed(&failures);
}

/// The corpus must cover what the issue lists; a fixture edit that drops a whole
/// category fails here.
#[test]
fn corpus_covers_categories() {
    let all = ALLOCATIONS.to_lowercase();
    for needle in [
        "<think>",
        "</think>",
        "<|begin_of_thought|>",
        "## thought",
        "```json",
        "trailing_comma",
        "single_quotes",
        "string_number",
        "non_integer",
        "negative",
        "non_finite",
        "lenient_key",
        "dropped_decider",
        "dropped_unknown",
        "\"raw_hex\"",
        "truncated",
        "\"empty\"",
        "renormalised",
        "multiple_objects",
        "1e300",
    ] {
        assert!(all.contains(needle), "no allocation fixture mentions {needle}");
    }
}

fn assert_all_passed(failures: &[String]) {
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}
