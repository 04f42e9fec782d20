//! `herd analyze` end to end: the committed synthetic tables in, CSV and Parquet tables out.

use std::path::{Path, PathBuf};
use std::process::Command;

use polars::prelude::{CsvReadOptions, DataFrame, ParquetReader, SerReader};

/// A written result table as polars reads it (CSV with every row's types inferred, or Parquet): what
/// a user reading herd's output with polars sees.
fn read_frame(path: &Path) -> polars::prelude::PolarsResult<DataFrame> {
    if path.extension().is_some_and(|e| e == "csv") {
        CsvReadOptions::default()
            .with_has_header(true)
            .with_infer_schema_length(None)
            .try_into_reader_with_file_path(Some(path.to_path_buf()))?
            .finish()
    } else {
        ParquetReader::new(std::fs::File::open(path)?).finish()
    }
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../herd-analysis/tests/data").join(name)
}

fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn herd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_herd")).args(args).output().expect("herd runs")
}

/// The CSV and Parquet files of one table hold the same values.
fn assert_csv_and_parquet_agree(dir: &Path, table: &str) {
    let csv = read_frame(&dir.join(format!("{table}.csv"))).expect("CSV table");
    let parquet = read_frame(&dir.join(format!("{table}.parquet"))).expect("Parquet table");
    assert!(csv.height() > 0, "{table} is empty");
    assert_eq!(csv.shape(), parquet.shape(), "{table}");
    assert_eq!(csv.get_column_names(), parquet.get_column_names(), "{table}");
    for name in csv.get_column_names() {
        let a = csv.column(name).unwrap().as_materialized_series();
        let b = parquet.column(name).unwrap().as_materialized_series();
        if b.dtype().is_float() {
            let a = a.cast(&polars::prelude::DataType::Float64).unwrap();
            for (x, y) in a.f64().unwrap().iter().zip(b.f64().unwrap().iter()) {
                match (x, y) {
                    (Some(x), Some(y)) => {
                        assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{table}.{name}: {x} vs {y}")
                    }
                    (x, y) => assert_eq!(x, y, "{table}.{name}"),
                }
            }
        } else {
            let a = a.cast(b.dtype()).unwrap();
            assert!(a.equals_missing(b), "{table}.{name} differs between CSV and Parquet");
        }
    }
}

#[test]
fn minimal_group_writes_csv_and_parquet_that_agree() {
    let out = out_dir("analyze-minimal-group");
    let dyads = data("dyads.csv");
    let result = herd(&[
        "analyze",
        "minimal-group",
        "--dyads",
        dyads.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resamples",
        "200",
    ]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    for table in ["seed_tests", "gee", "bootstrap", "robustness"] {
        assert_csv_and_parquet_agree(&out, table);
    }
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(stdout.contains("seed_tests") && stdout.contains("wrote 9 files"), "{stdout}");
    assert!(out.join("analysis.json").is_file(), "the record of what the tables were computed from");
    // Off a terminal (here, a pipe) the long work says how far it is, a line per tenth of its steps.
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("read ") && stderr.contains(" dyads from "), "{stderr}");
    assert!(stderr.contains("analysing: ") && stderr.contains("(100%)"), "{stderr}");
    assert!(stderr.matches("analysing: ").count() <= 10, "{stderr}");
}

#[test]
fn a_table_file_needs_out_and_a_folder_keeps_its_analysis_inside() {
    let trials = data("conformity_trials.csv");
    let result = herd(&["analyze", "conformity", "--trials", trials.to_str().unwrap()]);
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("is a table file") && stderr.contains("fix: add --out DIR"), "{stderr}");

    let folder = out_dir("analyze-default-out");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(&trials, folder.join("conformity_trials.csv")).unwrap();
    let result = herd(&["analyze", "conformity", "--trials", folder.to_str().unwrap()]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    let kept = folder.join("analysis").join("conformity");
    for file in ["analysis.json", "curves.parquet", "auc.csv"] {
        assert!(kept.join(file).is_file(), "{file} in {}", kept.display());
    }
}

#[test]
fn conformity_writes_every_table() {
    let out = out_dir("analyze-conformity");
    let trials = data("conformity_trials.csv");
    let result = herd(&["analyze", "conformity", "--trials", trials.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    for table in ["curves", "auc", "deltas", "difficulty_spearman", "difficulty_ols"] {
        assert_csv_and_parquet_agree(&out, table);
    }
}

#[test]
fn a_missing_column_fails_with_the_file_column_and_fix() {
    let dir = out_dir("analyze-bad-input");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("no_points.csv");
    std::fs::write(
        &bad,
        "labels,m,seed,decider,target,minority_decider,minority_target,same_group\nvisible,2,1,0,1,1,1,1\n",
    )
    .unwrap();
    let result = herd(&[
        "analyze",
        "minimal-group",
        "--dyads",
        bad.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("no_points.csv") && stderr.contains("`points`") && stderr.contains("fix:"), "{stderr}");
}
