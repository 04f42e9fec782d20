//! Tokenizers: from an HF `tokenizer.json`, or rebuilt from a GGUF file's metadata.
//!
//! candle's GGUF tokenizer helper does not know llama.cpp's pre-tokenizer names and falls back to GPT-2
//! with a leading space, so "A" becomes " A" for SmolLM2. herd instead writes the equivalent
//! `tokenizer.json` from the GGUF vocabulary, merges, token types and the pre-tokenizer named in
//! `tokenizer.ggml.pre`, and loads that; the same JSON feeds llguidance's token trie.

use crate::error::{InferError, Result, model_file};
use candle_core::quantized::gguf_file;
use serde_json::{Value, json};
use std::path::Path;

/// A tokenizer plus the special-token facts generation needs.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    /// The serialised tokenizer, for llguidance.
    json: String,
    /// Ids that end a generation.
    pub eos_ids: Vec<u32>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub pad_id: Option<u32>,
    token_texts: std::sync::Arc<Vec<String>>,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer").field("vocab", &self.token_texts.len()).field("eos_ids", &self.eos_ids).finish()
    }
}

// Split patterns of llama.cpp's pre-tokenizers (llama-vocab.cpp), as HF tokenizer.json writes them.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn byte_level(use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split(pattern: &str) -> Value {
    json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false})
}

/// The pre-tokenizer of a llama.cpp `tokenizer.ggml.pre` name, and whether merges are skipped for
/// whole-vocabulary words (llama 3).
fn pre_tokenizer_for(pre: &str) -> Option<(Value, bool)> {
    let seq = |items: Vec<Value>| json!({"type": "Sequence", "pretokenizers": items});
    Some(match pre {
        "smollm" => (seq(vec![json!({"type": "Digits", "individual_digits": true}), byte_level(true)]), false),
        "gpt2" | "default" | "gpt-2" => (byte_level(true), false),
        "llama-bpe" | "llama3" => (seq(vec![split(LLAMA3_SPLIT), byte_level(false)]), true),
        "qwen2" | "deepseek-r1-qwen" => (seq(vec![split(QWEN2_SPLIT), byte_level(false)]), false),
        _ => return None,
    })
}

impl TextTokenizer {
    /// Rebuilds the tokenizer of a GGUF file (byte-level BPE vocabularies only).
    pub fn from_gguf(file: &Path, content: &gguf_file::Content) -> Result<Self> {
        let md = |key: &str| {
            content.metadata.get(key).ok_or_else(|| model_file(file, format!("GGUF metadata has no `{key}`")))
        };
        let bad = |key: &str, e: candle_core::Error| model_file(file, format!("GGUF metadata `{key}`: {e}"));
        let model = md("tokenizer.ggml.model")?.to_string().map_err(|e| bad("tokenizer.ggml.model", e))?;
        if model != "gpt2" {
            return Err(model_file(
                file,
                format!(
                    "tokenizer model `{model}` is not supported from GGUF (byte-level BPE `gpt2` is); use the model's HF folder with tokenizer.json"
                ),
            ));
        }
        let pre = match content.metadata.get("tokenizer.ggml.pre") {
            Some(v) => v.to_string().map_err(|e| bad("tokenizer.ggml.pre", e))?.clone(),
            None => "default".to_string(),
        };
        let (pre_tokenizer, ignore_merges) = pre_tokenizer_for(&pre).ok_or_else(|| {
            model_file(file, format!("pre-tokenizer `{pre}` is not known to herd (known: smollm, gpt2, llama-bpe, qwen2, deepseek-r1-qwen); use the model's HF folder with tokenizer.json"))
        })?;
        let tokens = md("tokenizer.ggml.tokens")?.to_vec().map_err(|e| bad("tokenizer.ggml.tokens", e))?;
        let merges = md("tokenizer.ggml.merges")?.to_vec().map_err(|e| bad("tokenizer.ggml.merges", e))?;
        let types = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| bad("tokenizer.ggml.token_type", e))?
                .iter()
                .map(|t| t.to_i32().unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let mut vocab = serde_json::Map::new();
        let mut added = Vec::new();
        for (id, token) in tokens.iter().enumerate() {
            let text = token.to_string().map_err(|e| bad("tokenizer.ggml.tokens", e))?;
            vocab.insert(text.clone(), json!(id));
            // llama.cpp token types: 3 = control, 4 = user-defined; both are matched whole in text.
            if matches!(types.get(id), Some(3) | Some(4)) {
                added.push(json!({"id": id, "content": text, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": types[id] == 3}));
            }
        }
        let merges: Vec<Value> = merges
            .iter()
            .map(|m| m.to_string().map(|s| json!(s)))
            .collect::<candle_core::Result<_>>()
            .map_err(|e| bad("tokenizer.ggml.merges", e))?;
        let tokenizer_json = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": false, "byte_fallback": false, "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}
        })
        .to_string();
        let id_text = |key: &str| -> Option<(u32, String)> {
            let id = content.metadata.get(key)?.to_u32().ok()?;
            Some((id, tokens.get(id as usize)?.to_string().ok()?.clone()))
        };
        let bos = id_text("tokenizer.ggml.bos_token_id");
        let eos = id_text("tokenizer.ggml.eos_token_id");
        let mut eos_ids: Vec<u32> = eos.iter().map(|(id, _)| *id).collect();
        if let Some((id, _)) = id_text("tokenizer.ggml.eot_token_id") {
            eos_ids.push(id);
        }
        eos_ids.dedup();
        let pad_id = id_text("tokenizer.ggml.padding_token_id").map(|(id, _)| id);
        Self::from_json(tokenizer_json, bos.map(|(_, t)| t), eos.map(|(_, t)| t), eos_ids, pad_id)
            .map_err(|e| model_file(file, e))
    }

    /// Loads `tokenizer.json` of an HF folder; special tokens from `tokenizer_config.json` and the
    /// end-of-generation ids from `generation_config.json` where present.
    pub fn from_hf_folder(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        let json = std::fs::read_to_string(&path).map_err(crate::error::io_error(&path))?;
        let config = read_json_if_exists(&dir.join("tokenizer_config.json"))?;
        let token_str = |v: Option<&Value>| -> Option<String> {
            match v? {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
                _ => None,
            }
        };
        let bos = token_str(config.get("bos_token"));
        let eos = token_str(config.get("eos_token"));
        let pad = token_str(config.get("pad_token"));
        let probe = tokenizers::Tokenizer::from_str(&json).map_err(|e| model_file(&path, e))?;
        let mut eos_ids: Vec<u32> = eos.as_deref().and_then(|t| probe.token_to_id(t)).into_iter().collect();
        let generation = read_json_if_exists(&dir.join("generation_config.json"))?;
        match generation.get("eos_token_id") {
            Some(Value::Number(n)) => eos_ids.extend(n.as_u64().map(|n| n as u32)),
            Some(Value::Array(ids)) => eos_ids.extend(ids.iter().filter_map(|n| n.as_u64()).map(|n| n as u32)),
            _ => {}
        }
        eos_ids.sort_unstable();
        eos_ids.dedup();
        if eos_ids.is_empty() {
            return Err(model_file(
                dir.join("tokenizer_config.json"),
                "no eos_token: generation would never stop; add \"eos_token\"",
            ));
        }
        let pad_id = pad.as_deref().and_then(|t| probe.token_to_id(t));
        Self::from_json(json, bos, eos, eos_ids, pad_id).map_err(|e| model_file(&path, e))
    }

    fn from_json(
        json: String,
        bos_token: Option<String>,
        eos_token: Option<String>,
        eos_ids: Vec<u32>,
        pad_id: Option<u32>,
    ) -> std::result::Result<Self, String> {
        let inner = tokenizers::Tokenizer::from_str(&json).map_err(|e| e.to_string())?;
        let n = inner.get_vocab_size(true);
        let token_texts = (0..n as u32).map(|id| inner.decode(&[id], false).unwrap_or_default()).collect();
        Ok(Self { inner, json, eos_ids, bos_token, eos_token, pad_id, token_texts: std::sync::Arc::new(token_texts) })
    }

    /// Token ids of already-templated text; special-token strings in it are matched whole.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.inner.encode(text, false).map_err(|e| InferError::Tokenizer(e.to_string()))?.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| InferError::Tokenizer(e.to_string()))
    }

    /// The text of one token as it appears in decoded output.
    pub fn token_text(&self, id: u32) -> &str {
        self.token_texts.get(id as usize).map(String::as_str).unwrap_or("")
    }

    pub fn vocab_size(&self) -> usize {
        self.token_texts.len()
    }

    /// Every token whose text, stripped of leading whitespace, equals `answer` ("A", " A", "\nA"…).
    pub fn answer_token_ids(&self, answer: &str) -> Vec<u32> {
        self.token_texts.iter().enumerate().filter(|(_, t)| t.trim_start() == answer).map(|(id, _)| id as u32).collect()
    }

    /// The serialised `tokenizer.json`, as llguidance's token trie reads it.
    pub fn json(&self) -> &str {
        &self.json
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

fn read_json_if_exists(path: &Path) -> Result<serde_json::Map<String, Value>> {
    if !path.is_file() {
        return Ok(Default::default());
    }
    let text = std::fs::read_to_string(path).map_err(crate::error::io_error(path))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(model_file(path, "expected a JSON object")),
        Err(e) => Err(model_file(path, e)),
    }
}

use std::str::FromStr as _;
