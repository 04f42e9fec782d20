//! Finding and reading a result folder: a `herd run` folder, or what `cargo xtask replicate` writes
//! (`OUT/runs/<study>/`). Only the run folders' Parquet parts and `manifest.json` are read, so a
//! folder copied from another machine is enough; the analyses are recomputed from the trials with
//! `herd analyze`'s defaults. Plain tables are read too: a `conformity_trials` or `allocation_dyads`
//! file (Parquet or CSV, e.g. filtered with polars), or a folder of `<table>.parquet|csv` files; with
//! no manifest the report says what it cannot know (model file, device, experiment parameters).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use herd_analysis::io::{
    Columns, DataFrame, ReadOptions, conformity_from_frame, dyads_from_frame, plain_table_file,
    plain_without_duplicates, read_frame,
};
use herd_analysis::{
    BootstrapPlan, ConformityOptions, ConformityTable, ConformityTables, DyadTable, MinimalGroupOptions,
    MinimalGroupTables, PWrong, ResultTable, TableBuilder, Value, analyze_conformity,
    analyze_minimal_group_with_progress,
};
use herd_store::{Manifest, Table, committed_parts, read_run_manifest, read_table_with};

use crate::error::ReportError;

/// Bootstrap resamples and seed `herd analyze minimal-group` uses by default.
const BOOTSTRAP_RESAMPLES: usize = 2000;
const BOOTSTRAP_SEED: u64 = 20_240_501;

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

fn origin(dirs: &[PathBuf], table: Table) -> String {
    dirs.iter().map(|d| d.join(table.name()).display().to_string()).collect::<Vec<_>>().join(" + ")
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
    let read_as = |path: &Path, table: Table| -> Result<DataFrame, ReportError> {
        let (frame, _) = plain_without_duplicates(read_frame(path)?, table, &path.display().to_string(), options)?;
        Ok(frame)
    };
    let read = |path: &Path| read_frame(path).map_err(ReportError::from);
    let beside = |file: &Path, table: Table| file.parent().and_then(|dir| plain_table_file(dir, table));
    let (mut conformity, mut minimal_group) = (None, None);
    for (table, file) in &tables {
        let origin = file.display().to_string();
        if *table == Table::ConformityTrials {
            progress("conformity: reading trials and analysing");
            let baseline = beside(file, Table::BaselineCandidates)
                .map(|f| read(&f).map(|frame| (frame, f.display().to_string())))
                .transpose()?;
            conformity = Some(analyse_conformity(Vec::new(), read_as(file, *table)?, origin, baseline)?);
        } else {
            progress("minimal groups: reading allocations and analysing");
            let deciders = beside(file, Table::AllocationDeciders)
                .map(|f| read(&f).map(|frame| (frame, f.display().to_string())))
                .transpose()?;
            minimal_group = Some(analyse_minimal_group(Vec::new(), read_as(file, *table)?, origin, deciders)?);
        }
    }
    let plain_tables = tables.into_iter().map(|(_, f)| f).collect();
    Ok(Results { source: source.to_path_buf(), conformity, minimal_group, empty_runs: Vec::new(), plain_tables })
}

fn load_conformity(runs: Vec<RunFolder>, options: ReadOptions) -> Result<ConformityResults, ReportError> {
    let dirs: Vec<PathBuf> = runs.iter().map(|r| r.path.clone()).collect();
    let frame = read_table_with(&dirs, Table::ConformityTrials, options)
        .map_err(|e| store_error(&dirs[0], e))?
        .frame
        .ok_or_else(|| not_found(&dirs[0], "no conformity_trials rows"))?;
    let baseline = read_table_with(&dirs, Table::BaselineCandidates, options)
        .map_err(|e| store_error(&dirs[0], e))?
        .frame
        .map(|frame| (frame, origin(&dirs, Table::BaselineCandidates)));
    analyse_conformity(runs, frame, origin(&dirs, Table::ConformityTrials), baseline)
}

/// The conformity analyses and quality table of `frame`. Columns the quality table reads but a plain
/// table may lack (`mass_ab`, `p_bound`, `modality`) leave their cells empty.
fn analyse_conformity(
    runs: Vec<RunFolder>,
    frame: DataFrame,
    source: String,
    baseline: Option<(DataFrame, String)>,
) -> Result<ConformityResults, ReportError> {
    let trials = conformity_from_frame(&frame, source.clone())?;
    let tables = analyze_conformity(&trials, &ConformityOptions::default())?;
    let (measure, measure_note) = lead_measure(&runs, &tables)?;

    let c = Columns::new(&frame, source);
    let (model, task) = (c.text("model", "model name")?, c.text("task", "task")?);
    let mass = c.optional("mass_ab", |c| c.float("mass_ab", "P(A) + P(B)"))?;
    let bound = c
        .optional("p_bound", |c| c.flag("p_bound", "1 if a probability is only a bound"))?
        .unwrap_or_else(|| vec![false; c.height()]);
    // Tables written before lower bounds were told apart have no kind: their bounds are upper ones.
    let bound_kind = c.optional("p_bound_kind", |c| c.text("p_bound_kind", "upper, lower or empty"))?;
    let modality = c.optional("modality", |c| c.text("modality", "vision or text"))?;
    /// Trials, mass sum, bounded, lower-bounded, text-modality trials, and whether the modality is unknown.
    type Counts = (usize, f64, usize, usize, usize, bool);
    let mut groups: BTreeMap<(String, String), Counts> = BTreeMap::new();
    for i in 0..c.height() {
        let g = groups.entry((model[i].clone(), task[i].clone())).or_default();
        g.0 += 1;
        g.1 += mass.as_ref().map_or(f64::NAN, |m| m[i]);
        g.2 += usize::from(bound[i]);
        g.3 += usize::from(bound[i] && bound_kind.as_ref().is_some_and(|k| k[i] == "lower"));
        g.4 += usize::from(modality.as_ref().is_some_and(|m| m[i] == "text"));
        g.5 |= modality.is_none();
    }
    // (model, task) → (candidates, accepted)
    let mut accepted_by: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    if let Some((frame, baseline_origin)) = baseline {
        let b = Columns::new(&frame, baseline_origin);
        let (bm, bt, accepted) =
            (b.text("model", "model")?, b.text("task", "task")?, b.flag("accepted", "1 if accepted")?);
        for i in 0..b.height() {
            let e = accepted_by.entry((bm[i].clone(), bt[i].clone())).or_default();
            e.0 += 1;
            e.1 += usize::from(accepted[i]);
        }
    }
    let mut q = quality_table(
        "conformity_quality",
        &["model", "task", "modality"],
        &[
            "trials",
            "mean_mass_ab",
            "bounded_share",
            "bounded_excluded",
            "lower_bounded_excluded",
            "baseline_candidates",
            "baseline_accepted_share",
        ],
    );
    for ((m, t), (n, mass_sum, bounded, lower, text, unknown)) in groups {
        let (candidates, accepted) = accepted_by.get(&(m.clone(), t.clone())).copied().unwrap_or((0, 0));
        let modality = if unknown {
            "unknown"
        } else if text == n {
            "text"
        } else if text == 0 {
            "vision"
        } else {
            "mixed"
        };
        q.push(quality_row(
            vec![m, t, modality.into()],
            vec![
                Some(n as f64),
                Some(mass_sum / n as f64),
                Some(bounded as f64 / n as f64),
                Some(bounded as f64),
                Some(lower as f64),
                Some(candidates as f64),
                (candidates > 0).then(|| accepted as f64 / candidates as f64),
            ],
        ));
    }
    Ok(ConformityResults { runs, trials, tables, quality: q.finish(), measure, measure_note })
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
    let frame = read_table_with(&dirs, Table::AllocationDyads, options)
        .map_err(|e| store_error(&dirs[0], e))?
        .frame
        .ok_or_else(|| not_found(&dirs[0], "no allocation_dyads rows"))?;
    let deciders = read_table_with(&dirs, Table::AllocationDeciders, options)
        .map_err(|e| store_error(&dirs[0], e))?
        .frame
        .map(|frame| (frame, origin(&dirs, Table::AllocationDeciders)));
    analyse_minimal_group(runs, frame, origin(&dirs, Table::AllocationDyads), deciders)
}

fn analyse_minimal_group(
    runs: Vec<RunFolder>,
    frame: DataFrame,
    source: String,
    deciders: Option<(DataFrame, String)>,
) -> Result<MinimalGroupResults, ReportError> {
    let dyads = dyads_from_frame(&frame, source)?;
    // Every decider's points sum to the pool its run recorded (plain tables: the paper's 100).
    let mut pool: Option<(f64, &PathBuf)> = None;
    for run in &runs {
        let Some(recorded) = herd_analysis::io::manifest_pool(&run.manifest) else { continue };
        match pool {
            Some((first, path)) if first != recorded => {
                return Err(ReportError::Results {
                    path: run.path.display().to_string(),
                    problem: format!("its society.pool is {recorded}, but {} has {first}", path.display()),
                    fix: "report runs with different pools separately".into(),
                });
            }
            Some(_) => {}
            None => pool = Some((recorded, &run.path)),
        }
    }
    let options = MinimalGroupOptions {
        pool: pool.map_or(MinimalGroupOptions::default().pool, |(p, _)| p),
        bootstrap: BootstrapPlan::Seeded { resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED },
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group_with_progress(&dyads, &options, &mut |_, _| {})?;

    let mut q = quality_table(
        "allocation_quality",
        &["model", "reasoning", "instrument"],
        &["deciders", "parsed_share", "filled_share", "qc_flagged_share", "mean_tokens_generated"],
    );
    if let Some((frame, deciders_origin)) = deciders {
        let c = Columns::new(&frame, deciders_origin);
        let (model, reasoning, instrument) =
            (c.text("model", "model")?, c.text("reasoning", "on or off")?, c.text("instrument", "instrument name")?);
        let status = c.text("parse_status", "ok or the failure")?;
        let filled = c.flag("filled", "1 if uniformly filled")?;
        let flags = c.text("qc_flags", "comma-separated QC flags")?;
        let tokens = c.float("tokens_generated", "tokens generated")?;
        /// Deciders, parsed, filled, flagged, tokens.
        type Counts = (usize, usize, usize, usize, f64);
        let mut groups: BTreeMap<(String, String, String), Counts> = BTreeMap::new();
        for i in 0..c.height() {
            let g = groups.entry((model[i].clone(), reasoning[i].clone(), instrument[i].clone())).or_default();
            g.0 += 1;
            g.1 += usize::from(status[i] == "ok");
            g.2 += usize::from(filled[i]);
            g.3 += usize::from(!flags[i].is_empty());
            g.4 += tokens[i];
        }
        for ((m, r, i), (n, parsed, fills, flagged, tokens)) in groups {
            let share = |k: usize| Some(k as f64 / n as f64);
            q.push(quality_row(
                vec![m, r, i],
                vec![Some(n as f64), share(parsed), share(fills), share(flagged), Some(tokens / n as f64)],
            ));
        }
    }
    Ok(MinimalGroupResults { runs, dyads, tables, quality: q.finish() })
}

/// A quality table: text key columns, then number columns, written through herd-analysis's
/// [`TableBuilder`] like every result table.
fn quality_table(name: &str, keys: &[&str], numbers: &[&str]) -> TableBuilder {
    let schema: Vec<(&str, char)> = keys.iter().map(|&k| (k, 't')).chain(numbers.iter().map(|&n| (n, 'f'))).collect();
    TableBuilder::new(name, &schema)
}

/// A quality row: the keys, then the numbers (`None` and NaN are nulls).
fn quality_row(keys: Vec<String>, numbers: Vec<Option<f64>>) -> Vec<Value> {
    keys.into_iter().map(Value::from).chain(numbers.into_iter().map(Value::from)).collect()
}
