//! Checks of a GGUF model against llama.cpp's golden values (`tests/golden/generate_llamacpp.py`),
//! shared by the tests of each real model (`smollm2.rs`, `qwen2_5_coder.rs`). Here rather than in
//! herd-test-support, which would then depend on herd-infer: a dev-dependency circle.

use herd_backend::chat::{ChatPrompt, Part};
use herd_backend::{Backend, ScoreRequest};
use herd_infer::LocalModel;
use serde_json::Value;
use std::path::Path;

/// herd-infer's golden files, which the scripts beside them write.
fn golden_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"))
}

/// A golden file written by `generate_llamacpp.py` (its second argument, `llamacpp.json` by default).
pub fn golden(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(golden_dir().join(name)).unwrap()).unwrap()
}

/// The user messages the golden scores were computed for.
pub fn prompts() -> Vec<(String, String)> {
    let prompts: Value =
        serde_json::from_str(&std::fs::read_to_string(golden_dir().join("prompts.json")).unwrap()).unwrap();
    prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p["user"].as_str().unwrap().to_string()))
        .collect()
}

pub fn user(text: &str) -> ChatPrompt {
    ChatPrompt::user(vec![Part::Text { text: text.into() }])
}

/// Every string of the corpus tokenises to llama.cpp's ids.
pub fn assert_token_ids_equal(model: &LocalModel, golden: &Value) {
    for case in golden["tokenize"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(model.tokenizer.encode(text).unwrap(), expected, "tokenizing {text:?}");
    }
}

/// The model's own chat template renders each prompt as jinja2 did for llama.cpp, and the rendered text
/// tokenises to the same ids.
pub fn assert_template_renders_as_llama_cpp_was_given(model: &LocalModel, golden: &Value) {
    for ((id, text), s) in prompts().iter().zip(golden["scores"].as_array().unwrap()) {
        let rendered = model.render(&user(text)).unwrap();
        assert_eq!(rendered, s["rendered"].as_str().unwrap(), "{id}");
        let ids: Vec<u32> = serde_json::from_value(s["token_ids"].clone()).unwrap();
        assert_eq!(model.tokenizer.encode(&rendered).unwrap(), ids, "{id}");
    }
}

/// Each answer's log-probability is within `tolerance` nats of llama.cpp's, the answer is spelt by the
/// same tokens, and herd's most probable next token is one llama.cpp ranks within `tolerance` of its own
/// best (two tokens closer than the quantisation noise may swap). Answers llama.cpp gives less than
/// `TAIL` (far below any answer a conformity measure reads) are compared on p instead, within `TAIL`:
/// their log-probabilities move by tenths of a nat under any change of rounding. Returns the largest
/// |Δ log p| over the other answers.
pub fn assert_answers_agree(model: &mut LocalModel, golden: &Value, tolerance: f64) -> f64 {
    const TAIL: f64 = 1e-4;
    let mut worst = 0.0f64;
    let mut failures = Vec::new();
    for ((id, text), s) in prompts().iter().zip(golden["scores"].as_array().unwrap()) {
        let result = model.score(&[ScoreRequest::new(user(text), vec!["A".into(), "B".into()])]).unwrap().remove(0);
        for answer in ["A", "B"] {
            let expected_ids: Vec<u32> = serde_json::from_value(s["answers"][answer]["token_ids"].clone()).unwrap();
            assert_eq!(result.answers[answer].token_ids, expected_ids, "answer tokens of {answer}");
            let (ours, theirs) = (result.answers[answer].p, s["answers"][answer]["p"].as_f64().unwrap());
            let line = format!(
                "{id} {answer}: p herd {ours:.6e} llama.cpp {theirs:.6e}, Δ log p {:+.4}",
                ours.ln() - theirs.ln()
            );
            eprintln!("{line}");
            if theirs < TAIL {
                if (ours - theirs).abs() >= TAIL {
                    failures.push(line);
                }
                continue;
            }
            worst = worst.max((ours.ln() - theirs.ln()).abs());
            if (ours.ln() - theirs.ln()).abs() >= tolerance {
                failures.push(line);
            }
        }
        let ours_top = u64::from(result.top[0].id.unwrap());
        let their_best = s["top"][0]["logprob"].as_f64().unwrap();
        let their_logprob = s["top"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"].as_u64() == Some(ours_top))
            .map(|t| t["logprob"].as_f64().unwrap());
        if !their_logprob.is_some_and(|lp| lp > their_best - tolerance) {
            failures.push(format!("{id}: herd's top token {ours_top} has llama.cpp log p {their_logprob:?}, llama.cpp's best {their_best:.4}"));
        }
    }
    eprintln!("largest |Δ log p| against llama.cpp: {worst:.4}");
    assert!(failures.is_empty(), "beyond the tolerance of {tolerance} nats:\n{}", failures.join("\n"));
    worst
}
