//! config.json of a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint, normalised to the shared [`Config`]:
//! transformers' `Qwen2VLTextConfig` defaults, Qwen2-VL's vision key names, and the checks only these
//! families need (MRoPE sections, Qwen2.5-VL's windows, Qwen3-VL's position grid and DeepStack).

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::config::{Config, config_file, sub_objects};
use crate::error::VisionError;
use crate::family::VlFamily;

/// Reads a Qwen family's config.json, parsed to its top-level object already.
pub(crate) fn from_root(family: VlFamily, root: Map<String, Value>, path: &Path) -> Result<Config, VisionError> {
    let file = config_file(path);
    let (mut text, mut vision) = sub_objects(&root, family, &file)?;
    if family.is_qwen2() {
        qwen2_text_defaults(&mut text);
        normalise_qwen2_vision(family, &mut vision).map_err(|m| file.bad(m))?;
    } else {
        vision.entry("hidden_act").or_insert(json!("gelu_pytorch_tanh"));
    }
    let config = Config::assemble(family, root, text, vision, None, &file)?;
    validate(&config, path)?;
    Ok(config)
}

/// The checks of the Qwen families beyond the shared ones.
fn validate(config: &Config, path: &Path) -> Result<(), VisionError> {
    let bad = |message: String| VisionError::Config {
        path: path.to_path_buf(),
        message,
        fix: "use the config.json shipped with the checkpoint",
    };
    let (t, v) = (&config.text_config, &config.vision_config);
    let rope = t.rope();
    if config.family.is_qwen2() && rope.mrope_section.iter().sum::<usize>() != t.head_dim() / 2 {
        return Err(bad(format!(
            "rope_scaling.mrope_section {:?} must sum to head_dim / 2 = {}",
            rope.mrope_section,
            t.head_dim() / 2
        )));
    }
    match config.family {
        VlFamily::Qwen3Vl => {
            let side = (v.num_position_embeddings as f64).sqrt().round() as usize;
            if side == 0 || side * side != v.num_position_embeddings {
                return Err(bad(format!(
                    "vision_config.num_position_embeddings ({}) must be a perfect square",
                    v.num_position_embeddings
                )));
            }
            if let Some(&i) = v.deepstack_visual_indexes.iter().find(|&&i| i >= v.depth) {
                return Err(bad(format!("vision_config.deepstack_visual_indexes holds {i}, beyond depth {}", v.depth)));
            }
            if v.deepstack_visual_indexes.len() > t.num_hidden_layers {
                return Err(bad(format!(
                    "{} DeepStack features but only {} text layers",
                    v.deepstack_visual_indexes.len(),
                    t.num_hidden_layers
                )));
            }
            Ok(())
        }
        VlFamily::Qwen2_5Vl => {
            let window = v.window_size.unwrap_or(0);
            let unit = v.patch_size * v.spatial_merge_size;
            if window == 0 || !window.is_multiple_of(unit) {
                return Err(bad(format!(
                    "vision_config.window_size ({window}) must be a positive multiple of patch_size * spatial_merge_size ({unit})"
                )));
            }
            if let Some(&i) = v.fullatt_block_indexes.iter().find(|&&i| i >= v.depth) {
                return Err(bad(format!("vision_config.fullatt_block_indexes holds {i}, beyond depth {}", v.depth)));
            }
            Ok(())
        }
        VlFamily::Qwen2Vl | VlFamily::Gemma3 | VlFamily::Mistral3 => Ok(()),
    }
}

/// transformers' `Qwen2VLTextConfig` defaults, which differ from Qwen3-VL's.
fn qwen2_text_defaults(text: &mut Map<String, Value>) {
    text.entry("rms_norm_eps").or_insert(json!(1e-5));
    text.entry("rope_theta").or_insert(json!(1_000_000.0));
    if !text.contains_key("rope_scaling") && !text.contains_key("rope_parameters") {
        text.insert("rope_scaling".into(), json!({"mrope_section": [16, 24, 24]}));
    }
    for key in ["rope_scaling", "rope_parameters"] {
        if let Some(Value::Object(rope)) = text.get_mut(key) {
            rope.entry("mrope_section").or_insert(json!([16, 24, 24]));
        }
    }
}

/// Renames Qwen2-VL's vision keys to the shared shape and fills the families' defaults.
fn normalise_qwen2_vision(family: VlFamily, v: &mut Map<String, Value>) -> std::result::Result<(), String> {
    let get = |v: &Map<String, Value>, key: &str| v.get(key).and_then(Value::as_u64).map(|x| x as usize);
    v.entry("patch_size").or_insert(json!(14));
    if family == VlFamily::Qwen2Vl {
        // embed_dim is the width; hidden_size is the merger's output (the text model's width).
        let width = get(v, "embed_dim").ok_or("vision_config.embed_dim is missing")?;
        let out = get(v, "hidden_size").ok_or("vision_config.hidden_size is missing")?;
        let ratio = v.get("mlp_ratio").and_then(Value::as_f64).unwrap_or(4.0);
        v.insert("hidden_size".into(), json!(width));
        v.insert("out_hidden_size".into(), json!(out));
        v.insert("intermediate_size".into(), json!((width as f64 * ratio) as usize));
        v.entry("hidden_act").or_insert(json!("quick_gelu"));
    } else {
        v.entry("hidden_act").or_insert(json!("silu"));
        v.entry("window_size").or_insert(json!(112));
        v.entry("fullatt_block_indexes").or_insert(json!([7, 15, 23, 31]));
    }
    Ok(())
}
