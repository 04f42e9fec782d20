//! The three chart shapes every figure is made of (lines with confidence bands, grouped bars with
//! intervals, a heatmap), drawn once per backend: PNG through plotters' bitmap backend and the
//! `image` crate's encoder, SVG through plotters' SVG backend.
//!
//! Readability rules live here so no figure can break them: series differ by Okabe–Ito colour *and*
//! by marker and line dash (bars by hatching), so a figure reads in greyscale and for colour-blind
//! readers; the legend has its own panel right of the plot, so it never covers data.

use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::ReportError;

/// Pixel size of every figure (PNG) and of its SVG canvas.
pub const FIGURE_WIDTH: u32 = 1000;
pub const FIGURE_HEIGHT: u32 = 600;
const LEGEND_WIDTH: u32 = 270;
const FONT: &str = "sans-serif";

/// The bitmap backend draws text with this font (herd's one bundled font, also used for stimuli), so
/// figures need no system fonts; SVG text names the generic `sans-serif` family.
static FONT_BYTES: &[u8] = include_bytes!("../../../data/fonts/DejaVuSans-Bold.ttf");
static REGISTER_FONT: Once = Once::new();

/// Okabe & Ito's colour-blind-safe palette, yellow left out (too light on white).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];
/// The papers' band: a light grey shade behind the data, a darker edge and label.
const PAPER_SHADE: RGBColor = RGBColor(232, 232, 232);
const PAPER_EDGE: RGBColor = RGBColor(150, 150, 150);
const PAPER_TEXT: RGBColor = RGBColor(90, 90, 90);
/// Line dash patterns in pixels (on, off, …); empty is solid.
const DASHES: [&[f64]; 4] = [&[], &[12.0, 6.0], &[3.0, 4.0], &[12.0, 4.0, 3.0, 4.0]];

#[derive(Debug, Clone, Copy)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Cross,
    FilledCircle,
    FilledSquare,
}
const MARKERS: [Marker; 6] =
    [Marker::Circle, Marker::Square, Marker::Triangle, Marker::Cross, Marker::FilledCircle, Marker::FilledSquare];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One point of a line series with its optional confidence interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub interval: Option<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LineSeries {
    pub label: String,
    pub points: Vec<Point>,
}

/// Lines over a numeric x axis, bands where points carry intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub legend_title: String,
    pub series: Vec<LineSeries>,
    /// Bounds the y range, fitted to the data, its intervals and `reference_y`, never passes (a
    /// probability's 0–1): a variant's 0.013 → 0.029 is a rise, not a flat line at the bottom.
    pub y_limits: Option<(f64, f64)>,
    /// A horizontal reference line (e.g. zero favouritism).
    pub reference_y: Option<f64>,
    /// The papers' values, shaded across the plot.
    pub paper: Option<PaperBand>,
    /// Each series' value at x = 0 (N = 0: no confederates) drawn on as a thin dotted line in its colour,
    /// so that a curve's rise reads against its own baseline.
    pub baselines: bool,
}

/// The range the papers report for what a chart shows, shaded across the plot behind the data and
/// labelled, so that a reader sets this run against the paper without looking it up.
#[derive(Debug, Clone, PartialEq)]
pub struct PaperBand {
    pub low: f64,
    pub high: f64,
    /// What the range is and where it comes from (`paper: +0.84 to +4.06, four models`).
    pub label: String,
}

/// One bar: its value, interval and a short note printed above it (e.g. `z = 2.4`).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub interval: Option<(f64, f64)>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    pub label: String,
    /// One per category; `None` where the series has no value there.
    pub bars: Vec<Option<Bar>>,
}

/// Bars grouped by category, one bar per series in each group.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub legend_title: String,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
    /// The papers' values, shaded across the plot.
    pub paper: Option<PaperBand>,
}

/// Mean values on a grid over two normalised axes.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub value_label: String,
    /// `cells[i][j]`: x bin i, y bin j, over [0, 1]²; `None` where no data fell.
    pub cells: Vec<Vec<Option<f64>>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    Line(LineChart),
    Bar(BarChart),
    Heat(Heatmap),
}

fn draw_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Renders `chart` as PNG bytes and SVG text of [`FIGURE_WIDTH`] × [`FIGURE_HEIGHT`].
pub fn render(name: &str, chart: &Chart) -> Result<(Vec<u8>, String), ReportError> {
    let failed = |problem: String| ReportError::Draw { figure: name.to_owned(), problem };
    let mut registered = Ok(());
    REGISTER_FONT.call_once(|| {
        registered = plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES)
            .map_err(|_| "the bundled DejaVu Sans font did not load".to_owned());
    });
    registered.map_err(failed)?;

    let mut pixels = vec![0_u8; (FIGURE_WIDTH * FIGURE_HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (FIGURE_WIDTH, FIGURE_HEIGHT)).into_drawing_area();
        draw(&root, chart).map_err(failed)?;
        root.present().map_err(|e| failed(e.to_string()))?;
    }
    let image = image::RgbImage::from_raw(FIGURE_WIDTH, FIGURE_HEIGHT, pixels)
        .ok_or_else(|| failed("the bitmap buffer has the wrong size".into()))?;
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| failed(e.to_string()))?;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (FIGURE_WIDTH, FIGURE_HEIGHT)).into_drawing_area();
        draw(&root, chart).map_err(failed)?;
        root.present().map_err(|e| failed(e.to_string()))?;
    }
    Ok((png, svg))
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    root.fill(&WHITE).map_err(draw_error)?;
    let (width, _) = root.dim_in_pixel();
    let (plot, legend) = root.split_horizontally(width - LEGEND_WIDTH);
    match chart {
        Chart::Line(c) => draw_lines(&plot, &legend, c),
        Chart::Bar(c) => draw_bars(root, &plot, &legend, c),
        Chart::Heat(c) => draw_heatmap(&plot, &legend, c),
    }
}

/// (low, high) of `values` padded by 6% (a unit range around a single value).
fn padded_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        return (lo - 0.5, hi + 0.5);
    }
    let pad = (hi - lo) * 0.06;
    (lo - pad, hi + pad)
}

fn tick_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Splits a polyline into the drawn pieces of a dash pattern measured in pixels (`to_pixel` maps a
/// data point to the backend), returned in data coordinates.
fn dashed(points: &[(f64, f64)], pattern: &[f64], to_pixel: impl Fn((f64, f64)) -> (f64, f64)) -> Vec<Vec<(f64, f64)>> {
    if pattern.is_empty() || points.len() < 2 {
        return vec![points.to_vec()];
    }
    let mut pieces = Vec::new();
    let mut current: Vec<(f64, f64)> = vec![points[0]];
    let (mut step, mut left) = (0, pattern[0]);
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let (pa, pb) = (to_pixel(a), to_pixel(b));
        let length = ((pb.0 - pa.0).powi(2) + (pb.1 - pa.1).powi(2)).sqrt();
        let mut done = 0.0;
        while length - done > left {
            done += left;
            let t = done / length;
            let p = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
            if step % 2 == 0 {
                current.push(p);
                pieces.push(std::mem::take(&mut current));
            } else {
                current = vec![p];
            }
            step = (step + 1) % pattern.len();
            left = pattern[step];
        }
        left -= length - done;
        if step % 2 == 0 {
            current.push(b);
        }
    }
    if step % 2 == 0 && current.len() >= 2 {
        pieces.push(current);
    }
    pieces
}

fn legend_text_style(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Left, VPos::Center))
}

/// Wraps a legend label at word boundaries to at most `width` characters per line.
fn wrap(label: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in label.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// Draws a legend of line samples (dash + marker) or bar swatches (hatched) in its own panel.
fn draw_legend<DB: DrawingBackend>(
    legend: &DrawingArea<DB, Shift>,
    title: &str,
    labels: &[String],
    bars: bool,
    paper: Option<&PaperBand>,
) -> Result<(), String> {
    let mut y = 60;
    for line in wrap(title, 26) {
        legend.draw(&Text::new(line, (12, y), legend_text_style(15))).map_err(draw_error)?;
        y += 19;
    }
    y += 9;
    for (i, label) in labels.iter().enumerate() {
        let c = colour(i);
        if bars {
            legend.draw(&Rectangle::new([(12, y - 8), (44, y + 8)], c.filled())).map_err(draw_error)?;
            for line in hatch_lines(i, (12.0, 44.0), (y as f64 - 8.0, y as f64 + 8.0), 6.0, 6.0) {
                let pixels: Vec<(i32, i32)> = line.iter().map(|&(x, y)| (x.round() as i32, y.round() as i32)).collect();
                legend.draw(&PathElement::new(pixels, WHITE.stroke_width(2))).map_err(draw_error)?;
            }
        } else {
            let sample = [(8.0, y as f64), (48.0, y as f64)];
            for piece in dashed(&sample, DASHES[i % DASHES.len()], |p| p) {
                let pixels: Vec<(i32, i32)> =
                    piece.iter().map(|&(x, y)| (x.round() as i32, y.round() as i32)).collect();
                legend.draw(&PathElement::new(pixels, c.stroke_width(2))).map_err(draw_error)?;
            }
            let (stroke, fill) = (ShapeStyle::from(&c).stroke_width(2), ShapeStyle::from(&c).filled());
            let at = EmptyElement::at((28, y));
            match MARKERS[i % MARKERS.len()] {
                Marker::Circle => legend.draw(&(at + Circle::new((0, 0), 5, stroke))),
                Marker::FilledCircle => legend.draw(&(at + Circle::new((0, 0), 5, fill))),
                Marker::Square => legend.draw(&(at + Rectangle::new([(-4, -4), (4, 4)], stroke))),
                Marker::FilledSquare => legend.draw(&(at + Rectangle::new([(-4, -4), (4, 4)], fill))),
                Marker::Triangle => legend.draw(&(at + TriangleMarker::new((0, 0), 6, fill))),
                Marker::Cross => legend.draw(&(at + Cross::new((0, 0), 5, stroke))),
            }
            .map_err(draw_error)?;
        }
        for (k, line) in wrap(label, 24).iter().enumerate() {
            legend
                .draw(&Text::new(line.clone(), (56, y + 17 * k as i32), legend_text_style(14)))
                .map_err(draw_error)?;
        }
        y += 24 + 17 * (wrap(label, 24).len() as i32 - 1);
    }
    if let Some(band) = paper {
        y += 6;
        legend.draw(&Rectangle::new([(12, y - 8), (44, y + 8)], PAPER_SHADE.filled())).map_err(draw_error)?;
        legend.draw(&Rectangle::new([(12, y - 8), (44, y + 8)], PAPER_EDGE.stroke_width(1))).map_err(draw_error)?;
        for (k, line) in wrap(&band.label, 24).iter().enumerate() {
            let style = legend_text_style(14).color(&PAPER_TEXT);
            legend.draw(&Text::new(line.clone(), (56, y + 17 * k as i32), style)).map_err(draw_error)?;
        }
    }
    Ok(())
}

/// Hatching of series `i` inside a rectangle, as line segments in the rectangle's own coordinates:
/// none, vertical, horizontal, or both, spaced `dx` and `dy` apart.
fn hatch_lines(i: usize, (x0, x1): (f64, f64), (y0, y1): (f64, f64), dx: f64, dy: f64) -> Vec<[(f64, f64); 2]> {
    let (lo_y, hi_y) = (y0.min(y1), y0.max(y1));
    let mut lines = Vec::new();
    let pattern = i % 4;
    if pattern == 1 || pattern == 3 {
        let mut x = x0 + dx / 2.0;
        while x < x1 {
            lines.push([(x, lo_y), (x, hi_y)]);
            x += dx;
        }
    }
    if pattern == 2 || pattern == 3 {
        let mut y = lo_y + dy / 2.0;
        while y < hi_y {
            lines.push([(x0, y), (x1, y)]);
            y += dy;
        }
    }
    lines
}

/// Each series' horizontal offset: series drawn with error bars (a point's interval with no band to
/// span, e.g. one minority size) would stack their bars on one another at a shared x, so they are set
/// side by side, 3% of the x range apart (clear of the bars' 1% caps); series with bands, and a lone series,
/// stay where they are.
fn dodges(c: &LineChart, x_range: f64) -> Vec<f64> {
    let barred: Vec<usize> = (0..c.series.len())
        .filter(|&i| {
            let intervals = c.series[i].points.iter().filter(|p| p.interval.is_some()).count();
            (1..2).contains(&intervals)
        })
        .collect();
    let mut offsets = vec![0.0; c.series.len()];
    if barred.len() >= 2 {
        let middle = (barred.len() - 1) as f64 / 2.0;
        for (k, &i) in barred.iter().enumerate() {
            offsets[i] = (k as f64 - middle) * 0.03 * x_range;
        }
    }
    offsets
}

/// The papers' band across the plot from `x0` to `x1`: a grey shade behind the data with darker edges;
/// its label is the legend's last entry, where no bar or point can cover it.
fn draw_paper_band<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    band: &PaperBand,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    let (low, high) = (band.low.clamp(y0, y1), band.high.clamp(y0, y1));
    chart
        .draw_series(std::iter::once(Rectangle::new([(x0, low), (x1, high)], PAPER_SHADE.filled())))
        .map_err(draw_error)?;
    chart
        .draw_series([low, high].map(|y| PathElement::new(vec![(x0, y), (x1, y)], PAPER_EDGE.stroke_width(1))))
        .map_err(draw_error)?;
    Ok(())
}

fn draw_lines<DB: DrawingBackend>(
    plot: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
    c: &LineChart,
) -> Result<(), String> {
    let points = || c.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = padded_range(points().map(|p| p.x));
    let (y0, y1) = {
        let (lo, hi) = padded_range(
            points()
                .flat_map(|p| [Some(p.y), p.interval.map(|i| i.0), p.interval.map(|i| i.1)])
                .flatten()
                .chain(c.reference_y)
                .chain(c.paper.iter().flat_map(|b| [b.low, b.high])),
        );
        // Fitted to the data, but never past what the quantity can take (a probability's 0–1).
        match c.y_limits {
            Some((min, max)) if lo.max(min) < hi.min(max) => (lo.max(min), hi.min(max)),
            _ => (lo, hi),
        }
    };
    let clamp = |y: f64| y.clamp(y0, y1);
    let mut chart = ChartBuilder::on(plot)
        .caption(&c.title, (FONT, 20))
        .margin(14)
        .x_label_area_size(56)
        .y_label_area_size(78)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_error)?;
    // Whole-number axes (N, m, levels) get a tick per unit, never 2.5 confederates.
    let whole = points().all(|p| p.x.fract() == 0.0) && x1 - x0 <= 24.0;
    let x_ticks = if whole { (x1 - x0).floor() as usize + 1 } else { 10 };
    chart
        .configure_mesh()
        .x_labels(x_ticks)
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .x_label_formatter(&tick_label)
        .y_label_formatter(&tick_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(draw_error)?;
    if let Some(band) = &c.paper {
        draw_paper_band(&mut chart, band, (x0, x1), (y0, y1))?;
    }
    if let Some(y) = c.reference_y {
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(x0, y), (x1, y)], BLACK.stroke_width(1))))
            .map_err(draw_error)?;
    }
    if c.baselines {
        for (i, series) in c.series.iter().enumerate() {
            let Some(first) = series.points.first().filter(|p| p.x == 0.0) else { continue };
            let y = clamp(first.y);
            let to_pixel = |p: (f64, f64)| {
                let (x, y) = chart.backend_coord(&p);
                (f64::from(x), f64::from(y))
            };
            for piece in dashed(&[(first.x, y), (x1, y)], &[2.0, 5.0], to_pixel) {
                chart
                    .draw_series(std::iter::once(PathElement::new(piece, colour(i).mix(0.5).stroke_width(1))))
                    .map_err(draw_error)?;
            }
        }
    }
    let dodge = dodges(c, x1 - x0);
    for (i, series) in c.series.iter().enumerate() {
        let band: Vec<(f64, f64)> = series
            .points
            .iter()
            .filter_map(|p| p.interval.map(|(_, hi)| (p.x, clamp(hi))))
            .chain(series.points.iter().rev().filter_map(|p| p.interval.map(|(lo, _)| (p.x, clamp(lo)))))
            .collect();
        if band.len() >= 4 {
            chart.draw_series(std::iter::once(Polygon::new(band, colour(i).mix(0.10).filled()))).map_err(draw_error)?;
        } else {
            // A lone point's interval has no band to span: an error bar, so the legend's interval is drawn.
            let bars =
                series.points.iter().filter_map(|p| p.interval.map(|(lo, hi)| (p.x + dodge[i], clamp(lo), clamp(hi))));
            for (x, lo, hi) in bars {
                let cap = (x1 - x0) * 0.01;
                for segment in
                    [vec![(x, lo), (x, hi)], vec![(x - cap, lo), (x + cap, lo)], vec![(x - cap, hi), (x + cap, hi)]]
                {
                    chart
                        .draw_series(std::iter::once(PathElement::new(segment, colour(i).mix(0.6).stroke_width(2))))
                        .map_err(draw_error)?;
                }
            }
        }
    }
    for (i, series) in c.series.iter().enumerate() {
        let line: Vec<(f64, f64)> = series.points.iter().map(|p| (p.x + dodge[i], clamp(p.y))).collect();
        let to_pixel = |p: (f64, f64)| {
            let (x, y) = chart.backend_coord(&p);
            (f64::from(x), f64::from(y))
        };
        for piece in dashed(&line, DASHES[i % DASHES.len()], to_pixel) {
            chart
                .draw_series(std::iter::once(PathElement::new(piece, colour(i).stroke_width(2))))
                .map_err(draw_error)?;
        }
        let (stroke, fill) = (ShapeStyle::from(&colour(i)).stroke_width(2), ShapeStyle::from(&colour(i)).filled());
        let at = |p: &(f64, f64)| EmptyElement::at(*p);
        match MARKERS[i % MARKERS.len()] {
            Marker::Circle => chart.draw_series(line.iter().map(|p| at(p) + Circle::new((0, 0), 5, stroke))),
            Marker::FilledCircle => chart.draw_series(line.iter().map(|p| at(p) + Circle::new((0, 0), 5, fill))),
            Marker::Square => {
                chart.draw_series(line.iter().map(|p| at(p) + Rectangle::new([(-4, -4), (4, 4)], stroke)))
            }
            Marker::FilledSquare => {
                chart.draw_series(line.iter().map(|p| at(p) + Rectangle::new([(-4, -4), (4, 4)], fill)))
            }
            Marker::Triangle => chart.draw_series(line.iter().map(|p| at(p) + TriangleMarker::new((0, 0), 6, fill))),
            Marker::Cross => chart.draw_series(line.iter().map(|p| at(p) + Cross::new((0, 0), 5, stroke))),
        }
        .map_err(draw_error)?;
    }
    let labels: Vec<String> = c.series.iter().map(|s| s.label.clone()).collect();
    draw_legend(legend, &c.legend_title, &labels, false, c.paper.as_ref())
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
    c: &BarChart,
) -> Result<(), String> {
    let n = c.categories.len().max(1);
    let bars = || c.series.iter().flat_map(|s| s.bars.iter().flatten());
    let (y0, y1) = padded_range(
        bars()
            .flat_map(|b| [Some(b.value), b.interval.map(|i| i.0), b.interval.map(|i| i.1)])
            .flatten()
            .chain([0.0])
            .chain(c.paper.iter().flat_map(|b| [b.low, b.high])),
    );
    // Bars all at zero (no extreme allocation anywhere) stand on zero: 0 to 1, not −0.5 to 0.5.
    let (y0, y1) = if bars().all(|b| b.value == 0.0 && b.interval.is_none_or(|i| i == (0.0, 0.0))) {
        (0.0, 1.0)
    } else {
        (y0, y1)
    };
    // Room above the tallest bar for its note.
    let y1 = if bars().any(|b| b.note.is_some()) { y1 + (y1 - y0) * 0.08 } else { y1 };
    let (x0, x1) = (-0.5, n as f64 - 0.5);
    let mut chart = ChartBuilder::on(plot)
        .caption(&c.title, (FONT, 20))
        .margin(14)
        .x_label_area_size(72)
        .y_label_area_size(78)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_error)?;
    let blank = |_: &f64| String::new();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2)
        .x_label_formatter(&blank)
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .y_label_formatter(&tick_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(draw_error)?;
    if let Some(band) = &c.paper {
        draw_paper_band(&mut chart, band, (x0, x1), (y0, y1))?;
    }
    chart
        .draw_series(std::iter::once(PathElement::new(vec![(x0, 0.0), (x1, 0.0)], BLACK.stroke_width(1))))
        .map_err(draw_error)?;
    let width = 0.8 / c.series.len().max(1) as f64;
    let (px_per_x, px_per_y) = {
        let (ax, ay) = chart.backend_coord(&(0.0, 0.0));
        let (bx, by) = chart.backend_coord(&(1.0, y0 + (y1 - y0)));
        let dy = f64::from((by - ay).abs()).max(1.0) / (y1 - y0).abs().max(1e-12);
        (f64::from((bx - ax).abs()).max(1.0), dy)
    };
    for (s, series) in c.series.iter().enumerate() {
        for (k, bar) in series.bars.iter().enumerate() {
            let Some(bar) = bar else { continue };
            let left = k as f64 - 0.4 + s as f64 * width;
            let right = left + width;
            let centre = (left + right) / 2.0;
            let value = bar.value.clamp(y0, y1);
            chart
                .draw_series(std::iter::once(Rectangle::new([(left, 0.0), (right, value)], colour(s).filled())))
                .map_err(draw_error)?;
            for line in hatch_lines(s, (left, right), (0.0, value), 7.0 / px_per_x, 7.0 / px_per_y) {
                chart
                    .draw_series(std::iter::once(PathElement::new(line.to_vec(), WHITE.stroke_width(2))))
                    .map_err(draw_error)?;
            }
            chart
                .draw_series(std::iter::once(Rectangle::new([(left, 0.0), (right, value)], BLACK.stroke_width(1))))
                .map_err(draw_error)?;
            let mut top = value.max(0.0);
            if let Some((lo, hi)) = bar.interval {
                let (lo, hi) = (lo.clamp(y0, y1), hi.clamp(y0, y1));
                let cap = width * 0.25;
                for segment in [
                    vec![(centre, lo), (centre, hi)],
                    vec![(centre - cap, lo), (centre + cap, lo)],
                    vec![(centre - cap, hi), (centre + cap, hi)],
                ] {
                    chart
                        .draw_series(std::iter::once(PathElement::new(segment, BLACK.stroke_width(2))))
                        .map_err(draw_error)?;
                }
                top = top.max(hi);
            }
            if let Some(note) = &bar.note {
                let style = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
                let (px, py) = chart.backend_coord(&(centre, top));
                root.draw(&Text::new(note.clone(), (px, py - 4), style)).map_err(draw_error)?;
            }
        }
    }
    // Category names under the axis, staggered when crowded.
    let crowded = n > 6;
    for (k, name) in c.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(k as f64, y0));
        let dy = if crowded && k % 2 == 1 { 24 } else { 8 };
        let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(name.clone(), (px, py + dy), style)).map_err(draw_error)?;
    }
    let labels: Vec<String> = c.series.iter().map(|s| s.label.clone()).collect();
    draw_legend(legend, &c.legend_title, &labels, true, c.paper.as_ref())
}

/// Viridis, sampled at five points and interpolated: perceptually uniform and monotone in
/// lightness, so the heatmap reads in greyscale and for colour-blind readers.
fn viridis(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] =
        [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];
    let t = t.clamp(0.0, 1.0) * 4.0;
    let i = (t.floor() as usize).min(3);
    let f = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

fn draw_heatmap<DB: DrawingBackend>(
    plot: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
    c: &Heatmap,
) -> Result<(), String> {
    let values = || c.cells.iter().flatten().flatten().copied();
    let lo = values().fold(f64::INFINITY, f64::min);
    let hi = values().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() { (lo, if hi > lo { hi } else { lo + 1.0 }) } else { (0.0, 1.0) };
    let mut chart = ChartBuilder::on(plot)
        .caption(&c.title, (FONT, 20))
        .margin(14)
        .x_label_area_size(56)
        .y_label_area_size(78)
        .build_cartesian_2d(0.0..1.0, 0.0..1.0)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .x_label_formatter(&tick_label)
        .y_label_formatter(&tick_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(draw_error)?;
    let nx = c.cells.len().max(1);
    for (i, column) in c.cells.iter().enumerate() {
        let ny = column.len().max(1);
        for (j, value) in column.iter().enumerate() {
            let corners = [
                (i as f64 / nx as f64, j as f64 / ny as f64),
                ((i + 1) as f64 / nx as f64, (j + 1) as f64 / ny as f64),
            ];
            let style = match value {
                Some(v) => viridis((v - lo) / (hi - lo)).filled(),
                None => RGBColor(245, 245, 245).filled(),
            };
            chart.draw_series(std::iter::once(Rectangle::new(corners, style))).map_err(draw_error)?;
        }
    }
    // Colour bar in the legend panel, value ticks beside it.
    for (k, line) in wrap(&c.value_label, 26).into_iter().enumerate() {
        legend.draw(&Text::new(line, (12, 50 + 19 * k as i32), legend_text_style(15))).map_err(draw_error)?;
    }
    let (top, bottom) = (90, 420);
    for y in top..bottom {
        let t = f64::from(bottom - y) / f64::from(bottom - top);
        legend.draw(&Rectangle::new([(16, y), (46, y + 1)], viridis(t).filled())).map_err(draw_error)?;
    }
    for k in 0..=4 {
        let t = f64::from(k) / 4.0;
        let y = bottom - (t * f64::from(bottom - top)).round() as i32;
        legend
            .draw(&Text::new(format!("{:.3}", lo + t * (hi - lo)), (54, y), legend_text_style(13)))
            .map_err(draw_error)?;
    }
    legend
        .draw(&Text::new("light grey: no images".to_owned(), (12, bottom + 30), legend_text_style(13)))
        .map_err(draw_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashes_alternate_along_a_straight_line() {
        let pieces = dashed(&[(0.0, 0.0), (40.0, 0.0)], &[10.0, 5.0], |p| p);
        let starts: Vec<f64> = pieces.iter().map(|p| p[0].0).collect();
        assert_eq!(starts, vec![0.0, 15.0, 30.0]);
        assert!((pieces[0].last().unwrap().0 - 10.0).abs() < 1e-9);
        assert!((pieces[2].last().unwrap().0 - 40.0).abs() < 1e-9);
    }

    fn line(points: Vec<Point>) -> Chart {
        Chart::Line(LineChart {
            title: "t".into(),
            x_label: "N".into(),
            y_label: "p_wrong".into(),
            legend_title: "legend".into(),
            series: vec![LineSeries { label: "a".into(), points }],
            y_limits: Some((0.0, 1.0)),
            reference_y: Some(0.0),
            baselines: false,
            paper: None,
        })
    }

    /// The tick labels of a rendered SVG (the text of its `<text>` elements).
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_owned()))
            .collect()
    }

    #[test]
    fn a_small_probability_rise_fills_the_axis_from_zero() {
        let point = |x: f64, y: f64| Point { x, y, interval: None };
        let (_, svg) = render("rise", &line(vec![point(0.0, 0.013), point(5.0, 0.02), point(10.0, 0.029)])).unwrap();
        let ticks = texts(&svg);
        assert!(ticks.iter().any(|t| t == "0"), "zero is on the axis: {ticks:?}");
        assert!(ticks.iter().any(|t| t == "0.01"), "{ticks:?}");
        assert!(!ticks.iter().any(|t| t == "0.5" || t == "0.9"), "not a 0–1 axis: {ticks:?}");
        assert!(!ticks.iter().any(|t| t.starts_with('-')), "a probability axis stops at 0: {ticks:?}");
    }

    #[test]
    fn the_papers_band_is_shaded_labelled_and_in_range() {
        let point = |x: f64, y: f64| Point { x, y, interval: None };
        let mut chart = line(vec![point(0.0, 0.02), point(10.0, 0.1)]);
        let (_, without) = render("without", &chart).unwrap();
        if let Chart::Line(c) = &mut chart {
            c.paper = Some(PaperBand { low: 0.3, high: 0.4, label: "humans: 30–40%".into() });
        }
        let (_, with) = render("with", &chart).unwrap();
        assert!(texts(&with).iter().any(|t| t == "humans: 30–40%"), "{:?}", texts(&with));
        assert!(!texts(&without).iter().any(|t| t.starts_with("humans")));
        // The axis reaches the band though the data stop at 0.1.
        assert!(texts(&with).iter().any(|t| t == "0.4"), "{:?}", texts(&with));
        assert!(!texts(&without).iter().any(|t| t == "0.4"), "{:?}", texts(&without));
        // The shade is drawn in its own grey.
        assert!(with.contains("#E8E8E8") && !without.contains("#E8E8E8"));
    }

    #[test]
    fn each_curves_value_at_zero_is_drawn_on_as_its_baseline() {
        let point = |x: f64, y: f64| Point { x, y, interval: None };
        let mut chart = line(vec![point(0.0, 0.1), point(5.0, 0.4), point(10.0, 0.6)]);
        let (_, without) = render("without", &chart).unwrap();
        if let Chart::Line(c) = &mut chart {
            c.baselines = true;
        }
        let (_, with) = render("with", &chart).unwrap();
        // The dotted baseline is drawn at half the series' opacity; nothing else is.
        let dotted = |svg: &str| svg.matches("opacity=\"0.5\"").count();
        assert_eq!(dotted(&without), 0);
        assert!(dotted(&with) > 5, "{} dots", dotted(&with));
        // A curve that starts after N = 0 has no baseline to draw.
        let mut late = line(vec![point(2.0, 0.1), point(10.0, 0.6)]);
        if let Chart::Line(c) = &mut late {
            c.baselines = true;
        }
        assert_eq!(dotted(&render("late", &late).unwrap().1), 0);
    }

    #[test]
    fn a_lone_points_interval_is_drawn() {
        let with = |interval| line(vec![Point { x: 3.0, y: 0.4, interval }]);
        let (_, bare) = render("bare", &with(None)).unwrap();
        let (_, barred) = render("barred", &with(Some((0.2, 0.6)))).unwrap();
        // The error bar and its two caps, in the series' colour at 0.6 (nothing else is drawn so).
        let bar_strokes = |svg: &str| svg.matches("opacity=\"0.6\"").count();
        assert_eq!((bar_strokes(&bare), bar_strokes(&barred)), (0, 3));
    }

    #[test]
    fn lone_points_at_one_x_are_set_side_by_side() {
        let series = |label: &str, y: f64| LineSeries {
            label: label.into(),
            points: vec![Point { x: 5.0, y, interval: Some((y - 0.1, y + 0.1)) }],
        };
        let chart = |series: Vec<LineSeries>| {
            Chart::Line(LineChart {
                title: "t".into(),
                x_label: "m".into(),
                y_label: "favouritism".into(),
                legend_title: "legend".into(),
                series,
                y_limits: None,
                reference_y: Some(0.0),
                baselines: false,
                paper: None,
            })
        };
        // The x of each error bar's vertical stroke (its two points share it).
        let bar_xs = |svg: &str| -> Vec<String> {
            svg.lines()
                .filter(|l| l.contains("opacity=\"0.6\""))
                .filter_map(|l| {
                    let points = l.split("points=\"").nth(1)?.split('"').next()?;
                    let xs: Vec<&str> = points.split_whitespace().filter_map(|p| p.split(',').next()).collect();
                    (xs.len() == 2 && xs[0] == xs[1]).then(|| xs[0].to_owned())
                })
                .collect()
        };
        let (_, two) = render("two", &chart(vec![series("a", 0.4), series("b", 0.45)])).unwrap();
        let xs = bar_xs(&two);
        assert_eq!(xs.len(), 2, "{xs:?}");
        assert_ne!(xs[0], xs[1], "the two bars are dodged");
        // One series alone stays on its x.
        let (_, one) = render("one", &chart(vec![series("a", 0.4)])).unwrap();
        assert_eq!(bar_xs(&one).len(), 1);
    }

    #[test]
    fn bars_all_at_zero_stand_on_zero() {
        let zero = Some(Bar { value: 0.0, interval: None, note: None });
        let chart = Chart::Bar(BarChart {
            title: "t".into(),
            x_label: "m".into(),
            y_label: "%".into(),
            legend_title: "legend".into(),
            categories: vec!["m = 3".into(), "m = 5".into()],
            series: vec![BarSeries { label: "a".into(), bars: vec![zero.clone(), zero] }],
            paper: None,
        });
        let (_, svg) = render("zero", &chart).unwrap();
        let ticks = texts(&svg);
        assert!(ticks.iter().any(|t| t == "1"), "{ticks:?}");
        assert!(!ticks.iter().any(|t| t.starts_with('-')), "{ticks:?}");
    }

    #[test]
    fn viridis_gets_lighter() {
        let lightness = |c: RGBColor| 0.299 * f64::from(c.0) + 0.587 * f64::from(c.1) + 0.114 * f64::from(c.2);
        let steps: Vec<f64> = (0..=10).map(|k| lightness(viridis(f64::from(k) / 10.0))).collect();
        assert!(steps.windows(2).all(|w| w[1] > w[0]), "{steps:?}");
    }
}
