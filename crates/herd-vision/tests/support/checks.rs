//! Checks every VL family must pass, on its tiny checkpoint (`herd_test_support::tiny_vl`): `tests/qwen3_vl.rs`
//! and `tests/qwen2_vl.rs` run them per family, so the families are held to the same contract.
#![allow(dead_code)] // Each test binary uses a different part.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
pub use herd_test_support::tiny_vl::max_abs_diff;
use herd_test_support::tiny_vl::{self as tiny, DEFAULT, Options, PROMPT, SEED, VOCAB};
use herd_vision::{VisionError, VlFamily, VlModel};
use image::{DynamicImage, Rgb, RgbImage};

/// A fresh, empty folder under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("herd-vision-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }

    /// A folder holding `family`'s tiny checkpoint written with `opts`.
    pub fn checkpoint(family: VlFamily, name: &str, opts: &Options) -> Self {
        let tmp = Self::new(&format!("{}-{name}", family.model_type()));
        tiny::write_checkpoint(&tmp.0, family.model_type(), SEED, opts).expect("write tiny checkpoint");
        tmp
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A JSON array of numbers as f32.
pub fn f32s(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number") as f32).collect()
}

/// A JSON array of token ids.
pub fn u32s(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().expect("array").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

pub fn load(dir: &Path) -> Result<VlModel, VisionError> {
    VlModel::load(dir, &Device::Cpu, DType::F32)
}

/// 24 wide, 16 high: smart_resize keeps it (multiples of 8, 384 pixels within [256, 4096]).
pub fn image_a() -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(24, 16, |x, y| Rgb([(x * 10) as u8, (y * 15) as u8, 128])))
}

pub fn image_b() -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(24, 16, |x, y| Rgb([255 - (y * 12) as u8, 40, (x * 7) as u8])))
}

pub fn logits_vec(t: &Tensor) -> Vec<f32> {
    t.to_vec1::<f32>().expect("f32 logits")
}

pub fn logits_have_vocab_shape_and_are_finite(family: VlFamily) {
    let tmp = TempDir::checkpoint(family, "shape", &Options { sharded: true, ..DEFAULT });
    let model = load(&tmp.0).unwrap();
    assert_eq!(model.family(), family);
    let ids = model.encode(PROMPT).unwrap();
    assert_eq!(ids.iter().filter(|&&t| t == model.image_token_id()).count(), 1);
    let img = model.preprocess(&image_a()).unwrap();
    assert_eq!(img.grid_thw(), [1, 4, 6]);
    assert_eq!(img.num_image_tokens(), 6);
    let logits = model.next_token_logits(&ids, Some(&img)).unwrap();
    assert_eq!(logits.dims(), &[VOCAB]);
    assert_eq!(logits.dtype(), DType::F32);
    let v = logits_vec(&logits);
    assert!(v.iter().all(|x| x.is_finite()), "{v:?}");
    // Random weights: logits must not be constant.
    assert!(v.iter().any(|&x| (x - v[0]).abs() > 1e-4));
    // Text-only prompts work too.
    let text_ids = model.encode("<|im_start|>user\nwhich line ?<|im_end|>").unwrap();
    assert_eq!(model.next_token_logits(&text_ids, None).unwrap().dims(), &[VOCAB]);
}

pub fn same_input_twice_gives_identical_logits(family: VlFamily) {
    let tmp = TempDir::checkpoint(family, "determinism", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let img = model.preprocess(&image_a()).unwrap();
    let first = logits_vec(&model.next_token_logits(&ids, Some(&img)).unwrap());
    // Another call in between must not leave state behind.
    let _ = model.next_token_logits(&ids, Some(&model.preprocess(&image_b()).unwrap())).unwrap();
    let second = logits_vec(&model.next_token_logits(&ids, Some(&img)).unwrap());
    assert_eq!(first, second);
    // A second load of the same folder gives the same numbers.
    let third = logits_vec(&load(&tmp.0).unwrap().next_token_logits(&ids, Some(&img)).unwrap());
    assert_eq!(first, third);
}

pub fn the_image_changes_the_logits(family: VlFamily) {
    let tmp = TempDir::checkpoint(family, "image-matters", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let a = model.preprocess(&image_a()).unwrap();
    let b = model.preprocess(&image_b()).unwrap();
    let la = logits_vec(&model.next_token_logits(&ids, Some(&a)).unwrap());
    let lb = logits_vec(&model.next_token_logits(&ids, Some(&b)).unwrap());
    let d = max_abs_diff(&la, &lb);
    assert!(d > 1e-4, "two different images gave logits within {d}");
    // Passing the prompt expanded already gives the same logits as letting the model expand it.
    let expanded = model.expand_image_tokens(&ids, &a).unwrap();
    assert_eq!(expanded.len(), ids.len() + a.num_image_tokens() - 1);
    assert_eq!(la, logits_vec(&model.next_token_logits(&expanded, Some(&a)).unwrap()));
}

/// A prompt computed as a shared prefix (template, image, question) plus its own continuation gives the
/// logits of the whole prompt computed at once, and the prefix is not changed by continuing it.
pub fn a_prefix_and_its_continuations_equal_whole_prompts(family: VlFamily) {
    let tmp = TempDir::checkpoint(family, "prefix", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&image_b()).unwrap();
    let shared = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>which line matches the reference ?";
    let prefix = model.prefill(&model.encode(shared).unwrap(), Some(&img)).unwrap();
    assert_eq!(prefix.len(), model.encode(shared).unwrap().len() + img.num_image_tokens() - 1);
    for tail in [" A<|im_end|>\n<|im_start|>assistant\n", " B B red<|im_end|>\n<|im_start|>assistant\n", " C"] {
        let whole = model.encode(&format!("{shared}{tail}")).unwrap();
        let want = logits_vec(&model.next_token_logits(&whole, Some(&img)).unwrap());
        let cont = model.extend(&prefix, &model.encode(tail).unwrap()).unwrap();
        assert_eq!(cont.token_ids(), model.expand_image_tokens(&whole, &img).unwrap().as_slice());
        let d = max_abs_diff(&logits_vec(cont.logits()), &want);
        assert!(d < 1e-4, "{tail:?}: prefix + continuation differs from the whole prompt by {d:e}");
        // Token by token (as generation extends) gives the same.
        let mut step = prefix.clone();
        for &t in &model.encode(tail).unwrap() {
            step = model.extend(&step, &[t]).unwrap();
        }
        let d = max_abs_diff(&logits_vec(step.logits()), &want);
        assert!(d < 1e-4, "{tail:?} one token at a time: {d:e}");
    }
    let again = model.prefill(&model.encode(shared).unwrap(), Some(&img)).unwrap();
    assert_eq!(logits_vec(prefix.logits()), logits_vec(again.logits()));
    let e = model.extend(&prefix, &[model.image_token_id()]).unwrap_err();
    assert!(e.to_string().contains("image tokens"), "{e}");
}

pub fn prompt_and_image_must_fit_together(family: VlFamily) {
    let tmp = TempDir::checkpoint(family, "prompt-errors", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&image_a()).unwrap();
    let with_pad = model.encode(PROMPT).unwrap();
    let without = model.encode("<|im_start|>user\nwhich line ?<|im_end|>").unwrap();

    let e = model.next_token_logits(&without, Some(&img)).unwrap_err();
    assert!(matches!(e, VisionError::Prompt { .. }), "{e}");
    assert!(e.to_string().contains("no image token"), "{e}");
    let e = model.next_token_logits(&with_pad, None).unwrap_err();
    assert!(e.to_string().contains("no image was given"), "{e}");
    // Three placeholders: neither one (to expand) nor the six the image needs.
    let mut three = with_pad.clone();
    let at = three.iter().position(|&t| t == model.image_token_id()).unwrap();
    three.splice(at..at, [model.image_token_id(); 2]);
    let e = model.next_token_logits(&three, Some(&img)).unwrap_err();
    assert!(e.to_string().contains("needs 6"), "{e}");
    let e = model.next_token_logits(&[VOCAB as u32], None).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
}

pub fn tied_embeddings_in_a_single_file_load(family: VlFamily) {
    let tmp = TempDir::checkpoint(family, "tied", &Options { tie: true, ..DEFAULT });
    assert!(!tmp.0.join("model.safetensors.index.json").exists());
    let model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let img = model.preprocess(&image_b()).unwrap();
    assert_eq!(model.next_token_logits(&ids, Some(&img)).unwrap().dims(), &[VOCAB]);
}

fn load_err(dir: &Path) -> VisionError {
    let e = load(dir).expect_err("loading should fail");
    eprintln!("load error: {e}");
    e
}

pub fn missing_files_are_named(family: VlFamily) {
    let sharded = Options { sharded: true, ..DEFAULT };
    for file in ["config.json", "tokenizer.json", "preprocessor_config.json", "model-00002-of-00002.safetensors"] {
        let tmp = TempDir::checkpoint(family, &format!("missing-{file}"), &sharded);
        std::fs::remove_file(tmp.0.join(file)).unwrap();
        let e = load_err(&tmp.0);
        match &e {
            VisionError::MissingFile { path, .. } => assert_eq!(path, &tmp.0.join(file)),
            other => panic!("removing {file} gave {other}"),
        }
        let msg = e.to_string();
        assert!(msg.contains(file) && msg.contains("fix:"), "{msg}");
    }
    // No weights at all: the message names what was looked for.
    let tmp = TempDir::checkpoint(family, "missing-weights", &sharded);
    for f in ["model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"] {
        std::fs::remove_file(tmp.0.join(f)).unwrap();
    }
    let msg = load_err(&tmp.0).to_string();
    assert!(msg.contains("model.safetensors") && msg.contains("index.json"), "{msg}");
}

pub fn a_missing_tensor_is_named(family: VlFamily, name: &'static str) {
    let tmp = TempDir::checkpoint(family, "missing-tensor", &Options { skip_tensor: Some(name), ..DEFAULT });
    let e = load_err(&tmp.0);
    assert!(matches!(e, VisionError::Weights { .. }), "{e}");
    assert!(e.to_string().contains(name), "{e}");
}

pub fn inconsistent_files_are_reported(family: VlFamily) {
    // The tokenizer and config.json disagree on <|image_pad|>'s id.
    let tmp = TempDir::checkpoint(family, "bad-token-id", &DEFAULT);
    let path = tmp.0.join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["image_token_id"] = serde_json::json!(3);
    std::fs::write(&path, cfg.to_string()).unwrap();
    let msg = load_err(&tmp.0).to_string();
    assert!(msg.contains("<|image_pad|>") && msg.contains("tokenizer.json"), "{msg}");

    // preprocessor_config.json's patch size is not the vision encoder's.
    let tmp = TempDir::checkpoint(family, "bad-patch", &DEFAULT);
    let mut pre = tiny::preprocessor_json(family.model_type());
    pre["patch_size"] = serde_json::json!(8);
    std::fs::write(tmp.0.join("preprocessor_config.json"), pre.to_string()).unwrap();
    let msg = load_err(&tmp.0).to_string();
    assert!(msg.contains("preprocessor_config.json") && msg.contains("patch_size"), "{msg}");

    // A config.json that is not JSON names the file.
    let tmp = TempDir::checkpoint(family, "bad-json", &DEFAULT);
    std::fs::write(tmp.0.join("config.json"), "{ not json").unwrap();
    let e = load_err(&tmp.0);
    assert!(matches!(e, VisionError::Json { .. }), "{e}");
    assert!(e.to_string().contains("config.json"), "{e}");
}
