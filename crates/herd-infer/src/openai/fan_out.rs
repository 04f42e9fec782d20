//! A group's requests on threads of their own, and the backend as the runner's [`SharedBackend`]: through
//! [`Backend`](herd_backend::Backend) the first failure fails the group (and stops what is not yet sent); through
//! [`SharedBackend`] every request has its own result, so the runner fails only the unit of a failed one.

use super::OpenAiBackend;
use super::endpoints::Affinity;
use crate::error::Result;
use herd_backend::{BackendLoad, GenerateRequest, Generation, ScoreRequest, ScoreResult, SharedBackend};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

impl OpenAiBackend {
    /// Runs `work` on every item, each on its own thread (the pool bounds what reaches the servers), and
    /// returns every item's result in order. With `stop_on_error`, the first failure stops the items not
    /// yet sent, whose results are `None`.
    pub(super) fn each<I: Sync, T: Send>(
        &self,
        items: &[I],
        stop_on_error: bool,
        work: impl Fn(&I) -> Result<T> + Sync,
    ) -> Vec<Option<Result<T>>> {
        if items.len() == 1 {
            return vec![Some(work(&items[0]))];
        }
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let results: Vec<Mutex<Option<Result<T>>>> = items.iter().map(|_| Mutex::new(None)).collect();
        // Threads beyond what the endpoints take at once would only wait for a slot.
        let workers = self.pool.capacity().clamp(1, items.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= items.len() || (stop_on_error && failed.load(Ordering::Relaxed)) {
                            break;
                        }
                        let result = work(&items[i]);
                        if result.is_err() {
                            failed.store(true, Ordering::Relaxed);
                        }
                        *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                    }
                });
            }
        });
        results.into_iter().map(|slot| slot.into_inner().unwrap_or_else(|p| p.into_inner())).collect()
    }

    /// Every item's result, or the first failure.
    pub(super) fn all<I: Sync, T: Send>(&self, items: &[I], work: impl Fn(&I) -> Result<T> + Sync) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(items.len());
        let mut first_error = None;
        for result in self.each(items, true, work).into_iter().flatten() {
            match result {
                Ok(value) => out.push(value),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// Each result on its own: the runner fails the unit of a failed request, not its group's others.
fn each_result<T>(results: Vec<Option<Result<T>>>) -> Vec<herd_backend::Result<T>> {
    results
        .into_iter()
        .map(|r| match r {
            Some(result) => result.map_err(herd_backend::BackendError::from),
            None => Err(herd_backend::BackendError::Request("not sent: another request of its group failed".into())),
        })
        .collect()
}

impl SharedBackend for OpenAiBackend {
    fn score_each(&self, group: &[ScoreRequest]) -> Vec<herd_backend::Result<ScoreResult>> {
        let affinity = Affinity::new();
        each_result(self.each(group, false, |r| self.score_one(r, &affinity)))
    }

    fn generate_each(&self, batch: &[GenerateRequest]) -> Vec<herd_backend::Result<Generation>> {
        let affinity = Affinity::new();
        each_result(self.each(batch, false, |r| self.generate_one(r, &affinity)))
    }

    fn request_slots(&self) -> usize {
        self.pool.request_slots()
    }

    fn load(&self) -> BackendLoad {
        self.pool.load()
    }
}
