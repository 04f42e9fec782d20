//! A run folder is one run: commit records name their run and the digest of its inputs, so a record
//! (with its parts) copied in from another run, a batch computed from other inputs, an edited record
//! and shards of different inputs are refused by a read, listed by `herd verify` and repaired by a
//! resume; a manifest that lost its input fingerprint is refused for resume; and the run's digest,
//! kept elsewhere, pins the whole folder.

mod common;

use common::{decider, identity};
use herd_store::{Batch, Manifest, RunStore, StoreError, Table, read_table, verify_run};
use herd_test_support::stored_table::frame;
use std::path::{Path, PathBuf};

fn manifest(model: &str, shard: &str, sim: &str) -> Manifest {
    let inputs = [("experiment".to_owned(), "cd".repeat(32)), ("sim parameters".to_owned(), sim.repeat(32))].into();
    Manifest { experiment_file: "exp.toml".into(), units_total: 4, inputs, ..Manifest::new(identity(model, shard)) }
}

/// A finished run of `units` (one batch each, 10 deciders whose output holds `points`).
fn run(dir: &Path, name: &str, m: Manifest, units: &[&str], points: i64) -> PathBuf {
    let out = dir.join(name);
    let mut store = RunStore::open(&out, m, "cpu").unwrap();
    commit(&mut store, units, points);
    store.finish("complete").unwrap();
    out
}

fn commit(store: &mut RunStore, units: &[&str], points: i64) {
    for unit in units {
        let rows: Vec<_> = (1..=10).map(|d| decider(unit, d, points)).collect();
        let mut batch = Batch::new(vec![unit.to_string()]);
        batch.add(&rows).unwrap();
        store.commit(batch).unwrap();
    }
}

fn read(dirs: &[PathBuf]) -> Result<usize, StoreError> {
    Ok(read_table(dirs, Table::AllocationDeciders)?.map_or(0, |bytes| frame(bytes).height()))
}

fn records(out: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(out.join("committed")).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    files
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(value.as_object_mut().unwrap());
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// Copies the record of the batch of `unit` and its part from `from` over `to`'s: the same units give
/// the same batch name, so the files replace the run's own and every count still adds up.
fn transplant(from: &Path, to: &Path) -> PathBuf {
    let record = records(from)[0].clone();
    let name = record.file_name().unwrap();
    std::fs::copy(&record, to.join("committed").join(name)).unwrap();
    let part = Path::new(name).with_extension("parquet");
    std::fs::copy(from.join("allocation_deciders").join(&part), to.join("allocation_deciders").join(&part)).unwrap();
    to.join("committed").join(name)
}

#[test]
fn a_record_and_its_part_from_another_run_are_refused_and_rerun_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ours = run(dir.path(), "ours", manifest("m", "all", "11"), &["u1", "u2"], 50);
    let theirs = run(dir.path(), "theirs", manifest("other-model", "all", "11"), &["u1", "u2"], 99);
    let record = transplant(&theirs, &ours);
    let err = read(std::slice::from_ref(&ours)).unwrap_err().to_string();
    assert!(
        err.contains(&record.display().to_string()) && err.contains("another run") && err.contains("fix:"),
        "{err}"
    );
    let v = verify_run(&ours).unwrap();
    assert!(v.problems.iter().any(|p| p.contains("another run")), "{v:?}");
    // A resume drops the foreign record (its part goes as an orphan) and runs its unit again.
    let mut store = RunStore::open(&ours, manifest("m", "all", "11"), "cpu").unwrap();
    assert_eq!(store.units_stored(), 1);
    assert!(
        store.repairs().iter().any(|r| r.contains("another run") && r.contains("run again")),
        "{:?}",
        store.repairs()
    );
    let unit = ["u1", "u2"].into_iter().find(|u| !store.is_stored(u)).unwrap().to_owned();
    commit(&mut store, &[&unit], 50);
    store.finish("complete").unwrap();
    assert_eq!(read(std::slice::from_ref(&ours)).unwrap(), 20);
    assert!(verify_run(&ours).unwrap().is_clean());
}

#[test]
fn a_batch_computed_from_other_inputs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // One identity (same experiment, model, backend, shard), other sim parameters.
    let ours = run(dir.path(), "ours", manifest("m", "all", "11"), &["u1", "u2"], 50);
    let theirs = run(dir.path(), "theirs", manifest("m", "all", "22"), &["u1", "u2"], 99);
    transplant(&theirs, &ours);
    let err = read(std::slice::from_ref(&ours)).unwrap_err().to_string();
    assert!(err.contains("other inputs"), "{err}");
    let store = RunStore::open(&ours, manifest("m", "all", "11"), "cpu").unwrap();
    assert_eq!(store.units_stored(), 1, "{:?}", store.repairs());
}

/// An edit of a JSON object in place.
type Edit = fn(&mut serde_json::Map<String, serde_json::Value>);

#[test]
fn an_edited_record_is_refused_by_a_read_and_repaired_by_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Edit); 4] = [
        ("rows", |r| r["rows"]["allocation_deciders"] = 7.into()),
        // Rewritten to look like store format 1, which carried neither digests nor numbers.
        ("without its commit number", |r| {
            for field in ["parts", "seq", "run", "inputs", "counts"] {
                r.remove(field);
            }
        }),
        ("without its run id", |r| drop(r.remove("run"))),
        ("without its input fingerprint", |r| drop(r.remove("inputs"))),
    ];
    for (i, (expected, edit)) in cases.into_iter().enumerate() {
        let out = run(dir.path(), &format!("run-{i}"), manifest("m", "all", "11"), &["u1", "u2"], 50);
        edit_json(&records(&out)[0], edit);
        let err = read(std::slice::from_ref(&out)).unwrap_err().to_string();
        assert!(err.contains("fix:"), "{expected}: {err}");
        let v = verify_run(&out).unwrap();
        assert!(v.problems.iter().any(|p| p.contains(expected)), "{expected}: {v:?}");
        // Before, an edited row count was read as damage forever: the resume trusted the record.
        let mut store = RunStore::open(&out, manifest("m", "all", "11"), "cpu").unwrap();
        assert_eq!(store.units_stored(), 1, "{expected}: {:?}", store.repairs());
        assert!(store.repairs().iter().any(|r| r.contains(expected)), "{expected}: {:?}", store.repairs());
        let unit = ["u1", "u2"].into_iter().find(|u| !store.is_stored(u)).unwrap().to_owned();
        commit(&mut store, &[&unit], 50);
        store.finish("complete").unwrap();
        assert_eq!(read(std::slice::from_ref(&out)).unwrap(), 20, "{expected}");
        assert!(verify_run(&out).unwrap().is_clean(), "{expected}");
    }
}

#[test]
fn a_manifest_that_lost_its_fingerprint_is_refused_for_resume_unless_it_predates_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "run", manifest("m", "all", "11"), &["u1"], 50);
    edit_json(&out.join("manifest.json"), |m| drop(m.remove("inputs")));
    let err = RunStore::open(&out, manifest("m", "all", "11"), "cpu").err().expect("refused").to_string();
    assert!(err.contains("no input fingerprint") && err.contains("fix:"), "{err}");
    assert!(verify_run(&out).unwrap().problems.iter().any(|p| p.contains("no input fingerprint")));
    // Other inputs than the run's are refused too, naming the input.
    edit_json(&out.join("manifest.json"), |m| {
        m.insert(
            "inputs".into(),
            serde_json::json!({"experiment": "cd".repeat(32), "sim parameters": "33".repeat(32)}),
        );
    });
    let err = RunStore::open(&out, manifest("m", "all", "11"), "cpu").err().expect("refused").to_string();
    assert!(err.contains("sim parameters: sha256 333333") && err.contains("other inputs"), "{err}");
    // A folder of store format 1 (before fingerprints and identified records) takes this session's,
    // and its new records are identified from the session's first commit on.
    edit_json(&out.join("manifest.json"), |m| {
        m.remove("inputs");
        m.remove("identified_from");
        m.insert("store_format".into(), 1.into());
    });
    edit_json(&records(&out)[0], |r| {
        r.remove("run");
        r.remove("inputs");
    });
    let mut store = RunStore::open(&out, manifest("m", "all", "11"), "cpu").unwrap();
    assert!(store.repairs().is_empty(), "{:?}", store.repairs());
    assert_eq!(store.manifest().identified_from, Some(2));
    commit(&mut store, &["u2"], 50);
    store.finish("complete").unwrap();
    assert_eq!(read(std::slice::from_ref(&out)).unwrap(), 20);
    assert!(verify_run(&out).unwrap().is_clean());
}

#[test]
fn shards_computed_from_different_inputs_are_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), "s1", manifest("m", "1/2", "11"), &["u1"], 50);
    let second = run(dir.path(), "s2", manifest("m", "2/2", "22"), &["u2"], 50);
    let err = read(&[first.clone(), second.clone()]).unwrap_err().to_string();
    assert!(err.contains("different inputs") && err.contains("sim parameters"), "{err}");
    let same = run(dir.path(), "s2-same", manifest("m", "2/2", "11"), &["u2"], 50);
    assert_eq!(read(&[first, same]).unwrap(), 20);
}

#[test]
fn the_run_digest_pins_what_the_folders_own_digests_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "run", manifest("m", "all", "11"), &["u1", "u2"], 50);
    let kept = verify_run(&out).unwrap().digest;
    assert!(kept.starts_with("sha256:") && kept.len() == 7 + 64, "{kept}");
    assert_eq!(verify_run(&out).unwrap().digest, kept, "the digest of an unchanged folder is stable");
    // A forger rewrites a part and recomputes its record: the folder's own checks pass, the kept
    // digest does not.
    let theirs = run(dir.path(), "theirs", manifest("m", "all", "11"), &["u1", "u2"], 99);
    transplant(&theirs, &out);
    let v = verify_run(&out).unwrap();
    assert!(v.is_clean(), "{v:?}");
    assert_ne!(v.digest, kept);
}

#[test]
fn a_record_that_no_longer_parses_is_refused_by_a_read_and_dropped_by_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    for (i, damage) in ["truncate", "fifo"].into_iter().enumerate() {
        let out = run(dir.path(), &format!("run-{i}"), manifest("m", "all", "11"), &["u1", "u2"], 50);
        let record = records(&out)[0].clone();
        if damage == "truncate" {
            let bytes = std::fs::read(&record).unwrap();
            std::fs::write(&record, &bytes[..bytes.len() / 2]).unwrap();
        } else {
            // A FIFO nobody writes: reading it would block forever.
            std::fs::remove_file(&record).unwrap();
            assert!(std::process::Command::new("mkfifo").arg(&record).status().unwrap().success());
        }
        let err = read(std::slice::from_ref(&out)).unwrap_err().to_string();
        assert!(err.contains("not a readable commit record") && err.contains("fix:"), "{damage}: {err}");
        let v = verify_run(&out).unwrap();
        assert!(v.problems.iter().any(|p| p.contains("not a readable commit record")), "{damage}: {v:?}");
        let mut store = RunStore::open(&out, manifest("m", "all", "11"), "cpu").unwrap();
        assert_eq!(store.units_stored(), 1, "{damage}");
        assert!(store.repairs().iter().any(|r| r.contains("run again")), "{damage}: {:?}", store.repairs());
        let unit = ["u1", "u2"].into_iter().find(|u| !store.is_stored(u)).unwrap().to_owned();
        commit(&mut store, &[&unit], 50);
        store.finish("complete").unwrap();
        assert_eq!(read(std::slice::from_ref(&out)).unwrap(), 20, "{damage}");
        assert!(verify_run(&out).unwrap().is_clean(), "{damage}");
    }
}
