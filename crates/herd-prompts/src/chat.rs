//! Chat messages as the backends receive them (herd-backend's contract types, re-exported: herd-prompts
//! builds them), and the modality a prompt is rendered for.

use serde::Serialize;

pub use herd_backend::chat::{ChatPrompt, Message, Part, Role};

/// Whether the model sees the image or its text rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    Vision,
    Text,
}

impl Modality {
    /// The one spelling of a modality in tables, manifests and flags (`vision`, `text`); serde writes
    /// the same.
    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Vision => "vision",
            Modality::Text => "text",
        }
    }
}

impl std::str::FromStr for Modality {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Modality::Vision, Modality::Text]
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown modality `{s}`: expected vision or text"))
    }
}
