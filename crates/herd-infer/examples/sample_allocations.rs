//! Samples unconstrained allocation outputs of the default model on herd's own minimal-group prompts
//! (the source of herd-parse's `smollm2` fixtures). Prints one JSON line per decider.
//!
//! herd prompts --experiment data/experiments/minimal-group.quick.toml --limit 2000 --jsonl > prompts.jsonl
//! cargo run -p herd-infer --example sample_allocations -- prompts.jsonl 0,1,2,100 300

use herd_backend::{Backend, GenerateRequest, ModelRegistry, SamplingParams, fetch_model};
use herd_infer::{LoadOptions, LocalModel};
use herd_prompts::{ChatPrompt, Part};
use serde_json::Value;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [prompts, picks, max_tokens] = args.as_slice() else {
        eprintln!("usage: sample_allocations PROMPTS.jsonl LINE,LINE,… MAX_TOKENS");
        std::process::exit(2);
    };
    let lines: Vec<Value> = std::fs::read_to_string(prompts)
        .expect("prompts file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let picks: Vec<usize> = picks.split(',').map(|p| p.trim().parse().expect("line numbers")).collect();
    let registry = ModelRegistry::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/models.toml")))
        .expect("registry");
    let entry = registry.get(herd_backend::DEFAULT_MODEL).expect("default alias");
    let path = fetch_model(entry).expect("default model");
    let mut model =
        LocalModel::load(entry, &herd_backend::ModelFiles::Gguf(path), &LoadOptions::default()).expect("model loads");
    let requests: Vec<GenerateRequest> = picks
        .iter()
        .map(|&i| {
            let text = lines[i]["messages"][0]["content"][0]["text"].as_str().expect("a text part").to_string();
            GenerateRequest::new(
                ChatPrompt::user(vec![Part::Text { text }]),
                SamplingParams {
                    temperature: Some(0.7),
                    top_p: Some(1.0),
                    top_k: Some(0),
                    repetition_penalty: None,
                    seed: i as u64,
                    max_tokens: max_tokens.parse().expect("MAX_TOKENS"),
                    stop: vec![],
                },
            )
        })
        .collect();
    for (&i, generation) in picks.iter().zip(model.generate(&requests).expect("generates")) {
        let line = &lines[i];
        println!(
            "{}",
            serde_json::json!({"unit": line["unit"], "decider": line["decider"], "seed": i, "temperature": 0.7, "finish": generation.finish_reason, "text": generation.text})
        );
    }
}
