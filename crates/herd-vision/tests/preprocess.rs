//! The image processor and prompt helpers, checked against transformers' formulas.

use std::path::Path;

use herd_vision::{ImageProcessor, VisionError, expand_image_pad, mrope_positions, smart_resize};
use image::{DynamicImage, Rgb, RgbImage, Rgba, RgbaImage};

/// Expected values computed with transformers' `smart_resize` (Python, banker's rounding).
#[test]
fn smart_resize_matches_the_python_formula() {
    // (height, width, factor, min_pixels, max_pixels) -> (height, width)
    type Case = ((u32, u32, u32, u64, u64), (u32, u32));
    let cases: &[Case] = &[
        // Qwen2-VL defaults: factor 28, min 56*56, max 28*28*1280.
        // 100/28 = 3.57 -> 4 -> 112; 200/28 = 7.14 -> 7 -> 196; 21952 pixels is within bounds.
        ((100, 200, 28, 3136, 1_003_520), (112, 196)),
        // 70/28 = 2.5 rounds half to even -> 2 -> 56 (not 84); 56*56 = min_pixels, kept.
        ((70, 70, 28, 3136, 1_003_520), (56, 56)),
        // 42/28 = 1.5 -> 2 -> 56; 98/28 = 3.5 -> 4 -> 112.
        ((42, 98, 28, 3136, 1_003_520), (56, 112)),
        // Too small: 0x0 < min, beta = sqrt(3136/100) = 5.6, ceil(56/28) * 28 = 56.
        ((10, 10, 28, 3136, 1_003_520), (56, 56)),
        // Too large: beta = sqrt(6e6 / 1003520) = 2.445, floor(2000/2.445/28) = 29 -> 812, floor(43.8) = 43 -> 1204.
        ((2000, 3000, 28, 3136, 1_003_520), (812, 1204)),
        // Qwen3-VL: factor 32, min 65536, max 16777216.
        ((480, 640, 32, 65_536, 16_777_216), (480, 640)),
        ((100, 100, 32, 65_536, 16_777_216), (256, 256)),
        ((1080, 1920, 32, 65_536, 16_777_216), (1088, 1920)),
        ((5000, 7000, 32, 65_536, 16_777_216), (3456, 4832)),
        ((48, 80, 32, 65_536, 16_777_216), (224, 352)),
        // The tiny test processor: factor 8, min 256, max 4096.
        ((30, 20, 8, 256, 4096), (32, 16)),
        ((16, 16, 8, 256, 4096), (16, 16)),
        ((100, 60, 8, 256, 4096), (80, 48)),
        ((12, 40, 8, 256, 4096), (16, 40)),
        ((7, 9, 8, 256, 4096), (16, 24)),
    ];
    for &((h, w, f, min, max), want) in cases {
        assert_eq!(smart_resize(h, w, f, min, max).unwrap(), want, "smart_resize({h}, {w}, {f}, {min}, {max})");
    }
    let e = smart_resize(10, 2010, 28, 3136, 1_003_520).unwrap_err();
    assert!(matches!(e, VisionError::Image { .. }));
    assert!(e.to_string().contains("aspect ratio"), "{e}");
}

fn tiny_processor() -> ImageProcessor {
    let json = r#"{
        "size": {"longest_edge": 4096, "shortest_edge": 256},
        "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "image_processor_type": "Qwen2VLImageProcessorFast"
    }"#;
    ImageProcessor::from_json(json, Path::new("preprocessor_config.json")).unwrap()
}

#[test]
fn preprocessor_config_keys_and_defaults() {
    let p = tiny_processor();
    assert_eq!((p.min_pixels, p.max_pixels), (256, 4096));
    assert_eq!(p.factor(), 8);
    assert!((p.rescale_factor - 1.0 / 255.0).abs() < 1e-15);
    // min_pixels/max_pixels override `size`, as in transformers.
    let p = ImageProcessor::from_json(
        r#"{"size": {"longest_edge": 4096, "shortest_edge": 256}, "min_pixels": 100, "max_pixels": 1000}"#,
        Path::new("p.json"),
    )
    .unwrap();
    assert_eq!((p.min_pixels, p.max_pixels), (100, 1000));
    // Qwen2-VL defaults for absent keys.
    let p = ImageProcessor::from_json("{}", Path::new("p.json")).unwrap();
    assert_eq!((p.patch_size, p.merge_size, p.temporal_patch_size), (14, 2, 2));
    assert_eq!((p.min_pixels, p.max_pixels), (3136, 1_003_520));
    assert_eq!(p.image_mean, [0.481_454_66, 0.457_827_5, 0.408_210_73]);
    // Bad values name the file.
    let e = ImageProcessor::from_json(r#"{"image_mean": [0.5, 0.5]}"#, Path::new("pp.json")).unwrap_err();
    assert!(e.to_string().contains("pp.json") && e.to_string().contains("image_mean"), "{e}");
    let e = ImageProcessor::from_file(Path::new("/nonexistent/preprocessor_config.json")).unwrap_err();
    assert!(matches!(e, VisionError::MissingFile { .. }), "{e}");
}

#[test]
fn shapes_and_grid_follow_smart_resize() {
    let p = tiny_processor();
    for (w, h) in [(24u32, 16u32), (20, 30), (60, 100), (40, 12), (9, 7), (200, 150), (64, 64)] {
        let img = DynamicImage::ImageRgb8(RgbImage::from_pixel(w, h, Rgb([10, 200, 30])));
        let prepared = p.preprocess(&img).unwrap();
        let (rh, rw) = smart_resize(h, w, 8, 256, 4096).unwrap();
        assert_eq!(prepared.resized_size(), (rh, rw), "{w}x{h}");
        let (gh, gw) = (rh as usize / 4, rw as usize / 4);
        assert_eq!(prepared.grid_thw(), [1, gh, gw], "{w}x{h}");
        assert_eq!(prepared.pixel_values().dims(), &[gh * gw, 3 * 2 * 4 * 4], "{w}x{h}");
        assert_eq!(prepared.num_image_tokens(), gh * gw / 4, "{w}x{h}");
        // A flat colour stays flat through resizing: every value is its channel's normalized value.
        let v = prepared.pixel_values().to_vec2::<f32>().unwrap();
        let want = [10f32, 200., 30.].map(|c| (c / 255.0 - 0.5) / 0.5);
        for row in &v {
            for (col, x) in row.iter().enumerate() {
                let c = col / (2 * 4 * 4);
                assert!((x - want[c]).abs() < 1e-6, "{w}x{h} col {col}: {x} vs {}", want[c]);
            }
        }
    }
}

/// numpy's `reshape` + `transpose` on a row-major array, written generically.
fn transpose(data: &[f32], shape: &[usize], perm: &[usize]) -> Vec<f32> {
    let strides: Vec<usize> = (0..shape.len()).map(|i| shape[i + 1..].iter().product()).collect();
    let new_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..total {
        let src: usize = idx.iter().zip(perm).map(|(&i, &p)| i * strides[p]).sum();
        out.push(data[src]);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < new_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

#[test]
fn patch_order_is_the_processors() {
    // Every pixel distinct, RGBA to check that alpha is dropped. 16 wide, 24 high needs no resize.
    let (w, h) = (16usize, 24usize);
    let img = RgbaImage::from_fn(w as u32, h as u32, |x, y| {
        Rgba([(x * 15) as u8, (y * 10) as u8, ((x + y) * 5) as u8, (x * y) as u8])
    });
    let p = tiny_processor();
    let got = p.preprocess(&DynamicImage::ImageRgba8(img.clone())).unwrap();
    assert_eq!(got.resized_size(), (24, 16));

    // transformers: patches (T=1 frame repeated to temporal_patch_size, C, H, W) ->
    // reshape(grid_t, tp, C, gh/m, m, P, gw/m, m, P).transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    let (tp, pch, m) = (2usize, 4usize, 2usize);
    let mut frames = Vec::with_capacity(tp * 3 * h * w);
    for _ in 0..tp {
        for c in 0..3 {
            for y in 0..h {
                for x in 0..w {
                    let v = f32::from(img.get_pixel(x as u32, y as u32)[c]);
                    // numpy: image.astype(float64) * (1/255), back to float32, then (x - mean) / std in float32.
                    frames.push(((f64::from(v) * (1.0 / 255.0)) as f32 - 0.5) / 0.5);
                }
            }
        }
    }
    let (gh, gw) = (h / pch, w / pch);
    let shape = [1, tp, 3, gh / m, m, pch, gw / m, m, pch];
    let want = transpose(&frames, &shape, &[0, 3, 6, 4, 7, 2, 1, 5, 8]);
    let flat: Vec<f32> = got.pixel_values().flatten_all().unwrap().to_vec1().unwrap();
    assert_eq!(got.pixel_values().dims(), &[gh * gw, 3 * tp * pch * pch]);
    assert_eq!(flat, want);
}

#[test]
fn image_pad_expansion() {
    let ids = [5, 9, 7, 9 + 1];
    assert_eq!(expand_image_pad(&ids, 7, 3).unwrap(), vec![5, 9, 7, 7, 7, 10]);
    let e = expand_image_pad(&[1, 2], 7, 3).unwrap_err();
    assert!(e.to_string().contains("no image token"), "{e}");
    let e = expand_image_pad(&[7, 1, 7], 7, 3).unwrap_err();
    assert!(e.to_string().contains("2 image tokens"), "{e}");
}

/// Positions as transformers' `Qwen3VLModel.get_rope_index` gives them, worked out by hand.
#[test]
fn mrope_positions_match_get_rope_index() {
    // Text only: 0..n on all three rows.
    let [t, h, w] = mrope_positions(4, None);
    assert_eq!((t.as_slice(), h.as_slice(), w.as_slice()), (&[0, 1, 2, 3][..], &[0, 1, 2, 3][..], &[0, 1, 2, 3][..]));

    // 3 text tokens, an image with grid (1, 4, 6) and merge 2 -> 2 x 3 = 6 tokens at 3..9, 2 text after.
    // Image tokens: st_idx + text_len = 3, plus (t, row, col) of the 2 x 3 grid.
    // After the image: max position (3 + 2) + 1 = 6, counting up.
    let [t, h, w] = mrope_positions(11, Some((3, [1, 4, 6], 2)));
    assert_eq!(t, vec![0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7]);
    assert_eq!(h, vec![0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7]);
    assert_eq!(w, vec![0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]);

    // A tall image (grid 1, 8, 2 -> 4 x 1) at the start: rows run further than columns.
    let [t, h, w] = mrope_positions(6, Some((0, [1, 8, 2], 2)));
    assert_eq!(t, vec![0, 0, 0, 0, 4, 5]);
    assert_eq!(h, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(w, vec![0, 0, 0, 0, 4, 5]);
}
