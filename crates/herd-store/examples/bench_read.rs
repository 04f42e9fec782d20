//! What verification costs a read: `read_table` (every part's size, SHA-256 and rows checked against its
//! commit record, the records against the manifest, every unit once, the rows handed over as Parquet
//! bytes) and their decoding, against polars reading the same committed parts with no check (what a
//! read was before parts were digested), in one run.
//!
//! ```sh
//! herd run --experiment data/experiments/minimal-group.toml --backend sim --out /tmp/mg-full
//! cargo xtask bench read /tmp/mg-full   # or: cargo run -p herd-store --release --example bench_read -- DIR [repeats]
//! ```

use herd_store::{Table, committed_parts, read_table};
use polars::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn unchecked(dir: &Path, table: Table) -> DataFrame {
    let mut frame: Option<DataFrame> = None;
    for part in committed_parts(dir, table).expect("list parts") {
        let next = ParquetReader::new(std::fs::File::open(&part).expect("open part")).finish().expect("read part");
        match &mut frame {
            None => frame = Some(next),
            Some(acc) => {
                acc.vstack_mut(&next).expect("stack");
            }
        }
    }
    let mut frame = frame.expect("rows");
    frame.align_chunks();
    frame
}

fn best_of(repeats: usize, mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut rows = 0;
    for _ in 0..repeats {
        let started = Instant::now();
        rows = f();
        best = best.min(started.elapsed().as_secs_f64());
    }
    (best, rows)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: bench_read RUN_DIR [repeats]"));
    let repeats: usize = args.next().map(|r| r.parse().expect("repeats: a whole number")).unwrap_or(5);
    println!("{} (best of {repeats}, one process, page cache warm)", dir.display());
    for table in [Table::AllocationDyads, Table::AllocationDeciders, Table::ConformityTrials] {
        if committed_parts(&dir, table).expect("list parts").is_empty() {
            continue;
        }
        let (plain, plain_rows) = best_of(repeats, || unchecked(&dir, table).height());
        // What a reader gets: the checked rows as Parquet bytes, decoded (as herd-analysis does).
        let (checked, checked_rows) = best_of(repeats, || {
            let parquet = read_table(std::slice::from_ref(&dir), table).expect("verified read").expect("rows");
            ParquetReader::new(std::io::Cursor::new(parquet)).finish().expect("decode").height()
        });
        assert_eq!(plain_rows, checked_rows, "both reads give every row");
        println!(
            "  {:<20} {checked_rows:>9} rows   unchecked {:8.1} ms   verified {:8.1} ms   ratio {:.3}",
            table.name(),
            plain * 1e3,
            checked * 1e3,
            checked / plain
        );
    }
}
