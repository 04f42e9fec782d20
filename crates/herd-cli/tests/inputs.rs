//! One run, one set of inputs, values in their domains, and designs herd can hold: `herd run`,
//! `herd expand`, `herd analyze`, `herd power`, `herd score` and `herd models` as a careless user runs
//! them. The sim backend answers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn herd(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_herd"));
    command.args(args).current_dir(root());
    command
}

fn succeeds(args: &[&str]) -> Output {
    let output = herd(args).output().unwrap();
    assert!(output.status.success(), "herd {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    output
}

fn fails(args: &[&str]) -> String {
    let output = herd(args).output().unwrap();
    assert!(!output.status.success(), "expected failure: herd {}", args.join(" "));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// The quick minimal-group experiment in `dir`, with `seeds` societies per cell, its prompt bank a copy
/// in `dir/bank.toml` (so a test can edit it) and `edits` applied.
fn experiment(dir: &Path, seeds: u32, edits: &[(&str, &str)]) -> PathBuf {
    let banks = root().join("data/banks");
    std::fs::copy(banks.join("minimal-group-prompts.toml"), dir.join("bank.toml")).unwrap();
    let mut text = std::fs::read_to_string(root().join("data/experiments/minimal-group.quick.toml")).unwrap();
    text = text
        .replace(
            "\"../banks/minimal-group-prompts.toml\"",
            &format!("{:?}", dir.join("bank.toml").display().to_string()),
        )
        .replace("\"../banks/", &format!("\"{}/", banks.display()))
        .replace("seeds = 8 ", &format!("seeds = {seeds} "));
    for (from, to) in edits {
        assert!(text.contains(from), "the quick experiment has no `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.join("experiment.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run<'a>(experiment: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    [&["run", "--experiment", experiment, "--backend", "sim", "--out", out, "--quiet"][..], extra].concat()
}

#[test]
fn a_bank_edited_between_sessions_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 2, &[]);
    let out = dir.path().join("run");
    let (e, o) = (file.to_str().unwrap(), out.to_str().unwrap());
    succeeds(&run(e, o, &[]));
    let manifest = std::fs::read(out.join("manifest.json")).unwrap();

    // The same experiment file, another wording in its bank: the stored societies read the old one.
    let bank = dir.path().join("bank.toml");
    let original = std::fs::read_to_string(&bank).unwrap();
    std::fs::write(&bank, original.replace("one of {society_size} participants", "one of {society_size} people"))
        .unwrap();
    let stderr = fails(&run(e, o, &[]));
    assert!(
        stderr.contains("prompts.bank") && stderr.contains("other inputs") && stderr.contains("new --out"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), manifest, "a refused session changes nothing");

    // Restored, the run resumes (nothing left to run).
    std::fs::write(&bank, original).unwrap();
    let stdout = String::from_utf8(succeeds(&run(e, o, &[])).stdout).unwrap();
    assert!(stdout.contains("0 run now"), "{stdout}");
    let recorded = herd_store::read_run_manifest(&out).unwrap().inputs;
    for input in ["experiment", "prompts.bank", "society.group_names", "generation", "sim parameters"] {
        assert!(recorded.contains_key(input), "{input} is fingerprinted: {recorded:?}");
    }
}

#[test]
fn other_sim_parameters_are_another_run_and_out_of_range_ones_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 1, &[]);
    let out = dir.path().join("run");
    let (e, o) = (file.to_str().unwrap(), out.to_str().unwrap());
    let sim = dir.path().join("sim.toml");
    std::fs::write(&sim, "[allocation]\ningroup_minority = 0.9\n").unwrap();
    let s = sim.to_str().unwrap();
    succeeds(&run(e, o, &["--sim", s]));

    // A comment is no change; another value is.
    std::fs::write(&sim, "# the planted effect\n[allocation]\ningroup_minority = 0.9\n").unwrap();
    succeeds(&run(e, o, &["--sim", s]));
    std::fs::write(&sim, "[allocation]\ningroup_minority = 0.1\n").unwrap();
    let stderr = fails(&run(e, o, &["--sim", s]));
    assert!(stderr.contains("sim parameters: sha256") && stderr.contains("new --out"), "{stderr}");
    // Leaving --sim out is the defaults, also another run.
    assert!(fails(&run(e, o, &[])).contains("sim parameters"));

    // Out of range, the agent's weights overflowed and it stored uniform allocations: now an error
    // naming the key and the allowed range, before anything is written.
    for value in ["1000.0", "710.0", "nan", "inf"] {
        std::fs::write(&sim, format!("[allocation]\ningroup_minority = {value}\n")).unwrap();
        let fresh = dir.path().join(format!("bad-{value}"));
        let stderr = fails(&run(e, fresh.to_str().unwrap(), &["--sim", s]));
        assert!(stderr.contains("allocation.ingroup_minority") && stderr.contains("[-50, 50]"), "{value}: {stderr}");
        assert!(!fresh.exists(), "nothing is created for refused parameters");
    }
}

#[test]
fn a_manifest_that_lost_its_fingerprint_is_refused_and_a_folder_from_before_fingerprints_takes_this_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 1, &[]);
    let out = dir.path().join("run");
    let (e, o) = (file.to_str().unwrap(), out.to_str().unwrap());
    succeeds(&run(e, o, &[]));
    let path = out.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest.as_object_mut().unwrap().remove("inputs").expect("the manifest records its inputs");
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    // Every herd since store format 2 records the fingerprint: without it, a resume could mix inputs.
    let stderr = fails(&run(e, o, &[]));
    assert!(stderr.contains("no input fingerprint") && stderr.contains("fix:"), "{stderr}");
    // A folder of store format 1 predates fingerprints: it takes this session's.
    manifest["store_format"] = 1.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    succeeds(&run(e, o, &[]));
    assert!(!herd_store::read_run_manifest(&out).unwrap().inputs.is_empty());
}

#[test]
fn a_run_analyses_with_the_pool_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path(), 3, &[("pool = 100", "pool = 10")]);
    let out = dir.path().join("run");
    let (e, o) = (file.to_str().unwrap(), out.to_str().unwrap());
    succeeds(&run(e, o, &[]));
    let results = dir.path().join("results");
    let r = results.to_str().unwrap();
    let analyze = ["analyze", "minimal-group", "--dyads", o, "--out", r, "--resamples", "20", "--no-gee-bootstrap"];
    succeeds(&analyze);
    assert!(results.join("seed_tests.csv").is_file());
    // A --pool that contradicts the run is an error naming both.
    let stderr = fails(&[&analyze[..], &["--pool", "100"]].concat());
    assert!(stderr.contains("--pool 100") && stderr.contains("pool of 10"), "{stderr}");
}

#[test]
fn designs_too_large_to_hold_are_errors_under_a_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let conformity = root().join("data/experiments/conformity.quick.toml");
    let text = std::fs::read_to_string(&conformity)
        .unwrap()
        .replace("\"../banks/", &format!("\"{}/data/banks/", root().display()));
    let huge = |text: &str, from: &str| {
        assert!(text.contains(from), "conformity.quick.toml has no `{from}`");
        text.replace(from, &from.replace("images_per_level = 2", "images_per_level = 4000000000"))
    };
    let sizes: Vec<String> = (2..=500).map(|m| m.to_string()).collect();
    let minimal = experiment(
        dir.path(),
        100000,
        &[
            ("size = 20", "size = 1000"),
            ("id_width = 2", "id_width = 4"),
            ("minority_sizes = [5]", &format!("minority_sizes = [{}]", sizes.join(", "))),
        ],
    );
    let cases = [
        (huge(&text, "[100, 80, 50, 30, 10]\nimages_per_level = 2"), "stimuli.color.images_per_level"),
        (huge(&text, "[200, 160, 100, 60, 20]\nimages_per_level = 2"), "stimuli.dots.images_per_level"),
        (std::fs::read_to_string(&minimal).unwrap(), "design.seeds"),
    ];
    for (i, (text, key)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("big-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        // 2 GB of address space: an attempt to allocate the plan aborts (exit 134) instead of failing.
        let script = format!(
            "ulimit -v 2000000; exec '{}' expand --experiment '{}'",
            env!("CARGO_BIN_EXE_herd"),
            path.display()
        );
        let output = Command::new("bash").args(["-c", &script]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{key}: {stderr}");
        assert!(stderr.contains(key) && stderr.contains("fix:"), "{key}: {stderr}");
    }
}

#[test]
fn power_effects_out_of_range_are_errors_naming_the_key_and_range() {
    for effect in ["ingroup=1000", "ingroup=710", "ingroup=nan", "ingroup=inf"] {
        let stderr = fails(&[
            "power",
            "--experiment",
            "data/experiments/minimal-group.quick.toml",
            "--effect",
            effect,
            "--replications",
            "1",
        ]);
        assert!(
            stderr.contains(effect) && stderr.contains("ingroup_minority") && stderr.contains("[-50, 50]"),
            "{stderr}"
        );
    }
}

#[test]
fn an_empty_answer_is_an_error() {
    for (answers, words) in
        [("A,,B", "answer 2 is empty"), ("A,B,A", "`A` is given twice"), (",A", "answer 1 is empty")]
    {
        let stderr = fails(&["score", "--prompt-file", "Cargo.toml", "--answers", answers]);
        assert!(stderr.contains(words) && stderr.contains("--answers"), "{answers}: {stderr}");
    }
}

#[test]
fn model_files_that_are_not_models_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    let registry = dir.path().join("models.toml");
    let entry = |alias: &str, path: &Path| {
        format!(
            "[models.{alias}]\ndescription = \"x\"\nfamily = \"llama\"\nmodality = \"text\"\nsource = {{ path = {:?} }}\n",
            path.display().to_string()
        )
    };
    let text = format!("default = \"empty\"\n{}{}", entry("empty", &empty), entry("device", Path::new("/dev/zero")));
    std::fs::write(&registry, text).unwrap();
    let r = registry.to_str().unwrap();
    let listing = String::from_utf8(succeeds(&["models", "--registry", r]).stdout).unwrap();
    let line = listing.lines().find(|l| l.starts_with("empty ")).unwrap();
    assert!(line.contains(" no "), "a 0-byte file is not a present model: {listing}");
    assert!(listing.contains("empty (0 bytes)"), "{listing}");
    let stderr = fails(&["score", "--registry", r, "--model", "device", "--prompt-file", "Cargo.toml"]);
    assert!(stderr.contains("/dev/zero is not a regular file") && !stderr.contains("does not exist"), "{stderr}");
}

#[test]
fn a_reader_that_stops_early_ends_herd_quietly() {
    // `herd prompts … | head`: the reader closes the pipe before herd has written its prompts (more than
    // a pipe's buffer holds, so a write fails whenever the reader leaves).
    let mut child = herd(&["prompts", "--experiment", "data/experiments/minimal-group.quick.toml", "--limit", "100"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{stderr}");
}
