//! Planted results for the headline tests: conformity trials with known curves, and minimal-group
//! societies whose deciders weight their own group by a known bias.

// Each test binary that includes this module uses some of it.
#![allow(dead_code)]

use std::path::PathBuf;

use herd_analysis::{
    ConformityOptions, ConformityResults, ConformityTable, ConformityTrial, DesignKey, Dyad, DyadTable,
    HeadlineComparison, Labels, MinimalGroupOptions, MinimalGroupResults, PWrong, Provenance, ResultTable, Results,
    analyze_conformity, analyze_minimal_group,
};

use crate::common::noise;

pub fn empty(name: &str) -> ResultTable {
    ResultTable { name: name.into(), columns: Vec::new() }
}

pub fn headline<'a>(all: &'a [HeadlineComparison], id: &str) -> &'a HeadlineComparison {
    all.iter().find(|h| h.headline.id == id).unwrap_or_else(|| panic!("no headline {id}"))
}

pub fn trial(family: &str, level: &str, n: u32, seed: i64, p: f64) -> ConformityTrial {
    ConformityTrial {
        model: "m".into(),
        task: "lines".into(),
        family: family.into(),
        level: level.into(),
        n,
        seed,
        paraphrase: None,
        p_wrong_full: p,
        p_wrong_ab: None,
        difficulty_level: None,
        difficulty_index: None,
        image_id: None,
        correct_label: None,
        logit_a: None,
        logit_b: None,
    }
}

pub fn conformity_results(rows: Vec<ConformityTrial>) -> Results {
    conformity_results_led_by(rows, PWrong::Full)
}

pub fn conformity_results_led_by(rows: Vec<ConformityTrial>, measure: PWrong) -> Results {
    let trials = ConformityTable { origin: "test".into(), rows };
    let tables = analyze_conformity(&trials, &ConformityOptions::default()).unwrap();
    Results {
        source: PathBuf::from("test"),
        conformity: Some(ConformityResults {
            runs: Vec::new(),
            trials,
            tables,
            quality: empty("quality"),
            measure,
            measure_note: None,
            analysis: Provenance::default(),
        }),
        minimal_group: None,
        empty_runs: Vec::new(),
        plain_tables: Vec::new(),
    }
}

/// One trial of `family` at `level` per task, N and trial index, for model "m"; p_wrong(N) from
/// `p(task, level, n, seed)`.
pub fn family_trials(
    family: &str,
    levels: &[&str],
    tasks: &[&str],
    ns: &[u32],
    p: impl Fn(&str, &str, u32, i64) -> f64,
) -> Vec<ConformityTrial> {
    let mut rows = Vec::new();
    for task in tasks {
        for level in levels {
            for &n in ns {
                for seed in 0..8 {
                    let mut t = trial(family, level, n, seed, p(task, level, n, seed).clamp(0.0, 1.0));
                    t.task = (*task).into();
                    rows.push(t);
                }
            }
        }
    }
    rows
}

/// A little noise per trial index, so that no sample is constant.
pub fn wobble(seed: i64) -> f64 {
    [0.011, -0.007, 0.004, -0.013, 0.009, -0.002, 0.006, -0.008][seed as usize]
}

/// In-group weight bias of a visible-label decider: (model, reasoning, m, minority decider) → bias.
pub type Bias = fn(&str, &str, i64, bool) -> f64;

/// Societies of 10 agents with minority sizes `ms`, `seeds` societies per cell, for each
/// (model, reasoning mode) of `models`, both label conditions; visible-label deciders weight
/// in-group targets by 1 + `bias`, plus a little noise; hidden labels are noise alone. The modes of
/// one model share each society's roster.
pub fn planted(models: &[(&str, &str)], ms: &[i64], seeds: i64, bias: Bias, gee_bootstrap: bool) -> Results {
    planted_with_hidden(models, ms, seeds, bias, |_, _, _, _| 0.0, gee_bootstrap)
}

/// [`planted`], with hidden-label deciders weighting their (unseen) group by 1 + `hidden`.
pub fn planted_with_hidden(
    models: &[(&str, &str)],
    ms: &[i64],
    seeds: i64,
    bias: Bias,
    hidden: Bias,
    gee_bootstrap: bool,
) -> Results {
    let mut rows = Vec::new();
    for (mi, &(model, reasoning)) in models.iter().enumerate() {
        for labels in [Labels::Visible, Labels::Hidden] {
            for &m in ms {
                for seed in 0..seeds {
                    let minority = |agent: i64| (agent * 7 + seed * 3) % 10 < m;
                    for decider in 0..10_i64 {
                        let visible = labels == Labels::Visible;
                        let b = if visible { bias } else { hidden }(model, reasoning, m, minority(decider));
                        let targets: Vec<i64> = (0..10).filter(|&t| t != decider).collect();
                        let weights: Vec<f64> = targets
                            .iter()
                            .map(|&t| {
                                let same = minority(t) == minority(decider);
                                let e = 0.1 * noise(&[mi as i64, seed, m, decider, t, visible as i64]);
                                (1.0 + if same { b } else { 0.0 } + e).max(0.05)
                            })
                            .collect();
                        let total: f64 = weights.iter().sum();
                        for (&target, w) in targets.iter().zip(&weights) {
                            let design = DesignKey([Some(model.into()), Some(reasoning.into()), None, None]);
                            rows.push(Dyad::from_membership(
                                (design, labels, m as u32),
                                seed,
                                (decider, target),
                                minority,
                                100.0 * w / total,
                            ));
                        }
                    }
                }
            }
        }
    }
    minimal_group_results(DyadTable::new("test", rows).unwrap(), gee_bootstrap)
}

/// The results of a minimal-group dyad table analysed in memory (400 seeded bootstrap resamples).
pub fn minimal_group_results(dyads: DyadTable, gee_bootstrap: bool) -> Results {
    let options = MinimalGroupOptions {
        bootstrap: herd_analysis::BootstrapPlan::Seeded { resamples: 400, seed: 7 },
        gee_bootstrap,
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group(&dyads, &options).unwrap();
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
