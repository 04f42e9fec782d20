//! herd's Qwen3-VL (preprocessing and network) against HF transformers, on the tiny checkpoint of
//! `support::tiny_vl`, from golden values written by `tests/golden/tiny_transformers.py`.

mod support;

use candle_core::{DType, Device};
use herd_vision::Qwen3Vl;
use std::path::{Path, PathBuf};
use support::tiny_vl::{self, PROMPT, SEED, TEXT_PROMPT};

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("herd-vision-golden-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "vectors of different lengths");
    a.iter()
        .zip(b)
        .map(|(x, y)| if x.is_finite() && y.is_finite() { (x - y).abs() } else { f32::INFINITY })
        .fold(0.0, f32::max)
}

#[test]
fn tiny_checkpoint_is_byte_identical_for_a_seed() {
    let (a, b, c) = (TempDir::new("det-a"), TempDir::new("det-b"), TempDir::new("det-c"));
    tiny_vl::write_all(&a.0, SEED).unwrap();
    tiny_vl::write_all(&b.0, SEED).unwrap();
    tiny_vl::write_all(&c.0, SEED + 1).unwrap();
    let files = [
        "qwen3_vl/config.json",
        "qwen3_vl/preprocessor_config.json",
        "qwen3_vl/tokenizer.json",
        "qwen3_vl/tokenizer_config.json",
        "qwen3_vl/model.safetensors",
        "image.png",
        "inputs.json",
    ];
    for f in files {
        assert!(
            std::fs::read(a.0.join(f)).unwrap() == std::fs::read(b.0.join(f)).unwrap(),
            "{f} differs between two runs with the same seed"
        );
    }
    let weights = |d: &TempDir| std::fs::read(d.0.join("qwen3_vl/model.safetensors")).unwrap();
    assert!(weights(&a) != weights(&c), "another seed gave the same weights");
    // The inputs hold 12 expanded image tokens (6×8 patches merged 2×2) and herd's 48 patch rows.
    let inputs: serde_json::Value = serde_json::from_slice(&std::fs::read(a.0.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["grid_thw"], serde_json::json!([1, 6, 8]));
    assert_eq!(inputs["herd_pixel_values"].as_array().unwrap().len(), 48);
}

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/tiny_transformers.json");

#[test]
fn tiny_qwen3_vl_matches_transformers() {
    let path = Path::new(GOLDEN);
    assert!(
        path.is_file(),
        "{} is missing. Write it with\n  cargo run -p herd-vision --example write_tiny_qwen3_vl -- DIR\n  python crates/herd-vision/tests/golden/tiny_transformers.py DIR\nand commit it.",
        path.display()
    );
    compare_with_transformers(path);
}

/// Pixel values equal the slow HF processor's (1e-5), and herd's logits equal transformers' with
/// herd's pixel values (the network), with HF's (the whole pipeline) and without an image (1e-4).
fn compare_with_transformers(path: &Path) {
    let golden: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(golden["seed"].as_u64(), Some(SEED), "golden values are for another seed");
    let tmp = TempDir::new("golden");
    tiny_vl::write_all(&tmp.0, SEED).unwrap();
    let dir = tmp.0.join("qwen3_vl");
    // The safetensors bytes (and so `model_safetensors_fnv1a64`) depend on the writer's tensor order, which
    // is not stable across builds; the weights are seeded, and the logits below check them.
    let f32s = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number") as f32).collect()
    };
    let u32s = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array().expect("array").iter().map(|x| x.as_u64().expect("id") as u32).collect()
    };

    let mut model = Qwen3Vl::load(&dir, &Device::Cpu, DType::F32).unwrap();
    let prepared = model.preprocess(&image::open(tmp.0.join("image.png")).unwrap()).unwrap();
    assert_eq!(serde_json::json!(prepared.grid_thw()), golden["grid_thw"]);
    let herd_pixels: Vec<Vec<f32>> = prepared.pixel_values().to_vec2().unwrap();
    let hf_pixels: Vec<Vec<f32>> = golden["hf_pixel_values"].as_array().unwrap().iter().map(f32s).collect();
    assert_eq!(herd_pixels.len(), hf_pixels.len());
    for (i, (h, p)) in herd_pixels.iter().zip(&hf_pixels).enumerate() {
        let d = max_abs_diff(h, p);
        assert!(d < 1e-5, "pixel values, patch row {i}: max |Δ| = {d:e}");
    }

    let ids = model.expand_image_tokens(&model.encode(PROMPT).unwrap(), &prepared).unwrap();
    assert_eq!(ids, u32s(&golden["token_ids"]), "token ids differ from the golden ones");
    let logits: Vec<f32> = model.next_token_logits(&ids, Some(&prepared)).unwrap().to_vec1().unwrap();
    for key in ["logits_herd_pixels", "logits_hf_pixels"] {
        let d = max_abs_diff(&logits, &f32s(&golden[key]));
        assert!(d < 1e-4, "{key}: max |Δlogit| = {d:e}");
    }
    let text_ids = model.encode(TEXT_PROMPT).unwrap();
    assert_eq!(text_ids, u32s(&golden["text_token_ids"]));
    let logits: Vec<f32> = model.next_token_logits(&text_ids, None).unwrap().to_vec1().unwrap();
    let d = max_abs_diff(&logits, &f32s(&golden["logits_text_only"]));
    assert!(d < 1e-4, "text only: max |Δlogit| = {d:e}");
}

/// FNV-1a (64-bit) of the bytes, hex: a fingerprint of the weights that the Python script computes
/// the same way (herd-vision has no hashing dependency).
fn fnv1a_hex(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[test]
fn fnv1a_of_known_strings() {
    assert_eq!(fnv1a_hex(b""), "cbf29ce484222325");
    assert_eq!(fnv1a_hex(b"a"), "af63dc4c8601ec8c");
}
