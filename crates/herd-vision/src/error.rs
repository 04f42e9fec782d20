//! Errors of this crate: each names the file (or input) at fault and how to fix it.

use std::path::PathBuf;

/// Everything that can go wrong loading a checkpoint, preparing an image or running the model.
#[derive(Debug, thiserror::Error)]
pub enum VisionError {
    /// A file the checkpoint folder must hold is not there.
    #[error(
        "missing file {path}: {what}; fix: point at a complete Hugging Face Qwen2-VL, Qwen2.5-VL, Qwen3-VL or Gemma 3 folder (as downloaded, e.g. a snapshot folder of the HF cache)"
    )]
    MissingFile {
        /// The file that was looked for.
        path: PathBuf,
        /// What the file is needed for.
        what: &'static str,
    },

    /// A file exists but could not be read.
    #[error("cannot read {path}: {source}; fix: check the file's permissions and that it is complete")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// A JSON file does not parse into what it should hold.
    #[error("{path} is not a valid {what}: {source}; fix: use the file as shipped with the checkpoint")]
    Json {
        /// The file.
        path: PathBuf,
        /// What the file should be.
        what: &'static str,
        /// The parse error (with line and column).
        source: serde_json::Error,
    },

    /// A configuration value is out of range or contradicts another file.
    #[error("{path}: {message}; fix: {fix}")]
    Config {
        /// The file holding the value.
        path: PathBuf,
        /// What is wrong.
        message: String,
        /// How to fix it.
        fix: &'static str,
    },

    /// tokenizer.json could not be loaded, or a token could not be encoded.
    #[error("tokenizer {path}: {message}; fix: use the tokenizer.json shipped with the checkpoint")]
    Tokenizer {
        /// The tokenizer file.
        path: PathBuf,
        /// What the tokenizers crate said.
        message: String,
    },

    /// The safetensors weights could not be opened, or lack a tensor (or have it in a wrong shape).
    #[error(
        "weights in {path}: {source}; fix: use the checkpoint's unmodified safetensors, whose shapes match its config.json"
    )]
    Weights {
        /// The file or folder of the weights.
        path: PathBuf,
        /// What candle said (names the tensor).
        source: candle_core::Error,
    },

    /// The image cannot be processed (e.g. too elongated).
    #[error("image {width}x{height}: {message}; fix: {fix}")]
    Image {
        /// Image width in pixels.
        width: u32,
        /// Image height in pixels.
        height: u32,
        /// What is wrong.
        message: String,
        /// How to fix it.
        fix: &'static str,
    },

    /// The token ids and the image do not fit together.
    #[error("prompt: {message}; fix: {fix}")]
    Prompt {
        /// What is wrong.
        message: String,
        /// How to fix it.
        fix: &'static str,
    },

    /// A tensor operation failed while running the model.
    #[error("model forward pass failed: {0}")]
    Candle(#[from] candle_core::Error),
}
