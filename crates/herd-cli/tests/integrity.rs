//! What herd promises about the rows it reads, through the `herd` binary: a unit read twice is refused
//! (or, with `--dedupe`, read once), a run beside its own shard is refused, empty and missing inputs are
//! named as such, `herd verify` finds a changed byte that `herd run` then repairs, and `herd verify
//! --strict` against a digest kept elsewhere finds a rewrite the folder's own digests cannot. The sim
//! backend answers the runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data(name: &str) -> PathBuf {
    root().join("crates/herd-analysis/tests/data").join(name)
}

fn herd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd")).args(args).current_dir(root()).output().unwrap()
}

fn succeeds(args: &[&str]) -> Output {
    let output = herd(args);
    assert!(output.status.success(), "herd {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    output
}

fn fails(args: &[&str]) -> String {
    let output = herd(args);
    assert!(!output.status.success(), "expected failure: herd {}", args.join(" "));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// The quick minimal-group experiment in `dir` with `seeds` societies per cell, its banks by absolute
/// path.
fn experiment(dir: &Path, seeds: u32) -> PathBuf {
    let banks = root().join("data/banks");
    let text = std::fs::read_to_string(root().join("data/experiments/minimal-group.quick.toml"))
        .unwrap()
        .replace("\"../banks/", &format!("\"{}/", banks.display()))
        .replace("seeds = 8 ", &format!("seeds = {seeds} "));
    let path = dir.join("experiment.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn sim_run(experiment: &Path, out: &Path, extra: &[&str]) -> Output {
    let (e, o) = (experiment.to_str().unwrap(), out.to_str().unwrap());
    succeeds(&[&["run", "--experiment", e, "--backend", "sim", "--out", o, "--quiet"][..], extra].concat())
}

/// Every file under `dir` ending in `ext`, sorted.
fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_with(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn a_table_with_every_row_twice_is_refused_unless_deduped_and_then_equals_the_single_table() {
    let dir = tempfile::tempdir().unwrap();
    let single = data("conformity_trials.csv");
    let text = std::fs::read_to_string(&single).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    let body = if body.ends_with('\n') { body.to_owned() } else { format!("{body}\n") };
    let doubled = dir.path().join("doubled.csv");
    std::fs::write(&doubled, format!("{header}\n{body}{body}")).unwrap();
    let rows = body.lines().count();

    let analyze = |trials: &Path, out: &Path, extra: &[&str]| -> Vec<String> {
        let (t, o) = (trials.to_str().unwrap(), out.to_str().unwrap());
        [&["analyze", "conformity", "--trials", t, "--out", o][..], extra]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    fn as_refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    let refused = dir.path().join("refused");
    let stderr = fails(&as_refs(&analyze(&doubled, &refused, &[])));
    // The first repeat of row 1 is row rows+1 (1-based, the header not counted).
    assert!(
        stderr.contains("doubled.csv")
            && stderr.contains(&format!("rows 1 and {} are the same unit", rows + 1))
            && stderr.contains("--dedupe"),
        "{stderr}"
    );

    let (once, deduped) = (dir.path().join("once"), dir.path().join("deduped"));
    succeeds(&as_refs(&analyze(&single, &once, &[])));
    let output = succeeds(&as_refs(&analyze(&doubled, &deduped, &["--dedupe"])));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("left out {rows} repeated")), "{stderr}");
    let tables = files_with(&once, "csv");
    assert!(tables.len() >= 5, "conformity writes its tables: {tables:?}");
    for table in tables {
        let name = table.file_name().unwrap();
        assert_eq!(
            std::fs::read(&table).unwrap(),
            std::fs::read(deduped.join(name)).unwrap(),
            "{name:?}: the deduped table gives another result than the single one"
        );
    }
}

#[test]
fn a_run_and_its_own_shard_are_refused_together_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 2);
    let results = dir.path().join("results");
    let (whole, shard) = (results.join("whole"), results.join("shard"));
    sim_run(&file, &whole, &[]);
    sim_run(&file, &shard, &["--shard", "1/2"]);
    let out = dir.path().join("report");
    for dedupe in [false, true] {
        let mut args = vec!["report", "--results", results.to_str().unwrap(), "--out", out.to_str().unwrap()];
        if dedupe {
            // A run beside its own shard is an error of the folders given, which --dedupe does not excuse.
            args.push("--dedupe");
        }
        let stderr = fails(&args);
        assert!(
            stderr.contains(whole.to_str().unwrap())
                && stderr.contains(shard.to_str().unwrap())
                && stderr.contains("hold the same units")
                && stderr.contains("its shard 1/2"),
            "{stderr}"
        );
    }
    assert!(!out.join("report.html").exists(), "a refused report writes nothing");
}

#[test]
fn header_only_and_missing_tables_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for (name, flag, study) in
        [("conformity_trials.csv", "--trials", "conformity"), ("dyads.csv", "--dyads", "minimal-group")]
    {
        let text = std::fs::read_to_string(data(name)).unwrap();
        let empty = dir.path().join(name);
        std::fs::write(&empty, format!("{}\n", text.lines().next().unwrap())).unwrap();
        let stderr = fails(&["analyze", study, flag, empty.to_str().unwrap(), "--out", o]);
        assert!(stderr.contains(empty.to_str().unwrap()) && stderr.contains("has no rows"), "{study}: {stderr}");
    }
    let missing = dir.path().join("no-such-dyads.csv");
    let stderr = fails(&["analyze", "minimal-group", "--dyads", missing.to_str().unwrap(), "--out", o]);
    assert!(stderr.contains(missing.to_str().unwrap()) && stderr.contains("does not exist"), "{stderr}");
}

#[test]
fn verify_finds_a_changed_byte_and_a_rerun_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 1);
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    sim_run(&file, &out, &[]);
    let fresh = herd(&["verify", o]);
    assert_eq!(fresh.status.code(), Some(0), "{}", String::from_utf8_lossy(&fresh.stdout));
    assert!(String::from_utf8_lossy(&fresh.stdout).contains("ok:"));

    // One byte in the middle of one part: still a file of the same size, another SHA-256.
    let part = files_with(&out, "parquet").into_iter().next().expect("the run wrote Parquet parts");
    let mut bytes = std::fs::read(&part).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&part, &bytes).unwrap();
    let damaged = herd(&["verify", o]);
    let stdout = String::from_utf8_lossy(&damaged.stdout);
    let part_name = part.file_name().unwrap().to_str().unwrap();
    assert_eq!(damaged.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("problem:") && stdout.contains(part_name) && stdout.contains("bytes changed after the commit"),
        "{stdout}"
    );
    assert!(!String::from_utf8_lossy(&damaged.stderr).contains("panicked"));

    // The same `herd run` runs the damaged batch (one unit: a society per batch) again, and only it;
    // the folder verifies again.
    let rerun = sim_run(&file, &out, &[]);
    let stdout = String::from_utf8_lossy(&rerun.stdout);
    assert!(stdout.contains("1 run now"), "{stdout}");
    assert!(String::from_utf8_lossy(&rerun.stderr).contains(part_name));
    let repaired = herd(&["verify", o]);
    assert_eq!(
        repaired.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&repaired.stdout),
        String::from_utf8_lossy(&repaired.stderr)
    );
}

#[test]
fn verify_says_when_an_input_file_changed_since_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 1);
    // The group-name bank as the user's own copy beside the experiment file.
    let names = dir.path().join("names.toml");
    std::fs::copy(root().join("data/banks/nonce-group-names.toml"), &names).unwrap();
    let banks = root().join("data/banks");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(&format!("{}/nonce-group-names.toml", banks.display()), names.to_str().unwrap());
    assert!(text.contains(names.to_str().unwrap()), "the quick file names its group-name bank");
    std::fs::write(&file, text).unwrap();
    let out = dir.path().join("run");
    sim_run(&file, &out, &[]);
    let clean = herd(&["verify", out.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&clean.stdout).contains("changed since the run"));

    let mut edited = std::fs::read_to_string(&names).unwrap();
    edited.push_str("\n# edited after the run\n");
    std::fs::write(&names, edited).unwrap();
    let after = herd(&["verify", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&after.stdout);
    // The stored data is intact (exit 0); the note names the file and what a resume will do.
    assert_eq!(after.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("names.toml") && stdout.contains("changed since the run"), "{stdout}");
    assert!(stdout.contains("refuse to resume"), "{stdout}");
}

/// The `run digest: …` line of `herd verify`'s output.
fn run_digest(stdout: &str) -> String {
    stdout.lines().find_map(|l| l.strip_prefix("run digest: ")).expect("verify prints the run digest").to_owned()
}

#[test]
fn verify_strict_against_a_kept_digest_finds_a_consistent_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 1);
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    sim_run(&file, &out, &[]);
    let kept = run_digest(&String::from_utf8_lossy(&succeeds(&["verify", o]).stdout));
    let strict = succeeds(&["verify", &format!("--strict={kept}"), o]);
    // `--strict RUN` is a strict check of RUN, not RUN taken for a digest.
    succeeds(&["verify", "--strict", o]);
    assert!(String::from_utf8_lossy(&strict.stdout).contains("the one you kept"));

    // A rewrite with its digests recomputed: the same run, a second time with other sim parameters, into
    // another folder; its record and part replace ours (the same units give the same batch name).
    let sim = dir.path().join("sim.toml");
    std::fs::write(&sim, "[allocation]\ningroup_minority = 0.9\n").unwrap();
    let other = dir.path().join("other");
    sim_run(&file, &other, &["--sim", sim.to_str().unwrap()]);
    let record = files_with(&other.join("committed"), "json").into_iter().next().unwrap();
    let name = record.file_name().unwrap();
    std::fs::copy(&record, out.join("committed").join(name)).unwrap();
    let part = Path::new(name).with_extension("parquet");
    std::fs::copy(other.join("allocation_deciders").join(&part), out.join("allocation_deciders").join(&part)).unwrap();
    // Its input fingerprint gives it away; a forger who also rewrites that passes the folder's checks,
    // and the kept digest still fails.
    let stdout = String::from_utf8_lossy(&herd(&["verify", o]).stdout).into_owned();
    assert!(stdout.contains("other inputs"), "{stdout}");
    let ours: serde_json::Value =
        serde_json::from_slice(&std::fs::read(files_with(&out.join("committed"), "json").last().unwrap()).unwrap())
            .unwrap();
    let copied = out.join("committed").join(name);
    let mut forged: serde_json::Value = serde_json::from_slice(&std::fs::read(&copied).unwrap()).unwrap();
    forged["inputs"] = ours["inputs"].clone();
    std::fs::write(&copied, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    assert_eq!(herd(&["verify", o]).status.code(), Some(0), "the forgery passes the folder's own checks");
    let caught = herd(&["verify", &format!("--strict={kept}"), o]);
    let stdout = String::from_utf8_lossy(&caught.stdout);
    assert_eq!(caught.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not the") && stdout.contains(&kept), "{stdout}");
}

#[test]
fn verify_says_how_much_of_the_experiment_a_sound_run_holds() {
    let work = tempfile::tempdir().unwrap();
    let experiment = experiment(work.path(), 2);
    let out = work.path().join("run");
    sim_run(&experiment, &out, &["--limit", "3", "--no-quick-look"]);
    let stdout = String::from_utf8(succeeds(&["verify", out.to_str().unwrap()]).stdout).unwrap();
    let total = stdout
        .lines()
        .find_map(|l| l.strip_prefix("incomplete: 3 of "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("an interrupted run is incomplete, exit 0: {stdout}"));
    assert!(stdout.contains("next: rerun the same `herd run` command"), "{stdout}");

    sim_run(&experiment, &out, &["--no-quick-look"]);
    let stdout = String::from_utf8(succeeds(&["verify", out.to_str().unwrap()]).stdout).unwrap();
    assert!(stdout.contains(&format!("complete: {total} of {total} units stored")), "{stdout}");
}
