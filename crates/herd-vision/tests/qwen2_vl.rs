//! Qwen2-VL and Qwen2.5-VL: the checks every family passes (`support::checks`) on their tiny
//! checkpoints, plus what is theirs alone: the released config.json layout (flat text keys, Qwen2-VL's
//! `embed_dim`/`mlp_ratio`, `in_chans`, `"type": "mrope"`), both tensor-name layouts, and Qwen2.5-VL's
//! window attention. Agreement with HF transformers is in `tests/hf_golden.rs`.

mod support;

use std::path::Path;

use herd_test_support::tiny_vl::{DEFAULT, Options, PROMPT};
use herd_vision::{Config, VisionActivation, VlFamily};
use support::checks::{self, TempDir, image_a, load, logits_vec, max_abs_diff};

const FAMILIES: [VlFamily; 2] = [VlFamily::Qwen2Vl, VlFamily::Qwen2_5Vl];

#[test]
fn logits_have_vocab_shape_and_are_finite() {
    FAMILIES.into_iter().for_each(checks::logits_have_vocab_shape_and_are_finite);
}

#[test]
fn same_input_twice_gives_identical_logits() {
    FAMILIES.into_iter().for_each(checks::same_input_twice_gives_identical_logits);
}

#[test]
fn the_image_changes_the_logits() {
    FAMILIES.into_iter().for_each(checks::the_image_changes_the_logits);
}

#[test]
fn a_prefix_and_its_continuations_equal_whole_prompts() {
    FAMILIES.into_iter().for_each(checks::a_prefix_and_its_continuations_equal_whole_prompts);
}

#[test]
fn prompt_and_image_must_fit_together() {
    FAMILIES.into_iter().for_each(checks::prompt_and_image_must_fit_together);
}

#[test]
fn tied_embeddings_in_a_single_file_load() {
    // Qwen2.5-VL-3B ties its embeddings.
    FAMILIES.into_iter().for_each(checks::tied_embeddings_in_a_single_file_load);
}

#[test]
fn missing_files_are_named() {
    FAMILIES.into_iter().for_each(checks::missing_files_are_named);
}

#[test]
fn a_missing_tensor_is_named() {
    checks::a_missing_tensor_is_named(VlFamily::Qwen2Vl, "visual.merger.ln_q.bias");
    checks::a_missing_tensor_is_named(VlFamily::Qwen2_5Vl, "visual.blocks.2.mlp.up_proj.bias");
}

#[test]
fn inconsistent_files_are_reported() {
    FAMILIES.into_iter().for_each(checks::inconsistent_files_are_reported);
}

/// The text model's keys of `Qwen/Qwen2-VL-7B-Instruct` and `Qwen/Qwen2.5-VL-7B-Instruct`'s config.json
/// (both 7B models share them), at the top level as released.
const RELEASED_TEXT: &str = r#""attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
    "vision_start_token_id": 151652, "vision_end_token_id": 151653, "vision_token_id": 151654,
    "image_token_id": 151655, "video_token_id": 151656, "hidden_act": "silu", "hidden_size": 3584,
    "initializer_range": 0.02, "intermediate_size": 18944, "max_window_layers": 28,
    "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.41.2", "use_cache": true, "use_sliding_window": false, "vocab_size": 152064,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}"#;

#[test]
fn released_qwen2_vl_config_reads_as_transformers_does() {
    let json = format!(
        r#"{{"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
            "max_position_embeddings": 32768, {RELEASED_TEXT},
            "vision_config": {{"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
                "temporal_patch_size": 2}}}}"#
    );
    let c = Config::from_json(&json, Path::new("config.json")).unwrap();
    assert_eq!(c.family, VlFamily::Qwen2Vl);
    let (t, v) = (&c.text_config, &c.vision_config);
    assert_eq!((t.hidden_size, t.head_dim(), t.num_key_value_heads, t.vocab_size), (3584, 128, 4, 152_064));
    assert_eq!(t.rope().mrope_section, vec![16, 24, 24]);
    assert_eq!(t.rope_theta(), 1e6);
    assert!(!c.tie_word_embeddings());
    // embed_dim is the width, hidden_size the merger's output, the MLP 4 × 1280 wide, QuickGELU.
    assert_eq!((v.hidden_size, v.out_hidden_size, v.intermediate_size), (1280, 3584, 5120));
    assert_eq!((v.patch_size, v.in_channels, v.num_heads, v.depth), (14, 3, 16, 32));
    assert_eq!(v.hidden_act, VisionActivation::QuickGelu);
    assert_eq!(v.window_size, None);
}

#[test]
fn released_qwen2_5_vl_config_reads_as_transformers_does() {
    let json = format!(
        r#"{{"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
            "max_position_embeddings": 128000, {RELEASED_TEXT},
            "vision_config": {{"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
                "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
                "spatial_patch_size": 14, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
                "tokens_per_second": 2, "temporal_patch_size": 2}}}}"#
    );
    let c = Config::from_json(&json, Path::new("config.json")).unwrap();
    assert_eq!(c.family, VlFamily::Qwen2_5Vl);
    let v = &c.vision_config;
    assert_eq!((v.hidden_size, v.out_hidden_size, v.intermediate_size), (1280, 3584, 3420));
    assert_eq!((v.window_size, v.fullatt_block_indexes.as_slice()), (Some(112), &[7, 15, 23, 31][..]));
    assert_eq!(v.hidden_act, VisionActivation::Candle(candle_nn::Activation::Silu));

    // A window that is not a whole number of merged patches, an unknown model_type and sliding-window
    // attention are errors that name the key.
    let bad = json.replace("\"window_size\": 112", "\"window_size\": 100");
    let e = Config::from_json(&bad, Path::new("config.json")).unwrap_err().to_string();
    assert!(e.contains("window_size") && e.contains("config.json"), "{e}");
    let bad = json.replace("\"qwen2_5_vl\"", "\"llava\"");
    let e = Config::from_json(&bad, Path::new("config.json")).unwrap_err().to_string();
    assert!(e.contains("model_type") && e.contains("qwen2_vl"), "{e}");
    let bad = json.replace("\"use_sliding_window\": false", "\"use_sliding_window\": true");
    let e = Config::from_json(&bad, Path::new("config.json")).unwrap_err().to_string();
    assert!(e.contains("use_sliding_window"), "{e}");
}

/// transformers >= 4.52 saves `model.visual.*` and `model.language_model.*`; the released files have
/// `visual.*` and `model.*`. Both load to the same network.
#[test]
fn both_tensor_name_layouts_give_the_same_logits() {
    for family in FAMILIES {
        let released = TempDir::checkpoint(family, "names-released", &DEFAULT);
        let nested =
            TempDir::checkpoint(family, "names-nested", &Options { nested_names: true, sharded: true, ..DEFAULT });
        let logits = |dir: &Path| {
            let model = load(dir).unwrap();
            let img = model.preprocess(&image_a()).unwrap();
            logits_vec(&model.next_token_logits(&model.encode(PROMPT).unwrap(), Some(&img)).unwrap())
        };
        assert_eq!(logits(&released.0), logits(&nested.0), "{family:?}");
    }
}

/// With windows as large as the image, every block attends over the whole image: the logits change, so
/// the windowed blocks really attend within windows.
#[test]
fn qwen2_5_vl_windows_matter() {
    let tmp = TempDir::checkpoint(VlFamily::Qwen2_5Vl, "windows", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&image_a()).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let windowed = logits_vec(&model.next_token_logits(&ids, Some(&img)).unwrap());
    let path = tmp.0.join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["vision_config"]["window_size"] = serde_json::json!(64);
    std::fs::write(&path, cfg.to_string()).unwrap();
    let whole = load(&tmp.0).unwrap();
    let d = max_abs_diff(&windowed, &logits_vec(&whole.next_token_logits(&ids, Some(&img)).unwrap()));
    assert!(d > 1e-4, "window attention made no difference ({d:e})");
}
