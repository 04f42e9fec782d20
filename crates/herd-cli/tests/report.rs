//! `herd report` as a user runs it: on result folders made elsewhere (only the copied folder is there),
//! on a single run folder, and on folders that are missing or empty.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn herd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd")).args(args).current_dir(root()).output().unwrap()
}

fn sim_run(experiment: &str, out: &Path) {
    let output =
        herd(&["run", "--experiment", experiment, "--backend", "sim", "--out", out.to_str().unwrap(), "--quiet"]);
    assert!(output.status.success(), "herd run failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != ".lock" {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn files(dir: &Path, extension: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(extension))
        .collect();
    names.sort();
    names
}

#[test]
fn report_works_on_a_result_folder_copied_from_another_machine() {
    let machine_a = tempfile::tempdir().unwrap();
    sim_run("data/experiments/conformity.quick.toml", &machine_a.path().join("out/runs/conformity"));
    sim_run("data/experiments/minimal-group.quick.toml", &machine_a.path().join("out/runs/minimal-group"));

    // Only the result folder travels; the original is gone.
    let machine_b = tempfile::tempdir().unwrap();
    let copy = machine_b.path().join("results");
    copy_tree(&machine_a.path().join("out"), &copy);
    drop(machine_a);

    let out = machine_b.path().join("report");
    let output = herd(&["report", "--results", copy.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "herd report failed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(&format!("report: {}", out.join("report.html").display())), "{stdout}");
    // It ends with the verdicts: the claims block, closed by one count per study.
    let claims = &stdout[stdout.find("\nclaims (the papers' claims these results test").expect(&stdout)..];
    let last: Vec<&str> = claims.trim_end().lines().rev().take(2).collect();
    assert!(last[1].starts_with("  Conformity: ") && last[0].starts_with("  Minimal groups: "), "{claims}");
    assert!(last.iter().all(|l| l.contains(" claims replicate")), "{claims}");
    assert!(claims.contains("  Minimal groups · in-group favouritism, visible labels: "), "{claims}");

    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let pngs = files(&out.join("figures"), ".png");
    let svgs = files(&out.join("figures"), ".svg");
    assert!(pngs.len() >= 10, "{pngs:?}");
    assert_eq!(
        pngs.iter().map(|p| p.trim_end_matches(".png")).collect::<Vec<_>>(),
        svgs.iter().map(|s| s.trim_end_matches(".svg")).collect::<Vec<_>>()
    );
    for png in &pngs {
        assert!(html.contains(&format!("src=\"figures/{png}\"")), "{png} is not on the page");
        assert!(md.contains(&format!("(figures/{png})")), "{png} is not in the Markdown");
        let image = image::open(out.join("figures").join(png)).unwrap();
        assert_eq!((image.width(), image.height()), (1000, 600), "{png}");
    }
    for study in ["Conformity (Asch paradigm)", "Minimal groups (allocation)"] {
        assert!(html.contains(study) && md.contains(study), "{study} missing");
    }
    // Manifest and QC sections come from the copied manifest.json and Parquet.
    assert!(html.contains("conformity-quick") && html.contains("minimal-group-quick"));
    assert!(md.contains("allocation_quality") && md.contains("conformity_quality"));
    assert!(md.contains("This run against the papers"));
    // The quick profile has one minority size and no swap pass: figures it cannot show are named, not faked.
    assert!(
        stdout.contains("not drawn: favouritism_across_swap_pass_and_paraphrase")
            || pngs.contains(&"favouritism_across_swap_pass_and_paraphrase.png".to_owned())
    );

    // The samples page beside it: every prompt re-rendered from the copied manifests matches its stored
    // hash, and each scorecard row links into it.
    assert!(stdout.contains(&format!("samples: {}", out.join("samples.html").display())), "{stdout}");
    assert!(
        !stdout.contains("differ from their stored hash") && !stdout.contains("could not be re-rendered"),
        "{stdout}"
    );
    let samples = std::fs::read_to_string(out.join("samples.html")).unwrap();
    assert!(samples.contains("You are agent_") && samples.contains("Which of the lines, A or B"));
    let card = &html[html.find("<section id=\"scorecard\">").unwrap()..html.find("</section>").unwrap()];
    let rows = card.matches("<tr><td>").count();
    assert!(rows > 0 && rows == card.matches("href=\"samples.html#study=").count(), "{card}");
    // report.md links the same samples from each claim.
    let md_card = md_scorecard(&out);
    assert_eq!(md_card.matches("([samples](samples.html#study=").count(), rows, "{md_card}");
    assert!(
        md_card.contains(
            "[conformity rises with group size N](#headline-group_size_rise) ([samples](samples.html#study=conformity&family=group_size))"
        ),
        "the claim links its detail row and its samples, unescaped: {md_card}"
    );

    // Without a samples page, no link points to one.
    let bare = machine_b.path().join("bare");
    let output = herd(&[
        "report",
        "--results",
        copy.to_str().unwrap(),
        "--out",
        bare.to_str().unwrap(),
        "--samples-per-condition",
        "0",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!bare.join("samples.html").exists());
    assert!(!std::fs::read_to_string(bare.join("report.html")).unwrap().contains("samples.html"));
    assert!(!std::fs::read_to_string(bare.join("report.md")).unwrap().contains("samples.html"));
}

/// report.md's scorecard section: from its heading to the detail table's.
fn md_scorecard(out: &std::path::Path) -> String {
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let start = md.find("## Scorecard").expect("report.md has a scorecard");
    let end = md.find("## This run against the papers").unwrap();
    md[start..end].to_owned()
}

#[test]
fn report_on_a_single_run_folder_names_the_absent_study() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("mg");
    sim_run("data/experiments/minimal-group.quick.toml", &run);
    let out = dir.path().join("report");
    let output = herd(&["report", "--results", run.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no conformity results"));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Not in these results: conformity."));
    assert!(html.contains("not in this run"));
    // The scorecard opens with the study the run has; the conformity claims share one line after it.
    let card = &html[html.find("<section id=\"scorecard\">").unwrap()..html.find("</section>").unwrap()];
    let (own, absent) = (card.find("<h3>Minimal groups</h3>").unwrap(), card.find("<h3>Conformity</h3>").unwrap());
    assert!(own < absent, "{card}");
    assert_eq!(card[absent..].matches("Not in this run:").count(), 1, "{card}");
    assert!(card[absent..].contains(" · same-group sources raise conformity · "), "{card}");
    assert!(card[absent..].contains("the results hold no conformity run"), "{card}");
    assert!(!card[absent..].contains("<tr>"), "no conformity rows: {card}");
    let md_card = &md_scorecard(&out);
    assert!(md_card.find("### Minimal groups").unwrap() < md_card.find("### Conformity").unwrap(), "{md_card}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("warning:"));

    // A manifest whose experiment no longer matches the stored prompts (another master seed: other
    // societies): the samples page marks them and the command says so.
    let manifest_path = run.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let seed = manifest["parameters"]["experiment"]["seed"].as_u64().unwrap();
    manifest["parameters"]["experiment"]["seed"] = (seed + 1).into();
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let output = herd(&["report", "--results", run.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("re-rendered prompts differ from their stored hash (marked on the page)"), "{stdout}");
    assert!(std::fs::read_to_string(out.join("samples.html")).unwrap().contains("do not match</strong>"));
}

#[test]
fn missing_and_empty_result_folders_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let out = dir.path().join("report");
    let output = herd(&["report", "--results", missing.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains(&format!("{}: no such folder", missing.display())), "{stderr}");
    assert!(stderr.contains("fix: pass a run folder"), "{stderr}");

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let output = herd(&["report", "--results", empty.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("the folder is empty"), "{stderr}");
    assert!(!out.exists(), "nothing is written on failure");
}

/// A deterministic value in [−1, 1] from integers (as herd-report's tests draw their noise).
fn noise(parts: &[i64]) -> f64 {
    let mut h: u64 = 1_469_598_103_934_665_603;
    for &p in parts {
        h ^= p as u64;
        h = h.wrapping_mul(1_099_511_628_211);
        h ^= h >> 29;
    }
    (h % 2001) as f64 / 1000.0 - 1.0
}

/// Issue 26's table: societies of 10, m = 3, 4, 5, models `a` and `b` × base and paraphrase × two
/// swap passes × both label arms, 8 seeds. Model a's base m = 3 visible cell barely favours (below
/// the paper's 0.84) while its other cells favour strongly; model b's paraphrase hidden cells favour
/// (a floor violation) while every base hidden cell is symmetric noise.
fn issue_26_dyads(path: &Path) {
    use std::fmt::Write as _;
    let mut csv = String::from(
        "model,instrument,swap_pass,labels,m,seed,decider,target,minority_decider,minority_target,same_group,points\n",
    );
    let symmetric = [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0];
    for (mi, model) in ["a", "b"].into_iter().enumerate() {
        for (ii, instrument) in ["base", "paraphrase"].into_iter().enumerate() {
            for (pi, pass) in ["original", "swapped"].into_iter().enumerate() {
                for labels in ["visible", "hidden"] {
                    for m in [3_i64, 4, 5] {
                        for seed in 0..8_i64 {
                            let jitter = 1.0 + 0.1 * noise(&[mi as i64, ii as i64, pi as i64, m, seed]);
                            let bias = match (labels, model, instrument, m) {
                                ("visible", "a", "base", 3) => 0.05 * jitter,
                                ("visible", "a", _, _) => 0.8 * jitter,
                                ("visible", _, _, _) => 0.5 * jitter,
                                ("hidden", "b", "paraphrase", _) => 0.1 * jitter,
                                _ => 0.004 * symmetric[seed as usize],
                            };
                            let minority = |agent: i64| (agent * 7 + seed * 3) % 10 < m;
                            for decider in 0..10_i64 {
                                let targets: Vec<i64> = (0..10).filter(|&t| t != decider).collect();
                                let weight = |t: i64| 1.0 + if minority(t) == minority(decider) { bias } else { 0.0 };
                                let total: f64 = targets.iter().map(|&t| weight(t)).sum();
                                for &target in &targets {
                                    writeln!(
                                        csv,
                                        "{model},{instrument},{pass},{labels},{m},{seed},{decider},{target},{},{},{},{}",
                                        u8::from(minority(decider)),
                                        u8::from(minority(target)),
                                        u8::from(minority(target) == minority(decider)),
                                        100.0 * weight(target) / total
                                    )
                                    .unwrap();
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    std::fs::write(path, csv).unwrap();
}

/// The headline row of `report.md` whose paper column starts with `paper`.
fn headline_line<'a>(md: &'a str, paper: &str) -> &'a str {
    md.lines().find(|l| l.starts_with("| minimal group |") && l.contains(paper)).unwrap_or_else(|| panic!("{paper}"))
}

#[test]
fn report_on_a_dyads_table_judges_per_model_claims_on_the_base_instrument() {
    // Issue 26, "Done when": model a's m = 3 cell below 0.84 with its own estimate well above it, and
    // model b's paraphrase floor violation beside its clean base floor.
    let dir = tempfile::tempdir().unwrap();
    let tables = dir.path().join("tables");
    std::fs::create_dir_all(&tables).unwrap();
    issue_26_dyads(&tables.join("allocation_dyads.csv"));
    let out = dir.path().join("report");
    let output = herd(&["report", "--results", tables.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "herd report failed: {}", String::from_utf8_lossy(&output.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();

    let visible = headline_line(&md, "0.84–4.06 points/target across the four models");
    assert!(visible.contains("| **replicates**: all 2 rows replicate"), "{visible}");
    assert!(visible.contains("a: +") && visible.contains(" points/target; GEE same_group +"), "{visible}");
    assert!(visible.contains("24 societies"), "{visible}");
    let floor = headline_line(&md, "within ±0.03 points/target of zero");
    assert!(floor.contains("| **replicates**: "), "{floor}");
    assert!(!floor.contains("paraphrase ·"), "the headline floor is on the base cells: {floor}");
    // The paraphrase violation is its own row, and names model b.
    let paraphrase = headline_line(&md, "three models kept paraphrase hidden-condition favouritism");
    assert!(
        paraphrase.contains("| **replicates**: b · paraphrase: the base floor holds and the paraphrase breaks it"),
        "{paraphrase}"
    );
}
