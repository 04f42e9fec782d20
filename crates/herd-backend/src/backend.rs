//! What the runner asks of a model, whatever runs it: the [`Backend`] trait and its requests and results.

use crate::chat::ChatPrompt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Read the next-token distribution at the answer position.
#[derive(Clone, Debug)]
pub struct ScoreRequest {
    pub prompt: ChatPrompt,
    /// The answer strings whose probability is read ("A", "B").
    pub answers: Vec<String>,
    /// The pixels of the prompt's image part, for vision models.
    pub image: Option<Arc<image::RgbImage>>,
    /// The request's name in its run ([`request_name`]: its unit and its place among the unit's
    /// requests), which the runner sets. A backend that answers later by name (a batch file's
    /// `custom_id`) keys the request by it; the others ignore it.
    pub name: Option<String>,
}

impl ScoreRequest {
    pub fn new(prompt: ChatPrompt, answers: Vec<String>) -> Self {
        ScoreRequest { prompt, answers, image: None, name: None }
    }
}

/// One answer's share of the next-token distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnswerScore {
    /// Sum of the full-vocabulary softmax probability of every token whose text, stripped of leading
    /// whitespace, equals the answer.
    pub p: f64,
    /// The highest logit among those tokens.
    pub logit: f32,
    pub token_ids: Vec<u32>,
    /// Whether `p` is exact or only a bound (a server returned its top-k tokens, not the vocabulary).
    pub bound: ScoreBound,
}

/// How far an answer's probability can be trusted when only a server's top-k tokens are known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreBound {
    /// Every spelling's probability is known (local backends: the whole vocabulary).
    #[default]
    Exact,
    /// No spelling of the answer was returned: `p` is the probability the server left out, an upper
    /// bound, and `logit` its log.
    Upper,
    /// Some spellings were returned and another (` A` beside `A`) was not, though it could carry at
    /// least [`LOWER_BOUND_MIN`] of probability: `p` is a lower bound.
    Lower,
}

impl ScoreBound {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "",
            Self::Upper => "upper",
            Self::Lower => "lower",
        }
    }

    pub fn is_bound(self) -> bool {
        self != Self::Exact
    }
}

/// The probability a missing spelling must be able to carry (at most the smallest returned
/// probability and at most the mass the server left out) for the answer's sum to count as a lower
/// bound. Below it the missing spelling moves the trial's p_wrong by less than 0.01, under the
/// sampling error of any cell mean (64 trials per N give SEs of 0.02 and more); above it the trial is
/// left out. A chat API's top 20 rarely lists both `A` and ` A`, so a tighter rule would leave out
/// most trials on the strength of a bound that is far from the truth.
pub const LOWER_BOUND_MIN: f64 = 0.01;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopToken {
    /// `None` where a server returns token texts only.
    pub id: Option<u32>,
    pub text: String,
    pub p: f64,
    pub logit: f32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScoreResult {
    pub answers: BTreeMap<String, AnswerScore>,
    /// Probability mass on all answers together.
    pub mass: f64,
    /// The most probable next tokens, most probable first.
    pub top: Vec<TopToken>,
    pub prompt_tokens: usize,
    /// Leading tokens whose computation was shared with other requests of the same group.
    pub reused_tokens: usize,
}

/// How one sequence is sampled. A knob left `None` takes the backend's default: HF `generate`'s for the
/// local backends (temperature 1, top_p 1, top_k 50, repetition penalty 1; see [`crate::HF_DEFAULT_TOP_K`] and its
/// siblings),
/// the server's own for the openai backend (nothing is sent). Callers that want a model's
/// generation_config.json resolve it first (`resolve_sampling`).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SamplingParams {
    /// 0 samples greedily.
    pub temperature: Option<f64>,
    /// Nucleus size; 1 keeps every token.
    pub top_p: Option<f64>,
    /// 0 keeps every token.
    pub top_k: Option<usize>,
    /// HF's repetition penalty: every token id already in the prompt or the output has its logit divided by
    /// it (multiplied where negative); 1 is none.
    pub repetition_penalty: Option<f64>,
    pub seed: u64,
    pub max_tokens: usize,
    /// Generation stops before the first occurrence of any of these.
    pub stop: Vec<String>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: Some(0.7),
            top_p: Some(1.0),
            top_k: Some(0),
            repetition_penalty: None,
            seed: 0,
            max_tokens: 512,
            stop: Vec::new(),
        }
    }
}

/// Sampled text, optionally constrained to a JSON schema.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    pub prompt: ChatPrompt,
    pub sampling: SamplingParams,
    /// A JSON schema the output must match (allocations: keys exactly the roster ids, integer values).
    pub schema: Option<serde_json::Value>,
    /// The pixels of the prompt's image part, for vision models.
    pub image: Option<Arc<image::RgbImage>>,
    /// Thinking on or off for models whose chat template has the switch (`enable_thinking`); `None`
    /// keeps the registry entry's setting.
    pub thinking: Option<bool>,
    /// The request's name in its run ([`request_name`]), as for [`ScoreRequest::name`].
    pub name: Option<String>,
}

impl GenerateRequest {
    pub fn new(prompt: ChatPrompt, sampling: SamplingParams) -> Self {
        GenerateRequest { prompt, sampling, schema: None, image: None, thinking: None, name: None }
    }
}

/// A request's name in its run, `unit@index`: the unit it belongs to (what the store commits together)
/// and its place among that unit's requests. A batch file's `custom_id` is this name, so an answer maps
/// back to exactly one request.
pub fn request_name(unit: &str, index: usize) -> String {
    format!("{unit}@{index}")
}

/// The unit and index of a [`request_name`], or `None` for a text that is not one.
pub fn parse_request_name(name: &str) -> Option<(&str, usize)> {
    let (unit, index) = name.rsplit_once('@')?;
    if unit.is_empty() || index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((unit, index.parse().ok()?))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model emitted an end-of-sequence token (or the constraint completed).
    Eos,
    /// A stop string was produced (and cut from the text).
    Stop,
    /// `max_tokens` was reached.
    Length,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub finish_reason: FinishReason,
    pub constrained: bool,
    /// Reasoning a server returned apart from the answer (`reasoning_content`); local models keep it
    /// in `text`.
    pub reasoning: Option<String>,
}

/// Facts about a backend recorded in run manifests.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackendInfo {
    pub backend: String,
    pub model: String,
    pub family: String,
    pub device: String,
    pub vision: bool,
    /// What the numbers are computed with (device, instructions, weights, dtype, herd version).
    pub compute: crate::ComputePath,
}

/// A model that can be scored and sampled. Implemented by herd-infer's engines (local candle models,
/// vision models, OpenAI-compatible servers); an engine's own errors come back boxed in
/// [`crate::BackendError::Engine`].
pub trait Backend {
    /// Scores a group of requests. Requests that share a leading part of their rendered prompt (the same
    /// image and question with different confederate replies) should share its computation.
    fn score(&mut self, group: &[ScoreRequest]) -> crate::Result<Vec<ScoreResult>>;
    /// Samples one completion per request; a batch is decoded together where the backend can.
    fn generate(&mut self, batch: &[GenerateRequest]) -> crate::Result<Vec<Generation>>;
    fn info(&self) -> BackendInfo;
    /// The backend as a [`SharedBackend`], when it takes requests from many threads at once (a pool of
    /// servers); `None` (the default: local models, which compute one batch at a time) keeps the runner
    /// to one batch in flight.
    fn shared(&self) -> Option<&dyn SharedBackend> {
        None
    }
    /// The backend as a [`BatchFile`], when it answers from a batch file instead of servers; `None` (the
    /// default) for every engine that computes or asks at once.
    fn batch_file(&self) -> Option<&dyn BatchFile> {
        None
    }
}

/// A backend that answers from a batch file rather than at once: the openai backend's requests written
/// to a JSONL file for an offline run (`vllm run-batch`, a hosted Batch API), and that run's answers read
/// back later. Requests are matched to answers by name ([`request_name`], the file's `custom_id`).
///
/// Through the [`SharedBackend`] calls, a request whose unit has every answer in the file gets its
/// result, checked as a live reply would be; a request whose unit lacks an answer fails with
/// [`crate::BackendError::Pending`] (and is written to the export file, when there is one), which the runner
/// counts as awaiting answers, not as failed. A unit is answered whole or not at all: the requests of one
/// call that share a unit are its requests. The runner hands such a backend one batch at a time in plan
/// order, so the file lists requests in that order, and never stops on failures (each is named).
pub trait BatchFile: SharedBackend {
    /// Ends the session's use of the file (the export is written out) and says what the file gave and
    /// took; `standing` places each unit whose answers the session did not ask for.
    fn finish(&self, standing: &dyn Fn(&str) -> UnitStanding) -> crate::Result<BatchReport>;
}

/// Where a unit named by an answer the session did not ask for stands in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitStanding {
    /// Stored already (an earlier import, or a live session).
    Stored,
    /// In the run's plan, but not run this session (beyond `--limit`, a baseline candidate the pools did
    /// not need, a trial waiting for its task's baseline pools).
    Planned,
    /// Not a unit of this run (another experiment's, another shard's, or not a name herd writes).
    Unknown,
}

/// What a session did with its batch files, for the run manifest and the closing summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BatchReport {
    /// The model name the requests ask for (`--served-model`): what the offline run must serve.
    pub model: String,
    /// The file answers were read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<BatchFileRecord>,
    /// The file the requests still without answers were written to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<BatchFileRecord>,
    /// Requests written to the export file.
    pub requests_written: u64,
    /// Answers of the import file (its lines with a custom id).
    pub answers: u64,
    /// Answers taken: each passed every check a live reply passes, and its unit was whole.
    pub answers_taken: u64,
    /// Answers whose unit is stored already (an earlier import): left alone.
    pub answers_already_stored: u64,
    /// Answers for units of the plan the session did not run (see [`UnitStanding::Planned`]).
    pub answers_not_needed: u64,
    /// Every problem, each naming its custom id or line: answers refused by the checks, units with some
    /// answers missing, custom ids given twice or unknown, unreadable lines. At most
    /// [`BatchReport::MAX_PROBLEMS`] are kept; `problem_count` counts them all.
    pub problems: Vec<String>,
    pub problem_count: u64,
}

impl BatchReport {
    /// Problems kept by name (the rest are counted).
    pub const MAX_PROBLEMS: usize = 200;

    pub fn problem(&mut self, problem: String) {
        self.problem_count += 1;
        if self.problems.len() < Self::MAX_PROBLEMS {
            self.problems.push(problem);
        }
    }
}

/// A batch file as the manifest records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BatchFileRecord {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// A backend that many threads may call at once, so that the runner keeps many batches in flight and
/// commits each as it completes.
///
/// Why a `&self` handle beside [`Backend`] rather than a `&mut self` method taking many groups: such a
/// method returns when its slowest group does, so a run would still wait for the slowest group of each
/// wave, and the runner could neither commit a group as it completes nor draw the next from the plan as
/// a slot frees. With a handle each in-flight batch is one call on its own thread; the backend bounds
/// what actually reaches the servers (its per-endpoint concurrency), so the runner need only keep
/// [`SharedBackend::request_slots`] requests waiting on it.
///
/// Results come per request: one failed request fails its own unit only (a conformity trial), or the
/// society it belongs to; the other requests of the call still count.
pub trait SharedBackend: Send + Sync {
    /// Scores a group of requests that share a prompt prefix (one image's trials), so the backend may send
    /// them to one server whose prefix cache then hits. `results[i]` is `group[i]`'s.
    fn score_each(&self, group: &[ScoreRequest]) -> Vec<crate::Result<ScoreResult>>;
    /// Samples one completion per request of a batch that shares a prompt prefix (a society's deciders).
    fn generate_each(&self, batch: &[GenerateRequest]) -> Vec<crate::Result<Generation>>;
    /// How many requests the runner should keep in flight through this backend now: enough to keep every
    /// endpoint at its concurrency (and let it grow), few enough that memory stays bounded. At least 1.
    fn request_slots(&self) -> usize;
    /// What the backend is doing now, for the progress display and the run manifest.
    fn load(&self) -> BackendLoad;
}

/// A snapshot of a [`SharedBackend`]'s traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BackendLoad {
    /// Requests sent and not yet answered, over every endpoint.
    pub in_flight: usize,
    /// Requests answered (successfully or not) since the backend was built, retries included.
    pub completed: u64,
    pub endpoints: Vec<EndpointLoad>,
}

/// One endpoint's part of a [`BackendLoad`]; the run manifest records these.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EndpointLoad {
    /// The endpoint's base URL, credentials removed.
    pub endpoint: String,
    /// Requests it may have in flight now (its adaptive concurrency limit).
    pub limit: usize,
    /// The highest limit it reached.
    pub peak_limit: usize,
    /// The most requests it actually had in flight at once.
    pub peak_in_flight: usize,
    pub in_flight: usize,
    /// Requests it answered successfully.
    pub succeeded: u64,
    /// Attempts that failed on it (each retry counts).
    pub failed: u64,
    /// Times it was set aside after failing again and again (retried after a pause).
    pub set_aside: u64,
}

/// The JSON schema of an allocation: an object whose keys are exactly `ids` (in order), each an
/// integer in `0..=pool`.
pub fn allocation_schema(ids: &[String], pool: u32) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> = ids
        .iter()
        .map(|id| (id.clone(), serde_json::json!({"type": "integer", "minimum": 0, "maximum": pool})))
        .collect();
    serde_json::json!({"type": "object", "properties": properties, "required": ids, "additionalProperties": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_name_is_its_unit_and_index_and_reads_back() {
        let unit = "allocation/reasoning=off/m=5/labels=visible#3.0";
        let name = request_name(unit, 17);
        assert_eq!(name, format!("{unit}@17"));
        assert_eq!(parse_request_name(&name), Some((unit, 17)));
        // A unit id holding `@` still reads back: the index is after the last one.
        assert_eq!(parse_request_name("a@b@2"), Some(("a@b", 2)));
        for bad in ["", "@1", "unit", "unit@", "unit@x", "unit@-1", "unit@+1", "unit@99999999999999999999999"] {
            assert_eq!(parse_request_name(bad), None, "{bad}");
        }
    }
}
