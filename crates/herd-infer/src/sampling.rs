//! Choosing the next token from logits as HF `generate` with `do_sample` does: repetition penalty, then
//! temperature, top-k and top-p, with a per-sequence seeded RNG so a sequence draws the same tokens whether
//! it is decoded alone or in a batch. Also where the knobs come from: a model's own defaults
//! ([`ModelSampling`], from its generation_config.json or its registry entry), an experiment's overrides and
//! HF's defaults, resolved by [`resolve_sampling`] into the values a run uses and records.

use crate::backend::SamplingParams;
use crate::error::{InferError, Result, model_file};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;

pub fn sequence_rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// transformers' `GenerationConfig` defaults, which HF `generate` uses for any knob neither the call nor the
/// model's generation_config.json sets.
pub const HF_DEFAULT_TEMPERATURE: f64 = 1.0;
pub const HF_DEFAULT_TOP_P: f64 = 1.0;
pub const HF_DEFAULT_TOP_K: usize = 50;
pub const HF_DEFAULT_REPETITION_PENALTY: f64 = 1.0;

/// The largest top-k accepted from a file: above every vocabulary (the largest are about 260k tokens), so a
/// larger value is a typo.
const MAX_TOP_K: usize = 1_000_000;

/// A model's own sampling defaults: the knobs of its generation_config.json (HF folders) or of its
/// `generation` entry in the registry (GGUF files, which carry none). `None` where the model sets nothing,
/// so HF's default applies.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// 0 keeps every token.
    pub top_k: Option<usize>,
    pub repetition_penalty: Option<f64>,
    /// Recorded, not applied: herd samples whenever the temperature is above 0, as the paper's `generate`
    /// call did (a generation_config.json without `do_sample` would otherwise mean greedy decoding).
    pub do_sample: Option<bool>,
    /// Where the values come from: the generation_config.json read, or the registry's account of the file
    /// it copied them from.
    pub source: String,
}

impl ModelSampling {
    /// No defaults of the model's own: every knob falls back.
    pub fn none(source: impl Into<String>) -> Self {
        ModelSampling { source: source.into(), ..Default::default() }
    }

    /// The first out-of-range knob as (field, value, fix).
    pub fn check(&self) -> std::result::Result<(), (&'static str, String, &'static str)> {
        if let Some(t) = self.temperature.filter(|t| !(t.is_finite() && *t >= 0.0)) {
            return Err(("temperature", t.to_string(), "a temperature is a number ≥ 0 (0 decodes greedily)"));
        }
        if let Some(p) = self.top_p.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
            return Err(("top_p", p.to_string(), "top_p is a number in (0, 1] (1 keeps every token)"));
        }
        if let Some(k) = self.top_k.filter(|k| *k > MAX_TOP_K) {
            return Err(("top_k", k.to_string(), "top_k is an integer from 0 (keep every token) to 1000000"));
        }
        if let Some(r) = self.repetition_penalty.filter(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(("repetition_penalty", r.to_string(), "a repetition penalty is a number > 0 (1 is none)"));
        }
        Ok(())
    }

    /// Reads the sampling knobs of an HF generation_config.json (`file` names it in errors). Other keys
    /// (token ids, `max_new_tokens`, …) are not sampling knobs and are ignored; a knob of the wrong type or
    /// out of range is an error naming the file and the field, since sampling with a guessed value would
    /// silently change what the model writes. An explicit `null` means what it means to HF: the knob's
    /// processor is off, which for top_k is 0 (keep every token), not the default 50.
    pub fn from_generation_config(file: &Path, text: &str) -> Result<Self> {
        let bad = |field: &str, value: &serde_json::Value, want: &str| {
            model_file(
                file,
                format!("`{field}` is {value}: not {want}; fix the file (or remove the key to use HF's default)"),
            )
        };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| model_file(file, format!("not JSON ({e}); fix or remove the file")))?;
        let object = value.as_object().ok_or_else(|| model_file(file, "not a JSON object; fix or remove the file"))?;
        let number = |field: &str| -> Result<Option<f64>> {
            match object.get(field) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| bad(field, v, "a number")),
            }
        };
        let top_k = match object.get("top_k") {
            None => None,
            Some(serde_json::Value::Null) => Some(0),
            Some(v) => Some(
                v.as_u64()
                    .and_then(|k| usize::try_from(k).ok())
                    .ok_or_else(|| bad("top_k", v, "a non-negative integer"))?,
            ),
        };
        let do_sample = match object.get("do_sample") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(v.as_bool().ok_or_else(|| bad("do_sample", v, "true or false"))?),
        };
        let sampling = ModelSampling {
            temperature: number("temperature")?,
            top_p: number("top_p")?,
            top_k,
            repetition_penalty: number("repetition_penalty")?,
            do_sample,
            source: file.display().to_string(),
        };
        sampling.check().map_err(|(field, value, fix)| {
            model_file(file, format!("`{field}` is {value}, out of range; fix: {fix}"))
        })?;
        Ok(sampling)
    }
}

/// An experiment's overrides: what it sets wins over the model's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplingOverrides {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<usize>,
}

/// What a knob set by neither the experiment nor the model becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingFallback {
    /// HF `generate`'s default, applied by herd (local and simulated backends).
    #[default]
    HfDefaults,
    /// Not sent: the server applies its own default (openai backend).
    Server,
}

/// Where an effective value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SettingSource {
    Experiment,
    Model,
    HfDefault,
    /// Left to the server (not sent), so herd does not know the value.
    ServerDefault,
}

/// One knob's effective value and its source; `value` is `None` only for [`SettingSource::ServerDefault`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Setting<T> {
    pub value: Option<T>,
    pub source: SettingSource,
}

/// The knobs a run samples with, each with its source; what a run manifest records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EffectiveSampling {
    pub temperature: Setting<f64>,
    pub top_p: Setting<f64>,
    pub top_k: Setting<usize>,
    pub repetition_penalty: Setting<f64>,
    /// Where the model's defaults were read.
    pub model_defaults: String,
    /// The model's `do_sample`, recorded only (see [`ModelSampling::do_sample`]).
    pub model_do_sample: Option<bool>,
    pub fallback: SamplingFallback,
}

/// Resolves each knob: the experiment's override, else the model's default, else `fallback` (HF's default,
/// or nothing for a server to fill). The repetition penalty has no experiment override: the paper's
/// `generate` call left it to the model.
pub fn resolve_sampling(
    overrides: &SamplingOverrides,
    model: &ModelSampling,
    fallback: SamplingFallback,
) -> EffectiveSampling {
    fn pick<T: Copy>(experiment: Option<T>, model: Option<T>, hf: T, fallback: SamplingFallback) -> Setting<T> {
        match (experiment, model, fallback) {
            (Some(v), _, _) => Setting { value: Some(v), source: SettingSource::Experiment },
            (None, Some(v), _) => Setting { value: Some(v), source: SettingSource::Model },
            (None, None, SamplingFallback::HfDefaults) => Setting { value: Some(hf), source: SettingSource::HfDefault },
            (None, None, SamplingFallback::Server) => Setting { value: None, source: SettingSource::ServerDefault },
        }
    }
    EffectiveSampling {
        temperature: pick(overrides.temperature, model.temperature, HF_DEFAULT_TEMPERATURE, fallback),
        top_p: pick(overrides.top_p, model.top_p, HF_DEFAULT_TOP_P, fallback),
        top_k: pick(overrides.top_k, model.top_k, HF_DEFAULT_TOP_K, fallback),
        repetition_penalty: pick(None, model.repetition_penalty, HF_DEFAULT_REPETITION_PENALTY, fallback),
        model_defaults: model.source.clone(),
        model_do_sample: model.do_sample,
        fallback,
    }
}

impl EffectiveSampling {
    /// The request's sampling parameters; knobs left to a server stay `None` (not sent).
    pub fn params(&self, seed: u64, max_tokens: usize) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature.value,
            top_p: self.top_p.value,
            top_k: self.top_k.value,
            repetition_penalty: self.repetition_penalty.value,
            seed,
            max_tokens,
            stop: Vec::new(),
        }
    }

    /// The manifest's record: every knob with its value and source, and what the sources mean.
    pub fn manifest_record(&self) -> serde_json::Value {
        let mut record = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        let note = match self.fallback {
            SamplingFallback::HfDefaults => {
                "source: experiment (its [generation] table), model (model_defaults), hf_default (HF generate's default). herd samples whenever temperature > 0, as the paper's generate call did; model_do_sample is recorded, not applied."
            }
            SamplingFallback::Server => {
                "source: experiment (its [generation] table), model (the registry's `generation`), server_default (not sent: the server applies its own default, e.g. vLLM the model's generation_config.json, llama.cpp its built-in values). repetition_penalty is sent under vLLM's and SGLang's name; llama.cpp's server reads `repeat_penalty` instead and ignores it."
            }
        };
        if let Some(object) = record.as_object_mut() {
            object.insert("note".into(), note.into());
        }
        record
    }
}

/// HF's `RepetitionPenaltyLogitsProcessor` for one sequence: the logit of every token id in the prompt or
/// generated so far is divided by the penalty where positive and multiplied by it where negative, once per
/// id however often it occurs. Kept per sequence, so batched and unbatched decoding penalise alike.
#[derive(Clone, Debug)]
pub struct RepetitionPenalty {
    penalty: f32,
    seen: HashSet<u32>,
    ids: Vec<u32>,
}

impl RepetitionPenalty {
    /// `None` where there is nothing to do (no penalty, or 1), so decoding without one costs nothing.
    pub fn new(penalty: Option<f64>, prompt: &[u32]) -> Result<Option<Self>> {
        let Some(penalty) = penalty.filter(|p| *p != 1.0) else { return Ok(None) };
        if !(penalty.is_finite() && penalty > 0.0) {
            return Err(InferError::Request(format!(
                "repetition_penalty {penalty} is out of range: use a number > 0 (1 is none)"
            )));
        }
        // HF computes in the logits' precision (f32).
        let mut this = RepetitionPenalty { penalty: penalty as f32, seen: HashSet::new(), ids: Vec::new() };
        for &token in prompt {
            this.push(token);
        }
        Ok(Some(this))
    }

    /// Records a token of the sequence.
    pub fn push(&mut self, token: u32) {
        if self.seen.insert(token) {
            self.ids.push(token);
        }
    }

    /// Penalises `logits` in place. Ids beyond the logits (a prompt token outside the output vocabulary)
    /// have no logit to penalise.
    pub fn apply(&self, logits: &mut [f32]) {
        for &id in &self.ids {
            if let Some(l) = logits.get_mut(id as usize) {
                *l = if *l < 0.0 { *l * self.penalty } else { *l / self.penalty };
            }
        }
    }
}

/// The knobs the draw uses, `None`s replaced by HF's defaults.
#[derive(Clone, Copy, Debug)]
struct Knobs {
    temperature: f64,
    top_k: usize,
    top_p: f64,
}

impl Knobs {
    fn of(params: &SamplingParams) -> Self {
        Knobs {
            temperature: params.temperature.unwrap_or(HF_DEFAULT_TEMPERATURE),
            top_k: params.top_k.unwrap_or(HF_DEFAULT_TOP_K),
            top_p: params.top_p.unwrap_or(HF_DEFAULT_TOP_P),
        }
    }
}

/// Picks a token from `logits` (entries of -inf are never picked). The choice depends on the values
/// and the draw only: ties break towards the lower id.
///
/// Without a cut (top-k 0, top-p 1) the draw walks the tokens in id order; with one it walks them from
/// the most likely down, and sorts only as many as the cut can keep (a full sort of a 50k vocabulary
/// for every sequence at every step was a tenth of a batched decoding step).
///
/// Logits with no finite entry (a model that produced NaN or infinities, or a constraint that allows no
/// token) are an error: returning some token would write text the model never chose.
///
/// Knobs left `None` take HF's defaults (temperature 1, top-k 50, top-p 1). The repetition penalty is the
/// caller's to apply first ([`RepetitionPenalty`]), since it needs the sequence's history.
pub fn sample_token(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> Result<u32> {
    let order: Vec<u32> = (0..logits.len() as u32).filter(|&i| logits[i as usize].is_finite()).collect();
    if order.is_empty() {
        let nan = logits.iter().filter(|l| l.is_nan()).count();
        return Err(InferError::Sampling(format!(
            "none of the {} logits is finite ({nan} NaN, the rest ±inf): the model's output is broken or the JSON constraint allows no token; nothing was sampled",
            logits.len()
        )));
    }
    Ok(draw(logits, order, Knobs::of(params), rng))
}

/// [`sample_token`] over the finite candidates `order` (not empty).
fn draw(logits: &[f32], mut order: Vec<u32>, params: Knobs, rng: &mut ChaCha20Rng) -> u32 {
    let likelier = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
    if params.temperature <= 0.0 {
        return *order.iter().min_by(|a, b| likelier(a, b)).expect("non-empty");
    }
    let max = order.iter().map(|&i| logits[i as usize]).fold(f32::NEG_INFINITY, f32::max) as f64;
    let weight = |i: u32| ((logits[i as usize] as f64 - max) / params.temperature).exp();
    // Top-p shares are of the weight after top-k, which the sorted head may no longer hold in full.
    let mut cut_total = None;
    if params.top_k > 0 || params.top_p < 1.0 {
        if params.top_k > 0 && order.len() > params.top_k {
            order.select_nth_unstable_by(params.top_k - 1, likelier);
            order.truncate(params.top_k);
        }
        let total: f64 = order.iter().map(|&i| weight(i)).sum();
        sort_likeliest(&mut order, params.top_p * total, &weight, likelier);
        cut_total = Some(total);
    }
    let weights: Vec<f64> = order.iter().map(|&i| weight(i)).collect();
    let total = cut_total.unwrap_or_else(|| weights.iter().sum());
    let mut keep = weights.len();
    if params.top_p < 1.0 {
        let mut cumulative = 0.0;
        for (n, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= params.top_p {
                keep = n + 1;
                break;
            }
        }
    }
    let kept_total: f64 = weights[..keep].iter().sum();
    let mut target = rng.random::<f64>() * kept_total;
    for (n, w) in weights[..keep].iter().enumerate() {
        target -= w;
        if target <= 0.0 {
            return order[n];
        }
    }
    order[keep - 1]
}

/// Sorts the head of `order` most likely first, far enough that its weights reach `needed` (the whole
/// of `order` when they never do); the tail past that head is left out, since no cut keeps it.
fn sort_likeliest(
    order: &mut Vec<u32>,
    needed: f64,
    weight: &impl Fn(u32) -> f64,
    likelier: impl Fn(&u32, &u32) -> std::cmp::Ordering + Copy,
) {
    let mut head = 64;
    while head < order.len() {
        order.select_nth_unstable_by(head - 1, likelier);
        if order[..head].iter().map(|&i| weight(i)).sum::<f64>() >= needed {
            order.truncate(head);
            break;
        }
        head *= 8;
    }
    order.sort_by(likelier);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> u32 {
        sample_token(logits, params, rng).unwrap()
    }

    #[test]
    fn logits_with_nothing_finite_are_an_error_not_token_zero() {
        for logits in
            [vec![f32::NAN; 4], vec![f32::NEG_INFINITY; 4], vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY], vec![]]
        {
            for p in [params(0.0, 0, 1.0), params(0.7, 40, 0.9)] {
                let err = sample_token(&logits, &p, &mut sequence_rng(1)).unwrap_err().to_string();
                assert!(err.contains("finite") && err.contains("nothing was sampled"), "{err}");
            }
        }
    }

    fn params(temperature: f64, top_k: usize, top_p: f64) -> SamplingParams {
        SamplingParams { temperature: Some(temperature), top_k: Some(top_k), top_p: Some(top_p), ..Default::default() }
    }

    #[test]
    fn greedy_takes_the_largest_and_breaks_ties_low() {
        let mut rng = sequence_rng(1);
        assert_eq!(sample(&[0.1, 3.0, 3.0, f32::NEG_INFINITY], &params(0.0, 0, 1.0), &mut rng), 1);
    }

    #[test]
    fn top_k_one_is_greedy_and_masked_tokens_never_drawn() {
        let logits = [2.0, f32::NEG_INFINITY, 1.9, 0.5];
        for seed in 0..200 {
            let mut rng = sequence_rng(seed);
            assert_eq!(sample(&logits, &params(1.0, 1, 1.0), &mut rng), 0);
            let mut rng = sequence_rng(seed);
            assert_ne!(sample(&logits, &params(5.0, 0, 1.0), &mut rng), 1);
        }
    }

    #[test]
    fn frequencies_follow_softmax_and_top_p_cuts_the_tail() {
        let logits = [(0.6f32).ln(), (0.3f32).ln(), (0.1f32).ln()];
        let mut counts = [0usize; 3];
        let mut rng = sequence_rng(7);
        for _ in 0..20_000 {
            counts[sample(&logits, &params(1.0, 0, 1.0), &mut rng) as usize] += 1;
        }
        let share = counts[0] as f64 / 20_000.0;
        assert!((share - 0.6).abs() < 0.02, "{counts:?}");
        let mut rng = sequence_rng(7);
        for _ in 0..2_000 {
            assert_ne!(sample(&logits, &params(1.0, 0, 0.85), &mut rng), 2);
        }
    }

    #[test]
    fn same_seed_same_draws() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let draw = |seed| {
            let mut rng = sequence_rng(seed);
            (0..20).map(|_| sample(&logits, &params(0.8, 10, 0.9), &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    /// The cut draws through a fully sorted vocabulary, as a reader of the code would write it.
    fn sample_fully_sorted(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> u32 {
        let params = Knobs::of(params);
        let mut order: Vec<u32> = (0..logits.len() as u32).filter(|&i| logits[i as usize].is_finite()).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
        if params.top_k > 0 {
            order.truncate(params.top_k);
        }
        let max = logits[order[0] as usize] as f64;
        let weights: Vec<f64> =
            order.iter().map(|&i| ((logits[i as usize] as f64 - max) / params.temperature).exp()).collect();
        let total: f64 = weights.iter().sum();
        let (mut keep, mut cumulative) = (weights.len(), 0.0);
        for (n, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= params.top_p {
                keep = n + 1;
                break;
            }
        }
        let mut target = rng.random::<f64>() * weights[..keep].iter().sum::<f64>();
        for (n, w) in weights[..keep].iter().enumerate() {
            target -= w;
            if target <= 0.0 {
                return order[n];
            }
        }
        order[keep - 1]
    }

    #[test]
    fn knobs_left_unset_take_hf_defaults_top_k_50_included() {
        // 200 tokens, likeliest first: HF's default top-k of 50 must keep the draw among the first 50,
        // and unset knobs must draw exactly what HF's explicit defaults draw.
        let logits: Vec<f32> = (0..200).map(|i| -(i as f32) * 0.01).collect();
        let unset = SamplingParams { temperature: None, top_p: None, top_k: None, ..Default::default() };
        let explicit = params(HF_DEFAULT_TEMPERATURE, HF_DEFAULT_TOP_K, HF_DEFAULT_TOP_P);
        let mut highest = 0;
        for seed in 0..400 {
            let (mut a, mut b) = (sequence_rng(seed), sequence_rng(seed));
            let token = sample(&logits, &unset, &mut a);
            assert_eq!(token, sample(&logits, &explicit, &mut b), "seed {seed}");
            highest = highest.max(token);
        }
        assert!(highest < 50 && highest > 40, "draws reach {highest}: top-k 50 should cut at 49");
    }

    #[test]
    fn repetition_penalty_divides_positive_multiplies_negative_once_per_id() {
        // The prompt repeats id 1; id 3 comes later in the output; id 9 is beyond the logits.
        let mut penalty = RepetitionPenalty::new(Some(1.25), &[0, 1, 1, 9]).unwrap().expect("a penalty ≠ 1 is kept");
        penalty.push(3);
        penalty.push(3);
        let mut logits = [2.0f32, -1.0, 0.5, 3.0, f32::NEG_INFINITY];
        penalty.apply(&mut logits);
        // As transformers' RepetitionPenaltyLogitsProcessor computes in f32: where(s < 0, s * p, s / p),
        // gathered and scattered once per id.
        assert_eq!(logits, [2.0 / 1.25, -1.25, 0.5, 3.0 / 1.25, f32::NEG_INFINITY], "-1 is multiplied: -1.25");
        // The draw follows the penalised logits.
        let mut counts = [0usize; 5];
        let mut rng = sequence_rng(5);
        for _ in 0..5_000 {
            counts[sample(&logits, &params(1.0, 0, 1.0), &mut rng) as usize] += 1;
        }
        let p3 = counts[3] as f64 / 5_000.0;
        let expected = {
            let w: Vec<f64> = logits.iter().map(|&l| (l as f64).exp()).collect();
            w[3] / w.iter().sum::<f64>()
        };
        assert!((p3 - expected).abs() < 0.03, "{counts:?}: P(3) {p3} vs {expected}");
        // No penalty: nothing to do; a bad one is an error, not a silent 1.
        assert!(RepetitionPenalty::new(None, &[1]).unwrap().is_none());
        assert!(RepetitionPenalty::new(Some(1.0), &[1]).unwrap().is_none());
        for bad in [0.0, -1.1, f64::NAN, f64::INFINITY] {
            let err = RepetitionPenalty::new(Some(bad), &[1]).unwrap_err().to_string();
            assert!(err.contains("repetition_penalty") && err.contains("out of range"), "{err}");
        }
    }

    fn model(
        temperature: Option<f64>,
        top_p: Option<f64>,
        top_k: Option<usize>,
        repetition_penalty: Option<f64>,
    ) -> ModelSampling {
        ModelSampling { temperature, top_p, top_k, repetition_penalty, do_sample: Some(true), source: "test".into() }
    }

    #[test]
    fn experiment_overrides_win_then_model_defaults_then_hf_defaults() {
        use SettingSource::*;
        let qwen3 = model(Some(0.6), Some(0.95), Some(20), None);
        let experiment = SamplingOverrides { temperature: Some(0.7), ..Default::default() };
        let e = resolve_sampling(&experiment, &qwen3, SamplingFallback::HfDefaults);
        assert_eq!((e.temperature.value, e.temperature.source), (Some(0.7), Experiment));
        assert_eq!((e.top_p.value, e.top_p.source), (Some(0.95), Model));
        assert_eq!((e.top_k.value, e.top_k.source), (Some(20), Model));
        assert_eq!((e.repetition_penalty.value, e.repetition_penalty.source), (Some(1.0), HfDefault));
        let p = e.params(7, 100);
        assert_eq!(
            (p.temperature, p.top_p, p.top_k, p.repetition_penalty, p.seed, p.max_tokens),
            (Some(0.7), Some(0.95), Some(20), Some(1.0), 7, 100)
        );
        // An explicit 0 from the experiment (no top-k cut) beats the model's 20.
        let no_cut = SamplingOverrides { top_k: Some(0), top_p: Some(1.0), ..Default::default() };
        let e = resolve_sampling(&no_cut, &qwen3, SamplingFallback::HfDefaults);
        assert_eq!(
            (e.top_k.value, e.top_k.source, e.top_p.value, e.temperature.value, e.temperature.source),
            (Some(0), Experiment, Some(1.0), Some(0.6), Model)
        );
        // A model with nothing of its own (SmolLM2's generation_config.json) gets HF's defaults.
        let e =
            resolve_sampling(&SamplingOverrides::default(), &ModelSampling::none("none"), SamplingFallback::HfDefaults);
        assert_eq!(
            (e.temperature.value, e.top_p.value, e.top_k.value, e.repetition_penalty.value),
            (Some(1.0), Some(1.0), Some(50), Some(1.0))
        );
        assert!(
            [e.temperature.source, e.top_p.source, e.top_k.source, e.repetition_penalty.source]
                .iter()
                .all(|s| *s == HfDefault)
        );
        // For a server, what neither sets is not sent, and the record says so.
        let penalised = model(None, None, None, Some(1.1));
        let e = resolve_sampling(&experiment, &penalised, SamplingFallback::Server);
        let p = e.params(1, 10);
        assert_eq!((p.temperature, p.top_p, p.top_k, p.repetition_penalty), (Some(0.7), None, None, Some(1.1)));
        let record = e.manifest_record();
        assert_eq!(record["top_k"], serde_json::json!({"value": null, "source": "server_default"}));
        assert_eq!(record["repetition_penalty"], serde_json::json!({"value": 1.1, "source": "model"}));
        assert_eq!(record["temperature"]["source"], "experiment");
        assert!(record["note"].as_str().unwrap().contains("not sent"), "{record}");
    }

    #[test]
    fn generation_config_knobs_are_read_with_hf_null_meanings() {
        let file = Path::new("/m/generation_config.json");
        let qwen = r#"{"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
            "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.44.0"}"#;
        let m = ModelSampling::from_generation_config(file, qwen).unwrap();
        assert_eq!(
            m,
            ModelSampling {
                temperature: Some(0.7),
                top_p: Some(0.8),
                top_k: Some(20),
                repetition_penalty: Some(1.1),
                do_sample: Some(true),
                source: "/m/generation_config.json".into()
            }
        );
        let smollm2 = r#"{"_from_model_config": true, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "transformers_version": "4.42.3"}"#;
        assert_eq!(
            ModelSampling::from_generation_config(file, smollm2).unwrap(),
            ModelSampling::none("/m/generation_config.json")
        );
        // HF turns a processor off for null: top_k null keeps every token (not the default 50).
        let nulls = r#"{"top_k": null, "temperature": null, "do_sample": null}"#;
        let m = ModelSampling::from_generation_config(file, nulls).unwrap();
        assert_eq!((m.top_k, m.temperature, m.do_sample), (Some(0), None, None));
    }

    #[test]
    fn bad_generation_config_values_name_the_file_and_field() {
        let file = Path::new("/models/x/generation_config.json");
        let cases = [
            (r#"{"top_k": -1}"#, "`top_k` is -1"),
            (r#"{"top_k": 2.5}"#, "`top_k` is 2.5"),
            (r#"{"top_p": "0.8"}"#, "`top_p` is \"0.8\""),
            (r#"{"top_p": 1.5}"#, "`top_p` is 1.5, out of range"),
            (r#"{"temperature": -0.5}"#, "`temperature` is -0.5, out of range"),
            (r#"{"repetition_penalty": 0}"#, "`repetition_penalty` is 0, out of range"),
            (r#"{"do_sample": "yes"}"#, "`do_sample` is \"yes\""),
            (r#"{"top_k": 20,}"#, "not JSON"),
            (r#"[1, 2]"#, "not a JSON object"),
        ];
        for (text, expected) in cases {
            let err = ModelSampling::from_generation_config(file, text).expect_err(text).to_string();
            assert!(
                err.starts_with("/models/x/generation_config.json: ") && err.contains(expected) && err.contains("fix"),
                "{text} → {err}"
            );
        }
    }

    #[test]
    fn partial_sorting_draws_what_a_full_sort_draws() {
        // A vocabulary-sized row with ties and masked entries; cuts that keep a few, many and all tokens.
        let logits: Vec<f32> = (0..49_152u32)
            .map(|i| {
                if i % 97 == 0 {
                    f32::NEG_INFINITY
                } else {
                    ((i.wrapping_mul(2_654_435_761) >> 16) % 2_000) as f32 / 150.0
                }
            })
            .collect();
        for (temperature, top_k, top_p) in
            [(0.7, 0, 0.9), (1.0, 0, 0.5), (1.5, 0, 0.999), (0.7, 40, 1.0), (1.0, 500, 0.95), (2.0, 20_000, 0.99)]
        {
            let p = params(temperature, top_k, top_p);
            for seed in 0..30 {
                let (mut a, mut b) = (sequence_rng(seed), sequence_rng(seed));
                assert_eq!(sample(&logits, &p, &mut a), sample_fully_sorted(&logits, &p, &mut b), "{p:?} seed {seed}");
            }
        }
    }
}
