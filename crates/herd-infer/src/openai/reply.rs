//! Reading and checking a server's reply, the part of the `openai` backend that meets adversarial input.
//!
//! A reply body is parsed ([`parse_reply`], tolerating Python's bare `NaN`), then read for what the
//! request asked: the top log-probabilities of a scoring reply ([`read_top_logprobs`], then
//! [`checked_score`]: finite, a mass of at most 1 up to [`MASS_ROUNDING`], each answer in [0, 1]) or the
//! text and reasoning of a generation reply ([`read_generation`], the reasoning held to
//! `max_reasoning_bytes`). Kept apart from the HTTP side (`openai.rs`: requests, retries, redaction) so
//! that each rule a reply must meet sits in one place with its tests. A reply that breaks a rule is a
//! [`Refusal`]: a bad reply, retried like a transient failure, or one over a limit herd sets, which the
//! server would send again and so fails its request at once.

use super::ScoreApi;
use herd_backend::{AnswerScore, FinishReason, Generation, LOWER_BOUND_MIN, ScoreBound, ScoreResult, TopToken};
use serde_json::Value;
use std::collections::BTreeMap;

/// Most excess over 1 that a reply's probabilities may sum to and still be taken: float rounding (a
/// float32 log-probability of 0 for the top token and a few tiny ones beside it). Such a reply is
/// normalised (every probability divided by the sum); a larger excess is a bad reply.
pub const MASS_ROUNDING: f64 = 1e-6;

/// Why a reply that arrived whole (a 2xx JSON body) is not taken.
#[derive(Debug, PartialEq)]
pub(super) enum Refusal {
    /// Malformed or impossible (truncated, a missing field, probabilities past 1): a server under load
    /// may answer better next time, so it is retried.
    Bad(String),
    /// Over a limit herd sets (the reasoning cap): the server would send it again, and each try would
    /// cost the transfer, so the request fails at once.
    OverLimit(String),
}

impl From<String> for Refusal {
    fn from(problem: String) -> Self {
        Refusal::Bad(problem)
    }
}

impl From<&str> for Refusal {
    fn from(problem: &str) -> Self {
        Refusal::Bad(problem.to_owned())
    }
}

/// A reply body as JSON. Some servers (Python's `json.dumps`) write non-finite numbers as the bare words
/// `NaN`, `Infinity` and `-Infinity`, which are not JSON; they are read as `null`, so the reply's
/// check names the value as missing or not a number instead of calling the whole body unreadable.
pub(super) fn parse_reply(text: &str) -> std::result::Result<Value, serde_json::Error> {
    serde_json::from_str(text).or_else(|e| {
        if !(text.contains("NaN") || text.contains("Infinity")) {
            return Err(e);
        }
        serde_json::from_str(&non_finite_as_null(text)).map_err(|_| e)
    })
}

/// `text` with the bare words `NaN`, `Infinity` and `-Infinity` outside strings replaced by `null`.
fn non_finite_as_null(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i, mut in_string) = (0, 0, false);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            _ if !in_string => {
                for word in ["-Infinity", "Infinity", "NaN"] {
                    if bytes[i..].starts_with(word.as_bytes()) {
                        out.push_str(&text[copied..i]);
                        out.push_str("null");
                        copied = i + word.len();
                        i = copied - 1;
                        break;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// The returned top tokens with their log-probabilities (each spelling once, the first listing kept;
/// every entry checked finite and ≤ 0), and the prompt's token count when reported. Read in linear time;
/// the list is as long as the reply, which `max_reply_bytes` bounds ([`checked_score`] keeps the top-k).
pub(super) fn read_top_logprobs(
    reply: &Value,
    api: ScoreApi,
) -> std::result::Result<(Vec<(String, f64)>, usize), String> {
    let choice = reply.pointer("/choices/0").ok_or("no choices")?;
    let logprobs = choice.get("logprobs").filter(|v| !v.is_null()).ok_or("no logprobs: the server ignored `logprobs` (llama.cpp needs a build with logprobs, vLLM --max-logprobs ≥ top_logprobs)")?;
    let mut top = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |token: &str, lp: Option<f64>| -> std::result::Result<(), String> {
        let lp = lp.ok_or_else(|| {
            format!("the log-probability of `{token}` is missing or not a number (NaN, Infinity, null); rule: log-probabilities are finite numbers ≤ 0")
        })?;
        if !lp.is_finite() {
            return Err(format!(
                "the log-probability of `{token}` is {lp}; rule: log-probabilities are finite numbers ≤ 0"
            ));
        }
        if lp > MASS_ROUNDING {
            return Err(format!(
                "the log-probability of `{token}` is {lp}, a probability of {} above 1; rule: log-probabilities are ≤ 0",
                lp.exp()
            ));
        }
        // Servers may list a spelling twice (different token ids, same text); count each once.
        if seen.insert(token.to_owned()) {
            top.push((token.to_owned(), lp));
        }
        Ok(())
    };
    match api {
        ScoreApi::Chat => {
            let list = logprobs
                .pointer("/content/0/top_logprobs")
                .and_then(Value::as_array)
                .ok_or("no content[0].top_logprobs")?;
            for entry in list {
                let token = entry.get("token").and_then(Value::as_str).ok_or("a top_logprobs entry without `token`")?;
                add(token, entry.get("logprob").and_then(Value::as_f64))?;
            }
        }
        ScoreApi::Completions => {
            let map = logprobs.pointer("/top_logprobs/0").and_then(Value::as_object).ok_or("no top_logprobs[0]")?;
            for (token, lp) in map {
                add(token, lp.as_f64())?;
            }
        }
    }
    if top.is_empty() {
        return Err("an empty top_logprobs list".into());
    }
    let prompt_tokens = reply.pointer("/usage/prompt_tokens").and_then(Value::as_u64).unwrap_or(0) as usize;
    Ok((top, prompt_tokens))
}

/// The answers' scores from a reply's top tokens, checked before anything is stored: every
/// log-probability finite and ≤ 0, the returned probabilities summing to at most 1 (an excess of at most
/// [`MASS_ROUNDING`] is float rounding and normalised away; a larger one is a bad reply), and every
/// answer's probability finite and in [0, 1]. Of a list longer than `keep`, the top-k asked for (a
/// server may add the sampled token; a hostile one may send 100,000 entries), every entry counts in
/// the mass check, and then only the `keep` most probable are scored (a dropped token is no more probable
/// than any kept one, so the bounds stay sound); linear time apart from sorting the kept. The error names
/// the rule, the answers and the numbers; the caller retries it like any bad reply.
pub fn checked_score(
    top: &[(String, f64)],
    answers: &[String],
    prompt_tokens: usize,
    keep: usize,
) -> std::result::Result<ScoreResult, String> {
    if let Some((token, lp)) = top.iter().find(|(_, lp)| !lp.is_finite() || *lp > MASS_ROUNDING) {
        return Err(format!(
            "the log-probability of `{token}` is {lp}; rule: log-probabilities are finite numbers ≤ 0"
        ));
    }
    let returned: f64 = top.iter().map(|(_, lp)| lp.exp()).sum();
    let describe = |top: &[(String, f64)]| {
        let raw = score_from_top_logprobs(top, answers, prompt_tokens);
        raw.answers.iter().map(|(a, s)| format!("P({a}) = {}", s.p)).collect::<Vec<_>>().join(", ")
    };
    if !returned.is_finite() || returned > 1.0 + MASS_ROUNDING {
        return Err(format!(
            "{}: the {} returned probabilities sum to {returned}; rule: they sum to at most 1 (an excess up to {MASS_ROUNDING} is rounding, normalised)",
            describe(top),
            top.len()
        ));
    }
    let shift = if returned > 1.0 { returned.ln() } else { 0.0 };
    let mut kept: Vec<(String, f64)> = top.iter().map(|(t, lp)| (t.clone(), (lp - shift).min(0.0))).collect();
    let keep = keep.max(1);
    if kept.len() > keep {
        kept.select_nth_unstable_by(keep - 1, |a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        kept.truncate(keep);
    }
    let top = &kept[..];
    let mut result = score_from_top_logprobs(top, answers, prompt_tokens);
    for score in result.answers.values_mut() {
        // Rounding of the division above, no more: the mass check bounds every sum of returned tokens.
        if score.p > 1.0 && score.p <= 1.0 + MASS_ROUNDING {
            score.p = 1.0;
        }
    }
    // The answers' mass is not checked against 1: answers outside the top-k each carry the same upper
    // bound (the mass left out), and bounds may sum past 1. The returned answers' sum is a sum of
    // distinct returned tokens, which the check above bounds.
    result.mass = result.answers.values().map(|s| s.p).sum();
    let bad = result.answers.iter().find(|(_, s)| !(s.p.is_finite() && (0.0..=1.0).contains(&s.p)));
    if let Some((answer, s)) = bad {
        return Err(format!(
            "{}: P({answer}) = {}; rule: an answer's probability is a finite number in [0, 1]",
            describe(top),
            s.p
        ));
    }
    Ok(result)
}

/// Sums, for each answer, the probabilities of the returned tokens that spell it (leading whitespace
/// stripped). An answer none of whose spellings was returned is bounded by the probability the server
/// left out, `1 − Σ top`, and flagged [`ScoreBound::Upper`]. An answer returned as `A` but not as
/// ` A` (or the reverse) is flagged [`ScoreBound::Lower`] when the missing spelling could carry
/// [`LOWER_BOUND_MIN`] or more: it is not in the top-k, so it carries at most the smallest returned
/// probability, and at most what the server left out.
pub fn score_from_top_logprobs(top: &[(String, f64)], answers: &[String], prompt_tokens: usize) -> ScoreResult {
    let mut sorted: Vec<(String, f64)> = Vec::with_capacity(top.len());
    let mut seen = std::collections::HashSet::with_capacity(top.len());
    for (token, lp) in top {
        // Servers may list a spelling twice (different token ids, same text); count each once.
        if seen.insert(token.as_str()) {
            sorted.push((token.clone(), *lp));
        }
    }
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let returned: f64 = sorted.iter().map(|(_, lp)| lp.exp()).sum();
    let left_out = (1.0 - returned).clamp(0.0, 1.0);
    let smallest_returned = sorted.last().map_or(0.0, |(_, lp)| lp.exp());
    let missing_at_most = left_out.min(smallest_returned);
    let mut scores = BTreeMap::new();
    for answer in answers {
        let spellings: Vec<f64> = sorted.iter().filter(|(t, _)| t.trim_start() == answer).map(|(_, lp)| *lp).collect();
        let score = if spellings.is_empty() {
            AnswerScore { p: left_out, logit: left_out.ln() as f32, token_ids: Vec::new(), bound: ScoreBound::Upper }
        } else {
            let max = spellings.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let spelled = |text: &str| sorted.iter().any(|(t, _)| t == text);
            let partial = !(spelled(answer) && spelled(&format!(" {answer}")));
            let bound =
                if partial && missing_at_most >= LOWER_BOUND_MIN { ScoreBound::Lower } else { ScoreBound::Exact };
            AnswerScore {
                p: spellings.iter().map(|lp| lp.exp()).sum(),
                logit: max as f32,
                token_ids: Vec::new(),
                bound,
            }
        };
        scores.insert(answer.clone(), score);
    }
    let top = sorted
        .iter()
        .take(10)
        .map(|(t, lp)| TopToken { id: None, text: t.clone(), p: lp.exp(), logit: *lp as f32 })
        .collect();
    ScoreResult {
        mass: scores.values().map(|s: &AnswerScore| s.p).sum(),
        answers: scores,
        top,
        prompt_tokens,
        reused_tokens: 0,
    }
}

/// The text, reasoning, finish reason and token counts of a chat-completions reply. Reasoning longer than
/// `max_reasoning_bytes` is refused ([`Refusal::OverLimit`]) before it is copied: the body cap
/// (`max_reply_bytes`) bounds what is read, this bounds what one generation keeps of a model's thinking.
pub(super) fn read_generation(reply: &Value, max_reasoning_bytes: u64) -> std::result::Result<Generation, Refusal> {
    let choice = reply.pointer("/choices/0").ok_or("no choices")?;
    let message = choice.get("message").ok_or("no message")?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(_) => return Err("`content` is not a string".into()),
    };
    // vLLM and SGLang name it `reasoning_content`, some servers `reasoning`.
    let reasoning = ["reasoning_content", "reasoning"].iter().find_map(|k| message.get(*k).and_then(Value::as_str));
    if let Some(r) = reasoning.filter(|r| r.len() as u64 > max_reasoning_bytes) {
        return Err(Refusal::OverLimit(format!(
            "the reply's reasoning is {} bytes, longer than {}, the most herd keeps of one reply's reasoning; fix: raise --max-reasoning-mb if such reasoning is expected, or limit the server's reasoning (max_tokens / a reasoning budget)",
            r.len(),
            megabytes(max_reasoning_bytes, "--max-reasoning-mb")
        )));
    }
    let reasoning = reasoning.map(str::to_owned);
    let finish_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => FinishReason::Length,
        Some("stop") | Some("eos") | None => FinishReason::Eos,
        Some(_) => FinishReason::Eos,
    };
    let usage = |k: &str| reply.pointer(&format!("/usage/{k}")).and_then(Value::as_u64).unwrap_or(0) as usize;
    Ok(Generation {
        text,
        prompt_tokens: usage("prompt_tokens"),
        completion_tokens: usage("completion_tokens"),
        finish_reason,
        constrained: false,
        reasoning,
    })
}

/// A byte count as megabytes, as the size flags (`--max-reply-mb`, `--max-reasoning-mb`) give it, with
/// the flag: `1 MB (--max-reasoning-mb 1)`.
pub(super) fn megabytes(bytes: u64, flag: &str) -> String {
    let mb = bytes as f64 / f64::from(1u32 << 20);
    format!("{} MB ({flag} {})", trim_float(mb), trim_float(mb))
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn top(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|(t, p)| ((*t).to_owned(), p.ln())).collect()
    }

    #[test]
    fn answers_sum_every_spelling_and_missing_answers_are_bounded() {
        let answers = vec!["A".to_owned(), "B".to_owned()];
        let result = score_from_top_logprobs(&top(&[("A", 0.5), (" A", 0.2), ("The", 0.1)]), &answers, 7);
        assert!((result.answers["A"].p - 0.7).abs() < 1e-12);
        assert_eq!(result.answers["A"].bound, ScoreBound::Exact, "both spellings of A were returned");
        let b = &result.answers["B"];
        assert!(
            b.bound == ScoreBound::Upper && (b.p - 0.2).abs() < 1e-12,
            "B is bounded by the mass not returned: {b:?}"
        );
        assert_eq!(result.top[0].text, "A");
        assert_eq!(result.prompt_tokens, 7);
    }

    #[test]
    fn an_answer_missing_one_spelling_is_a_lower_bound_when_that_spelling_could_matter() {
        let answers = vec!["A".to_owned(), "B".to_owned()];
        // " A" is not returned; it could carry up to min(left out 0.1, smallest returned 0.05).
        let r = score_from_top_logprobs(&top(&[("A", 0.6), ("B", 0.2), (" B", 0.05), ("The", 0.05)]), &answers, 3);
        assert_eq!(r.answers["A"].bound, ScoreBound::Lower);
        assert!((r.answers["A"].p - 0.6).abs() < 1e-12);
        assert_eq!(r.answers["B"].bound, ScoreBound::Exact);
        // A long top-k whose smallest entry is tiny leaves no room for the missing spelling.
        let mut long = vec![("A", 0.9), ("B", 0.0995)];
        long.extend([("x", 0.0001), ("y", 0.0001), ("z", 0.0001)]);
        let r = score_from_top_logprobs(&top(&long), &answers, 3);
        assert_eq!(r.answers["A"].bound, ScoreBound::Exact, "{:?}", r.answers["A"]);
        // Nothing left out: nothing can be missing.
        let r = score_from_top_logprobs(&top(&[("A", 0.7), ("B", 0.3)]), &answers, 3);
        assert!(r.answers.values().all(|s| s.bound == ScoreBound::Exact));
    }

    fn answers() -> Vec<String> {
        vec!["A".to_owned(), "B".to_owned()]
    }

    fn raw(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|(t, lp)| ((*t).to_owned(), *lp)).collect()
    }

    #[test]
    fn a_mass_over_one_by_rounding_is_normalised_and_a_larger_one_refused() {
        // float32 rounding of a confident model: P(A) = 1 + e^-17 unchecked.
        let r = checked_score(&raw(&[("A", 0.0), (" A", -17.0), ("B", -19.0)]), &answers(), 3, 20).unwrap();
        assert!(r.answers.values().all(|s| (0.0..=1.0).contains(&s.p)), "{r:?}");
        assert!(r.mass <= 1.0 && r.answers["A"].p > 0.999_999, "{r:?}");
        for (bad, says) in [
            (raw(&[("A", 0.0), ("B", 0.0)]), "sum to 2"),
            (raw(&[("A", -0.01), ("B", -0.01)]), "sum to 1.98"),
            (raw(&[("A", f64::NAN), ("B", -1.0)]), "`A` is NaN"),
            (raw(&[("A", 0.5), ("B", -1.0)]), "`A` is 0.5"),
        ] {
            let e = checked_score(&bad, &answers(), 3, 20).unwrap_err();
            assert!(e.contains(says) && e.contains("rule:"), "{e}");
        }
        // Answers outside the top-k each carry the same upper bound; together they may pass 1.
        let r = checked_score(&raw(&[("The", 0.3f64.ln())]), &answers(), 3, 1).unwrap();
        assert!(r.answers.values().all(|s| s.bound == ScoreBound::Upper && (s.p - 0.7).abs() < 1e-12), "{r:?}");
        // The error names the answers' probabilities.
        let e = checked_score(&raw(&[("A", 0.0), ("B", 0.0)]), &answers(), 3, 20).unwrap_err();
        assert!(e.contains("P(A) = 1") && e.contains("P(B) = 1"), "{e}");
    }

    #[test]
    fn nan_written_as_a_bare_word_or_missing_is_a_bad_reply_naming_the_token() {
        let body = r#"{"choices":[{"logprobs":{"content":[{"top_logprobs":[{"token":"A","logprob":NaN},{"token":"NaN","logprob":-Infinity}]}]}}]}"#;
        let reply = parse_reply(body).unwrap();
        let e = read_top_logprobs(&reply, ScoreApi::Chat).unwrap_err();
        assert!(e.contains("`A` is missing or not a number") && e.contains("rule:"), "{e}");
        assert_eq!(non_finite_as_null(r#"["NaN", NaN, -Infinity, "a\"NaN"]"#), r#"["NaN", null, null, "a\"NaN"]"#);
        assert!(parse_reply("{cut").is_err());
    }

    #[test]
    fn a_long_top_logprobs_list_is_read_in_linear_time_and_cut_to_what_was_asked() {
        let mut list = vec![json!({"token": "A", "logprob": -0.4}), json!({"token": "B", "logprob": -1.2})];
        list.extend((0..200_000).map(|i| json!({"token": format!("t{i}"), "logprob": -30.0})));
        let reply = json!({"choices": [{"logprobs": {"content": [{"top_logprobs": list}]}}]});
        let started = std::time::Instant::now();
        let (top, _) = read_top_logprobs(&reply, ScoreApi::Chat).unwrap();
        let r = checked_score(&top, &answers(), 3, 20).unwrap();
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert!((r.answers["A"].p - (-0.4f64).exp()).abs() < 1e-12);
        assert!(r.top.len() <= 10);
        // A long list whose entries together carry more than 1 is refused, whatever is kept.
        let many =
            raw(&[("A", -0.4)]).into_iter().chain((0..1000).map(|i| (format!("t{i}"), -5.0))).collect::<Vec<_>>();
        assert!(checked_score(&many, &answers(), 3, 20).unwrap_err().contains("1001 returned probabilities"));
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        for reply in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{"logprobs": null}]}),
            json!({"choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": "A", "logprob": "x"}]}]}}]}),
            json!({"choices": [{"logprobs": {"content": [{"top_logprobs": []}]}}]}),
            json!({"choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": "A", "logprob": 3.0}]}]}}]}),
        ] {
            assert!(read_top_logprobs(&reply, ScoreApi::Chat).is_err(), "{reply}");
        }
        for reply in [json!({}), json!({"choices": [{}]}), json!({"choices": [{"message": {"content": 5}}]})] {
            assert!(read_generation(&reply, u64::MAX).is_err(), "{reply}");
        }
        let g = read_generation(&json!({"choices": [{"message": {"content": "{}", "reasoning_content": "hm"}, "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}), u64::MAX).unwrap();
        assert_eq!(
            (g.finish_reason, g.reasoning.as_deref(), g.completion_tokens),
            (FinishReason::Length, Some("hm"), 2)
        );
    }

    #[test]
    fn reasoning_over_the_cap_is_refused_naming_the_cap_and_at_the_cap_is_kept() {
        const CAP: u64 = 1 << 20;
        let reply = |reasoning: &str, key: &str| json!({"choices": [{"message": {"content": "{}", key: reasoning}, "finish_reason": "stop"}]});
        for key in ["reasoning_content", "reasoning"] {
            let at_cap = "x".repeat(CAP as usize);
            let g = read_generation(&reply(&at_cap, key), CAP).unwrap();
            assert_eq!(g.reasoning.map(|r| r.len()), Some(CAP as usize), "{key}: reasoning at the cap is kept");
            let over = "x".repeat(CAP as usize + 1);
            let Err(Refusal::OverLimit(e)) = read_generation(&reply(&over, key), CAP) else {
                panic!("{key}: reasoning one byte over the cap is not refused as over the limit");
            };
            assert!(
                e.contains(&format!("{} bytes", CAP + 1))
                    && e.contains("1 MB (--max-reasoning-mb 1)")
                    && e.contains("fix: raise --max-reasoning-mb"),
                "{key}: the error names the size, the cap and the flag: {e}"
            );
        }
        // A fractional cap is named as given.
        let Err(Refusal::OverLimit(e)) = read_generation(&reply(&"x".repeat(600_000), "reasoning"), 1 << 19) else {
            panic!("600 kB of reasoning over a 0.5 MB cap");
        };
        assert!(e.contains("0.5 MB (--max-reasoning-mb 0.5)"), "{e}");
    }
}
