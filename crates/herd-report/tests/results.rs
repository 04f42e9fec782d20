//! Finding result folders: the layouts accepted, and a clear error naming the path and the fix for each
//! way a folder can be wrong.

mod common;

use common::{Variant, stored_results};
use herd_report::{find_run_folders, load_results};

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
    assert!(error_of(&file).contains("is a file, not a folder"));

    let unrelated = work.path().join("unrelated");
    std::fs::create_dir_all(unrelated.join("something")).unwrap();
    assert!(error_of(&unrelated).contains("no run folder here"));

    let out = stored_results(&work.path().join("newer"), Variant::Planted);
    let manifest = out.join("runs/conformity/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap().replace("\"store_format\":1", "\"store_format\":99").replace("\"store_format\": 1", "\"store_format\": 99");
    std::fs::write(&manifest, text).unwrap();
    let message = error_of(&out);
    assert!(message.contains("runs/conformity") && message.contains("upgrade herd"), "{message}");
}
