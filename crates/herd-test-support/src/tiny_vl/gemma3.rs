//! The tiny Gemma 3 checkpoint: config.json with the released file's keys (few text keys, the rest
//! transformers' defaults; `rope_scaling` linear factor 8; no `layer_types`, so the default pattern makes
//! layers 0–4 sliding and 5 global), the released tensor names (`language_model.model.*`,
//! `vision_tower.vision_model.*`, `multi_modal_projector.*`), Gemma's special tokens and chat template.
//!
//! Sizes: a 32-pixel image in patches of 4 (8×8 patches) average-pooled by 4 to 2×2 = 4 image tokens; a
//! sliding window of 6 tokens, longer than the image and shorter than the prompts; head_dim 16 with 4
//! heads on a width of 32 and `query_pre_attn_scalar` 12, so no size stands in for another.

use serde_json::{Value, json};

use super::{Options, SplitMix, Tensors};

/// Rows of the embedding.
pub const VOCAB: usize = 64;
const T_HIDDEN: usize = 32;
const T_LAYERS: usize = 6;
const T_HEADS: usize = 4;
const T_KV: usize = 2;
const T_HEAD_DIM: usize = 16;
const T_INTER: usize = 48;
const QUERY_PRE_ATTN_SCALAR: usize = 12;
/// Tokens a sliding layer sees (its own and the 5 before).
pub const SLIDING_WINDOW: usize = 6;
const V_LAYERS: usize = 2;
const V_HIDDEN: usize = 16;
const V_HEADS: usize = 2;
const V_INTER: usize = 24;
/// The processor's square size and the tower's `image_size`.
pub const IMAGE_SIZE: usize = 32;
const PATCH: usize = 4;
/// Image tokens after pooling.
pub const MM_TOKENS: usize = 4;

/// Gemma's special tokens, pad/eos/bos/unk at Gemma's ids 0–3.
const SPECIALS: [&str; 9] = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
];
/// `\n\n` is one token in Gemma's vocabulary; here an added (not special) token, so that the processor's
/// newlines around the image show in the ids (the word-level tokenizer drops other whitespace).
const NEWLINES: &str = "\n\n";
const WORDS: [&str; 16] = [
    "user",
    "model",
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
    "green",
];

/// The prompt as Gemma's chat template renders one user turn with an image and the question.
pub const PROMPT: &str =
    "<bos><start_of_turn>user\n<start_of_image>which line matches the reference ?<end_of_turn>\n<start_of_turn>model\n";
/// The same prompt without the image.
pub const TEXT_PROMPT: &str =
    "<bos><start_of_turn>user\nwhich line matches the reference ?<end_of_turn>\n<start_of_turn>model\n";

/// Gemma 3's chat template (`google/gemma-3-*-it`).
pub const CHAT_TEMPLATE: &str = include_str!("../../../../data/chat-templates/gemma3.jinja");

/// The token's id in the tiny vocabulary.
pub fn id_of(token: &str) -> u32 {
    SPECIALS.iter().chain([NEWLINES].iter()).chain(WORDS.iter()).position(|w| *w == token).expect("known token") as u32
}

pub(super) fn tokenizer_json() -> String {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::{AddedToken, Tokenizer};
    let vocab: serde_json::Map<String, Value> = SPECIALS
        .iter()
        .chain([NEWLINES].iter())
        .chain(WORDS.iter())
        .enumerate()
        .map(|(i, w)| (w.to_string(), json!(i)))
        .collect();
    let model: WordLevel =
        serde_json::from_str(&json!({"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}).to_string())
            .expect("word-level model");
    let mut tok = Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace));
    tok.add_special_tokens(SPECIALS.iter().map(|s| AddedToken::from(*s, true))).expect("special tokens");
    tok.add_tokens([AddedToken::from(NEWLINES, false).normalized(false)]).expect("added token");
    tok.to_string(true).expect("serialise tokenizer")
}

pub(super) fn tokenizer_config_json() -> Value {
    let extra =
        json!({"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"});
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "boi_token": "<start_of_image>",
        "eoi_token": "<end_of_image>",
        "image_token": "<image_soft_token>",
        "extra_special_tokens": extra,
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_max_length": 4096,
        "processor_class": "Gemma3Processor"
    })
}

/// `generation_config.json`: Gemma 3 stops at `<eos>` or `<end_of_turn>`.
pub(super) fn generation_config_json() -> Value {
    json!({"bos_token_id": id_of("<bos>"), "eos_token_id": [id_of("<eos>"), id_of("<end_of_turn>")],
           "pad_token_id": id_of("<pad>")})
}

/// config.json in the released files' shape.
pub fn config_json(tie: bool) -> Value {
    json!({
        "architectures": ["Gemma3ForConditionalGeneration"],
        "boi_token_index": id_of("<start_of_image>"),
        "eoi_token_index": id_of("<end_of_image>"),
        "eos_token_id": [id_of("<eos>"), id_of("<end_of_turn>")],
        "image_token_index": id_of("<image_soft_token>"),
        "initializer_range": 0.02,
        "mm_tokens_per_image": MM_TOKENS,
        "model_type": "gemma3",
        "text_config": {
            "head_dim": T_HEAD_DIM,
            "hidden_size": T_HIDDEN,
            "intermediate_size": T_INTER,
            "model_type": "gemma3_text",
            "num_attention_heads": T_HEADS,
            "num_hidden_layers": T_LAYERS,
            "num_key_value_heads": T_KV,
            "query_pre_attn_scalar": QUERY_PRE_ATTN_SCALAR,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": SLIDING_WINDOW,
            "tie_word_embeddings": tie,
            "vocab_size": VOCAB
        },
        "tie_word_embeddings": tie,
        "torch_dtype": "float32",
        "transformers_version": "4.50.0.dev0",
        "vision_config": {
            "hidden_size": V_HIDDEN,
            "image_size": IMAGE_SIZE,
            "intermediate_size": V_INTER,
            "model_type": "siglip_vision_model",
            "num_attention_heads": V_HEADS,
            "num_hidden_layers": V_LAYERS,
            "patch_size": PATCH,
            "vision_use_head": false
        }
    })
}

/// preprocessor_config.json as released (nulls included), at the tiny size.
pub fn preprocessor_json() -> Value {
    json!({
        "do_convert_rgb": null,
        "do_normalize": true,
        "do_pan_and_scan": null,
        "do_rescale": true,
        "do_resize": true,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Gemma3ImageProcessor",
        "image_seq_length": MM_TOKENS,
        "image_std": [0.5, 0.5, 0.5],
        "pan_and_scan_max_num_crops": null,
        "pan_and_scan_min_crop_size": null,
        "pan_and_scan_min_ratio_to_activate": null,
        "processor_class": "Gemma3Processor",
        "resample": 2,
        "rescale_factor": 1.0 / 255.0,
        "size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    })
}

/// Names and shapes, released names or (`nested`) transformers 5's.
fn tensor_specs(nested: bool) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, shape: &[usize]| v.push((name, shape.to_vec()));
    let (lm, head, vis, proj) = if nested {
        ("model.language_model", "lm_head", "model.vision_tower.vision_model", "model.multi_modal_projector")
    } else {
        ("language_model.model", "language_model.lm_head", "vision_tower.vision_model", "multi_modal_projector")
    };
    add(format!("{lm}.embed_tokens.weight"), &[VOCAB, T_HIDDEN]);
    add(format!("{lm}.norm.weight"), &[T_HIDDEN]);
    for i in 0..T_LAYERS {
        let p = format!("{lm}.layers.{i}");
        for n in
            ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"]
        {
            add(format!("{p}.{n}.weight"), &[T_HIDDEN]);
        }
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
    add(format!("{head}.weight"), &[VOCAB, T_HIDDEN]);
    let e = format!("{vis}.embeddings");
    add(format!("{e}.patch_embedding.weight"), &[V_HIDDEN, 3, PATCH, PATCH]);
    add(format!("{e}.patch_embedding.bias"), &[V_HIDDEN]);
    let patches = (IMAGE_SIZE / PATCH) * (IMAGE_SIZE / PATCH);
    add(format!("{e}.position_embedding.weight"), &[patches, V_HIDDEN]);
    let linear = |add: &mut dyn FnMut(String, &[usize]), p: String, out: usize, inp: usize| {
        add(format!("{p}.weight"), &[out, inp]);
        add(format!("{p}.bias"), &[out]);
    };
    for i in 0..V_LAYERS {
        let p = format!("{vis}.encoder.layers.{i}");
        for n in ["layer_norm1", "layer_norm2"] {
            add(format!("{p}.{n}.weight"), &[V_HIDDEN]);
            add(format!("{p}.{n}.bias"), &[V_HIDDEN]);
        }
        for n in ["q_proj", "k_proj", "v_proj", "out_proj"] {
            linear(&mut add, format!("{p}.self_attn.{n}"), V_HIDDEN, V_HIDDEN);
        }
        linear(&mut add, format!("{p}.mlp.fc1"), V_INTER, V_HIDDEN);
        linear(&mut add, format!("{p}.mlp.fc2"), V_HIDDEN, V_INTER);
    }
    add(format!("{vis}.post_layernorm.weight"), &[V_HIDDEN]);
    add(format!("{vis}.post_layernorm.bias"), &[V_HIDDEN]);
    add(format!("{proj}.mm_soft_emb_norm.weight"), &[V_HIDDEN]);
    add(format!("{proj}.mm_input_projection_weight"), &[V_HIDDEN, T_HIDDEN]);
    v
}

/// Gemma RMSNorm weights (the scale is 1 + w) near 0, LayerNorm weights near 1, biases 0.1, embeddings
/// 0.5, the rest std 1/sqrt(fan_in) (the projection's fan-in is its first dimension).
pub(super) fn tensors(seed: u64, opts: &Options) -> Tensors {
    let mut rng = SplitMix(seed ^ 0x4745_4d4d_4133_0000);
    let sqrt3 = 3f32.sqrt();
    tensor_specs(opts.nested_names)
        .into_iter()
        .filter_map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let fan_in = if name.ends_with("mm_input_projection_weight") {
                shape[0]
            } else {
                shape[1..].iter().product::<usize>().max(1)
            };
            let (centre, spread) = if name.contains("layer_norm") || name.contains("post_layernorm") {
                if name.ends_with(".bias") { (0.0, 0.1) } else { (1.0, 0.1) }
            } else if name.contains("norm") {
                (0.0, 0.2)
            } else if name.ends_with(".bias") {
                (0.0, 0.1)
            } else if name.contains("embed_tokens") || name.contains("position_embedding") {
                (0.0, 0.5)
            } else {
                (0.0, 1.0 / (fan_in as f32).sqrt())
            };
            let data: Vec<f32> = (0..n).map(|_| centre + spread * sqrt3 * rng.next()).collect();
            let is_head = name.ends_with("lm_head.weight");
            let dropped = (opts.tie && is_head) || opts.skip_tensor == Some(name.as_str());
            (!dropped).then_some((name, (shape, data)))
        })
        .collect()
}
