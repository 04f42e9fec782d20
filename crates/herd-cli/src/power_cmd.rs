//! `herd power`: how likely an experiment is to detect an effect of a given size, by running it many times
//! with a simulated agent that has exactly that effect and counting how often the test of the report's
//! headline finds it. Minimal groups: the seed-level Wilcoxon of favouritism (all deciders) per cell, as
//! `herd analyze` computes it. Conformity: the group-size family's rise of p_wrong from the smallest to the
//! largest N, herd-analysis's [`group_size_rises`] and its two-sided Wilcoxon over trial pairs, the test of
//! the headline "p_wrong rises with N" (the paper draws the curves and gives no test of its own).

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use herd_analysis::io::{conformity_from_rows, dyads_from_rows};
use herd_analysis::{MinimalGroupOptions, group_size_rises, minimal_group_seed_tests};
use herd_backend::{SimAgent, SimParams};
use herd_design::{ConformityFamilies, Experiment, ExperimentFile, MAX_GRID_COUNT, load_experiment};
use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
use herd_stats::StatsError;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PowerArgs {
    /// Experiment file (TOML) whose design is simulated.
    #[arg(long)]
    experiment: PathBuf,
    /// The effect, as a sim parameter: `ingroup=0.3` (in-group log-weight of every decider),
    /// `ingroup_minority=…`, `ingroup_majority=…`, `per_log_wrong=…` (conformity slope on ln(1+N)),
    /// `noise=…` (the agent's noise sd), or any sim file key with its section, e.g.
    /// `conformity.intercept=-4`: the names of the `--sim` file (`herd run --help`). Repeat for several.
    /// An effect the counted test cannot see (a family level's shift, an allocation key for conformity) is
    /// refused: `herd calibrate` gives the rate at which such a claim replicates.
    #[arg(long = "effect", value_name = "NAME=VALUE", required = true)]
    effects: Vec<String>,
    /// Seeds per cell to evaluate. Minimal groups: societies per cell. Conformity: trials per task and N
    /// of the group-size family (even: half with A correct), whatever the file says; the other families
    /// are not simulated, as the test does not read them.
    #[arg(long, value_delimiter = ',', default_value = "6,10,20,30")]
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
        crate::sim_file::apply_effect(params, name.trim(), value)?;
        // Out of range, the agent's weights overflow (e^710 is infinite) and every allocation comes out
        // uniform, so the power printed would be that of no effect at all.
        if let Err(e) = params.validate() {
            bail!("--effect {effect}: {}", crate::sim_file::named_as_in_the_file(&e));
        }
    }
    Ok(())
}

/// The design simulated with `seeds` replicates per cell: every override of the seed count in the file
/// gives way to it, so the power printed is the power at that count.
fn with_seeds(file: &ExperimentFile, seeds: u32) -> Result<ExperimentFile> {
    if u64::from(seeds) > MAX_GRID_COUNT {
        bail!("--seeds {seeds} is more than the {MAX_GRID_COUNT} a design allows; use fewer seeds");
    }
    let mut file = file.clone();
    match &mut file.experiment {
        Experiment::MinimalGroup(e) => {
            e.design.seeds = seeds;
            for instrument in &mut e.instruments {
                instrument.seeds = None;
            }
        }
        Experiment::Conformity(e) => {
            if seeds % 2 == 1 {
                bail!(
                    "--seeds {seeds}: a conformity cell's trials are half with A correct and half with B, \
                     so use an even number"
                );
            }
            let Some(mut group_size) = e.families.group_size.take() else {
                bail!(
                    "{}: the conformity power analysis tests the rise of p_wrong with N in the group_size family, \
                     and the experiment has no [families.group_size]; add it",
                    file.path.display()
                );
            };
            group_size.trials_per_n = Some(seeds);
            // The test reads the group-size family alone; simulating the others would only cost time.
            e.families = ConformityFamilies { group_size: Some(group_size), ..ConformityFamilies::default() };
            e.trials.trials_per_n = seeds;
        }
    }
    Ok(file)
}

/// The test this power analysis counts, for the output's first line.
fn test_name(file: &ExperimentFile) -> &'static str {
    match file.experiment {
        Experiment::MinimalGroup(_) => "seed-level Wilcoxon of favouritism, all deciders",
        Experiment::Conformity(_) => {
            "two-sided Wilcoxon of p_wrong at the largest N − the smallest over trial pairs, group_size family \
             (the report's \"p_wrong rises with N\")"
        }
    }
}

/// The p-values of one replication's tests, labelled by the cell they test.
fn replication_tests(file: &ExperimentFile, params: SimParams) -> Result<Vec<(String, f64)>> {
    let mut sink = MemorySink::default();
    run_experiment(file, Respondent::Sim(&mut SimAgent::new(params)), &mut sink, &RunOptions::default())?;
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
        Experiment::Conformity(e) => {
            let trials = conformity_from_rows("simulation", &sink.rows.conformity)?;
            let rises = group_size_rises(&trials, e.analysis.measure);
            if rises.is_empty() {
                bail!(
                    "{}: the group_size family needs two or more values of N for its rise to be tested",
                    file.path.display()
                );
            }
            rises
                .iter()
                .map(|rise| {
                    let p = match rise.wilcoxon() {
                        Ok(w) => w.p_value,
                        // No trial pair differs: nothing is detected (the report calls it undefined).
                        Err(StatsError::AllZeroDifferences) => 1.0,
                        Err(e) => return Err(e).context(format!("Wilcoxon test of model {}", rise.model)),
                    };
                    Ok((format!("group_size rise, model={}", rise.model), p))
                })
                .collect()
        }
    }
}

/// Per tested cell: replications in which the test rejected at `alpha`, and replications.
type Detections = BTreeMap<String, (u32, u32)>;

/// Simulates `replications` runs of `file` at `seeds` seeds (replication r draws with the sim seed
/// `params.seed + r`) and counts the rejections; `done` is called after each replication.
fn power_at(
    file: &ExperimentFile,
    params: &SimParams,
    seeds: u32,
    replications: u32,
    alpha: f64,
    done: &mut dyn FnMut(),
) -> Result<Detections> {
    let design = with_seeds(file, seeds)?;
    let mut detected = Detections::new();
    for replication in 0..replications {
        let replication_params = SimParams { seed: params.seed.wrapping_add(u64::from(replication)), ..params.clone() };
        for (cell, p) in replication_tests(&design, replication_params)? {
            let entry = detected.entry(cell).or_default();
            entry.0 += u32::from(p < alpha);
            entry.1 += 1;
        }
        done();
    }
    Ok(detected)
}

/// Refuses an effect the counted test cannot see, so the power printed is never the power of the
/// agent's other effects: conformity's test reads the group-size family alone (no family levels, no
/// allocations), minimal groups' reads the allocations alone.
fn check_effects_simulated(file: &ExperimentFile, effects: &[String]) -> Result<()> {
    for effect in effects {
        let name = effect.split_once('=').map_or(effect.as_str(), |(n, _)| n.trim());
        let (section, key) = match name.split_once('.') {
            Some((section, key)) => (section, key),
            None if ["ingroup", "ingroup_minority", "ingroup_majority"].contains(&name) => ("allocation", name),
            None if name == "noise" => continue,
            None => ("conformity", name),
        };
        let unseen = match &file.experiment {
            Experiment::MinimalGroup(_) => (section == "conformity")
                .then(|| "the minimal-group test reads allocations; a conformity parameter does not change them".to_owned()),
            Experiment::Conformity(_) if section == "allocation" => {
                Some("the conformity test reads p_wrong; an allocation parameter does not change it".to_owned())
            }
            Experiment::Conformity(_)
                if key.starts_with("level_shift")
                    || key == "per_log_right"
                    || (key.starts_with("family_shift") && key != "family_shift.group_size") =>
            {
                Some(
                "the conformity power analysis simulates the group-size family alone (its test, p_wrong's rise with N), \
                 whose trials have no family level, no other family's shift and no dissenting reply"
                    .to_owned(),
                )
            }
            Experiment::Conformity(_) => None,
        };
        if let Some(why) = unseen {
            bail!(
                "--effect {effect}: {why}, so the power printed would be that of the agent's other effects\n  fix: \
                 for a condition's effect, run the design with that effect planted (`herd run --backend sim --sim \
                 FILE`) and use `herd calibrate --experiment FILE --agent SIM_FILE` for the rate at which its \
                 claim replicates"
            );
        }
    }
    Ok(())
}

pub fn run(args: PowerArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    check_effects_simulated(&file, &args.effects)?;
    let mut params = crate::run_cmd::read_sim_params(args.sim.as_deref())?;
    apply_effects(&mut params, &args.effects)?;
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        bail!("--alpha {} is not a significance level; use a number in (0, 1), e.g. 0.05", args.alpha);
    }
    if args.replications == 0 || args.seeds.contains(&0) {
        bail!("--replications and every --seeds value must be at least 1");
    }
    // Refuse a seed count the design cannot take before any simulation runs.
    for &seeds in &args.seeds {
        with_seeds(&file, seeds)?;
    }
    let bar = ProgressBar::new(u64::from(args.replications) * args.seeds.len() as u64).with_style(
        ProgressStyle::with_template("simulating [{bar:32}] {pos}/{len} replications  {per_sec}  ETA {eta}")
            .expect("valid template"),
    );
    println!("effect: {}  (test: {}; α = {})", args.effects.join(", "), test_name(&file), args.alpha);
    println!("{:>6}  {:>8}  cell", "seeds", "power");
    for &seeds in &args.seeds {
        let detected = power_at(&file, &params, seeds, args.replications, args.alpha, &mut || bar.inc(1))?;
        bar.suspend(|| {
            for (cell, (hits, total)) in &detected {
                println!("{seeds:>6}  {:>8.3}  {cell}", f64::from(*hits) / f64::from(*total));
            }
        });
    }
    bar.finish_and_clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick_conformity() -> ExperimentFile {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments/conformity.quick.toml");
        load_experiment(&path).unwrap()
    }

    fn sim(per_log_wrong: f64) -> SimParams {
        let mut params = SimParams::default();
        params.conformity.per_log_wrong = per_log_wrong;
        params
    }

    /// The rejection rate of the one tested cell (the sim model's rise).
    fn power(per_log_wrong: f64, seeds: u32, replications: u32) -> f64 {
        let detected =
            power_at(&quick_conformity(), &sim(per_log_wrong), seeds, replications, 0.05, &mut || {}).unwrap();
        assert_eq!(detected.len(), 1, "one model, one test: {detected:?}");
        let (hits, total) = detected.values().next().copied().unwrap();
        assert_eq!(total, replications);
        f64::from(hits) / f64::from(total)
    }

    #[test]
    fn conformity_simulates_the_seeds_it_is_given_in_the_group_size_family_alone() {
        // The quick file sets `families.group_size.trials_per_n = 8`; --seeds overrides it.
        let file = with_seeds(&quick_conformity(), 4).unwrap();
        let mut sink = MemorySink::default();
        run_experiment(&file, Respondent::Sim(&mut SimAgent::new(sim(1.0))), &mut sink, &RunOptions::default())
            .unwrap();
        let rows = &sink.rows.conformity;
        assert!(rows.iter().all(|r| r.family == "group_size"), "only the tested family runs");
        // 3 tasks × N ∈ {0, 2, 5, 10} × 4 trials.
        assert_eq!(rows.len(), 3 * 4 * 4);
        let trials = conformity_from_rows("t", rows).unwrap();
        let rises = group_size_rises(&trials, herd_analysis::PWrong::Full);
        assert_eq!(rises.len(), 1);
        assert_eq!((rises[0].n_low, rises[0].n_high, rises[0].differences.len()), (0, 10, 3 * 4));
    }

    #[test]
    fn conformity_power_rises_with_the_seeds() {
        let (few, many) = (power(0.3, 2, 40), power(0.3, 8, 40));
        assert!(few < many, "power at 2 seeds {few}, at 8 seeds {many}");
        assert!(many >= 0.8, "{many}");
    }

    #[test]
    fn conformity_without_an_effect_rejects_at_about_alpha() {
        let rate = power(0.0, 8, 200);
        assert!((0.01..=0.09).contains(&rate), "rejection rate {rate} at α = 0.05");
    }

    #[test]
    fn effects_out_of_range_are_refused_naming_the_effect_and_the_range() {
        for value in ["1000", "710", "nan", "inf", "-inf"] {
            let effect = format!("ingroup={value}");
            let err = apply_effects(&mut SimParams::default(), std::slice::from_ref(&effect)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("--effect {effect}"))
                    && err.contains("allocation.ingroup_minority")
                    && err.contains("[-50, 50]"),
                "{err}"
            );
        }
        let err = apply_effects(&mut SimParams::default(), &["noise=-1".into()]).unwrap_err().to_string();
        assert!(err.contains("--effect noise=-1") && err.contains("[0, 10]"), "{err}");
        let mut params = SimParams::default();
        apply_effects(&mut params, &["ingroup=50".into(), "per_log_wrong=-2".into()]).unwrap();
        assert_eq!((params.allocation.ingroup_majority, params.conformity.per_log_wrong), (50.0, -2.0));
    }

    #[test]
    fn an_effect_the_counted_test_cannot_see_is_refused() {
        let conformity = quick_conformity();
        for effect in [
            "conformity.level_shift.surgeons=0.5",
            "ingroup=0.3",
            "conformity.per_log_right=-1",
            "conformity.family_shift.spatial=0.4",
        ] {
            let err = check_effects_simulated(&conformity, &[effect.into()]).unwrap_err().to_string();
            assert!(err.contains(&format!("--effect {effect}")) && err.contains("herd calibrate"), "{err}");
        }
        let seen = [
            "per_log_wrong=0.3",
            "noise=0.2",
            "conformity.family_shift.group_size=0.2",
            "conformity.task_shift.dots=1",
        ];
        check_effects_simulated(&conformity, &seen.map(String::from)).unwrap();
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments/minimal-group.quick.toml");
        let minimal_group = load_experiment(&path).unwrap();
        let err = check_effects_simulated(&minimal_group, &["per_log_wrong=0.3".into()]).unwrap_err().to_string();
        assert!(err.contains("reads allocations"), "{err}");
        check_effects_simulated(&minimal_group, &["ingroup_minority=0.4".into(), "allocation.noise=0.3".into()])
            .unwrap();
    }

    #[test]
    fn a_seed_count_the_design_cannot_take_is_refused_by_name() {
        let err = with_seeds(&quick_conformity(), 5).map(drop).unwrap_err().to_string();
        assert!(err.contains("--seeds 5") && err.contains("even"), "{err}");
        let mut file = quick_conformity();
        if let Experiment::Conformity(e) = &mut file.experiment {
            e.families.group_size = None;
        }
        let err = with_seeds(&file, 4).map(drop).unwrap_err().to_string();
        assert!(err.contains("conformity.quick.toml") && err.contains("[families.group_size]"), "{err}");
    }
}
