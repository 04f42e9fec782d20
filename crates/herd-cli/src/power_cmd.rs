//! `herd power`: how likely an experiment is to detect an effect of a given size, by running it many times
//! with a simulated agent that has exactly that effect and counting how often the paper's test finds it.

use anyhow::{Context, Result, bail};
use herd_analysis::io::dyads_from_rows;
use herd_analysis::{MinimalGroupOptions, minimal_group_seed_tests};
use herd_design::{Experiment, ExperimentFile, load_experiment};
use herd_infer::{SimAgent, SimParams};
use herd_runner::{MemorySink, RunOptions, run_experiment};
use herd_stats::{Formula, ols};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PowerArgs {
    /// Experiment file (TOML) whose design is simulated.
    #[arg(long)]
    experiment: PathBuf,
    /// The effect, as a sim parameter: `ingroup=0.3` (in-group log-weight of every decider),
    /// `ingroup_minority=…`, `ingroup_majority=…`, `per_log_wrong=…` (conformity slope on ln(1+N)),
    /// `noise=…` (the agent's noise sd). Repeat for several.
    #[arg(long = "effect", value_name = "NAME=VALUE", required = true)]
    effects: Vec<String>,
    /// Seeds per cell to evaluate: societies (minimal groups) or trials per N (conformity).
    #[arg(long, value_delimiter = ',', default_value = "5,10,20,30")]
    seeds: Vec<u32>,
    /// Simulated replications of the experiment per seed count.
    #[arg(long, default_value_t = 100)]
    replications: u32,
    /// Significance level of the test.
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Simulated agent parameters to start from (TOML, as `herd run --sim`).
    #[arg(long)]
    sim: Option<PathBuf>,
}

fn apply_effects(params: &mut SimParams, effects: &[String]) -> Result<()> {
    for effect in effects {
        let (name, value) =
            effect.split_once('=').with_context(|| format!("`{effect}`: write NAME=VALUE, e.g. ingroup=0.3"))?;
        let value: f64 = value.trim().parse().with_context(|| format!("`{effect}`: {value:?} is not a number"))?;
        match name.trim() {
            "ingroup" => {
                params.allocation.ingroup_minority = value;
                params.allocation.ingroup_majority = value;
            }
            "ingroup_minority" => params.allocation.ingroup_minority = value,
            "ingroup_majority" => params.allocation.ingroup_majority = value,
            "per_log_wrong" => params.conformity.per_log_wrong = value,
            "noise" => {
                params.allocation.noise_sd = value;
                params.conformity.noise_sd = value;
            }
            other => bail!(
                "unknown effect `{other}`; use ingroup, ingroup_minority, ingroup_majority, per_log_wrong or noise"
            ),
        }
    }
    Ok(())
}

/// The experiment with `seeds` replicates per cell.
fn with_seeds(file: &ExperimentFile, seeds: u32) -> ExperimentFile {
    let mut file = file.clone();
    match &mut file.experiment {
        Experiment::MinimalGroup(e) => {
            e.design.seeds = seeds;
            for instrument in &mut e.instruments {
                instrument.seeds = None;
            }
        }
        Experiment::Conformity(e) => e.trials.trials_per_n = seeds,
    }
    file
}

/// The p-values of one replication's tests, labelled by the cell they test.
fn replication_tests(file: &ExperimentFile, params: SimParams) -> Result<Vec<(String, f64)>> {
    let mut sink = MemorySink::default();
    run_experiment(file, &mut SimAgent::new(params), &mut sink, &RunOptions::default())?;
    match &file.experiment {
        Experiment::MinimalGroup(_) => {
            let dyads = dyads_from_rows("simulation", &sink.rows.dyads)?;
            let table = minimal_group_seed_tests(&dyads, &MinimalGroupOptions::default())?;
            Ok((0..table.n_rows())
                .filter(|&r| {
                    table.text("measure", r) == Some("favouritism") && table.text("deciders", r) == Some("all")
                })
                .map(|r| {
                    let cell = format!(
                        "labels={} m={} instrument={} reasoning={}",
                        table.text("labels", r).unwrap_or("?"),
                        table.number("m", r).unwrap_or(f64::NAN),
                        table.text("instrument", r).unwrap_or("-"),
                        table.text("reasoning", r).unwrap_or("-"),
                    );
                    (cell, table.number("wilcoxon_p", r).unwrap_or(1.0))
                })
                .collect())
        }
        Experiment::Conformity(_) => {
            let mut by_task: std::collections::BTreeMap<String, (Vec<f64>, Vec<f64>)> = Default::default();
            for row in sink.rows.conformity.iter().filter(|r| r.family == "group_size") {
                let entry = by_task.entry(row.task.clone()).or_default();
                entry.0.push(row.n as f64);
                entry.1.push(row.p_wrong_full);
            }
            if by_task.is_empty() {
                bail!(
                    "the conformity power analysis tests the p_wrong(N) slope of the group_size family; the experiment has none"
                );
            }
            let formula = Formula::parse("p ~ n")?;
            by_task
                .into_iter()
                .map(|(task, (n, p))| {
                    let (design, y) = formula.build(&[("p", p.as_slice()), ("n", n.as_slice())])?;
                    let fit = ols(&design, &y)?;
                    let slope = fit.coefficients.iter().find(|c| c.name == "n").context("slope term")?;
                    Ok((format!("group_size slope, task={task}"), slope.p_value))
                })
                .collect()
        }
    }
}

pub fn run(args: PowerArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    let mut params: SimParams = match &args.sim {
        Some(path) => {
            toml::from_str(&std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?)
                .with_context(|| format!("{}: not valid sim parameters", path.display()))?
        }
        None => SimParams::default(),
    };
    apply_effects(&mut params, &args.effects)?;
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        bail!("--alpha {} is not a significance level; use a number in (0, 1), e.g. 0.05", args.alpha);
    }
    if args.replications == 0 || args.seeds.contains(&0) {
        bail!("--replications and every --seeds value must be at least 1");
    }
    let bar = ProgressBar::new(u64::from(args.replications) * args.seeds.len() as u64).with_style(
        ProgressStyle::with_template("simulating [{bar:32}] {pos}/{len} replications  {per_sec}  ETA {eta}")
            .expect("valid template"),
    );
    println!(
        "effect: {}  (test: {}; α = {})",
        args.effects.join(", "),
        match file.experiment {
            Experiment::MinimalGroup(_) => "seed-level Wilcoxon of favouritism, all deciders",
            Experiment::Conformity(_) => "OLS slope of p_wrong on N, group_size family",
        },
        args.alpha
    );
    println!("{:>6}  {:>8}  cell", "seeds", "power");
    for &seeds in &args.seeds {
        let design = with_seeds(&file, seeds);
        let mut detected: std::collections::BTreeMap<String, (u32, u32)> = Default::default();
        for replication in 0..args.replications {
            let replication_params =
                SimParams { seed: params.seed.wrapping_add(u64::from(replication)), ..params.clone() };
            for (cell, p) in replication_tests(&design, replication_params)? {
                let entry = detected.entry(cell).or_default();
                entry.0 += u32::from(p < args.alpha);
                entry.1 += 1;
            }
            bar.inc(1);
        }
        bar.suspend(|| {
            for (cell, (hits, total)) in &detected {
                println!("{seeds:>6}  {:>8.3}  {cell}", f64::from(*hits) / f64::from(*total));
            }
        });
    }
    bar.finish_and_clear();
    Ok(())
}
