//! `herd expand`: the validator. It reads the experiment file and its banks and builds every unit's
//! prompt text as `herd prompts` and `herd run` would, so a file it passes is one they accept.

use anyhow::{Context, Result};
use herd_design::{Answer, Experiment, ExperimentFile, Shard, Unit, UnitPlan, expand, family_names, load_experiment};
use herd_prompts::{AllocationBank, ConformityPrompter, GroupNames, allocation_prompts, draw_society};
use herd_runner::RunOptions;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ExpandArgs {
    /// Experiment file (TOML), e.g. data/experiments/conformity.quick.toml.
    #[arg(long)]
    experiment: PathBuf,
    /// Only the units of shard k of n (e.g. 2/8); every unit belongs to exactly one shard.
    #[arg(long, default_value = "1/1")]
    shard: Shard,
    /// Print every unit as one JSON line instead of the summary.
    #[arg(long)]
    jsonl: bool,
    /// Model alias from the registry: also count the units this model runs (a model without a thinking
    /// mode skips reasoning=on cells by design), which is what a run of it costs.
    #[arg(long, value_name = "ALIAS")]
    model: Option<String>,
    /// Model registry file for --model (default: $HERD_MODELS, else data/models.toml, else the built-in copy).
    #[arg(long, requires = "model")]
    registry: Option<PathBuf>,
}

pub fn run(args: ExpandArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    let all = expand(&file.experiment);
    let prompts = check_prompts(&file, &all)?;
    let units: Vec<Unit> = all.into_iter().filter(|u| args.shard.contains(u)).collect();
    if args.jsonl {
        for unit in &units {
            println!("{}", serde_json::json!({ "id": unit.key.id(), "unit": unit }));
        }
        return Ok(());
    }
    let meta = file.experiment.meta();
    println!("{} ({}), seed {}, sha256 {}", meta.name, meta.study.as_str(), meta.seed, &file.sha256[..16]);
    println!("shard {}: {} units", args.shard, units.len());
    if let Some(alias) = &args.model {
        let registry = crate::model_cmd::load_registry(args.registry.as_deref())?;
        let options = RunOptions::for_model(Some(crate::model_cmd::model_entry(&registry, alias)?), false);
        let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
        for reason in units.iter().filter_map(|u| options.skipped_by_design(u)) {
            *skipped.entry(reason).or_default() += 1;
        }
        let runs = units.len() - skipped.values().sum::<usize>();
        let why: Vec<String> = skipped.iter().map(|(reason, n)| format!("; {n} skipped by design: {reason}")).collect();
        println!("model {alias} runs {runs} of them{}", why.concat());
    }
    let mut per_family: BTreeMap<&str, (usize, std::collections::BTreeSet<String>)> = BTreeMap::new();
    for unit in &units {
        let entry = per_family.entry(unit.key.cell.family.as_str()).or_default();
        entry.0 += 1;
        entry.1.insert(unit.key.cell.id());
    }
    for family in family_names(&file.experiment) {
        match per_family.get(family) {
            Some((count, cells)) => println!("  {family:<16} {:>6} cells {count:>8} units", cells.len()),
            None if family == "performance" => {
                println!("  {family:<16} derived from the difficulty family's N = 0 trials")
            }
            None => println!("  {family:<16} no units in this shard"),
        }
    }
    println!(
        "prompts: {prompts} built from the banks without an error (every unit, as `herd prompts` and `herd run` build them)"
    );
    if let Experiment::Conformity(exp) = &file.experiment
        && let Some(s) = &exp.families.source_strength
    {
        let unclassed: Vec<&str> = s.roles.iter().map(String::as_str).filter(|r| s.class_of(r).is_none()).collect();
        if !unclassed.is_empty() {
            println!(
                "note: source roles without a class ({}): the source-strength headline leaves them out; class them \
                 with `classes = {{ {} = \"authority\" }}` (or \"low_status\", \"neutral\") in [families.source_strength]",
                unclassed.join(", "),
                toml_key(unclassed[0])
            );
        }
    }
    Ok(())
}

/// A role as a TOML key (quoted when it has spaces or other characters a bare key cannot hold).
fn toml_key(role: &str) -> String {
    if role.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        role.to_owned()
    } else {
        format!("{role:?}")
    }
}

/// Loads the experiment's banks and builds every unit's prompt text, as the runner does before it asks a
/// model: a bank missing a wording, a group-name pair of one name twice, an instrument the bank lacks
/// or a template with an unknown placeholder is an error here, not after a model has loaded. Returns
/// how many prompts were built.
pub fn check_prompts(file: &ExperimentFile, units: &[Unit]) -> Result<usize> {
    let mut built = 0;
    match &file.experiment {
        Experiment::Conformity(exp) => {
            let prompter = ConformityPrompter::load(file, exp)?;
            for unit in units {
                let UnitPlan::Conformity(trial) = &unit.plan else { continue };
                // The image's correct answer is drawn at run time; both give the same wording checks.
                let plan = prompter.plan(&unit.key, trial, Answer::A).with_context(|| unit.key.id())?;
                prompter.body(trial, &plan).with_context(|| unit.key.id())?;
                built += 1;
            }
        }
        Experiment::MinimalGroup(exp) => {
            let bank = AllocationBank::load(&file.resolve(&exp.prompts.bank))?;
            let names = GroupNames::load(&file.resolve(&exp.society.group_names))?;
            for unit in units {
                let UnitPlan::Society(run) = &unit.plan else { continue };
                let society = draw_society(exp, &unit.key, run, &names);
                built += allocation_prompts(exp, &bank, &society, &unit.key, run).with_context(|| unit.key.id())?.len();
            }
        }
    }
    Ok(built)
}
