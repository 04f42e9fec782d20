//! Rendering a stimulus to pixels, like the original study's images: white canvas, black elements with
//! hard edges (so that tests can measure them exactly), bold labels in DejaVu Sans Bold (bundled,
//! Bitstream Vera licence: data/fonts/LICENSE-DejaVu.txt).

use crate::params::{Rect, Stimulus, StimulusError, TaskParams};
use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{DynamicImage, GrayImage, ImageEncoder, Luma, Rgb, RgbImage};
use imageproc::drawing::{draw_filled_circle_mut, draw_filled_rect_mut, draw_text_mut, text_size};
use imageproc::rect::Rect as PixelRect;
use std::sync::OnceLock;

static FONT_BYTES: &[u8] = include_bytes!("../../../data/fonts/DejaVuSans-Bold.ttf");

/// The bytes of the bundled label font, which every rendered image depends on (a run's input
/// fingerprint hashes them).
pub fn font_bytes() -> &'static [u8] {
    FONT_BYTES
}

fn font() -> &'static FontRef<'static> {
    static FONT: OnceLock<FontRef<'static>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(FONT_BYTES).expect("the bundled font is a valid TrueType file"))
}

/// Baseline-to-baseline distance of two label lines, as a multiple of the font size (measured on the
/// originals: 32 px at a 29 px font).
const LABEL_LINE_HEIGHT: f32 = 1.1;

fn pixel_rect([x0, y0, x1, y1]: Rect) -> PixelRect {
    PixelRect::at(x0 as i32, y0 as i32).of_size(x1 - x0, y1 - y0)
}

/// Draws the labels centred under each element; the cap height of the first line starts at `label_top`.
fn draw_labels<I, P>(canvas: &mut I, colour: P, stimulus: &Stimulus)
where
    I: image::GenericImage<Pixel = P>,
    P: image::Pixel<Subpixel = u8>,
{
    let font = font();
    let scale = PxScale::from(stimulus.label_size);
    let scaled = font.as_scaled(scale);
    // Where the top of a capital sits below the top of imageproc's text box.
    let cap_glyph = font.glyph_id('H').with_scale_and_position(scale, point(0.0, scaled.ascent()));
    let cap_offset = font.outline_glyph(cap_glyph).map_or(0.0, |g| g.px_bounds().min.y).round() as i32;
    let line_height = (stimulus.label_size * LABEL_LINE_HEIGHT).round() as i32;
    for (slot, label) in stimulus.labels.iter().enumerate() {
        let rect = stimulus.boxes[slot];
        let centre = (rect[0] + rect[2]) as i32 / 2;
        for (row, line) in label.lines().enumerate() {
            let (w, _) = text_size(scale, font, line);
            let x = centre - w as i32 / 2;
            let y = stimulus.label_top as i32 - cap_offset + row as i32 * line_height;
            draw_text_mut(canvas, colour, x, y, scale, font, line);
        }
    }
}

/// The stimulus as an image: greyscale for lines, RGB for colours and dots.
pub fn render(stimulus: &Stimulus) -> DynamicImage {
    match &stimulus.params {
        TaskParams::Lines { .. } => {
            let mut canvas = GrayImage::from_pixel(stimulus.width, stimulus.height, Luma([255]));
            for rect in stimulus.boxes {
                draw_filled_rect_mut(&mut canvas, pixel_rect(rect), Luma([0]));
            }
            draw_labels(&mut canvas, Luma([0]), stimulus);
            DynamicImage::ImageLuma8(canvas)
        }
        TaskParams::Color { reference_rgb, distractor_rgb } => {
            let mut canvas = RgbImage::from_pixel(stimulus.width, stimulus.height, Rgb([255, 255, 255]));
            for (rect, fill) in stimulus.boxes.iter().zip(stimulus.by_option(*reference_rgb, *distractor_rgb)) {
                draw_framed_box(&mut canvas, *rect, stimulus.box_edge, Rgb(fill));
            }
            draw_labels(&mut canvas, Rgb([0, 0, 0]), stimulus);
            DynamicImage::ImageRgb8(canvas)
        }
        TaskParams::Dots { dot_radius, dots, .. } => {
            let mut canvas = RgbImage::from_pixel(stimulus.width, stimulus.height, Rgb([255, 255, 255]));
            for (rect, centres) in stimulus.boxes.iter().zip(dots) {
                draw_framed_box(&mut canvas, *rect, stimulus.box_edge, Rgb([255, 255, 255]));
                for &[x, y] in centres {
                    draw_filled_circle_mut(&mut canvas, (x as i32, y as i32), *dot_radius as i32, Rgb([0, 0, 0]));
                }
            }
            draw_labels(&mut canvas, Rgb([0, 0, 0]), stimulus);
            DynamicImage::ImageRgb8(canvas)
        }
    }
}

fn draw_framed_box(canvas: &mut RgbImage, rect: Rect, edge: u32, fill: Rgb<u8>) {
    draw_filled_rect_mut(canvas, pixel_rect(rect), Rgb([0, 0, 0]));
    let inner = [rect[0] + edge, rect[1] + edge, rect[2] - edge, rect[3] - edge];
    draw_filled_rect_mut(canvas, pixel_rect(inner), fill);
}

/// The stimulus as PNG bytes. Fast compression: the images are flat, so it costs little size and keeps
/// pool building quick.
pub fn render_png(stimulus: &Stimulus) -> Result<Vec<u8>, StimulusError> {
    let image = render(stimulus);
    let mut bytes = Vec::new();
    let encoder = PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, FilterType::Sub);
    encoder
        .write_image(image.as_bytes(), image.width(), image.height(), image.color().into())
        .map_err(|e| StimulusError::Encode(e.to_string()))?;
    Ok(bytes)
}
