//! The report's result tables as the page shows them: numbers spelled for reading (counts as
//! integers, p-values as herd spells them), and long or wide tables folded.

use serde::Serialize;

use herd_analysis::{ColumnValues, ResultTable};

#[derive(Serialize)]
pub(super) struct Cell {
    pub(super) text: String,
    pub(super) number: bool,
}

#[derive(Serialize)]
pub(super) struct TableView {
    pub(super) name: String,
    pub(super) caption: String,
    pub(super) columns: Vec<String>,
    pub(super) rows: Vec<Vec<Cell>>,
    /// The table as CSV, relative to the report (`tables/NAME.csv`).
    pub(super) csv: String,
    /// Shown folded (a `<details>`) because it is long or wide: the page stays a few screens tall.
    pub(super) folded: bool,
}

/// A table longer than this many rows, or wider than this many columns, is folded.
const FOLD_ROWS: usize = 12;
const FOLD_COLUMNS: usize = 10;

fn is_p_column(name: &str) -> bool {
    name == "p" || name.ends_with("_p") || name.starts_with("q_")
}

/// A column of counts (`n`, `n_seeds`, `df`, the quality tables' `trials` and `deciders`, …), stored as
/// floats by the analyses.
fn is_count_column(name: &str) -> bool {
    matches!(name, "n" | "df" | "trials" | "deciders" | "resamples" | "baseline_candidates")
        || name.starts_with("n_")
        || name.ends_with("_n")
        || name.ends_with("_excluded")
}

fn format_number(column: &str, v: f64) -> String {
    if is_p_column(column) {
        // A p of 0 is a p below what f64 resolves, never zero (`p_value` says so).
        crate::figure::p_value(v)
    } else if v == 0.0 {
        "0".into()
    } else if is_count_column(column) && v.fract() == 0.0 && v.abs() < 1e15 {
        // A count prints as the integer it is: 168, not 168.0000.
        format!("{}", v as i64)
    } else if v != 0.0 && (v.abs() < 1e-3 || v.abs() >= 1e6) {
        format!("{v:.3e}")
    } else {
        format!("{v:.4}")
    }
}

pub(super) fn table_view(table: &ResultTable, caption: &str) -> TableView {
    let folded = table.n_rows() > FOLD_ROWS || table.columns.len() > FOLD_COLUMNS;
    let columns: Vec<String> = table.columns.iter().map(|(n, _)| n.clone()).collect();
    let rows = (0..table.n_rows())
        .map(|r| {
            table
                .columns
                .iter()
                .map(|(name, values)| match values {
                    ColumnValues::Text(v) => Cell { text: v[r].clone().unwrap_or_default(), number: false },
                    ColumnValues::Integer(v) => {
                        Cell { text: v[r].map_or("—".into(), |i| i.to_string()), number: true }
                    }
                    ColumnValues::Float(v) => {
                        Cell { text: v[r].map_or("—".into(), |x| format_number(name, x)), number: true }
                    }
                })
                .collect()
        })
        .collect();
    TableView {
        name: table.name.clone(),
        caption: caption.to_owned(),
        columns,
        rows,
        csv: format!("tables/{}.csv", table.name),
        folded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_print_as_integers_and_other_numbers_keep_their_decimals() {
        assert_eq!(format_number("n", 168.0), "168");
        assert_eq!(format_number("df", 1.0), "1");
        assert_eq!(format_number("n_seeds", 8.0), "8");
        // The quality tables' counts, which the quick report printed as 62.0000.
        assert_eq!(format_number("trials", 62.0), "62");
        assert_eq!(format_number("deciders", 320.0), "320");
        assert_eq!(format_number("bounded_excluded", 3.0), "3");
        // A fractional value in a count column (a mean count) keeps its decimals.
        assert_eq!(format_number("n_seeds", 7.5), "7.5000");
        assert_eq!(format_number("estimate", 168.0), "168.0000");
        assert_eq!(format_number("p", 0.0123), crate::figure::p_value(0.0123));
    }
}
