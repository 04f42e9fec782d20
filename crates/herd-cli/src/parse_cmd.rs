//! `herd parse`: run the output parser on one raw model output read from stdin.

use std::io::{Read, Write};

use anyhow::{Context, Result, bail};
use herd_parse::{Roster, parse_allocation, parse_answer, round_to_pool};

#[derive(clap::Subcommand)]
pub enum ParseCommand {
    /// Parse a minimal-group allocation. Reads one raw model output (any bytes) on stdin and prints one JSON
    /// object: status (ok, repaired or failed), allocation (id → points over every roster id except the
    /// decider, summing to the pool; absent when failed), dropped_keys, raw_sum, reason, and the QC details
    /// (failure, repairs, missing_keys, dropped_decider_keys, filled).
    ///
    /// The roster is --ids, or else numbered ids {id-prefix}{index} zero-padded to --id-width for
    /// --society-size agents (default: agent_01 … agent_20).
    Allocation {
        /// Roster ids, comma separated (e.g. agent_01,agent_02,…); overrides the numbered roster.
        #[arg(long, value_delimiter = ',')]
        ids: Option<Vec<String>>,
        /// Number of agents of the numbered roster.
        #[arg(long, default_value_t = 20)]
        society_size: usize,
        /// Prefix of the numbered roster's ids.
        #[arg(long, default_value = "agent_")]
        id_prefix: String,
        /// Digits of the numbered roster's ids (zero-padded).
        #[arg(long, default_value_t = 2)]
        id_width: usize,
        /// The deciding agent's id: its own key is dropped and it receives nothing.
        #[arg(long)]
        decider: String,
        /// Points to distribute.
        #[arg(long, default_value_t = 100.0)]
        pool: f64,
        /// On failure, give every recipient pool/(n−1) and flag the row as filled.
        #[arg(long)]
        uniform_fill: bool,
        /// Round the allocation to whole points (largest remainder; the pool is kept exactly).
        #[arg(long)]
        integer: bool,
    },
    /// Parse an A/B answer (conformity in generation mode). Reads one raw output on stdin and prints one JSON
    /// object: status, answer (A or B; absent when failed) and reason. Text that gives both letters as
    /// answers is a failure, not a guess.
    Answer,
}

/// Read stdin as bytes (never as UTF-8: invalid bytes are the parser's business) and print one JSON line.
pub fn run(cmd: ParseCommand) -> Result<()> {
    let mut raw = Vec::new();
    std::io::stdin().lock().read_to_end(&mut raw).context("reading the model output from stdin")?;
    let line = match cmd {
        ParseCommand::Allocation { ids, society_size, id_prefix, id_width, decider, pool, uniform_fill, integer } => {
            let ids = match ids {
                Some(ids) => ids.into_iter().map(|s| s.trim().to_owned()).collect(),
                None => Roster::numbered_ids(&id_prefix, id_width, society_size),
            };
            let roster = Roster::new(ids).context("invalid roster")?;
            if roster.resolve(&decider).is_none() {
                bail!("the decider {decider:?} is not a roster id");
            }
            if !(pool.is_finite() && pool > 0.0) {
                bail!("--pool must be a positive number, got {pool}");
            }
            let mut parsed = parse_allocation(&raw, &roster, &decider, pool);
            if uniform_fill {
                parsed = parsed.with_uniform_fill(&roster, &decider, pool);
            }
            if !integer {
                serde_json::to_string(&parsed)?
            } else {
                let mut value = serde_json::to_value(&parsed).context("serialising the parse")?;
                if pool.fract() != 0.0 || pool > f64::from(u32::MAX) {
                    bail!("--integer needs a whole pool, got {pool}");
                }
                // The pool is a whole number within u32 (checked above).
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let whole = pool as u32;
                if let Some(rounded) = parsed.allocation.as_ref().and_then(|a| round_to_pool(a, whole)) {
                    value["allocation"] = serde_json::to_value(rounded)?;
                }
                serde_json::to_string(&value)?
            }
        }
        ParseCommand::Answer => serde_json::to_string(&parse_answer(&raw))?,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}
