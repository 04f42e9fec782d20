//! Vision-language models for herd: next-token logits of a prompt that shows the model one image.
//!
//! The Asch-conformity experiments show a vision-language model a synthetic image (lines, dots,
//! colours) plus the confederates' answers, and read off the model's answer distribution. This crate
//! runs four families through candle from a Hugging Face folder as shipped (`config.json`,
//! `*.safetensors` single or sharded with `model.safetensors.index.json`, `tokenizer.json`,
//! `preprocessor_config.json`), picked by config.json's `model_type` ([`VlFamily`]):
//! - Qwen2-VL (`Qwen/Qwen2-VL-*-Instruct`) and Qwen2.5-VL (`Qwen/Qwen2.5-VL-*-Instruct`), the
//!   conformity paper's models, with their released tensor names (`visual.*`, `model.*`) or the
//!   re-saved ones (`model.visual.*`, `model.language_model.*`);
//! - Qwen3-VL (`Qwen/Qwen3-VL-*-Instruct`);
//! - Gemma 3 (`google/gemma-3-{4b,12b,27b}-it`, also the paper's), with its released tensor names
//!   (`language_model.model.*`, `vision_tower.vision_model.*`, `multi_modal_projector.*`) or transformers
//!   5's (`model.language_model.*`, ...): SigLIP tower, average-pooled projector, sliding-window and global
//!   text layers, the image's tokens attended both ways (see [`gemma3`]). Its processor resizes to
//!   896×896 with PIL's bilinear filter; pan-and-scan stays off (as released), and is refused if a file
//!   turns it on;
//! - Mistral-Small-3.1 (`mistralai/Mistral-Small-3.1-24B-Instruct-2503`, `mistral3`, also the paper's):
//!   Pixtral vision tower, patch-merging projector, Mistral text model; its image placeholder is `[IMG]`,
//!   expanded row by row with `[IMG_BREAK]` and `[IMG_END]`, and its positions are 1-D (module `mistral3`).
//!
//! Pieces, in the order a caller uses them:
//! - [`VlModel::load`] reads and checks the folder;
//! - [`VlModel::preprocess`] (or [`ImageProcessor::preprocess`]) resizes with [`smart_resize`] and
//!   PIL's bicubic filter, normalizes and patchifies an image exactly as transformers'
//!   `Qwen2VLImageProcessor` (PIL backend) does (see [`preprocess`](mod@preprocess)); for Gemma 3 as
//!   `Gemma3ImageProcessorPil` ([`Gemma3Processor`]);
//! - the caller renders the chat template to text with the model's image marker where the image goes
//!   (`<|vision_start|><|image_pad|><|vision_end|>`; Gemma 3's `<start_of_image>`), and tokenizes it
//!   with [`VlModel::encode_prompt`], which expands the marker as the HF processor does;
//! - [`VlModel::next_token_logits`] encodes the image and runs the decoder (Qwen: with 3-D positions,
//!   MRoPE, as transformers' `get_rope_index`; it also expands a lone `<|image_pad|>` itself).
//! - For prompts that share a beginning (the image and the question, with different confederate
//!   answers after them), [`VlModel::prefill`] computes the shared part once and
//!   [`VlModel::extend`] each continuation from it; generation extends one token at a time.
//!
//! Each call is stateless (a [`Prefix`] is a value the caller keeps): identical inputs give identical
//! logits. On a CPU load in `DType::F32`; bf16 is for GPUs.
//!
//! ```no_run
//! use std::path::Path;
//! use candle_core::{DType, Device};
//! use herd_vision::VlModel;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = VlModel::load(Path::new("models/Qwen2.5-VL-3B-Instruct"), &Device::Cpu, DType::F32)?;
//! let image = image::open("stimulus.png")?;
//! let prepared = model.preprocess(&image)?;
//! let prompt = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>\
//!               Which line matches the reference? Answer A, B or C.<|im_end|>\n\
//!               <|im_start|>assistant\n";
//! let ids = model.encode_prompt(prompt, Some(&prepared))?;
//! let logits = model.next_token_logits(&ids, Some(&prepared))?; // [vocab], f32
//! let a = model.encode("A")?[0] as usize;
//! println!("logit of A: {}", logits.get(a)?.to_scalar::<f32>()?);
//! # Ok(()) }
//! ```

mod config;
mod config_gemma3;
mod error;
pub mod gemma3;
mod mistral3;
pub mod preprocess;
mod preprocess_gemma3;
mod preprocess_pixtral;
mod prompt;
mod resample;
mod text;
mod text_gemma3;
pub mod tiny;
mod vision;
mod vision_pixtral;
mod vision_qwen2;
mod vision_qwen3;
mod vision_siglip;
mod weights;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use image::DynamicImage;
use tokenizers::Tokenizer;

pub use config::{Config, RopeParameters, TextConfig, VisionActivation, VisionConfig, VlFamily};
pub use config_gemma3::{Gemma3Config, Gemma3TextConfig, LayerType, Rope};
pub use error::VisionError;
pub use mistral3::{IMG, IMG_BREAK, IMG_END, Mistral3Settings};
pub use preprocess::{ImageProcessor, PreparedImage, smart_resize};
pub use preprocess_gemma3::{Gemma3Processor, Resample};
pub use preprocess_pixtral::{pixtral_processor_from_json, pixtral_resize};
pub use prompt::{expand_image_pad, mrope_positions};
pub use resample::{resize_bicubic, resize_bilinear};
pub use text::KvCache;

use gemma3::Gemma3Parts;

use text::{TextModel, Visual, replace_rows};
use vision_qwen2::Qwen2Tower;
use vision_qwen3::Qwen3Tower;

/// The special tokens framing an image in a Qwen VL prompt.
pub const VISION_START: &str = "<|vision_start|>";
/// The image placeholder, expanded to one token per merged patch.
pub const IMAGE_PAD: &str = "<|image_pad|>";
/// Closes the image.
pub const VISION_END: &str = "<|vision_end|>";

enum VisionTower {
    Qwen2(Qwen2Tower),
    Qwen3(Qwen3Tower),
    Pixtral(Box<vision_pixtral::PixtralTower>),
}

impl VisionTower {
    /// Image tokens and, for Qwen3-VL, its DeepStack features.
    fn forward(&self, pixels: &Tensor, grid: [usize; 3]) -> candle_core::Result<(Tensor, Vec<Tensor>)> {
        match self {
            VisionTower::Qwen2(t) => Ok((t.forward(pixels, grid)?, Vec::new())),
            VisionTower::Qwen3(t) => t.forward(pixels, grid),
            VisionTower::Pixtral(t) => Ok((t.forward(pixels, grid)?, Vec::new())),
        }
    }
}

/// A Qwen VL family's parts (also Mistral3's: Pixtral tower, the decoder with 1-D positions).
struct QwenParts {
    config: Config,
    processor: ImageProcessor,
    vision: VisionTower,
    text: TextModel,
}

enum Parts {
    Qwen(Box<QwenParts>),
    Gemma3(Box<Gemma3Parts>),
}

/// A loaded Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 3 or Mistral3 checkpoint: tokenizer, image processor and network.
pub struct VlModel {
    family: VlFamily,
    parts: Parts,
    tokenizer: Tokenizer,
    tokenizer_path: PathBuf,
    device: Device,
}

impl std::fmt::Debug for VlModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("VlModel");
        d.field("family", &self.family);
        match &self.parts {
            Parts::Qwen(q) => d.field("config", &q.config).field("processor", &q.processor),
            Parts::Gemma3(g) => d.field("config", &g.config).field("processor", &g.processor),
        };
        d.field("device", &self.device).finish_non_exhaustive()
    }
}

/// A prompt computed up to its last token: the keys and values of every layer, the next text position,
/// and the logits after the last token. [`VlModel::extend`] continues it without changing it.
#[derive(Debug, Clone)]
pub struct Prefix {
    ids: Vec<u32>,
    cache: KvCache,
    next_position: u32,
    logits: Tensor,
}

impl Prefix {
    /// The token ids computed (image placeholders expanded).
    pub fn token_ids(&self) -> &[u32] {
        &self.ids
    }

    /// How many tokens were computed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no token was computed (never true for a prefix made by [`VlModel::prefill`]).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Logits (f32, `[vocab]`) for the token after the last one.
    pub fn logits(&self) -> &Tensor {
        &self.logits
    }
}

/// config.json's text and its `model_type`, read before the family's own parser takes the text.
fn read_family(path: &Path) -> Result<(VlFamily, String), VisionError> {
    let text = config::read_to_string(path, "the model configuration")?;
    let root: serde_json::Value = serde_json::from_str(&text).map_err(|source| VisionError::Json {
        path: path.to_path_buf(),
        what: "VL model config.json",
        source,
    })?;
    let model_type = root.get("model_type").and_then(serde_json::Value::as_str).unwrap_or("qwen3_vl");
    let family = VlFamily::from_model_type(model_type).ok_or_else(|| VisionError::Config {
        path: path.to_path_buf(),
        message: format!(
            "model_type is {model_type:?}; herd runs \"qwen2_vl\", \"qwen2_5_vl\", \"qwen3_vl\", \"gemma3\" and \"mistral3\""
        ),
        fix: "use the config.json shipped with a Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 3 or Mistral-Small-3.1 checkpoint",
    })?;
    Ok((family, text))
}

/// tokenizer.json of the folder, and its path (for errors).
fn open_tokenizer(dir: &Path) -> Result<(Tokenizer, PathBuf), VisionError> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(VisionError::MissingFile { path, what: "the tokenizer" });
    }
    let tokenizer = Tokenizer::from_file(&path)
        .map_err(|e| VisionError::Tokenizer { path: path.clone(), message: e.to_string() })?;
    Ok((tokenizer, path))
}

impl VlModel {
    /// Loads a Hugging Face Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 3 or Mistral-Small-3.1 folder onto
    /// `device`, with weights converted to `dtype`.
    ///
    /// Checks that the files agree: the tokenizer's ids of the image tokens (`<|image_pad|>`,
    /// `<|vision_start|>`, `<|vision_end|>`; Gemma 3's `<image_soft_token>`, `<start_of_image>`,
    /// `<end_of_image>`) must be config.json's, and preprocessor_config.json's sizes must be the vision
    /// encoder's.
    pub fn load(dir: &Path, device: &Device, dtype: DType) -> Result<Self, VisionError> {
        let config_path = dir.join("config.json");
        let (family, config_text) = read_family(&config_path)?;
        if family == VlFamily::Mistral3 {
            return mistral3::load(dir, Config::from_json(&config_text, &config_path)?, device, dtype);
        }
        // Qwen: the processor is checked before the tokenizer (its errors name it first).
        let qwen = if family == VlFamily::Gemma3 {
            None
        } else {
            let config = Config::from_json(&config_text, &config_path)?;
            let processor = ImageProcessor::from_file(&dir.join("preprocessor_config.json"))?;
            check_processor(&config, &processor, &dir.join("preprocessor_config.json"))?;
            Some((config, processor))
        };
        let (tokenizer, tokenizer_path) = open_tokenizer(dir)?;
        let parts = match qwen {
            None => Parts::Gemma3(Box::new(Gemma3Parts::load(dir, &config_text, &tokenizer, device, dtype)?)),
            Some((config, processor)) => {
                Parts::Qwen(Box::new(load_qwen(dir, config, processor, &tokenizer, device, dtype)?))
            }
        };
        Ok(Self { family, parts, tokenizer, tokenizer_path, device: device.clone() })
    }

    /// config.json of a Qwen VL family (`None` for Gemma 3: see [`gemma3_config`](Self::gemma3_config)).
    pub fn config(&self) -> Option<&Config> {
        match &self.parts {
            Parts::Qwen(q) => Some(&q.config),
            Parts::Gemma3(_) => None,
        }
    }

    /// config.json of a Gemma 3 checkpoint (`None` for the Qwen families).
    pub fn gemma3_config(&self) -> Option<&Gemma3Config> {
        match &self.parts {
            Parts::Gemma3(g) => Some(&g.config),
            Parts::Qwen(_) => None,
        }
    }

    /// Rows of the embedding (and columns of the logits).
    pub fn vocab_size(&self) -> usize {
        match &self.parts {
            Parts::Qwen(q) => q.config.text_config.vocab_size,
            Parts::Gemma3(g) => g.config.text_config.vocab_size,
        }
    }

    /// The architecture, from config.json's `model_type`.
    pub fn family(&self) -> VlFamily {
        self.family
    }

    /// The Qwen families' image processor from preprocessor_config.json (`None` for Gemma 3).
    pub fn processor(&self) -> Option<&ImageProcessor> {
        match &self.parts {
            Parts::Qwen(q) => Some(&q.processor),
            Parts::Gemma3(_) => None,
        }
    }

    /// The tokenizer from tokenizer.json.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The dtype the weights were loaded in.
    pub fn dtype(&self) -> DType {
        match &self.parts {
            Parts::Qwen(q) => q.text.dtype(),
            Parts::Gemma3(g) => g.dtype(),
        }
    }

    /// Id of the token the image's features replace: `<|image_pad|>`, Gemma 3's `<image_soft_token>`,
    /// Mistral3's `[IMG]`.
    pub fn image_token_id(&self) -> u32 {
        match &self.parts {
            Parts::Qwen(q) => q.config.image_token_id,
            Parts::Gemma3(g) => g.config.image_token_id,
        }
    }

    /// Tokenizes text as is (special tokens in the text are recognised; no BOS is added: Qwen adds none,
    /// and Gemma's chat template writes `<bos>` itself).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, VisionError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| VisionError::Tokenizer { path: self.tokenizer_path.clone(), message: e.to_string() })
    }

    /// Tokenizes a rendered chat prompt with its image placeholder expanded for `image`, as the family's
    /// HF processor does: Qwen's one `<|image_pad|>` becomes `image.num_image_tokens()` tokens; Gemma 3's
    /// `<start_of_image>` becomes the processor's image sequence in the text, before tokenizing
    /// ([`gemma3::expand_image_text`]). Without an image the text is tokenized as is.
    pub fn encode_prompt(&self, text: &str, image: Option<&PreparedImage>) -> Result<Vec<u32>, VisionError> {
        match (&self.parts, image) {
            (_, None) => self.encode(text),
            (Parts::Qwen(_), Some(img)) => self.expand_image_tokens(&self.encode(text)?, img),
            (Parts::Gemma3(_), Some(img)) => self.encode(&gemma3::expand_image_text(text, img.num_image_tokens())?),
        }
    }

    /// Prepares an image as the checkpoint's processor does.
    pub fn preprocess(&self, image: &DynamicImage) -> Result<PreparedImage, VisionError> {
        match &self.parts {
            Parts::Qwen(q) => q.processor.preprocess(image),
            Parts::Gemma3(g) => g.preprocess(image),
        }
    }

    /// Expands the single `<|image_pad|>` of `token_ids` to `image.num_image_tokens()` copies (Qwen
    /// families; Mistral3: `[IMG]` to its rows of `[IMG]` closed by `[IMG_BREAK]` and `[IMG_END]`).
    /// Gemma 3 expands its marker in the text, so it has no token-level expansion: use
    /// [`encode_prompt`](Self::encode_prompt).
    pub fn expand_image_tokens(&self, token_ids: &[u32], image: &PreparedImage) -> Result<Vec<u32>, VisionError> {
        match &self.parts {
            Parts::Qwen(q) if self.family == VlFamily::Mistral3 => mistral3::expand(q, token_ids, image),
            Parts::Qwen(q) => expand_image_pad(token_ids, q.config.image_token_id, image.num_image_tokens()),
            Parts::Gemma3(_) => Err(VisionError::Prompt {
                message: "Gemma 3 expands <start_of_image> in the prompt text, not in token ids".into(),
                fix: "tokenize the rendered prompt with encode_prompt(text, Some(image))",
            }),
        }
    }

    /// Logits for the token after `token_ids`: f32, shape `[vocab_size]`.
    ///
    /// With an image, `token_ids` holds exactly `image.num_image_tokens()` image tokens in one run
    /// (expanded already, e.g. by [`encode_prompt`](Self::encode_prompt)); the Qwen families also take
    /// one `<|image_pad|>` and expand it here. Without an image, it must hold none.
    pub fn next_token_logits(&self, token_ids: &[u32], image: Option<&PreparedImage>) -> Result<Tensor, VisionError> {
        Ok(self.prefill(token_ids, image)?.logits)
    }

    /// Computes a whole prompt (as [`next_token_logits`](Self::next_token_logits) takes it) and keeps its
    /// keys and values, so that [`extend`](Self::extend) can continue it.
    pub fn prefill(&self, token_ids: &[u32], image: Option<&PreparedImage>) -> Result<Prefix, VisionError> {
        self.check_ids(token_ids)?;
        if let Parts::Qwen(q) = &self.parts
            && self.family == VlFamily::Mistral3
        {
            return mistral3::prefill(self, q, token_ids, image);
        }
        let image_id = self.image_token_id();
        let ids: Vec<u32> = match image {
            Some(img) => {
                let count = token_ids.iter().filter(|&&t| t == image_id).count();
                if count == 1 && img.num_image_tokens() != 1 && matches!(self.parts, Parts::Qwen(_)) {
                    expand_image_pad(token_ids, image_id, img.num_image_tokens())?
                } else {
                    token_ids.to_vec()
                }
            }
            None => {
                if token_ids.contains(&image_id) {
                    return Err(VisionError::Prompt {
                        message: format!("the token ids hold image tokens (id {image_id}) but no image was given"),
                        fix: "pass the prepared image, or render the prompt without an image",
                    });
                }
                token_ids.to_vec()
            }
        };
        let q = match &self.parts {
            Parts::Gemma3(g) => {
                let image = match image {
                    Some(img) => {
                        let (start, n) = prompt::image_span(&ids, image_id, img.num_image_tokens())?;
                        Some((img, start, n))
                    }
                    None => None,
                };
                let (logits, cache) = g.prefill(&ids, image, &self.device)?;
                let next_position = ids.len() as u32;
                return Ok(Prefix { ids, cache, next_position, logits });
            }
            Parts::Qwen(q) => q,
        };
        let input = Tensor::new(ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let embeds = q.text.embed(&input)?;
        let (logits, cache, pos) = match image {
            None => {
                let pos = mrope_positions(ids.len(), None);
                let (logits, cache) = q.text.forward(embeds, &pos, None, None)?;
                (logits, cache, pos)
            }
            Some(img) => {
                check_image(&q.config, img)?;
                let (start, n) = prompt::image_span(&ids, image_id, img.num_image_tokens())?;
                let pixels = img.pixel_values().to_device(&self.device)?;
                let (image_embeds, deepstack) = q.vision.forward(&pixels, img.grid_thw())?;
                let embeds = replace_rows(&embeds, start, n, &image_embeds)?;
                let pos = mrope_positions(ids.len(), Some((start, img.grid_thw(), img.merge_size())));
                let visual = Visual { start, len: n, deepstack: &deepstack };
                let (logits, cache) = q.text.forward(embeds, &pos, None, Some(visual))?;
                (logits, cache, pos)
            }
        };
        let next_position = pos.iter().flat_map(|row| row.iter().copied()).max().map_or(0, |p| p + 1);
        Ok(Prefix { ids, cache, next_position, logits })
    }

    /// Continues `prefix` by text tokens `more` (no image tokens): the result equals a
    /// [`prefill`](Self::prefill) of the whole sequence up to float rounding, but only computes `more`.
    pub fn extend(&self, prefix: &Prefix, more: &[u32]) -> Result<Prefix, VisionError> {
        if more.is_empty() {
            return Ok(prefix.clone());
        }
        self.check_ids(more)?;
        if more.contains(&self.image_token_id()) {
            return Err(VisionError::Prompt {
                message: "the continuation holds image tokens".into(),
                fix: "put the image in the prefix; a continuation is text",
            });
        }
        let start = prefix.next_position;
        let (logits, cache) = match &self.parts {
            Parts::Gemma3(g) => g.extend(&prefix.cache, more, &self.device)?,
            Parts::Qwen(q) => {
                let row: Vec<u32> = (0..more.len() as u32).map(|i| start + i).collect();
                let pos = [row.clone(), row.clone(), row];
                let input = Tensor::new(more, &self.device)?.unsqueeze(0)?;
                q.text.forward(q.text.embed(&input)?, &pos, Some(&prefix.cache), None)?
            }
        };
        let mut ids = prefix.ids.clone();
        ids.extend_from_slice(more);
        Ok(Prefix { ids, cache, next_position: start + more.len() as u32, logits })
    }

    fn check_ids(&self, token_ids: &[u32]) -> Result<(), VisionError> {
        if token_ids.is_empty() {
            return Err(VisionError::Prompt { message: "no token ids".into(), fix: "pass the tokenized prompt" });
        }
        let vocab = self.vocab_size();
        if let Some(&bad) = token_ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(VisionError::Prompt {
                message: format!("token id {bad} is outside the vocabulary of {vocab}"),
                fix: "tokenize with this checkpoint's tokenizer.json",
            });
        }
        Ok(())
    }
}

/// The Qwen families' checks of the tokenizer against config.json, and their networks.
fn load_qwen(
    dir: &Path,
    config: Config,
    processor: ImageProcessor,
    tokenizer: &Tokenizer,
    device: &Device,
    dtype: DType,
) -> Result<QwenParts, VisionError> {
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
    let files = weights::safetensors_files(dir)?;
    let weights_err = |source| VisionError::Weights { path: dir.to_path_buf(), source };
    let vb = weights::open_weights(&files, dtype, device).map_err(weights_err)?;
    // Released Qwen2-VL / Qwen2.5-VL files name the parts `visual.*` and `model.*`; Qwen3-VL and
    // files re-saved by transformers >= 4.52 nest both under `model.`.
    let nested = vb.contains_tensor("model.language_model.embed_tokens.weight");
    let (visual, language) = if nested { ("model.visual", "model.language_model") } else { ("visual", "model") };
    let vision = match config.family {
        VlFamily::Qwen3Vl => Qwen3Tower::new(&config.vision_config, vb.pp(visual)).map(VisionTower::Qwen3),
        family => Qwen2Tower::new(family, &config.vision_config, vb.pp(visual)).map(VisionTower::Qwen2),
    }
    .map_err(weights_err)?;
    let text = TextModel::new(&config, vb, language).map_err(weights_err)?;
    Ok(QwenParts { config, processor, vision, text })
}

fn check_image(config: &Config, img: &PreparedImage) -> Result<(), VisionError> {
    let v = &config.vision_config;
    let want = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
    let [t, h, w] = img.grid_thw();
    let m = v.spatial_merge_size;
    let dims = img.pixel_values().dims();
    if img.merge_size() != m || h % m != 0 || w % m != 0 || dims != [t * h * w, want] {
        return Err(VisionError::Prompt {
            message: format!(
                "the prepared image (pixel values {dims:?}, grid {:?}, merge {}) does not fit this model (rows of {want}, merge {m})",
                img.grid_thw(),
                img.merge_size()
            ),
            fix: "prepare the image with this model's preprocess",
        });
    }
    Ok(())
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
