//! Image preprocessing the families share: the settings every `preprocessor_config.json` holds
//! ([`CommonSettings`], read into each family's own with `#[serde(flatten)]`), rescaling and
//! normalizing pixels, the [`PreparedImage`] every family's vision tower takes, and the patch
//! processor of the Qwen families (`Qwen2VLImageProcessor`), which Mistral3's Pixtral processor fills
//! in too (its resize rule is [`pixtral_resize`] instead of [`smart_resize`]).
//!
//! The Qwen processor's steps,
//! Steps, as in transformers' PIL-backend `Qwen2VLImageProcessorPil._preprocess`: convert to RGB (alpha
//! dropped, as PIL's `convert("RGB")`), resize to [`smart_resize`]'s size with PIL's bicubic filter
//! ([`resize_bicubic`](crate::resize_bicubic), bit-identical to Pillow's), rescale by `rescale_factor`
//! (1/255, in f64 then f32 as numpy does), normalize with `image_mean`/`image_std` in f32, repeat the
//! frame to fill `temporal_patch_size`, and flatten into patches in the processor's order: rows run over
//! (t, h-block, w-block, h-in-block, w-in-block), columns over (channel, frame, y-in-patch, x-in-patch).
//!
//! The torchvision backend (`Qwen2VLImageProcessor` where torchvision is installed) resamples
//! differently (a = −0.75, antialiasing on tensors); herd follows the PIL one, which the released
//! checkpoints' `Qwen2VLImageProcessor` meant when they were trained and evaluated.

use std::path::Path;

use candle_core::{Device, Tensor};
use image::{DynamicImage, RgbImage};
use serde::Deserialize;

use crate::config::VisionConfig;
use crate::error::VisionError;
use crate::files::{JsonFile, read_json};
use crate::resample::resize_bicubic;

/// CLIP's per-channel mean, the default of the Qwen and Pixtral processors.
pub(crate) const OPENAI_CLIP_MEAN: [f64; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
/// CLIP's per-channel standard deviation.
pub(crate) const OPENAI_CLIP_STD: [f64; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

/// The keys of `preprocessor_config.json` that every family's processor reads the same way
/// (transformers' `BaseImageProcessor` settings); each family's raw settings flatten this in.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct CommonSettings {
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
}

/// [`CommonSettings`] with the family's defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Normalization {
    pub(crate) image_mean: [f64; 3],
    pub(crate) image_std: [f64; 3],
    pub(crate) do_resize: bool,
    pub(crate) do_rescale: bool,
    pub(crate) rescale_factor: f64,
    pub(crate) do_normalize: bool,
}

impl CommonSettings {
    /// Images are always converted to RGB: a file that turns that off is refused.
    pub(crate) fn check_rgb(&self, file: &JsonFile<'_>) -> Result<(), VisionError> {
        if self.do_convert_rgb == Some(false) {
            return Err(file.bad("do_convert_rgb = false is not supported (images are always converted to RGB)".into()));
        }
        Ok(())
    }

    /// The settings with transformers' defaults (`mean`, `std`: the family's; rescaling by 1/255,
    /// resizing and normalizing on). Mean and std must have three entries.
    pub(crate) fn resolve(
        &self,
        mean: [f64; 3],
        std: [f64; 3],
        file: &JsonFile<'_>,
    ) -> Result<Normalization, VisionError> {
        let three = |v: &Option<Vec<f64>>, default: [f64; 3], key: &str| -> Result<[f64; 3], VisionError> {
            match v {
                None => Ok(default),
                Some(v) if v.len() == 3 => Ok([v[0], v[1], v[2]]),
                Some(v) => Err(file.bad(format!("{key} must have 3 entries (RGB), has {}", v.len()))),
            }
        };
        Ok(Normalization {
            image_mean: three(&self.image_mean, mean, "image_mean")?,
            image_std: three(&self.image_std, std, "image_std")?,
            do_resize: self.do_resize.unwrap_or(true),
            do_rescale: self.do_rescale.unwrap_or(true),
            rescale_factor: self.rescale_factor.unwrap_or(1.0 / 255.0),
            do_normalize: self.do_normalize.unwrap_or(true),
        })
    }
}

impl Normalization {
    /// A zero standard deviation would divide by zero.
    pub(crate) fn check_std(&self, file: &JsonFile<'_>) -> Result<(), VisionError> {
        if self.image_std.contains(&0.0) {
            return Err(file.bad("image_std must not contain 0".into()));
        }
        Ok(())
    }

    /// The image channel-first (`[3, height, width]` row-major), rescaled (in f64, then f32 as numpy
    /// does) and normalized in f32.
    pub(crate) fn chw(&self, rgb: &RgbImage) -> Vec<f32> {
        let (w, h) = (rgb.width() as usize, rgb.height() as usize);
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
        chw
    }
}

/// The `size` entry of preprocessor_config.json: pixel-count bounds, not side lengths.
#[derive(Debug, Clone, Deserialize)]
struct SizeEntry {
    shortest_edge: Option<u64>,
    longest_edge: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawPreprocessorConfig {
    #[serde(default)]
    size: Option<SizeEntry>,
    #[serde(default)]
    min_pixels: Option<u64>,
    #[serde(default)]
    max_pixels: Option<u64>,
    #[serde(default)]
    patch_size: Option<usize>,
    #[serde(default)]
    temporal_patch_size: Option<usize>,
    #[serde(default)]
    merge_size: Option<usize>,
    #[serde(flatten)]
    common: CommonSettings,
}

/// The image processor's settings, with transformers' defaults for keys the file leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageProcessor {
    /// Side of a patch in pixels (`patch_size`).
    pub patch_size: usize,
    /// Frames per temporal patch (`temporal_patch_size`).
    pub temporal_patch_size: usize,
    /// Side of the square of patches merged into one token (`merge_size`).
    pub merge_size: usize,
    /// Fewest pixels after resizing (`min_pixels`, else `size.shortest_edge`).
    pub min_pixels: u64,
    /// Most pixels after resizing (`max_pixels`, else `size.longest_edge`).
    pub max_pixels: u64,
    /// Per-channel mean subtracted after rescaling.
    pub image_mean: [f64; 3],
    /// Per-channel standard deviation divided by after subtracting the mean.
    pub image_std: [f64; 3],
    /// Whether to resize to the smart_resize size.
    pub do_resize: bool,
    /// Whether to multiply by `rescale_factor`.
    pub do_rescale: bool,
    /// Usually 1/255.
    pub rescale_factor: f64,
    /// Whether to normalize with mean and std.
    pub do_normalize: bool,
    /// Pixtral (Mistral3): fit the image within this side instead of smart_resize's pixel bounds (see
    /// `mistral3::processor`); None for the Qwen processors.
    pub longest_edge: Option<u32>,
}

impl ImageProcessor {
    /// Reads `preprocessor_config.json`.
    pub fn from_file(path: &Path) -> Result<Self, VisionError> {
        read_json(path, "the image preprocessing settings", Self::from_json)
    }

    /// Parses the text of a `preprocessor_config.json`; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, VisionError> {
        let file = JsonFile::new(
            path,
            "preprocessor_config.json",
            "use the preprocessor_config.json shipped with the checkpoint",
        );
        let raw: RawPreprocessorConfig = file.parse(text)?;
        // transformers: `size` defaults to {shortest_edge: 56*56, longest_edge: 28*28*1280}, and
        // `min_pixels`/`max_pixels`, when given, override it.
        let size = raw.size.as_ref();
        let min_pixels = raw.min_pixels.or(size.and_then(|s| s.shortest_edge)).unwrap_or(56 * 56);
        let max_pixels = raw.max_pixels.or(size.and_then(|s| s.longest_edge)).unwrap_or(28 * 28 * 1280);
        let n = raw.common.resolve(OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, &file)?;
        let proc = Self {
            patch_size: raw.patch_size.unwrap_or(14),
            temporal_patch_size: raw.temporal_patch_size.unwrap_or(2),
            merge_size: raw.merge_size.unwrap_or(2),
            min_pixels,
            max_pixels,
            ..Self::normalized(n)
        };
        raw.common.check_rgb(&file)?;
        if proc.patch_size == 0 || proc.temporal_patch_size == 0 || proc.merge_size == 0 {
            return Err(file.bad("patch_size, temporal_patch_size and merge_size must be positive".into()));
        }
        if proc.min_pixels > proc.max_pixels {
            return Err(file.bad(format!("min_pixels ({}) exceeds max_pixels ({})", proc.min_pixels, proc.max_pixels)));
        }
        proc.normalization().check_std(&file)?;
        Ok(proc)
    }

    /// A processor with `n`'s rescaling and normalization and the Qwen defaults for the rest (patch 14,
    /// merge 2, two frames, smart_resize's default pixel bounds).
    pub(crate) fn normalized(n: Normalization) -> Self {
        Self {
            patch_size: 14,
            temporal_patch_size: 2,
            merge_size: 2,
            min_pixels: 56 * 56,
            max_pixels: 28 * 28 * 1280,
            image_mean: n.image_mean,
            image_std: n.image_std,
            do_resize: n.do_resize,
            do_rescale: n.do_rescale,
            rescale_factor: n.rescale_factor,
            do_normalize: n.do_normalize,
            longest_edge: None,
        }
    }

    pub(crate) fn normalization(&self) -> Normalization {
        Normalization {
            image_mean: self.image_mean,
            image_std: self.image_std,
            do_resize: self.do_resize,
            do_rescale: self.do_rescale,
            rescale_factor: self.rescale_factor,
            do_normalize: self.do_normalize,
        }
    }

    /// `patch_size * merge_size`: both sides of a resized image are multiples of it.
    pub fn factor(&self) -> usize {
        self.patch_size * self.merge_size
    }

    /// The (height, width) an image of this size is resized to.
    pub fn target_size(&self, height: u32, width: u32) -> Result<(u32, u32), VisionError> {
        if !self.do_resize {
            let f = self.factor() as u32;
            if !height.is_multiple_of(f) || !width.is_multiple_of(f) {
                return Err(VisionError::Image {
                    width,
                    height,
                    message: format!("do_resize is false but the sides are not multiples of {f}"),
                    fix: "resize the image to multiples of patch_size * merge_size first",
                });
            }
            return Ok((height, width));
        }
        if let Some(edge) = self.longest_edge {
            return pixtral_resize(height, width, edge, self.factor() as u32);
        }
        smart_resize(height, width, self.factor() as u32, self.min_pixels, self.max_pixels)
    }

    /// Turns an image into the patches and grid the vision encoder takes.
    pub fn preprocess(&self, image: &DynamicImage) -> Result<PreparedImage, VisionError> {
        let rgb = image.to_rgb8();
        let (width, height) = rgb.dimensions();
        let (new_h, new_w) = self.target_size(height, width)?;
        let rgb = if (new_w, new_h) == (width, height) { rgb } else { resize_bicubic(&rgb, new_w, new_h) };

        // Channel-first float image, rescaled and normalized in f32 as numpy does.
        let (h, w) = (new_h as usize, new_w as usize);
        let chw = self.normalization().chw(&rgb);

        let (p, m, tp) = (self.patch_size, self.merge_size, self.temporal_patch_size);
        let (gh, gw) = (h / p, w / p);
        // One frame, repeated to fill a temporal patch: grid_t = 1.
        let gt = 1usize;
        let cols = 3 * tp * p * p;
        let rows = gt * gh * gw;
        let mut data = Vec::with_capacity(rows * cols);
        for bh in 0..gh / m {
            for bw in 0..gw / m {
                for mh in 0..m {
                    for mw in 0..m {
                        let y0 = (bh * m + mh) * p;
                        let x0 = (bw * m + mw) * p;
                        for c in 0..3 {
                            for _frame in 0..tp {
                                for py in 0..p {
                                    let row = (c * h + y0 + py) * w + x0;
                                    data.extend_from_slice(&chw[row..row + p]);
                                }
                            }
                        }
                    }
                }
            }
        }
        let pixel_values = Tensor::from_vec(data, (rows, cols), &Device::Cpu)?;
        Ok(PreparedImage { pixel_values, grid_thw: [gt, gh, gw], merge_size: m, resized: (new_h, new_w) })
    }
}

/// An image ready for the vision encoder.
#[derive(Debug, Clone)]
pub struct PreparedImage {
    pixel_values: Tensor,
    grid_thw: [usize; 3],
    merge_size: usize,
    resized: (u32, u32),
}

impl PreparedImage {
    pub(crate) fn new(pixel_values: Tensor, grid_thw: [usize; 3], merge_size: usize, resized: (u32, u32)) -> Self {
        Self { pixel_values, grid_thw, merge_size, resized }
    }

    /// f32 on the CPU. Qwen VL families: flattened patches, `[t*h*w, 3 * temporal_patch_size * patch_size²]`;
    /// Gemma 3: the image, channel-first, `[1, 3, height, width]` (HF's `pixel_values`).
    pub fn pixel_values(&self) -> &Tensor {
        &self.pixel_values
    }

    /// `image_grid_thw`: the patch grid (frames, rows, columns); for Gemma 3 `[1, side, side]` patches.
    pub fn grid_thw(&self) -> [usize; 3] {
        self.grid_thw
    }

    /// How many image tokens the prompt needs: t*h*w / merge_size² (`<|image_pad|>` for the Qwen
    /// families; for Gemma 3 `<image_soft_token>`, the patch grid average-pooled by `merge_size`).
    pub fn num_image_tokens(&self) -> usize {
        self.grid_thw.iter().product::<usize>() / (self.merge_size * self.merge_size)
    }

    /// The spatial merge size the grid was built for (Gemma 3: the average pool's kernel).
    pub fn merge_size(&self) -> usize {
        self.merge_size
    }

    /// (height, width) of the image after resizing.
    pub fn resized_size(&self) -> (u32, u32) {
        self.resized
    }
}

/// transformers' `smart_resize`: the (height, width) closest to the input whose sides are multiples of
/// `factor` and whose area lies within `[min_pixels, max_pixels]`, keeping the aspect ratio roughly.
///
/// Same arithmetic as the Python: `round` is round-half-to-even, all in f64.
pub fn smart_resize(
    height: u32,
    width: u32,
    factor: u32,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<(u32, u32), VisionError> {
    let err = |message: String, fix: &'static str| VisionError::Image { width, height, message, fix };
    if height == 0 || width == 0 || factor == 0 {
        return Err(err("an empty image (or a zero factor) cannot be resized".into(), "pass a non-empty image"));
    }
    let (hf, wf, ff) = (f64::from(height), f64::from(width), f64::from(factor));
    if hf.max(wf) / hf.min(wf) > 200.0 {
        return Err(err(
            format!("absolute aspect ratio must be smaller than 200, got {}", hf.max(wf) / hf.min(wf)),
            "crop or pad the image to a less elongated shape",
        ));
    }
    let mut h_bar = (hf / ff).round_ties_even() * ff;
    let mut w_bar = (wf / ff).round_ties_even() * ff;
    let area = f64::from(height) * f64::from(width);
    if h_bar * w_bar > max_pixels as f64 {
        let beta = (area / max_pixels as f64).sqrt();
        h_bar = ff.max((hf / beta / ff).floor() * ff);
        w_bar = ff.max((wf / beta / ff).floor() * ff);
    } else if h_bar * w_bar < min_pixels as f64 {
        let beta = (min_pixels as f64 / area).sqrt();
        h_bar = (hf * beta / ff).ceil() * ff;
        w_bar = (wf * beta / ff).ceil() * ff;
    }
    if h_bar < 1.0 || w_bar < 1.0 {
        return Err(err(format!("resizes to {w_bar}x{h_bar} pixels"), "raise min_pixels or pass a larger image"));
    }
    Ok((h_bar as u32, w_bar as u32))
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

/// Whether a prepared image fits the patch grid of a Qwen or Pixtral vision tower (`vision`).
pub(crate) fn check_fits(vision: &VisionConfig, img: &PreparedImage) -> Result<(), VisionError> {
    let v = vision;
    let want = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
    let [t, h, w] = img.grid_thw();
    let m = v.spatial_merge_size;
    let dims = img.pixel_values().dims();
    if img.merge_size() != m || h % m != 0 || w % m != 0 || dims != [t * h * w, want] {
        return Err(VisionError::Prompt {
            message: format!(
                "the prepared image (pixel values {dims:?}, grid {:?}, merge {}) does not fit this model (rows of {want}, merge {m})",
                img.grid_thw(),
                img.merge_size()
            ),
            fix: "prepare the image with this model's preprocess",
        });
    }
    Ok(())
}
