//! `herd models --fetch` and fetch-on-first-use for Hugging Face models, against a loopback server that
//! serves a tiny checkpoint as the Hub does (`HF_ENDPOINT`): the Hub cache filled in `huggingface_hub`'s
//! layout, a second fetch downloading nothing, `herd score` running the fetched model, a killed fetch
//! resuming with Range, and a gated repo naming the licence step.

use herd_test_support::hub_server::{HubServer, tiny_sharded_repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const REGISTRY: &str = r#"
default = "tiny-hub"

[models.tiny-hub]
description = "a tiny random llama served by the loopback Hub"
family = "llama"
modality = "text"
source = { hf = "herd-test/tiny-llama" }

[models.tiny-gated]
description = "the same, in a gated repo"
family = "llama"
modality = "text"
source = { hf = "herd-test/tiny-gated", gated = true }
"#;

struct Setup {
    server: HubServer,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let repos = vec![tiny_sharded_repo("herd-test/tiny-llama"), tiny_sharded_repo("herd-test/tiny-gated").gated()];
        let setup = Setup { server: HubServer::start(repos), dir: tempfile::tempdir().unwrap() };
        std::fs::write(setup.registry(), REGISTRY).unwrap();
        std::fs::write(setup.dir.path().join("prompt.txt"), "which line is longer ? answer a or b .").unwrap();
        setup
    }

    fn registry(&self) -> PathBuf {
        self.dir.path().join("models.toml")
    }

    /// `herd ARGS` with the Hub at the loopback server and the Hub cache `cache` (under the temp folder).
    fn herd(&self, cache: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_herd"));
        command
            .args(args)
            .arg("--registry")
            .arg(self.registry())
            .env("HF_ENDPOINT", self.server.endpoint())
            .env("HF_HUB_CACHE", self.dir.path().join(cache))
            .env("HF_HOME", self.dir.path().join("hf-home"))
            .env("HERD_CACHE", self.dir.path().join("herd-cache"))
            .env_remove("HF_TOKEN")
            .env_remove("HF_TOKEN_PATH")
            .env_remove("HF_HUB_OFFLINE");
        command
    }

    fn run(&self, cache: &str, args: &[&str]) -> Output {
        self.herd(cache, args).output().expect("herd runs")
    }

    fn score_args(&self) -> Vec<String> {
        let prompt = self.dir.path().join("prompt.txt").display().to_string();
        ["score", "--model", "tiny-hub", "--prompt-file", &prompt, "--answers", "a,b", "--json"]
            .map(String::from)
            .to_vec()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repo_root(cache: &Path) -> PathBuf {
    cache.join("models--herd-test--tiny-llama")
}

#[test]
fn models_fetch_fills_the_hub_cache_and_score_runs_the_fetched_model() {
    let setup = Setup::new();
    let out = setup.run("hub", &["models", "--fetch", "tiny-hub"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("7 files") && stderr.contains("to download into"), "the plan is announced first: {stderr}");
    let root = repo_root(&setup.dir.path().join("hub"));
    let commit = std::fs::read_to_string(root.join("refs/main")).unwrap();
    let snapshot = root.join("snapshots").join(&commit);
    assert_eq!(text(&out.stdout).trim(), format!("tiny-hub: {}", snapshot.display()));
    for name in ["config.json", "tokenizer.json", "model.safetensors.index.json", "model-00002-of-00002.safetensors"] {
        let link = std::fs::read_link(snapshot.join(name)).unwrap();
        assert!(link.starts_with("../../blobs"), "{name} → {}", link.display());
    }
    let served = setup.server.body_bytes_served();

    let again = setup.run("hub", &["models", "--fetch", "tiny-hub"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(setup.server.body_bytes_served(), served, "a second fetch downloads nothing");
    assert!(text(&again.stderr).contains("0 bytes downloaded"), "{}", text(&again.stderr));

    let listing = setup.run("hub", &["models"]);
    let line = text(&listing.stdout).lines().find(|l| l.starts_with("tiny-hub")).unwrap().to_string();
    assert!(line.contains("yes"), "{line}");

    let score = setup.run(
        "hub",
        &[setup.score_args(), vec!["--no-fetch".into()]].concat().iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(score.status.success(), "{}", text(&score.stderr));
    let json: serde_json::Value = serde_json::from_slice(&score.stdout).unwrap();
    let p = |a: &str| json["answers"][a]["p"].as_f64().unwrap();
    assert!(p("a") > 0.0 && p("b") > 0.0 && p("a") + p("b") <= 1.0 + 1e-9, "{json}");
    assert_eq!(setup.server.body_bytes_served(), served, "running a present model touches no network");

    // A model that cannot fit is refused before loading, with the numbers and the ways out.
    let args = [setup.score_args(), vec!["--max-memory".into(), "0.0001".into()]].concat();
    let refused = setup.run("hub", &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!refused.status.success());
    let err = text(&refused.stderr);
    assert!(err.contains("`tiny-hub` does not fit on cpu") && err.contains("(--max-memory 0.0001)"), "{err}");
    assert!(err.contains("parameters at f32") && err.contains("KV cache"), "{err}");
    for option in ["--weights int8", "--backend openai", "--max-memory GB", "another `--device`"] {
        assert!(err.contains(option), "{option}: {err}");
    }
    assert!(!err.contains("loading `tiny-hub`"), "refused before the load began: {err}");
    let bad = [setup.score_args(), vec!["--max-memory=-3".into()]].concat();
    let bad = setup.run("hub", &bad.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(text(&bad.stderr).contains("not a positive number of gigabytes"), "{}", text(&bad.stderr));
}

#[test]
fn a_missing_model_is_fetched_on_first_use_unless_no_fetch() {
    let setup = Setup::new();
    let args = setup.score_args();
    let refused = setup.run(
        "fresh",
        &[args.clone(), vec!["--no-fetch".into()]].concat().iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(!refused.status.success());
    let err = text(&refused.stderr);
    assert!(err.contains("herd models --fetch tiny-hub") && err.contains("--no-fetch is set"), "{err}");
    assert_eq!(setup.server.body_requests(), 0);

    let first = setup.run("fresh", &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(text(&first.stderr).contains("fetching it first"), "{}", text(&first.stderr));
    assert!(serde_json::from_slice::<serde_json::Value>(&first.stdout).is_ok());
}

#[test]
fn a_killed_fetch_resumes_where_it_stopped() {
    let setup = Setup::new();
    // Slow enough that the fetch is mid-file when it is killed.
    setup.server.throttle(Some(40_000));
    let mut child = setup
        .herd("hub", &["models", "--fetch", "tiny-hub", "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let blobs = repo_root(&setup.dir.path().join("hub")).join("blobs");
    let partial = |blobs: &Path| -> Option<(PathBuf, u64)> {
        std::fs::read_dir(blobs).ok()?.flatten().find_map(|e| {
            let len = e.metadata().ok()?.len();
            // Past the size of every small file, so this is a weight shard mid-transfer (a small file can
            // be whole but not yet renamed when the kill lands, and then needs no Range request).
            (e.file_name().to_string_lossy().ends_with(".incomplete") && len > 8_192).then(|| (e.path(), len))
        })
    };
    let started = Instant::now();
    while partial(&blobs).is_none() {
        assert!(started.elapsed() < Duration::from_secs(60), "no download began");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (path, len) = partial(&blobs).expect("the killed download left its partial blob");
    let etag = path.file_name().unwrap().to_string_lossy().trim_end_matches(".incomplete").to_string();
    setup.server.throttle(None);

    let resumed = setup.run("hub", &["models", "--fetch", "tiny-hub"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let range = format!("bytes={len}-");
    assert!(
        setup.server.requests().iter().any(|r| r.starts_with("GET ") && r.contains(&etag) && r.ends_with(&range)),
        "no resumed request from byte {len}: {:#?}",
        setup.server.requests()
    );
    assert!(!path.exists(), "the blob was completed and moved into place");
    let score = setup.run("hub", &setup.score_args().iter().map(String::as_str).collect::<Vec<_>>());
    assert!(score.status.success(), "{}", text(&score.stderr));
}

#[test]
fn a_gated_repo_prints_the_licence_step() {
    let setup = Setup::new();
    let out = setup.run("hub", &["models", "--fetch", "tiny-gated"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    let page = format!("{}/herd-test/tiny-gated", setup.server.endpoint());
    assert!(err.contains("is gated") && err.contains(&page) && err.contains("accept its licence"), "{err}");
    assert!(err.contains("hf auth login") && err.contains("HF_TOKEN"), "{err}");
    // The listing says so before anything is tried.
    let listing = text(&setup.run("hub", &["models"]).stdout);
    assert!(listing.contains("gated: accept its licence"), "{listing}");
    // A token that may read it (from the token file `hf auth login` writes) opens it.
    setup.server.allow_token("hf_loopback_token");
    std::fs::create_dir_all(setup.dir.path().join("hf-home")).unwrap();
    std::fs::write(setup.dir.path().join("hf-home/token"), "hf_loopback_token\n").unwrap();
    let out = setup.run("hub", &["models", "--fetch", "tiny-gated"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("hf_loopback_token") && !text(&out.stdout).contains("hf_loopback_token"));
}

#[test]
fn without_hf_home_the_cache_and_token_are_under_xdg_cache_home_as_huggingface_hub_has_them() {
    let setup = Setup::new();
    setup.server.allow_token("hf_xdg_token");
    let xdg = setup.dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("huggingface")).unwrap();
    std::fs::write(xdg.join("huggingface/token"), "hf_xdg_token\n").unwrap();
    let out = setup
        .herd("unused", &["models", "--fetch", "tiny-gated"])
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_HOME")
        .env("XDG_CACHE_HOME", &xdg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let root = xdg.join("huggingface/hub/models--herd-test--tiny-gated");
    assert!(root.join("refs/main").is_file(), "{}", text(&out.stderr));
    assert!(!setup.dir.path().join("unused").exists());
}
