//! A sample as the page shows it: plain, serialisable values (the page's script reads them as JSON
//! and sets them as text, so no stored text becomes markup).

use herd_prompts::{ChatPrompt, Part};
use serde::Serialize;

/// Whether the prompt re-rendered from the run's experiment is the one the model saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PromptCheck {
    /// Its hash equals the stored `prompt_hash`: these are the messages the model was sent.
    Verified,
    /// Its hash differs from the stored one: the banks, the experiment or herd changed since the run,
    /// or the stored hash was altered. The messages are shown as a re-rendering only.
    Mismatch { stored: String, rendered: String },
    /// It could not be re-rendered (why); no messages are shown.
    Unavailable { why: String },
}

impl PromptCheck {
    pub(crate) fn of(prompt: &ChatPrompt, stored: &str) -> Self {
        let rendered = prompt.hash();
        if rendered == stored {
            PromptCheck::Verified
        } else {
            PromptCheck::Mismatch { stored: stored.to_owned(), rendered }
        }
    }

    /// The filter's word for it.
    pub fn word(&self) -> &'static str {
        match self {
            PromptCheck::Verified => "verified",
            PromptCheck::Mismatch { .. } => "mismatch",
            PromptCheck::Unavailable { .. } => "unavailable",
        }
    }
}

/// One part of a message: its text, or the image (the file beside the page; `None` where it could not
/// be drawn again).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShownPart {
    Text { text: String },
    Image { id: String, src: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownMessage {
    pub role: &'static str,
    pub parts: Vec<ShownPart>,
}

/// The messages of `prompt`, with `src` for its image part.
pub(crate) fn messages(prompt: &ChatPrompt, src: Option<&str>) -> Vec<ShownMessage> {
    prompt
        .messages
        .iter()
        .map(|m| ShownMessage {
            role: m.role.as_str(),
            parts: m
                .content
                .iter()
                .map(|p| match p {
                    Part::Text { text } => ShownPart::Text { text: text.clone() },
                    Part::Image { image } => ShownPart::Image { id: image.clone(), src: src.map(str::to_owned) },
                })
                .collect(),
        })
        .collect()
}

/// One target of a decider's allocation, in the order the decider's roster listed them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allocated {
    pub target: String,
    pub group: String,
    pub same_group: bool,
    pub points: f64,
}

/// One sampled unit (a conformity trial, or one decider of a society pass).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// `conformity` or `minimal_group`.
    pub study: &'static str,
    pub model: String,
    pub run_id: String,
    /// The stored unit id (`…/decider` for a decider).
    pub unit: String,
    /// The condition's factors in order (`task`, `family`, `level`, `n`, …), the page's filters.
    pub condition: Vec<(&'static str, String)>,
    pub check: PromptCheck,
    /// The prompt's messages; empty when [`PromptCheck::Unavailable`].
    pub messages: Vec<ShownMessage>,
    /// What came back, as labelled readings (answer probabilities, parse status, …).
    pub outcome: Vec<(&'static str, String)>,
    /// The model's text (minimal groups).
    pub raw_output: Option<String>,
    /// Reasoning a server returned apart from the text.
    pub reasoning_output: Option<String>,
    /// The parsed allocation after renormalisation; empty for conformity trials and unusable outputs.
    pub allocation: Vec<Allocated>,
    /// Every quality flag of the row (and of the re-rendering); empty when clean.
    pub flags: Vec<String>,
}

/// A probability as the page spells it.
pub(crate) fn probability(p: f64) -> String {
    if p.is_finite() { format!("{p:.4}") } else { "undefined".into() }
}

/// A logit; −∞ where the answer had no probability (outside a server's top-k).
pub(crate) fn logit(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else if x < 0.0 {
        "−∞".into()
    } else {
        "undefined".into()
    }
}
