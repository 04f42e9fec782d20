//! A run without variation (issue 42, item 2): a deterministic sim agent (no noise) and a flat one (no
//! effect, no noise) on both studies' quick experiment files. The whole pipeline — `herd run` and its
//! quick look, `herd analyze`, `herd report` — succeeds, the analysis tables carry the undefined rows with
//! null statistics and the reason in `note`, and the verdicts read "inconclusive: every value equal".

use std::path::{Path, PathBuf};
use std::process::Output;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn herd(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_herd")).args(args).current_dir(root()).output().unwrap()
}

fn succeeded(what: &str, output: &Output) -> String {
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    assert!(!stdout.contains("is constant") && !stderr.contains("is constant"), "{what}:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

/// No noise anywhere; the paper's effects as the agent's defaults (every trial index alike).
const DETERMINISTIC: &str = "[conformity]\nnoise = 0.0\n[allocation]\nnoise = 0.0\n";
/// No effect and no noise: every level, group size and label condition alike.
const FLAT: &str = "[conformity]\nper_log_wrong = 0.0\nper_log_right = 0.0\ndifficulty = 0.0\nnoise = 0.0\n\
                    [conformity.level_shift]\n[allocation]\ningroup = 0.0\nnoise = 0.0\n";

const EVERY_VALUE_EQUAL: &str = "inconclusive: every value equal";

/// The rows of a CSV table as maps from column to cell (a naive split: these tables quote nothing the
/// checks read).
fn csv_rows(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| header.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_owned)).collect()).collect()
}

/// Runs, analyses and reports one study on one agent; returns the quick look, the analysis folder and
/// report.md.
fn pipeline(dir: &Path, agent: &str, sim: &str, study: &str) -> (String, PathBuf, String) {
    pipeline_of(dir, agent, sim, study, &format!("data/experiments/{study}.quick.toml"))
}

fn pipeline_of(dir: &Path, agent: &str, sim: &str, study: &str, experiment: &str) -> (String, PathBuf, String) {
    let sim_file = dir.join(format!("{agent}.toml"));
    std::fs::write(&sim_file, sim).unwrap();
    let [run, analysis, report] =
        [format!("{agent}-{study}"), format!("{agent}-{study}-analysis"), format!("{agent}-{study}-report")]
            .map(|name| dir.join(name));
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let stdout = succeeded(
        &format!("herd run ({agent}, {study})"),
        &herd(&["run", "--experiment", experiment, "--backend", "sim", "--sim", &s(&sim_file), "--out", &s(&run)]),
    );
    assert!(!stdout.contains("quick look: not available"), "{agent} {study}: {stdout}");
    assert!(stdout.contains("quick look (the papers' claims"), "{agent} {study}: {stdout}");

    let (command, flag) = if study == "conformity" { ("conformity", "--trials") } else { ("minimal-group", "--dyads") };
    succeeded(
        &format!("herd analyze {command} ({agent})"),
        &herd(&["analyze", command, flag, &s(&run), "--out", &s(&analysis)]),
    );
    let output = herd(&["report", "--results", &s(&run), "--out", &s(&report)]);
    succeeded(&format!("herd report ({agent}, {study})"), &output);
    let markdown = std::fs::read_to_string(report.join("report.md")).unwrap();
    (stdout, analysis, markdown)
}

/// Every `note` of `table` is empty or a stated reason, and the rows with a reason have null statistics.
fn undefined_rows(analysis: &Path, table: &str, statistics: &[&str]) -> usize {
    let rows = csv_rows(&analysis.join(format!("{table}.csv")));
    let mut undefined = 0;
    for row in &rows {
        let note = row.get("note").unwrap_or_else(|| panic!("{table}: no note column"));
        match note.as_str() {
            "" => {}
            "every value equal" | "too few units" => {
                undefined += 1;
                for column in statistics {
                    assert_eq!(row[*column], "", "{table}: {column} of an undefined row is not null: {row:?}");
                }
            }
            other => panic!("{table}: unexpected note {other:?}"),
        }
    }
    for row in &rows {
        for value in row.values() {
            assert!(!value.eq_ignore_ascii_case("nan"), "{table}: NaN in {row:?}");
        }
    }
    undefined
}

#[test]
fn a_flat_agent_is_inconclusive_with_every_value_equal_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (quick, analysis, report) = pipeline(dir.path(), "flat", FLAT, "conformity");
    // Every conformity claim the run tests rests on identical values.
    let lines: Vec<&str> = quick.lines().filter(|l| l.starts_with("  Conformity · ")).collect();
    assert!(lines.len() >= 5, "{quick}");
    for line in &lines {
        assert!(line.ends_with(EVERY_VALUE_EQUAL), "{line}");
    }
    assert!(report.contains(&format!("**{EVERY_VALUE_EQUAL}**")), "{report}");
    let html = std::fs::read_to_string(dir.path().join("flat-conformity-report/report.html")).unwrap();
    assert!(html.contains(EVERY_VALUE_EQUAL), "report.html");
    assert!(undefined_rows(&analysis, "deltas", &["t", "df", "t_p", "z", "z_p"]) > 0);
    assert!(undefined_rows(&analysis, "difficulty_spearman", &["rho", "p"]) > 0);
    let deltas = csv_rows(&analysis.join("deltas.csv"));
    assert!(deltas.iter().all(|r| r["note"] == "every value equal" && r["delta"] == "0.0" && r["se"] == "0.0"));

    let (quick, analysis, report) = pipeline(dir.path(), "flat", FLAT, "minimal-group");
    assert!(
        quick.contains(&format!(
            "all-zero to the out-group: no variation: every seed +0.000, 8 seeds (sim · m = 5) — {EVERY_VALUE_EQUAL}"
        )),
        "{quick}"
    );
    assert!(report.contains(EVERY_VALUE_EQUAL), "{report}");
    undefined_rows(&analysis, "seed_tests", &["wilcoxon_statistic", "wilcoxon_p", "rank_biserial"]);
}

#[test]
fn a_deterministic_agent_is_inconclusive_where_its_values_are_all_equal() {
    let dir = tempfile::tempdir().unwrap();
    let (quick, analysis, report) = pipeline(dir.path(), "deterministic", DETERMINISTIC, "conformity");
    // The effects are there (every trial index alike, so the signed-rank tests still decide); the
    // comparisons of samples with no variance at all do not, whatever rounding noise gives them.
    for claim in ["the three tasks' curves alike", "temporal proximity comparable to spatial"] {
        let line = quick.lines().find(|l| l.contains(claim)).unwrap_or_else(|| panic!("{claim}: {quick}"));
        assert!(line.ends_with(EVERY_VALUE_EQUAL), "{line}");
    }
    assert!(quick.contains("conformity rises with group size N"), "{quick}");
    assert!(report.contains(&format!("**{EVERY_VALUE_EQUAL}**")), "{report}");
    undefined_rows(&analysis, "deltas", &["t", "df", "t_p", "z", "z_p"]);

    let (quick, analysis, report) = pipeline(dir.path(), "deterministic", DETERMINISTIC, "minimal-group");
    assert!(quick.contains(&format!("— {EVERY_VALUE_EQUAL}")), "{quick}");
    assert!(report.contains(EVERY_VALUE_EQUAL), "{report}");
    undefined_rows(&analysis, "seed_tests", &["wilcoxon_statistic", "wilcoxon_p", "rank_biserial"]);
}

#[test]
fn one_society_per_arm_is_inconclusive_with_too_few_units() {
    let dir = tempfile::tempdir().unwrap();
    let quick = std::fs::read_to_string(root().join("data/experiments/minimal-group.quick.toml")).unwrap();
    assert!(quick.contains("\nseeds = 8 "), "the quick file's seeds line moved");
    let experiment = dir.path().join("one-seed.toml");
    std::fs::write(&experiment, quick.replace("\nseeds = 8 ", "\nseeds = 1 ")).unwrap();
    let (quick, analysis, report) =
        pipeline_of(dir.path(), "flat", FLAT, "minimal-group", experiment.to_str().unwrap());
    let favouritism = quick.lines().find(|l| l.contains("in-group favouritism, visible labels")).unwrap();
    assert!(favouritism.ends_with("1 society (sim) — inconclusive: too few units"), "{favouritism}");
    assert!(report.contains("**inconclusive: too few units**"), "{report}");
    undefined_rows(&analysis, "seed_tests", &["wilcoxon_statistic", "wilcoxon_p", "rank_biserial"]);
}
