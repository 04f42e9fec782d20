//! The minimal-group study's schema: the society, roster order, labels, reasoning, design, instruments and sampling.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::{BankRef, ExperimentMeta};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinimalGroupExperiment {
    pub experiment: ExperimentMeta,
    pub prompts: BankRef,
    pub society: SocietyConfig,
    pub design: MinimalGroupDesign,
    pub instruments: Vec<InstrumentConfig>,
    #[serde(default)]
    pub generation: GenerationConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocietyConfig {
    pub size: u32,
    /// Number of agents carrying the minority label; each in 1..=size/2.
    pub minority_sizes: Vec<u32>,
    /// Points each decider distributes among the others.
    pub pool: u32,
    /// Agent ids are `{id_prefix}{index:0id_width}`, index from 1.
    #[serde(default = "default_id_prefix")]
    pub id_prefix: String,
    #[serde(default = "default_id_width")]
    pub id_width: u32,
    /// File of nonce group-name pairs (TOML, `pairs = [["…", "…"], …]`).
    pub group_names: PathBuf,
    #[serde(default)]
    pub roster_order: RosterOrder,
}

fn default_id_prefix() -> String {
    "agent_".to_owned()
}
fn default_id_width() -> u32 {
    2
}

/// Order in which a decider sees the other participants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RosterOrder {
    /// By agent id; group membership is random with respect to id, so position is independent of group.
    #[default]
    Id,
    /// A fresh random order for every decider.
    Shuffled,
}

/// Whether group labels are shown (the minimal-group label arm); herd-analysis reads the `labels`
/// column into the same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Labels {
    Visible,
    Hidden,
}

impl Labels {
    pub fn as_str(self) -> &'static str {
        match self {
            Labels::Visible => "visible",
            Labels::Hidden => "hidden",
        }
    }

    /// The condition a table's `labels` column names.
    pub fn parse(s: &str) -> Option<Self> {
        [Labels::Visible, Labels::Hidden].into_iter().find(|l| l.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reasoning {
    /// The model's default mode (thinking on for reasoning models).
    On,
    /// Thinking disabled through the chat template (e.g. Qwen3's `enable_thinking = false`).
    Off,
}

impl Reasoning {
    pub fn as_str(self) -> &'static str {
        match self {
            Reasoning::On => "on",
            Reasoning::Off => "off",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinimalGroupDesign {
    pub labels: Vec<Labels>,
    /// Independent societies per cell.
    pub seeds: u32,
    /// Run every society a second time with the two group names swapped.
    pub swap_pass: bool,
    pub reasoning: Vec<Reasoning>,
}

/// A wording of the allocation prompt; `seeds` limits it to the first seeds (matched societies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentConfig {
    pub name: String,
    pub seeds: Option<u32>,
}

/// How deciders' replies are sampled. `temperature`, `top_p` and `top_k` override the model's own defaults
/// (an HF folder's `generation_config.json`, else the registry's `generation` entry); one left out takes the
/// model's default, else HF `generate`'s (temperature 1, top_p 1, top_k 50), as HF `generate` called with only
/// the overridden arguments would. They are optional because the paper set only the temperature (0.7): a fixed
/// default here would silently replace each model's own top_p and top_k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerationConfig {
    /// 0 decodes greedily.
    pub temperature: Option<f64>,
    /// Nucleus size in (0, 1]; 1 keeps every token.
    pub top_p: Option<f64>,
    /// 0 keeps every token.
    pub top_k: Option<u32>,
    pub max_new_tokens: u32,
    /// Constrain decoding to the allocation JSON schema where the backend supports it.
    pub constrained: bool,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        GenerationConfig { temperature: None, top_p: None, top_k: None, max_new_tokens: 8192, constrained: false }
    }
}
