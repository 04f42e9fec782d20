//! A/B answer extraction.

use std::fmt;

use serde::Serialize;

use crate::ParseStatus;
use crate::strip::strip_reasoning;

/// One of the two options of a conformity trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Choice {
    /// Option A.
    A,
    /// Option B.
    B,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Choice::A => "A",
            Choice::B => "B",
        })
    }
}

/// Why no answer could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AnswerFailure {
    /// Nothing but whitespace (after removing the trace).
    #[error("empty output")]
    Empty,
    /// The output ended inside an unclosed reasoning trace.
    #[error("output ended inside an unclosed reasoning trace")]
    UnclosedTrace,
    /// Neither letter is given as an answer.
    #[error("no A/B answer found")]
    NoAnswer,
    /// Both letters are given as answers.
    #[error("ambiguous: both A and B are given as answers")]
    Ambiguous,
}

impl AnswerFailure {
    /// A short snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            AnswerFailure::Empty => "empty",
            AnswerFailure::UnclosedTrace => "unclosed_trace",
            AnswerFailure::NoAnswer => "no_answer",
            AnswerFailure::Ambiguous => "ambiguous",
        }
    }
}

/// A failure serialises as its code, so trial rows and `herd parse` output carry a stable token.
impl Serialize for AnswerFailure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// The result of [`parse_answer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerParse {
    /// ok (the answer text is the letter alone, markup aside), repaired (the letter was
    /// read out of a sentence) or failed.
    pub status: ParseStatus,
    /// The answer, absent when failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Choice>,
    /// Human-readable reason; `None` when ok.
    pub reason: Option<String>,
    /// Machine-readable failure.
    pub failure: Option<AnswerFailure>,
}

impl AnswerParse {
    fn failed(f: AnswerFailure) -> Self {
        Self { status: ParseStatus::Failed, answer: None, reason: Some(f.to_string()), failure: Some(f) }
    }
}

/// Markup that may wrap a bare letter.
fn is_wrapper(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '*' | '_'
                | '`'
                | '"'
                | '\''
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '.'
                | ':'
                | '!'
                | '“'
                | '”'
                | '‘'
                | '’'
                | '$'
                | '\\'
        )
}

fn bare_letter(s: &str) -> Option<Choice> {
    let s = s.trim_matches(is_wrapper);
    let s = s.strip_prefix("boxed{").unwrap_or(s).trim_matches(is_wrapper);
    match s {
        "A" | "a" => Some(Choice::A),
        "B" | "b" => Some(Choice::B),
        _ => None,
    }
}

/// Cues that, right before a letter, mark it as the answer. Matched against the
/// lowercased text before the letter with trailing markup and spaces removed.
const BEFORE: &[&str] = &[
    "answer is",
    "answer would be",
    "answer will be",
    "answer",
    "answer=",
    "choice is",
    "choice",
    "option",
    "choose",
    "chose",
    "choosing",
    "select",
    "selected",
    "pick",
    "picked",
    "go with",
    "going with",
    "could be",
    "would be",
    "must be",
    "should be",
    "i'll say",
    "i will say",
    "i say",
    "i'd say",
    "leaning toward",
    "leaning towards",
    "boxed",
    "is",
    "it's",
];

/// Cues that, right after a letter, mark it as the answer.
const AFTER: &[&str] = &[
    "is my choice",
    "is my answer",
    "is my final answer",
    "is the answer",
    "is the correct answer",
    "is the correct one",
    "is the right answer",
    "is correct",
    "is right",
    "is the same",
    "matches",
    "seems right",
    "seems correct",
    ", i think",
    "i think",
];

/// Words that follow the letter A but never the article "a": after them, "A" is a
/// letter.
const NOT_AFTER_ARTICLE: &[&str] = &[
    "or", "and", "nor", "is", "was", "seems", "looks", "appears", "matches", "has", "because", "since", "as", "then",
    "but", "so",
];

/// Extract A or B from a model's answer text (any bytes; invalid UTF-8 is replaced).
///
/// Reasoning traces are removed first. The status is **ok** when what is left is the
/// letter alone, up to markup (`B`, `**B**`, `(A)`, `"b"`, `\boxed{B}`); **repaired**
/// when exactly one letter is marked as the answer inside text: after a cue (`The
/// answer is B.`, `Answer: (A)`, `I'm going with B`, `Option A`), before one (`B is my
/// choice`, `A seems right`), in emphasis or brackets (`**B**`, `(A)`), alone on a line,
/// or leading the text (`B. The lines match`); **failed** when no letter is so marked,
/// or when both are (ambiguous text is a flagged failure, never a guess). Outside the
/// bare-letter case only capital letters count, a capital `A` followed by a lowercase
/// word is read as the article, and a letter right after `not` is never an answer.
pub fn parse_answer(raw: impl AsRef<[u8]>) -> AnswerParse {
    let text = String::from_utf8_lossy(raw.as_ref());
    let stripped = strip_reasoning(&text);
    let answer = stripped.answer_text.trim();
    if answer.is_empty() {
        return AnswerParse::failed(if stripped.unclosed {
            AnswerFailure::UnclosedTrace
        } else {
            AnswerFailure::Empty
        });
    }
    if let Some(c) = bare_letter(answer) {
        return AnswerParse { status: ParseStatus::Ok, answer: Some(c), reason: None, failure: None };
    }
    let (mut saw_a, mut saw_b) = (false, false);
    for (letter, also_other) in marked_letters(answer) {
        match letter {
            Choice::A => saw_a = true,
            Choice::B => saw_b = true,
        }
        if also_other {
            saw_a = true;
            saw_b = true;
        }
    }
    match (saw_a, saw_b) {
        (true, true) => AnswerParse::failed(AnswerFailure::Ambiguous),
        (false, false) => {
            AnswerParse::failed(if stripped.unclosed { AnswerFailure::UnclosedTrace } else { AnswerFailure::NoAnswer })
        }
        (a, _) => AnswerParse {
            status: ParseStatus::Repaired,
            answer: Some(if a { Choice::A } else { Choice::B }),
            reason: Some("answer extracted from text".to_owned()),
            failure: None,
        },
    }
}

/// Letters marked as answers: (letter, whether "X or Y" also names the other one).
fn marked_letters(text: &str) -> Vec<(Choice, bool)> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (pos, &(i, c)) in chars.iter().enumerate() {
        let letter = match c {
            'A' => Choice::A,
            'B' => Choice::B,
            _ => continue,
        };
        let prev = pos.checked_sub(1).and_then(|p| chars.get(p)).map(|x| x.1);
        let next = chars.get(pos + 1).map(|x| x.1);
        if prev.is_some_and(char::is_alphanumeric) || next.is_some_and(char::is_alphanumeric) {
            continue; // part of a word
        }
        let after = text.get(i + c.len_utf8()..).unwrap_or("");
        // Possessive "B's", hyphenated "A-line".
        if after.starts_with("'s") || after.starts_with("’s") || after.starts_with('-') {
            continue;
        }
        // Look at most 80 bytes back and ahead (on char boundaries): keeps this linear.
        let mut start = i.saturating_sub(80);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let mut end = (i + c.len_utf8() + 80).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = text.get(start..i).unwrap_or("");
        let at_text_start = start == 0;
        let after = text.get(i + c.len_utf8()..end).unwrap_or("");
        let at_text_end = end == text.len();
        let before_l = before.to_lowercase();
        let before_t = before_l.trim_end_matches(|ch: char| is_wrapper(ch) && ch != '.' || ch == ':');
        if before_t.ends_with("not") || before_t.ends_with("n't") || before_t.ends_with("nor") {
            continue;
        }
        let after_l: String = after.chars().take(60).collect::<String>().to_lowercase();
        let after_t = after_l.trim_start_matches(|ch: char| {
            matches!(ch, '*' | '_' | '`' | '"' | '\'' | ')' | ']' | '}' | '“' | '”' | '’')
        });
        let after_ts = after_t.trim_start();

        let wrapped = {
            let l = before.chars().next_back();
            let r = after.chars().next();
            matches!(
                (l, r),
                (Some('*'), Some('*'))
                    | (Some('_'), Some('_'))
                    | (Some('('), Some(')'))
                    | (Some('['), Some(']'))
                    | (Some('{'), Some('}'))
                    | (Some('"'), Some('"'))
                    | (Some('“'), Some('”'))
                    | (Some('`'), Some('`'))
            )
        };
        let cue_before = BEFORE.iter().any(|cue| {
            before_t.ends_with(cue)
                && before_t
                    .len()
                    .checked_sub(cue.len())
                    .and_then(|k| before_t.get(..k))
                    .is_none_or(|p| p.chars().next_back().is_none_or(|ch| !ch.is_alphanumeric()))
        });
        let cue_after = AFTER.iter().any(|cue| after_ts.starts_with(cue) || after_t.starts_with(cue));
        // The article: "A good question" (unless a cue follows: "A seems right").
        if letter == Choice::A && !cue_after {
            let next_word: String =
                after.strip_prefix(' ').unwrap_or("").chars().take_while(|ch| ch.is_alphabetic()).collect();
            let starts_lower = next_word.chars().next().is_some_and(char::is_lowercase);
            if starts_lower && !NOT_AFTER_ARTICLE.contains(&next_word.as_str()) {
                continue;
            }
        }
        let line_alone = {
            let line_start = before.rfind('\n').map(|k| k + 1).or(at_text_start.then_some(0));
            let line_end = after.find('\n').or(at_text_end.then_some(after.len()));
            // A line longer than the window is not a bare letter.
            match (line_start, line_end) {
                (Some(ls), Some(le)) => {
                    let line = format!("{}{}{}", before.get(ls..).unwrap_or(""), c, after.get(..le).unwrap_or(""));
                    bare_letter(&line).is_some()
                }
                _ => false,
            }
        };
        let leading = at_text_start
            && before.trim_matches(is_wrapper).is_empty()
            && after_t
                .chars()
                .next()
                .is_none_or(|ch| matches!(ch, '.' | ',' | ':' | ';' | '\n' | '!' | '-' | '–' | '—'));
        if !(wrapped || cue_before || cue_after || line_alone || leading) {
            continue;
        }
        // "A or B", "A and B", "A/B": both named.
        let other = match letter {
            Choice::A => 'b',
            Choice::B => 'a',
        };
        let rest = after_ts.trim_start_matches(|ch: char| is_wrapper(ch) && ch != '.');
        let names_other = ["or ", "and ", "/", "nor "].iter().any(|conj| {
            rest.strip_prefix(conj).is_some_and(|r| {
                let r = r.trim_start_matches(is_wrapper);
                let mut it = r.chars();
                it.next() == Some(other) && it.next().is_none_or(|ch| !ch.is_alphanumeric())
            })
        });
        out.push((letter, names_other));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ans(s: &str) -> (ParseStatus, Option<Choice>) {
        let p = parse_answer(s);
        (p.status, p.answer)
    }

    #[test]
    fn bare() {
        assert_eq!(ans("B"), (ParseStatus::Ok, Some(Choice::B)));
        assert_eq!(ans(" **A** "), (ParseStatus::Ok, Some(Choice::A)));
        assert_eq!(ans("(b)."), (ParseStatus::Ok, Some(Choice::B)));
        assert_eq!(ans("$\\boxed{A}$"), (ParseStatus::Ok, Some(Choice::A)));
    }

    #[test]
    fn sentences() {
        for (s, c) in [
            ("The answer is B.", Choice::B),
            ("Answer: (A)", Choice::A),
            ("I'm going with A.", Choice::A),
            ("B is my choice.", Choice::B),
            ("A good question. The answer is B.", Choice::B),
            ("It is not A. The answer is B", Choice::B),
            ("B. The lines have equal length.", Choice::B),
            ("Line A is shorter than the reference, so **B**", Choice::B),
            ("A seems right.", Choice::A),
            ("A, I think.", Choice::A),
        ] {
            assert_eq!(ans(s), (ParseStatus::Repaired, Some(c)), "{s}");
        }
    }

    #[test]
    fn failures() {
        assert_eq!(parse_answer("The answer is A or B").failure, Some(AnswerFailure::Ambiguous));
        assert_eq!(parse_answer("**A** then **B**").failure, Some(AnswerFailure::Ambiguous));
        assert_eq!(parse_answer("I cannot tell.").failure, Some(AnswerFailure::NoAnswer));
        assert_eq!(parse_answer("").failure, Some(AnswerFailure::Empty));
        assert_eq!(parse_answer("<think>B?").failure, Some(AnswerFailure::UnclosedTrace));
    }
}
