//! End-to-end tests on a tiny random Qwen3-VL checkpoint with the real file layout and tensor names.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use herd_vision::{Qwen3Vl, VisionError};
use image::{DynamicImage, Rgb, RgbImage};
use tokenizers::models::wordlevel::WordLevel;
use tokenizers::pre_tokenizers::whitespace::Whitespace;
use tokenizers::{AddedToken, Tokenizer};

const VOCAB_SIZE: usize = 48;
const WORDS: &[&str] = &[
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
const SPECIALS: &[&str] = &[
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
];
const PROMPT: &str = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>which line matches the reference ?<|im_end|>\n<|im_start|>assistant\n";

/// A fresh, empty folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("herd-vision-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone, Copy)]
struct Options {
    sharded: bool,
    tie: bool,
    skip_tensor: Option<&'static str>,
}

const DEFAULT: Options = Options { sharded: true, tie: false, skip_tensor: None };

/// Deterministic pseudo-random numbers in [-1, 1) (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((v >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Builds the tokenizer with the `tokenizers` crate; returns the ids of the special tokens.
fn write_tokenizer(dir: &Path) -> HashMap<&'static str, u32> {
    let vocab: serde_json::Map<String, serde_json::Value> =
        WORDS.iter().enumerate().map(|(i, w)| (w.to_string(), serde_json::json!(i))).collect();
    let vocab_path = dir.join("vocab-for-wordlevel.json");
    std::fs::write(&vocab_path, serde_json::to_string(&vocab).unwrap()).unwrap();
    let model = WordLevel::from_file(vocab_path.to_str().unwrap(), "[UNK]".into()).unwrap();
    std::fs::remove_file(&vocab_path).unwrap();
    let mut tok = Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace));
    tok.add_special_tokens(SPECIALS.iter().map(|s| AddedToken::from(*s, true))).unwrap();
    tok.save(dir.join("tokenizer.json"), false).unwrap();
    let ids: HashMap<&'static str, u32> = SPECIALS.iter().map(|s| (*s, tok.token_to_id(s).unwrap())).collect();
    assert!(ids.values().all(|&i| (i as usize) < VOCAB_SIZE));
    ids
}

// Tiny sizes; the key structure is that of Qwen/Qwen3-VL-*-Instruct's config.json.
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
const POS_EMB: usize = 16;
const DEEPSTACK: [usize; 2] = [0, 2];

fn config_json(ids: &HashMap<&str, u32>, tie: bool) -> serde_json::Value {
    serde_json::json!({
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "image_token_id": ids["<|image_pad|>"],
        "model_type": "qwen3_vl",
        "text_config": {
            "attention_bias": false,
            "attention_dropout": 0.0,
            "bos_token_id": ids["<|endoftext|>"],
            "dtype": "float32",
            "eos_token_id": ids["<|im_end|>"],
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
            "tie_word_embeddings": tie,
            "use_cache": true,
            "vocab_size": VOCAB_SIZE
        },
        "tie_word_embeddings": tie,
        "transformers_version": "4.57.0.dev0",
        "video_token_id": ids["<|video_pad|>"],
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
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"]
    })
}

fn preprocessor_json() -> serde_json::Value {
    serde_json::json!({
        "size": {"longest_edge": 4096, "shortest_edge": 256},
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL,
        "merge_size": MERGE,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast"
    })
}

/// Names and shapes of every tensor, as in the Hugging Face checkpoints.
fn tensor_specs(tie: bool) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, shape: &[usize]| v.push((name, shape.to_vec()));
    let lm = "model.language_model";
    add(format!("{lm}.embed_tokens.weight"), &[VOCAB_SIZE, T_HIDDEN]);
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
    if !tie {
        add("lm_head.weight".into(), &[VOCAB_SIZE, T_HIDDEN]);
    }
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

/// Writes a complete tiny checkpoint folder.
fn write_checkpoint(dir: &Path, opts: Options) {
    let ids = write_tokenizer(dir);
    std::fs::write(dir.join("config.json"), serde_json::to_string_pretty(&config_json(&ids, opts.tie)).unwrap())
        .unwrap();
    std::fs::write(dir.join("preprocessor_config.json"), serde_json::to_string_pretty(&preprocessor_json()).unwrap())
        .unwrap();

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    for (name, shape) in tensor_specs(opts.tie) {
        let n: usize = shape.iter().product();
        let is_norm = name.contains("norm") && name.ends_with(".weight");
        let data: Vec<f32> = (0..n).map(|_| if is_norm { 1.0 + 0.1 * rng.next() } else { 0.3 * rng.next() }).collect();
        if Some(name.as_str()) == opts.skip_tensor {
            continue;
        }
        tensors.push((name, Tensor::from_vec(data, shape, &Device::Cpu).unwrap()));
    }
    if opts.sharded {
        let mut weight_map = serde_json::Map::new();
        let shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
        for (k, shard) in shards.iter().enumerate() {
            let part: HashMap<String, Tensor> =
                tensors.iter().filter(|(n, _)| n.starts_with("model.visual") == (k == 0)).cloned().collect();
            for name in part.keys() {
                weight_map.insert(name.clone(), serde_json::json!(shard));
            }
            candle_core::safetensors::save(&part, dir.join(shard)).unwrap();
        }
        let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
        std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    } else {
        let all: HashMap<String, Tensor> = tensors.into_iter().collect();
        candle_core::safetensors::save(&all, dir.join("model.safetensors")).unwrap();
    }
}

fn load(dir: &Path) -> Result<Qwen3Vl, VisionError> {
    Qwen3Vl::load(dir, &Device::Cpu, DType::F32)
}

fn image_a() -> DynamicImage {
    // 24 wide, 16 high: smart_resize keeps it (multiples of 8, 384 pixels within [256, 4096]).
    DynamicImage::ImageRgb8(RgbImage::from_fn(24, 16, |x, y| Rgb([(x * 10) as u8, (y * 15) as u8, 128])))
}

fn image_b() -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(24, 16, |x, y| Rgb([255 - (y * 12) as u8, 40, (x * 7) as u8])))
}

fn logits_vec(t: &Tensor) -> Vec<f32> {
    t.to_vec1::<f32>().unwrap()
}

#[test]
fn logits_have_vocab_shape_and_are_finite() {
    let tmp = TempDir::new("shape");
    write_checkpoint(&tmp.0, DEFAULT);
    let mut model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    assert_eq!(ids.iter().filter(|&&t| t == model.image_token_id()).count(), 1);
    let img = model.preprocess(&image_a()).unwrap();
    assert_eq!(img.grid_thw(), [1, 4, 6]);
    assert_eq!(img.num_image_tokens(), 6);
    let logits = model.next_token_logits(&ids, Some(&img)).unwrap();
    assert_eq!(logits.dims(), &[VOCAB_SIZE]);
    assert_eq!(logits.dtype(), DType::F32);
    let v = logits_vec(&logits);
    assert!(v.iter().all(|x| x.is_finite()), "{v:?}");
    // Random weights: logits must not be constant.
    assert!(v.iter().any(|&x| (x - v[0]).abs() > 1e-4));

    // Text-only prompts work too.
    let text_ids = model.encode("<|im_start|>user\nwhich line ?<|im_end|>").unwrap();
    let t = model.next_token_logits(&text_ids, None).unwrap();
    assert_eq!(t.dims(), &[VOCAB_SIZE]);
}

#[test]
fn same_input_twice_gives_identical_logits() {
    let tmp = TempDir::new("determinism");
    write_checkpoint(&tmp.0, DEFAULT);
    let mut model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let img = model.preprocess(&image_a()).unwrap();
    let first = logits_vec(&model.next_token_logits(&ids, Some(&img)).unwrap());
    // Another call in between must not leave state behind.
    let _ = model.next_token_logits(&ids, Some(&model.preprocess(&image_b()).unwrap())).unwrap();
    let second = logits_vec(&model.next_token_logits(&ids, Some(&img)).unwrap());
    assert_eq!(first, second);
    // A second load of the same folder gives the same numbers.
    let mut again = load(&tmp.0).unwrap();
    let third = logits_vec(&again.next_token_logits(&ids, Some(&img)).unwrap());
    assert_eq!(first, third);
}

#[test]
fn the_image_changes_the_logits() {
    let tmp = TempDir::new("image-matters");
    write_checkpoint(&tmp.0, DEFAULT);
    let mut model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let a = model.preprocess(&image_a()).unwrap();
    let b = model.preprocess(&image_b()).unwrap();
    let la = logits_vec(&model.next_token_logits(&ids, Some(&a)).unwrap());
    let lb = logits_vec(&model.next_token_logits(&ids, Some(&b)).unwrap());
    let max_diff = la.iter().zip(&lb).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(max_diff > 1e-4, "two different images gave logits within {max_diff}");

    // Passing the prompt expanded already gives the same logits as letting the model expand it.
    let expanded = model.expand_image_tokens(&ids, &a).unwrap();
    assert_eq!(expanded.len(), ids.len() + a.num_image_tokens() - 1);
    let le = logits_vec(&model.next_token_logits(&expanded, Some(&a)).unwrap());
    assert_eq!(la, le);
}

#[test]
fn prompt_and_image_must_fit_together() {
    let tmp = TempDir::new("prompt-errors");
    write_checkpoint(&tmp.0, DEFAULT);
    let mut model = load(&tmp.0).unwrap();
    let img = model.preprocess(&image_a()).unwrap();
    let with_pad = model.encode(PROMPT).unwrap();
    let without = model.encode("<|im_start|>user\nwhich line ?<|im_end|>").unwrap();

    let e = model.next_token_logits(&without, Some(&img)).unwrap_err();
    assert!(matches!(e, VisionError::Prompt { .. }), "{e}");
    assert!(e.to_string().contains("no image token"), "{e}");

    let e = model.next_token_logits(&with_pad, None).unwrap_err();
    assert!(e.to_string().contains("no image was given"), "{e}");

    // Three placeholders: neither one (to expand) nor the six the image needs.
    let mut three = with_pad.clone();
    let at = three.iter().position(|&t| t == model.image_token_id()).unwrap();
    three.splice(at..at, [model.image_token_id(); 2]);
    let e = model.next_token_logits(&three, Some(&img)).unwrap_err();
    assert!(e.to_string().contains("needs 6"), "{e}");

    let e = model.next_token_logits(&[VOCAB_SIZE as u32], None).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
}

#[test]
fn tied_embeddings_in_a_single_file_load() {
    let tmp = TempDir::new("tied");
    write_checkpoint(&tmp.0, Options { sharded: false, tie: true, skip_tensor: None });
    assert!(!tmp.0.join("model.safetensors.index.json").exists());
    let mut model = load(&tmp.0).unwrap();
    let ids = model.encode(PROMPT).unwrap();
    let img = model.preprocess(&image_b()).unwrap();
    let logits = model.next_token_logits(&ids, Some(&img)).unwrap();
    assert_eq!(logits.dims(), &[VOCAB_SIZE]);
}

fn load_err(dir: &Path) -> VisionError {
    let e = load(dir).expect_err("loading should fail");
    eprintln!("load error: {e}");
    e
}

#[test]
fn missing_files_are_named() {
    for (file, mention) in [
        ("config.json", "config.json"),
        ("tokenizer.json", "tokenizer.json"),
        ("preprocessor_config.json", "preprocessor_config.json"),
        ("model-00002-of-00002.safetensors", "model-00002-of-00002.safetensors"),
    ] {
        let tmp = TempDir::new(&format!("missing-{file}"));
        write_checkpoint(&tmp.0, DEFAULT);
        std::fs::remove_file(tmp.0.join(file)).unwrap();
        let e = load_err(&tmp.0);
        match &e {
            VisionError::MissingFile { path, .. } => assert_eq!(path, &tmp.0.join(file)),
            other => panic!("removing {file} gave {other}"),
        }
        let msg = e.to_string();
        assert!(msg.contains(mention) && msg.contains("fix:"), "{msg}");
    }

    // No weights at all: the message names what was looked for.
    let tmp = TempDir::new("missing-weights");
    write_checkpoint(&tmp.0, DEFAULT);
    for f in ["model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"] {
        std::fs::remove_file(tmp.0.join(f)).unwrap();
    }
    let msg = load_err(&tmp.0).to_string();
    assert!(msg.contains("model.safetensors") && msg.contains("index.json"), "{msg}");
}

#[test]
fn a_missing_tensor_is_named() {
    let name = "model.visual.deepstack_merger_list.1.norm.bias";
    let tmp = TempDir::new("missing-tensor");
    write_checkpoint(&tmp.0, Options { skip_tensor: Some(name), ..DEFAULT });
    let e = load_err(&tmp.0);
    assert!(matches!(e, VisionError::Weights { .. }), "{e}");
    assert!(e.to_string().contains(name), "{e}");
}

#[test]
fn inconsistent_files_are_reported() {
    // The tokenizer and config.json disagree on <|image_pad|>'s id.
    let tmp = TempDir::new("bad-token-id");
    write_checkpoint(&tmp.0, DEFAULT);
    let path = tmp.0.join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["image_token_id"] = serde_json::json!(3);
    std::fs::write(&path, cfg.to_string()).unwrap();
    let msg = load_err(&tmp.0).to_string();
    assert!(msg.contains("<|image_pad|>") && msg.contains("tokenizer.json"), "{msg}");

    // preprocessor_config.json's patch size is not the vision encoder's.
    let tmp = TempDir::new("bad-patch");
    write_checkpoint(&tmp.0, DEFAULT);
    let path = tmp.0.join("preprocessor_config.json");
    let mut pre = preprocessor_json();
    pre["patch_size"] = serde_json::json!(8);
    std::fs::write(&path, pre.to_string()).unwrap();
    let e = load_err(&tmp.0);
    let msg = e.to_string();
    assert!(msg.contains("preprocessor_config.json") && msg.contains("patch_size"), "{msg}");

    // A config.json that is not JSON names the file.
    let tmp = TempDir::new("bad-json");
    write_checkpoint(&tmp.0, DEFAULT);
    std::fs::write(tmp.0.join("config.json"), "{ not json").unwrap();
    let e = load_err(&tmp.0);
    assert!(matches!(e, VisionError::Json { .. }), "{e}");
    assert!(e.to_string().contains("config.json"), "{e}");
}
