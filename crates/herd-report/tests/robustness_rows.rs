//! The minimal-group paper's robustness bounds (S3, S5) and the conformity paper's saturation (fig. 2a),
//! each judged on planted data that carries the paper's finding, data that breaks it, and data that
//! lacks what the claim needs: roster position, removing uniform fills, parse success, the nonce-label
//! bounds (swap-pass difference, token receipt), every minority block surviving correction, and a curve
//! saturating by N = 4.

#[allow(dead_code)]
mod common;
mod planted;

use common::noise;
use herd_analysis::{DesignKey, Dyad, DyadTable, HeadlineComparison, Labels, Results, Verdict, compare_headlines};
use planted::*;

/// What a planted society does beside favouring its group.
#[derive(Clone, Copy, Default)]
struct Plant {
    /// In-group targets presented first (else roster positions are shuffled independently of group).
    in_group_first: bool,
    /// Weight added per roster position (a target presented later draws more when positive).
    per_position: f64,
    /// Every `fill_every`-th decider's reply failed to parse and was filled uniformly (0: none).
    fill_every: i64,
    /// Without the optional columns (positions, names, fills) a plain table would lack.
    bare: bool,
    /// Weight added to every target named "wug", whichever group it is in (a name's own valence).
    wug_valence: f64,
    /// Added to visible minority deciders' bias in the swapped pass (a pass effect).
    swapped_minority_bias: f64,
}

const NAMES: [&str; 4] = ["wug", "dax", "blick", "fep"];

/// Societies of 10 (m = 3 and 4, 8 seeds, visible and hidden labels, two swap passes) of model `q`:
/// visible minority deciders weight their group by 1.5, majority deciders by 0.3, hidden labels by
/// none, each with a little noise.
fn societies(plant: Plant) -> Results {
    let mut rows = Vec::new();
    let mut decider_index = 0_i64;
    for labels in [Labels::Visible, Labels::Hidden] {
        for m in [3_i64, 4] {
            for seed in 0..8_i64 {
                let minority = |agent: i64| (agent * 7 + seed * 3) % 10 < m;
                let names = (NAMES[(seed % 4) as usize], NAMES[((seed + 1) % 4) as usize]);
                for (pass_index, pass) in ["original", "swapped"].into_iter().enumerate() {
                    // The minority's name in this pass; the swap gives each group the other's.
                    let name_of = |agent: i64| match (minority(agent), pass_index) {
                        (true, 0) | (false, 1) => names.0,
                        _ => names.1,
                    };
                    for decider in 0..10_i64 {
                        decider_index += 1;
                        let filled = plant.fill_every > 0 && decider_index % plant.fill_every == 0;
                        let visible = labels == Labels::Visible;
                        let bias = match (visible, minority(decider)) {
                            (false, _) => 0.0,
                            (true, true) => 1.5 + if pass_index == 1 { plant.swapped_minority_bias } else { 0.0 },
                            (true, false) => 0.3,
                        };
                        let mut targets: Vec<i64> = (0..10).filter(|&t| t != decider).collect();
                        let order_key = |t: &i64| {
                            let same = minority(*t) == minority(decider);
                            let shuffled = noise(&[seed, m, decider, *t, pass_index as i64, 17]);
                            if plant.in_group_first { (!same as i64) as f64 * 10.0 + shuffled } else { shuffled }
                        };
                        targets.sort_by(|a, b| order_key(a).total_cmp(&order_key(b)));
                        let weights: Vec<f64> = targets
                            .iter()
                            .enumerate()
                            .map(|(position, &t)| {
                                let same = minority(t) == minority(decider);
                                let e = 0.1 * noise(&[seed, m, decider, t, visible as i64, pass_index as i64]);
                                let place = plant.per_position * (position as f64 + 1.0);
                                let valence = if visible && name_of(t) == "wug" { plant.wug_valence } else { 0.0 };
                                (1.0 + if same { bias } else { 0.0 } + place + valence + e).max(0.05)
                            })
                            .collect();
                        let total: f64 = weights.iter().sum();
                        for (position, (&target, w)) in targets.iter().zip(&weights).enumerate() {
                            let design = DesignKey([Some("q".into()), Some("on".into()), None, Some(pass.into())]);
                            let points = if filled { 100.0 / 9.0 } else { 100.0 * w / total };
                            rows.push(Dyad {
                                target_position: (!plant.bare).then_some(position as f64 + 1.0),
                                filled: (!plant.bare).then_some(filled),
                                target_group: (!plant.bare).then(|| name_of(target).to_owned()),
                                ..Dyad::from_membership(
                                    (design, labels, m as u32),
                                    seed,
                                    (decider, target),
                                    minority,
                                    points,
                                )
                            });
                        }
                    }
                }
            }
        }
    }
    minimal_group_results(DyadTable::new("planted societies", rows).unwrap(), false)
}

fn judged(plant: Plant) -> Vec<HeadlineComparison> {
    compare_headlines(&societies(plant)).unwrap()
}

#[test]
fn a_society_that_behaves_as_the_papers_passes_every_robustness_bound() {
    let all = judged(Plant { fill_every: 200, ..Plant::default() });
    for id in ["roster_position", "fills_change", "parse_success"] {
        let h = headline(&all, id);
        assert_eq!(h.verdict, Verdict::Replicates, "{id}: {h:?}");
        assert!(h.headline.robustness, "{id} is folded with the robustness checks");
    }
    // One row per visible cell (m = 3, 4), per model and label arm, per model.
    let position = headline(&all, "roster_position");
    assert!(position.this_run.contains("q · m = 3: position effect ") && position.this_run.contains("q · m = 4: "));
    let fills = headline(&all, "fills_change");
    assert!(fills.this_run.contains("q · visible: ") && fills.this_run.contains("q · hidden: "), "{}", fills.this_run);
    assert!(fills.this_run.contains("(3 of 640 deciders filled)"), "{}", fills.this_run);
    let parsed = headline(&all, "parse_success");
    assert!(parsed.this_run.contains("99.5% parsed (3 of 640 replies filled)"), "{}", parsed.this_run);
    // The main claims are not folded.
    assert!(!headline(&all, "favouritism_visible").headline.robustness);
}

#[test]
fn each_robustness_bound_fails_when_its_check_is_broken() {
    // In-group targets always listed first, and a target listed later drawing fewer points: position
    // itself favours the in-group.
    let h = judged(Plant { in_group_first: true, per_position: -0.05, ..Plant::default() });
    let position = headline(&h, "roster_position");
    assert_eq!(position.verdict, Verdict::DoesNotReplicate, "{position:?}");
    assert!(position.basis.contains("position drives favouritism"), "{}", position.basis);
    // Either alone cannot: a position effect over a balanced roster, or an imbalance that draws nothing.
    for plant in [Plant { per_position: -0.05, ..Plant::default() }, Plant { in_group_first: true, ..Plant::default() }]
    {
        let position = headline(&judged(plant), "roster_position").clone();
        assert_ne!(position.verdict, Verdict::DoesNotReplicate, "{position:?}");
    }

    // One reply in 20 filled: parse success 95%, and removing them moves favouritism by more than 0.03.
    let h = judged(Plant { fill_every: 20, ..Plant::default() });
    let parsed = headline(&h, "parse_success");
    assert_eq!(parsed.verdict, Verdict::DoesNotReplicate, "{parsed:?}");
    assert!(parsed.basis.contains("is not above the paper's 0.988"), "{}", parsed.basis);
    let fills = headline(&h, "fills_change");
    assert_eq!(fills.verdict, Verdict::DoesNotReplicate, "{fills:?}");
    assert!(fills.basis.contains("q · visible"), "{}", fills.basis);
}

#[test]
fn without_positions_or_fills_the_bounds_are_not_in_the_run() {
    let all = judged(Plant { bare: true, ..Plant::default() });
    for id in ["roster_position", "fills_change", "parse_success"] {
        let h = headline(&all, id);
        assert_eq!(h.verdict, Verdict::NotInRun, "{id}: {h:?}");
    }
    // The planted fixture of the other headline tests has neither column either.
    let plain =
        compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, |_, _, _, m| if m { 1.5 } else { 0.3 }, false)).unwrap();
    assert_eq!(headline(&plain, "parse_success").verdict, Verdict::NotInRun);
}

/// p_wrong(N) for group-size trials of model "m": `curve(n)` plus a little noise per trial index.
#[test]
fn the_nonce_label_bounds_hold_without_a_name_or_pass_effect_and_fail_with_one() {
    let all = judged(Plant::default());
    for id in ["swap_pass_bound", "token_receipt_bound"] {
        let h = headline(&all, id);
        assert_eq!(h.verdict, Verdict::Replicates, "{id}: {h:?}");
        assert!(h.headline.robustness, "{id} is folded with the robustness checks");
    }
    // One row per model, every visible cell pooled: 16 societies under 4 name pairs.
    let receipts = headline(&all, "token_receipt_bound");
    assert!(
        receipts.this_run.contains("q: net SD ") && receipts.this_run.contains("F(4, 12)"),
        "{}",
        receipts.this_run
    );
    assert!(receipts.this_run.contains("the names' receipt SD as the paper's "), "{}", receipts.this_run);
    assert!(headline(&all, "swap_pass_bound").this_run.contains("over 16 societies"));

    // "wug" draws points in either group: its receipts stand apart from its partners', in every pair.
    let h = judged(Plant { wug_valence: 1.0, ..Plant::default() });
    let receipts = headline(&h, "token_receipt_bound");
    assert_eq!(receipts.verdict, Verdict::DoesNotReplicate, "{receipts:?}");
    assert!(receipts.basis.contains("the group names carry a valence"), "{}", receipts.basis);
    // A valence that changes groups with its name leaves the favouritism of the pooled passes alone.
    assert_eq!(headline(&h, "favouritism_visible").verdict, Verdict::Replicates);
    // The swap-pass difference only sees it as noise: "wug" is the first pass's minority name in one of
    // its pairs and the majority's in the other, so the societies' differences take both signs.
    assert_eq!(headline(&h, "swap_pass_bound").verdict, Verdict::Inconclusive);

    // Minorities favour their group more in the second pass, where they carry their pair's other name:
    // a name that strengthens its group's favouritism. The passes differ, and that name draws more.
    let h = judged(Plant { swapped_minority_bias: 1.5, ..Plant::default() });
    for id in ["swap_pass_bound", "token_receipt_bound"] {
        let h = headline(&h, id);
        assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{id}: {h:?}");
    }

    // Without the names, no token receipt; the passes still compare.
    let bare = judged(Plant { bare: true, ..Plant::default() });
    assert_eq!(headline(&bare, "token_receipt_bound").verdict, Verdict::NotInRun);
    assert_eq!(headline(&bare, "swap_pass_bound").verdict, Verdict::Replicates);
}

fn group_size(curve: fn(u32) -> f64) -> Vec<herd_analysis::ConformityTrial> {
    family_trials("group_size", &[""], &["lines", "color"], &[0, 1, 2, 3, 4, 6, 8, 10], |_, _, n, seed| {
        curve(n) + wobble(seed)
    })
}

#[test]
fn a_curve_that_levels_off_by_n_4_saturates_and_a_steady_one_is_not_the_claims_subject() {
    // Rises to 0.6 by N = 3 and stays: saturated at N = 3.
    let all = compare_headlines(&conformity_results(group_size(|n| if n >= 3 { 0.6 } else { 0.1 + 0.15 * n as f64 })))
        .unwrap();
    let h = headline(&all, "saturation");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("lines N = 3") && h.this_run.contains("color N = 3"), "{}", h.this_run);

    // Rises steadily to N = 10, as most of the paper's models: not the claim's subject.
    let all = compare_headlines(&conformity_results(group_size(|n| 0.1 + 0.05 * n as f64))).unwrap();
    let h = headline(&all, "saturation");
    assert_eq!(h.verdict, Verdict::NotInRun, "{h:?}");
    assert!(h.basis.contains("like the paper's models that rise steadily"), "{}", h.basis);
    // The rise itself replicates there.
    assert_eq!(headline(&all, "group_size_rise").verdict, Verdict::Replicates);

    // A flat curve (a model that solves the images and ignores the group) has nothing to saturate.
    let all = compare_headlines(&conformity_results(group_size(|_| 0.1))).unwrap();
    let h = headline(&all, "saturation");
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("nothing saturates"), "{}", h.basis);
}

#[test]
fn every_minority_block_survives_when_minorities_favour_their_group_in_every_cell() {
    let judge = |ms: &[i64], seeds: i64, bias: Bias| {
        headline(
            &compare_headlines(&planted(&[("q", "on")], ms, seeds, bias, false)).unwrap(),
            "minority_blocks_survive",
        )
        .clone()
    };
    // Minorities favour their group at every m: every block survives, its largest rank-biserial named.
    let h = judge(&[3, 4], 8, |_, _, _, minority| if minority { 1.5 } else { 0.3 });
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.headline.robustness);
    assert!(
        h.this_run.contains("2 of 2 visible minority-decider blocks; largest rank-biserial +1.00"),
        "{}",
        h.this_run
    );
    // At m = 4 minorities favour nobody: that block falls, and is named.
    let h = judge(&[3, 4], 8, |_, _, m, minority| if minority && m == 3 { 1.5 } else { 0.0 });
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("q m = 4 do not survive"), "{}", h.basis);
    // Five seeds: no Wilcoxon test can reach p < 0.05, so no block can survive.
    let h = judge(&[3], 5, |_, _, _, minority| if minority { 1.5 } else { 0.3 });
    assert_eq!(h.verdict, Verdict::Inconclusive, "{h:?}");
    assert!(h.basis.contains("no block can survive"), "{}", h.basis);
}
