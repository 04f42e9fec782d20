//! `herd calibrate`: replications of a design answered by the shipped simulated agents, every claim
//! of the study counted once per replication, the same table on a rerun, and an agent with the papers'
//! effects telling apart from one with none on the rule that carries the effect.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn calibrate(experiment: &str, replications: u32, out: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_herd"))
        .current_dir(root())
        .args(["calibrate", "--experiment", experiment, "--replications", &replications.to_string(), "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The CSV rows without the timing column: (agent, claim, study, verdict, count, replications).
fn rows(csv: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').take(6).map(str::to_owned).collect())
        .collect()
}

fn count(rows: &[Vec<String>], agent: &str, claim: &str, verdict: &str) -> u32 {
    rows.iter()
        .find(|r| r[0].ends_with(agent) && r[1] == claim && r[3] == verdict)
        .unwrap_or_else(|| panic!("no row {agent} {claim} {verdict}"))[4]
        .parse()
        .unwrap()
}

#[test]
fn the_shipped_agents_calibrate_the_conformity_rules_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first.csv"), dir.path().join("second.csv"));
    let stdout = calibrate("data/experiments/conformity.quick.toml", 4, &first);
    assert!(stdout.contains("agent data/sim/paper-effects.toml: 4 replications"), "{stdout}");
    assert!(stdout.contains("agent data/sim/null.toml: 4 replications"), "{stdout}");
    let table = rows(&first);
    // Conformity's 15 claims × 5 verdicts × 2 agents, and no minimal-group claim.
    assert_eq!(table.len(), 15 * 5 * 2);
    assert!(table.iter().all(|r| r[2] == "conformity"));
    for agent in ["paper-effects.toml", "null.toml"] {
        for claim in ["group_size_rise", "public_private", "near_far"] {
            let total: u32 =
                ["replicates", "does not replicate", "inconclusive", "not the paper's population", "not in this run"]
                    .iter()
                    .map(|v| count(&table, agent, claim, v))
                    .sum();
            assert_eq!(total, 4, "{agent} {claim}: every replication judged once");
        }
    }
    // N rises conformity for the agent with the papers' effects, never for the one without.
    assert_eq!(count(&table, "paper-effects.toml", "group_size_rise", "replicates"), 4);
    assert_eq!(count(&table, "null.toml", "group_size_rise", "replicates"), 0);

    calibrate("data/experiments/conformity.quick.toml", 4, &second);
    assert_eq!(rows(&second), table, "replication r draws with sim seed + r: a rerun gives the same table");
}

#[test]
fn a_missing_agent_file_is_named_before_any_replication_runs() {
    let output = Command::new(env!("CARGO_BIN_EXE_herd"))
        .current_dir(root())
        .args(["calibrate", "--experiment", "data/experiments/conformity.quick.toml", "--agent", "no/such.toml"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no/such.toml"), "{stderr}");
}

#[test]
fn a_sim_file_without_the_sim_backend_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herd"))
        .current_dir(root())
        .args(["run", "--experiment", "data/experiments/conformity.quick.toml", "--sim", "data/sim/null.toml", "--out"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--sim data/sim/null.toml") && stderr.contains("fix: add --backend sim"), "{stderr}");
    assert!(!dir.path().join("run").exists(), "nothing was started");
}

/// `calibrate` with `--agent FILE` and extra arguments, the CSV rows.
fn calibrate_with(experiment: &str, agent: &Path, extra: &[&str], out: &Path) -> (String, Vec<Vec<String>>) {
    let output = Command::new(env!("CARGO_BIN_EXE_herd"))
        .current_dir(root())
        .args(["calibrate", "--experiment", experiment, "--replications", "2", "--agent"])
        .arg(agent)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8(output.stdout).unwrap(), rows(out))
}

#[test]
fn a_claim_about_the_papers_exception_model_is_calibrated_on_an_agent_named_as_it() {
    let dir = tempfile::tempdir().unwrap();
    // Majority deciders favouring the out-group at the quick design's only minority size (m = 5), and the
    // default agent without that.
    let exception = dir.path().join("exception.toml");
    std::fs::write(&exception, "[allocation.minority_size.5]\ningroup_majority = -1.0\n").unwrap();
    let typical = dir.path().join("typical.toml");
    std::fs::write(&typical, "seed = 1\n").unwrap();
    let quick = "data/experiments/minimal-group.quick.toml";
    let as_exception = ["--model", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"];
    let (stdout, table) = calibrate_with(quick, &exception, &as_exception, &dir.path().join("a.csv"));
    assert!(stdout.contains("as model deepseek-ai/DeepSeek-R1-Distill-Llama-8B: 2 replications"), "{stdout}");
    assert_eq!(count(&table, "exception.toml", "majority_reversal", "replicates"), 2);
    let csv = std::fs::read_to_string(dir.path().join("a.csv")).unwrap();
    assert!(csv.lines().skip(1).all(|l| l.ends_with(",deepseek-ai/DeepSeek-R1-Distill-Llama-8B")), "{csv}");
    // The paper's exception model without its exception refutes the claim; another model without it is
    // like the paper's other three, which the claim is not about.
    let (_, table) = calibrate_with(quick, &typical, &as_exception, &dir.path().join("b.csv"));
    assert_eq!(count(&table, "typical.toml", "majority_reversal", "does not replicate"), 2);
    let (_, table) = calibrate_with(quick, &typical, &[], &dir.path().join("c.csv"));
    assert_eq!(count(&table, "typical.toml", "majority_reversal", "not in this run"), 2);
}

#[test]
fn saturation_is_calibrated_on_an_agent_whose_curve_levels_off() {
    let dir = tempfile::tempdir().unwrap();
    // A strong rise that stops after two wrong replies (the quick design's N are 0, 2, 5, 10), and the
    // same rise without the cap, which keeps climbing to N = 10.
    let steady = "seed = 3\n[conformity]\nintercept = -2.0\nper_log_wrong = 3.0\n";
    let (saturating, rising) = (dir.path().join("saturating.toml"), dir.path().join("rising.toml"));
    std::fs::write(&saturating, format!("{steady}saturates_at = 2\n")).unwrap();
    std::fs::write(&rising, steady).unwrap();
    let quick = "data/experiments/conformity.quick.toml";
    let (_, table) = calibrate_with(quick, &saturating, &[], &dir.path().join("a.csv"));
    assert_eq!(count(&table, "saturating.toml", "saturation", "replicates"), 2);
    assert_eq!(count(&table, "saturating.toml", "group_size_rise", "replicates"), 2);
    // A curve still rising past N = 4 is like the paper's steadily rising models: not the claim's subject.
    let (_, table) = calibrate_with(quick, &rising, &[], &dir.path().join("b.csv"));
    assert_eq!(count(&table, "rising.toml", "saturation", "not in this run"), 2);
    // The CSV says which model id the answers were stored under.
    let csv = std::fs::read_to_string(dir.path().join("b.csv")).unwrap();
    assert!(csv.starts_with("agent,claim,study,verdict,count,replications,rate,ci_low,ci_high,seconds,model\n"));
    assert!(csv.lines().skip(1).all(|l| l.ends_with(",sim")), "{csv}");
}

#[test]
fn an_empty_model_id_is_refused() {
    for model in ["", " ", " sim"] {
        let output = Command::new(env!("CARGO_BIN_EXE_herd"))
            .current_dir(root())
            .args(["calibrate", "--experiment", "data/experiments/conformity.quick.toml", "--model", model])
            .output()
            .unwrap();
        assert!(!output.status.success(), "--model {model:?} was taken");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--model") && stderr.contains("model id"), "{stderr}");
    }
}
