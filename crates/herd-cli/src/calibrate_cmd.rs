//! `herd calibrate`: how often each headline verdict comes out on an experiment's design when the
//! answers come from a simulated agent whose effects are known. Each replication runs the whole design
//! in memory with the agent (its seed advanced by the replication's number, so replications differ and
//! a rerun repeats them), analyses it as `herd report` would and judges every claim; the table counts
//! the verdicts per claim, each rate with its 95% Wilson interval (herd-analysis's `calibration`).
//! With an agent that has the papers' effects, "replicates" is the rule's power; with an agent that has
//! none, "replicates" on an effect claim is its false-verdict rate. `--model` names the model the answers
//! are stored under, for the claims about one named model (the paper's exception).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use herd_analysis::calibration::{Calibration, VERDICTS};
use herd_analysis::io::{conformity_from_rows, dyads_from_rows};
use herd_analysis::results::{RunFolder, conformity_in_memory, minimal_group_in_memory};
use herd_analysis::{BootstrapPlan, MinimalGroupOptions, Results, compare_headlines, paper_headlines};
use herd_backend::{SimAgent, SimParams};
use herd_design::{Experiment, ExperimentFile, load_experiment};
use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
use herd_store::{Manifest, RunIdentity};
use indicatif::{ProgressBar, ProgressStyle};

/// The agents calibrated against when no `--agent` is given.
const SHIPPED_AGENTS: [&str; 2] = ["data/sim/paper-effects.toml", "data/sim/null.toml"];

#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Experiment file (TOML) whose design is replicated, e.g. data/experiments/minimal-group.toml.
    #[arg(long)]
    experiment: PathBuf,
    /// A simulated agent (a `herd run --sim` file); repeat for several. Default: the shipped agents,
    /// data/sim/paper-effects.toml (the papers' headline effects at their magnitudes) and data/sim/null.toml (none).
    #[arg(long = "agent", value_name = "SIM_FILE")]
    agents: Vec<PathBuf>,
    /// Replications of the design per agent.
    #[arg(long, default_value_t = 20)]
    replications: u32,
    /// The model id the agent's answers are stored under. A claim about one named model (the paper's
    /// exception, R1-Distill-Llama-8B: the majority reversal and the paraphrase's hidden floor) is judged
    /// only on a model of that name, so its power needs an agent named as that model, e.g.
    /// `--model deepseek-ai/DeepSeek-R1-Distill-Llama-8B --agent data/sim/exception-model.toml`.
    #[arg(long, default_value = "sim")]
    model: String,
    /// Seed-bootstrap resamples per minimal-group cell in each replication. Without --gee-bootstrap the
    /// claims read the bootstrap only for its count, so a few suffice; with it, the resamples set
    /// bootstrap_se_agreement's Monte Carlo tolerance, so give what your analysis uses.
    #[arg(long, default_value_t = 20)]
    resamples: usize,
    /// Refit each visible cell's GEE on every resample, as `herd analyze` does, so that
    /// bootstrap_se_agreement is judged (without it that claim is "not in this run"). One refit per
    /// resample and cell makes each replication many times slower.
    #[arg(long)]
    gee_bootstrap: bool,
    /// Also write the table as CSV: agent, claim, study, verdict, count, replications, rate, ci_low,
    /// ci_high, seconds, model.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One agent's calibration and what it took.
struct AgentCalibration {
    agent: PathBuf,
    calibration: Calibration,
    seconds: f64,
}

pub fn run(args: CalibrateArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    if args.replications == 0 {
        bail!("--replications must be at least 1");
    }
    if args.model.trim().is_empty() || args.model.trim() != args.model {
        bail!(
            "--model {:?}: a model id is a name without surrounding spaces, e.g. \
             deepseek-ai/DeepSeek-R1-Distill-Llama-8B (leave --model out to store the answers as `sim`)",
            args.model
        );
    }
    let agents: Vec<PathBuf> =
        if args.agents.is_empty() { SHIPPED_AGENTS.iter().map(PathBuf::from).collect() } else { args.agents.clone() };
    // Every agent file is read and checked before the first replication runs.
    let params: Vec<SimParams> =
        agents.iter().map(|agent| crate::run_cmd::read_sim_params(Some(agent))).collect::<Result<_>>()?;
    let study = match file.experiment {
        Experiment::Conformity(_) => "conformity",
        Experiment::MinimalGroup(_) => "minimal_group",
    };
    let order: Vec<String> = paper_headlines()?.into_iter().map(|h| h.id).collect();
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    let mut done = Vec::new();
    for (agent, params) in agents.iter().zip(params) {
        let started = Instant::now();
        let plan = Plan {
            replications: args.replications,
            resamples: args.resamples,
            gee_bootstrap: args.gee_bootstrap,
            model: &args.model,
        };
        let mut calibration = calibrate(&file, &params, &plan, agent)?.ordered_as(&order);
        // The other study's claims are never in a replication of this one.
        calibration.claims.retain(|(_, counts)| counts.study == study);
        let seconds = started.elapsed().as_secs_f64();
        print_table(&file, agent, &args.model, &calibration, args.replications, seconds);
        done.push(AgentCalibration { agent: agent.clone(), calibration, seconds });
    }
    if let Some(out) = &args.out {
        write_csv(out, &done, &args.model)?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

/// What each agent's calibration runs.
struct Plan<'a> {
    replications: u32,
    resamples: usize,
    /// Whether the GEE fits are refitted on each resample (`bootstrap_se_agreement`).
    gee_bootstrap: bool,
    /// The model id the rows carry.
    model: &'a str,
}

/// The run folder a replication stands for: the manifest facts the claims read (the experiment's
/// parameters: lead measure, source-strength classes, pool).
fn memory_run(file: &ExperimentFile, model: &str) -> RunFolder {
    let meta = file.experiment.meta();
    let identity = RunIdentity {
        experiment: meta.name.clone(),
        study: meta.study.as_str().into(),
        experiment_sha256: file.sha256.clone(),
        model: model.into(),
        backend: "sim".into(),
        shard: "all".into(),
    };
    let manifest = Manifest { parameters: herd_runner::run_parameters(file), ..Manifest::new(identity) };
    RunFolder { path: PathBuf::from("(in memory)"), manifest }
}

/// One replication: the design run by the agent with `seed`, its rows stored under `plan.model`,
/// analysed and judged.
fn replication(file: &ExperimentFile, params: &SimParams, seed: u64, plan: &Plan<'_>) -> Result<Results> {
    let params = SimParams { seed, ..params.clone() };
    let mut sink = MemorySink::default();
    run_experiment(file, Respondent::Sim(&mut SimAgent::new(params)), &mut sink, &RunOptions::default())?;
    for row in &mut sink.rows.conformity {
        row.model = plan.model.to_owned();
    }
    for row in &mut sink.rows.dyads {
        row.model = plan.model.to_owned();
    }
    let resamples = plan.resamples;
    let origin = format!("replication with sim seed {seed}");
    let run = memory_run(file, plan.model);
    let (mut conformity, mut minimal_group) = (None, None);
    match &file.experiment {
        Experiment::Conformity(_) => {
            let trials = conformity_from_rows(&origin, &sink.rows.conformity)?;
            conformity = Some(conformity_in_memory(vec![run], trials)?);
        }
        Experiment::MinimalGroup(e) => {
            let dyads = dyads_from_rows(&origin, &sink.rows.dyads)?;
            let options = MinimalGroupOptions {
                pool: f64::from(e.society.pool),
                bootstrap: BootstrapPlan::Seeded { resamples, seed: herd_analysis::study::BOOTSTRAP_SEED },
                gee_bootstrap: plan.gee_bootstrap,
                ..MinimalGroupOptions::default()
            };
            minimal_group = Some(minimal_group_in_memory(vec![run], dyads, &options)?);
        }
    }
    Ok(Results {
        source: PathBuf::from(origin),
        conformity,
        minimal_group,
        empty_runs: Vec::new(),
        plain_tables: Vec::new(),
    })
}

/// `replications` replications of `file` by the agent, spread over the machine's cores; replication r
/// draws with the sim seed `params.seed + r`, so the table does not depend on the number of cores.
fn calibrate(file: &ExperimentFile, params: &SimParams, plan: &Plan<'_>, agent: &Path) -> Result<Calibration> {
    let replications = plan.replications;
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(replications as usize).max(1);
    let on_terminal = std::io::stderr().is_terminal();
    let bar = if on_terminal {
        ProgressBar::new(u64::from(replications)).with_style(
            ProgressStyle::with_template("{msg} [{bar:32}] {pos}/{len} replications  ETA {eta}")
                .expect("valid template"),
        )
    } else {
        ProgressBar::hidden()
    };
    bar.set_message(format!("calibrating {}", agent.display()));
    let started = Instant::now();
    let (next, finished, tenths_said) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0));
    let results: Vec<Result<Calibration>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> Result<Calibration> {
                    let mut calibration = Calibration::default();
                    loop {
                        let r = next.fetch_add(1, Ordering::Relaxed);
                        if r >= replications {
                            return Ok(calibration);
                        }
                        let seed = params.seed.wrapping_add(u64::from(r));
                        let results = replication(file, params, seed, plan)
                            .with_context(|| format!("replication {r} (sim seed {seed}) of {}", agent.display()))?;
                        calibration.add(&compare_headlines(&results)?);
                        bar.inc(1);
                        let k = finished.fetch_add(1, Ordering::Relaxed) + 1;
                        // Without a terminal (a log, a batch job), a line per tenth of the replications.
                        let tenths = k * 10 / replications;
                        if !on_terminal && tenths > tenths_said.fetch_max(tenths, Ordering::Relaxed) {
                            eprintln!(
                                "[{:>7.1} s] {}: {k}/{replications} replications",
                                started.elapsed().as_secs_f64(),
                                agent.display()
                            );
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("a calibration worker panicked"))).collect()
    });
    bar.finish_and_clear();
    let mut total = Calibration::default();
    for part in results {
        total.merge(part?);
    }
    Ok(total)
}

fn verdict_header(verdict: herd_analysis::Verdict) -> &'static str {
    match verdict {
        herd_analysis::Verdict::NotPaperPopulation => "not the population",
        other => other.text(),
    }
}

/// The agent's table: per claim, each verdict's share of the replications and its 95% Wilson interval.
fn print_table(
    file: &ExperimentFile,
    agent: &Path,
    model: &str,
    calibration: &Calibration,
    replications: u32,
    seconds: f64,
) {
    let named = if model == "sim" { String::new() } else { format!(" as model {model}") };
    println!(
        "\nagent {}{named}: {replications} replications of {} ({:.1} s, {:.2} s each); share of replications with \
         each verdict [95% Wilson interval]",
        agent.display(),
        file.path.display(),
        seconds,
        seconds / f64::from(replications)
    );
    let mut header = format!("{:<26}", "claim");
    for verdict in VERDICTS {
        header.push_str(&format!("  {:<19}", verdict_header(verdict)));
    }
    println!("{}", header.trim_end());
    for (id, counts) in &calibration.claims {
        let mut line = format!("{id:<26}");
        for verdict in VERDICTS {
            let (rate, (low, high)) = counts.rate(verdict);
            let cell = if counts.count(verdict) == 0 {
                format!("0 [0, {high:.2}]")
            } else {
                format!("{rate:.2} [{low:.2}, {high:.2}]")
            };
            line.push_str(&format!("  {cell:<19}"));
        }
        println!("{}", line.trim_end());
    }
}

/// The table as CSV; `model` (the id the answers were stored under) is the last column, so a reader of
/// the first ten keeps working.
fn write_csv(out: &Path, done: &[AgentCalibration], model: &str) -> Result<()> {
    let mut text = String::from("agent,claim,study,verdict,count,replications,rate,ci_low,ci_high,seconds,model\n");
    for a in done {
        for (id, counts) in &a.calibration.claims {
            for verdict in VERDICTS {
                let (rate, (low, high)) = counts.rate(verdict);
                text.push_str(&format!(
                    "{},{id},{},{},{},{},{rate},{low},{high},{:.3},{}\n",
                    csv_field(&a.agent.display().to_string()),
                    counts.study,
                    csv_field(verdict.text()),
                    counts.count(verdict),
                    counts.replications(),
                    a.seconds,
                    csv_field(model)
                ));
            }
        }
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))
}

/// A CSV field, quoted where it holds a comma, quote or newline.
fn csv_field(value: &str) -> String {
    if value.contains([',', '"', '\n']) { format!("\"{}\"", value.replace('"', "\"\"")) } else { value.to_owned() }
}
