//! Opening a checkpoint's safetensors weights (herd-tensor's memory-mapped loader) as a `VarBuilder`,
//! with its errors in this crate's terms.

use std::path::Path;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use herd_tensor::{SafetensorsError, WeightFiles};

use crate::error::VisionError;

/// The folder's weights (the index's shards, else model.safetensors), memory-mapped, at `dtype`.
pub(crate) fn open_weights(dir: &Path, dtype: DType, device: &Device) -> Result<VarBuilder<'static>, VisionError> {
    let files = WeightFiles::find(dir).map_err(|e| match e {
        SafetensorsError::Missing { path, what } => VisionError::MissingFile { path, what },
        SafetensorsError::Io { path, source } => VisionError::Io { path, source },
        SafetensorsError::Index { path, source } => {
            VisionError::Json { path, what: "safetensors index (with a weight_map)", source }
        }
        SafetensorsError::EmptyIndex { path } => VisionError::Config {
            path,
            message: "weight_map is empty".into(),
            fix: "use the index file shipped with the checkpoint",
        },
    })?;
    let st = files.mmap().map_err(|source| VisionError::Weights { path: dir.to_path_buf(), source })?;
    Ok(VarBuilder::from_backend(Box::new(st), dtype, device.clone()))
}
