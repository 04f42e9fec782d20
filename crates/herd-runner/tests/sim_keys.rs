//! Each sim key added for issue 40 plants what it says: run through `run_experiment` on a small design,
//! the effect comes back out of the rows the runner stores (after herd-parse has read every reply), in
//! the units it was planted in and not in the others.
//!
//! Planted values come from the agent's own formulas (Monte Carlo over its noise, or the rate given);
//! estimates must lie within 3.5 standard errors of them, and a contrast that should be absent within
//! 3.5 standard errors of zero, so a test's several checks together fail falsely well under 1% of the
//! time. Each test also checks that the effect is there, so a key that planted nothing would fail it.

use herd_backend::{AllocationFacts, AllocationOverride, SimAgent, SimParams};
use herd_runner::{MemorySink, Respondent, RunOptions, TrialRows, run_experiment};
use herd_stats::{Formula, ols};
use herd_store::{AllocationDeciderRow, AllocationDyadRow};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(path)
}

/// Runs `toml` (written beside the data folder's banks) with a sim agent; the rows it stores.
fn run(toml: &str, params: SimParams) -> TrialRows {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("experiment.toml");
    std::fs::write(&file, toml.replace("@DATA@", &data("").display().to_string())).unwrap();
    let experiment = herd_design::load_experiment(&file).unwrap();
    let mut sink = MemorySink::default();
    let summary =
        run_experiment(&experiment, Respondent::Sim(&mut SimAgent::new(params)), &mut sink, &RunOptions::default())
            .unwrap();
    assert!(summary.complete(), "{summary:?}");
    sink.rows
}

/// A minimal-group design: `design` is the body of its [design] table, `m` its minority sizes.
fn societies(m: &str, design: &str, instruments: &[&str]) -> String {
    let instruments: String = instruments.iter().map(|i| format!("[[instruments]]\nname = \"{i}\"\n")).collect();
    format!(
        r#"
[experiment]
name = "sim-keys"
study = "minimal_group"
seed = 41
[prompts]
bank = "@DATA@/banks/minimal-group-prompts.toml"
[society]
size = 20
minority_sizes = {m}
pool = 100
group_names = "@DATA@/banks/nonce-group-names.toml"
[design]
{design}
{instruments}
[generation]
max_new_tokens = 200
"#
    )
}

/// One decider's favouritism (mean points to its own group − mean to the other) from its dyads.
struct Decider {
    row: AllocationDeciderRow,
    favouritism: f64,
    /// Every out-group target got 0 points.
    zero_outgroup: bool,
}

fn deciders(rows: &TrialRows) -> Vec<Decider> {
    let mut dyads: BTreeMap<(&str, i64), Vec<&AllocationDyadRow>> = BTreeMap::new();
    for d in &rows.dyads {
        dyads.entry((d.unit_id.as_str(), d.decider)).or_default().push(d);
    }
    rows.deciders
        .iter()
        .map(|row| {
            let own = &dyads[&(row.unit_id.as_str(), row.decider)];
            let mean = |same: bool| {
                let p: Vec<f64> = own.iter().filter(|d| d.same_group == same).map(|d| d.points).collect();
                p.iter().sum::<f64>() / p.len() as f64
            };
            let zero_outgroup = own.iter().filter(|d| !d.same_group).all(|d| d.points == 0.0);
            Decider { row: row.clone(), favouritism: mean(true) - mean(false), zero_outgroup }
        })
        .collect()
}

/// Mean and standard error (deciders answer independently: each has its own noise stream).
fn mean_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// The favouritism of the deciders that `keep` takes: mean and SE.
fn favouritism(ds: &[Decider], keep: impl Fn(&AllocationDeciderRow) -> bool) -> (f64, f64) {
    let values: Vec<f64> = ds.iter().filter(|d| keep(&d.row)).map(|d| d.favouritism).collect();
    assert!(values.len() > 20, "too few deciders to judge: {}", values.len());
    mean_se(&values)
}

/// A decider's expected favouritism under `params`, by Monte Carlo over the agent's noise (shares before
/// rounding).
fn planted(params: &SimParams, template: &AllocationFacts) -> f64 {
    let n_in = template.same_group.iter().filter(|&&s| s).count() as f64;
    let n_out = template.same_group.len() as f64 - n_in;
    let draws = 20_000;
    let total: f64 = (0..draws)
        .map(|i| {
            let facts = AllocationFacts { key: format!("truth/{i}"), ..template.clone() };
            let shares = params.allocation_shares(&facts);
            let side = |same: bool| -> f64 {
                shares.iter().zip(&facts.same_group).filter(|(_, s)| **s == same).map(|(v, _)| v).sum()
            };
            side(true) / n_in - side(false) / n_out
        })
        .sum();
    total / f64::from(draws)
}

/// A decider of a society of 20 whose group has `own` members (itself included), labels visible.
fn template(m: u32, minority: bool, reasoning: &str, instrument: &str, pass: &str) -> AllocationFacts {
    let own = if minority { m } else { 20 - m };
    AllocationFacts {
        key: String::new(),
        roster: (0..19).map(|t| format!("t{t}")).collect(),
        same_group: (0..19).map(|t| t < own - 1).collect(),
        target_names: (0..19).map(|t| if (t < own - 1) == minority { "Alpha" } else { "Beta" }.to_owned()).collect(),
        labels_visible: true,
        minority_decider: minority,
        pool: 100,
        reasoning: reasoning.into(),
        instrument: instrument.into(),
        swap_pass: pass.into(),
        minority_size: m,
        society_size: 20,
    }
}

fn assert_near(what: &str, (estimate, se): (f64, f64), planted: f64) {
    assert!((estimate - planted).abs() < 3.5 * se, "{what}: {estimate:.3} ± {se:.3}, planted {planted:.3}");
}

fn assert_differ(what: &str, (a, a_se): (f64, f64), (b, b_se): (f64, f64)) {
    let se = a_se.hypot(b_se);
    assert!((a - b).abs() > 3.5 * se, "{what}: {a:.3} vs {b:.3} (SE of the difference {se:.3}) should differ");
}

fn assert_alike(what: &str, (a, a_se): (f64, f64), (b, b_se): (f64, f64)) {
    let se = a_se.hypot(b_se);
    assert!((a - b).abs() < 3.5 * se, "{what}: {a:.3} vs {b:.3} (SE of the difference {se:.3}) should be alike");
}

#[test]
fn a_reasoning_override_changes_favouritism_in_that_mode_only() {
    let design = "labels = [\"visible\"]\nseeds = 30\nswap_pass = false\nreasoning = [\"on\", \"off\"]";
    let mut params = SimParams::default();
    let off = AllocationOverride { ingroup_minority: Some(1.5), ..Default::default() };
    params.allocation.reasoning.insert("off".into(), off);
    let ds = deciders(&run(&societies("[3]", design, &["base"]), params.clone()));
    let cell = |reasoning: &'static str, minority: bool| {
        favouritism(&ds, move |r| r.reasoning == reasoning && r.minority_decider == minority)
    };
    let (on_min, off_min) = (cell("on", true), cell("off", true));
    assert_near("minority, thinking on", on_min, planted(&params, &template(3, true, "on", "base", "original")));
    assert_near("minority, thinking off", off_min, planted(&params, &template(3, true, "off", "base", "original")));
    assert_differ("minority deciders on vs off", on_min, off_min);
    // The table gave only the minority's weight: majority deciders favour alike in both modes.
    assert_alike("majority deciders on vs off", cell("on", false), cell("off", false));
}

#[test]
fn instrument_and_swap_pass_overrides_apply_to_their_units_with_the_swap_pass_last() {
    let design = "labels = [\"visible\"]\nseeds = 20\nswap_pass = true\nreasoning = [\"on\"]";
    let mut params = SimParams::default();
    let paraphrase = AllocationOverride { ingroup_minority: Some(1.6), ..Default::default() };
    params.allocation.instrument.insert("paraphrase".into(), paraphrase);
    let swapped = AllocationOverride { ingroup_minority: Some(-0.8), ..Default::default() };
    params.allocation.swap_pass.insert("swapped".into(), swapped);
    let ds = deciders(&run(&societies("[5]", design, &["base", "paraphrase"]), params.clone()));
    for (instrument, pass) in
        [("base", "original"), ("paraphrase", "original"), ("base", "swapped"), ("paraphrase", "swapped")]
    {
        let found = favouritism(&ds, |r| r.instrument == instrument && r.swap_pass == pass && r.minority_decider);
        let truth = planted(&params, &template(5, true, "on", instrument, pass));
        assert_near(&format!("minority deciders, {instrument}, {pass}"), found, truth);
    }
    let found = |instrument: &'static str, pass: &'static str| {
        favouritism(&ds, move |r| r.instrument == instrument && r.swap_pass == pass && r.minority_decider)
    };
    assert_differ("paraphrase over base", found("paraphrase", "original"), found("base", "original"));
    assert_differ(
        "the swapped pass over the paraphrase",
        found("paraphrase", "swapped"),
        found("paraphrase", "original"),
    );
}

#[test]
fn ingroup_equal_gives_equal_groups_equal_favouritism() {
    let design = "labels = [\"visible\"]\nseeds = 30\nswap_pass = false\nreasoning = [\"on\"]";
    let toml = societies("[3, 10]", design, &["base"]);
    let gap = |ds: &[Decider], m: i64| {
        let side = |minority: bool| favouritism(ds, move |r| r.m == m && r.minority_decider == minority);
        (side(true), side(false))
    };
    // Today's behaviour without the key: at m = 10 the group flagged minority favours more.
    let flagged = deciders(&run(&toml, SimParams::default()));
    let (minority, majority) = gap(&flagged, 10);
    assert_differ("m = 10 by the minority flag", minority, majority);

    let mut params = SimParams::default();
    params.allocation.ingroup_equal = Some(0.4);
    let ds = deciders(&run(&toml, params.clone()));
    let (minority, majority) = gap(&ds, 10);
    assert_alike("m = 10 with ingroup_equal", minority, majority);
    let truth = planted(&params, &template(10, true, "on", "base", "original"));
    assert_near("m = 10, flagged minority", minority, truth);
    assert_near("m = 10, flagged majority", majority, truth);
    // Unequal groups keep their gap.
    let (minority, majority) = gap(&ds, 3);
    assert_differ("m = 3 with ingroup_equal", minority, majority);
}

#[test]
fn ingroup_hidden_plants_a_broken_hidden_floor() {
    let design = "labels = [\"hidden\"]\nseeds = 30\nswap_pass = false\nreasoning = [\"on\"]";
    let toml = societies("[5]", design, &["base"]);
    let floor = favouritism(&deciders(&run(&toml, SimParams::default())), |_| true);
    assert_near("hidden labels, default agent", floor, 0.0);
    let mut params = SimParams::default();
    params.allocation.ingroup_hidden = 0.3;
    let broken = favouritism(&deciders(&run(&toml, params.clone())), |_| true);
    let truth = |minority: bool| {
        let facts = AllocationFacts { labels_visible: false, ..template(5, minority, "on", "base", "original") };
        planted(&params, &facts)
    };
    assert_near("hidden labels, ingroup_hidden = 0.3", broken, (5.0 * truth(true) + 15.0 * truth(false)) / 20.0);
    assert!(broken.0 > 3.5 * broken.1, "the broken floor shows: {broken:?}");
}

/// The share of deciders that `keep` takes giving every out-group target 0 points, with its binomial SE
/// at the planted rate.
fn zero_share(ds: &[Decider], rate: f64, keep: impl Fn(&AllocationDeciderRow) -> bool) -> ((f64, f64), usize) {
    let hits: Vec<bool> = ds.iter().filter(|d| keep(&d.row)).map(|d| d.zero_outgroup).collect();
    let n = hits.len();
    let share = hits.iter().filter(|&&h| h).count() as f64 / n as f64;
    ((share, (rate * (1.0 - rate) / n as f64).sqrt().max(1e-12)), n)
}

#[test]
fn zero_outgroup_rates_show_as_all_zero_outgroup_allocations_at_those_rates() {
    let design = "labels = [\"visible\", \"hidden\"]\nseeds = 30\nswap_pass = false\nreasoning = [\"on\"]";
    let mut params = SimParams::default();
    params.allocation.zero_outgroup_rate = 0.3;
    params.allocation.zero_outgroup_majority = Some(0.1);
    params.allocation.zero_outgroup_equal = Some(0.5);
    let ds = deciders(&run(&societies("[5, 10]", design, &["base"]), params));
    let visible = |m: i64, minority: bool| {
        move |r: &AllocationDeciderRow| r.labels == "visible" && r.m == m && r.minority_decider == minority
    };
    let (share, n) = zero_share(&ds, 0.3, visible(5, true));
    assert_near(&format!("minority deciders at m = 5 ({n})"), share, 0.3);
    let (share, n) = zero_share(&ds, 0.1, visible(5, false));
    assert_near(&format!("majority deciders at m = 5 ({n})"), share, 0.1);
    let (share, n) = zero_share(&ds, 0.5, |r| r.labels == "visible" && r.m == 10);
    assert_near(&format!("equal groups ({n})"), share, 0.5);
    let (share, n) = zero_share(&ds, 0.0, |r| r.labels == "hidden");
    assert_eq!(share.0, 0.0, "hidden labels: no decider gives its latent out-group nothing ({n} deciders)");
    // An all-zero decider gives its points to its own group, summing to the pool.
    for d in ds.iter().filter(|d| d.zero_outgroup) {
        assert_eq!(d.row.parse_status, "ok", "{}", d.row.raw_output);
        assert!(d.favouritism > 0.0);
    }
}

#[test]
fn parse_failures_rescales_and_missing_targets_arrive_as_the_parser_reads_them() {
    let design = "labels = [\"visible\"]\nseeds = 40\nswap_pass = false\nreasoning = [\"on\"]";
    let mut params = SimParams::default();
    let a = &mut params.allocation;
    (a.parse_failure_rate, a.rescale_rate, a.missing_target_rate) = (0.1, 0.2, 0.15);
    let rows = run(&societies("[5]", design, &["base"]), params);
    let n = rows.deciders.len();
    assert_eq!(n, 40 * 20);
    let (mut failed, mut rescaled, mut missing) = (0usize, 0usize, 0usize);
    for row in &rows.deciders {
        let dyads: Vec<&AllocationDyadRow> =
            rows.dyads.iter().filter(|d| d.unit_id == row.unit_id && d.decider == row.decider).collect();
        let total: f64 = dyads.iter().map(|d| d.points).sum();
        assert!((total - 100.0).abs() < 1e-9, "every decider's stored points sum to the pool: {total}");
        let Ok(reply) = serde_json::from_str::<BTreeMap<String, u32>>(&row.raw_output) else {
            // A planted failure: no JSON object, stored failed with the uniform fill.
            failed += 1;
            assert!(!row.raw_output.contains('{'), "{}", row.raw_output);
            assert_eq!((row.parse_status.as_str(), row.filled, row.qc_flags.as_str()), ("failed", true, "no_object"));
            assert!(dyads.iter().all(|d| (d.points - 100.0 / 19.0).abs() < 1e-9));
            continue;
        };
        assert!(!row.filled);
        let sum: u32 = reply.values().sum();
        rescaled += usize::from(sum != 100 && reply.len() == 19);
        if reply.len() == 18 {
            missing += 1;
            // The missing recipient is read as 0 points.
            let absent = dyads.iter().find(|d| !reply.contains_key(&d.target_id)).unwrap();
            assert_eq!(absent.points, 0.0);
        }
        // Whatever the reply summed to, the parser rescaled it to the pool and said so.
        assert_eq!(row.qc_flags == "renormalised", sum != 100, "{}: {}", row.qc_flags, row.raw_output);
        assert_eq!(row.parse_status, if sum != 100 { "repaired" } else { "ok" });
    }
    let share = |k: usize, rate: f64| ((k as f64 / n as f64), (rate * (1.0 - rate) / n as f64).sqrt());
    assert_near("parse failures", share(failed, 0.1), 0.1);
    // Rescaled and missing replies are drawn among the replies that parse.
    assert_near("rescaled replies (all recipients)", share(rescaled, 0.9 * 0.2 * 0.85), 0.9 * 0.2 * 0.85);
    assert_near("replies missing a recipient", share(missing, 0.9 * 0.15), 0.9 * 0.15);
}

const CONFORMITY: &str = r#"
[experiment]
name = "sim-keys-conformity"
study = "conformity"
seed = 17
[prompts]
bank = "@DATA@/banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines", "dots"]
general_pool_size = 20
[stimuli.lines]
difficulty_spreads = [250, 120, 40, 10]
images_per_level = 25
[stimuli.dots]
difficulty_spreads = [200, 100, 30, 6]
images_per_level = 25
[baseline_filter]
enabled = false
[trials]
n_values = [0, 3]
trials_per_n = 40
[families.group_size]
[families.difficulty]
[families.spatial]
near = "right here"
far = ["ten meters away"]
"#;

/// The planted logit of each stored trial: the sim's answer logits are ±logit/2, so their difference
/// (wrong − correct) is the logit with its noise.
fn logit(t: &herd_store::ConformityTrialRow) -> f64 {
    let (a, b) = (t.logit_a, t.logit_b);
    if t.correct_label == "A" { b - a } else { a - b }
}

/// OLS of the trials' logit on the difficulty index and level (difficulty family, one task), with
/// ln(1 + wrong replies) beside them: (index coefficient, SE), (level coefficient, SE).
fn difficulty_fit(rows: &TrialRows, task: &str) -> ((f64, f64), (f64, f64)) {
    let trials: Vec<&herd_store::ConformityTrialRow> =
        rows.conformity.iter().filter(|t| t.family == "difficulty" && t.task == task).collect();
    let y: Vec<f64> = trials.iter().map(|t| logit(t)).collect();
    let index: Vec<f64> = trials.iter().map(|t| t.difficulty_index).collect();
    let level: Vec<f64> = trials.iter().map(|t| t.difficulty_level.unwrap() as f64).collect();
    let crowd: Vec<f64> = trials.iter().map(|t| (t.wrong_replies as f64).ln_1p()).collect();
    let formula = Formula::parse("y ~ index + level + crowd").unwrap();
    let (design, y) = formula
        .build(&[
            ("y", y.as_slice()),
            ("index", index.as_slice()),
            ("level", level.as_slice()),
            ("crowd", crowd.as_slice()),
        ])
        .unwrap();
    let fit = ols(&design, &y).unwrap();
    let coef = |name: &str| {
        let c = fit.coefficients.iter().find(|c| c.name == name).unwrap();
        (c.estimate, c.se)
    };
    (coef("index"), coef("level"))
}

#[test]
fn difficulty_index_moves_p_wrong_with_the_index_and_not_the_level() {
    let mut params = SimParams::default();
    params.conformity.difficulty = 0.0;
    params.conformity.difficulty_index_by_task.insert("dots".into(), 3.0);
    let rows = run(CONFORMITY, params);
    let (index, level) = difficulty_fit(&rows, "dots");
    assert_near("dots: logit per unit of the difficulty index", index, 3.0);
    assert_near("dots: logit per difficulty level", level, 0.0);
    // The slope is the task's own: lines has none.
    let (index, _) = difficulty_fit(&rows, "lines");
    assert_near("lines: logit per unit of the difficulty index", index, 0.0);
    // p_wrong rises with the index: the hardest dots images (|Δcount| ≤ 4) are wrong far more often than
    // the easiest (|Δcount| > 20).
    let p = |keep: fn(f64) -> bool| {
        let v: Vec<f64> = rows
            .conformity
            .iter()
            .filter(|t| t.family == "difficulty" && t.task == "dots" && keep(t.difficulty_index))
            .map(|t| t.p_wrong_full)
            .collect();
        mean_se(&v)
    };
    assert_differ("p_wrong, hard vs easy dots images", p(|x| x >= 0.25), p(|x| x < 0.05));

    // The agent of today's keys plants difficulty on the level, not the index.
    let rows = run(CONFORMITY, SimParams::default());
    let (index, level) = difficulty_fit(&rows, "dots");
    assert_near("default agent: logit per unit of the index", index, 0.0);
    assert_near("default agent: logit per level", level, SimParams::default().conformity.difficulty / 4.0);
}

#[test]
fn task_and_family_shifts_move_the_logit_of_their_trials() {
    let mut params = SimParams::default();
    params.conformity.difficulty = 0.0;
    params.conformity.level_shift.clear();
    params.conformity.task_shift.insert("dots".into(), 1.0);
    params.conformity.family_shift.insert("spatial".into(), -0.7);
    let rows = run(CONFORMITY, params);
    let mean_logit = |task: &'static str, family: &'static str| {
        let v: Vec<f64> =
            rows.conformity.iter().filter(|t| t.task == task && t.family == family && t.n == 3).map(logit).collect();
        mean_se(&v)
    };
    let difference = |a: (f64, f64), b: (f64, f64)| (a.0 - b.0, a.1.hypot(b.1));
    let dots = difference(mean_logit("dots", "group_size"), mean_logit("lines", "group_size"));
    assert_near("dots − lines", dots, 1.0);
    let spatial = difference(mean_logit("lines", "spatial"), mean_logit("lines", "group_size"));
    assert_near("spatial − group size", spatial, -0.7);
    assert!(dots.0 > 3.5 * dots.1 && -spatial.0 > 3.5 * spatial.1, "both shifts show: {dots:?} {spatial:?}");
}
