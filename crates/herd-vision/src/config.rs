//! `config.json` of a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint, with the key names of the Hugging Face
//! files, read into one shape for all three families.
//!
//! The families write their files differently: Qwen3-VL nests the language model under `text_config`;
//! Qwen2-VL and Qwen2.5-VL as released keep its keys at the top level (re-saved copies nest them, both
//! are read). Qwen2-VL's `vision_config` names the encoder width `embed_dim`, the merged output width
//! `hidden_size` and the MLP width `mlp_ratio` times the width; the released files spell the channel
//! count `in_chans`. These are normalised here, so the network code sees one [`VisionConfig`].

use std::path::{Path, PathBuf};

use candle_core::{Result as CandleResult, Tensor};
use candle_nn::Activation;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use crate::error::VisionError;

/// The architecture of a checkpoint, from config.json's `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlFamily {
    /// `qwen2_vl` (`Qwen/Qwen2-VL-*-Instruct`): full vision attention, LayerNorm, QuickGELU MLP.
    Qwen2Vl,
    /// `qwen2_5_vl` (`Qwen/Qwen2.5-VL-*-Instruct`): window attention, RMSNorm, SwiGLU MLP.
    Qwen2_5Vl,
    /// `qwen3_vl` (`Qwen/Qwen3-VL-*-Instruct`): learned position grid, DeepStack, QK-norm text model.
    Qwen3Vl,
    /// `gemma3` (`google/gemma-3-*-it`): SigLIP tower, average-pooled projector, Gemma 3 text model with
    /// sliding and global layers (its own config, [`Gemma3Config`](crate::Gemma3Config)).
    Gemma3,
    /// `mistral3` (`mistralai/Mistral-Small-3.1-24B-Instruct-2503`): Pixtral vision tower, patch-merging
    /// projector, Mistral text model with 1-D positions (see `mistral3.rs`).
    Mistral3,
}

impl VlFamily {
    /// config.json's `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            VlFamily::Qwen2Vl => "qwen2_vl",
            VlFamily::Qwen2_5Vl => "qwen2_5_vl",
            VlFamily::Qwen3Vl => "qwen3_vl",
            VlFamily::Gemma3 => "gemma3",
            VlFamily::Mistral3 => "mistral3",
        }
    }

    pub(crate) fn from_model_type(model_type: &str) -> Option<Self> {
        [VlFamily::Qwen2Vl, VlFamily::Qwen2_5Vl, VlFamily::Qwen3Vl, VlFamily::Gemma3, VlFamily::Mistral3]
            .into_iter()
            .find(|f| f.model_type() == model_type)
    }

    /// Qwen2-VL and Qwen2.5-VL share the Qwen2 language model (biased q/k/v, MRoPE in sections).
    pub fn is_qwen2(self) -> bool {
        matches!(self, VlFamily::Qwen2Vl | VlFamily::Qwen2_5Vl)
    }
}

/// An activation named in config.json: candle's, plus CLIP's QuickGELU (`quick_gelu`, Qwen2-VL's vision
/// MLP), which candle does not have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VisionActivation {
    /// `x * sigmoid(1.702 x)`.
    QuickGelu,
    /// Any activation candle knows by its transformers name.
    Candle(Activation),
}

impl VisionActivation {
    pub(crate) fn forward(self, xs: &Tensor) -> CandleResult<Tensor> {
        match self {
            VisionActivation::QuickGelu => xs * candle_nn::ops::sigmoid(&(xs * 1.702)?)?,
            VisionActivation::Candle(act) => xs.apply(&act),
        }
    }
}

impl<'de> Deserialize<'de> for VisionActivation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == "quick_gelu" {
            return Ok(VisionActivation::QuickGelu);
        }
        serde_json::from_value(Value::String(name)).map(VisionActivation::Candle).map_err(serde::de::Error::custom)
    }
}

fn default_silu() -> Activation {
    Activation::Silu
}
fn default_rms_eps() -> f64 {
    1e-6
}
fn default_rope_theta() -> f64 {
    5_000_000.0
}
fn default_mrope_section() -> Vec<usize> {
    vec![24, 20, 20]
}
fn default_three() -> usize {
    3
}
fn default_two() -> usize {
    2
}
fn default_patch() -> usize {
    16
}
fn default_image_token() -> u32 {
    151_655
}
fn default_video_token() -> u32 {
    151_656
}
fn default_vision_start() -> u32 {
    151_652
}
fn default_vision_end() -> u32 {
    151_653
}

/// `rope_scaling` (transformers 4.x) or `rope_parameters` (transformers 5) of the text model.
#[derive(Debug, Clone, Deserialize)]
pub struct RopeParameters {
    /// Frequencies given to the temporal, height and width positions, summing to head_dim/2: in three
    /// consecutive sections (Qwen2-VL, Qwen2.5-VL) or interleaved (Qwen3-VL).
    #[serde(default = "default_mrope_section")]
    pub mrope_section: Vec<usize>,
    /// Present in `rope_parameters` (transformers 5), where it replaces the top-level `rope_theta`.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    /// Must be "default" (no YaRN or other scaling is implemented).
    #[serde(default)]
    pub rope_type: Option<String>,
    /// The released Qwen2-VL and Qwen2.5-VL files' older spelling, `"type": "mrope"` (= default).
    #[serde(default, rename = "type")]
    pub legacy_type: Option<String>,
}

/// `text_config` of config.json (the top level itself for the released Qwen2-VL and Qwen2.5-VL files).
#[derive(Debug, Clone, Deserialize)]
pub struct TextConfig {
    /// Vocabulary size (rows of the embedding and of lm_head).
    pub vocab_size: usize,
    /// Hidden size of the decoder.
    pub hidden_size: usize,
    /// Inner size of the MLP.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Number of query heads.
    pub num_attention_heads: usize,
    /// Number of key/value heads (grouped-query attention).
    pub num_key_value_heads: usize,
    /// Size of one head; hidden_size / num_attention_heads when absent (always so for Qwen2 models).
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// Activation of the MLP gate.
    #[serde(default = "default_silu")]
    pub hidden_act: Activation,
    /// Epsilon of the RMS norms.
    #[serde(default = "default_rms_eps")]
    pub rms_norm_eps: f64,
    /// RoPE base.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// transformers 4.x name of the MRoPE settings.
    #[serde(default)]
    pub rope_scaling: Option<RopeParameters>,
    /// transformers 5 name of the MRoPE settings.
    #[serde(default)]
    pub rope_parameters: Option<RopeParameters>,
    /// Whether lm_head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: Option<bool>,
    /// Whether q/k/v/o projections have biases (Qwen3-VL; false in all its released models). Qwen2
    /// models always have q/k/v biases and no o bias, whatever this says.
    #[serde(default)]
    pub attention_bias: bool,
    /// Sliding-window attention (false in every released Qwen2-VL and Qwen2.5-VL; not implemented).
    #[serde(default)]
    pub use_sliding_window: bool,
}

impl TextConfig {
    /// The size of one attention head.
    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// The MRoPE settings, whichever key they came under.
    pub fn rope(&self) -> RopeParameters {
        self.rope_parameters.clone().or_else(|| self.rope_scaling.clone()).unwrap_or(RopeParameters {
            mrope_section: default_mrope_section(),
            rope_theta: None,
            rope_type: None,
            legacy_type: None,
        })
    }

    /// The RoPE base (from `rope_parameters` when given there).
    pub fn rope_theta(&self) -> f64 {
        self.rope().rope_theta.unwrap_or(self.rope_theta)
    }
}

/// `vision_config` of config.json, normalised over the families (see the module docs).
#[derive(Debug, Clone, Deserialize)]
pub struct VisionConfig {
    /// Number of vision transformer blocks.
    pub depth: usize,
    /// Width of the vision transformer (Qwen2-VL's `embed_dim`).
    pub hidden_size: usize,
    /// Activation of the vision MLP.
    pub hidden_act: VisionActivation,
    /// Inner size of the vision MLP (Qwen2-VL: `embed_dim * mlp_ratio`).
    pub intermediate_size: usize,
    /// Number of attention heads.
    pub num_heads: usize,
    /// Colour channels (3; `in_chans` in the released Qwen2-VL and Qwen2.5-VL files).
    #[serde(default = "default_three", alias = "in_chans")]
    pub in_channels: usize,
    /// Side of a square patch in pixels.
    #[serde(default = "default_patch")]
    pub patch_size: usize,
    /// Side of the square of patches merged into one token.
    #[serde(default = "default_two")]
    pub spatial_merge_size: usize,
    /// Frames per temporal patch (an image is duplicated to fill it).
    #[serde(default = "default_two")]
    pub temporal_patch_size: usize,
    /// Width of the merged tokens handed to the text model (its hidden size; Qwen2-VL's `hidden_size`).
    pub out_hidden_size: usize,
    /// Qwen3-VL: size of the learned position grid (a perfect square); 0 elsewhere.
    #[serde(default)]
    pub num_position_embeddings: usize,
    /// Qwen3-VL: vision blocks whose output is injected into the first text layers (DeepStack).
    #[serde(default)]
    pub deepstack_visual_indexes: Vec<usize>,
    /// Qwen2.5-VL: side in pixels of the windows its windowed blocks attend within.
    #[serde(default)]
    pub window_size: Option<usize>,
    /// Qwen2.5-VL: the blocks that attend over the whole image instead of within windows.
    #[serde(default)]
    pub fullatt_block_indexes: Vec<usize>,
}

/// config.json of a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint.
#[derive(Debug, Clone)]
pub struct Config {
    /// From `model_type`.
    pub family: VlFamily,
    /// The language model.
    pub text_config: TextConfig,
    /// The vision encoder.
    pub vision_config: VisionConfig,
    /// Id of `<|image_pad|>`.
    pub image_token_id: u32,
    /// Id of `<|video_pad|>` (videos are not supported here).
    pub video_token_id: u32,
    /// Id of `<|vision_start|>`.
    pub vision_start_token_id: u32,
    /// Id of `<|vision_end|>`.
    pub vision_end_token_id: u32,
    /// Top-level tie flag (used when text_config has none).
    pub tie_word_embeddings: Option<bool>,
    /// Mistral3's own settings (None for the Qwen families).
    pub mistral3: Option<crate::mistral3::Mistral3Settings>,
}

/// The top-level keys besides the two sub-configurations.
#[derive(Deserialize)]
struct Ids {
    #[serde(default = "default_image_token")]
    image_token_id: u32,
    #[serde(default = "default_video_token")]
    video_token_id: u32,
    #[serde(default = "default_vision_start")]
    vision_start_token_id: u32,
    #[serde(default = "default_vision_end")]
    vision_end_token_id: u32,
    #[serde(default)]
    tie_word_embeddings: Option<bool>,
}

impl Config {
    /// Whether lm_head is the embedding matrix.
    pub fn tie_word_embeddings(&self) -> bool {
        self.text_config.tie_word_embeddings.or(self.tie_word_embeddings).unwrap_or(false)
    }

    /// Reads and checks `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, VisionError> {
        let text = read_to_string(path, "the model configuration")?;
        Self::from_json(&text, path)
    }

    /// Parses the text of a config.json; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, VisionError> {
        let json_err = |source| VisionError::Json { path: path.to_path_buf(), what: "VL model config.json", source };
        let bad = |message: String| VisionError::Config {
            path: path.to_path_buf(),
            message,
            fix: "use the config.json shipped with a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint",
        };
        let root: Map<String, Value> = serde_json::from_str(text).map_err(json_err)?;
        let model_type = root.get("model_type").and_then(Value::as_str).unwrap_or("qwen3_vl");
        let family = VlFamily::from_model_type(model_type).filter(|f| *f != VlFamily::Gemma3).ok_or_else(|| {
            bad(format!(
                "model_type is {model_type:?}; this parser reads \"qwen2_vl\", \"qwen2_5_vl\", \"qwen3_vl\" and \"mistral3\" (Gemma 3: Gemma3Config)"
            ))
        })?;
        let mut text_obj = match root.get("text_config") {
            Some(Value::Object(t)) => t.clone(),
            Some(_) => return Err(bad("text_config is not an object".into())),
            // The released Qwen2-VL and Qwen2.5-VL files keep the language model's keys at the top level.
            None if family.is_qwen2() => root.clone(),
            None => return Err(bad("text_config is missing".into())),
        };
        let mut vision_obj = match root.get("vision_config") {
            Some(Value::Object(v)) => v.clone(),
            _ => return Err(bad("vision_config is missing or not an object".into())),
        };
        let mut root = root;
        let mut mistral3 = None;
        if family.is_qwen2() {
            qwen2_text_defaults(&mut text_obj);
            normalise_qwen2_vision(family, &mut vision_obj).map_err(bad)?;
        } else if family == VlFamily::Mistral3 {
            mistral3 = Some(crate::mistral3::normalise_config(&mut root, &mut text_obj, &mut vision_obj).map_err(bad)?);
        } else {
            vision_obj.entry("hidden_act").or_insert(json!("gelu_pytorch_tanh"));
        }
        let ids: Ids = serde_json::from_value(Value::Object(root)).map_err(json_err)?;
        let cfg = Self {
            family,
            text_config: serde_json::from_value(Value::Object(text_obj)).map_err(json_err)?,
            vision_config: serde_json::from_value(Value::Object(vision_obj)).map_err(json_err)?,
            image_token_id: ids.image_token_id,
            video_token_id: ids.video_token_id,
            vision_start_token_id: ids.vision_start_token_id,
            vision_end_token_id: ids.vision_end_token_id,
            tie_word_embeddings: ids.tie_word_embeddings,
            mistral3,
        };
        cfg.validate(path)?;
        Ok(cfg)
    }

    fn validate(&self, path: &Path) -> Result<(), VisionError> {
        let bad = |message: String| VisionError::Config {
            path: path.to_path_buf(),
            message,
            fix: "use the config.json shipped with the checkpoint",
        };
        let t = &self.text_config;
        let v = &self.vision_config;
        if t.num_attention_heads == 0
            || t.num_key_value_heads == 0
            || !t.num_attention_heads.is_multiple_of(t.num_key_value_heads)
        {
            return Err(bad(format!(
                "text_config.num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
                t.num_attention_heads, t.num_key_value_heads
            )));
        }
        if t.head_dim() == 0 || !t.head_dim().is_multiple_of(2) {
            return Err(bad(format!("text_config.head_dim ({}) must be even and positive", t.head_dim())));
        }
        if t.use_sliding_window {
            return Err(bad("use_sliding_window = true is not supported (no released VL model uses it)".into()));
        }
        let rope = t.rope();
        if rope.mrope_section.len() != 3 {
            return Err(bad(format!(
                "text_config.rope_scaling.mrope_section must have 3 entries, has {:?}",
                rope.mrope_section
            )));
        }
        if self.family.is_qwen2() && rope.mrope_section.iter().sum::<usize>() != t.head_dim() / 2 {
            return Err(bad(format!(
                "rope_scaling.mrope_section {:?} must sum to head_dim / 2 = {}",
                rope.mrope_section,
                t.head_dim() / 2
            )));
        }
        for kind in [rope.rope_type.as_deref(), rope.legacy_type.as_deref()].into_iter().flatten() {
            if kind != "default" && kind != "mrope" {
                return Err(bad(format!("text rope type {kind:?} is not supported (only \"default\"/\"mrope\")")));
            }
        }
        if v.num_heads == 0
            || !v.hidden_size.is_multiple_of(v.num_heads)
            || !(v.hidden_size / v.num_heads).is_multiple_of(4)
        {
            return Err(bad(format!(
                "vision_config.hidden_size ({}) / num_heads ({}) must be a multiple of 4",
                v.hidden_size, v.num_heads
            )));
        }
        if v.patch_size == 0 || v.spatial_merge_size == 0 || v.temporal_patch_size == 0 {
            return Err(bad(
                "vision_config patch_size, spatial_merge_size and temporal_patch_size must be positive".into()
            ));
        }
        if v.out_hidden_size != t.hidden_size {
            return Err(bad(format!(
                "vision_config's output width ({}) must equal the text hidden_size ({})",
                v.out_hidden_size, t.hidden_size
            )));
        }
        match self.family {
            VlFamily::Qwen3Vl => self.validate_qwen3(path),
            VlFamily::Qwen2_5Vl => {
                let window = v.window_size.unwrap_or(0);
                let unit = v.patch_size * v.spatial_merge_size;
                if window == 0 || !window.is_multiple_of(unit) {
                    return Err(bad(format!(
                        "vision_config.window_size ({window}) must be a positive multiple of patch_size * spatial_merge_size ({unit})"
                    )));
                }
                if let Some(&i) = v.fullatt_block_indexes.iter().find(|&&i| i >= v.depth) {
                    return Err(bad(format!(
                        "vision_config.fullatt_block_indexes holds {i}, beyond depth {}",
                        v.depth
                    )));
                }
                Ok(())
            }
            VlFamily::Qwen2Vl | VlFamily::Gemma3 | VlFamily::Mistral3 => Ok(()),
        }
    }

    fn validate_qwen3(&self, path: &Path) -> Result<(), VisionError> {
        let bad = |message: String| VisionError::Config {
            path: path.to_path_buf(),
            message,
            fix: "use the config.json shipped with the checkpoint",
        };
        let (t, v) = (&self.text_config, &self.vision_config);
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

pub(crate) fn read_to_string(path: &Path, what: &'static str) -> Result<String, VisionError> {
    if !path.is_file() {
        return Err(VisionError::MissingFile { path: path.to_path_buf(), what });
    }
    std::fs::read_to_string(path).map_err(|source| VisionError::Io { path: PathBuf::from(path), source })
}
