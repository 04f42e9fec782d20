//! Conformity trials per second through the openai backend against llama.cpp's server on this machine
//! (the default model), at 1, 4 and 16 requests in flight, with herd's own candle backend on the same
//! prompts as the peer. Run by `cargo xtask bench openai`, which passes the prompts file:
//!
//! herd prompts --experiment data/experiments/conformity.toml --family group_size --modality text --limit 48 --jsonl > p.jsonl
//! cargo run --release -p herd-infer --example bench_openai -- p.jsonl

use anyhow::{Context, Result};
use herd_backend::{Backend, ModelFiles, ModelRegistry, ScoreRequest, fetch_model};
use herd_infer::{LoadOptions, LocalModel, OpenAiBackend, OpenAiOptions, ServedModel};
use herd_prompts::{ChatPrompt, Part};
use herd_test_support::llama_server;
use serde_json::Value;
use std::time::Instant;

/// The text parts of one `herd prompts --jsonl` line's messages, as a one-message prompt.
fn prompt_of(line: &str) -> Result<ChatPrompt> {
    let v: Value = serde_json::from_str(line)?;
    let text = v["messages"][0]["content"]
        .as_array()
        .context("a prompt without content")?
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Ok(ChatPrompt::user(vec![Part::Text { text }]))
}

fn main() -> Result<()> {
    let prompts = std::env::args().nth(1).context("usage: bench_openai PROMPTS.jsonl")?;
    let lines = std::fs::read_to_string(&prompts).with_context(|| format!("reading {prompts}"))?;
    let registry = ModelRegistry::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/models.toml").as_ref())?;
    let entry = registry.get(herd_backend::DEFAULT_MODEL)?.clone();
    let gguf = fetch_model(&entry)?;
    let requests: Vec<ScoreRequest> = lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Ok(ScoreRequest::new(prompt_of(l)?, vec!["A".into(), "B".into()])))
        .collect::<Result<_>>()?;
    anyhow::ensure!(!requests.is_empty(), "herd prompts printed no prompts");

    println!("starting llama.cpp's server (llama-cpp-python, 2 threads) on the default model…");
    let server = llama_server::LlamaServer::start(&gguf);
    let served = ServedModel { alias: entry.alias.clone(), family: entry.family.name().into(), vision: false };
    let mut rates = Vec::new();
    for in_flight in [1usize, 4, 16] {
        let options = OpenAiOptions {
            max_in_flight: in_flight,
            adaptive: false,
            ..OpenAiOptions::new(vec![server.url()], entry.alias.clone())
        };
        let mut backend = OpenAiBackend::new(served.clone(), options, None)?;
        backend.score(&requests[..2])?; // warm the server
        let started = Instant::now();
        backend.score(&requests)?;
        let rate = requests.len() as f64 / started.elapsed().as_secs_f64();
        println!("openai backend, {in_flight:>2} in flight: {rate:7.2} trials/s");
        rates.push((in_flight, rate));
    }
    drop(server);

    let mut local = LocalModel::load(&entry, &ModelFiles::Gguf(gguf), &LoadOptions::default())?;
    local.score(&requests[..2])?;
    let started = Instant::now();
    // One trial per call, as the server sees them: no shared-prefix reuse across requests.
    for request in &requests {
        local.score(std::slice::from_ref(request))?;
    }
    let local_rate = requests.len() as f64 / started.elapsed().as_secs_f64();
    println!("candle backend, in process:   {local_rate:7.2} trials/s");
    println!();
    println!("{} conformity trials (group size, text modality), SmolLM2-135M Q4_1, this machine", requests.len());
    let one = rates[0].1;
    for (in_flight, rate) in rates {
        println!(
            "  {in_flight:>2} in flight: {:.2}× one in flight, {:.2}× candle in process",
            rate / one,
            rate / local_rate
        );
    }
    Ok(())
}
