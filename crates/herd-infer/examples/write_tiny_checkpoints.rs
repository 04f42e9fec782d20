//! Writes the tiny HF checkpoints of the text families (llama, qwen2, qwen3, phi3) that herd's tests
//! compare against candle-transformers and HF transformers:
//!
//!     cargo run -p herd-infer --example write_tiny_checkpoints -- OUT_DIR [SEED]
//!
//! OUT_DIR gets one folder per family plus `inputs.json` (the token sequences to run). The default
//! seed is the one of the committed golden values; the same seed always gives byte-identical files.
//! Feed OUT_DIR to `tests/golden/tiny_transformers.py`.

use std::path::PathBuf;

use herd_test_support::tiny_text as tiny;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: write_tiny_checkpoints OUT_DIR [SEED]")?);
    let seed = match args.next() {
        Some(s) => s.parse().map_err(|e| format!("seed `{s}`: {e}"))?,
        None => tiny::SEED,
    };
    tiny::write_all(&out, seed)?;
    for family in tiny::FAMILIES {
        println!("{}", out.join(family.name()).display());
    }
    println!("{}", out.join("inputs.json").display());
    Ok(())
}
