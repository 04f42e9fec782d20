//! What herd-vision's golden scripts read, written from `herd_test_support::tiny_vl`'s checkpoints:
//! shared by `tests/hf_golden.rs`, `tests/gemma3.rs`, `tests/mistral3.rs` (through `mod support`) and
//! `examples/write_tiny_vl.rs` (through `#[path]`; it writes the folder that
//! `tests/golden/tiny_transformers.py` and `tests/golden/tiny_qwen2_vl.py` feed to HF transformers).
#![allow(dead_code)] // Each test binary uses a different part.

use std::path::Path;

use herd_design::{StimuliConfig, StreamKey, Task};
use herd_stimuli::{Pool, generate, render};
use herd_test_support::tiny_vl::{self as tiny, DEFAULT, PROMPT, TEXT_PROMPT, pretty};
use herd_vision::VlFamily;
use serde_json::{Value, json};

pub use herd_test_support::tiny_vl::SEED;

/// Every family, in the order the golden files list them.
pub const FAMILIES: [VlFamily; 4] = [VlFamily::Qwen3Vl, VlFamily::Qwen2Vl, VlFamily::Qwen2_5Vl, VlFamily::Gemma3];

/// preprocessor_config.json of `google/gemma-3-4b-it` (12b and 27b ship the same): 896×896, bilinear,
/// mean and std 0.5, pan-and-scan unset (off).
pub fn gemma3_processor_json() -> Value {
    let mut v = tiny::preprocessor_json(VlFamily::Gemma3.model_type());
    v["size"] = json!({"height": 896, "width": 896});
    v["image_seq_length"] = json!(256);
    v
}

/// preprocessor_config.json of `Qwen/Qwen2-VL-7B-Instruct` (Qwen2.5-VL's differs only in its class
/// names): the real sizes, so that the stimuli are resized as the paper's models saw them.
pub fn qwen2_vl_processor_json() -> Value {
    json!({
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2VLProcessor"
    })
}

/// One stimulus of each task, drawn with the protocol's parameters from a fixed stream.
pub fn stimuli() -> Vec<(Task, image::DynamicImage)> {
    let config = StimuliConfig::protocol(Task::ALL.to_vec());
    Task::ALL
        .iter()
        .map(|&task| {
            let mut rng = StreamKey::new("herd-vision-golden", SEED).with("task", task).rng();
            let stimulus = generate(task, &config, Pool::General, task.as_str(), &mut rng).expect("stimulus");
            (task, render(&stimulus))
        })
        .collect()
}

/// Writes `out/<model_type>/` for every family (the checkpoint), `out/image.png`, `out/inputs.json` (the
/// seed, the expanded token ids with and without the image, the grid, herd's pixel values of the image),
/// `out/stimuli/<task>.png`, `out/qwen2_vl_processor/preprocessor_config.json`, and for Gemma 3
/// `out/gemma3_processor/preprocessor_config.json` and `out/gemma3_inputs.json` (its token ids, expanded by
/// the processor's text rule, and herd's pixel values, `[3, 32, 32]` flattened).
pub fn write_all(out: &Path, seed: u64) -> Result<(), Box<dyn std::error::Error>> {
    for family in FAMILIES {
        tiny::write_checkpoint(&out.join(tiny::folder(family.model_type())), family.model_type(), seed, &DEFAULT)?;
    }
    tiny::image().save(out.join("image.png"))?;
    std::fs::create_dir_all(out.join("stimuli"))?;
    for (task, img) in stimuli() {
        img.save(out.join("stimuli").join(format!("{}.png", task.as_str())))?;
    }
    let processor = out.join("qwen2_vl_processor");
    std::fs::create_dir_all(&processor)?;
    std::fs::write(processor.join("preprocessor_config.json"), pretty(&qwen2_vl_processor_json()))?;

    // Every family's tiny tokenizer and processor are the same, so one model gives the inputs.
    let model = herd_vision::VlModel::load(
        &out.join(tiny::folder(VlFamily::Qwen3Vl.model_type())),
        &candle_core::Device::Cpu,
        candle_core::DType::F32,
    )?;
    // What herd sees: the image decoded back from the PNG.
    let prepared = model.preprocess(&image::open(out.join("image.png"))?)?;
    let ids = model.expand_image_tokens(&model.encode(PROMPT)?, &prepared)?;
    let text_ids = model.encode(TEXT_PROMPT)?;
    let pixels: Vec<Vec<f32>> = prepared.pixel_values().to_vec2()?;
    let inputs = json!({
        "seed": seed,
        "families": FAMILIES.map(VlFamily::model_type),
        "token_ids": ids,
        "text_token_ids": text_ids,
        "grid_thw": prepared.grid_thw(),
        "herd_pixel_values": pixels,
        "stimuli": Task::ALL.map(|t| t.as_str()),
    });
    std::fs::write(out.join("inputs.json"), pretty(&inputs))?;

    let processor = out.join("gemma3_processor");
    std::fs::create_dir_all(&processor)?;
    std::fs::write(processor.join("preprocessor_config.json"), pretty(&gemma3_processor_json()))?;
    let gemma = herd_vision::VlModel::load(
        &out.join(tiny::folder(VlFamily::Gemma3.model_type())),
        &candle_core::Device::Cpu,
        candle_core::DType::F32,
    )?;
    let prepared = gemma.preprocess(&image::open(out.join("image.png"))?)?;
    let inputs = json!({
        "seed": seed,
        "prompt": tiny::gemma3::PROMPT,
        "text_prompt": tiny::gemma3::TEXT_PROMPT,
        "token_ids": gemma.encode_prompt(tiny::gemma3::PROMPT, Some(&prepared))?,
        "text_token_ids": gemma.encode_prompt(tiny::gemma3::TEXT_PROMPT, None)?,
        "herd_pixel_values": prepared.pixel_values().flatten_all()?.to_vec1::<f32>()?,
        "stimuli": Task::ALL.map(|t| t.as_str()),
    });
    std::fs::write(out.join("gemma3_inputs.json"), pretty(&inputs))?;
    Ok(())
}
