//! A trial run (`herd run --limit N`) runs N units of the plan that the model runs: the cells a model
//! skips by design (reasoning=on for a model without a thinking mode) are recorded as skipped on the way
//! and not counted, so `--limit 1` always runs one society and `cargo xtask bench replicate --estimate`
//! times what it means to.

use herd_backend::{SimAgent, SimParams};
use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
use std::path::Path;

/// The quick minimal-group profile with two societies per cell: 2 label arms × 2 reasoning modes × 2.
fn experiment(dir: &Path) -> herd_design::ExperimentFile {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let text = std::fs::read_to_string(data.join("experiments/minimal-group.quick.toml")).unwrap();
    assert!(text.contains("seeds = 8 ") && text.contains("reasoning = [\"on\", \"off\"]"), "the quick profile changed");
    let text = text.replace("seeds = 8 ", "seeds = 2 ").replace("\"../banks/", &format!("\"{}/banks/", data.display()));
    let path = dir.join("minimal-group.toml");
    std::fs::write(&path, text).unwrap();
    herd_design::load_experiment(&path).unwrap()
}

#[test]
fn a_limit_counts_only_the_units_the_model_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = experiment(dir.path());
    let units = herd_runner::shard_units(&file, None);
    assert_eq!(units.len(), 8);
    let no_thinking = RunOptions { reasoning_modes: vec!["off".into()], ..RunOptions::default() };
    let is_on = |u: &herd_design::Unit| u.key.id().contains("reasoning=on");
    assert!(is_on(&units[0]), "the plan starts with a reasoning=on unit, which this model skips");
    assert_eq!(units.iter().filter(|u| no_thinking.skipped_by_design(u).is_some()).count(), 4);
    let reason = no_thinking.skipped_by_design(&units[0]).unwrap();
    assert!(reason.starts_with("reasoning=on: no thinking mode"), "{reason}");

    for limit in [1, 3] {
        let options = RunOptions { limit: Some(limit), ..no_thinking.clone() };
        let mut sink = MemorySink::default();
        let mut backend = SimAgent::new(SimParams::default());
        let summary = run_experiment(&file, Respondent::Sim(&mut backend), &mut sink, &options).unwrap();
        assert_eq!(summary.units_run, limit as u64, "--limit {limit}");
        // Up to the last unit run, every reasoning=on unit was passed as skipped by design.
        let last_run = units.iter().enumerate().filter(|(_, u)| !is_on(u)).nth(limit - 1).unwrap().0;
        let on_before = units[..last_run].iter().filter(|u| is_on(u)).count() as u64;
        assert_eq!(summary.skipped_by_design(), on_before, "--limit {limit}");
        assert_eq!(summary.left_by_limit, (units.len() - last_run - 1) as u64, "--limit {limit}");
        assert!(!summary.complete(), "--limit {limit} leaves units: the run is not complete");
    }
    // A limit past the model's units runs them all and leaves nothing.
    let options = RunOptions { limit: Some(5), ..no_thinking };
    let summary = run_experiment(
        &file,
        Respondent::Sim(&mut SimAgent::new(SimParams::default())),
        &mut MemorySink::default(),
        &options,
    )
    .unwrap();
    assert_eq!((summary.units_run, summary.skipped_by_design(), summary.left_by_limit), (4, 4, 0));
    assert!(summary.complete());
}
