//! How a backend computes its numbers: the weights a user asks for ([`WeightChoice`]) and the path a
//! loaded model takes ([`ComputePath`]), which every run records so that two machines that give
//! different numbers say why.

use serde::{Deserialize, Serialize};

/// The precision of a local model's linear weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightChoice {
    /// `int8` for GGUF files on CPU, `exact` for safetensors and on accelerators.
    #[default]
    Auto,
    /// The file's own precision: bf16/f16/f32 safetensors as stored (upcast to f32 on CPU, which is
    /// lossless), GGUF blocks dequantised to f32.
    Exact,
    /// herd-kernels' 8-bit weights and 8-bit activations per block of 32 (llama.cpp's Q4_1 × Q8_1
    /// arithmetic), CPU only; the same bits on every CPU path.
    Int8,
}

impl WeightChoice {
    pub const ALL: [WeightChoice; 3] = [WeightChoice::Auto, WeightChoice::Exact, WeightChoice::Int8];

    pub fn name(self) -> &'static str {
        match self {
            WeightChoice::Auto => "auto",
            WeightChoice::Exact => "exact",
            WeightChoice::Int8 => "int8",
        }
    }
}

impl std::fmt::Display for WeightChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WeightChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        WeightChoice::ALL.into_iter().find(|c| c.name() == s.trim()).ok_or_else(|| {
            format!("`{s}` is not a weight choice; use one of {}", WeightChoice::ALL.map(WeightChoice::name).join(", "))
        })
    }
}

/// What a run's numbers were computed with. Runs whose paths differ can give different numbers for
/// the same prompts; the run store refuses to mix them in one run folder and the report names them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputePath {
    /// `cpu`, `cuda`, `metal`; `server` for the openai backend, `none` for simulated agents.
    pub device: String,
    /// On CPU herd-kernels' path (`avx512-vnni`, `avx512`, `avx-vnni`, `avx2`, `baseline`; see
    /// `HERD_CPU_PATH`), `cuda sm_XY` on a GPU, or what is known of a server.
    pub isa: String,
    /// The linear layers' weights as multiplied: `int8`, `f32`, `bf16`, `f16`, `q8_0`, or the GGUF
    /// file's own quantisation.
    pub weights: String,
    /// What the weights were made from: `gguf` or `safetensors`.
    pub weights_from: String,
    /// Decoding's weights where they differ from scoring's (a benchmark's override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_weights: Option<String>,
    /// The activations the linear layers read: `int8 per block of 32`, `q8 per block of 32`, or the dtype.
    pub activations: String,
    /// Everything else (embeddings, norms, attention, logits).
    pub dtype: String,
    pub herd_version: String,
}

impl ComputePath {
    /// A path whose parts are not herd's to know (a server's), or do not exist (simulated agents).
    pub fn elsewhere(device: &str, what: &str) -> Self {
        ComputePath {
            device: device.into(),
            isa: what.into(),
            weights: what.into(),
            weights_from: what.into(),
            decode_weights: None,
            activations: what.into(),
            dtype: what.into(),
            herd_version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    /// One line: `cpu avx512-vnni · int8 weights (from gguf) · int8 per block of 32 activations · f32 · herd 0.1.0`.
    pub fn summary(&self) -> String {
        let decode = self.decode_weights.as_ref().map(|d| format!(" (decoding {d})")).unwrap_or_default();
        format!(
            "{} {} · {} weights{decode} (from {}) · {} activations · {} · herd {}",
            self.device, self.isa, self.weights, self.weights_from, self.activations, self.dtype, self.herd_version
        )
    }

    /// `field: this → other` for each part that differs.
    pub fn differences(&self, other: &ComputePath) -> Vec<String> {
        let a = serde_json::to_value(self).unwrap_or_default();
        let b = serde_json::to_value(other).unwrap_or_default();
        let fields =
            ["device", "isa", "weights", "weights_from", "decode_weights", "activations", "dtype", "herd_version"];
        fields
            .into_iter()
            .filter(|f| a.get(f) != b.get(f))
            .map(|f| format!("{f}: {} → {}", show(a.get(f)), show(b.get(f))))
            .collect()
    }
}

fn show(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_by_name_and_a_wrong_one_names_the_rest() {
        assert_eq!("int8".parse::<WeightChoice>(), Ok(WeightChoice::Int8));
        assert_eq!(" exact".parse::<WeightChoice>(), Ok(WeightChoice::Exact));
        let err = "fp8".parse::<WeightChoice>().unwrap_err();
        assert!(err.contains("auto, exact, int8"), "{err}");
    }

    #[test]
    fn differences_name_each_changed_part() {
        let a = ComputePath {
            device: "cpu".into(),
            isa: "avx512-vnni".into(),
            weights: "int8".into(),
            weights_from: "gguf".into(),
            decode_weights: None,
            activations: "int8 per block of 32".into(),
            dtype: "f32".into(),
            herd_version: "0.1.0".into(),
        };
        let b = ComputePath { isa: "avx2".into(), decode_weights: Some("q8_0".into()), ..a.clone() };
        assert_eq!(a.differences(&a), Vec::<String>::new());
        assert_eq!(a.differences(&b), ["isa: avx512-vnni → avx2", "decode_weights: none → q8_0"]);
        assert!(b.summary().contains("cpu avx2 · int8 weights (decoding q8_0) (from gguf)"), "{}", b.summary());
    }
}
