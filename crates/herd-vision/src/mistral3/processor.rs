//! Mistral3's image processor (`PixtralImageProcessor`, PIL backend), from `preprocessor_config.json`
//! and `processor_config.json`.
//!
//! transformers' `PixtralProcessor` hands its image processor `patch_size * spatial_merge_size` (28 for
//! Mistral-Small-3.1) as the patch size, so the steps are: convert to RGB; if the image is larger than
//! `size.longest_edge` on either side, scale both sides by the larger ratio and floor them
//! (`get_resize_output_image_size`); round each side *up* to a multiple of 28; resize there with PIL's
//! bicubic filter (even when that only enlarges a little); rescale by 1/255; normalize with CLIP's mean
//! and std. herd then lays the pixels out as patches exactly as for the Qwen families (one frame,
//! merge blocks row-major, the patches of a block row-major), which the Pixtral tower takes with the
//! matching positions, so [`PreparedImage`](crate::PreparedImage) and the processor (`preprocess`) are shared.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::config::VisionConfig;
use crate::error::VisionError;
use crate::files::{JsonFile, read_json, read_to_string};
use crate::preprocess::{CommonSettings, ImageProcessor, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD};

#[derive(Deserialize)]
struct RawPixtral {
    #[serde(default)]
    size: Option<Value>,
    #[serde(default)]
    patch_size: Option<Value>,
    #[serde(default)]
    resample: Option<u64>,
    #[serde(flatten)]
    common: CommonSettings,
}

/// A side from an int or a `{"height": h, "width": w}` object (which must be square here).
fn square(v: &Value, key: &str) -> Result<usize, String> {
    let side = |k: &str| v.get(k).and_then(Value::as_u64);
    match (v.as_u64(), side("height"), side("width")) {
        (Some(n), _, _) => Ok(n as usize),
        (None, Some(h), Some(w)) if h == w => Ok(h as usize),
        _ => Err(format!("{key} must be an integer or {{\"height\": n, \"width\": n}} with equal sides, is {v}")),
    }
}

/// Reads Pixtral's `preprocessor_config.json` into the shared processor, checking it against the vision
/// tower of config.json (`vision`: patch size and spatial merge).
pub(crate) fn pixtral_processor(path: &Path, vision: &VisionConfig) -> Result<ImageProcessor, VisionError> {
    read_json(path, "the image preprocessing settings", |text, path| {
        pixtral_processor_from_json(text, path, vision.patch_size, vision.spatial_merge_size)
    })
}

/// Parses the text of Pixtral's `preprocessor_config.json` for a tower with this patch size and spatial
/// merge (config.json's); `path` is only used in errors.
pub fn pixtral_processor_from_json(
    text: &str,
    path: &Path,
    patch: usize,
    merge: usize,
) -> Result<ImageProcessor, VisionError> {
    let file = JsonFile::new(
        path,
        "Pixtral preprocessor_config.json",
        "use the preprocessor_config.json shipped with the Mistral3 checkpoint",
    );
    let raw: RawPixtral = file.parse(text)?;
    let bad = |message: String| file.bad(message);
    // PixtralImageProcessor's defaults: patch 16, longest_edge 1024.
    let patch_size = match &raw.patch_size {
        Some(v) => square(v, "patch_size").map_err(bad)?,
        None => 16,
    };
    let longest_edge = match &raw.size {
        None => 1024,
        Some(v) => v.get("longest_edge").and_then(Value::as_u64).ok_or_else(|| {
            bad(format!("size must hold longest_edge (herd resizes Pixtral images by their longest side), is {v}"))
        })?,
    };
    raw.common.check_rgb(&file)?;
    if let Some(r) = raw.resample.filter(|&r| r != 3) {
        return Err(bad(format!("resample is {r}; only bicubic (3) is implemented")));
    }
    if patch_size != patch {
        return Err(bad(format!("patch_size is {patch_size} but config.json's vision_config says {patch}")));
    }
    if merge == 0 {
        return Err(bad("spatial_merge_size must be positive".into()));
    }
    if longest_edge == 0 || longest_edge > u64::from(u32::MAX) {
        return Err(bad(format!("size.longest_edge ({longest_edge}) must be a positive 32-bit size")));
    }
    let normalization = raw.common.resolve(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, &file)?;
    normalization.check_std(&file)?;
    Ok(ImageProcessor {
        patch_size,
        temporal_patch_size: 1,
        merge_size: merge,
        min_pixels: 0,
        max_pixels: u64::MAX,
        longest_edge: Some(longest_edge as u32),
        ..ImageProcessor::normalized(normalization)
    })
}

/// Checks `processor_config.json` (the `PixtralProcessor`'s own settings), when the folder has one:
/// its patch size and spatial merge must be config.json's, since they decide the token layout.
pub(crate) fn check_processor_config(path: &Path, vision: &VisionConfig) -> Result<(), VisionError> {
    if !path.is_file() {
        return Ok(());
    }
    let file = JsonFile::new(
        path,
        "processor_config.json",
        "use processor_config.json and config.json from the same checkpoint",
    );
    let v: Value = file.parse(&read_to_string(path, "the processor settings")?)?;
    let bad = |message: String| file.bad(message);
    for (key, want) in [("patch_size", vision.patch_size), ("spatial_merge_size", vision.spatial_merge_size)] {
        if let Some(got) = v.get(key) {
            let got = square(got, key).map_err(bad)?;
            if got != want {
                return Err(bad(format!("{key} is {got} but config.json says {want}")));
            }
        }
    }
    Ok(())
}
