//! The headline table's three verdicts on results with known effects: a run too small for its test,
//! an undefined statistic and an interval holding both zero and the paper's effect are inconclusive;
//! every verdict names its test and n; the hidden-label floor follows the paper's p > 0.13, |z| < 1.5.

mod common;
mod planted;
use common::noise;
use planted::*;

use std::path::PathBuf;

use herd_analysis::{
    ColumnValues, ConformityTable, ConformityTrial, DesignKey, Dyad, DyadTable, HeadlineComparison, Labels,
    MinimalGroupOptions, MinimalGroupResults, PWrong, Provenance, ResultTable, Results, Verdict, analyze_minimal_group,
    compare_headlines, group_size_rises, load_results,
};
use herd_report::write_report;

/// Unanimity trials at N = 0 and 5 whose AUCs are `aucs[level]` plus `jitter(seed, level)`: a flat
/// curve at that height (the headline reads only the AUC).
fn unanimity(seeds: i64, aucs: [f64; 3], jitter: impl Fn(i64, usize) -> f64) -> Vec<ConformityTrial> {
    let mut rows = Vec::new();
    for (i, level) in ["wrong_100", "wrong_80", "wrong_50"].into_iter().enumerate() {
        for seed in 0..seeds {
            let auc = aucs[i] + jitter(seed, i);
            rows.push(trial("unanimity", level, 0, seed, auc));
            rows.push(trial("unanimity", level, 5, seed, auc));
        }
    }
    rows
}

#[test]
fn a_tiny_unanimity_change_never_replicates() {
    // The quick run that printed "replicates": AUC 0.801 → 0.800 → 0.799 on two seeds.
    let all = compare_headlines(&conformity_results(unanimity(2, [0.801, 0.800, 0.799], |_, _| 0.0))).unwrap();
    let h = headline(&all, "unanimity_dissent");
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("with 2 seeds the smallest attainable p is 0.5"), "{}", h.basis);
    assert!(h.this_run.contains("AUC 0.801 → 0.800"), "{}", h.this_run);
    assert!(h.this_run.contains("Wilcoxon signed-rank, 2 seeds"), "{}", h.this_run);

    // Eight seeds scattered around the same tiny change: the interval holds zero and any drop.
    let noisy =
        unanimity(8, [0.801, 0.800, 0.799], |seed, level| if (seed + level as i64) % 2 == 0 { 0.004 } else { -0.004 });
    let all = compare_headlines(&conformity_results(noisy)).unwrap();
    let h = headline(&all, "unanimity_dissent");
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("holds both zero and the paper's effect"), "{}", h.basis);
}

#[test]
fn a_clear_unanimity_drop_replicates_and_a_rise_does_not() {
    let jitter = |seed: i64, level: usize| 0.01 * ((seed * 7 + level as i64 * 3) % 5) as f64;
    let all = compare_headlines(&conformity_results(unanimity(8, [0.8, 0.5, 0.2], jitter))).unwrap();
    let h = headline(&all, "unanimity_dissent");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("Wilcoxon signed-rank, 8 seeds, p = 0.008"), "{}", h.this_run);
    assert!(h.basis.contains("all 2 rows replicate (Wilcoxon signed-rank, 8 seeds)"), "{}", h.basis);

    // Dissent raising conformity is the opposite of the paper.
    let all = compare_headlines(&conformity_results(unanimity(8, [0.2, 0.5, 0.8], jitter))).unwrap();
    let h = headline(&all, "unanimity_dissent");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("significant in the opposite direction"), "{}", h.basis);
}

#[test]
fn group_size_needs_six_pairs_to_decide() {
    let rows = |seeds: i64| {
        let mut rows = Vec::new();
        for seed in 0..seeds {
            rows.push(trial("group_size", "", 0, seed, 0.04 + 0.004 * seed as f64));
            rows.push(trial("group_size", "", 10, seed, 0.7 + 0.02 * seed as f64));
        }
        rows
    };
    let all = compare_headlines(&conformity_results(rows(5))).unwrap();
    assert_eq!(headline(&all, "group_size_rise").verdict, Verdict::Inconclusive);
    let all = compare_headlines(&conformity_results(rows(6))).unwrap();
    let h = headline(&all, "group_size_rise");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("m: p_wrong_full: 0.050 → 0.750 (N = 0 → 10), rise +0.700"), "{}", h.this_run);
    // The test `herd power` counts: herd-analysis's rise and its Wilcoxon, 2/2⁶ with six rising pairs.
    let trials = ConformityTable { origin: "test".into(), rows: rows(6) };
    let rises = group_size_rises(&trials, PWrong::Full);
    assert_eq!(rises.len(), 1);
    assert_eq!(rises[0].wilcoxon().unwrap().p_value, 0.03125);
    assert!(h.this_run.contains("Wilcoxon signed-rank, 6 trial pairs, p = 0.031"), "{}", h.this_run);
}

#[test]
fn the_lead_measure_decides_and_the_other_is_shown_beside_it() {
    // p_wrong_full stays flat while the two-way measure rises (mass leaving A and B as N grows).
    let mut rows = Vec::new();
    for seed in 0..8 {
        let jitter = 0.001 * (seed % 3) as f64 - 0.001;
        for (n, ab) in [(0, 0.05), (10, 0.35)] {
            let mut t = trial("group_size", "", n, seed, 0.5 + jitter * f64::from(n));
            t.p_wrong_ab = Some(ab + 0.01 * seed as f64);
            rows.push(t);
        }
    }
    let full = compare_headlines(&conformity_results_led_by(rows.clone(), PWrong::Full)).unwrap();
    let h = headline(&full, "group_size_rise");
    assert_ne!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.this_run.contains("m: p_wrong_full: 0.500 → 0.499") && h.this_run.contains("(with p_wrong_ab: 0.085 → 0.385"),
        "{}",
        h.this_run
    );
    let ab = compare_headlines(&conformity_results_led_by(rows, PWrong::Ab)).unwrap();
    let h = headline(&ab, "group_size_rise");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.this_run.contains("m: p_wrong_ab: 0.085 → 0.385") && h.this_run.contains("(with p_wrong_full: 0.500 → 0.499"),
        "{}",
        h.this_run
    );
}

#[test]
fn spearman_on_four_levels_cannot_decide_and_an_undefined_rho_is_inconclusive() {
    let rows = |levels: i64| {
        let mut rows = Vec::new();
        for level in 1..=levels {
            for n in [0, 5] {
                let p = 0.05 + if n == 5 { 0.1 * level as f64 } else { 0.0 };
                let mut t = trial("difficulty", "", n, 0, p);
                t.difficulty_level = Some(level);
                rows.push(t);
            }
        }
        rows
    };
    // ρ = 1 on four levels: the exact test's smallest p is 2/4! ≈ 0.083.
    let all = compare_headlines(&conformity_results(rows(4))).unwrap();
    let h = headline(&all, "difficulty_rho");
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("with 4 difficulty levels the smallest attainable p is 0.083"), "{}", h.basis);
    // Six levels decide.
    let all = compare_headlines(&conformity_results(rows(6))).unwrap();
    assert_eq!(headline(&all, "difficulty_rho").verdict, Verdict::Replicates);
    // Two levels: ρ is undefined (null in the table), and no verdict rests on it.
    let all = compare_headlines(&conformity_results(rows(2))).unwrap();
    let h = headline(&all, "difficulty_rho");
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("undefined"), "{}", h.basis);
}

#[test]
fn public_private_needs_most_rows_and_its_paraphrases() {
    let mut rows = Vec::new();
    for (task, gain) in [("lines", 0.2), ("color", 0.2), ("dots", -0.2)] {
        for paraphrase in 0..8_i64 {
            for (level, shift) in [("public", gain), ("private", 0.0)] {
                for n in [0, 5] {
                    let mut t = trial(
                        "normative",
                        level,
                        n,
                        paraphrase,
                        if n == 0 { 0.05 } else { 0.4 + shift + 0.01 * paraphrase as f64 },
                    );
                    t.task = task.into();
                    t.paraphrase = Some(format!("p{paraphrase}"));
                    rows.push(t);
                }
            }
        }
    }
    let all = compare_headlines(&conformity_results(rows)).unwrap();
    let h = headline(&all, "public_private");
    // Two of three rows replicate (one-sided, 8 paraphrases: p = 1/256), one goes the other way.
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.basis.starts_with("2 of 3 rows replicate, 0 inconclusive, 1 do not"), "{}", h.basis);
    assert!(h.this_run.contains("Wilcoxon signed-rank (one-sided), 8 paraphrases, p = 0.004"), "{}", h.this_run);
}

/// A result table from (name, column) pairs.
fn table(name: &str, columns: Vec<(&str, ColumnValues)>) -> ResultTable {
    ResultTable { name: name.into(), columns: columns.into_iter().map(|(n, c)| (n.to_owned(), c)).collect() }
}

fn texts(v: &[&str]) -> ColumnValues {
    ColumnValues::Text(v.iter().map(|s| Some((*s).to_owned())).collect())
}

fn floats(v: &[Option<f64>]) -> ColumnValues {
    ColumnValues::Float(v.to_vec())
}

#[test]
fn the_hidden_floor_is_an_equivalence_per_model() {
    let floor =
        |seeds, bias| headline(&compare_headlines(&societies_with(seeds, bias)).unwrap(), "hidden_floor").clone();
    // Group-blind deciders on 30 societies: the 90% t-interval lies within ±0.21 points/target.
    let h = floor(30, 0.0);
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.basis.contains("two one-sided t-tests against the margin"), "{}", h.basis);
    assert!(h.this_run.contains("points/target (m = 5, p = "), "{}", h.this_run);
    // Hidden-label favouritism well beyond the margin: the 95% interval lies wholly beyond it.
    let h = floor(30, 1.0);
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("lies beyond ±0.210: an effect larger than the margin"), "{}", h.basis);
    // Three societies: an interval too wide to rule the margin in or out.
    let h = floor(3, 0.0);
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("still reaches ±0.210"), "{}", h.basis);
}

/// Societies of 20 with a minority of 5: visible-label minority deciders favour their group strongly
/// (the first of them gives the out-group nothing), majority deciders mildly; hidden labels are noise.
fn societies(seeds: i64) -> Results {
    societies_with(seeds, 0.0)
}

/// [`societies`], with every hidden-label decider favouring its (unseen) group by `hidden_bias`.
fn societies_with(seeds: i64, hidden_bias: f64) -> Results {
    let mut rows = Vec::new();
    for labels in [Labels::Visible, Labels::Hidden] {
        for seed in 0..seeds {
            let minority = |agent: i64| (agent * 7 + seed * 3) % 20 < 5;
            for decider in 1..=20_i64 {
                let visible = labels == Labels::Visible;
                let bias = if !visible {
                    hidden_bias
                } else if minority(decider) {
                    1.5
                } else {
                    0.4
                };
                let extreme = visible && decider == (1..=20).find(|&a| minority(a)).unwrap_or(0);
                let targets: Vec<i64> = (1..=20).filter(|&t| t != decider).collect();
                let weights: Vec<f64> = targets
                    .iter()
                    .map(|&t| {
                        let same = minority(t) == minority(decider);
                        let w = 1.0 + if same { bias } else { 0.0 } + 0.3 * noise(&[seed, decider, t, visible as i64]);
                        if extreme && !same { 0.0 } else { w.max(0.05) }
                    })
                    .collect();
                let total: f64 = weights.iter().sum();
                for (&target, w) in targets.iter().zip(&weights) {
                    rows.push(Dyad::from_membership(
                        (DesignKey::default(), labels, 5),
                        seed,
                        (decider, target),
                        minority,
                        100.0 * w / total,
                    ));
                }
            }
        }
    }
    let dyads = DyadTable::new("test", rows).unwrap();
    let tables = analyze_minimal_group(&dyads, &MinimalGroupOptions::default()).unwrap();
    Results {
        source: PathBuf::from("test"),
        conformity: None,
        minimal_group: Some(MinimalGroupResults {
            runs: Vec::new(),
            dyads,
            tables,
            quality: empty("quality"),
            analysis: Provenance::default(),
        }),
        empty_runs: Vec::new(),
        plain_tables: Vec::new(),
    }
}

#[test]
fn minimal_group_verdicts_rest_on_societies() {
    // Eight societies: the planted effects replicate, each verdict naming its test and n.
    let all = compare_headlines(&societies(8)).unwrap();
    for (id, unit) in
        [("favouritism_visible", "societies"), ("minority_gap", "societies"), ("extreme_allocations", "seeds")]
    {
        let h = headline(&all, id);
        assert_eq!(h.verdict, Verdict::Replicates, "{id}: {h:?}");
        assert!(h.this_run.contains(&format!("8 {unit}, p = 0.008")), "{id}: {}", h.this_run);
    }
    let prevalence = headline(&all, "prevalence");
    assert!(
        prevalence
            .this_run
            .contains("model · visible: 100.0% of minority deciders; Wilcoxon signed-rank of share − 0.5 over societies, 8 societies"),
        "{}",
        prevalence.this_run
    );
    // Hidden labels are noise around zero: the share of deciders above zero is not above 50%, the
    // paper's reading of group-blind allocation (a one-sided question: no group-blind agent can be
    // significantly below 50%, so "below" could never be shown).
    assert_eq!(prevalence.verdict, Verdict::Replicates, "{prevalence:?}");
    assert!(
        prevalence.this_run.contains("model · hidden: ")
            && prevalence.this_run.contains("(one-sided, above), 8 societies, p = "),
        "{}",
        prevalence.this_run
    );
    // Hidden-label deciders who favour their unseen group: significantly above 50%.
    let biased = compare_headlines(&societies_with(8, 1.0)).unwrap();
    let prevalence = headline(&biased, "prevalence");
    assert_eq!(prevalence.verdict, Verdict::DoesNotReplicate, "{prevalence:?}");
    assert!(
        prevalence.basis.starts_with("model · hidden: significantly above 50% (one-sided p = "),
        "{}",
        prevalence.basis
    );
    assert_eq!(headline(&all, "bh_survivors").verdict, Verdict::Replicates);
    // No reasoning modes in this run.
    assert_eq!(headline(&all, "reasoning_interaction").verdict, Verdict::NotInRun);

    // One society: nothing can be decided, whatever the means.
    let all = compare_headlines(&societies(1)).unwrap();
    for id in
        ["favouritism_visible", "minority_gap", "prevalence", "extreme_allocations", "bh_survivors", "hidden_floor"]
    {
        let h = headline(&all, id);
        assert_eq!(h.verdict, Verdict::Inconclusive, "{id}: {h:?}");
    }
}

#[test]
fn the_report_states_verdicts_with_their_basis_and_links_the_deviations() {
    let work = tempfile::tempdir().unwrap();
    let results =
        load_results(&common::stored_results(&work.path().join("results"), common::Variant::Planted), &mut |_| {})
            .unwrap();
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let deviations = std::fs::read_to_string(&written.deviations).unwrap();
    assert!(deviations.contains("ρ = 0.97 with p < 10⁻¹⁰"), "the copy is docs/deviations.md");
    let html = std::fs::read_to_string(&written.html).unwrap();
    assert!(html.contains("<a href=\"deviations.md\">deviations.md</a>"));
    let md = std::fs::read_to_string(&written.markdown).unwrap();
    assert!(md.contains("[deviations.md](deviations.md)"));
    // The fixture has four societies per cell: a seed-level test cannot reach 0.05, so the per-cell BH
    // count is inconclusive and says why, in both pages.
    let all = compare_headlines(&results).unwrap();
    let h = headline(&all, "bh_survivors");
    assert_eq!(h.verdict, Verdict::Inconclusive);
    assert!(h.basis.contains("with 4 seeds the smallest attainable p is 0.125"), "{}", h.basis);
    assert!(md.contains("**inconclusive**: ") && html.contains("class=\"inconclusive\""));
    assert!(md.contains(&h.basis.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")));
    // Every rule cites its committed error rates (docs/calibration.csv), in both pages.
    let hidden = herd_analysis::calibration::shipped_rates("hidden_floor").unwrap();
    let (verdict, rate) = hidden.false_verdict;
    assert_eq!(verdict, Verdict::DoesNotReplicate, "a floor's false verdict is a refutation of a true floor");
    let cited = format!("reads does not replicate (a false verdict) in {} of runs of an agent with none", rate.text());
    assert!(html.contains(&cited), "{cited}");
    assert!(md.contains(&cited.replace('[', "\\[").replace(']', "\\]")), "{cited}");
    assert_eq!(md.matches("Calibrated on the paper's full design").count(), all.len());
}

/// Societies of 10 agents, m = 3, 4, 5, two models × two instruments × two swap passes × both label
/// conditions, 8 seeds, written as a plain `allocation_dyads.csv`. In-group weight bias per
/// (model, instrument, labels, m, seed): model `a`'s base m = 3 cell barely favours (≈ 0.5 points,
/// below the paper's 0.84) while its m = 4 and 5 cells favour strongly; model `b`'s paraphrase hidden
/// cells favour by ≈ 1 point (a floor violation) while every base hidden cell is symmetric noise.
fn two_model_dyads_csv(path: &std::path::Path) {
    use std::fmt::Write as _;
    let mut csv = String::from(
        "model,instrument,swap_pass,labels,m,seed,decider,target,minority_decider,minority_target,same_group,points\n",
    );
    // Hidden-label noise: a seed-level bias symmetric in sign, so no floor statistic moves.
    let symmetric = [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0];
    for (mi, model) in ["a", "b"].into_iter().enumerate() {
        for (ii, instrument) in ["base", "paraphrase"].into_iter().enumerate() {
            for (pi, pass) in ["original", "swapped"].into_iter().enumerate() {
                for labels in ["visible", "hidden"] {
                    for m in [3_i64, 4, 5] {
                        for seed in 0..8_i64 {
                            let jitter = 1.0 + 0.1 * noise(&[mi as i64, ii as i64, pi as i64, m, seed]);
                            let bias = match (labels, model, instrument, m) {
                                ("visible", "a", "base", 3) => 0.05 * jitter,
                                ("visible", "a", _, _) => 0.8 * jitter,
                                ("visible", _, _, _) => 0.5 * jitter,
                                ("hidden", "b", "paraphrase", _) => 0.1 * jitter,
                                _ => 0.004 * symmetric[seed as usize],
                            };
                            let minority = |agent: i64| (agent * 7 + seed * 3) % 10 < m;
                            for decider in 0..10_i64 {
                                let targets: Vec<i64> = (0..10).filter(|&t| t != decider).collect();
                                let weights: Vec<f64> = targets
                                    .iter()
                                    .map(|&t| 1.0 + if minority(t) == minority(decider) { bias } else { 0.0 })
                                    .collect();
                                let total: f64 = weights.iter().sum();
                                for (&target, w) in targets.iter().zip(&weights) {
                                    let same = minority(target) == minority(decider);
                                    writeln!(
                                        csv,
                                        "{model},{instrument},{pass},{labels},{m},{seed},{decider},{target},{},{},{},{}",
                                        u8::from(minority(decider)),
                                        u8::from(minority(target)),
                                        u8::from(same),
                                        100.0 * w / total
                                    )
                                    .unwrap();
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    std::fs::write(path, csv).unwrap();
}

#[test]
fn per_model_claims_are_judged_per_model_on_the_base_instrument() {
    let work = tempfile::tempdir().unwrap();
    let csv = work.path().join("allocation_dyads.csv");
    two_model_dyads_csv(&csv);
    // What `herd report --results TABLES` reads and writes.
    let results = load_results(&csv, &mut |_| {}).unwrap();
    let tables = &results.minimal_group.as_ref().unwrap().tables;
    // The fixture is what it says: model a's base m = 3 visible cell (both passes) sits below +0.84
    // with an interval that excludes it, the cell-level rule's "does not replicate".
    let t = &tables.seed_tests;
    let cell = (0..t.n_rows())
        .find(|&r| {
            [("model", "a"), ("instrument", "base"), ("swap_pass", "both"), ("labels", "visible")]
                .iter()
                .all(|(c, v)| t.text(c, r) == Some(*v))
                && t.number("m", r) == Some(3.0)
                && t.text("deciders", r) == Some("all")
                && t.text("measure", r) == Some("favouritism")
        })
        .unwrap();
    let cell_mean = t.number("mean", cell).unwrap();
    assert!(cell_mean > 0.0 && cell_mean < 0.84, "m = 3 cell mean {cell_mean}");

    let all = compare_headlines(&results).unwrap();
    let h = headline(&all, "favouritism_visible");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    // The estimand is stated, per model, with the seed-level test beside it, on 24 societies (3 m × 8).
    assert!(h.this_run.starts_with("Per model: mean favouritism (mean to same-group minus"), "{}", h.this_run);
    assert!(h.this_run.contains("the base instrument") && h.this_run.contains("both swap passes"), "{}", h.this_run);
    assert!(h.this_run.contains(" points/target; GEE same_group +"), "{}", h.this_run);
    assert!(h.this_run.contains("Wilcoxon signed-rank over societies, 24 societies, p = 1.2e-7"), "{}", h.this_run);
    // A GEE on 24 clusters prints no normal-theory p.
    assert!(!h.this_run.contains("GEE robust z"), "{}", h.this_run);

    // The hidden floor on the base cells holds; model b's paraphrase violation is its own row.
    let floor = headline(&all, "hidden_floor");
    assert_eq!(floor.verdict, Verdict::Replicates, "{floor:?}");
    assert!(!floor.this_run.contains("paraphrase"), "{}", floor.this_run);
    let paraphrase = headline(&all, "hidden_floor_paraphrase");
    assert_eq!(paraphrase.verdict, Verdict::Replicates, "{paraphrase:?}");
    assert!(
        paraphrase.basis.starts_with("b · paraphrase: the base floor holds and the paraphrase breaks it: "),
        "{}",
        paraphrase.basis
    );
    assert!(paraphrase.this_run.contains("a · paraphrase: "), "{}", paraphrase.this_run);
    // Each pass alone is a robustness row of its own; the paraphrase favouritism too.
    let per_pass = headline(&all, "favouritism_per_pass");
    assert!(per_pass.this_run.contains("a · original pass: ") && per_pass.this_run.contains("b · swapped pass: "));
    assert_eq!(headline(&all, "favouritism_paraphrase").verdict, Verdict::Replicates);

    // And the written report says so.
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let md = std::fs::read_to_string(&written.markdown).unwrap();
    assert!(md.contains("hidden_floor_paraphrase") || md.contains("R1-Distill-Llama-8B rose to 0.74–1.31"), "{md}");
}

#[test]
fn a_model_at_chance_is_not_the_papers_population() {
    // Two models whose p_wrong rises from N = 0 to 10 on eight trial pairs: `solver` is right 96% of
    // the time alone, `chance` only half the time (the quick model's 0.58 on A whatever is correct).
    let mut rows = Vec::new();
    for (model, baseline) in [("solver", 0.04), ("chance", 0.5)] {
        for seed in 0..8 {
            for (n, p) in [(0, baseline + 0.002 * seed as f64), (10, baseline + 0.3 + 0.01 * seed as f64)] {
                let mut t = trial("group_size", "", n, seed, p);
                t.model = model.into();
                rows.push(t);
            }
        }
    }
    let all = compare_headlines(&conformity_results(rows.clone())).unwrap();
    let h = headline(&all, "group_size_rise");
    // The solver decides; the chance model's row is not the paper's claim, with its baseline accuracy,
    // and keeps the crowd-following reading beside it.
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.basis.contains("outside the paper's population: chance: baseline accuracy lines 0.493"), "{}", h.basis);
    assert!(h.basis.contains("as crowd-following from that baseline (herd's descriptive reading) the row replicates"));
    assert!(
        h.this_run.starts_with("Population: the paper's claim is on images a model solves alone"),
        "{}",
        h.this_run
    );
    // The chance model alone: the headline itself is outside the population, never "replicates".
    let alone: Vec<ConformityTrial> = rows.into_iter().filter(|t| t.model == "chance").collect();
    let all = compare_headlines(&conformity_results(alone)).unwrap();
    let h = headline(&all, "group_size_rise");
    assert_eq!(h.verdict, Verdict::NotPaperPopulation, "{h:?}");
    assert_eq!(h.verdict.text(), "not the paper's population");
}

#[test]
fn a_pooled_source_contrast_leaves_out_a_model_at_chance() {
    // The source-strength rows pool models. `solver` (right 96% alone) conforms more to experts and
    // less to kids than to participants; `chance` (right half the time alone) the other way round,
    // and more strongly, so pooling it in would reverse the verdict.
    let mut rows = Vec::new();
    for (model, baseline, sign) in [("solver", 0.04, 1.0), ("chance", 0.5, -3.0)] {
        for seed in 0..8 {
            let jitter = 0.002 * seed as f64;
            for (n, p) in [(0, baseline + jitter), (10, baseline + 0.3 + jitter)] {
                let mut t = trial("group_size", "", n, seed, p);
                t.model = model.into();
                rows.push(t);
            }
            for (level, shift) in [("participants", 0.0), ("experts", 0.05 * sign), ("kids", -0.05 * sign)] {
                for (n, rise) in [(0, 0.0), (10, 0.3)] {
                    // The contrast varies by trial index (a constant difference has no t-test).
                    let p = (baseline + rise + shift * (1.0 + 10.0 * wobble(seed)) + jitter).clamp(0.0, 1.0);
                    let mut t = trial("source_strength", level, n, seed, p);
                    t.model = model.into();
                    rows.push(t);
                }
            }
        }
    }
    let all = compare_headlines(&conformity_results(rows.clone())).unwrap();
    let h = headline(&all, "source_strength");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.this_run.starts_with("Population: the paper's claim is on images a model solves alone"),
        "{}",
        h.this_run
    );
    assert!(h.this_run.contains("chance: baseline accuracy lines 0.493"), "{}", h.this_run);
    assert!(h.this_run.contains("left out of the pooled contrast"), "{}", h.this_run);
    assert!(h.this_run.contains("8 seeds"), "only the solver's 8 units are pooled: {}", h.this_run);

    // The chance model alone: the pooled claim is outside the population, never "does not replicate".
    let alone: Vec<ConformityTrial> = rows.into_iter().filter(|t| t.model == "chance").collect();
    let all = compare_headlines(&conformity_results(alone)).unwrap();
    let h = headline(&all, "source_strength");
    assert_eq!(h.verdict, Verdict::NotPaperPopulation, "{h:?}");
    assert!(h.basis.contains("as crowd-following from that baseline"), "{}", h.basis);
}

#[test]
fn tasks_alike_holds_for_overlapping_curves_and_fails_for_a_task_far_apart() {
    let rise = |n: u32| 0.05 + 0.07 * f64::from(n);
    let alike =
        family_trials("group_size", &[""], &["lines", "color", "dots"], &[0, 5, 10], |_, _, n, s| rise(n) + wobble(s));
    let all = compare_headlines(&conformity_results(alike)).unwrap();
    let h = headline(&all, "tasks_alike");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.this_run.contains("m · color − dots: p_wrong_full: AUC 0.400 vs 0.400 over N ∈ {0, 5, 10};"),
        "{}",
        h.this_run
    );
    assert!(h.this_run.contains("Welch t (8 vs 8, df "), "{}", h.this_run);
    assert!(h.basis.contains("all 3 rows replicate"), "{}", h.basis);

    // Dots 0.3 above the others at every N: beyond the ±0.10 margin, so the curves are not alike.
    let apart = family_trials("group_size", &[""], &["lines", "dots"], &[0, 5, 10], |task, _, n, s| {
        rise(n) + wobble(s) + if task == "dots" && n > 0 { 0.3 } else { 0.0 }
    });
    let all = compare_headlines(&conformity_results(apart)).unwrap();
    let h = headline(&all, "tasks_alike");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("lies beyond ±0.100: an effect larger than the margin"), "{}", h.basis);

    // Flat curves (no rise with N) alike in every task: the claim compares rising curves, so with
    // none in the run it says nothing, and says which effect is missing.
    let flat =
        family_trials("group_size", &[""], &["lines", "color", "dots"], &[0, 5, 10], |_, _, _, s| 0.05 + wobble(s));
    let all = compare_headlines(&conformity_results(flat)).unwrap();
    assert_ne!(headline(&all, "group_size_rise").verdict, Verdict::Replicates);
    let h = headline(&all, "tasks_alike");
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert_eq!(h.verdict_text(), "inconclusive: presupposes conformity rising with the wrong replies, missing here");
    assert!(
        h.basis.starts_with("presupposes conformity rising with the wrong replies (`group_size_rise`: "),
        "{}",
        h.basis
    );

    // One task: nothing to compare, not in the run.
    let one = family_trials("group_size", &[""], &["lines"], &[0, 10], |_, _, n, s| rise(n) + wobble(s));
    let all = compare_headlines(&conformity_results(one)).unwrap();
    assert_eq!(headline(&all, "tasks_alike").verdict, Verdict::NotInRun);
}

#[test]
fn the_neutral_curve_is_judged_between_same_and_different_on_the_n_both_ran() {
    // Neutral (group size) on N = 0, 5, 10; the social families on N = 0 and 10 only.
    let mut rows = family_trials("group_size", &[""], &["lines"], &[0, 5, 10], |_, _, n, s| {
        0.05 + 0.04 * f64::from(n) + wobble(s)
    });
    for family in ["nationality", "minimal_group"] {
        rows.extend(family_trials(family, &["same", "different"], &["lines"], &[0, 10], |_, level, n, s| {
            let shift = if level == "same" { 0.2 } else { -0.2 };
            0.05 + (0.04 + shift / 10.0) * f64::from(n) + wobble(s) / 2.0
        }));
    }
    let all = compare_headlines(&conformity_results(rows.clone())).unwrap();
    let h = headline(&all, "neutral_between");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("m · lines · same − neutral: p_wrong_full: AUC 0.350 vs 0.250"), "{}", h.this_run);
    assert!(h.this_run.contains("over N ∈ {0, 10}"), "the N both sides ran: {}", h.this_run);

    // Different above neutral: the order fails.
    let flipped: Vec<ConformityTrial> = rows
        .into_iter()
        .map(|mut t| {
            if t.level == "different" {
                t.p_wrong_full = (t.p_wrong_full + 0.5).min(1.0);
            }
            t
        })
        .collect();
    let all = compare_headlines(&conformity_results(flipped)).unwrap();
    assert_eq!(headline(&all, "neutral_between").verdict, Verdict::DoesNotReplicate);
}

#[test]
fn temporal_and_spatial_effects_are_compared_and_their_significance_counted() {
    let family = |name: &str, effect: f64| {
        family_trials(name, &["near", "far"], &["lines"], &[0, 10], move |_, level, n, s| {
            let lift = if level == "near" { effect + wobble(s) } else { 0.0 };
            0.1 + 0.03 * f64::from(n) + lift * f64::from(n) / 10.0
        })
    };
    let mut rows = family("temporal", 0.2);
    rows.extend(family("spatial", 0.2));
    let all = compare_headlines(&conformity_results(rows)).unwrap();
    let h = headline(&all, "temporal_vs_spatial");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.this_run.starts_with("near − far significant and positive (Wilcoxon signed-rank p < 0.05) in 1 of 1 temporal and 1 of 1 spatial rows"),
        "{}",
        h.this_run
    );

    // A temporal effect three times the spatial one is not comparable.
    let mut rows = family("temporal", 0.6);
    rows.extend(family("spatial", 0.2));
    let all = compare_headlines(&conformity_results(rows)).unwrap();
    assert_eq!(headline(&all, "temporal_vs_spatial").verdict, Verdict::DoesNotReplicate);
}

/// Minority deciders favour strongly and majority deciders mildly at m = 3; at m = 5 (equal groups
/// of a society of 10) both alike.
fn closing(_: &str, _: &str, m: i64, minority: bool) -> f64 {
    match (m, minority) {
        (5, _) => 0.8,
        (_, true) => 1.5,
        _ => 0.4,
    }
}

#[test]
fn the_gap_closes_at_equal_groups_and_excess_share_confirms_it() {
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 5], 8, closing, false)).unwrap();
    let h = headline(&all, "gap_closes_equal_groups");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("q: ") && h.this_run.contains("(m = 5)"), "{}", h.this_run);
    assert!(h.this_run.contains("seed-level Wilcoxon signed-rank over societies, 8 societies"), "{}", h.this_run);
    assert!(h.basis.starts_with("the row replicates (seed-level Wilcoxon"), "{}", h.basis);
    let excess = headline(&all, "excess_share_gap");
    assert_eq!(excess.verdict, Verdict::Replicates, "{excess:?}");
    assert!(excess.this_run.contains("(m = 3)") && excess.this_run.contains("8 societies, p = 0.008"));

    // The minority asymmetry still there at equal groups: the gap does not close; majority deciders
    // favouring more than minority deciders turn the excess-share gap round.
    let open = |_: &str, _: &str, _: i64, minority: bool| if minority { 0.2 } else { 1.5 };
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 5], 8, open, false)).unwrap();
    let h = headline(&all, "gap_closes_equal_groups");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("lies beyond ±2.380: an effect larger than the margin"), "{}", h.basis);
    let excess = headline(&all, "excess_share_gap");
    assert_eq!(excess.verdict, Verdict::DoesNotReplicate, "{excess:?}");
    assert!(excess.basis.contains("significant in the opposite direction"), "{}", excess.basis);

    // Three societies: neither test can decide, however narrow the interval.
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 5], 3, closing, false)).unwrap();
    for id in ["gap_closes_equal_groups", "excess_share_gap"] {
        let h = headline(&all, id);
        assert_eq!(h.verdict, Verdict::Inconclusive, "{id}: {h:?}");
        assert!(h.basis.contains("with 3 societies the smallest attainable p is 0.250"), "{id}: {}", h.basis);
    }
    // Without equal groups the claim is not in the run.
    let all = compare_headlines(&planted(&[("q", "on")], &[3], 8, closing, false)).unwrap();
    assert_eq!(headline(&all, "gap_closes_equal_groups").verdict, Verdict::NotInRun);
}

#[test]
fn one_models_majority_reversal_at_the_smallest_m_replicates() {
    // The paper's exception model's majority deciders at m = 3 give the small out-group more (its
    // R1-Distill-Llama-8B, matched within the model id); `q` favours everywhere.
    const R1: &str = "deepseek-r1-distill-llama-8b";
    let reversal = |model: &str, _: &str, m: i64, minority: bool| match (model, m, minority) {
        (R1, 3, false) => -0.3,
        (_, _, true) => 1.5,
        _ => 0.4,
    };
    let all = compare_headlines(&planted(&[("q", "on"), (R1, "on")], &[3, 4], 8, reversal, false)).unwrap();
    let h = headline(&all, "majority_reversal");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.basis.starts_with(&format!("{R1}: points/target: p < 0.05 in the paper's direction")), "{}", h.basis);
    assert!(h.this_run.contains(&format!("{R1}: majority deciders at m = 3: -")), "{}", h.this_run);
    assert!(h.this_run.contains("excess share -0."), "{}", h.this_run);
    assert!(h.this_run.contains("q: majority deciders at m = 3: +"), "{}", h.this_run);
    // `q` is like the paper's other models: said, and not counted against the exception.
    assert!(h.basis.contains("q: no reversal, like the paper's other models"), "{}", h.basis);

    // The paper's exception model in the run without its reversal: the exception is not found.
    let all = compare_headlines(&planted(&[("q", "on"), (R1, "on")], &[3, 4], 8, closing, false)).unwrap();
    let h = headline(&all, "majority_reversal");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    // Without it, a model that does not reverse is like the paper's other three: the claim's subject
    // is not in this run.
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, closing, false)).unwrap();
    let h = headline(&all, "majority_reversal");
    assert_eq!(h.verdict, Verdict::NotInRun, "{h:?}");
    assert!(h.basis.contains("the paper's exception, R1-Distill-Llama-8B, is not this model"), "{}", h.basis);
    // Three societies decide nothing.
    let all = compare_headlines(&planted(&[("q", "on"), (R1, "on")], &[3, 4], 3, reversal, false)).unwrap();
    assert_eq!(headline(&all, "majority_reversal").verdict, Verdict::Inconclusive);
}

#[test]
fn the_gap_falls_with_thinking_off_and_stays_above_zero() {
    // Thinking on: minority 1.5, majority 0.4 (a gap of ≈ 9 points/target at m = 3 of 10);
    // off: 0.9 and 0.7 (≈ 3).
    let falls = |_: &str, reasoning: &str, _: i64, minority: bool| match (reasoning, minority) {
        ("on", true) => 1.5,
        ("on", false) => 0.4,
        (_, true) => 0.9,
        _ => 0.7,
    };
    let modes = [("q", "on"), ("q", "off")];
    let all = compare_headlines(&planted(&modes, &[3, 4], 8, falls, false)).unwrap();
    let h = headline(&all, "reasoning_gap");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("both reasoning modes"), "{}", h.this_run);
    assert!(h.this_run.contains("q · gap on − off: +"), "{}", h.this_run);
    assert!(h.this_run.contains("(m = 3, 4, paired by society)"), "{}", h.this_run);
    assert!(h.this_run.contains("q · gap with thinking off: +"), "{}", h.this_run);
    assert!(h.basis.contains("all 2 rows replicate (seed-level Wilcoxon signed-rank over societies, 16 societies)"));

    // The gap no smaller with thinking off: the paper's fall of 3.54 is ruled out.
    let same = |_: &str, _: &str, _: i64, minority: bool| if minority { 1.5 } else { 0.4 };
    let all = compare_headlines(&planted(&modes, &[3, 4], 8, same, false)).unwrap();
    let h = headline(&all, "reasoning_gap");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("q · gap on − off: "), "{}", h.basis);
    // Two societies per mode and m decide nothing (4 paired societies).
    let all = compare_headlines(&planted(&modes, &[3, 4], 2, falls, false)).unwrap();
    assert_eq!(headline(&all, "reasoning_gap").verdict, Verdict::Inconclusive);
    // One mode only: not in the run.
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, falls, false)).unwrap();
    assert_eq!(headline(&all, "reasoning_gap").verdict, Verdict::NotInRun);
}

#[test]
fn bootstrap_and_robust_standard_errors_agree() {
    let results = planted(&[("q", "on")], &[3, 4], 8, closing, true);
    let all = compare_headlines(&results).unwrap();
    let h = headline(&all, "bootstrap_se_agreement");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("q · on · m = 3 · same_group: bootstrap SE "), "{}", h.this_run);
    assert!(h.this_run.contains("q · on · m = 4 · same_group:minority_decider: "), "{}", h.this_run);
    // Four comparisons (two cells, two terms): each allows the normal quantile at 1 − 0.025/4 Monte Carlo
    // errors, so that the four together exceed it by resampling noise in at most 5% of runs.
    assert!(h.this_run.contains("from 400 resamples, z = 2.50)"), "{}", h.this_run);

    // The favouritism rows' robust SE set to 0.5 (so the paper's 0.003 is never the tolerance), their
    // bootstrap SE a share `by` above it, from `resamples` resamples.
    let shifted = |by: f64, resamples: f64| {
        let mut results = results.clone();
        let tables = &mut results.minimal_group.as_mut().unwrap().tables;
        let gee = &mut tables.gee;
        let term = |r: usize| gee.text("term", r) == Some("same_group") && gee.text("analysis", r) == Some("cell");
        let rows: Vec<usize> = (0..gee.n_rows()).filter(|&r| term(r)).collect();
        for (name, se) in [("se_robust", 0.5), ("se_bootstrap", 0.5 * (1.0 + by))] {
            let column = gee.columns.iter_mut().find(|(n, _)| n == name).unwrap();
            let ColumnValues::Float(values) = &mut column.1 else { panic!("{name} is a float column") };
            for &r in &rows {
                values[r] = Some(se);
            }
        }
        let column = tables.bootstrap.columns.iter_mut().find(|(n, _)| n == "resamples").unwrap();
        match &mut column.1 {
            ColumnValues::Integer(values) => values.iter_mut().for_each(|v| *v = Some(resamples as i64)),
            ColumnValues::Float(values) => values.iter_mut().for_each(|v| *v = Some(resamples)),
            _ => panic!("resamples is a number column"),
        }
        headline(&compare_headlines(&results).unwrap(), "bootstrap_se_agreement").verdict
    };
    // 400 resamples: the Monte Carlo error (2.50 · SE / √798 = 8.9% of it) is below a tenth of the SE,
    // which is the tolerance: 9% apart agree, 11% do not.
    assert_eq!(shifted(0.09, 400.0), Verdict::Replicates);
    assert_eq!(shifted(0.11, 400.0), Verdict::DoesNotReplicate);
    // 50 resamples: the family-wise Monte Carlo error (2.50 / √98 = 25%) is: 20% apart agree (beyond a
    // single comparison's 1.96 / √98 = 19.8%), 30% do not.
    assert_eq!(shifted(0.20, 50.0), Verdict::Replicates);
    assert_eq!(shifted(0.30, 50.0), Verdict::DoesNotReplicate);
    // A bootstrap SE half again the robust one is no agreement.
    assert_eq!(shifted(0.5, 400.0), Verdict::DoesNotReplicate);

    // Five societies: too few to compare; no GEE bootstrap: not in the run.
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 5, closing, true)).unwrap();
    assert_eq!(headline(&all, "bootstrap_se_agreement").verdict, Verdict::Inconclusive);
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, closing, false)).unwrap();
    assert_eq!(headline(&all, "bootstrap_se_agreement").verdict, Verdict::NotInRun);
}

/// Every conformity family for one model, on 8 trial indices at N = 0, 5 and 10: p_wrong(N) rises
/// from `baseline` by 0.3 at N = 10, each level shifted a little and every trial jittered. The
/// difficulty family has 6 levels of 4 images each with their logits (the correct answer's logit
/// at N = 0 is the performance of fig. 3b) and p_wrong(0) from those logits.
fn every_family(model: &str, baseline: f64) -> Vec<ConformityTrial> {
    let m = model.len() as i64;
    let p = |n: u32, shift: f64, parts: &[i64]| {
        (baseline + 0.03 * f64::from(n) + shift * f64::from(n) / 10.0 + 0.02 * noise(parts)).clamp(0.0, 1.0)
    };
    let families: [(&str, &[(&str, f64)]); 10] = [
        ("group_size", &[("", 0.0)]),
        // A second task's group-size curves, for the comparison of tasks.
        ("group_size:dots", &[("", 0.0)]),
        ("unanimity", &[("wrong_100", 0.1), ("wrong_80", 0.0), ("wrong_50", -0.1)]),
        ("normative", &[("public", 0.05), ("private", 0.0)]),
        ("source_strength", &[("participants", 0.0), ("experts", 0.05), ("kids", -0.05)]),
        ("nationality", &[("same", 0.05), ("different", -0.05)]),
        ("ethnicity", &[("same", 0.05), ("different", -0.05)]),
        ("minimal_group", &[("same", 0.05), ("different", -0.05)]),
        ("spatial", &[("near", 0.05), ("far", 0.0)]),
        ("temporal", &[("near", 0.05), ("far", 0.0)]),
    ];
    let mut rows = Vec::new();
    for (f, (family, levels)) in families.iter().enumerate() {
        for (l, (level, shift)) in levels.iter().enumerate() {
            for n in [0, 5, 10] {
                for seed in 0..8 {
                    let (family, task) = family.split_once(':').unwrap_or((family, "lines"));
                    let mut t =
                        trial(family, level, n, seed, p(n, *shift, &[m, f as i64, l as i64, i64::from(n), seed]));
                    t.model = model.into();
                    t.task = task.into();
                    if family == "normative" {
                        t.paraphrase = Some(format!("paraphrase {seed}"));
                    }
                    rows.push(t);
                }
            }
        }
    }
    // The difficulty pool: A correct on even images; the correct answer's logit sets p_wrong(0).
    let logit_gap = (1.0 - baseline) / baseline; // odds of right to wrong at N = 0
    for level in 1..=6_i64 {
        for image in 0..4_i64 {
            let id = level * 10 + image;
            let correct_is_a = image % 2 == 0;
            let gap = logit_gap.ln() + 0.3 * noise(&[m, id]);
            let (correct, wrong) = (1.0 + gap, 1.0);
            for n in [0, 5, 10] {
                let p_wrong = if n == 0 {
                    1.0 / (1.0 + (correct - wrong).exp())
                } else {
                    p(n, 0.02 * level as f64, &[m, id, i64::from(n)])
                };
                let mut t = trial("difficulty", &level.to_string(), n, image, p_wrong);
                t.model = model.into();
                t.difficulty_level = Some(level);
                t.difficulty_index = Some(level as f64 + 0.2 * noise(&[m, id, 7]));
                t.image_id = Some(format!("{model}-{id}"));
                t.correct_label = Some(if correct_is_a { "A" } else { "B" }.into());
                let (a, b) = if correct_is_a { (correct, wrong) } else { (wrong, correct) };
                t.logit_a = Some(a);
                t.logit_b = Some(b);
                rows.push(t);
            }
        }
    }
    rows
}

#[test]
fn every_conformity_row_of_a_model_at_chance_is_outside_the_population() {
    let conformity_ids = |all: &[HeadlineComparison]| -> Vec<String> {
        all.iter().filter(|h| h.headline.study == "conformity").map(|h| h.headline.id.clone()).collect()
    };
    // A model that solves its images alone (p_wrong 0.04 at N = 0): no row is outside the population,
    // and every conformity headline has rows (unanimity and the difficulty family among them).
    let solver = compare_headlines(&conformity_results(every_family("solver", 0.04))).unwrap();
    for id in conformity_ids(&solver) {
        let h = headline(&solver, &id);
        // Its curve rises steadily: the saturation claim has its row, and it is not that claim's subject.
        if id == "saturation" {
            assert!(h.basis.contains("not the claim's subject"), "{}", h.basis);
            continue;
        }
        assert_ne!(h.verdict, Verdict::NotInRun, "{id}: {h:?}");
        assert_ne!(h.verdict, Verdict::NotPaperPopulation, "{id}: {h:?}");
        assert!(!h.this_run.contains("not the paper's population"), "{id}: {}", h.this_run);
    }
    // The same design at chance (p_wrong 0.5 at N = 0): every conformity headline, the unanimity rows
    // ("model · task · level − level") and the per-task performance fit (pooled over models) included.
    let chance = compare_headlines(&conformity_results(every_family("chance", 0.5))).unwrap();
    for id in conformity_ids(&chance) {
        let h = headline(&chance, &id);
        assert_eq!(h.verdict, Verdict::NotPaperPopulation, "{id}: {h:?}");
        assert!(h.basis.contains("(< 0.75): not the paper's population"), "{id}: {}", h.basis);
        assert!(h.this_run.starts_with("Population: the paper's claim"), "{id}: {}", h.this_run);
    }
    let unanimity = headline(&chance, "unanimity_dissent");
    assert!(
        unanimity.basis.contains("chance · lines · wrong_100 − wrong_80: baseline accuracy"),
        "{}",
        unanimity.basis
    );
    let performance = headline(&chance, "performance_effect");
    assert!(performance.basis.contains("lines: chance: baseline accuracy lines 0.504"), "{}", performance.basis);

    // Both models: the solver decides every pooled claim alone, and the chance model's rows are set aside.
    let mut both = every_family("solver", 0.04);
    both.extend(every_family("chance", 0.5));
    let all = compare_headlines(&conformity_results(both)).unwrap();
    for id in conformity_ids(&all) {
        assert_ne!(headline(&all, &id).verdict, Verdict::NotPaperPopulation, "{id}");
    }
    let performance = headline(&all, "performance_effect");
    assert!(performance.this_run.contains("left out of the pooled contrast"), "{}", performance.this_run);
}

/// The difficulty pool of one model inside the population (p_wrong 0.04 at N = 0 of the group-size
/// family): 10 levels of 30 images at N = 0, 2 and 4. The correct answer's logit at N = 0 (fig. 3b's
/// performance) varies by image, and the N = 0 trial's p_wrong is read from those same logits, as a
/// model's is; p_wrong at N > 0 rises with the level and falls by `effect` per unit of the image's
/// performance draw (0: an agent with no performance effect).
fn difficulty_pool(effect: f64) -> Vec<ConformityTrial> {
    let mut rows = Vec::new();
    for seed in 0..8 {
        for n in [0, 10] {
            rows.push(trial("group_size", "", n, seed, if n == 0 { 0.04 } else { 0.6 } + 0.01 * wobble(seed)));
        }
    }
    for level in 1..=10_i64 {
        for image in 0..30_i64 {
            let id = level * 100 + image;
            let draw = noise(&[id, 1_001]);
            let correct = 3.0 + 1.5 * draw;
            for n in [0, 2, 4] {
                let p_wrong = if n == 0 {
                    // Two-way softmax of the correct logit against the wrong one at 0.
                    1.0 / (1.0 + correct.exp())
                } else {
                    let own = noise(&[id, 3_000 + i64::from(n)]);
                    (0.1 + 0.05 * level as f64 - effect * draw + 0.05 * own).clamp(0.0, 1.0)
                };
                let mut t = trial("difficulty", &level.to_string(), n, image, p_wrong);
                t.difficulty_level = Some(level);
                t.difficulty_index = Some(level as f64 + 0.5 * noise(&[id, 2_002]));
                t.image_id = Some(id.to_string());
                t.correct_label = Some("A".into());
                t.logit_a = Some(correct);
                t.logit_b = Some(0.0);
                rows.push(t);
            }
        }
    }
    rows
}

#[test]
fn performance_is_judged_on_conformity_without_the_n0_trial_it_shares() {
    let results = conformity_results(difficulty_pool(0.0));
    // The paper's whole-curve fit (the `difficulty_ols` table) reads the N = 0 trial twice: in the AUC
    // and, through its logits, as performance. Its β_performance is negative and significant for an
    // agent whose conformity does not depend on performance at all.
    let fits = results.conformity.as_ref().unwrap().tables.difficulty_fits();
    let whole = fits.iter().find(|f| f.measure == "p_wrong_full" && f.term == "performance").unwrap();
    assert!(whole.coef < 0.0 && whole.p < 0.05, "{whole:?}");
    // Read over N > 0 the β is no longer significant: the null claim is not refuted.
    let all = compare_headlines(&results).unwrap();
    let h = headline(&all, "performance_effect");
    assert_ne!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("conformity over N > 0"), "{}", h.this_run);
    assert!(h.this_run.contains("(whole curve, N = 0 included: -"), "{}", h.this_run);

    // With one N beside N = 0, conformity over N > 0 is p_wrong at that N: the same reading.
    let two_ns: Vec<ConformityTrial> = difficulty_pool(0.0).into_iter().filter(|t| t.n != 2).collect();
    let results = conformity_results(two_ns);
    let fits = results.conformity.as_ref().unwrap().tables.difficulty_fits();
    let whole = fits.iter().find(|f| f.measure == "p_wrong_full" && f.term == "performance").unwrap();
    assert!(whole.coef < 0.0 && whole.p < 0.05, "{whole:?}");
    let all = compare_headlines(&results).unwrap();
    let h = headline(&all, "performance_effect");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");

    // An agent whose conformity at N > 0 falls with performance by a tenth of the level effect's range
    // (0.02 per unit of its draw): significant, but far inside the margin (S4's smallest |β_difficulty|,
    // 0.548), so no performance effect as large as difficulty's: the null stands.
    let all = compare_headlines(&conformity_results(difficulty_pool(0.02))).unwrap();
    let h = headline(&all, "performance_effect");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("p = "), "the significant β is printed beside: {}", h.this_run);
    // One larger than the level effect (0.6 per unit of its draw) is caught.
    let all = compare_headlines(&conformity_results(difficulty_pool(0.6))).unwrap();
    let h = headline(&all, "performance_effect");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{}", h.this_run);
    assert!(h.basis.contains("lies beyond ±0.548: an effect larger than the margin"), "{}", h.basis);
}

#[test]
fn no_p_below_what_the_test_can_attain_and_no_interval_without_width() {
    // ρ = 1 on ten difficulty levels: the t approximation's p is far below 2/10!, the smallest p an
    // exact test on ten points attains, and the Fisher-z interval collapses to [1, 1].
    let mut rows = Vec::new();
    for level in 1..=10_i64 {
        for n in [0, 5] {
            let mut t = trial("difficulty", "", n, 0, 0.05 + if n == 5 { 0.05 * level as f64 } else { 0.0 });
            t.difficulty_level = Some(level);
            rows.push(t);
        }
    }
    let all = compare_headlines(&conformity_results(rows)).unwrap();
    let h = headline(&all, "difficulty_rho");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("p ≤ 5.5e-7 (the smallest an exact test attains at this n)"), "{}", h.this_run);
    assert!(!h.this_run.contains("[1.000, 1.000]"), "{}", h.this_run);
    assert!(!h.this_run.contains("p = 0"), "{}", h.this_run);

    // Every seed's unanimity drop exactly 0.3: no t-interval, but a statement that nothing varied.
    let all = compare_headlines(&conformity_results(unanimity(8, [0.8, 0.5, 0.2], |_, _| 0.0))).unwrap();
    let h = headline(&all, "unanimity_dissent");
    assert!(h.this_run.contains("no variation: every seed 0.300"), "{}", h.this_run);
    assert!(!h.this_run.contains("[0.300, 0.300]"), "{}", h.this_run);
    let number = h.number.as_ref().unwrap();
    assert_eq!(number.value_text(), "no variation: every seed +0.300, 8 seeds");
}

/// A run folder whose manifest names `model` and the reasoning modes its registry entry allows.
fn run_of(model: &str, reasoning_modes: &[&str]) -> herd_analysis::RunFolder {
    let mut manifest = herd_store::Manifest::new(herd_store::RunIdentity {
        experiment: "minimal-group".into(),
        study: "minimal_group".into(),
        experiment_sha256: "0".into(),
        model: model.into(),
        backend: "candle".into(),
        shard: "all".into(),
    });
    manifest.model = serde_json::json!({
        "backend": {"model": model},
        "registry": {"alias": model},
        "run_options": {"reasoning_modes": reasoning_modes},
    });
    herd_analysis::RunFolder { path: PathBuf::from(format!("runs/{model}")), manifest }
}

#[test]
fn a_model_that_does_not_reason_or_whose_allocations_were_repaired_is_not_the_papers_population() {
    // `q` reasons and its allocations parse; `s` allocates without reasoning, and most of its
    // allocations were rescaled by the parser (SmolLM2-135M in the quick run).
    let mut results = planted(&[("q", "on"), ("s", "on")], &[3, 4], 8, closing, false);
    let m = results.minimal_group.as_mut().unwrap();
    m.quality = table(
        "allocation_quality",
        vec![
            ("model", texts(&["q", "s"])),
            ("deciders", floats(&[Some(320.0), Some(320.0)])),
            ("parsed_share", floats(&[Some(1.0), Some(4.0 / 320.0)])),
        ],
    );
    m.runs = vec![run_of("q", &["on", "off"]), run_of("s", &["off"])];
    let all = compare_headlines(&results).unwrap();
    let h = headline(&all, "favouritism_visible");
    // `q` decides; `s` is named with its numbers, its own reading kept.
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.basis.contains(
            "outside the paper's population: s: 1% of its 320 allocations parsed as written (the rest rescaled or \
             filled; the paper's over 98.8%); no reasoning mode (it runs only off; the paper's models reason before \
             they allocate): not the paper's population; as written the row replicates"
        ),
        "{}",
        h.basis
    );
    assert!(h.this_run.starts_with("Population: the paper's models are reasoning models"), "{}", h.this_run);
    // `s` alone: every row (pooled ones too) is outside; no verdict about the paper's claim.
    let mut alone = planted(&[("s", "on")], &[3, 4], 8, closing, false);
    alone.minimal_group.as_mut().unwrap().runs = vec![run_of("s", &["off"])];
    let all = compare_headlines(&alone).unwrap();
    for id in ["favouritism_visible", "minority_gap", "prevalence", "bh_survivors", "hidden_floor"] {
        assert_eq!(headline(&all, id).verdict, Verdict::NotPaperPopulation, "{id}: {:?}", headline(&all, id));
    }
}

#[test]
fn difficulty_is_a_predictor_of_its_own_in_the_fig_3b_regression() {
    // Conformity rising by 0.05 a level: β_difficulty positive and significant in the same fit that
    // finds no performance effect.
    let all = compare_headlines(&conformity_results(difficulty_pool(0.0))).unwrap();
    let h = headline(&all, "difficulty_predicts");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("β_difficulty = "), "{}", h.this_run);
    assert!(h.this_run.contains("OLS on difficulty and performance, conformity over N > 0, HC3"), "{}", h.this_run);
    assert!(h.this_run.contains(", classical OLS p = "), "{}", h.this_run);
    // Conformity falling with difficulty (the difficulty trials mirrored at N > 0): refuted.
    let falling: Vec<ConformityTrial> = difficulty_pool(0.0)
        .into_iter()
        .map(|mut t| {
            if t.family == "difficulty" && t.n > 0 {
                t.p_wrong_full = 0.8 - t.p_wrong_full;
                t.p_wrong_ab = t.p_wrong_ab.map(|p| 0.8 - p);
            }
            t
        })
        .collect();
    let all = compare_headlines(&conformity_results(falling)).unwrap();
    let h = headline(&all, "difficulty_predicts");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("significant in the opposite direction"), "{}", h.basis);
}
