//! Every trial one click away: the samples page beside herd's report.
//!
//! A report's numbers rest on thousands of trials; `samples.html` shows a bounded, deterministic
//! sample of them, by condition, each as the model met it. For every picked unit (a conformity trial,
//! or one decider of a society pass) the page shows the prompt as the model saw it (with the stimulus
//! image for vision runs), the answer probabilities or the raw output, the parsed allocation and every
//! quality flag, with filters by study, model, each factor of the condition and the prompt check.
//!
//! The store keeps a hash of each prompt, not its text. The prompt is rendered again from the run's
//! manifest (its `parameters`, and the bank files it recorded, else herd's own) on the unit's own
//! streams, as the runner rendered it, and its hash (herd-backend's `ChatPrompt::hash`, the function the
//! runner stored) is compared with the stored `prompt_hash`. Only a prompt whose hash matches is shown
//! as what the model saw; a mismatch is marked on the sample (and filterable), an impossible
//! re-rendering says why. Images are drawn again from their id and checked against the stored
//! `image_params`.
//!
//! [`write_samples`] reads run folders (verified, as every herd reader does) and writes
//! `OUT/samples.html` (data embedded, script inline: it works from a copied folder, offline, with no
//! server) and the images under `OUT/samples/`. Links into the page set its filters from the fragment:
//! `samples.html#study=conformity&family=spatial,temporal` (values comma-separated).

mod conformity;
mod error;
mod experiment;
mod minimal_group;
mod page;
mod rows;
mod sample;
mod select;

use std::path::{Path, PathBuf};

use herd_store::{Manifest, ReadOptions, read_run_manifest};

pub use error::SamplesError;
pub use page::{WrittenSamples, write_page};
pub use rows::{DeciderRow, DyadRow, TrialRow};
pub use sample::{Allocated, PromptCheck, Sample, ShownMessage, ShownPart};

/// Units shown per condition unless a caller asks otherwise: enough to see what a condition's prompts
/// and answers look like, few enough that the page of a full run stays a few megabytes.
pub const PER_CONDITION: usize = 3;

/// One run folder's stored rows, as the page reads them.
#[derive(Debug, Clone)]
pub struct RunRows {
    pub path: PathBuf,
    pub manifest: Manifest,
    pub trials: Vec<TrialRow>,
    pub deciders: Vec<DeciderRow>,
    pub dyads: Vec<DyadRow>,
}

/// Reads the run folder `dir`: its manifest and the rows of its tables, verified by herd-store.
pub fn read_run(dir: &Path, options: ReadOptions) -> Result<RunRows, SamplesError> {
    let manifest = read_run_manifest(dir).map_err(|source| SamplesError::Store { path: dir.to_path_buf(), source })?;
    Ok(RunRows {
        path: dir.to_path_buf(),
        manifest,
        trials: rows::trials(dir, options)?,
        deciders: rows::deciders(dir, options)?,
        dyads: rows::dyads(dir, options)?,
    })
}

/// What the page says about one run: where its prompts were re-rendered from, or why they were not.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunNote {
    pub run_id: String,
    pub folder: String,
    pub note: String,
}

/// The picked samples of some runs, with what the page says about the pick.
#[derive(Debug, Clone)]
pub struct SampleSet {
    /// Ordered by study, model and condition (numbers by value).
    pub samples: Vec<Sample>,
    pub per_condition: usize,
    /// Conditions over all runs, and stored units they hold (trials, deciders).
    pub conditions: usize,
    pub units: usize,
    pub runs: Vec<RunNote>,
    images: conformity::Images,
}

/// Up to `per_condition` samples of each condition of `runs` (see the crate docs for how they are
/// picked and checked). A sample whose prompt cannot be re-rendered is kept and says why.
pub fn sample_runs(mut runs: Vec<RunRows>, per_condition: usize) -> SampleSet {
    let mut set = SampleSet {
        samples: Vec::new(),
        per_condition,
        conditions: 0,
        units: 0,
        runs: Vec::new(),
        images: conformity::Images::new(),
    };
    let files: Vec<_> = runs.iter().map(|run| experiment::run_experiment(&run.manifest)).collect();
    // Picked over every run at once: the shards of one run (each its own folder) share their conditions,
    // and K per condition holds for the whole page.
    let key = |c: Vec<(&str, String)>| c.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("\u{0}");
    let trials: Vec<(usize, TrialRow)> = runs
        .iter_mut()
        .enumerate()
        .flat_map(|(i, run)| std::mem::take(&mut run.trials).into_iter().map(move |row| (i, row)))
        .collect();
    let deciders: Vec<(usize, DeciderRow)> = runs
        .iter_mut()
        .enumerate()
        .flat_map(|(i, run)| std::mem::take(&mut run.deciders).into_iter().map(move |row| (i, row)))
        .collect();
    set.units = trials.len() + deciders.len();
    let (trials, trial_conditions) = select::pick(
        trials,
        |(_, row)| key(conformity::condition(row)),
        |(_, row)| conformity::spread(row),
        per_condition,
    );
    let (deciders, decider_conditions) = select::pick(
        deciders,
        |(_, row)| key(minimal_group::condition(row)),
        |(_, row)| minimal_group::spread(row),
        per_condition,
    );
    set.conditions = trial_conditions + decider_conditions;
    let (trials, deciders) = (by_run(trials, runs.len()), by_run(deciders, runs.len()));
    for (((run, file), trials), deciders) in runs.iter().zip(&files).zip(trials).zip(deciders) {
        set.samples.extend(conformity::samples(trials, file, &mut set.images));
        set.samples.extend(minimal_group::samples(deciders, &run.dyads, file));
        let note = match file {
            Ok(file) => format!("prompts re-rendered from {}", experiment::banks_used(file).join("; ")),
            Err(why) => why.clone(),
        };
        set.runs.push(RunNote { run_id: run.manifest.run_id.clone(), folder: run.path.display().to_string(), note });
    }
    set.samples.sort_by(|a, b| {
        let values = |s: &Sample| s.condition.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>();
        a.study.cmp(b.study).then_with(|| {
            values(a)
                .iter()
                .zip(values(b).iter())
                .map(|(x, y)| select::natural(x, y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.unit.cmp(&b.unit))
        })
    });
    set
}

/// `rows` tagged with the index of their run, as one list per run.
fn by_run<T>(rows: Vec<(usize, T)>, runs: usize) -> Vec<Vec<T>> {
    let mut lists: Vec<Vec<T>> = (0..runs).map(|_| Vec::new()).collect();
    for (run, row) in rows {
        lists[run].push(row);
    }
    lists
}

/// Reads the run folders `runs`, picks up to `per_condition` samples of each condition and writes
/// `OUT/samples.html` with their images under `OUT/samples/`.
pub fn write_samples(
    runs: &[PathBuf],
    out: &Path,
    per_condition: usize,
    options: ReadOptions,
) -> Result<WrittenSamples, SamplesError> {
    let rows = runs.iter().map(|dir| read_run(dir, options)).collect::<Result<Vec<_>, _>>()?;
    write_page(&sample_runs(rows, per_condition), out)
}
