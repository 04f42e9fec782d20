//! The group names stored on every allocation row are the ones the decider's prompt showed: its own
//! group's and each listed target's, exchanged between the groups in the swap pass, and recorded in
//! the hidden arm too (same society, names never shown), so token receipt can be analysed by name.

use herd_backend::{
    AllocationFacts, BackendInfo, ConformityFacts, GenerateRequest, Generation, ScoreRequest, ScoreResult, SimAgent,
    SimBackend, SimParams,
};
use herd_runner::{MemorySink, Respondent, RunOptions, run_experiment};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The sim agent, keeping each allocation prompt's text by its trial key (`unit/decider id`).
struct Recording {
    inner: SimAgent,
    prompts: BTreeMap<String, String>,
}

impl SimBackend for Recording {
    fn score_trials(
        &mut self,
        group: &[ScoreRequest],
        facts: &[ConformityFacts],
    ) -> herd_backend::Result<Vec<ScoreResult>> {
        self.inner.score_trials(group, facts)
    }

    fn generate_trials(
        &mut self,
        batch: &[GenerateRequest],
        facts: &[AllocationFacts],
    ) -> herd_backend::Result<Vec<Generation>> {
        assert_eq!(batch.len(), facts.len(), "an allocation request without its facts");
        for (request, facts) in batch.iter().zip(facts) {
            self.prompts.insert(facts.key.clone(), request.prompt.text());
        }
        self.inner.generate_trials(batch, facts)
    }

    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
}

const EXPERIMENT: &str = r#"
[experiment]
name = "group-names"
study = "minimal_group"
seed = 5
[prompts]
bank = "@DATA@/banks/minimal-group-prompts.toml"
[society]
size = 20
minority_sizes = [3]
pool = 100
group_names = "@DATA@/banks/nonce-group-names.toml"
[design]
labels = ["visible", "hidden"]
seeds = 3
swap_pass = true
reasoning = ["off"]
[[instruments]]
name = "base"
[generation]
max_new_tokens = 200
"#;

#[test]
fn rows_carry_the_group_names_the_prompts_show_swapped_in_the_swap_pass() {
    let dir = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let file = dir.path().join("experiment.toml");
    std::fs::write(&file, EXPERIMENT.replace("@DATA@", &data.display().to_string())).unwrap();
    let experiment = herd_design::load_experiment(&file).unwrap();
    let mut backend = Recording { inner: SimAgent::new(SimParams::default()), prompts: BTreeMap::new() };
    let mut sink = MemorySink::default();
    let summary =
        run_experiment(&experiment, Respondent::Sim(&mut backend), &mut sink, &RunOptions::default()).unwrap();
    assert!(summary.complete(), "{summary:?}");
    let (deciders, dyads) = (&sink.rows.deciders, &sink.rows.dyads);
    assert_eq!(deciders.len(), 2 * 3 * 2 * 20, "labels × seeds × passes × deciders");
    assert_eq!(dyads.len(), deciders.len() * 19);

    let decider_id: BTreeMap<(&str, i64), &str> =
        deciders.iter().map(|d| ((d.unit_id.as_str(), d.decider), d.decider_id.as_str())).collect();
    // (labels, seed, pass, minority?) → the name that group carried.
    let mut names: BTreeMap<(&str, i64, &str, bool), BTreeSet<&str>> = BTreeMap::new();
    for d in deciders {
        names.entry((&d.labels, d.seed, &d.swap_pass, d.minority_decider)).or_default().insert(&d.decider_group);
    }
    for row in dyads {
        names
            .entry((&row.labels, row.seed, &row.swap_pass, row.minority_target))
            .or_default()
            .insert(&row.target_group);
        names
            .entry((&row.labels, row.seed, &row.swap_pass, row.minority_decider))
            .or_default()
            .insert(&row.decider_group);
        assert_eq!(row.same_group, row.decider_group == row.target_group, "{row:?}");

        let id = decider_id[&(row.unit_id.as_str(), row.decider)];
        let prompt = &backend.prompts[&format!("{}/{id}", row.unit_id)];
        let target_line = prompt.lines().find(|l| l.contains(row.target_id.as_str())).expect("the target is listed");
        if row.labels == "visible" {
            assert!(
                target_line.contains(&format!("[{}]", row.target_group)),
                "{target_line:?} should show {}",
                row.target_group
            );
            // The decider's own group is named outside the roster's brackets.
            let outside_roster: String = prompt.lines().filter(|l| !l.contains('[')).collect();
            assert!(
                outside_roster.contains(&row.decider_group),
                "the prompt does not name the decider's group {}:\n{prompt}",
                row.decider_group
            );
        } else {
            assert!(
                !prompt.contains(&row.target_group) && !prompt.contains(&row.decider_group),
                "hidden labels leak a name:\n{prompt}"
            );
        }
    }

    for seed in 0..3 {
        let name = |labels: &str, pass: &str, minority: bool| {
            let set = &names[&(labels, seed, pass, minority)];
            assert_eq!(set.len(), 1, "one name per group and pass: {set:?}");
            *set.iter().next().unwrap()
        };
        let (minority, majority) = (name("visible", "original", true), name("visible", "original", false));
        assert_ne!(minority, majority);
        // The swap pass exchanges the names between the groups; the hidden arm records the same society's.
        assert_eq!((name("visible", "swapped", true), name("visible", "swapped", false)), (majority, minority));
        for pass in ["original", "swapped"] {
            for group in [true, false] {
                assert_eq!(name("hidden", pass, group), name("visible", pass, group));
            }
        }
    }
}
