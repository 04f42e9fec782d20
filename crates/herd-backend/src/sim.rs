//! A simulated agent with stated parameters: the `sim` backend. It answers from what each trial is (its
//! [`ConformityFacts`] or [`AllocationFacts`], which the runner hands it beside the requests through
//! [`SimBackend`]) rather than from the prompt, so its effects are known exactly. It serves power analysis
//! and the end-to-end tests that must recover planted effects (and find none where none was planted).
//! The [`Backend`](crate::Backend) contract knows nothing of it.
//!
//! Conformity: `logit P(wrong) = intercept + per_log_wrong·ln(1 + wrong replies) + per_log_right·ln(1 +
//! right replies) + difficulty·d + level_shift[level] + ε`, ε ~ N(0, noise_sd²) per trial, d ∈ [0, 1] the
//! image's normalised difficulty. Allocation: each target's weight is `exp(bias·same_group + ε)`, bias the
//! in-group weight of the decider's group (0 when labels are hidden), ε ~ N(0, noise_sd²); points are the
//! pool split in proportion, rounded to integers by largest remainder and written as a JSON object.

use crate::backend::{
    AnswerScore, BackendInfo, FinishReason, GenerateRequest, Generation, ScoreBound, ScoreRequest, ScoreResult,
};
use crate::error::{BackendError, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// What a conformity trial is, stated for simulated agents (real models read only the prompt).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConformityFacts {
    /// Identifies the trial; the agent's noise is drawn from a stream keyed by it.
    pub key: String,
    pub correct: String,
    pub wrong: String,
    pub wrong_replies: u32,
    pub right_replies: u32,
    /// The image's difficulty normalised to [0, 1] (0 for the general pool).
    pub difficulty: f64,
    pub level: Option<String>,
}

/// What one decider's allocation is, stated for simulated agents.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocationFacts {
    pub key: String,
    /// Roster ids in the order shown, and whether each target shares the decider's group.
    pub roster: Vec<String>,
    pub same_group: Vec<bool>,
    pub labels_visible: bool,
    pub minority_decider: bool,
    pub pool: u32,
}

/// The conformity curve of a simulated agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConformity {
    pub intercept: f64,
    pub per_log_wrong: f64,
    pub per_log_right: f64,
    pub difficulty: f64,
    /// Added to the logit at these condition levels (public, scientists, same, near, …).
    pub level_shift: BTreeMap<String, f64>,
    pub noise_sd: f64,
}

impl Default for SimConformity {
    fn default() -> Self {
        let level_shift = [
            ("public", 0.4),
            ("scientists", 0.5),
            ("judges", 0.3),
            ("kids", -0.5),
            ("chatbots", -0.3),
            ("same", 0.4),
            ("near", 0.3),
        ];
        SimConformity {
            intercept: -4.5,
            per_log_wrong: 1.8,
            per_log_right: -1.0,
            difficulty: 1.5,
            level_shift: level_shift.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            noise_sd: 0.5,
        }
    }
}

/// The allocation behaviour of a simulated agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimAllocation {
    /// Log-weight added to in-group targets by a minority decider (labels visible).
    pub ingroup_minority: f64,
    /// The same for a majority decider.
    pub ingroup_majority: f64,
    pub noise_sd: f64,
}

impl Default for SimAllocation {
    fn default() -> Self {
        SimAllocation { ingroup_minority: 0.6, ingroup_majority: 0.2, noise_sd: 0.5 }
    }
}

/// Every parameter of a simulated agent (`--sim FILE` takes them as TOML).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimParams {
    pub conformity: SimConformity,
    pub allocation: SimAllocation,
    /// Keys the agent's noise, with each trial's key.
    pub seed: u64,
}

/// The largest magnitude of a log-weight or logit term: e^50 already gives every point to the favoured
/// targets (and p_wrong within 2e-22 of 0 or 1), and with noise of at most [`MAX_NOISE_SD`] the
/// exponent stays far from where `exp` overflows (709.8, where weights became infinite and shares NaN).
pub const MAX_LOG_EFFECT: f64 = 50.0;

/// The largest noise standard deviation (on the logit and log-weight scale).
pub const MAX_NOISE_SD: f64 = 10.0;

/// A sim parameter outside the range the agent's formulas are defined on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("sim parameter `{key}` = {value} is out of range: {allowed}")]
pub struct SimParamError {
    /// Dotted key as in a `--sim` file, e.g. `allocation.ingroup_minority`.
    pub key: String,
    pub value: f64,
    /// The allowed range, as a fix: `use a value in [-50, 50] …`.
    pub allowed: String,
}

impl SimParams {
    /// Every parameter finite and in its range; the first that is not, by key. Checked where
    /// parameters come in (`--sim`, `herd power --effect`) and before the agent answers, so an
    /// out-of-range value is an error, never uniform allocations or p_wrong = NaN.
    pub fn validate(&self) -> std::result::Result<(), SimParamError> {
        let effect = |key: String, value: f64| {
            if value.is_finite() && value.abs() <= MAX_LOG_EFFECT {
                return Ok(());
            }
            let allowed = format!(
                "use a finite value in [-{MAX_LOG_EFFECT}, {MAX_LOG_EFFECT}] (a logit or log-weight; ±{MAX_LOG_EFFECT} already saturates the effect)"
            );
            Err(SimParamError { key, value, allowed })
        };
        let noise = |key: &str, value: f64| {
            if value.is_finite() && (0.0..=MAX_NOISE_SD).contains(&value) {
                return Ok(());
            }
            let allowed = format!("use a standard deviation in [0, {MAX_NOISE_SD}]");
            Err(SimParamError { key: key.to_owned(), value, allowed })
        };
        let c = &self.conformity;
        for (key, value) in [
            ("intercept", c.intercept),
            ("per_log_wrong", c.per_log_wrong),
            ("per_log_right", c.per_log_right),
            ("difficulty", c.difficulty),
        ] {
            effect(format!("conformity.{key}"), value)?;
        }
        for (level, &value) in &c.level_shift {
            effect(format!("conformity.level_shift.{level}"), value)?;
        }
        noise("conformity.noise_sd", c.noise_sd)?;
        let a = &self.allocation;
        effect("allocation.ingroup_minority".into(), a.ingroup_minority)?;
        effect("allocation.ingroup_majority".into(), a.ingroup_majority)?;
        noise("allocation.noise_sd", a.noise_sd)
    }

    /// The logit of P(wrong) before noise.
    pub fn conformity_logit(&self, facts: &ConformityFacts) -> f64 {
        let c = &self.conformity;
        let shift = facts.level.as_ref().and_then(|l| c.level_shift.get(l)).copied().unwrap_or(0.0);
        c.intercept
            + c.per_log_wrong * f64::from(facts.wrong_replies).ln_1p()
            + c.per_log_right * f64::from(facts.right_replies).ln_1p()
            + c.difficulty * facts.difficulty
            + shift
    }

    /// The in-group log-weight a decider applies.
    pub fn ingroup_bias(&self, minority_decider: bool, labels_visible: bool) -> f64 {
        match (labels_visible, minority_decider) {
            (false, _) => 0.0,
            (true, true) => self.allocation.ingroup_minority,
            (true, false) => self.allocation.ingroup_majority,
        }
    }

    /// A seeded stream per trial key, so a trial's answer does not depend on batch order or sharding.
    fn rng(&self, key: &str, purpose: &str) -> ChaCha20Rng {
        let mut hash = Sha256::new();
        for part in [self.seed.to_string().as_str(), key, purpose] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        ChaCha20Rng::from_seed(hash.finalize().into())
    }

    /// The points one decider gives, before rounding.
    pub fn allocation_shares(&self, facts: &AllocationFacts) -> Vec<f64> {
        let mut rng = self.rng(&facts.key, "allocation");
        let bias = self.ingroup_bias(facts.minority_decider, facts.labels_visible);
        let weights: Vec<f64> = facts
            .same_group
            .iter()
            .map(|&same| {
                (bias * f64::from(u8::from(same)) + self.allocation.noise_sd * standard_normal(&mut rng)).exp()
            })
            .collect();
        let total: f64 = weights.iter().sum();
        weights.iter().map(|w| f64::from(facts.pool) * w / total).collect()
    }
}

/// Box–Muller; one draw per call keeps the stream's use simple to follow.
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Integers summing to `pool`, by largest remainder (ties to the earlier target).
fn largest_remainder(shares: &[f64], pool: u32) -> Vec<u32> {
    let mut points: Vec<u32> = shares.iter().map(|s| s.floor() as u32).collect();
    let left = pool.saturating_sub(points.iter().sum());
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| (shares[b] - shares[b].floor()).total_cmp(&(shares[a] - shares[a].floor())).then(a.cmp(&b)));
    for &i in order.iter().take(left as usize) {
        points[i] += 1;
    }
    points
}

/// What answers from each trial's facts rather than from its prompt: the simulated agent, and test
/// doubles that wrap it. The runner hands every request's facts beside it: `facts[i]` is `group[i]`'s.
pub trait SimBackend {
    /// Scores conformity trials (P(wrong) from the planted curve).
    fn score_trials(&mut self, group: &[ScoreRequest], facts: &[ConformityFacts]) -> Result<Vec<ScoreResult>>;
    /// Writes one allocation per decider (points from the planted in-group bias).
    fn generate_trials(&mut self, batch: &[GenerateRequest], facts: &[AllocationFacts]) -> Result<Vec<Generation>>;
    fn info(&self) -> BackendInfo;
}

/// The `sim` backend.
pub struct SimAgent {
    pub params: SimParams,
}

impl SimAgent {
    pub fn new(params: SimParams) -> Self {
        SimAgent { params }
    }
}

/// Every request needs its trial's facts: a request without them has nothing to answer from.
fn check_facts(what: &str, requests: usize, facts: usize) -> Result<()> {
    if requests == facts {
        return Ok(());
    }
    Err(BackendError::Request(format!(
        "the sim backend was asked to {what} {requests} requests with the facts of {facts} trials; it answers from each trial's facts, which herd's runner hands it beside the requests"
    )))
}

fn checked(params: &SimParams) -> Result<()> {
    params.validate().map_err(|e| BackendError::Request(format!("{e}; fix the --sim parameters")))
}

impl SimBackend for SimAgent {
    fn score_trials(&mut self, group: &[ScoreRequest], facts: &[ConformityFacts]) -> Result<Vec<ScoreResult>> {
        checked(&self.params)?;
        check_facts("score", group.len(), facts.len())?;
        group
            .iter()
            .zip(facts)
            .map(|(request, facts)| {
                let noise =
                    self.params.conformity.noise_sd * standard_normal(&mut self.params.rng(&facts.key, "conformity"));
                let logit = self.params.conformity_logit(facts) + noise;
                let p_wrong = 1.0 / (1.0 + (-logit).exp());
                let mut answers = BTreeMap::new();
                for answer in &request.answers {
                    // Logits ±logit/2: their difference is the planted logit, and both vary across trials.
                    let (p, logit) = if *answer == facts.wrong {
                        (p_wrong, (logit / 2.0) as f32)
                    } else if *answer == facts.correct {
                        (1.0 - p_wrong, (-logit / 2.0) as f32)
                    } else {
                        (0.0, f32::NEG_INFINITY)
                    };
                    answers.insert(
                        answer.clone(),
                        AnswerScore { p, logit, token_ids: Vec::new(), bound: ScoreBound::Exact },
                    );
                }
                let mass = answers.values().map(|a| a.p).sum();
                Ok(ScoreResult { answers, mass, top: Vec::new(), prompt_tokens: 0, reused_tokens: 0 })
            })
            .collect()
    }

    fn generate_trials(&mut self, batch: &[GenerateRequest], facts: &[AllocationFacts]) -> Result<Vec<Generation>> {
        checked(&self.params)?;
        check_facts("generate", batch.len(), facts.len())?;
        facts
            .iter()
            .map(|facts| {
                let points = largest_remainder(&self.params.allocation_shares(facts), facts.pool);
                let object: serde_json::Map<String, serde_json::Value> =
                    facts.roster.iter().zip(points).map(|(id, p)| (id.clone(), p.into())).collect();
                let text = serde_json::Value::Object(object).to_string();
                Ok(Generation {
                    text,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    finish_reason: FinishReason::Eos,
                    constrained: false,
                    reasoning: None,
                })
            })
            .collect()
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            backend: "sim".into(),
            model: "sim".into(),
            family: "sim".into(),
            device: "none".into(),
            vision: false,
            compute: crate::ComputePath::elsewhere("none", "simulated"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_remainder_sums_to_the_pool() {
        let shares = [33.4, 33.3, 33.3];
        assert_eq!(largest_remainder(&shares, 100), vec![34, 33, 33]);
        let shares: Vec<f64> = (0..19).map(|i| 100.0 * f64::from(i + 1) / 190.0).collect();
        assert_eq!(largest_remainder(&shares, 100).iter().sum::<u32>(), 100);
    }

    #[test]
    fn out_of_range_parameters_are_refused_by_key_and_range() {
        assert_eq!(SimParams::default().validate(), Ok(()));
        for value in [1000.0, 710.0, f64::NAN, f64::INFINITY, -51.0] {
            let mut params = SimParams::default();
            params.allocation.ingroup_majority = value;
            let e = params.validate().unwrap_err();
            assert_eq!(e.key, "allocation.ingroup_majority");
            assert!(e.to_string().contains("[-50, 50]"), "{e}");
        }
        let mut params = SimParams::default();
        params.conformity.level_shift.insert("public".into(), f64::NEG_INFINITY);
        assert_eq!(params.validate().unwrap_err().key, "conformity.level_shift.public");
        let mut params = SimParams::default();
        params.conformity.noise_sd = -0.1;
        assert!(params.validate().unwrap_err().to_string().contains("conformity.noise_sd"));
        // The edges are valid.
        params.conformity.noise_sd = MAX_NOISE_SD;
        params.allocation.ingroup_minority = -MAX_LOG_EFFECT;
        assert_eq!(params.validate(), Ok(()));
    }

    #[test]
    fn the_agent_refuses_to_answer_with_parameters_out_of_range() {
        let mut params = SimParams::default();
        params.allocation.ingroup_minority = 1000.0;
        let facts = AllocationFacts {
            key: "k".into(),
            roster: vec!["a".into(), "b".into()],
            same_group: vec![true, false],
            labels_visible: true,
            minority_decider: true,
            pool: 100,
        };
        let prompt = crate::chat::ChatPrompt::user(vec![crate::chat::Part::Text { text: "x".into() }]);
        let request = GenerateRequest::new(prompt, crate::backend::SamplingParams::default());
        let e = SimAgent::new(params).generate_trials(&[request], &[facts]).unwrap_err().to_string();
        assert!(e.contains("allocation.ingroup_minority") && e.contains("1000"), "{e}");
    }

    #[test]
    fn hidden_labels_carry_no_bias() {
        let params = SimParams::default();
        assert_eq!(params.ingroup_bias(true, false), 0.0);
        assert!(params.ingroup_bias(true, true) > params.ingroup_bias(false, true));
    }
}
