//! A text rendering of a stimulus for language models without vision: the same three options, the values
//! a vision model would have to read off the image.

use crate::params::{Stimulus, TaskParams};

/// Cells per side of the character grid that stands for a dot box.
const DOT_GRID: u32 = 10;

pub fn text_rendering(stimulus: &Stimulus) -> String {
    let names = stimulus.labels.map(|l| l.replace('\n', " "));
    let mut out = String::new();
    match &stimulus.params {
        TaskParams::Lines { .. } => {
            for (name, rect) in names.iter().zip(stimulus.boxes) {
                out.push_str(&format!("{name}: a vertical line {} pixels long\n", rect[3] - rect[1]));
            }
        }
        TaskParams::Color { reference_rgb, distractor_rgb } => {
            for (name, [r, g, b]) in names.iter().zip(stimulus.by_option(*reference_rgb, *distractor_rgb)) {
                out.push_str(&format!("{name}: a square of color RGB({r}, {g}, {b})\n"));
            }
        }
        TaskParams::Dots { dots, .. } => {
            out.push_str(&format!(
                "Each box is shown as a {DOT_GRID}×{DOT_GRID} grid of cells; a digit is the number of black dots in that cell, '.' an empty cell.\n"
            ));
            for ((name, rect), centres) in names.iter().zip(stimulus.boxes).zip(dots) {
                out.push_str(&format!("{name}:\n"));
                out.push_str(&dot_grid(rect, stimulus.box_edge, centres));
            }
        }
    }
    out.pop();
    out
}

/// Counts the dot centres per cell of a grid over the box's inner area. Counting (rather than marking)
/// keeps the total exact even when two dots share a cell.
fn dot_grid(rect: [u32; 4], edge: u32, centres: &[[u32; 2]]) -> String {
    let (x0, y0) = (rect[0] + edge, rect[1] + edge);
    let side = (rect[2] - edge - x0).max(1);
    let mut counts = vec![0u32; (DOT_GRID * DOT_GRID) as usize];
    for &[x, y] in centres {
        let cx = ((x.saturating_sub(x0)) * DOT_GRID / side).min(DOT_GRID - 1);
        let cy = ((y.saturating_sub(y0)) * DOT_GRID / side).min(DOT_GRID - 1);
        counts[(cy * DOT_GRID + cx) as usize] += 1;
    }
    let mut grid = String::new();
    for row in counts.chunks(DOT_GRID as usize) {
        for &c in row {
            grid.push(match c {
                0 => '.',
                1..=9 => char::from_digit(c, 10).unwrap_or('9'),
                _ => '+',
            });
        }
        grid.push('\n');
    }
    grid
}
