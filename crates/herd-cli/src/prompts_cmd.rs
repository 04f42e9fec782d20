use anyhow::{Context, Result, bail};
use herd_design::{Experiment, Task, UnitPlan, expand, family_names, load_experiment};
use herd_prompts::{AllocationBank, ConformityPrompter, GroupNames, Modality, allocation_prompts, draw_society};
use herd_stimuli::ImagePools;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PromptsArgs {
    /// Experiment file (TOML), e.g. data/experiments/conformity.quick.toml.
    #[arg(long)]
    experiment: PathBuf,
    /// Only this family (conformity: group_size, unanimity, difficulty, normative, source_strength,
    /// nationality, ethnicity, minimal_group, spatial, temporal; minimal groups: allocation).
    #[arg(long)]
    family: Option<String>,
    /// Only this level of the conformity family (e.g. a source role: `--family source_strength --level surgeons`).
    #[arg(long, requires = "family")]
    level: Option<String>,
    /// How many prompts to print.
    #[arg(long, default_value_t = 3)]
    limit: usize,
    /// Skip units with N = 0 (the plain baseline prompt, the same in every family).
    #[arg(long)]
    with_confederates: bool,
    /// vision: the image is attached; text: the stimulus's text rendering stands in for it.
    #[arg(long, default_value = "vision")]
    modality: Modality,
    /// Print one JSON object per prompt (unit id, image or decider, the chat messages) instead of text.
    #[arg(long)]
    jsonl: bool,
}

pub fn run(args: PromptsArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    let families = family_names(&file.experiment);
    if let Some(family) = &args.family
        && !families.contains(&family.as_str())
    {
        let hint = herd_design::did_you_mean(family, families.iter().copied());
        bail!("the experiment has no family `{family}`{hint}; it has: {}", families.join(", "));
    }
    if let Some(level) = &args.level {
        let levels: std::collections::BTreeSet<String> = expand(&file.experiment)
            .into_iter()
            .filter_map(|u| match u.plan {
                UnitPlan::Conformity(t) if Some(u.key.cell.family.as_str()) == args.family.as_deref() => t.level,
                _ => None,
            })
            .collect();
        if !levels.is_empty() && !levels.contains(level) {
            let hint = herd_design::did_you_mean(level, levels.iter().map(String::as_str));
            bail!(
                "the family has no level `{level}`{hint}; it has: {}",
                levels.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    let units =
        expand(&file.experiment).into_iter().filter(|u| args.family.as_deref().is_none_or(|f| u.key.cell.family == f));
    match &file.experiment {
        Experiment::Conformity(exp) => {
            let prompter = ConformityPrompter::load(&file, exp)?;
            let mut pools: BTreeMap<Task, ImagePools> = BTreeMap::new();
            let mut shown = 0;
            for unit in units {
                let UnitPlan::Conformity(trial) = &unit.plan else { continue };
                if shown >= args.limit {
                    break;
                }
                if args.with_confederates && trial.n == 0 {
                    continue;
                }
                if args.level.as_ref().is_some_and(|l| trial.level.as_ref() != Some(l)) {
                    continue;
                }
                let pool = match pools.entry(trial.task) {
                    std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::btree_map::Entry::Vacant(e) => e.insert(ImagePools::preview(exp, trial.task)?),
                };
                let image = pool
                    .select(&unit.key, trial)
                    .with_context(|| format!("no image in the preview pool for {}", unit.key.id()))?;
                let plan = prompter.plan(&unit.key, trial, image.correct)?;
                let prompt = prompter.render_plan(trial, &plan, image, args.modality)?;
                if args.jsonl {
                    let line = serde_json::json!({"unit": unit.key.id(), "image": image.id, "correct": plan.correct.to_string(), "n": trial.n, "messages": prompt.messages});
                    println!("{line}");
                    shown += 1;
                    continue;
                }
                println!(
                    "── {} · correct {} · confederates {} · image {}\n{}",
                    unit.key.id(),
                    plan.correct,
                    if plan.replies.is_empty() { "none".to_owned() } else { plan.confederate_answers() },
                    image.id,
                    prompt.display()
                );
                shown += 1;
            }
        }
        Experiment::MinimalGroup(exp) => {
            if args.level.is_some() {
                bail!(
                    "--level picks a level of a conformity family; a minimal-group experiment has one family, allocation"
                );
            }
            let bank = AllocationBank::load(&file.resolve(&exp.prompts.bank))?;
            let names = GroupNames::load(&file.resolve(&exp.society.group_names))?;
            let mut shown = 0;
            'units: for unit in units {
                let UnitPlan::Society(run) = &unit.plan else { continue };
                let society = draw_society(exp, &unit.key, run, &names);
                for decider in allocation_prompts(exp, &bank, &society, &unit.key, run)? {
                    if shown >= args.limit {
                        break 'units;
                    }
                    if args.jsonl {
                        let line = serde_json::json!({"unit": unit.key.id(), "decider": decider.decider, "minority_decider": decider.minority_decider, "roster": decider.roster.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), "messages": decider.prompt.messages});
                        println!("{line}");
                        shown += 1;
                        continue;
                    }
                    println!(
                        "── {} · decider {} ({}) · minority {} / majority {} · reasoning {}\n{}",
                        unit.key.id(),
                        decider.decider,
                        if decider.minority_decider { "minority" } else { "majority" },
                        society.minority_name,
                        society.majority_name,
                        decider.reasoning.as_str(),
                        decider.prompt.display()
                    );
                    shown += 1;
                }
            }
        }
    }
    Ok(())
}
