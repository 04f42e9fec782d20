//! Tests look into what herd-store read through polars: the store hands its checked rows over as
//! Parquet bytes (`herd_store::TableRead`), and tests that assert on
//! columns decode them here, as herd-analysis does.

use polars::prelude::{AnyValue, DataFrame, ParquetReader, SerReader};

/// The frame of a table herd-store read (its Parquet bytes). Panics on bytes that are not Parquet: a
/// test's failure, since herd-store wrote them.
pub fn frame(parquet: Vec<u8>) -> DataFrame {
    ParquetReader::new(std::io::Cursor::new(parquet)).finish().expect("herd-store's rows decode as Parquet")
}

/// Every row of `frame` as one text (`column=value|…`, a float to its last bit), sorted, the `skip`
/// columns left out: what tests compare to say two runs stored the same rows.
pub fn row_texts(frame: &DataFrame, skip: &[&str]) -> Vec<String> {
    let columns: Vec<_> = frame.columns().iter().filter(|c| !skip.contains(&c.name().as_str())).collect();
    let cell = |value: AnyValue<'_>| match value {
        AnyValue::Float64(x) => format!("{x:?}"),
        other => other.to_string(),
    };
    let mut rows: Vec<String> = (0..frame.height())
        .map(|i| {
            columns
                .iter()
                .map(|c| format!("{}={}", c.name(), cell(c.get(i).expect("a row within the frame's height"))))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}
