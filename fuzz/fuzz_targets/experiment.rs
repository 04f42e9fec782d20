//! Fuzz the experiment-file loader: any text must give an experiment or errors that each name the
//! file and a fix, never a panic. Seeds: `data/experiments/*.toml` (copy them into the corpus folder).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(errors) = herd_design::parse_experiment(text, Path::new("fuzz.toml")) {
        assert!(!errors.0.is_empty(), "an error result lists at least one problem");
        for e in &errors.0 {
            let message = e.to_string();
            assert!(message.starts_with("fuzz.toml: "), "{message}");
            assert!(!e.fix.is_empty(), "{message}");
        }
    }
});
