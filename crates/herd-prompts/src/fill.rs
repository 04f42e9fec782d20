//! `{name}` placeholders in bank strings. Hand-written rather than a template engine: bank strings are one
//! line with a handful of names, and an unknown or unfilled name must be an error, not an empty string.

use crate::bank::PromptError;

/// Replaces every `{name}` in `template` with its value; `{{` and `}}` stand for literal braces.
pub(crate) fn fill(template: &str, values: &[(&str, &str)]) -> Result<String, PromptError> {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err(PromptError::Template { template: template.to_owned(), problem: "a lone `}`".to_owned() });
        }
        let end = tail.find('}').ok_or_else(|| PromptError::Template {
            template: template.to_owned(),
            problem: "an unclosed `{`".to_owned(),
        })?;
        let name = &tail[1..end];
        let value = values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).ok_or_else(|| PromptError::Template {
            template: template.to_owned(),
            problem: format!("unknown placeholder `{{{name}}}`"),
        })?;
        out.push_str(value);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn fills_and_rejects() {
        assert_eq!(fill("reply {index}: {reply}", &[("index", "2"), ("reply", "B.")]).unwrap(), "reply 2: B.");
        assert_eq!(fill("{{literal}}", &[]).unwrap(), "{literal}");
        assert!(fill("{missing}", &[]).is_err());
        assert!(fill("open {", &[]).is_err());
    }
}
