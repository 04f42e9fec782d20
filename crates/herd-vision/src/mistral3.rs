//! Mistral3 (`mistralai/Mistral-Small-3.1-24B-Instruct-2503`, transformers'
//! `Mistral3ForConditionalGeneration`): what differs from the Qwen families, plugged into [`VlModel`].
//!
//! - config.json: `text_config` is a Mistral config (MistralConfig's defaults; `sliding_window` must be
//!   null, as in the released model), `vision_config` a Pixtral one (renamed here to the shared
//!   [`VisionConfig`](crate::VisionConfig) keys), and the top level holds `image_token_index`,
//!   `spatial_merge_size`, `vision_feature_layer`, `projector_hidden_act`, `multimodal_projector_bias`;
//! - the image processor is Pixtral's (`preprocess_pixtral.rs`), the tower and projector in
//!   `vision_pixtral.rs`, the text model is herd's decoder (`text.rs`) without biases or q/k norms and
//!   with 1-D positions (all three MRoPE rows equal are plain RoPE);
//! - `[IMG]` expands to one `[IMG]` per merged patch, row by row, each row closed by `[IMG_BREAK]` and the
//!   last by `[IMG_END]` (`PixtralProcessor.replace_image_token`); the image features replace the
//!   `[IMG]` embeddings in order (transformers' masked scatter), the break tokens stay text;
//! - weights: the released names (`language_model.model.*`, `language_model.lm_head`, `vision_tower.*`,
//!   `multi_modal_projector.*`) or transformers 5's (`model.language_model.*`, `model.vision_tower.*`,
//!   `model.multi_modal_projector.*`, `lm_head`). lm_head is used when present; without it the
//!   embedding is tied (the top-level `tie_word_embeddings`, true by default), as transformers does.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::Activation;
use serde_json::{Map, Value, json};

use crate::config::{Config, VlFamily};
use crate::error::VisionError;
use crate::preprocess::PreparedImage;
use crate::preprocess_pixtral::{check_processor_config, pixtral_processor};
use crate::text::TextModel;
use crate::vision_pixtral::PixtralTower;
use crate::{Parts, Prefix, QwenParts, VisionTower, VlModel, weights};

/// Mistral3's image placeholder, expanded to one token per merged patch.
pub const IMG: &str = "[IMG]";
/// Closes each row of image tokens but the last.
pub const IMG_BREAK: &str = "[IMG_BREAK]";
/// Closes the last row of image tokens.
pub const IMG_END: &str = "[IMG_END]";

/// The settings of config.json that only Mistral3 has.
#[derive(Debug, Clone, PartialEq)]
pub struct Mistral3Settings {
    /// Id of `[IMG_BREAK]` (not in config.json: the tokenizer's, checked at load; 12 in the released one).
    pub image_break_token_id: Option<u32>,
    /// Id of `[IMG_END]` (as above; 13 in the released tokenizer).
    pub image_end_token_id: Option<u32>,
    /// Which hidden state of the vision tower the projector takes (-1: the last block's output).
    pub vision_feature_layer: i64,
    /// Whether the projector's linears have biases (`multimodal_projector_bias`).
    pub projector_bias: bool,
    /// The projector's activation (`projector_hidden_act`, exact GELU by default).
    pub projector_act: Activation,
    /// RoPE base of the vision tower (`vision_config.rope_parameters.rope_theta` or `rope_theta`).
    pub vision_rope_theta: f64,
}

/// Normalises a mistral3 config.json: fills MistralConfig's and PixtralVisionConfig's defaults, renames
/// Pixtral's keys to the shared ones, sets `image_token_id`, and returns the Mistral3-only settings.
pub(crate) fn normalise_config(
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

fn settings(cfg: &Config) -> Result<&Mistral3Settings, VisionError> {
    cfg.mistral3.as_ref().ok_or_else(|| VisionError::Prompt {
        message: "the model is not a mistral3 checkpoint".into(),
        fix: "load a folder whose config.json says model_type = \"mistral3\"",
    })
}

/// [`VlModel::load`] for a mistral3 folder whose config.json is read already.
pub(crate) fn load(dir: &Path, mut config: Config, device: &Device, dtype: DType) -> Result<VlModel, VisionError> {
    let config_path = dir.join("config.json");
    let processor = pixtral_processor(&dir.join("preprocessor_config.json"), &config.vision_config)?;
    check_processor_config(&dir.join("processor_config.json"), &config.vision_config)?;
    if config.vision_config.in_channels != 3 {
        return Err(VisionError::Config {
            path: config_path,
            message: format!(
                "vision_config.num_channels is {}, only RGB (3) is supported",
                config.vision_config.in_channels
            ),
            fix: "use an RGB checkpoint (Mistral-Small-3.1 is)",
        });
    }
    let (tokenizer, tokenizer_path) = crate::open_tokenizer(dir)?;
    let found = tokenizer.token_to_id(IMG);
    if found != Some(config.image_token_id) {
        return Err(VisionError::Config {
            path: config_path,
            message: format!(
                "config.json gives {IMG} the id {} (image_token_index), but {} gives it {}",
                config.image_token_id,
                tokenizer_path.display(),
                found.map_or_else(|| "none".to_string(), |i| i.to_string())
            ),
            fix: "use config.json and tokenizer.json from the same checkpoint",
        });
    }
    let mut ids = [0u32; 2];
    for (slot, token) in ids.iter_mut().zip([IMG_BREAK, IMG_END]) {
        *slot = tokenizer.token_to_id(token).ok_or_else(|| VisionError::Tokenizer {
            path: tokenizer_path.clone(),
            message: format!("has no {token} token, which closes the rows of an image"),
        })?;
    }
    let Some(settings) = config.mistral3.as_mut() else {
        return Err(VisionError::Config {
            path: config_path,
            message: "model_type is not \"mistral3\"".into(),
            fix: "load a folder whose config.json says model_type = \"mistral3\"",
        });
    };
    settings.image_break_token_id = Some(ids[0]);
    settings.image_end_token_id = Some(ids[1]);

    let files = weights::safetensors_files(dir)?;
    let weights_err = |source| VisionError::Weights { path: dir.to_path_buf(), source };
    let vb = weights::open_weights(&files, dtype, device).map_err(weights_err)?;
    // transformers 5 saves `model.language_model.*` and `lm_head`; the released files
    // `language_model.model.*` and `language_model.lm_head`.
    let nested = vb.contains_tensor("model.language_model.embed_tokens.weight");
    let (vision, projector, root, language) = if nested {
        (vb.pp("model.vision_tower"), vb.pp("model.multi_modal_projector"), vb.clone(), "model.language_model")
    } else {
        (vb.pp("vision_tower"), vb.pp("multi_modal_projector"), vb.pp("language_model"), "model")
    };
    let has_head = root.contains_tensor("lm_head.weight");
    if !has_head && config.tie_word_embeddings == Some(false) {
        let name = if nested { "lm_head.weight" } else { "language_model.lm_head.weight" };
        return Err(weights_err(candle_core::Error::Msg(format!(
            "cannot find tensor {name} (tie_word_embeddings is false, so lm_head is not the embedding)"
        ))));
    }
    config.text_config.tie_word_embeddings = Some(!has_head);
    let tower = PixtralTower::new(&config, vision, projector).map_err(weights_err)?;
    let text = TextModel::new(&config, root, language).map_err(weights_err)?;
    Ok(VlModel {
        family: VlFamily::Mistral3,
        parts: Parts::Qwen(Box::new(QwenParts {
            config,
            processor,
            vision: VisionTower::Pixtral(Box::new(tower)),
            text,
        })),
        tokenizer,
        tokenizer_path,
        device: device.clone(),
    })
}

/// `[IMG]` replaced by the image's layout: `rows` rows of `cols` `[IMG]`, each followed by `[IMG_BREAK]`
/// except the last, followed by `[IMG_END]`.
pub(crate) fn expand(model: &QwenParts, token_ids: &[u32], image: &PreparedImage) -> Result<Vec<u32>, VisionError> {
    let s = settings(&model.config)?;
    let img = model.config.image_token_id;
    let (brk, end) = (s.image_break_token_id.unwrap_or(img), s.image_end_token_id.unwrap_or(img));
    let [_, gh, gw] = image.grid_thw();
    let (rows, cols) = (gh / image.merge_size(), gw / image.merge_size());
    let at: Vec<usize> = token_ids.iter().enumerate().filter(|&(_, &t)| t == img).map(|(i, _)| i).collect();
    let [at] = at.as_slice() else {
        return Err(VisionError::Prompt {
            message: format!(
                "the token ids hold {} image tokens (id {img}), expected exactly one [IMG] to expand",
                at.len()
            ),
            fix: "render the chat template with one image entry (it writes [IMG]), and pass ids not expanded yet",
        });
    };
    let mut out = Vec::with_capacity(token_ids.len() + rows * (cols + 1));
    out.extend_from_slice(&token_ids[..*at]);
    for r in 0..rows {
        out.extend(std::iter::repeat_n(img, cols));
        out.push(if r + 1 == rows { end } else { brk });
    }
    out.extend_from_slice(&token_ids[at + 1..]);
    Ok(out)
}

/// [`VlModel::prefill`] for Mistral3: 1-D positions, image features scattered over the `[IMG]` tokens.
pub(crate) fn prefill(
    vl: &VlModel,
    model: &QwenParts,
    token_ids: &[u32],
    image: Option<&PreparedImage>,
) -> Result<Prefix, VisionError> {
    let img_id = model.config.image_token_id;
    let count = token_ids.iter().filter(|&&t| t == img_id).count();
    let ids = match image {
        Some(img) if count == 1 && img.num_image_tokens() != 1 => expand(model, token_ids, img)?,
        Some(_) => token_ids.to_vec(),
        None if count > 0 => {
            return Err(VisionError::Prompt {
                message: format!("the token ids hold image tokens (id {img_id}) but no image was given"),
                fix: "pass the prepared image, or render the prompt without an image",
            });
        }
        None => token_ids.to_vec(),
    };
    let device = &vl.device;
    let input = Tensor::new(ids.as_slice(), device)?.unsqueeze(0)?;
    let mut embeds = model.text.embed(&input)?;
    if let Some(img) = image {
        crate::check_image(&model.config, img)?;
        let n = ids.iter().filter(|&&t| t == img_id).count();
        let expected = img.num_image_tokens();
        if n != expected {
            return Err(VisionError::Prompt {
                message: if n == 0 {
                    format!("an image was given but the token ids hold no image token (id {img_id})")
                } else {
                    format!("the token ids hold {n} image tokens (id {img_id}), but the image needs {expected}")
                },
                fix: "pass the prompt with a single [IMG] (it is expanded) or expanded by expand_image_tokens for this image",
            });
        }
        let pixels = img.pixel_values().to_device(device)?;
        let (features, _) = model.vision.forward(&pixels, img.grid_thw())?;
        embeds = scatter_rows(&embeds, &ids, img_id, &features)?;
    }
    let row: Vec<u32> = (0..ids.len() as u32).collect();
    let pos = [row.clone(), row.clone(), row];
    let (logits, cache) = model.text.forward(embeds, &pos, None, None)?;
    let next_position = ids.len() as u32;
    Ok(Prefix { ids, cache, next_position, logits })
}

/// Row i of `embeds` ([1, seq, hidden]) replaced by the next row of `features` wherever `ids[i]` is the
/// image token (transformers' `masked_scatter`).
fn scatter_rows(embeds: &Tensor, ids: &[u32], image_id: u32, features: &Tensor) -> candle_core::Result<Tensor> {
    let seq = ids.len();
    let all = Tensor::cat(&[embeds.squeeze(0)?, features.to_dtype(embeds.dtype())?], 0)?;
    let mut k = 0u32;
    let index: Vec<u32> = ids
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            if t == image_id {
                k += 1;
                seq as u32 + k - 1
            } else {
                i as u32
            }
        })
        .collect();
    all.index_select(&Tensor::new(index.as_slice(), embeds.device())?, 0)?.unsqueeze(0)
}
