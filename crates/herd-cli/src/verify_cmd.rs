//! `herd verify RUN`: checks a run folder as every read does (records, each part's SHA-256 and rows, the
//! manifest's totals, each unit once) and lists everything wrong. Exit 0 when the run is sound, 1 when
//! it is damaged.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use herd_store::verify_run;

#[derive(Args)]
pub struct VerifyArgs {
    /// Run folder (`herd run --out DIR`)
    run: PathBuf,
}

pub fn run(args: VerifyArgs) -> Result<()> {
    let v = verify_run(&args.run)?;
    println!(
        "{}: store format {}, {} commit records, {} parts verified{}",
        v.dir.display(),
        v.store_format,
        v.records,
        v.parts_verified,
        if v.parts_unverifiable > 0 { format!(", {} unverifiable", v.parts_unverifiable) } else { String::new() }
    );
    for note in &v.notes {
        println!("  note: {note}");
    }
    if v.is_clean() {
        println!("ok: every committed part is as it was written, and the records add up to the manifest");
        return Ok(());
    }
    for problem in &v.problems {
        println!("  damaged: {problem}");
    }
    bail!(
        "{} problems in {}\n  fix: rerun `herd run` with the same arguments and --out {}: it runs again the units of \
         damaged batches and of missing records (remove copied records first)",
        v.problems.len(),
        v.dir.display(),
        v.dir.display()
    )
}
