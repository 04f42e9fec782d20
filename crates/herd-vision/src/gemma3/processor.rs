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

use crate::error::VisionError;
use crate::files::{JsonFile, read_json};
use crate::preprocess::{CommonSettings, Normalization, PreparedImage};
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
    do_pan_and_scan: Option<bool>,
    #[serde(default)]
    image_seq_length: Option<usize>,
    #[serde(flatten)]
    common: CommonSettings,
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
        read_json(path, "the image preprocessing settings", Self::from_json)
    }

    /// Parses the text of Gemma 3's `preprocessor_config.json`; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, VisionError> {
        let file = JsonFile::new(
            path,
            "Gemma 3 preprocessor_config.json",
            "use the preprocessor_config.json shipped with the Gemma 3 checkpoint",
        );
        let bad = |message: String| file.bad(message);
        let mut obj: serde_json::Map<String, Value> = file.parse(text)?;
        // transformers reads an explicit null as "unset" (the released file has several).
        obj.retain(|_, v| !v.is_null());
        let raw: Raw = file.parse_value(Value::Object(obj))?;
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
        raw.common.check_rgb(&file)?;
        if raw.do_pan_and_scan == Some(true) {
            return Err(bad(
                "do_pan_and_scan = true is not supported: herd shows Gemma 3 one 896×896 view of each image, as the \
                 released processor settings do"
                    .into(),
            ));
        }
        let n = raw.common.resolve([0.5; 3], [0.5; 3], &file)?;
        n.check_std(&file)?;
        Ok(Self {
            size,
            resample,
            image_mean: n.image_mean,
            image_std: n.image_std,
            do_resize: n.do_resize,
            do_rescale: n.do_rescale,
            rescale_factor: n.rescale_factor,
            do_normalize: n.do_normalize,
            image_seq_length: raw.image_seq_length,
        })
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
        let normalization = Normalization {
            image_mean: self.image_mean,
            image_std: self.image_std,
            do_resize: self.do_resize,
            do_rescale: self.do_rescale,
            rescale_factor: self.rescale_factor,
            do_normalize: self.do_normalize,
        };
        let chw = normalization.chw(&rgb);
        let pixel_values = Tensor::from_vec(chw, (1, 3, h, w), &Device::Cpu)?;
        let p = patch_size.max(1);
        Ok(PreparedImage::new(pixel_values, [1, h / p, w / p], pool_kernel.max(1), (new_h, new_w)))
    }
}
