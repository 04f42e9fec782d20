//! Faults injected into a run folder after its commits: flipped bytes, truncation, deleted and copied
//! records, overlapping runs, a user's files, a full disk and a killed session. Each is an error naming
//! the file (or is repaired by resuming), never rows read in silence.

mod common;

use common::{decider, identity};
use herd_store::{
    Batch, Manifest, ReadOptions, RunStore, StoreError, Table, read_run_manifest, read_table, read_table_with,
    verify_run,
};
use herd_test_support::stored_table::frame;
use std::path::{Path, PathBuf};

fn manifest(shard: &str) -> Manifest {
    // What herd run records of every input (banks, sim parameters) since store format 2.
    let inputs = [("experiment".to_owned(), "cd".repeat(32))].into();
    Manifest { experiment_file: "exp.toml".into(), units_total: 4, inputs, ..Manifest::new(identity("m", shard)) }
}

/// Commits one batch per unit, 40 deciders each.
fn commit(store: &mut RunStore, units: &[&str]) {
    for unit in units {
        let rows: Vec<_> = (1..=40).map(|d| decider(unit, d, d)).collect();
        let mut batch = Batch::new(vec![unit.to_string()]);
        batch.add(&rows).unwrap();
        store.commit(batch).unwrap();
    }
}

fn finished_run(dir: &Path, name: &str, shard: &str, units: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut store = RunStore::open(&out, manifest(shard), "cpu").unwrap();
    commit(&mut store, units);
    store.finish("complete").unwrap();
    out
}

fn files(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    files
}

fn read(out: &Path) -> Result<Option<polars::prelude::DataFrame>, StoreError> {
    Ok(read_table(std::slice::from_ref(&out.to_path_buf()), Table::AllocationDeciders)?.map(frame))
}

#[test]
fn a_byte_flipped_anywhere_in_a_part_is_an_error_naming_part_record_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2"]);
    let part = files(&out.join("allocation_deciders"))[0].clone();
    let record = out.join("committed").join(part.file_name().unwrap()).with_extension("json");
    let clean = std::fs::read(&part).unwrap();
    let before = read(&out).unwrap().unwrap();
    // 24 offsets over the whole file: magic, column chunks, page headers, footer.
    let offsets: Vec<usize> = (0..24).map(|i| i * (clean.len() - 1) / 23).collect();
    for &offset in &offsets {
        let mut damaged = clean.clone();
        damaged[offset] ^= 0x5a;
        std::fs::write(&part, &damaged).unwrap();
        let err = read(&out).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::Damaged { .. }), "offset {offset}: {text}");
        assert!(
            text.contains(&part.display().to_string())
                && text.contains(&record.display().to_string())
                && text.contains("herd run")
                && text.contains("herd verify"),
            "offset {offset}: {text}"
        );
        let v = verify_run(&out).unwrap();
        assert!(!v.is_clean() && v.problems[0].contains("changed after the commit"), "offset {offset}: {v:?}");
    }
    std::fs::write(&part, &clean).unwrap();
    assert!(read(&out).unwrap().unwrap().equals_missing(&before));
    assert!(verify_run(&out).unwrap().is_clean());
}

#[test]
fn a_truncated_or_damaged_part_is_run_again_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2", "u3"]);
    let parts = files(&out.join("allocation_deciders"));
    let truncated = &parts[0];
    let bytes = std::fs::read(truncated).unwrap();
    std::fs::write(truncated, &bytes[..bytes.len() - 10]).unwrap();
    let err = read(&out).unwrap_err().to_string();
    assert!(err.contains("truncated") && err.contains(&truncated.display().to_string()), "{err}");

    let store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    assert_eq!(store.units_stored(), 2, "the damaged batch is not stored");
    assert_eq!(store.repairs().len(), 1);
    assert!(store.repairs()[0].contains(&truncated.display().to_string()), "{:?}", store.repairs());
    assert!(!truncated.exists(), "its part goes with its record");
    let unit = ["u1", "u2", "u3"].into_iter().find(|u| !store.is_stored(u)).unwrap().to_owned();
    let mut store = store;
    commit(&mut store, &[&unit]);
    store.finish("complete").unwrap();
    assert_eq!(read(&out).unwrap().unwrap().height(), 120);
    assert!(verify_run(&out).unwrap().is_clean());
}

#[test]
fn a_deleted_commit_record_is_seen_against_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2", "u3"]);
    let record = files(&out.join("committed"))[1].clone();
    std::fs::remove_file(&record).unwrap();
    let err = read(&out).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Counts { .. }), "{text}");
    assert!(text.contains("3 units") && text.contains("2 units") && text.contains("missing"), "{text}");
    assert!(!verify_run(&out).unwrap().is_clean());
    // Resuming runs the missing record's unit again.
    let store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    assert_eq!(store.units_stored(), 2);
    assert!(store.repairs().iter().any(|r| r.contains("run again")), "{:?}", store.repairs());
}

#[test]
fn a_copied_commit_record_is_an_error_naming_both_unless_deduped() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2"]);
    let before = read(&out).unwrap().unwrap();
    let record = files(&out.join("committed"))[0].clone();
    let copy = out.join("committed/copy of record.json");
    std::fs::copy(&record, &copy).unwrap();
    let err = read(&out).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::DuplicateUnit { .. }), "{text}");
    assert!(
        text.contains(&record.display().to_string())
            && text.contains(&copy.display().to_string())
            && text.contains(&format!("remove {}", copy.display())),
        "{text}"
    );
    let deduped =
        read_table_with(std::slice::from_ref(&out), Table::AllocationDeciders, ReadOptions { dedupe: true }).unwrap();
    assert!(frame(deduped.parquet.unwrap()).equals_missing(&before), "--dedupe keeps the first copy");
    assert!(RunStore::open(&out, manifest("all"), "cpu").is_err(), "resume refuses a copied record too");
    assert!(!verify_run(&out).unwrap().is_clean());
}

#[test]
fn a_run_beside_its_own_shard_and_overlapping_shards_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let whole = finished_run(dir.path(), "whole", "all", &["u1", "u2", "u3", "u4"]);
    let first = finished_run(dir.path(), "first", "1/2", &["u1", "u3"]);
    let second = finished_run(dir.path(), "second", "2/2", &["u2", "u4"]);
    let third = finished_run(dir.path(), "third", "1/3", &["u1", "u4"]);
    let table = Table::AllocationDeciders;
    let merged = frame(read_table(&[first.clone(), second.clone()], table).unwrap().unwrap());
    assert_eq!(merged.height(), frame(read_table(std::slice::from_ref(&whole), table).unwrap().unwrap()).height());
    for (a, b, why) in
        [(&whole, &first, "whole"), (&first, &third, "different splits"), (&first, &first, "same folder")]
    {
        let err = read_table(&[a.clone(), b.clone()], table).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::Overlap { .. }), "{text}");
        assert!(text.contains(&a.display().to_string()) && text.contains(&b.display().to_string()), "{text}");
        assert!(text.contains(why), "{text}");
        let deduped = read_table_with(&[a.clone(), b.clone()], table, ReadOptions { dedupe: true });
        assert!(deduped.is_err(), "overlapping runs are refused even with --dedupe");
    }
    // A copy of a shard under another experiment hash: same units, not the same run, still caught.
    let other = dir.path().join("edited");
    let mut edited = manifest("all");
    edited.identity.experiment_sha256 = "cd".repeat(32);
    let mut store = RunStore::open(&other, edited, "cpu").unwrap();
    commit(&mut store, &["u3"]);
    store.finish("complete").unwrap();
    let err = read_table(&[first.clone(), other.clone()], table).unwrap_err().to_string();
    assert!(err.contains("unit u3 is stored twice") && err.contains("--dedupe"), "{err}");
    let deduped = read_table_with(&[first, other], table, ReadOptions { dedupe: true }).unwrap();
    assert_eq!((frame(deduped.parquet.unwrap()).height(), deduped.rows, deduped.duplicate_units_dropped), (80, 80, 1));
}

#[test]
fn resume_removes_only_what_herd_wrote_and_lists_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1"]);
    let folder = out.join("allocation_deciders");
    let mine = folder.join("my_filtered.parquet");
    let curves = folder.join("curves.csv");
    let dotfile = folder.join(".notes.tmp");
    let orphan = folder.join("b0123456789abcdef0123.parquet");
    let temporary = out.join("committed/.b0123456789abcdef0123.json.tmp");
    for path in [&mine, &curves, &dotfile, &orphan, &temporary] {
        std::fs::write(path, b"data").unwrap();
    }
    let store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    assert_eq!(store.orphans_removed(), 2);
    assert!(!orphan.exists() && !temporary.exists(), "herd's leftovers are removed");
    assert!(mine.exists() && curves.exists() && dotfile.exists(), "the user's files stay");
    let mut foreign = store.foreign_files().to_vec();
    foreign.sort();
    assert_eq!(foreign, [dotfile, curves, mine]);
    drop(store);
    assert_eq!(read(&out).unwrap().unwrap().height(), 40, "reads ignore the user's files");
}

#[test]
fn a_full_disk_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    commit(&mut store, &["u1"]);
    // The temporary part of the next batch's id written to /dev/full: every write fails with ENOSPC.
    let id = {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(2u64.to_le_bytes());
        hash.update(b"u2");
        format!("b{}", &hex::encode(hash.finalize())[..20])
    };
    let tmp = out.join("allocation_deciders").join(format!(".{id}.parquet.tmp"));
    std::os::unix::fs::symlink("/dev/full", &tmp).unwrap();
    let rows: Vec<_> = (1..=40).map(|d| decider("u2", d, d)).collect();
    let mut batch = Batch::new(vec!["u2".into()]);
    batch.add(&rows).unwrap();
    let err = store.commit(batch).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::DiskFull { .. }), "{text}");
    let part = out.join("allocation_deciders").join(format!("{id}.parquet"));
    assert!(text.contains("disk is full") && text.contains(&part.display().to_string()), "{text}");
    assert!(!text.contains("thrift"), "{text}");
    assert!(!store.is_stored("u2"));
}

#[test]
fn manifest_totals_and_counts_cover_every_session_even_killed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    {
        // A session killed after two commits: no finish, the lock released as on a kill.
        let mut store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
        commit(&mut store, &["u1", "u2"]);
    }
    let killed = read_run_manifest(&out).unwrap();
    assert_eq!(killed.sessions[0].units_run, 2, "the manifest follows each commit");
    assert_eq!(killed.counts["allocation/deciders"], 80);
    assert_eq!(read(&out).unwrap().unwrap().height(), 80, "a killed run reads");
    // A kill between a record and the manifest's update: the manifest is one batch behind.
    let behind = std::fs::read(out.join("manifest.json")).unwrap();
    {
        let mut store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
        commit(&mut store, &["u3"]);
    }
    std::fs::write(out.join("manifest.json"), &behind).unwrap();
    let mut with_running = read_run_manifest(&out).unwrap();
    assert_eq!(with_running.units_stored, 2);
    assert_eq!(read(&out).unwrap().unwrap().height(), 120, "the newest record may precede the manifest");
    with_running.sessions.last_mut().unwrap().status = "complete".into();
    std::fs::write(out.join("manifest.json"), serde_json::to_vec(&with_running).unwrap()).unwrap();
    assert!(read(&out).is_err(), "a finished session's totals must match exactly");
    with_running.sessions.last_mut().unwrap().status = "running".into();
    std::fs::write(out.join("manifest.json"), serde_json::to_vec(&with_running).unwrap()).unwrap();

    let mut store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    commit(&mut store, &["u4"]);
    store.finish("complete").unwrap();
    let m = read_run_manifest(&out).unwrap();
    let runs: Vec<u64> = m.sessions.iter().map(|s| s.units_run).collect();
    assert_eq!(runs.iter().sum::<u64>(), 4, "{runs:?}");
    assert_eq!(m.sessions[0].units_run, 3, "the uncounted batch belongs to the killed session");
    assert_eq!(m.counts["allocation/deciders"], 160);
    assert_eq!(m.counts["allocation/filled"], 4 * 8);
    assert_eq!((m.units_stored, m.batches, m.rows["allocation_deciders"]), (4, Some(4), 160));
    assert!(verify_run(&out).unwrap().is_clean());
}

#[test]
fn a_format_1_folder_reads_as_before_and_verify_says_it_is_unverifiable() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2"]);
    // What herd wrote before digests: records without parts or seq, a manifest without batches.
    for record in files(&out.join("committed")) {
        let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        let object = value.as_object_mut().unwrap();
        object.remove("parts");
        object.remove("seq");
        object.remove("counts");
        object.remove("run");
        object.remove("inputs");
        std::fs::write(&record, serde_json::to_vec(&value).unwrap()).unwrap();
    }
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    m["store_format"] = 1.into();
    m.as_object_mut().unwrap().remove("batches");
    m.as_object_mut().unwrap().remove("inputs");
    m.as_object_mut().unwrap().remove("identified_from");
    std::fs::write(out.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
    assert_eq!(read(&out).unwrap().unwrap().height(), 80);
    let v = verify_run(&out).unwrap();
    assert!(v.is_clean() && v.parts_unverifiable == 2 && v.parts_verified == 0, "{v:?}");
    assert!(v.notes.iter().any(|n| n.contains("cannot be detected")), "{v:?}");
    // Resumed by this herd: new batches are verifiable, old ones stay readable.
    let mut store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    commit(&mut store, &["u3"]);
    store.finish("complete").unwrap();
    assert_eq!(read(&out).unwrap().unwrap().height(), 120);
    let v = verify_run(&out).unwrap();
    assert!(v.is_clean() && v.parts_unverifiable == 2 && v.parts_verified == 1, "{v:?}");
}

#[test]
fn a_fifo_or_an_endless_file_in_a_parts_place_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2"]);
    let part = files(&out.join("allocation_deciders"))[0].clone();
    // A FIFO nobody writes to: opening it to read would block forever.
    std::fs::remove_file(&part).unwrap();
    let status = std::process::Command::new("mkfifo").arg(&part).status().expect("mkfifo (coreutils) runs");
    assert!(status.success());
    let (done, wait) = std::sync::mpsc::channel();
    let reader = out.clone();
    std::thread::spawn(move || done.send((read(&reader).map(|_| ()), verify_run(&reader))).unwrap());
    let (read_result, verified) = wait
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the read returned instead of blocking on the FIFO");
    let err = read_result.unwrap_err().to_string();
    assert!(err.contains("not a regular file") && err.contains(&part.display().to_string()), "{err}");
    let verified = verified.unwrap();
    assert!(!verified.is_clean() && verified.problems.iter().any(|p| p.contains("not a regular file")), "{verified:?}");
    // /dev/zero behind a symlink: endless bytes, refused by its size before a byte is read.
    std::fs::remove_file(&part).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &part).unwrap();
    let err = read(&out).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    // A part grown far past its recorded size is refused by its size alone.
    std::fs::remove_file(&part).unwrap();
    std::fs::File::create(&part).unwrap().set_len(64 << 30).unwrap();
    let err = read(&out).unwrap_err().to_string();
    assert!(err.contains(&part.display().to_string()), "{err}");
    assert!(!verify_run(&out).unwrap().is_clean());
}

#[test]
fn a_record_that_lost_its_digests_is_refused_by_read_and_verify_and_rerun_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = finished_run(dir.path(), "run", "all", &["u1", "u2"]);
    // Tampering: the digests go from one record (so its part could be changed unseen), its `seq` stays.
    let record = files(&out.join("committed"))[0].clone();
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    value.as_object_mut().unwrap().remove("parts");
    std::fs::write(&record, serde_json::to_vec(&value).unwrap()).unwrap();
    let err = read(&out).unwrap_err().to_string();
    assert!(err.contains(&record.display().to_string()) && err.contains("without the digest"), "{err}");
    let v = verify_run(&out).unwrap();
    assert!(!v.is_clean() && v.problems.iter().any(|p| p.contains("without the digest")), "{v:?}");
    // Resume repairs it: the record goes, its unit is run again, and the folder verifies.
    let mut store = RunStore::open(&out, manifest("all"), "cpu").unwrap();
    assert_eq!(store.units_stored(), 1);
    assert!(store.repairs().iter().any(|r| r.contains("without the digest")), "{:?}", store.repairs());
    let unit = ["u1", "u2"].into_iter().find(|u| !store.is_stored(u)).unwrap().to_owned();
    commit(&mut store, &[&unit]);
    store.finish("complete").unwrap();
    assert_eq!(read(&out).unwrap().unwrap().height(), 80);
    assert!(verify_run(&out).unwrap().is_clean());
}
