//! A run's input fingerprint: every input a unit's rows depend on, by name, as a SHA-256. A run
//! folder records it (`Manifest::inputs`) and a resumed session must have the same, so one run's rows
//! never mix two prompt banks, two sets of sim parameters or two models. Files are hashed by their
//! bytes; parameter sets (sim parameters, resolved sampling settings) by their canonical JSON, so a
//! comment or reordered key in a parameter file changes nothing, and a changed value is caught.

use crate::minimal_group::effective_sampling;
use crate::{Result, RunOptions, RunnerError};
use herd_design::{Experiment, ExperimentFile, bank_files};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// Input name → SHA-256 (hex).
pub type Fingerprint = BTreeMap<String, String>;

pub fn sha256_hex(bytes: &[u8]) -> String {
    herd_design::sha256_hex(bytes)
}

/// The SHA-256 of a file's bytes; an error names the file and the input it is.
pub fn file_sha256(name: &str, path: &Path) -> Result<String> {
    herd_backend::sha256_file(path).map_err(|e| {
        RunnerError::Plan(format!(
            "{}: cannot read the {name} to fingerprint the run: {e}\n  fix: give a readable file",
            path.display()
        ))
    })
}

/// The SHA-256 of a parameter set's canonical JSON.
pub fn json_sha256(value: &impl serde::Serialize) -> String {
    herd_design::json_sha256(value)
}

/// The inputs of `file` that do not come from the backend: the experiment file, each bank file (by
/// its key, e.g. `prompts.bank`), the bundled label font (conformity images are drawn with it) and, for
/// minimal groups, the sampling settings resolved from the experiment and the model's defaults. The
/// caller adds the backend's (sim parameters, model file, chat template).
pub fn experiment_inputs(file: &ExperimentFile, options: &RunOptions) -> Result<Fingerprint> {
    let mut inputs = Fingerprint::new();
    inputs.insert("experiment".into(), file.sha256.clone());
    for (key, written) in bank_files(&file.experiment) {
        inputs.insert(key.to_owned(), file_sha256(key, &file.resolve(&written))?);
    }
    match &file.experiment {
        Experiment::Conformity(_) => {
            inputs.insert("font".into(), sha256_hex(herd_stimuli::font_bytes()));
        }
        Experiment::MinimalGroup(e) => {
            // The values sampled with, not where they came from: a reworded source note is the same run.
            let params = effective_sampling(e, options).params(0, e.generation.max_new_tokens as usize);
            let settings = serde_json::json!({
                "temperature": params.temperature,
                "top_p": params.top_p,
                "top_k": params.top_k,
                "repetition_penalty": params.repetition_penalty,
                "max_tokens": params.max_tokens,
                "constrained": e.generation.constrained,
            });
            inputs.insert("generation".into(), json_sha256(&settings));
        }
    }
    // How the runner treats the model: modality, reasoning modes, the model's own baseline rule.
    let run_options = serde_json::json!({
        // Spelled as herd first fingerprinted it (`Vision`, `Text`): a new spelling would refuse the
        // resume of every run folder written before it. Tables and manifests use `Modality::as_str`.
        "modality": format!("{:?}", options.modality),
        "reasoning_modes": options.reasoning_modes,
        "switch_thinking": options.switch_thinking,
        "baseline_override": options.baseline_override.as_ref().map(|b| (b.enabled, b.min_p_correct, b.two_way)),
    });
    inputs.insert("run options".into(), json_sha256(&run_options));
    Ok(inputs)
}

/// A fingerprint of an HF model folder without reading its multi-gigabyte weights: the bytes of its
/// small files (config, tokenizer, chat template, generation config) and the name and size of every
/// other file (the weights; an HF snapshot's files are named by their commit).
pub fn model_folder_sha256(dir: &Path) -> Result<String> {
    let unreadable = |path: &Path, e: std::io::Error| {
        RunnerError::Plan(format!(
            "{}: cannot read the model folder to fingerprint the run: {e}\n  fix: give a readable folder",
            path.display()
        ))
    };
    let mut entries: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| unreadable(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    let mut hash = Sha256::new();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let bytes = std::fs::metadata(&path).map_err(|e| unreadable(&path, e))?.len();
        hash.update((name.len() as u64).to_le_bytes());
        hash.update(name.as_bytes());
        hash.update(bytes.to_le_bytes());
        if matches!(path.extension().and_then(|e| e.to_str()), Some("json" | "jinja" | "txt" | "model")) {
            hash.update(std::fs::read(&path).map_err(|e| unreadable(&path, e))?);
        }
    }
    Ok(hex::encode(hash.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_ignores_key_order_and_sees_values() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b": 1, "a": {"y": 2, "x": [1, 2]}}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"a": {"x": [1, 2], "y": 2}, "b": 1}"#).unwrap();
        let c: serde_json::Value = serde_json::from_str(r#"{"a": {"x": [1, 2], "y": 3}, "b": 1}"#).unwrap();
        assert_eq!(json_sha256(&a), json_sha256(&b));
        assert_ne!(json_sha256(&a), json_sha256(&c));
    }
}
