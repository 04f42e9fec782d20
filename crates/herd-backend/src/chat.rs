//! Chat messages as the backends receive them: the contract's prompt type. herd-prompts builds them
//! from the experiment's banks; the engines and servers read them. Here, so that the contract depends
//! on no herd crate.

use serde::Serialize;
use sha2::Digest;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The role's name in chat templates and chat-completion APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum Part {
    /// The stimulus image, by id; the runner attaches the pixels.
    Image {
        image: String,
    },
    Text {
        text: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatPrompt {
    pub messages: Vec<Message>,
}

impl ChatPrompt {
    pub fn user(content: Vec<Part>) -> Self {
        ChatPrompt { messages: vec![Message { role: Role::User, content }] }
    }

    /// All text parts, joined by newlines (images left out).
    pub fn text(&self) -> String {
        let mut texts = Vec::new();
        for message in &self.messages {
            for part in &message.content {
                if let Part::Text { text } = part {
                    texts.push(text.as_str());
                }
            }
        }
        texts.join("\n")
    }

    /// SHA-256 of the canonical JSON of the messages: equal prompts, equal hashes, on every machine.
    pub fn hash(&self) -> String {
        let json = serde_json::to_vec(&self.messages).unwrap_or_default();
        hex::encode(sha2::Sha256::digest(&json))
    }

    /// The prompt as a person reads it: one block per message, `<image …>` where an image goes.
    pub fn display(&self) -> String {
        let mut out = String::new();
        for message in &self.messages {
            let role = message.role.as_str();
            out.push_str(&format!("[{role}]\n"));
            for part in &message.content {
                match part {
                    Part::Image { image } => out.push_str(&format!("<image {image}>\n")),
                    Part::Text { text } => {
                        out.push_str(text);
                        out.push('\n');
                    }
                }
            }
        }
        out
    }
}
