//! Records the git commit herd is built from, for run manifests.
use std::process::Command;

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for watched in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        let path = root.join(watched);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if let Some(commit) = commit {
        println!("cargo:rustc-env=HERD_GIT_COMMIT={commit}");
    }
}
