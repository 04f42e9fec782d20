//! Bank files: the protocol strings of each study, kept as data (see data/banks/ for their sources).

use herd_design::Task;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromptError {
    #[error("{file}: {problem}\n  fix: {fix}", file = .file.display())]
    Bank { file: PathBuf, problem: String, fix: String },
    #[error("bank template `{template}` has {problem}; fix the template in its bank file")]
    Template { template: String, problem: String },
    #[error("{0}")]
    Design(String),
}

fn bank_error(file: &Path, problem: impl Into<String>, fix: impl Into<String>) -> PromptError {
    PromptError::Bank { file: file.to_path_buf(), problem: problem.into(), fix: fix.into() }
}

fn read(file: &Path) -> Result<String, PromptError> {
    std::fs::read_to_string(file).map_err(|e| {
        bank_error(file, format!("cannot read the bank file: {e}"), "check the path written in the experiment file")
    })
}

fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, file: &Path) -> Result<T, PromptError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        bank_error(
            file,
            format!("`{}`: {}", e.path(), e.inner().message().trim()),
            "compare the file with the bank shipped in data/banks/",
        )
    })
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskWording {
    pub description: String,
    pub question: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityWording {
    pub intro: String,
    pub reply_prefix: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProximityWording {
    pub header: String,
    pub reply_line: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextModalityWording {
    pub image: String,
}

/// The conformity study's protocol strings (data/banks/conformity-prompts.toml).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformityBank {
    pub closing: String,
    pub replies_header: String,
    pub reply_line: String,
    pub reply_templates: Vec<String>,
    pub tasks: BTreeMap<Task, TaskWording>,
    pub identity: BTreeMap<String, IdentityWording>,
    pub proximity: BTreeMap<String, ProximityWording>,
    pub text_modality: TextModalityWording,
}

impl ConformityBank {
    pub fn load(file: &Path) -> Result<Self, PromptError> {
        Self::parse(&read(file)?, file)
    }

    pub fn parse(text: &str, file: &Path) -> Result<Self, PromptError> {
        let bank: ConformityBank = parse_toml(text, file)?;
        if bank.reply_templates.is_empty() {
            return Err(bank_error(
                file,
                "`reply_templates` is empty",
                "list at least one reply wording with {answer}",
            ));
        }
        if let Some(t) = bank.reply_templates.iter().find(|t| !t.contains("{answer}")) {
            return Err(bank_error(
                file,
                format!("reply template `{t}` has no {{answer}}"),
                "put {answer} where the confederate's letter goes",
            ));
        }
        for task in Task::ALL {
            if !bank.tasks.contains_key(&task) {
                return Err(bank_error(
                    file,
                    format!("`tasks.{task}` is missing"),
                    format!("add [tasks.{task}] with description and question"),
                ));
            }
        }
        for family in ["nationality", "ethnicity", "minimal_group"] {
            if !bank.identity.contains_key(family) {
                return Err(bank_error(
                    file,
                    format!("`identity.{family}` is missing"),
                    format!("add [identity.{family}] with intro and reply_prefix"),
                ));
            }
        }
        for family in ["spatial", "temporal"] {
            if !bank.proximity.contains_key(family) {
                return Err(bank_error(
                    file,
                    format!("`proximity.{family}` is missing"),
                    format!("add [proximity.{family}] with header and reply_line"),
                ));
            }
        }
        Ok(bank)
    }
}

/// Matched public/private framing sentences (data/banks/normative-sentences.json): pair i of `public`
/// and `private` say the same thing with opposite visibility.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormativeSentences {
    pub public: Vec<String>,
    pub private: Vec<String>,
}

impl NormativeSentences {
    pub fn load(file: &Path) -> Result<Self, PromptError> {
        let sentences: NormativeSentences = serde_json::from_str(&read(file)?).map_err(|e| {
            bank_error(
                file,
                format!("not a sentence bank: {e}"),
                "give a JSON object with `public` and `private` arrays of strings",
            )
        })?;
        if sentences.public.len() != sentences.private.len() {
            return Err(bank_error(
                file,
                format!("{} public but {} private sentences", sentences.public.len(), sentences.private.len()),
                "give the same number of sentences in both lists: pair i must match",
            ));
        }
        Ok(sentences)
    }

    pub fn pairs(&self) -> usize {
        self.public.len()
    }
}

/// One wording of the allocation prompt.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentWording {
    pub intro: String,
    pub own_group: String,
    pub task: String,
    pub label_note: String,
    pub roster_header: String,
    pub roster_item_visible: String,
    pub roster_item_hidden: String,
    pub answer_format: String,
}

/// The minimal-group instruments (data/banks/minimal-group-prompts.toml).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocationBank {
    pub instruments: BTreeMap<String, InstrumentWording>,
}

impl AllocationBank {
    pub fn load(file: &Path) -> Result<Self, PromptError> {
        parse_toml(&read(file)?, file)
    }

    pub fn instrument(&self, name: &str) -> Result<&InstrumentWording, PromptError> {
        self.instruments.get(name).ok_or_else(|| {
            PromptError::Design(format!(
                "instrument `{name}` is not in the prompt bank (it has: {}); add [instruments.{name}] to the bank or fix the experiment's instrument name",
                self.instruments.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

/// Pairs of nonce group names (data/banks/nonce-group-names.toml).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupNames {
    pub pairs: Vec<[String; 2]>,
}

/// The file as written: each pair read as a list, so a pair of three names is an error naming it rather
/// than two groups of its first two (serde's fixed-size arrays ignore the extra names).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupNamesFile {
    pairs: Vec<Vec<String>>,
}

impl GroupNames {
    pub fn load(file: &Path) -> Result<Self, PromptError> {
        let written: GroupNamesFile = parse_toml(&read(file)?, file)?;
        if let Some((i, pair)) = written.pairs.iter().enumerate().find(|(_, p)| p.len() != 2) {
            return Err(bank_error(
                file,
                format!(
                    "pair {} ({pair:?}) has {} names, but a minimal-group society has exactly two groups",
                    i + 1,
                    pair.len()
                ),
                "give every pair exactly two names, e.g. [\"Kalvo\", \"Tesim\"]",
            ));
        }
        let pairs = written.pairs.into_iter().map(|p| [p[0].clone(), p[1].clone()]).collect();
        let names = GroupNames { pairs };
        if names.pairs.is_empty() {
            return Err(bank_error(file, "`pairs` is empty", "list at least one pair of nonce names"));
        }
        if let Some(p) = names.pairs.iter().find(|[a, b]| a == b || a.trim().is_empty() || b.trim().is_empty()) {
            return Err(bank_error(
                file,
                format!("pair {p:?} does not name two different groups"),
                "give two different, non-empty names per pair",
            ));
        }
        Ok(names)
    }
}
