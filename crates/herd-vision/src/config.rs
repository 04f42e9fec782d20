//! The configuration shape that the families run through the shared decoder (Qwen2-VL, Qwen2.5-VL,
//! Qwen3-VL, Mistral3) are read into: [`Config`], with the Hugging Face files' key names.
//!
//! The families write their files differently: Qwen3-VL nests the language model under `text_config`;
//! Qwen2-VL and Qwen2.5-VL as released keep its keys at the top level (re-saved copies nest them, both
//! are read). Qwen2-VL's `vision_config` names the encoder width `embed_dim`, the merged output width
//! `hidden_size` and the MLP width `mlp_ratio` times the width; the released files spell the channel
//! count `in_chans`; Mistral3's vision tower is Pixtral's, with its own names. Each family normalises its
//! objects to the shared keys (`qwen::config`, `mistral3::config`); [`Config::assemble`] then reads and
//! checks what they share, so the network code sees one [`VisionConfig`].

use std::path::Path;

use candle_core::{Result as CandleResult, Tensor};
use candle_nn::Activation;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::error::VisionError;
use crate::family::VlFamily;
use crate::files::JsonFile;

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
    pub mistral3: Option<Mistral3Settings>,
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

    /// The shared half of parsing, after the family normalised its objects to the shared keys: the
    /// top-level ids, the two sub-configurations and the checks every family needs. `file` names
    /// config.json in errors.
    pub(crate) fn assemble(
        family: VlFamily,
        root: Map<String, Value>,
        text: Map<String, Value>,
        vision: Map<String, Value>,
        mistral3: Option<Mistral3Settings>,
        file: &JsonFile<'_>,
    ) -> Result<Self, VisionError> {
        let ids: Ids = file.parse_value(Value::Object(root))?;
        let cfg = Self {
            family,
            text_config: file.parse_value(Value::Object(text))?,
            vision_config: file.parse_value(Value::Object(vision))?,
            image_token_id: ids.image_token_id,
            video_token_id: ids.video_token_id,
            vision_start_token_id: ids.vision_start_token_id,
            vision_end_token_id: ids.vision_end_token_id,
            tie_word_embeddings: ids.tie_word_embeddings,
            mistral3,
        };
        cfg.validate(file.path)?;
        Ok(cfg)
    }

    /// The checks every family of this shape needs (the family's own follow in its module).
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
        Ok(())
    }
}

/// The settings of config.json that only Mistral3 has (read by `mistral3::config`).
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

/// A JSON object, as serde_json holds it.
pub(crate) type Object = Map<String, Value>;

/// config.json's `text_config` and `vision_config` objects, copied for the family to normalise. The
/// released Qwen2-VL and Qwen2.5-VL files keep the language model's keys at the top level.
pub(crate) fn sub_objects(
    root: &Object,
    family: VlFamily,
    file: &JsonFile<'_>,
) -> Result<(Object, Object), VisionError> {
    let text = match root.get("text_config") {
        Some(Value::Object(t)) => t.clone(),
        Some(_) => return Err(file.bad("text_config is not an object".into())),
        None if family.is_qwen2() => root.clone(),
        None => return Err(file.bad("text_config is missing".into())),
    };
    let vision = match root.get("vision_config") {
        Some(Value::Object(v)) => v.clone(),
        _ => return Err(file.bad("vision_config is missing or not an object".into())),
    };
    Ok((text, vision))
}

/// The JSON file errors of a config.json read into [`Config`].
pub(crate) fn config_file(path: &Path) -> JsonFile<'_> {
    JsonFile::new(
        path,
        "VL model config.json",
        "use the config.json shipped with a Qwen2-VL, Qwen2.5-VL or Qwen3-VL checkpoint",
    )
}
