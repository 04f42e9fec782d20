//! Each run's manifest as the report shows it: its sessions, files, units and compute path, and the
//! runs whose numbers were computed another way than the first.

use serde::Serialize;

use herd_analysis::results::RunFolder;
use herd_store::Manifest;

#[derive(Serialize)]
pub(super) struct SessionView {
    pub(super) started: String,
    pub(super) ended: String,
    pub(super) herd_version: String,
    pub(super) git_commit: String,
    pub(super) device: String,
    pub(super) units_run: u64,
    pub(super) status: String,
}

#[derive(Serialize)]
pub(super) struct FileView {
    pub(super) role: String,
    pub(super) path: String,
    pub(super) bytes: u64,
    pub(super) sha256: String,
}

#[derive(Serialize)]
pub(super) struct RunView {
    pub(super) study: &'static str,
    pub(super) path: String,
    pub(super) run_id: String,
    pub(super) experiment_file: String,
    pub(super) experiment_sha256: String,
    pub(super) model: String,
    pub(super) backend: String,
    pub(super) shard: String,
    pub(super) units: String,
    pub(super) rows: String,
    pub(super) skipped: Vec<String>,
    pub(super) failed: usize,
    pub(super) notes: Vec<(String, String)>,
    pub(super) sessions: Vec<SessionView>,
    pub(super) files: Vec<FileView>,
    pub(super) parameters: String,
    pub(super) model_record: String,
    /// How the numbers were computed (device, instructions, weights, activations, dtype, herd).
    pub(super) compute: String,
}

/// Seconds since the epoch as `YYYY-MM-DD hh:mm:ss` (UTC), without a date crate.
fn utc(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// The run's units as its manifest knows them. The experiment units a session stored are counted when it
/// ends; a session killed before (its status still `running`, or `interrupted` once resumed) left only
/// the commit count, kept current at every commit, so that is what is said, not a stale "0 of N".
fn units_line(m: &Manifest) -> String {
    let skipped = match m.skipped.iter().filter(|s| s.by_design).map(|s| s.units).sum::<u64>() {
        0 => String::new(),
        n => format!("; {n} skipped by design (see skipped)"),
    };
    // `herd run --limit` marks the run it left unfinished.
    let limited = if m.notes.contains_key("limited") { "; a --limit trial run, not complete" } else { "" };
    let killed = m.sessions.last().is_some_and(|s| matches!(s.status.as_str(), "running" | "interrupted"));
    if killed {
        return format!(
            "{} units committed (baseline candidates included) of {} experiment units; its last session was \
             stopped before it counted them: rerun the same `herd run` to complete the run{skipped}{limited}",
            m.units_stored, m.units_total
        );
    }
    format!(
        "{} of {} experiment units ({} with baseline candidates){skipped}{limited}",
        m.experiment_units_stored, m.units_total, m.units_stored
    )
}

pub(super) fn run_view(study: &'static str, run: &RunFolder) -> RunView {
    let m: &Manifest = &run.manifest;
    RunView {
        study,
        path: run.path.display().to_string(),
        run_id: m.run_id.clone(),
        experiment_file: m.experiment_file.clone(),
        experiment_sha256: m.identity.experiment_sha256.clone(),
        model: m.identity.model.clone(),
        backend: m.identity.backend.clone(),
        shard: m.identity.shard.clone(),
        units: units_line(m),
        rows: m.rows.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", "),
        skipped: m
            .skipped
            .iter()
            .map(|s| format!("{} units: {} (e.g. {})", s.units, s.reason, s.examples.join(", ")))
            .collect(),
        failed: m.failed.len(),
        notes: m.notes.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
        sessions: m
            .sessions
            .iter()
            .map(|s| SessionView {
                started: utc(s.started),
                ended: s.ended.map_or("—".into(), utc),
                herd_version: s.herd_version.clone(),
                git_commit: s.git_commit.clone(),
                device: s.device.clone(),
                units_run: s.units_run,
                status: s.status.clone(),
            })
            .collect(),
        files: m
            .files
            .iter()
            .map(|f| FileView {
                role: f.role.clone(),
                path: f.path.clone(),
                bytes: f.bytes,
                sha256: f.sha256.clone().unwrap_or_else(|| "not hashed".into()),
            })
            .collect(),
        parameters: serde_json::to_string_pretty(&m.parameters).unwrap_or_default(),
        model_record: serde_json::to_string_pretty(&m.model).unwrap_or_default(),
        compute: m
            .compute
            .as_ref()
            .map_or_else(|| "not recorded (written by a herd older than compute paths)".into(), compute_summary),
    }
}

/// `cpu avx512-vnni · int8 weights (from gguf) · int8 per block of 32 activations · f32 · herd 0.1.0`.
fn compute_summary(compute: &serde_json::Value) -> String {
    let field = |name: &str| compute.get(name).and_then(|v| v.as_str()).unwrap_or("?");
    let decode = compute.get("decode_weights").and_then(|v| v.as_str()).map(|d| format!(" (decoding {d})"));
    format!(
        "{} {} · {} weights{} (from {}) · {} activations · {} · herd {}",
        field("device"),
        field("isa"),
        field("weights"),
        decode.unwrap_or_default(),
        field("weights_from"),
        field("activations"),
        field("dtype"),
        field("herd_version")
    )
}

/// Runs whose compute paths differ from the first recorded one, each with what differs: their numbers
/// for the same prompts can differ for that reason alone.
pub(super) fn compute_differences(runs: &[&RunFolder]) -> Vec<String> {
    let recorded: Vec<(&RunFolder, &serde_json::Value)> =
        runs.iter().filter_map(|r| r.manifest.compute.as_ref().map(|c| (*r, c))).collect();
    let Some((first, reference)) = recorded.first() else { return Vec::new() };
    recorded
        .iter()
        .skip(1)
        .filter_map(|(run, compute)| {
            let mut parts = herd_store::compute_differences(reference, compute);
            if reference.get("herd_version") != compute.get("herd_version") {
                let version =
                    |c: &serde_json::Value| c.get("herd_version").and_then(|v| v.as_str()).unwrap_or("?").to_owned();
                parts.push(format!("herd_version: {} → {}", version(reference), version(compute)));
            }
            (!parts.is_empty()).then(|| {
                format!(
                    "{} computed differently from {}: {}",
                    run.manifest.run_id,
                    first.manifest.run_id,
                    parts.join("; ")
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_764_460_800 + 3_723), "2025-11-30 01:02:03");
    }

    #[test]
    fn a_killed_session_is_reported_by_its_commits_not_as_zero_units() {
        let identity = herd_store::RunIdentity {
            experiment: "e".into(),
            study: "conformity".into(),
            experiment_sha256: "ab".repeat(32),
            model: "m".into(),
            backend: "sim".into(),
            shard: "all".into(),
        };
        let mut m = Manifest { units_total: 1080, units_stored: 88, ..Manifest::new(identity) };
        let session = |status: &str| herd_store::Session {
            started: 0,
            ended: None,
            herd_version: "0".into(),
            git_commit: String::new(),
            device: "cpu".into(),
            compute: None,
            units_already_stored: 0,
            units_run: 88,
            status: status.into(),
        };
        for status in ["running", "interrupted"] {
            m.sessions = vec![session(status)];
            let line = units_line(&m);
            assert!(
                line.starts_with("88 units committed") && line.contains("of 1080") && !line.contains("0 of"),
                "{line}"
            );
        }
        m.sessions = vec![session("complete")];
        m.experiment_units_stored = 1080;
        assert_eq!(units_line(&m), "1080 of 1080 experiment units (88 with baseline candidates)");
    }
}
