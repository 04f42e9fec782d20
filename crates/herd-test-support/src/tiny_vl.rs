//! Tiny, deterministic checkpoints of the VL families, for tests and golden values: config.json
//! with the released files' keys, safetensors with the released tensor names and random weights, a
//! word-level tokenizer with the family's special tokens, the processor settings and a chat template
//! (Qwen2.5-VL's for the Qwen families, Gemma 3's own; Gemma 3's sizes are in [`gemma3`]).
//!
//! Used by herd-vision's tests, by its `examples/write_tiny_vl.rs` (which writes what
//! `tests/golden/tiny_transformers.py` and `tests/golden/tiny_qwen2_vl.py` run through HF transformers,
//! through its `tests/support/vl_golden.rs`) and by other crates' end-to-end tests, so that there is one
//! writer. Families are named by config.json's `model_type` ([`FAMILIES`]). The same seed gives
//! byte-identical files: weights come from a SplitMix64 stream and are written in name order by a hand-rolled
//! safetensors writer ([`safetensors_bytes`]); JSON goes through serde_json.

use std::collections::BTreeMap;
use std::path::Path;

use image::{DynamicImage, Rgb, RgbImage};
use serde_json::{Value, json};

/// Every family's config.json `model_type`, the key of this module's functions (herd-vision's
/// `VlFamily::model_type`, so that this crate need not depend on herd-vision).
pub const FAMILIES: [&str; 5] = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3", "mistral3"];

/// The family a `model_type` names, for the writers' own branching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Qwen2Vl,
    Qwen2_5Vl,
    Qwen3Vl,
    Gemma3,
    Mistral3,
}

impl Family {
    const ALL: [Family; 5] = [Family::Qwen2Vl, Family::Qwen2_5Vl, Family::Qwen3Vl, Family::Gemma3, Family::Mistral3];

    /// The family of `model_type`; panics on any other string, naming the known ones.
    fn of(model_type: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|f| f.model_type() == model_type)
            .unwrap_or_else(|| panic!("tiny_vl: unknown model_type {model_type:?}, expected one of {FAMILIES:?}"))
    }

    fn model_type(self) -> &'static str {
        FAMILIES[self as usize]
    }

    fn is_qwen2(self) -> bool {
        matches!(self, Family::Qwen2Vl | Family::Qwen2_5Vl)
    }
}

pub mod gemma3;
pub mod mistral3;

/// The seed of the committed golden values.
pub const SEED: u64 = 20_250_611;

/// Rows of the embedding (more than the tokenizer's words, as in real checkpoints).
pub const VOCAB: usize = 64;
const T_HIDDEN: usize = 32;
const T_LAYERS: usize = 3;
const T_HEADS: usize = 4;
const T_KV: usize = 2;
/// hidden / heads: Qwen2 models have no head_dim key, and Qwen3-VL's tiny config states the same.
const T_HEAD_DIM: usize = 8;
const T_INTER: usize = 48;
const V_DEPTH: usize = 3;
const V_HIDDEN: usize = 16;
const V_HEADS: usize = 2;
const V_INTER: usize = 24;
const PATCH: usize = 4;
const MERGE: usize = 2;
const TEMPORAL: usize = 2;
/// Qwen3-VL: a 4×4 learned position grid, interpolated to the image's patch grid.
const POS_EMB: usize = 16;
const DEEPSTACK: [usize; 2] = [0, 2];
/// Qwen2.5-VL: windows of 16 pixels = 2×2 merged tokens, so the test image's 3×4 tokens make four
/// windows, two of them cut short; block 1 attends over the whole image.
const WINDOW: usize = 16;
const FULL_ATTENTION: [usize; 1] = [1];

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
const SPECIALS: [&str; 8] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_pad|>",
];

/// The family's test prompt with one unexpanded image marker ([`PROMPT`], [`gemma3::PROMPT`] or
/// [`mistral3::PROMPT`]).
pub fn prompt(model_type: &str) -> &'static str {
    let family = Family::of(model_type);
    match family {
        Family::Gemma3 => gemma3::PROMPT,
        Family::Mistral3 => mistral3::PROMPT,
        _ => PROMPT,
    }
}

/// The family's test prompt without an image.
pub fn text_prompt(model_type: &str) -> &'static str {
    let family = Family::of(model_type);
    match family {
        Family::Gemma3 => gemma3::TEXT_PROMPT,
        Family::Mistral3 => mistral3::TEXT_PROMPT,
        _ => TEXT_PROMPT,
    }
}

/// The prompt, with one unexpanded `<|image_pad|>`.
pub const PROMPT: &str = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>which line matches the reference ?<|im_end|>\n<|im_start|>assistant\n";
/// The same prompt without the image.
pub const TEXT_PROMPT: &str = "<|im_start|>user\nwhich line matches the reference ?<|im_end|>\n<|im_start|>assistant\n";

/// Qwen2-VL's and Qwen2.5-VL's chat template (`chat_template.json` of the released checkpoints).
pub const CHAT_TEMPLATE: &str = include_str!("../../../data/chat-templates/qwen2.5-vl.jinja");

/// 32 wide, 24 high: already smart_resize's size (multiples of 8, 768 pixels within [256, 4096]), so
/// preprocessing does not resample. Patch grid 6×8, 12 image tokens.
pub fn image() -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(32, 24, |x, y| {
        Rgb([(x * 8) as u8, (y * 10) as u8, ((x * y) % 256) as u8])
    }))
}

/// How a tiny checkpoint is written.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Two shards (vision, language) and model.safetensors.index.json instead of model.safetensors.
    pub sharded: bool,
    /// lm_head tied to the embedding (no lm_head tensor; `tie_word_embeddings: true`).
    pub tie: bool,
    /// Leave this tensor out (to test the error naming it).
    pub skip_tensor: Option<&'static str>,
    /// Qwen2-VL / Qwen2.5-VL: the names transformers >= 4.52 saves (`model.visual.*`,
    /// `model.language_model.*`) instead of the released ones (`visual.*`, `model.*`).
    pub nested_names: bool,
}

/// One file, released names, untied.
pub const DEFAULT: Options = Options { sharded: false, tie: false, skip_tensor: None, nested_names: false };

/// config.json's `model_type` (checked), also the folder name the golden writers use.
pub fn folder(model_type: &str) -> &'static str {
    Family::of(model_type).model_type()
}

/// The token's id in the tiny vocabulary.
pub fn id_of(token: &str) -> u32 {
    WORDS.iter().chain(SPECIALS.iter()).position(|w| *w == token).expect("known token") as u32
}

/// A word-level tokenizer over the words and Qwen's special tokens, whitespace pre-tokenized.
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

fn text_keys(tie: bool) -> Value {
    json!({
        "attention_dropout": 0.0,
        "bos_token_id": id_of("<|endoftext|>"),
        "eos_token_id": id_of("<|im_end|>"),
        "hidden_act": "silu",
        "hidden_size": T_HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": T_INTER,
        "max_position_embeddings": 4096,
        "num_attention_heads": T_HEADS,
        "num_hidden_layers": T_LAYERS,
        "num_key_value_heads": T_KV,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": tie,
        "use_cache": true,
        "vocab_size": VOCAB
    })
}

fn merge_into(target: &mut Value, extra: Value) {
    let obj = target.as_object_mut().expect("object");
    for (k, v) in extra.as_object().expect("object") {
        obj.insert(k.clone(), v.clone());
    }
}

/// config.json as each family's released files lay it out: Qwen3-VL nested, Qwen2-VL and Qwen2.5-VL flat
/// (text keys at the top level, `rope_scaling` with `"type": "mrope"`, `in_chans`).
pub fn config_json(model_type: &str, tie: bool) -> Value {
    let family = Family::of(model_type);
    if family == Family::Gemma3 {
        return gemma3::config_json(tie);
    }
    let ids = json!({
        "image_token_id": id_of("<|image_pad|>"),
        "video_token_id": id_of("<|video_pad|>"),
        "vision_start_token_id": id_of("<|vision_start|>"),
        "vision_end_token_id": id_of("<|vision_end|>"),
        "tie_word_embeddings": tie,
        "model_type": family.model_type(),
        "torch_dtype": "float32",
    });
    let mut c = match family {
        Family::Mistral3 => return mistral3::config_json(tie),
        Family::Qwen3Vl => {
            let mut text = text_keys(tie);
            merge_into(
                &mut text,
                json!({
                    "attention_bias": false,
                    "dtype": "float32",
                    "head_dim": T_HEAD_DIM,
                    "model_type": "qwen3_vl_text",
                    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [2, 1, 1], "rope_type": "default"},
                    "rope_theta": 5000000
                }),
            );
            json!({
                "architectures": ["Qwen3VLForConditionalGeneration"],
                "text_config": text,
                "transformers_version": "4.57.0",
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
                }
            })
        }
        // (Gemma 3 returned above.)
        Family::Qwen2Vl | Family::Qwen2_5Vl | Family::Gemma3 => {
            let mut c = text_keys(tie);
            let (arch, vision) = if family == Family::Qwen2Vl {
                (
                    "Qwen2VLForConditionalGeneration",
                    json!({"depth": V_DEPTH, "embed_dim": V_HIDDEN, "mlp_ratio": 4, "num_heads": V_HEADS,
                           "in_chans": 3, "hidden_size": T_HIDDEN, "patch_size": PATCH,
                           "spatial_merge_size": MERGE, "spatial_patch_size": PATCH,
                           "temporal_patch_size": TEMPORAL}),
                )
            } else {
                (
                    "Qwen2_5_VLForConditionalGeneration",
                    json!({"depth": V_DEPTH, "hidden_act": "silu", "hidden_size": V_HIDDEN,
                           "intermediate_size": V_INTER, "num_heads": V_HEADS, "in_chans": 3,
                           "out_hidden_size": T_HIDDEN, "patch_size": PATCH, "spatial_merge_size": MERGE,
                           "spatial_patch_size": PATCH, "window_size": WINDOW,
                           "fullatt_block_indexes": FULL_ATTENTION, "tokens_per_second": 2,
                           "temporal_patch_size": TEMPORAL}),
                )
            };
            merge_into(
                &mut c,
                json!({
                    "architectures": [arch],
                    "vision_token_id": id_of("<|vision_pad|>"),
                    "max_window_layers": T_LAYERS,
                    "rope_theta": 1000000.0,
                    "sliding_window": 4096,
                    "use_sliding_window": false,
                    "transformers_version": "4.41.2",
                    "vision_config": vision,
                    "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}
                }),
            );
            c
        }
    };
    merge_into(&mut c, ids);
    c
}

/// The slow (PIL) processor's settings at the tiny patch size.
pub fn preprocessor_json(model_type: &str) -> Value {
    let family = Family::of(model_type);
    let processor = match family {
        Family::Qwen2Vl => "Qwen2VLProcessor",
        Family::Qwen2_5Vl => "Qwen2_5_VLProcessor",
        Family::Qwen3Vl => "Qwen3VLProcessor",
        Family::Gemma3 => return gemma3::preprocessor_json(),
        Family::Mistral3 => return mistral3::preprocessor_json(),
    };
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
        "processor_class": processor,
        "image_processor_type": "Qwen2VLImageProcessor"
    })
}

pub fn tokenizer_config_json() -> Value {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": null,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": "[UNK]",
        "clean_up_tokenization_spaces": false,
        "model_max_length": 4096
    })
}

/// Names and shapes of every tensor, as in the Hugging Face checkpoints, in generation order.
fn tensor_specs(family: Family, nested: bool) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, shape: &[usize]| v.push((name, shape.to_vec()));
    let (lm, vis) = if nested || family == Family::Qwen3Vl {
        ("model.language_model", "model.visual")
    } else {
        ("model", "visual")
    };
    let qwen2 = family.is_qwen2();
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
        if qwen2 {
            add(format!("{p}.self_attn.q_proj.bias"), &[T_HEADS * T_HEAD_DIM]);
            add(format!("{p}.self_attn.k_proj.bias"), &[T_KV * T_HEAD_DIM]);
            add(format!("{p}.self_attn.v_proj.bias"), &[T_KV * T_HEAD_DIM]);
        } else {
            add(format!("{p}.self_attn.q_norm.weight"), &[T_HEAD_DIM]);
            add(format!("{p}.self_attn.k_norm.weight"), &[T_HEAD_DIM]);
        }
        add(format!("{p}.mlp.gate_proj.weight"), &[T_INTER, T_HIDDEN]);
        add(format!("{p}.mlp.up_proj.weight"), &[T_INTER, T_HIDDEN]);
        add(format!("{p}.mlp.down_proj.weight"), &[T_HIDDEN, T_INTER]);
    }
    add("lm_head.weight".into(), &[VOCAB, T_HIDDEN]);
    add(format!("{vis}.patch_embed.proj.weight"), &[V_HIDDEN, 3, TEMPORAL, PATCH, PATCH]);
    if !qwen2 {
        add(format!("{vis}.patch_embed.proj.bias"), &[V_HIDDEN]);
        add(format!("{vis}.pos_embed.weight"), &[POS_EMB, V_HIDDEN]);
    }
    let rms = family == Family::Qwen2_5Vl;
    let inter = if family == Family::Qwen2Vl { 4 * V_HIDDEN } else { V_INTER };
    let linear = |add: &mut dyn FnMut(String, &[usize]), p: String, out: usize, inp: usize| {
        add(format!("{p}.weight"), &[out, inp]);
        add(format!("{p}.bias"), &[out]);
    };
    for i in 0..V_DEPTH {
        let p = format!("{vis}.blocks.{i}");
        for n in ["norm1", "norm2"] {
            add(format!("{p}.{n}.weight"), &[V_HIDDEN]);
            if !rms {
                add(format!("{p}.{n}.bias"), &[V_HIDDEN]);
            }
        }
        linear(&mut add, format!("{p}.attn.qkv"), 3 * V_HIDDEN, V_HIDDEN);
        linear(&mut add, format!("{p}.attn.proj"), V_HIDDEN, V_HIDDEN);
        match family {
            Family::Qwen3Vl => {
                linear(&mut add, format!("{p}.mlp.linear_fc1"), inter, V_HIDDEN);
                linear(&mut add, format!("{p}.mlp.linear_fc2"), V_HIDDEN, inter);
            }
            Family::Qwen2Vl => {
                linear(&mut add, format!("{p}.mlp.fc1"), inter, V_HIDDEN);
                linear(&mut add, format!("{p}.mlp.fc2"), V_HIDDEN, inter);
            }
            // (Gemma 3's and Mistral3's tensors are their own modules'; `tensors` never asks for them here.)
            Family::Qwen2_5Vl | Family::Gemma3 | Family::Mistral3 => {
                linear(&mut add, format!("{p}.mlp.gate_proj"), inter, V_HIDDEN);
                linear(&mut add, format!("{p}.mlp.up_proj"), inter, V_HIDDEN);
                linear(&mut add, format!("{p}.mlp.down_proj"), V_HIDDEN, inter);
            }
        }
    }
    let merged = V_HIDDEN * MERGE * MERGE;
    let mut merger = |p: String, names: [&str; 3], norm_dim: usize| {
        add(format!("{p}.{}.weight", names[0]), &[norm_dim]);
        if !rms {
            add(format!("{p}.{}.bias", names[0]), &[norm_dim]);
        }
        add(format!("{p}.{}.weight", names[1]), &[merged, merged]);
        add(format!("{p}.{}.bias", names[1]), &[merged]);
        add(format!("{p}.{}.weight", names[2]), &[T_HIDDEN, merged]);
        add(format!("{p}.{}.bias", names[2]), &[T_HIDDEN]);
    };
    if qwen2 {
        merger(format!("{vis}.merger"), ["ln_q", "mlp.0", "mlp.2"], V_HIDDEN);
    } else {
        merger(format!("{vis}.merger"), ["norm", "linear_fc1", "linear_fc2"], V_HIDDEN);
        for i in 0..DEEPSTACK.len() {
            merger(format!("{vis}.deepstack_merger_list.{i}"), ["norm", "linear_fc1", "linear_fc2"], merged);
        }
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

/// Tensors as name → (shape, row-major f32 data).
pub type Tensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// The tensors: norm weights near 1, the rest uniform with std 1/sqrt(fan_in) (embeddings 0.5, biases
/// 0.1, Qwen2's q/k/v biases 0.5 so that they matter, as the real ones do). Each family draws from its
/// own stream (Qwen3-VL's is the seed itself, as its committed golden values were written with), and a
/// tied or skipped tensor is drawn and dropped, so the others keep their values.
pub fn tensors(model_type: &str, seed: u64, opts: &Options) -> Tensors {
    let family = Family::of(model_type);
    let stream = match family {
        Family::Gemma3 => return gemma3::tensors(seed, opts),
        Family::Qwen3Vl => seed,
        Family::Qwen2Vl => seed ^ 0x5157_454e_3256_4c00,
        Family::Qwen2_5Vl => seed ^ 0x5157_454e_3235_564c,
        Family::Mistral3 => return mistral3::tensors(seed, opts),
    };
    let mut rng = SplitMix(stream);
    let sqrt3 = 3f32.sqrt();
    tensor_specs(family, opts.nested_names)
        .into_iter()
        .filter_map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let fan_in: usize = shape[1..].iter().product::<usize>().max(1);
            let is_norm = (name.contains("norm") || name.contains("ln_q")) && name.ends_with(".weight");
            let std = if name.ends_with(".bias") && name.contains("self_attn") {
                0.5
            } else if name.ends_with(".bias") {
                0.1
            } else if name.contains("embed_tokens") || name.contains("pos_embed") {
                0.5
            } else {
                1.0 / (fan_in as f32).sqrt()
            };
            let data: Vec<f32> = (0..n)
                .map(|_| if is_norm { 1.0 + 0.1 * sqrt3 * rng.next() } else { std * sqrt3 * rng.next() })
                .collect();
            let dropped = (opts.tie && name == "lm_head.weight") || opts.skip_tensor == Some(name.as_str());
            (!dropped).then_some((name, (shape, data)))
        })
        .collect()
}

/// f32 tensors in name order, with `{"format": "pt"}` metadata as torch writes.
pub fn safetensors_bytes(tensors: &Tensors) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut offset = 0usize;
    for (name, (shape, data)) in tensors {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "{name}");
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

/// Largest |a − b| of two vectors compared against golden values; infinite where either value is not
/// finite or the lengths differ, so a broken comparison never passes a tolerance.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| if x.is_finite() && y.is_finite() { (x - y).abs() } else { f32::INFINITY })
        .fold(0.0, f32::max)
}

/// Pretty JSON with a final newline, as written to every file here.
pub fn pretty(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("json");
    s.push('\n');
    s.into_bytes()
}

/// Writes the checkpoint folder at `dir` (created if needed).
pub fn write_checkpoint(dir: &Path, model_type: &str, seed: u64, opts: &Options) -> std::io::Result<()> {
    let family = Family::of(model_type);
    if family == Family::Mistral3 {
        return mistral3::write_checkpoint(dir, seed, opts);
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), pretty(&config_json(model_type, opts.tie)))?;
    std::fs::write(dir.join("preprocessor_config.json"), pretty(&preprocessor_json(model_type)))?;
    let gemma = family == Family::Gemma3;
    let (tokenizer, tokenizer_config, template) = if gemma {
        (gemma3::tokenizer_json(), gemma3::tokenizer_config_json(), gemma3::CHAT_TEMPLATE)
    } else {
        (tokenizer_json(), tokenizer_config_json(), CHAT_TEMPLATE)
    };
    std::fs::write(dir.join("tokenizer.json"), tokenizer)?;
    std::fs::write(dir.join("tokenizer_config.json"), pretty(&tokenizer_config))?;
    std::fs::write(dir.join("chat_template.json"), pretty(&json!({ "chat_template": template })))?;
    if gemma {
        std::fs::write(dir.join("generation_config.json"), pretty(&gemma3::generation_config_json()))?;
    }
    let all = tensors(model_type, seed, opts);
    if !opts.sharded {
        return std::fs::write(dir.join("model.safetensors"), safetensors_bytes(&all));
    }
    let shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
    let (vision, language): (Tensors, Tensors) =
        all.into_iter().partition(|(n, _)| n.contains("visual.") || n.contains("vision_tower."));
    let mut weight_map = serde_json::Map::new();
    for (shard, part) in shards.iter().zip([&vision, &language]) {
        for name in part.keys() {
            weight_map.insert(name.clone(), json!(shard));
        }
        std::fs::write(dir.join(shard), safetensors_bytes(part))?;
    }
    let index = json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(dir.join("model.safetensors.index.json"), pretty(&index))
}
