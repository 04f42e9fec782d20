//! An HF `config.json` read into the decoder's configuration, checked so that no size the decoder
//! divides by or splits into is impossible.

use super::*;
use crate::error::model_file;
use std::path::Path;

/// Reads the decoder shape from an HF `config.json`.
pub fn parse_hf_config(path: &Path, text: &str) -> Result<DecoderConfig> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| model_file(path, e))?;
    let bad = |key: &str, what: &str| model_file(path, format!("`{key}` {what}"));
    let model_type = v["model_type"].as_str().ok_or_else(|| bad("model_type", "is missing"))?;
    let family = match model_type {
        "llama" => Family::Llama,
        "qwen2" => Family::Qwen2,
        "qwen3" => Family::Qwen3,
        "phi3" => Family::Phi3,
        other => return Err(bad("model_type", &format!("is `{other}`; text families are llama, qwen2, qwen3, phi3"))),
    };
    let usize_key =
        |key: &str| v[key].as_u64().map(|n| n as usize).ok_or_else(|| bad(key, "is missing or not an integer"));
    let hidden_size = usize_key("hidden_size")?;
    let num_heads = usize_key("num_attention_heads")?;
    let num_kv_heads = v["num_key_value_heads"].as_u64().map(|n| n as usize).unwrap_or(num_heads);
    let head_dim =
        v["head_dim"].as_u64().map(|n| n as usize).unwrap_or_else(|| hidden_size.checked_div(num_heads).unwrap_or(0));
    if v["partial_rotary_factor"].as_f64().is_some_and(|f| f != 1.0) {
        return Err(bad("partial_rotary_factor", "is not 1: partial rotary embeddings are not supported"));
    }
    let rope_scaling = match &v["rope_scaling"] {
        serde_json::Value::Null => None,
        s => {
            let kind = s["rope_type"].as_str().or(s["type"].as_str()).unwrap_or("");
            match kind {
                "llama3" => Some(Llama3RopeScaling {
                    factor: s["factor"].as_f64().ok_or_else(|| bad("rope_scaling.factor", "is missing"))?,
                    low_freq_factor: s["low_freq_factor"]
                        .as_f64()
                        .ok_or_else(|| bad("rope_scaling.low_freq_factor", "is missing"))?,
                    high_freq_factor: s["high_freq_factor"]
                        .as_f64()
                        .ok_or_else(|| bad("rope_scaling.high_freq_factor", "is missing"))?,
                    original_max_position_embeddings: s["original_max_position_embeddings"]
                        .as_f64()
                        .ok_or_else(|| bad("rope_scaling.original_max_position_embeddings", "is missing"))?,
                }),
                "default" => None,
                other => {
                    return Err(bad("rope_scaling", &format!("type `{other}` is not supported (llama3 and none are)")));
                }
            }
        }
    };
    let config = DecoderConfig {
        family,
        vocab_size: usize_key("vocab_size")?,
        hidden_size,
        num_layers: usize_key("num_hidden_layers")?,
        num_heads,
        num_kv_heads,
        head_dim,
        rms_norm_eps: v["rms_norm_eps"].as_f64().unwrap_or(1e-6),
        rope_theta: v["rope_theta"].as_f64().unwrap_or(10_000.0),
        rope_style: RopeStyle::Halves,
        rope_scaling,
        max_positions: v["max_position_embeddings"].as_u64().map(|n| n as usize).unwrap_or(4096).min(32_768),
    };
    config
        .check_sizes()
        .map_err(|problem| model_file(path, format!("{problem}; fix the config.json of this model")))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "vocab_size": 100}"#;

    #[test]
    fn config_json_with_impossible_sizes_is_refused_by_name() {
        let path = Path::new("m/config.json");
        assert!(parse_hf_config(path, CONFIG).is_ok());
        let cases = [
            (CONFIG.replace("\"num_attention_heads\": 4", "\"num_attention_heads\": 0"), "attention head count is 0"),
            (
                CONFIG.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
                "4 attention heads cannot be shared by 3",
            ),
            (CONFIG.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 0"), "key/value head count is 0"),
            (CONFIG.replace("\"hidden_size\": 64, ", ""), "`hidden_size` is missing"),
            (CONFIG.replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0"), "layer count is 0"),
            (CONFIG.replace("\"hidden_size\": 64", "\"hidden_size\": 4"), "head dimension 1 is odd"),
        ];
        for (text, expected) in cases {
            let err = parse_hf_config(path, &text).unwrap_err().to_string();
            assert!(err.contains(expected) && err.contains("m/config.json"), "{text}\n→ {err}");
        }
    }
}
