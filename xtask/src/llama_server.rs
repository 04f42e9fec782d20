//! `cargo xtask llama-server` and `cargo xtask bench openai`: llama.cpp's OpenAI-compatible server
//! (`llama-cpp-python[server]`), built once into the herd cache by `xtask/llama-server.sh` (which
//! `.ci/run` calls directly), serves the default model for the openai backend's tests and benchmarks.
//! llama.cpp's own `llama-server` with several slots, which `cargo xtask bench serve` drives, is built
//! once by `xtask/llama-cpp-server.sh`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Makes sure the environment exists (building it the first time) and returns its python.
pub fn python() -> Result<PathBuf> {
    built_by("xtask/llama-server.sh")
}

/// Makes sure llama.cpp's `llama-server` is built (the first time: about 10 minutes on 2 cores) and
/// returns its path.
pub fn cpp_server() -> Result<PathBuf> {
    built_by("xtask/llama-cpp-server.sh")
}

/// Runs a build script that prints what it made (or found made) as its last line.
fn built_by(script: &str) -> Result<PathBuf> {
    let out = Command::new("bash")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {script}"))?;
    if !out.status.success() {
        bail!("{script} failed; see its output above");
    }
    let stdout = String::from_utf8(out.stdout).with_context(|| format!("{script} printed no UTF-8 path"))?;
    let path = stdout
        .lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .with_context(|| format!("{script} printed no path"))?;
    Ok(PathBuf::from(path))
}

/// The GGUF file of registry model `alias`, fetched (SHA-256 checked) by `herd models --fetch`.
pub fn gguf(herd: &Path, alias: &str) -> Result<PathBuf> {
    let out = Command::new(herd).args(["models", "--fetch", alias]).output().context("running herd models --fetch")?;
    if !out.status.success() {
        bail!("herd models --fetch {alias} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_once(": ")
        .map(|(_, p)| PathBuf::from(p.trim()))
        .context("herd models --fetch printed no path")
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
