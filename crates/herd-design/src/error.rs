use std::path::PathBuf;

/// A problem with an experiment file, phrased for the person who wrote it: which file, which key, what is
/// wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: `{key}`: {problem}\n  fix: {fix}", file = .file.display())]
pub struct DesignError {
    pub file: PathBuf,
    /// Dotted key path inside the file, e.g. `society.minority_sizes[1]`; `<file>` for whole-file problems.
    pub key: String,
    pub problem: String,
    pub fix: String,
}

impl DesignError {
    pub fn new(
        file: impl Into<PathBuf>,
        key: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        DesignError { file: file.into(), key: key.into(), problem: problem.into(), fix: fix.into() }
    }
}

/// Collects validation problems so that one run reports all of them, not only the first.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    file: PathBuf,
    found: Vec<DesignError>,
}

impl Problems {
    pub(crate) fn new(file: impl Into<PathBuf>) -> Self {
        Problems { file: file.into(), found: Vec::new() }
    }

    pub(crate) fn push(&mut self, key: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) {
        self.found.push(DesignError::new(self.file.clone(), key, problem, fix));
    }

    pub(crate) fn into_result(self) -> Result<(), DesignErrors> {
        if self.found.is_empty() { Ok(()) } else { Err(DesignErrors(self.found)) }
    }
}

/// One or more [`DesignError`]s found in the same file.
#[derive(Debug, Clone, PartialEq)]
pub struct DesignErrors(pub Vec<DesignError>);

impl DesignErrors {
    pub fn first(&self) -> &DesignError {
        &self.0[0]
    }
}

impl std::fmt::Display for DesignErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DesignErrors {}

impl From<DesignError> for DesignErrors {
    fn from(e: DesignError) -> Self {
        DesignErrors(vec![e])
    }
}
