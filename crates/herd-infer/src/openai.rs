//! The `openai` backend: any OpenAI-compatible inference server (vLLM, SGLang, llama.cpp) over HTTP.
//!
//! Scoring asks for one token with `logprobs` and reads the returned top-k; an answer none of whose
//! spellings is among them gets an upper bound on its probability (the mass the server did not return)
//! and is flagged. Generation uses chat completions with the request's sampling parameters and, for
//! allocations, the server's structured outputs with the same JSON schema the local backend enforces.
//! Requests run concurrently, each endpoint at its own adaptive concurrency (`endpoints`: least-loaded
//! placement with affinity for a group that shares a prompt prefix, backoff on overload, endpoints that
//! keep failing set aside), and are retried with exponential backoff and jitter on connection errors,
//! timeouts, 429, 5xx and unreadable bodies. Through [`Backend`] a request that still fails fails its whole
//! group; through [`SharedBackend`] (the runner's pipeline) it fails only its own result, and the runner
//! records the unit as failed and retries it on the next run. Server replies are adversarial input: a body is read up to `max_reply_bytes`, and what it
//! holds is checked in `reply` (this module's child): scores pass [`checked_score`] (finite, a mass of at
//! most 1 up to rounding, each answer in [0, 1]) or the reply is retried as bad, and a generation's
//! reasoning is kept up to `max_reasoning_bytes`; both caps fail the request at once, naming the flag.
//! Every error text is redacted of the key, bearer tokens and URL credentials ([`redact_secrets`]).
//! The request bodies and the reading of replies are `wire`'s, shared with [`OpenAiBatch`] (`batch`), which
//! writes the same requests to a batch file and reads an offline run's answers through the same checks.

mod batch;
mod body;
mod endpoints;
mod fan_out;
mod reply;
mod wire;

use crate::error::{InferError, Result};
use crate::local::PromptRenderer;
use crate::redact::redact_secrets;
pub use batch::OpenAiBatch;
use endpoints::{Affinity, EndpointPool, Outcome};
use herd_backend::{
    Backend, BackendInfo, BackendLoad, GenerateRequest, Generation, ScoreRequest, ScoreResult, SharedBackend,
};
use rand::{Rng, SeedableRng};
pub use reply::{MASS_ROUNDING, checked_score};
use reply::{Refusal, megabytes, parse_reply};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use wire::{CHAT_PATH, Wire, response_format};

/// Which endpoint scoring requests go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreApi {
    /// `/v1/chat/completions`: the server applies the model's chat template.
    Chat,
    /// `/v1/completions` with the prompt rendered here by the model's own template (needs its files).
    Completions,
}

impl std::str::FromStr for ScoreApi {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "chat" => Ok(ScoreApi::Chat),
            "completions" => Ok(ScoreApi::Completions),
            other => Err(format!("`{other}`: expected chat or completions")),
        }
    }
}

/// How the allocation schema is passed to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// `{"type": "json_schema", "json_schema": {...}}` (OpenAI, vLLM, SGLang); servers that reject it
    /// with a 4xx are asked again with `JsonObject`, and that choice is kept.
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}` (llama-cpp-python's server).
    JsonObject,
}

impl std::str::FromStr for StructuredOutput {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "json-schema" | "json_schema" => Ok(StructuredOutput::JsonSchema),
            "json-object" | "json_object" => Ok(StructuredOutput::JsonObject),
            other => Err(format!("`{other}`: expected json-schema or json-object")),
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RetryPolicy {
    /// Tries per request, the first included.
    pub max_attempts: u32,
    /// The first backoff; each retry doubles it, up to `max_delay`, and sleeps a random part of it.
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_attempts: 6, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

/// The default of [`OpenAiOptions::max_in_flight`]: each endpoint's ceiling. A server that takes fewer says
/// so (queueing, 429, 503), and the adaptive limit stays below it.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;

/// The default of [`OpenAiOptions::max_reply_bytes`]: 8 MB.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 << 20;

/// The default of [`OpenAiOptions::max_reasoning_bytes`]: 1 MB.
pub const DEFAULT_MAX_REASONING_BYTES: u64 = 1 << 20;

/// Everything about talking to the servers. The API key itself is read from `api_key_env` when the
/// backend is built and is never part of this (serialisable, recorded) value; endpoints are recorded
/// with their credentials (`user:pass@`) removed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OpenAiOptions {
    /// Base URLs (`http://host:port` or `…/v1`); each request goes to the least-loaded one (`endpoints`).
    #[serde(serialize_with = "serialize_redacted")]
    pub endpoints: Vec<String>,
    /// The model name the servers know.
    pub served_model: String,
    /// The environment variable holding the API key (sent as a bearer token when set).
    pub api_key_env: String,
    /// Requests in flight at once on each endpoint: the ceiling of its adaptive limit, or its limit when
    /// not `adaptive`.
    pub max_in_flight: usize,
    /// Each endpoint's concurrency adapts to how fast it answers (grows from a few requests while its
    /// latency stays flat, backs off on queueing, 429, 503 and timeouts); `false` keeps `max_in_flight`.
    pub adaptive: bool,
    /// How many top log-probabilities scoring asks for.
    pub top_logprobs: usize,
    pub score_api: ScoreApi,
    pub structured_output: StructuredOutput,
    /// Limit on one request, connection to last byte.
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// Largest reply body read (and so largest text or reasoning kept); a larger one fails the request
    /// with an error naming the limit (`--max-reply-mb`).
    pub max_reply_bytes: u64,
    /// Longest reasoning (`reasoning_content` / `reasoning`) one generation reply may carry, checked
    /// after the body cap; a longer one fails the request, not retried, naming the limit
    /// (`--max-reasoning-mb`): a runaway chain of thought is not stored, however much the body cap allows.
    pub max_reasoning_bytes: u64,
}

fn serialize_redacted<S: serde::Serializer>(
    endpoints: &[String],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.collect_seq(endpoints.iter().map(|e| redact_secrets(e, &[])))
}

impl OpenAiOptions {
    pub fn new(endpoints: Vec<String>, served_model: impl Into<String>) -> Self {
        OpenAiOptions {
            endpoints,
            served_model: served_model.into(),
            api_key_env: "OPENAI_API_KEY".into(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            adaptive: true,
            top_logprobs: 20,
            score_api: ScoreApi::Chat,
            structured_output: StructuredOutput::JsonSchema,
            request_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            max_reasoning_bytes: DEFAULT_MAX_REASONING_BYTES,
        }
    }

    /// The options that shape what a request asks: the model name, the scoring endpoint, the
    /// log-probabilities asked for and the JSON constraint's form. A run's rows depend on them, so they
    /// join its input fingerprint ([`REQUEST_SHAPE_INPUT`]): a resume, or a batch file's import, under
    /// other ones is refused instead of mixing two ways of asking in one run.
    pub fn request_shape(&self) -> serde_json::Value {
        serde_json::json!({
            "served_model": self.served_model,
            "score_api": self.score_api,
            "top_logprobs": self.top_logprobs,
            "structured_output": self.structured_output,
        })
    }
}

/// The input fingerprint's name for [`OpenAiOptions::request_shape`]: the flags that set it, so that a
/// refusal says which to give as the run began (its manifest's `model.server` records them).
pub const REQUEST_SHAPE_INPUT: &str =
    "requests asked with --served-model, --score-api, --top-logprobs, --structured-output";

/// What the runner needs to know about the model behind the servers.
#[derive(Clone, Debug)]
pub struct ServedModel {
    pub alias: String,
    pub family: String,
    pub vision: bool,
}

pub struct OpenAiBackend {
    model: ServedModel,
    options: OpenAiOptions,
    /// `…/v1` of each endpoint.
    bases: Vec<String>,
    api_key: Option<String>,
    agent: ureq::Agent,
    /// Each endpoint's concurrency limit and load.
    pool: EndpointPool,
    /// Turns for replies past a few hundred kilobytes, so memory stays bounded with many in flight.
    large_replies: body::LargeReplies,
    /// Set once a server refused `json_schema`.
    json_object_only: AtomicBool,
    /// The request bodies and the reading of replies, shared with batch files.
    wire: Wire,
    requests: AtomicUsize,
}

/// Why one HTTP exchange failed, and whether trying again may help.
struct CallError {
    retryable: bool,
    /// What the failure says about the endpoint it was sent to.
    outcome: Outcome,
    /// Seconds a 429 or 503 asked us to wait.
    retry_after: Option<Duration>,
    status: Option<u16>,
    problem: String,
}

impl CallError {
    fn fatal(problem: impl Into<String>) -> Self {
        CallError {
            retryable: false,
            outcome: Outcome::Neutral,
            retry_after: None,
            status: None,
            problem: problem.into(),
        }
    }
    fn transient(problem: impl Into<String>) -> Self {
        CallError {
            retryable: true,
            outcome: Outcome::Failed,
            retry_after: None,
            status: None,
            problem: problem.into(),
        }
    }
}

/// The `/v1` base of an endpoint URL, or why it is not one.
pub fn endpoint_base(url: &str) -> Result<String> {
    let trimmed = url.trim().trim_end_matches('/');
    if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) || trimmed.len() <= "https://".len() {
        return Err(InferError::Request(format!(
            "--endpoint `{}` is not an http(s) URL; fix: give the server's base URL, e.g. http://127.0.0.1:8000 or http://host:8000/v1",
            redact_secrets(url, &[])
        )));
    }
    let without =
        trimmed.strip_suffix("/chat/completions").or_else(|| trimmed.strip_suffix("/completions")).unwrap_or(trimmed);
    Ok(if without.ends_with("/v1") { without.to_owned() } else { format!("{without}/v1") })
}

impl OpenAiBackend {
    /// `renderer` is needed for [`ScoreApi::Completions`] only.
    pub fn new(model: ServedModel, options: OpenAiOptions, renderer: Option<PromptRenderer>) -> Result<Self> {
        if options.endpoints.is_empty() {
            return Err(InferError::Request("the openai backend needs at least one --endpoint URL".into()));
        }
        let bases = options.endpoints.iter().map(|e| endpoint_base(e)).collect::<Result<Vec<_>>>()?;
        let wire = Wire::new(&options, &model.alias, renderer)?;
        if options.max_reply_bytes == 0 {
            return Err(InferError::Request("max_reply_bytes (--max-reply-mb) must be more than 0".into()));
        }
        let api_key = std::env::var(&options.api_key_env).ok().filter(|k| !k.is_empty());
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(options.request_timeout))
            .http_status_as_error(false)
            // No redirect is followed: the request, its key and the prompts would go to wherever the
            // server points (another host); a 3xx is an error naming the place and the fix.
            .max_redirects(0)
            .max_idle_connections_per_host(options.max_in_flight.max(1))
            .max_idle_connections(options.max_in_flight.max(1) * bases.len())
            .build()
            .into();
        let names = bases.iter().map(|b| redact_secrets(b, &[])).collect();
        let pool = EndpointPool::new(names, options.max_in_flight, options.adaptive);
        Ok(OpenAiBackend {
            model,
            options,
            bases,
            api_key,
            agent,
            pool,
            large_replies: body::LargeReplies::new(),
            json_object_only: AtomicBool::new(false),
            wire,
            requests: AtomicUsize::new(0),
        })
    }

    pub fn options(&self) -> &OpenAiOptions {
        &self.options
    }

    /// `text` without the API key, bearer tokens, key-like tokens and URL credentials
    /// ([`redact_secrets`]): every text from a server or naming an endpoint goes through this before it
    /// leaves the backend.
    pub fn redact(&self, text: &str) -> String {
        redact_secrets(text, &self.api_key.as_deref().into_iter().collect::<Vec<_>>())
    }

    /// HTTP requests sent so far, retries included.
    pub fn requests_sent(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    fn post_once(&self, base: &str, path: &str, body: &[u8]) -> std::result::Result<Value, CallError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let url = format!("{base}{path}");
        let mut request = self.agent.post(&url).header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let mut response = match request.send(body) {
            Ok(r) => r,
            // A timeout: the server is slower than asked, likely overloaded.
            Err(e @ ureq::Error::Timeout(_)) => {
                let problem = self.redact(&format!("{url}: {e}"));
                return Err(CallError { outcome: Outcome::Overloaded(None), ..CallError::transient(problem) });
            }
            // Connection refused or reset, broken transfers: the server may come back.
            Err(e) => return Err(CallError::transient(self.redact(&format!("{url}: {e}")))),
        };
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("nowhere");
            return Err(CallError {
                retryable: false,
                outcome: Outcome::Neutral,
                retry_after: None,
                status: Some(status),
                problem: self.redact(&format!(
                    "{url}: HTTP {status}: the server redirects to {location}; herd follows no redirect from an inference server (the request and its key would go there); fix: give the address the server names as --endpoint if you trust it"
                )),
            });
        }
        let retry_after =
            response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(retry_after_delay);
        let limit = self.options.max_reply_bytes;
        // One byte over the limit is read so that a longer reply is told from one of exactly the limit.
        let reader = response.body_mut().with_config().limit(limit.saturating_add(1)).reader();
        let text = match body::read_body(reader, limit, &self.large_replies) {
            Ok(t) => t,
            // Not retried: a server that sends this much once (a runaway reasoning text) will again, and
            // each try would cost the transfer.
            Err(body::BodyError::OverLimit) => {
                return Err(CallError {
                    retryable: false,
                    outcome: Outcome::Neutral,
                    retry_after: None,
                    status: Some(status),
                    problem: format!(
                        "{}: HTTP {status}: the reply is longer than {}, the most herd reads of one reply; fix: raise --max-reply-mb if such replies are expected, or limit the server's output (max_tokens)",
                        self.redact(&url),
                        megabytes(limit, "--max-reply-mb")
                    ),
                });
            }
            Err(body::BodyError::Unreadable(e)) => {
                return Err(CallError {
                    retryable: true,
                    outcome: Outcome::Failed,
                    retry_after,
                    status: Some(status),
                    problem: self.redact(&format!("{url}: HTTP {status}, body unreadable: {e}")),
                });
            }
        };
        // llama-cpp-python answers a request it cannot validate with a 500 that names the field; asking
        // again would not help.
        let rejected_request = status >= 500 && text.contains("validation error");
        if (status == 429 || status == 408 || status >= 500) && !rejected_request {
            // 429, 503 and 408 say the server has more than it can take; other 5xx that it is failing.
            let outcome =
                if matches!(status, 429 | 503 | 408) { Outcome::Overloaded(retry_after) } else { Outcome::Failed };
            return Err(CallError {
                retryable: true,
                outcome,
                retry_after,
                status: Some(status),
                problem: format!("{}: HTTP {status}: {}", self.redact(&url), excerpt(&self.redact(&text))),
            });
        }
        if !(200..300).contains(&status) {
            return Err(CallError {
                retryable: false,
                outcome: Outcome::Neutral,
                retry_after: None,
                status: Some(status),
                problem: format!("{}: HTTP {status}: {}", self.redact(&url), excerpt(&self.redact(&text))),
            });
        }
        // A body cut short or mangled in transit is worth asking for again.
        parse_reply(&text).map_err(|e| {
            CallError::transient(format!(
                "{}: HTTP {status} with a body that is not JSON ({e}): {}",
                self.redact(&url),
                excerpt(&self.redact(&text))
            ))
        })
    }

    /// Posts `body` to `path` on an endpoint the pool chooses (the group's, by `affinity`, while it has room),
    /// retrying what may succeed later, and hands the reply to `read`, whose [`Refusal::Bad`] of a 2xx
    /// body is retried too (a server under load can return a truncated or empty choice) and whose
    /// [`Refusal::OverLimit`] is not.
    fn call<T>(
        &self,
        path: &str,
        body: &Value,
        affinity: &Affinity,
        read: impl Fn(&Value) -> std::result::Result<T, Refusal>,
    ) -> std::result::Result<T, CallError> {
        let bytes = serde_json::to_vec(body).map_err(|e| CallError::fatal(format!("encoding the request: {e}")))?;
        let policy = &self.options.retry;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(jitter_seed());
        let (mut last, mut last_endpoint) = (None, None);
        for attempt in 0..policy.max_attempts.max(1) {
            let slot = self.pool.acquire(affinity, last_endpoint);
            last_endpoint = Some(slot.endpoint);
            let base = &self.bases[slot.endpoint];
            let attempt_result = self.post_once(base, path, &bytes);
            let error = match attempt_result {
                Ok(reply) => match read(&reply) {
                    Ok(value) => {
                        self.pool.finish(slot, Outcome::Answered);
                        return Ok(value);
                    }
                    // Redacted whole before the excerpt, which could cut a key in two.
                    Err(Refusal::Bad(problem)) => CallError::transient(self.redact(&format!(
                        "{base}{path}: unexpected reply ({problem}): {}",
                        excerpt(&self.redact(&reply.to_string()))
                    ))),
                    // No excerpt: the part that broke the limit is the reply's bulk.
                    Err(Refusal::OverLimit(problem)) => {
                        CallError::fatal(self.redact(&format!("{base}{path}: {problem}")))
                    }
                },
                Err(e) => e,
            };
            self.pool.finish(slot, error.outcome);
            if !error.retryable || attempt + 1 == policy.max_attempts {
                return Err(error);
            }
            let ceiling = policy.base_delay.saturating_mul(1 << attempt.min(20)).min(policy.max_delay);
            // Full jitter: clients that failed together do not come back together.
            let pause = error
                .retry_after
                .map_or_else(|| ceiling.mul_f64(rng.random_range(0.0..1.0)), |d| d.min(policy.max_delay));
            std::thread::sleep(pause);
            last = Some(error);
        }
        Err(last.unwrap_or_else(|| CallError::fatal("no attempt was made")))
    }

    /// What the endpoints are doing: their limits, peaks and load (the run manifest records them).
    pub fn endpoint_load(&self) -> BackendLoad {
        self.pool.load()
    }

    fn server_error(&self, what: &str, e: CallError) -> InferError {
        let attempts =
            if e.retryable { format!(" after {} attempts", self.options.retry.max_attempts) } else { String::new() };
        let fix = match e.status {
            Some(401 | 403) => format!("; fix: set the API key in ${}", self.options.api_key_env),
            Some(404) => format!(
                "; fix: check the endpoint URL and that the server serves `{}` (--served-model)",
                self.options.served_model
            ),
            _ => String::new(),
        };
        InferError::Server(self.redact(&format!("{what} failed{attempts}: {}{fix}", e.problem)))
    }

    fn score_one(&self, request: &ScoreRequest, affinity: &Affinity) -> Result<ScoreResult> {
        let (path, body) = self.wire.score_request(request)?;
        self.call(path, &body, affinity, |reply| self.wire.read_score(reply, &request.answers))
            .map_err(|e| self.server_error("scoring", e))
    }

    /// A generation with the API key taken out of its texts: a server that echoes it into a reply must not
    /// have it stored. (Only the key itself: a model's text is data, so the token patterns are left.)
    fn generate_one(&self, request: &GenerateRequest, affinity: &Affinity) -> Result<Generation> {
        let mut g = self.generate_raw(request, affinity)?;
        if let Some(key) = self.api_key.as_deref().filter(|k| k.len() >= 4) {
            for text in std::iter::once(&mut g.text).chain(g.reasoning.as_mut()) {
                if text.contains(key) {
                    *text = text.replace(key, crate::redact::REDACTED);
                }
            }
        }
        Ok(g)
    }

    fn generate_raw(&self, request: &GenerateRequest, affinity: &Affinity) -> Result<Generation> {
        let mut body = self.wire.generate_request(request)?;
        let read = |reply: &Value| self.wire.read_generation(reply);
        let Some(schema) = &request.schema else {
            return self
                .call(CHAT_PATH, &body, affinity, read)
                .map_err(|e| self.server_error("generation", e))
                .map(|g| with_constraint(g, false));
        };
        if !self.json_object_only.load(Ordering::Relaxed)
            && self.options.structured_output == StructuredOutput::JsonSchema
        {
            body["response_format"] = response_format(schema, StructuredOutput::JsonSchema);
            match self.call(CHAT_PATH, &body, affinity, read) {
                Ok(g) => return Ok(with_constraint(g, true)),
                // A server that does not know `json_schema` refuses the request (a 4xx, or llama-cpp-python's
                // 500 naming `response_format`); ask it the other way.
                Err(e)
                    if !e.retryable
                        && (matches!(e.status, Some(400 | 422)) || e.problem.contains("response_format")) =>
                {
                    self.json_object_only.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(self.server_error("generation", e)),
            }
        }
        body["response_format"] = response_format(schema, StructuredOutput::JsonObject);
        self.call(CHAT_PATH, &body, affinity, read)
            .map_err(|e| self.server_error("generation", e))
            .map(|g| with_constraint(g, true))
    }
}

fn with_constraint(mut g: Generation, constrained: bool) -> Generation {
    g.constrained = constrained;
    g
}

/// Backoff jitter only spreads clients apart in time; it never reaches a result, so it may come from the clock.
fn jitter_seed() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

fn excerpt(text: &str) -> String {
    const LIMIT: usize = 300;
    let text = text.trim();
    if text.len() <= LIMIT {
        return text.to_owned();
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

impl Backend for OpenAiBackend {
    fn score(&mut self, group: &[ScoreRequest]) -> herd_backend::Result<Vec<ScoreResult>> {
        let affinity = Affinity::new();
        Ok(self.all(group, |r| self.score_one(r, &affinity))?)
    }

    fn generate(&mut self, batch: &[GenerateRequest]) -> herd_backend::Result<Vec<Generation>> {
        let affinity = Affinity::new();
        Ok(self.all(batch, |r| self.generate_one(r, &affinity))?)
    }

    fn shared(&self) -> Option<&dyn SharedBackend> {
        Some(self)
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            backend: "openai".into(),
            model: self.model.alias.clone(),
            family: self.model.family.clone(),
            device: self.redact(&format!("remote: {}", self.bases.join(", "))),
            vision: self.model.vision,
            compute: served_compute(),
        }
    }
}

/// How a served model's numbers are computed, as far as herd knows: the server's hardware, kernels and
/// weights are its own (and its /v1/models says little). Live and batch sessions record the same.
fn served_compute() -> herd_backend::ComputePath {
    herd_backend::ComputePath::elsewhere("server", "the server's")
}

/// A `Retry-After` header's delay in seconds. The server is adversarial input: a value that is not a
/// non-negative finite number (`NaN`, `inf`, `-3`, an HTTP date) is ignored, so the client's own backoff
/// applies; a huge one is cut to 600 s here (and to the retry policy's `max_delay` where it is used).
pub(crate) fn retry_after_delay(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(seconds.min(600.0)))
}

#[cfg(test)]
mod tests {

    #[test]
    fn retry_after_ignores_what_is_not_a_delay_and_caps_the_rest() {
        assert_eq!(super::retry_after_delay(" 2.5 "), Some(Duration::from_millis(2500)));
        assert_eq!(super::retry_after_delay("1e300"), Some(Duration::from_secs(600)));
        for bad in ["NaN", "nan", "inf", "-inf", "-3", "", "Wed, 21 Oct 2026 07:28:00 GMT"] {
            assert_eq!(super::retry_after_delay(bad), None, "{bad}");
        }
    }

    use super::*;

    #[test]
    fn endpoint_bases_accept_the_usual_spellings() {
        for url in [
            "http://127.0.0.1:8000",
            "http://127.0.0.1:8000/",
            "http://127.0.0.1:8000/v1",
            "http://127.0.0.1:8000/v1/chat/completions",
        ] {
            assert_eq!(endpoint_base(url).unwrap(), "http://127.0.0.1:8000/v1", "{url}");
        }
        assert!(endpoint_base("127.0.0.1:8000").is_err());
        assert!(endpoint_base("ftp://x").is_err());
    }
}
