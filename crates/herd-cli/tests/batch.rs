//! `herd run --backend batch`: the requests a live `--backend openai` run sends, written as a batch file,
//! and a batch run's answers stored through the same checks. Answers come from the capacity server's
//! own answer function (`capacity_server::reply_to`, each answer depending on its request), so a batch
//! import can be compared row for row with a live run against that server: an answer given to the wrong
//! request, a request built differently or a unit stored without all its answers shows.

mod common;

use common::*;
use herd_design::ChaCha20Rng;
use herd_design::rand::SeedableRng;
use herd_design::rand::seq::SliceRandom;
use herd_store::Table;
use herd_test_support::capacity_server::{Capacity, CapacityServer, reply_to};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A capacity server whose answers depend on the request, keeping every request it answers.
fn varied_server() -> CapacityServer {
    let latency = Duration::from_millis(1);
    CapacityServer::start(Capacity { varied: true, record: true, ..Capacity::new(16, latency, latency) })
}

/// `herd run --backend batch` with `files` (`--export F`, `--import F`) and `extra` flags.
fn batch(experiment: &Path, out: &Path, files: &[&str], extra: &[&str]) -> Output {
    let mut args: Vec<String> = [
        "run",
        "--backend",
        "batch",
        "--experiment",
        experiment.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-quick-look",
    ]
    .map(String::from)
    .to_vec();
    args.extend(files.iter().chain(extra).map(|s| (*s).to_owned()));
    run(&args)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", path.display())))
        .collect()
}

/// The answer line the Batch API writes for `request` (an export line), its body the server's answer to
/// the request's body.
fn answer(request: &Value, i: usize) -> Value {
    let body = serde_json::to_vec(&request["body"]).unwrap();
    let reply: Value = serde_json::from_str(&reply_to(&body, true)).unwrap();
    json!({"id": format!("batch_req_{i}"), "custom_id": request["custom_id"], "error": null,
           "response": {"status_code": 200, "request_id": format!("req_{i}"), "body": reply}})
}

/// Answers to every request of `requests`, in a shuffled order (a batch run's output need not keep the
/// input's).
fn answers(requests: &[Value], seed: u64) -> Vec<Value> {
    let mut lines: Vec<Value> = requests.iter().enumerate().map(|(i, r)| answer(r, i)).collect();
    lines.shuffle(&mut ChaCha20Rng::seed_from_u64(seed));
    lines
}

fn write_lines(path: &Path, lines: &[Value]) -> PathBuf {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn id(line: &Value) -> String {
    line["custom_id"].as_str().unwrap().to_owned()
}

/// The unit of a custom id (`unit@index`).
fn unit(custom_id: &str) -> String {
    custom_id.rsplit_once('@').unwrap().0.to_owned()
}

/// The `(url, body)` of every request, sorted: what a server is asked, in any order.
fn asked(requests: impl IntoIterator<Item = (String, Value)>) -> Vec<String> {
    let mut asked: Vec<String> = requests.into_iter().map(|(url, body)| format!("{url} {body}")).collect();
    asked.sort();
    asked
}

fn all_rows(dir: &Path) -> BTreeMap<Table, Vec<String>> {
    Table::ALL.into_iter().map(|t| (t, rows(dir, t))).collect()
}

fn assert_same_rows(a: &Path, b: &Path, what: &str) {
    for table in Table::ALL {
        let (x, y) = (rows(a, table), rows(b, table));
        assert_eq!(x.len(), y.len(), "{what}: {table}: row counts differ");
        if let Some((x, y)) = x.iter().zip(&y).find(|(x, y)| x != y) {
            panic!("{what}: {table}: rows differ:\n  {x}\n  {y}");
        }
    }
}

#[test]
fn an_export_is_what_a_live_run_sends_and_its_answers_store_the_live_rows() {
    let dir = tempfile::tempdir().unwrap();
    for (name, table) in
        [("conformity.quick.toml", Table::ConformityTrials), ("minimal-group.quick.toml", Table::AllocationDeciders)]
    {
        let experiment = experiment(dir.path(), name);
        let server = varied_server();
        let live = dir.path().join(format!("{name}-live"));
        let output = run(&run_args(&experiment, &live, &[&server], 2));
        assert!(output.status.success(), "{name}: {}", text(&output));

        // The export: one line per request a live run sends, each body as the server got it.
        let (out, requests) = (dir.path().join(format!("{name}-batch")), dir.path().join(format!("{name}.jsonl")));
        let output = batch(&experiment, &out, &["--export", requests.to_str().unwrap()], &[]);
        assert!(output.status.success(), "{name}: {}", text(&output));
        let exported = lines(&requests);
        assert!(text(&output).contains(&format!("batch: {} requests written to", exported.len())), "{}", text(&output));
        assert!(text(&output).contains("units await answers"), "{}", text(&output));
        for line in &exported {
            assert_eq!(line["method"], "POST", "{line}");
            assert_eq!(line.as_object().unwrap().len(), 4, "custom_id, method, url, body: {line}");
        }
        let live_asked = asked(
            server.requests().into_iter().map(|(path, body)| (path, serde_json::from_slice::<Value>(&body).unwrap())),
        );
        let batch_asked = asked(exported.iter().map(|l| (l["url"].as_str().unwrap().to_owned(), l["body"].clone())));
        assert_eq!(batch_asked.len(), live_asked.len(), "{name}: as many requests as a live run sends");
        assert!(batch_asked == live_asked, "{name}: the export's requests differ from what the live run sent");
        // Custom ids: each once, `unit@index`, every unit of the run, a unit's indices 0, 1, …
        let ids: BTreeSet<String> = exported.iter().map(id).collect();
        assert_eq!(ids.len(), exported.len(), "{name}: a custom id twice");
        let mut per_unit: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for id in &ids {
            let (unit, index) = id.rsplit_once('@').unwrap();
            per_unit.entry(unit.to_owned()).or_default().push(index.parse().unwrap());
        }
        // A decider row's id is its unit's and `#decider` (a unit id holds one `#` of its own).
        let expected: BTreeSet<String> = expected_units(&experiment, table)
            .into_iter()
            .map(|u| if table == Table::AllocationDeciders { u.rsplit_once('#').unwrap().0.to_owned() } else { u })
            .collect();
        assert_eq!(per_unit.keys().cloned().collect::<BTreeSet<_>>(), expected, "{name}: the export's units");
        for (unit, mut indices) in per_unit {
            indices.sort();
            assert_eq!(indices, (0..indices.len()).collect::<Vec<_>>(), "{name}: {unit}");
        }

        // The answers, shuffled: stored exactly as the live run stored the server's replies.
        let results = write_lines(&dir.path().join(format!("{name}-results.jsonl")), &answers(&exported, 7));
        let output = batch(&experiment, &out, &["--import", results.to_str().unwrap()], &[]);
        assert!(output.status.success(), "{name}: {}", text(&output));
        assert!(
            text(&output).contains(&format!("{} answers in", exported.len()))
                && text(&output).contains(&format!("{} taken", exported.len())),
            "{}",
            text(&output)
        );
        assert_same_rows(&live, &out, name);
        let manifest = herd_store::read_run_manifest(&out).unwrap();
        let sha = herd_backend::sha256_file(&results).unwrap();
        assert_eq!(manifest.notes["batch"]["import"]["sha256"], sha.as_str(), "the manifest records the answers' file");
        let device = &manifest.sessions.last().unwrap().device;
        assert!(device.contains("batch file") && device.contains(&sha), "{device}");
        assert!(manifest.failed.is_empty() && manifest.sessions.last().unwrap().status == "complete");
        assert_eq!(herd_store::read_run_manifest(&live).unwrap().identity, manifest.identity, "one run");

        // Nothing is pending now: a second export is empty, and importing the file again stores nothing.
        let again = dir.path().join(format!("{name}-again.jsonl"));
        let output = batch(&experiment, &out, &["--export", again.to_str().unwrap()], &[]);
        assert!(output.status.success(), "{}", text(&output));
        assert!(lines(&again).is_empty(), "{name}: a complete run exports nothing");
        let output = batch(&experiment, &out, &["--import", results.to_str().unwrap()], &[]);
        assert!(output.status.success(), "{}", text(&output));
        assert!(text(&output).contains(&format!("{} for units stored already", exported.len())), "{}", text(&output));
        assert_same_rows(&live, &out, name);
    }
}

#[test]
fn a_partial_or_broken_answers_file_stores_only_whole_units_and_names_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let experiment = experiment(dir.path(), "minimal-group.quick.toml");
    let reference = dir.path().join("reference");
    let requests_path = dir.path().join("requests.jsonl");
    assert!(batch(&experiment, &reference, &["--export", requests_path.to_str().unwrap()], &[]).status.success());
    let requests = lines(&requests_path);
    let good = answers(&requests, 11);
    let full = write_lines(&dir.path().join("full.jsonl"), &good);
    // Answers to requests asked one way are not read as answers to another: an import under other
    // request flags than the export's is refused, naming them, and stores nothing.
    let before = all_rows(&reference);
    let output =
        batch(&experiment, &reference, &["--import", full.to_str().unwrap()], &["--structured-output", "json-object"]);
    let said = text(&output);
    assert!(!output.status.success() && said.contains("--structured-output") && said.contains("new --out"), "{said}");
    assert_eq!(all_rows(&reference), before, "nothing stored");
    let output = batch(&experiment, &reference, &["--import", full.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", text(&output));

    // Six units' answers spoilt, each another way, plus lines that answer nothing of this run.
    let units: Vec<String> = requests.iter().map(|r| unit(&id(r))).collect::<BTreeSet<_>>().into_iter().collect();
    let spoilt: Vec<&String> = units.iter().take(6).collect();
    let of = |u: &String, i: usize| format!("{u}@{i}");
    let mut broken: Vec<Value> = Vec::new();
    for line in &good {
        let id = id(line);
        let mut line = line.clone();
        if id == of(spoilt[0], 3) || unit(&id) == *spoilt[1] {
            continue; // a decider missing; a whole society missing
        }
        if id == of(spoilt[2], 0) {
            broken.push(line.clone()); // given twice
        }
        if id == of(spoilt[3], 5) {
            line["response"] = json!({"status_code": 500, "body": {"error": {"message": "out of memory"}}});
        }
        if id == of(spoilt[4], 0) {
            line["response"]["body"]["choices"][0]["message"]["content"] = json!(5);
        }
        if id == of(spoilt[5], 19) {
            line["error"] = json!({"code": "batch_expired", "message": "the batch expired"});
            line["response"] = Value::Null;
        }
        broken.push(line);
    }
    broken.push(json!({"custom_id": "nonsense", "response": {"status_code": 200, "body": {}}}));
    let stranger = format!("{}#977.0@0", spoilt[0].rsplit_once('#').unwrap().0);
    broken.push(json!({"custom_id": stranger, "response": {"status_code": 200, "body": {}}}));
    let path = write_lines(&dir.path().join("broken.jsonl"), &broken);
    let mut text_file = std::fs::read_to_string(&path).unwrap();
    text_file.push_str("{\"custom_id\": \"cut short\n");
    std::fs::write(&path, text_file).unwrap();

    let out = dir.path().join("partial");
    let output = batch(&experiment, &out, &["--import", path.to_str().unwrap()], &[]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "problems exit 1 (no panic): {said}");
    for named in [
        format!("unit `{}`: the file answers 19 of its 20 requests (missing {})", spoilt[0], of(spoilt[0], 3)),
        format!("custom id `{}` is on lines", of(spoilt[2], 0)),
        format!("batch answer `{}`: HTTP 500", of(spoilt[3], 5)),
        format!("batch answer `{}`: unexpected reply (`content` is not a string)", of(spoilt[4], 0)),
        format!("batch answer `{}`: the batch run reports an error", of(spoilt[5], 19)),
        "custom id `nonsense`".to_owned(),
        format!("custom id `{stranger}`"),
        format!("line {} is not a batch answer", broken.len() + 1),
        "2 units await answers".to_owned(),
    ] {
        assert!(said.contains(&named), "the summary names `{named}`:\n{said}");
    }
    // Every other unit is stored, as the whole file stores it; the spoilt ones are not stored at all.
    let spoilt_units: BTreeSet<&str> = spoilt.iter().map(|u| u.as_str()).collect();
    for table in [Table::AllocationDeciders, Table::AllocationDyads] {
        let whole: Vec<String> = rows(&reference, table)
            .into_iter()
            .filter(|row| {
                !spoilt_units
                    .iter()
                    .any(|u| row.contains(&format!("unit_id={u}|")) || row.contains(&format!("unit_id=\"{u}\"")))
            })
            .collect();
        assert_eq!(rows(&out, table), whole, "{table}: the whole units' rows, and no other");
    }
    let manifest = herd_store::read_run_manifest(&out).unwrap();
    let failed: BTreeSet<&str> = manifest.failed.iter().map(String::as_str).collect();
    assert_eq!(failed, [spoilt[2], spoilt[3], spoilt[4], spoilt[5]].into_iter().map(|u| u.as_str()).collect());
    assert!(manifest.sessions.last().unwrap().status.starts_with("incomplete"), "{:?}", manifest.sessions);

    // The next export writes exactly the spoilt units' requests, every one of each.
    let rest_path = dir.path().join("rest.jsonl");
    let output = batch(&experiment, &out, &["--export", rest_path.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", text(&output));
    let rest = lines(&rest_path);
    let expected: BTreeSet<String> =
        requests.iter().map(id).filter(|id| spoilt_units.contains(unit(id).as_str())).collect();
    assert_eq!(rest.iter().map(id).collect::<BTreeSet<_>>(), expected);
    assert_eq!(rest.len(), expected.len());
    // Their answers complete the run: the rows of the whole file.
    let rest_answers = write_lines(&dir.path().join("rest-results.jsonl"), &answers(&rest, 3));
    let output = batch(&experiment, &out, &["--import", rest_answers.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(all_rows(&out), all_rows(&reference));
}

#[test]
fn hostile_score_answers_are_refused_by_name_and_import_with_export_writes_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let experiment = dir.path().join("tiny.toml");
    let data = root().join("data");
    std::fs::write(
        &experiment,
        herd_test_support::hostile_server::TINY_CONFORMITY
            .replace("@DATA@", data.to_str().unwrap())
            .replace("trials_per_n = 2", "trials_per_n = 4"),
    )
    .unwrap();
    let requests_path = dir.path().join("requests.jsonl");
    let out = dir.path().join("run");
    assert!(batch(&experiment, &out, &["--export", requests_path.to_str().unwrap()], &[]).status.success());
    let requests = lines(&requests_path);
    assert!(requests.len() >= 6, "{}", requests.len());
    assert!(requests.iter().all(|r| r["body"]["logprobs"] == true && r["body"]["top_logprobs"] == 20));
    let mut answers = answers(&requests, 5);
    answers.sort_by_key(id);
    // A mass of 1.98: A and B both at -0.01.
    answers[0]["response"]["body"] = json!({"choices": [{"logprobs": {"content": [{"top_logprobs": [
        {"token": "A", "logprob": -0.01}, {"token": "B", "logprob": -0.01}]}]}}]});
    answers[1]["response"]["body"] = json!({"choices": [{"logprobs": null}]});
    answers[2]["response"]["body"]["padding"] = json!("x".repeat(40_000)); // past --max-reply-mb 0.01
    let spoilt: Vec<String> = answers[..3].iter().map(id).collect();
    let mut text_file: String = answers.iter().map(|l| format!("{l}\n")).collect();
    // A bare NaN, as Python's json writes it, in the fourth answer's top list: refused as not a number.
    let fourth = answers[3].to_string();
    let (head, list) = fourth.split_once("\"top_logprobs\":[").unwrap();
    let nan = format!("{head}\"top_logprobs\":[{}", list.replacen("\"logprob\":", "\"logprob\":NaN,\"was\":", 1));
    assert_ne!(nan, fourth);
    text_file = text_file.replace(&fourth, &nan);
    let results = dir.path().join("results.jsonl");
    std::fs::write(&results, text_file).unwrap();
    let again = dir.path().join("again.jsonl");
    let output = batch(
        &experiment,
        &out,
        &["--import", results.to_str().unwrap(), "--export", again.to_str().unwrap()],
        &["--max-reply-mb", "0.01"],
    );
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    for named in [
        format!("batch answer `{}`: unexpected reply", spoilt[0]),
        "sum to 1.98".to_owned(),
        format!("batch answer `{}`: unexpected reply (no logprobs", spoilt[1]),
        format!("batch answer `{}`: the answer's body is", spoilt[2]),
        "0.01 MB (--max-reply-mb 0.01)".to_owned(),
        format!(
            "batch answer `{}`: unexpected reply (the log-probability of `A` is missing or not a number",
            id(&answers[3])
        ),
    ] {
        assert!(said.contains(&named), "the summary names `{named}`:\n{said}");
    }
    // The refused units are written again (with --export beside --import), nothing else; the rest is stored.
    let mut refused: Vec<String> = spoilt.clone();
    refused.push(id(&answers[3]));
    refused.sort();
    let mut rewritten: Vec<String> = lines(&again).iter().map(id).collect();
    rewritten.sort();
    assert_eq!(rewritten, refused);
    let stored: BTreeSet<String> = unit_ids(&out, Table::ConformityTrials).into_iter().collect();
    let all: BTreeSet<String> = requests.iter().map(|r| unit(&id(r))).collect();
    let refused_units: BTreeSet<String> = refused.iter().map(|r| unit(r)).collect();
    assert_eq!(stored, all.difference(&refused_units).cloned().collect());
}

#[test]
fn the_baseline_filter_builds_its_pools_over_rounds_and_ends_with_the_live_rows() {
    let dir = tempfile::tempdir().unwrap();
    let data = root().join("data");
    // The default model with the filter on (its registry entry turns it off), at a threshold the varied
    // answers pass about half the time: pools take more than one chunk.
    let registry = dir.path().join("models.toml");
    let models = std::fs::read_to_string(data.join("models.toml")).unwrap();
    let (head, tail) = models.split_once("[models.smollm2-135m]").unwrap();
    let tail = tail.replacen("baseline_filter = { enabled = false }\n", "", 1);
    std::fs::write(&registry, format!("{head}[models.smollm2-135m]{tail}")).unwrap();
    let experiment = dir.path().join("filtered.toml");
    let text_file = herd_test_support::hostile_server::TINY_CONFORMITY
        .replace("@DATA@", data.to_str().unwrap())
        .replace("general_pool_size = 2", "general_pool_size = 8")
        .replace(
            "[baseline_filter]\nenabled = false",
            "[baseline_filter]\nenabled = true\nmin_p_correct = 0.5\nmax_candidates = 96",
        )
        .replace(
            "[families.group_size]",
            "[families.group_size]\n[families.difficulty]\nn_values = [0, 2]\n[stimuli.lines]\ndifficulty_spreads = [250, 110]\nimages_per_level = 12",
        );
    std::fs::write(&experiment, text_file).unwrap();
    let registry_flag = ["--registry", registry.to_str().unwrap()];

    let server = varied_server();
    let live = dir.path().join("live");
    let mut args = run_args(&experiment, &live, &[&server], 2);
    args.extend(registry_flag.map(String::from));
    let output = run(&args);
    assert!(output.status.success(), "{}", text(&output));
    assert!(!rows(&live, Table::BaselineCandidates).is_empty());

    let out = dir.path().join("batch");
    let mut rounds = Vec::new();
    for round in 0..8 {
        let requests = dir.path().join(format!("requests-{round}.jsonl"));
        let output = batch(&experiment, &out, &["--export", requests.to_str().unwrap()], &registry_flag);
        assert!(output.status.success(), "round {round}: {}", text(&output));
        let exported = lines(&requests);
        if exported.is_empty() {
            break;
        }
        let baseline = exported.iter().filter(|r| id(r).starts_with("baseline/")).count();
        rounds.push((baseline, exported.len() - baseline));
        let results = write_lines(&dir.path().join(format!("results-{round}.jsonl")), &answers(&exported, round));
        let output = batch(&experiment, &out, &["--import", results.to_str().unwrap()], &registry_flag);
        assert!(output.status.success(), "round {round}: {}", text(&output));
    }
    // Candidates first (no trial before its pools are built), the trials last, in a few rounds.
    assert!(rounds.len() >= 2 && rounds.len() < 8, "{rounds:?}");
    assert!(rounds[0].0 > 0 && rounds[0].1 == 0, "the first round asks for candidates only: {rounds:?}");
    assert!(rounds.last().unwrap().1 > 0, "the last round asks for the trials: {rounds:?}");
    assert!(rounds.iter().filter(|(_, trials)| *trials > 0).count() == 1, "trials once: {rounds:?}");
    // The pools and trials a live run builds, candidate for candidate.
    assert_same_rows(&live, &out, "baseline rounds");
}

#[test]
fn batch_flags_are_checked_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let experiment = experiment(dir.path(), "minimal-group.quick.toml");
    let out = dir.path().join("run");
    let file = dir.path().join("f.jsonl");
    let f = file.to_str().unwrap();
    for (args, says) in [
        (vec![], "--backend batch needs --export FILE"),
        (vec!["--import", f, "--export", f], "is the --import file"),
        (vec!["--export", f, "--endpoint", "http://127.0.0.1:9"], "--endpoint is for --backend openai"),
    ] {
        std::fs::write(&file, "").unwrap();
        let output = batch(&experiment, &out, &args, &[]);
        assert!(!output.status.success() && text(&output).contains(says), "{args:?}: {}", text(&output));
        assert!(!out.exists(), "{args:?}: nothing written");
    }
    let e = experiment.to_str().unwrap();
    let output = herd(&["run", "--backend", "sim", "--experiment", e, "--out", out.to_str().unwrap(), "--export", f])
        .output()
        .unwrap();
    assert!(!output.status.success() && text(&output).contains("--export is for --backend batch"), "{}", text(&output));
    assert!(!out.exists());
}
