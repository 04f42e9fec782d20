//! `herd verify RUN`: checks a run folder as every read does (records, each part's SHA-256 and rows, the
//! manifest's totals, each unit once) and lists everything wrong, and says whether the run holds the whole
//! experiment (`complete`, or `incomplete: 88 of 474 units`). Exit 0 when the run is sound, incomplete or
//! not, 1 when it is damaged. It prints the run's digest; `--strict=DIGEST` checks the folder against a digest kept
//! elsewhere, and makes every note a problem.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use herd_store::verify_run;

#[derive(Args)]
pub struct VerifyArgs {
    /// Run folder (`herd run --out DIR`)
    run: PathBuf,
    /// Fail on anything less than a fully checkable run: every note (parts of store format 1 without
    /// digests, a manifest without input fingerprint, files herd did not write, leftovers of a kill, an
    /// input file changed since the run) counts as a problem. With DIGEST (the `run digest` an earlier
    /// `herd verify` printed, kept outside the folder), the folder must also still have that digest:
    /// the folder's own digests detect damage and mixing, but not a forger who rewrote parts and
    /// recomputed their records; a digest kept elsewhere does. Give it as `--strict=DIGEST` (with `=`,
    /// so that `--strict RUN` stays a strict check of RUN).
    #[arg(long, value_name = "DIGEST", num_args = 0..=1, default_missing_value = "", require_equals = true)]
    strict: Option<String>,
}

/// How much of the experiment the run holds: `complete: …` or `incomplete: 88 of 474 units …` with the
/// command that finishes it. An incomplete run is sound (exit 0): a resume continues it.
fn completion(v: &herd_store::Verification) -> String {
    let skipped =
        if v.units_skipped > 0 { format!(", {} skipped with their reason", v.units_skipped) } else { String::new() };
    if v.is_complete() {
        return format!("complete: {} of {} units stored{skipped}", v.units_stored, v.units_total);
    }
    let why = match v.last_status.as_deref() {
        Some("running") => " (the last session did not end: it was killed or is still running)".to_owned(),
        Some(status) => format!(" (the last session ended {status})"),
        None => " (no session ran)".to_owned(),
    };
    format!(
        "incomplete: {} of {} units stored{skipped}{why}\n  next: rerun the same `herd run` command with --out {} to \
         store the rest (stored units are not run again)",
        v.units_stored,
        v.units_total,
        v.dir.display()
    )
}

pub fn run(args: VerifyArgs) -> Result<()> {
    let mut v = verify_run(&args.run)?;
    if let Some(kept) = &args.strict {
        let kept = kept.trim();
        if !kept.is_empty() && kept.trim_start_matches("sha256:") != v.digest.trim_start_matches("sha256:") {
            v.problems.push(format!(
                "the run's digest is {}, not the {kept} you kept: manifest.json or a commit record changed since \
                 (a later `herd run` session into the folder changes it too)",
                v.digest
            ));
        }
        v.problems.append(&mut v.notes);
    }
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
    println!("run digest: {}", v.digest);
    if v.is_clean() {
        println!("{}", completion(&v));
        println!(
            "ok: every committed part is as it was written, and the records add up to the manifest{}",
            if args.strict.as_deref().is_some_and(|d| !d.trim().is_empty()) {
                ", whose digest is the one you kept"
            } else {
                "\n  (keep the run digest outside the folder: `herd verify --strict=DIGEST` then finds any change since)"
            }
        );
        return Ok(());
    }
    for problem in &v.problems {
        println!("  problem: {problem}");
    }
    bail!(
        "{} problems in {}\n  fix: rerun `herd run` with the same arguments and --out {}: it runs again the units of \
         damaged batches, missing or edited records and records of another run (a record copied under a second \
         name is refused until you remove it: the error names it){}",
        v.problems.len(),
        v.dir.display(),
        v.dir.display(),
        if args.strict.is_some() {
            "; notes count as problems under --strict, and a digest other than the one you kept means the folder \
             changed since: restore it from a copy you trust"
        } else {
            ""
        }
    )
}
