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
//! The code is laid out by family, as candle-transformers lays out its models: `qwen/`, `gemma3/` and
//! `mistral3/` each hold a family's config reader, processor, towers and forward passes; beside them
//! are the parts they share (the decoder of the Qwen families and Mistral3, attention and MLP layers,
//! the patch processor and [`PreparedImage`], Pillow's resampling, token-level prompt handling, config
//! and file reading), and `model` dispatches [`VlModel`] to the family. A family uses shared modules
//! only; no shared module uses a family; only `model` knows them all. The key/value cache and the
//! safetensors loader are herd-tensor's, shared with herd-infer. The tiny checkpoints the tests run are
//! written by the herd-test-support crate, not shipped here.
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
mod decoder;
mod error;
mod family;
mod files;
pub mod gemma3;
mod layers;
mod mistral3;
mod model;
mod prefix;
pub mod preprocess;
mod prompt;
mod qwen;
mod resample;
mod weights;

pub use config::{Config, Mistral3Settings, RopeParameters, TextConfig, VisionActivation, VisionConfig};
pub use error::VisionError;
pub use family::VlFamily;
pub use gemma3::config::{Gemma3Config, Gemma3TextConfig, LayerType, Rope, SiglipConfig};
pub use gemma3::processor::{Gemma3Processor, Resample};
pub use herd_tensor::KvCache;
pub use mistral3::{IMG, IMG_BREAK, IMG_END, pixtral_processor_from_json};
pub use model::VlModel;
pub use prefix::Prefix;
pub use preprocess::{ImageProcessor, PreparedImage, pixtral_resize, smart_resize};
pub use prompt::{expand_image_pad, mrope_positions};
pub use qwen::{IMAGE_PAD, VISION_END, VISION_START};
pub use resample::{resize_bicubic, resize_bilinear};
