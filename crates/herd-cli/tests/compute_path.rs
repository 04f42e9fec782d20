//! `herd run --weights` on the real default model (SmolLM2-135M, fetched by `cargo xtask test`): the
//! manifest names the compute path, and a session that would compute another way is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Group size on the lines task, N ∈ {0, 5}: a few seconds of scoring. SmolLM2's registry entry runs
/// it on unfiltered pools (it answers A whatever the image shows).
fn experiment(dir: &Path) -> PathBuf {
    let banks = root().join("data/banks");
    let text = format!(
        r#"
[experiment]
name = "compute-path"
study = "conformity"
seed = 5
[prompts]
bank = "{banks}/conformity-prompts.toml"
[stimuli]
tasks = ["lines"]
general_pool_size = 2
[trials]
n_values = [0, 5]
trials_per_n = 2
[families.group_size]
"#,
        banks = banks.display()
    );
    let path = dir.join("compute-path.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn herd_run(experiment: &Path, out: &Path, weights: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["run", "--model", herd_backend::DEFAULT_MODEL, "--quiet", "--weights", weights])
        .arg("--experiment")
        .arg(experiment)
        .arg("--out")
        .arg(out)
        .current_dir(root())
        .output()
        .unwrap()
}

#[test]
fn the_manifest_names_the_compute_path_and_a_session_computing_otherwise_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path());
    let out = dir.path().join("run");
    let first = herd_run(&file, &out, "exact");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let manifest = herd_store::read_run_manifest(&out).unwrap();
    let compute = manifest.compute.expect("the manifest records the compute path");
    let active = herd_kernels::CpuPath::active().unwrap();
    assert_eq!(compute["device"], "cpu");
    assert_eq!(compute["isa"], active.name());
    assert_eq!(compute["weights"], "f32", "--weights exact dequantises the GGUF: {compute}");
    assert_eq!(compute["weights_from"], "gguf");
    assert_eq!(compute["herd_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest.sessions[0].compute.as_ref(), Some(&compute));
    assert_eq!(manifest.model["backend"]["compute"], compute, "the backend record carries it too");

    let second = herd_run(&file, &out, "int8");
    assert!(!second.status.success(), "resuming with other weights must fail");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("weights: f32 → int8") && stderr.contains("fix:") && !stderr.contains("panicked"),
        "{stderr}"
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["run", "--model", herd_backend::DEFAULT_MODEL, "--weights", "fp8", "--out"])
        .arg(dir.path().join("other"))
        .arg("--experiment")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("auto, exact, int8"), "{stderr}");
}
