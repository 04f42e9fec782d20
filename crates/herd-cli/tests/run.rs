//! `herd run` as a user runs it: killed at random moments and resumed, sharded, and given bad inputs.
//! The sim backend answers, so these tests exercise the runner and the store, not a model.

use herd_design::ChaCha20Rng;
use herd_design::rand::{Rng, SeedableRng};
use herd_store::{Table, read_table};
use herd_test_support::stored_table;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn experiment(name: &str) -> PathBuf {
    root().join("data/experiments").join(name)
}

/// A copy of a shipped experiment in `dir` with its bank paths made absolute and `edits` applied.
fn edited_experiment(dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(experiment(name)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{name} has no `{from}`");
        text = text.replace(from, to);
    }
    let text = text.replace("\"../banks/", &format!("\"{}/data/banks/", root().display()));
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn herd(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_herd"));
    command.args(args).current_dir(root());
    command
}

fn run_args<'a>(experiment: &'a str, out: &'a str) -> Vec<&'a str> {
    vec!["run", "--experiment", experiment, "--backend", "sim", "--out", out, "--quiet"]
}

fn run_to_completion(experiment: &Path, out: &Path, extra: &[&str]) -> Output {
    let (e, o) = (experiment.to_str().unwrap(), out.to_str().unwrap());
    let mut args = run_args(e, o);
    args.extend_from_slice(extra);
    let output = herd(&args).output().unwrap();
    assert!(output.status.success(), "herd run failed: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// Every row of `table` in the given run folders as text, sorted; `skip` columns (timings, run ids that
/// name the shard) are left out.
fn rows(dirs: &[PathBuf], table: Table, skip: &[&str]) -> Vec<String> {
    read_table(dirs, table)
        .unwrap()
        .map_or_else(Vec::new, |parquet| stored_table::row_texts(&stored_table::frame(parquet), skip))
}

/// Every file under `dir` with its bytes, for checking that a failed command changed nothing.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != ".lock") {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn a_run_killed_at_random_moments_and_resumed_equals_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, resumed) = (dir.path().join("whole"), dir.path().join("resumed"));
    // The quick profile's 474 trials (6 trial indices per condition level) last long enough to be killed
    // many times, as four times its earlier 2-trial families did.
    let conformity = edited_experiment(dir.path(), "conformity.quick.toml", &[]);
    let started = Instant::now();
    run_to_completion(&conformity, &whole, &[]);
    let duration = started.elapsed();

    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (e, o) = (conformity.to_str().unwrap(), resumed.to_str().unwrap());
    // Kill at random moments until five kills have caught the run in progress (each resumed session
    // gets further, so the moments are drawn over a fraction of the whole run's time).
    let mut interrupted = 0;
    for _ in 0..40 {
        if interrupted == 5 {
            break;
        }
        let mut child = herd(&run_args(e, o)).stdout(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(duration.mul_f64(rng.random_range(0.02..0.3)));
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    assert_eq!(interrupted, 5, "five kills caught the run in progress");
    let finished = run_to_completion(&conformity, &resumed, &[]);
    let stdout = String::from_utf8_lossy(&finished.stdout);
    assert!(stdout.contains("already stored"), "{stdout}");

    for table in Table::ALL {
        let (a, b) = (
            rows(std::slice::from_ref(&whole), table, &["latency_s"]),
            rows(std::slice::from_ref(&resumed), table, &["latency_s"]),
        );
        assert!(!a.is_empty() || table != Table::ConformityTrials);
        assert_eq!(a.len(), b.len(), "{table}: row counts differ");
        assert!(a == b, "{table}: resumed rows differ from the uninterrupted run");
    }
    let manifest = herd_store::read_run_manifest(&resumed).unwrap();
    // A kill during start-up (before the folder is opened) leaves no session behind; the others are
    // recorded as interrupted.
    let recorded = manifest.sessions.iter().filter(|s| s.status == "interrupted").count();
    assert!((1..=interrupted).contains(&recorded), "{recorded} interrupted sessions for {interrupted} kills");
    assert_eq!(manifest.sessions.last().unwrap().status, "complete");
    // Nothing half-written is left behind.
    let leftovers: Vec<_> = snapshot(&resumed).into_keys().filter(|p| p.to_string_lossy().ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn two_shards_concatenated_equal_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    // Three societies per cell, so that the minimal-group study has six shard groups to split.
    let edits: [(&str, &[(&str, &str)]); 2] =
        [("conformity.quick.toml", &[]), ("minimal-group.quick.toml", &[("seeds = 8 ", "seeds = 3 ")])];
    for (name, edit) in edits {
        let file = edited_experiment(dir.path(), name, edit);
        let whole = dir.path().join(format!("{name}-whole"));
        let said = String::from_utf8(run_to_completion(&file, &whole, &[]).stdout).unwrap();
        assert!(said.contains("\nquick look (the papers' claims this run tests"), "{name}: {said}");
        // The run ends with how its claims came out, per study, and says how long it took.
        assert!(said.contains(" claims replicate"), "{name}: {said}");
        // ... of its own study only: a conformity run says nothing of minimal groups.
        assert!(!said.contains("0 of 0 claims"), "{name}: {said}");
        assert!(said.lines().next().is_some_and(|l| l.contains(" run now in ")), "{name}: {said}");
        // Three units per call (societies decoded as one batch, images' trials scored together) store what
        // one unit at a time stores: each unit gets its own answers back.
        let together = dir.path().join(format!("{name}-batch3"));
        run_to_completion(&file, &together, &["--batch", "3", "--no-quick-look"]);
        let manifest = std::fs::read_to_string(together.join("manifest.json")).unwrap();
        assert!(manifest.contains("\"batch_units\": 3"), "the manifest records --batch");
        let shards: Vec<PathBuf> = (1..=2).map(|k| dir.path().join(format!("{name}-shard{k}"))).collect();
        for (k, out) in shards.iter().enumerate() {
            // A shard's quick look is its own units' numbers, and says so.
            let run = run_to_completion(&file, out, &["--shard", &format!("{}/2", k + 1)]);
            let said = String::from_utf8(run.stdout).unwrap();
            assert!(said.contains(&format!("\nquick look at shard {}/2 only (its units", k + 1)), "{name}: {said}");
        }
        // Resumed with nothing left to run and no quick look: the summary, and no headline lines.
        let said = String::from_utf8(run_to_completion(&file, &whole, &["--no-quick-look"]).stdout).unwrap();
        assert!(said.starts_with("complete") && !said.contains("quick look"), "{name}: {said}");
        for table in [Table::ConformityTrials, Table::AllocationDeciders, Table::AllocationDyads] {
            let skip = ["latency_s", "run_id"];
            let (a, b) = (rows(std::slice::from_ref(&whole), table, &skip), rows(&shards, table, &skip));
            assert_eq!(a.len(), b.len(), "{name} {table}: row counts differ");
            assert!(a == b, "{name} {table}: shards differ from the whole run");
            let c = rows(std::slice::from_ref(&together), table, &skip);
            assert!(a == c, "{name} {table}: three units per call differ from one at a time");
        }
        let per_shard: Vec<usize> =
            shards.iter().map(|s| herd_store::read_run_manifest(s).unwrap().experiment_units_stored as usize).collect();
        assert!(per_shard.iter().all(|&n| n > 0), "both shards have work: {per_shard:?}");
    }
}

fn fails(args: &[&str]) -> String {
    let output = herd(args).output().unwrap();
    assert!(!output.status.success(), "expected failure: herd {}", args.join(" "));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn bad_inputs_fail_clearly_and_leave_stored_data_intact() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment("minimal-group.quick.toml");
    let (e, out) = (file.to_str().unwrap(), dir.path().join("run"));
    let o = out.to_str().unwrap();
    run_to_completion(&file, &out, &[]);
    let before = snapshot(&out);

    // An unknown model alias names the alias and lists the known ones.
    let stderr = fails(&["run", "--experiment", e, "--model", "no-such-model", "--out", o]);
    assert!(stderr.contains("no-such-model") && stderr.contains(herd_backend::DEFAULT_MODEL), "{stderr}");
    assert_eq!(snapshot(&out), before);

    // --batch is for a model on this machine: servers batch by themselves; 0 units per call is no call.
    let stderr = fails(&[
        "run",
        "--experiment",
        e,
        "--backend",
        "openai",
        "--endpoint",
        "http://127.0.0.1:9",
        "--batch",
        "4",
        "--out",
        o,
    ]);
    assert!(stderr.contains("--batch 4") && stderr.contains("--max-in-flight"), "{stderr}");
    let stderr = fails(&["run", "--experiment", e, "--backend", "sim", "--batch", "0", "--out", o]);
    assert!(stderr.contains("--batch"), "{stderr}");
    assert_eq!(snapshot(&out), before);

    // Another experiment into the same folder is refused: the folder holds a different run.
    let other = experiment("conformity.quick.toml");
    let stderr = fails(&run_args(other.to_str().unwrap(), o));
    assert!(stderr.contains("holds another run") && stderr.contains("new --out"), "{stderr}");
    assert_eq!(snapshot(&out), before);

    // An output path that is a file, and a folder on a read-only file system.
    let not_a_folder = dir.path().join("file");
    std::fs::write(&not_a_folder, b"x").unwrap();
    let stderr = fails(&run_args(e, not_a_folder.to_str().unwrap()));
    assert!(stderr.contains("is a file") && stderr.contains("--out"), "{stderr}");
    let stderr = fails(&run_args(e, "/proc/herd-run"));
    assert!(stderr.contains("/proc/herd-run") && stderr.contains("fix:"), "{stderr}");

    // A full disk: resuming a half-done run where no file can grow (a file-size limit of 0 blocks, the
    // signal ignored, so writes fail with an error as on a full disk).
    let half = dir.path().join("half");
    let conformity = experiment("conformity.quick.toml");
    let mut child = herd(&run_args(conformity.to_str().unwrap(), half.to_str().unwrap())).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let before = snapshot(&half);
    let script = format!(
        "ulimit -f 0; trap '' XFSZ; exec '{}' run --experiment '{}' --backend sim --out '{}' --quiet",
        env!("CARGO_BIN_EXE_herd"),
        conformity.display(),
        half.display()
    );
    let output = Command::new("bash").args(["-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("fix:") && stderr.contains("intact"), "{stderr}");
    let after = snapshot(&half);
    let kept =
        before.iter().filter(|(p, _)| !p.ends_with("manifest.json")).all(|(p, bytes)| after.get(p) == Some(bytes));
    assert!(kept, "stored parts and commit records are unchanged");
    run_to_completion(&conformity, &half, &[]);

    // An experiment file written for a newer herd.
    let newer = dir.path().join("newer.toml");
    let text = std::fs::read_to_string(&file).unwrap().replace("[experiment]\n", "[experiment]\nformat = 99\n");
    std::fs::write(&newer, text.replace("\"../banks/", &format!("\"{}/data/banks/", root().display()))).unwrap();
    let stderr = fails(&run_args(newer.to_str().unwrap(), dir.path().join("newer-run").to_str().unwrap()));
    assert!(stderr.contains("experiment.format") && stderr.contains("upgrade herd"), "{stderr}");
    assert!(!dir.path().join("newer-run").exists(), "nothing is created for a refused experiment");
}

#[test]
fn server_timings_out_of_range_are_errors_naming_the_flag() {
    for (flag, value) in [
        ("--request-timeout", "1e300"),
        ("--request-timeout", "0"),
        ("--retry-delay", "1e300"),
        ("--retry-delay", "NaN"),
    ] {
        let stderr = fails(&[
            "score",
            "--backend",
            "openai",
            "--endpoint",
            "http://127.0.0.1:9",
            "--prompt-file",
            "Cargo.toml",
            flag,
            value,
        ]);
        assert!(stderr.contains(&format!("{flag} {value}")) && stderr.contains("give the"), "{flag} {value}: {stderr}");
    }
}

#[test]
fn a_run_stopped_by_failures_lists_its_failed_units_in_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // Nothing listens on the discard port: every request fails at once, and five units in a row stop the run.
    let args = [
        "run",
        "--experiment",
        "data/experiments/minimal-group.quick.toml",
        "--backend",
        "openai",
        "--endpoint",
        "http://127.0.0.1:9",
    ];
    let stderr = fails(
        &[&args[..], &["--max-attempts", "1", "--retry-delay", "0", "--quiet", "--out", out.to_str().unwrap()]]
            .concat(),
    );
    assert!(stderr.contains("127.0.0.1:9"), "{stderr}");
    let manifest = herd_store::read_run_manifest(&out).unwrap();
    // Five failures in a row stop the run; with several societies in flight at once, the ones already sent
    // fail too and are listed with them (each once).
    let failed: std::collections::BTreeSet<&String> = manifest.failed.iter().collect();
    assert!(manifest.failed.len() >= 5 && failed.len() == manifest.failed.len(), "{:?}", manifest.failed);
    assert_eq!(manifest.units_stored, 0, "nothing answered, so nothing is stored");
    assert!(manifest.sessions.last().unwrap().status.starts_with("failed"), "{:?}", manifest.sessions);
    // A server gets only what the experiment sets (and SmolLM2's registry entry sets nothing); the rest is
    // left to it, and the manifest says so.
    let sampling = &manifest.notes["generation.effective"];
    assert_eq!(sampling["temperature"], serde_json::json!({"value": 0.7, "source": "experiment"}), "{sampling}");
    for knob in ["top_p", "top_k", "repetition_penalty"] {
        assert_eq!(
            sampling[knob],
            serde_json::json!({"value": null, "source": "server_default"}),
            "{knob}: {sampling}"
        );
    }
    assert!(sampling["note"].as_str().unwrap().contains("not sent"), "{sampling}");
}

#[test]
fn the_manifest_records_each_sampling_value_and_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // One society per cell keeps the run short; the experiment overrides top_k and leaves top_p to the model.
    let file = edited_experiment(
        dir.path(),
        "minimal-group.quick.toml",
        &[("seeds = 8 ", "seeds = 1 "), ("temperature = 0.7", "temperature = 0.7\ntop_k = 5")],
    );
    run_to_completion(&file, &out, &[]);
    let manifest = herd_store::read_run_manifest(&out).unwrap();
    let sampling = &manifest.notes["generation.effective"];
    // The sim backend has no model of its own, so what the experiment leaves out is HF generate's default.
    assert_eq!(sampling["temperature"], serde_json::json!({"value": 0.7, "source": "experiment"}), "{sampling}");
    assert_eq!(sampling["top_k"], serde_json::json!({"value": 5, "source": "experiment"}), "{sampling}");
    assert_eq!(sampling["top_p"], serde_json::json!({"value": 1.0, "source": "hf_default"}), "{sampling}");
    assert_eq!(sampling["repetition_penalty"], serde_json::json!({"value": 1.0, "source": "hf_default"}), "{sampling}");
    // The experiment's own table is recorded as written: unset knobs are null, not a default.
    assert_eq!(manifest.parameters["generation"]["top_p"], serde_json::Value::Null);
}

#[test]
fn stimuli_beyond_what_fits_in_memory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = fails(&["stimuli", "--task", "dots", "--count", "4000000000", "--out", dir.path().to_str().unwrap()]);
    assert!(stderr.contains("--count 4000000000") && stderr.contains("at most 100000"), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was written");
}

#[test]
fn without_a_terminal_a_run_reports_progress_in_plain_lines_and_announces_a_resume() {
    // Slurm, nohup and pipes have no terminal: the bars cannot draw, so the same numbers come as lines.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (e, o) = (experiment("minimal-group.quick.toml"), out.to_str().unwrap().to_owned());
    let base = ["run", "--experiment", e.to_str().unwrap(), "--backend", "sim", "--out", &o, "--no-quick-look"];
    let first = herd(&[&base[..], &["--limit", "4"]].concat()).env("HERD_PROGRESS_SECONDS", "0").output().unwrap();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let said = String::from_utf8(first.stderr).unwrap();
    let lines: Vec<&str> = said.lines().filter(|l| l.contains(" units (")).collect();
    assert!(lines.len() >= 2, "a line per unit at a 0 s interval: {said}");
    assert!(lines.last().unwrap().contains("] 4/4 units (100%), "), "the last line at the end: {said}");
    assert!(!said.contains("resuming"), "{said}");
    // The rerun says that it resumes, and how much is left.
    let second = herd(&base).env("HERD_PROGRESS_SECONDS", "0").output().unwrap();
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    let said = String::from_utf8(second.stderr).unwrap();
    assert!(said.contains("resuming: 4 of 32 units already stored; running the other 28"), "{said}");
    // --quiet keeps stderr free of progress.
    let quiet = herd(&[&base[..], &["--quiet"]].concat()).env("HERD_PROGRESS_SECONDS", "0").output().unwrap();
    assert!(!String::from_utf8(quiet.stderr).unwrap().contains(" units ("));
}

#[test]
fn ctrl_c_ends_a_run_with_a_word_on_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let e = experiment("minimal-group.toml");
    let child = herd(&["run", "--experiment", e.to_str().unwrap(), "--backend", "sim", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the run has committed something, Ctrl-C.
    let started = std::time::Instant::now();
    while !out.join("committed").is_dir() || std::fs::read_dir(out.join("committed")).unwrap().next().is_none() {
        assert!(started.elapsed().as_secs() < 120, "the run committed nothing in 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", String::from_utf8_lossy(&output.stderr));
    let said = String::from_utf8(output.stderr).unwrap();
    assert!(said.contains("interrupted: every unit committed so far is kept in "), "{said}");
    assert!(said.contains("rerun the same command to resume"), "{said}");
}

#[test]
fn a_comment_in_the_experiment_file_does_not_block_a_resume_but_a_changed_value_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = edited_experiment(dir.path(), "minimal-group.quick.toml", &[]);
    let out = dir.path().join("run");
    run_to_completion(&file, &out, &["--limit", "2"]);
    let identity = herd_store::read_run_manifest(&out).unwrap().identity;

    // Comments, blank lines and spacing are not the experiment: the run resumes and completes.
    let text = std::fs::read_to_string(&file).unwrap();
    let commented =
        format!("# my notes on this run\n\n{}", text.replace("seeds = 8 ", "seeds   =   8   # as before\n#"));
    assert_ne!(commented, text);
    std::fs::write(&file, &commented).unwrap();
    let output = run_to_completion(&file, &out, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("holds another run"), "{stderr}");
    let manifest = herd_store::read_run_manifest(&out).unwrap();
    assert_eq!(manifest.identity, identity, "the same run");
    assert_eq!(manifest.experiment_units_stored, manifest.units_total, "resumed to completion");
    // The file list still records the file's own bytes.
    let record = manifest.files.iter().find(|f| f.role == "experiment").unwrap();
    assert_eq!(record.sha256.as_deref(), Some(herd_design::sha256_hex(commented.as_bytes()).as_str()));

    // A changed value is another experiment.
    std::fs::write(&file, commented.replace("seed = 20250602", "seed = 20250603")).unwrap();
    let stderr = fails(&run_args(file.to_str().unwrap(), out.to_str().unwrap()));
    assert!(stderr.contains("holds another run"), "{stderr}");

    // A folder from before the content fingerprint holds the hash of the file's bytes: the unchanged
    // file still resumes it.
    std::fs::write(&file, &text).unwrap();
    let old = dir.path().join("old");
    run_to_completion(&file, &old, &["--limit", "2"]);
    let bytes_hash = herd_design::sha256_hex(text.as_bytes());
    let manifest_path = old.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["identity"]["experiment_sha256"] = bytes_hash.clone().into();
    manifest["inputs"]["experiment"] = bytes_hash.clone().into();
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    run_to_completion(&file, &old, &[]);
    let manifest = herd_store::read_run_manifest(&old).unwrap();
    assert_eq!(manifest.identity.experiment_sha256, bytes_hash);
    assert_eq!(manifest.experiment_units_stored, manifest.units_total);
}
