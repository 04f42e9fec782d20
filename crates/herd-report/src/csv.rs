//! Each result table as CSV beside the report (`OUT/tables/NAME.csv`): the page shows a long table
//! collapsed and links its CSV, which holds every value at full precision for a spreadsheet or pandas.

use herd_analysis::{ColumnValues, ResultTable};

/// A field quoted as RFC 4180 asks where it holds a comma, quote or line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_owned() }
}

/// `table` as CSV: a header of column names, then one line per row; a missing value is an empty field,
/// a number is written in full (Rust's shortest round-trip form).
pub(crate) fn table_csv(table: &ResultTable) -> String {
    let mut csv = table.columns.iter().map(|(name, _)| field(name)).collect::<Vec<_>>().join(",");
    csv.push('\n');
    for r in 0..table.n_rows() {
        let cells: Vec<String> = table
            .columns
            .iter()
            .map(|(_, values)| match values {
                ColumnValues::Text(v) => v[r].as_deref().map(field).unwrap_or_default(),
                ColumnValues::Float(v) => v[r].map(|x| x.to_string()).unwrap_or_default(),
                ColumnValues::Integer(v) => v[r].map(|x| x.to_string()).unwrap_or_default(),
            })
            .collect();
        csv.push_str(&cells.join(","));
        csv.push('\n');
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_analysis::{TableBuilder, Value};

    #[test]
    fn fields_are_quoted_only_where_needed_and_numbers_kept_whole() {
        let mut t = TableBuilder::new("t", &[("model", 't'), ("p", 'f')]);
        t.push(vec![Value::from("a,\"b\"".to_owned()), Value::from(0.000_012_345_678_9)]);
        t.push(vec![Value::from("plain".to_owned()), Value::from(None::<f64>)]);
        assert_eq!(table_csv(&t.finish()), "model,p\n\"a,\"\"b\"\"\",0.0000123456789\nplain,\n");
    }
}
