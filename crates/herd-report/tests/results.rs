//! Finding result folders: the layouts accepted, and a clear error naming the path and the fix for each
//! way a folder can be wrong.

mod common;

use common::{Variant, stored_results};
use herd_analysis::{find_run_folders, load_results};
use herd_test_support::stored_table;

fn error_of(dir: &std::path::Path) -> String {
    load_results(dir, &mut |_| {}).expect_err("the folder is refused").to_string()
}

#[test]
fn replicate_layout_single_run_and_parent_folders_are_found() {
    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    let runs = find_run_folders(&out).unwrap();
    assert_eq!(runs, vec![out.join("runs/conformity"), out.join("runs/minimal-group")]);
    assert_eq!(find_run_folders(&out.join("runs")).unwrap(), runs, "a folder of run folders");
    assert_eq!(find_run_folders(&out.join("runs/conformity")).unwrap(), vec![out.join("runs/conformity")]);

    let only_conformity = load_results(&out.join("runs/conformity"), &mut |_| {}).unwrap();
    assert!(only_conformity.conformity.is_some());
    assert!(only_conformity.minimal_group.is_none(), "an absent study is absent, not an error");
}

#[test]
fn bad_folders_are_named_with_a_fix() {
    let work = tempfile::tempdir().unwrap();
    let missing = work.path().join("missing");
    let message = error_of(&missing);
    assert!(message.starts_with(&format!("{}: no such folder", missing.display())), "{message}");
    assert!(message.contains("fix: pass a run folder"), "{message}");

    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(error_of(&empty).contains("the folder is empty"));

    let file = work.path().join("file.parquet");
    std::fs::write(&file, b"PAR1").unwrap();
    assert!(error_of(&file).contains("is a file, but not a trial table herd reports on"));
    let truncated = work.path().join("conformity_trials.parquet");
    std::fs::write(&truncated, b"PAR1").unwrap();
    let message = error_of(&truncated);
    assert!(message.contains("conformity_trials.parquet"), "a broken plain table is named: {message}");

    let unrelated = work.path().join("unrelated");
    std::fs::create_dir_all(unrelated.join("something")).unwrap();
    assert!(error_of(&unrelated).contains("no run folder here"));

    let out = stored_results(&work.path().join("newer"), Variant::Planted);
    let manifest = out.join("runs/conformity/manifest.json");
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    value["store_format"] = serde_json::json!(99);
    std::fs::write(&manifest, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let message = error_of(&out);
    assert!(message.contains("runs/conformity") && message.contains("upgrade herd"), "{message}");
}

/// Sets `parameters.analysis.measure` in a run folder's manifest.
fn set_measure(run: &std::path::Path, measure: &str) {
    let path = run.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["parameters"] = serde_json::json!({ "analysis": { "measure": measure } });
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn the_experiment_files_measure_leads_and_runs_that_disagree_are_refused() {
    use herd_analysis::PWrong;
    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    let conformity = out.join("runs/conformity");
    let lead = |dir: &std::path::Path| load_results(dir, &mut |_| {}).unwrap().conformity.unwrap().measure;
    assert_eq!(lead(&conformity), PWrong::Full, "a manifest without analysis.measure reads as the default");
    set_measure(&conformity, "p_wrong_ab");
    assert_eq!(lead(&conformity), PWrong::Ab);

    let second = out.join("runs/conformity-second");
    copy_dir(&conformity, &second);
    // Another model's run (a copy under the same identity would be refused as the same run twice).
    let path = second.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["identity"]["model"] = serde_json::json!("model-second");
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    set_measure(&second, "p_wrong_full");
    let message = error_of(&out);
    assert!(message.contains("analysis.measure is p_wrong_full") && message.contains("p_wrong_ab"), "{message}");
    assert!(message.contains("fix: report runs with different lead measures separately"), "{message}");

    set_measure(&second, "p_wrong");
    let message = error_of(&out);
    assert!(message.contains("manifest.json") && message.contains("\"p_wrong\""), "{message}");
}

#[test]
fn plain_tables_written_by_polars_are_reported_with_what_is_unknown() {
    use polars::prelude::*;
    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    let plain = work.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    // A user's filtered copy: model-a's trials only, as Parquet; the allocations as CSV.
    let trials = stored_table::frame(
        herd_store::read_table(&[out.join("runs/conformity")], herd_store::Table::ConformityTrials).unwrap().unwrap(),
    );
    let mut model_a = trials.filter(&trials.column("model").unwrap().str().unwrap().equal("model-a")).unwrap();
    assert!(model_a.height() > 0 && model_a.height() < trials.height());
    ParquetWriter::new(std::fs::File::create(plain.join("conformity_trials.parquet")).unwrap())
        .finish(&mut model_a)
        .unwrap();
    let mut dyads = stored_table::frame(
        herd_store::read_table(&[out.join("runs/minimal-group")], herd_store::Table::AllocationDyads).unwrap().unwrap(),
    );
    CsvWriter::new(std::fs::File::create(plain.join("allocation_dyads.csv")).unwrap()).finish(&mut dyads).unwrap();

    let results = load_results(&plain, &mut |_| {}).unwrap();
    let c = results.conformity.as_ref().expect("the conformity table is read");
    assert!(c.runs.is_empty() && c.trials.rows.iter().all(|t| t.model == "model-a"));
    assert!(results.minimal_group.is_some(), "the CSV allocations are read");
    assert_eq!(results.plain_tables.len(), 2);
    let report = herd_report::write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let md = std::fs::read_to_string(&report.markdown).unwrap();
    assert!(
        md.contains("Plain tables without a run manifest") && md.contains("cannot say which model file"),
        "the report says what it cannot know"
    );

    // One file on its own, named by its table.
    let single = load_results(&plain.join("conformity_trials.parquet"), &mut |_| {}).unwrap();
    assert!(single.conformity.is_some() && single.minimal_group.is_none());
    // Another file is refused with the fix.
    std::fs::write(plain.join("notes.csv"), "a,b\n1,2\n").unwrap();
    let message = error_of(&plain.join("notes.csv"));
    assert!(
        message.contains("not a trial table herd reports on") && message.contains("conformity_trials.parquet"),
        "{message}"
    );
}

/// Sets the manifest's compute path as `herd run` records it.
fn set_compute(run: &std::path::Path, isa: &str) {
    let path = run.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["compute"] = serde_json::json!({"device": "cpu", "isa": isa, "weights": "int8", "weights_from": "gguf",
        "activations": "int8 per block of 32", "dtype": "f32", "herd_version": "0.1.0"});
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
}

#[test]
fn runs_computed_differently_are_named_in_the_report() {
    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    set_compute(&out.join("runs/conformity"), "avx512-vnni");
    set_compute(&out.join("runs/minimal-group"), "avx512-vnni");
    let report = |name: &str| {
        let results = load_results(&out, &mut |_| {}).unwrap();
        let written = herd_report::write_report(&results, &work.path().join(name), &mut |_| {}).unwrap();
        (std::fs::read_to_string(written.markdown).unwrap(), std::fs::read_to_string(written.html).unwrap())
    };
    let (md, _) = report("same");
    assert!(md.contains("| compute path | cpu avx512-vnni · int8 weights (from gguf) · int8 per block of 32 activations · f32 · herd 0.1.0 |"), "{md}");
    assert!(!md.contains("Computed differently"), "one compute path: nothing to say");

    set_compute(&out.join("runs/minimal-group"), "avx2");
    let (md, html) = report("different");
    assert!(md.contains("**Computed differently**") && md.contains("isa: avx512-vnni → avx2"), "{md}");
    assert!(html.contains("Computed differently</strong>") && html.contains("isa: avx512-vnni → avx2"));
}

/// The run folders' analysis is computed once and kept in `OUT/analysis/<study>/`: a second report
/// reads it back (the same tables, through Parquet), and an edited table or other trials make it stale,
/// so it is computed again rather than shown.
#[test]
fn the_analysis_is_computed_once_kept_beside_the_runs_and_read_back() {
    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    let mut heard = Vec::new();
    let first = load_results(&out, &mut |s| heard.push(s.to_owned())).unwrap();
    let (c, m) = (first.conformity.as_ref().unwrap(), first.minimal_group.as_ref().unwrap());
    assert!(!c.analysis.read_back && !m.analysis.read_back, "nothing was kept yet");
    assert_eq!(c.analysis.folder, Some(out.join("analysis/conformity")));
    assert_eq!(m.analysis.folder, Some(out.join("analysis/minimal-group")));
    assert!(heard.iter().any(|h| h == "minimal-group: analysing"), "{heard:?}");
    for file in ["analysis.json", "seed_tests.parquet", "seed_tests.csv", "gee.parquet", "robustness.parquet"] {
        assert!(out.join("analysis/minimal-group").join(file).is_file(), "{file} kept");
    }

    let mut heard = Vec::new();
    let second = load_results(&out, &mut |s| heard.push(s.to_owned())).unwrap();
    let (c2, m2) = (second.conformity.as_ref().unwrap(), second.minimal_group.as_ref().unwrap());
    assert!(c2.analysis.read_back && m2.analysis.read_back);
    assert!(!heard.iter().any(|h| h.ends_with(": analysing")), "no analysis ran: {heard:?}");
    assert_eq!(c2.tables, c.tables, "the conformity tables read back are the ones computed");
    assert_eq!(m2.tables, m.tables, "the minimal-group tables read back are the ones computed");

    // A hand-edited table is never shown: the analysis is computed again, and the report says why.
    let kept = out.join("analysis/minimal-group");
    std::fs::copy(kept.join("gee.parquet"), kept.join("seed_tests.parquet")).unwrap();
    let third = load_results(&out, &mut |_| {}).unwrap();
    let m3 = third.minimal_group.as_ref().unwrap();
    assert!(!m3.analysis.read_back);
    let note = m3.analysis.note.as_deref().unwrap_or_default();
    assert!(note.contains("seed_tests.parquet changed after it was written"), "{note}");
    assert_eq!(m3.tables, m.tables);
    assert!(load_results(&out, &mut |_| {}).unwrap().minimal_group.unwrap().analysis.read_back, "and kept again");

    // Other trials (another result set in the same place) make the kept analysis stale too.
    let other = tempfile::tempdir().unwrap();
    let null = stored_results(other.path(), Variant::Shifted);
    std::fs::rename(null.join("runs/conformity"), work.path().join("null-conformity")).unwrap();
    std::fs::remove_dir_all(out.join("runs/conformity")).unwrap();
    std::fs::rename(work.path().join("null-conformity"), out.join("runs/conformity")).unwrap();
    let fourth = load_results(&out, &mut |_| {}).unwrap();
    let c4 = fourth.conformity.as_ref().unwrap();
    assert!(!c4.analysis.read_back);
    assert!(c4.analysis.note.as_deref().unwrap_or_default().contains("other trials"), "{:?}", c4.analysis.note);
    assert_ne!(c4.tables, c.tables);
}

/// What `herd analyze minimal-group` keeps (with the GEE fits bootstrapped) is what the report reads,
/// so `bootstrap_se_agreement` is judged; the report's own analysis skips that bootstrap and says how
/// to get it.
#[test]
fn bootstrap_se_agreement_is_judged_when_the_kept_analysis_bootstrapped_the_gee_fits() {
    use herd_analysis::stored::{AnalysisSettings, Study, analysis_dir, write_stored};
    use herd_analysis::study::{TrialSource, read_minimal_group};
    use herd_analysis::{BootstrapPlan, MinimalGroupOptions, Verdict, analyze_minimal_group, compare_headlines};

    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    let run = out.join("runs/minimal-group");
    let without = compare_headlines(&load_results(&run, &mut |_| {}).unwrap()).unwrap();
    let row = without.iter().find(|h| h.headline.id == "bootstrap_se_agreement").unwrap();
    assert_eq!(row.verdict, Verdict::NotInRun);
    assert!(row.basis.contains("herd analyze minimal-group --dyads"), "{}", row.basis);

    // `herd analyze minimal-group --dyads RUN`'s path, with fewer resamples for a test's time.
    let input = read_minimal_group(
        TrialSource::runs(vec![run.clone()], herd_store::Table::AllocationDyads),
        Default::default(),
    )
    .unwrap();
    let options = MinimalGroupOptions {
        pool: input.pool_or(None).unwrap(),
        bootstrap: BootstrapPlan::Seeded { resamples: 200, seed: 7 },
        gee_bootstrap: true,
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group(&input.dyads, &options).unwrap();
    let settings = AnalysisSettings::of_minimal_group(&options);
    write_stored(
        &analysis_dir(&run, Study::MinimalGroup),
        Study::MinimalGroup,
        &input.digest,
        &settings,
        &tables.all(),
    )
    .unwrap();

    let results = load_results(&run, &mut |_| {}).unwrap();
    let m = results.minimal_group.as_ref().unwrap();
    assert!(m.analysis.read_back && m.analysis.settings.gee_bootstrap);
    assert_eq!(m.analysis.settings.bootstrap, Some((200, 7)));
    let with = compare_headlines(&results).unwrap();
    let row = with.iter().find(|h| h.headline.id == "bootstrap_se_agreement").unwrap();
    assert_ne!(row.verdict, Verdict::NotInRun, "{row:?}");
    assert!(row.this_run.contains("societies"), "{}", row.this_run);
}

/// `herd analyze` given a folder of run folders (what `cargo xtask replicate` writes) reads the runs
/// holding the study's rows, as the report does: the analysis it keeps there is the one the report reads.
#[test]
fn an_analysis_of_a_folder_of_runs_is_the_one_the_report_reads() {
    use herd_analysis::stored::{AnalysisSettings, Study, analysis_dir, write_stored};
    use herd_analysis::study::{TrialSource, read_conformity};
    use herd_analysis::{ConformityOptions, analyze_conformity};

    let work = tempfile::tempdir().unwrap();
    let out = stored_results(work.path(), Variant::Planted);
    let input =
        read_conformity(TrialSource::at(&out, herd_store::Table::ConformityTrials).unwrap(), Default::default())
            .unwrap();
    let tables = analyze_conformity(&input.trials, &ConformityOptions::default()).unwrap();
    let kept = analysis_dir(&out, Study::Conformity);
    write_stored(&kept, Study::Conformity, &input.digest, &AnalysisSettings::default(), &tables.all()).unwrap();
    let results = load_results(&out, &mut |_| {}).unwrap();
    let c = results.conformity.as_ref().unwrap();
    assert!(c.analysis.read_back, "{:?}", c.analysis);
    assert_eq!(c.analysis.folder.as_deref(), Some(kept.as_path()));
    assert_eq!(c.tables, tables);

    // A folder with no run holding the table is refused naming what it looked for.
    let empty = work.path().join("nothing");
    std::fs::create_dir(&empty).unwrap();
    let err = TrialSource::at(&empty, herd_store::Table::ConformityTrials).map(drop).unwrap_err().to_string();
    assert!(err.contains("a folder of run folders holding conformity_trials rows"), "{err}");
}
