//! [`VlModel`]: one loaded checkpoint of any family, dispatching to the family's parts. The only
//! module that knows every family; the families know only the shared modules.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use image::DynamicImage;
use serde_json::{Map, Value};
use tokenizers::Tokenizer;

use crate::config::{Config, config_file};
use crate::error::VisionError;
use crate::family::VlFamily;
use crate::files::{read_json, read_to_string};
use crate::gemma3::config::Gemma3Config;
use crate::gemma3::{Gemma3Parts, expand_image_text};
use crate::mistral3::Mistral3Parts;
use crate::prefix::Prefix;
use crate::preprocess::{ImageProcessor, PreparedImage};
use crate::qwen::QwenParts;

enum Parts {
    Qwen(Box<QwenParts>),
    Gemma3(Box<Gemma3Parts>),
    Mistral3(Box<Mistral3Parts>),
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
            Parts::Mistral3(m) => d.field("config", &m.config).field("processor", &m.processor),
            Parts::Gemma3(g) => d.field("config", &g.config).field("processor", &g.processor),
        };
        d.field("device", &self.device).finish_non_exhaustive()
    }
}

/// config.json's text and its `model_type`, read before the family's own parser takes the text.
fn read_family(path: &Path) -> Result<(VlFamily, String), VisionError> {
    let text = read_to_string(path, "the model configuration")?;
    let root: Value = serde_json::from_str(&text).map_err(|source| VisionError::Json {
        path: path.to_path_buf(),
        what: "VL model config.json",
        source,
    })?;
    let model_type = root.get("model_type").and_then(Value::as_str).unwrap_or("qwen3_vl");
    let family = VlFamily::from_model_type(model_type).ok_or_else(|| VisionError::Config {
        path: path.to_path_buf(),
        message: format!(
            "model_type is {model_type:?}; herd runs \"qwen2_vl\", \"qwen2_5_vl\", \"qwen3_vl\", \"gemma3\" and \"mistral3\""
        ),
        fix: "use the config.json shipped with a Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 3 or Mistral-Small-3.1 checkpoint",
    })?;
    Ok((family, text))
}

impl Config {
    /// Reads and checks `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, VisionError> {
        read_json(path, "the model configuration", Self::from_json)
    }

    /// Parses the text of a config.json (Qwen2-VL, Qwen2.5-VL, Qwen3-VL or Mistral3; Gemma 3 has
    /// [`Gemma3Config`]); `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, VisionError> {
        let file = config_file(path);
        let root: Map<String, Value> = file.parse(text)?;
        let model_type = root.get("model_type").and_then(Value::as_str).unwrap_or("qwen3_vl");
        match VlFamily::from_model_type(model_type) {
            Some(VlFamily::Mistral3) => crate::mistral3::config::from_root(root, path),
            Some(family @ (VlFamily::Qwen2Vl | VlFamily::Qwen2_5Vl | VlFamily::Qwen3Vl)) => {
                crate::qwen::config::from_root(family, root, path)
            }
            Some(VlFamily::Gemma3) | None => Err(file.bad(format!(
                "model_type is {model_type:?}; this parser reads \"qwen2_vl\", \"qwen2_5_vl\", \"qwen3_vl\" and \"mistral3\" (Gemma 3: Gemma3Config)"
            ))),
        }
    }
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
        let (parts, tokenizer, tokenizer_path) = match family {
            VlFamily::Gemma3 => {
                let (g, tokenizer, path) = Gemma3Parts::load(dir, &config_text, device, dtype)?;
                (Parts::Gemma3(Box::new(g)), tokenizer, path)
            }
            VlFamily::Mistral3 => {
                let config = Config::from_json(&config_text, &config_path)?;
                let (m, tokenizer, path) = Mistral3Parts::load(dir, config, device, dtype)?;
                (Parts::Mistral3(Box::new(m)), tokenizer, path)
            }
            VlFamily::Qwen2Vl | VlFamily::Qwen2_5Vl | VlFamily::Qwen3Vl => {
                let config = Config::from_json(&config_text, &config_path)?;
                let (q, tokenizer, path) = QwenParts::load(dir, config, device, dtype)?;
                (Parts::Qwen(Box::new(q)), tokenizer, path)
            }
        };
        Ok(Self { family, parts, tokenizer, tokenizer_path, device: device.clone() })
    }

    /// config.json of a Qwen VL family or Mistral3 (`None` for Gemma 3: see
    /// [`gemma3_config`](Self::gemma3_config)).
    pub fn config(&self) -> Option<&Config> {
        match &self.parts {
            Parts::Qwen(q) => Some(&q.config),
            Parts::Mistral3(m) => Some(&m.config),
            Parts::Gemma3(_) => None,
        }
    }

    /// config.json of a Gemma 3 checkpoint (`None` for the other families).
    pub fn gemma3_config(&self) -> Option<&Gemma3Config> {
        match &self.parts {
            Parts::Gemma3(g) => Some(&g.config),
            Parts::Qwen(_) | Parts::Mistral3(_) => None,
        }
    }

    /// Rows of the embedding (and columns of the logits).
    pub fn vocab_size(&self) -> usize {
        match &self.parts {
            Parts::Qwen(q) => q.config.text_config.vocab_size,
            Parts::Mistral3(m) => m.config.text_config.vocab_size,
            Parts::Gemma3(g) => g.config.text_config.vocab_size,
        }
    }

    /// The architecture, from config.json's `model_type`.
    pub fn family(&self) -> VlFamily {
        self.family
    }

    /// The image processor from preprocessor_config.json of the Qwen families and Mistral3 (`None` for
    /// Gemma 3).
    pub fn processor(&self) -> Option<&ImageProcessor> {
        match &self.parts {
            Parts::Qwen(q) => Some(&q.processor),
            Parts::Mistral3(m) => Some(&m.processor),
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
            Parts::Mistral3(m) => m.text.dtype(),
            Parts::Gemma3(g) => g.dtype(),
        }
    }

    /// Id of the token the image's features replace: `<|image_pad|>`, Gemma 3's `<image_soft_token>`,
    /// Mistral3's `[IMG]`.
    pub fn image_token_id(&self) -> u32 {
        match &self.parts {
            Parts::Qwen(q) => q.config.image_token_id,
            Parts::Mistral3(m) => m.config.image_token_id,
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
    /// ([`gemma3::expand_image_text`](crate::gemma3::expand_image_text)). Without an image the text is
    /// tokenized as is.
    pub fn encode_prompt(&self, text: &str, image: Option<&PreparedImage>) -> Result<Vec<u32>, VisionError> {
        match (&self.parts, image) {
            (_, None) => self.encode(text),
            (Parts::Qwen(_) | Parts::Mistral3(_), Some(img)) => self.expand_image_tokens(&self.encode(text)?, img),
            (Parts::Gemma3(_), Some(img)) => self.encode(&expand_image_text(text, img.num_image_tokens())?),
        }
    }

    /// Prepares an image as the checkpoint's processor does.
    pub fn preprocess(&self, image: &DynamicImage) -> Result<PreparedImage, VisionError> {
        match &self.parts {
            Parts::Qwen(q) => q.processor.preprocess(image),
            Parts::Mistral3(m) => m.processor.preprocess(image),
            Parts::Gemma3(g) => g.preprocess(image),
        }
    }

    /// Expands the single `<|image_pad|>` of `token_ids` to `image.num_image_tokens()` copies (Qwen
    /// families; Mistral3: `[IMG]` to its rows of `[IMG]` closed by `[IMG_BREAK]` and `[IMG_END]`).
    /// Gemma 3 expands its marker in the text, so it has no token-level expansion: use
    /// [`encode_prompt`](Self::encode_prompt).
    pub fn expand_image_tokens(&self, token_ids: &[u32], image: &PreparedImage) -> Result<Vec<u32>, VisionError> {
        match &self.parts {
            Parts::Qwen(q) => q.expand(token_ids, image),
            Parts::Mistral3(m) => m.expand(token_ids, image),
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
        Ok(self.prefill(token_ids, image)?.logits().clone())
    }

    /// Computes a whole prompt (as [`next_token_logits`](Self::next_token_logits) takes it) and keeps its
    /// keys and values, so that [`extend`](Self::extend) can continue it.
    pub fn prefill(&self, token_ids: &[u32], image: Option<&PreparedImage>) -> Result<Prefix, VisionError> {
        self.check_ids(token_ids)?;
        match &self.parts {
            Parts::Qwen(q) => q.prefill(token_ids, image, &self.device),
            Parts::Mistral3(m) => m.prefill(token_ids, image, &self.device),
            Parts::Gemma3(g) => g.prefill(token_ids, image, &self.device),
        }
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
        let (logits, cache) = match &self.parts {
            Parts::Qwen(q) => q.extend(prefix, more, &self.device)?,
            Parts::Mistral3(m) => m.extend(prefix, more, &self.device)?,
            Parts::Gemma3(g) => g.extend(prefix.cache(), more, &self.device)?,
        };
        Ok(prefix.extended(more, cache, logits))
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
