//! Drawing a stimulus's parameters: which option is correct, the distractor, the dot positions.

use herd_design::rand::Rng;
use herd_design::{Answer, BoxesLayout, DotsConfig, StimuliConfig, StreamKey, Task};
use serde::Serialize;

/// Which pool a stimulus belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "pool", content = "level")]
pub enum Pool {
    /// Clearly different distractors (the group-size, unanimity, normative and social families).
    General,
    /// Difficulty level `1..=levels`, 1 the easiest (widest spread).
    Difficulty(u32),
}

impl Pool {
    pub fn level(self) -> Option<u32> {
        match self {
            Pool::General => None,
            Pool::Difficulty(level) => Some(level),
        }
    }
}

/// A pixel rectangle `[x0, y0, x1, y1]`, right and bottom edges exclusive.
pub type Rect = [u32; 4];

/// Dot centres of the three boxes, in the order A, REFERENCE, B.
pub type DotCentres = [Vec<[u32; 2]>; 3];

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TaskParams {
    Lines { reference_length: u32, distractor_length: u32, line_width: u32, baseline: u32, centres: [u32; 3] },
    Color { reference_rgb: [u8; 3], distractor_rgb: [u8; 3] },
    Dots { reference_count: u32, distractor_count: u32, dot_radius: u32, dots: DotCentres },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stimulus {
    pub id: String,
    pub task: Task,
    pub correct: Answer,
    #[serde(skip)]
    pub pool: Pool,
    pub difficulty_level: Option<u32>,
    /// Higher is harder: 1/|Δlength| for lines, 1/|Δcount| for dots, 255·√3 − ‖ΔRGB‖ for colours.
    pub difficulty_index: f64,
    #[serde(flatten)]
    pub params: TaskParams,
    pub width: u32,
    pub height: u32,
    /// Rectangles of A, REFERENCE and B (the line, the square, the box).
    #[serde(serialize_with = "boxes_by_label")]
    pub boxes: [Rect; 3],
    /// Label under each element.
    #[serde(skip)]
    pub labels: [&'static str; 3],
    #[serde(skip)]
    pub label_top: u32,
    #[serde(skip)]
    pub label_size: f32,
    #[serde(skip)]
    pub box_edge: u32,
}

fn boxes_by_label<S: serde::Serializer>(boxes: &[Rect; 3], serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(3))?;
    for (label, rect) in ["A", "REFERENCE", "B"].iter().zip(boxes) {
        map.serialize_entry(label, rect)?;
    }
    map.end()
}

impl Stimulus {
    /// The record of `stimuli.jsonl`: every parameter, the image file name and the text rendering.
    pub fn record(&self, file: &str) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.insert("file".into(), file.into());
            object.insert("text".into(), crate::text_rendering(self).into());
        }
        value
    }

    /// What A, REFERENCE and B show, given the reference and distractor values of some property.
    pub fn by_option<T: Copy>(&self, reference: T, distractor: T) -> [T; 3] {
        slots(self.correct, reference, distractor)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StimulusError {
    #[error("difficulty level {level} does not exist for task {task}: the experiment defines {levels} levels")]
    NoSuchLevel { task: Task, level: u32, levels: usize },
    #[error("could not place {count} non-overlapping dots in a box; lower max_count or dot_radius")]
    Crowded { count: u32 },
    #[error("no distractor value is possible for task {task} with these parameters")]
    NoDistractor { task: Task },
    #[error("could not encode the PNG: {0}")]
    Encode(String),
}

/// The key of the stream that draws image `index` of a pool. Keyed by what it generates, so a pool's images
/// do not depend on how many other images or pools are generated.
pub fn stimulus_key(experiment: &str, master_seed: u64, task: Task, pool: Pool, index: u32) -> StreamKey {
    let pool = match pool {
        Pool::General => "general".to_owned(),
        Pool::Difficulty(level) => format!("difficulty-{level}"),
    };
    StreamKey::new(experiment, master_seed).with("stimulus", task).with("pool", pool).with("index", index)
}

fn spread(spreads: &[u32], task: Task, level: u32) -> Result<u32, StimulusError> {
    level.checked_sub(1).and_then(|i| spreads.get(i as usize).copied()).ok_or(StimulusError::NoSuchLevel {
        task,
        level,
        levels: spreads.len(),
    })
}

/// A uniform draw from the integers of `lo..=hi` outside of `gap_lo+1..gap_hi` — i.e. from the union of
/// `[lo, gap_lo]` and `[gap_hi, hi]` — without building the set.
fn draw_from_union(rng: &mut impl Rng, a: (i64, i64), b: (i64, i64)) -> Option<i64> {
    let len = |(lo, hi): (i64, i64)| if hi >= lo { hi - lo + 1 } else { 0 };
    let total = len(a) + len(b);
    if total == 0 {
        return None;
    }
    let k = rng.random_range(0..total);
    Some(if k < len(a) { a.0 + k } else { b.0 + k - len(a) })
}

/// Draws a stimulus of `task` in `pool` from `rng`.
pub fn generate(
    task: Task,
    config: &StimuliConfig,
    pool: Pool,
    id: &str,
    rng: &mut impl Rng,
) -> Result<Stimulus, StimulusError> {
    let correct = if rng.random_bool(0.5) { Answer::A } else { Answer::B };
    let (params, difficulty_index, width, height, boxes, labels, label_top, label_size, box_edge) = match task {
        Task::Lines => {
            let c = &config.lines;
            let r = i64::from(c.reference_length);
            let (min, max) = (i64::from(c.min_length), i64::from(c.max_length));
            let distractor = match pool {
                Pool::General => {
                    let g = i64::from(c.general_gap);
                    draw_from_union(rng, (min, r - g), (r + g, max))
                }
                Pool::Difficulty(level) => {
                    let d = i64::from(spread(&c.difficulty_spreads, task, level)?);
                    draw_from_union(rng, ((r - d).max(min), r - 1), (r + 1, (r + d).min(max)))
                }
            }
            .ok_or(StimulusError::NoDistractor { task })? as u32;
            let lay = &c.layout;
            let lengths = slots(correct, c.reference_length, distractor);
            let half = lay.line_width / 2;
            let boxes = std::array::from_fn(|i| {
                [
                    lay.centres[i] - half,
                    lay.baseline + 1 - lengths[i],
                    lay.centres[i] - half + lay.line_width,
                    lay.baseline + 1,
                ]
            });
            let index = 1.0 / f64::from(c.reference_length.abs_diff(distractor));
            let params = TaskParams::Lines {
                reference_length: c.reference_length,
                distractor_length: distractor,
                line_width: lay.line_width,
                baseline: lay.baseline,
                centres: lay.centres,
            };
            (
                params,
                index,
                lay.width,
                lay.height,
                boxes,
                ["A", "REFERENCE\nLINE", "B"],
                lay.label_top,
                lay.label_size,
                0,
            )
        }
        Task::Color => {
            let c = &config.color;
            let b = match pool {
                Pool::General => c.general_spread,
                Pool::Difficulty(level) => spread(&c.difficulty_spreads, task, level)?,
            }
            .min(127) as i64;
            let reference: [u8; 3] = std::array::from_fn(|_| rng.random_range(b..=255 - b) as u8);
            let distractor = loop {
                let candidate: [u8; 3] = std::array::from_fn(|ch| {
                    let r = i64::from(reference[ch]);
                    rng.random_range((r - b).max(0)..=(r + b).min(255)) as u8
                });
                // The original allowed the distractor to equal the reference; that image has no right answer.
                if candidate != reference {
                    break candidate;
                }
            };
            let distance = reference
                .iter()
                .zip(distractor)
                .map(|(&r, d)| (f64::from(r) - f64::from(d)).powi(2))
                .sum::<f64>()
                .sqrt();
            let lay = &c.layout;
            let index = 255.0 * 3f64.sqrt() - distance;
            let params = TaskParams::Color { reference_rgb: reference, distractor_rgb: distractor };
            (
                params,
                index,
                lay.width,
                lay.height,
                box_rects(lay),
                ["A", "REFERENCE\nCOLOR", "B"],
                lay.label_top,
                lay.label_size,
                lay.edge,
            )
        }
        Task::Dots => {
            let c = &config.dots;
            let r = i64::from(c.reference_count);
            let max = i64::from(c.max_count);
            let distractor = match pool {
                Pool::General => draw_from_union(rng, (0, r - 1), (r + 1, max)),
                Pool::Difficulty(level) => {
                    let d = i64::from(spread(&c.difficulty_spreads, task, level)?);
                    draw_from_union(rng, ((r - d).max(0), r - 1), (r + 1, r + d))
                }
            }
            .ok_or(StimulusError::NoDistractor { task })? as u32;
            let lay = &c.layout;
            let boxes = box_rects(lay);
            let counts = slots(correct, c.reference_count, distractor);
            let mut dots: DotCentres = Default::default();
            for (slot, centres) in dots.iter_mut().enumerate() {
                *centres = place_dots(counts[slot], boxes[slot], c, rng)?;
            }
            let index = 1.0 / f64::from(c.reference_count.abs_diff(distractor));
            let params = TaskParams::Dots {
                reference_count: c.reference_count,
                distractor_count: distractor,
                dot_radius: c.dot_radius,
                dots,
            };
            (
                params,
                index,
                lay.width,
                lay.height,
                boxes,
                ["A", "REFERENCE\nBOX", "B"],
                lay.label_top,
                lay.label_size,
                lay.edge,
            )
        }
    };
    Ok(Stimulus {
        id: id.to_owned(),
        task,
        correct,
        pool,
        difficulty_level: pool.level(),
        difficulty_index,
        params,
        width,
        height,
        boxes,
        labels,
        label_top,
        label_size,
        box_edge,
    })
}

/// Values of A, REFERENCE, B: the correct option repeats the reference, the other shows the distractor.
fn slots<T: Copy>(correct: Answer, reference: T, distractor: T) -> [T; 3] {
    match correct {
        Answer::A => [reference, reference, distractor],
        Answer::B => [distractor, reference, reference],
    }
}

fn box_rects(lay: &BoxesLayout) -> [Rect; 3] {
    std::array::from_fn(|i| {
        let x0 = lay.left + i as u32 * lay.pitch;
        [x0, lay.top, x0 + lay.side, lay.top + lay.side]
    })
}

/// Rejection-samples `count` dot centres inside `rect`'s inner area, no two closer than 2r + 1 + min_gap,
/// so every dot stays its own connected component (the original let dots overlap).
fn place_dots(count: u32, rect: Rect, c: &DotsConfig, rng: &mut impl Rng) -> Result<Vec<[u32; 2]>, StimulusError> {
    let inset = c.layout.edge + c.margin + c.dot_radius;
    let (lo_x, hi_x) = (rect[0] + inset, rect[2] - 1 - inset);
    let (lo_y, hi_y) = (rect[1] + inset, rect[3] - 1 - inset);
    let min_distance = i64::from(2 * c.dot_radius + 1 + c.min_gap);
    let mut centres: Vec<[u32; 2]> = Vec::with_capacity(count as usize);
    let mut attempts = 0u32;
    while centres.len() < count as usize {
        attempts += 1;
        if attempts > 200_000 {
            return Err(StimulusError::Crowded { count });
        }
        let p = [rng.random_range(lo_x..=hi_x), rng.random_range(lo_y..=hi_y)];
        let clear = centres.iter().all(|q| {
            let dx = i64::from(p[0]) - i64::from(q[0]);
            let dy = i64::from(p[1]) - i64::from(q[1]);
            dx * dx + dy * dy >= min_distance * min_distance
        });
        if clear {
            centres.push(p);
        }
    }
    Ok(centres)
}
