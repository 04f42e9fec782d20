//! The fault matrix: every way a server, a machine or a hand can attack a run (issue 42), run through
//! the `herd` binary with one harness, so each case is held to the same promise: a clear error (exit 1,
//! a `fix:` or the rule broken, no panic) or a failure recorded in the manifest and repaired by the
//! next run; never a hang past the timeouts, memory past [`MEMORY_BOUND`], or wrong data stored.
//!
//! Server faults come from herd-test-support's hostile OpenAI-compatible server (one [`Mode`] per
//! bad reply); integrity faults are made by hand in a sim run's folder. The detailed checks of each
//! fault live beside their code (herd-store's `one_run` and `integrity` tests, `hostile_server.rs`);
//! this table makes sure none is missed and none breaks the common promise.

use herd_store::{Table, read_table};
use herd_test_support::hostile_server::{HostileServer, Mode, TINY_CONFORMITY};
use herd_test_support::stored_table;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The most resident memory one `herd` process may reach in any case: the replies are capped at
/// 8 MB (1 MB of reasoning), so a 50 MB reply must not come near it.
const MEMORY_BOUND: u64 = 768 << 20;
/// No case may take longer (the runs retry fast: `--retry-delay 0.01`).
const TIME_BOUND: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What one `herd` command did: its output, and its peak resident memory as sampled while it ran.
struct Ran {
    output: Output,
    peak_rss: u64,
}

impl Ran {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn ok(&self) -> bool {
        self.output.status.success()
    }
}

/// `VmHWM` (peak resident set) of a running process, in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    // Until the child has exec'd herd, /proc shows the test process's memory (a vfork-style spawn shares
    // it), and the test's hostile servers may hold a gigabyte of replies they are still writing.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    if exe.file_name()? != Path::new(env!("CARGO_BIN_EXE_herd")).file_name()? {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

/// Runs `herd args` and holds it to the common promise: it ends within [`TIME_BOUND`], stays under
/// [`MEMORY_BOUND`], does not panic, and a failure says what to do.
fn herd(case: &str, args: &[&str]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(args)
        .current_dir(root())
        .env("HERD_TEST_KEY", "sk-fault-matrix-secret")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (started, mut peak) = (Instant::now(), 0);
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_rss(child.id()).unwrap_or(0));
        if started.elapsed() > TIME_BOUND {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{case}: herd {args:?} still running after {TIME_BOUND:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ran = Ran { output: child.wait_with_output().unwrap(), peak_rss: peak };
    eprintln!(
        "{case}: herd {} exit {:?} in {:.2} s, peak {} MB",
        args[0],
        ran.output.status.code(),
        started.elapsed().as_secs_f64(),
        ran.peak_rss >> 20
    );
    let stderr = ran.stderr();
    assert!(!stderr.contains("panicked") && ran.output.status.code() != Some(101), "{case}: a panic: {stderr}");
    assert!(ran.peak_rss < MEMORY_BOUND, "{case}: herd {args:?} peaked at {} MB", ran.peak_rss >> 20);
    if !ran.ok() {
        assert!(
            stderr.contains("fix:")
                || stderr.contains("rule:")
                || stderr.contains("refused")
                || stderr.contains("HTTP"),
            "{case}: the error says neither what was wrong nor what to do: {stderr}"
        );
    }
    ran
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { found.extend(files_under(&path)) } else { found.push(path) }
    }
    found.sort();
    found
}

/// The experiment file `name` of data/experiments with its banks by absolute path and `edits` made.
fn experiment(dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(root().join("data/experiments").join(name))
        .unwrap()
        .replace("\"../banks/", &format!("\"{}/data/banks/", root().display()));
    for (from, to) in edits {
        assert!(text.contains(from), "{name} has no `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A stored probability column, each value checked to be one.
fn assert_stored_probabilities(case: &str, out: &Path) {
    let Some(bytes) = read_table(&[out.to_path_buf()], Table::ConformityTrials).unwrap() else { return };
    let frame = stored_table::frame(bytes);
    for name in ["p_correct", "p_wrong_full", "mass_ab"] {
        let values: Vec<f64> =
            frame.column(name).unwrap().f64().unwrap().iter().map(|v| v.unwrap_or(f64::NAN)).collect();
        assert!(values.iter().all(|p| (0.0..=1.0).contains(p)), "{case}: {name} stored outside [0, 1]: {values:?}");
    }
}

/// What a server fault must end in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// The run completes and every stored number is valid (a fault herd corrects: rounding, a long list).
    Stored,
    /// The run fails, the units are recorded as failed, nothing wrong is stored, and the next run
    /// against a good server computes them.
    FailedThenRecomputed,
}

#[test]
fn every_fault_ends_in_a_clear_error_or_a_recorded_failure() {
    let dir = tempfile::tempdir().unwrap();
    let conformity = dir.path().join("conformity.toml");
    std::fs::write(&conformity, TINY_CONFORMITY.replace("@DATA@", &root().join("data").display().to_string())).unwrap();
    let minimal = experiment(
        dir.path(),
        "minimal-group.quick.toml",
        &[("seeds = 8 ", "seeds = 1 "), ("[\"on\", \"off\"]", "[\"off\"]")],
    );

    // Server faults, on the scaled path a user drives (`herd run --backend openai`).
    let server_cases: [(&str, Mode, &Path, &[&str], Expect); 11] = [
        ("a good server", Mode::Good, &conformity, &[], Expect::Stored),
        ("float32 rounding over 1", Mode::OverOneRounding, &conformity, &[], Expect::Stored),
        ("230,000 top logprobs", Mode::LongList(230_000), &conformity, &[], Expect::Stored),
        ("neither answer in the top-k", Mode::AnswersMissing, &conformity, &[], Expect::Stored),
        ("every logprob 0 (a mass of 2)", Mode::AllZero, &conformity, &[], Expect::FailedThenRecomputed),
        ("a mass of 1.98", Mode::NearOneTwice, &conformity, &[], Expect::FailedThenRecomputed),
        ("NaN as a bare word", Mode::NanText, &conformity, &[], Expect::FailedThenRecomputed),
        ("a null logprob", Mode::NanMissing, &conformity, &[], Expect::FailedThenRecomputed),
        ("an error body echoing the key", Mode::EchoKey, &conformity, &[], Expect::FailedThenRecomputed),
        (
            "a redirect to another host",
            Mode::Redirect("http://example.invalid/v1"),
            &conformity,
            &[],
            Expect::FailedThenRecomputed,
        ),
        ("50 MB of reasoning per decider", Mode::LongReasoning(50 << 20), &minimal, &[], Expect::FailedThenRecomputed),
    ];
    let server_cases = server_cases.into_iter().chain([(
        "2 MB of reasoning over --max-reasoning-mb 0.5",
        Mode::LongReasoning(2 << 20),
        minimal.as_path(),
        &["--max-reasoning-mb", "0.5"][..],
        Expect::FailedThenRecomputed,
    )]);
    for (i, (case, mode, experiment, extra, expect)) in server_cases.enumerate() {
        let server = HostileServer::start(mode);
        let out = dir.path().join(format!("server-{i}"));
        let url = server.url();
        let mut args = vec![
            "run",
            "--backend",
            "openai",
            "--endpoint",
            &url,
            "--api-key-env",
            "HERD_TEST_KEY",
            "--experiment",
            experiment.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--no-quick-look",
            "--max-attempts",
            "2",
            "--retry-delay",
            "0.01",
        ];
        args.extend_from_slice(extra);
        let first = herd(case, &args);
        let manifest = herd_store::read_run_manifest(&out).unwrap();
        match expect {
            Expect::Stored => {
                assert!(first.ok(), "{case}: {}", first.stderr());
                assert!(manifest.failed.is_empty(), "{case}: {:?}", manifest.failed);
            }
            Expect::FailedThenRecomputed => {
                assert!(!first.ok(), "{case}: the run says it succeeded: {}", first.stdout());
                assert!(!manifest.failed.is_empty(), "{case}: the failed units are recorded in the manifest");
                server.set_mode(Mode::Good);
                let second = herd(case, &args);
                assert!(second.ok(), "{case}: the next run computes the failed units: {}", second.stderr());
                assert!(herd_store::read_run_manifest(&out).unwrap().failed.is_empty(), "{case}");
            }
        }
        assert_stored_probabilities(case, &out);
        for file in files_under(&out) {
            let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
            assert!(!text.contains("sk-fault-matrix-secret"), "{case}: the API key is in {}", file.display());
        }
        assert!(!first.stderr().contains("sk-fault-matrix-secret"), "{case}: the API key was printed");
    }
}

/// The rows of a run's decider table, as a comparable text (every column, in order).
fn deciders(out: &Path) -> String {
    let bytes = read_table(&[out.to_path_buf()], Table::AllocationDeciders).unwrap().expect("decider rows");
    let mut frame = stored_table::frame(bytes);
    frame = frame.sort(["unit_id", "decider"], Default::default()).unwrap();
    format!("{:?}", frame.drop("latency_s").unwrap())
}

/// The first committed file of `folder` in `out` with extension `ext`.
fn first(out: &Path, folder: &str, ext: &str) -> PathBuf {
    files_under(&out.join(folder)).into_iter().find(|p| p.extension().is_some_and(|e| e == ext)).unwrap()
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(value.as_object_mut().unwrap());
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// What an integrity fault must end in, after `herd verify` named it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Then {
    /// The same `herd run` repairs it: the folder verifies and holds the rows of an undamaged run.
    Repaired,
    /// The same `herd run` refuses the folder, saying what to do.
    Refused,
    /// The rows are intact and read, but what guards a resume is gone: `herd run` refuses the folder.
    ResumeRefused,
}

/// A damage done by hand to a finished run folder (`out`; `other` is a run of the same experiment with
/// other sim parameters).
type Damage = fn(out: &Path, other: &Path);

#[test]
fn every_damage_to_a_run_folder_is_named_and_repaired_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let experiment = experiment(dir.path(), "minimal-group.quick.toml", &[("seeds = 8 ", "seeds = 1 ")]);
    let e = experiment.to_str().unwrap();
    let sim_run = |case: &str, out: &Path, extra: &[&str]| {
        let args =
            [&["run", "--experiment", e, "--backend", "sim", "--out", out.to_str().unwrap(), "--quiet"][..], extra]
                .concat();
        herd(case, &args)
    };
    let pristine = dir.path().join("pristine");
    assert!(sim_run("pristine", &pristine, &[]).ok());
    let sim = dir.path().join("sim.toml");
    std::fs::write(&sim, "[allocation]\ningroup_minority = 0.9\n").unwrap();
    let other = dir.path().join("other");
    assert!(sim_run("other inputs", &other, &["--sim", sim.to_str().unwrap()]).ok());

    let cases: [(&str, Damage, &str, Then); 11] = [
        (
            "a byte flipped in a part",
            |out, _| {
                let part = first(out, "allocation_dyads", "parquet");
                let mut bytes = std::fs::read(&part).unwrap();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 1;
                std::fs::write(&part, bytes).unwrap();
            },
            "bytes changed after the commit",
            Then::Repaired,
        ),
        (
            "a truncated part",
            |out, _| {
                let part = first(out, "allocation_dyads", "parquet");
                let bytes = std::fs::read(&part).unwrap();
                std::fs::write(&part, &bytes[..bytes.len() / 3]).unwrap();
            },
            "were committed (truncated",
            Then::Repaired,
        ),
        (
            "a FIFO in a part's place",
            |out, _| {
                let part = first(out, "allocation_dyads", "parquet");
                std::fs::remove_file(&part).unwrap();
                assert!(Command::new("mkfifo").arg(&part).status().unwrap().success());
            },
            "not a regular file",
            Then::Repaired,
        ),
        (
            "/dev/zero in a part's place",
            |out, _| {
                let part = first(out, "allocation_dyads", "parquet");
                std::fs::remove_file(&part).unwrap();
                std::os::unix::fs::symlink("/dev/zero", &part).unwrap();
            },
            "not a regular file",
            Then::Repaired,
        ),
        (
            "a deleted commit record",
            |out, _| std::fs::remove_file(first(out, "committed", "json")).unwrap(),
            "a commit record is missing",
            Then::Repaired,
        ),
        (
            "a record's row count edited",
            |out, _| {
                edit_json(&first(out, "committed", "json"), |r| {
                    r["rows"]["allocation_deciders"] = 3.into();
                })
            },
            "rows, but",
            Then::Repaired,
        ),
        (
            "a record without its digests",
            |out, _| edit_json(&first(out, "committed", "json"), |r| drop(r.remove("parts"))),
            "without the digest",
            Then::Repaired,
        ),
        (
            "a record that no longer parses",
            |out, _| {
                let record = first(out, "committed", "json");
                let bytes = std::fs::read(&record).unwrap();
                std::fs::write(&record, &bytes[..bytes.len() / 2]).unwrap();
            },
            "not a readable commit record",
            Then::Repaired,
        ),
        (
            "a record and its parts from a run of other inputs",
            |out, other| {
                let record = first(other, "committed", "json");
                let name = record.file_name().unwrap();
                std::fs::copy(&record, out.join("committed").join(name)).unwrap();
                for table in ["allocation_deciders", "allocation_dyads"] {
                    let part = Path::new(name).with_extension("parquet");
                    std::fs::copy(other.join(table).join(&part), out.join(table).join(&part)).unwrap();
                }
            },
            "other inputs",
            Then::Repaired,
        ),
        (
            "a manifest without its input fingerprint",
            |out, _| edit_json(&out.join("manifest.json"), |m| drop(m.remove("inputs"))),
            "no input fingerprint",
            Then::ResumeRefused,
        ),
        (
            "a record copied under a second name",
            |out, _| {
                let record = first(out, "committed", "json");
                std::fs::copy(&record, out.join("committed").join("copy.json")).unwrap();
            },
            "copy.json",
            Then::Refused,
        ),
    ];
    let expected = deciders(&pristine);
    for (i, (case, damage, named, then)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("damage-{i}"));
        assert!(sim_run(case, &out, &[]).ok());
        damage(&out, &other);
        let o = out.to_str().unwrap();
        let verify = herd(case, &["verify", o]);
        assert_eq!(verify.output.status.code(), Some(1), "{case}: herd verify finds it: {}", verify.stdout());
        assert!(verify.stdout().contains(named), "{case}: herd verify names it ({named}): {}", verify.stdout());
        let results = dir.path().join(format!("results-{i}"));
        let analyze = [
            "analyze",
            "minimal-group",
            "--dyads",
            o,
            "--out",
            results.to_str().unwrap(),
            "--resamples",
            "20",
            "--no-gee-bootstrap",
        ];
        let analysed = herd(case, &analyze);
        if then == Then::ResumeRefused {
            assert!(analysed.ok(), "{case}: the rows are intact: {}", analysed.stderr());
        } else {
            assert!(!analysed.ok(), "{case}: herd analyze read a damaged run");
        }
        let rerun = sim_run(case, &out, &[]);
        match then {
            Then::Repaired => {
                assert!(rerun.ok(), "{case}: the same herd run repairs it: {}", rerun.stderr());
                assert_eq!(
                    herd(case, &["verify", o]).output.status.code(),
                    Some(0),
                    "{case}: verifies after the repair"
                );
                assert_eq!(deciders(&out), expected, "{case}: the repaired run holds the rows of an undamaged one");
            }
            Then::Refused | Then::ResumeRefused => {
                assert!(!rerun.ok(), "{case}: resumed a folder it cannot trust");
                assert!(rerun.stderr().contains(named), "{case}: the refusal names it ({named}): {}", rerun.stderr());
            }
        }
    }
}
