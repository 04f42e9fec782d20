//! What the tests that run `herd run` against loopback servers share (`pipeline.rs`, `batch.rs`): the
//! shipped experiments copied with absolute bank paths, the command, and the stored rows read back.
#![allow(dead_code)] // each test binary uses its own share

use herd_store::{Table, read_table};
use herd_test_support::capacity_server::CapacityServer;
use herd_test_support::stored_table;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A shipped experiment copied into `dir` with its bank paths made absolute; minimal groups with
/// reasoning off only (the default model has no thinking mode, and the sim backend runs every mode).
pub fn experiment(dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join("data/experiments").join(name)).unwrap();
    let text = text.replace("reasoning = [\"on\", \"off\"]", "reasoning = [\"off\"]");
    let text = text.replace("\"../banks/", &format!("\"{}/data/banks/", root().display()));
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn herd(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_herd"));
    command.args(args).current_dir(root());
    command
}

/// `herd run --backend openai` on `servers` (the default model, whose registry entry turns the
/// conformity baseline filter off: a capacity server's fixed answers would pass no image).
pub fn run_args(experiment: &Path, out: &Path, servers: &[&CapacityServer], attempts: u32) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--backend",
        "openai",
        "--experiment",
        experiment.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-quick-look",
        "--retry-delay",
        "0.01",
    ]
    .map(String::from)
    .to_vec();
    args.extend(["--max-attempts".to_owned(), attempts.to_string()]);
    for server in servers {
        args.extend(["--endpoint".to_owned(), server.url()]);
    }
    args
}

pub fn run(args: &[String]) -> Output {
    herd(&args.iter().map(String::as_str).collect::<Vec<_>>()).output().unwrap()
}

pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Every row's unit id (with the decider for allocations), sorted, duplicates kept.
pub fn unit_ids(run: &Path, table: Table) -> Vec<String> {
    let Some(frame) = read_table(&[run.to_path_buf()], table).unwrap().map(stored_table::frame) else {
        return Vec::new();
    };
    let column = |name: &str| -> Vec<String> {
        let column = frame.column(name).unwrap();
        (0..frame.height())
            .map(|i| match column.get(i).unwrap() {
                polars::prelude::AnyValue::String(s) => s.to_owned(),
                other => other.to_string(),
            })
            .collect()
    };
    let mut ids: Vec<String> = match table {
        Table::AllocationDeciders => {
            column("unit_id").into_iter().zip(column("decider")).map(|(u, d)| format!("{u}#{d}")).collect()
        }
        _ => column("unit_id"),
    };
    ids.sort();
    ids
}

/// The unit ids a complete run stores, from the sim backend (the same units whoever answers, with no
/// baseline filter).
pub fn expected_units(experiment: &Path, table: Table) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let e = experiment.to_str().unwrap();
    let out = herd(&["run", "--backend", "sim", "--experiment", e, "--out", dir.path().to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    unit_ids(dir.path(), table)
}

/// `ids` are `expected`, said briefly (the lists are hundreds long).
pub fn assert_same_units(ids: &[String], expected: &[String], what: &str) {
    let (have, want): (BTreeSet<&String>, BTreeSet<&String>) = (ids.iter().collect(), expected.iter().collect());
    let missing: Vec<_> = want.difference(&have).take(5).collect();
    let extra: Vec<_> = have.difference(&want).take(5).collect();
    assert!(
        ids.len() == expected.len() && missing.is_empty() && extra.is_empty(),
        "{what}: {} rows for {} expected; missing e.g. {missing:?}, unexpected e.g. {extra:?}",
        ids.len(),
        expected.len()
    );
}

pub fn assert_each_once(ids: &[String], what: &str) {
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for id in ids {
        *counts.entry(id).or_default() += 1;
    }
    let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "{what}: stored more than once: {repeated:?}");
}

/// Every row of `table` as text, sorted, without `latency_s` (a timing).
pub fn rows(dir: &Path, table: Table) -> Vec<String> {
    read_table(&[dir.to_path_buf()], table)
        .unwrap()
        .map_or_else(Vec::new, |parquet| stored_table::row_texts(&stored_table::frame(parquet), &["latency_s"]))
}
