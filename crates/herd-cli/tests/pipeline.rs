//! `herd run --backend openai` with many units in flight: against loopback servers of known capacity
//! (`herd_test_support::capacity_server`), every unit is stored exactly once, a failing request fails its
//! own unit only (the run lists it, a rerun computes it), and a run killed at random moments resumes to
//! exactly the rows of an uninterrupted one.

mod common;

use common::*;
use herd_design::ChaCha20Rng;
use herd_design::rand::{Rng, SeedableRng};
use herd_store::Table;
use herd_test_support::capacity_server::{Capacity, CapacityServer, TooMany};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn many_units_in_flight_over_two_servers_are_each_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let latency = Duration::from_millis(20);
    // One server refuses 4 of every 40 requests with 429 and a Retry-After: those are retried, not lost.
    let busy = Capacity {
        too_many: TooMany { period: 40, burst: 4, retry_after_s: 0.05 },
        ..Capacity::new(8, latency, latency)
    };
    for (name, table) in
        [("conformity.quick.toml", Table::ConformityTrials), ("minimal-group.quick.toml", Table::AllocationDeciders)]
    {
        let servers = [CapacityServer::start(busy.clone()), CapacityServer::start(Capacity::new(8, latency, latency))];
        let experiment = experiment(dir.path(), name);
        let out = dir.path().join(format!("{table}"));
        let output = run(&run_args(&experiment, &out, &[&servers[0], &servers[1]], 6));
        assert!(output.status.success(), "{name}: {}", text(&output));
        let ids = unit_ids(&out, table);
        assert_each_once(&ids, name);
        assert_same_units(&ids, &expected_units(&experiment, table), name);
        let most_at_once = servers.iter().map(|s| s.stats.peak_open.load(Ordering::SeqCst)).max().unwrap();
        assert!(most_at_once > 1, "{name}: the servers saw {most_at_once} requests at once");
        assert!(servers[0].stats.too_many.load(Ordering::SeqCst) > 0, "{name}: the 429s were sent");
        let manifest = herd_store::read_run_manifest(&out).unwrap();
        let endpoints = manifest.notes["endpoints"].as_array().expect("the manifest records each endpoint");
        assert_eq!(endpoints.len(), 2, "{name}: {endpoints:?}");
        for endpoint in endpoints {
            assert!(endpoint["succeeded"].as_u64().unwrap() > 0, "{name}: both endpoints answered: {endpoint}");
            assert!(endpoint["peak_limit"].as_u64().unwrap() >= 1, "{endpoint}");
        }
        assert!(manifest.notes["throughput"]["requests"].as_u64().unwrap() >= ids.len() as u64 / 20);
    }
}

#[test]
fn a_failing_request_fails_only_its_unit_and_the_rerun_computes_it() {
    let dir = tempfile::tempdir().unwrap();
    let latency = Duration::from_millis(10);
    for (name, table) in
        [("conformity.quick.toml", Table::ConformityTrials), ("minimal-group.quick.toml", Table::AllocationDeciders)]
    {
        // 1 % of requests fail with 500 whenever they are sent (the same requests every time).
        let server = CapacityServer::start(Capacity { fail_per_mille: 10, ..Capacity::new(16, latency, latency) });
        let experiment = experiment(dir.path(), name);
        let out = dir.path().join(format!("{table}"));
        let args = run_args(&experiment, &out, &[&server], 2);
        let first = run(&args);
        assert!(!first.status.success(), "{name}: the run says it succeeded: {}", text(&first));
        assert!(text(&first).contains("rerun the same command to retry them"), "{}", text(&first));
        assert!(!text(&first).contains("in a row"), "{name}: a few failures do not stop the run: {}", text(&first));
        let manifest = herd_store::read_run_manifest(&out).unwrap();
        let failed: BTreeSet<String> = manifest.failed.iter().cloned().collect();
        assert!(!failed.is_empty(), "{name}: the failed units are listed");
        // A decider's row id is its unit's id and `#decider`.
        let unit_of = |id: &String| match table {
            Table::AllocationDeciders => id.rsplit_once('#').unwrap().0.to_owned(),
            _ => id.clone(),
        };
        let stored: BTreeSet<String> = unit_ids(&out, table).iter().map(unit_of).collect();
        let expected: BTreeSet<String> = expected_units(&experiment, table).iter().map(unit_of).collect();
        assert!(stored.is_disjoint(&failed), "{name}: a failed unit has rows");
        // Every other unit was stored: a failure took nothing with it but its own unit.
        let accounted: BTreeSet<String> = stored.union(&failed).cloned().collect();
        let (accounted, expected): (Vec<String>, Vec<String>) =
            (accounted.into_iter().collect(), expected.into_iter().collect());
        assert_same_units(&accounted, &expected, &format!("{name}: stored and failed units together"));
        server.set_fail_per_mille(0);
        let second = run(&args);
        assert!(second.status.success(), "{name}: {}", text(&second));
        let ids = unit_ids(&out, table);
        assert_each_once(&ids, name);
        assert_same_units(&ids, &expected_units(&experiment, table), name);
        assert!(herd_store::read_run_manifest(&out).unwrap().failed.is_empty());
    }
}

#[test]
fn a_pipelined_run_killed_at_random_moments_resumes_to_the_uninterrupted_rows() {
    let dir = tempfile::tempdir().unwrap();
    let latency = Duration::from_millis(30);
    let server = CapacityServer::start(Capacity::new(8, latency, latency));
    let experiment = experiment(dir.path(), "conformity.quick.toml");
    let (whole, resumed) = (dir.path().join("whole"), dir.path().join("resumed"));
    let started = Instant::now();
    let output = run(&run_args(&experiment, &whole, &[&server], 2));
    assert!(output.status.success(), "{}", text(&output));
    let duration = started.elapsed();

    let args = run_args(&experiment, &resumed, &[&server], 2);
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    let mut interrupted = 0;
    for _ in 0..40 {
        if interrupted == 4 {
            break;
        }
        let mut child = herd(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(duration.mul_f64(rng.random_range(0.1..0.5)));
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        child.kill().unwrap(); // SIGKILL, with many requests in flight
        child.wait().unwrap();
    }
    assert_eq!(interrupted, 4, "four kills caught the run in progress");
    let finished = run(&args);
    assert!(finished.status.success(), "{}", text(&finished));
    let ids = unit_ids(&resumed, Table::ConformityTrials);
    assert_each_once(&ids, "resumed");
    for table in Table::ALL {
        let (a, b) = (rows(&whole, table), rows(&resumed, table));
        assert_eq!(a.len(), b.len(), "{table}: row counts differ");
        assert!(a == b, "{table}: resumed rows differ from the uninterrupted run");
    }
}
