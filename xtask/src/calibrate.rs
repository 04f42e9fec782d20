//! `cargo xtask calibrate`: the committed calibration table of the papers' designs (docs/calibration.md
//! and docs/calibration.csv), regenerated with `herd calibrate` on the full conformity and minimal-group
//! designs and the shipped agents.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The designs calibrated and their replications per agent.
const DESIGNS: [(&str, &str); 2] =
    [("conformity", "data/experiments/conformity.toml"), ("minimal groups", "data/experiments/minimal-group.toml")];

const VERDICTS: [&str; 5] =
    ["replicates", "does not replicate", "inconclusive", "not the paper's population", "not in this run"];

pub fn run(replications: u32, out: &Path) -> Result<()> {
    let herd = crate::replicate::build_herd("cpu")?;
    let cpu = crate::bench_replicate::cpu_name();
    let path = crate::replicate::cpu_paths(&herd)?.into_iter().next().unwrap_or_else(|| "baseline".into());
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut csv = String::new();
    let mut markdown = format!(
        "# Calibration: how often each verdict comes out\n\n\
         Written by `cargo xtask calibrate --replications {replications}` (it runs `herd calibrate` on each design \
         below with the shipped agents and writes this page and `calibration.csv`). Measured on {cpu} ({path} \
         path).\n\n\
         Each design is replicated {replications} times per agent, each replication with other sim seeds, analysed \
         as `herd report` would and every headline claim judged. `data/sim/paper-effects.toml` carries the papers' \
         headline effects at their magnitudes: the share of *replicates* is a rule's power. \
         `data/sim/null.toml` carries none: *replicates* on an effect claim is the rule's false-verdict rate, and a \
         null claim (the hidden-label floor, tasks alike, the robustness bounds) should read *replicates*: its \
         false verdict is *does not replicate*. Each cell is the share of replications with that verdict and its 95% \
         Wilson interval. The papers' agent is one model like the paper's typical ones, so a claim about one model's \
         exception (the majority reversal, the paraphrase's hidden floor) or about some models (saturation by N = 4) \
         is not expected to replicate under either agent. Regenerate after changing a rule or an agent.\n"
    );
    for (name, experiment) in DESIGNS {
        let table = Path::new(out).join(format!("calibration-{}.csv", name.replace(' ', "-")));
        let started = Instant::now();
        let status = Command::new(&herd)
            .args(["calibrate", "--experiment", experiment, "--replications", &replications.to_string(), "--out"])
            .arg(&table)
            .status()
            .context("starting herd calibrate")?;
        if !status.success() {
            bail!("herd calibrate --experiment {experiment} failed ({status})");
        }
        let text = std::fs::read_to_string(&table).with_context(|| format!("reading {}", table.display()))?;
        std::fs::remove_file(&table).ok();
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        if csv.is_empty() {
            csv = format!("{header}\n");
        }
        let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_owned).collect()).collect();
        csv.extend(rows.iter().map(|r| format!("{}\n", r.join(","))));
        markdown.push_str(&format!(
            "\n## {name}: `{experiment}`\n\n{replications} replications per agent, {:.1} min in all.\n",
            started.elapsed().as_secs_f64() / 60.0
        ));
        let agents: Vec<&str> = rows.iter().map(|r| r[0].as_str()).fold(Vec::new(), |mut seen, a| {
            if !seen.contains(&a) {
                seen.push(a);
            }
            seen
        });
        for agent in agents {
            markdown.push_str(&format!("\n### agent `{agent}`\n\n| claim | {} |\n|---|", VERDICTS.join(" | ")));
            markdown.push_str(&"---|".repeat(VERDICTS.len()));
            markdown.push('\n');
            let claims: Vec<&str> =
                rows.iter().filter(|r| r[0] == agent).map(|r| r[1].as_str()).fold(Vec::new(), |mut seen, c| {
                    if !seen.contains(&c) {
                        seen.push(c);
                    }
                    seen
                });
            for claim in claims {
                let mut line = format!("| {claim} |");
                for verdict in VERDICTS {
                    let row = rows.iter().find(|r| r[0] == agent && r[1] == claim && r[3] == verdict);
                    let cell = row.map_or("—".to_owned(), |r| {
                        let number = |i: usize| r[i].parse::<f64>().unwrap_or(f64::NAN);
                        format!("{:.2} [{:.2}, {:.2}]", number(6), number(7), number(8))
                    });
                    line.push_str(&format!(" {cell} |"));
                }
                markdown.push_str(&line);
                markdown.push('\n');
            }
        }
    }
    let (md, table) = (out.join("calibration.md"), out.join("calibration.csv"));
    std::fs::write(&md, markdown).with_context(|| format!("writing {}", md.display()))?;
    std::fs::write(&table, csv).with_context(|| format!("writing {}", table.display()))?;
    println!("wrote {} and {}", md.display(), table.display());
    Ok(())
}
