//! Fixtures the store's integration tests share: a run's identity and a decider's row.

use herd_store::{AllocationDeciderRow, RunIdentity};

/// The identity of a run of experiment `exp` on the sim backend with `model`, shard `shard`.
pub fn identity(model: &str, shard: &str) -> RunIdentity {
    RunIdentity {
        experiment: "exp".into(),
        study: "minimal-group".into(),
        experiment_sha256: "ab".repeat(32),
        model: model.into(),
        backend: "sim".into(),
        shard: shard.into(),
    }
}

/// Decider `decider` of society `unit`, giving `points` to agent 1 and the rest to agent 2; every fifth
/// decider's allocation was filled.
pub fn decider(unit: &str, decider: i64, points: i64) -> AllocationDeciderRow {
    AllocationDeciderRow {
        run_id: "r".into(),
        unit_id: unit.into(),
        experiment: "exp".into(),
        model: "m".into(),
        backend: "sim".into(),
        reasoning: "off".into(),
        instrument: "points".into(),
        labels: "visible".into(),
        m: 3,
        seed: decider * 7,
        swap_pass: "original".into(),
        decider,
        decider_id: format!("agent-{decider}"),
        minority_decider: decider % 3 == 0,
        decider_group: "Feltu".into(),
        prompt_hash: format!("{:016x}", decider * 7919),
        raw_output: format!("{{\"agent-1\": {points}, \"agent-2\": {}}}", 100 - points),
        reasoning_output: None,
        stripped_output: String::new(),
        parse_status: "ok".into(),
        filled: decider % 5 == 0,
        qc_flags: String::new(),
        finish_reason: "stop".into(),
        prompt_tokens: 400 + decider,
        tokens_generated: 20,
        latency_s: 0.01,
    }
}
