//! `herd report`: the papers' figures and an HTML/Markdown report from a result folder's stored Parquet
//! alone (a run folder, or what `cargo xtask replicate` wrote).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use herd_analysis::io::ReadOptions;
use herd_analysis::load_results_with;
use herd_report::write_report;

#[derive(Args)]
pub struct ReportArgs {
    /// Result folder: a `herd run` folder, or the OUT of `cargo xtask replicate` (runs/<study>/ inside),
    /// of which only the Parquet parts and manifest.json are read; or plain tables: a
    /// conformity_trials / allocation_dyads .parquet|.csv file, or a folder holding them (the report
    /// then says what it cannot know without a run manifest).
    #[arg(long)]
    results: PathBuf,
    /// Folder for report.html, report.md and figures/ (created if missing)
    #[arg(long)]
    out: PathBuf,
    /// Keep the first copy of a unit stored twice (a copied record, concatenated tables) instead of
    /// refusing the results
    #[arg(long)]
    dedupe: bool,
}

pub fn run(args: ReportArgs) -> Result<()> {
    let started = Instant::now();
    let mut progress = |step: &str| eprintln!("[{:>5.1} s] {step}", started.elapsed().as_secs_f64());
    let results = load_results_with(&args.results, ReadOptions { dedupe: args.dedupe }, &mut progress)?;
    for (study, present) in
        [("conformity", results.conformity.is_some()), ("minimal groups", results.minimal_group.is_some())]
    {
        if !present {
            eprintln!("note: no {study} results in {}; the report says so", args.results.display());
        }
    }
    let written = write_report(&results, &args.out, &mut progress)
        .with_context(|| format!("writing the report to {}", args.out.display()))?;
    println!("report: {}", written.html.display());
    println!("markdown: {}", written.markdown.display());
    println!("where herd differs from the papers: {}", written.deviations.display());
    println!("figures: {} files in {}", written.figures.len(), args.out.join("figures").display());
    for absent in &written.absent {
        println!("  not drawn: {} ({})", absent.name, absent.reason);
    }
    Ok(())
}
