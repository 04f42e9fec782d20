//! Through a backend that takes many calls at once (`Backend::shared`), batches complete in any order:
//! the rows stored are the ones a one-batch-at-a-time run stores, and a failed request fails its own
//! unit only. The backend here answers from each prompt's digest (as a model answers from its prompt)
//! and holds each call for a time drawn from the digest too, so completions come back out of order.

use herd_backend::{
    Backend, BackendInfo, BackendLoad, ComputePath, FinishReason, GenerateRequest, Generation, ScoreRequest,
    ScoreResult, SharedBackend,
};
use herd_runner::{BaselineRule, MemorySink, Respondent, RunOptions, run_experiment};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Answers from each prompt's digest; fails the requests whose digest ends in `fail_digit`.
struct Digest {
    shared: bool,
    fail_digit: Option<char>,
}

impl Digest {
    fn score_one(&self, request: &ScoreRequest) -> herd_backend::Result<ScoreResult> {
        let hash = request.prompt.hash();
        // 0–7 ms, from the digest: later batches may complete first.
        std::thread::sleep(Duration::from_millis(u64::from(hash.as_bytes()[0] % 8)));
        if self.fail_digit.is_some_and(|d| hash.ends_with(d)) {
            return Err(herd_backend::BackendError::Request(format!("refused {hash}")));
        }
        let p_a = f64::from(u8::from_str_radix(&hash[..2], 16).unwrap()) / 255.0;
        let score = |p: f64| herd_backend::AnswerScore {
            p,
            logit: p.max(1e-9).ln() as f32,
            token_ids: vec![1],
            bound: herd_backend::ScoreBound::Exact,
        };
        Ok(ScoreResult {
            answers: [("A".to_owned(), score(p_a)), ("B".to_owned(), score(1.0 - p_a))].into_iter().collect(),
            mass: 1.0,
            top: Vec::new(),
            prompt_tokens: hash.len(),
            reused_tokens: 0,
        })
    }

    fn generate_one(&self, request: &GenerateRequest) -> herd_backend::Result<Generation> {
        let hash = request.prompt.hash();
        std::thread::sleep(Duration::from_millis(u64::from(hash.as_bytes()[0] % 8)));
        if self.fail_digit.is_some_and(|d| hash.ends_with(d)) {
            return Err(herd_backend::BackendError::Request(format!("refused {hash}")));
        }
        Ok(Generation {
            text: format!("{{\"note\": \"{}\"}}", &hash[..12]),
            prompt_tokens: 10,
            completion_tokens: 5,
            finish_reason: FinishReason::Eos,
            constrained: false,
            reasoning: None,
        })
    }
}

impl Backend for Digest {
    fn score(&mut self, group: &[ScoreRequest]) -> herd_backend::Result<Vec<ScoreResult>> {
        group.iter().map(|r| self.score_one(r)).collect()
    }

    fn generate(&mut self, batch: &[GenerateRequest]) -> herd_backend::Result<Vec<Generation>> {
        batch.iter().map(|r| self.generate_one(r)).collect()
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            backend: "digest".into(),
            model: "digest".into(),
            family: "test".into(),
            device: "none".into(),
            vision: false,
            compute: ComputePath::elsewhere("none", "a test double"),
        }
    }

    fn shared(&self) -> Option<&dyn SharedBackend> {
        self.shared.then_some(self as &dyn SharedBackend)
    }
}

impl SharedBackend for Digest {
    fn score_each(&self, group: &[ScoreRequest]) -> Vec<herd_backend::Result<ScoreResult>> {
        group.iter().map(|r| self.score_one(r)).collect()
    }

    fn generate_each(&self, batch: &[GenerateRequest]) -> Vec<herd_backend::Result<Generation>> {
        batch.iter().map(|r| self.generate_one(r)).collect()
    }

    fn request_slots(&self) -> usize {
        64
    }

    fn load(&self) -> BackendLoad {
        BackendLoad::default()
    }
}

fn experiment(name: &str) -> herd_design::ExperimentFile {
    herd_design::load_experiment(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments").join(name))
        .unwrap()
}

fn options() -> RunOptions {
    RunOptions {
        baseline_override: Some(BaselineRule { enabled: false, min_p_correct: 0.0, two_way: false }),
        ..RunOptions::default()
    }
}

/// A run's rows as JSON texts, sorted, without the timing column.
fn rows<T: serde::Serialize>(rows: &[T]) -> Vec<String> {
    let mut texts: Vec<String> = rows
        .iter()
        .map(|r| {
            let mut value = serde_json::to_value(r).unwrap();
            value.as_object_mut().unwrap().remove("latency_s");
            value.to_string()
        })
        .collect();
    texts.sort();
    texts
}

#[test]
fn rows_through_many_batches_in_flight_equal_one_batch_at_a_time() {
    for name in ["conformity.quick.toml", "minimal-group.quick.toml"] {
        let file = experiment(name);
        let mut sinks = Vec::new();
        for shared in [false, true] {
            let mut backend = Digest { shared, fail_digit: None };
            let mut sink = MemorySink::default();
            let summary = run_experiment(&file, Respondent::Model(&mut backend), &mut sink, &options()).unwrap();
            assert!(summary.failed.is_empty(), "{name}: {:?}", summary.failed);
            assert_eq!(summary.notes.contains_key("throughput"), shared, "{name}: only a shared run is pipelined");
            sinks.push(sink);
        }
        let (one, many) = (&sinks[0].rows, &sinks[1].rows);
        assert!(!one.conformity.is_empty() || !one.deciders.is_empty(), "{name}: rows were stored");
        assert_eq!(rows(&one.conformity), rows(&many.conformity), "{name}: conformity rows");
        assert_eq!(rows(&one.deciders), rows(&many.deciders), "{name}: decider rows");
        assert_eq!(rows(&one.dyads), rows(&many.dyads), "{name}: dyad rows");
        assert_eq!(sinks[0].stored, sinks[1].stored, "{name}: the same units stored");
    }
}

#[test]
fn a_failed_request_fails_its_own_unit_and_the_rest_of_its_batch_is_stored() {
    let file = experiment("conformity.quick.toml");
    let mut all = Digest { shared: true, fail_digit: None };
    let mut whole = MemorySink::default();
    run_experiment(&file, Respondent::Model(&mut all), &mut whole, &options()).unwrap();
    // About one request in sixteen fails, every time it is sent.
    let mut failing = Digest { shared: true, fail_digit: Some('0') };
    let mut sink = MemorySink::default();
    // Failures in a row are a broken backend's mark; here they are by design, and the run goes on.
    let options = RunOptions { max_consecutive_failures: usize::MAX, ..options() };
    let summary = run_experiment(&file, Respondent::Model(&mut failing), &mut sink, &options).unwrap();
    let failed: BTreeSet<String> = summary.failed.iter().cloned().collect();
    let expected_failed: BTreeSet<String> =
        whole.rows.conformity.iter().filter(|r| r.prompt_hash.ends_with('0')).map(|r| r.unit_id.clone()).collect();
    assert!(!expected_failed.is_empty());
    assert_eq!(failed, expected_failed, "exactly the units whose own request failed");
    let stored: BTreeSet<String> = sink.stored.iter().cloned().collect();
    assert!(stored.is_disjoint(&failed));
    let everything: BTreeSet<String> = stored.union(&failed).cloned().collect();
    assert_eq!(everything, whole.stored, "every other unit is stored");
}
