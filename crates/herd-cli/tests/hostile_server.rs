//! The openai backend against a hostile OpenAI-compatible server (herd-test-support's `hostile_server`),
//! one bad reply per test, through the `herd` binary: probabilities that sum past 1 by float rounding are
//! stored normalised; impossible ones (a mass of 2, NaN, a missing value) fail the request after its
//! retries, and the unit is recomputed by the next run; an over-long top-k list costs linear time; an
//! over-long reply, or reasoning over its own cap inside a reply the body cap allows, is refused naming
//! the cap; an API key the server echoes, and URL credentials, are never written.

use herd_store::{Table, read_table};
use herd_test_support::hostile_server::{HostileServer, Mode, TINY_CONFORMITY};
use herd_test_support::stored_table;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `herd args`, killing it (and failing the test) past `limit`.
fn herd_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("herd {args:?} still running after {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn conformity(dir: &Path) -> PathBuf {
    let path = dir.join("conformity.toml");
    std::fs::write(&path, TINY_CONFORMITY.replace("@DATA@", &root().join("data").display().to_string())).unwrap();
    path
}

/// `herd run --backend openai` of `experiment` into `out`, retrying quickly.
fn run(experiment: &Path, out: &Path, url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        "--backend",
        "openai",
        "--endpoint",
        url,
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
    herd_within(&args, Duration::from_secs(120))
}

/// A numeric column of the run's conformity trials.
fn column(run: &Path, name: &str) -> Vec<f64> {
    let frame = stored_table::frame(
        read_table(&[run.to_path_buf()], Table::ConformityTrials).unwrap().expect("conformity rows stored"),
    );
    // Exact values (a float printed through polars' formatting loses the digits that matter here).
    frame.column(name).unwrap().f64().unwrap().iter().map(|v| v.unwrap_or(f64::NAN)).collect()
}

/// The rows a complete run of `experiment` stores, from the sim backend.
fn sim_rows(experiment: &Path) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let out = herd_within(
        &[
            "run",
            "--backend",
            "sim",
            "--experiment",
            experiment.to_str().unwrap(),
            "--out",
            dir.path().to_str().unwrap(),
            "--quiet",
            "--no-quick-look",
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    column(dir.path(), "p_correct").len()
}

fn assert_probabilities(run: &Path) {
    for name in ["p_correct", "p_wrong_full", "mass_ab"] {
        let values = column(run, name);
        assert!(!values.is_empty());
        assert!(values.iter().all(|p| (0.0..=1.0).contains(p)), "{name} is not a probability: {values:?}");
    }
}

#[test]
fn a_reply_over_one_by_float_rounding_is_stored_normalised() {
    let server = HostileServer::start(Mode::OverOneRounding);
    let dir = tempfile::tempdir().unwrap();
    let (experiment, out) = (conformity(dir.path()), dir.path().join("run"));
    let result = run(&experiment, &out, &server.url(), &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    assert_probabilities(&out);
    // A and B hold all the mass, 1 + e^-17 + e^-19 normalised: 1 within rounding, never above.
    let mass = column(&out, "mass_ab");
    assert!(mass.iter().all(|m| *m > 0.999_999 && *m <= 1.0), "{mass:?}");
    assert_eq!(mass.len(), sim_rows(&experiment), "every unit stored");
}

fn prompt_file(dir: &Path) -> PathBuf {
    let path = dir.join("prompt.txt");
    std::fs::write(&path, "Which line is longer, A or B? Answer A or B.").unwrap();
    path
}

/// `herd score` or `herd generate` of `prompt` on the server, with `extra` flags, killed past `limit`.
fn ask(command: &str, server: &HostileServer, prompt: &Path, extra: &[&str], limit: Duration) -> Output {
    let url = server.url();
    let mut args = vec![command, "--backend", "openai", "--endpoint", &url, "--prompt-file", prompt.to_str().unwrap()];
    args.extend_from_slice(extra);
    herd_within(&args, limit)
}

#[test]
fn impossible_probabilities_fail_the_request_after_its_retries_naming_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = prompt_file(dir.path());
    for (mode, says) in [
        (Mode::AllZero, "sum to 2"),
        (Mode::NearOneTwice, "sum to 1.98"),
        (Mode::NanText, "`A` is missing or not a number"),
        (Mode::NanMissing, "`A` is missing or not a number"),
    ] {
        let server = HostileServer::start(mode);
        let extra = ["--answers", "A,B", "--json", "--max-attempts", "3", "--retry-delay", "0.01"];
        let out = ask("score", &server, &prompt, &extra, Duration::from_secs(60));
        let text = stderr(&out);
        assert!(!out.status.success(), "{mode:?}: stored as a score: {}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(server.requests(), 3, "{mode:?}: a bad reply is retried like a transient failure");
        assert!(
            text.contains("after 3 attempts") && text.contains(&server.url()) && text.contains("rule:"),
            "{mode:?}: the error names the endpoint and the rule: {text}"
        );
        assert!(text.contains(says), "{mode:?}: the error names the answer or the numbers ({says}): {text}");
    }
}

#[test]
fn a_unit_failed_by_a_bad_reply_is_recomputed_by_the_next_run() {
    let server = HostileServer::start(Mode::AllZero);
    let dir = tempfile::tempdir().unwrap();
    let (experiment, out) = (conformity(dir.path()), dir.path().join("run"));
    let first = run(&experiment, &out, &server.url(), &[]);
    assert!(!first.status.success(), "a mass of 2 is not stored");
    assert!(stderr(&first).contains("rule:"), "{}", stderr(&first));
    let stored = read_table(std::slice::from_ref(&out), Table::ConformityTrials).unwrap();
    assert!(stored.is_none(), "no unit of the bad replies was stored");

    server.set_mode(Mode::Good);
    let second = run(&experiment, &out, &server.url(), &[]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_probabilities(&out);
    assert_eq!(column(&out, "p_correct").len(), sim_rows(&experiment), "every unit computed, once");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["failed"], serde_json::json!([]), "{manifest}");
}

#[test]
fn an_overlong_top_logprobs_list_is_read_in_linear_time_and_cut_to_what_was_asked() {
    // 230,000 entries of equal length (7.6 MB, under the default cap) where 20 were asked: a quadratic
    // read compares 2.6e10 pairs, a minute or more.
    let server = HostileServer::start(Mode::LongList(230_000));
    let dir = tempfile::tempdir().unwrap();
    let prompt = prompt_file(dir.path());
    let started = Instant::now();
    let extra = ["--answers", "A,B", "--json", "--top-logprobs", "20"];
    let out = ask("score", &server, &prompt, &extra, Duration::from_secs(20));
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p_a = json["answers"]["A"]["p"].as_f64().unwrap();
    assert!((p_a - ((-0.7f64).exp() + (-4.0f64).exp())).abs() < 1e-9, "{json}");
    assert!(json["top"].as_array().unwrap().len() <= 10, "{json}");
    eprintln!("230,000 top_logprobs entries read in {:?}", started.elapsed());
}

#[test]
fn a_reply_longer_than_the_cap_is_refused_naming_the_cap_without_reading_it_whole() {
    const REASONING: usize = 50 << 20;
    let server = HostileServer::start(Mode::LongReasoning(REASONING));
    let dir = tempfile::tempdir().unwrap();
    let prompt = prompt_file(dir.path());
    let started = Instant::now();
    let extra = ["--max-attempts", "3", "--retry-delay", "0.01"];
    let out = ask("generate", &server, &prompt, &extra, Duration::from_secs(60));
    let text = stderr(&out);
    assert!(!out.status.success(), "a 50 MB reasoning text is refused");
    assert!(text.contains("8 MB") && text.contains("--max-reply-mb"), "the error names the cap and the flag: {text}");
    assert_eq!(server.requests(), 1, "a reply over the cap is not asked for again");
    // herd stopped reading at the cap: the server wrote little more than 8 MB (plus the socket's buffers).
    let sent = server.bytes_sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 24 << 20, "herd read {sent} bytes of a {REASONING}-byte reply");
    eprintln!("refused after {sent} bytes in {:?}", started.elapsed());

    // A larger cap takes it.
    let server = HostileServer::start(Mode::LongReasoning(1 << 20));
    let out = ask("generate", &server, &prompt, &["--max-reply-mb", "2"], Duration::from_secs(60));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn reasoning_longer_than_its_cap_is_refused_naming_the_flag_inside_a_reply_the_body_cap_allows() {
    // 2 MB of reasoning: under the 8 MB body cap, over a 0.5 MB reasoning cap.
    const REASONING: usize = 2 << 20;
    let server = HostileServer::start(Mode::LongReasoning(REASONING));
    let dir = tempfile::tempdir().unwrap();
    let prompt = prompt_file(dir.path());
    let extra = ["--max-reasoning-mb", "0.5", "--max-attempts", "3", "--retry-delay", "0.01"];
    let out = ask("generate", &server, &prompt, &extra, Duration::from_secs(60));
    let text = stderr(&out);
    assert!(!out.status.success(), "2 MB of reasoning is refused: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!text.contains("panicked"), "{text}");
    assert!(
        text.contains(&format!("reasoning is {REASONING} bytes"))
            && text.contains("0.5 MB (--max-reasoning-mb 0.5)")
            && text.contains(&server.url()),
        "the error names the size, the cap, the flag and the endpoint: {text}"
    );
    assert!(!text.contains("--max-reply-mb"), "the body cap is not what refused it: {text}");
    assert_eq!(server.requests(), 1, "reasoning over the cap is not asked for again");

    // The default cap (1 MB) takes 0.5 MB of reasoning.
    let server = HostileServer::start(Mode::LongReasoning(1 << 19));
    let out = ask("generate", &server, &prompt, &[], Duration::from_secs(60));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn an_api_key_the_server_echoes_and_url_credentials_are_never_written() {
    let key = "sk-hostile-test-key-0123456789abcdef";
    let server = HostileServer::start(Mode::EchoKey);
    let dir = tempfile::tempdir().unwrap();
    let (experiment, out, report) = (conformity(dir.path()), dir.path().join("run"), dir.path().join("report"));
    let endpoint = format!("http://herduser:herdpass@127.0.0.1:{}", server.port);
    let herd_keyed = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_herd"))
            .current_dir(root())
            .env("HERD_HOSTILE_KEY", key)
            .args(args)
            .output()
            .unwrap()
    };
    let run_args = [
        "run",
        "--backend",
        "openai",
        "--endpoint",
        &endpoint,
        "--experiment",
        experiment.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--api-key-env",
        "HERD_HOSTILE_KEY",
        "--max-attempts",
        "2",
        "--retry-delay",
        "0.01",
    ];
    let leaks = |text: &str| {
        text.contains(key)
            || text.contains("0123456789abcdef")
            || text.contains("herdpass")
            || text.contains("herduser")
    };
    let printed = |output: &Output| format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(output));

    let refused = herd_keyed(&run_args);
    assert!(server.requests() > 0, "the server was asked: {}", stderr(&refused));
    let sent = server.last_authorization.lock().unwrap().clone();
    assert_eq!(sent.as_deref(), Some(format!("Bearer {key}").as_str()), "the key was sent, and echoed back");
    assert!(!refused.status.success(), "every request was refused");
    let text = printed(&refused);
    assert!(text.contains("Received API Key = Bearer ***"), "the echo is shown, redacted: {text}");
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains(&format!("http://***@127.0.0.1:{}", server.port)), "{manifest}");
    assert!(manifest.contains("Bearer ***"), "the failure is recorded, redacted: {manifest}");

    // The run completes against a server that answers, and its report is written; nothing any of them
    // wrote or printed holds the key or the URL's credentials.
    server.set_mode(Mode::Good);
    let completed = herd_keyed(&run_args);
    assert!(completed.status.success(), "{}", stderr(&completed));
    // Whether or not the report can be made of this run's constant scores, whatever it writes is checked.
    let reported = herd_keyed(&["report", "--results", out.to_str().unwrap(), "--out", report.to_str().unwrap()]);
    for output in [&refused, &completed, &reported] {
        let text = printed(output);
        assert!(!leaks(&text), "the key or the URL's credentials were printed: {text}");
    }
    let files: Vec<PathBuf> = [&out, &report].into_iter().filter(|d| d.is_dir()).flat_map(|d| files_under(d)).collect();
    assert!(files.iter().any(|f| f.ends_with("manifest.json")), "{files:?}");
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!leaks(&text), "{}: holds the key or the URL's credentials:\n{text}", file.display());
    }
}

#[test]
fn a_redirect_to_another_host_is_not_followed() {
    // A second server standing for the other host: it must never be asked.
    let elsewhere = HostileServer::start(Mode::Good);
    let target: &'static str =
        Box::leak(format!("http://127.0.0.1:{}/v1/chat/completions", elsewhere.port).into_boxed_str());
    let server = HostileServer::start(Mode::Redirect(target));
    let dir = tempfile::tempdir().unwrap();
    let (experiment, out) = (conformity(dir.path()), dir.path().join("run"));
    let url = format!("http://127.0.0.1:{}", server.port);
    let refused = run(&experiment, &out, &url, &[]);
    assert!(!refused.status.success());
    let err = stderr(&refused);
    assert!(err.contains("redirects to") && err.contains(target) && err.contains("--endpoint"), "{err}");
    assert!(server.requests() > 0);
    assert_eq!(elsewhere.requests(), 0, "the request went nowhere else");
}
