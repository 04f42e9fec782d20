//! What the runner asks of a model, whatever runs it.

use crate::sim::TrialFacts;
use herd_prompts::ChatPrompt;
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
    /// What the trial is, for simulated agents.
    pub facts: Option<TrialFacts>,
}

impl ScoreRequest {
    pub fn new(prompt: ChatPrompt, answers: Vec<String>) -> Self {
        ScoreRequest { prompt, answers, image: None, facts: None }
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
    /// True when no spelling of the answer was among a server's returned top-k: `p` is then an upper
    /// bound (the probability the server left out) and `logit` its log.
    pub bound: bool,
}

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

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SamplingParams {
    /// 0 samples greedily.
    pub temperature: f64,
    /// Nucleus size; 1 keeps every token.
    pub top_p: f64,
    /// 0 keeps every token.
    pub top_k: usize,
    pub seed: u64,
    pub max_tokens: usize,
    /// Generation stops before the first occurrence of any of these.
    pub stop: Vec<String>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 0.7, top_p: 1.0, top_k: 0, seed: 0, max_tokens: 512, stop: Vec::new() }
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
    /// What the trial is, for simulated agents.
    pub facts: Option<TrialFacts>,
}

impl GenerateRequest {
    pub fn new(prompt: ChatPrompt, sampling: SamplingParams) -> Self {
        GenerateRequest { prompt, sampling, schema: None, image: None, thinking: None, facts: None }
    }
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
}

/// A model that can be scored and sampled.
pub trait Backend {
    /// Scores a group of requests. Requests that share a leading part of their rendered prompt (the same
    /// image and question with different confederate replies) should share its computation.
    fn score(&mut self, group: &[ScoreRequest]) -> crate::Result<Vec<ScoreResult>>;
    /// Samples one completion per request; a batch is decoded together where the backend can.
    fn generate(&mut self, batch: &[GenerateRequest]) -> crate::Result<Vec<Generation>>;
    fn info(&self) -> BackendInfo;
}

/// The JSON schema of an allocation: an object whose keys are exactly `ids` (in order), each an
/// integer in `0..=pool`.
pub fn allocation_schema(ids: &[String], pool: u32) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> = ids.iter().map(|id| (id.clone(), serde_json::json!({"type": "integer", "minimum": 0, "maximum": pool}))).collect();
    serde_json::json!({"type": "object", "properties": properties, "required": ids, "additionalProperties": false})
}
