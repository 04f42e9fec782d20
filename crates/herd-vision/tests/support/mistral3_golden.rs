//! What herd-vision's `tests/golden/tiny_mistral3.py` reads, written from
//! `herd_test_support::tiny_vl::mistral3`'s checkpoint: shared by `tests/mistral3.rs` (through
//! `mod support`) and `examples/write_tiny_vl.rs` (through `#[path]`).
#![allow(dead_code)] // Each test binary uses a different part.

use std::path::Path;

use herd_design::Task;
use herd_test_support::tiny_vl::{self as tiny, DEFAULT, mistral3, pretty};
use herd_vision::{PreparedImage, VlFamily};
use serde_json::json;

/// The prepared image as transformers' `pixel_values` ([3, H, W], channel-major), undoing herd's patch
/// layout (merge blocks row-major, patches row-major within a block, columns channel, y, x).
pub fn chw(prepared: &PreparedImage) -> Vec<f32> {
    let [_, gh, gw] = prepared.grid_thw();
    let m = prepared.merge_size();
    let rows: Vec<Vec<f32>> = prepared.pixel_values().to_vec2().expect("pixel values");
    let p = ((rows[0].len() / 3) as f64).sqrt() as usize;
    let (h, w) = (gh * p, gw * p);
    let mut out = vec![0f32; 3 * h * w];
    let mut k = 0;
    for bh in 0..gh / m {
        for bw in 0..gw / m {
            for ih in 0..m {
                for iw in 0..m {
                    let (y0, x0) = ((bh * m + ih) * p, (bw * m + iw) * p);
                    for c in 0..3 {
                        for y in 0..p {
                            for x in 0..p {
                                out[(c * h + y0 + y) * w + x0 + x] = rows[k][(c * p + y) * p + x];
                            }
                        }
                    }
                    k += 1;
                }
            }
        }
    }
    out
}

/// Writes `out/mistral3/` (the checkpoint), `out/mistral3_processor/preprocessor_config.json` (the
/// released settings) and `out/mistral3_inputs.json` (the seed, the prompts, the expanded token ids with
/// and without the image, the resized size and herd's pixel values of `image.png` as [3, H, W]).
/// `out/image.png` and `out/stimuli/` are written by [`vl_golden::write_all`](super::vl_golden::write_all),
/// which runs first.
pub fn write_all(out: &Path, seed: u64) -> Result<(), Box<dyn std::error::Error>> {
    let dir = out.join(tiny::folder(VlFamily::Mistral3.model_type()));
    tiny::write_checkpoint(&dir, VlFamily::Mistral3.model_type(), seed, &DEFAULT)?;
    let processor = out.join("mistral3_processor");
    std::fs::create_dir_all(&processor)?;
    std::fs::write(processor.join("preprocessor_config.json"), pretty(&mistral3::released_preprocessor_json()))?;
    if !out.join("image.png").is_file() {
        tiny::image().save(out.join("image.png"))?;
    }

    let model = herd_vision::VlModel::load(&dir, &candle_core::Device::Cpu, candle_core::DType::F32)?;
    let prepared = model.preprocess(&image::open(out.join("image.png"))?)?;
    let ids = model.expand_image_tokens(&model.encode(mistral3::PROMPT)?, &prepared)?;
    let (h, w) = prepared.resized_size();
    let inputs = json!({
        "seed": seed,
        "prompt": mistral3::PROMPT,
        "text_prompt": mistral3::TEXT_PROMPT,
        "token_ids": ids,
        "text_token_ids": model.encode(mistral3::TEXT_PROMPT)?,
        "resized": [h, w],
        "herd_pixel_values": chw(&prepared),
        "stimuli": Task::ALL.map(|t| t.as_str()),
    });
    std::fs::write(out.join("mistral3_inputs.json"), pretty(&inputs))?;
    Ok(())
}
