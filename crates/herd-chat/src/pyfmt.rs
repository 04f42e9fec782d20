//! Python's spellings of values: `json.dumps` (what HF's `tojson` filter calls), `repr` of floats and
//! containers, and `str()` of scalars (what jinja2 prints for `{{ value }}`).

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// Python's `repr(float)`: the shortest round-tripping digits, fixed notation for exponents in
/// `-4..16`, otherwise scientific with a signed two-digit (or longer) exponent.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` prints the shortest digits that round-trip, as Python's repr does.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let body = if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = usize::try_from(exp).unwrap_or(0) + 1;
            if digits.len() <= int_len {
                format!("{digits}{}.0", "0".repeat(int_len - digits.len()))
            } else {
                format!("{}.{}", &digits[..int_len], &digits[int_len..])
            }
        } else {
            let zeros = usize::try_from(-exp - 1).unwrap_or(0);
            format!("0.{}{digits}", "0".repeat(zeros))
        }
    } else {
        let m = if digits.len() == 1 { digits.clone() } else { format!("{}.{}", &digits[..1], &digits[1..]) };
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    };
    format!("{sign}{body}")
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`.
pub(crate) fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// What Python's `str()` gives for a value jinja2 prints: strings as they are, `None`, `True`/`False`,
/// floats by `repr`, containers by `repr`; undefined prints nothing.
pub(crate) fn py_str(value: &Value) -> Result<String, Error> {
    match value.kind() {
        ValueKind::Undefined => Ok(String::new()),
        ValueKind::String => Ok(value.as_str().unwrap_or_default().to_owned()),
        _ => py_repr(value),
    }
}

/// Python's `repr()` of a value (for values nested in printed containers).
pub(crate) fn py_repr(value: &Value) -> Result<String, Error> {
    Ok(match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::None => "None".to_owned(),
        ValueKind::Bool => if value.is_true() { "True" } else { "False" }.to_owned(),
        ValueKind::Number => number_text(value, float_repr)?,
        ValueKind::String => str_repr(value.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            let items = value.try_iter()?.map(|v| py_repr(&v)).collect::<Result<Vec<_>, _>>()?;
            format!("[{}]", items.join(", "))
        }
        ValueKind::Map => {
            let mut parts = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                parts.push(format!("{}: {}", py_repr(&key)?, py_repr(&item)?));
            }
            format!("{{{}}}", parts.join(", "))
        }
        _ => value.to_string(),
    })
}

fn number_text(value: &Value, float: fn(f64) -> String) -> Result<String, Error> {
    if value.is_integer() {
        Ok(value.to_string())
    } else {
        let f = f64::try_from(value.clone())?;
        Ok(float(f))
    }
}

/// How `json.dumps` lays out containers.
pub(crate) struct JsonStyle {
    pub ensure_ascii: bool,
    /// `None`: one line; `Some(s)`: a newline and `s` repeated per level (Python's `indent`).
    pub indent: Option<String>,
    pub item_separator: String,
    pub key_separator: String,
    pub sort_keys: bool,
}

impl JsonStyle {
    /// Python's defaults given `indent`: `', '` between items on one line, `','` when indenting.
    pub(crate) fn new(
        ensure_ascii: bool,
        indent: Option<String>,
        separators: Option<(String, String)>,
        sort_keys: bool,
    ) -> Self {
        let (item_separator, key_separator) =
            separators.unwrap_or_else(|| (if indent.is_some() { "," } else { ", " }.to_owned(), ": ".to_owned()));
        Self { ensure_ascii, indent, item_separator, key_separator, sort_keys }
    }
}

/// Python's `json.dumps(value, ...)` for the values a template can hold.
pub(crate) fn json_dumps(value: &Value, style: &JsonStyle) -> Result<String, Error> {
    let mut out = String::new();
    write_json(value, style, 0, &mut out)?;
    Ok(out)
}

fn not_serializable(value: &Value) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("tojson: object of type {} is not JSON serializable", value.kind()))
}

fn newline_indent(style: &JsonStyle, level: usize, out: &mut String) {
    if let Some(unit) = &style.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(unit);
        }
    }
}

fn write_json(value: &Value, style: &JsonStyle, level: usize, out: &mut String) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&number_text(value, json_float)?),
        ValueKind::String => json_string(value.as_str().unwrap_or_default(), style.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_separator);
                }
                newline_indent(style, level + 1, out);
                write_json(item, style, level + 1, out)?;
            }
            newline_indent(style, level, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut entries = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                entries.push((json_key(&key)?, item));
            }
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_separator);
                }
                newline_indent(style, level + 1, out);
                json_string(key, style.ensure_ascii, out);
                out.push_str(&style.key_separator);
                write_json(item, style, level + 1, out)?;
            }
            newline_indent(style, level, out);
            out.push('}');
        }
        _ => return Err(not_serializable(value)),
    }
    Ok(())
}

/// Python turns `None`, booleans and numbers used as keys into strings; other keys are an error.
fn json_key(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_owned()),
        ValueKind::None => Ok("null".to_owned()),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.to_owned()),
        ValueKind::Number => number_text(key, json_float),
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be str, int, float, bool or None, not {}", key.kind()),
        )),
    }
}

fn json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        float_repr(f)
    }
}

fn json_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (-2.5e-7, "-2.5e-07"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123.456, "123.456"),
            (1.5e300, "1.5e+300"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn json_matches_python_dumps() {
        // A struct keeps its field order (serde_json's map would sort the keys).
        #[derive(serde::Serialize)]
        struct T {
            b: serde_json::Value,
            a: &'static str,
        }
        let v = Value::from_serialize(T { b: serde_json::json!([1, 2.0, null, true]), a: "é\"\n\u{1}<>&'" });
        let one_line = JsonStyle::new(false, None, None, false);
        assert_eq!(json_dumps(&v, &one_line).unwrap(), r#"{"b": [1, 2.0, null, true], "a": "é\"\n\u0001<>&'"}"#);
        let ascii_sorted = JsonStyle::new(true, Some("  ".into()), None, true);
        assert_eq!(
            json_dumps(&v, &ascii_sorted).unwrap(),
            "{\n  \"a\": \"\\u00e9\\\"\\n\\u0001<>&'\",\n  \"b\": [\n    1,\n    2.0,\n    null,\n    true\n  ]\n}"
        );
    }

    #[test]
    fn repr_of_containers() {
        let v = Value::from_serialize(serde_json::json!({"k": ["it's", "a", 1.0, null, false]}));
        assert_eq!(py_repr(&v).unwrap(), r#"{'k': ["it's", 'a', 1.0, None, False]}"#);
    }
}
