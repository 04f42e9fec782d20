//! The conformity study's visual stimuli: three options A, REFERENCE, B for the line, colour and dots
//! tasks, drawn like the original study's images, plus a text rendering of the same stimulus for models
//! that cannot see.
//!
//! A stimulus is a pure function of its parameters and a random stream: [`generate`] draws the task's
//! parameters (which option is correct, the distractor, dot positions) from the stream, [`render_png`]
//! draws it, [`text_rendering`] describes it. The same stream gives the same PNG bytes.
//!
//! ```
//! use herd_design::{StreamKey, StimuliConfig, Task};
//! use herd_stimuli::{generate, render_png, text_rendering, Pool};
//!
//! let config = StimuliConfig::protocol(vec![Task::Color]);
//! let mut rng = StreamKey::new("example", 1).with("image", 0).rng();
//! let stimulus = generate(Task::Color, &config, Pool::General, "color-0000", &mut rng).unwrap();
//! let png = render_png(&stimulus).unwrap();
//! assert_eq!(&png[1..4], b"PNG");
//! assert!(text_rendering(&stimulus).contains("REFERENCE COLOR"));
//! ```

mod draw;
mod params;
mod pool;
mod text;

pub use draw::{font_bytes, render, render_png};
pub use params::{DotCentres, Pool, Rect, Stimulus, StimulusError, TaskParams, generate, stimulus_key};
pub use pool::{ImagePools, build_pool, candidate, candidate_by_id, render_each};
pub use text::text_rendering;
