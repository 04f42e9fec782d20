//! A small stored result set: two run folders (conformity, minimal groups) written through herd-store
//! exactly as `herd run` writes them, with effects planted in every family and condition so that
//! every figure has data. `Variant::Shifted` plants different effect sizes, for checking that
//! figures change with the data.

pub mod quick;

use std::path::{Path, PathBuf};

use herd_store::{AllocationDyadRow, BaselineCandidateRow, Batch, ConformityTrialRow, Manifest, RunIdentity, RunStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Planted,
    Shifted,
}

/// Deterministic noise in [-1, 1] from integers (no RNG needed for a fixture).
pub fn noise(parts: &[i64]) -> f64 {
    let mut h: u64 = 1_469_598_103_934_665_603;
    for &p in parts {
        h ^= p as u64;
        h = h.wrapping_mul(1_099_511_628_211);
        h ^= h >> 29;
    }
    (h % 2001) as f64 / 1000.0 - 1.0
}

fn manifest(experiment: &str, study: &str) -> Manifest {
    let identity = RunIdentity {
        experiment: experiment.into(),
        study: study.into(),
        experiment_sha256: "ab".repeat(32),
        model: "fixture".into(),
        backend: "fixture".into(),
        shard: "all".into(),
    };
    let mut m = Manifest::new(identity);
    m.experiment_file = format!("data/experiments/{experiment}.toml");
    m
}

#[allow(clippy::too_many_arguments)]
fn trial(
    variant: Variant,
    model: &str,
    task: &str,
    family: &str,
    level: Option<&str>,
    n: i64,
    seed: i64,
    strength: f64,
    paraphrase: Option<String>,
    difficulty: Option<(i64, f64, String)>,
) -> ConformityTrialRow {
    let gain = if variant == Variant::Shifted { 1.6 } else { 1.0 };
    let base = if model == "model-a" { 0.05 } else { 0.12 };
    let saturation = 1.0 - (-(n as f64) * 0.25 * strength * gain).exp();
    let p = (base
        + 0.8 * saturation
        + 0.04 * noise(&[seed, n, strength.to_bits() as i64, model.len() as i64, task.len() as i64]))
    .clamp(0.001, 0.999);
    let correct_label = if seed % 2 == 0 { "A" } else { "B" };
    let (difficulty_level, difficulty_index, image_id) = match &difficulty {
        Some((level, index, image)) => (Some(*level), *index, image.clone()),
        None => (None, 0.01, format!("{task}-general-{seed}")),
    };
    let logit_correct =
        4.0 - difficulty_level.unwrap_or(1) as f64 * 0.3 + noise(&[seed, 77, difficulty_level.unwrap_or(0)]);
    let (logit_a, logit_b) = if correct_label == "A" { (logit_correct, 0.5) } else { (0.5, logit_correct) };
    ConformityTrialRow {
        run_id: "fixture-conformity".into(),
        unit_id: format!("{family}/{model}/{task}/{}/n={n}#{seed}", level.unwrap_or("-")),
        experiment: "conformity-fixture".into(),
        model: model.into(),
        backend: "fixture".into(),
        modality: "vision".into(),
        task: task.into(),
        family: family.into(),
        level: level.map(str::to_owned),
        n,
        seed,
        paraphrase,
        confederate_answers: "B".repeat(n as usize),
        wrong_replies: n,
        correct_label: correct_label.into(),
        image_id,
        image_params: "{}".into(),
        difficulty_level,
        difficulty_index,
        prompt_hash: format!("{seed:08x}"),
        p_correct: 1.0 - p,
        p_wrong_full: p,
        // The two-way measure sits a little above the whole-vocabulary one (mass off A and B).
        p_wrong_ab: Some((p / 0.97).min(1.0)),
        logit_a,
        logit_b,
        mass_ab: 0.97,
        p_bound: false,
        p_bound_kind: String::new(),
        answer_token_ids: "A:1 B:2".into(),
        prompt_tokens: 120,
        reused_tokens: 0,
        latency_s: 0.01,
    }
}

fn conformity_rows(variant: Variant) -> Vec<ConformityTrialRow> {
    let mut rows = Vec::new();
    let models = ["model-a", "model-b"];
    for model in models {
        for task in ["lines", "color", "dots"] {
            let strength = match task {
                "lines" => 1.0,
                "color" => 0.9,
                _ => 1.1,
            };
            for n in [0, 2, 5, 10] {
                for seed in 0..4 {
                    rows.push(trial(variant, model, task, "group_size", None, n, seed, strength, None, None));
                }
            }
            for level in 1..=4_i64 {
                for image in 0..3_i64 {
                    let index = level as f64 + 0.2 * image as f64 + 0.05 * noise(&[level, image]);
                    let id = format!("{task}-d{level:02}-{image}");
                    for n in [0, 5, 10] {
                        let strength = 0.3 * level as f64 + 0.1 * image as f64;
                        rows.push(trial(
                            variant,
                            model,
                            task,
                            "difficulty",
                            None,
                            n,
                            image,
                            strength,
                            None,
                            Some((level, index, id.clone())),
                        ));
                    }
                }
            }
        }
        let lines = |family: &str, level: &str, strength: f64, rows: &mut Vec<ConformityTrialRow>| {
            for n in [0, 5] {
                for seed in 0..4 {
                    rows.push(trial(variant, model, "lines", family, Some(level), n, seed, strength, None, None));
                }
            }
        };
        for (level, s) in [("wrong_100", 1.0), ("wrong_80", 0.5), ("wrong_50", 0.15)] {
            lines("unanimity", level, s, &mut rows);
        }
        for (level, s) in [("participants", 1.0), ("kids", 0.7), ("chatbots", 0.75), ("experts", 1.4), ("judges", 1.3)]
        {
            lines("source_strength", level, s, &mut rows);
        }
        for family in ["nationality", "ethnicity", "minimal_group"] {
            lines(family, "same", 1.4, &mut rows);
            lines(family, "different", 0.9, &mut rows);
        }
        for family in ["spatial", "temporal"] {
            lines(family, "near", 1.2, &mut rows);
            lines(family, "far", 0.95, &mut rows);
        }
        for (level, s) in [("public", 1.3), ("private", 1.0)] {
            for n in [0, 5] {
                for paraphrase in 0..4 {
                    let s = s + 0.05 * noise(&[paraphrase, 5]);
                    rows.push(trial(
                        variant,
                        model,
                        "lines",
                        "normative",
                        Some(level),
                        n,
                        paraphrase,
                        s,
                        Some(format!("p{paraphrase}")),
                        None,
                    ));
                }
            }
        }
    }
    rows
}

/// One society pass: 20 deciders, each giving 100 points to the other 19.
#[allow(clippy::too_many_arguments)]
fn society(
    variant: Variant,
    reasoning: &str,
    instrument: &str,
    labels: &str,
    m: i64,
    seed: i64,
    swap_pass: &str,
    rows: &mut Vec<AllocationDyadRow>,
) {
    const SIZE: i64 = 20;
    let minority = |agent: i64| (agent * 7 + seed * 3) % SIZE < m;
    // A name pair per society, exchanged between the groups in the swap pass.
    let pair = [["Kalvo", "Tesim"], ["Dravin", "Pulek"]][(seed % 2) as usize];
    let group_name = |is_minority: bool| pair[usize::from(is_minority == (swap_pass == "swapped"))];
    let scale = if variant == Variant::Shifted { 2.0 } else { 1.0 };
    for decider in 1..=SIZE {
        let targets: Vec<i64> = (1..=SIZE).filter(|&t| t != decider).collect();
        let minority_decider = minority(decider);
        let bias = if labels == "visible" {
            scale * (if minority_decider { 0.9 } else { 0.35 }) * if reasoning == "off" { 1.5 } else { 1.0 }
        } else {
            0.0
        };
        let every = if variant == Variant::Shifted { 2 } else { 3 };
        let extreme = labels == "visible" && minority_decider && decider % every == 0;
        let weights: Vec<f64> = targets
            .iter()
            .map(|&t| {
                let same = minority(t) == minority_decider;
                let w = 1.0
                    + if same { bias } else { 0.0 }
                    + 0.3
                        * noise(&[
                            seed,
                            decider,
                            t,
                            m,
                            labels.len() as i64,
                            reasoning.len() as i64,
                            swap_pass.len() as i64,
                            instrument.len() as i64,
                        ]);
                if extreme && !same { 0.0 } else { w.max(0.05) }
            })
            .collect();
        let total: f64 = weights.iter().sum();
        for (position, (&target, w)) in targets.iter().zip(&weights).enumerate() {
            rows.push(AllocationDyadRow {
                run_id: "fixture-mg".into(),
                unit_id: format!("{reasoning}/{instrument}/{labels}/m={m}#{seed}.{swap_pass}"),
                experiment: "minimal-group-fixture".into(),
                model: "model-a".into(),
                backend: "fixture".into(),
                reasoning: reasoning.into(),
                instrument: instrument.into(),
                labels: labels.into(),
                m,
                seed,
                swap_pass: swap_pass.into(),
                decider,
                target,
                target_id: format!("agent_{target:02}"),
                minority_decider,
                minority_target: minority(target),
                same_group: minority(target) == minority_decider,
                decider_group: group_name(minority_decider).into(),
                target_group: group_name(minority(target)).into(),
                target_position: position as f64,
                points: 100.0 * w / total,
                filled: false,
            });
        }
    }
}

/// Writes the result set under `dir` as `dir/runs/conformity` and `dir/runs/minimal-group` (the
/// layout `cargo xtask replicate` writes) and returns `dir`.
pub fn stored_results(dir: &Path, variant: Variant) -> PathBuf {
    let conformity_dir = dir.join("runs").join("conformity");
    let mut store = RunStore::open(&conformity_dir, manifest("conformity-fixture", "conformity"), "cpu").unwrap();
    let rows = conformity_rows(variant);
    for (k, chunk) in rows.chunks(400).enumerate() {
        let mut batch = Batch::new(vec![format!("conformity-chunk-{k}")]);
        batch.add(chunk).unwrap();
        store.commit(batch).unwrap();
    }
    let mut batch = Batch::new(vec!["baseline".into()]);
    let candidates: Vec<BaselineCandidateRow> = (0..10)
        .map(|c| BaselineCandidateRow {
            run_id: "fixture-conformity".into(),
            unit_id: "baseline".into(),
            model: "model-a".into(),
            task: "lines".into(),
            pool: "general".into(),
            candidate: c,
            image_id: format!("lines-general-{c}"),
            correct_label: "A".into(),
            p_correct: 0.99,
            p_correct_ab: Some(0.99),
            logit_correct: 5.0,
            accepted: c % 5 != 0,
        })
        .collect();
    batch.add(&candidates).unwrap();
    store.commit(batch).unwrap();
    store.finish("complete").unwrap();

    let mg_dir = dir.join("runs").join("minimal-group");
    let mut store = RunStore::open(&mg_dir, manifest("minimal-group-fixture", "minimal_group"), "cpu").unwrap();
    for reasoning in ["on", "off"] {
        for instrument in ["base", "paraphrase"] {
            let mut rows = Vec::new();
            for labels in ["visible", "hidden"] {
                for m in [3, 5] {
                    for seed in 0..4 {
                        for pass in ["original", "swapped"] {
                            society(variant, reasoning, instrument, labels, m, seed, pass, &mut rows);
                        }
                    }
                }
            }
            let mut batch = Batch::new(vec![format!("{reasoning}-{instrument}")]);
            batch.add(&rows).unwrap();
            store.commit(batch).unwrap();
        }
    }
    store.finish("complete").unwrap();
    dir.to_path_buf()
}
