//! `cargo xtask bench replicate`: the replication's studies timed on each CPU path this machine has
//! (forced with `HERD_CPU_PATH`), so that README's times are printed by a command, with the CPU named,
//! not retyped. With `--estimate`, a study's whole grid (the full profile: the papers' grids, hours
//! to days) is projected from a measured sample: one hash shard of its units (`herd run --shard`, a
//! random draw that keeps the units of one image or society together), run once for a single unit
//! (model load and set-up) and once for the sample, so that the fixed cost is not multiplied.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::readme_times::{self, duration};
use crate::replicate::{Study, build_herd, cpu_paths, fetch_models, jobs, profile_suffix, run_study};

/// `cargo xtask bench replicate`'s flags.
#[derive(clap::Args)]
pub struct BenchReplicateArgs {
    /// quick (what README's first command runs) or full (the papers' grids; use with --estimate)
    #[arg(long, value_name = "quick|full", default_value = "quick")]
    profile: String,
    /// Registry alias of a model; repeat it to time each model on both studies (default: each
    /// study on the model `cargo xtask replicate` gives it)
    #[arg(long = "model", value_name = "ALIAS")]
    models: Vec<String>,
    /// CPU path to time (repeat for several; default: the machine's own path and, where it has a
    /// faster one, avx2, the path of AVX2-only CPUs)
    #[arg(long = "path", value_name = "PATH")]
    paths: Vec<String>,
    /// Project each study's whole grid from a measured sample of its units instead of running it
    #[arg(long)]
    estimate: bool,
    /// With --estimate: units per study in the sample (default 240 conformity trials, 4 society passes)
    #[arg(long, value_name = "N")]
    sample: Option<u64>,
    /// Write each path's times into README.md's measured-times table (its row for this CPU, path and
    /// profile is replaced; other machines' rows stay)
    #[arg(long)]
    readme: bool,
}

/// One study timed on one path.
struct Timing {
    path: String,
    study: &'static str,
    model: String,
    /// Units the study ran (or, estimated, the grid's units).
    units: u64,
    minutes: f64,
    /// `--estimate`: the units measured and the minutes per unit they gave.
    sample: Option<(u64, f64)>,
}

pub fn run(args: BenchReplicateArgs) -> Result<()> {
    let BenchReplicateArgs { profile, models, paths, estimate, sample, readme } = args;
    if !["quick", "full"].contains(&profile.as_str()) {
        bail!("--profile {profile}: use quick (README's first command) or full (the papers' grids, with --estimate)");
    }
    if readme && !models.is_empty() {
        bail!("--readme with --model: README's table holds the default models' times; drop --model or --readme");
    }
    if sample == Some(0) {
        bail!("--sample 0: a sample needs at least one unit");
    }
    println!("== building herd (release, the build `cargo xtask replicate` uses)");
    let started = Instant::now();
    let herd = build_herd("cpu")?;
    let build_minutes = started.elapsed().as_secs_f64() / 60.0;
    let available = cpu_paths(&herd)?;
    let paths = chosen_paths(&available, paths)?;
    let jobs = jobs(&profile, &models);
    let started = Instant::now();
    fetch_models(&herd, jobs.iter().map(|(_, m)| m.as_str()).collect::<std::collections::BTreeSet<_>>())?;
    let fetch_minutes = started.elapsed().as_secs_f64() / 60.0;
    let root = PathBuf::from("target/bench-replicate").join(&profile);
    let mut timings = Vec::new();
    for path in &paths {
        for (study, model) in &jobs {
            let experiment = format!("data/experiments/{study}{}.toml", profile_suffix(&profile));
            let dir = root.join(path).join(format!("{study}-{model}"));
            if dir.exists() {
                std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
            }
            println!("== {study} · {model} on the {path} path ({experiment})");
            let env = [("HERD_CPU_PATH", path.as_str())];
            let total = plan_units(&herd, &experiment, model, "1/1")?;
            let timing = if estimate {
                let per_study = sample.unwrap_or(if *study == "conformity" { 240 } else { 4 });
                let job = Study { study, model, experiment: &experiment, run_dir: dir };
                estimate_study(&herd, &job, total, per_study, &env)?
            } else {
                let job = Study { study, model, experiment: &experiment, run_dir: dir.join("run") };
                let t = Instant::now();
                run_study(&herd, &job, "candle", "cpu", &[], &["--quiet"], &env)?;
                (t.elapsed().as_secs_f64() / 60.0, None)
            };
            let (minutes, sample) = timing;
            timings.push(Timing { path: path.clone(), study, model: model.clone(), units: total, minutes, sample });
        }
    }
    let cpu = cpu_name();
    print!("{}", table(&cpu, &profile, build_minutes, fetch_minutes, &timings));
    if readme {
        let mut text = std::fs::read_to_string("README.md").context("reading README.md")?;
        for row in readme_rows(&cpu, &profile, build_minutes, fetch_minutes, &timings) {
            text = readme_times::update(&text, &row)?;
        }
        std::fs::write("README.md", text).context("writing README.md")?;
        println!("   README.md's measured-times table updated");
    }
    Ok(())
}

/// README rows, one per path. A build or fetch under half a minute found herd built or the models
/// present: those cells keep what an earlier run measured.
fn readme_rows(
    cpu: &str,
    profile: &str,
    build_minutes: f64,
    fetch_minutes: f64,
    timings: &[Timing],
) -> Vec<readme_times::TimesRow> {
    let mut paths: Vec<&str> = timings.iter().map(|t| t.path.as_str()).collect();
    paths.dedup();
    let measured = |m: f64| (m >= 0.5).then_some(m);
    paths
        .into_iter()
        .enumerate()
        .map(|(i, path)| {
            let rows: Vec<&Timing> = timings.iter().filter(|t| t.path == path).collect();
            let study = |name: &str| {
                let t = rows.iter().find(|t| t.study == name)?;
                let how = if t.sample.is_some() { ", projected" } else { "" };
                Some(format!("{} ({}, {} units{how})", duration(t.minutes), t.model, t.units))
            };
            readme_times::TimesRow {
                cpu: cpu.into(),
                path: path.into(),
                profile: profile.into(),
                date: readme_times::today(),
                // The build and fetch happen once, before the first path.
                compile: if i == 0 { measured(build_minutes) } else { None },
                fetch: if i == 0 { measured(fetch_minutes) } else { None },
                conformity: study("conformity"),
                minimal_group: study("minimal-group"),
                total: rows.iter().map(|t| t.minutes).sum(),
            }
        })
        .collect()
}

/// The paths to time: the ones asked for (each must be the machine's), else its own and avx2.
fn chosen_paths(available: &[String], asked: Vec<String>) -> Result<Vec<String>> {
    if let Some(missing) = asked.iter().find(|p| !available.contains(p)) {
        bail!("--path {missing}: this machine runs {} (herd models --cpu-paths)", available.join(", "));
    }
    if !asked.is_empty() {
        return Ok(asked);
    }
    let mut paths: Vec<String> = available.first().cloned().into_iter().collect();
    if available.iter().any(|p| p == "avx2") && !paths.iter().any(|p| p == "avx2") {
        paths.push("avx2".into());
    }
    Ok(paths)
}

/// The units of `experiment`'s shard that `model` runs (`herd expand --model`: a model without a
/// thinking mode skips the reasoning=on cells by design, and they cost nothing).
pub(crate) fn plan_units(herd: &Path, experiment: &str, model: &str, shard: &str) -> Result<u64> {
    let out =
        Command::new(herd).args(["expand", "--experiment", experiment, "--shard", shard, "--model", model]).output()?;
    if !out.status.success() {
        bail!("herd expand --experiment {experiment} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    units_line(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("herd expand --experiment {experiment} printed no \"model … runs N of them\" line"))
}

fn units_line(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("model ")?.split_once(" runs ")?.1.split_once(" of them")?.0.trim().parse().ok())
        .next()
}

/// Runs one unit and then `sample` units of one non-empty shard sized for `sample` (each in its own
/// folder under `job.run_dir`), and projects the whole grid: fixed cost (the one-unit run less a
/// unit) + minutes per unit × `total`. Returns the projected minutes and (units measured, minutes per unit).
fn estimate_study(
    herd: &Path,
    job: &Study<'_>,
    total: u64,
    sample: u64,
    env: &[(&str, &str)],
) -> Result<(f64, Option<(u64, f64)>)> {
    let experiment = job.experiment;
    let count = (total / sample).max(1);
    // Shard groups are lumpy (a society's passes stay together): take the first shard holding a unit.
    let mut chosen = None;
    for index in 1..=count.min(64) {
        let shard = format!("{index}/{count}");
        let n = plan_units(herd, experiment, job.model, &shard)?;
        if n > 0 {
            chosen = Some((shard, n.min(sample)));
            break;
        }
    }
    let Some((shard, n)) = chosen else { bail!("no shard of {experiment} in 1..64/{count} holds a unit") };
    let timed = |limit: u64, name: &str| -> Result<f64> {
        let part = Study { run_dir: job.run_dir.join(name), ..*job };
        let limit = limit.to_string();
        let t = Instant::now();
        run_study(herd, &part, "candle", "cpu", &[], &["--quiet", "--shard", &shard, "--limit", &limit], env)?;
        Ok(t.elapsed().as_secs_f64() / 60.0)
    };
    println!("   one unit of shard {shard} (model load and set-up)");
    let one = timed(1, "one-unit")?;
    println!("   {n} units of shard {shard}");
    let sampled = timed(n, "sample")?;
    let per_unit = if n > 1 { ((sampled - one) / (n - 1) as f64).max(0.0) } else { sampled };
    let fixed = (one - per_unit).max(0.0);
    Ok((fixed + per_unit * total as f64, Some((n, per_unit))))
}

/// The machine's CPU as the kernel names it (`model name` in /proc/cpuinfo), with its core count.
pub(crate) fn cpu_name() -> String {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find_map(|l| Some(l.strip_prefix("model name")?.split_once(':')?.1.trim().to_owned())))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!("{name}, {cores} cores")
}

/// The result table, one line per path and study, and each path's total.
fn table(cpu: &str, profile: &str, build_minutes: f64, fetch_minutes: f64, timings: &[Timing]) -> String {
    let mut out = format!(
        "\n== cargo xtask bench replicate --profile {profile}: {cpu}\n   build {} (0 when herd was already built), model fetch {} (0 when present)\n",
        duration(build_minutes),
        duration(fetch_minutes)
    );
    out.push_str(&format!(
        "   {:<12} {:<14} {:<20} {:>8}  {:>10}  {}\n",
        "path", "study", "model", "units", "time", "measured"
    ));
    let mut paths: Vec<&str> = timings.iter().map(|t| t.path.as_str()).collect();
    paths.dedup();
    for path in paths {
        let rows: Vec<&Timing> = timings.iter().filter(|t| t.path == path).collect();
        for t in &rows {
            let measured = match t.sample {
                Some((n, per_unit)) => format!("projected from {n} units, {:.2} s a unit", per_unit * 60.0),
                None => "run".into(),
            };
            out.push_str(&format!(
                "   {:<12} {:<14} {:<20} {:>8}  {:>10}  {measured}\n",
                t.path,
                t.study,
                t.model,
                t.units,
                duration(t.minutes)
            ));
        }
        let sum: f64 = rows.iter().map(|t| t.minutes).sum();
        out.push_str(&format!("   {path:<12} {:<14} {:<20} {:>8}  {:>10}\n", "all studies", "", "", duration(sum)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_paths_are_the_machines_own_and_avx2() {
        let have = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let avx512 = have(&["avx512-vnni", "avx512", "avx-vnni", "avx2", "baseline"]);
        assert_eq!(chosen_paths(&avx512, vec![]).unwrap(), ["avx512-vnni", "avx2"]);
        assert_eq!(chosen_paths(&have(&["avx2", "baseline"]), vec![]).unwrap(), ["avx2"]);
        assert_eq!(chosen_paths(&avx512, vec!["baseline".into()]).unwrap(), ["baseline"]);
        let err = chosen_paths(&have(&["avx2", "baseline"]), vec!["avx512".into()]).unwrap_err().to_string();
        assert!(err.contains("--path avx512: this machine runs avx2, baseline"), "{err}");
    }

    #[test]
    fn expand_output_gives_the_units_the_model_runs() {
        let text = "minimal-group (minimal_group), seed 20250602, sha256 8fc2446f5f77af1b\nshard 1/270: 24 units\nmodel smollm2-135m runs 12 of them; 12 skipped by design: reasoning=on: no thinking mode\n  allocation  24 cells  24 units\n";
        assert_eq!(units_line(text), Some(12));
        assert_eq!(units_line("shard 1/1: 246 units\nmodel qwen2.5-coder-1.5b runs 246 of them\n"), Some(246));
        assert_eq!(units_line("no plan here"), None);
    }

    #[test]
    fn the_table_names_the_cpu_and_sums_each_path() {
        let t = |path: &str, study, minutes, sample| Timing {
            path: path.into(),
            study,
            model: "qwen2.5-coder-1.5b".into(),
            units: 474,
            minutes,
            sample,
        };
        let text = table(
            "Intel(R) Xeon(R) Processor, 2 cores",
            "quick",
            0.0,
            0.0,
            &[
                t("avx512-vnni", "conformity", 4.2, None),
                t("avx512-vnni", "minimal-group", 4.5, None),
                t("avx2", "conformity", 300.0, Some((240, 0.01))),
            ],
        );
        assert!(text.contains("--profile quick: Intel(R) Xeon(R) Processor, 2 cores"), "{text}");
        assert!(text.contains("avx512-vnni  all studies"), "{text}");
        assert!(text.contains("8.7 min"), "{text}");
        assert!(text.contains("5.0 h  projected from 240 units, 0.60 s a unit"), "{text}");
    }
}
