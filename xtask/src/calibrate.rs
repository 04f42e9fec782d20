//! `cargo xtask calibrate`: the committed calibration table of the papers' designs (docs/calibration.md
//! and docs/calibration.csv), regenerated with `herd calibrate` on the full conformity and minimal-group
//! designs and the shipped agents.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// One `herd calibrate` of the committed table: a design, the agents replicated on it, and the model id
/// their answers are stored under (herd-analysis's `calibration/shipped.rs` reads each rule's rates from
/// the agent and model it names).
struct Calibrated {
    title: &'static str,
    experiment: &'static str,
    agents: &'static [&'static str],
    model: &'static str,
    /// Whether the minimal-group analysis refits the GEE on each of 2,000 resamples: the one claim that
    /// needs it is calibrated apart, on fewer replications, and only there.
    gee_bootstrap: bool,
}

/// The claim only a calibration with the GEE bootstrap judges.
const BOOTSTRAP_CLAIM: &str = "bootstrap_se_agreement";

impl Calibrated {
    /// Whether this calibration's rows of `claim` go into the table: the bootstrap claim from the
    /// calibration that bootstraps, every other claim from the others.
    fn keeps(&self, claim: &str) -> bool {
        (claim == BOOTSTRAP_CLAIM) == self.gee_bootstrap
    }
}

const CONFORMITY: &str = "data/experiments/conformity.toml";
const MINIMAL_GROUP: &str = "data/experiments/minimal-group.toml";
const PAPER_EFFECTS: &str = "data/sim/paper-effects.toml";
const NULL: &str = "data/sim/null.toml";

const CALIBRATED: [Calibrated; 4] = [
    Calibrated {
        title: "conformity",
        experiment: CONFORMITY,
        agents: &[PAPER_EFFECTS, NULL, "data/sim/saturating-model.toml"],
        model: "sim",
        gee_bootstrap: false,
    },
    Calibrated {
        title: "minimal groups",
        experiment: MINIMAL_GROUP,
        agents: &[PAPER_EFFECTS, NULL],
        model: "sim",
        gee_bootstrap: false,
    },
    Calibrated {
        title: "minimal groups, stored as the paper's exception model",
        experiment: MINIMAL_GROUP,
        agents: &["data/sim/exception-model.toml", NULL],
        model: "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        gee_bootstrap: false,
    },
    Calibrated {
        title: "minimal groups with the GEE bootstrap (bootstrap_se_agreement)",
        experiment: MINIMAL_GROUP,
        agents: &[PAPER_EFFECTS, NULL],
        model: "sim",
        gee_bootstrap: true,
    },
];

const VERDICTS: [&str; 5] =
    ["replicates", "does not replicate", "inconclusive", "not the paper's population", "not in this run"];

pub fn run(replications: u32, bootstrap_replications: u32, out: &Path) -> Result<()> {
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
         Wilson interval. The papers' agent is one model like the paper's typical ones, so a claim about some \
         models (saturation by N = 4) or about one model's exception (the majority reversal, the paraphrase's hidden \
         floor) is not expected to replicate under it: `data/sim/saturating-model.toml` is a model whose conformity \
         levels off (saturation's power), and `data/sim/exception-model.toml`, stored as \
         deepseek-ai/DeepSeek-R1-Distill-Llama-8B, plants the paper's exception model's two exceptions (their power; \
         the null agent stored under that name gives their false-verdict rate). `bootstrap_se_agreement` needs the GEE \
         refitted on each of 2,000 resamples (as `herd analyze` does), about a minute a replication, so it is \
         calibrated apart on {bootstrap_replications} replications per agent (`--bootstrap-replications`). \
         Regenerate after changing a rule or an agent.\n"
    );
    for (k, run) in CALIBRATED.iter().enumerate() {
        let (name, experiment) = (run.title, run.experiment);
        let table = Path::new(out).join(format!("calibration-{k}.csv"));
        let started = Instant::now();
        let replications = if run.gee_bootstrap { bootstrap_replications } else { replications };
        let mut command = Command::new(&herd);
        command.args(["calibrate", "--experiment", experiment, "--replications", &replications.to_string()]);
        for agent in run.agents {
            command.args(["--agent", agent]);
        }
        if run.gee_bootstrap {
            command.args(["--gee-bootstrap", "--resamples", "2000"]);
        }
        let status =
            command.args(["--model", run.model, "--out"]).arg(&table).status().context("starting herd calibrate")?;
        if !status.success() {
            bail!("herd calibrate --experiment {experiment} --model {} failed ({status})", run.model);
        }
        let text = std::fs::read_to_string(&table).with_context(|| format!("reading {}", table.display()))?;
        std::fs::remove_file(&table).ok();
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        if csv.is_empty() {
            csv = format!("{header}\n");
        }
        let rows: Vec<Vec<String>> = lines
            .map(|l| l.split(',').map(str::to_owned).collect::<Vec<_>>())
            .filter(|r| r.get(1).is_some_and(|claim| run.keeps(claim)))
            .collect();
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
            let named = if run.model == "sim" { String::new() } else { format!(", stored as model `{}`", run.model) };
            markdown.push_str(&format!("\n### agent `{agent}`{named}\n\n| claim | {} |\n|---|", VERDICTS.join(" | ")));
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
