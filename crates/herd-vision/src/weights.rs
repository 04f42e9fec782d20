//! Finding and opening a checkpoint's safetensors files (single or sharded), memory-mapped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use candle_nn::VarBuilder;

use crate::error::VisionError;

/// The weight files: those named by model.safetensors.index.json, else model.safetensors.
pub(crate) fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>, VisionError> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        #[derive(serde::Deserialize)]
        struct Index {
            weight_map: BTreeMap<String, String>,
        }
        let text = std::fs::read_to_string(&index).map_err(|source| VisionError::Io { path: index.clone(), source })?;
        let parsed: Index = serde_json::from_str(&text).map_err(|source| VisionError::Json {
            path: index.clone(),
            what: "safetensors index (with a weight_map)",
            source,
        })?;
        let names: BTreeSet<String> = parsed.weight_map.into_values().collect();
        let files: Vec<PathBuf> = names.into_iter().map(|n| dir.join(n)).collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            return Err(VisionError::MissingFile {
                path: missing.clone(),
                what: "a weight shard listed in model.safetensors.index.json",
            });
        }
        if files.is_empty() {
            return Err(VisionError::Config {
                path: index,
                message: "weight_map is empty".into(),
                fix: "use the index file shipped with the checkpoint",
            });
        }
        return Ok(files);
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    Err(VisionError::MissingFile {
        path: single,
        what: "the weights (neither model.safetensors nor model.safetensors.index.json is there)",
    })
}

/// Memory-maps the safetensors files (no copy of multi-GB checkpoints into RAM).
#[allow(unsafe_code)]
pub(crate) fn open_weights(
    files: &[PathBuf],
    dtype: DType,
    device: &Device,
) -> candle_core::Result<VarBuilder<'static>> {
    // SAFETY: the files are mapped read-only; this is sound as long as nobody modifies or truncates
    // them while the model is loaded, which a checkpoint folder does not do (the same contract as
    // every mmap-based loader, e.g. transformers' safetensors loading).
    let st = unsafe { candle_core::safetensors::MmapedSafetensors::multi(files)? };
    Ok(VarBuilder::from_backend(Box::new(st), dtype, device.clone()))
}
