//! Parse and quality-control model outputs: raw generated text → an allocation of
//! points, an A/B answer, or a flagged failure. Model output is adversarial input:
//! nothing here panics, recurses without bound or goes quadratic, on any bytes.
//!
//! ```
//! use herd_parse::{parse_allocation, parse_answer, round_to_pool, Choice, ParseStatus, Roster};
//!
//! let roster = Roster::with_default_ids(20).expect("20 > 0"); // agent_01 … agent_20
//! let raw = "<think>Split it, keep nothing for me.</think>\n```json\n\
//!            {'agent_02': 50, \"3\": 30, \"agent_01\": 5, \"agent_04\": 20,}\n```";
//! let p = parse_allocation(raw, &roster, "agent_01", 100.0);
//! assert_eq!(p.status, ParseStatus::Repaired); // single quotes, trailing comma, "3", own id
//! assert_eq!(p.dropped_keys, 1);               // agent_01 is the decider
//! assert_eq!(p.raw_sum, Some(100.0));
//! let a = p.allocation.as_ref().expect("parsed");
//! assert_eq!(a.len(), 19);                     // every recipient, 0 if left out
//! assert_eq!(a["agent_03"], 30.0);
//! assert_eq!(round_to_pool(a, 100).expect("non-zero").values().sum::<u32>(), 100);
//!
//! let failed = parse_allocation("I'd rather not.", &roster, "agent_01", 100.0)
//!     .with_uniform_fill(&roster, "agent_01", 100.0);
//! assert_eq!(failed.status, ParseStatus::Failed);
//! assert!(failed.filled);                      // 100/19 each, flagged
//!
//! assert_eq!(parse_answer("The answer is **B**.").answer, Some(Choice::B));
//! assert_eq!(parse_answer("A or B, hard to say").status, ParseStatus::Failed);
//! ```
//!
//! # Allocation: what the parser does
//!
//! 1. Decode bytes as UTF-8, replacing invalid sequences.
//! 2. [`strip_reasoning`]: remove reasoning traces (`<think>…</think>` and the other
//!    families' markers listed there, an orphan `</think>`, an unclosed trace), chat
//!    special tokens and code-fence markers.
//! 3. Find brace spans in what is left and take **the last complete object that has at
//!    least one key mapping to a recipient** (a roster id other than the decider's).
//!    Prose around it is ignored; an object without recipient keys (`{"note": …}`) is
//!    skipped; an allocation wrapped in another object is found inside it.
//! 4. Map keys to roster ids ([`Roster`]): exactly, or leniently (`7`, `Agent 7`, `P7`,
//!    `agent_7`, `agent_07 [label]`) when unambiguous. Keys that are the decider's own
//!    id or no roster id are dropped and counted.
//! 5. Read values: numbers, numbers in strings, decimals. Renormalise to the pool.
//!
//! # Ok, repaired, failed
//!
//! **Ok**: the model did exactly what the prompt asked. After removing reasoning
//! traces, special tokens, code fences and surrounding prose (the expected wrappers),
//! there is one allocation object, in strict JSON (double-quoted keys, no trailing
//! comma, no comments), every key is exactly a recipient id, every value a
//! non-negative whole JSON number (`10.0` counts as whole), no id twice, and the values
//! sum to the pool (relative tolerance 1e-9). Ids left out get 0 and do not affect the
//! status (`missing_keys` counts them).
//!
//! **Repaired**: an allocation was produced, but only after at least one [`Repair`]:
//! single quotes, trailing comma, unquoted key, comments, missing comma, non-standard
//! literal or number (`+5`, `.5`, `007`), `%` signs, numbers in strings, non-whole
//! values, a leniently mapped key, a dropped decider or unknown key, an identical
//! duplicate, renormalisation (sum ≠ pool), several allocation objects (the last was
//! used), an object nested in another, a truncated object or an unclosed trace after
//! the object used. `reason` lists them; `repairs` has them as codes.
//!
//! **Failed**: no allocation. [`Failure`] says why: invalid pool, empty output, an
//! unclosed trace with no answer before it, no object, a truncated object, no
//! parseable object, nesting too deep, no recipient key, a non-numeric, negative, NaN
//! or infinite value on a recipient, two different values for one recipient, all-zero
//! values (nothing to renormalise), or a sum that overflows. A failed parse carries no
//! allocation unless the caller applies the uniform-fill policy
//! ([`AllocationParse::with_uniform_fill`]), which sets `filled` and leaves the status
//! failed, so analyses can be run with and without fills.
//!
//! Invariant (property-tested and fuzzed): whenever `allocation` is present, its keys
//! are exactly the recipients, every value is finite and non-negative, and the values
//! sum to the pool (up to floating-point rounding, 1e-9 relative).
//!
//! # Answers
//!
//! [`parse_answer`] reads A or B: ok for a bare letter, repaired when read from a
//! sentence, failed when absent or when both letters are given as answers.
//!
//! # Why a hand-written scanner
//!
//! `serde_json` rejects what models actually emit (single quotes, trailing commas,
//! comments, `NaN`, unquoted keys) and cannot find an object inside prose. A lenient
//! crate such as `json5` accepts more syntax but still needs the object cut out of the
//! text first, does not report *which* leniencies it used (we need that to tell ok
//! from repaired), does not bound nesting depth (a stack overflow on `{{{{…`), and
//! adds a parser-generator dependency. The scanner here is a few hundred lines,
//! linear, depth-bounded, records every repair, and depends on nothing.

mod allocation;
mod answer;
mod roster;
mod scan;
mod strip;

pub use allocation::{
    AllocationParse, Failure, Repair, parse_allocation, recipients, round_to_pool, uniform_allocation,
};
pub use answer::{AnswerFailure, AnswerParse, Choice, parse_answer};
pub use roster::{KeyMatch, Roster, RosterError};
pub use strip::{Stripped, strip_reasoning};

/// Outcome class of a parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParseStatus {
    /// Exactly what was asked for.
    Ok,
    /// Usable after repairs, which are recorded.
    Repaired,
    /// Not usable; the reason is recorded.
    Failed,
}

impl std::fmt::Display for ParseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ParseStatus::Ok => "ok",
            ParseStatus::Repaired => "repaired",
            ParseStatus::Failed => "failed",
        })
    }
}
