use crate::manifest::RunIdentity;
use std::path::PathBuf;

/// Why a run directory cannot be opened, read or written. Every message names the path and a fix; none
/// of these leaves stored data changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: cannot {action}: {source}\n  fix: choose an output folder you can write (--out), or free space on its disk; data already stored there is intact", path = .path.display())]
    Io { path: PathBuf, action: &'static str, source: std::io::Error },
    #[error("{0}: is a file, not a folder\n  fix: give --out a folder (it is created if missing)")]
    NotADirectory(PathBuf),
    #[error(
        "{0}: another herd process is writing to this folder\n  fix: wait for it to finish, or give this run another --out"
    )]
    Busy(PathBuf),
    #[error("{0}: not a herd run folder (no manifest.json)\n  fix: give the --out folder of a `herd run`")]
    NotARun(PathBuf),
    #[error(
        "{path}: written by a newer herd (store format {found}; this herd reads {supported})\n  fix: upgrade herd to read or resume this run"
    )]
    NewerFormat { path: PathBuf, found: u64, supported: u32 },
    #[error(
        "{path}: unreadable: {problem}\n  fix: the file was changed outside herd; restore it or start the run in a new --out"
    )]
    Corrupt { path: PathBuf, problem: String },
    #[error("{dir}: holds another run ({stored}); this command asks for {requested}\n  fix: resume with the same experiment file, model, backend and shard, or give this run a new --out", dir = .dir.display(), stored = describe(stored), requested = describe(requested))]
    DifferentRun { dir: PathBuf, stored: Box<RunIdentity>, requested: Box<RunIdentity> },
    #[error("{dir}: its rows were computed another way than this session would compute them ({differences}); one run's numbers must come from one compute path\n  fix: resume where the run began (same device, HERD_CPU_PATH and --weights), or give this session a new --out", dir = .dir.display())]
    DifferentCompute { dir: PathBuf, differences: String },
    #[error("unit {0} is already stored; the runner must skip stored units (a bug in herd)")]
    AlreadyStored(String),
    #[error("table {table}: {problem}")]
    Polars { table: &'static str, problem: String },
}

fn describe(id: &RunIdentity) -> String {
    format!(
        "experiment {} (sha256 {}…), model {}, backend {}, shard {}",
        id.experiment,
        id.experiment_sha256.get(..12).unwrap_or(&id.experiment_sha256),
        id.model,
        id.backend,
        id.shard
    )
}
