//! Where a run's sampling knobs come from: a model's own defaults ([`ModelSampling`], from its
//! generation_config.json or its registry entry), an experiment's overrides and HF's defaults, resolved by
//! [`resolve_sampling`] into the values a run uses and records. Drawing tokens with them is an engine's
//! (herd-infer's sampler).

use crate::backend::SamplingParams;
use crate::error::{Result, model_file};
use serde::{Deserialize, Serialize};
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
