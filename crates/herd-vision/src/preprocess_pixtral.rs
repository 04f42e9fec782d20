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
//! matching positions, so [`PreparedImage`](crate::PreparedImage) is shared.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::config::{VisionConfig, read_to_string};
use crate::error::VisionError;
use crate::preprocess::ImageProcessor;

const OPENAI_CLIP_MEAN: [f64; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
const OPENAI_CLIP_STD: [f64; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

#[derive(Deserialize)]
struct RawPixtral {
    #[serde(default)]
    size: Option<Value>,
    #[serde(default)]
    patch_size: Option<Value>,
    #[serde(default)]
    image_mean: Option<Vec<f64>>,
    #[serde(default)]
    image_std: Option<Vec<f64>>,
    #[serde(default)]
    do_resize: Option<bool>,
    #[serde(default)]
    do_rescale: Option<bool>,
    #[serde(default)]
    rescale_factor: Option<f64>,
    #[serde(default)]
    do_normalize: Option<bool>,
    #[serde(default)]
    do_convert_rgb: Option<bool>,
    #[serde(default)]
    resample: Option<u64>,
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
    let text = read_to_string(path, "the image preprocessing settings")?;
    pixtral_processor_from_json(&text, path, vision.patch_size, vision.spatial_merge_size)
}

/// Parses the text of Pixtral's `preprocessor_config.json` for a tower with this patch size and spatial
/// merge (config.json's); `path` is only used in errors.
pub fn pixtral_processor_from_json(
    text: &str,
    path: &Path,
    patch: usize,
    merge: usize,
) -> Result<ImageProcessor, VisionError> {
    let raw: RawPixtral = serde_json::from_str(text).map_err(|source| VisionError::Json {
        path: path.to_path_buf(),
        what: "Pixtral preprocessor_config.json",
        source,
    })?;
    let bad = |message: String| VisionError::Config {
        path: path.to_path_buf(),
        message,
        fix: "use the preprocessor_config.json shipped with the Mistral3 checkpoint",
    };
    let three = |v: Option<Vec<f64>>, default: [f64; 3], key: &str| -> Result<[f64; 3], VisionError> {
        match v {
            None => Ok(default),
            Some(v) if v.len() == 3 => Ok([v[0], v[1], v[2]]),
            Some(v) => Err(bad(format!("{key} must have 3 entries (RGB), has {}", v.len()))),
        }
    };
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
    if raw.do_convert_rgb == Some(false) {
        return Err(bad("do_convert_rgb = false is not supported (images are always converted to RGB)".into()));
    }
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
    let proc = ImageProcessor {
        patch_size,
        temporal_patch_size: 1,
        merge_size: merge,
        min_pixels: 0,
        max_pixels: u64::MAX,
        image_mean: three(raw.image_mean, OPENAI_CLIP_MEAN, "image_mean")?,
        image_std: three(raw.image_std, OPENAI_CLIP_STD, "image_std")?,
        do_resize: raw.do_resize.unwrap_or(true),
        do_rescale: raw.do_rescale.unwrap_or(true),
        rescale_factor: raw.rescale_factor.unwrap_or(1.0 / 255.0),
        do_normalize: raw.do_normalize.unwrap_or(true),
        longest_edge: Some(longest_edge as u32),
    };
    if proc.image_std.contains(&0.0) {
        return Err(bad("image_std must not contain 0".into()));
    }
    Ok(proc)
}

/// Checks `processor_config.json` (the `PixtralProcessor`'s own settings), when the folder has one:
/// its patch size and spatial merge must be config.json's, since they decide the token layout.
pub(crate) fn check_processor_config(path: &Path, vision: &VisionConfig) -> Result<(), VisionError> {
    if !path.is_file() {
        return Ok(());
    }
    let text = read_to_string(path, "the processor settings")?;
    let v: Value = serde_json::from_str(&text).map_err(|source| VisionError::Json {
        path: path.to_path_buf(),
        what: "processor_config.json",
        source,
    })?;
    let bad = |message: String| VisionError::Config {
        path: path.to_path_buf(),
        message,
        fix: "use processor_config.json and config.json from the same checkpoint",
    };
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

/// The (height, width) `PixtralProcessor` resizes an image of this size to: scaled down (floor) to fit
/// `longest_edge` if larger, then each side rounded up to a multiple of `factor` (patch × merge).
pub fn pixtral_resize(height: u32, width: u32, longest_edge: u32, factor: u32) -> Result<(u32, u32), VisionError> {
    let err =
        |message: String| VisionError::Image { width, height, message, fix: "pass a non-empty, less elongated image" };
    if height == 0 || width == 0 || factor == 0 {
        return Err(err("an empty image (or a zero patch size) cannot be resized".into()));
    }
    let edge = f64::from(longest_edge);
    let (mut h, mut w) = (f64::from(height), f64::from(width));
    // Python: ratio = max(height / max_height, width / max_width); int(math.floor(height / ratio)).
    let ratio = (h / edge).max(w / edge);
    if ratio > 1.0 {
        h = (h / ratio).floor();
        w = (w / ratio).floor();
    }
    let up = |x: f64| -> u32 {
        let x = x as u32;
        if x == 0 { 0 } else { (x - 1) / factor * factor + factor }
    };
    let (new_h, new_w) = (up(h), up(w));
    if new_h == 0 || new_w == 0 {
        return Err(err(format!("fitting the longest side to {longest_edge} leaves a side of 0 pixels")));
    }
    Ok((new_h, new_w))
}
