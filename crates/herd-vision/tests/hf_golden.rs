//! herd's VL models (preprocessing and network) against HF transformers, on the tiny checkpoints of
//! `herd_test_support::tiny_vl`, from golden values written by `tests/golden/tiny_transformers.py` (Qwen3-VL),
//! `tests/golden/tiny_qwen2_vl.py` (Qwen2-VL, Qwen2.5-VL, and the released processor on the stimuli) and
//! `tests/golden/tiny_gemma3.py` (Gemma 3, and its released processor on the stimuli).

mod support;

use std::path::Path;

use herd_test_support::tiny_vl::{self as tiny, PROMPT, SEED, TEXT_PROMPT};
use herd_vision::{Gemma3Processor, ImageProcessor, VlFamily};
use serde_json::Value;
use support::checks::{TempDir, f32s, load, max_abs_diff, u32s};
use support::vl_golden::{self, FAMILIES, gemma3_processor_json, qwen2_vl_processor_json, stimuli};

#[test]
fn tiny_checkpoints_are_byte_identical_for_a_seed() {
    let (a, b, c) = (TempDir::new("det-a"), TempDir::new("det-b"), TempDir::new("det-c"));
    vl_golden::write_all(&a.0, SEED).unwrap();
    vl_golden::write_all(&b.0, SEED).unwrap();
    vl_golden::write_all(&c.0, SEED + 1).unwrap();
    let mut files = vec!["image.png".to_string(), "inputs.json".into(), "stimuli/dots.png".into()];
    for family in FAMILIES {
        for f in
            ["config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]
        {
            files.push(format!("{}/{f}", tiny::folder(family.model_type())));
        }
    }
    for f in &files {
        assert!(
            std::fs::read(a.0.join(f)).unwrap() == std::fs::read(b.0.join(f)).unwrap(),
            "{f} differs between two runs with the same seed"
        );
    }
    for family in FAMILIES {
        let weights =
            |d: &TempDir| std::fs::read(d.0.join(tiny::folder(family.model_type())).join("model.safetensors")).unwrap();
        assert!(weights(&a) != weights(&c), "{family:?}: another seed gave the same weights");
    }
    // The inputs hold 12 expanded image tokens (6×8 patches merged 2×2) and herd's 48 patch rows.
    let inputs: Value = serde_json::from_slice(&std::fs::read(a.0.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["grid_thw"], serde_json::json!([1, 6, 8]));
    assert_eq!(inputs["herd_pixel_values"].as_array().unwrap().len(), 48);
}

fn golden(name: &str, script: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    assert!(
        path.is_file(),
        "{} is missing. Write it with\n  cargo run -p herd-vision --example write_tiny_vl -- DIR\n  python crates/herd-vision/tests/golden/{script} DIR\nand commit it.",
        path.display()
    );
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(golden["seed"].as_u64(), Some(SEED), "{name}: golden values are for another seed");
    golden
}

/// Pixel values equal the PIL HF processor's (1e-6), and herd's logits equal transformers' with herd's
/// pixel values (the network), with HF's (the whole pipeline) and without an image (1e-4). `values`
/// holds the logits, `inputs` the token ids and pixel values.
fn compare_with_transformers(family: VlFamily, inputs: &Value, values: &Value) {
    let tmp = TempDir::new(&format!("golden-{}", family.model_type()));
    vl_golden::write_all(&tmp.0, SEED).unwrap();
    let model = load(&tmp.0.join(tiny::folder(family.model_type()))).unwrap();
    let prepared = model.preprocess(&image::open(tmp.0.join("image.png")).unwrap()).unwrap();
    assert_eq!(serde_json::json!(prepared.grid_thw()), inputs["grid_thw"]);
    let herd_pixels: Vec<Vec<f32>> = prepared.pixel_values().to_vec2().unwrap();
    let hf_pixels: Vec<Vec<f32>> = inputs["hf_pixel_values"].as_array().unwrap().iter().map(f32s).collect();
    assert_eq!(herd_pixels.len(), hf_pixels.len());
    for (i, (h, p)) in herd_pixels.iter().zip(&hf_pixels).enumerate() {
        let d = max_abs_diff(h, p);
        assert!(d <= 1e-6, "pixel values, patch row {i}: max |Δ| = {d:e}");
    }

    let ids = model.expand_image_tokens(&model.encode(PROMPT).unwrap(), &prepared).unwrap();
    assert_eq!(ids, u32s(&inputs["token_ids"]), "token ids differ from the golden ones");
    let logits: Vec<f32> = model.next_token_logits(&ids, Some(&prepared)).unwrap().to_vec1().unwrap();
    for key in ["logits_herd_pixels", "logits_hf_pixels"] {
        let d = max_abs_diff(&logits, &f32s(&values[key]));
        eprintln!("{family:?} {key}: max |Δlogit| = {d:e}");
        assert!(d < 1e-4, "{family:?} {key}: max |Δlogit| = {d:e}");
    }
    let text_ids = model.encode(TEXT_PROMPT).unwrap();
    assert_eq!(text_ids, u32s(&inputs["text_token_ids"]));
    let logits: Vec<f32> = model.next_token_logits(&text_ids, None).unwrap().to_vec1().unwrap();
    let d = max_abs_diff(&logits, &f32s(&values["logits_text_only"]));
    eprintln!("{family:?} text only: max |Δlogit| = {d:e}");
    assert!(d < 1e-4, "{family:?} text only: max |Δlogit| = {d:e}");
}

#[test]
fn tiny_qwen3_vl_matches_transformers() {
    let g = golden("tiny_transformers.json", "tiny_transformers.py");
    compare_with_transformers(VlFamily::Qwen3Vl, &g, &g);
}

#[test]
fn tiny_qwen2_vl_matches_transformers() {
    let g = golden("tiny_qwen2_vl.json", "tiny_qwen2_vl.py");
    compare_with_transformers(VlFamily::Qwen2Vl, &g, &g["families"]["qwen2_vl"]);
}

#[test]
fn tiny_qwen2_5_vl_matches_transformers() {
    let g = golden("tiny_qwen2_vl.json", "tiny_qwen2_vl.py");
    compare_with_transformers(VlFamily::Qwen2_5Vl, &g, &g["families"]["qwen2_5_vl"]);
}

/// FNV-1a (64-bit) of the bytes, hex, as the golden scripts compute it.
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

/// The three tasks' stimuli through the released Qwen2-VL processor settings (patch 14, merge 2, CLIP
/// mean and std): every stimulus is resampled, and herd's resize is byte-identical to PIL's, so the
/// pixel values equal the HF processor's. The golden file keeps sampled rows and per-column sums over
/// all rows, not the millions of values.
#[test]
fn stimuli_pixel_values_match_the_hf_processor() {
    let g = golden("tiny_qwen2_vl.json", "tiny_qwen2_vl.py");
    let processor =
        ImageProcessor::from_json(&qwen2_vl_processor_json().to_string(), Path::new("preprocessor_config.json"))
            .unwrap();
    // The golden script read the PNG files; so does herd.
    let tmp = TempDir::new("stimuli");
    for (task, img) in stimuli() {
        let want = &g["stimuli"][task.as_str()];
        assert!(want.is_object(), "no golden values for {task}");
        let png = tmp.0.join(format!("{task}.png"));
        img.save(&png).unwrap();
        let rgb = image::open(&png).unwrap().to_rgb8();
        assert_eq!(serde_json::json!([rgb.width(), rgb.height()]), want["size"], "{task}: stimulus size");
        let (h, w) = processor.target_size(rgb.height(), rgb.width()).unwrap();
        assert_eq!(serde_json::json!([h, w]), want["resized"], "{task}: smart_resize");
        let resized = herd_vision::resize_bicubic(&rgb, w, h);
        assert_eq!(fnv1a_hex(resized.as_raw()), want["resized_rgb_fnv1a64"].as_str().unwrap(), "{task}: resize");

        let prepared = processor.preprocess(&image::DynamicImage::ImageRgb8(rgb)).unwrap();
        assert_eq!(serde_json::json!(prepared.grid_thw()), want["grid_thw"], "{task}: grid");
        let pixels: Vec<Vec<f32>> = prepared.pixel_values().to_vec2().unwrap();
        let mut worst = 0f32;
        for (index, row) in want["rows"].as_object().unwrap() {
            let d = max_abs_diff(&pixels[index.parse::<usize>().unwrap()], &f32s(row));
            worst = worst.max(d);
        }
        let sums: Vec<f64> = (0..pixels[0].len()).map(|c| pixels.iter().map(|r| f64::from(r[c])).sum()).collect();
        let sum_diff = sums
            .iter()
            .zip(want["column_sums"].as_array().unwrap())
            .map(|(a, b)| (a - b.as_f64().unwrap()).abs())
            .fold(0.0, f64::max);
        eprintln!("{task}: sampled rows max |Δ| = {worst:e}, column sums max |Δ| = {sum_diff:e}");
        assert!(worst <= 1e-6, "{task}: pixel values differ by {worst:e}");
        assert!(sum_diff <= 1e-6 * pixels.len() as f64, "{task}: column sums differ by {sum_diff:e}");
    }
}

/// Gemma 3: the processor's text expansion gives transformers' ids, the pixel values are the PIL
/// processor's (1e-6), the logits transformers' (1e-4) with either's pixels and without an image, and
/// differ from transformers' all-causal logits (the image block is attended both ways). A prefix plus
/// its continuation gives the one-shot logits.
#[test]
fn tiny_gemma3_matches_transformers() {
    let g = golden("tiny_gemma3.json", "tiny_gemma3.py");
    let prompt = tiny::gemma3::PROMPT;
    assert_eq!(g["prompt"].as_str(), Some(prompt), "transformers rendered Gemma 3's chat template differently");
    let tmp = TempDir::new("golden-gemma3");
    vl_golden::write_all(&tmp.0, SEED).unwrap();
    let model = load(&tmp.0.join(tiny::folder(VlFamily::Gemma3.model_type()))).unwrap();
    let prepared = model.preprocess(&image::open(tmp.0.join("image.png")).unwrap()).unwrap();
    assert_eq!(prepared.pixel_values().dims(), &[1, 3, 32, 32]);
    let pixels: Vec<f32> = prepared.pixel_values().flatten_all().unwrap().to_vec1().unwrap();
    let d = max_abs_diff(&pixels, &f32s(&g["hf_pixel_values"]));
    assert!(d <= 1e-6, "pixel values: max |Δ| = {d:e}");

    let ids = model.encode_prompt(prompt, Some(&prepared)).unwrap();
    assert_eq!(ids, u32s(&g["token_ids"]), "token ids differ from the processor's");
    let image_id = model.image_token_id();
    let types: Vec<u32> = ids.iter().map(|&t| u32::from(t == image_id)).collect();
    assert_eq!(types, u32s(&g["token_type_ids"]));
    let logits: Vec<f32> = model.next_token_logits(&ids, Some(&prepared)).unwrap().to_vec1().unwrap();
    for key in ["logits_herd_pixels", "logits_hf_pixels"] {
        let d = max_abs_diff(&logits, &f32s(&g[key]));
        eprintln!("Gemma3 {key}: max |Δlogit| = {d:e}");
        assert!(d < 1e-4, "Gemma3 {key}: max |Δlogit| = {d:e}");
    }
    let d = max_abs_diff(&logits, &f32s(&g["logits_all_causal"]));
    assert!(d > 1e-2, "the image tokens' bidirectional attention changed nothing ({d:e})");

    let text_ids = model.encode_prompt(tiny::gemma3::TEXT_PROMPT, None).unwrap();
    assert_eq!(text_ids, u32s(&g["text_token_ids"]));
    let text_logits: Vec<f32> = model.next_token_logits(&text_ids, None).unwrap().to_vec1().unwrap();
    let d = max_abs_diff(&text_logits, &f32s(&g["logits_text_only"]));
    eprintln!("Gemma3 text only: max |Δlogit| = {d:e}");
    assert!(d < 1e-4, "Gemma3 text only: max |Δlogit| = {d:e}");

    // The image and the first words as a prefix, the rest continued (past the sliding window).
    let end_of_image = ids.iter().rposition(|&t| t == image_id).unwrap() + 1;
    for cut in [end_of_image, end_of_image + 3, ids.len() - 1] {
        let prefix = model.prefill(&ids[..cut], Some(&prepared)).unwrap();
        let whole = model.extend(&prefix, &ids[cut..]).unwrap();
        let d = max_abs_diff(&whole.logits().to_vec1::<f32>().unwrap(), &logits);
        assert!(d < 1e-4, "prefill {cut} + extend: max |Δlogit| = {d:e}");
        let mut step = prefix;
        for &t in &ids[cut..] {
            step = model.extend(&step, &[t]).unwrap();
        }
        let d = max_abs_diff(&step.logits().to_vec1::<f32>().unwrap(), &logits);
        assert!(d < 1e-4, "prefill {cut} + one token at a time: max |Δlogit| = {d:e}");
    }
}

/// The three tasks' stimuli through the released Gemma 3 processor settings (896×896, bilinear): herd's
/// resize is byte-identical to PIL's, so the pixel values equal the HF processor's. The golden file keeps
/// three rows and each channel's sum.
#[test]
fn gemma3_stimuli_pixel_values_match_the_hf_processor() {
    let g = golden("tiny_gemma3.json", "tiny_gemma3.py");
    let processor =
        Gemma3Processor::from_json(&gemma3_processor_json().to_string(), Path::new("preprocessor_config.json"))
            .unwrap();
    assert_eq!(processor.size, (896, 896));
    let tmp = TempDir::new("gemma3-stimuli");
    for (task, img) in stimuli() {
        let want = &g["stimuli"][task.as_str()];
        assert!(want.is_object(), "no golden values for {task}");
        let png = tmp.0.join(format!("{task}.png"));
        img.save(&png).unwrap();
        let rgb = image::open(&png).unwrap().to_rgb8();
        assert_eq!(serde_json::json!([rgb.width(), rgb.height()]), want["size"], "{task}: stimulus size");
        let resized = herd_vision::resize_bilinear(&rgb, 896, 896);
        assert_eq!(fnv1a_hex(resized.as_raw()), want["resized_rgb_fnv1a64"].as_str().unwrap(), "{task}: resize");

        let prepared = processor.preprocess(&image::DynamicImage::ImageRgb8(rgb), 14, 4).unwrap();
        assert_eq!(prepared.num_image_tokens(), 256, "{task}");
        let pixels = prepared.pixel_values().squeeze(0).unwrap();
        let mut worst = 0f32;
        for (key, row) in want["rows"].as_object().unwrap() {
            let (c, y) = key.split_once('/').unwrap();
            let (c, y) = (c.parse::<usize>().unwrap(), y.parse::<usize>().unwrap());
            let got: Vec<f32> = pixels.get(c).unwrap().get(y).unwrap().to_vec1().unwrap();
            worst = worst.max(max_abs_diff(&got, &f32s(row)));
        }
        let all: Vec<Vec<Vec<f32>>> = pixels.to_vec3().unwrap();
        let sums: Vec<f64> = all.iter().map(|ch| ch.iter().flatten().map(|&v| f64::from(v)).sum()).collect();
        let sum_diff = sums
            .iter()
            .zip(want["channel_sums"].as_array().unwrap())
            .map(|(a, b)| (a - b.as_f64().unwrap()).abs())
            .fold(0.0, f64::max);
        eprintln!("{task}: sampled rows max |Δ| = {worst:e}, channel sums max |Δ| = {sum_diff:e}");
        assert!(worst <= 1e-6, "{task}: pixel values differ by {worst:e}");
        assert!(sum_diff <= 1e-6 * 896.0 * 896.0, "{task}: channel sums differ by {sum_diff:e}");
    }
}
