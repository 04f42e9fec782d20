//! Finding and reading a result folder: a `herd run` folder, or what `cargo xtask replicate` writes
//! (`OUT/runs/<study>/`). Only the run folders' Parquet parts and `manifest.json` are read, so a
//! folder copied from another machine is enough. Each study's analysis is read from the folder's
//! `analysis/<study>/` when one there was computed from the same trials ([`crate::stored`]: what
//! `herd analyze` wrote, or an earlier report), and otherwise computed once with `herd analyze`'s
//! defaults (without the GEE bootstrap) and kept there. Plain tables are read too: a `conformity_trials` or `allocation_dyads`
//! file (Parquet or CSV, e.g. filtered with polars), or a folder of `<table>.parquet|csv` files; with
//! no manifest the report says what it cannot know (model file, device, experiment parameters).
//!
//! The rows are read through herd-analysis's [`crate::study`], the path `herd analyze` reads
//! through too, so the report sees herd's own tables, never a polars frame.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::io::{ReadOptions, plain_table_file};
use crate::study::{
    BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, ConformityInput, MinimalGroupInput, TrialSource, find_run_folders,
    read_conformity, read_minimal_group,
};
use crate::{
    BootstrapPlan, ConformityOptions, ConformityTable, ConformityTables, DyadTable, MinimalGroupOptions,
    MinimalGroupTables, PWrong, ResultTable, analyze_conformity, analyze_minimal_group_with_progress,
};
use herd_store::{Manifest, Table, committed_parts, read_run_manifest};

use crate::error::AnalysisError;
use crate::stored::{AnalysisSettings, Stored, Study, analysis_dir, read_stored, write_stored};

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
    pub analysis: Provenance,
}

#[derive(Debug, Clone)]
pub struct MinimalGroupResults {
    pub runs: Vec<RunFolder>,
    pub dyads: DyadTable,
    pub tables: MinimalGroupTables,
    /// Per model × reasoning × instrument: deciders, parse success, fills, QC flags.
    pub quality: ResultTable,
    pub analysis: Provenance,
}

/// Where a study's analysis tables came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Provenance {
    /// How they were computed (bootstrap resamples, whether the GEE fits were bootstrapped, pool).
    pub settings: AnalysisSettings,
    /// The analysis folder they were read from, or kept in after computing; `None` where none is
    /// kept (a plain table file, tables built in memory).
    pub folder: Option<PathBuf>,
    /// Read back from `folder` (computed earlier), rather than computed now.
    pub read_back: bool,
    /// Why a kept analysis was not used, or could not be kept.
    pub note: Option<String>,
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
fn plain_tables(path: &Path) -> Result<Vec<(Table, PathBuf)>, AnalysisError> {
    if path.is_file() {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let Some(table) = PLAIN_TABLES.into_iter().find(|t| t.name() == stem) else {
            return Err(AnalysisError::Folder {
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

fn store_error(dir: &Path, e: herd_store::StoreError) -> AnalysisError {
    AnalysisError::Store { path: dir.display().to_string(), source: e }
}

/// Reads every study found under `dir` (run folders, or plain tables) and analyses it; `progress`
/// hears what is being done.
pub fn load_results(dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<Results, AnalysisError> {
    load_results_with(dir, ReadOptions::default(), progress)
}

/// [`load_results`]; with `options.dedupe`, a unit stored twice keeps its first copy instead of
/// refusing the read (`herd report --dedupe`).
pub fn load_results_with(
    dir: &Path,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Results, AnalysisError> {
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
        return Err(AnalysisError::Folder {
            path: dir.display().to_string(),
            problem: "the run folders hold no conformity_trials or allocation_dyads rows yet".into(),
            fix: "run the experiment first (`herd run … --out DIR`), then report on DIR".into(),
        });
    }
    let conformity = match by_table.remove(&Table::ConformityTrials) {
        Some(runs) => {
            progress("conformity: reading trials");
            Some(load_conformity(dir, runs, options, progress)?)
        }
        None => None,
    };
    let minimal_group = match by_table.remove(&Table::AllocationDyads) {
        Some(runs) => {
            progress("minimal groups: reading allocations");
            Some(load_minimal_group(dir, runs, options, progress)?)
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
) -> Result<Results, AnalysisError> {
    // Each unit once: a table with a unit in two rows is refused (or, with dedupe, keeps the first).
    let (mut conformity, mut minimal_group) = (None, None);
    for (table, file) in &tables {
        if *table == Table::ConformityTrials {
            progress("conformity: reading trials");
            let input = read_conformity(TrialSource::file(file), options)?;
            conformity = Some(analyse_conformity(source, Vec::new(), input, options, progress)?);
        } else {
            progress("minimal groups: reading allocations");
            let input = read_minimal_group(TrialSource::file(file), options)?;
            minimal_group = Some(analyse_minimal_group(source, Vec::new(), input, options, progress)?);
        }
    }
    let plain_tables = tables.into_iter().map(|(_, f)| f).collect();
    Ok(Results { source: source.to_path_buf(), conformity, minimal_group, empty_runs: Vec::new(), plain_tables })
}

fn load_conformity(
    source: &Path,
    runs: Vec<RunFolder>,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<ConformityResults, AnalysisError> {
    let dirs: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
    let input = read_conformity(TrialSource::runs(dirs, Table::ConformityTrials), options)?;
    analyse_conformity(source, runs, input, options, progress)
}

/// Where the analysis of what `source` names is kept: in the folder itself (a run folder,
/// replicate's output, a folder of plain tables); nowhere for a plain table file.
fn analysis_home(source: &Path, study: Study) -> Option<PathBuf> {
    source.is_dir().then(|| analysis_dir(source, study))
}

/// The analysis kept in `home` when it was computed from `digest`, else `compute`'s, kept there.
fn stored_or_computed(
    home: Option<PathBuf>,
    study: Study,
    digest: &str,
    settings: AnalysisSettings,
    progress: &mut dyn FnMut(&str),
    compute: impl FnOnce() -> Result<Vec<ResultTable>, AnalysisError>,
) -> Result<(Vec<ResultTable>, Provenance), AnalysisError> {
    let mut note = None;
    if let Some(dir) = &home {
        match read_stored(dir, study, digest, settings.pool)? {
            Stored::Current(tables, settings) => {
                progress(&format!("{}: analysis read from {}", study.name(), dir.display()));
                return Ok((tables, Provenance { settings, folder: home, read_back: true, note }));
            }
            Stored::Stale(why) => {
                note = Some(format!("the analysis kept in {} was not used ({why}); analysed again", dir.display()));
            }
            Stored::Missing => {}
        }
    }
    progress(&format!("{}: analysing", study.name()));
    let tables = compute()?;
    if let Some(dir) = &home {
        let all: Vec<&ResultTable> = tables.iter().collect();
        if let Err(e) = write_stored(dir, study, digest, &settings, &all) {
            let e = e.to_string();
            note = Some(format!(
                "the analysis could not be kept in {} ({}); it is computed again next time",
                dir.display(),
                e.lines().next().unwrap_or_default()
            ));
        }
    }
    Ok((tables, Provenance { settings, folder: home, read_back: false, note }))
}

/// The conformity analyses of `input` (kept under `source`), the measure they lead with and its
/// quality table.
fn analyse_conformity(
    source: &Path,
    runs: Vec<RunFolder>,
    input: ConformityInput,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<ConformityResults, AnalysisError> {
    let home = analysis_home(source, Study::Conformity);
    let (tables, analysis) =
        stored_or_computed(home, Study::Conformity, &input.digest, AnalysisSettings::default(), progress, || {
            Ok(analyze_conformity(&input.trials, &ConformityOptions::default())?.all().into_iter().cloned().collect())
        })?;
    let tables = ConformityTables::from_tables(tables, &input.trials.origin)?;
    let (measure, measure_note) = lead_measure(&runs, &tables)?;
    let quality = input.quality(options)?;
    Ok(ConformityResults { runs, trials: input.trials, tables, quality, measure, measure_note, analysis })
}

/// The runs' `analysis.measure` (manifests of runs made before it existed read as the default);
/// runs that disagree are an error, since one report leads with one measure. The two-way measure is
/// undefined for a trial with no mass on A or B; then the analysis has no `p_wrong_ab` rows and the
/// report leads with `p_wrong_full`, saying why.
fn lead_measure(runs: &[RunFolder], tables: &ConformityTables) -> Result<(PWrong, Option<String>), AnalysisError> {
    let mut chosen: Option<(PWrong, &Path)> = None;
    for run in runs {
        let measure = match run.manifest.parameters.pointer("/analysis/measure") {
            None => PWrong::default(),
            Some(value) => value.as_str().and_then(PWrong::from_column).ok_or_else(|| AnalysisError::Folder {
                path: run.path.join("manifest.json").display().to_string(),
                problem: format!("parameters.analysis.measure is {value}, not a measure herd knows"),
                fix: "use \"p_wrong_full\" or \"p_wrong_ab\" in the experiment file's [analysis] table".into(),
            })?,
        };
        match chosen {
            Some((first, path)) if first != measure => {
                return Err(AnalysisError::Folder {
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

fn load_minimal_group(
    source: &Path,
    runs: Vec<RunFolder>,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<MinimalGroupResults, AnalysisError> {
    let dirs: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
    let input = read_minimal_group(TrialSource::runs(dirs, Table::AllocationDyads), options)?;
    analyse_minimal_group(source, runs, input, options, progress)
}

/// The minimal-group analyses of `input` (kept under `source`) with `herd analyze`'s defaults (the
/// pool its runs recorded, else the paper's 100; no GEE bootstrap, which `herd analyze` adds) and its
/// quality table.
fn analyse_minimal_group(
    source: &Path,
    runs: Vec<RunFolder>,
    input: MinimalGroupInput,
    options: ReadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<MinimalGroupResults, AnalysisError> {
    let analysis = MinimalGroupOptions {
        pool: input.pool_or(None)?,
        bootstrap: BootstrapPlan::Seeded { resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED },
        ..MinimalGroupOptions::default()
    };
    let settings = AnalysisSettings::of_minimal_group(&analysis);
    let home = analysis_home(source, Study::MinimalGroup);
    let (tables, provenance) =
        stored_or_computed(home, Study::MinimalGroup, &input.digest, settings, progress, || {
            let tables = analyze_minimal_group_with_progress(&input.dyads, &analysis, &mut |_, _| {})?;
            Ok(tables.all().into_iter().cloned().collect())
        })?;
    let tables = MinimalGroupTables::from_tables(tables, &input.dyads.origin)?;
    let quality = input.quality(options)?;
    Ok(MinimalGroupResults { runs, dyads: input.dyads, tables, quality, analysis: provenance })
}

/// The quality table of rows analysed in memory: none is kept (no deciders or baseline table).
fn no_quality() -> ResultTable {
    ResultTable { name: "quality".into(), columns: Vec::new() }
}

/// Conformity trials held in memory (a simulated replication: `herd calibrate`) analysed as a run
/// folder's are, nothing kept; `runs` carry the manifests the claims read (the lead measure, the
/// source-strength classes).
pub fn conformity_in_memory(runs: Vec<RunFolder>, trials: ConformityTable) -> Result<ConformityResults, AnalysisError> {
    let tables = analyze_conformity(&trials, &ConformityOptions::default())?;
    let (measure, measure_note) = lead_measure(&runs, &tables)?;
    Ok(ConformityResults {
        runs,
        trials,
        tables,
        quality: no_quality(),
        measure,
        measure_note,
        analysis: Provenance::default(),
    })
}

/// Minimal-group dyads held in memory analysed with `options`, nothing kept (see
/// [`conformity_in_memory`]).
pub fn minimal_group_in_memory(
    runs: Vec<RunFolder>,
    dyads: DyadTable,
    options: &MinimalGroupOptions,
) -> Result<MinimalGroupResults, AnalysisError> {
    let tables = analyze_minimal_group_with_progress(&dyads, options, &mut |_, _| {})?;
    let analysis = Provenance { settings: AnalysisSettings::of_minimal_group(options), ..Provenance::default() };
    Ok(MinimalGroupResults { runs, dyads, tables, quality: no_quality(), analysis })
}
