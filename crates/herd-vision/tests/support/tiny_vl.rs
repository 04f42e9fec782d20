//! A tiny, deterministic Qwen3-VL checkpoint (the real config keys and tensor names of
//! `Qwen/Qwen3-VL-*-Instruct`), a fixed test image and prompt, shared by `tests/hf_golden.rs` and
//! `examples/write_tiny_qwen3_vl.rs` (which writes what `tests/golden/tiny_transformers.py` feeds to
//! HF transformers). The same seed gives byte-identical files: weights come from a SplitMix64 stream
//! and are written in name order by a hand-rolled safetensors writer; JSON goes through serde_json.
#![allow(dead_code)] // Each target uses a different part.

use image::{DynamicImage, Rgb, RgbImage};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// The seed of the committed golden values.
pub const SEED: u64 = 20_250_611;

const VOCAB: usize = 64;
const T_HIDDEN: usize = 32;
const T_LAYERS: usize = 3;
const T_HEADS: usize = 4;
const T_KV: usize = 2;
const T_HEAD_DIM: usize = 8;
const T_INTER: usize = 48;
const V_DEPTH: usize = 3;
const V_HIDDEN: usize = 16;
const V_HEADS: usize = 2;
const V_INTER: usize = 24;
const PATCH: usize = 4;
const MERGE: usize = 2;
const TEMPORAL: usize = 2;
/// A 4×4 learned position grid, interpolated to the image's 6×8 patch grid.
const POS_EMB: usize = 16;
const DEEPSTACK: [usize; 2] = [0, 2];

const WORDS: [&str; 16] = [
    "[UNK]",
    "user",
    "assistant",
    "system",
    "which",
    "line",
    "matches",
    "the",
    "reference",
    "?",
    "A",
    "B",
    "C",
    "answer",
    "red",
    "blue",
];
const SPECIALS: [&str; 7] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
];

/// The prompt, with one unexpanded `<|image_pad|>`.
pub const PROMPT: &str = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>which line matches the reference ?<|im_end|>\n<|im_start|>assistant\n";
/// The same prompt without the image.
pub const TEXT_PROMPT: &str = "<|im_start|>user\nwhich line matches the reference ?<|im_end|>\n<|im_start|>assistant\n";

/// 32 wide, 24 high: already smart_resize's size (multiples of 8, 768 pixels within [256, 4096]), so
/// preprocessing does not resample and should equal transformers' to float rounding. Patch grid 6×8,
/// 12 image tokens.
pub fn image() -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(32, 24, |x, y| {
        Rgb([(x * 8) as u8, (y * 10) as u8, ((x * y) % 256) as u8])
    }))
}

fn id_of(token: &str) -> u32 {
    WORDS.iter().chain(SPECIALS.iter()).position(|w| *w == token).expect("known token") as u32
}

pub fn tokenizer_json() -> String {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::{AddedToken, Tokenizer};
    let vocab: serde_json::Map<String, Value> =
        WORDS.iter().chain(SPECIALS.iter()).enumerate().map(|(i, w)| (w.to_string(), json!(i))).collect();
    let model: WordLevel =
        serde_json::from_str(&json!({"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}).to_string())
            .expect("word-level model");
    let mut tok = Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace));
    tok.add_special_tokens(SPECIALS.iter().map(|s| AddedToken::from(*s, true))).expect("special tokens");
    tok.to_string(true).expect("serialise tokenizer")
}

pub fn config_json() -> Value {
    json!({
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "image_token_id": id_of("<|image_pad|>"),
        "model_type": "qwen3_vl",
        "text_config": {
            "attention_bias": false,
            "attention_dropout": 0.0,
            "bos_token_id": id_of("<|endoftext|>"),
            "dtype": "float32",
            "eos_token_id": id_of("<|im_end|>"),
            "head_dim": T_HEAD_DIM,
            "hidden_act": "silu",
            "hidden_size": T_HIDDEN,
            "initializer_range": 0.02,
            "intermediate_size": T_INTER,
            "max_position_embeddings": 4096,
            "model_type": "qwen3_vl_text",
            "num_attention_heads": T_HEADS,
            "num_hidden_layers": T_LAYERS,
            "num_key_value_heads": T_KV,
            "rms_norm_eps": 1e-6,
            "rope_scaling": {"mrope_interleaved": true, "mrope_section": [2, 1, 1], "rope_type": "default"},
            "rope_theta": 5000000,
            "tie_word_embeddings": false,
            "use_cache": true,
            "vocab_size": VOCAB
        },
        "tie_word_embeddings": false,
        "torch_dtype": "float32",
        "transformers_version": "4.57.0",
        "video_token_id": id_of("<|video_pad|>"),
        "vision_config": {
            "deepstack_visual_indexes": DEEPSTACK,
            "depth": V_DEPTH,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": V_HIDDEN,
            "in_channels": 3,
            "initializer_range": 0.02,
            "intermediate_size": V_INTER,
            "model_type": "qwen3_vl",
            "num_heads": V_HEADS,
            "num_position_embeddings": POS_EMB,
            "out_hidden_size": T_HIDDEN,
            "patch_size": PATCH,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": TEMPORAL
        },
        "vision_end_token_id": id_of("<|vision_end|>"),
        "vision_start_token_id": id_of("<|vision_start|>")
    })
}

/// The slow (PIL/numpy) processor, which herd follows; the fast one resamples differently.
pub fn preprocessor_json() -> Value {
    json!({
        "size": {"longest_edge": 4096, "shortest_edge": 256},
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL,
        "merge_size": MERGE,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "do_resize": true,
        "do_rescale": true,
        "rescale_factor": 1.0 / 255.0,
        "do_normalize": true,
        "do_convert_rgb": true,
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessor"
    })
}

pub fn tokenizer_config_json() -> Value {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": "[UNK]",
        "clean_up_tokenization_spaces": false,
        "model_max_length": 4096
    })
}

/// Names and shapes of every tensor, as in the Hugging Face checkpoints.
fn tensor_specs() -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, shape: &[usize]| v.push((name, shape.to_vec()));
    let lm = "model.language_model";
    add(format!("{lm}.embed_tokens.weight"), &[VOCAB, T_HIDDEN]);
    add(format!("{lm}.norm.weight"), &[T_HIDDEN]);
    for i in 0..T_LAYERS {
        let p = format!("{lm}.layers.{i}");
        add(format!("{p}.input_layernorm.weight"), &[T_HIDDEN]);
        add(format!("{p}.post_attention_layernorm.weight"), &[T_HIDDEN]);
        add(format!("{p}.self_attn.q_proj.weight"), &[T_HEADS * T_HEAD_DIM, T_HIDDEN]);
        add(format!("{p}.self_attn.k_proj.weight"), &[T_KV * T_HEAD_DIM, T_HIDDEN]);
        add(format!("{p}.self_attn.v_proj.weight"), &[T_KV * T_HEAD_DIM, T_HIDDEN]);
        add(format!("{p}.self_attn.o_proj.weight"), &[T_HIDDEN, T_HEADS * T_HEAD_DIM]);
        add(format!("{p}.self_attn.q_norm.weight"), &[T_HEAD_DIM]);
        add(format!("{p}.self_attn.k_norm.weight"), &[T_HEAD_DIM]);
        add(format!("{p}.mlp.gate_proj.weight"), &[T_INTER, T_HIDDEN]);
        add(format!("{p}.mlp.up_proj.weight"), &[T_INTER, T_HIDDEN]);
        add(format!("{p}.mlp.down_proj.weight"), &[T_HIDDEN, T_INTER]);
    }
    add("lm_head.weight".into(), &[VOCAB, T_HIDDEN]);
    let vis = "model.visual";
    add(format!("{vis}.patch_embed.proj.weight"), &[V_HIDDEN, 3, TEMPORAL, PATCH, PATCH]);
    add(format!("{vis}.patch_embed.proj.bias"), &[V_HIDDEN]);
    add(format!("{vis}.pos_embed.weight"), &[POS_EMB, V_HIDDEN]);
    for i in 0..V_DEPTH {
        let p = format!("{vis}.blocks.{i}");
        for n in ["norm1", "norm2"] {
            add(format!("{p}.{n}.weight"), &[V_HIDDEN]);
            add(format!("{p}.{n}.bias"), &[V_HIDDEN]);
        }
        add(format!("{p}.attn.qkv.weight"), &[3 * V_HIDDEN, V_HIDDEN]);
        add(format!("{p}.attn.qkv.bias"), &[3 * V_HIDDEN]);
        add(format!("{p}.attn.proj.weight"), &[V_HIDDEN, V_HIDDEN]);
        add(format!("{p}.attn.proj.bias"), &[V_HIDDEN]);
        add(format!("{p}.mlp.linear_fc1.weight"), &[V_INTER, V_HIDDEN]);
        add(format!("{p}.mlp.linear_fc1.bias"), &[V_INTER]);
        add(format!("{p}.mlp.linear_fc2.weight"), &[V_HIDDEN, V_INTER]);
        add(format!("{p}.mlp.linear_fc2.bias"), &[V_HIDDEN]);
    }
    let merged = V_HIDDEN * MERGE * MERGE;
    let mut merger = |p: String, norm_dim: usize| {
        add(format!("{p}.norm.weight"), &[norm_dim]);
        add(format!("{p}.norm.bias"), &[norm_dim]);
        add(format!("{p}.linear_fc1.weight"), &[merged, merged]);
        add(format!("{p}.linear_fc1.bias"), &[merged]);
        add(format!("{p}.linear_fc2.weight"), &[T_HIDDEN, merged]);
        add(format!("{p}.linear_fc2.bias"), &[T_HIDDEN]);
    };
    merger(format!("{vis}.merger"), V_HIDDEN);
    for i in 0..DEEPSTACK.len() {
        merger(format!("{vis}.deepstack_merger_list.{i}"), merged);
    }
    v
}

/// SplitMix64: uniform in [-1, 1) from the top 24 bits.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// The tensors (name → shape, data): norm weights near 1, the rest uniform with std 1/sqrt(fan_in)
/// (embeddings 0.5, biases 0.1).
pub fn tensors(seed: u64) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let mut rng = SplitMix(seed);
    let sqrt3 = 3f32.sqrt();
    tensor_specs()
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let fan_in: usize = shape[1..].iter().product::<usize>().max(1);
            let is_norm = name.contains("norm") && name.ends_with(".weight");
            let std = if name.ends_with(".bias") {
                0.1
            } else if name.contains("embed_tokens") || name.contains("pos_embed") {
                0.5
            } else {
                1.0 / (fan_in as f32).sqrt()
            };
            let data = (0..n)
                .map(|_| if is_norm { 1.0 + 0.1 * sqrt3 * rng.next() } else { std * sqrt3 * rng.next() })
                .collect();
            (name, (shape, data))
        })
        .collect()
}

/// f32 tensors in name order, with `{"format": "pt"}` metadata as torch writes.
pub fn safetensors_bytes(tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut offset = 0usize;
    for (name, (shape, data)) in tensors {
        let end = offset + 4 * data.len();
        header.insert(name.clone(), json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, end]}));
        offset = end;
    }
    let mut header = serde_json::to_vec(&Value::Object(header)).expect("json");
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for (_, data) in tensors.values() {
        for x in data {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("json");
    s.push('\n');
    s.into_bytes()
}

/// Writes the checkpoint folder at `dir`.
pub fn write_checkpoint(dir: &Path, seed: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), pretty(&config_json()))?;
    std::fs::write(dir.join("preprocessor_config.json"), pretty(&preprocessor_json()))?;
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json())?;
    std::fs::write(dir.join("tokenizer_config.json"), pretty(&tokenizer_config_json()))?;
    std::fs::write(dir.join("model.safetensors"), safetensors_bytes(&tensors(seed)))
}

/// Writes `out/qwen3_vl/` (the checkpoint), `out/image.png` and `out/inputs.json`: the seed, the
/// expanded token ids with and without the image, the grid, and herd's pixel values of the image.
pub fn write_all(out: &Path, seed: u64) -> Result<(), Box<dyn std::error::Error>> {
    let dir = out.join("qwen3_vl");
    write_checkpoint(&dir, seed)?;
    image().save(out.join("image.png"))?;
    let model = herd_vision::Qwen3Vl::load(&dir, &candle_core::Device::Cpu, candle_core::DType::F32)?;
    // What herd sees: the image decoded back from the PNG.
    let prepared = model.preprocess(&image::open(out.join("image.png"))?)?;
    let ids = model.expand_image_tokens(&model.encode(PROMPT)?, &prepared)?;
    let text_ids = model.encode(TEXT_PROMPT)?;
    let pixels: Vec<Vec<f32>> = prepared.pixel_values().to_vec2()?;
    let inputs = json!({
        "seed": seed,
        "token_ids": ids,
        "text_token_ids": text_ids,
        "grid_thw": prepared.grid_thw(),
        "herd_pixel_values": pixels,
    });
    std::fs::write(out.join("inputs.json"), pretty(&inputs))?;
    Ok(())
}
