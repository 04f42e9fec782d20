use anyhow::Result;
use herd_design::{Shard, Unit, expand, family_names, load_experiment};
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
}

pub fn run(args: ExpandArgs) -> Result<()> {
    let file = load_experiment(&args.experiment)?;
    let units: Vec<Unit> = expand(&file.experiment).into_iter().filter(|u| args.shard.contains(u)).collect();
    if args.jsonl {
        for unit in &units {
            println!("{}", serde_json::json!({ "id": unit.key.id(), "unit": unit }));
        }
        return Ok(());
    }
    let meta = file.experiment.meta();
    println!("{} ({}), seed {}, sha256 {}", meta.name, meta.study.as_str(), meta.seed, &file.sha256[..16]);
    println!("shard {}: {} units", args.shard, units.len());
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
    Ok(())
}
