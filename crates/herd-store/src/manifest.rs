//! The run manifest: what was run, with what, by which herd, and how far it got. Written beside the
//! data as `manifest.json` (atomically) at the start of every session and again at its end.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the run-directory layout; a directory written by a newer herd is refused. Format 2 added
/// each part's SHA-256 to its commit record and keeps the manifest's totals current at every commit
/// (so a deleted record is visible); format 3 has every record name its run and the digest of the
/// run's inputs (so a record copied in from another run, or computed from other inputs, is refused).
/// Folders of formats 1 and 2 are still read and resumed.
pub const STORE_FORMAT: u32 = 3;

/// What makes two sessions parts of the same run: a resumed session must match on every field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    pub experiment: String,
    pub study: String,
    /// SHA-256 of the experiment file's bytes.
    pub experiment_sha256: String,
    pub model: String,
    pub backend: String,
    /// `k/n`, or `all`.
    pub shard: String,
}

impl RunIdentity {
    /// A short stable id of the run, stored on every row.
    pub fn run_id(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for part in [&self.experiment, &self.experiment_sha256, &self.model, &self.backend, &self.shard] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        format!("{}-{}", self.experiment, &hex::encode(hash.finalize())[..12])
    }
}

/// One file a run depends on (experiment, banks, model weights), with its hash where it was computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    pub role: String,
    pub path: String,
    pub bytes: u64,
    /// SHA-256, or `None` where hashing was skipped (multi-gigabyte HF weights are identified by their
    /// snapshot commit in the path instead).
    pub sha256: Option<String>,
}

/// One invocation of `herd run` on this directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Seconds since the Unix epoch.
    pub started: u64,
    pub ended: Option<u64>,
    pub herd_version: String,
    pub git_commit: String,
    pub device: String,
    /// What this session computed with (herd_infer's `ComputePath`); absent in folders written
    /// before herd recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<serde_json::Value>,
    /// Units found already stored when the session began.
    pub units_already_stored: u64,
    /// Units this session committed, kept current as its batches commit (a killed session shows what
    /// it stored).
    pub units_run: u64,
    /// `running`, `complete`, `incomplete` (units failed or were skipped) or `failed: …`.
    pub status: String,
}

/// Units the runner could not run, grouped by reason (e.g. no image passed the baseline filter).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub reason: String,
    pub units: u64,
    pub examples: Vec<String>,
    /// Skipped because the design asks for what this model cannot do (e.g. reasoning on for a model with
    /// no thinking mode): the run is complete without them. `false`: the units were meant to run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_design: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub store_format: u32,
    pub identity: RunIdentity,
    pub run_id: String,
    pub experiment_file: String,
    /// The experiment with every default resolved, as the runner used it.
    pub parameters: serde_json::Value,
    /// The model's registry entry and load options.
    pub model: serde_json::Value,
    pub files: Vec<FileRecord>,
    /// Units of the experiment (this shard's share).
    pub units_total: u64,
    /// Of those, how many are stored (set by the runner's caller at the end of a session).
    #[serde(default)]
    pub experiment_units_stored: u64,
    /// Every committed unit, baseline candidates included (the resume index's size). Kept current at
    /// every commit from store format 2 on.
    pub units_stored: u64,
    pub rows: BTreeMap<String, u64>,
    /// Commit records in `committed/` (store format 2; `None` in format 1 folders, whose totals were
    /// written only at a session's start and end). With `units_stored` and `rows` it makes a deleted
    /// or copied record visible when the run is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<u64>,
    /// Counts summed over every committed batch of every session (e.g. `allocation/deciders` and
    /// `allocation/filled`), so a resumed run's totals cover the units of all its sessions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    pub skipped: Vec<Skipped>,
    /// Units whose request failed in the last session; they are retried on resume.
    pub failed: Vec<String>,
    /// Summary numbers a study reports while running (e.g. baseline acceptance rates).
    pub notes: BTreeMap<String, serde_json::Value>,
    /// How every row's numbers were computed: device, instructions, weights, activations, dtype and
    /// herd version (herd_infer's `ComputePath`). Every session of a run computes the same way, herd
    /// version aside (each session records its own).
    #[serde(default)]
    pub compute: Option<serde_json::Value>,
    /// Every input a unit's rows depend on (experiment, bank files, font, sim parameters, model file,
    /// chat template, resolved generation settings), by name, as a SHA-256 (of the file's bytes, or of
    /// a parameter set's canonical JSON). A resumed session must have the same (see
    /// [`input_differences`]); folders written before herd recorded it take the session's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// The first commit number from which every record names its run and inputs (store format 3): 1
    /// in a folder begun by format 3, the next number where a format-3 herd resumed an older folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identified_from: Option<u64>,
    pub sessions: Vec<Session>,
}

impl Manifest {
    /// A manifest for `identity` with nothing recorded yet; the runner's caller fills in what it knows.
    pub fn new(identity: RunIdentity) -> Self {
        Manifest {
            store_format: STORE_FORMAT,
            run_id: identity.run_id(),
            identity,
            experiment_file: String::new(),
            parameters: serde_json::Value::Null,
            model: serde_json::Value::Null,
            files: Vec::new(),
            units_total: 0,
            experiment_units_stored: 0,
            units_stored: 0,
            rows: BTreeMap::new(),
            batches: None,
            counts: BTreeMap::new(),
            skipped: Vec::new(),
            failed: Vec::new(),
            notes: BTreeMap::new(),
            compute: None,
            inputs: BTreeMap::new(),
            identified_from: None,
            sessions: Vec::new(),
        }
    }
}

/// The parts in which two compute paths differ (`field: a → b`), the herd version aside: a session
/// of a newer herd may resume a run if it computes the same way.
pub fn compute_differences(stored: &serde_json::Value, requested: &serde_json::Value) -> Vec<String> {
    let fields = |v: &serde_json::Value| -> BTreeMap<String, serde_json::Value> {
        v.as_object().map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
    };
    let (a, b) = (fields(stored), fields(requested));
    let show = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "none".into(),
    };
    a.keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| k.as_str() != "herd_version" && a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: {} → {}", show(a.get(k)), show(b.get(k))))
        .collect()
}

/// The inputs in which a session's fingerprint differs from the run's (`name: sha256 a… → b…`, `absent`
/// where one side lacks it); none where the run recorded no fingerprint (folders from before herd
/// recorded one take the session's).
pub fn input_differences(stored: &BTreeMap<String, String>, requested: &BTreeMap<String, String>) -> Vec<String> {
    if stored.is_empty() {
        return Vec::new();
    }
    let short = |v: Option<&String>| v.map_or_else(|| "absent".to_owned(), |h| format!("{}…", &h[..h.len().min(12)]));
    stored
        .keys()
        .chain(requested.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| stored.get(*k) != requested.get(*k))
        .map(|k| format!("{k}: sha256 {} → {}", short(stored.get(k)), short(requested.get(k))))
        .collect()
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The commit herd was built from (`unknown` outside a git checkout).
pub fn git_commit() -> &'static str {
    option_env!("HERD_GIT_COMMIT").unwrap_or("unknown")
}
