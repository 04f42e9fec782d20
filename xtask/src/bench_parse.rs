//! `cargo xtask bench parse`: parses per second on herd-parse's fixture corpus, printed next to `serde_json`
//! parsing the same inputs in the same run (the peer: a strict parser that does less work and rejects most of
//! the corpus; the ratio says what tolerance costs).

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use herd_parse::{Roster, parse_allocation, parse_answer};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/herd-parse/tests/fixtures");
const DURATION: Duration = Duration::from_secs(2);

struct Case {
    raw: Vec<u8>,
    roster: Roster,
    decider: String,
    pool: f64,
}

fn load(name: &str) -> Result<Vec<Value>> {
    let path = format!("{FIXTURES}/{name}");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("bad line in {path}")))
        .collect()
}

fn raw_bytes(case: &Value) -> Vec<u8> {
    match case.get("raw_hex").and_then(Value::as_str) {
        Some(hex) => {
            (0..hex.len() / 2).filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect()
        }
        None => case.get("raw").and_then(Value::as_str).unwrap_or("").as_bytes().to_vec(),
    }
}

/// Calls `f` over all inputs until `DURATION` has passed; returns calls per second.
fn rate(count: usize, mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < DURATION {
        for i in 0..count {
            f(i);
        }
        calls += count as u64;
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

pub fn run() -> Result<()> {
    let allocations: Vec<Case> = load("allocations.jsonl")?
        .iter()
        .map(|c| {
            let ids: Vec<String> = match c.get("ids").and_then(Value::as_array) {
                Some(ids) => ids.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
                None => Roster::default_ids(20),
            };
            Ok(Case {
                raw: raw_bytes(c),
                roster: Roster::new(ids).context("fixture roster")?,
                decider: c.get("decider").and_then(Value::as_str).unwrap_or("agent_01").to_owned(),
                pool: c.get("pool").and_then(Value::as_f64).unwrap_or(100.0),
            })
        })
        .collect::<Result<_>>()?;
    let answers: Vec<Vec<u8>> = load("answers.jsonl")?.iter().map(raw_bytes).collect();
    let texts: Vec<String> = allocations.iter().map(|c| String::from_utf8_lossy(&c.raw).into_owned()).collect();
    let bytes: usize = allocations.iter().map(|c| c.raw.len()).sum();
    let ours = rate(allocations.len(), |i| {
        let c = &allocations[i];
        black_box(parse_allocation(black_box(&c.raw), &c.roster, &c.decider, c.pool));
    });
    let peer = rate(texts.len(), |i| {
        black_box(serde_json::from_str::<Value>(black_box(&texts[i])).is_ok());
    });
    let strict_ok = texts.iter().filter(|t| serde_json::from_str::<Value>(t).is_ok()).count();
    let answer_rate = rate(answers.len(), |i| {
        black_box(parse_answer(black_box(&answers[i])));
    });
    println!(
        "parse corpus: {} allocation outputs ({bytes} bytes), {} answer outputs",
        allocations.len(),
        answers.len()
    );
    println!("  herd-parse allocation     {ours:>12.0} parses/s");
    println!(
        "  serde_json::from_str peer {peer:>12.0} parses/s  (accepts {strict_ok} of {} outputs as-is)",
        texts.len()
    );
    println!("  ratio herd-parse / serde_json: {:.2}", ours / peer);
    println!("  herd-parse answer         {answer_rate:>12.0} parses/s");
    Ok(())
}
