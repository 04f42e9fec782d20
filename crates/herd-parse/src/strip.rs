//! Reasoning-trace, special-token and code-fence stripping.
//!
//! Model families mark their hidden reasoning differently. We recognise:
//!
//! | family | opens | closes |
//! |---|---|---|
//! | Qwen3, DeepSeek-R1 and its distills, Phi-4-reasoning, QwQ | `<think>` | `</think>` |
//! | assorted fine-tunes | `<thinking>`, `<thought>`, `<reasoning>` | the matching close tag |
//! | Sky-T1 / OpenThoughts style (the origin of Phi-4-reasoning's "Thought / Solution" prompt) | `<\|begin_of_thought\|>` | `<\|end_of_thought\|>` |
//! | Kimi | `◁think▷` | `◁/think▷` |
//! | Magistral | `[THINK]` | `[/THINK]` |
//! | Seed-OSS | `<seed:think>` | `</seed:think>` |
//! | gpt-oss (harmony) | `<\|channel\|>analysis<\|message\|>` | `<\|end\|>` or `<\|channel\|>final<\|message\|>` |
//!
//! Tags match ASCII-case-insensitively. A close marker with no open marker before it
//! (DeepSeek-R1 distills whose chat template already ends the prompt with `<think>`)
//! makes everything before it a trace. An open marker with no close marker makes the
//! rest of the text a trace (`unclosed`: the generation was most likely cut off while
//! thinking).
//!
//! Phi-4-reasoning is prompted to answer in a "Thought" section and a "Solution"
//! section. Besides the tags, a line that is only a `Thought`/`Thoughts`/
//! `Thought section` header (markdown `#`, `**` and a trailing colon allowed) starts a
//! trace that a later `Solution`/`Solution section`/`Final answer` header line ends;
//! a Thought header with no Solution header after it is left alone.
//!
//! Then every chat special token (`<|…|>`, DeepSeek's full-width `<｜…｜>`, `</s>`) is
//! removed, including Sky-T1's `<|begin_of_solution|>`, and so are code-fence markers
//! (```` ``` ```` with its info string, e.g. ```` ```json ````).

/// The result of [`strip_reasoning`]: the reasoning trace and the text that is left to
/// be read as the answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Stripped {
    /// Everything recognised as reasoning, trace segments joined by newlines.
    pub trace: String,
    /// The text outside any trace, with special tokens and code-fence markers removed.
    pub answer_text: String,
    /// Whether any trace marker was seen.
    pub had_trace: bool,
    /// Whether the output ended inside a trace (an open marker never closed).
    pub unclosed: bool,
}

/// Kinds of markers. The gpt-oss analysis channel is special: its `<|end|>` is a close
/// only while inside it (elsewhere it is an ordinary special token).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Open,
    Close,
    HarmonyOpen,
    HarmonyFinal,
    HarmonyEnd,
}

const MARKERS: &[(&str, Kind)] = &[
    ("<think>", Kind::Open),
    ("</think>", Kind::Close),
    ("<thinking>", Kind::Open),
    ("</thinking>", Kind::Close),
    ("<thought>", Kind::Open),
    ("</thought>", Kind::Close),
    ("<reasoning>", Kind::Open),
    ("</reasoning>", Kind::Close),
    ("<seed:think>", Kind::Open),
    ("</seed:think>", Kind::Close),
    ("<|begin_of_thought|>", Kind::Open),
    ("<|end_of_thought|>", Kind::Close),
    ("<|channel|>analysis<|message|>", Kind::HarmonyOpen),
    ("<|channel|>final<|message|>", Kind::HarmonyFinal),
    ("<|end|>", Kind::HarmonyEnd),
    ("[think]", Kind::Open),
    ("[/think]", Kind::Close),
    ("\u{25c1}think\u{25b7}", Kind::Open),
    ("\u{25c1}/think\u{25b7}", Kind::Close),
];

fn starts_with_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay.iter().zip(needle).all(|(a, b)| a.eq_ignore_ascii_case(b))
}

fn marker_at(bytes: &[u8], i: usize) -> Option<(usize, Kind)> {
    let rest = bytes.get(i..)?;
    let first = *rest.first()?;
    // '<', '[' or the lead byte of U+25C1 (Kimi's marker).
    if first != b'<' && first != b'[' && first != 0xE2 {
        return None;
    }
    MARKERS.iter().find(|(m, _)| starts_with_ci(rest, m.as_bytes())).map(|(m, k)| (m.len(), *k))
}

/// Separate reasoning traces from the answer text. Never panics; linear in the input.
///
/// ```
/// let s = herd_parse::strip_reasoning("<think>maybe 50/50?</think>\n```json\n{\"a\": 1}\n```");
/// assert_eq!(s.trace, "maybe 50/50?");
/// assert_eq!(s.answer_text.trim(), "{\"a\": 1}");
/// assert!(!s.unclosed);
/// ```
pub fn strip_reasoning(raw: &str) -> Stripped {
    let bytes = raw.as_bytes();
    let mut out = Stripped::default();
    let mut outside = String::new();
    let mut trace_parts: Vec<String> = Vec::new();
    // None: outside; Some((in a gpt-oss analysis channel?, start byte of the trace)).
    let mut inside: Option<(bool, usize)> = None;
    let mut seg_start = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        let Some((len, kind)) = marker_at(bytes, i) else {
            i += 1;
            continue;
        };
        // Markers start with an ASCII byte or with the lead byte of a char they match
        // whole, so i and i + len are char boundaries.
        let before = raw.get(seg_start..i).unwrap_or("");
        let mut consumed = true;
        match (inside, kind) {
            (None, Kind::Open | Kind::HarmonyOpen) => {
                outside.push_str(before);
                outside.push('\n');
                inside = Some((kind == Kind::HarmonyOpen, i + len));
                out.had_trace = true;
            }
            (None, Kind::Close) => {
                // Orphan close: everything so far was a trace whose open marker was in
                // the prompt (DeepSeek-R1 distill templates).
                outside.push_str(before);
                trace_parts.push(std::mem::take(&mut outside));
                out.had_trace = true;
            }
            (None, Kind::HarmonyFinal) => {
                outside.push_str(before);
                outside.push('\n');
            }
            (None, Kind::HarmonyEnd) | (Some((false, _)), Kind::HarmonyEnd) => {
                // An ordinary special token here; removed later with the others.
                consumed = false;
            }
            (Some((_, start)), Kind::Close | Kind::HarmonyFinal | Kind::HarmonyEnd) => {
                trace_parts.push(raw.get(start..i).unwrap_or("").to_owned());
                inside = None;
            }
            (Some(_), Kind::Open | Kind::HarmonyOpen) => {
                // Nested or repeated open: still inside the same trace.
            }
        }
        i += len;
        if consumed {
            seg_start = i;
        }
    }
    match inside {
        Some((_, start)) => {
            trace_parts.push(raw.get(start..).unwrap_or("").to_owned());
            out.unclosed = true;
        }
        None => outside.push_str(raw.get(seg_start..).unwrap_or("")),
    }

    let outside = strip_thought_sections(&outside, &mut trace_parts, &mut out.had_trace);
    let outside = remove_special_tokens(&outside);
    out.answer_text = remove_fences(&outside);
    let mut trace = String::new();
    for p in &trace_parts {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        if !trace.is_empty() {
            trace.push('\n');
        }
        trace.push_str(p);
    }
    out.trace = trace;
    out
}

fn header_word(line: &str) -> Option<bool> {
    // Some(true): a Thought header; Some(false): a Solution header.
    let t = line
        .trim()
        .trim_start_matches('#')
        .trim()
        .trim_matches(|c| c == '*' || c == '_')
        .trim()
        .trim_end_matches(':')
        .trim_matches(|c| c == '*' || c == '_')
        .trim_end_matches(':')
        .trim()
        .to_ascii_lowercase();
    match t.as_str() {
        "thought" | "thoughts" | "thought section" | "thinking" | "reasoning" => Some(true),
        "solution" | "solution section" | "final answer" | "final solution" => Some(false),
        _ => None,
    }
}

fn strip_thought_sections(text: &str, trace_parts: &mut Vec<String>, had_trace: &mut bool) -> String {
    let mut open: Option<usize> = None; // byte offset of the Thought header line
    let mut offset = 0usize;
    let mut cut: Option<(usize, usize)> = None;
    for line in text.split_inclusive('\n') {
        match header_word(line) {
            Some(true) if open.is_none() => open = Some(offset),
            Some(false) => {
                if let Some(start) = open {
                    cut = Some((start, offset + line.len()));
                    break;
                }
            }
            _ => {}
        }
        offset += line.len();
    }
    match cut {
        Some((a, b)) => {
            trace_parts.push(text.get(a..b).unwrap_or("").to_owned());
            *had_trace = true;
            let mut s = String::with_capacity(text.len());
            s.push_str(text.get(..a).unwrap_or(""));
            s.push_str(text.get(b..).unwrap_or(""));
            s
        }
        None => text.to_owned(),
    }
}

/// Remove `<|...|>`, `<｜...｜>` (DeepSeek's full-width bars) and `</s>` tokens. A token
/// name is at most 40 chars with no whitespace; anything else is kept as text.
fn remove_special_tokens(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    let mut copied = 0usize;
    let mut i = 0usize;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        if bytes.get(i) != Some(&b'<') {
            i += 1;
            continue;
        }
        let tail = text.get(i..).unwrap_or("");
        let token_len = if tail.starts_with("</s>") {
            Some(4)
        } else if tail.starts_with("<|") || tail.starts_with("<｜") {
            let (open, close) = if tail.starts_with("<|") { ("<|", "|>") } else { ("<｜", "｜>") };
            let after = tail.get(open.len()..).unwrap_or("");
            // Look for the close within a short window only (keeps this linear).
            let window_end = after.char_indices().nth(41).map_or(after.len(), |(k, _)| k);
            after.get(..window_end).and_then(|w| w.find(close)).and_then(|q| {
                let name = after.get(..q)?;
                (!name.contains(char::is_whitespace)).then_some(open.len() + q + close.len())
            })
        } else {
            None
        };
        match token_len {
            Some(n) => {
                s.push_str(text.get(copied..i).unwrap_or(""));
                s.push(' ');
                let name = tail.get(..n).unwrap_or("");
                i += n;
                // A role name after a start token: `<|im_start|>assistant`,
                // `<|start|>assistant<|channel|>…`.
                if name.ends_with("start|>") || name.ends_with("start｜>") {
                    let after = text.get(i..).unwrap_or("");
                    let role = after.find(|ch: char| !ch.is_ascii_alphabetic()).unwrap_or(after.len());
                    let next = after.get(role..).unwrap_or("");
                    if role <= 20 && (next.is_empty() || next.starts_with("<|") || next.starts_with('\n')) {
                        i += role;
                    }
                }
                copied = i;
            }
            None => i += 1,
        }
    }
    s.push_str(text.get(copied..).unwrap_or(""));
    s
}

/// Remove code-fence markers: "```" (or longer runs) and the info string after them.
fn remove_fences(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(p) = rest.find("```") {
        s.push_str(rest.get(..p).unwrap_or(""));
        let mut tail = rest.get(p..).unwrap_or("").trim_start_matches('`');
        // An info string: a short word right after the fence (json, JSON, python, ...).
        let word_len =
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '+')).unwrap_or(tail.len());
        if word_len <= 16 {
            tail = tail.get(word_len..).unwrap_or("");
        }
        s.push('\n');
        rest = tail;
    }
    s.push_str(rest);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_trace() {
        let s = strip_reasoning("<think>\nhmm {\"x\":1}\n</think>\n\n{\"y\": 2}");
        assert_eq!(s.trace, "hmm {\"x\":1}");
        assert_eq!(s.answer_text.trim(), "{\"y\": 2}");
        assert!(s.had_trace && !s.unclosed);
    }

    #[test]
    fn orphan_close_makes_prefix_a_trace() {
        let s = strip_reasoning("Okay, so I need {\"a\":1}\n</think>\nfinal {\"b\":2}");
        assert!(s.trace.starts_with("Okay, so I need"));
        assert_eq!(s.answer_text.trim(), "final {\"b\":2}");
    }

    #[test]
    fn unclosed_trace() {
        let s = strip_reasoning("<think>let me see {\"a\": 3}");
        assert!(s.unclosed);
        assert_eq!(s.answer_text.trim(), "");
        assert_eq!(s.trace, "let me see {\"a\": 3}");
    }

    #[test]
    fn harmony_channels() {
        let s = strip_reasoning(
            "<|channel|>analysis<|message|>We split.<|end|><|start|>assistant<|channel|>final<|message|>{\"a\":1}<|return|>",
        );
        assert_eq!(s.trace, "We split.");
        assert_eq!(s.answer_text.trim(), "{\"a\":1}");
    }

    #[test]
    fn thought_solution_headers() {
        let s = strip_reasoning("**Thought:**\ndraft {\"a\":9}\n**Solution:**\n{\"a\":1}");
        assert!(s.trace.contains("draft"));
        assert_eq!(s.answer_text.trim(), "{\"a\":1}");
        // A Thought header alone is not a trace.
        let s = strip_reasoning("Thoughts:\n{\"a\":1}");
        assert!(s.answer_text.contains("{\"a\":1}"));
    }

    #[test]
    fn fences_and_tokens() {
        let s = strip_reasoning("```json\n{\"a\":1}\n```<|im_end|><｜end▁of▁sentence｜></s>");
        assert_eq!(s.answer_text.trim(), "{\"a\":1}");
    }

    #[test]
    fn marker_boundaries_with_multibyte_text() {
        let s = strip_reasoning("é◁think▷ü◁/think▷ö");
        assert_eq!(s.trace, "ü");
        assert_eq!(s.answer_text.trim(), "é\nö");
    }
}
