//! Gemma 3's image processor (`Gemma3ImageProcessor`), from `preprocessor_config.json`.
//!
//! Steps, as transformers' PIL backend (`Gemma3ImageProcessorPil._preprocess`) takes them: convert to RGB,
//! resize to `size` (896×896 in every released checkpoint, whatever the aspect ratio) with PIL's filter
//! `resample` (2 = bilinear in the released files; [`resize_bilinear`](crate::resize_bilinear) is
//! bit-identical to Pillow's), rescale by `rescale_factor` (f64, then f32 as numpy does), normalize with
//! `image_mean`/`image_std` (0.5 each) in f32. The result is channel-first, `[1, 3, height, width]`, as
//! HF's `pixel_values`.
//!
//! Pan-and-scan (`do_pan_and_scan`, extra crops of elongated images) is off in the released files and in
//! herd: a file that switches it on is refused rather than run differently.

use std::path::Path;

use candle_core::{Device, Tensor};
use image::DynamicImage;
use serde::Deserialize;
use serde_json::Value;

use crate::config::read_to_string;
use crate::error::VisionError;
use crate::preprocess::PreparedImage;
use crate::resample::{resize_bicubic, resize_bilinear};

/// The PIL filter `resample` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resample {
    /// `PIL.Image.BILINEAR` (2).
    Bilinear,
    /// `PIL.Image.BICUBIC` (3).
    Bicubic,
}

#[derive(Deserialize)]
struct Size {
    height: Option<u32>,
    width: Option<u32>,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    size: Option<Size>,
    #[serde(default)]
    resample: Option<u32>,
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
    do_pan_and_scan: Option<bool>,
    #[serde(default)]
    image_seq_length: Option<usize>,
}

/// Gemma 3's processor settings, with transformers' defaults for keys the file leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct Gemma3Processor {
    /// (height, width) every image is resized to (`size`).
    pub size: (u32, u32),
    /// The resize filter (`resample`).
    pub resample: Resample,
    /// Per-channel mean subtracted after rescaling.
    pub image_mean: [f64; 3],
    /// Per-channel standard deviation.
    pub image_std: [f64; 3],
    /// Whether to resize (when false, images must already be `size`).
    pub do_resize: bool,
    /// Whether to multiply by `rescale_factor`.
    pub do_rescale: bool,
    /// Usually 1/255.
    pub rescale_factor: f64,
    /// Whether to normalize with mean and std.
    pub do_normalize: bool,
    /// `image_seq_length`: the image tokens the processor writes (config.json's `mm_tokens_per_image`).
    pub image_seq_length: Option<usize>,
}

impl Gemma3Processor {
    /// Reads `preprocessor_config.json`.
    pub fn from_file(path: &Path) -> Result<Self, VisionError> {
        let text = read_to_string(path, "the image preprocessing settings")?;
        Self::from_json(&text, path)
    }

    /// Parses the text of Gemma 3's `preprocessor_config.json`; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, VisionError> {
        let json_err =
            |source| VisionError::Json { path: path.to_path_buf(), what: "Gemma 3 preprocessor_config.json", source };
        let bad = |message: String| VisionError::Config {
            path: path.to_path_buf(),
            message,
            fix: "use the preprocessor_config.json shipped with the Gemma 3 checkpoint",
        };
        let mut obj: serde_json::Map<String, Value> = serde_json::from_str(text).map_err(json_err)?;
        // transformers reads an explicit null as "unset" (the released file has several).
        obj.retain(|_, v| !v.is_null());
        let raw: Raw = serde_json::from_value(Value::Object(obj)).map_err(json_err)?;
        let three = |v: Option<Vec<f64>>, key: &str| -> Result<[f64; 3], VisionError> {
            match v {
                None => Ok([0.5; 3]),
                Some(v) if v.len() == 3 => Ok([v[0], v[1], v[2]]),
                Some(v) => Err(bad(format!("{key} must have 3 entries (RGB), has {}", v.len()))),
            }
        };
        let size = match raw.size {
            None => (224, 224),
            Some(Size { height: Some(h), width: Some(w) }) if h > 0 && w > 0 => (h, w),
            Some(_) => return Err(bad("size must give a positive height and width".into())),
        };
        let resample = match raw.resample.unwrap_or(2) {
            2 => Resample::Bilinear,
            3 => Resample::Bicubic,
            other => {
                return Err(bad(format!("resample = {other} is not supported (2 = bilinear, 3 = bicubic)")));
            }
        };
        if raw.do_convert_rgb == Some(false) {
            return Err(bad("do_convert_rgb = false is not supported (images are always converted to RGB)".into()));
        }
        if raw.do_pan_and_scan == Some(true) {
            return Err(bad(
                "do_pan_and_scan = true is not supported: herd shows Gemma 3 one 896×896 view of each image, as the \
                 released processor settings do"
                    .into(),
            ));
        }
        let proc = Self {
            size,
            resample,
            image_mean: three(raw.image_mean, "image_mean")?,
            image_std: three(raw.image_std, "image_std")?,
            do_resize: raw.do_resize.unwrap_or(true),
            do_rescale: raw.do_rescale.unwrap_or(true),
            rescale_factor: raw.rescale_factor.unwrap_or(1.0 / 255.0),
            do_normalize: raw.do_normalize.unwrap_or(true),
            image_seq_length: raw.image_seq_length,
        };
        if proc.image_std.contains(&0.0) {
            return Err(bad("image_std must not contain 0".into()));
        }
        Ok(proc)
    }

    /// Resizes and normalizes `image` into `[1, 3, height, width]` pixel values. `patch_size` and
    /// `pool_kernel` (from config.json) only describe the result's grid.
    pub fn preprocess(
        &self,
        image: &DynamicImage,
        patch_size: usize,
        pool_kernel: usize,
    ) -> Result<PreparedImage, VisionError> {
        let rgb = image.to_rgb8();
        let (width, height) = rgb.dimensions();
        let (new_h, new_w) = self.size;
        let rgb = if (new_w, new_h) == (width, height) {
            rgb
        } else if !self.do_resize {
            return Err(VisionError::Image {
                width,
                height,
                message: format!("do_resize is false but the image is not {new_w}x{new_h}"),
                fix: "resize the image to the processor's size first",
            });
        } else if width == 0 || height == 0 {
            return Err(VisionError::Image {
                width,
                height,
                message: "an empty image cannot be resized".into(),
                fix: "pass a non-empty image",
            });
        } else {
            match self.resample {
                Resample::Bilinear => resize_bilinear(&rgb, new_w, new_h),
                Resample::Bicubic => resize_bicubic(&rgb, new_w, new_h),
            }
        };
        let (h, w) = (new_h as usize, new_w as usize);
        let mut chw = vec![0f32; 3 * h * w];
        for (x, y, px) in rgb.enumerate_pixels() {
            for c in 0..3 {
                let mut v = f32::from(px[c]);
                if self.do_rescale {
                    v = (f64::from(px[c]) * self.rescale_factor) as f32;
                }
                if self.do_normalize {
                    v = (v - self.image_mean[c] as f32) / self.image_std[c] as f32;
                }
                chw[(c * h + y as usize) * w + x as usize] = v;
            }
        }
        let pixel_values = Tensor::from_vec(chw, (1, 3, h, w), &Device::Cpu)?;
        let p = patch_size.max(1);
        Ok(PreparedImage::new(pixel_values, [1, h / p, w / p], pool_kernel.max(1), (new_h, new_w)))
    }
}
