//! Values outside their domain are errors naming the file, column and row, not numbers averaged into
//! curves above 1.

use std::path::{Path, PathBuf};

use herd_analysis::AnalysisError;
use herd_analysis::study::read_conformity_trials;

fn trials() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformity_trials.csv")).unwrap()
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("herd-analysis-domains");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The table with data row `row` (from 1) given `value` in column `column`.
fn with_value(column: &str, row: usize, value: &str) -> String {
    let text = trials();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = lines[0].split(',').position(|c| c == column).unwrap();
    let mut cells: Vec<String> = lines[row].split(',').map(str::to_owned).collect();
    cells[at] = value.to_owned();
    lines[row] = cells.join(",");
    lines.join("\n") + "\n"
}

#[test]
fn probabilities_outside_zero_one_name_file_column_and_row() {
    assert!(read_conformity_trials(&write("valid.csv", &trials())).is_ok());
    for (column, value) in [("p_wrong_full", "7.5"), ("p_wrong_full", "-0.7"), ("p_wrong_ab", "1.0000001")] {
        let path = write(&format!("{column}{value}.csv"), &with_value(column, 17, value));
        let e = read_conformity_trials(&path).unwrap_err();
        let message = e.to_string();
        assert!(
            matches!(&e, AnalysisError::InvalidValue { column: c, row: 17, .. } if c == column),
            "{column} = {value}: {message}"
        );
        assert!(message.contains(&format!("{column}{value}.csv")) && message.contains("[0, 1]"), "{message}");
    }
    // The edges are probabilities.
    assert!(read_conformity_trials(&write("zero.csv", &with_value("p_wrong_full", 3, "0"))).is_ok());
    assert!(read_conformity_trials(&write("one.csv", &with_value("p_wrong_ab", 3, "1"))).is_ok());
}
