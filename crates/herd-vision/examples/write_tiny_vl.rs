//! Writes the tiny Qwen3-VL, Qwen2-VL, Qwen2.5-VL and Gemma 3 checkpoints, the test image, the three
//! stimuli and the inputs that `tests/golden/tiny_transformers.py` (Qwen3-VL),
//! `tests/golden/tiny_qwen2_vl.py` (Qwen2-VL, Qwen2.5-VL) and `tests/golden/tiny_gemma3.py` (Gemma 3) run
//! through HF transformers:
//!
//!     cargo run -p herd-vision --example write_tiny_vl -- OUT_DIR [SEED]
//!
//! OUT_DIR gets one folder per family (`qwen3_vl/`, `qwen2_vl/`, `qwen2_5_vl/`, `gemma3/`: config.json,
//! preprocessor_config.json, tokenizer files, chat_template.json, model.safetensors), `image.png`,
//! `stimuli/{lines,color,dots}.png`, `qwen2_vl_processor/` and `gemma3_processor/` (the released
//! processor settings), `inputs.json` (Qwen: token ids with the image pad expanded, the patch grid and
//! herd's pixel values) and `gemma3_inputs.json` (the same for Gemma 3). The same seed always gives
//! byte-identical files.
//!
//! It also writes the tiny Mistral3 checkpoint for `tests/golden/tiny_mistral3.py`: `mistral3/`,
//! `mistral3_processor/preprocessor_config.json` (Mistral-Small-3.1's settings) and
//! `mistral3_inputs.json`.

use std::path::PathBuf;

#[path = "../tests/support/mistral3_golden.rs"]
mod mistral3_golden;
#[path = "../tests/support/vl_golden.rs"]
mod vl_golden;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: write_tiny_vl OUT_DIR [SEED]")?);
    let seed = match args.next() {
        Some(s) => s.parse().map_err(|e| format!("seed `{s}`: {e}"))?,
        None => vl_golden::SEED,
    };
    vl_golden::write_all(&out, seed)?;
    mistral3_golden::write_all(&out, seed)?;
    println!("{}", out.display());
    Ok(())
}
