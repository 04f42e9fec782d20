//! `herd analyze`: the two papers' analyses over trial tables (CSV or Parquet), written as tidy CSV
//! and Parquet tables with the record of what they were computed from (herd-analysis's `stored`).
//! The tables are read through herd-analysis's `study`, the path `herd report` reads through too; by
//! default they are kept in the run folder's `analysis/<study>/`, where `herd report` reads them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use herd_analysis::io::ReadOptions;
use herd_analysis::stored::{AnalysisSettings, Study, analysis_dir, write_stored};
use herd_analysis::study::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, TrialSource, read_conformity, read_minimal_group};
use herd_analysis::{
    BootstrapPlan, ConformityOptions, MinimalGroupOptions, ResultTable, analyze_conformity,
    analyze_minimal_group_with_progress,
};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Subcommand)]
pub enum AnalyzeCommand {
    /// Minimal-group tables from an allocation_dyads table: seed_tests, gee, bootstrap, robustness.
    MinimalGroup(MinimalGroupArgs),
    /// Conformity tables from a conformity_trials table: curves, auc, deltas, difficulty_spearman,
    /// difficulty_ols.
    Conformity(ConformityArgs),
}

#[derive(Args)]
pub struct MinimalGroupArgs {
    /// allocation_dyads table (.csv or .parquet), a folder holding allocation_dyads.parquet|csv, or a
    /// `herd run` folder
    #[arg(long)]
    dyads: PathBuf,
    /// Folder for the result tables (created if missing). Default: DYADS/analysis/minimal-group when
    /// DYADS is a folder, where `herd report DYADS` reads them instead of analysing again
    #[arg(long)]
    out: Option<PathBuf>,
    /// Bootstrap resamples of the seeds per cell
    #[arg(long, default_value_t = BOOTSTRAP_RESAMPLES)]
    resamples: usize,
    /// Seed of the bootstrap resampling stream
    #[arg(long, default_value_t = BOOTSTRAP_SEED)]
    bootstrap_seed: u64,
    /// Points each decider distributes. A `herd run` folder records its pool (the experiment's
    /// society.pool), which is used, and a --pool that disagrees is an error; a plain table states it
    /// here (default: the paper's 100)
    #[arg(long)]
    pool: Option<f64>,
    /// Skip the seed-level bootstrap of the main GEE fits (gee table's se_bootstrap; one refit per
    /// resample, the slowest part of the analysis)
    #[arg(long)]
    no_gee_bootstrap: bool,
    /// Keep the first row of a unit stored twice (a copied record, concatenated tables) instead of
    /// refusing the table
    #[arg(long)]
    dedupe: bool,
}

#[derive(Args)]
pub struct ConformityArgs {
    /// conformity_trials table (.csv or .parquet), a folder holding conformity_trials.parquet|csv, or a
    /// `herd run` folder
    #[arg(long)]
    trials: PathBuf,
    /// Folder for the result tables (created if missing). Default: TRIALS/analysis/conformity when
    /// TRIALS is a folder, where `herd report TRIALS` reads them instead of analysing again
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep the first row of a unit stored twice (a copied record, concatenated tables) instead of
    /// refusing the table
    #[arg(long)]
    dedupe: bool,
}

/// `--out`, or the input folder's analysis folder; a table file needs `--out`.
fn out_folder(out: Option<PathBuf>, input: &Path, flag: &str, study: Study) -> Result<PathBuf> {
    match out {
        Some(out) => Ok(out),
        None if input.is_dir() => Ok(analysis_dir(input, study)),
        None => anyhow::bail!(
            "{flag} {} is a table file: say where the result tables go\n  fix: add --out DIR",
            input.display()
        ),
    }
}

/// Says how many second copies `--dedupe` left out.
fn say_dropped(dropped: u64) {
    if dropped > 0 {
        eprintln!("note: --dedupe kept the first copy of each unit and left out {dropped} repeated units or rows");
    }
}

pub fn run(cmd: AnalyzeCommand) -> Result<()> {
    match cmd {
        AnalyzeCommand::MinimalGroup(args) => minimal_group(args),
        AnalyzeCommand::Conformity(args) => conformity(args),
    }
}

fn minimal_group(args: MinimalGroupArgs) -> Result<()> {
    let out = out_folder(args.out, &args.dyads, "--dyads", Study::MinimalGroup)?;
    let source = TrialSource::at(&args.dyads, herd_store::Table::AllocationDyads)?;
    let input = read_minimal_group(source, ReadOptions { dedupe: args.dedupe })?;
    say_dropped(input.dropped);
    let pool = input.pool_or(args.pool)?;
    let table = &input.dyads;
    let options = MinimalGroupOptions {
        pool,
        bootstrap: BootstrapPlan::Seeded { resamples: args.resamples, seed: args.bootstrap_seed },
        gee_bootstrap: !args.no_gee_bootstrap,
        ..MinimalGroupOptions::default()
    };
    let started = Instant::now();
    // On a terminal a bar; elsewhere (a log, CI, a pipe) a line at each tenth of the steps, so that
    // minutes of GEE bootstrap refits on millions of dyads do not look like a hang.
    let on_terminal = std::io::stderr().is_terminal();
    let bar = if on_terminal {
        ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{spinner} analysing {pos}/{len} steps [{elapsed}] {wide_bar}")
                .expect("valid progress template"),
        )
    } else {
        eprintln!(
            "[{:>6.1} s] read {} dyads from {}",
            started.elapsed().as_secs_f64(),
            table.rows.len(),
            args.dyads.display()
        );
        ProgressBar::hidden()
    };
    let mut tenths_said = 0;
    let tables = analyze_minimal_group_with_progress(table, &options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        let tenths = (done * 10).checked_div(total).unwrap_or(0);
        if !on_terminal && tenths > tenths_said {
            tenths_said = tenths;
            eprintln!(
                "[{:>6.1} s] analysing: {done}/{total} steps ({}%)",
                started.elapsed().as_secs_f64(),
                tenths * 10
            );
        }
    })?;
    bar.finish_and_clear();
    let settings = AnalysisSettings::of_minimal_group(&options);
    report(&out, Study::MinimalGroup, &input.digest, &settings, &tables.all(), table.rows.len(), "dyads")
}

fn conformity(args: ConformityArgs) -> Result<()> {
    let out = out_folder(args.out, &args.trials, "--trials", Study::Conformity)?;
    let source = TrialSource::at(&args.trials, herd_store::Table::ConformityTrials)?;
    let input = read_conformity(source, ReadOptions { dedupe: args.dedupe })?;
    say_dropped(input.dropped);
    let tables = analyze_conformity(&input.trials, &ConformityOptions::default())?;
    let settings = AnalysisSettings::default();
    report(&out, Study::Conformity, &input.digest, &settings, &tables.all(), input.trials.rows.len(), "trials")
}

fn report(
    out: &Path,
    study: Study,
    input: &str,
    settings: &AnalysisSettings,
    tables: &[&ResultTable],
    n_input: usize,
    what: &str,
) -> Result<()> {
    let written = write_stored(out, study, input, settings, tables)
        .with_context(|| format!("writing result tables to {}", out.display()))?;
    println!("analysed {n_input} {what}");
    for table in tables {
        println!("  {:<20} {:>6} rows", table.name, table.n_rows());
    }
    println!("wrote {} files to {}", written.len(), out.display());
    Ok(())
}
