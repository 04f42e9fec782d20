//! Finding and reading a result folder: a `herd run` folder, or what `cargo xtask replicate` writes
//! (`OUT/runs/<study>/`). Only the run folders' Parquet parts and `manifest.json` are read, so a
//! folder copied from another machine is enough; the analyses are recomputed from the trials with
//! `herd analyze`'s defaults. Plain tables are read too: a `conformity_trials` or `allocation_dyads`
//! file (Parquet or CSV, e.g. filtered with polars), or a folder of `<table>.parquet|csv` files; with
//! no manifest the report says what it cannot know (model file, device, experiment parameters).
//!
//! The rows are read through herd-analysis's [`herd_analysis::study`], the path `herd analyze` reads
//! through too, so the report sees herd's own tables, never a polars frame.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use herd_analysis::io::{ReadOptions, plain_table_file};
use herd_analysis::study::{
    BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, ConformityInput, MinimalGroupInput, TrialSource, read_conformity,
    read_minimal_group,
};
use herd_analysis::{
    BootstrapPlan, ConformityOptions, ConformityTable, ConformityTables, DyadTable, MinimalGroupOptions,
    MinimalGroupTables, PWrong, ResultTable, analyze_conformity, analyze_minimal_group_with_progress,
};
use herd_store::{Manifest, Table, committed_parts, read_run_manifest};

use crate::error::ReportError;

/// One run folder and its manifest.
#[derive(Debug, Clone)]
pub struct RunFolder {
    pub path: PathBuf,
    pub manifest: Manifest,
}

#[derive(Debug, Clone)]
pub struct ConformityResults {
    pub runs: Vec<RunFolder>,
    pub trials: ConformityTable,
    pub tables: ConformityTables,
    /// Per model × task: trials, mean P(A)+P(B), share of bounded probabilities, baseline acceptance.
    pub quality: ResultTable,
    /// The measure figures and headlines lead with (the experiment file's `analysis.measure`); the
    /// other is shown beside it where the trials define it.
    pub measure: PWrong,
    /// Why the lead measure is not the experiment file's, when it is not.
    pub measure_note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct MinimalGroupResults {
    pub runs: Vec<RunFolder>,
    pub dyads: DyadTable,
    pub tables: MinimalGroupTables,
    /// Per model × reasoning × instrument: deciders, parse success, fills, QC flags.
    pub quality: ResultTable,
}

/// Everything a report is made from.
#[derive(Debug, Clone)]
pub struct Results {
    /// The folder the user named.
    pub source: PathBuf,
    pub conformity: Option<ConformityResults>,
    pub minimal_group: Option<MinimalGroupResults>,
    /// Run folders that hold no trial rows yet.
    pub empty_runs: Vec<PathBuf>,
    /// Plain tables read without a run manifest (what the report cannot know about them is said).
    pub plain_tables: Vec<PathBuf>,
}

/// The trial tables a report reads, by file stem.
const PLAIN_TABLES: [Table; 2] = [Table::ConformityTrials, Table::AllocationDyads];

/// Plain tables named by `path`: the file itself (its stem names the table), or the
/// `<table>.parquet|csv` files of a folder without `manifest.json`; empty when `path` is neither.
fn plain_tables(path: &Path) -> Result<Vec<(Table, PathBuf)>, ReportError> {
    if path.is_file() {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let Some(table) = PLAIN_TABLES.into_iter().find(|t| t.name() == stem) else {
            return Err(ReportError::Results {
                path: path.display().to_string(),
                problem: "is a file, but not a trial table herd reports on".into(),
                fix: "pass conformity_trials.parquet|csv or allocation_dyads.parquet|csv (the file stem names the table), \
                      a folder holding them, or a run folder"
                    .into(),
            });
        };
        return Ok(vec![(table, path.to_path_buf())]);
    }
    Ok(PLAIN_TABLES.into_iter().filter_map(|t| plain_table_file(path, t).map(|f| (t, f))).collect())
}

fn not_found(dir: &Path, problem: &str) -> ReportError {
    ReportError::Results {
        path: dir.display().to_string(),
        problem: problem.to_owned(),
        fix: "pass a run folder (`herd run --out DIR`) or what `cargo xtask replicate --out DIR` wrote; a copy of the \
              folder from another machine is enough (its */*.parquet parts and manifest.json)"
            .into(),
    }
}

/// Run folders in `dir`: `dir` itself, `dir/runs/*` (replicate's layout) or `dir/*`.
pub fn find_run_folders(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if !dir.exists() {
        return Err(not_found(dir, "no such folder"));
    }
    if !dir.is_dir() {
        return Err(not_found(dir, "is a file, not a folder of runs"));
    }
    if dir.join("manifest.json").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut found = Vec::new();
    for parent in [dir.join("runs"), dir.to_path_buf()] {
        let Ok(entries) = std::fs::read_dir(&parent) else { continue };
        let mut runs: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.join("manifest.json").is_file()).collect();
        runs.sort();
        found.extend(runs);
    }
    if found.is_empty() {
        let problem = if std::fs::read_dir(dir).map(|mut e| e.next().is_none()).unwrap_or(false) {
            "the folder is empty"
        } else {
            "no run folder here (none of DIR, DIR/runs/*, DIR/* has a manifest.json)"
        };
        return Err(not_found(dir, problem));
    }
    Ok(found)
}

fn store_error(dir: &Path, e: herd_store::StoreError) -> ReportError {
    ReportError::Store { path: dir.display().to_string(), source: e }
}

/// Reads every study found under `dir` (run folders, or plain tables) and analyses it; `progress`
/// hears what is being done.
pub fn load_results(dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<Results, ReportError> {
    load_results_with(dir, ReadOptions::default(), progress)
}

/// [`load_results`]; with `options.dedupe`, a unit stored twice keeps its first copy instead of
/// refusing the read (`herd report --dedupe`).
pub fn load_results_with(
    dir: &Path,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Results, ReportError> {
    if dir.exists() {
        let plain = plain_tables(dir)?;
        if !plain.is_empty() {
            return load_plain(dir, plain, options, progress);
        }
    }
    let folders = find_run_folders(dir)?;
    let mut by_table: BTreeMap<Table, Vec<RunFolder>> = BTreeMap::new();
    let mut empty_runs = Vec::new();
    for path in folders {
        let manifest = read_run_manifest(&path).map_err(|e| store_error(&path, e))?;
        let mut any = false;
        for table in [Table::ConformityTrials, Table::AllocationDyads] {
            if !committed_parts(&path, table).map_err(|e| store_error(&path, e))?.is_empty() {
                by_table.entry(table).or_default().push(RunFolder { path: path.clone(), manifest: manifest.clone() });
                any = true;
            }
        }
        if !any {
            empty_runs.push(path);
        }
    }
    if by_table.is_empty() {
        return Err(ReportError::Results {
            path: dir.display().to_string(),
            problem: "the run folders hold no conformity_trials or allocation_dyads rows yet".into(),
            fix: "run the experiment first (`herd run … --out DIR`), then report on DIR".into(),
        });
    }
    let conformity = match by_table.remove(&Table::ConformityTrials) {
        Some(runs) => {
            progress("conformity: reading trials and analysing");
            Some(load_conformity(runs, options)?)
        }
        None => None,
    };
    let minimal_group = match by_table.remove(&Table::AllocationDyads) {
        Some(runs) => {
            progress("minimal groups: reading allocations and analysing");
            Some(load_minimal_group(runs, options)?)
        }
        None => None,
    };
    Ok(Results { source: dir.to_path_buf(), conformity, minimal_group, empty_runs, plain_tables: Vec::new() })
}

/// Plain tables: each study from its one file, with the deciders and baseline tables beside it when
/// the folder has them.
fn load_plain(
    source: &Path,
    tables: Vec<(Table, PathBuf)>,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Results, ReportError> {
    // Each unit once: a table with a unit in two rows is refused (or, with dedupe, keeps the first).
    let (mut conformity, mut minimal_group) = (None, None);
    for (table, file) in &tables {
        if *table == Table::ConformityTrials {
            progress("conformity: reading trials and analysing");
            conformity =
                Some(analyse_conformity(Vec::new(), read_conformity(TrialSource::file(file), options)?, options)?);
        } else {
            progress("minimal groups: reading allocations and analysing");
            minimal_group = Some(analyse_minimal_group(
                Vec::new(),
                read_minimal_group(TrialSource::file(file), options)?,
                options,
            )?);
        }
    }
    let plain_tables = tables.into_iter().map(|(_, f)| f).collect();
    Ok(Results { source: source.to_path_buf(), conformity, minimal_group, empty_runs: Vec::new(), plain_tables })
}

fn load_conformity(runs: Vec<RunFolder>, options: ReadOptions) -> Result<ConformityResults, ReportError> {
    let dirs: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
    let input = read_conformity(TrialSource::runs(dirs, Table::ConformityTrials), options)?;
    analyse_conformity(runs, input, options)
}

/// The conformity analyses of `input`, the measure they lead with and its quality table.
fn analyse_conformity(
    runs: Vec<RunFolder>,
    input: ConformityInput,
    options: ReadOptions,
) -> Result<ConformityResults, ReportError> {
    let tables = analyze_conformity(&input.trials, &ConformityOptions::default())?;
    let (measure, measure_note) = lead_measure(&runs, &tables)?;
    let quality = input.quality(options)?;
    Ok(ConformityResults { runs, trials: input.trials, tables, quality, measure, measure_note })
}

/// The runs' `analysis.measure` (manifests of runs made before it existed read as the default);
/// runs that disagree are an error, since one report leads with one measure. The two-way measure is
/// undefined for a trial with no mass on A or B; then the analysis has no `p_wrong_ab` rows and the
/// report leads with `p_wrong_full`, saying why.
fn lead_measure(runs: &[RunFolder], tables: &ConformityTables) -> Result<(PWrong, Option<String>), ReportError> {
    let mut chosen: Option<(PWrong, &Path)> = None;
    for run in runs {
        let measure = match run.manifest.parameters.pointer("/analysis/measure") {
            None => PWrong::default(),
            Some(value) => value.as_str().and_then(PWrong::from_column).ok_or_else(|| ReportError::Results {
                path: run.path.join("manifest.json").display().to_string(),
                problem: format!("parameters.analysis.measure is {value}, not a measure herd knows"),
                fix: "use \"p_wrong_full\" or \"p_wrong_ab\" in the experiment file's [analysis] table".into(),
            })?,
        };
        match chosen {
            Some((first, path)) if first != measure => {
                return Err(ReportError::Results {
                    path: run.path.display().to_string(),
                    problem: format!(
                        "its analysis.measure is {}, but {} has {}",
                        measure.column(),
                        path.display(),
                        first.column()
                    ),
                    fix: "report runs with different lead measures separately, or run them with the same [analysis] measure"
                        .into(),
                });
            }
            Some(_) => {}
            None => chosen = Some((measure, &run.path)),
        }
    }
    let measure = chosen.map_or(PWrong::default(), |(m, _)| m);
    let has = |m: PWrong| (0..tables.auc.n_rows()).any(|r| tables.auc.text("measure", r) == Some(m.column()));
    if measure == PWrong::Ab && !has(PWrong::Ab) {
        let note =
            "The experiment file asks to lead with p_wrong_ab, but it is undefined for some trials (no probability \
                    on A or B), so this report leads with p_wrong_full."
                .to_owned();
        return Ok((PWrong::Full, Some(note)));
    }
    Ok((measure, None))
}

fn load_minimal_group(runs: Vec<RunFolder>, options: ReadOptions) -> Result<MinimalGroupResults, ReportError> {
    let dirs: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
    let input = read_minimal_group(TrialSource::runs(dirs, Table::AllocationDyads), options)?;
    analyse_minimal_group(runs, input, options)
}

/// The minimal-group analyses of `input` with `herd analyze`'s defaults (the pool its runs recorded,
/// else the paper's 100) and its quality table.
fn analyse_minimal_group(
    runs: Vec<RunFolder>,
    input: MinimalGroupInput,
    options: ReadOptions,
) -> Result<MinimalGroupResults, ReportError> {
    let analysis = MinimalGroupOptions {
        pool: input.pool_or(None)?,
        bootstrap: BootstrapPlan::Seeded { resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED },
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group_with_progress(&input.dyads, &analysis, &mut |_, _| {})?;
    let quality = input.quality(options)?;
    Ok(MinimalGroupResults { runs, dyads: input.dyads, tables, quality })
}
