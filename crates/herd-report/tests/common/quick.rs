//! A result set shaped like `cargo xtask replicate --profile quick`'s (the quick experiment files'
//! grids: conformity on one text-only model at chance over every family, 474-odd trials; minimal groups
//! on one model, 8 societies × visible/hidden labels at m = 5, 320 deciders), for the report's layout
//! checks. `Quality::Poor` plants what the quick run's small models did: most probability mass off
//! the two answers (P(A) + P(B) 0.17–0.37) and 316 of 320 allocations rescaled by the parser;
//! `Quality::Clean` is the same grid with the mass on the answers and every allocation parsed.
// Only report_html.rs lays out a quick-shaped report; the other test binaries share `common` without it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use herd_store::{AllocationDeciderRow, AllocationDyadRow, Batch, ConformityTrialRow, RunStore};

use super::{manifest, noise};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quality {
    Poor,
    Clean,
}

pub const CONFORMITY_MODEL: &str = "qwen2.5-coder-0.5b";
pub const MINIMAL_GROUP_MODEL: &str = "smollm2-135m";

/// One trial of a model at chance: p_wrong_ab near 0.5 whatever N, the mass on A and B per task.
fn trial(
    quality: Quality,
    (task, family, level): (&str, &str, Option<&str>),
    n: i64,
    seed: i64,
    difficulty: Option<(i64, f64)>,
) -> ConformityTrialRow {
    let mass = match (quality, task) {
        (Quality::Clean, _) => 0.97,
        (Quality::Poor, "lines") => 0.17,
        (Quality::Poor, "color") => 0.37,
        (Quality::Poor, _) => 0.25,
    };
    let p_ab =
        (0.5 + 0.003 * n as f64 + 0.02 * noise(&[seed, n, task.len() as i64, family.len() as i64])).clamp(0.01, 0.99);
    let correct_label = if seed % 2 == 0 { "A" } else { "B" };
    let logit_correct = 0.2 * noise(&[seed, 7, difficulty.map_or(0, |d| d.0)]);
    let (logit_a, logit_b) = if correct_label == "A" { (logit_correct, 0.0) } else { (0.0, logit_correct) };
    let image_id = match difficulty {
        Some((level, _)) => format!("{task}-d{level:02}-{seed}"),
        None => format!("{task}-general-{seed}"),
    };
    ConformityTrialRow {
        run_id: "quick-conformity".into(),
        unit_id: format!("{family}/{task}/{}/n={n}#{seed}", level.unwrap_or("-")),
        experiment: "conformity-quick".into(),
        model: CONFORMITY_MODEL.into(),
        backend: "candle".into(),
        modality: "text".into(),
        task: task.into(),
        family: family.into(),
        level: level.map(str::to_owned),
        n,
        seed,
        paraphrase: (family == "normative").then(|| format!("p{seed}")),
        confederate_answers: "B".repeat(n as usize),
        wrong_replies: n,
        correct_label: correct_label.into(),
        image_id,
        image_params: "{}".into(),
        difficulty_level: difficulty.map(|d| d.0),
        difficulty_index: difficulty.map_or(0.01, |d| d.1),
        prompt_hash: format!("{seed:08x}"),
        p_correct: (1.0 - p_ab) * mass,
        p_wrong_full: p_ab * mass,
        p_wrong_ab: Some(p_ab),
        logit_a,
        logit_b,
        mass_ab: mass,
        p_bound: false,
        p_bound_kind: String::new(),
        answer_token_ids: "A:1 B:2".into(),
        prompt_tokens: 300,
        reused_tokens: 0,
        latency_s: 0.5,
    }
}

/// The quick conformity grid (`data/experiments/conformity.quick.toml`).
fn conformity_rows(quality: Quality) -> Vec<ConformityTrialRow> {
    let mut rows = Vec::new();
    for task in ["lines", "color", "dots"] {
        for n in [0, 2, 5, 10] {
            for seed in 0..8 {
                rows.push(trial(quality, (task, "group_size", None), n, seed, None));
            }
        }
        for level in 1..=5_i64 {
            for image in 0..2_i64 {
                for n in [0, 5, 10] {
                    let index = level as f64 + 0.3 * image as f64;
                    rows.push(trial(quality, (task, "difficulty", None), n, image, Some((level, index))));
                }
            }
        }
    }
    let conditions: [(&str, &[&str]); 8] = [
        ("unanimity", &["wrong_100", "wrong_80", "wrong_50", "wrong_0", "random", "one_ally", "two_allies"]),
        ("source_strength", &["participants", "kids", "chatbots", "experts", "judges"]),
        ("nationality", &["same", "different"]),
        ("ethnicity", &["same", "different"]),
        ("minimal_group", &["same", "different"]),
        ("spatial", &["near", "far"]),
        ("temporal", &["near", "far"]),
        ("normative", &["public", "private"]),
    ];
    for (family, levels) in conditions {
        for level in levels {
            for n in [0, 5] {
                for seed in 0..6 {
                    rows.push(trial(quality, ("lines", family, Some(level)), n, seed, None));
                }
            }
        }
    }
    rows
}

/// One society pass of 20 deciders giving 100 points to the other 19, no favouritism; under
/// `Quality::Poor` all but 4 of the run's deciders' allocations were rescaled (`renormalised`).
fn society(
    quality: Quality,
    labels: &str,
    seed: i64,
    deciders: &mut Vec<AllocationDeciderRow>,
) -> Vec<AllocationDyadRow> {
    const SIZE: i64 = 20;
    const M: i64 = 5;
    let minority = |agent: i64| (agent * 7 + seed * 3) % SIZE < M;
    let group = |is_minority: bool| if is_minority { "Kalvo" } else { "Tesim" };
    let unit_id = format!("off/base/{labels}/m={M}#{seed}.original");
    let mut dyads = Vec::new();
    for decider in 1..=SIZE {
        let targets: Vec<i64> = (1..=SIZE).filter(|&t| t != decider).collect();
        let weights: Vec<f64> =
            targets.iter().map(|&t| 1.0 + 0.3 * noise(&[seed, decider, t, labels.len() as i64])).collect();
        let total: f64 = weights.iter().sum();
        for (position, (&target, w)) in targets.iter().zip(&weights).enumerate() {
            dyads.push(AllocationDyadRow {
                run_id: "quick-mg".into(),
                unit_id: unit_id.clone(),
                experiment: "minimal-group-quick".into(),
                model: MINIMAL_GROUP_MODEL.into(),
                backend: "candle".into(),
                reasoning: "off".into(),
                instrument: "base".into(),
                labels: labels.into(),
                m: M,
                seed,
                swap_pass: "original".into(),
                decider,
                target,
                target_id: format!("agent_{target:02}"),
                minority_decider: minority(decider),
                minority_target: minority(target),
                same_group: minority(target) == minority(decider),
                decider_group: group(minority(decider)).into(),
                target_group: group(minority(target)).into(),
                target_position: position as f64,
                points: 100.0 * w / total,
                filled: false,
            });
        }
        // The run's first four deciders parsed as written, the other 316 rescaled from sums like 523.
        let parsed = quality == Quality::Clean || deciders.len() < 4;
        deciders.push(AllocationDeciderRow {
            run_id: "quick-mg".into(),
            unit_id: unit_id.clone(),
            experiment: "minimal-group-quick".into(),
            model: MINIMAL_GROUP_MODEL.into(),
            backend: "candle".into(),
            reasoning: "off".into(),
            instrument: "base".into(),
            labels: labels.into(),
            m: M,
            seed,
            swap_pass: "original".into(),
            decider,
            decider_id: format!("agent_{decider:02}"),
            minority_decider: minority(decider),
            decider_group: group(minority(decider)).into(),
            prompt_hash: format!("{seed:04x}{decider:04x}"),
            raw_output: "{}".into(),
            reasoning_output: None,
            stripped_output: "{}".into(),
            parse_status: if parsed { "ok" } else { "repaired" }.into(),
            filled: false,
            qc_flags: if parsed { "" } else { "renormalised" }.into(),
            finish_reason: "stop".into(),
            prompt_tokens: 400,
            tokens_generated: 224,
            latency_s: 1.0,
        });
    }
    dyads
}

/// Writes the quick-shaped result set under `dir` (`dir/runs/conformity`, `dir/runs/minimal-group`)
/// and returns `dir`.
pub fn quick_results(dir: &Path, quality: Quality) -> PathBuf {
    let conformity_dir = dir.join("runs").join("conformity");
    let mut m = manifest("conformity-quick", "conformity");
    m.identity.model = CONFORMITY_MODEL.into();
    let mut store = RunStore::open(&conformity_dir, m, "cpu").unwrap();
    for (k, chunk) in conformity_rows(quality).chunks(200).enumerate() {
        let mut batch = Batch::new(vec![format!("conformity-chunk-{k}")]);
        batch.add(chunk).unwrap();
        store.commit(batch).unwrap();
    }
    store.finish("complete").unwrap();

    let mg_dir = dir.join("runs").join("minimal-group");
    let mut m = manifest("minimal-group-quick", "minimal_group");
    m.identity.model = MINIMAL_GROUP_MODEL.into();
    let mut store = RunStore::open(&mg_dir, m, "cpu").unwrap();
    let mut deciders = Vec::new();
    for labels in ["visible", "hidden"] {
        for seed in 0..8 {
            let start = deciders.len();
            let dyads = society(quality, labels, seed, &mut deciders);
            let mut batch = Batch::new(vec![format!("{labels}-{seed}")]);
            batch.add(&dyads).unwrap();
            batch.add(&deciders[start..]).unwrap();
            store.commit(batch).unwrap();
        }
    }
    store.finish("complete").unwrap();
    dir.to_path_buf()
}
