//! docs/variants.md, run as a user follows it: its experiment files (the fenced `toml FILE` blocks) are
//! copied into a fresh folder outside herd's `data/`, every `herd` line of its `sh` blocks runs there in
//! order with the sim backend, and the outputs are checked. The page cannot drift from what herd does.

use herd_analysis::{Verdict, compare_headlines, load_results};
use herd_store::read_run_manifest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The page's files (name → text) and its `herd` command lines, in order.
fn walkthrough() -> (BTreeMap<String, String>, Vec<String>) {
    let page = std::fs::read_to_string(root().join("docs/variants.md")).unwrap();
    let (mut files, mut commands) = (BTreeMap::new(), Vec::new());
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else { continue };
        let block: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
        match info.split_whitespace().collect::<Vec<_>>()[..] {
            ["toml", name] => {
                assert!(files.insert(name.to_owned(), block.join("\n") + "\n").is_none(), "{name} twice");
            }
            ["sh"] => commands.extend(block.iter().filter(|l| l.starts_with("herd ")).map(|l| l.to_string())),
            _ => {}
        }
    }
    (files, commands)
}

/// Runs one command line of the page in `dir`; its stdout.
fn run_line(dir: &Path, line: &str) -> String {
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let output = Command::new(env!("CARGO_BIN_EXE_herd")).args(&args).current_dir(dir).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "`{line}` failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

/// `herd expand`'s unit count of one family.
fn family_units(expand: &str, family: &str) -> u64 {
    let line =
        expand.lines().find(|l| l.split_whitespace().next() == Some(family)).unwrap_or_else(|| panic!("{expand}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    words[words.len() - 2].parse().unwrap()
}

fn headline<'a>(
    comparisons: &'a [herd_analysis::HeadlineComparison],
    id: &str,
) -> &'a herd_analysis::HeadlineComparison {
    comparisons.iter().find(|c| c.headline.id == id).unwrap_or_else(|| panic!("no headline {id}"))
}

#[test]
fn the_variants_walkthrough_runs_from_copied_files_and_reports_the_new_role() {
    let (files, commands) = walkthrough();
    assert_eq!(
        files.keys().map(String::as_str).collect::<Vec<_>>(),
        ["small-society.toml", "surgeons-sim.toml", "surgeons.toml", "wozzle-names.toml"]
    );
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().canonicalize().unwrap();
    assert!(!dir.starts_with(root().canonicalize().unwrap()), "the copies must sit outside the repository");
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let mut outputs: Vec<(String, String)> = Vec::new();
    for line in &commands {
        let stdout = run_line(&dir, line);
        // What the trial run left: marked limited, never read as complete.
        if line.contains("--limit 10") {
            let manifest = read_run_manifest(&dir.join("runs/surgeons")).unwrap();
            assert!(manifest.notes.contains_key("limited"), "{:?}", manifest.notes);
            assert!(manifest.sessions.last().unwrap().status.starts_with("incomplete"), "{stdout}");
            assert!(stdout.contains("units left by --limit") && stdout.contains("without --limit"), "{stdout}");
        }
        outputs.push((line.clone(), stdout));
    }
    let output = |prefix: &str| {
        outputs
            .iter()
            .find(|(l, _)| l.starts_with(prefix))
            .map(|(_, o)| o.as_str())
            .unwrap_or_else(|| panic!("{prefix}"))
    };

    // Conformity: the grid herd expand printed, the prompts, the completed run and the headline row.
    let expand = output("herd expand --experiment surgeons.toml");
    assert_eq!((family_units(expand, "group_size"), family_units(expand, "source_strength")), (56, 168), "{expand}");
    assert!(expand.contains("prompts: 224 built"), "{expand}");
    assert!(!expand.contains("without a class"), "surgeons are classed: {expand}");
    assert!(output("herd prompts --experiment surgeons.toml").contains("surgeons"));
    let manifest = read_run_manifest(&dir.join("runs/surgeons")).unwrap();
    assert_eq!((manifest.units_total, manifest.experiment_units_stored), (224, 224));
    assert!(!manifest.notes.contains_key("limited"), "the full rerun completes the run: {:?}", manifest.notes);
    assert_eq!(manifest.sessions.last().unwrap().status, "complete");
    let bank = manifest.files.iter().find(|f| f.role == "prompts.bank").unwrap();
    assert_eq!(Path::new(&bank.path), root().join("data/banks/conformity-prompts.toml").canonicalize().unwrap());
    let run =
        output("herd run --experiment surgeons.toml --backend sim --sim surgeons-sim.toml --out runs/surgeons --quiet");
    assert!(run.contains("next: herd report --results runs/surgeons"), "{run}");
    // The closing summary's quick look: the scorecard's lines, the new role's claim among them.
    let look: Vec<&str> = run.lines().skip_while(|l| !l.starts_with("quick look")).skip(1).collect();
    let source_line = look.iter().find(|l| l.contains("Conformity ·") && l.contains("authorities"));
    assert!(source_line.is_some_and(|l| l.contains(" — ")), "a verdict after the number: {run}");
    assert!(dir.join("tables/surgeons/auc.csv").is_file());
    assert!(std::fs::read_to_string(dir.join("reports/surgeons/report.html")).unwrap().contains("surgeons"));
    let results = load_results(&dir.join("runs/surgeons"), &mut |_| {}).unwrap();
    let comparisons = compare_headlines(&results).unwrap();
    let source = headline(&comparisons, "source_strength");
    assert_ne!(source.verdict, Verdict::NotInRun, "{source:?}");
    assert!(source.this_run.contains("surgeons") && source.this_run.contains("kids"), "{}", source.this_run);
    // The planted +0.8 for surgeons is found: authorities above the participants, and the example is
    // sized to decide it.
    assert!(source.this_run.contains("authorities"), "{}", source.this_run);
    assert_eq!(source.verdict, Verdict::Replicates, "{source:?}");

    // Minimal groups: 2 label arms × 8 societies of 12, under the file's own names.
    let expand = output("herd expand --experiment small-society.toml");
    assert_eq!(family_units(expand, "allocation"), 16, "{expand}");
    assert!(expand.contains("prompts: 192 built"), "16 societies × 12 deciders: {expand}");
    let prompt = output("herd prompts --experiment small-society.toml");
    assert!(prompt.contains("Wozzle") || prompt.contains("Tirven"), "{prompt}");
    let manifest = read_run_manifest(&dir.join("runs/small-society")).unwrap();
    assert_eq!((manifest.units_total, manifest.experiment_units_stored), (16, 16));
    let names = manifest.files.iter().find(|f| f.role == "society.group_names").unwrap();
    assert_eq!(Path::new(&names.path), dir.join("wozzle-names.toml"), "the bank beside the file");
    assert!(dir.join("tables/small-society").read_dir().unwrap().next().is_some());
    assert!(dir.join("reports/small-society/report.html").is_file());
    let results = load_results(&dir.join("runs/small-society"), &mut |_| {}).unwrap();
    let comparisons = compare_headlines(&results).unwrap();
    for id in ["favouritism_visible", "hidden_floor", "minority_gap"] {
        let h = headline(&comparisons, id);
        assert_ne!(h.verdict, Verdict::NotInRun, "{id}: {h:?}");
    }
}

#[test]
fn an_unfound_bank_lists_every_place_expand_rejects_what_prompts_would_and_misspellings_get_a_guess() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().canonicalize().unwrap();
    let (files, _) = walkthrough();
    let herd = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_herd")).args(args).current_dir(&dir).output().unwrap();
    std::fs::write(dir.join("surgeons.toml"), files["surgeons.toml"].replace("../banks/conformity-prompts", "no-bank"))
        .unwrap();
    let out = herd(&["expand", "--experiment", "surgeons.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let data = root().join("data").canonicalize().unwrap();
    for place in [dir.join("no-bank.toml"), data.join("experiments/no-bank.toml"), data.join("no-bank.toml")] {
        assert!(stderr.contains(&place.display().to_string()), "{}: {stderr}", place.display());
    }
    // A pair of one name twice: herd prompts rejects it, and so does herd expand, the validator.
    std::fs::write(dir.join("small-society.toml"), &files["small-society.toml"]).unwrap();
    std::fs::write(dir.join("wozzle-names.toml"), "pairs = [[\"Wozzle\", \"Wozzle\"]]\n").unwrap();
    for command in ["expand", "prompts"] {
        let out = herd(&[command, "--experiment", "small-society.toml"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(stderr.contains("does not name two different groups"), "{command}: {stderr}");
    }
    // The names written inline: the fix says where they go, not "a list in [ ]" again.
    let inline = files["small-society.toml"]
        .replace("group_names = \"wozzle-names.toml\"", "group_names = [[\"Wozzle\", \"Tirven\"]]");
    std::fs::write(dir.join("inline.toml"), inline).unwrap();
    let stderr = String::from_utf8_lossy(&herd(&["expand", "--experiment", "inline.toml"]).stderr).into_owned();
    assert!(stderr.contains("society.group_names") && stderr.contains("path of a bank file"), "{stderr}");
    assert!(!stderr.contains("a list in [ ]"), "{stderr}");
    // A role without a class runs, with a note; a misspelt class is an error with the closest value.
    let unclassed = files["surgeons.toml"].replace("classes = { surgeons = \"authority\" }", "");
    std::fs::write(dir.join("unclassed.toml"), unclassed).unwrap();
    let out = herd(&["expand", "--experiment", "unclassed.toml"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("source roles without a class (surgeons)"), "{stdout}");
    let misspelt = files["surgeons.toml"].replace("surgeons = \"authority\"", "surgeons = \"authorty\"");
    std::fs::write(dir.join("misspelt.toml"), misspelt).unwrap();
    let stderr = String::from_utf8_lossy(&herd(&["expand", "--experiment", "misspelt.toml"]).stderr).into_owned();
    assert!(stderr.contains("did you mean `authority`?"), "{stderr}");
    // A misspelt model alias: the registry's list, then the closest alias.
    std::fs::write(dir.join("ok.toml"), &files["surgeons.toml"]).unwrap();
    let out = herd(&["run", "--experiment", "ok.toml", "--model", "smollm2-135n", "--out", "runs/x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("use one of:") && stderr.contains("did you mean `smollm2-135m`?"), "{stderr}");
    let family = files["surgeons.toml"].replace("[families.group_size]", "[families.group_sise]");
    std::fs::write(dir.join("family.toml"), family).unwrap();
    let stderr = String::from_utf8_lossy(&herd(&["expand", "--experiment", "family.toml"]).stderr).into_owned();
    assert!(stderr.contains("did you mean `group_size`?"), "{stderr}");
}
