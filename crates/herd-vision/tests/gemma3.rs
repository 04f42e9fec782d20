//! Gemma 3 on its tiny checkpoint (`herd_test_support::tiny_vl::gemma3`): shapes, determinism, the image and the
//! bidirectional image block mattering, prefix reuse, both tensor-name layouts, the released config.json
//! read with transformers' defaults, and errors that name the file and field. Agreement with HF
//! transformers is in `tests/hf_golden.rs`.

mod support;

use std::path::Path;

use herd_test_support::tiny_vl::gemma3::{PROMPT, SLIDING_WINDOW, TEXT_PROMPT, VOCAB, id_of};
use herd_test_support::tiny_vl::{self as tiny, DEFAULT, Options};
use herd_vision::gemma3::expand_image_text;
use herd_vision::{Gemma3Config, Gemma3Processor, LayerType, Resample, VisionError, VlFamily};
use support::checks::{TempDir, image_a, image_b, load, logits_vec, max_abs_diff};

const FAMILY: VlFamily = VlFamily::Gemma3;

fn load_err(dir: &Path) -> VisionError {
    let e = load(dir).expect_err("loading should fail");
    eprintln!("load error: {e}");
    e
}

#[test]
fn logits_have_vocab_shape_and_the_image_matters() {
    let tmp = TempDir::checkpoint(FAMILY, "shape", &Options { sharded: true, ..DEFAULT });
    let model = load(&tmp.0).unwrap();
    assert_eq!(model.family(), FAMILY);
    assert_eq!(model.vocab_size(), VOCAB);
    assert!(model.config().is_none() && model.gemma3_config().is_some());
    let a = model.preprocess(&image_a()).unwrap();
    assert_eq!(a.pixel_values().dims(), &[1, 3, 32, 32]);
    assert_eq!((a.grid_thw(), a.num_image_tokens()), ([1, 8, 8], 4));
    let ids = model.encode_prompt(PROMPT, Some(&a)).unwrap();
    let soft = model.image_token_id();
    assert_eq!(ids.iter().filter(|&&t| t == soft).count(), 4);
    // "\n\n<start_of_image>" + 4 soft tokens + "<end_of_image>\n\n" in place of the marker.
    let at = ids.iter().position(|&t| t == id_of("<start_of_image>")).unwrap();
    assert_eq!(ids[at - 1], id_of("\n\n"));
    assert_eq!(&ids[at + 5..at + 7], &[id_of("<end_of_image>"), id_of("\n\n")]);
    let la = logits_vec(&model.next_token_logits(&ids, Some(&a)).unwrap());
    assert_eq!(la.len(), VOCAB);
    assert!(la.iter().all(|x| x.is_finite()));
    assert!(la.iter().any(|&x| (x - la[0]).abs() > 1e-4));
    // Another image, same prompt: other logits; the same again: the same bits, also after a reload.
    let b = model.preprocess(&image_b()).unwrap();
    let lb = logits_vec(&model.next_token_logits(&ids, Some(&b)).unwrap());
    assert!(max_abs_diff(&la, &lb) > 1e-4);
    assert_eq!(la, logits_vec(&model.next_token_logits(&ids, Some(&a)).unwrap()));
    assert_eq!(la, logits_vec(&load(&tmp.0).unwrap().next_token_logits(&ids, Some(&a)).unwrap()));
    // Text only.
    let text = model.encode_prompt(TEXT_PROMPT, None).unwrap();
    assert_eq!(model.next_token_logits(&text, None).unwrap().dims(), &[VOCAB]);
}

#[test]
fn a_prefix_and_its_continuations_equal_whole_prompts() {
    let tmp = TempDir::checkpoint(FAMILY, "prefix", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&image_b()).unwrap();
    let shared = "<bos><start_of_turn>user\n<start_of_image>which line matches the reference ?";
    let prefix = model.prefill(&model.encode_prompt(shared, Some(&img)).unwrap(), Some(&img)).unwrap();
    // Continuations longer than the sliding window, so sliding layers drop the image from view.
    let long = " A B C red blue green A B C red<end_of_turn>\n<start_of_turn>model\n";
    for tail in [" A<end_of_turn>\n<start_of_turn>model\n", long, " C"] {
        let whole = model.encode_prompt(&format!("{shared}{tail}"), Some(&img)).unwrap();
        let want = logits_vec(&model.next_token_logits(&whole, Some(&img)).unwrap());
        let more = model.encode(tail).unwrap();
        let cont = model.extend(&prefix, &more).unwrap();
        assert_eq!(cont.token_ids(), whole.as_slice());
        let d = max_abs_diff(&logits_vec(cont.logits()), &want);
        assert!(d < 1e-4, "{tail:?}: prefix + continuation differs by {d:e}");
        let mut step = prefix.clone();
        for &t in &more {
            step = model.extend(&step, &[t]).unwrap();
        }
        let d = max_abs_diff(&logits_vec(step.logits()), &want);
        assert!(d < 1e-4, "{tail:?} one token at a time: {d:e}");
    }
    assert!(model.encode(long).unwrap().len() > SLIDING_WINDOW);
    let e = model.extend(&prefix, &[model.image_token_id()]).unwrap_err();
    assert!(e.to_string().contains("image tokens"), "{e}");
}

#[test]
fn both_tensor_name_layouts_and_tied_embeddings_load() {
    let released = TempDir::checkpoint(FAMILY, "released", &DEFAULT);
    let nested = TempDir::checkpoint(FAMILY, "nested", &Options { nested_names: true, ..DEFAULT });
    let a = load(&released.0).unwrap();
    let b = load(&nested.0).unwrap();
    let img = a.preprocess(&image_a()).unwrap();
    let ids = a.encode_prompt(PROMPT, Some(&img)).unwrap();
    assert_eq!(
        logits_vec(&a.next_token_logits(&ids, Some(&img)).unwrap()),
        logits_vec(&b.next_token_logits(&ids, Some(&img)).unwrap())
    );
    let tied = TempDir::checkpoint(FAMILY, "tied", &Options { tie: true, ..DEFAULT });
    let t = load(&tied.0).unwrap();
    assert_eq!(t.next_token_logits(&ids, Some(&img)).unwrap().dims(), &[VOCAB]);
}

#[test]
fn prompt_and_image_must_fit_together() {
    let tmp = TempDir::checkpoint(FAMILY, "prompt-errors", &DEFAULT);
    let model = load(&tmp.0).unwrap();
    let img = model.preprocess(&image_a()).unwrap();
    let expanded = model.encode_prompt(PROMPT, Some(&img)).unwrap();
    let text = model.encode_prompt(TEXT_PROMPT, None).unwrap();
    let e = model.next_token_logits(&text, Some(&img)).unwrap_err();
    assert!(e.to_string().contains("no image token"), "{e}");
    let e = model.next_token_logits(&expanded, None).unwrap_err();
    assert!(e.to_string().contains("no image was given"), "{e}");
    // The unexpanded marker alone is not enough: Gemma expands in the text.
    let e = model.next_token_logits(&model.encode(PROMPT).unwrap(), Some(&img)).unwrap_err();
    assert!(e.to_string().contains("no image token"), "{e}");
    let e = model.expand_image_tokens(&model.encode(PROMPT).unwrap(), &img).unwrap_err();
    assert!(e.to_string().contains("encode_prompt"), "{e}");
    let e = model.encode_prompt(TEXT_PROMPT, Some(&img)).unwrap_err();
    assert!(e.to_string().contains("0 <start_of_image>"), "{e}");
    assert!(expand_image_text("<start_of_image><start_of_image>", 4).is_err());
    assert_eq!(
        expand_image_text("a<start_of_image>b", 2).unwrap(),
        "a\n\n<start_of_image><image_soft_token><image_soft_token><end_of_image>\n\nb"
    );
    let e = model.next_token_logits(&[VOCAB as u32], None).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
    // A Qwen-prepared image does not fit.
    let qwen = TempDir::checkpoint(VlFamily::Qwen3Vl, "for-gemma", &DEFAULT);
    let qimg = load(&qwen.0).unwrap().preprocess(&image_a()).unwrap();
    let e = model.next_token_logits(&expanded, Some(&qimg)).unwrap_err();
    assert!(e.to_string().contains("image tokens"), "{e}");
}

#[test]
fn missing_files_and_tensors_are_named() {
    let sharded = Options { sharded: true, ..DEFAULT };
    for file in ["config.json", "tokenizer.json", "preprocessor_config.json", "model-00001-of-00002.safetensors"] {
        let tmp = TempDir::checkpoint(FAMILY, &format!("missing-{file}"), &sharded);
        std::fs::remove_file(tmp.0.join(file)).unwrap();
        match load_err(&tmp.0) {
            VisionError::MissingFile { path, .. } => assert_eq!(path, tmp.0.join(file)),
            other => panic!("removing {file} gave {other}"),
        }
    }
    let name = "vision_tower.vision_model.encoder.layers.1.mlp.fc2.bias";
    let tmp = TempDir::checkpoint(FAMILY, "missing-tensor", &Options { skip_tensor: Some(name), ..DEFAULT });
    let e = load_err(&tmp.0);
    assert!(matches!(e, VisionError::Weights { .. }) && e.to_string().contains(name), "{e}");
    let name = "multi_modal_projector.mm_input_projection_weight";
    let tmp = TempDir::checkpoint(FAMILY, "missing-proj", &Options { skip_tensor: Some(name), ..DEFAULT });
    assert!(load_err(&tmp.0).to_string().contains(name));
}

/// Rewrites one JSON file of a fresh tiny checkpoint and returns the load error's text.
fn edited(name: &str, file: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let tmp = TempDir::checkpoint(FAMILY, name, &DEFAULT);
    let path = tmp.0.join(file);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, v.to_string()).unwrap();
    let msg = load_err(&tmp.0).to_string();
    assert!(msg.contains(file) && msg.contains("fix:"), "{msg}");
    msg
}

#[test]
fn inconsistent_or_unsupported_files_are_reported() {
    let msg = edited("token-id", "config.json", |c| c["image_token_index"] = 3.into());
    assert!(msg.contains("<image_soft_token>") && msg.contains("tokenizer.json"), "{msg}");
    let msg =
        edited("size", "preprocessor_config.json", |p| p["size"] = serde_json::json!({"height": 64, "width": 64}));
    assert!(msg.contains("image_size"), "{msg}");
    let msg = edited("seq-len", "preprocessor_config.json", |p| p["image_seq_length"] = 16.into());
    assert!(msg.contains("mm_tokens_per_image"), "{msg}");
    let msg = edited("pan-and-scan", "preprocessor_config.json", |p| p["do_pan_and_scan"] = true.into());
    assert!(msg.contains("do_pan_and_scan"), "{msg}");
    let msg = edited("resample", "preprocessor_config.json", |p| p["resample"] = 0.into());
    assert!(msg.contains("resample"), "{msg}");
    let msg = edited("pool", "config.json", |c| c["mm_tokens_per_image"] = 9.into());
    assert!(msg.contains("average-pooled"), "{msg}");
    let msg = edited("square", "config.json", |c| c["mm_tokens_per_image"] = 8.into());
    assert!(msg.contains("perfect square"), "{msg}");
    let msg = edited("rope", "config.json", |c| c["text_config"]["rope_scaling"]["rope_type"] = "yarn".into());
    assert!(msg.contains("yarn"), "{msg}");
    let msg = edited("softcap", "config.json", |c| c["text_config"]["final_logit_softcapping"] = 30.0.into());
    assert!(msg.contains("soft-capping"), "{msg}");
    let msg = edited("layer-types", "config.json", |c| {
        c["text_config"]["layer_types"] = serde_json::json!(["full_attention", "sliding_attention"]);
    });
    assert!(msg.contains("layer_types has 2 entries for 6 layers"), "{msg}");
    let msg = edited("heads", "config.json", |c| c["text_config"]["num_key_value_heads"] = 3.into());
    assert!(msg.contains("num_key_value_heads"), "{msg}");
    let msg = edited("vision-type", "config.json", |c| c["vision_config"]["model_type"] = "clip_vision_model".into());
    assert!(msg.contains("siglip_vision_model"), "{msg}");
    let tmp = TempDir::checkpoint(FAMILY, "not-json", &DEFAULT);
    std::fs::write(tmp.0.join("config.json"), "{ not json").unwrap();
    assert!(matches!(load_err(&tmp.0), VisionError::Json { .. }));
}

/// config.json of `google/gemma-3-4b-it` as released: five text keys, the rest transformers' defaults.
const RELEASED_4B: &str = r#"{
  "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
  "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
  "model_type": "gemma3",
  "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
  "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
  "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
    "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14,
    "vision_use_head": false}
}"#;

#[test]
fn released_gemma3_4b_config_reads_as_transformers_does() {
    let c = Gemma3Config::from_json(RELEASED_4B, Path::new("config.json")).unwrap();
    let t = &c.text_config;
    assert_eq!((t.vocab_size, t.num_attention_heads, t.num_key_value_heads, t.head_dim), (262_208, 8, 4, 256));
    assert_eq!((t.query_pre_attn_scalar, t.sliding_window, t.rms_norm_eps), (256.0, 1024, 1e-6));
    assert_eq!(t.rope_global.theta, 1_000_000.0);
    assert_eq!(t.rope_global.linear_factor, 8.0);
    assert_eq!((t.rope_local.theta, t.rope_local.linear_factor), (10_000.0, 1.0));
    // Every sixth layer is global.
    let full: Vec<usize> = (0..34).filter(|&i| t.layer_types[i] == LayerType::Full).collect();
    assert_eq!(full, [5, 11, 17, 23, 29]);
    assert!(c.tie_word_embeddings);
    assert_eq!((c.patches_per_side(), c.tokens_per_side(), c.pool_kernel()), (64, 16, 4));
    assert_eq!((c.image_token_id, c.boi_token_id, c.eoi_token_id), (262_144, 255_999, 256_000));
    assert_eq!(c.vision_config.layer_norm_eps, 1e-6);

    // transformers 5's spelling of the same RoPE.
    let v5 = RELEASED_4B.replace(
        r#""rope_scaling": {"factor": 8.0, "rope_type": "linear"}"#,
        r#""rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}"#,
    );
    let c5 = Gemma3Config::from_json(&v5, Path::new("config.json")).unwrap();
    assert_eq!(c5.text_config.rope_global, t.rope_global);
    assert_eq!(c5.text_config.rope_local, t.rope_local);

    let p = Gemma3Processor::from_json(
        &support::vl_golden::gemma3_processor_json().to_string(),
        Path::new("preprocessor_config.json"),
    )
    .unwrap();
    assert_eq!((p.size, p.resample, p.image_seq_length), ((896, 896), Resample::Bilinear, Some(256)));
    assert_eq!(tiny::folder(FAMILY.model_type()), "gemma3");
}
