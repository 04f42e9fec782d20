//! Two short blocks under the scorecard: data-quality banners (a model whose answers the analyses had
//! to repair, or whose probability mass sits mostly off the two answers: its numbers mean less than
//! they seem to) and the run facts (duration, units, tokens, machine, herd version), each one line.
//! Both read the quality tables herd-analysis computed and the run manifests; nothing is estimated here.

use std::collections::BTreeMap;

use herd_analysis::claims::PARSED_MIN;
use herd_analysis::results::{Results, RunFolder};

/// Mean P(A) + P(B) below which most of a model's next-token probability is on neither answer.
const MASS_MIN: f64 = 0.5;

/// `4 of 320`.
fn of(part: f64, whole: f64) -> String {
    format!("{} of {}", part.round() as i64, whole.round() as i64)
}

/// `0.17` or `0.17–0.37`.
fn range(values: &[f64]) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if format!("{lo:.2}") == format!("{hi:.2}") { format!("{lo:.2}") } else { format!("{lo:.2}–{hi:.2}") }
}

/// Conformity models whose mean P(A) + P(B) is below [`MASS_MIN`] on some task.
fn low_mass(results: &Results) -> Vec<String> {
    let Some(c) = &results.conformity else { return Vec::new() };
    let q = &c.quality;
    // model → (task, mean mass) below the line
    let mut low: BTreeMap<&str, Vec<(&str, f64)>> = BTreeMap::new();
    for r in 0..q.n_rows() {
        let (Some(model), Some(task), Some(mass)) =
            (q.text("model", r), q.text("task", r), q.number("mean_mass_ab", r))
        else {
            continue;
        };
        if mass < MASS_MIN {
            low.entry(model).or_default().push((task, mass));
        }
    }
    low.into_iter()
        .map(|(model, tasks)| {
            let masses: Vec<f64> = tasks.iter().map(|(_, m)| *m).collect();
            let names: Vec<&str> = tasks.iter().map(|(t, _)| *t).collect();
            format!(
                "Answer mass: {model} puts {} of its next-token probability on A or B (mean P(A) + P(B) on {}): most \
                 of it is on neither answer, so its p_wrong_full is small for that reason alone and its p_wrong_ab is \
                 read from a small share of what it says.",
                range(&masses),
                names.join(", ")
            )
        })
        .collect()
}

/// Minimal-group models with fewer than [`PARSED_MIN`] of their allocations parsed as written.
fn repaired_allocations(results: &Results) -> Vec<String> {
    let Some(m) = &results.minimal_group else { return Vec::new() };
    let q = &m.quality;
    // model → (deciders, parsed as written, filled)
    let mut counts: BTreeMap<&str, (f64, f64, f64)> = BTreeMap::new();
    for r in 0..q.n_rows() {
        let (Some(model), Some(n), Some(parsed), Some(filled)) =
            (q.text("model", r), q.number("deciders", r), q.number("parsed_share", r), q.number("filled_share", r))
        else {
            continue;
        };
        let e = counts.entry(model).or_default();
        e.0 += n;
        e.1 += n * parsed;
        e.2 += n * filled;
    }
    counts
        .into_iter()
        .filter(|(_, (n, parsed, _))| *n > 0.0 && parsed / n < PARSED_MIN)
        .map(|(model, (n, parsed, filled))| {
            format!(
                "Allocations: {} of {model}'s allocations parsed as written; {} were repaired (rescaled to the pool \
                 or otherwise fixed) and {} filled uniformly after a parse failure, so its favouritism is read mostly \
                 from points herd made up or rescaled (the table allocation_quality; the paper parsed over 98.8%).",
                of(parsed, n),
                of(n - parsed - filled, n),
                of(filled, n)
            )
        })
        .collect()
}

/// The data-quality banners of `results`, each one sentence; empty for clean data.
pub(crate) fn banners(results: &Results) -> Vec<String> {
    let mut lines = low_mass(results);
    lines.extend(repaired_allocations(results));
    lines
}

/// `5.3 min`, `2.1 h`, `40 s`.
fn duration(seconds: u64) -> String {
    match seconds {
        s if s < 90 => format!("{s} s"),
        s if s < 5400 => format!("{:.1} min", s as f64 / 60.0),
        s => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// A number with thousands separators: `95,360`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One run in a line: study · model, units, time over its sessions, what the model produced (`work`:
/// tokens generated, or that it was scored without generating), machine, herd version.
fn run_fact(study: &str, run: &RunFolder, work: Option<String>) -> String {
    let m = &run.manifest;
    let seconds: u64 = m.sessions.iter().filter_map(|s| s.ended.map(|e| e.saturating_sub(s.started))).sum();
    let sessions = match m.sessions.len() {
        1 => "1 session".to_owned(),
        n => format!("{n} sessions"),
    };
    let field = |name: &str| m.compute.as_ref().and_then(|c| c.get(name)).and_then(|v| v.as_str()).map(str::to_owned);
    let machine = match (field("device"), field("isa")) {
        (Some(device), Some(isa)) => format!("{device} {isa}"),
        (Some(device), None) => device,
        _ => m.sessions.last().map_or("an unrecorded device".to_owned(), |s| s.device.clone()),
    };
    let version = m.sessions.last().map_or_else(|| "?".to_owned(), |s| s.herd_version.clone());
    let work = work.map_or(String::new(), |w| format!(", {w}"));
    // A run folder written without a plan (a plain store, a test fixture) knows only its commits.
    let units = if m.units_total > 0 {
        format!("{} of {} experiment units", grouped(m.experiment_units_stored), grouped(m.units_total))
    } else {
        format!("{} units committed", grouped(m.units_stored))
    };
    format!(
        "{study} · {}: {units} in {} over {sessions}{work}; {machine}; herd {version}",
        m.identity.model,
        duration(seconds)
    )
}

/// Generated tokens per model of the minimal-group quality table (deciders × mean tokens generated).
fn generated_tokens(results: &Results) -> BTreeMap<String, u64> {
    let mut tokens: BTreeMap<String, f64> = BTreeMap::new();
    if let Some(m) = &results.minimal_group {
        let q = &m.quality;
        for r in 0..q.n_rows() {
            if let (Some(model), Some(n), Some(mean)) =
                (q.text("model", r), q.number("deciders", r), q.number("mean_tokens_generated", r))
            {
                *tokens.entry(model.to_owned()).or_default() += n * mean;
            }
        }
    }
    tokens.into_iter().map(|(model, t)| (model, t.round() as u64)).collect()
}

/// One line per run of `results`.
pub(crate) fn run_facts(results: &Results) -> Vec<String> {
    let tokens = generated_tokens(results);
    // A conformity trial reads the answer's probability from one forward pass: nothing is generated.
    let scored = || Some("scored from next-token probabilities, no tokens generated".to_owned());
    let conformity = results.conformity.iter().flat_map(|c| &c.runs).map(|r| run_fact("conformity", r, scored()));
    let runs: Vec<&RunFolder> = results.minimal_group.iter().flat_map(|m| &m.runs).collect();
    let minimal_group = runs.iter().map(|r| {
        // The quality table counts per model: a model's tokens are one run's only where no other run
        // (a shard, a second session folder) has that model.
        let model = &r.manifest.identity.model;
        let alone = runs.iter().filter(|o| &o.manifest.identity.model == model).count() == 1;
        let generated =
            tokens.get(model).copied().filter(|_| alone).map(|t| format!("{} tokens generated", grouped(t)));
        run_fact("minimal groups", r, generated)
    });
    conformity.chain(minimal_group).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_at_a_glance() {
        assert_eq!(grouped(95_360), "95,360");
        assert_eq!(grouped(320), "320");
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(duration(40), "40 s");
        assert_eq!(duration(318), "5.3 min");
        assert_eq!(duration(7560), "2.1 h");
        assert_eq!(range(&[0.17, 0.37, 0.2]), "0.17–0.37");
        assert_eq!(range(&[0.171, 0.169]), "0.17");
        assert_eq!(of(4.0, 320.0), "4 of 320");
    }
}
