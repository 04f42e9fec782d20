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

impl std::str::FromStr for Modality {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "vision" => Ok(Modality::Vision),
            "text" => Ok(Modality::Text),
            other => Err(format!("unknown modality `{other}`: expected vision or text")),
        }
    }
}
