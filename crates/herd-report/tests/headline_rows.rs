//! The papers' sentences that had no row before: each identity raising conformity on its own
//! (section 2.3.2), conformity rising with source strength in each task (fig. 4c), majority deciders
//! allocating about proportionally (abstract, S6), and S6's reasoning control: a clean hidden floor
//! in both modes and majority deciders favouring their group with thinking off. Each is judged on
//! planted data that carries the effect, data that carries the opposite, and data that lacks what
//! the claim needs.

#[allow(dead_code)]
mod common;
mod planted;

use common::noise;
use herd_analysis::{Verdict, compare_headlines};
use planted::*;

const SOCIAL: [&str; 3] = ["nationality", "ethnicity", "minimal_group"];

/// A rising curve with a little noise per trial index, level and N, shifted by `shift`.
fn curve(n: u32, seed: i64, level: usize, shift: f64) -> f64 {
    0.1 + 0.05 * f64::from(n) + shift + 0.01 * noise(&[seed, level as i64, i64::from(n)])
}

/// The three social families on one task, same and different group; `shift(family, level)` moves
/// each curve.
fn identity_trials(shift: impl Fn(&str, &str) -> f64) -> Vec<herd_analysis::ConformityTrial> {
    SOCIAL
        .iter()
        .enumerate()
        .flat_map(|(i, family)| {
            family_trials(family, &["same", "different"], &["lines"], &[0, 5, 10], |_, level, n, seed| {
                curve(n, seed, i * 2 + usize::from(level == "same"), shift(family, level))
            })
        })
        .collect()
}

#[test]
fn each_identity_alone_raises_conformity() {
    let all =
        compare_headlines(&conformity_results(identity_trials(|_, level| if level == "same" { 0.1 } else { -0.05 })))
            .unwrap();
    let h = headline(&all, "identity_each");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    for family in SOCIAL {
        assert!(h.this_run.contains(&format!("m · lines · {family}: p_wrong_full: AUC ")), "{family}: {}", h.this_run);
    }
    assert!(h.basis.contains("all 3 rows replicate (Wilcoxon signed-rank, 8 seeds)"), "{}", h.basis);

    // Ethnicity alone turned round: the averaged same-group row may still replicate, this one does not.
    let all = compare_headlines(&conformity_results(identity_trials(|family, level| match (family, level) {
        ("ethnicity", "same") => -0.05,
        ("ethnicity", _) => 0.1,
        (_, "same") => 0.1,
        _ => -0.05,
    })))
    .unwrap();
    let h = headline(&all, "identity_each");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("m · lines · ethnicity"), "{}", h.basis);

    // A run without the social families lacks the claim.
    let all = compare_headlines(&conformity_results(family_trials(
        "group_size",
        &[""],
        &["lines"],
        &[0, 5],
        |_, _, n, s| curve(n, s, 0, 0.0),
    )))
    .unwrap();
    assert_eq!(headline(&all, "identity_each").verdict, Verdict::NotInRun);
}

/// Source-strength trials on two tasks; the role's rank on the strength axis (low status −1, the
/// participants 0, authority +1) times `step(task)` shifts its curve.
fn source_trials(step: impl Fn(&str) -> f64, roles: &[&str]) -> Vec<herd_analysis::ConformityTrial> {
    let rank = |role: &str| match role {
        "kids" | "chatbots" => -1.0,
        "participants" => 0.0,
        _ => 1.0,
    };
    family_trials("source_strength", roles, &["lines", "color"], &[0, 5, 10], |task, role, n, seed| {
        let level = roles.iter().position(|r| *r == role).unwrap();
        curve(n, seed, level, step(task) * rank(role))
    })
}

#[test]
fn conformity_rises_with_source_strength_in_each_task() {
    const ROLES: [&str; 5] = ["kids", "chatbots", "participants", "judges", "scientists"];
    let all = compare_headlines(&conformity_results(source_trials(|_| 0.05, &ROLES))).unwrap();
    let h = headline(&all, "source_order");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(
        h.this_run.contains("lines: p_wrong_full: AUC by source rank: low status 0.300, participants 0.348"),
        "{}",
        h.this_run
    );
    assert!(h.this_run.contains("mean slope +0.050 per rank"), "{}", h.this_run);
    assert!(h.basis.contains("all 2 rows replicate (Wilcoxon signed-rank, 8 trial indices)"), "{}", h.basis);

    // Stronger sources lowering conformity in one task: that task's trend is the paper's reversed.
    let all = compare_headlines(&conformity_results(source_trials(
        |task| if task == "color" { -0.05 } else { 0.05 },
        &ROLES,
    )))
    .unwrap();
    let h = headline(&all, "source_order");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("color"), "{}", h.basis);

    // Without low-status sources there is no three-step axis to trend along.
    let all = compare_headlines(&conformity_results(source_trials(|_| 0.05, &["participants", "judges"]))).unwrap();
    assert_eq!(headline(&all, "source_order").verdict, Verdict::NotInRun);
}

#[test]
fn majority_deciders_allocate_about_proportionally() {
    // Minority deciders favour their group, majority deciders weight everyone alike.
    let minority_only = |_: &str, _: &str, _: i64, minority: bool| if minority { 1.5 } else { 0.0 };
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, minority_only, false)).unwrap();
    let h = headline(&all, "majority_proportional");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.basis.contains("two one-sided t-tests against the margin"), "{}", h.basis);
    assert!(h.this_run.contains("(m = 3, 4)"), "{}", h.this_run);

    // Majority deciders weighting their own group 2.5 : 1 hold about a sixth more than their share.
    let majority_too = |_: &str, _: &str, _: i64, _: bool| 1.5;
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, majority_too, false)).unwrap();
    let h = headline(&all, "majority_proportional");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("an effect larger than the margin"), "{}", h.basis);
}

/// Thinking on: minority deciders favour, majority deciders do not; off: both favour.
fn thinking(_: &str, reasoning: &str, _: i64, minority: bool) -> f64 {
    match (reasoning, minority) {
        ("on", true) => 1.5,
        ("on", false) => 0.0,
        (_, true) => 0.9,
        _ => 0.7,
    }
}

#[test]
fn both_reasoning_modes_have_a_clean_hidden_floor() {
    let modes = [("q", "on"), ("q", "off")];
    let all = compare_headlines(&planted(&modes, &[3, 4], 8, thinking, false)).unwrap();
    let h = headline(&all, "hidden_floor_reasoning");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("q · thinking on: ") && h.this_run.contains("q · thinking off: "), "{}", h.this_run);

    // With thinking off the unseen group is still favoured: that mode's floor fails.
    let hidden_off = |_: &str, reasoning: &str, _: i64, _: bool| if reasoning == "off" { 0.5 } else { 0.0 };
    let all = compare_headlines(&planted_with_hidden(&modes, &[3, 4], 8, thinking, hidden_off, false)).unwrap();
    let h = headline(&all, "hidden_floor_reasoning");
    assert_eq!(h.verdict, Verdict::DoesNotReplicate, "{h:?}");
    assert!(h.basis.contains("q · thinking off"), "{}", h.basis);

    // One mode only: the control is not in the run.
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, thinking, false)).unwrap();
    assert_eq!(headline(&all, "hidden_floor_reasoning").verdict, Verdict::NotInRun);
}

#[test]
fn majority_deciders_favour_their_group_with_thinking_off() {
    let modes = [("q", "on"), ("q", "off")];
    let all = compare_headlines(&planted(&modes, &[3, 4], 8, thinking, false)).unwrap();
    let h = headline(&all, "reasoning_majority_share");
    assert_eq!(h.verdict, Verdict::Replicates, "{h:?}");
    assert!(h.this_run.contains("q · majority excess share on − off: on − off -0."), "{}", h.this_run);
    assert!(h.this_run.contains("paired by society"), "{}", h.this_run);

    // Majority deciders favouring more with thinking on: the paper's direction reversed.
    let reversed = |_: &str, reasoning: &str, _: i64, minority: bool| match (reasoning, minority) {
        ("on", _) => 0.9,
        (_, true) => 1.5,
        _ => 0.0,
    };
    let all = compare_headlines(&planted(&modes, &[3, 4], 8, reversed, false)).unwrap();
    assert_eq!(headline(&all, "reasoning_majority_share").verdict, Verdict::DoesNotReplicate);

    let all = compare_headlines(&planted(&[("q", "on")], &[3, 4], 8, thinking, false)).unwrap();
    assert_eq!(headline(&all, "reasoning_majority_share").verdict, Verdict::NotInRun);
}

#[test]
fn a_variants_claim_labels_name_its_own_minority_sizes() {
    // Societies of 10 with minorities of 3 and 5: the gap is judged at m = 5 of 10, not the paper's 10 of 20.
    let all = compare_headlines(&planted(&[("q", "on")], &[3, 5], 8, thinking, false)).unwrap();
    let closes = headline(&all, "gap_closes_equal_groups");
    assert_eq!(closes.headline.short_claim(), "minority–majority gap closes at m = 5 of 10");
    assert!(closes.this_run.contains("(m = 5)"), "{}", closes.this_run);
    assert_eq!(
        headline(&all, "majority_reversal").headline.short_claim(),
        "one model's majority reverses at m = 3 of 10"
    );
    // The paper's own wording and numbers stay in its column.
    assert_eq!(closes.headline.paper_value.as_deref(), Some("gap closed at m = 10"));
}
