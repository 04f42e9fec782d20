//! Writes the tiny Qwen3-VL checkpoint, test image and inputs that `tests/golden/tiny_transformers.py`
//! runs through HF transformers:
//!
//!     cargo run -p herd-vision --example write_tiny_qwen3_vl -- OUT_DIR [SEED]
//!
//! OUT_DIR gets `qwen3_vl/` (config.json, preprocessor_config.json, tokenizer files,
//! model.safetensors), `image.png` and `inputs.json` (token ids with the image pad expanded, the patch
//! grid and herd's pixel values). The same seed always gives byte-identical files.

#[path = "../tests/support/tiny_vl.rs"]
mod tiny_vl;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: write_tiny_qwen3_vl OUT_DIR [SEED]")?);
    let seed = match args.next() {
        Some(s) => s.parse().map_err(|e| format!("seed `{s}`: {e}"))?,
        None => tiny_vl::SEED,
    };
    tiny_vl::write_all(&out, seed)?;
    println!("{}", out.display());
    Ok(())
}
