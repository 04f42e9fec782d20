//! Allocation parsing: raw model text → points per roster id, or a flagged failure.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::ParseStatus;
use crate::roster::Roster;
use crate::scan::{self, Value};
use crate::strip::strip_reasoning;

/// At most this many brace spans are tried as the answer object, last first. Bounds
/// the work on adversarial input to a linear amount.
const MAX_CANDIDATES: usize = 64;
/// Spans nested deeper than this in the text are not tried.
const MAX_CANDIDATE_DEPTH: usize = 3;
/// Relative tolerance under which a raw sum counts as equal to the pool.
const SUM_TOLERANCE: f64 = 1e-9;

/// A fix that was needed to read the allocation. Any repair makes the status
/// [`ParseStatus::Repaired`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// Strings or keys in single quotes.
    SingleQuotes,
    /// A comma before a closing brace or bracket.
    TrailingComma,
    /// A key without quotes (`agent_01: 5`).
    UnquotedKey,
    /// `//` or `/* */` comments.
    Comments,
    /// Two entries with no comma between them.
    MissingComma,
    /// `NaN`, `Infinity`, `True`, `None` and the like (on keys that were dropped or
    /// values that did not matter; a NaN on a valid id is a failure).
    NonstandardLiteral,
    /// A number JSON does not allow: `+5`, `.5`, `5.`, `007`.
    NonstandardNumber,
    /// A number with a `%` sign.
    Percent,
    /// A number written as a string (`"25"`).
    StringNumber,
    /// A value that is not a whole number (`12.5`).
    NonInteger,
    /// A key that is a roster id only after lenient mapping (`7`, `Agent 7`).
    LenientKey,
    /// The decider's own id was among the keys and was dropped.
    DroppedDecider,
    /// Keys that are not roster ids were dropped.
    DroppedUnknown,
    /// The same id appeared twice with the same value.
    DuplicateKey,
    /// The raw sum was not the pool; the points were rescaled to it.
    Renormalised,
    /// More than one allocation-like object after the trace; the last one was used.
    MultipleObjects,
    /// The allocation object was nested inside another object or inside braces.
    NestedObject,
    /// An unclosed (truncated) object came after the one used.
    TruncatedObjectIgnored,
    /// The output ended inside a reasoning trace that came after the object used.
    UnclosedTraceAfterObject,
}

impl Repair {
    /// A short snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Repair::SingleQuotes => "single_quotes",
            Repair::TrailingComma => "trailing_comma",
            Repair::UnquotedKey => "unquoted_key",
            Repair::Comments => "comments",
            Repair::MissingComma => "missing_comma",
            Repair::NonstandardLiteral => "nonstandard_literal",
            Repair::NonstandardNumber => "nonstandard_number",
            Repair::Percent => "percent",
            Repair::StringNumber => "string_number",
            Repair::NonInteger => "non_integer",
            Repair::LenientKey => "lenient_key",
            Repair::DroppedDecider => "dropped_decider",
            Repair::DroppedUnknown => "dropped_unknown",
            Repair::DuplicateKey => "duplicate_key",
            Repair::Renormalised => "renormalised",
            Repair::MultipleObjects => "multiple_objects",
            Repair::NestedObject => "nested_object",
            Repair::TruncatedObjectIgnored => "truncated_object_ignored",
            Repair::UnclosedTraceAfterObject => "unclosed_trace_after_object",
        }
    }
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Why no allocation could be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    /// The pool given by the caller is not a positive finite number.
    #[error("invalid pool {0}: must be positive and finite")]
    InvalidPool(f64),
    /// Nothing but whitespace (after removing the trace).
    #[error("empty output")]
    Empty,
    /// The output ended inside a reasoning trace and nothing came before it.
    #[error("output ended inside an unclosed reasoning trace")]
    UnclosedTrace,
    /// No `{` in the answer text.
    #[error("no JSON object in the output")]
    NoObject,
    /// An object was opened and never closed, and no complete object came before it.
    #[error("the JSON object is truncated (never closed)")]
    Truncated,
    /// Braces were found but none held a readable object.
    #[error("no parseable JSON object")]
    Unparseable,
    /// The object was nested deeper than the parser follows.
    #[error("object nested too deeply")]
    TooDeep,
    /// Objects were read but none has a key that is a roster id other than the decider.
    #[error("no key is a valid recipient id ({dropped} key(s) dropped)")]
    NoValidKeys {
        /// Keys dropped as unknown or as the decider's own.
        dropped: u32,
    },
    /// A valid id's value is not a number.
    #[error("non-numeric value for {id}")]
    NonNumeric {
        /// The roster id.
        id: String,
    },
    /// A valid id's value is negative.
    #[error("negative value {value} for {id}")]
    Negative {
        /// The roster id.
        id: String,
        /// The value given.
        value: f64,
    },
    /// A valid id's value is NaN or infinite (including numbers too large for f64).
    #[error("non-finite value for {id}")]
    NonFinite {
        /// The roster id.
        id: String,
    },
    /// The same id was given two different values.
    #[error("conflicting values for {id}")]
    ConflictingDuplicate {
        /// The roster id.
        id: String,
    },
    /// All points are zero: there is nothing to renormalise.
    #[error("all values are zero: cannot renormalise to the pool")]
    ZeroSum,
    /// The values sum to more than f64 can hold.
    #[error("the values sum to infinity")]
    SumOverflow,
}

impl Failure {
    /// A short snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Failure::InvalidPool(_) => "invalid_pool",
            Failure::Empty => "empty",
            Failure::UnclosedTrace => "unclosed_trace",
            Failure::NoObject => "no_object",
            Failure::Truncated => "truncated",
            Failure::Unparseable => "unparseable",
            Failure::TooDeep => "too_deep",
            Failure::NoValidKeys { .. } => "no_valid_keys",
            Failure::NonNumeric { .. } => "non_numeric",
            Failure::Negative { .. } => "negative",
            Failure::NonFinite { .. } => "non_finite",
            Failure::ConflictingDuplicate { .. } => "conflicting_duplicate",
            Failure::ZeroSum => "zero_sum",
            Failure::SumOverflow => "sum_overflow",
        }
    }
}

/// A failure serialises as its code, so trial rows and `herd parse` output carry a stable token.
impl Serialize for Failure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// The result of [`parse_allocation`]. Serialises to the JSON row the CLI prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationParse {
    /// ok, repaired or failed.
    pub status: ParseStatus,
    /// Points per recipient: every roster id except the decider (0 for ids the model
    /// left out), summing to the pool. `None` when failed, unless a uniform fill was
    /// applied (then `filled` is true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<BTreeMap<String, f64>>,
    /// Keys dropped: the decider's own id plus keys that are not roster ids.
    pub dropped_keys: u32,
    /// Of `dropped_keys`, how many were the decider's own id.
    pub dropped_decider_keys: u32,
    /// Recipients the model left out (given 0 points).
    pub missing_keys: u32,
    /// Sum of the valid recipients' values before renormalisation, when it got that far.
    pub raw_sum: Option<f64>,
    /// Human-readable reason: the failure, or the repairs made; `None` when ok.
    pub reason: Option<String>,
    /// Machine-readable failure.
    pub failure: Option<Failure>,
    /// Machine-readable repairs, sorted.
    pub repairs: Vec<Repair>,
    /// Whether `allocation` is a uniform fill applied by the caller after a failure.
    pub filled: bool,
}

impl AllocationParse {
    fn failed(failure: Failure) -> Self {
        Self {
            status: ParseStatus::Failed,
            allocation: None,
            dropped_keys: 0,
            dropped_decider_keys: 0,
            missing_keys: 0,
            raw_sum: None,
            reason: Some(failure.to_string()),
            failure: Some(failure),
            repairs: Vec::new(),
            filled: false,
        }
    }

    /// Apply the uniform-fill policy: when the parse failed, give every recipient
    /// `pool / recipients` points and set `filled`. The status stays `failed` and the
    /// reason is kept, so analyses can include or exclude fills. A successful parse is
    /// returned unchanged.
    pub fn with_uniform_fill(mut self, roster: &Roster, decider: &str, pool: f64) -> Self {
        if self.allocation.is_none()
            && let Some(fill) = uniform_allocation(roster, decider, pool)
        {
            self.allocation = Some(fill);
            self.filled = true;
        }
        self
    }
}

/// The recipients of a decider: every roster id except the decider's (the decider is
/// resolved leniently, like a key).
pub fn recipients<'r>(roster: &'r Roster, decider: &str) -> Vec<&'r str> {
    let decider = roster.resolve(decider).map(|m| m.index);
    roster.ids().iter().enumerate().filter(|(i, _)| Some(*i) != decider).map(|(_, id)| id.as_str()).collect()
}

/// `pool / n` points to each of the decider's n recipients (100/19 in the default
/// design). `None` when the pool is not positive and finite or there are no recipients.
pub fn uniform_allocation(roster: &Roster, decider: &str, pool: f64) -> Option<BTreeMap<String, f64>> {
    let r = recipients(roster, decider);
    if r.is_empty() || !pool.is_finite() || pool <= 0.0 {
        return None;
    }
    let each = pool / r.len() as f64;
    Some(r.into_iter().map(|id| (id.to_owned(), each)).collect())
}

struct Candidate {
    entries: Vec<(String, Value)>,
    syntax: scan::Syntax,
    span: scan::Span,
}

/// Parse one raw model output (any bytes; invalid UTF-8 is replaced) into an
/// allocation of `pool` points over the roster minus `decider`.
///
/// See the crate docs for what makes the status ok, repaired or failed.
pub fn parse_allocation(raw: impl AsRef<[u8]>, roster: &Roster, decider: &str, pool: f64) -> AllocationParse {
    if !pool.is_finite() || pool <= 0.0 {
        return AllocationParse::failed(Failure::InvalidPool(pool));
    }
    let text = String::from_utf8_lossy(raw.as_ref());
    let stripped = strip_reasoning(&text);
    let answer = stripped.answer_text.as_str();
    if answer.trim().is_empty() {
        return AllocationParse::failed(if stripped.unclosed { Failure::UnclosedTrace } else { Failure::Empty });
    }

    let decider_index = roster.resolve(decider).map(|m| m.index);
    let spans = scan::object_spans(answer);
    if spans.is_empty() {
        return AllocationParse::failed(if stripped.unclosed { Failure::UnclosedTrace } else { Failure::NoObject });
    }
    let last_incomplete_start = spans.iter().filter(|s| !s.complete).map(|s| s.start).min();

    // Complete spans, last-ending first.
    let mut complete: Vec<scan::Span> =
        spans.iter().copied().filter(|s| s.complete && s.depth <= MAX_CANDIDATE_DEPTH).collect();
    complete.sort_by(|a, b| b.end.cmp(&a.end).then(a.start.cmp(&b.start)));

    let mut chosen: Option<Candidate> = None;
    let mut fallback: Option<Candidate> = None; // last parsed object, for NoValidKeys
    let mut earlier_allocations = 0usize;
    let mut too_deep = false;
    for span in complete.iter().take(MAX_CANDIDATES) {
        if let Some(c) = &chosen {
            // Only count objects that end before the chosen one starts.
            if span.end > c.span.start {
                continue;
            }
        }
        let Some(slice) = answer.get(span.start..span.end) else {
            continue;
        };
        let (entries, syntax) = match scan::parse_object(slice) {
            Ok(x) => x,
            Err(scan::ParseError::TooDeep) => {
                too_deep = true;
                continue;
            }
            Err(scan::ParseError::Syntax) => continue,
        };
        let looks_like_allocation =
            entries.iter().any(|(k, _)| roster.resolve(k).is_some_and(|m| Some(m.index) != decider_index));
        if chosen.is_some() {
            if looks_like_allocation {
                earlier_allocations += 1;
                break;
            }
            continue;
        }
        let cand = Candidate { entries, syntax, span: *span };
        if looks_like_allocation {
            chosen = Some(cand);
        } else if fallback.is_none() {
            fallback = Some(cand);
        }
    }

    let Some(cand) = chosen else {
        if let Some(fb) = fallback {
            let dropped = u32::try_from(fb.entries.len()).unwrap_or(u32::MAX);
            let decider_keys = fb
                .entries
                .iter()
                .filter(|(k, _)| decider_index.is_some() && roster.resolve(k).map(|m| m.index) == decider_index)
                .count();
            let mut p = AllocationParse::failed(Failure::NoValidKeys { dropped });
            p.dropped_keys = dropped;
            p.dropped_decider_keys = u32::try_from(decider_keys).unwrap_or(u32::MAX);
            return p;
        }
        let failure = if stripped.unclosed {
            Failure::UnclosedTrace
        } else if too_deep {
            Failure::TooDeep
        } else if last_incomplete_start.is_some() {
            Failure::Truncated
        } else {
            Failure::Unparseable
        };
        return AllocationParse::failed(failure);
    };

    let mut repairs: Vec<Repair> = Vec::new();
    let syn = cand.syntax;
    for (flag, r) in [
        (syn.single_quotes, Repair::SingleQuotes),
        (syn.trailing_comma, Repair::TrailingComma),
        (syn.unquoted_key, Repair::UnquotedKey),
        (syn.comments, Repair::Comments),
        (syn.missing_comma, Repair::MissingComma),
        (syn.nonstandard_literal, Repair::NonstandardLiteral),
        (syn.nonstandard_number, Repair::NonstandardNumber),
        (syn.percent, Repair::Percent),
        (earlier_allocations > 0, Repair::MultipleObjects),
        (cand.span.depth > 0, Repair::NestedObject),
        (last_incomplete_start.is_some_and(|s| s > cand.span.start), Repair::TruncatedObjectIgnored),
        (stripped.unclosed, Repair::UnclosedTraceAfterObject),
    ] {
        if flag {
            repairs.push(r);
        }
    }

    let ids = roster.ids();
    let mut values: Vec<Option<f64>> = vec![None; ids.len()];
    let mut dropped_unknown = 0u32;
    let mut dropped_decider = 0u32;
    for (key, value) in &cand.entries {
        let Some(m) = roster.resolve(key) else {
            dropped_unknown = dropped_unknown.saturating_add(1);
            continue;
        };
        if Some(m.index) == decider_index {
            dropped_decider = dropped_decider.saturating_add(1);
            continue;
        }
        let id = ids.get(m.index).cloned().unwrap_or_default();
        if !m.exact {
            repairs.push(Repair::LenientKey);
        }
        let v = match value {
            Value::Num(v) => *v,
            Value::Str(s) => match scan::number_in_string(s) {
                Some(v) => {
                    repairs.push(Repair::StringNumber);
                    if s.trim().ends_with('%') {
                        repairs.push(Repair::Percent);
                    }
                    v
                }
                None => {
                    return fail_with(Failure::NonNumeric { id }, dropped_unknown, dropped_decider);
                }
            },
            _ => return fail_with(Failure::NonNumeric { id }, dropped_unknown, dropped_decider),
        };
        if !v.is_finite() {
            return fail_with(Failure::NonFinite { id }, dropped_unknown, dropped_decider);
        }
        if v < 0.0 {
            return fail_with(Failure::Negative { id, value: v }, dropped_unknown, dropped_decider);
        }
        let v = v + 0.0; // -0.0 → 0.0
        if v.fract() != 0.0 {
            repairs.push(Repair::NonInteger);
        }
        let Some(slot) = values.get_mut(m.index) else {
            continue;
        };
        match slot {
            Some(prev) if *prev == v => repairs.push(Repair::DuplicateKey),
            Some(_) => {
                return fail_with(Failure::ConflictingDuplicate { id }, dropped_unknown, dropped_decider);
            }
            None => *slot = Some(v),
        }
    }
    if dropped_decider > 0 {
        repairs.push(Repair::DroppedDecider);
    }
    if dropped_unknown > 0 {
        repairs.push(Repair::DroppedUnknown);
    }

    let mut raw_sum = 0.0f64;
    let mut missing = 0u32;
    for (i, v) in values.iter().enumerate() {
        if Some(i) == decider_index {
            continue;
        }
        match v {
            Some(v) => raw_sum += v,
            None => missing = missing.saturating_add(1),
        }
    }
    let mut base = AllocationParse::failed(Failure::ZeroSum);
    base.dropped_keys = dropped_unknown.saturating_add(dropped_decider);
    base.dropped_decider_keys = dropped_decider;
    base.missing_keys = missing;
    base.raw_sum = Some(raw_sum);
    if !raw_sum.is_finite() {
        base.failure = Some(Failure::SumOverflow);
        base.reason = Some(Failure::SumOverflow.to_string());
        base.raw_sum = None;
        return base;
    }
    if raw_sum <= 0.0 {
        return base;
    }

    let exact_sum = (raw_sum - pool).abs() <= SUM_TOLERANCE * pool;
    if !exact_sum {
        repairs.push(Repair::Renormalised);
    }
    let mut allocation = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        if Some(i) == decider_index {
            continue;
        }
        let v = values.get(i).copied().flatten().unwrap_or(0.0);
        // Divide first: pool / raw_sum overflows for tiny (subnormal) sums.
        let points = if raw_sum == pool { v } else { v / raw_sum * pool };
        allocation.insert(id.clone(), points);
    }

    repairs.sort_unstable();
    repairs.dedup();
    base.status = if repairs.is_empty() { ParseStatus::Ok } else { ParseStatus::Repaired };
    base.reason =
        if repairs.is_empty() { None } else { Some(repairs.iter().map(|r| r.code()).collect::<Vec<_>>().join(", ")) };
    base.failure = None;
    base.repairs = repairs;
    base.allocation = Some(allocation);
    base
}

fn fail_with(failure: Failure, dropped_unknown: u32, dropped_decider: u32) -> AllocationParse {
    let mut p = AllocationParse::failed(failure);
    p.dropped_keys = dropped_unknown.saturating_add(dropped_decider);
    p.dropped_decider_keys = dropped_decider;
    p
}

/// Round an allocation to whole points that sum to `pool` exactly, by largest
/// remainder (Hamilton's method): each id gets the floor of its exact share of `pool`,
/// and the points left go one each to the largest fractional parts (ties: roster
/// order, i.e. key order). Negative, NaN and infinite values count as 0. `None` when
/// the map is empty or no value is positive.
pub fn round_to_pool(allocation: &BTreeMap<String, f64>, pool: u32) -> Option<BTreeMap<String, u32>> {
    let clean = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
    // Scale by the maximum first so that the sum cannot overflow.
    let max = allocation.values().copied().map(clean).fold(0.0f64, f64::max);
    if max <= 0.0 {
        return None;
    }
    let sum: f64 = allocation.values().map(|&v| clean(v) / max).sum();
    if sum <= 0.0 || !sum.is_finite() {
        return None;
    }
    let pool_f = f64::from(pool);
    let mut parts: Vec<(&String, u32, f64)> = allocation
        .iter()
        .map(|(k, &v)| {
            let quota = (clean(v) / max) / sum * pool_f;
            let floor = quota.floor().clamp(0.0, pool_f);
            // floor is an integer in [0, pool]; the cast is exact.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let whole = floor as u32;
            (k, whole, quota - floor)
        })
        .collect();
    let assigned: u64 = parts.iter().map(|p| u64::from(p.1)).sum();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    if assigned <= u64::from(pool) {
        let mut left = u64::from(pool) - assigned;
        // Largest remainder first; stable sort keeps key order among ties.
        order.sort_by(|&a, &b| {
            let fa = parts.get(a).map_or(0.0, |p| p.2);
            let fb = parts.get(b).map_or(0.0, |p| p.2);
            fb.total_cmp(&fa)
        });
        let mut k = 0usize;
        while left > 0 && !order.is_empty() {
            if let Some(p) = order.get(k % order.len()).and_then(|&i| parts.get_mut(i)) {
                p.1 = p.1.saturating_add(1);
            }
            left -= 1;
            k += 1;
        }
    } else {
        // Only reachable through floating-point error: take points back from the
        // smallest remainders among ids that have some.
        let mut excess = assigned - u64::from(pool);
        order.sort_by(|&a, &b| {
            let fa = parts.get(a).map_or(0.0, |p| p.2);
            let fb = parts.get(b).map_or(0.0, |p| p.2);
            fa.total_cmp(&fb)
        });
        for &i in order.iter().cycle().take(order.len().saturating_mul(2)) {
            if excess == 0 {
                break;
            }
            if let Some(p) = parts.get_mut(i)
                && p.1 > 0
            {
                p.1 -= 1;
                excess -= 1;
            }
        }
    }
    Some(parts.into_iter().map(|(k, v, _)| (k.clone(), v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster() -> Roster {
        Roster::with_default_ids(20).unwrap()
    }

    #[test]
    fn clean_ok() {
        let p = parse_allocation(r#"{"agent_02": 60, "agent_03": 40}"#, &roster(), "agent_01", 100.0);
        assert_eq!(p.status, ParseStatus::Ok, "{p:?}");
        let a = p.allocation.unwrap();
        assert_eq!(a.len(), 19);
        assert_eq!(a["agent_02"], 60.0);
        assert_eq!(p.missing_keys, 17);
        assert_eq!(p.raw_sum, Some(100.0));
    }

    #[test]
    fn renormalise_and_drop() {
        let p = parse_allocation(
            r#"{"agent_01": 10, "agent_02": 30, "agent_99": 5, "3": 20}"#,
            &roster(),
            "agent_01",
            100.0,
        );
        assert_eq!(p.status, ParseStatus::Repaired);
        assert_eq!(p.dropped_keys, 2);
        assert_eq!(p.dropped_decider_keys, 1);
        assert_eq!(p.raw_sum, Some(50.0));
        let a = p.allocation.unwrap();
        assert!((a["agent_02"] - 60.0).abs() < 1e-9);
        assert!((a["agent_03"] - 40.0).abs() < 1e-9);
        assert!(p.repairs.contains(&Repair::Renormalised));
        assert!(p.repairs.contains(&Repair::LenientKey));
    }

    #[test]
    fn zero_sum_fails_and_fill_is_flagged() {
        let p = parse_allocation(r#"{"agent_02": 0}"#, &roster(), "agent_01", 100.0);
        assert_eq!(p.failure, Some(Failure::ZeroSum));
        assert_eq!(p.raw_sum, Some(0.0));
        let f = p.with_uniform_fill(&roster(), "agent_01", 100.0);
        assert!(f.filled);
        assert_eq!(f.status, ParseStatus::Failed);
        let a = f.allocation.unwrap();
        assert_eq!(a.len(), 19);
        assert!((a["agent_20"] - 100.0 / 19.0).abs() < 1e-12);
        assert!(!a.contains_key("agent_01"));
    }

    #[test]
    fn largest_remainder() {
        let r = roster();
        let a = uniform_allocation(&r, "agent_01", 100.0).unwrap();
        let rounded = round_to_pool(&a, 100).unwrap();
        assert_eq!(rounded.values().sum::<u32>(), 100);
        // 100 = 19*5 + 5: the first five ids in key order get 6.
        assert_eq!(rounded["agent_02"], 6);
        assert_eq!(rounded["agent_06"], 6);
        assert_eq!(rounded["agent_07"], 5);
        let m: BTreeMap<String, f64> = [("a".to_owned(), 33.4), ("b".to_owned(), 33.3), ("c".to_owned(), 33.3)].into();
        assert_eq!(round_to_pool(&m, 100).unwrap().values().copied().collect::<Vec<_>>(), [34, 33, 33]);
        assert!(round_to_pool(&BTreeMap::new(), 100).is_none());
    }
}
