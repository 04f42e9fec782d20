//! herd-hub against a loopback server that serves repos as the Hugging Face Hub does
//! (herd-test-support's `hub_server`): the cache layout `huggingface_hub` writes, only the files herd
//! loads, resuming a cut download, checksums, gated repos, offline mode.

use herd_hub::{HubConfig, HubError, Progress, RepoCache, fetch_snapshot};
use herd_test_support::hub_server::{HubRepo, HubServer, tiny_sharded_repo};
use std::path::Path;
use std::time::Duration;

const REPO: &str = "herd-test/tiny-llama";

fn config(server: &HubServer, cache: &Path) -> HubConfig {
    HubConfig {
        endpoint: server.endpoint(),
        cache: cache.to_path_buf(),
        token: None,
        offline: false,
        retries: 0,
        retry_delay: Duration::from_millis(10),
    }
}

fn fetch(config: &HubConfig) -> Result<herd_hub::Snapshot, HubError> {
    fetch_snapshot(config, REPO, "main", &mut |_| {})
}

fn repo_file<'a>(repo: &'a HubRepo, name: &str) -> &'a [u8] {
    &repo.files.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name} in the fixture")).bytes
}

#[test]
fn a_fetch_fills_the_cache_in_huggingface_hubs_layout_and_a_second_downloads_nothing() {
    let repo = tiny_sharded_repo(REPO);
    let server = HubServer::start(vec![repo.clone()]);
    let cache = tempfile::tempdir().unwrap();
    let config = config(&server, cache.path());
    let mut planned = None;
    let snapshot = fetch_snapshot(&config, REPO, "main", &mut |event| {
        if let Progress::Planned { files, total_bytes, cached_bytes, .. } = event {
            planned = Some((files, total_bytes, cached_bytes));
        }
    })
    .unwrap();
    let root = cache.path().join("models--herd-test--tiny-llama");
    assert_eq!(snapshot.commit, repo.commit);
    assert_eq!(snapshot.dir, root.join("snapshots").join(&repo.commit));
    assert_eq!(std::fs::read_to_string(root.join("refs/main")).unwrap(), repo.commit);
    // Only the files herd loads: not the README, not the weights no index names.
    let mut names: Vec<&str> = snapshot.files.iter().map(|f| f.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "config.json",
            "generation_config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
            "tokenizer.json",
            "tokenizer_config.json",
        ]
    );
    assert!(!snapshot.dir.join("README.md").exists() && !snapshot.dir.join("consolidated.safetensors").exists());
    let total: u64 = snapshot.files.iter().map(|f| f.size).sum();
    // The plan was announced whole: every file (the index, fetched first to learn the shards, is cached by then).
    let index_size = repo_file(&repo, "model.safetensors.index.json").len() as u64;
    assert_eq!(planned, Some((7, total, index_size)));
    for file in &snapshot.files {
        let pointer = snapshot.dir.join(&file.name);
        // A relative symlink into blobs/, named by the file's etag, holding the repo's bytes.
        let etag = repo.etag(&file.name).unwrap();
        assert_eq!(std::fs::read_link(&pointer).unwrap(), Path::new("../../blobs").join(&etag), "{}", file.name);
        assert_eq!(std::fs::read(&pointer).unwrap(), repo_file(&repo, &file.name), "{}", file.name);
        assert_eq!(file.downloaded, file.size);
    }
    assert!(
        std::fs::read_dir(root.join("blobs"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().ends_with(".incomplete"))
    );
    assert!(cache.path().join(".locks/models--herd-test--tiny-llama").is_dir());
    assert_eq!(server.body_bytes_served(), total);

    let again = fetch(&config).unwrap();
    assert_eq!(again.downloaded_bytes(), 0);
    assert_eq!(server.body_bytes_served(), total, "a second fetch downloads nothing");
    assert_eq!(again.dir, snapshot.dir);
}

#[test]
fn a_cut_download_resumes_with_a_range_request() {
    let repo = tiny_sharded_repo(REPO);
    let shard = "model-00001-of-00002.safetensors";
    let size = repo_file(&repo, shard).len() as u64;
    let server = HubServer::start(vec![repo.clone()]);
    let cache = tempfile::tempdir().unwrap();
    let config = config(&server, cache.path());
    // Every body is cut at 20,000 bytes and no retry is allowed: the fetch fails as a killed one would stop.
    server.cut_next_bodies(100, 20_000);
    let err = fetch(&config).unwrap_err();
    assert!(matches!(err, HubError::Network { .. }), "{err}");
    assert!(err.to_string().contains("run the same command again to resume"), "{err}");
    server.cut_next_bodies(0, 0);
    let cached = RepoCache::new(cache.path(), REPO);
    // The small files arrived whole (each is under the cut); the first shard waits, part-done.
    let etag = repo.etag(shard).unwrap();
    assert_eq!(std::fs::metadata(cached.incomplete(&etag)).unwrap().len(), 20_000);
    let served = server.body_bytes_served();
    let snapshot = fetch(&config).unwrap();
    assert!(
        server.requests().iter().any(|r| r.starts_with("GET ") && r.contains(&etag) && r.ends_with("bytes=20000-")),
        "{:#?}",
        server.requests()
    );
    assert_eq!(std::fs::read(snapshot.dir.join(shard)).unwrap(), repo_file(&repo, shard));
    let resumed = snapshot.files.iter().find(|f| f.name == shard).unwrap();
    assert_eq!(resumed.downloaded, size - 20_000, "only the rest was downloaded");
    assert!(server.body_bytes_served() - served < snapshot.files.iter().map(|f| f.size).sum::<u64>());

    // Within one fetch, a cut transfer is retried from where it stopped.
    let cache = tempfile::tempdir().unwrap();
    let config = HubConfig { retries: 2, ..self::config(&server, cache.path()) };
    server.cut_next_bodies(1, 500);
    let mut retries = 0;
    let snapshot =
        fetch_snapshot(&config, REPO, "main", &mut |e| retries += matches!(e, Progress::Retrying { .. }) as usize)
            .unwrap();
    assert_eq!(retries, 1);
    for file in &snapshot.files {
        assert_eq!(std::fs::read(snapshot.dir.join(&file.name)).unwrap(), repo_file(&repo, &file.name));
    }
}

#[test]
fn bytes_that_do_not_match_the_etag_never_enter_the_cache() {
    let repo = tiny_sharded_repo(REPO);
    let shard = "model-00002-of-00002.safetensors";
    let server = HubServer::start(vec![repo.clone()]);
    let cache = tempfile::tempdir().unwrap();
    let config = config(&server, cache.path());
    // A partial file whose bytes are not the file's (another tool's garbage, a flipped bit): resuming after it
    // gives the right size and the wrong digest.
    let cached = RepoCache::new(cache.path(), REPO);
    let etag = repo.etag(shard).unwrap();
    std::fs::create_dir_all(cached.root.join("blobs")).unwrap();
    std::fs::write(cached.incomplete(&etag), vec![0xAB; 700]).unwrap();
    let err = fetch(&config).unwrap_err();
    assert!(matches!(&err, HubError::Checksum { file, .. } if file == shard), "{err}");
    assert!(!cached.blob(&etag).exists() && !cached.incomplete(&etag).exists());
    // The next fetch starts that file over and succeeds.
    let snapshot = fetch(&config).unwrap();
    assert_eq!(std::fs::read(snapshot.dir.join(shard)).unwrap(), repo_file(&repo, shard));
}

#[test]
fn a_gated_repo_names_the_licence_step_and_a_token_opens_it() {
    let repo = tiny_sharded_repo(REPO).gated();
    let server = HubServer::start(vec![repo]);
    let cache = tempfile::tempdir().unwrap();
    let mut config = config(&server, cache.path());
    let err = fetch(&config).unwrap_err().to_string();
    assert!(err.contains("is gated") && err.contains("accept its licence") && err.contains("hf auth login"), "{err}");
    assert!(err.contains(&format!("{}/{REPO}", server.endpoint())), "{err}");
    assert!(server.requests().iter().all(|r| !r.contains("/resolve/")), "refused before asking for a file");
    config.token = Some("hf_not_allowed".into());
    let err = fetch(&config).unwrap_err().to_string();
    assert!(err.contains("not in the authorized list") && !err.contains("hf_not_allowed"), "{err}");
    server.allow_token("hf_allowed");
    config.token = Some("hf_allowed".into());
    fetch(&config).unwrap();
    // The weights came from the CDN the Hub redirects to (the token stays with the Hub: client.rs's same_origin).
    assert!(server.requests().iter().any(|r| r.contains("/repos/")), "{:#?}", server.requests());
}

#[test]
fn offline_reads_the_cache_alone_and_unknown_repos_are_named() {
    let repo = tiny_sharded_repo(REPO);
    let server = HubServer::start(vec![repo.clone()]);
    let cache = tempfile::tempdir().unwrap();
    let offline = HubConfig { offline: true, ..config(&server, cache.path()) };
    let err = fetch(&offline).unwrap_err().to_string();
    assert!(err.contains("HF_HUB_OFFLINE") && err.contains("not in the Hub cache"), "{err}");
    let online = fetch(&config(&server, cache.path())).unwrap();
    let before = server.requests().len();
    let snapshot = fetch(&offline).unwrap();
    assert_eq!((snapshot.dir, snapshot.commit), (online.dir, repo.commit));
    assert_eq!(server.requests().len(), before, "offline asks nothing of the Hub");
    let err = fetch_snapshot(&config(&server, cache.path()), "nobody/nothing", "main", &mut |_| {}).unwrap_err();
    assert!(matches!(err, HubError::RepoNotFound { .. }), "{err}");
    let err = fetch_snapshot(&config(&server, cache.path()), REPO, "no-such-branch", &mut |_| {}).unwrap_err();
    assert!(matches!(err, HubError::RevisionNotFound { .. }), "{err}");
}
