//! Renders every case of `fixtures/golden.json` (written by `fixtures/generate.py` with Python
//! jinja2 set up as HF transformers sets it up) and compares byte for byte. Also loads templates
//! from HF-style model folders.

use std::path::{Path, PathBuf};

use herd_chat::{ChatTemplate, ChatTemplateError, ContentPart, DateTime, SpecialTokens, TemplateMessage};
use serde_json::Value;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn templates_dir() -> PathBuf {
    workspace_root().join("data/chat-templates")
}

/// generate.py's FIXED_NOW.
const FIXED_NOW: DateTime = DateTime { year: 2025, month: 3, day: 14, hour: 9, minute: 26, second: 53 };

fn golden() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_else(|| panic!("missing string {key:?} in {v}"))
}

fn special(v: &Value) -> SpecialTokens {
    let opt = |key: &str| v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    SpecialTokens {
        bos_token: opt("bos_token").unwrap_or_default(),
        eos_token: opt("eos_token").unwrap_or_default(),
        pad_token: opt("pad_token"),
        unk_token: opt("unk_token"),
    }
}

fn message(v: &Value) -> TemplateMessage {
    let role = str_field(v, "role");
    match v.get("content") {
        Some(Value::String(s)) => TemplateMessage::text(role, s.as_str()),
        Some(Value::Array(parts)) => TemplateMessage::parts(
            role,
            parts
                .iter()
                .map(|p| match str_field(p, "type") {
                    "text" => ContentPart::Text { text: str_field(p, "text").to_owned() },
                    "image" => ContentPart::Image,
                    "video" => ContentPart::Video,
                    other => panic!("unknown part type {other}"),
                })
                .collect(),
        ),
        other => panic!("bad content {other:?}"),
    }
}

#[test]
fn golden_cases_render_byte_identically() {
    let golden = golden();
    let cases = golden["cases"].as_array().expect("cases");
    assert!(cases.len() >= 100, "only {} cases", cases.len());
    assert_eq!(golden["fixed_now"], "2025-03-14T09:26:53");
    let mut failures = Vec::new();
    let mut templates_seen = std::collections::BTreeSet::new();
    for case in cases {
        let name = str_field(case, "name");
        let (template_name, source) = match case.get("template_file").and_then(Value::as_str) {
            Some(file) => {
                templates_seen.insert(file.to_owned());
                let path = templates_dir().join(file);
                let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (file.to_owned(), source)
            }
            None => ("inline".to_owned(), str_field(case, "template_source").to_owned()),
        };
        let template = ChatTemplate::named(template_name, &source, special(&case["special"]))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .with_fixed_now(FIXED_NOW);
        let messages: Vec<TemplateMessage> =
            case["messages"].as_array().expect("messages").iter().map(message).collect();
        let add_gen = case["add_generation_prompt"].as_bool().expect("add_generation_prompt");
        let options = case["options"].as_object().cloned().unwrap_or_default();
        let got = template.render(&messages, add_gen, &options);
        match (case.get("expected").and_then(Value::as_str), case.get("expected_error").and_then(Value::as_str), got) {
            (Some(want), _, Ok(got)) if got == want => {}
            (Some(want), _, Ok(got)) => failures.push(format!("{name}:\n--- want\n{want:?}\n--- got\n{got:?}")),
            (Some(_), _, Err(e)) => failures.push(format!("{name}: unexpected error {e}")),
            (None, Some(want), Err(ChatTemplateError::Raised { message, .. })) if message == want => {}
            (None, Some(want), other) => failures.push(format!("{name}: want raised {want:?}, got {other:?}")),
            (None, None, _) => panic!("{name}: case has neither expected nor expected_error"),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
    let want_templates =
        ["deepseek-r1-distill.jinja", "gemma3.jinja", "qwen2.5-vl.jinja", "qwen3.jinja", "smollm2.jinja"];
    assert_eq!(templates_seen.into_iter().collect::<Vec<_>>(), want_templates);
}

/// A fresh folder under the target's temp dir.
fn model_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("herd-chat").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create model dir");
    dir
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).expect("write fixture file");
}

#[test]
fn hf_folder_with_added_token_objects_and_template_string() {
    let dir = model_dir("deepseek");
    let source = std::fs::read_to_string(templates_dir().join("deepseek-r1-distill.jinja")).expect("template");
    let config = serde_json::json!({
        "add_bos_token": true,
        "bos_token": {"__type": "AddedToken", "content": "<｜begin▁of▁sentence｜>", "lstrip": false},
        "eos_token": {"__type": "AddedToken", "content": "<｜end▁of▁sentence｜>"},
        "pad_token": null,
        "unk_token": null,
        "chat_template": source,
    });
    write(&dir, "tokenizer_config.json", &config.to_string());
    let t = ChatTemplate::from_hf_folder(&dir).expect("load");
    assert_eq!(t.special_tokens().bos_token, "<｜begin▁of▁sentence｜>");
    assert_eq!(t.special_tokens().pad_token, None);
    assert!(t.name().ends_with("tokenizer_config.json#chat_template"), "{}", t.name());
    let out = t.render(&[TemplateMessage::text("user", "Hi")], true, &serde_json::Map::new()).expect("render");
    assert_eq!(out, "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>\n");
}

#[test]
fn hf_folder_prefers_chat_template_jinja_and_picks_default_from_a_list() {
    let dir = model_dir("list");
    let config = serde_json::json!({
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "chat_template": [
            {"name": "tool_use", "template": "TOOLS"},
            {"name": "default", "template": "{{ bos_token }}{{ unk_token }}{{ messages[0].content }}"}
        ],
    });
    write(&dir, "tokenizer_config.json", &config.to_string());
    let msgs = [TemplateMessage::text("user", "x")];
    let t = ChatTemplate::from_hf_folder(&dir).expect("load");
    assert_eq!(t.render(&msgs, false, &serde_json::Map::new()).expect("render"), "<s><unk>x");

    write(&dir, "chat_template.jinja", "jinja file: {{ eos_token }}\n");
    let t = ChatTemplate::from_hf_folder(&dir).expect("load");
    assert!(t.name().ends_with("chat_template.jinja"), "{}", t.name());
    // keep_trailing_newline is off, as in transformers.
    assert_eq!(t.render(&msgs, false, &serde_json::Map::new()).expect("render"), "jinja file: </s>");
}

#[test]
fn hf_folder_errors_name_the_file_and_the_problem() {
    let dir = model_dir("no-default");
    write(&dir, "tokenizer_config.json", r#"{"chat_template": [{"name": "rag", "template": "R"}]}"#);
    let err = ChatTemplate::from_hf_folder(&dir).unwrap_err().to_string();
    assert!(err.contains("tokenizer_config.json") && err.contains("\"default\"") && err.contains("rag"), "{err}");

    let dir = model_dir("bad-token");
    write(&dir, "tokenizer_config.json", r#"{"bos_token": 5, "chat_template": "x"}"#);
    let err = ChatTemplate::from_hf_folder(&dir).unwrap_err().to_string();
    assert!(err.contains("tokenizer_config.json") && err.contains("bos_token"), "{err}");

    let dir = model_dir("empty");
    let err = ChatTemplate::from_hf_folder(&dir).unwrap_err();
    assert!(matches!(err, ChatTemplateError::NoTemplate { .. }), "{err}");

    let dir = model_dir("bad-json");
    write(&dir, "tokenizer_config.json", "{not json");
    let err = ChatTemplate::from_hf_folder(&dir).unwrap_err();
    assert!(matches!(err, ChatTemplateError::Json { .. }), "{err}");
}

#[test]
fn hf_processor_chat_template_json_is_the_last_resort() {
    let dir = model_dir("processor");
    write(&dir, "tokenizer_config.json", r#"{"eos_token": "<|im_end|>", "bos_token": null}"#);
    let source = std::fs::read_to_string(templates_dir().join("qwen2.5-vl.jinja")).expect("template");
    write(&dir, "chat_template.json", &serde_json::json!({ "chat_template": source }).to_string());
    let t = ChatTemplate::from_hf_folder(&dir).expect("load");
    let msgs = [TemplateMessage::parts("user", vec![ContentPart::Image, ContentPart::Text { text: "Hi".into() }])];
    assert_eq!(
        t.render(&msgs, true, &serde_json::Map::new()).expect("render"),
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n\
         <|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>\n<|im_start|>assistant\n"
    );
}
