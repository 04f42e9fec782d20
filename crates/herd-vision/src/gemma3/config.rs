//! `config.json` of a Gemma 3 vision-language checkpoint (`model_type = "gemma3"`, e.g.
//! `google/gemma-3-4b-it`), read with transformers 5's defaults for every key the file leaves out (the
//! released 4b file states only five text keys).
//!
//! The RoPE settings come in three spellings, all read: transformers 4.x's `rope_theta` (global layers),
//! `rope_local_base_freq` (sliding layers) and `rope_scaling` (global layers only, e.g. `{"rope_type":
//! "linear", "factor": 8.0}` on 4b/12b/27b), and transformers 5's `rope_parameters` keyed by layer type
//! (`{"full_attention": {...}, "sliding_attention": {...}}`).

use std::path::Path;

use candle_nn::Activation;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::VisionError;
use crate::files::{JsonFile, read_json};

/// How one text layer attends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerType {
    /// `sliding_attention`: the last `sliding_window` keys (and the image block, see the text model).
    Sliding,
    /// `full_attention`: every earlier key.
    Full,
}

/// The rotary embedding of one layer type: base and linear scaling factor (1 = none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    /// `rope_theta`.
    pub theta: f64,
    /// `factor` of `rope_type = "linear"` (positions divided by it); 1 for `"default"`.
    pub linear_factor: f64,
}

/// `text_config` of a Gemma 3 config.json (`gemma3_text`), normalised.
#[derive(Debug, Clone)]
pub struct Gemma3TextConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// MLP inner size.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    pub num_key_value_heads: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// MLP activation (`hidden_activation`).
    pub hidden_activation: Activation,
    /// Epsilon of the RMS norms.
    pub rms_norm_eps: f64,
    /// Attention scores are scaled by `query_pre_attn_scalar^-0.5`.
    pub query_pre_attn_scalar: f64,
    /// Keys a sliding layer sees: the query's own and the `sliding_window - 1` before it.
    pub sliding_window: usize,
    /// One entry per layer.
    pub layer_types: Vec<LayerType>,
    /// RoPE of the full-attention layers.
    pub rope_global: Rope,
    /// RoPE of the sliding layers.
    pub rope_local: Rope,
    /// Biases on q/k/v/o (false in every released Gemma 3).
    pub attention_bias: bool,
}

/// config.json of a Gemma 3 checkpoint.
#[derive(Debug, Clone)]
pub struct Gemma3Config {
    /// The language model.
    pub text_config: Gemma3TextConfig,
    /// The SigLIP vision tower (`vision_use_head` is ignored: Gemma 3 takes the last hidden state).
    pub vision_config: SiglipConfig,
    /// Image tokens after average pooling (a square: 256 = 16×16).
    pub mm_tokens_per_image: usize,
    /// Id of `<image_soft_token>` (`image_token_index`).
    pub image_token_id: u32,
    /// Id of `<start_of_image>` (`boi_token_index`).
    pub boi_token_id: u32,
    /// Id of `<end_of_image>` (`eoi_token_index`).
    pub eoi_token_id: u32,
    /// Whether lm_head is the embedding matrix.
    pub tie_word_embeddings: bool,
}

fn default_true() -> bool {
    true
}

/// `vision_config` of a Gemma 3 checkpoint (`siglip_vision_model`), with transformers'
/// `SiglipVisionConfig` defaults for the keys a file leaves out.
#[derive(Debug, Clone, Deserialize)]
pub struct SiglipConfig {
    #[serde(default = "siglip_defaults::hidden_size")]
    pub hidden_size: usize,
    #[serde(default = "siglip_defaults::intermediate_size")]
    pub intermediate_size: usize,
    #[serde(default = "siglip_defaults::num_hidden_layers")]
    pub num_hidden_layers: usize,
    #[serde(default = "siglip_defaults::num_attention_heads")]
    pub num_attention_heads: usize,
    #[serde(default = "siglip_defaults::num_channels")]
    pub num_channels: usize,
    #[serde(default = "siglip_defaults::image_size")]
    pub image_size: usize,
    #[serde(default = "siglip_defaults::patch_size")]
    pub patch_size: usize,
    #[serde(default = "siglip_defaults::hidden_act")]
    pub hidden_act: Activation,
    #[serde(default = "siglip_defaults::layer_norm_eps")]
    pub layer_norm_eps: f64,
}

/// transformers' `SiglipVisionConfig.__init__` defaults.
mod siglip_defaults {
    use candle_nn::Activation;

    pub(super) fn hidden_size() -> usize {
        768
    }
    pub(super) fn intermediate_size() -> usize {
        3072
    }
    pub(super) fn num_hidden_layers() -> usize {
        12
    }
    pub(super) fn num_attention_heads() -> usize {
        12
    }
    pub(super) fn num_channels() -> usize {
        3
    }
    pub(super) fn image_size() -> usize {
        224
    }
    pub(super) fn patch_size() -> usize {
        16
    }
    pub(super) fn hidden_act() -> Activation {
        Activation::GeluPytorchTanh
    }
    pub(super) fn layer_norm_eps() -> f64 {
        1e-6
    }
}

#[derive(Deserialize)]
struct RawTop {
    #[serde(default = "default_mm_tokens")]
    mm_tokens_per_image: usize,
    #[serde(default = "default_image_token", alias = "image_token_id")]
    image_token_index: u32,
    #[serde(default = "default_boi", alias = "boi_token_id")]
    boi_token_index: u32,
    #[serde(default = "default_eoi", alias = "eoi_token_id")]
    eoi_token_index: u32,
    #[serde(default)]
    tie_word_embeddings: Option<bool>,
}

fn default_mm_tokens() -> usize {
    256
}
fn default_image_token() -> u32 {
    262_144
}
fn default_boi() -> u32 {
    255_999
}
fn default_eoi() -> u32 {
    256_000
}

/// transformers 5.24's `Gemma3TextConfig` defaults.
#[derive(Deserialize)]
struct RawText {
    #[serde(default = "d_vocab")]
    vocab_size: usize,
    #[serde(default = "d_hidden")]
    hidden_size: usize,
    #[serde(default = "d_inter")]
    intermediate_size: usize,
    #[serde(default = "d_layers")]
    num_hidden_layers: usize,
    #[serde(default = "d_heads")]
    num_attention_heads: usize,
    #[serde(default = "d_kv")]
    num_key_value_heads: usize,
    #[serde(default = "d_head_dim")]
    head_dim: usize,
    #[serde(default = "d_act", alias = "hidden_act")]
    hidden_activation: Activation,
    #[serde(default = "d_eps")]
    rms_norm_eps: f64,
    #[serde(default = "d_scalar")]
    query_pre_attn_scalar: f64,
    #[serde(default = "d_window")]
    sliding_window: Option<usize>,
    #[serde(default)]
    sliding_window_pattern: Option<usize>,
    #[serde(default)]
    layer_types: Option<Vec<String>>,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    rope_local_base_freq: Option<f64>,
    #[serde(default)]
    rope_scaling: Option<Map<String, Value>>,
    #[serde(default)]
    rope_parameters: Option<Map<String, Value>>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    final_logit_softcapping: Option<f64>,
    #[serde(default)]
    attn_logit_softcapping: Option<f64>,
    #[serde(default)]
    use_bidirectional_attention: Option<bool>,
    #[serde(default = "default_true")]
    tie_word_embeddings: bool,
}

fn d_vocab() -> usize {
    262_208
}
fn d_hidden() -> usize {
    2304
}
fn d_inter() -> usize {
    9216
}
fn d_layers() -> usize {
    26
}
fn d_heads() -> usize {
    8
}
fn d_kv() -> usize {
    4
}
fn d_head_dim() -> usize {
    256
}
fn d_act() -> Activation {
    Activation::GeluPytorchTanh
}
fn d_eps() -> f64 {
    1e-6
}
fn d_scalar() -> f64 {
    256.0
}
fn d_window() -> Option<usize> {
    Some(4096)
}

impl Gemma3Config {
    /// Reads and checks `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, VisionError> {
        read_json(path, "the model configuration", Self::from_json)
    }

    /// Parses the text of a Gemma 3 config.json; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, VisionError> {
        let file = JsonFile::new(
            path,
            "Gemma 3 config.json",
            "use the config.json shipped with a Gemma 3 checkpoint (google/gemma-3-*-it)",
        );
        let bad = |message: String| file.bad(message);
        let root: Map<String, Value> = file.parse(text)?;
        let model_type = root.get("model_type").and_then(Value::as_str).unwrap_or("");
        if model_type != "gemma3" {
            return Err(bad(format!("model_type is {model_type:?}, not \"gemma3\"")));
        }
        let text_obj = match root.get("text_config") {
            Some(Value::Object(t)) => t.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(bad("text_config is not an object".into())),
        };
        let mut vision_obj = match root.get("vision_config") {
            Some(Value::Object(v)) => v.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(bad("vision_config is not an object".into())),
        };
        if let Some(kind) = vision_obj.get("model_type").and_then(Value::as_str)
            && kind != "siglip_vision_model"
        {
            return Err(bad(format!("vision_config.model_type is {kind:?}; Gemma 3 uses \"siglip_vision_model\"")));
        }
        // serde's `default` does not apply to explicit nulls; transformers treats them as unset.
        vision_obj.retain(|_, v| !v.is_null());
        let top: RawTop = file.parse_value(Value::Object(root.clone()))?;
        let raw: RawText = file.parse_value(Value::Object(text_obj))?;
        let vision: SiglipConfig = file.parse_value(Value::Object(vision_obj))?;
        let text_config = normalise_text(&raw, &bad)?;
        let cfg = Self {
            text_config,
            vision_config: vision,
            mm_tokens_per_image: top.mm_tokens_per_image,
            image_token_id: top.image_token_index,
            boi_token_id: top.boi_token_index,
            eoi_token_id: top.eoi_token_index,
            tie_word_embeddings: top.tie_word_embeddings.unwrap_or(raw.tie_word_embeddings),
        };
        cfg.validate().map_err(bad)?;
        Ok(cfg)
    }

    /// Patches per side of the vision tower's grid (`image_size / patch_size`).
    pub fn patches_per_side(&self) -> usize {
        self.vision_config.image_size / self.vision_config.patch_size.max(1)
    }

    /// Image tokens per side after pooling (`sqrt(mm_tokens_per_image)`).
    pub fn tokens_per_side(&self) -> usize {
        (self.mm_tokens_per_image as f64).sqrt().round() as usize
    }

    /// The average pool's kernel (and stride): patches per side / tokens per side.
    pub fn pool_kernel(&self) -> usize {
        self.patches_per_side() / self.tokens_per_side().max(1)
    }

    fn validate(&self) -> Result<(), String> {
        let (t, v) = (&self.text_config, &self.vision_config);
        if t.num_attention_heads == 0
            || t.num_key_value_heads == 0
            || !t.num_attention_heads.is_multiple_of(t.num_key_value_heads)
        {
            return Err(format!(
                "text_config.num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
                t.num_attention_heads, t.num_key_value_heads
            ));
        }
        if t.head_dim == 0 || !t.head_dim.is_multiple_of(2) {
            return Err(format!("text_config.head_dim ({}) must be even and positive", t.head_dim));
        }
        if t.query_pre_attn_scalar <= 0.0 {
            return Err(format!("text_config.query_pre_attn_scalar ({}) must be positive", t.query_pre_attn_scalar));
        }
        if v.num_attention_heads == 0 || !v.hidden_size.is_multiple_of(v.num_attention_heads) {
            return Err(format!(
                "vision_config.hidden_size ({}) must be a multiple of num_attention_heads ({})",
                v.hidden_size, v.num_attention_heads
            ));
        }
        if v.num_channels != 3 {
            return Err(format!("vision_config.num_channels is {}, only RGB (3) is supported", v.num_channels));
        }
        if v.patch_size == 0 || !v.image_size.is_multiple_of(v.patch_size) {
            return Err(format!(
                "vision_config.image_size ({}) must be a multiple of patch_size ({})",
                v.image_size, v.patch_size
            ));
        }
        let side = self.tokens_per_side();
        if side == 0 || side * side != self.mm_tokens_per_image {
            return Err(format!("mm_tokens_per_image ({}) must be a perfect square", self.mm_tokens_per_image));
        }
        if !self.patches_per_side().is_multiple_of(side) {
            return Err(format!(
                "the vision grid ({0}×{0} patches) cannot be average-pooled to {side}×{side} tokens (mm_tokens_per_image {1})",
                self.patches_per_side(),
                self.mm_tokens_per_image
            ));
        }
        for (name, id) in [
            ("image_token_index", self.image_token_id),
            ("boi_token_index", self.boi_token_id),
            ("eoi_token_index", self.eoi_token_id),
        ] {
            if id as usize >= t.vocab_size {
                return Err(format!("{name} ({id}) is outside the text vocabulary of {}", t.vocab_size));
            }
        }
        Ok(())
    }
}

/// Layer types, RoPE and the unsupported switches.
fn normalise_text(raw: &RawText, bad: &dyn Fn(String) -> VisionError) -> Result<Gemma3TextConfig, VisionError> {
    if let Some(cap) = raw.final_logit_softcapping.or(raw.attn_logit_softcapping) {
        return Err(bad(format!(
            "text_config sets a logit soft-capping ({cap}); no released Gemma 3 does, and transformers' \
             Gemma3ForConditionalGeneration does not apply it, so herd does not either"
        )));
    }
    if raw.use_bidirectional_attention == Some(true) {
        return Err(bad("text_config.use_bidirectional_attention = true (an embedding model) is not supported".into()));
    }
    let n = raw.num_hidden_layers;
    let layer_types = match &raw.layer_types {
        Some(types) => {
            if types.len() != n {
                return Err(bad(format!(
                    "text_config.layer_types has {} entries for {n} layers (num_hidden_layers)",
                    types.len()
                )));
            }
            types
                .iter()
                .map(|t| match t.as_str() {
                    "sliding_attention" => Ok(LayerType::Sliding),
                    "full_attention" => Ok(LayerType::Full),
                    other => Err(bad(format!(
                        "text_config.layer_types holds {other:?}; Gemma 3 has \"sliding_attention\" and \"full_attention\""
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        None => {
            let pattern = raw.sliding_window_pattern.unwrap_or(6);
            if pattern == 0 {
                return Err(bad("text_config.sliding_window_pattern must be positive".into()));
            }
            (0..n).map(|i| if (i + 1) % pattern == 0 { LayerType::Full } else { LayerType::Sliding }).collect()
        }
    };
    let sliding_window = match raw.sliding_window {
        Some(w) if w > 0 => w,
        _ if !layer_types.contains(&LayerType::Sliding) => usize::MAX,
        _ => return Err(bad("text_config.sliding_window must be a positive number of tokens".into())),
    };
    let mut global = raw.rope_parameters.as_ref().and_then(|p| p.get("full_attention")).cloned();
    let mut local = raw.rope_parameters.as_ref().and_then(|p| p.get("sliding_attention")).cloned();
    if let Some(p) = &raw.rope_parameters
        && global.is_none()
        && local.is_none()
        && p.contains_key("rope_type")
    {
        // A flat rope_parameters: the global layers' (as rope_scaling was).
        global = Some(Value::Object(p.clone()));
    }
    if global.is_none()
        && let Some(s) = &raw.rope_scaling
    {
        global = Some(Value::Object(s.clone()));
    }
    let global = rope(global.take(), raw.rope_theta.unwrap_or(1_000_000.0), "full_attention", bad)?;
    let local = rope(local.take(), raw.rope_local_base_freq.unwrap_or(10_000.0), "sliding_attention", bad)?;
    Ok(Gemma3TextConfig {
        vocab_size: raw.vocab_size,
        hidden_size: raw.hidden_size,
        intermediate_size: raw.intermediate_size,
        num_hidden_layers: n,
        num_attention_heads: raw.num_attention_heads,
        num_key_value_heads: raw.num_key_value_heads,
        head_dim: raw.head_dim,
        hidden_activation: raw.hidden_activation,
        rms_norm_eps: raw.rms_norm_eps,
        query_pre_attn_scalar: raw.query_pre_attn_scalar,
        sliding_window,
        layer_types,
        rope_global: global,
        rope_local: local,
        attention_bias: raw.attention_bias,
    })
}

/// One layer type's RoPE from its parameter object (or none: the default type at `theta`).
fn rope(
    params: Option<Value>,
    theta: f64,
    which: &str,
    bad: &dyn Fn(String) -> VisionError,
) -> Result<Rope, VisionError> {
    let Some(Value::Object(p)) = params else {
        return Ok(Rope { theta, linear_factor: 1.0 });
    };
    let theta = p.get("rope_theta").and_then(Value::as_f64).unwrap_or(theta);
    let kind = p.get("rope_type").or_else(|| p.get("type")).and_then(Value::as_str).unwrap_or("default");
    let linear_factor = match kind {
        "default" => 1.0,
        "linear" => match p.get("factor").and_then(Value::as_f64) {
            Some(f) if f > 0.0 => f,
            _ => return Err(bad(format!("the {which} RoPE is linear but has no positive factor"))),
        },
        other => {
            return Err(bad(format!(
                "the {which} RoPE type {other:?} is not supported (Gemma 3 uses \"default\" and \"linear\")"
            )));
        }
    };
    if theta <= 0.0 {
        return Err(bad(format!("the {which} rope_theta ({theta}) must be positive")));
    }
    Ok(Rope { theta, linear_factor })
}
