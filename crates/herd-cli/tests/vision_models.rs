//! End to end with the VL families' tiny checkpoints (`herd_test_support::tiny_vl`: Qwen2-VL, Qwen2.5-VL and
//! Qwen3-VL with their real file layouts and Qwen2.5-VL's chat template, Gemma 3 with its own, Mistral3
//! with its own layout and a Mistral chat template): a small conformity grid over the three tasks runs
//! through the candle vision backend into `conformity_trials`, and scoring a group through its shared
//! prefix gives what scoring each prompt alone gives.

use herd_test_support::stored_table;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herd_analysis::study::read_conformity_trials;
use herd_backend::{Backend, GenerateRequest, ModelFiles, ModelRegistry, SamplingParams, ScoreRequest};
use herd_infer::{LoadOptions, VisionModel};
use herd_prompts::{ChatPrompt, Part};
use herd_runner::{Respondent, RunOptions, run_experiment};
use herd_store::{Manifest, RunIdentity, RunStore, Table, read_table};
use herd_test_support::tiny_vl::{self as tiny, DEFAULT, SEED};
use herd_vision::VlFamily;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(path)
}

const FAMILIES: [VlFamily; 5] =
    [VlFamily::Qwen2Vl, VlFamily::Qwen2_5Vl, VlFamily::Qwen3Vl, VlFamily::Gemma3, VlFamily::Mistral3];

const CONFORMITY: &str = r#"
[experiment]
name = "tiny-vl-conformity"
study = "conformity"
seed = 5
[prompts]
bank = "@DATA@/banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines", "color", "dots"]
general_pool_size = 6
[trials]
n_values = [0, 3]
trials_per_n = 2
[families.group_size]
"#;

/// A registry of the tiny checkpoints under `dir`; random weights pass no baseline filter, so it is off.
fn registry(dir: &Path) -> ModelRegistry {
    let mut text = String::from("default = \"tiny-qwen2_vl\"\n");
    for family in FAMILIES {
        let name = family.model_type();
        text += &format!(
            "[models.tiny-{name}]\ndescription = \"tiny {name}\"\nfamily = \"{name}\"\nmodality = \"vision\"\n\
             source = {{ path = \"{}\" }}\nbaseline_filter = {{ enabled = false }}\n",
            dir.join(name).display()
        );
    }
    ModelRegistry::parse(Path::new("tiny-models.toml"), &text).unwrap()
}

fn load(registry: &ModelRegistry, dir: &Path, family: VlFamily) -> VisionModel {
    let entry = registry.get(&format!("tiny-{}", family.model_type())).unwrap();
    VisionModel::load(entry, &ModelFiles::HfFolder(dir.join(family.model_type())), &LoadOptions::default()).unwrap()
}

fn write_checkpoints(dir: &Path) {
    for family in FAMILIES {
        tiny::write_checkpoint(&dir.join(family.model_type()), family.model_type(), SEED, &DEFAULT).unwrap();
    }
}

#[test]
fn each_vl_family_runs_a_conformity_grid_into_conformity_trials() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoints(dir.path());
    let registry = registry(dir.path());
    let file = dir.path().join("conformity.toml");
    std::fs::write(&file, CONFORMITY.replace("@DATA@", &data("").display().to_string())).unwrap();
    let experiment = herd_design::load_experiment(&file).unwrap();
    for family in FAMILIES {
        let alias = format!("tiny-{}", family.model_type());
        let entry = registry.get(&alias).unwrap();
        let mut model = load(&registry, dir.path(), family);
        assert_eq!(model.info().family, family.model_type());
        assert!(model.info().vision);
        let identity = RunIdentity {
            experiment: "tiny-vl-conformity".into(),
            study: "conformity".into(),
            experiment_sha256: "0".repeat(64),
            model: alias.clone(),
            backend: "candle".into(),
            shard: "all".into(),
        };
        let out = dir.path().join(format!("run-{}", family.model_type()));
        let mut store = RunStore::open(&out, Manifest::new(identity), &model.info().device).unwrap();
        let options = RunOptions::for_model(Some(entry), true);
        let summary = run_experiment(&experiment, Respondent::Model(&mut model), &mut store, &options).unwrap();
        store.finish("complete").unwrap();
        assert!(summary.failed.is_empty(), "{family:?}: {summary:?}");
        // 3 tasks × (N = 0, N = 3) × 2 trials, each with an image of the answer it needs.
        assert_eq!((summary.units_run, summary.skipped.len()), (12, 0), "{family:?}: {summary:?}");

        let frame =
            stored_table::frame(read_table(std::slice::from_ref(&out), Table::ConformityTrials).unwrap().unwrap());
        let modality: Vec<Option<&str>> = frame.column("modality").unwrap().str().unwrap().iter().collect();
        assert!(modality.iter().all(|m| *m == Some("vision")), "{family:?}: {modality:?}");
        let trials = read_conformity_trials(&out).unwrap();
        assert_eq!(trials.rows.len(), 12);
        for t in &trials.rows {
            assert!((0.0..=1.0).contains(&t.p_wrong_full), "{family:?}: {t:?}");
            assert!(t.p_wrong_ab.is_some_and(|p| (0.0..=1.0).contains(&p)), "{family:?}: {t:?}");
            assert!(t.logit_a.is_some_and(f64::is_finite) && t.logit_b.is_some_and(f64::is_finite));
        }
        let tasks: std::collections::BTreeSet<&str> = trials.rows.iter().map(|t| t.task.as_str()).collect();
        assert_eq!(tasks.len(), 3, "{family:?}: {tasks:?}");
    }
}

/// The conformity prompts of one image differ only after it: the group is computed as one prefix plus
/// continuations, and each request's scores equal those of the request scored alone.
#[test]
fn a_group_sharing_its_image_scores_as_its_requests_alone() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoints(dir.path());
    let registry = registry(dir.path());
    let pixels = Arc::new(tiny::image().to_rgb8());
    let request = |tail: &str| {
        let prompt = ChatPrompt::user(vec![
            Part::Image { image: "image".into() },
            Part::Text { text: format!("which line matches the reference ? {tail}") },
        ]);
        let mut r = ScoreRequest::new(prompt, vec!["A".into(), "B".into()]);
        r.image = Some(pixels.clone());
        r
    };
    let group: Vec<ScoreRequest> = ["A A", "B B B", "red blue answer"].map(request).into();
    for family in FAMILIES {
        let mut model = load(&registry, dir.path(), family);
        let together = model.score(&group).unwrap();
        for (r, shared) in group.iter().zip(&together) {
            let alone = &model.score(std::slice::from_ref(r)).unwrap()[0];
            assert_eq!(alone.reused_tokens, 0);
            assert!(shared.reused_tokens > 0, "{family:?}: the group shared no prefix");
            for ((answer, a), (_, b)) in alone.answers.iter().zip(&shared.answers) {
                assert!((a.p - b.p).abs() < 1e-5, "{family:?} {answer}: {} alone vs {} in the group", a.p, b.p);
            }
        }
    }
}

/// Generation extends a key/value cache one token at a time; greedy decoding gives the tokens that
/// recomputing the whole sequence at every step gives.
#[test]
fn greedy_generation_from_the_cache_equals_recomputing_every_step() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoints(dir.path());
    let registry = registry(dir.path());
    let pixels = Arc::new(tiny::image().to_rgb8());
    let prompt = ChatPrompt::user(vec![
        Part::Image { image: "image".into() },
        Part::Text { text: "which line matches the reference ? answer".into() },
    ]);
    for family in FAMILIES {
        let mut model = load(&registry, dir.path(), family);
        let sampling = SamplingParams { temperature: Some(0.0), max_tokens: 5, ..Default::default() };
        let mut request = GenerateRequest::new(prompt.clone(), sampling);
        request.image = Some(pixels.clone());
        let generated = model.generate(&[request]).unwrap().remove(0);

        let vl = herd_vision::VlModel::load(
            &dir.path().join(family.model_type()),
            &candle_core::Device::Cpu,
            candle_core::DType::F32,
        )
        .unwrap();
        let image = vl.preprocess(&image::DynamicImage::ImageRgb8((*pixels).clone())).unwrap();
        let rendered = model.render(&prompt).unwrap();
        if family == VlFamily::Gemma3 {
            assert!(rendered.starts_with("<bos><start_of_turn>user\n<start_of_image>which"), "{rendered:?}");
            assert!(rendered.ends_with("<end_of_turn>\n<start_of_turn>model\n"), "{rendered:?}");
        }
        let mut ids = vl.encode_prompt(&rendered, Some(&image)).unwrap();
        let mut out = Vec::new();
        for _ in 0..5 {
            let logits: Vec<f32> = vl.next_token_logits(&ids, Some(&image)).unwrap().to_vec1().unwrap();
            let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap() as u32;
            if model.tokenizer.eos_ids.contains(&best) {
                break;
            }
            out.push(best);
            ids.push(best);
        }
        assert_eq!(generated.completion_tokens, out.len(), "{family:?}");
        assert_eq!(generated.text, model.tokenizer.decode(&out).unwrap(), "{family:?}");
    }
}
