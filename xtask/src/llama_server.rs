//! `cargo xtask llama-server`: makes the Python environment with llama.cpp's OpenAI-compatible server
//! (`llama-cpp-python[server]`) that the openai backend's tests and `bench openai` serve the default
//! model with. It lives in the herd cache, so it is built once per machine.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The version the tests were written against; its server returns chat `top_logprobs`.
const PACKAGE: &str = "llama-cpp-python[server]==0.3.36";

/// llama.cpp's AMX kernels crash in sandboxes that do not grant AMX state, and a native build would
/// not run on another CPU of the same cache.
const CMAKE_ARGS: &str = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF";

pub fn venv_dir() -> PathBuf {
    herd_cache_dir().join("venvs/llama-server")
}

/// herd_infer::herd_cache_dir's rule, restated so that xtask builds without candle.
fn herd_cache_dir() -> PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HERD_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("herd")))
        .unwrap_or_else(|| var("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache/herd"))
}

/// `cargo xtask bench openai`: makes sure the server is installed, writes the conformity prompts and runs
/// herd-infer's `bench_openai` example (release) on them.
pub fn bench() -> Result<()> {
    install()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let prompts = Command::new(&cargo)
        .args(["run", "--quiet", "-p", "herd-cli", "--", "prompts", "--experiment", "data/experiments/conformity.toml", "--family", "group_size", "--modality", "text", "--limit", "48", "--jsonl"])
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
    let status = Command::new(&cargo).args(["run", "--quiet", "--release", "-p", "herd-infer", "--example", "bench_openai", "--"]).arg(&file).status()?;
    if !status.success() {
        bail!("the openai benchmark failed");
    }
    Ok(())
}

/// Records the build flags beside the environment: one built with other flags (AMX on, say) is rebuilt.
fn marker(venv: &Path) -> PathBuf {
    venv.join("herd-build-flags.txt")
}

fn works(venv: &Path) -> bool {
    let imports = Command::new(venv.join("bin/python")).args(["-c", "import llama_cpp.server, uvicorn, fastapi"]).output().is_ok_and(|o| o.status.success());
    imports && std::fs::read_to_string(marker(venv)).is_ok_and(|flags| flags == CMAKE_ARGS)
}

pub fn install() -> Result<()> {
    let venv = venv_dir();
    let python = venv.join("bin/python");
    if works(&venv) {
        println!("llama.cpp server ready: {}", python.display());
        return Ok(());
    }
    if !python.is_file() {
        let status = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().context("running python3 -m venv")?;
        if !status.success() {
            bail!("python3 -m venv {} failed (on Debian: apt-get install python3-venv)", venv.display());
        }
    }
    println!("building {PACKAGE} into {} (compiles llama.cpp: about 15 minutes on 2 cores the first time)", venv.display());
    // pip's wheel cache does not know the flags a cached wheel was built with: build afresh.
    let status = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--no-cache-dir", "--force-reinstall", PACKAGE])
        .env("CMAKE_ARGS", CMAKE_ARGS)
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("installing {PACKAGE} into {} failed; see pip's output above", venv.display());
    }
    std::fs::write(marker(&venv), CMAKE_ARGS).with_context(|| format!("writing {}", marker(&venv).display()))?;
    if !works(&venv) {
        bail!("{PACKAGE} installed into {} but `import llama_cpp.server` fails", venv.display());
    }
    println!("llama.cpp server ready: {}", python.display());
    Ok(())
}
