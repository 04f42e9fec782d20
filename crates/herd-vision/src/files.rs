//! Reading a checkpoint folder's files: text that must be there, JSON settings files (each parser's
//! errors name the file, what it should be and the fix), and the tokenizer.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokenizers::Tokenizer;

use crate::error::VisionError;

/// The file's text; `what` says what the file is for when it is missing.
pub(crate) fn read_to_string(path: &Path, what: &'static str) -> Result<String, VisionError> {
    if !path.is_file() {
        return Err(VisionError::MissingFile { path: path.to_path_buf(), what });
    }
    std::fs::read_to_string(path).map_err(|source| VisionError::Io { path: PathBuf::from(path), source })
}

/// Reads the file at `path` and hands its text to `parse` (a settings type's `from_json`): the
/// `from_file` of every settings type.
pub(crate) fn read_json<T>(
    path: &Path,
    what: &'static str,
    parse: impl FnOnce(&str, &Path) -> Result<T, VisionError>,
) -> Result<T, VisionError> {
    parse(&read_to_string(path, what)?, path)
}

/// One JSON settings file, for its parser's errors: a parse error names the file and what it should
/// be (`what`); a value out of range names the file and how to fix it (`fix`).
#[derive(Clone, Copy)]
pub(crate) struct JsonFile<'a> {
    pub(crate) path: &'a Path,
    what: &'static str,
    fix: &'static str,
}

impl<'a> JsonFile<'a> {
    pub(crate) fn new(path: &'a Path, what: &'static str, fix: &'static str) -> Self {
        Self { path, what, fix }
    }

    /// The file's text parsed as `T`.
    pub(crate) fn parse<T: DeserializeOwned>(&self, text: &str) -> Result<T, VisionError> {
        serde_json::from_str(text).map_err(|source| self.json_error(source))
    }

    /// A part of the file, already parsed, as `T`.
    pub(crate) fn parse_value<T: DeserializeOwned>(&self, value: Value) -> Result<T, VisionError> {
        serde_json::from_value(value).map_err(|source| self.json_error(source))
    }

    fn json_error(&self, source: serde_json::Error) -> VisionError {
        VisionError::Json { path: self.path.to_path_buf(), what: self.what, source }
    }

    /// A value of the file that is out of range or contradicts another file.
    pub(crate) fn bad(&self, message: String) -> VisionError {
        VisionError::Config { path: self.path.to_path_buf(), message, fix: self.fix }
    }
}

/// tokenizer.json of the folder, and its path (for errors).
pub(crate) fn open_tokenizer(dir: &Path) -> Result<(Tokenizer, PathBuf), VisionError> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(VisionError::MissingFile { path, what: "the tokenizer" });
    }
    let tokenizer = Tokenizer::from_file(&path)
        .map_err(|e| VisionError::Tokenizer { path: path.clone(), message: e.to_string() })?;
    Ok((tokenizer, path))
}
