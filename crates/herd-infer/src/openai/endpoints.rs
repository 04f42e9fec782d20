//! Where each request of the openai backend goes, and how many each server gets at once.
//!
//! Every endpoint has its own concurrency limit. Adaptive (the default), the limit starts small and grows
//! while the server answers as fast as it did when idle (throughput then grows with what is in flight:
//! Little's law), holds while its latency is up to twice its fastest (the server is saturated and keeps a
//! modest queue, which costs latency, not throughput), shrinks past that, and halves on an overload signal
//! (429, 503, 408, a timeout), whose `Retry-After` also keeps the endpoint idle until then. `--max-in-flight`
//! is the ceiling. An endpoint that fails again and again (refused connections, 5xx, bad replies) is set
//! aside for a pause that doubles up to a minute, then probed with one request; a run goes on on the
//! others, and uses a set-aside endpoint only when every endpoint is set aside (so a run against one
//! dead server still fails its units after their attempts, as it did before).
//!
//! A request takes a slot on the least-loaded endpoint (in flight ÷ limit), or on the endpoint its group
//! went to ([`Affinity`]) while that one has a free slot: a society's deciders and an image's trials share
//! their prompt's start, which the server's prefix cache then holds once.

use herd_backend::{BackendLoad, EndpointLoad};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where an adaptive limit starts (or the ceiling, if lower): what an inference server takes at once
/// without strain (vLLM and SGLang batch hundreds; a smaller server says so with 429 or 503, which halves
/// it), and slow start doubles it per round trip from there. Measured with `cargo xtask bench serve`
/// (128-request servers, 1 s per request): starting at 32, minimal groups on 4 endpoints reached 89 % of
/// the ceiling; at 64, 96 %.
const INITIAL_LIMIT: usize = 64;
/// Latency over the fastest seen below which the limit grows: the server is not queueing.
const GROW_BELOW: f64 = 1.25;
/// Latency over the fastest seen above which the limit shrinks: the queue is longer than the work in hand.
const SHRINK_ABOVE: f64 = 2.0;
/// Failures in a row after which an endpoint is set aside.
const SET_ASIDE_AFTER: u32 = 3;
const FIRST_SET_ASIDE: Duration = Duration::from_secs(1);
const LONGEST_SET_ASIDE: Duration = Duration::from_secs(60);
/// The longest a Retry-After keeps an endpoint idle (a server's header is adversarial input).
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How an attempt on an endpoint ended, as far as the endpoint's health is concerned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Answered; the latency feeds the adaptive limit.
    Answered,
    /// 429, 503, 408 or a timeout: too much is asked of the server. `Retry-After` when it said.
    Overloaded(Option<Duration>),
    /// Refused or dropped connections, other 5xx, replies that are not what was asked: the server may be down.
    Failed,
    /// The request's own fault (a 4xx, a reply over herd's limits): says nothing about the endpoint.
    Neutral,
}

struct Endpoint {
    /// Requests it may have in flight (fractional, so that growth past slow start is 1 per round trip).
    limit: f64,
    in_flight: usize,
    peak_limit: usize,
    peak_in_flight: usize,
    succeeded: u64,
    failed: u64,
    set_aside_count: u64,
    failures_in_a_row: u32,
    /// Growing by one per answer (doubling per round trip) until the first sign of a queue.
    slow_start: bool,
    /// The fastest answer seen and a moving average of answers, in seconds.
    fastest: Option<f64>,
    average: Option<f64>,
    last_shrink: Option<Instant>,
    /// Not sent to before this (its Retry-After), even when it is the only endpoint.
    retry_at: Option<Instant>,
    /// Set aside until this, while another endpoint can take the request.
    set_aside_until: Option<Instant>,
    next_set_aside: Duration,
}

impl Endpoint {
    fn new(limit: usize) -> Self {
        Endpoint {
            limit: limit as f64,
            in_flight: 0,
            peak_limit: limit,
            peak_in_flight: 0,
            succeeded: 0,
            failed: 0,
            set_aside_count: 0,
            failures_in_a_row: 0,
            slow_start: true,
            fastest: None,
            average: None,
            last_shrink: None,
            retry_at: None,
            set_aside_until: None,
            next_set_aside: FIRST_SET_ASIDE,
        }
    }

    fn slots(&self) -> usize {
        (self.limit.floor() as usize).max(1)
    }

    fn has_free_slot(&self) -> bool {
        self.in_flight < self.slots()
    }

    fn load(&self) -> f64 {
        self.in_flight as f64 / self.slots() as f64
    }

    fn waiting_for_retry_after(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|t| t > now)
    }

    fn set_aside(&self, now: Instant) -> bool {
        self.set_aside_until.is_some_and(|t| t > now)
    }
}

/// The endpoints' limits and load, shared by every request thread.
pub(crate) struct EndpointPool {
    endpoints: Mutex<Vec<Endpoint>>,
    freed: Condvar,
    names: Vec<String>,
    ceiling: usize,
    adaptive: bool,
    completed: AtomicU64,
}

/// The endpoint a group's first request went to, which the group's other requests prefer.
pub(crate) struct Affinity(AtomicUsize);

impl Affinity {
    pub(crate) fn new() -> Self {
        Affinity(AtomicUsize::new(usize::MAX))
    }

    fn preferred(&self) -> Option<usize> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&i| i != usize::MAX)
    }

    fn remember(&self, endpoint: usize) {
        let _ = self.0.compare_exchange(usize::MAX, endpoint, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// A request's place on an endpoint; [`EndpointPool::finish`] gives it back.
pub(crate) struct Slot {
    pub(crate) endpoint: usize,
    started: Instant,
}

impl EndpointPool {
    /// `names` are the endpoints as the manifest shows them (credentials removed); `ceiling` is each one's
    /// most requests in flight; not `adaptive`, each endpoint has the ceiling from the start.
    pub(crate) fn new(names: Vec<String>, ceiling: usize, adaptive: bool) -> Self {
        let ceiling = ceiling.max(1);
        let start = if adaptive { INITIAL_LIMIT.min(ceiling) } else { ceiling };
        EndpointPool {
            endpoints: Mutex::new(names.iter().map(|_| Endpoint::new(start)).collect()),
            freed: Condvar::new(),
            names,
            ceiling,
            adaptive,
            completed: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Endpoint>> {
        // A request thread that panicked left the counts as they were; they stay usable.
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a free slot and takes it: on the group's endpoint if it has one, else on the least-loaded
    /// endpoint that is neither waiting out a Retry-After nor set aside (set-aside ones count when every
    /// endpoint is set aside).
    /// A retry passes the endpoint its last attempt failed on as `avoid`: it goes there again only when no
    /// other endpoint has room.
    pub(crate) fn acquire(&self, affinity: &Affinity, avoid: Option<usize>) -> Slot {
        let mut endpoints = self.lock();
        loop {
            let now = Instant::now();
            let all_set_aside = endpoints.iter().all(|e| e.set_aside(now) || e.waiting_for_retry_after(now));
            let usable = |e: &Endpoint| {
                e.has_free_slot() && !e.waiting_for_retry_after(now) && (all_set_aside || !e.set_aside(now))
            };
            let least_loaded = |skip: Option<usize>| {
                (0..endpoints.len())
                    .filter(|&i| Some(i) != skip && usable(&endpoints[i]))
                    .min_by(|&a, &b| endpoints[a].load().total_cmp(&endpoints[b].load()))
            };
            let chosen = affinity
                .preferred()
                .filter(|&i| Some(i) != avoid && usable(&endpoints[i]))
                .or_else(|| least_loaded(avoid))
                .or_else(|| avoid.filter(|&i| usable(&endpoints[i])));
            if let Some(i) = chosen {
                let e = &mut endpoints[i];
                e.in_flight += 1;
                e.peak_in_flight = e.peak_in_flight.max(e.in_flight);
                affinity.remember(i);
                return Slot { endpoint: i, started: Instant::now() };
            }
            // Woken by a freed slot, or when the first Retry-After or set-aside pause ends.
            let wake = endpoints
                .iter()
                .flat_map(|e| [e.retry_at, e.set_aside_until])
                .flatten()
                .filter(|&t| t > now)
                .min()
                .map_or(Duration::from_millis(250), |t| t - now);
            endpoints = self.freed.wait_timeout(endpoints, wake).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Gives `slot` back and adapts its endpoint's limit to how the attempt ended.
    pub(crate) fn finish(&self, slot: Slot, outcome: Outcome) {
        let now = Instant::now();
        let latency = (now - slot.started).as_secs_f64();
        self.completed.fetch_add(1, Ordering::Relaxed);
        let mut endpoints = self.lock();
        let e = &mut endpoints[slot.endpoint];
        let was_in_flight = e.in_flight;
        e.in_flight = e.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Answered => {
                e.succeeded += 1;
                e.failures_in_a_row = 0;
                e.set_aside_until = None;
                e.next_set_aside = FIRST_SET_ASIDE;
                if self.adaptive {
                    self.adapt(e, latency, was_in_flight, now);
                }
            }
            Outcome::Overloaded(retry_after) => {
                e.failed += 1;
                if let Some(pause) = retry_after {
                    e.retry_at = Some(now + pause.min(LONGEST_RETRY_AFTER));
                }
                if self.adaptive {
                    e.slow_start = false;
                    e.limit = (e.limit / 2.0).max(1.0);
                }
            }
            Outcome::Failed => {
                e.failed += 1;
                e.failures_in_a_row += 1;
                if e.failures_in_a_row >= SET_ASIDE_AFTER && !e.set_aside(now) {
                    e.set_aside_until = Some(now + e.next_set_aside);
                    e.next_set_aside = (e.next_set_aside * 2).min(LONGEST_SET_ASIDE);
                    e.set_aside_count += 1;
                    // Back from its pause it is probed with one request, and grows from there.
                    if self.adaptive {
                        e.limit = 1.0;
                        e.slow_start = true;
                    }
                }
            }
            Outcome::Neutral => {}
        }
        drop(endpoints);
        self.freed.notify_all();
    }

    /// Grows, holds or shrinks an endpoint's limit after an answer that took `latency` seconds while
    /// `in_flight` requests (this one included) were on it.
    fn adapt(&self, e: &mut Endpoint, latency: f64, in_flight: usize, now: Instant) {
        let fastest = e.fastest.map_or(latency, |f| f.min(latency)).max(1e-6);
        e.fastest = Some(fastest);
        let average = e.average.map_or(latency, |a| 0.9 * a + 0.1 * latency);
        e.average = Some(average);
        let ratio = average / fastest;
        let ceiling = self.ceiling as f64;
        if ratio < GROW_BELOW {
            // Only a limit in use is known to be enough: a run that feeds an endpoint little learns nothing
            // about a higher one.
            if in_flight as f64 >= e.limit / 2.0 {
                let step = if e.slow_start { 1.0 } else { 1.0 / e.limit };
                e.limit = (e.limit + step).min(ceiling);
            }
        } else if ratio > SHRINK_ABOVE {
            e.slow_start = false;
            // Once per round trip at most: the answers of one round all saw the same queue.
            if e.last_shrink.is_none_or(|t| (now - t).as_secs_f64() >= average) {
                e.last_shrink = Some(now);
                // Latency alone never takes the limit below where it started; overload signals can.
                let floor = INITIAL_LIMIT.min(self.ceiling) as f64;
                e.limit = (e.limit * 0.9).max(floor.min(e.limit));
            }
        }
        e.peak_limit = e.peak_limit.max(e.slots());
    }

    /// Requests worth keeping in flight through the pool now: twice each endpoint's limit (up to its
    /// ceiling), so that a limit can grow into what waits for it.
    pub(crate) fn request_slots(&self) -> usize {
        self.lock().iter().map(|e| (2 * e.slots()).min(self.ceiling).max(e.slots())).sum::<usize>().max(1)
    }

    /// The most requests the pool can have in flight at once.
    pub(crate) fn capacity(&self) -> usize {
        self.ceiling * self.names.len()
    }

    pub(crate) fn load(&self) -> BackendLoad {
        let endpoints = self.lock();
        BackendLoad {
            in_flight: endpoints.iter().map(|e| e.in_flight).sum(),
            completed: self.completed.load(Ordering::Relaxed),
            endpoints: endpoints
                .iter()
                .zip(&self.names)
                .map(|(e, name)| EndpointLoad {
                    endpoint: name.clone(),
                    limit: e.slots(),
                    peak_limit: e.peak_limit,
                    peak_in_flight: e.peak_in_flight,
                    in_flight: e.in_flight,
                    succeeded: e.succeeded,
                    failed: e.failed,
                    set_aside: e.set_aside_count,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool_of(endpoints: usize, ceiling: usize) -> EndpointPool {
        EndpointPool::new((0..endpoints).map(|i| format!("http://e{i}/v1")).collect(), ceiling, true)
    }

    fn answer(pool: &EndpointPool, endpoint: usize, latency: f64, in_flight: usize) {
        let mut endpoints = pool.lock();
        let e = &mut endpoints[endpoint];
        pool.adapt(e, latency, in_flight, Instant::now());
    }

    #[test]
    fn a_limit_grows_while_latency_stays_flat_and_stops_at_the_ceiling() {
        let pool = pool_of(1, 200);
        assert_eq!(pool.load().endpoints[0].limit, INITIAL_LIMIT);
        for _ in 0..200 {
            let limit = pool.load().endpoints[0].limit;
            answer(&pool, 0, 0.05, limit);
        }
        assert_eq!(pool.load().endpoints[0].limit, 200, "flat latency at full use grows the limit to the ceiling");
    }

    #[test]
    fn an_unused_limit_does_not_grow() {
        let pool = pool_of(1, 256);
        for _ in 0..200 {
            answer(&pool, 0, 0.05, 1);
        }
        assert_eq!(pool.load().endpoints[0].limit, INITIAL_LIMIT);
    }

    #[test]
    fn a_growing_queue_shrinks_the_limit_and_overload_halves_it() {
        let pool = pool_of(1, 512);
        for _ in 0..100 {
            let limit = pool.load().endpoints[0].limit;
            answer(&pool, 0, 0.05, limit);
        }
        let grown = pool.load().endpoints[0].limit;
        assert!(grown > INITIAL_LIMIT, "{grown}");
        // Answers three times slower than the fastest: a long queue.
        std::thread::sleep(Duration::from_millis(5));
        for _ in 0..50 {
            answer(&pool, 0, 0.15, grown);
        }
        let shrunk = pool.load().endpoints[0].limit;
        assert!(shrunk < grown, "{shrunk} < {grown}");
        let slot = pool.acquire(&Affinity::new(), None);
        pool.finish(slot, Outcome::Overloaded(Some(Duration::from_millis(30))));
        let halved = pool.load().endpoints[0].limit;
        assert_eq!(halved, (shrunk as f64 / 2.0).floor().max(1.0) as usize, "{shrunk} halved");
        // The Retry-After keeps the only endpoint idle until it has passed.
        let started = Instant::now();
        let slot = pool.acquire(&Affinity::new(), None);
        assert!(started.elapsed() >= Duration::from_millis(20), "{:?}", started.elapsed());
        pool.finish(slot, Outcome::Neutral);
    }

    #[test]
    fn requests_go_to_the_least_loaded_endpoint_and_a_group_keeps_to_one() {
        let pool = pool_of(3, 8);
        let group = Affinity::new();
        let first = pool.acquire(&group, None);
        let second = pool.acquire(&group, None);
        assert_eq!(first.endpoint, second.endpoint, "a group's requests share the endpoint of its first");
        let other = pool.acquire(&Affinity::new(), None);
        assert_ne!(other.endpoint, first.endpoint, "another group goes to a less loaded endpoint");
        // A retry goes elsewhere than where its last attempt failed, when it can.
        let retry = pool.acquire(&group, Some(first.endpoint));
        assert_ne!(retry.endpoint, first.endpoint);
        for slot in [first, second, other, retry] {
            pool.finish(slot, Outcome::Answered);
        }
    }

    #[test]
    fn an_endpoint_that_keeps_failing_is_set_aside_while_another_works() {
        let pool = pool_of(2, 8);
        for _ in 0..SET_ASIDE_AFTER {
            let slot = Slot { endpoint: 0, started: Instant::now() };
            pool.lock()[0].in_flight += 1;
            pool.finish(slot, Outcome::Failed);
        }
        assert_eq!(pool.load().endpoints[0].set_aside, 1);
        for _ in 0..10 {
            let slot = pool.acquire(&Affinity::new(), None);
            assert_eq!(slot.endpoint, 1, "the set-aside endpoint gets nothing while the other works");
            pool.finish(slot, Outcome::Answered);
        }
        // With every endpoint set aside, the requests still go out (and fail their attempts).
        let only = pool_of(1, 8);
        for _ in 0..SET_ASIDE_AFTER {
            let slot = only.acquire(&Affinity::new(), None);
            only.finish(slot, Outcome::Failed);
        }
        let started = Instant::now();
        let slot = only.acquire(&Affinity::new(), None);
        assert!(started.elapsed() < Duration::from_millis(500), "not held for the set-aside pause");
        only.finish(slot, Outcome::Answered);
    }
}
