//! herd's HF safetensors loader and decoder (`herd_infer::model`) on tiny random checkpoints of every
//! text family (llama with llama3 rope scaling, qwen2 with q/k/v biases, qwen3 with q/k norms, an
//! explicit head_dim and tied embeddings, phi3 with fused projections), written by
//! `support::tiny` with the real config keys and tensor names.
//!
//! - against candle-transformers' own model of each family (which reads the same folder through its
//!   own code): the logits of every prefix of a 12-token sequence;
//! - against itself: the KV cache (prefix, chunk, then token by token) and left-padded batches with
//!   the mask and positions `LocalModel::generate_tokens` builds;
//! - against HF transformers (`tiny_models_match_transformers`), from golden values written by
//!   `tests/golden/tiny_transformers.py`.

use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{llama, phi3, qwen2, qwen3};
use herd_infer::{Decoder, WeightFormat, load_hf_folder};
// One comparison for every golden test (herd-vision's too): infinite for vectors of different lengths.
use herd_test_support::tiny_text::{self as tiny, FAMILIES, FULL, SEED, SHORT, TinyFamily};
use herd_test_support::tiny_vl::max_abs_diff;
use std::path::{Path, PathBuf};

/// Largest tolerated absolute difference between two logits (f32, logits of order 1).
const TOL: f32 = 1e-4;

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("herd-hf-families-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The family's checkpoint at the golden seed, in its own temp folder.
fn checkpoint(family: TinyFamily, test: &str) -> TempDir {
    let dir = TempDir::new(&format!("{}-{test}", family.name()));
    tiny::write_checkpoint(&dir.0, family, SEED).expect("write checkpoint");
    dir
}

fn load(dir: &Path) -> Decoder {
    load_hf_folder(dir, &Device::Cpu, DType::F32, WeightFormat::Dense)
        .unwrap_or_else(|e| panic!("herd cannot load {}: {e}", dir.display()))
}

fn positions(start: usize, len: usize) -> Tensor {
    Tensor::arange(start as u32, (start + len) as u32, &Device::Cpu).unwrap().reshape((1, len)).unwrap()
}

/// herd's logits at every position of `tokens`, one forward pass from an empty cache.
fn herd_logits(dec: &Decoder, tokens: &[u32]) -> Vec<Vec<f32>> {
    let t = tokens.len();
    let input = Tensor::new(tokens, &Device::Cpu).unwrap().reshape((1, t)).unwrap();
    let hidden = dec.forward(&input, &positions(0, t), None, &mut dec.new_cache()).unwrap();
    dec.logits(&hidden.reshape((t, ())).unwrap()).unwrap().to_vec2().unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    let d = max_abs_diff(got, want);
    assert!(
        d < TOL,
        "{what}: max |Δlogit| = {d:e} ≥ {TOL:e}\n got[..6]  = {:?}\n want[..6] = {:?}",
        &got[..6],
        &want[..6]
    );
}

/// The logits are spread enough that a wrong weight or position would show (not all near zero).
fn assert_informative(what: &str, logits: &[f32]) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = logits.iter().copied().fold(f32::INFINITY, f32::min);
    assert!(logits.iter().all(|x| x.is_finite()), "{what}: non-finite logits");
    assert!(max - min > 2.0 && max - min < 100.0, "{what}: logits span {min}..{max}, not a useful test");
}

// ---------------------------------------------------------------------------------------------
// candle-transformers' models as the reference.
//
// Checked against HF transformers' modelling code: candle's llama applies llama3 rope scaling with the
// same formula as transformers' `_compute_llama3_parameters` (wavelength thresholds
// original_max/high_freq_factor and original_max/low_freq_factor, linear smoothing between); its
// qwen2 adds q/k/v biases; its qwen3 takes head_dim from the config and applies q/k RMS norms per
// head before rope; its phi3 splits qkv_proj as [q | k | v] and gate_up_proj as [gate | up]. Sliding
// windows (qwen2's 4096 here) are far longer than the sequences. So each is a faithful reference
// for these checkpoints.

fn candle_vb(dir: &Path) -> candle_nn::VarBuilder<'static> {
    let tensors =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).expect("read safetensors");
    candle_nn::VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu)
}

fn config_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("config.json")).expect("config.json")
}

/// candle-transformers' next-token logits after each prefix `tokens[..n]`, n = 1..=len (a fresh
/// forward pass each: candle's models only return the last position).
fn candle_prefix_logits(family: TinyFamily, dir: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let dev = Device::Cpu;
    let text = config_text(dir);
    let input = |n: usize| Tensor::new(&tokens[..n], &dev).unwrap().reshape((1, n)).unwrap();
    let flat = |t: Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let ns = 1..=tokens.len();
    match family {
        TinyFamily::Llama => {
            let cfg = serde_json::from_str::<llama::LlamaConfig>(&text).unwrap().into_config(false);
            assert!(cfg.rope_scaling.is_some(), "the llama fixture should carry llama3 rope scaling");
            let model = llama::Llama::load(candle_vb(dir), &cfg).unwrap();
            ns.map(|n| {
                let mut cache = llama::Cache::new(false, DType::F32, &cfg, &dev).unwrap();
                flat(model.forward(&input(n), 0, &mut cache).unwrap())
            })
            .collect()
        }
        TinyFamily::Qwen2 => {
            let cfg: qwen2::Config = serde_json::from_str(&text).unwrap();
            let mut model = qwen2::ModelForCausalLM::new(&cfg, candle_vb(dir)).unwrap();
            ns.map(|n| {
                model.clear_kv_cache();
                flat(model.forward(&input(n), 0).unwrap())
            })
            .collect()
        }
        TinyFamily::Qwen3 => {
            let cfg: qwen3::Config = serde_json::from_str(&text).unwrap();
            assert!(cfg.tie_word_embeddings && cfg.head_dim != cfg.hidden_size / cfg.num_attention_heads);
            let mut model = qwen3::ModelForCausalLM::new(&cfg, candle_vb(dir)).unwrap();
            ns.map(|n| {
                model.clear_kv_cache();
                flat(model.forward(&input(n), 0).unwrap())
            })
            .collect()
        }
        TinyFamily::Phi3 => {
            let cfg: phi3::Config = serde_json::from_str(&text).unwrap();
            let mut model = phi3::Model::new(&cfg, candle_vb(dir)).unwrap();
            ns.map(|n| {
                model.clear_kv_cache();
                flat(model.forward(&input(n), 0).unwrap())
            })
            .collect()
        }
    }
}

fn check_against_candle(family: TinyFamily) {
    let dir = checkpoint(family, "candle");
    let dec = load(&dir.0);
    assert_eq!(dec.config.head_dim, family.head_dim());
    for (name, tokens) in [("full", &FULL[..]), ("short", &SHORT[..])] {
        let herd = herd_logits(&dec, tokens);
        let candle = candle_prefix_logits(family, &dir.0, tokens);
        assert_eq!(herd.len(), candle.len());
        for (i, (h, c)) in herd.iter().zip(&candle).enumerate() {
            assert_eq!(h.len(), tiny::VOCAB);
            assert_informative(&format!("{} {name} position {i}", family.name()), h);
            assert_close(&format!("{} {name}: herd vs candle-transformers at position {i}", family.name()), h, c);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The KV cache: a prefix, then a chunk after it (causal mask with past > 0), then one token at a
// time, gives the logits of the full forward pass at every position.

fn check_incremental(family: TinyFamily) {
    let dir = checkpoint(family, "incremental");
    let dec = load(&dir.0);
    let full = herd_logits(&dec, &FULL);
    let mut cache = dec.new_cache();
    let mut got = Vec::new();
    for (start, end) in [(0, 5), (5, 8), (8, 9), (9, 10), (10, 11), (11, 12)] {
        let n = end - start;
        let input = Tensor::new(&FULL[start..end], &Device::Cpu).unwrap().reshape((1, n)).unwrap();
        let hidden = dec.forward(&input, &positions(start, n), None, &mut cache).unwrap();
        assert_eq!(cache.len(), end);
        got.extend(dec.logits(&hidden.reshape((n, ())).unwrap()).unwrap().to_vec2::<f32>().unwrap());
    }
    for (i, (g, f)) in got.iter().zip(&full).enumerate() {
        assert_close(&format!("{} incremental vs full forward at position {i}", family.name()), g, f);
    }
}

// ---------------------------------------------------------------------------------------------
// Left-padded batches, with the tokens, positions and masks `LocalModel::generate_tokens` builds
// (crates/herd-infer/src/local.rs): every real position of each row, and two decoding steps after
// it (the second after `select_rows` dropped the unpadded row), equal that row run alone.

fn check_left_padded_batch(family: TinyFamily) {
    let dev = Device::Cpu;
    let dir = checkpoint(family, "batch");
    let dec = load(&dir.0);
    let rows: [&[u32]; 2] = [&FULL, &SHORT];
    let b = rows.len();
    let width = rows.iter().map(|r| r.len()).max().unwrap();
    let pads: Vec<usize> = rows.iter().map(|r| width - r.len()).collect();
    let pad_id = 0u32;
    let (mut tokens, mut pos, mut mask) = (Vec::new(), Vec::new(), Vec::new());
    for (r, &pad) in rows.iter().zip(&pads) {
        tokens.extend(std::iter::repeat_n(pad_id, pad).chain(r.iter().copied()));
        pos.extend((0..width).map(|j| j.saturating_sub(pad) as u32));
        for i in 0..width {
            mask.extend((0..width).map(|j| if j <= i && (j >= pad || j == i) { 0.0f32 } else { f32::NEG_INFINITY }));
        }
    }
    let mut cache = dec.new_cache();
    let hidden = dec
        .forward(
            &Tensor::from_vec(tokens, (b, width), &dev).unwrap(),
            &Tensor::from_vec(pos, (b, width), &dev).unwrap(),
            Some(&Tensor::from_vec(mask, (b, 1, width, width), &dev).unwrap()),
            &mut cache,
        )
        .unwrap();
    let batch: Vec<Vec<f32>> = dec.logits(&hidden.reshape((b * width, ())).unwrap()).unwrap().to_vec2().unwrap();
    for (row, r) in rows.iter().enumerate() {
        let alone = herd_logits(&dec, r);
        for (i, want) in alone.iter().enumerate() {
            let got = &batch[row * width + pads[row] + i];
            assert_close(
                &format!("{} batch row {row} (pad {}) vs alone at position {i}", family.name(), pads[row]),
                got,
                want,
            );
        }
    }

    // One decoding step for both rows, with the step mask of generate_tokens.
    let next = [77u32, 13];
    let step = |cache: &mut herd_infer::KvCache, active: &[usize], next: &[u32]| -> Vec<Vec<f32>> {
        let n = active.len();
        let past = cache.len();
        let positions: Vec<u32> = active.iter().map(|&row| (past - pads[row]) as u32).collect();
        let step_mask: Vec<f32> = active
            .iter()
            .flat_map(|&row| {
                let pad = pads[row];
                (0..=past).map(move |j| if j >= pad { 0.0 } else { f32::NEG_INFINITY })
            })
            .collect();
        let mask = Tensor::from_vec(step_mask, (n, 1, 1, past + 1), &dev).unwrap();
        let hidden = dec
            .forward(
                &Tensor::from_vec(next.to_vec(), (n, 1), &dev).unwrap(),
                &Tensor::from_vec(positions, (n, 1), &dev).unwrap(),
                Some(&mask),
                cache,
            )
            .unwrap();
        dec.logits(&hidden.reshape((n, ())).unwrap()).unwrap().to_vec2().unwrap()
    };
    let got = step(&mut cache, &[0, 1], &next);
    for row in 0..b {
        let extended: Vec<u32> = rows[row].iter().copied().chain([next[row]]).collect();
        let want = herd_logits(&dec, &extended);
        assert_close(&format!("{} batch decode step 1, row {row}", family.name()), &got[row], want.last().unwrap());
    }
    // Row 0 finishes; row 1 decodes on alone, still padded.
    let mut cache = cache.select_rows(&Tensor::new(&[1u32], &dev).unwrap()).unwrap();
    let got = step(&mut cache, &[1], &[5]);
    let extended: Vec<u32> = SHORT.iter().copied().chain([next[1], 5]).collect();
    let want = herd_logits(&dec, &extended);
    assert_close(
        &format!("{} batch decode step 2, row 1 after select_rows", family.name()),
        &got[0],
        want.last().unwrap(),
    );
}

macro_rules! family_tests {
    ($($family:ident: $candle:ident, $incremental:ident, $batch:ident;)*) => {$(
        #[test]
        fn $candle() {
            check_against_candle(TinyFamily::$family);
        }
        #[test]
        fn $incremental() {
            check_incremental(TinyFamily::$family);
        }
        #[test]
        fn $batch() {
            check_left_padded_batch(TinyFamily::$family);
        }
    )*};
}

family_tests! {
    Llama: llama_matches_candle_transformers, llama_incremental_decoding_matches_full_forward, llama_left_padded_batch_matches_rows_alone;
    Qwen2: qwen2_matches_candle_transformers, qwen2_incremental_decoding_matches_full_forward, qwen2_left_padded_batch_matches_rows_alone;
    Qwen3: qwen3_matches_candle_transformers, qwen3_incremental_decoding_matches_full_forward, qwen3_left_padded_batch_matches_rows_alone;
    Phi3: phi3_matches_candle_transformers, phi3_incremental_decoding_matches_full_forward, phi3_left_padded_batch_matches_rows_alone;
}

// ---------------------------------------------------------------------------------------------
// The fixtures themselves.

#[test]
fn checkpoints_are_byte_identical_for_a_seed() {
    let (a, b, c) = (TempDir::new("det-a"), TempDir::new("det-b"), TempDir::new("det-c"));
    tiny::write_all(&a.0, SEED).unwrap();
    tiny::write_all(&b.0, SEED).unwrap();
    tiny::write_all(&c.0, SEED + 1).unwrap();
    let mut files = 0;
    for family in FAMILIES {
        for name in
            ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
        {
            let read = |d: &TempDir| std::fs::read(d.0.join(family.name()).join(name)).unwrap();
            assert!(read(&a) == read(&b), "{}/{name} differs between two runs with the same seed", family.name());
            files += 1;
        }
        let weights = |d: &TempDir| std::fs::read(d.0.join(family.name()).join("model.safetensors")).unwrap();
        assert!(weights(&a) != weights(&c), "{}: another seed gave the same weights", family.name());
    }
    assert_eq!(std::fs::read(a.0.join("inputs.json")).unwrap(), std::fs::read(b.0.join("inputs.json")).unwrap());
    assert_eq!(files, 20);
}

/// The written safetensors file is readable by candle and holds exactly the generated tensors.
#[test]
fn safetensors_round_trip() {
    for family in FAMILIES {
        let dir = checkpoint(family, "roundtrip");
        let read = candle_core::safetensors::load(dir.0.join("model.safetensors"), &Device::Cpu).unwrap();
        let want = tiny::tensors(family, SEED);
        assert_eq!(read.len(), want.len());
        for (name, (shape, data)) in &want {
            let t = &read[name];
            assert_eq!(t.dims(), shape.as_slice(), "{name}");
            assert_eq!(&t.flatten_all().unwrap().to_vec1::<f32>().unwrap(), data, "{name}");
        }
        assert_eq!(read.contains_key("lm_head.weight"), !family.tied());
    }
}

/// The llama3 rope scaling of the llama fixture changes its logits well beyond the tolerance, so the
/// comparison with candle-transformers (which implements it) would catch a wrong scaling in herd.
#[test]
fn llama3_rope_scaling_matters_in_the_llama_fixture() {
    let dir = checkpoint(TinyFamily::Llama, "rope-scaling");
    let scaled = herd_logits(&load(&dir.0), &FULL);
    let mut cfg: serde_json::Value = serde_json::from_str(&config_text(&dir.0)).unwrap();
    cfg.as_object_mut().unwrap().remove("rope_scaling");
    std::fs::write(dir.0.join("config.json"), serde_json::to_string(&cfg).unwrap()).unwrap();
    let plain = herd_logits(&load(&dir.0), &FULL);
    let d = max_abs_diff(scaled.last().unwrap(), plain.last().unwrap());
    assert!(d > 100.0 * TOL, "rope scaling moves the last logits by only {d:e}");
}

/// The tokenizer files load in herd's tokenizer and chat template, and render to ids the model takes.
#[test]
fn tokenizer_and_template_load() {
    let dir = checkpoint(TinyFamily::Qwen3, "tokenizer");
    let tok = herd_infer::TextTokenizer::from_hf_folder(&dir.0).unwrap();
    assert_eq!(tok.eos_ids, vec![2]);
    let template = herd_chat::ChatTemplate::from_hf_folder(&dir.0).unwrap();
    let text = template
        .render(
            &[herd_chat::TemplateMessage::text("user", "which line is longer ? a or b .")],
            true,
            &serde_json::Map::new(),
        )
        .unwrap();
    assert_eq!(text, "<s><|user|> which line is longer ? a or b . <|end|> <|assistant|>");
    let ids = tok.encode(&text).unwrap();
    assert_eq!(ids, vec![1, 4, 7, 8, 9, 10, 11, 13, 14, 15, 16, 6, 5]);
}

// ---------------------------------------------------------------------------------------------
// HF transformers, from committed golden values.

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/tiny_transformers.json");

#[test]
fn tiny_models_match_transformers() {
    let path = Path::new(GOLDEN);
    assert!(
        path.is_file(),
        "{} is missing. Write it with\n  cargo run -p herd-infer --example write_tiny_checkpoints -- DIR\n  python crates/herd-infer/tests/golden/tiny_transformers.py DIR\nand commit it.",
        path.display()
    );
    compare_with_transformers(path);
}

/// herd's logits at every position of every golden sequence equal transformers' (within [`TOL`]), for
/// checkpoints that are byte-identical to those the golden values were computed from.
fn compare_with_transformers(path: &Path) {
    let golden: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(golden["seed"].as_u64(), Some(SEED), "golden values are for another seed");
    let as_f32 = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number") as f32).collect()
    };
    for family in FAMILIES {
        let g = &golden["families"][family.name()];
        assert!(g.is_object(), "no golden values for {}", family.name());
        let dir = checkpoint(family, "golden");
        let sha = herd_backend::sha256_file(&dir.0.join("model.safetensors")).unwrap();
        assert_eq!(
            g["model_safetensors_sha256"].as_str(),
            Some(sha.as_str()),
            "{}: the checkpoint generator changed since the golden values were written; rerun tiny_transformers.py",
            family.name()
        );
        let dec = load(&dir.0);
        for (name, tokens) in [("full", &FULL[..]), ("short", &SHORT[..])] {
            let s = &g["sequences"][name];
            let golden_tokens: Vec<u32> =
                s["tokens"].as_array().expect("tokens").iter().map(|x| x.as_u64().unwrap() as u32).collect();
            assert_eq!(golden_tokens, tokens, "{} {name}: golden tokens differ", family.name());
            let rows: Vec<Vec<f32>> = s["logits"].as_array().expect("logits").iter().map(as_f32).collect();
            assert_eq!(rows.len(), tokens.len());
            let herd = herd_logits(&dec, tokens);
            for (i, (h, t)) in herd.iter().zip(&rows).enumerate() {
                assert_close(&format!("{} {name}: herd vs transformers at position {i}", family.name()), h, t);
            }
            assert_close(
                &format!("{} {name}: herd vs transformers, last position", family.name()),
                herd.last().unwrap(),
                &as_f32(&s["last_logits"]),
            );
        }
    }
}
