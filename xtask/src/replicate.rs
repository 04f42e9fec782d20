//! `cargo xtask replicate`: both studies end to end with one model — fetch the model if needed, run each
//! study into a run folder (resuming what is there), analyse, and write the report (figures, HTML and
//! Markdown) with `herd report`.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

pub const USAGE: &str = "cargo xtask replicate [--profile quick|full] [--model ALIAS] [--backend candle|openai|sim] [--endpoint URL]… [--device DEVICE] [--out DIR]";

struct Options {
    profile: String,
    model: String,
    backend: String,
    /// Server URLs for the openai backend.
    endpoints: Vec<String>,
    device: String,
    out: PathBuf,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut options = Options { profile: "quick".into(), model: "smollm2-135m".into(), backend: "candle".into(), endpoints: Vec::new(), device: "cpu".into(), out: PathBuf::new() };
    let mut out = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let mut value = || rest.next().with_context(|| format!("{flag} needs a value\n\nusage: {USAGE}"));
        match flag.as_str() {
            "--profile" => options.profile = value()?.clone(),
            "--model" => options.model = value()?.clone(),
            "--backend" => options.backend = value()?.clone(),
            "--endpoint" => options.endpoints.push(value()?.clone()),
            "--device" => options.device = value()?.clone(),
            "--out" => out = Some(PathBuf::from(value()?)),
            other => bail!("unknown option `{other}`\n\nusage: {USAGE}"),
        }
    }
    if !["quick", "full"].contains(&options.profile.as_str()) {
        bail!("--profile {}: use quick (every family, minutes on a laptop) or full (the papers' grids)", options.profile);
    }
    if options.backend == "openai" && options.endpoints.is_empty() {
        bail!("--backend openai needs --endpoint URL (repeat it for several servers)\n\nusage: {USAGE}");
    }
    let who = if options.backend == "sim" { "sim" } else { options.model.as_str() };
    options.out = out.unwrap_or_else(|| PathBuf::from(format!("out/replicate-{}-{who}", options.profile)));
    Ok(options)
}

fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = command.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Builds the `herd` binary with the same profile and features as the test suite, so nothing is compiled
/// twice, and returns its path.
fn build_herd() -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo).args(["build", "--quiet", "--workspace", "--bins"]), "building herd")?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    Ok(target.join("debug").join(if cfg!(windows) { "herd.exe" } else { "herd" }))
}

pub fn replicate(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    let started = Instant::now();
    println!("== building herd");
    let herd = build_herd()?;
    if o.backend == "candle" {
        println!("== model {}", o.model);
        run(Command::new(&herd).args(["models", "--fetch", &o.model]), "making the model present")?;
    }
    let suffix = if o.profile == "quick" { ".quick" } else { "" };
    let mut sections = Vec::new();
    for (study, command, flag) in [("conformity", "conformity", "--trials"), ("minimal-group", "minimal-group", "--dyads")] {
        let experiment = format!("data/experiments/{study}{suffix}.toml");
        let run_dir = o.out.join("runs").join(study);
        let analysis_dir = o.out.join("analysis").join(study);
        println!("== {study}: {experiment} → {}", run_dir.display());
        let study_started = Instant::now();
        let (r, m, b, d) = (run_dir.to_str().context("UTF-8 path")?, o.model.as_str(), o.backend.as_str(), o.device.as_str());
        let mut herd_run = Command::new(&herd);
        herd_run.args(["run", "--experiment", &experiment, "--model", m, "--backend", b, "--device", d, "--out", r]);
        for endpoint in &o.endpoints {
            herd_run.args(["--endpoint", endpoint]);
        }
        run(&mut herd_run, &format!("herd run ({study})"))?;
        let a = analysis_dir.to_str().context("UTF-8 path")?;
        run(Command::new(&herd).args(["analyze", command, flag, r, "--out", a]), &format!("herd analyze {command}"))?;
        println!("   {study} took {:.0} s", study_started.elapsed().as_secs_f64());
        sections.push((study, run_dir, analysis_dir));
    }
    let report_dir = o.out.join("report");
    println!("== report: {}", report_dir.display());
    let (results, report) = (o.out.to_str().context("UTF-8 path")?, report_dir.to_str().context("UTF-8 path")?);
    run(Command::new(&herd).args(["report", "--results", results, "--out", report]), "herd report")?;
    println!("\n== done in {:.1} min", started.elapsed().as_secs_f64() / 60.0);
    for (study, run_dir, analysis_dir) in &sections {
        println!("{study:>14}: trial tables {}/*/*.parquet, manifest {}/manifest.json", run_dir.display(), run_dir.display());
        println!("{:>14}  analysis tables {}/*.csv|parquet", "", analysis_dir.display());
    }
    println!("{:>14}: {} (Markdown twin: report.md, figures in figures/)", "report", report_dir.join("report.html").display());
    Ok(())
}
