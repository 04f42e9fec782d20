//! The conformity study's `[stimuli]` table: tasks, pool sizes, each task's generator and measured pixel layout, the baseline filter.

use serde::{Deserialize, Serialize};

use super::Task;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StimuliConfig {
    pub tasks: Vec<Task>,
    /// Candidate images per task and answer label in the general pool (before any baseline filter).
    #[serde(default = "default_general_pool_size")]
    pub general_pool_size: u32,
    #[serde(default)]
    pub lines: LinesConfig,
    #[serde(default)]
    pub color: ColorConfig,
    #[serde(default)]
    pub dots: DotsConfig,
}

fn default_general_pool_size() -> u32 {
    100
}

impl StimuliConfig {
    /// The protocol's stimulus parameters and layouts for `tasks`.
    pub fn protocol(tasks: Vec<Task>) -> Self {
        StimuliConfig {
            tasks,
            general_pool_size: default_general_pool_size(),
            lines: LinesConfig::default(),
            color: ColorConfig::default(),
            dots: DotsConfig::default(),
        }
    }
}

/// Line-judgment task. Lengths are in pixels of the rendered image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinesConfig {
    pub reference_length: u32,
    pub min_length: u32,
    pub max_length: u32,
    /// General pool: the distractor differs from the reference by at least this many pixels.
    pub general_gap: u32,
    /// Difficulty pool: one level per spread d, easiest (widest) first; the distractor lies within d of the
    /// reference (≠ reference).
    pub difficulty_spreads: Vec<u32>,
    pub images_per_level: u32,
    pub layout: LinesLayout,
}

impl Default for LinesConfig {
    fn default() -> Self {
        LinesConfig {
            reference_length: 300,
            min_length: 1,
            max_length: 580,
            general_gap: 150,
            difficulty_spreads: (0..10).map(|i| 250 - 20 * i).collect(),
            images_per_level: 50,
            layout: LinesLayout::default(),
        }
    }
}

/// Pixel layout measured on the original line stimulus (../shared/reference/stimuli/lines.png).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinesLayout {
    pub width: u32,
    pub height: u32,
    /// Horizontal centres of A, REFERENCE and B.
    pub centres: [u32; 3],
    /// Lowest pixel row of every line.
    pub baseline: u32,
    pub line_width: u32,
    /// Top of the capital letters of the first label line.
    pub label_top: u32,
    pub label_size: f32,
}

impl Default for LinesLayout {
    fn default() -> Self {
        LinesLayout {
            width: 450,
            height: 960,
            centres: [45, 225, 405],
            baseline: 873,
            line_width: 8,
            label_top: 889,
            label_size: 29.0,
        }
    }
}

/// Colour-recognition task. `spread` b bounds each channel's difference from the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ColorConfig {
    pub general_spread: u32,
    pub difficulty_spreads: Vec<u32>,
    pub images_per_level: u32,
    pub layout: BoxesLayout,
}

impl Default for ColorConfig {
    fn default() -> Self {
        ColorConfig {
            general_spread: 50,
            difficulty_spreads: (1..=10).rev().map(|i| 10 * i).collect(),
            images_per_level: 50,
            layout: BoxesLayout::color(),
        }
    }
}

/// Dots-estimation task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DotsConfig {
    pub reference_count: u32,
    /// Most dots of a general-pool distractor. Difficulty levels go up to reference + spread.
    pub max_count: u32,
    pub difficulty_spreads: Vec<u32>,
    pub images_per_level: u32,
    pub dot_radius: u32,
    /// Free space between a dot's edge and the box's inner edge.
    pub margin: u32,
    /// Minimum free pixels between two dots, so that every dot is its own connected component.
    pub min_gap: u32,
    pub layout: BoxesLayout,
}

impl Default for DotsConfig {
    fn default() -> Self {
        DotsConfig {
            reference_count: 10,
            max_count: 110,
            difficulty_spreads: (1..=10).rev().map(|i| 20 * i).collect(),
            images_per_level: 50,
            dot_radius: 5,
            margin: 10,
            min_gap: 2,
            layout: BoxesLayout::dots(),
        }
    }
}

/// Three square boxes in a row with a black edge (colour squares, dot boxes); measured on the originals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BoxesLayout {
    pub width: u32,
    pub height: u32,
    /// Left edge of the first box.
    pub left: u32,
    pub top: u32,
    /// Outer side of a box, edge included.
    pub side: u32,
    /// Distance between the left edges of neighbouring boxes.
    pub pitch: u32,
    pub edge: u32,
    pub label_top: u32,
    pub label_size: f32,
}

impl BoxesLayout {
    pub fn color() -> Self {
        BoxesLayout {
            width: 870,
            height: 332,
            left: 31,
            top: 49,
            side: 187,
            pitch: 274,
            edge: 4,
            label_top: 258,
            label_size: 29.0,
        }
    }

    pub fn dots() -> Self {
        BoxesLayout {
            width: 1170,
            height: 431,
            left: 32,
            top: 50,
            side: 284,
            pitch: 374,
            edge: 4,
            label_top: 357,
            label_size: 29.0,
        }
    }
}

impl Default for BoxesLayout {
    fn default() -> Self {
        BoxesLayout::color()
    }
}

/// Keeps only images a model answers correctly without social pressure (N = 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaselineFilter {
    pub enabled: bool,
    /// The paper demands p_correct(0) = 1; its code used 0.95.
    pub min_p_correct: f64,
    /// Give up (cleanly, with a report) after scoring this many candidates for one pool.
    pub max_candidates: u32,
}

impl Default for BaselineFilter {
    fn default() -> Self {
        BaselineFilter { enabled: true, min_p_correct: 0.95, max_candidates: 6000 }
    }
}
