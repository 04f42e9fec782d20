//! Tiny, deterministic Hugging Face checkpoints of the text families herd loads (llama, qwen2, qwen3,
//! phi3): `config.json` with the real keys, `model.safetensors` with the real tensor names and random
//! weights (seeded ChaCha8), `tokenizer.json`, `tokenizer_config.json` (with a chat template) and
//! `generation_config.json`.
//!
//! Shared by herd-infer's tests and by its `examples/write_tiny_checkpoints.rs`, which writes the
//! folders that `crates/herd-infer/tests/golden/tiny_transformers.py` feeds to HF transformers. The same seed gives
//! byte-identical files: tensors are written in name order by a hand-rolled safetensors writer, JSON
//! goes through `serde_json` (sorted keys) and the uniform numbers come straight from the generator's
//! 32-bit words, not from a `rand` distribution whose algorithm could change between versions.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// The seed of the committed golden values (`tests/golden/tiny_transformers.json`).
pub const SEED: u64 = 20_250_611;

pub const VOCAB: usize = 256;
pub const HIDDEN: usize = 64;
pub const INTERMEDIATE: usize = 128;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
/// qwen3's explicit head_dim, unlike hidden_size / num_attention_heads = 16 (as in Qwen3-0.6B).
pub const QWEN3_HEAD_DIM: usize = 32;
pub const MAX_POSITIONS: usize = 256;

/// The token sequences every check runs (ids below `VOCAB`; most are beyond the tokenizer's words,
/// which the network does not care about). `full` starts with `<s>`.
pub const FULL: [u32; 12] = [1, 17, 42, 99, 5, 200, 73, 3, 255, 128, 64, 9];
pub const SHORT: [u32; 7] = [1, 30, 8, 150, 77, 6, 211];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TinyFamily {
    Llama,
    Qwen2,
    Qwen3,
    Phi3,
}

pub const FAMILIES: [TinyFamily; 4] = [TinyFamily::Llama, TinyFamily::Qwen2, TinyFamily::Qwen3, TinyFamily::Phi3];

impl TinyFamily {
    /// config.json's `model_type`, also the folder name.
    pub fn name(self) -> &'static str {
        match self {
            TinyFamily::Llama => "llama",
            TinyFamily::Qwen2 => "qwen2",
            TinyFamily::Qwen3 => "qwen3",
            TinyFamily::Phi3 => "phi3",
        }
    }

    pub fn head_dim(self) -> usize {
        match self {
            TinyFamily::Qwen3 => QWEN3_HEAD_DIM,
            _ => HIDDEN / HEADS,
        }
    }

    pub fn tied(self) -> bool {
        self == TinyFamily::Qwen3
    }

    /// Each family draws from its own stream, so one family's tensors do not depend on the others'.
    fn stream(self) -> u64 {
        match self {
            TinyFamily::Llama => 1,
            TinyFamily::Qwen2 => 2,
            TinyFamily::Qwen3 => 3,
            TinyFamily::Phi3 => 4,
        }
    }
}

/// config.json: the keys of the real checkpoints (Llama-3 / DeepSeek-R1-Distill-Llama, Qwen2.5,
/// Qwen3, Phi-3-mini), at tiny sizes.
pub fn config_json(family: TinyFamily) -> Value {
    let mut c = json!({
        "model_type": family.name(),
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "vocab_size": VOCAB,
        "max_position_embeddings": MAX_POSITIONS,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "attention_dropout": 0.0,
        "use_cache": true,
        "tie_word_embeddings": family.tied(),
        "torch_dtype": "float32",
        "transformers_version": "4.51.3",
        "bos_token_id": 1,
        "eos_token_id": 2,
    });
    let extra = match family {
        TinyFamily::Llama => json!({
            "architectures": ["LlamaForCausalLM"],
            "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "attention_bias": false,
            "mlp_bias": false,
            "pretraining_tp": 1,
            // DeepSeek-R1-Distill-Llama-8B's block, with original_max_position_embeddings shrunk from
            // 8192 to 64 so that, at head_dim 16 and the few positions tested, one frequency is smoothed
            // and six are divided by `factor` (at 8192 the scaled ones would barely turn in 12 steps).
            "rope_scaling": {
                "factor": 8.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 64,
                "rope_type": "llama3"
            },
        }),
        TinyFamily::Qwen2 => json!({
            "architectures": ["Qwen2ForCausalLM"],
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "sliding_window": 4096,
            "use_sliding_window": false,
            "max_window_layers": LAYERS,
            "rope_scaling": null,
        }),
        TinyFamily::Qwen3 => json!({
            "architectures": ["Qwen3ForCausalLM"],
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "head_dim": QWEN3_HEAD_DIM,
            "attention_bias": false,
            "sliding_window": null,
            "use_sliding_window": false,
            "max_window_layers": LAYERS,
            "rope_scaling": null,
        }),
        TinyFamily::Phi3 => json!({
            "architectures": ["Phi3ForCausalLM"],
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "original_max_position_embeddings": MAX_POSITIONS,
            "rope_scaling": null,
            "sliding_window": null,
            "pad_token_id": 0,
            "embd_pdrop": 0.0,
            "resid_pdrop": 0.0,
        }),
    };
    let obj = c.as_object_mut().expect("object");
    for (k, v) in extra.as_object().expect("object") {
        obj.insert(k.clone(), v.clone());
    }
    c
}

/// How a tensor is initialised.
#[derive(Clone, Copy)]
enum Init {
    /// Uniform with this standard deviation around 0.
    Centered(f32),
    /// Uniform with this standard deviation around 1 (norm weights).
    AroundOne(f32),
}

/// Names and shapes of the checkpoint's tensors, with their initialisation, in generation order.
fn tensor_specs(family: TinyFamily) -> Vec<(String, Vec<usize>, Init)> {
    let h = HIDDEN;
    let d = family.head_dim();
    let (q, kv, inter) = (HEADS * d, KV_HEADS * d, INTERMEDIATE);
    let w = |fan_in: usize| Init::Centered(1.0 / (fan_in as f32).sqrt());
    let mut s: Vec<(String, Vec<usize>, Init)> =
        vec![("model.embed_tokens.weight".into(), vec![VOCAB, h], Init::Centered(0.5))];
    for i in 0..LAYERS {
        let p = |n: &str| format!("model.layers.{i}.{n}");
        s.push((p("input_layernorm.weight"), vec![h], Init::AroundOne(0.1)));
        s.push((p("post_attention_layernorm.weight"), vec![h], Init::AroundOne(0.1)));
        if family == TinyFamily::Phi3 {
            s.push((p("self_attn.qkv_proj.weight"), vec![q + 2 * kv, h], w(h)));
            s.push((p("mlp.gate_up_proj.weight"), vec![2 * inter, h], w(h)));
        } else {
            s.push((p("self_attn.q_proj.weight"), vec![q, h], w(h)));
            s.push((p("self_attn.k_proj.weight"), vec![kv, h], w(h)));
            s.push((p("self_attn.v_proj.weight"), vec![kv, h], w(h)));
            s.push((p("mlp.gate_proj.weight"), vec![inter, h], w(h)));
            s.push((p("mlp.up_proj.weight"), vec![inter, h], w(h)));
        }
        if family == TinyFamily::Qwen2 {
            // Large enough to matter (Qwen2's real k biases are large).
            s.push((p("self_attn.q_proj.bias"), vec![q], Init::Centered(0.5)));
            s.push((p("self_attn.k_proj.bias"), vec![kv], Init::Centered(0.5)));
            s.push((p("self_attn.v_proj.bias"), vec![kv], Init::Centered(0.5)));
        }
        if family == TinyFamily::Qwen3 {
            s.push((p("self_attn.q_norm.weight"), vec![d], Init::AroundOne(0.2)));
            s.push((p("self_attn.k_norm.weight"), vec![d], Init::AroundOne(0.2)));
        }
        s.push((p("self_attn.o_proj.weight"), vec![h, q], w(q)));
        s.push((p("mlp.down_proj.weight"), vec![h, inter], w(inter)));
    }
    s.push(("model.norm.weight".into(), vec![h], Init::AroundOne(0.1)));
    if !family.tied() {
        s.push(("lm_head.weight".into(), vec![VOCAB, h], w(h)));
    }
    s
}

/// Uniform in [-1, 1) from the generator's next 32-bit word (24 bits of mantissa).
fn unit(rng: &mut ChaCha8Rng) -> f32 {
    ((rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32) * 2.0 - 1.0
}

/// The checkpoint's tensors (name → shape, row-major f32 data).
pub fn tensors(family: TinyFamily, seed: u64) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(family.stream());
    let sqrt3 = 3f32.sqrt();
    tensor_specs(family)
        .into_iter()
        .map(|(name, shape, init)| {
            let n: usize = shape.iter().product();
            let data = (0..n)
                .map(|_| {
                    let u = unit(&mut rng) * sqrt3;
                    match init {
                        Init::Centered(std) => u * std,
                        Init::AroundOne(std) => 1.0 + u * std,
                    }
                })
                .collect();
            (name, (shape, data))
        })
        .collect()
}

/// A safetensors file of f32 tensors in name order, with `{"format": "pt"}` metadata as torch writes: the
/// one writer of the tiny checkpoints, herd-vision's.
pub fn safetensors_bytes(tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>) -> Vec<u8> {
    crate::tiny_vl::safetensors_bytes(tensors)
}

/// Special tokens first (ids 0..), then plain words; the model's vocabulary (256) is larger, as real
/// checkpoints' often are.
pub const SPECIAL_TOKENS: [&str; 7] = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"];
const WORDS: [&str; 16] = [
    "which",
    "line",
    "is",
    "longer",
    "?",
    "answer",
    "a",
    "or",
    "b",
    ".",
    "the",
    "reference",
    "matches",
    "red",
    "blue",
    "green",
];

/// A WordLevel tokenizer over [`SPECIAL_TOKENS`] and a few words, whitespace pre-tokenized.
pub fn tokenizer_json() -> String {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::{AddedToken, Tokenizer};
    let vocab: serde_json::Map<String, Value> =
        SPECIAL_TOKENS.iter().chain(WORDS.iter()).enumerate().map(|(i, w)| (w.to_string(), json!(i))).collect();
    let model: WordLevel =
        serde_json::from_str(&json!({"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}).to_string())
            .expect("word-level model");
    let mut tok = Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace));
    tok.add_special_tokens(SPECIAL_TOKENS.iter().map(|s| AddedToken::from(*s, true))).expect("special tokens");
    tok.to_string(true).expect("serialise tokenizer")
}

pub const CHAT_TEMPLATE: &str = "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} <|end|> {% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

pub fn tokenizer_config_json() -> Value {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<unk>",
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_max_length": MAX_POSITIONS,
        "chat_template": CHAT_TEMPLATE,
    })
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("json");
    s.push('\n');
    s.into_bytes()
}

/// The files of one family's folder (file name → bytes).
pub fn checkpoint_files(family: TinyFamily, seed: u64) -> BTreeMap<&'static str, Vec<u8>> {
    let mut files = BTreeMap::new();
    files.insert("config.json", pretty(&config_json(family)));
    files.insert(
        "generation_config.json",
        pretty(&json!({"bos_token_id": 1, "eos_token_id": 2, "do_sample": false, "transformers_version": "4.51.3"})),
    );
    files.insert("model.safetensors", safetensors_bytes(&tensors(family, seed)));
    files.insert("tokenizer.json", tokenizer_json().into_bytes());
    files.insert("tokenizer_config.json", pretty(&tokenizer_config_json()));
    files
}

/// Writes one family's folder at `dir` (created if needed).
pub fn write_checkpoint(dir: &Path, family: TinyFamily, seed: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in checkpoint_files(family, seed) {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

/// `inputs.json`: the token sequences (what the golden script runs) and the seed.
pub fn inputs_json(seed: u64) -> Value {
    json!({"seed": seed, "sequences": {"full": FULL, "short": SHORT}, "families": FAMILIES.map(TinyFamily::name)})
}

/// Writes `out/<family>/` for every family plus `out/inputs.json`.
pub fn write_all(out: &Path, seed: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    for family in FAMILIES {
        write_checkpoint(&out.join(family.name()), family, seed)?;
    }
    std::fs::write(out.join("inputs.json"), pretty(&inputs_json(seed)))
}
