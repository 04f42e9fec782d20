//! The exact chat messages a model sees in herd's trials.
//!
//! Protocol strings live in bank files (`data/banks/`); this crate loads them ([`ConformityBank`],
//! [`NormativeSentences`], [`AllocationBank`], [`GroupNames`]), draws what a trial leaves to chance from the
//! unit's keyed streams (reply wordings, ally positions, identities, distances, societies and rosters), and
//! renders [`ChatPrompt`]s: one user turn with the image first and then the text, or, for text-only models,
//! the stimulus's text rendering in place of the image.
//!
//! ```
//! use herd_design::{load_experiment, expand, Experiment, UnitPlan};
//! use herd_prompts::{ConformityBank, ConformityPrompter, Modality};
//! use herd_stimuli::ImagePools;
//! use std::path::Path;
//!
//! let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments");
//! let file = load_experiment(&root.join("conformity.quick.toml")).unwrap();
//! let Experiment::Conformity(exp) = &file.experiment else { unreachable!() };
//! let prompter = ConformityPrompter::load(&file, exp).unwrap();
//! let pools = ImagePools::preview(exp, herd_design::Task::Color).unwrap();
//! let unit = expand(&file.experiment).into_iter()
//!     .find(|u| matches!(&u.plan, UnitPlan::Conformity(t) if t.task == herd_design::Task::Color && t.n == 5))
//!     .unwrap();
//! let UnitPlan::Conformity(trial) = &unit.plan else { unreachable!() };
//! let image = pools.select(&unit.key, trial).unwrap();
//! let prompt = prompter.render(&unit.key, trial, image, Modality::Vision).unwrap();
//! assert!(prompt.text().contains("reply 5:"));
//! ```

mod allocation;
mod bank;
mod chat;
mod conformity;
mod fill;

pub use allocation::{AllocationPrompt, RosterEntry, Society, allocation_prompts, draw_society};
pub use bank::{AllocationBank, ConformityBank, GroupNames, InstrumentWording, NormativeSentences, PromptError};
pub use chat::{ChatPrompt, Message, Modality, Part, Role};
pub use conformity::{ConformityPlan, ConformityPrompter, PlannedReply};
