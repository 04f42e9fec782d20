//! Deciders are sampled as HF `generate` would sample them with the model: the experiment's [generation]
//! overrides, else the model's own defaults, else HF's (or, for a server, nothing sent). Every request of a
//! run carries the same resolved values, and the run's notes (the manifest) record each with its source.

use herd_backend::{
    AllocationFacts, BackendInfo, ConformityFacts, GenerateRequest, Generation, ModelSampling, SamplingFallback,
    SamplingParams, ScoreRequest, ScoreResult, SimAgent, SimBackend, SimParams,
};
use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
use std::path::Path;

/// The sim agent, keeping the sampling parameters of every request it is sent.
struct Recording {
    inner: SimAgent,
    seen: Vec<SamplingParams>,
}

impl SimBackend for Recording {
    fn score_trials(
        &mut self,
        group: &[ScoreRequest],
        facts: &[ConformityFacts],
    ) -> herd_backend::Result<Vec<ScoreResult>> {
        self.inner.score_trials(group, facts)
    }

    fn generate_trials(
        &mut self,
        batch: &[GenerateRequest],
        facts: &[AllocationFacts],
    ) -> herd_backend::Result<Vec<Generation>> {
        self.seen.extend(batch.iter().map(|r| r.sampling.clone()));
        self.inner.generate_trials(batch, facts)
    }

    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
}

/// The quick minimal-group profile (temperature 0.7, nothing else set) with `edit` applied and one society
/// per cell.
fn experiment(dir: &Path, edit: (&str, &str)) -> herd_design::ExperimentFile {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let text = std::fs::read_to_string(data.join("experiments/minimal-group.quick.toml")).unwrap();
    assert!(text.contains("seeds = 8 ") && text.contains(edit.0), "the quick profile changed");
    let text = text
        .replace("seeds = 8 ", "seeds = 1 ")
        .replace(edit.0, edit.1)
        .replace("\"../banks/", &format!("\"{}/banks/", data.display()));
    let path = dir.join("minimal-group.toml");
    std::fs::write(&path, text).unwrap();
    herd_design::load_experiment(&path).unwrap()
}

fn run(file: &herd_design::ExperimentFile, options: &RunOptions) -> (Vec<SamplingParams>, serde_json::Value) {
    let mut backend = Recording { inner: SimAgent::new(SimParams::default()), seen: Vec::new() };
    let summary = run_experiment(file, Respondent::Sim(&mut backend), &mut MemorySink::default(), options).unwrap();
    assert!(!backend.seen.is_empty(), "the run generated nothing");
    (backend.seen, summary.notes["generation.effective"].clone())
}

/// Qwen3-8B's generation_config.json, as `herd_backend::model_sampling` reads it from the folder.
fn qwen3_defaults() -> ModelSampling {
    ModelSampling {
        temperature: Some(0.6),
        top_p: Some(0.95),
        top_k: Some(20),
        repetition_penalty: Some(1.05),
        do_sample: Some(true),
        source: "/hub/qwen3/generation_config.json".into(),
    }
}

#[test]
fn experiment_overrides_win_and_the_model_fills_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), ("temperature = 0.7", "temperature = 0.7\ntop_k = 0"));
    let options = RunOptions { sampling_defaults: qwen3_defaults(), ..RunOptions::default() };
    let (seen, record) = run(&file, &options);
    for p in &seen {
        assert_eq!(
            (p.temperature, p.top_p, p.top_k, p.repetition_penalty),
            (Some(0.7), Some(0.95), Some(0), Some(1.05)),
            "{p:?}"
        );
        assert_eq!(p.max_tokens, 224);
    }
    // Each decider still has its own seed.
    let seeds: std::collections::BTreeSet<u64> = seen.iter().map(|p| p.seed).collect();
    assert_eq!(seeds.len(), seen.len());
    assert_eq!(record["temperature"], serde_json::json!({"value": 0.7, "source": "experiment"}));
    assert_eq!(record["top_k"], serde_json::json!({"value": 0, "source": "experiment"}));
    assert_eq!(record["top_p"], serde_json::json!({"value": 0.95, "source": "model"}));
    assert_eq!(record["repetition_penalty"], serde_json::json!({"value": 1.05, "source": "model"}));
    assert_eq!(record["model_defaults"], "/hub/qwen3/generation_config.json");
    assert_eq!(record["model_do_sample"], true);
}

#[test]
fn without_model_defaults_hf_defaults_apply_locally_and_nothing_is_sent_to_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), ("temperature = 0.7", "temperature = 0.7"));
    let (seen, record) = run(&file, &RunOptions::default());
    for p in &seen {
        assert_eq!(
            (p.temperature, p.top_p, p.top_k, p.repetition_penalty),
            (Some(0.7), Some(1.0), Some(50), Some(1.0)),
            "{p:?}"
        );
    }
    assert_eq!(record["top_k"], serde_json::json!({"value": 50, "source": "hf_default"}));
    let server = RunOptions { sampling_fallback: SamplingFallback::Server, ..RunOptions::default() };
    let (seen, record) = run(&file, &server);
    for p in &seen {
        assert_eq!((p.temperature, p.top_p, p.top_k, p.repetition_penalty), (Some(0.7), None, None, None), "{p:?}");
    }
    assert_eq!(record["top_p"], serde_json::json!({"value": null, "source": "server_default"}));
}
