//! Experiment files for herd: the complete design of a study as data.
//!
//! An experiment file (TOML, see `data/experiments/`) states every family, level, count and protocol
//! parameter of one study. This crate parses it into typed values, validates it with errors that name the
//! file, the key and the fix, and expands it into *cells × seeds × units*. Every random draw a unit needs
//! comes from a stream keyed by what it generates ([`UnitKey::stream`]), so the same unit gets the same
//! draws whatever the expansion order, sharding or resumption. [`Shard`] partitions units for `--shard k/n`.
//!
//! ```
//! use herd_design::{expand, parse_experiment, Shard};
//! use std::path::Path;
//!
//! let text = r#"
//!     [experiment]
//!     name = "tiny"
//!     study = "conformity"
//!     seed = 7
//!     [prompts]
//!     bank = "../banks/conformity-prompts.toml"
//!     [stimuli]
//!     tasks = ["color"]
//!     [trials]
//!     n_values = [0, 1, 2]
//!     trials_per_n = 4
//!     [families.group_size]
//! "#;
//! let experiment = parse_experiment(text, Path::new("tiny.toml")).unwrap();
//! let units = expand(&experiment);
//! assert_eq!(units.len(), 3 * 4); // three N values × four trials
//!
//! // Two shards split the units without overlap.
//! let first: Shard = "1/2".parse().unwrap();
//! let second: Shard = "2/2".parse().unwrap();
//! assert!(units.iter().all(|u| first.contains(u) != second.contains(u)));
//! ```

mod digest;
mod error;
mod expand;
mod experiment;
mod load;
mod plan;
mod rng;
mod shard;
mod suggest;
mod validate;

pub use digest::{json_sha256, sha256_hex};
pub use error::{DesignError, DesignErrors};
pub use expand::{
    Cell, ConformityTrial, Family, ImageSelection, SocietyRun, Unit, UnitKey, UnitPlan, difficulty_images_per_level,
    difficulty_levels, expand, factor, family_names,
};
pub use experiment::*;
pub use load::{
    ExperimentFile, bank_files, experiment_fingerprint, herd_data_dir, load_experiment, parse_experiment, search_places,
};
pub use plan::{MAX_IMAGES, MAX_PROMPTS, MAX_UNITS, PlanPart, PlanSize, plan_size};
pub use rng::StreamKey;
pub use shard::Shard;
pub use suggest::{closest, did_you_mean};
pub use validate::{MAX_GRID_COUNT, MIN_MINORITY_SIZE};

/// Re-exported so that dependants draw from streams with the same generator and trait versions.
pub use rand;
pub use rand_chacha::ChaCha20Rng;
