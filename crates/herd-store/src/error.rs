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
    #[error("{path}: the disk is full (no space left on device while writing this file)\n  fix: free space on the disk, or give --out a folder on another disk; the batches committed so far are intact and rerunning the same command resumes after them", path = .path.display())]
    DiskFull { path: PathBuf },
    #[error("{part}: damaged: {problem} (committed by {record})\n  fix: rerun `herd run` with the same arguments and --out to recompute that batch's units, or run `herd verify {dir}` to list every damaged file", part = .part.display(), record = .record.display(), dir = .part.parent().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new(".")).display())]
    Damaged { part: PathBuf, record: PathBuf, problem: String },
    /// `sources` are the two records holding the unit; boxed to keep the error small.
    #[error("unit {unit} is stored twice: in {first} and in {second}{detail}", first = .sources[0].display(), second = .sources[1].display())]
    DuplicateUnit { unit: String, sources: Box<[PathBuf; 2]>, detail: String },
    #[error("{dir}: {problem}\n  fix: rerun `herd run` with the same arguments and --out (units without a commit record are run again), or run `herd verify {dir}` for the details", dir = .dir.display())]
    Counts { dir: PathBuf, problem: String },
    #[error("{record}: {problem}\n  fix: rerun `herd run` with the same arguments and --out: it drops this record and runs its units again (or run `herd verify {dir}` to list every problem)", record = .record.display(), dir = .record.parent().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new(".")).display())]
    BadRecord { record: PathBuf, problem: String },
    #[error("{dir}: its stored units were computed from other inputs than this session's ({differences}); one run's rows must come from one set of inputs\n  fix: restore the inputs the run began with (the manifest's `files` lists them), or give this session a new --out", dir = .dir.display())]
    DifferentInputs { dir: PathBuf, differences: String },
    #[error("{path}: has no input fingerprint (`inputs`), which every manifest of store format 2 or later records: it was edited, and a resume could not tell whether the banks, sim parameters or model changed\n  fix: restore manifest.json (`inputs` lists the SHA-256 of each input), or run into a new --out", path = .path.display())]
    LostFingerprint { path: PathBuf },
    #[error("{first} and {second} are shards of one run computed from different inputs ({differences}); their rows cannot be merged into one run's tables\n  fix: rerun the shard that used other banks, sim parameters or model files with the inputs of the others, into a new --out", first = .first.display(), second = .second.display())]
    ShardInputs { first: PathBuf, second: PathBuf, differences: String },
    #[error("{first} and {second} hold the same units: {why}\n  fix: read one of them, or shards of one split that do not overlap (k/n with the same n)", first = .first.display(), second = .second.display())]
    Overlap { first: PathBuf, second: PathBuf, why: String },
}

impl StoreError {
    /// An I/O error at `path`; a full disk says so in words (polars and serde report it as a failed
    /// transport or write).
    pub fn io(path: &std::path::Path, action: &'static str, source: std::io::Error) -> Self {
        if is_disk_full(&source) {
            return StoreError::DiskFull { path: path.to_path_buf() };
        }
        StoreError::Io { path: path.to_path_buf(), action, source }
    }
}

/// ENOSPC or EDQUOT: no room left for the file.
pub(crate) fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        || matches!(e.raw_os_error(), Some(28 | 122))
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
