//! A backend that returns fewer results than it was asked for fails its batch: no unit of it is stored,
//! the batch is listed as failed (a rerun retries it), and five such batches in a row stop the run with
//! an error that says what happened. Nothing is paired with the wrong request or silently dropped.

use herd_backend::{
    AllocationFacts, BackendInfo, ConformityFacts, GenerateRequest, Generation, ScoreRequest, ScoreResult, SimAgent,
    SimBackend, SimParams,
};
use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
use std::path::Path;

/// The sim agent, with the last result of the chosen calls dropped.
struct Short {
    inner: SimAgent,
    calls: usize,
    short_on: fn(usize) -> bool,
}

impl Short {
    /// Counts the call and drops its last result when this call is one of the chosen.
    fn shorten<T>(&mut self, mut results: Vec<T>) -> Vec<T> {
        self.calls += 1;
        if (self.short_on)(self.calls) {
            results.pop();
        }
        results
    }
}

impl SimBackend for Short {
    fn score_trials(
        &mut self,
        group: &[ScoreRequest],
        facts: &[ConformityFacts],
    ) -> herd_backend::Result<Vec<ScoreResult>> {
        let results = self.inner.score_trials(group, facts)?;
        Ok(self.shorten(results))
    }

    fn generate_trials(
        &mut self,
        batch: &[GenerateRequest],
        facts: &[AllocationFacts],
    ) -> herd_backend::Result<Vec<Generation>> {
        let results = self.inner.generate_trials(batch, facts)?;
        Ok(self.shorten(results))
    }

    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
}

fn experiment(name: &str) -> herd_design::ExperimentFile {
    herd_design::load_experiment(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments").join(name))
        .unwrap()
}

#[test]
fn a_short_batch_is_failed_whole_and_the_rest_is_stored() {
    let file = experiment("minimal-group.quick.toml");
    let mut backend = Short { inner: SimAgent::new(SimParams::default()), calls: 0, short_on: |call| call == 1 };
    let mut sink = MemorySink::default();
    let summary = run_experiment(&file, Respondent::Sim(&mut backend), &mut sink, &RunOptions::default()).unwrap();
    assert_eq!(summary.failed.len(), 1, "{summary:?}");
    assert!(!sink.stored.contains(&summary.failed[0]), "the short society was stored");
    assert!(
        summary.notes["last_backend_failure"].as_str().unwrap().contains("returned 19 results for 20 requests"),
        "{:?}",
        summary.notes
    );
    // Every other society was stored whole: 20 deciders and 19 dyads each.
    let stored = sink.stored.len();
    assert!(stored > 0);
    assert_eq!(sink.rows.deciders.len(), 20 * stored);
    assert_eq!(sink.rows.dyads.len(), 20 * 19 * stored);
}

#[test]
fn short_batches_in_a_row_stop_the_run_with_the_reason() {
    let file = experiment("minimal-group.quick.toml");
    let mut backend = Short { inner: SimAgent::new(SimParams::default()), calls: 0, short_on: |_| true };
    let mut sink = MemorySink::default();
    let err = run_experiment(&file, Respondent::Sim(&mut backend), &mut sink, &RunOptions::default()).unwrap_err();
    // What the run did before it stopped is kept for the manifest: here, the failed units.
    let summary = err.partial_summary().expect("a stopped run keeps its summary");
    assert_eq!((summary.failed.len(), summary.units_run), (5, 0), "{summary:?}");
    let err = err.to_string();
    assert!(err.contains("results for") && err.contains("requests") && err.contains("rerun"), "{err}");
    assert!(sink.rows.deciders.is_empty() && sink.stored.is_empty(), "nothing from a short batch is stored");
}
