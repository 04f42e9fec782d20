//! The experiment a run was made from, rebuilt from its manifest alone: `parameters` (the experiment
//! with every default resolved, as the runner used it) and the bank files the run recorded. A folder
//! copied to another machine has no experiment file, and its bank files may not be where the run
//! read them: then they are looked for as an experiment file's banks are (herd's `data/`), and the
//! prompt-hash check says whether what they render is what the run sent.

use std::path::PathBuf;

use herd_design::{Experiment, ExperimentFile, bank_files};
use herd_store::Manifest;

/// The run's experiment, or why it cannot be rebuilt (said on every sample of the run).
pub(crate) fn run_experiment(manifest: &Manifest) -> Result<ExperimentFile, String> {
    let parameters = manifest.parameters.clone();
    let mut experiment = match manifest.identity.study.as_str() {
        "conformity" => serde_json::from_value(parameters).map(Experiment::Conformity),
        "minimal_group" => serde_json::from_value(parameters).map(Experiment::MinimalGroup),
        // Runs a test writes with another study name: the parameters say which study they are.
        _ => serde_json::from_value(parameters.clone())
            .map(Experiment::Conformity)
            .or_else(|_| serde_json::from_value(parameters).map(Experiment::MinimalGroup)),
    }
    .map_err(|e| {
        format!(
            "the manifest's `parameters` are not an experiment this herd reads ({e}); the prompts cannot be re-rendered"
        )
    })?;
    // Where the run read each bank, when that file is still there.
    for (role, _) in bank_files(&experiment) {
        let recorded = manifest.files.iter().find(|f| f.role == role).map(|f| PathBuf::from(&f.path));
        if let Some(path) = recorded.filter(|p| p.is_file()) {
            set_bank(&mut experiment, role, path);
        }
    }
    Ok(ExperimentFile {
        path: PathBuf::from(&manifest.experiment_file),
        experiment,
        sha256: manifest.identity.experiment_sha256.clone(),
        file_sha256: manifest
            .files
            .iter()
            .find(|f| f.role == "experiment")
            .and_then(|f| f.sha256.clone())
            .unwrap_or_default(),
    })
}

fn set_bank(experiment: &mut Experiment, role: &str, path: PathBuf) {
    match (experiment, role) {
        (Experiment::Conformity(e), "prompts.bank") => e.prompts.bank = path,
        (Experiment::Conformity(e), "families.normative.sentences") => {
            if let Some(n) = &mut e.families.normative {
                n.sentences = path;
            }
        }
        (Experiment::MinimalGroup(e), "prompts.bank") => e.prompts.bank = path,
        (Experiment::MinimalGroup(e), "society.group_names") => e.society.group_names = path,
        _ => {}
    }
}

/// The bank files the prompts were re-rendered from, for the page: `role: path`.
pub(crate) fn banks_used(file: &ExperimentFile) -> Vec<String> {
    bank_files(&file.experiment)
        .into_iter()
        .map(|(role, written)| format!("{role}: {}", file.resolve(&written).display()))
        .collect()
}
