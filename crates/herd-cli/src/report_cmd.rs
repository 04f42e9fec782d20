//! `herd report`: the papers' figures and an HTML/Markdown report from a result folder's stored Parquet
//! alone (a run folder, or what `cargo xtask replicate` wrote), and the samples page beside it
//! (herd-samples: the trials behind the numbers, their prompts re-rendered from the run manifests).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use herd_analysis::io::ReadOptions;
use herd_analysis::load_results_with;
use herd_report::{ReportOptions, write_report_with};

/// The line that opens the claims block `herd report` ends with; `cargo xtask replicate` finds the block by it.
const CLAIMS_HEADER: &str = "claims (the papers' claims these results test; report.html has the detail and the tests):";

#[derive(Args)]
pub struct ReportArgs {
    /// Result folder: a `herd run` folder, or the OUT of `cargo xtask replicate` (runs/<study>/ inside),
    /// of which only the Parquet parts and manifest.json are read; or plain tables: a
    /// conformity_trials / allocation_dyads .parquet|.csv file, or a folder holding them (the report
    /// then says what it cannot know without a run manifest).
    #[arg(long)]
    results: PathBuf,
    /// Folder for report.html, report.md, figures/ and samples.html (created if missing)
    #[arg(long)]
    out: PathBuf,
    /// Units samples.html shows per condition (each with its prompt, image, answer and flags); 0 writes no
    /// samples page
    #[arg(long, default_value_t = herd_samples::PER_CONDITION)]
    samples_per_condition: usize,
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
    // Only run folders have the manifests a prompt is re-rendered from; plain tables get no samples page.
    let mut runs: Vec<PathBuf> = Vec::new();
    for run in results.conformity.iter().flat_map(|c| &c.runs).chain(results.minimal_group.iter().flat_map(|m| &m.runs))
    {
        if !runs.contains(&run.path) {
            runs.push(run.path.clone());
        }
    }
    let samples = if args.samples_per_condition > 0 && !runs.is_empty() {
        progress("samples: re-rendering the picked trials' prompts");
        let options = ReadOptions { dedupe: args.dedupe };
        Some(
            herd_samples::write_samples(&runs, &args.out, args.samples_per_condition, options)
                .with_context(|| format!("writing the samples page to {}", args.out.display()))?,
        )
    } else {
        None
    };
    let options = ReportOptions { samples_page: samples.is_some() };
    let written = write_report_with(&results, &args.out, &options, &mut progress)
        .with_context(|| format!("writing the report to {}", args.out.display()))?;
    println!("report: {}", written.html.display());
    println!("markdown: {}", written.markdown.display());
    println!("where herd differs from the papers: {}", written.deviations.display());
    println!("figures: {} files in {}", written.figures.len(), args.out.join("figures").display());
    for absent in &written.absent {
        println!("  not drawn: {} ({})", absent.name, absent.reason);
    }
    if let Some(samples) = samples {
        println!(
            "samples: {} ({} units, {} images; prompts re-rendered and checked against the stored hashes)",
            samples.html.display(),
            samples.samples,
            samples.images
        );
        if samples.mismatched > 0 {
            println!(
                "  warning: {} re-rendered prompts differ from their stored hash (marked on the page): the banks, \
                 the experiment or herd changed since the run",
                samples.mismatched
            );
        }
        if samples.unavailable > 0 {
            println!("  note: {} prompts could not be re-rendered (the page says why)", samples.unavailable);
        }
    }
    // The verdicts last, where a reader's eye lands (replicate reprints this block as its own last word).
    if !written.claims.is_empty() {
        println!("{CLAIMS_HEADER}");
        for line in &written.claims {
            println!("{line}");
        }
    }
    Ok(())
}
