//! Reading experiment files: TOML → typed schema → validated [`Experiment`].

use crate::digest::sha256_hex;
use crate::error::{DesignError, DesignErrors};
use crate::experiment::*;
use crate::validate;
use std::path::{Path, PathBuf};

/// An experiment read from disk, with what a run manifest needs to identify it.
#[derive(Debug, Clone)]
pub struct ExperimentFile {
    pub path: PathBuf,
    pub experiment: Experiment,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
}

impl ExperimentFile {
    /// Resolves a path written in the file (bank files) against the file's own folder.
    pub fn resolve(&self, written: &Path) -> PathBuf {
        resolve_against(&self.path, written)
    }
}

fn resolve_against(file: &Path, written: &Path) -> PathBuf {
    if written.is_absolute() { written.to_path_buf() } else { file.parent().unwrap_or(Path::new(".")).join(written) }
}

/// Reads, parses and validates an experiment file, and checks that every bank file it names exists.
pub fn load_experiment(path: &Path) -> Result<ExperimentFile, DesignErrors> {
    let bytes = std::fs::read(path).map_err(|e| {
        DesignError::new(
            path,
            "<file>",
            format!("cannot read the experiment file: {e}"),
            "check the path; the shipped experiments are in data/experiments/",
        )
    })?;
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| DesignError::new(path, "<file>", "the file is not valid UTF-8", "save the file as UTF-8 text"))?;
    let experiment = parse_experiment(&text, path)?;
    let mut missing = Vec::new();
    for (key, written) in bank_files(&experiment) {
        let resolved = resolve_against(path, &written);
        if !resolved.is_file() {
            missing.push(DesignError::new(
                path,
                key,
                format!("bank file `{}` does not exist (resolved to {})", written.display(), resolved.display()),
                "give a path relative to the experiment file, e.g. `../banks/…`, to a file that exists",
            ));
        }
    }
    if !missing.is_empty() {
        return Err(DesignErrors(missing));
    }
    Ok(ExperimentFile { path: path.to_path_buf(), experiment, sha256: sha256_hex(&bytes) })
}

/// Every bank file an experiment refers to, with the key that names it.
pub fn bank_files(experiment: &Experiment) -> Vec<(&'static str, PathBuf)> {
    match experiment {
        Experiment::Conformity(e) => {
            let mut files = vec![("prompts.bank", e.prompts.bank.clone())];
            if let Some(n) = &e.families.normative {
                files.push(("families.normative.sentences", n.sentences.clone()));
            }
            files
        }
        Experiment::MinimalGroup(e) => {
            vec![("prompts.bank", e.prompts.bank.clone()), ("society.group_names", e.society.group_names.clone())]
        }
    }
}

/// Parses and validates experiment text; `file` is only used to name the file in errors. Pure: bank files
/// are not touched (see [`load_experiment`]).
pub fn parse_experiment(text: &str, file: &Path) -> Result<Experiment, DesignErrors> {
    let table: toml::Table = toml::from_str(text).map_err(|e| toml_error(file, &e, text, "<file>"))?;
    let study = table.get("experiment").and_then(|e| e.get("study")).ok_or_else(|| {
        DesignError::new(
            file,
            "experiment.study",
            "missing: the file must say which study it describes",
            "add `study = \"conformity\"` or `study = \"minimal_group\"` under [experiment]",
        )
    })?;
    check_format(&table, file)?;
    let experiment = match study.as_str() {
        Some("conformity") => Experiment::Conformity(typed(text, file)?),
        Some("minimal_group") => Experiment::MinimalGroup(typed(text, file)?),
        _ => {
            return Err(DesignError::new(
                file,
                "experiment.study",
                format!("unknown study {study}"),
                "use \"conformity\" or \"minimal_group\"",
            )
            .into());
        }
    };
    validate::experiment(&experiment, file)?;
    Ok(experiment)
}

/// Checked before the typed parse: a file written for a newer herd may use keys this version does not
/// know, and "upgrade herd" is the useful message, not "unknown key".
fn check_format(table: &toml::Table, file: &Path) -> Result<(), DesignError> {
    let Some(format) = table.get("experiment").and_then(|e| e.get("format")) else { return Ok(()) };
    match format.as_integer() {
        Some(n) if (1..=i64::from(FORMAT_VERSION)).contains(&n) => Ok(()),
        Some(n) if n > i64::from(FORMAT_VERSION) => Err(DesignError::new(
            file,
            "experiment.format",
            format!(
                "the file is written for experiment format {n}; this herd ({}) reads format {FORMAT_VERSION} and older",
                env!("CARGO_PKG_VERSION")
            ),
            "upgrade herd, or rewrite the file for this version's format",
        )),
        _ => Err(DesignError::new(
            file,
            "experiment.format",
            format!("{format} is not a format version"),
            format!("use an integer from 1 to {FORMAT_VERSION}"),
        )),
    }
}

fn typed<T: serde::de::DeserializeOwned>(text: &str, file: &Path) -> Result<T, DesignErrors> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        toml_error(file, e.inner(), text, &key).into()
    })
}

fn toml_error(file: &Path, e: &toml::de::Error, text: &str, key: &str) -> DesignError {
    let location = e
        .span()
        .map(|span| {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        })
        .unwrap_or_default();
    let message = e.message().trim().to_owned();
    let fix = if message.starts_with("unknown field") {
        "remove the key or correct its spelling (the keys allowed here are listed above)"
    } else if message.starts_with("missing field") {
        "add the missing key; the files in data/experiments/ show every key with its protocol value"
    } else if message.starts_with("invalid type") {
        "give the value the type shown above, e.g. a number without quotes or a list in [ ]"
    } else if message.starts_with("unknown variant") {
        "use one of the values listed above"
    } else {
        "fix the TOML syntax at the place shown"
    };
    let at_root = key.is_empty() || key == ".";
    // serde reports a missing field at the table that lacks it; name the field itself.
    let missing = message.strip_prefix("missing field `").and_then(|m| m.split('`').next());
    let key = match (missing, at_root) {
        (Some(field), true) => field.to_owned(),
        (Some(field), false) => format!("{key}.{field}"),
        (None, true) => "<file>".to_owned(),
        (None, false) => key.to_owned(),
    };
    DesignError::new(file, key, format!("{message}{location}"), fix)
}
