//! Tests look into what herd-store read through polars: the store hands its checked rows over as
//! Parquet bytes (`herd_store::TableRead`), and tests that assert on
//! columns decode them here, as herd-analysis does.

use polars::prelude::{DataFrame, ParquetReader, SerReader};

/// The frame of a table herd-store read (its Parquet bytes). Panics on bytes that are not Parquet: a
/// test's failure, since herd-store wrote them.
pub fn frame(parquet: Vec<u8>) -> DataFrame {
    ParquetReader::new(std::io::Cursor::new(parquet)).finish().expect("herd-store's rows decode as Parquet")
}
