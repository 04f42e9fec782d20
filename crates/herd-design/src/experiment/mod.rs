//! The experiment-file schema: plain serde types, one per TOML table. Defaults are the protocol values of
//! the two papers (../shared/spec), so a file only needs to state what it changes.

mod conformity;
mod minimal_group;
mod stimuli;

pub use conformity::*;
pub use minimal_group::*;
pub use stimuli::*;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which study an experiment file belongs to; read from `experiment.study`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Study {
    Conformity,
    MinimalGroup,
}

impl Study {
    pub fn as_str(self) -> &'static str {
        match self {
            Study::Conformity => "conformity",
            Study::MinimalGroup => "minimal_group",
        }
    }
}

/// The experiment-file format this herd reads; files of a newer format are refused with a clear error.
pub const FORMAT_VERSION: u32 = 1;

fn current_format() -> u32 {
    FORMAT_VERSION
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentMeta {
    /// Version of the experiment-file format the file is written for (see [`FORMAT_VERSION`]).
    #[serde(default = "current_format")]
    pub format: u32,
    /// Short identifier; part of every RNG stream key and of every trial row.
    pub name: String,
    pub study: Study,
    /// Master seed: changing it redraws every stimulus, reply, roster and sample of the experiment.
    pub seed: u64,
    #[serde(default)]
    pub description: String,
    /// Where the protocol values come from (paper, code, our choice).
    #[serde(default)]
    pub source: String,
}

/// A file of protocol strings that an experiment refers to, relative to the experiment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankRef {
    pub bank: PathBuf,
}

/// A parsed experiment of either study.
#[derive(Debug, Clone, PartialEq)]
// A process holds one or two experiments, never a collection of them: boxing the larger study would
// cost every match a dereference and save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Experiment {
    Conformity(ConformityExperiment),
    MinimalGroup(MinimalGroupExperiment),
}

impl Experiment {
    pub fn meta(&self) -> &ExperimentMeta {
        match self {
            Experiment::Conformity(e) => &e.experiment,
            Experiment::MinimalGroup(e) => &e.experiment,
        }
    }
}
