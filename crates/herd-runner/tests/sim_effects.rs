//! End to end with the `sim` backend: effects planted in a simulated agent come back out of the whole
//! pipeline (design → prompts → backend → parse → Parquet → analysis) within their standard errors, and
//! none is found where none was planted.
//!
//! The planted values are computed from the agent's own parameters by Monte Carlo over its noise, not
//! copied from the analysis. Estimates must lie within 3.5 standard errors of them, so the several checks
//! of a test together have a family-wise false-failure rate well under 1%.

use herd_analysis::study::{read_conformity_trials, read_dyads};
use herd_analysis::{BootstrapPlan, MinimalGroupOptions, ResultTable, analyze_minimal_group};
use herd_backend::{AllocationFacts, SimAgent, SimParams};
use herd_runner::{Respondent, RunOptions, run_experiment};
use herd_stats::{Formula, ols};
use herd_store::{Manifest, RunIdentity, RunStore};
use std::path::{Path, PathBuf};

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(path)
}

fn manifest(name: &str) -> Manifest {
    let identity = RunIdentity {
        experiment: name.into(),
        study: "test".into(),
        experiment_sha256: "0".repeat(64),
        model: "sim".into(),
        backend: "sim".into(),
        shard: "all".into(),
    };
    Manifest::new(identity)
}

/// Runs `toml` (written beside the data folder's banks) with a sim agent into a run folder.
fn run_sim(dir: &Path, toml: &str, params: SimParams) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("experiment.toml");
    std::fs::write(&file, toml.replace("@DATA@", &data("").display().to_string())).unwrap();
    let experiment = herd_design::load_experiment(&file).unwrap();
    let out = dir.join("run");
    let mut store = RunStore::open(&out, manifest(&experiment.experiment.meta().name), "none").unwrap();
    let summary =
        run_experiment(&experiment, Respondent::Sim(&mut SimAgent::new(params)), &mut store, &RunOptions::default())
            .unwrap();
    assert!(summary.complete(), "{summary:?}");
    store.finish("complete").unwrap();
    out
}

const SOCIETIES: &str = r#"
[experiment]
name = "sim-societies"
study = "minimal_group"
seed = 11
[prompts]
bank = "@DATA@/banks/minimal-group-prompts.toml"
[society]
size = 20
minority_sizes = [3, 10]
pool = 100
group_names = "@DATA@/banks/nonce-group-names.toml"
[design]
labels = ["visible", "hidden"]
seeds = 30
swap_pass = false
reasoning = ["off"]
[[instruments]]
name = "base"
[generation]
max_new_tokens = 200
"#;

/// Expected favouritism (mean in-group − mean out-group points) of a decider, by Monte Carlo.
fn planted_favouritism(params: &SimParams, m: usize, minority_decider: bool, visible: bool) -> f64 {
    let (n_in, n_out) = if minority_decider { (m - 1, 20 - m) } else { (19 - m, m) };
    let draws = 20_000;
    let mut total = 0.0;
    for i in 0..draws {
        let same_group: Vec<bool> = (0..19).map(|t| t < n_in).collect();
        let facts = AllocationFacts {
            key: format!("truth/{m}/{minority_decider}/{visible}/{i}"),
            roster: (0..19).map(|t| format!("t{t}")).collect(),
            target_names: same_group
                .iter()
                .map(|&same| if same == minority_decider { "Alpha" } else { "Beta" }.to_owned())
                .collect(),
            same_group,
            labels_visible: visible,
            minority_decider,
            pool: 100,
            reasoning: "off".into(),
            instrument: "base".into(),
            swap_pass: "original".into(),
            minority_size: m as u32,
            society_size: 20,
        };
        let shares = params.allocation_shares(&facts);
        let inside: f64 = shares[..n_in].iter().sum::<f64>() / n_in as f64;
        let outside: f64 = shares[n_in..].iter().sum::<f64>() / n_out as f64;
        total += inside - outside;
    }
    total / f64::from(draws)
}

fn bootstrap_row(table: &ResultTable, labels: &str, m: u32, quantity: &str) -> (f64, f64, f64, f64) {
    let row = (0..table.n_rows())
        .find(|&r| {
            table.text("labels", r) == Some(labels)
                && table.number("m", r) == Some(f64::from(m))
                && table.text("quantity", r) == Some(quantity)
        })
        .unwrap_or_else(|| panic!("no bootstrap row for {labels} m={m} {quantity}"));
    let get = |c: &str| table.number(c, row).unwrap();
    (get("estimate"), get("se"), get("ci_low"), get("ci_high"))
}

#[test]
fn planted_favouritism_and_minority_gap_are_recovered_and_hidden_labels_show_none() {
    let dir = tempfile::tempdir().unwrap();
    let params = SimParams::default();
    let out = run_sim(dir.path(), SOCIETIES, params.clone());
    let dyads = read_dyads(&out).unwrap();
    assert_eq!(dyads.rows.len(), 2 * 2 * 30 * 20 * 19, "every dyad of every society is stored once");
    let options =
        MinimalGroupOptions { bootstrap: BootstrapPlan::Seeded { resamples: 1000, seed: 3 }, ..Default::default() };
    let tables = analyze_minimal_group(&dyads, &options).unwrap();
    for m in [3usize, 10] {
        let (fav_min, fav_maj) =
            (planted_favouritism(&params, m, true, true), planted_favouritism(&params, m, false, true));
        let planted = (m as f64 * fav_min + (20 - m) as f64 * fav_maj) / 20.0;
        let (estimate, se, low, _) = bootstrap_row(&tables.bootstrap, "visible", m as u32, "favouritism");
        assert!(
            (estimate - planted).abs() < 3.5 * se,
            "m={m}: favouritism {estimate:.3} ± {se:.3}, planted {planted:.3}"
        );
        assert!(low > 0.0, "m={m}: visible labels show favouritism (CI low {low:.3})");
        let (gap, gap_se, _, _) = bootstrap_row(&tables.bootstrap, "visible", m as u32, "minority_minus_majority");
        let planted_gap = fav_min - fav_maj;
        assert!(
            (gap - planted_gap).abs() < 3.5 * gap_se,
            "m={m}: minority − majority {gap:.3} ± {gap_se:.3}, planted {planted_gap:.3}"
        );
        let (hidden, hidden_se, _, _) = bootstrap_row(&tables.bootstrap, "hidden", m as u32, "favouritism");
        assert!(
            hidden.abs() < 3.5 * hidden_se,
            "m={m}: hidden labels planted no favouritism, found {hidden:.3} ± {hidden_se:.3}"
        );
    }
    // The paper's seed-level Wilcoxon agrees: significant when visible, not when hidden.
    let seed_tests = &tables.seed_tests;
    for r in 0..seed_tests.n_rows() {
        if seed_tests.text("measure", r) != Some("favouritism") || seed_tests.text("deciders", r) != Some("all") {
            continue;
        }
        let p = seed_tests.number("wilcoxon_p", r).unwrap();
        match seed_tests.text("labels", r) {
            Some("visible") => assert!(p < 0.001, "visible: p = {p}"),
            _ => assert!(p > 0.0005, "hidden: p = {p}"),
        }
    }
}

const GROUP_SIZE: &str = r#"
[experiment]
name = "sim-group-size"
study = "conformity"
seed = 5
[prompts]
bank = "@DATA@/banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines"]
general_pool_size = 20
[baseline_filter]
enabled = false
[trials]
n_values = [0, 1, 2, 4, 6, 8, 10]
trials_per_n = 40
[families.group_size]
"#;

/// The least-squares slope of p_wrong on N that the agent's expected curve implies, and the fitted one.
fn slopes(params: &SimParams, dir: &Path) -> (f64, f64, f64) {
    let out = run_sim(dir, GROUP_SIZE, params.clone());
    let trials = read_conformity_trials(&out).unwrap().rows;
    assert_eq!(trials.len(), 7 * 40);
    let n: Vec<f64> = trials.iter().map(|t| f64::from(t.n)).collect();
    let p: Vec<f64> = trials.iter().map(|t| t.p_wrong_full).collect();
    let c = &params.conformity;
    // E[σ(μ + σ ε)] over ε ~ N(0, 1) by a fine midpoint rule on ±8σ.
    let expected = |n: f64| -> f64 {
        let mu = c.intercept + c.per_log_wrong * n.ln_1p();
        let steps = 4000;
        (0..steps)
            .map(|i| {
                let z = -8.0 + 16.0 * (f64::from(i) + 0.5) / f64::from(steps);
                let density = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
                density * 16.0 / f64::from(steps) / (1.0 + (-(mu + c.noise_sd * z)).exp())
            })
            .sum()
    };
    let truth: Vec<f64> = n.iter().map(|&x| expected(x)).collect();
    let formula = Formula::parse("p ~ n").unwrap();
    let fit = |y: &[f64]| {
        let (design, y) = formula.build(&[("p", y), ("n", n.as_slice())]).unwrap();
        let fit = ols(&design, &y).unwrap();
        let slope = fit.coefficients.iter().find(|c| c.name == "n").unwrap();
        (slope.estimate, slope.se)
    };
    let (planted, _) = fit(&truth);
    let (estimate, se) = fit(&p);
    (planted, estimate, se)
}

#[test]
fn planted_conformity_slope_is_recovered_and_a_flat_agent_shows_none() {
    let dir = tempfile::tempdir().unwrap();
    let params = SimParams::default();
    let (planted, estimate, se) = slopes(&params, &dir.path().join("slope"));
    assert!(planted > 0.01, "the default agent conforms more with more confederates");
    assert!((estimate - planted).abs() < 3.5 * se, "slope {estimate:.4} ± {se:.4}, planted {planted:.4}");
    assert!(estimate > 3.5 * se, "the slope is detected");

    let mut flat = SimParams::default();
    flat.conformity.per_log_wrong = 0.0;
    flat.conformity.per_log_right = 0.0;
    let (planted, estimate, se) = slopes(&flat, &dir.path().join("flat"));
    assert!(planted.abs() < 1e-12);
    assert!(estimate.abs() < 3.5 * se, "no slope planted, found {estimate:.4} ± {se:.4}");
}
