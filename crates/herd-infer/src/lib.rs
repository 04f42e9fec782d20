//! herd's engines behind herd-backend's [`Backend`](herd_backend::Backend) contract: **score** (the
//! next-token distribution at the answer position, summed over the tokens that spell each answer) and
//! **generate** (sampled text, optionally constrained to a JSON schema).
//!
//! The local backend ([`LocalModel`]) runs text families (llama, qwen2, qwen3, phi3) from GGUF files or
//! Hugging Face safetensors folders with candle, rendering each model's own chat template;
//! [`VisionModel`] runs the vision-language families (through `herd-vision`) with the stimulus image;
//! [`OpenAiBackend`] drives OpenAI-compatible servers (vLLM, SGLang, llama.cpp) over HTTP. Which model
//! and where its files are is herd-backend's (the registry, `locate_model`). Before a load,
//! [`estimate_memory`] counts what a model will need on a device from its files' headers alone, and
//! [`check_fits`] refuses it against [`available_memory`] (or a given limit) with the numbers and the options.
//!
//! ```no_run
//! use herd_backend::{Backend, DEFAULT_MODEL, ModelRegistry, ScoreRequest, locate_model};
//! use herd_infer::{LoadOptions, LocalModel};
//! use herd_backend::chat::{ChatPrompt, Part};
//!
//! let registry = ModelRegistry::load("data/models.toml".as_ref())?;
//! let entry = registry.get(DEFAULT_MODEL)?;
//! let mut model = LocalModel::load(entry, &locate_model(entry)?, &LoadOptions::default())?;
//! let prompt = ChatPrompt::user(vec![Part::Text { text: "Which is longer, A or B? Answer A or B.".into() }]);
//! let scores = model.score(&[ScoreRequest::new(prompt, vec!["A".into(), "B".into()])])?;
//! println!("P(A) = {:.3}", scores[0].answers["A"].p);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod constraint;
mod error;
mod local;
mod memory;
mod model;
mod openai;
mod prepared;
mod redact;
mod sampler;
mod tokenizer;
mod vision;

/// The grammar engine generation masks logits with, public for the benchmark that times it as its own phase.
#[doc(hidden)]
pub use constraint::{ConstraintEngine, SequenceConstraint};
pub use error::{InferError, Result};
pub use local::{DeviceChoice, LoadOptions, LocalModel, PromptRenderer, common_prefix_len};
pub use memory::{MemoryEstimate, Workload, available_memory, check_fits, estimate_memory};
pub use model::WeightFormat;
/// herd's own decoder and file readers, public for the tests, examples and fuzz target that check them
/// against references and malformed files; not an API (the engines above are).
#[doc(hidden)]
pub use model::{Decoder, KvCache, causal_mask, gguf_decoder_config, load_hf_folder, read_gguf};
pub use openai::{
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_REASONING_BYTES, DEFAULT_MAX_REPLY_BYTES, MASS_ROUNDING, OpenAiBackend,
    OpenAiBatch, OpenAiOptions, REQUEST_SHAPE_INPUT, RetryPolicy, ScoreApi, ServedModel, StructuredOutput,
    checked_score,
};
pub use prepared::{LoadReport, PreparedCache, PreparedStatus};
pub use redact::{REDACTED, redact_secrets};
pub use sampler::{sample_token, sequence_rng};
pub use tokenizer::TextTokenizer;
pub use vision::VisionModel;

/// The engine for `entry` on this machine: the vision engine for a model that reads images
/// (`entry.vision`), the text engine otherwise. The one place the choice is made; `herd run`,
/// `herd score` and `herd generate` all load through it.
pub fn load_engine(
    entry: &herd_backend::ModelEntry,
    files: &herd_backend::ModelFiles,
    options: &LoadOptions,
) -> Result<Box<dyn herd_backend::Backend>> {
    Ok(if entry.vision {
        Box::new(VisionModel::load(entry, files, options)?)
    } else {
        Box::new(LocalModel::load(entry, files, options)?)
    })
}
