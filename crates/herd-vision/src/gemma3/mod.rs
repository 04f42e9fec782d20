//! The Gemma 3 family (`google/gemma-3-{4b,12b,27b}-it`): loading, the processor's text expansion of
//! `<start_of_image>`, and the forward passes [`VlModel`](crate::VlModel) dispatches to. Its parts:
//! `config` (config.json), `processor` (`Gemma3ImageProcessor`), `siglip` (the SigLIP tower and the
//! projector) and `text` (the Gemma 3 decoder).
//!
//! transformers' `Gemma3Processor` replaces each `<start_of_image>` of the rendered chat text by
//! `"\n\n<start_of_image>" + "<image_soft_token>" × mm_tokens_per_image + "<end_of_image>\n\n"` before
//! tokenizing, so the newlines tokenize with their neighbours; herd does the same in text
//! ([`expand_image_text`]), never by splicing token ids.

pub(crate) mod config;
pub(crate) mod processor;
mod siglip;
mod text;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use herd_tensor::KvCache;
use tokenizers::Tokenizer;

use crate::error::VisionError;
use crate::files::open_tokenizer;
use crate::layers::replace_rows;
use crate::prefix::Prefix;
use crate::preprocess::PreparedImage;
use crate::prompt::{image_span, refuse_image_tokens};
use crate::weights::open_weights;
use config::Gemma3Config;
use processor::Gemma3Processor;
use siglip::SiglipTower;
use text::Gemma3Text;

/// Gemma 3's image marker in the chat template's output (`<start_of_image>`, `boi_token`).
pub const START_OF_IMAGE: &str = "<start_of_image>";
/// Gemma 3's image placeholder, one per image token after expansion (`image_token`).
pub const IMAGE_SOFT_TOKEN: &str = "<image_soft_token>";
/// Closes Gemma 3's image (`eoi_token`).
pub const END_OF_IMAGE: &str = "<end_of_image>";

/// Replaces the one `<start_of_image>` of `text` by the processor's full image sequence with `count`
/// soft tokens, as `Gemma3Processor` does (pan-and-scan off).
pub fn expand_image_text(text: &str, count: usize) -> Result<String, VisionError> {
    let found = text.matches(START_OF_IMAGE).count();
    if found != 1 {
        return Err(VisionError::Prompt {
            message: format!("the prompt holds {found} {START_OF_IMAGE} markers, expected exactly one"),
            fix: "render Gemma 3's chat template with one image part (it writes <start_of_image> where the image goes)",
        });
    }
    let full = format!("\n\n{START_OF_IMAGE}{}{END_OF_IMAGE}\n\n", IMAGE_SOFT_TOKEN.repeat(count));
    Ok(text.replacen(START_OF_IMAGE, &full, 1))
}

pub(crate) struct Gemma3Parts {
    pub(crate) config: Gemma3Config,
    pub(crate) processor: Gemma3Processor,
    vision: SiglipTower,
    pub(crate) text: Gemma3Text,
}

impl Gemma3Parts {
    /// Opens tokenizer.json, parses config.json (`config_text`, read by the caller), reads
    /// preprocessor_config.json, checks them against each other and the tokenizer, then opens the weights.
    pub(crate) fn load(
        dir: &Path,
        config_text: &str,
        device: &Device,
        dtype: DType,
    ) -> Result<(Self, Tokenizer, PathBuf), VisionError> {
        let (tokenizer, tokenizer_path) = open_tokenizer(dir)?;
        let config_path = dir.join("config.json");
        let config = Gemma3Config::from_json(config_text, &config_path)?;
        let processor_path = dir.join("preprocessor_config.json");
        let processor = Gemma3Processor::from_file(&processor_path)?;
        let v = &config.vision_config;
        let mismatch = |message: String| VisionError::Config {
            path: processor_path.clone(),
            message,
            fix: "use preprocessor_config.json and config.json from the same checkpoint",
        };
        if processor.size != (v.image_size as u32, v.image_size as u32) {
            return Err(mismatch(format!(
                "size is {}x{} but config.json's vision_config.image_size is {}",
                processor.size.1, processor.size.0, v.image_size
            )));
        }
        if let Some(n) = processor.image_seq_length
            && n != config.mm_tokens_per_image
        {
            return Err(mismatch(format!(
                "image_seq_length is {n} but config.json's mm_tokens_per_image is {}",
                config.mm_tokens_per_image
            )));
        }
        for (token, id) in [
            (IMAGE_SOFT_TOKEN, config.image_token_id),
            (START_OF_IMAGE, config.boi_token_id),
            (END_OF_IMAGE, config.eoi_token_id),
        ] {
            let found = tokenizer.token_to_id(token);
            if found != Some(id) {
                return Err(VisionError::Config {
                    path: config_path,
                    message: format!(
                        "config.json gives {token} the id {id}, but tokenizer.json gives it {}",
                        found.map_or_else(|| "none".to_string(), |i| i.to_string())
                    ),
                    fix: "use config.json and tokenizer.json from the same checkpoint",
                });
            }
        }
        let vb = open_weights(dir, dtype, device)?;
        let weights_err = |source| VisionError::Weights { path: dir.to_path_buf(), source };
        // Released files: `language_model.model.*`, `vision_tower.*`, `multi_modal_projector.*`;
        // transformers 5 saves them under `model.` (and an untied head as `lm_head`).
        let nested = vb.contains_tensor("model.language_model.embed_tokens.weight");
        let (language, lm_head, tower, projector) = if nested {
            ("model.language_model", "lm_head", "model.vision_tower.vision_model", "model.multi_modal_projector")
        } else {
            ("language_model.model", "language_model.lm_head", "vision_tower.vision_model", "multi_modal_projector")
        };
        let vision = SiglipTower::new(&config, vb.pp(tower), vb.pp(projector)).map_err(weights_err)?;
        let text = Gemma3Text::new(&config, vb, language, lm_head).map_err(weights_err)?;
        Ok((Self { config, processor, vision, text }, tokenizer, tokenizer_path))
    }

    pub(crate) fn dtype(&self) -> DType {
        self.text.dtype()
    }

    pub(crate) fn preprocess(&self, image: &image::DynamicImage) -> Result<PreparedImage, VisionError> {
        self.processor.preprocess(image, self.config.vision_config.patch_size, self.config.pool_kernel())
    }

    pub(crate) fn check_image(&self, img: &PreparedImage) -> Result<(), VisionError> {
        let s = self.config.vision_config.image_size;
        let dims = img.pixel_values().dims();
        if dims != [1, 3, s, s] || img.num_image_tokens() != self.config.mm_tokens_per_image {
            return Err(VisionError::Prompt {
                message: format!(
                    "the prepared image (pixel values {dims:?}, {} image tokens) does not fit this model ([1, 3, {s}, {s}], {} tokens)",
                    img.num_image_tokens(),
                    self.config.mm_tokens_per_image
                ),
                fix: "prepare the image with this model's preprocess",
            });
        }
        Ok(())
    }

    /// The whole prompt (soft tokens expanded, by [`expand_image_text`] before tokenizing).
    pub(crate) fn prefill(
        &self,
        ids: &[u32],
        image: Option<&PreparedImage>,
        device: &Device,
    ) -> Result<Prefix, VisionError> {
        let image_id = self.config.image_token_id;
        let span = match image {
            Some(img) => Some((img, image_span(ids, image_id, img.num_image_tokens())?)),
            None => {
                refuse_image_tokens(ids, image_id)?;
                None
            }
        };
        let input = Tensor::new(ids, device)?.unsqueeze(0)?;
        let mut embeds = self.text.embed(&input)?;
        let span = match span {
            Some((img, (start, n))) => {
                self.check_image(img)?;
                let features = self.vision.forward(&img.pixel_values().to_device(device)?)?;
                embeds = replace_rows(&embeds, start, n, &features)?;
                Some((start, n))
            }
            None => None,
        };
        let (logits, cache) = self.text.forward(embeds, None, span)?;
        Ok(Prefix::new(ids.to_vec(), cache, ids.len() as u32, logits))
    }

    /// Text tokens after `cache`.
    pub(crate) fn extend(
        &self,
        cache: &KvCache,
        more: &[u32],
        device: &Device,
    ) -> Result<(Tensor, KvCache), VisionError> {
        let input = Tensor::new(more, device)?.unsqueeze(0)?;
        Ok(self.text.forward(self.text.embed(&input)?, Some(cache), None)?)
    }
}
