//! herd's trial tables on disk: Parquet parts written per batch with atomic renames, a resume index of
//! committed units, and the run manifest beside the data.
//!
//! A run directory holds one run (one experiment file, model, backend and shard). Each table is a folder
//! of Parquet parts, so polars, pandas or R read it with a glob (`conformity_trials/*.parquet`), and
//! shards merge by concatenation ([`read_table`] over several directories).
//!
//! What a run folder guarantees: every committed part's SHA-256, size and row count are in its commit
//! record and checked whenever the part is read or a session resumes (a damaged batch is run again);
//! the manifest's totals follow every commit, so a deleted or copied record is an error when the run
//! is read; each unit is stored once, and runs read together may not share units; [`verify_run`]
//! makes every check at once.
//!
//! ```no_run
//! use herd_store::{Batch, ConformityTrialRow, RunStore, Table, read_table};
//! # fn rows() -> Vec<ConformityTrialRow> { Vec::new() }
//! # fn manifest() -> herd_store::Manifest { unimplemented!() }
//! let mut store = RunStore::open("out/run".as_ref(), manifest(), "cpu")?;
//! if !store.is_stored("group_size/task=lines/n=3#0.0") {
//!     let mut batch = Batch::new(vec!["group_size/task=lines/n=3#0.0".into()]);
//!     batch.add(&rows())?;
//!     store.commit(batch)?; // stored exactly once from here on, even if the process is killed
//! }
//! store.finish("complete")?;
//! let trials = read_table(&["out/run".into()], Table::ConformityTrials)?;
//! # Ok::<(), herd_store::StoreError>(())
//! ```

mod error;
mod manifest;
mod read;
mod records;
mod schema;
mod store;
mod verify;

pub use error::StoreError;
pub use manifest::{
    FileRecord, Manifest, RunIdentity, STORE_FORMAT, Session, Skipped, compute_differences, git_commit,
    input_differences, now,
};
pub use read::{ReadOptions, SHARED_BY_SHARDS_PREFIX, TableRead, committed_parts, read_table, read_table_with};
pub use schema::{
    AllocationDeciderRow, AllocationDyadRow, BaselineCandidateRow, ConformityTrialRow, DECIDERS_COUNT, FILLED_COUNT,
    Table, TableRow,
};
pub use store::{Batch, RunStore, read_run_manifest};
pub use verify::{Verification, verify_run};
