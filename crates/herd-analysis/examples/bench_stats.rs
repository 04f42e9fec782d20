//! `cargo xtask bench stats` runs this example (in release, so that xtask itself needs no polars): the full minimal-group analysis (6 cells × 30 seeds × 20 deciders ×
//! 19 targets: seed-level Wilcoxon + BH, per-cell and pooled GEE, 2,000 bootstrap resamples,
//! robustness) in herd and, in the same run, the same analysis in pandas/scipy/statsmodels
//! (`crates/herd-analysis/tests/golden/reference.py`). Both sides time the analysis only, not
//! reading the table. The Python comes from a virtual environment given by `--venv PATH` or
//! `HERD_STATS_VENV` (default `/tmp/herd-golden`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use herd_analysis::{BootstrapPlan, DesignKey, Dyad, DyadTable, Labels, MinimalGroupOptions, analyze_minimal_group};
use herd_design::ChaCha20Rng;
use herd_design::rand::{Rng, SeedableRng, seq::SliceRandom};

const SOCIETY: i64 = 20;
const SEEDS: i64 = 30;
const MINORITY_SIZES: [u32; 3] = [3, 5, 10];
const RESAMPLES: usize = 2000;
const VENV_HELP: &str = "python3 -m venv /tmp/herd-golden && /tmp/herd-golden/bin/pip install -r crates/herd-stats/tests/golden/requirements.txt";

/// Synthetic societies with in-group favouritism when labels are visible (softmax allocations).
fn synthetic_dyads() -> Vec<Dyad> {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut rows = Vec::new();
    for labels in [Labels::Visible, Labels::Hidden] {
        for m in MINORITY_SIZES {
            for seed in 0..SEEDS {
                let mut minority: Vec<bool> = (0..SOCIETY).map(|a| a < i64::from(m)).collect();
                minority.shuffle(&mut rng);
                for decider in 0..SOCIETY {
                    let targets: Vec<i64> = (0..SOCIETY).filter(|&t| t != decider).collect();
                    let md = minority[decider as usize];
                    let bias = if labels == Labels::Visible { 0.4 + 0.4 * f64::from(u8::from(md)) } else { 0.0 };
                    let weights: Vec<f64> = targets
                        .iter()
                        .map(|&t| {
                            let same = minority[t as usize] == md;
                            (rng.random_range(-0.8..0.8) + if same { bias } else { 0.0 }).exp()
                        })
                        .collect();
                    let total: f64 = weights.iter().sum();
                    for (position, (&target, w)) in targets.iter().zip(&weights).enumerate() {
                        let mt = minority[target as usize];
                        rows.push(Dyad {
                            design: DesignKey::default(),
                            labels,
                            m,
                            seed,
                            decider,
                            target,
                            minority_decider: md,
                            minority_target: mt,
                            same_group: md == mt,
                            points: 100.0 * w / total,
                            target_position: Some(position as f64),
                            filled: Some(false),
                            target_group: None,
                        });
                    }
                }
            }
        }
    }
    rows
}

fn write_csv(rows: &[Dyad], path: &Path) -> Result<()> {
    let mut text = String::from(
        "labels,m,seed,decider,target,minority_decider,minority_target,same_group,points,target_position,filled\n",
    );
    for d in rows {
        writeln!(
            text,
            "{},{},{},{},{},{},{},{},{:?},{},{}",
            d.labels.as_str(),
            d.m,
            d.seed,
            d.decider,
            d.target,
            u8::from(d.minority_decider),
            u8::from(d.minority_target),
            u8::from(d.same_group),
            d.points,
            d.target_position.unwrap_or(0.0) as i64,
            u8::from(d.filled.unwrap_or(false))
        )?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let venv = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--venv" => Some(path.as_str()),
        _ => bail!("usage: bench_stats [--venv PATH]"),
    };
    run(venv)
}

fn run(venv: Option<&str>) -> Result<()> {
    let rows = synthetic_dyads();
    let n_rows = rows.len();
    let table = DyadTable::new("bench", rows.clone())?;
    let options = MinimalGroupOptions {
        bootstrap: BootstrapPlan::Seeded { resamples: RESAMPLES, seed: 1 },
        ..MinimalGroupOptions::default()
    };
    println!(
        "minimal-group analysis: {} cells × {SEEDS} seeds × {SOCIETY} deciders × {} targets = {n_rows} dyads, GEE + {RESAMPLES} bootstrap resamples",
        MINORITY_SIZES.len() * 2,
        SOCIETY - 1
    );
    analyze_minimal_group(&table, &options)?; // warm-up
    let repeats = 5;
    let start = Instant::now();
    let mut result_rows = 0;
    for _ in 0..repeats {
        let tables = analyze_minimal_group(&table, &options)?;
        result_rows = tables.all().iter().map(|t| t.n_rows()).sum::<usize>();
    }
    let herd_seconds = start.elapsed().as_secs_f64() / f64::from(repeats);
    println!("herd:        {herd_seconds:>9.4} s  ({result_rows} result rows, mean of {repeats} runs)");

    let venv = venv
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HERD_STATS_VENV").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/tmp/herd-golden"));
    let python = venv.join("bin/python");
    if !python.exists() {
        bail!(
            "no Python at {} for the statsmodels peer\n  fix: create the environment with\n    {VENV_HELP}\n  or pass --venv PATH (or set HERD_STATS_VENV)",
            python.display()
        );
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let csv = std::env::temp_dir().join(format!("herd-bench-stats-{}.csv", std::process::id()));
    write_csv(&rows, &csv)?;
    let script = workspace.join("crates/herd-analysis/tests/golden/reference.py");
    let output = Command::new(&python)
        .arg(&script)
        .args(["--bench", csv.to_str().unwrap_or_default(), "--resamples", &RESAMPLES.to_string()])
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    let _ = std::fs::remove_file(&csv);
    if !output.status.success() {
        bail!(
            "the statsmodels peer failed:\n{}\n  fix: install the pinned packages: {VENV_HELP}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reference_seconds: f64 = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("reference_seconds="))
        .context("the peer printed no reference_seconds=")?
        .parse()?;
    println!("statsmodels: {reference_seconds:>9.4} s  (pandas + scipy + statsmodels, one run)");
    println!("herd is {:.1}× faster", reference_seconds / herd_seconds);
    Ok(())
}
