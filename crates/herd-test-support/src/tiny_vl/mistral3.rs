//! The tiny Mistral3 checkpoint: config.json as Mistral-Small-3.1's (a Mistral `text_config`, a Pixtral
//! `vision_config`, the projector keys at the top level), the released tensor names
//! (`language_model.model.*`, `language_model.lm_head`, `vision_tower.*`, `multi_modal_projector.*`;
//! `nested_names` gives transformers 5's), a word-level tokenizer whose special tokens have the released
//! ids (`<s>` 1, `</s>` 2, `[INST]` 3, `[/INST]` 4, `[IMG]` 10, `[IMG_BREAK]` 12, `[IMG_END]` 13), the
//! Pixtral processor settings and a Mistral chat template.
//!
//! Sizes: text width 32 with head_dim 12 (not 32 / 4 heads, as Mistral-Small's 128 is not 5120 / 32),
//! vision width 16 in 2 heads, patch 4, merge 2, longest edge 20: [`super::image`] (32×24) is resized to
//! 24×16, 4×6 patches, 2 rows of 3 image tokens, so `[IMG_BREAK]` and `[IMG_END]` both appear.

use std::path::Path;

use serde_json::{Value, json};

use super::{Options, SplitMix, Tensors, VOCAB, pretty, safetensors_bytes};

const T_HIDDEN: usize = 32;
const T_LAYERS: usize = 3;
const T_HEADS: usize = 4;
const T_KV: usize = 2;
const T_HEAD_DIM: usize = 12;
const T_INTER: usize = 48;
const V_DEPTH: usize = 2;
const V_HIDDEN: usize = 16;
const V_HEADS: usize = 2;
const V_INTER: usize = 24;
const PATCH: usize = 4;
const MERGE: usize = 2;
const LONGEST_EDGE: usize = 20;

/// The special tokens at their released ids (0–13), then the words.
const TOKENS: [&str; 29] = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "user",
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
const SPECIALS: usize = 16;

/// The prompt as the chat template renders it, with one unexpanded `[IMG]`.
pub const PROMPT: &str = "<s>[INST][IMG]which line matches the reference ?[/INST]";
/// The same prompt without the image.
pub const TEXT_PROMPT: &str = "<s>[INST]which line matches the reference ?[/INST]";

/// The chat template: the structure of Mistral-Small-3.1's (`<s>`, an optional `[SYSTEM_PROMPT]`,
/// `[INST]…[/INST]` with `[IMG]` where an image block is, assistant turns closed by `</s>`), without its
/// default system prompt and date (whose words the tiny vocabulary does not have). A real folder's own
/// template is what herd renders.
pub const CHAT_TEMPLATE: &str = r#"{%- if messages[0]['role'] == 'system' %}
    {%- if messages[0]['content'] is string %}
        {%- set system_message = messages[0]['content'] %}
    {%- else %}
        {%- set system_message = messages[0]['content'][0]['text'] %}
    {%- endif %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- if system_message is defined %}
    {{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if message['content'] is string %}
            {{- '[INST]' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST]' }}
            {%- for block in message['content'] %}
                {%- if block['type'] == 'text' %}
                    {{- block['text'] }}
                {%- elif block['type'] == 'image' or block['type'] == 'image_url' %}
                    {{- '[IMG]' }}
                {%- else %}
                    {{- raise_exception('Only text and image blocks are supported in message content!') }}
                {%- endif %}
            {%- endfor %}
            {{- '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'assistant' %}
        {%- if message['content'] is string %}
            {{- message['content'] + eos_token }}
        {%- else %}
            {{- message['content'][0]['text'] + eos_token }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Only user, system and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %}
"#;

/// The token's id in the tiny vocabulary.
pub fn id_of(token: &str) -> u32 {
    TOKENS.iter().position(|w| *w == token).expect("known token") as u32
}

/// A word-level tokenizer over the words and the special tokens, whitespace pre-tokenized.
pub fn tokenizer_json() -> String {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::{AddedToken, Tokenizer};
    let vocab: serde_json::Map<String, Value> =
        TOKENS.iter().enumerate().map(|(i, w)| (w.to_string(), json!(i))).collect();
    let model: WordLevel =
        serde_json::from_str(&json!({"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}).to_string())
            .expect("word-level model");
    let mut tok = Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace));
    tok.add_special_tokens(TOKENS[..SPECIALS].iter().map(|s| AddedToken::from(*s, true))).expect("special tokens");
    tok.to_string(true).expect("serialise tokenizer")
}

/// config.json, laid out as Mistral-Small-3.1's.
pub fn config_json(tie: bool) -> Value {
    json!({
        "architectures": ["Mistral3ForConditionalGeneration"],
        "image_token_index": id_of("[IMG]"),
        "model_type": "mistral3",
        "multimodal_projector_bias": false,
        "projector_hidden_act": "gelu",
        "spatial_merge_size": MERGE,
        "text_config": {
            "attention_dropout": 0.0,
            "bos_token_id": id_of("<s>"),
            "eos_token_id": id_of("</s>"),
            "head_dim": T_HEAD_DIM,
            "hidden_act": "silu",
            "hidden_size": T_HIDDEN,
            "initializer_range": 0.02,
            "intermediate_size": T_INTER,
            "max_position_embeddings": 4096,
            "model_type": "mistral",
            "num_attention_heads": T_HEADS,
            "num_hidden_layers": T_LAYERS,
            "num_key_value_heads": T_KV,
            "rms_norm_eps": 1e-5,
            "rope_theta": 1000000000.0,
            "sliding_window": null,
            "tie_word_embeddings": tie,
            "use_cache": true,
            "vocab_size": VOCAB
        },
        "tie_word_embeddings": tie,
        "torch_dtype": "float32",
        "transformers_version": "4.50.0.dev0",
        "vision_config": {
            "attention_dropout": 0.0,
            "head_dim": V_HIDDEN / V_HEADS,
            "hidden_act": "silu",
            "hidden_size": V_HIDDEN,
            "image_size": LONGEST_EDGE,
            "initializer_range": 0.02,
            "intermediate_size": V_INTER,
            "model_type": "pixtral",
            "num_attention_heads": V_HEADS,
            "num_channels": 3,
            "num_hidden_layers": V_DEPTH,
            "patch_size": PATCH,
            "rope_theta": 10000.0
        },
        "vision_feature_layer": -1
    })
}

/// preprocessor_config.json: Mistral-Small-3.1's with the tiny patch and longest edge.
pub fn preprocessor_json() -> Value {
    pixtral_preprocessor_json(PATCH, LONGEST_EDGE)
}

/// preprocessor_config.json of `mistralai/Mistral-Small-3.1-24B-Instruct-2503` (patch 14, longest edge
/// 1540), so that the stimuli are resized as the paper's model saw them.
pub fn released_preprocessor_json() -> Value {
    pixtral_preprocessor_json(14, 1540)
}

fn pixtral_preprocessor_json(patch: usize, longest_edge: usize) -> Value {
    json!({
        "crop_size": null,
        "do_center_crop": null,
        "do_convert_rgb": true,
        "do_normalize": true,
        "do_rescale": true,
        "do_resize": true,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_processor_type": "PixtralImageProcessor",
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "patch_size": {"height": patch, "width": patch},
        "processor_class": "PixtralProcessor",
        "resample": 3,
        "rescale_factor": 1.0 / 255.0,
        "size": {"longest_edge": longest_edge}
    })
}

/// processor_config.json (the `PixtralProcessor`'s own settings).
pub fn processor_json() -> Value {
    json!({
        "image_break_token": "[IMG_BREAK]",
        "image_end_token": "[IMG_END]",
        "image_token": "[IMG]",
        "patch_size": PATCH,
        "processor_class": "PixtralProcessor",
        "spatial_merge_size": MERGE
    })
}

pub fn tokenizer_config_json() -> Value {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "clean_up_tokenization_spaces": false,
        "model_max_length": 4096
    })
}

/// Names and shapes of every tensor, as in the released checkpoint (or transformers 5's with `nested`).
fn tensor_specs(nested: bool) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, shape: &[usize]| v.push((name, shape.to_vec()));
    let (lm, head, vis, proj) = if nested {
        ("model.language_model", "lm_head", "model.vision_tower", "model.multi_modal_projector")
    } else {
        ("language_model.model", "language_model.lm_head", "vision_tower", "multi_modal_projector")
    };
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
        add(format!("{p}.mlp.gate_proj.weight"), &[T_INTER, T_HIDDEN]);
        add(format!("{p}.mlp.up_proj.weight"), &[T_INTER, T_HIDDEN]);
        add(format!("{p}.mlp.down_proj.weight"), &[T_HIDDEN, T_INTER]);
    }
    add(format!("{head}.weight"), &[VOCAB, T_HIDDEN]);
    add(format!("{vis}.patch_conv.weight"), &[V_HIDDEN, 3, PATCH, PATCH]);
    add(format!("{vis}.ln_pre.weight"), &[V_HIDDEN]);
    for i in 0..V_DEPTH {
        let p = format!("{vis}.transformer.layers.{i}");
        add(format!("{p}.attention_norm.weight"), &[V_HIDDEN]);
        add(format!("{p}.ffn_norm.weight"), &[V_HIDDEN]);
        for n in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            add(format!("{p}.attention.{n}.weight"), &[V_HIDDEN, V_HIDDEN]);
        }
        add(format!("{p}.feed_forward.gate_proj.weight"), &[V_INTER, V_HIDDEN]);
        add(format!("{p}.feed_forward.up_proj.weight"), &[V_INTER, V_HIDDEN]);
        add(format!("{p}.feed_forward.down_proj.weight"), &[V_HIDDEN, V_INTER]);
    }
    add(format!("{proj}.norm.weight"), &[V_HIDDEN]);
    add(format!("{proj}.patch_merger.merging_layer.weight"), &[V_HIDDEN, V_HIDDEN * MERGE * MERGE]);
    add(format!("{proj}.linear_1.weight"), &[T_HIDDEN, V_HIDDEN]);
    add(format!("{proj}.linear_2.weight"), &[T_HIDDEN, T_HIDDEN]);
    v
}

/// The tensors: norm weights near 1, embeddings uniform with std 0.5, the rest with std 1/sqrt(fan_in),
/// from the family's own SplitMix64 stream; a tied or skipped tensor is drawn and dropped.
pub fn tensors(seed: u64, opts: &Options) -> Tensors {
    let mut rng = SplitMix(seed ^ 0x4d49_5354_5241_4c33);
    let sqrt3 = 3f32.sqrt();
    tensor_specs(opts.nested_names)
        .into_iter()
        .filter_map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let fan_in: usize = shape[1..].iter().product::<usize>().max(1);
            let is_norm = (name.contains("norm") || name.contains("ln_pre")) && name.ends_with(".weight");
            let std = if name.contains("embed_tokens") { 0.5 } else { 1.0 / (fan_in as f32).sqrt() };
            let data: Vec<f32> = (0..n)
                .map(|_| if is_norm { 1.0 + 0.1 * sqrt3 * rng.next() } else { std * sqrt3 * rng.next() })
                .collect();
            let dropped = (opts.tie && name.contains("lm_head")) || opts.skip_tensor == Some(name.as_str());
            (!dropped).then_some((name, (shape, data)))
        })
        .collect()
}

/// Writes the checkpoint folder at `dir` (created if needed); sharded: vision tower and projector in
/// the first shard, the language model in the second.
pub fn write_checkpoint(dir: &Path, seed: u64, opts: &Options) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), pretty(&config_json(opts.tie)))?;
    std::fs::write(dir.join("preprocessor_config.json"), pretty(&preprocessor_json()))?;
    std::fs::write(dir.join("processor_config.json"), pretty(&processor_json()))?;
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json())?;
    std::fs::write(dir.join("tokenizer_config.json"), pretty(&tokenizer_config_json()))?;
    std::fs::write(dir.join("chat_template.json"), pretty(&json!({ "chat_template": CHAT_TEMPLATE })))?;
    let all = tensors(seed, opts);
    if !opts.sharded {
        return std::fs::write(dir.join("model.safetensors"), safetensors_bytes(&all));
    }
    let shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
    let (vision, language): (Tensors, Tensors) = all.into_iter().partition(|(n, _)| !n.contains("language_model"));
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
