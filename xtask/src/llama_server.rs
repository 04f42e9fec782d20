//! `cargo xtask llama-server` and `cargo xtask bench openai`: llama.cpp's OpenAI-compatible server
//! (`llama-cpp-python[server]`), built once into the herd cache by `xtask/llama-server.sh` (which
//! `.ci/run` calls directly), serves the default model for the openai backend's tests and benchmarks.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Makes sure the environment exists (building it the first time) and returns its python.
pub fn python() -> Result<PathBuf> {
    let out = Command::new("bash")
        .arg("xtask/llama-server.sh")
        .stderr(Stdio::inherit())
        .output()
        .context("running xtask/llama-server.sh")?;
    if !out.status.success() {
        bail!("xtask/llama-server.sh failed; see its output above");
    }
    let stdout = String::from_utf8(out.stdout).context("xtask/llama-server.sh printed no UTF-8 path")?;
    let path = stdout
        .lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .context("xtask/llama-server.sh printed no python path")?;
    Ok(PathBuf::from(path))
}

pub fn install() -> Result<()> {
    println!("llama.cpp server ready: {}", python()?.display());
    Ok(())
}

/// `cargo xtask bench openai`: makes sure the server is installed, writes the conformity prompts and runs
/// herd-infer's `bench_openai` example (release) on them.
pub fn bench() -> Result<()> {
    install()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let prompts = Command::new(&cargo)
        .args([
            "run",
            "--quiet",
            "-p",
            "herd-cli",
            "--",
            "prompts",
            "--experiment",
            "data/experiments/conformity.toml",
            "--family",
            "group_size",
            "--modality",
            "text",
            "--limit",
            "48",
            "--jsonl",
        ])
        .output()
        .context("running herd prompts")?;
    if !prompts.status.success() {
        bail!("herd prompts failed: {}", String::from_utf8_lossy(&prompts.stderr));
    }
    let dir = Path::new("target/bench-openai");
    std::fs::create_dir_all(dir)?;
    let file = dir.join("prompts.jsonl");
    std::fs::write(&file, &prompts.stdout)?;
    println!("building the benchmark (release)…");
    let status = Command::new(&cargo)
        .args(["run", "--quiet", "--release", "-p", "herd-infer", "--example", "bench_openai", "--"])
        .arg(&file)
        .status()?;
    if !status.success() {
        bail!("the openai benchmark failed");
    }
    Ok(())
}
