//! A tolerant, bounded JSON-ish scanner.
//!
//! Two steps. [`object_spans`] finds brace-delimited spans in free text in one linear
//! pass (quotes count as strings only where JSON could start a string, so apostrophes
//! in prose do not derail it). [`parse_object`] then parses one span with a recursive
//! descent parser that accepts strict JSON plus the repairs listed in [`Syntax`],
//! recording each repair it used, and refuses to nest deeper than [`MAX_DEPTH`].

/// The deepest nesting of objects and arrays the parser follows.
pub(crate) const MAX_DEPTH: usize = 32;

/// A brace-delimited span of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: usize,
    /// One past the closing brace; for an unclosed span, the end of the text.
    pub end: usize,
    pub complete: bool,
    /// Nesting depth of the span in the text (0 = top level).
    pub depth: usize,
}

/// Find brace spans. Linear in the text; spans deeper than [`MAX_DEPTH`] are not
/// recorded (their braces still count for matching).
pub(crate) fn object_spans(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut stack: Vec<usize> = Vec::new(); // start offsets (only while depth <= MAX_DEPTH)
    let mut depth = 0usize;
    let mut prev_sig = 0u8; // previous significant (non-space) byte
    let mut i = 0usize;
    while let Some(&c) = b.get(i) {
        match c {
            b'{' => {
                if depth < MAX_DEPTH {
                    stack.push(i);
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth < MAX_DEPTH
                    && let Some(start) = stack.pop()
                {
                    spans.push(Span { start, end: i + 1, complete: true, depth });
                }
            }
            b'"' | b'\'' if depth > 0 && matches!(prev_sig, b'{' | b'[' | b',' | b':') => {
                // Skip a string: to the matching unescaped quote, or to a newline.
                let mut j = i + 1;
                while let Some(&d) = b.get(j) {
                    if d == b'\\' {
                        j += 2;
                        continue;
                    }
                    if d == c || d == b'\n' {
                        break;
                    }
                    j += 1;
                }
                i = j.min(b.len());
                prev_sig = c;
                i += 1;
                continue;
            }
            _ => {}
        }
        if !c.is_ascii_whitespace() {
            prev_sig = c;
        }
        i += 1;
    }
    for (d, &start) in stack.iter().enumerate() {
        spans.push(Span { start, end: b.len(), complete: false, depth: d });
    }
    spans
}

/// Syntax repairs the parser had to make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Syntax {
    pub single_quotes: bool,
    pub trailing_comma: bool,
    pub unquoted_key: bool,
    pub comments: bool,
    pub missing_comma: bool,
    /// `NaN`, `Infinity`, `True`, `None`, …
    pub nonstandard_literal: bool,
    /// `+5`, `.5`, `5.`, `007`
    pub nonstandard_number: bool,
    /// `25%`
    pub percent: bool,
}

/// A parsed value. Numbers keep their f64 value (possibly non-finite).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Num(f64),
    Str(String),
    Bool,
    Null,
    /// An unquoted word that is not a known literal.
    Bare(String),
    Array,
    Object(Vec<(String, Value)>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParseError {
    Syntax,
    TooDeep,
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
    depth: usize,
    syn: Syntax,
}

/// Parse the object that starts at the beginning of `text` (a span from
/// [`object_spans`]). Trailing text after the closing brace is ignored.
pub(crate) fn parse_object(text: &str) -> Result<(Vec<(String, Value)>, Syntax), ParseError> {
    let mut p = Parser { s: text, pos: 0, depth: 0, syn: Syntax::default() };
    p.skip_ws();
    if p.peek() != Some(b'{') {
        return Err(ParseError::Syntax);
    }
    match p.value()? {
        Value::Object(entries) => Ok((entries, p.syn)),
        _ => Err(ParseError::Syntax),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.as_bytes().get(self.pos + k).copied()
    }

    fn rest(&self) -> &str {
        self.s.get(self.pos..).unwrap_or("")
    }

    /// Skip whitespace and `//` or `/* */` comments.
    fn skip_ws(&mut self) {
        loop {
            match self.peek() {
                Some(c) if c.is_ascii_whitespace() => self.pos += 1,
                Some(b'/') if self.peek_at(1) == Some(b'/') => {
                    self.syn.comments = true;
                    let n = self.rest().find('\n').unwrap_or(self.rest().len());
                    self.pos += n;
                }
                Some(b'/') if self.peek_at(1) == Some(b'*') => {
                    self.syn.comments = true;
                    let n = self.rest().get(2..).and_then(|r| r.find("*/")).map_or(self.rest().len(), |k| k + 4);
                    self.pos += n;
                }
                _ => {
                    // Non-breaking and other Unicode spaces.
                    match self.rest().chars().next() {
                        Some(ch) if ch.is_whitespace() => self.pos += ch.len_utf8(),
                        _ => return,
                    }
                }
            }
        }
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(q @ (b'"' | b'\'')) => self.string(q).map(Value::Str),
            Some(c) if c == b'-' || c == b'+' || c == b'.' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => Ok(self.word()),
            _ => Err(ParseError::Syntax),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        self.depth += 1;
        self.pos += 1;
        Ok(())
    }

    fn object(&mut self) -> Result<Value, ParseError> {
        self.enter()?;
        let mut entries = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(ParseError::Syntax),
                _ => {}
            }
            let key = self.key()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(ParseError::Syntax);
            }
            self.pos += 1;
            let v = self.value()?;
            entries.push((key, v));
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.syn.trailing_comma = true;
                    }
                }
                Some(b'}') => {}
                Some(c) if c == b'"' || c == b'\'' || c.is_ascii_alphanumeric() => {
                    self.syn.missing_comma = true;
                }
                _ => return Err(ParseError::Syntax),
            }
        }
        self.depth -= 1;
        Ok(Value::Object(entries))
    }

    fn array(&mut self) -> Result<Value, ParseError> {
        self.enter()?;
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(ParseError::Syntax),
                _ => {}
            }
            self.value()?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.syn.trailing_comma = true;
                    }
                }
                Some(b']') => {}
                _ => return Err(ParseError::Syntax),
            }
        }
        self.depth -= 1;
        Ok(Value::Array)
    }

    fn key(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => self.string(q),
            _ => {
                // An unquoted key: up to the colon, from a small character set.
                let rest = self.rest();
                let n = rest
                    .find(|c: char| {
                        !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | '#' | '.' | '[' | ']' | '(' | ')'))
                    })
                    .unwrap_or(rest.len());
                let key = rest.get(..n).unwrap_or("").trim();
                if key.is_empty() || n > 64 || !key.bytes().any(|c| c.is_ascii_alphanumeric()) {
                    return Err(ParseError::Syntax);
                }
                let key = key.to_owned();
                self.pos += n;
                self.syn.unquoted_key = true;
                Ok(key)
            }
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, ParseError> {
        if quote == b'\'' {
            self.syn.single_quotes = true;
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = self.rest();
            // Copy a run of ordinary chars at once.
            let n = rest
                .find(|c: char| c as u32 == u32::from(quote) || c == '\\' || c == '\n')
                .ok_or(ParseError::Syntax)?;
            out.push_str(rest.get(..n).unwrap_or(""));
            self.pos += n;
            match self.peek() {
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(ch) = self.rest().chars().next() else {
                        return Err(ParseError::Syntax);
                    };
                    self.pos += ch.len_utf8();
                    match ch {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'u' => {
                            let hex = self.rest().get(..4).ok_or(ParseError::Syntax)?;
                            let code = u32::from_str_radix(hex, 16).map_err(|_| ParseError::Syntax)?;
                            self.pos += 4;
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        other => out.push(other),
                    }
                }
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(out);
                }
                _ => return Err(ParseError::Syntax), // raw newline: not a string
            }
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let b = self.s.as_bytes();
        let start = self.pos;
        let mut i = start;
        let mut nonstandard = false;
        if let Some(&c) = b.get(i) {
            if c == b'+' {
                nonstandard = true;
                i += 1;
            } else if c == b'-' {
                i += 1;
            }
        }
        // -Infinity, +NaN, ...
        if b.get(i).is_some_and(u8::is_ascii_alphabetic) {
            let sign_neg = b.get(start) == Some(&b'-');
            self.pos = i;
            return match self.word() {
                Value::Num(v) => Ok(Value::Num(if sign_neg { -v } else { v })),
                _ => Err(ParseError::Syntax),
            };
        }
        let int_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let int_digits = i - int_start;
        if int_digits > 1 && b.get(int_start) == Some(&b'0') {
            nonstandard = true;
        }
        let mut frac_digits = 0;
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_none_or(|&c| c != b'.') {
            i += 1;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
                frac_digits += 1;
            }
            if frac_digits == 0 || int_digits == 0 {
                nonstandard = true;
            }
        }
        if int_digits + frac_digits == 0 {
            return Err(ParseError::Syntax);
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let exp_start = j;
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j > exp_start {
                i = j;
            }
        }
        let text = self.s.get(start..i).ok_or(ParseError::Syntax)?;
        let cleaned = text.strip_prefix('+').unwrap_or(text);
        let v: f64 = cleaned.parse().map_err(|_| ParseError::Syntax)?;
        self.pos = i;
        if nonstandard {
            self.syn.nonstandard_number = true;
        }
        if self.peek() == Some(b'%') {
            self.pos += 1;
            self.syn.percent = true;
        }
        Ok(Value::Num(v))
    }

    fn word(&mut self) -> Value {
        let rest = self.rest();
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let w = rest.get(..n).unwrap_or("");
        let v = match w {
            "true" => Value::Bool,
            "false" => Value::Bool,
            "null" => Value::Null,
            "True" | "False" => {
                self.syn.nonstandard_literal = true;
                Value::Bool
            }
            "None" | "nil" | "undefined" => {
                self.syn.nonstandard_literal = true;
                Value::Null
            }
            "NaN" | "nan" | "NAN" => {
                self.syn.nonstandard_literal = true;
                Value::Num(f64::NAN)
            }
            "Infinity" | "infinity" | "inf" | "Inf" | "INF" => {
                self.syn.nonstandard_literal = true;
                Value::Num(f64::INFINITY)
            }
            other => Value::Bare(other.to_owned()),
        };
        self.pos += n;
        v
    }
}

/// Read a number written as a string: `"25"`, `" 12.5 "`, `"30%"`.
pub(crate) fn number_in_string(s: &str) -> Option<f64> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() || t.len() > 400 {
        return None;
    }
    let ok = t.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'e' | b'E'))
        && t.bytes().any(|c| c.is_ascii_digit());
    if !ok {
        return None;
    }
    t.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(s: &str) -> (Vec<(String, Value)>, Syntax) {
        parse_object(s).expect("parses")
    }

    #[test]
    fn strict_json() {
        let (e, syn) = obj(r#"{"a": 1, "b": 2.5, "c": -3e1}"#);
        assert_eq!(e.len(), 3);
        assert_eq!(e[2], ("c".into(), Value::Num(-30.0)));
        assert_eq!(syn, Syntax::default());
    }

    #[test]
    fn repairs_are_recorded() {
        let (e, syn) = obj("{'a': 1, b: +2, \"c\": .5, // note\n \"d\": 5% \"e\": NaN,}");
        assert_eq!(e.len(), 5);
        assert!(syn.single_quotes && syn.unquoted_key && syn.nonstandard_number);
        assert!(syn.comments && syn.percent && syn.missing_comma && syn.trailing_comma);
        assert!(syn.nonstandard_literal);
        assert!(matches!(e[4].1, Value::Num(v) if v.is_nan()));
    }

    #[test]
    fn depth_is_bounded() {
        let deep = format!("{}{}", "{\"a\":".repeat(10_000), "1");
        assert_eq!(parse_object(&deep), Err(ParseError::TooDeep));
    }

    #[test]
    fn spans_ignore_apostrophes_in_prose() {
        let t = "I'd say {\"a\": 1} and {'b': '}'} then { open";
        let spans = object_spans(t);
        let complete: Vec<_> = spans.iter().filter(|s| s.complete).collect();
        assert_eq!(complete.len(), 2);
        assert_eq!(&t[complete[1].start..complete[1].end], "{'b': '}'}");
        assert!(spans.iter().any(|s| !s.complete));
    }

    #[test]
    fn strings_with_numbers() {
        assert_eq!(number_in_string(" 12.5 "), Some(12.5));
        assert_eq!(number_in_string("30%"), Some(30.0));
        assert_eq!(number_in_string("ten"), None);
        assert_eq!(number_in_string(""), None);
    }
}
