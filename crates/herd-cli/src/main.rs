//! `herd`: run social-psychology experiments on AI agents. Each subcommand is a thin layer over a library
//! crate; see ARCHITECTURE.md.

use clap::{Parser, Subcommand};

mod expand_cmd;
mod parse_cmd;
mod prompts_cmd;
mod stimuli_cmd;

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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Stimuli(args) => stimuli_cmd::run(args),
        Command::Prompts(args) => prompts_cmd::run(args),
        Command::Expand(args) => expand_cmd::run(args),
        Command::Parse { cmd } => parse_cmd::run(cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
