//! Mistral3 (`mistralai/Mistral-Small-3.1-24B-Instruct-2503`, transformers'
//! `Mistral3ForConditionalGeneration`): what differs from the Qwen families, plugged into [`VlModel`](crate::VlModel).
//!
//! - config.json (`config`): `text_config` is a Mistral config (MistralConfig's defaults; `sliding_window`
//!   must be null, as in the released model), `vision_config` a Pixtral one (renamed to the shared
//!   [`VisionConfig`](crate::VisionConfig) keys), and the top level holds `image_token_index`,
//!   `spatial_merge_size`, `vision_feature_layer`, `projector_hidden_act`, `multimodal_projector_bias`;
//! - the image processor is Pixtral's (`processor`, filling in the shared patch processor), the tower and
//!   projector in `pixtral`, the text model is the shared decoder (`decoder`) without biases or q/k norms
//!   and with 1-D positions (all three MRoPE rows equal are plain RoPE);
//! - `[IMG]` expands to one `[IMG]` per merged patch, row by row, each row closed by `[IMG_BREAK]` and the
//!   last by `[IMG_END]` (`PixtralProcessor.replace_image_token`); the image features replace the
//!   `[IMG]` embeddings in order (transformers' masked scatter), the break tokens stay text;
//! - weights: the released names (`language_model.model.*`, `language_model.lm_head`, `vision_tower.*`,
//!   `multi_modal_projector.*`) or transformers 5's (`model.language_model.*`, `model.vision_tower.*`,
//!   `model.multi_modal_projector.*`, `lm_head`). lm_head is used when present; without it the
//!   embedding is tied (the top-level `tie_word_embeddings`, true by default), as transformers does.

pub(crate) mod config;
mod pixtral;
mod processor;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use herd_tensor::KvCache;
use tokenizers::Tokenizer;

use crate::config::{Config, Mistral3Settings};
use crate::decoder::{DecoderSpec, TextModel};
use crate::error::VisionError;
use crate::files::open_tokenizer;
use crate::prefix::Prefix;
use crate::preprocess::{ImageProcessor, PreparedImage, check_fits};
use crate::prompt::refuse_image_tokens;
use crate::weights::open_weights;
use pixtral::PixtralTower;
pub use processor::pixtral_processor_from_json;
use processor::{check_processor_config, pixtral_processor};

/// Mistral3's image placeholder, expanded to one token per merged patch.
pub const IMG: &str = "[IMG]";
/// Closes each row of image tokens but the last.
pub const IMG_BREAK: &str = "[IMG_BREAK]";
/// Closes the last row of image tokens.
pub const IMG_END: &str = "[IMG_END]";

fn settings(cfg: &Config) -> Result<&Mistral3Settings, VisionError> {
    cfg.mistral3.as_ref().ok_or_else(|| VisionError::Prompt {
        message: "the model is not a mistral3 checkpoint".into(),
        fix: "load a folder whose config.json says model_type = \"mistral3\"",
    })
}

/// A loaded Mistral3 checkpoint's parts: the shared config and processor, the Pixtral tower with the
/// projector, and the shared decoder.
pub(crate) struct Mistral3Parts {
    pub(crate) config: Config,
    pub(crate) processor: ImageProcessor,
    vision: PixtralTower,
    pub(crate) text: TextModel,
}

impl Mistral3Parts {
    /// Reads the processor files and the tokenizer of `dir`, checks them against `config` (config.json,
    /// read by the caller), then opens the weights.
    pub(crate) fn load(
        dir: &Path,
        mut config: Config,
        device: &Device,
        dtype: DType,
    ) -> Result<(Self, Tokenizer, PathBuf), VisionError> {
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
        let (tokenizer, tokenizer_path) = open_tokenizer(dir)?;
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

        let vb = open_weights(dir, dtype, device)?;
        let weights_err = |source| VisionError::Weights { path: dir.to_path_buf(), source };
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
        // Mistral's attention has no q/k norms; its biases follow `attention_bias` (false, and refused
        // when true by the config reader).
        let bias = config.text_config.attention_bias;
        let spec = DecoderSpec { qkv_bias: bias, o_bias: bias, qk_norm: false, interleaved_mrope: false };
        let text = TextModel::new(&config, spec, root, language).map_err(weights_err)?;
        Ok((Self { config, processor, vision: tower, text }, tokenizer, tokenizer_path))
    }

    /// `[IMG]` replaced by the image's layout: `rows` rows of `cols` `[IMG]`, each followed by `[IMG_BREAK]`
    /// except the last, followed by `[IMG_END]`.
    pub(crate) fn expand(&self, token_ids: &[u32], image: &PreparedImage) -> Result<Vec<u32>, VisionError> {
        let s = settings(&self.config)?;
        let img = self.config.image_token_id;
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

    /// The whole prompt: 1-D positions, image features scattered over the `[IMG]` tokens; a single `[IMG]`
    /// is expanded here.
    pub(crate) fn prefill(
        &self,
        token_ids: &[u32],
        image: Option<&PreparedImage>,
        device: &Device,
    ) -> Result<Prefix, VisionError> {
        let img_id = self.config.image_token_id;
        let count = token_ids.iter().filter(|&&t| t == img_id).count();
        let ids = match image {
            Some(img) if count == 1 && img.num_image_tokens() != 1 => self.expand(token_ids, img)?,
            Some(_) => token_ids.to_vec(),
            None => {
                refuse_image_tokens(token_ids, img_id)?;
                token_ids.to_vec()
            }
        };
        let input = Tensor::new(ids.as_slice(), device)?.unsqueeze(0)?;
        let mut embeds = self.text.embed(&input)?;
        if let Some(img) = image {
            check_fits(&self.config.vision_config, img)?;
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
            let features = self.vision.forward(&pixels, img.grid_thw())?;
            embeds = scatter_rows(&embeds, &ids, img_id, &features)?;
        }
        let row: Vec<u32> = (0..ids.len() as u32).collect();
        let pos = [row.clone(), row.clone(), row];
        let (logits, cache) = self.text.forward(embeds, &pos, None, None)?;
        let next_position = ids.len() as u32;
        Ok(Prefix::new(ids, cache, next_position, logits))
    }

    /// Text tokens after `prefix`, at 1-D positions.
    pub(crate) fn extend(
        &self,
        prefix: &Prefix,
        more: &[u32],
        device: &Device,
    ) -> Result<(Tensor, KvCache), VisionError> {
        Ok(self.text.forward_text(more, prefix.next_position(), Some(prefix.cache()), device)?)
    }
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
