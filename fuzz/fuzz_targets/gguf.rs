//! Fuzz the GGUF reading a model load starts with: candle's metadata and tensor-index reader, then herd's
//! metadata → decoder configuration (`herd_infer::read_gguf`, `gguf_decoder_config`). Any bytes must
//! give a configuration or an error that names the file, never a panic. Seeds: the headers written by
//! herd-infer's `gguf_fuzz_seeds_read_as_decoder_configs` test (fuzz/Cargo.toml says how).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let file = Path::new("fuzz.gguf");
    let Ok(content) = herd_infer::read_gguf(file, &mut std::io::Cursor::new(data)) else { return };
    match herd_infer::gguf_decoder_config(file, &content) {
        Ok(config) => assert!(config.check_sizes().is_ok(), "a returned configuration passed its size check"),
        Err(e) => assert!(e.to_string().contains("fuzz.gguf"), "{e}"),
    }
});
