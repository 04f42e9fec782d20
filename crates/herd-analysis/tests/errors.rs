//! Clear errors for bad tables: the message names the file, the column or cell, and the fix.

use std::path::PathBuf;

use herd_analysis::study::read_dyads;
use herd_analysis::{AnalysisError, MinimalGroupOptions, analyze_minimal_group};

const HEADER: &str = "labels,m,seed,decider,target,minority_decider,minority_target,same_group,points";

fn write(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("herd-analysis-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// One society of 4 (minority 2), one seed: decider d gives `points(d, t)`.
fn society(points: impl Fn(i64, i64) -> String) -> String {
    let mut s = String::from(HEADER);
    s.push('\n');
    for d in 0..4_i64 {
        for t in (0..4).filter(|&t| t != d) {
            let (md, mt) = (i64::from(d < 2), i64::from(t < 2));
            s.push_str(&format!("visible,2,1,{d},{t},{md},{mt},{},{}\n", i64::from(md == mt), points(d, t)));
        }
    }
    s
}

#[test]
fn missing_column_names_file_column_and_fix() {
    let p = write("missing.csv", &society(|_, _| "33.333333333".into()).replace(",points", ",pts"));
    let e = read_dyads(&p).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, AnalysisError::MissingColumn { ref column, .. } if column == "points"), "{message}");
    assert!(message.contains("missing.csv") && message.contains("`points`") && message.contains("fix:"), "{message}");
}

#[test]
fn wrong_type_is_reported() {
    let p =
        write("wrong_type.csv", &society(|d, t| if d == 2 && t == 3 { "lots".into() } else { "33.333333333".into() }));
    let e = read_dyads(&p).unwrap_err();
    assert!(matches!(e, AnalysisError::WrongType { ref column, .. } if column == "points"), "{e}");
    assert!(e.to_string().contains("wrong_type.csv"));
}

#[test]
fn points_must_sum_to_the_pool() {
    let p = write("pool.csv", &society(|d, _| if d == 1 { "30".into() } else { "33.333333333".into() }));
    let table = read_dyads(&p).unwrap();
    let e = analyze_minimal_group(&table, &MinimalGroupOptions::default()).unwrap_err();
    assert!(
        matches!(e, AnalysisError::PointsDoNotSumToPool { decider: 1, sum, .. } if (sum - 90.0).abs() < 1e-9),
        "{e}"
    );
    assert!(e.to_string().contains("pool.csv"));
}

#[test]
fn a_decider_without_out_group_targets_is_an_empty_cell() {
    // Drop every out-group row of decider 0 (and give its in-group target the whole pool).
    let text: String = society(|d, _| if d == 0 { "100".into() } else { "33.333333333".into() })
        .lines()
        .filter(|l| !(l.starts_with("visible,2,1,0,2,") || l.starts_with("visible,2,1,0,3,")))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = write("empty.csv", &text);
    let e = analyze_minimal_group(&read_dyads(&p).unwrap(), &MinimalGroupOptions::default()).unwrap_err();
    assert!(matches!(e, AnalysisError::EmptyCell { ref what, .. } if what.contains("out-group")), "{e}");
}

#[test]
fn a_bad_indicator_is_an_invalid_value() {
    let p = write(
        "indicator.csv",
        &society(|_, _| "33.333333333".into()).replacen("visible,2,1,0,1,1,1,1", "visible,2,1,0,1,1,1,2", 1),
    );
    let e = read_dyads(&p).unwrap_err();
    assert!(matches!(e, AnalysisError::InvalidValue { ref column, row: 1, .. } if column == "same_group"), "{e}");
}

#[test]
fn bounded_trials_are_left_out_of_p_wrong() {
    let header = "model,task,family,level,n,seed,p_wrong_full,p_bound";
    let rows = [
        "m,lines,group_size,,0,0,0.2,0",
        "m,lines,group_size,,5,0,0.9,1",
        "m,lines,group_size,,5,1,0.7,0",
        "m,lines,group_size,,0,1,0.4,0",
    ];
    let path = write("bounded.csv", &format!("{header}\n{}\n", rows.join("\n")));
    let table = herd_analysis::study::read_conformity_trials(&path).unwrap();
    let kept: Vec<(u32, f64)> = table.rows.iter().map(|t| (t.n, t.p_wrong_full)).collect();
    assert_eq!(kept, vec![(0, 0.2), (5, 0.7), (0, 0.4)], "the bounded trial at N = 5 is dropped");
    // Without the column every trial is kept.
    let path = write("unbounded.csv", "model,task,family,level,n,seed,p_wrong_full\nm,lines,group_size,,5,0,0.9\n");
    assert_eq!(herd_analysis::study::read_conformity_trials(&path).unwrap().rows.len(), 1);
}

#[test]
fn a_folder_of_plain_tables_reads_like_the_file_and_a_folder_without_one_is_named() {
    use herd_analysis::study::read_conformity_trials;
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformity_trials.csv");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("herd-analysis-plain-folder");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&committed, dir.join("conformity_trials.csv")).unwrap();
    let from_folder = read_conformity_trials(&dir).expect("a folder holding conformity_trials.csv");
    let from_file = read_conformity_trials(&committed).unwrap();
    assert_eq!(from_folder.rows, from_file.rows);

    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("herd-analysis-no-table");
    std::fs::create_dir_all(&empty).unwrap();
    let message = read_conformity_trials(&empty).unwrap_err().to_string();
    assert!(message.contains("no manifest.json") && message.contains("conformity_trials.parquet"), "{message}");
    assert!(message.contains("fix: pass a `herd run` folder"), "{message}");
}

#[test]
fn a_cell_of_uniform_allocations_analyses_with_undefined_errors_not_a_hang() {
    // Every decider splits the pool evenly (as uniform fills after parse failures do): the GEE fits
    // the points exactly, so its coefficients are there and their SEs, z and p are null.
    let mut text = String::from(HEADER);
    text.push('\n');
    for seed in 1..=3 {
        for line in society(|_, _| (100.0_f64 / 3.0).to_string()).lines().skip(1) {
            text.push_str(&line.replacen("visible,2,1,", &format!("visible,2,{seed},"), 1));
            text.push('\n');
        }
    }
    let table = read_dyads(&write("uniform.csv", &text)).unwrap();
    let tables = analyze_minimal_group(&table, &MinimalGroupOptions::default()).expect("an exact fit is a result");
    let gee = &tables.gee;
    let row = (0..gee.n_rows())
        .find(|&r| gee.text("term", r) == Some("same_group") && gee.text("formula", r) == Some("points ~ same_group"))
        .expect("the cell's same_group row");
    assert!(gee.number("coef", row).is_some_and(|c| c.abs() < 1e-9), "{:?}", gee.number("coef", row));
    assert!(gee.column("se_robust").is_some() && gee.column("p").is_some());
    assert_eq!(gee.number("se_robust", row), None);
    assert_eq!(gee.number("z", row), None);
    assert_eq!(gee.number("p", row), None);
}

#[test]
fn a_fifo_or_device_in_a_tables_place_is_refused_without_reading_it() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("herd-analysis-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo-dyads.csv");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    // Reading a FIFO nobody writes would block forever; /dev/zero would fill memory.
    for path in [fifo.clone(), PathBuf::from("/dev/zero")] {
        let message = read_dyads(&path).unwrap_err().to_string();
        assert!(message.contains("not a regular file") && message.contains("fix:"), "{}: {message}", path.display());
    }
    std::fs::remove_file(&fifo).unwrap();
}

/// Rows a power analysis holds in memory go through the same checks as a table read from a file: a
/// minority size of 0 (or a negative one, which once wrapped to four billion) is refused by both.
#[test]
fn rows_in_memory_are_checked_as_a_file_is() {
    use herd_analysis::io::dyads_from_rows;
    let row = |m: i64| herd_store::AllocationDyadRow {
        run_id: "r".into(),
        unit_id: "u".into(),
        experiment: "e".into(),
        model: "m".into(),
        backend: "sim".into(),
        reasoning: "off".into(),
        instrument: "points".into(),
        labels: "visible".into(),
        m,
        seed: 1,
        swap_pass: "original".into(),
        decider: 0,
        target: 1,
        target_id: "agent_01".into(),
        minority_decider: true,
        minority_target: true,
        same_group: true,
        decider_group: "Kalvo".into(),
        target_group: "Kalvo".into(),
        target_position: 1.0,
        points: 100.0,
        filled: false,
    };
    for m in [0, -1] {
        let from_rows = dyads_from_rows("simulation", &[row(m)]).unwrap_err().to_string();
        let file = write(
            &format!("m{m}.csv"),
            &society(|_, _| "33.333333333".into()).replace("visible,2,", &format!("visible,{m},")),
        );
        let from_file = read_dyads(&file).unwrap_err().to_string();
        for message in [&from_rows, &from_file] {
            assert!(
                message.contains(&format!("minority size {m}")) && message.contains("positive integer"),
                "{message}"
            );
        }
    }
}
