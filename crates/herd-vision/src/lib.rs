//! Vision-language models for herd: next-token logits of a prompt that shows the model one image.
//!
//! The Asch-conformity experiments show a vision-language model a synthetic image (lines, dots,
//! colours) plus the confederates' answers, and read off the model's answer distribution. This crate
//! runs the Qwen3-VL family (`Qwen/Qwen3-VL-*-Instruct`) through candle from a Hugging Face folder
//! as shipped: `config.json`, `*.safetensors` (single or sharded with
//! `model.safetensors.index.json`), `tokenizer.json` and `preprocessor_config.json`.
//!
//! Pieces, in the order a caller uses them:
//! - [`Qwen3Vl::load`] reads and checks the folder;
//! - [`Qwen3Vl::preprocess`] (or [`ImageProcessor::preprocess`]) resizes with [`smart_resize`],
//!   normalizes and patchifies an image exactly as transformers' `Qwen2VLImageProcessor` does
//!   (resampling aside, see [`preprocess`](mod@preprocess));
//! - the caller renders the chat template to text with `<|vision_start|><|image_pad|><|vision_end|>`
//!   where the image goes, and tokenizes it ([`Qwen3Vl::encode`]);
//! - [`Qwen3Vl::next_token_logits`] expands `<|image_pad|>` to the image's token count
//!   ([`Qwen3Vl::expand_image_tokens`]) when given the unexpanded prompt, encodes the image, and
//!   runs the decoder with Qwen3-VL's 3-D positions (MRoPE) and DeepStack features.
//!
//! Each call is a full, stateless forward pass: identical inputs give identical logits.
//! On a CPU load in `DType::F32`; bf16 is for GPUs.
//!
//! ```no_run
//! use std::path::Path;
//! use candle_core::{DType, Device};
//! use herd_vision::Qwen3Vl;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut model = Qwen3Vl::load(Path::new("models/Qwen3-VL-2B-Instruct"), &Device::Cpu, DType::F32)?;
//! let image = image::open("stimulus.png")?;
//! let prepared = model.preprocess(&image)?;
//! let prompt = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>\
//!               Which line matches the reference? Answer A, B or C.<|im_end|>\n\
//!               <|im_start|>assistant\n";
//! let ids = model.encode(prompt)?;
//! let logits = model.next_token_logits(&ids, Some(&prepared))?; // [vocab], f32
//! let a = model.encode("A")?[0] as usize;
//! println!("logit of A: {}", logits.get(a)?.to_scalar::<f32>()?);
//! # Ok(()) }
//! ```

mod config;
mod error;
mod model;
pub mod preprocess;
mod prompt;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use image::DynamicImage;
use tokenizers::Tokenizer;

pub use config::{Config, RopeParameters, TextConfig, VisionConfig};
pub use error::VisionError;
pub use preprocess::{ImageProcessor, PreparedImage, smart_resize};
pub use prompt::{expand_image_pad, mrope_positions};

use model::{TextModel, VisionModel, replace_rows};

/// The special tokens framing an image in a Qwen3-VL prompt.
pub const VISION_START: &str = "<|vision_start|>";
/// The image placeholder, expanded to one token per merged patch.
pub const IMAGE_PAD: &str = "<|image_pad|>";
/// Closes the image.
pub const VISION_END: &str = "<|vision_end|>";

/// A loaded Qwen3-VL checkpoint: tokenizer, image processor and network.
pub struct Qwen3Vl {
    config: Config,
    processor: ImageProcessor,
    tokenizer: Tokenizer,
    tokenizer_path: PathBuf,
    vision: VisionModel,
    text: TextModel,
    device: Device,
}

impl std::fmt::Debug for Qwen3Vl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Vl")
            .field("config", &self.config)
            .field("processor", &self.processor)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl Qwen3Vl {
    /// Loads a Hugging Face Qwen3-VL folder onto `device`, with weights converted to `dtype`.
    ///
    /// Checks that the files agree: the tokenizer's ids of `<|image_pad|>`, `<|vision_start|>` and
    /// `<|vision_end|>` must be config.json's, and preprocessor_config.json's patch, merge and
    /// temporal sizes must be the vision encoder's.
    pub fn load(dir: &Path, device: &Device, dtype: DType) -> Result<Self, VisionError> {
        let config_path = dir.join("config.json");
        let config = Config::from_file(&config_path)?;
        let processor = ImageProcessor::from_file(&dir.join("preprocessor_config.json"))?;
        check_processor(&config, &processor, &dir.join("preprocessor_config.json"))?;

        let tokenizer_path = dir.join("tokenizer.json");
        if !tokenizer_path.is_file() {
            return Err(VisionError::MissingFile { path: tokenizer_path, what: "the tokenizer" });
        }
        let tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| VisionError::Tokenizer { path: tokenizer_path.clone(), message: e.to_string() })?;
        for (token, id) in [
            (IMAGE_PAD, config.image_token_id),
            (VISION_START, config.vision_start_token_id),
            (VISION_END, config.vision_end_token_id),
        ] {
            let found = tokenizer.token_to_id(token);
            if found != Some(id) {
                return Err(VisionError::Config {
                    path: config_path,
                    message: format!(
                        "config.json gives {token} the id {id}, but {} gives it {}",
                        tokenizer_path.display(),
                        found.map_or_else(|| "none".to_string(), |i| i.to_string())
                    ),
                    fix: "use config.json and tokenizer.json from the same checkpoint",
                });
            }
        }

        let files = safetensors_files(dir)?;
        let vb = open_weights(&files, dtype, device)
            .map_err(|source| VisionError::Weights { path: dir.to_path_buf(), source })?;
        let weights_err = |source| VisionError::Weights { path: dir.to_path_buf(), source };
        let vision = VisionModel::new(&config.vision_config, vb.pp("model").pp("visual")).map_err(weights_err)?;
        let text = TextModel::new(&config, vb).map_err(weights_err)?;
        Ok(Self { config, processor, tokenizer, tokenizer_path, vision, text, device: device.clone() })
    }

    /// config.json.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The image processor from preprocessor_config.json.
    pub fn processor(&self) -> &ImageProcessor {
        &self.processor
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
        self.text.dtype()
    }

    /// Id of `<|image_pad|>`.
    pub fn image_token_id(&self) -> u32 {
        self.config.image_token_id
    }

    /// Tokenizes text as is (special tokens in the text are recognised; no BOS is added, as Qwen
    /// adds none).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, VisionError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| VisionError::Tokenizer { path: self.tokenizer_path.clone(), message: e.to_string() })
    }

    /// Prepares an image as the checkpoint's processor does.
    pub fn preprocess(&self, image: &DynamicImage) -> Result<PreparedImage, VisionError> {
        self.processor.preprocess(image)
    }

    /// Expands the single `<|image_pad|>` of `token_ids` to `image.num_image_tokens()` copies.
    pub fn expand_image_tokens(&self, token_ids: &[u32], image: &PreparedImage) -> Result<Vec<u32>, VisionError> {
        expand_image_pad(token_ids, self.config.image_token_id, image.num_image_tokens())
    }

    /// Logits for the token after `token_ids`: f32, shape `[vocab_size]`.
    ///
    /// With an image, `token_ids` holds either one `<|image_pad|>` (expanded here) or exactly
    /// `image.num_image_tokens()` of them in one run (expanded already). Without one, it must hold
    /// none.
    pub fn next_token_logits(
        &mut self,
        token_ids: &[u32],
        image: Option<&PreparedImage>,
    ) -> Result<Tensor, VisionError> {
        if token_ids.is_empty() {
            return Err(VisionError::Prompt { message: "no token ids".into(), fix: "pass the tokenized prompt" });
        }
        let vocab = self.config.text_config.vocab_size;
        if let Some(&bad) = token_ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(VisionError::Prompt {
                message: format!("token id {bad} is outside the vocabulary of {vocab}"),
                fix: "tokenize with this checkpoint's tokenizer.json",
            });
        }
        let image_id = self.config.image_token_id;
        let expanded;
        let ids: &[u32] = match image {
            Some(img) => {
                let count = token_ids.iter().filter(|&&t| t == image_id).count();
                if count == 1 && img.num_image_tokens() != 1 {
                    expanded = expand_image_pad(token_ids, image_id, img.num_image_tokens())?;
                    &expanded
                } else {
                    token_ids
                }
            }
            None => {
                if token_ids.contains(&image_id) {
                    return Err(VisionError::Prompt {
                        message: format!("the token ids hold image tokens (id {image_id}) but no image was given"),
                        fix: "pass the prepared image, or render the prompt without an image",
                    });
                }
                token_ids
            }
        };
        let input = Tensor::new(ids, &self.device)?.unsqueeze(0)?;
        let embeds = self.text.embed(&input)?;
        match image {
            None => {
                let pos = mrope_positions(ids.len(), None);
                Ok(self.text.forward(embeds, &pos, None)?)
            }
            Some(img) => {
                self.check_image(img)?;
                let (start, n) = prompt::image_span(ids, image_id, img.num_image_tokens())?;
                let pixels = img.pixel_values().to_device(&self.device)?;
                let (image_embeds, deepstack) = self.vision.forward(&pixels, img.grid_thw())?;
                let embeds = replace_rows(&embeds, start, n, &image_embeds)?;
                let pos = mrope_positions(ids.len(), Some((start, img.grid_thw(), img.merge_size())));
                Ok(self.text.forward(embeds, &pos, Some((start, n, &deepstack)))?)
            }
        }
    }

    fn check_image(&self, img: &PreparedImage) -> Result<(), VisionError> {
        let v = &self.config.vision_config;
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
            fix: "use a Qwen3-VL checkpoint",
        });
    }
    Ok(())
}

/// The weight files: those named by model.safetensors.index.json, else model.safetensors.
fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>, VisionError> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        #[derive(serde::Deserialize)]
        struct Index {
            weight_map: BTreeMap<String, String>,
        }
        let text = std::fs::read_to_string(&index).map_err(|source| VisionError::Io { path: index.clone(), source })?;
        let parsed: Index = serde_json::from_str(&text).map_err(|source| VisionError::Json {
            path: index.clone(),
            what: "safetensors index (with a weight_map)",
            source,
        })?;
        let names: BTreeSet<String> = parsed.weight_map.into_values().collect();
        let files: Vec<PathBuf> = names.into_iter().map(|n| dir.join(n)).collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            return Err(VisionError::MissingFile {
                path: missing.clone(),
                what: "a weight shard listed in model.safetensors.index.json",
            });
        }
        if files.is_empty() {
            return Err(VisionError::Config {
                path: index,
                message: "weight_map is empty".into(),
                fix: "use the index file shipped with the checkpoint",
            });
        }
        return Ok(files);
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    Err(VisionError::MissingFile {
        path: single,
        what: "the weights (neither model.safetensors nor model.safetensors.index.json is there)",
    })
}

/// Memory-maps the safetensors files (no copy of multi-GB checkpoints into RAM).
#[allow(unsafe_code)]
fn open_weights(files: &[PathBuf], dtype: DType, device: &Device) -> candle_core::Result<VarBuilder<'static>> {
    // SAFETY: the files are mapped read-only; this is sound as long as nobody modifies or truncates
    // them while the model is loaded, which a checkpoint folder does not do (the same contract as
    // every mmap-based loader, e.g. transformers' safetensors loading).
    let st = unsafe { candle_core::safetensors::MmapedSafetensors::multi(files)? };
    Ok(VarBuilder::from_backend(Box::new(st), dtype, device.clone()))
}
