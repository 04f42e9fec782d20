//! The Qwen VL families (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): loading a folder, and the forward passes
//! [`VlModel`](crate::VlModel) dispatches to. The image's tokens get 3-D positions (MRoPE, as
//! transformers' `get_rope_index`), and a lone `<|image_pad|>` is expanded to the image's tokens.
//!
//! - `config`: config.json into the shared [`Config`];
//! - `vision`: the blocks the three vision towers share; `tower2` (Qwen2-VL, Qwen2.5-VL) and `tower3`
//!   (Qwen3-VL, with DeepStack) build the towers from them;
//! - the image processor is the shared one (`preprocess`), the decoder the shared one (`decoder`).

pub(crate) mod config;
mod tower2;
mod tower3;
mod vision;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use herd_tensor::KvCache;
use tokenizers::Tokenizer;

use crate::config::Config;
use crate::decoder::{DecoderSpec, TextModel, Visual};
use crate::error::VisionError;
use crate::family::VlFamily;
use crate::files::open_tokenizer;
use crate::layers::replace_rows;
use crate::prefix::Prefix;
use crate::preprocess::{ImageProcessor, PreparedImage, check_fits};
use crate::prompt::{expand_image_pad, image_span, mrope_positions, refuse_image_tokens};
use crate::weights::open_weights;
use tower2::Qwen2Tower;
use tower3::Qwen3Tower;

/// The special tokens framing an image in a Qwen VL prompt.
pub const VISION_START: &str = "<|vision_start|>";
/// The image placeholder, expanded to one token per merged patch.
pub const IMAGE_PAD: &str = "<|image_pad|>";
/// Closes the image.
pub const VISION_END: &str = "<|vision_end|>";

enum VisionTower {
    Qwen2(Qwen2Tower),
    Qwen3(Qwen3Tower),
}

impl VisionTower {
    /// Image tokens and, for Qwen3-VL, its DeepStack features.
    fn forward(&self, pixels: &Tensor, grid: [usize; 3]) -> candle_core::Result<(Tensor, Vec<Tensor>)> {
        match self {
            VisionTower::Qwen2(t) => Ok((t.forward(pixels, grid)?, Vec::new())),
            VisionTower::Qwen3(t) => t.forward(pixels, grid),
        }
    }
}

/// A loaded Qwen VL checkpoint's parts.
pub(crate) struct QwenParts {
    pub(crate) config: Config,
    pub(crate) processor: ImageProcessor,
    vision: VisionTower,
    pub(crate) text: TextModel,
}

impl QwenParts {
    /// Reads preprocessor_config.json and tokenizer.json of `dir`, checks them against `config`
    /// (config.json, read by the caller), then opens the weights. The processor is checked before the
    /// tokenizer, so its errors come first.
    pub(crate) fn load(
        dir: &Path,
        config: Config,
        device: &Device,
        dtype: DType,
    ) -> Result<(Self, Tokenizer, PathBuf), VisionError> {
        let processor_path = dir.join("preprocessor_config.json");
        let processor = ImageProcessor::from_file(&processor_path)?;
        check_processor(&config, &processor, &processor_path)?;
        let (tokenizer, tokenizer_path) = open_tokenizer(dir)?;
        for (token, id) in [
            (IMAGE_PAD, config.image_token_id),
            (VISION_START, config.vision_start_token_id),
            (VISION_END, config.vision_end_token_id),
        ] {
            let found = tokenizer.token_to_id(token);
            if found != Some(id) {
                return Err(VisionError::Config {
                    path: dir.join("config.json"),
                    message: format!(
                        "config.json gives {token} the id {id}, but {} gives it {}",
                        dir.join("tokenizer.json").display(),
                        found.map_or_else(|| "none".to_string(), |i| i.to_string())
                    ),
                    fix: "use config.json and tokenizer.json from the same checkpoint",
                });
            }
        }
        let vb = open_weights(dir, dtype, device)?;
        let weights_err = |source| VisionError::Weights { path: dir.to_path_buf(), source };
        // Released Qwen2-VL / Qwen2.5-VL files name the parts `visual.*` and `model.*`; Qwen3-VL and
        // files re-saved by transformers >= 4.52 nest both under `model.`.
        let nested = vb.contains_tensor("model.language_model.embed_tokens.weight");
        let (visual, language) = if nested { ("model.visual", "model.language_model") } else { ("visual", "model") };
        let vision = match config.family {
            VlFamily::Qwen3Vl => Qwen3Tower::new(&config.vision_config, vb.pp(visual)).map(VisionTower::Qwen3),
            family => Qwen2Tower::new(family, &config.vision_config, vb.pp(visual)).map(VisionTower::Qwen2),
        }
        .map_err(weights_err)?;
        let text = TextModel::new(&config, decoder_spec(&config), vb, language).map_err(weights_err)?;
        Ok((Self { config, processor, vision, text }, tokenizer, tokenizer_path))
    }

    /// `<|image_pad|>` expanded to the image's tokens.
    pub(crate) fn expand(&self, token_ids: &[u32], image: &PreparedImage) -> Result<Vec<u32>, VisionError> {
        expand_image_pad(token_ids, self.config.image_token_id, image.num_image_tokens())
    }

    /// The whole prompt; a single `<|image_pad|>` is expanded here.
    pub(crate) fn prefill(
        &self,
        token_ids: &[u32],
        image: Option<&PreparedImage>,
        device: &Device,
    ) -> Result<Prefix, VisionError> {
        let image_id = self.config.image_token_id;
        let ids: Vec<u32> = match image {
            Some(img) => {
                let count = token_ids.iter().filter(|&&t| t == image_id).count();
                if count == 1 && img.num_image_tokens() != 1 {
                    expand_image_pad(token_ids, image_id, img.num_image_tokens())?
                } else {
                    token_ids.to_vec()
                }
            }
            None => {
                refuse_image_tokens(token_ids, image_id)?;
                token_ids.to_vec()
            }
        };
        let input = Tensor::new(ids.as_slice(), device)?.unsqueeze(0)?;
        let embeds = self.text.embed(&input)?;
        let (logits, cache, pos) = match image {
            None => {
                let pos = mrope_positions(ids.len(), None);
                let (logits, cache) = self.text.forward(embeds, &pos, None, None)?;
                (logits, cache, pos)
            }
            Some(img) => {
                check_fits(&self.config.vision_config, img)?;
                let (start, n) = image_span(&ids, image_id, img.num_image_tokens())?;
                let pixels = img.pixel_values().to_device(device)?;
                let (image_embeds, deepstack) = self.vision.forward(&pixels, img.grid_thw())?;
                let embeds = replace_rows(&embeds, start, n, &image_embeds)?;
                let pos = mrope_positions(ids.len(), Some((start, img.grid_thw(), img.merge_size())));
                let visual = Visual { start, len: n, deepstack: &deepstack };
                let (logits, cache) = self.text.forward(embeds, &pos, None, Some(visual))?;
                (logits, cache, pos)
            }
        };
        let next_position = pos.iter().flat_map(|row| row.iter().copied()).max().map_or(0, |p| p + 1);
        Ok(Prefix::new(ids, cache, next_position, logits))
    }

    /// Text tokens after `prefix`.
    pub(crate) fn extend(
        &self,
        prefix: &Prefix,
        more: &[u32],
        device: &Device,
    ) -> Result<(Tensor, KvCache), VisionError> {
        Ok(self.text.forward_text(more, prefix.next_position(), Some(prefix.cache()), device)?)
    }
}

/// The decoder switches of each Qwen family.
fn decoder_spec(config: &Config) -> DecoderSpec {
    let bias = config.text_config.attention_bias;
    if config.family.is_qwen2() {
        DecoderSpec { qkv_bias: true, o_bias: false, qk_norm: false, interleaved_mrope: false }
    } else {
        DecoderSpec { qkv_bias: bias, o_bias: bias, qk_norm: true, interleaved_mrope: true }
    }
}

fn check_processor(cfg: &Config, p: &ImageProcessor, path: &Path) -> Result<(), VisionError> {
    let v = &cfg.vision_config;
    for (key, got, want) in [
        ("patch_size", p.patch_size, v.patch_size),
        ("merge_size", p.merge_size, v.spatial_merge_size),
        ("temporal_patch_size", p.temporal_patch_size, v.temporal_patch_size),
    ] {
        if got != want {
            return Err(VisionError::Config {
                path: path.to_path_buf(),
                message: format!("{key} is {got} but config.json's vision_config says {want}"),
                fix: "use preprocessor_config.json and config.json from the same checkpoint",
            });
        }
    }
    if v.in_channels != 3 {
        return Err(VisionError::Config {
            path: path.with_file_name("config.json"),
            message: format!("vision_config.in_channels is {}, only RGB (3) is supported", v.in_channels),
            fix: "use an RGB checkpoint (every released Qwen VL model is)",
        });
    }
    Ok(())
}
