//! Pillow's bicubic and bilinear resizes of 8-bit RGB images, reproduced to the bit.
//!
//! transformers' PIL-backend Qwen2-VL processor resizes with `Image.resize(size, BICUBIC)`, Gemma 3's
//! (`Gemma3ImageProcessorPil`) with `Image.resize((896, 896), BILINEAR)`. The stimuli
//! never have sides that are multiples of 28 (Qwen2-VL) or 32 (Qwen3-VL), so every image is resampled,
//! and `image`'s Catmull-Rom filter, the same kernel, rounds differently: pixel values would differ by a
//! few 1/255 steps. Pillow's algorithm (`libImaging/Resample.c`), written out here:
//! - separable: a horizontal pass over the source rows the vertical pass will read, then a vertical
//!   pass, or (Pillow 13, when the height shrinks by more than twice as many pixels as the width) the
//!   vertical pass first; a pass whose size does not change is skipped;
//! - for output index `i` the filter is centred at `(i + 0.5) * scale` with support `s * max(scale, 1)`
//!   (s = 2 for bicubic, 1 for bilinear: a downscale widens the filter, Pillow's antialiasing); taps run
//!   from `trunc(center - support + 0.5)` (at least 0) to `trunc(center + support + 0.5)` (at most the
//!   size), each weighted by the filter (the a = −0.5 cubic, or the triangle `max(0, 1 - |x|)`) at
//!   `(tap - center + 0.5) * (1 / max(scale, 1))`, and the weights are normalised to sum 1 in f64;
//! - the weights become 22-bit fixed point (rounded half away from zero); each pass sums
//!   `pixel * weight` in 32-bit integers from `2^21` (rounding), shifts right by 22 and clamps to 0–255.

use image::RgbImage;

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Keys's cubic with a = −0.5 (Pillow's `bicubic_filter`).
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Pillow's triangle filter (`bilinear_filter`), support 1.
fn bilinear(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 { 1.0 - x } else { 0.0 }
}

/// A Pillow resampling filter: the kernel and its support at scale 1.
#[derive(Clone, Copy)]
struct Filter {
    kernel: fn(f64) -> f64,
    support: f64,
}

const BICUBIC: Filter = Filter { kernel: bicubic, support: 2.0 };
const BILINEAR: Filter = Filter { kernel: bilinear, support: 1.0 };

/// For each output index: the first source index and the fixed-point weights of its taps.
fn coefficients(in_size: usize, out_size: usize, filter: Filter) -> Vec<(usize, Vec<i32>)> {
    let scale = in_size as f64 / out_size as f64;
    let filter_scale = scale.max(1.0);
    let support = filter.support * filter_scale;
    (0..out_size)
        .map(|i| {
            let center = (i as f64 + 0.5) * scale;
            // C's `(int)` truncates toward zero; below zero it is clamped to 0 either way.
            let lo = ((center - support + 0.5) as i64).max(0) as usize;
            let hi = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            // Pillow multiplies by the reciprocal; dividing rounds differently.
            let ss = 1.0 / filter_scale;
            let raw: Vec<f64> = (lo..hi).map(|x| (filter.kernel)((x as f64 - center + 0.5) * ss)).collect();
            let sum: f64 = raw.iter().sum();
            let one = f64::from(1u32 << PRECISION_BITS);
            let fixed = raw
                .iter()
                .map(|&w| {
                    let w = if sum != 0.0 { w / sum } else { w };
                    if w < 0.0 { (-0.5 + w * one) as i32 } else { (0.5 + w * one) as i32 }
                })
                .collect();
            (lo, fixed)
        })
        .collect()
}

fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// One horizontal pass: `rows` rows of `width` RGB pixels to rows of `coeffs.len()` pixels.
fn horizontal(src: &[u8], width: usize, rows: usize, coeffs: &[(usize, Vec<i32>)]) -> Vec<u8> {
    let out_w = coeffs.len();
    let mut out = vec![0u8; rows * out_w * 3];
    for r in 0..rows {
        let row = &src[r * width * 3..(r + 1) * width * 3];
        for (x, (lo, ws)) in coeffs.iter().enumerate() {
            let mut acc = [1i32 << (PRECISION_BITS - 1); 3];
            for (k, &w) in ws.iter().enumerate() {
                let px = &row[(lo + k) * 3..(lo + k) * 3 + 3];
                for c in 0..3 {
                    acc[c] += i32::from(px[c]) * w;
                }
            }
            for c in 0..3 {
                out[(r * out_w + x) * 3 + c] = clip8(acc[c]);
            }
        }
    }
    out
}

/// One vertical pass over `width` columns; `first_row` is the source row that `src` starts at.
fn vertical(src: &[u8], width: usize, first_row: usize, coeffs: &[(usize, Vec<i32>)]) -> Vec<u8> {
    let mut out = vec![0u8; coeffs.len() * width * 3];
    for (y, (lo, ws)) in coeffs.iter().enumerate() {
        let lo = lo - first_row;
        for x in 0..width {
            let mut acc = [1i32 << (PRECISION_BITS - 1); 3];
            for (k, &w) in ws.iter().enumerate() {
                let at = ((lo + k) * width + x) * 3;
                for c in 0..3 {
                    acc[c] += i32::from(src[at + c]) * w;
                }
            }
            for c in 0..3 {
                out[(y * width + x) * 3 + c] = clip8(acc[c]);
            }
        }
    }
    out
}

/// Resizes like Pillow's `Image.resize((width, height), Image.BICUBIC)` on an RGB image.
pub fn resize_bicubic(src: &RgbImage, width: u32, height: u32) -> RgbImage {
    resize(src, width, height, BICUBIC)
}

/// Resizes like Pillow's `Image.resize((width, height), Image.BILINEAR)` on an RGB image (antialiased:
/// a downscale averages over the scaled support, as Pillow does).
pub fn resize_bilinear(src: &RgbImage, width: u32, height: u32) -> RgbImage {
    resize(src, width, height, BILINEAR)
}

fn resize(src: &RgbImage, width: u32, height: u32, filter: Filter) -> RgbImage {
    let (in_w, in_h) = (src.width() as usize, src.height() as usize);
    let (out_w, out_h) = (width as usize, height as usize);
    let raw = src.as_raw();
    let out = match (out_w != in_w, out_h != in_h) {
        (false, false) => return src.clone(),
        (true, false) => horizontal(raw, in_w, in_h, &coefficients(in_w, out_w, filter)),
        (false, true) => vertical(raw, in_w, 0, &coefficients(in_h, out_h, filter)),
        (true, true) => {
            let (h_coeffs, v_coeffs) = (coefficients(in_w, out_w, filter), coefficients(in_h, out_h, filter));
            // Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
            // pixels as the width does (measured against Pillow 13.0 on 900 random sizes: no exception;
            // a tie runs horizontally first). The order changes the rounding of the 8-bit intermediate.
            if in_h - out_h.min(in_h) > 2 * in_w.saturating_sub(out_w) {
                let mid = vertical(raw, in_w, 0, &v_coeffs);
                horizontal(&mid, in_w, out_h, &h_coeffs)
            } else {
                // Only the source rows the vertical pass reads.
                let first = v_coeffs[0].0;
                let (last_lo, last_w) = &v_coeffs[out_h - 1];
                let end = last_lo + last_w.len();
                let mid = horizontal(&raw[first * in_w * 3..end * in_w * 3], in_w, end - first, &h_coeffs);
                vertical(&mid, out_w, first, &v_coeffs)
            }
        }
    };
    RgbImage::from_raw(width, height, out).expect("buffer sized for the output")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_in_fixed_point() {
        for (inp, out) in [(450, 448), (960, 952), (332, 336), (1170, 1176), (100, 37), (7, 300)] {
            for (lo, ws) in [BICUBIC, BILINEAR].into_iter().flat_map(|f| coefficients(inp, out, f)) {
                let sum: i64 = ws.iter().map(|&w| i64::from(w)).sum();
                assert!((sum - (1i64 << PRECISION_BITS)).abs() <= ws.len() as i64, "{inp}->{out}: {sum}");
                assert!(lo + ws.len() <= inp);
            }
        }
    }

    #[test]
    fn flat_images_stay_flat_and_same_size_is_a_copy() {
        let img = RgbImage::from_pixel(450, 96, image::Rgb([10, 200, 255]));
        let out = resize_bicubic(&img, 448, 112);
        assert!(out.pixels().all(|p| p.0 == [10, 200, 255]));
        assert_eq!(resize_bicubic(&img, 450, 96), img);
        let out = resize_bilinear(&img, 896, 60);
        assert!(out.pixels().all(|p| p.0 == [10, 200, 255]));
    }
}
