//! Render a model's own Jinja chat template exactly as Hugging Face transformers'
//! `apply_chat_template(..., tokenize=False)` does, so that the prompt herd feeds a model is
//! byte-identical to the one the model was trained and evaluated with.
//!
//! The environment mirrors transformers' `_compile_jinja_template`: an immutable sandbox with
//! `trim_blocks` and `lstrip_blocks` on, `keep_trailing_newline` off, the `loopcontrols` extension,
//! the `{% generation %}` tag, a `tojson` filter that is Python's `json.dumps` (no HTML escaping,
//! `ensure_ascii=False`), `raise_exception` and `strftime_now`. Python string methods (`.strip()`,
//! `.split()`, `.startswith()`, `.items()`, `.get()` …) come from minijinja-contrib's `pycompat`, and
//! values print as Python's `str()` does (`None`, `True`). The variables are those transformers
//! passes: `messages`, `tools` and `documents` (none), `add_generation_prompt`, the special tokens
//! that are set, then the caller's options (e.g. `enable_thinking`).
//!
//! ```
//! use herd_chat::{ChatTemplate, SpecialTokens, TemplateMessage};
//!
//! let source = "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}\
//!               {% if add_generation_prompt %}<|assistant|>{% endif %}";
//! let special = SpecialTokens {
//!     bos_token: "<s>".into(),
//!     eos_token: "</s>".into(),
//!     pad_token: None,
//!     unk_token: None,
//! };
//! let template = ChatTemplate::new(source, special)?;
//! let messages = [TemplateMessage::text("user", "  Which line is longer?  ")];
//! let prompt = template.render(&messages, true, &serde_json::Map::new())?;
//! assert_eq!(prompt, "<|user|>Which line is longer?\n<|assistant|>");
//! # Ok::<(), herd_chat::ChatTemplateError>(())
//! ```

mod clock;
mod pyfmt;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use minijinja::value::{Kwargs, Rest, Value};
use minijinja::{Environment, ErrorKind};
use serde::Serialize;

pub use clock::DateTime;

/// What can go wrong loading or rendering a chat template. Each names the template (its file, or
/// the name given to [`ChatTemplate::named`]) and the problem.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: not valid JSON: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{}: {problem}", path.display())]
    Config { path: PathBuf, problem: String },
    #[error(
        "{}: no chat template: none of chat_template.jinja, tokenizer_config.json's \"chat_template\" \
         or chat_template.json's \"chat_template\" is there",
        dir.display()
    )]
    NoTemplate { dir: PathBuf },
    #[error("chat template {template}: syntax error: {detail}")]
    Syntax { template: String, detail: String },
    #[error("chat template {template}: the template raised an exception: {message}")]
    Raised { template: String, message: String },
    #[error("chat template {template}: rendering failed: {detail}")]
    Render { template: String, detail: String },
    #[error(
        "chat template {template}: option {key:?} is set by render itself (messages and \
         add_generation_prompt are its arguments); remove it from the options"
    )]
    ReservedOption { template: String, key: String },
}

/// The special tokens transformers passes to a template (`tokenizer.special_tokens_map`). An empty
/// `bos_token`/`eos_token` or a `None` means the tokenizer has none (e.g. Qwen's `bos_token: null`):
/// the variable is then not defined in the template, as in transformers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos_token: String,
    pub eos_token: String,
    pub pad_token: Option<String>,
    pub unk_token: Option<String>,
}

/// One part of a multimodal message, serialised the way HF processors receive it:
/// `{"type": "text", "text": …}`, `{"type": "image"}`, `{"type": "video"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    Text { text: String },
    Image,
    Video,
}

/// A message's content: a plain string, or a list of parts (for vision templates such as Qwen-VL's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl From<&str> for MessageContent {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for MessageContent {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<Vec<ContentPart>> for MessageContent {
    fn from(parts: Vec<ContentPart>) -> Self {
        Self::Parts(parts)
    }
}

/// One chat message as the template sees it: `{"role": …, "content": …}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TemplateMessage {
    pub role: String,
    pub content: MessageContent,
}

impl TemplateMessage {
    /// A message whose content is plain text.
    pub fn text(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: MessageContent::Text(content.into()) }
    }

    /// A message whose content is a list of parts (text, image, video).
    pub fn parts(role: impl Into<String>, parts: Vec<ContentPart>) -> Self {
        Self { role: role.into(), content: MessageContent::Parts(parts) }
    }
}

/// Where `strftime_now` takes the time from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clock {
    SystemUtc,
    Fixed(DateTime),
}

/// A compiled chat template with its special tokens.
pub struct ChatTemplate {
    name: String,
    source: String,
    special: SpecialTokens,
    clock: Clock,
    env: Environment<'static>,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("name", &self.name)
            .field("special", &self.special)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// The error `raise_exception` attaches, so render can tell it from other failures.
#[derive(Debug)]
struct Raised(String);

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

const TEMPLATE_KEY: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`; errors name it "chat_template".
    pub fn new(source: &str, special: SpecialTokens) -> Result<Self, ChatTemplateError> {
        Self::named("chat_template", source, special)
    }

    /// Compiles `source`; errors name it `name` (e.g. the file it came from).
    pub fn named(name: impl Into<String>, source: &str, special: SpecialTokens) -> Result<Self, ChatTemplateError> {
        let name = name.into();
        let source = rewrite_generation_tags(source);
        let env = build_env(&name, &source, Clock::SystemUtc)?;
        Ok(Self { name, source, special, clock: Clock::SystemUtc, env })
    }

    /// Makes `strftime_now` format `now` instead of the current UTC time (for reproducible prompts
    /// and tests).
    #[must_use = "with_fixed_now returns the changed template"]
    pub fn with_fixed_now(self, now: DateTime) -> Self {
        let clock = Clock::Fixed(now);
        // The source compiled before, and compiles the same way again.
        match build_env(&self.name, &self.source, clock) {
            Ok(env) => Self { env, clock, ..self },
            Err(_) => self,
        }
    }

    /// The name errors use for this template.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The special tokens passed to the template.
    #[must_use]
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// From an HF model folder: `chat_template.jinja` if present, else `tokenizer_config.json`'s
    /// `"chat_template"` (a string, or a list of `{name, template}` of which `"default"` is used),
    /// else a processor's `chat_template.json`. Special tokens come from `tokenizer_config.json`
    /// (strings or AddedToken objects with `"content"`; null or absent means none).
    pub fn from_hf_folder(dir: &Path) -> Result<Self, ChatTemplateError> {
        let config_path = dir.join("tokenizer_config.json");
        let config = if config_path.is_file() { Some(read_json(&config_path)?) } else { None };
        let special = match &config {
            Some(config) => SpecialTokens {
                bos_token: special_token(config, "bos_token", &config_path)?.unwrap_or_default(),
                eos_token: special_token(config, "eos_token", &config_path)?.unwrap_or_default(),
                pad_token: special_token(config, "pad_token", &config_path)?,
                unk_token: special_token(config, "unk_token", &config_path)?,
            },
            None => SpecialTokens::default(),
        };

        let jinja_path = dir.join("chat_template.jinja");
        if jinja_path.is_file() {
            let source = std::fs::read_to_string(&jinja_path)
                .map_err(|source| ChatTemplateError::Read { path: jinja_path.clone(), source })?;
            return Self::named(jinja_path.display().to_string(), &source, special);
        }
        if let Some(config) = &config
            && let Some(source) = template_from_config(config, &config_path)?
        {
            let name = format!("{}#chat_template", config_path.display());
            return Self::named(name, &source, special);
        }
        let processor_path = dir.join("chat_template.json");
        if processor_path.is_file() {
            let processor = read_json(&processor_path)?;
            if let Some(source) = template_from_config(&processor, &processor_path)? {
                let name = format!("{}#chat_template", processor_path.display());
                return Self::named(name, &source, special);
            }
        }
        Err(ChatTemplateError::NoTemplate { dir: dir.to_path_buf() })
    }

    /// Renders the conversation. `options` are extra template variables (e.g.
    /// `"enable_thinking": false` for Qwen3); they may override the special tokens, `tools` and
    /// `documents`, but not `messages` or `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[TemplateMessage],
        add_generation_prompt: bool,
        options: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, ChatTemplateError> {
        let mut ctx: BTreeMap<String, Value> = BTreeMap::new();
        ctx.insert("messages".into(), Value::from_serialize(messages));
        ctx.insert("tools".into(), Value::from(()));
        ctx.insert("documents".into(), Value::from(()));
        ctx.insert("add_generation_prompt".into(), Value::from(add_generation_prompt));
        let tokens = [
            ("bos_token", Some(&self.special.bos_token)),
            ("eos_token", Some(&self.special.eos_token)),
            ("pad_token", self.special.pad_token.as_ref()),
            ("unk_token", self.special.unk_token.as_ref()),
        ];
        for (key, token) in tokens {
            if let Some(token) = token.filter(|t| !t.is_empty()) {
                ctx.insert(key.into(), Value::from(token.as_str()));
            }
        }
        for (key, value) in options {
            if key == "messages" || key == "add_generation_prompt" {
                return Err(ChatTemplateError::ReservedOption { template: self.name.clone(), key: key.clone() });
            }
            ctx.insert(key.clone(), Value::from_serialize(value));
        }

        let template = self
            .env
            .get_template(TEMPLATE_KEY)
            .map_err(|e| ChatTemplateError::Render { template: self.name.clone(), detail: e.to_string() })?;
        template.render(Value::from(ctx)).map_err(|e| self.render_error(&e))
    }

    fn render_error(&self, err: &minijinja::Error) -> ChatTemplateError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = source {
            if let Some(raised) = e.downcast_ref::<Raised>() {
                return ChatTemplateError::Raised { template: self.name.clone(), message: raised.0.clone() };
            }
            source = e.source();
        }
        ChatTemplateError::Render { template: self.name.clone(), detail: describe(err) }
    }
}

/// A minijinja error with its chain of causes, on one line.
fn describe(err: &minijinja::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn read_json(path: &Path) -> Result<serde_json::Value, ChatTemplateError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ChatTemplateError::Read { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text).map_err(|source| ChatTemplateError::Json { path: path.to_path_buf(), source })
}

/// A special token in tokenizer_config.json: a string, an AddedToken object (`{"content": …}`), or
/// null/absent.
fn special_token(config: &serde_json::Value, key: &str, path: &Path) -> Result<Option<String>, ChatTemplateError> {
    match config.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Object(obj)) => match obj.get("content") {
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            _ => Err(ChatTemplateError::Config {
                path: path.to_path_buf(),
                problem: format!("\"{key}\" is an object without a string \"content\""),
            }),
        },
        Some(other) => Err(ChatTemplateError::Config {
            path: path.to_path_buf(),
            problem: format!("\"{key}\" must be a string, an object with \"content\", or null; found {other}"),
        }),
    }
}

/// `"chat_template"`: a string, or a list of `{name, template}` of which "default" is used.
fn template_from_config(config: &serde_json::Value, path: &Path) -> Result<Option<String>, ChatTemplateError> {
    let problem = |problem: String| ChatTemplateError::Config { path: path.to_path_buf(), problem };
    match config.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Array(items)) => {
            let mut names = Vec::new();
            for item in items {
                let name = item.get("name").and_then(serde_json::Value::as_str);
                let template = item.get("template").and_then(serde_json::Value::as_str);
                match (name, template) {
                    (Some("default"), Some(t)) => return Ok(Some(t.to_owned())),
                    (Some(n), Some(_)) => names.push(n.to_owned()),
                    _ => {
                        return Err(problem(
                            "\"chat_template\" list entries must be objects with string \"name\" and \"template\""
                                .to_owned(),
                        ));
                    }
                }
            }
            Err(problem(format!("\"chat_template\" lists no template named \"default\" (it has {names:?})")))
        }
        Some(other) => {
            Err(problem(format!("\"chat_template\" must be a string or a list of {{name, template}}; found {other}")))
        }
    }
}

/// transformers' `AssistantTracker` adds `{% generation %}…{% endgeneration %}`, which renders its
/// body unchanged. minijinja has no such tag, so each becomes an `if true` block with the same
/// whitespace-control markers (so trim_blocks and lstrip_blocks treat it the same).
fn rewrite_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        match parse_generation_tag(tag) {
            Some((len, open_mark, is_end, close_mark)) => {
                let body = if is_end { "endif" } else { "if true" };
                out.push_str(&format!("{{%{open_mark} {body} {close_mark}%}}"));
                rest = &tag[len..];
            }
            None => {
                out.push_str("{%");
                rest = &tag[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// For text starting with `{%`: if it is `{%[-+]? (end)?generation [-+]?%}`, its length, the
/// opening marker, whether it ends the block, and the closing marker.
fn parse_generation_tag(tag: &str) -> Option<(usize, &str, bool, &str)> {
    let after_open = &tag[2..];
    let open_mark = match after_open.chars().next() {
        Some(c @ ('-' | '+')) => &after_open[..c.len_utf8()],
        _ => "",
    };
    let inner = after_open[open_mark.len()..].trim_start();
    let (is_end, after_word) = if let Some(r) = inner.strip_prefix("endgeneration") {
        (true, r)
    } else if let Some(r) = inner.strip_prefix("generation") {
        (false, r)
    } else {
        return None;
    };
    let trimmed = after_word.trim_start();
    if trimmed.len() == after_word.len() && !trimmed.starts_with(['-', '+', '%']) {
        return None; // e.g. `generation_prompt`: a different word
    }
    let (close_mark, after_mark) = match trimmed.chars().next() {
        Some(c @ ('-' | '+')) => (&trimmed[..c.len_utf8()], &trimmed[c.len_utf8()..]),
        _ => ("", trimmed),
    };
    let end = after_mark.strip_prefix("%}")?;
    Some((tag.len() - end.len(), open_mark, is_end, close_mark))
}

fn build_env(name: &str, source: &str, clock: Clock) -> Result<Environment<'static>, ChatTemplateError> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(|out, _state, value| {
        let text = pyfmt::py_str(value)?;
        out.write_str(&text).map_err(|e| minijinja::Error::new(ErrorKind::WriteFailure, e.to_string()))
    });
    env.add_function("raise_exception", |message: String| -> Result<Value, minijinja::Error> {
        Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("raise_exception: {message}"))
            .with_source(Raised(message)))
    });
    env.add_function("strftime_now", move |format: String| -> Result<String, minijinja::Error> {
        let now = match clock {
            Clock::SystemUtc => DateTime::now_utc(),
            Clock::Fixed(t) => t,
        };
        clock::strftime(&now, &format).map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, e))
    });
    env.add_filter("tojson", tojson);
    env.add_template_owned(TEMPLATE_KEY, source.to_owned())
        .map_err(|e| ChatTemplateError::Syntax { template: name.to_owned(), detail: describe(&e) })?;
    Ok(env)
}

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`:
/// Python's `json.dumps` with those arguments, positional or by keyword.
fn tojson(value: &Value, args: Rest<Value>) -> Result<String, minijinja::Error> {
    let mut positional: Vec<Value> = args.0;
    let kwargs = match positional.last() {
        Some(last) if last.is_kwargs() => Some(Kwargs::try_from(positional.pop().unwrap_or_default())?),
        _ => None,
    };
    if positional.len() > 4 {
        return Err(minijinja::Error::new(ErrorKind::TooManyArguments, "tojson takes at most 4 arguments"));
    }
    let mut positional = positional.into_iter();
    let (ensure_ascii, indent, separators, sort_keys) =
        (positional.next(), positional.next(), positional.next(), positional.next());
    let pick = |positional: Option<Value>, key: &str| -> Result<Option<Value>, minijinja::Error> {
        let named: Option<Value> = match &kwargs {
            Some(kwargs) => kwargs.get(key)?,
            None => None,
        };
        if named.is_some() && positional.is_some() {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson got multiple values for argument {key:?}"),
            ));
        }
        Ok(named.or(positional).filter(|v| !v.is_none() && !v.is_undefined()))
    };
    let ensure_ascii = pick(ensure_ascii, "ensure_ascii")?.is_some_and(|v| v.is_true());
    let sort_keys = pick(sort_keys, "sort_keys")?.is_some_and(|v| v.is_true());
    let indent = match pick(indent, "indent")? {
        None => None,
        Some(v) if v.as_str().is_some() => Some(v.as_str().unwrap_or_default().to_owned()),
        Some(v) => {
            let n = v.as_i64().ok_or_else(|| {
                minijinja::Error::new(ErrorKind::InvalidOperation, "tojson: indent must be an integer or a string")
            })?;
            Some(" ".repeat(usize::try_from(n).unwrap_or(0)))
        }
    };
    let separators = match pick(separators, "separators")? {
        None => None,
        Some(v) => {
            let parts: Vec<Value> = v.try_iter()?.collect();
            match parts.as_slice() {
                [item, key] if item.as_str().is_some() && key.as_str().is_some() => {
                    Some((item.as_str().unwrap_or_default().to_owned(), key.as_str().unwrap_or_default().to_owned()))
                }
                _ => {
                    return Err(minijinja::Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be a pair of strings",
                    ));
                }
            }
        }
    };
    if let Some(kwargs) = &kwargs {
        kwargs.assert_all_used()?;
    }
    let style = pyfmt::JsonStyle::new(ensure_ascii, indent, separators, sort_keys);
    pyfmt::json_dumps(value, &style)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn special() -> SpecialTokens {
        SpecialTokens { bos_token: "<s>".into(), eos_token: "</s>".into(), pad_token: None, unk_token: None }
    }

    fn render(source: &str, options: serde_json::Value) -> Result<String, ChatTemplateError> {
        let options = options.as_object().cloned().unwrap_or_default();
        let msgs = [TemplateMessage::text("system", "sys"), TemplateMessage::text("user", "hi")];
        ChatTemplate::new(source, special())?.render(&msgs, true, &options)
    }

    #[test]
    fn generation_tags_become_if_blocks() {
        assert_eq!(
            rewrite_generation_tags("a{% generation %}b{%- endgeneration -%}c"),
            "a{% if true %}b{%- endif -%}c"
        );
        assert_eq!(rewrite_generation_tags("{%generation%}{%endgeneration%}"), "{% if true %}{% endif %}");
        let untouched = "{% if generation_prompt %}x{% endif %}{{ '%}' }}";
        assert_eq!(rewrite_generation_tags(untouched), untouched);
    }

    #[test]
    fn raise_exception_becomes_raised_error() {
        let err = render(
            "{% if messages[0].role == 'system' %}{{ raise_exception('No system role!') }}{% endif %}",
            serde_json::json!({}),
        )
        .unwrap_err();
        match &err {
            ChatTemplateError::Raised { template, message } => {
                assert_eq!(template, "chat_template");
                assert_eq!(message, "No system role!");
            }
            other => panic!("expected Raised, got {other:?}"),
        }
        assert!(err.to_string().contains("No system role!"));
    }

    #[test]
    fn syntax_errors_name_the_template() {
        let err = ChatTemplate::named("models/x/chat_template.jinja", "{% if %}", special()).unwrap_err();
        assert!(matches!(err, ChatTemplateError::Syntax { .. }));
        assert!(err.to_string().starts_with("chat template models/x/chat_template.jinja: syntax error"), "{err}");
    }

    #[test]
    fn reserved_options_are_refused() {
        let err = render("x", serde_json::json!({"add_generation_prompt": false})).unwrap_err();
        assert!(matches!(err, ChatTemplateError::ReservedOption { ref key, .. } if key == "add_generation_prompt"));
    }

    #[test]
    fn variables_match_transformers() {
        let out = render(
            "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ tools }}|{{ tools is none }}|{{ add_generation_prompt }}|{{ flag }}",
            serde_json::json!({"flag": 1.5}),
        )
        .unwrap();
        assert_eq!(out, "<s>|</s>|False|None|True|True|1.5");
    }

    #[test]
    fn empty_bos_is_undefined() {
        let special = SpecialTokens { bos_token: String::new(), ..special() };
        let t = ChatTemplate::new("{{ bos_token is defined }}{{ bos_token }}", special).unwrap();
        assert_eq!(t.render(&[], false, &serde_json::Map::new()).unwrap(), "False");
    }

    #[test]
    fn strftime_now_uses_the_fixed_clock() {
        let now = DateTime { year: 2025, month: 3, day: 14, hour: 9, minute: 26, second: 53 };
        let t = ChatTemplate::new("{{ strftime_now('%d %b %Y') }}", special()).unwrap().with_fixed_now(now);
        assert_eq!(t.render(&[], false, &serde_json::Map::new()).unwrap(), "14 Mar 2025");
        let bad = ChatTemplate::new("{{ strftime_now('%Q') }}", special()).unwrap();
        assert!(matches!(bad.render(&[], false, &serde_json::Map::new()), Err(ChatTemplateError::Render { .. })));
    }

    #[test]
    fn tojson_takes_python_arguments() {
        let out = render(
            "{{ messages | tojson }}\n{{ messages[1] | tojson(indent=2) }}\n{{ {'b': 'é<'} | tojson(true) }}\n{{ messages[1] | tojson(separators=(',', ':'), sort_keys=true) }}",
            serde_json::json!({}),
        )
        .unwrap();
        assert_eq!(
            out,
            "[{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi\"}]\n\
             {\n  \"role\": \"user\",\n  \"content\": \"hi\"\n}\n\
             {\"b\": \"\\u00e9<\"}\n\
             {\"content\":\"hi\",\"role\":\"user\"}"
        );
        assert!(render("{{ 1 | tojson(bogus=1) }}", serde_json::json!({})).is_err());
    }

    #[test]
    fn parts_serialise_like_hf() {
        let m = TemplateMessage::parts(
            "user",
            vec![ContentPart::Image, ContentPart::Text { text: "What is this?".into() }],
        );
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"user","content":[{"type":"image"},{"type":"text","text":"What is this?"}]}"#
        );
    }
}
