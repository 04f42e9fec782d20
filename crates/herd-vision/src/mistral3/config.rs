//! config.json of a Mistral3 checkpoint, normalised to the shared [`Config`]: MistralConfig's and
//! PixtralVisionConfig's defaults, Pixtral's keys renamed to the shared ones, and the settings only
//! Mistral3 has ([`Mistral3Settings`]).

use std::path::Path;

use candle_nn::Activation;
use serde_json::{Map, Value, json};

use crate::config::{Config, Mistral3Settings, config_file, sub_objects};
use crate::error::VisionError;
use crate::family::VlFamily;

/// Reads a mistral3 config.json, parsed to its top-level object already.
pub(crate) fn from_root(mut root: Map<String, Value>, path: &Path) -> Result<Config, VisionError> {
    let file = config_file(path);
    let (mut text, mut vision) = sub_objects(&root, VlFamily::Mistral3, &file)?;
    let settings = normalise_config(&mut root, &mut text, &mut vision).map_err(|m| file.bad(m))?;
    Config::assemble(VlFamily::Mistral3, root, text, vision, Some(settings), &file)
}

/// Normalises a mistral3 config.json: fills MistralConfig's and PixtralVisionConfig's defaults, renames
/// Pixtral's keys to the shared ones, sets `image_token_id`, and returns the Mistral3-only settings.
fn normalise_config(
    root: &mut Map<String, Value>,
    text: &mut Map<String, Value>,
    vision: &mut Map<String, Value>,
) -> Result<Mistral3Settings, String> {
    // MistralConfig's defaults (transformers 5).
    for (key, value) in [
        ("vocab_size", json!(32000)),
        ("hidden_size", json!(4096)),
        ("intermediate_size", json!(14336)),
        ("num_hidden_layers", json!(32)),
        ("num_attention_heads", json!(32)),
        ("num_key_value_heads", json!(8)),
        ("hidden_act", json!("silu")),
        ("rms_norm_eps", json!(1e-6)),
        ("rope_theta", json!(10000.0)),
    ] {
        text.entry(key).or_insert(value);
    }
    if text.get("head_dim").is_some_and(Value::is_null) {
        text.remove("head_dim");
    }
    // MistralConfig's sliding_window defaults to 4096; transformers then masks keys further back.
    match text.get("sliding_window") {
        Some(Value::Null) => {}
        None => return Err("text_config.sliding_window is missing (MistralConfig's default is 4096); herd implements only full attention (null, as Mistral-Small-3.1 sets it)".into()),
        Some(w) => return Err(format!("text_config.sliding_window is {w}; herd implements only full attention (null, as Mistral-Small-3.1 sets it)")),
    }
    if text.get("attention_bias").is_some_and(|b| b.as_bool() == Some(true)) {
        return Err("text_config.attention_bias = true: Mistral's attention has no biases".into());
    }
    let hidden = text.get("hidden_size").cloned().unwrap_or(json!(4096));

    // PixtralVisionConfig's defaults, under the shared key names.
    let rename = |v: &mut Map<String, Value>, from: &str, to: &str, default: Value| {
        let value = v.remove(from).unwrap_or(default);
        v.insert(to.into(), value);
    };
    rename(vision, "num_hidden_layers", "depth", json!(24));
    rename(vision, "num_attention_heads", "num_heads", json!(16));
    rename(vision, "num_channels", "in_channels", json!(3));
    for (key, value) in [
        ("hidden_size", json!(1024)),
        ("intermediate_size", json!(4096)),
        ("patch_size", json!(16)),
        ("hidden_act", json!("gelu")),
    ] {
        vision.entry(key).or_insert(value);
    }
    if let Some(p) = vision.get("patch_size")
        && !p.is_u64()
    {
        return Err(format!("vision_config.patch_size must be an integer, is {p}"));
    }
    let merge = root.get("spatial_merge_size").cloned().unwrap_or(json!(2));
    vision.insert("spatial_merge_size".into(), merge);
    vision.insert("temporal_patch_size".into(), json!(1));
    vision.insert("out_hidden_size".into(), hidden);
    let vision_rope_theta = vision
        .get("rope_parameters")
        .and_then(|r| r.get("rope_theta"))
        .or_else(|| vision.get("rope_theta"))
        .map(|t| t.as_f64().ok_or_else(|| format!("vision_config rope_theta must be a number, is {t}")))
        .transpose()?
        .unwrap_or(10000.0);
    if let Some(kind) = vision.get("rope_parameters").and_then(|r| r.get("rope_type")).and_then(Value::as_str)
        && kind != "axial"
        && kind != "default"
    {
        return Err(format!("vision_config.rope_parameters.rope_type is {kind:?}; Pixtral's rotary is \"axial\""));
    }

    let image = root.get("image_token_index").or_else(|| root.get("image_token_id")).cloned().unwrap_or(json!(10));
    root.insert("image_token_id".into(), image);
    // Mistral3Config's default: tied (transformers unties when both tensors are present and differ).
    root.entry("tie_word_embeddings").or_insert(json!(true));
    let vision_feature_layer = match root.get("vision_feature_layer") {
        None => -1,
        Some(v) => v.as_i64().ok_or_else(|| {
            format!("vision_feature_layer is {v}; herd takes one layer (an integer, -1 in Mistral-Small-3.1)")
        })?,
    };
    let projector_act = match root.get("projector_hidden_act") {
        None => Activation::Gelu,
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("projector_hidden_act {v}: {e}"))?,
    };
    let projector_bias = match root.get("multimodal_projector_bias") {
        None => false,
        Some(v) => v.as_bool().ok_or_else(|| format!("multimodal_projector_bias must be true or false, is {v}"))?,
    };
    Ok(Mistral3Settings {
        image_break_token_id: None,
        image_end_token_id: None,
        vision_feature_layer,
        projector_bias,
        projector_act,
        vision_rope_theta,
    })
}
