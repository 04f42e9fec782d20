//! `config.json` of a Qwen3-VL checkpoint, with the key names of the Hugging Face files.

use std::path::{Path, PathBuf};

use candle_nn::Activation;
use serde::Deserialize;

use crate::error::VisionError;

fn default_silu() -> Activation {
    Activation::Silu
}
fn default_gelu_tanh() -> Activation {
    Activation::GeluPytorchTanh
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
    /// Frequencies given to the temporal, height and width position (interleaved), summing to head_dim/2.
    #[serde(default = "default_mrope_section")]
    pub mrope_section: Vec<usize>,
    /// Present in `rope_parameters` (transformers 5), where it replaces the top-level `rope_theta`.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    /// Must be "default" (no YaRN or other scaling is implemented).
    #[serde(default)]
    pub rope_type: Option<String>,
}

/// `text_config` of config.json.
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
    /// Size of one head; hidden_size / num_attention_heads when absent.
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
    /// Whether q/k/v/o projections have biases (false in all released Qwen3-VL models).
    #[serde(default)]
    pub attention_bias: bool,
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
        })
    }

    /// The RoPE base (from `rope_parameters` when given there).
    pub fn rope_theta(&self) -> f64 {
        self.rope().rope_theta.unwrap_or(self.rope_theta)
    }
}

/// `vision_config` of config.json.
#[derive(Debug, Clone, Deserialize)]
pub struct VisionConfig {
    /// Number of vision transformer blocks.
    pub depth: usize,
    /// Hidden size of the vision transformer.
    pub hidden_size: usize,
    /// Activation of the vision MLP.
    #[serde(default = "default_gelu_tanh")]
    pub hidden_act: Activation,
    /// Inner size of the vision MLP.
    pub intermediate_size: usize,
    /// Number of attention heads.
    pub num_heads: usize,
    /// Colour channels (3).
    #[serde(default = "default_three")]
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
    /// Width of the merged tokens handed to the text model (its hidden size).
    pub out_hidden_size: usize,
    /// Size of the learned position grid (a perfect square).
    pub num_position_embeddings: usize,
    /// Vision blocks whose output is injected into the first text layers (DeepStack).
    #[serde(default)]
    pub deepstack_visual_indexes: Vec<usize>,
}

/// config.json of a Qwen3-VL checkpoint (`Qwen3VLForConditionalGeneration`).
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// The language model.
    pub text_config: TextConfig,
    /// The vision encoder.
    pub vision_config: VisionConfig,
    /// Id of `<|image_pad|>`.
    #[serde(default = "default_image_token")]
    pub image_token_id: u32,
    /// Id of `<|video_pad|>` (videos are not supported here).
    #[serde(default = "default_video_token")]
    pub video_token_id: u32,
    /// Id of `<|vision_start|>`.
    #[serde(default = "default_vision_start")]
    pub vision_start_token_id: u32,
    /// Id of `<|vision_end|>`.
    #[serde(default = "default_vision_end")]
    pub vision_end_token_id: u32,
    /// Top-level tie flag (used when text_config has none).
    #[serde(default)]
    pub tie_word_embeddings: Option<bool>,
}

impl Config {
    /// Whether lm_head is the embedding matrix.
    pub fn tie_word_embeddings(&self) -> bool {
        self.text_config.tie_word_embeddings.or(self.tie_word_embeddings).unwrap_or(false)
    }

    /// Reads and checks `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, VisionError> {
        let text = read_to_string(path, "the model configuration")?;
        let cfg: Self = serde_json::from_str(&text).map_err(|source| VisionError::Json {
            path: path.to_path_buf(),
            what: "Qwen3-VL config.json",
            source,
        })?;
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
        let rope = t.rope();
        if rope.mrope_section.len() != 3 {
            return Err(bad(format!(
                "text_config.rope_scaling.mrope_section must have 3 entries, has {:?}",
                rope.mrope_section
            )));
        }
        if let Some(kind) = rope.rope_type.as_deref()
            && kind != "default"
        {
            return Err(bad(format!("text_config rope_type {kind:?} is not supported (only \"default\")")));
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
        let side = (v.num_position_embeddings as f64).sqrt().round() as usize;
        if side == 0 || side * side != v.num_position_embeddings {
            return Err(bad(format!(
                "vision_config.num_position_embeddings ({}) must be a perfect square",
                v.num_position_embeddings
            )));
        }
        if v.patch_size == 0 || v.spatial_merge_size == 0 || v.temporal_patch_size == 0 {
            return Err(bad(
                "vision_config patch_size, spatial_merge_size and temporal_patch_size must be positive".into()
            ));
        }
        if v.out_hidden_size != t.hidden_size {
            return Err(bad(format!(
                "vision_config.out_hidden_size ({}) must equal text_config.hidden_size ({})",
                v.out_hidden_size, t.hidden_size
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

pub(crate) fn read_to_string(path: &Path, what: &'static str) -> Result<String, VisionError> {
    if !path.is_file() {
        return Err(VisionError::MissingFile { path: path.to_path_buf(), what });
    }
    std::fs::read_to_string(path).map_err(|source| VisionError::Io { path: PathBuf::from(path), source })
}
