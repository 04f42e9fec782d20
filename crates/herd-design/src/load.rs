//! Reading experiment files: TOML → typed schema → validated [`Experiment`].

use crate::digest::{json_sha256, sha256_hex};
use crate::error::{DesignError, DesignErrors};
use crate::experiment::*;
use crate::suggest::did_you_mean;
use crate::validate;
use std::path::{Path, PathBuf};

/// An experiment read from disk, with what a run manifest needs to identify it.
#[derive(Debug, Clone)]
pub struct ExperimentFile {
    pub path: PathBuf,
    pub experiment: Experiment,
    /// The experiment's fingerprint: SHA-256 of the parsed experiment's canonical JSON, so that a
    /// comment, a blank line or reordered keys do not make another run (a run folder's identity and
    /// input fingerprint hold it), while any changed value does.
    pub sha256: String,
    /// SHA-256 of the file's bytes, as the run manifest's file list records every file.
    pub file_sha256: String,
}

impl ExperimentFile {
    /// Resolves a path written in the file (bank files): the first of [`search_places`] that exists,
    /// else the first place (the one next to the file), which [`load_experiment`] has reported.
    pub fn resolve(&self, written: &Path) -> PathBuf {
        resolve_against(&self.path, written)
    }
}

/// herd's own `data/` folder: `$HERD_DATA` when set, else the `data/` of the source tree this herd was
/// built from (where the shipped banks and experiments are).
pub fn herd_data_dir() -> PathBuf {
    match std::env::var_os("HERD_DATA") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data"),
    }
}

/// Every place a path written in the experiment file `file` is looked for, in order: relative to the
/// file's own folder; then relative to herd's `data/experiments/` (where the shipped files sit, so a
/// copy of one that says `../banks/…` still finds herd's banks); then relative to `data/` itself
/// (`banks/…`). An absolute path is only itself. Paths are absolute and free of `..`, so an error
/// shows where herd really looked.
pub fn search_places(file: &Path, written: &Path) -> Vec<PathBuf> {
    if written.is_absolute() {
        return vec![written.to_path_buf()];
    }
    let data = herd_data_dir();
    let mut places: Vec<PathBuf> = Vec::new();
    for base in [file.parent().unwrap_or(Path::new(".")).to_path_buf(), data.join("experiments"), data] {
        let place = normalised(&base.join(written));
        if !places.contains(&place) {
            places.push(place);
        }
    }
    places
}

/// `path` made absolute (against the working directory) with `.` and `..` folded away lexically.
fn normalised(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn resolve_against(file: &Path, written: &Path) -> PathBuf {
    let places = search_places(file, written);
    places.iter().find(|p| p.is_file()).unwrap_or(&places[0]).clone()
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
        let places = search_places(path, &written);
        if !places.iter().any(|p| p.is_file()) {
            let looked: Vec<String> = places.iter().map(|p| format!("\n    {}", p.display())).collect();
            missing.push(DesignError::new(
                path,
                key,
                format!("bank file `{}` was not found; looked in:{}", written.display(), looked.concat()),
                "give a path relative to the experiment file (or to herd's data/experiments/, e.g. \
                 `../banks/conformity-prompts.toml`) of a file that exists; set HERD_DATA to herd's data/ folder \
                 if herd was moved from its source tree",
            ));
        }
    }
    if !missing.is_empty() {
        return Err(DesignErrors(missing));
    }
    let sha256 = experiment_fingerprint(&experiment);
    Ok(ExperimentFile { path: path.to_path_buf(), experiment, sha256, file_sha256: sha256_hex(&bytes) })
}

/// The fingerprint of a parsed experiment: the SHA-256 of its canonical JSON.
pub fn experiment_fingerprint(experiment: &Experiment) -> String {
    match experiment {
        Experiment::Conformity(e) => json_sha256(e),
        Experiment::MinimalGroup(e) => json_sha256(e),
    }
}

/// The keys that name bank files, with the shipped bank each usually names.
const BANK_KEYS: [(&str, &str); 3] = [
    ("prompts.bank", "../banks/conformity-prompts.toml"),
    ("society.group_names", "../banks/nonce-group-names.toml"),
    ("families.normative.sentences", "../banks/normative-sentences.json"),
];

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
            let hint = study.as_str().map(|s| did_you_mean(s, ["conformity", "minimal_group"])).unwrap_or_default();
            return Err(DesignError::new(
                file,
                "experiment.study",
                format!("unknown study {study}"),
                format!("use \"conformity\" or \"minimal_group\"{hint}"),
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
    // A bank key takes a file's path, never the bank's content inline: the generic "a list in [ ]"
    // would tell someone who wrote the names inline to do it again.
    let bank = BANK_KEYS.iter().find(|(k, _)| *k == key.as_str());
    let fix = match bank {
        Some((key, example)) if message.starts_with("invalid type") => format!(
            "give the path of a bank file as a quoted string, e.g. `{} = \"{example}\"`; what it holds (e.g. the \
             group-name pairs) goes in that file, not in the experiment file",
            key.rsplit('.').next().unwrap_or(key)
        ),
        _ => format!("{fix}{}", misspelling_hint(&message)),
    };
    DesignError::new(file, key, format!("{message}{location}"), fix)
}

/// "Did you mean" for serde's "unknown field `x`, expected one of `a`, `b`" (and "unknown variant"):
/// the names are read back from the message, which is the one place that lists them.
fn misspelling_hint(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `").or_else(|| message.strip_prefix("unknown variant `"))
    else {
        return String::new();
    };
    let Some((written, allowed)) = rest.split_once('`') else { return String::new() };
    let allowed: Vec<&str> = allowed.split('`').skip(1).step_by(2).collect();
    crate::suggest::did_you_mean(written, allowed)
}
