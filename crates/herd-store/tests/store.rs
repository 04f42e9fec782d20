//! The run folder's guarantees: committed batches are read back exactly, uncommitted parts vanish on
//! reopening, another run or a newer format is refused, and one writer at a time.

use herd_store::{BaselineCandidateRow, Batch, Manifest, RunIdentity, RunStore, StoreError, Table, read_table};
use herd_test_support::stored_table;
use std::path::Path;

fn manifest(model: &str) -> Manifest {
    let identity = RunIdentity {
        experiment: "exp".into(),
        study: "conformity".into(),
        experiment_sha256: "ab".repeat(32),
        model: model.into(),
        backend: "sim".into(),
        shard: "all".into(),
    };
    Manifest { experiment_file: "exp.toml".into(), units_total: 3, ..Manifest::new(identity) }
}

fn candidate(unit: &str, index: i64, p: f64) -> BaselineCandidateRow {
    BaselineCandidateRow {
        run_id: "r".into(),
        unit_id: unit.into(),
        model: "m".into(),
        task: "lines".into(),
        pool: "general".into(),
        candidate: index,
        image_id: format!("lines-general-{index:04}"),
        correct_label: "A".into(),
        p_correct: p,
        p_correct_ab: None,
        logit_correct: 1.5,
        accepted: p > 0.5,
    }
}

fn commit(store: &mut RunStore, units: &[&str]) {
    let rows: Vec<_> = units.iter().enumerate().map(|(i, u)| candidate(u, i as i64, 0.25 * i as f64)).collect();
    let mut batch = Batch::new(units.iter().map(|u| u.to_string()).collect());
    batch.add(&rows).unwrap();
    store.commit(batch).unwrap();
}

#[test]
fn committed_batches_survive_reopening_and_uncommitted_parts_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    {
        let mut store = RunStore::open(&out, manifest("m"), "cpu").unwrap();
        commit(&mut store, &["u1", "u2"]);
        assert!(store.is_stored("u1") && !store.is_stored("u3"));
        // What a kill between writing a part and its commit record leaves behind.
        std::fs::write(out.join("baseline_candidates/bdeadbeefdeadbeef0123.parquet"), b"half").unwrap();
        std::fs::write(out.join("committed/.bdeadbeefdeadbeef0123.json.tmp"), b"{").unwrap();
    }
    let mut store = RunStore::open(&out, manifest("m"), "cpu").unwrap();
    assert_eq!(store.orphans_removed(), 2);
    assert_eq!(store.units_stored(), 2);
    let rows = store.baseline_candidates().unwrap();
    assert_eq!(rows, vec![candidate("u1", 0, 0.0), candidate("u2", 1, 0.25)]);
    commit(&mut store, &["u3"]);
    store.finish("complete").unwrap();
    let frame =
        stored_table::frame(read_table(std::slice::from_ref(&out), Table::BaselineCandidates).unwrap().unwrap());
    assert_eq!(frame.height(), 3);
    let manifest = herd_store::read_run_manifest(&out).unwrap();
    assert_eq!(manifest.units_stored, 3);
    assert_eq!(manifest.rows["baseline_candidates"], 3);
    assert_eq!(manifest.sessions.len(), 2);
    assert_eq!(manifest.sessions[0].status, "interrupted", "the first session never finished");
    assert_eq!(manifest.sessions[1].status, "complete");
    assert!(matches!(store.commit(Batch::new(vec!["u1".into()])), Err(StoreError::AlreadyStored(_))));
}

#[test]
fn another_run_a_newer_format_and_a_second_writer_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let store = RunStore::open(&out, manifest("m"), "cpu").unwrap();
    let busy = RunStore::open(&out, manifest("m"), "cpu").err().unwrap();
    assert!(matches!(busy, StoreError::Busy(_)), "{busy}");
    drop(store);
    let other = RunStore::open(&out, manifest("other-model"), "cpu").err().unwrap();
    assert!(other.to_string().contains("holds another run") && other.to_string().contains("other-model"), "{other}");

    let text = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    std::fs::write(out.join("manifest.json"), text.replace("\"store_format\": 3", "\"store_format\": 9")).unwrap();
    let newer = RunStore::open(&out, manifest("m"), "cpu").err().unwrap();
    assert!(newer.to_string().contains("newer herd") && newer.to_string().contains("upgrade"), "{newer}");

    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(RunStore::open(&file, manifest("m"), "cpu"), Err(StoreError::NotADirectory(_))));
    assert!(matches!(
        read_table(&[Path::new("/nonexistent").to_path_buf()], Table::ConformityTrials),
        Err(StoreError::NotARun(_))
    ));
}

#[test]
fn a_committed_part_truncated_or_overwritten_is_named_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    {
        let mut store = RunStore::open(&out, manifest("m"), "cpu").unwrap();
        commit(&mut store, &["u1", "u2"]);
    }
    let part = std::fs::read_dir(out.join("baseline_candidates")).unwrap().flatten().map(|e| e.path()).next().unwrap();
    let bytes = std::fs::read(&part).unwrap();
    for damaged in [bytes[..bytes.len() / 2].to_vec(), vec![0u8; bytes.len()], Vec::new()] {
        std::fs::write(&part, &damaged).unwrap();
        let err = read_table(std::slice::from_ref(&out), Table::BaselineCandidates).unwrap_err();
        assert!(matches!(&err, StoreError::Damaged { part: p, .. } if *p == part), "{err}");
        let text = err.to_string();
        assert!(text.contains(&part.display().to_string()) && text.contains("fix:"), "{text}");
    }
}

#[test]
fn a_session_that_would_compute_another_way_is_refused_and_each_session_records_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let path = |isa: &str, version: &str| {
        serde_json::json!({"device": "cpu", "isa": isa, "weights": "int8", "weights_from": "gguf",
            "activations": "int8 per block of 32", "dtype": "f32", "herd_version": version})
    };
    let with = |compute| Manifest { compute: Some(compute), ..manifest("m") };
    RunStore::open(&out, with(path("avx512-vnni", "0.1.0")), "cpu").unwrap().finish("incomplete").unwrap();
    // A newer herd computing the same way resumes.
    RunStore::open(&out, with(path("avx512-vnni", "0.2.0")), "cpu").unwrap().finish("incomplete").unwrap();
    let err = RunStore::open(&out, with(path("avx2", "0.2.0")), "cpu").err().unwrap();
    assert!(matches!(err, StoreError::DifferentCompute { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("isa: avx512-vnni → avx2") && !text.contains("herd_version") && text.contains("fix:"),
        "{text}"
    );

    let stored = herd_store::read_run_manifest(&out).unwrap();
    assert_eq!(stored.compute, Some(path("avx512-vnni", "0.2.0")));
    let versions: Vec<_> =
        stored.sessions.iter().map(|s| s.compute.as_ref().unwrap()["herd_version"].clone()).collect();
    assert_eq!(versions, ["0.1.0", "0.2.0"]);

    // A folder written before herd recorded compute paths takes the first session's that does.
    let old = dir.path().join("old");
    RunStore::open(&old, manifest("m"), "cpu").unwrap().finish("incomplete").unwrap();
    RunStore::open(&old, with(path("avx2", "0.2.0")), "cpu").unwrap().finish("complete").unwrap();
    assert_eq!(herd_store::read_run_manifest(&old).unwrap().compute, Some(path("avx2", "0.2.0")));
}
