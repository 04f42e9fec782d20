//! Mistral3 (Mistral-Small-3.1) on its tiny random checkpoint (`herd_test_support::tiny_vl::mistral3`): against
//! HF transformers (golden values from `tests/golden/tiny_mistral3.py`), the Pixtral processor on the
//! stimuli with the released settings, and the contract every family keeps (prefix reuse, errors).

mod support;

use std::path::Path;

use herd_test_support::tiny_vl::{self as tiny, DEFAULT, Options, SEED, VOCAB, mistral3};
use herd_vision::{VisionError, VlFamily, pixtral_processor_from_json, pixtral_resize};
use serde_json::Value;
use support::checks::{TempDir, f32s, load, logits_vec, max_abs_diff, u32s};
use support::mistral3_golden::{chw, write_all};
use support::vl_golden::{self, stimuli};

const FAMILY: VlFamily = VlFamily::Mistral3;

fn golden() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/tiny_mistral3.json");
    assert!(
        path.is_file(),
        "{} is missing. Write it with\n  cargo run -p herd-vision --example write_tiny_vl -- DIR\n  python crates/herd-vision/tests/golden/tiny_mistral3.py DIR",
        path.display()
    );
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(golden["seed"].as_u64(), Some(SEED), "golden values are for another seed");
    golden
}

fn checkpoint(name: &str, opts: &Options) -> TempDir {
    TempDir::checkpoint(FAMILY, name, opts)
}

/// herd's pixel values equal the PIL HF processor's (1e-6), its token ids the processor's expansion, and
/// its logits transformers' with herd's pixel values, with HF's and without an image (1e-4).
#[test]
fn tiny_mistral3_matches_transformers() {
    let golden = golden();
    let values = &golden["mistral3"];
    let tmp = TempDir::new("golden-mistral3");
    vl_golden::write_all(&tmp.0, SEED).unwrap();
    write_all(&tmp.0, SEED).unwrap();
    let model = load(&tmp.0.join(tiny::folder(FAMILY.model_type()))).unwrap();
    let prepared = model.preprocess(&image::open(tmp.0.join("image.png")).unwrap()).unwrap();
    let (h, w) = prepared.resized_size();
    assert_eq!(serde_json::json!([h, w]), golden["resized"]);
    assert_ne!(h, w, "the tiny image must be non-square");
    let d = max_abs_diff(&chw(&prepared), &f32s(&values["hf_pixel_values"]));
    assert!(d <= 1e-6, "pixel values: max |Δ| = {d:e}");

    let ids = model.expand_image_tokens(&model.encode(mistral3::PROMPT).unwrap(), &prepared).unwrap();
    assert_eq!(ids, u32s(&values["token_ids"]), "expanded token ids differ from the processor's");
    // 2 rows of 3 image tokens: [IMG]×3 [IMG_BREAK] [IMG]×3 [IMG_END].
    let (img, brk, end) = (mistral3::id_of("[IMG]"), mistral3::id_of("[IMG_BREAK]"), mistral3::id_of("[IMG_END]"));
    let at = ids.iter().position(|&t| t == img).unwrap();
    assert_eq!(&ids[at..at + 8], &[img, img, img, brk, img, img, img, end]);

    let logits = logits_vec(&model.next_token_logits(&ids, Some(&prepared)).unwrap());
    for key in ["logits_herd_pixels", "logits_hf_pixels"] {
        let d = max_abs_diff(&logits, &f32s(&values[key]));
        eprintln!("mistral3 {key}: max |Δlogit| = {d:e}");
        assert!(d < 1e-4, "{key}: max |Δlogit| = {d:e}");
    }
    let text_ids = model.encode(mistral3::TEXT_PROMPT).unwrap();
    assert_eq!(text_ids, u32s(&values["text_token_ids"]));
    let text = logits_vec(&model.next_token_logits(&text_ids, None).unwrap());
    let d = max_abs_diff(&text, &f32s(&values["logits_text_only"]));
    assert!(d < 1e-4, "text only: max |Δlogit| = {d:e}");
}

/// The stimuli through Mistral-Small-3.1's processor settings (longest edge 1540, patch 14 × merge 2):
/// the size, PIL's bicubic resize bit for bit (fingerprint), three pixel rows and every row's sum.
#[test]
fn stimuli_pixel_values_match_the_pixtral_processor() {
    let golden = golden();
    let processor = pixtral_processor_from_json(
        &herd_test_support::tiny_vl::mistral3::released_preprocessor_json().to_string(),
        Path::new("preprocessor_config.json"),
        14,
        2,
    )
    .unwrap();
    for (task, img) in stimuli() {
        let want = &golden["stimuli"][task.as_str()];
        let (width, height) = (img.width(), img.height());
        assert_eq!(serde_json::json!([width, height]), want["size"], "{task:?}");
        let prepared = processor.preprocess(&img).unwrap();
        let (h, w) = prepared.resized_size();
        assert_eq!(serde_json::json!([h, w]), want["resized"], "{task:?}");
        assert_eq!(pixtral_resize(height, width, 1540, 28).unwrap(), (h, w));
        let resized = herd_vision::resize_bicubic(&img.to_rgb8(), w, h);
        assert_eq!(
            format!("{:016x}", fnv1a64(resized.as_raw())),
            want["resized_rgb_fnv1a64"].as_str().unwrap(),
            "{task:?}: resize"
        );
        let pixels = chw(&prepared);
        let (h, w) = (h as usize, w as usize);
        for (key, row) in want["rows"].as_object().unwrap() {
            let (c, y) = key.split_once('/').unwrap();
            let (c, y): (usize, usize) = (c.parse().unwrap(), y.parse().unwrap());
            let got = &pixels[(c * h + y) * w..(c * h + y + 1) * w];
            let d = max_abs_diff(got, &f32s(row));
            assert!(d <= 1e-6, "{task:?} row {key}: max |Δ| = {d:e}");
        }
        for c in 0..3 {
            let sums = want["row_sums"][c].as_array().unwrap();
            for (y, s) in sums.iter().enumerate() {
                let got: f64 = pixels[(c * h + y) * w..(c * h + y + 1) * w].iter().map(|&x| f64::from(x)).sum();
                let s = s.as_f64().unwrap();
                assert!((got - s).abs() <= 1e-6 * w as f64, "{task:?} channel {c} row {y}: {got} vs {s}");
            }
        }
    }
}

fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[test]
fn pixtral_resize_fits_the_longest_edge_and_rounds_up() {
    // Small images are only rounded up to multiples of patch × merge.
    assert_eq!(pixtral_resize(100, 50, 1540, 28).unwrap(), (112, 56));
    // Large ones are scaled (floor) to fit, then rounded up: 3000×2000 → 1540×1026 → 1540×1036.
    assert_eq!(pixtral_resize(2000, 3000, 1540, 28).unwrap(), (1036, 1540));
    assert!(matches!(pixtral_resize(0, 10, 1540, 28), Err(VisionError::Image { .. })));
}

#[test]
fn released_and_transformers_5_names_give_the_same_logits() {
    let released = checkpoint("released", &DEFAULT);
    let nested = checkpoint("nested", &Options { nested_names: true, sharded: true, ..DEFAULT });
    let (a, b) = (load(&released.0).unwrap(), load(&nested.0).unwrap());
    assert_eq!(a.family(), FAMILY);
    let ids = a.encode(mistral3::PROMPT).unwrap();
    let img = a.preprocess(&tiny::image()).unwrap();
    let la = logits_vec(&a.next_token_logits(&ids, Some(&img)).unwrap());
    let lb = logits_vec(&b.next_token_logits(&ids, Some(&img)).unwrap());
    assert_eq!(la.len(), VOCAB);
    assert!(la.iter().all(|x| x.is_finite()) && la.iter().any(|&x| (x - la[0]).abs() > 1e-4));
    assert_eq!(la, lb);
    // Deterministic: the same call again, after another image, gives the same numbers.
    let other = a.preprocess(&support::checks::image_b()).unwrap();
    let lo = logits_vec(&a.next_token_logits(&ids, Some(&other)).unwrap());
    assert!(max_abs_diff(&la, &lo) > 1e-4, "another image gave the same logits");
    assert_eq!(la, logits_vec(&a.next_token_logits(&ids, Some(&img)).unwrap()));
}

/// A shared prefix (template, image, question) plus each continuation gives the logits of the whole
/// prompt computed at once, also token by token.
#[test]
fn a_prefix_and_its_continuations_equal_whole_prompts() {
    let tmp = checkpoint("prefix", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&tiny::image()).unwrap();
    let shared = "<s>[INST][IMG]which line matches the reference ?";
    let prefix = model.prefill(&model.encode(shared).unwrap(), Some(&img)).unwrap();
    assert_eq!(prefix.len(), model.encode(shared).unwrap().len() + 8 - 1);
    for tail in [" A[/INST]", " B B red[/INST]", " C"] {
        let whole = model.encode(&format!("{shared}{tail}")).unwrap();
        let want = logits_vec(&model.next_token_logits(&whole, Some(&img)).unwrap());
        let cont = model.extend(&prefix, &model.encode(tail).unwrap()).unwrap();
        assert_eq!(cont.token_ids(), model.expand_image_tokens(&whole, &img).unwrap().as_slice());
        let d = max_abs_diff(&logits_vec(cont.logits()), &want);
        assert!(d < 1e-5, "{tail:?}: prefix + continuation differs from the whole prompt by {d:e}");
        let mut step = prefix.clone();
        for &t in &model.encode(tail).unwrap() {
            step = model.extend(&step, &[t]).unwrap();
        }
        let d = max_abs_diff(&logits_vec(step.logits()), &want);
        assert!(d < 1e-5, "{tail:?} one token at a time: {d:e}");
    }
    let e = model.extend(&prefix, &[model.image_token_id()]).unwrap_err();
    assert!(e.to_string().contains("image tokens"), "{e}");
}

#[test]
fn prompt_and_image_must_fit_together() {
    let tmp = checkpoint("prompt-errors", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&tiny::image()).unwrap();
    let with_img = model.encode(mistral3::PROMPT).unwrap();
    let without = model.encode(mistral3::TEXT_PROMPT).unwrap();
    let e = model.next_token_logits(&without, Some(&img)).unwrap_err();
    assert!(e.to_string().contains("no image token"), "{e}");
    let e = model.next_token_logits(&with_img, None).unwrap_err();
    assert!(e.to_string().contains("no image was given"), "{e}");
    let mut three = with_img.clone();
    let at = three.iter().position(|&t| t == model.image_token_id()).unwrap();
    three.splice(at..at, [model.image_token_id(); 2]);
    let e = model.next_token_logits(&three, Some(&img)).unwrap_err();
    assert!(e.to_string().contains("needs 6"), "{e}");
    let e = model.expand_image_tokens(&without, &img).unwrap_err();
    assert!(e.to_string().contains("expected exactly one [IMG]"), "{e}");
    let e = model.next_token_logits(&[VOCAB as u32], None).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
}

#[test]
fn tied_embeddings_load_without_lm_head() {
    let tmp = checkpoint("tied", &Options { tie: true, ..DEFAULT });
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&tiny::image()).unwrap();
    let ids = model.encode(mistral3::PROMPT).unwrap();
    assert_eq!(model.next_token_logits(&ids, Some(&img)).unwrap().dims(), &[VOCAB]);
    // Untied in config.json but without lm_head: named.
    let path = tmp.0.join("config.json");
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["tie_word_embeddings"] = serde_json::json!(false);
    std::fs::write(&path, cfg.to_string()).unwrap();
    let e = load(&tmp.0).unwrap_err();
    assert!(e.to_string().contains("language_model.lm_head.weight"), "{e}");
}

#[test]
fn missing_files_and_tensors_are_named() {
    let sharded = Options { sharded: true, ..DEFAULT };
    for file in ["config.json", "tokenizer.json", "preprocessor_config.json", "model-00001-of-00002.safetensors"] {
        let tmp = checkpoint(&format!("missing-{file}"), &sharded);
        std::fs::remove_file(tmp.0.join(file)).unwrap();
        let e = load(&tmp.0).unwrap_err();
        assert!(matches!(&e, VisionError::MissingFile { path, .. } if path == &tmp.0.join(file)), "{file}: {e}");
    }
    let name = "vision_tower.transformer.layers.1.feed_forward.up_proj.weight";
    let tmp = checkpoint("missing-tensor", &Options { skip_tensor: Some(name), ..DEFAULT });
    let e = load(&tmp.0).unwrap_err();
    assert!(matches!(e, VisionError::Weights { .. }) && e.to_string().contains(name), "{e}");
}

/// Edits config.json (or another file) of a fresh checkpoint and returns the load error's message.
fn load_error_after(name: &str, file: &str, edit: impl FnOnce(&mut Value)) -> String {
    let tmp = checkpoint(name, &DEFAULT);
    let path = tmp.0.join(file);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, v.to_string()).unwrap();
    let e = load(&tmp.0).unwrap_err();
    eprintln!("{name}: {e}");
    e.to_string()
}

#[test]
fn inconsistent_or_unsupported_files_are_reported() {
    let msg = load_error_after("bad-image-id", "config.json", |c| c["image_token_index"] = 3.into());
    assert!(msg.contains("[IMG]") && msg.contains("tokenizer.json"), "{msg}");
    let msg = load_error_after("bad-patch", "preprocessor_config.json", |c| {
        c["patch_size"] = serde_json::json!({"height": 8, "width": 8});
    });
    assert!(msg.contains("preprocessor_config.json") && msg.contains("patch_size"), "{msg}");
    let msg = load_error_after("bad-merge", "processor_config.json", |c| c["spatial_merge_size"] = 1.into());
    assert!(msg.contains("processor_config.json") && msg.contains("spatial_merge_size"), "{msg}");
    let msg = load_error_after("sliding", "config.json", |c| c["text_config"]["sliding_window"] = 4096.into());
    assert!(msg.contains("config.json") && msg.contains("sliding_window"), "{msg}");
    let msg = load_error_after("no-sliding-key", "config.json", |c| {
        c["text_config"].as_object_mut().unwrap().remove("sliding_window");
    });
    assert!(msg.contains("sliding_window"), "{msg}");
    let msg =
        load_error_after("feature-layers", "config.json", |c| c["vision_feature_layer"] = serde_json::json!([-1, -2]));
    assert!(msg.contains("vision_feature_layer"), "{msg}");
    let msg = load_error_after("feature-layer-range", "config.json", |c| c["vision_feature_layer"] = 7.into());
    assert!(msg.contains("vision_feature_layer"), "{msg}");
    let msg = load_error_after("resample", "preprocessor_config.json", |c| c["resample"] = 2.into());
    assert!(msg.contains("resample"), "{msg}");
}
