//! The options of the `openai` backend, shared by `herd run`, `herd score` and `herd generate`.

use anyhow::{Context, Result, bail};
use herd_backend::{ModelEntry, locate_model};
use herd_infer::{
    OpenAiBackend, OpenAiBatch, OpenAiOptions, PromptRenderer, RetryPolicy, ScoreApi, ServedModel, StructuredOutput,
};
use std::path::Path;
use std::time::Duration;

#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "OpenAI-compatible servers (--backend openai)")]
pub struct ServerArgs {
    /// Server base URL, e.g. http://127.0.0.1:8000 (vLLM, SGLang, llama.cpp); repeat for several
    /// servers: each request goes to the least-loaded one (a society's deciders and an image's trials
    /// keep to one while it has room, so its prefix cache hits), and one that keeps failing is set aside.
    #[arg(long = "endpoint", value_name = "URL")]
    pub endpoints: Vec<String>,
    /// The model name the servers know (default: the alias).
    #[arg(long, value_name = "NAME")]
    pub served_model: Option<String>,
    /// Environment variable that holds the API key; the key is sent as a bearer token and never
    /// written to manifests or logs (a server's error echoing it is shown with `***` in its place).
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// The most requests in flight at once on each endpoint. Each endpoint's concurrency adapts below
    /// it: it grows while the server answers as fast as when idle and backs off when its answers slow
    /// down or it says it is overloaded (429, 503, timeouts; Retry-After is honoured); the run manifest
    /// records what each endpoint reached.
    #[arg(long, default_value_t = herd_infer::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Keep every endpoint at --max-in-flight instead of adapting (a server whose capacity is known).
    #[arg(long)]
    pub fixed_concurrency: bool,
    /// Top log-probabilities asked for when scoring; an answer outside them gets an upper bound. A
    /// server's longer list counts whole in the check that probabilities sum to at most 1, and this
    /// many of its most probable tokens are scored.
    #[arg(long, default_value_t = 20)]
    pub top_logprobs: usize,
    /// Score through `chat` completions (the server applies the chat template) or `completions` with
    /// the prompt rendered here by the model's own template (needs the model's files here).
    #[arg(long, default_value = "chat")]
    pub score_api: ScoreApi,
    /// How allocations are constrained: json-schema (OpenAI, vLLM, SGLang) or json-object
    /// (llama-cpp-python); a server that rejects json-schema is asked with json-object.
    #[arg(long, default_value = "json-schema")]
    pub structured_output: StructuredOutput,
    /// Seconds one request may take, connection to last byte.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub request_timeout: f64,
    /// Tries per request on connection errors, timeouts, 429 and 5xx (exponential backoff with jitter).
    #[arg(long, default_value_t = 6)]
    pub max_attempts: u32,
    /// The first backoff in seconds; it doubles per retry up to 30 s.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.5)]
    pub retry_delay: f64,
    /// Largest reply read from a server, in MB (text, reasoning and log-probabilities together); a
    /// longer reply fails its request (the unit is retried on the next run) instead of filling memory.
    #[arg(long, value_name = "MB", default_value_t = 8.0)]
    pub max_reply_mb: f64,
    /// Longest reasoning kept of one generation reply, in MB (a reasoning model's `reasoning_content`,
    /// stored in the `reasoning_output` column); longer reasoning fails its request (the unit is retried
    /// on the next run) instead of being stored. Checked after --max-reply-mb, which bounds the whole reply.
    #[arg(long, value_name = "MB", default_value_t = 1.0)]
    pub max_reasoning_mb: f64,
}

/// A size flag's MB (checked positive and finite) as bytes, at least 1.
fn megabytes_to_bytes(mb: f64) -> u64 {
    ((mb * f64::from(1u32 << 20)) as u64).max(1)
}

impl ServerArgs {
    pub fn options(&self, entry: &ModelEntry) -> Result<OpenAiOptions> {
        if self.endpoints.is_empty() {
            bail!("--backend openai needs --endpoint URL (the server's base URL, e.g. http://127.0.0.1:8000)");
        }
        self.request_options(entry)
    }

    /// The options without the check for endpoints: a batch file uses what shapes the requests and the
    /// reading of replies (served model, top log-probabilities, score API, structured output, reply caps).
    fn request_options(&self, entry: &ModelEntry) -> Result<OpenAiOptions> {
        // Bounded so that a typo (1e300) is an error here, not an overflow when it becomes a Duration.
        const DAY: f64 = 86_400.0;
        if !(self.request_timeout > 0.0 && self.request_timeout <= DAY) {
            bail!(
                "--request-timeout {:?}: give the seconds one request may take, more than 0 and at most {DAY} (a day)",
                self.request_timeout
            );
        }
        if !(self.retry_delay >= 0.0 && self.retry_delay <= 3_600.0) {
            bail!(
                "--retry-delay {:?}: give the first backoff in seconds, 0 to 3600 (it doubles per retry up to 30 s)",
                self.retry_delay
            );
        }
        if !(self.max_reply_mb > 0.0 && self.max_reply_mb <= 4_096.0) {
            bail!(
                "--max-reply-mb {:?}: give the largest reply read from a server in MB, more than 0 and at most 4096",
                self.max_reply_mb
            );
        }
        if !(self.max_reasoning_mb > 0.0 && self.max_reasoning_mb <= 4_096.0) {
            bail!(
                "--max-reasoning-mb {:?}: give the longest reasoning kept of one reply in MB, more than 0 and at most 4096",
                self.max_reasoning_mb
            );
        }
        Ok(OpenAiOptions {
            endpoints: self.endpoints.clone(),
            served_model: self.served_model.clone().unwrap_or_else(|| entry.alias.clone()),
            api_key_env: self.api_key_env.clone(),
            max_in_flight: self.max_in_flight.max(1),
            adaptive: !self.fixed_concurrency,
            top_logprobs: self.top_logprobs,
            score_api: self.score_api,
            structured_output: self.structured_output,
            request_timeout: Duration::from_secs_f64(self.request_timeout),
            retry: RetryPolicy {
                max_attempts: self.max_attempts.max(1),
                base_delay: Duration::from_secs_f64(self.retry_delay),
                max_delay: Duration::from_secs(30),
            },
            max_reply_bytes: megabytes_to_bytes(self.max_reply_mb),
            max_reasoning_bytes: megabytes_to_bytes(self.max_reasoning_mb),
        })
    }

    /// The API key, from the variable `--api-key-env` names (for redacting texts that may echo it).
    pub fn api_key(&self) -> Option<String> {
        std::env::var(&self.api_key_env).ok().filter(|k| !k.is_empty())
    }

    /// The backend for `entry` on the servers; the model's files are read only to render prompts for
    /// `--score-api completions`.
    pub fn connect(&self, entry: &ModelEntry) -> Result<OpenAiBackend> {
        let options = self.options(entry)?;
        let (model, renderer) = served(entry, options.score_api)?;
        Ok(OpenAiBackend::new(model, options, renderer)?)
    }

    /// The openai backend's requests for `entry` through batch files: answers read from `import`, the
    /// requests still without one written to `export`.
    pub fn batch(&self, entry: &ModelEntry, import: Option<&Path>, export: Option<&Path>) -> Result<OpenAiBatch> {
        if !self.endpoints.is_empty() {
            bail!(
                "--endpoint is for --backend openai: a batch file is run elsewhere (vllm run-batch, a Batch API)\n  fix: leave out --endpoint, or use --backend openai"
            );
        }
        let options = self.request_options(entry)?;
        let (model, renderer) = served(entry, options.score_api)?;
        Ok(OpenAiBatch::new(model, options, renderer, import, export)?)
    }
}

/// The model behind the servers as the openai backend knows it, and its chat template where prompts are
/// rendered here (`--score-api completions`).
fn served(entry: &ModelEntry, score_api: ScoreApi) -> Result<(ServedModel, Option<PromptRenderer>)> {
    let renderer = match score_api {
        ScoreApi::Completions => {
            let files = locate_model(entry)
                .context("--score-api completions renders prompts with the model's own chat template")?;
            Some(PromptRenderer::load(entry, &files)?)
        }
        ScoreApi::Chat => None,
    };
    let model = ServedModel { alias: entry.alias.clone(), family: entry.family.name().into(), vision: entry.vision };
    Ok((model, renderer))
}
