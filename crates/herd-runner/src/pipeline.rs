//! Many batches in flight at once through a [`SharedBackend`] (the openai backend's servers), each
//! committed as it completes.
//!
//! The plan is drawn lazily: a batch is prepared only when the backend has room for its requests
//! ([`SharedBackend::request_slots`]), so memory is bounded by what is in flight whatever the design's
//! size. Each batch is one call on its own thread; completions come back to this (the caller's) thread,
//! which alone touches the sink, so commits stay atomic batch by batch as in a one-at-a-time run. A
//! batch's rows are made from its own requests and results only, never from the order in which batches
//! complete, so a kill loses at most what was in flight and a resumed run computes what an uninterrupted
//! one would.

use crate::Result;
use crate::progress::Progress;
use herd_backend::{BackendError, SharedBackend};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Whether the pipeline draws more of the plan after a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    /// The backend looks broken: what is in flight is still committed, nothing more is sent.
    Stop,
}

/// One study's part of a pipelined run: how its batches are drawn, sent and committed.
pub(crate) trait Stage {
    type Batch: Send;
    type Output: Send;
    /// The next batch of the plan, or `None` when the plan is done.
    fn next(&mut self) -> Result<Option<Self::Batch>>;
    /// Requests the batch sends (what it takes of the backend's slots).
    fn requests(batch: &Self::Batch) -> usize;
    /// Runs on the batch's own thread: every request's result, in the batch's order.
    fn send(backend: &dyn SharedBackend, batch: &Self::Batch) -> Vec<herd_backend::Result<Self::Output>>;
    /// Tokens an answer cost (prompt and output), for the tokens/s shown.
    fn tokens(output: &Self::Output) -> usize;
    /// Stores what the batch's results allow, and records the units of failed requests as failed.
    /// `results` may be shorter than the batch (its thread panicked): every unit without a result failed.
    fn commit(
        &mut self,
        batch: Self::Batch,
        results: Vec<herd_backend::Result<Self::Output>>,
        elapsed: Duration,
    ) -> Result<Flow>;
}

/// What a pipelined run sent, for the run manifest's notes.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct Throughput {
    pub requests: u64,
    pub tokens: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    pub tokens_per_s: f64,
    /// The most requests the runner had handed the backend at once.
    pub peak_requests_in_flight: usize,
}

/// Runs `stage`'s batches through `backend`, keeping as many in flight as its slots allow, committing
/// each as it completes. A commit error stops the run at once (nothing more is committed: the sink may be
/// broken); a [`Flow::Stop`] lets what is in flight complete and commit first.
pub(crate) fn run<S: Stage>(stage: &mut S, backend: &dyn SharedBackend, progress: &Progress) -> Result<Throughput> {
    let started = Instant::now();
    let mut throughput = Throughput::default();
    let mut shown = Instant::now();
    let outcome = std::thread::scope(|scope| -> Result<()> {
        let (done_tx, done_rx) = mpsc::channel::<(S::Batch, Vec<herd_backend::Result<S::Output>>, usize, Duration)>();
        let (mut requests_in_flight, mut batches_in_flight) = (0usize, 0usize);
        let (mut drawing, mut outcome) = (true, Ok(()));
        loop {
            while drawing && (batches_in_flight == 0 || requests_in_flight < backend.request_slots()) {
                match stage.next() {
                    Ok(Some(batch)) => {
                        let requests = S::requests(&batch);
                        requests_in_flight += requests;
                        batches_in_flight += 1;
                        throughput.peak_requests_in_flight = throughput.peak_requests_in_flight.max(requests_in_flight);
                        let done_tx = done_tx.clone();
                        scope.spawn(move || {
                            let sent = Instant::now();
                            // A panic in the backend fails this batch's units (no results), not the run.
                            let results =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| S::send(backend, &batch)))
                                    .unwrap_or_default();
                            let _ = done_tx.send((batch, results, requests, sent.elapsed()));
                        });
                    }
                    Ok(None) => drawing = false,
                    Err(e) => {
                        outcome = Err(e);
                        drawing = false;
                    }
                }
            }
            if batches_in_flight == 0 {
                break;
            }
            // Every spawned thread sends exactly once (a panic is caught above), so this cannot wait forever.
            let Ok((batch, results, requests, elapsed)) = done_rx.recv() else { break };
            batches_in_flight -= 1;
            requests_in_flight -= requests;
            throughput.requests += results.len() as u64;
            throughput.tokens += results.iter().flatten().map(S::tokens).sum::<usize>() as u64;
            if outcome.is_ok() {
                match stage.commit(batch, results, elapsed) {
                    Ok(Flow::Go) => {}
                    Ok(Flow::Stop) => drawing = false,
                    Err(e) => {
                        outcome = Err(e);
                        drawing = false;
                    }
                }
            }
            if progress.is_visible() && shown.elapsed() >= Duration::from_millis(250) {
                shown = Instant::now();
                let seconds = started.elapsed().as_secs_f64().max(1e-9);
                progress.message(format!(
                    "{} requests in flight · {:.0} requests/s · {:.0} tokens/s",
                    backend.load().in_flight,
                    throughput.requests as f64 / seconds,
                    throughput.tokens as f64 / seconds
                ));
            }
        }
        outcome
    });
    progress.message("");
    throughput.seconds = started.elapsed().as_secs_f64();
    let seconds = throughput.seconds.max(1e-9);
    throughput.requests_per_s = throughput.requests as f64 / seconds;
    throughput.tokens_per_s = throughput.tokens as f64 / seconds;
    outcome.map(|()| throughput)
}

/// Runs `stage`'s batches through a batch file ([`herd_backend::BatchFile`]): one at a time, in plan
/// order, on this thread, so the file lists requests in the plan's order and a rerun writes the same
/// file. Answers are read, not waited for, so nothing is gained by more in flight; their latency is not
/// measured (0).
pub(crate) fn run_in_order<S: Stage>(stage: &mut S, backend: &dyn SharedBackend) -> Result<()> {
    while let Some(batch) = stage.next()? {
        let results = S::send(backend, &batch);
        if stage.commit(batch, results, Duration::ZERO)? == Flow::Stop {
            break;
        }
    }
    Ok(())
}

/// Runs `stage`'s batches through a backend that computes one call at a time (a model on this machine,
/// the simulated agent), `per_call` batches drawn in plan order sent to `call` together (a local model
/// decodes all their requests as one batch), each then committed on its own, in plan order, with its
/// own results. A failed call fails each of its batches: the first with the call's error, the others
/// with an error naming it.
pub(crate) fn run_together<S: Stage>(
    stage: &mut S,
    per_call: usize,
    mut call: impl FnMut(&[S::Batch]) -> herd_backend::Result<Vec<S::Output>>,
) -> Result<()> {
    loop {
        let mut batches = Vec::with_capacity(per_call.max(1));
        while batches.len() < per_call.max(1) {
            match stage.next()? {
                Some(batch) => batches.push(batch),
                None => break,
            }
        }
        if batches.is_empty() {
            return Ok(());
        }
        let requested: usize = batches.iter().map(S::requests).sum();
        let started = Instant::now();
        let outcome = crate::all_results(requested, call(&batches));
        // Each batch's share of the call's time (taken before any commit), so that a row's latency is the
        // call's per request.
        let elapsed = started.elapsed();
        let share = |requests: usize| elapsed.mul_f64(requests as f64 / requested.max(1) as f64);
        let mut stop = false;
        match outcome {
            Ok(outputs) => {
                let mut outputs = outputs.into_iter();
                for batch in batches {
                    let n = S::requests(&batch);
                    let results = outputs.by_ref().take(n).map(Ok).collect();
                    stop |= stage.commit(batch, results, share(n))? == Flow::Stop;
                }
            }
            Err(error) => {
                let why = format!("computed in one call with a unit whose call failed: {error}");
                let mut error = Some(error);
                for batch in batches {
                    let n = S::requests(&batch);
                    let failed = error.take().unwrap_or_else(|| BackendError::Request(why.clone()));
                    stop |= stage.commit(batch, vec![Err(failed)], share(n))? == Flow::Stop;
                }
            }
        }
        if stop {
            return Ok(());
        }
    }
}

/// The error of a request that got no result (its batch's thread panicked).
pub(crate) fn no_result() -> BackendError {
    BackendError::Request("the backend gave no result for this request (its thread panicked)".into())
}
