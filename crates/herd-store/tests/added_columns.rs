//! Tables may gain columns (schema.rs): the group names of `allocation_dyads` arrived after runs had
//! been written. A folder holding parts from before and after such a change (a run resumed by a newer
//! herd) reads back whole, the older parts' rows null in the new columns, and every row of the
//! allocation tables round-trips through Parquet with its group names.

use herd_store::{AllocationDyadRow, Batch, Manifest, RunIdentity, RunStore, Table, read_table};
use herd_test_support::stored_table;
use polars::prelude::*;

fn manifest() -> Manifest {
    let identity = RunIdentity {
        experiment: "exp".into(),
        study: "minimal_group".into(),
        experiment_sha256: "ab".repeat(32),
        model: "m".into(),
        backend: "sim".into(),
        shard: "all".into(),
    };
    Manifest { experiment_file: "exp.toml".into(), units_total: 2, ..Manifest::new(identity) }
}

/// Decider 1 (minority) of a society of 3 giving `points` to target 2 (minority) and the rest to 3.
fn dyads(unit: &str, swapped: bool, points: f64) -> Vec<AllocationDyadRow> {
    let (minority, majority) = if swapped { ("Tesim", "Kalvo") } else { ("Kalvo", "Tesim") };
    [(2, true, points), (3, false, 100.0 - points)]
        .into_iter()
        .enumerate()
        .map(|(position, (target, minority_target, points))| AllocationDyadRow {
            run_id: "r".into(),
            unit_id: unit.into(),
            experiment: "exp".into(),
            model: "m".into(),
            backend: "sim".into(),
            reasoning: "off".into(),
            instrument: "base".into(),
            labels: "visible".into(),
            m: 2,
            seed: 0,
            swap_pass: if swapped { "swapped" } else { "original" }.into(),
            decider: 1,
            target,
            target_id: format!("agent_{target:02}"),
            minority_decider: true,
            minority_target,
            same_group: minority_target,
            decider_group: minority.into(),
            target_group: if minority_target { minority } else { majority }.into(),
            target_position: position as f64 + 1.0,
            points,
            filled: false,
        })
        .collect()
}

fn texts(frame: &DataFrame, column: &str) -> Vec<Option<String>> {
    frame.column(column).unwrap().str().unwrap().iter().map(|v| v.map(str::to_owned)).collect()
}

#[test]
fn parts_with_and_without_added_columns_read_back_together() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut store = RunStore::open(&out, manifest(), "cpu").unwrap();
    for (unit, swapped, points) in [("a", false, 60.0), ("b", true, 70.0)] {
        let mut batch = Batch::new(vec![unit.into()]);
        batch.add(&dyads(unit, swapped, points)).unwrap();
        store.commit(batch).unwrap();
    }
    store.finish("complete").unwrap();

    let whole = stored_table::frame(read_table(std::slice::from_ref(&out), Table::AllocationDyads).unwrap().unwrap());
    // (unit, decider's group, target's group) in unit order; parts come back in batch-id order.
    let mut named: Vec<(String, String, String)> = texts(&whole, "unit_id")
        .into_iter()
        .zip(texts(&whole, "decider_group"))
        .zip(texts(&whole, "target_group"))
        .map(|((u, d), t)| (u.unwrap(), d.unwrap(), t.unwrap()))
        .collect();
    named.sort();
    let expected = [("a", "Kalvo", "Kalvo"), ("a", "Kalvo", "Tesim"), ("b", "Tesim", "Kalvo"), ("b", "Tesim", "Tesim")];
    assert_eq!(named, expected.map(|(u, d, t)| (u.to_owned(), d.to_owned(), t.to_owned())));

    // Rewrite one part as a herd without the group names wrote it.
    let parts: Vec<_> = std::fs::read_dir(out.join("allocation_dyads")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(parts.len(), 2);
    let old = &parts[0];
    let frame = ParquetReader::new(std::fs::File::open(old).unwrap()).finish().unwrap();
    let mut frame = frame.drop_many(["decider_group", "target_group"]);
    ParquetWriter::new(std::fs::File::create(old).unwrap()).finish(&mut frame).unwrap();
    // Its commit record as that herd wrote it too: without digests, number or counts (store format 1),
    // so the part is read without being compared with what this herd committed.
    let record = out.join("committed").join(old.file_name().unwrap()).with_extension("json");
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    for key in ["parts", "seq", "counts"] {
        value.as_object_mut().unwrap().remove(key);
    }
    std::fs::write(&record, serde_json::to_vec(&value).unwrap()).unwrap();
    // And the folder as this herd leaves an older one it resumed: its records are identified from the
    // first commit of that session on (here, after both).
    let manifest_path = out.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["identified_from"] = 3.into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();

    let mixed = stored_table::frame(read_table(std::slice::from_ref(&out), Table::AllocationDyads).unwrap().unwrap());
    assert_eq!(mixed.height(), 4);
    assert_eq!(mixed.get_column_names(), whole.get_column_names(), "the columns keep their order");
    let names = texts(&mixed, "target_group");
    assert_eq!(names.iter().filter(|n| n.is_none()).count(), 2, "the older part's rows: {names:?}");
    assert_eq!(mixed.column("points").unwrap().f64().unwrap().sum(), Some(200.0));
}
