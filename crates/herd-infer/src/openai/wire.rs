//! What a request to an OpenAI-compatible server is, and how its reply is read, apart from sending it:
//! the live backend (`openai.rs`) posts these bodies and reads the replies it gets, a batch file
//! (`batch.rs`) lists the same bodies and reads the answers an offline run wrote, so both paths build and
//! check exactly alike.

use super::reply::{Refusal, checked_score, read_generation, read_top_logprobs};
use super::{OpenAiOptions, ScoreApi, StructuredOutput};
use crate::error::{InferError, Result};
use crate::local::PromptRenderer;
use base64::Engine as _;
use herd_backend::chat::{ChatPrompt, Part};
use herd_backend::{GenerateRequest, Generation, SamplingParams, ScoreRequest, ScoreResult};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

/// The path under `/v1` that generation requests go to.
pub(super) const CHAT_PATH: &str = "/chat/completions";

/// The requests' and replies' rules for one served model: its name, how it is scored and how much of a
/// reply is kept.
pub(super) struct Wire {
    served_model: String,
    top_logprobs: usize,
    score_api: ScoreApi,
    max_reasoning_bytes: u64,
    /// The model's own chat template, for [`ScoreApi::Completions`].
    renderer: Option<PromptRenderer>,
    data_urls: Mutex<DataUrls>,
}

/// The images encoded last, by allocation, with their data URLs. A conformity image is shown in dozens
/// of trials (each N and level of its trial index) and the runner hands them one `Arc` of its pixels,
/// so it is PNG- and base64-encoded once, not per request (encoding costs milliseconds, the rest of a
/// request microseconds). A `Weak` keeps its allocation's address from being reused, so an address
/// match is the same image.
#[derive(Default)]
struct DataUrls {
    recent: VecDeque<(Weak<image::RgbImage>, Arc<str>)>,
}

/// Images whose data URLs are kept: more than the images a pipelined run has in flight at once.
const DATA_URLS_KEPT: usize = 256;

impl Wire {
    /// The rules `options` set; `renderer` is needed for [`ScoreApi::Completions`] only.
    pub(super) fn new(options: &OpenAiOptions, alias: &str, renderer: Option<PromptRenderer>) -> Result<Self> {
        if options.score_api == ScoreApi::Completions && renderer.is_none() {
            return Err(InferError::Request(format!(
                "scoring through /v1/completions renders `{alias}`'s chat template here, which needs the model's files on this machine; fix: make them present (`herd models --fetch {alias}`) or score through chat completions"
            )));
        }
        if options.top_logprobs == 0 {
            return Err(InferError::Request("top_logprobs must be at least 1".into()));
        }
        if options.max_reasoning_bytes == 0 {
            return Err(InferError::Request("max_reasoning_bytes (--max-reasoning-mb) must be more than 0".into()));
        }
        Ok(Wire {
            served_model: options.served_model.clone(),
            top_logprobs: options.top_logprobs,
            score_api: options.score_api,
            max_reasoning_bytes: options.max_reasoning_bytes,
            renderer,
            data_urls: Mutex::new(DataUrls::default()),
        })
    }

    /// The data URL of `image`: the one made for this allocation before, or a new one.
    fn image_url(&self, image: Option<&Arc<image::RgbImage>>) -> Result<Option<Arc<str>>> {
        let Some(image) = image else { return Ok(None) };
        let same = |(weak, _): &&(Weak<image::RgbImage>, Arc<str>)| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(image));
        if let Some((_, url)) = self.data_urls.lock().unwrap_or_else(|p| p.into_inner()).recent.iter().find(same) {
            return Ok(Some(url.clone()));
        }
        // Encoded outside the lock, so that requests for other images do not wait on this one.
        let url: Arc<str> = png_data_url(image)?.into();
        let mut cache = self.data_urls.lock().unwrap_or_else(|p| p.into_inner());
        cache.recent.retain(|(weak, _)| weak.strong_count() > 0);
        if cache.recent.len() >= DATA_URLS_KEPT {
            cache.recent.pop_front();
        }
        cache.recent.push_back((Arc::downgrade(image), url.clone()));
        Ok(Some(url))
    }

    /// The path (under `/v1`) and body of a scoring request: one token, greedy, with the top
    /// `top_logprobs` log-probabilities.
    pub(super) fn score_request(&self, request: &ScoreRequest) -> Result<(&'static str, Value)> {
        let k = self.top_logprobs;
        Ok(match self.score_api {
            ScoreApi::Chat => (
                CHAT_PATH,
                json!({
                    "model": self.served_model,
                    "messages": messages(&request.prompt, self.image_url(request.image.as_ref())?.as_deref())?,
                    "max_tokens": 1, "temperature": 0.0, "logprobs": true, "top_logprobs": k,
                }),
            ),
            ScoreApi::Completions => {
                let renderer = self.renderer.as_ref().expect("checked in new");
                if request.image.is_some() {
                    return Err(InferError::Request(
                        "image prompts are scored through chat completions; the completions API takes text only".into(),
                    ));
                }
                (
                    "/completions",
                    json!({"model": self.served_model, "prompt": renderer.render(&request.prompt, None)?, "max_tokens": 1, "temperature": 0.0, "logprobs": k}),
                )
            }
        })
    }

    /// A scoring reply's answers, checked ([`checked_score`]).
    pub(super) fn read_score(&self, reply: &Value, answers: &[String]) -> std::result::Result<ScoreResult, Refusal> {
        let (top, prompt_tokens) = read_top_logprobs(reply, self.score_api)?;
        Ok(checked_score(&top, answers, prompt_tokens, self.top_logprobs)?)
    }

    /// The body of a generation request (chat completions), without its `response_format`
    /// ([`response_format`] gives that for a request with a schema).
    pub(super) fn generate_request(&self, request: &GenerateRequest) -> Result<Value> {
        let s = &request.sampling;
        let mut body = json!({
            "model": self.served_model,
            "messages": messages(&request.prompt, self.image_url(request.image.as_ref())?.as_deref())?,
            "max_tokens": s.max_tokens, "seed": s.seed,
        });
        add_sampling_knobs(&mut body, s);
        if !s.stop.is_empty() {
            body["stop"] = json!(s.stop);
        }
        if let Some(on) = request.thinking {
            body["chat_template_kwargs"] = json!({"enable_thinking": on});
        }
        Ok(body)
    }

    /// A generation reply's text, reasoning (held to `max_reasoning_bytes`), finish reason and counts.
    pub(super) fn read_generation(&self, reply: &Value) -> std::result::Result<Generation, Refusal> {
        read_generation(reply, self.max_reasoning_bytes)
    }
}

/// How the allocation schema is asked for: `json_schema` (OpenAI, vLLM, SGLang) or `json_object`
/// (llama-cpp-python's server).
pub(super) fn response_format(schema: &Value, format: StructuredOutput) -> Value {
    match format {
        StructuredOutput::JsonSchema => {
            json!({"type": "json_schema", "json_schema": {"name": "allocation", "schema": schema, "strict": true}})
        }
        StructuredOutput::JsonObject => json!({"type": "json_object", "schema": schema}),
    }
}

/// A prompt as chat messages: text parts joined, and a message showing the image as content parts with
/// the image as a base64 PNG data URL (`image_url`).
fn messages(prompt: &ChatPrompt, image_url: Option<&str>) -> Result<Value> {
    let mut messages = Vec::new();
    for message in &prompt.messages {
        let role = message.role.as_str();
        let has_image = message.content.iter().any(|p| matches!(p, Part::Image { .. }));
        let content = if has_image {
            let mut parts = Vec::new();
            for part in &message.content {
                match part {
                    Part::Text { text } => parts.push(json!({"type": "text", "text": text})),
                    Part::Image { image } => {
                        let url = image_url.ok_or_else(|| {
                            InferError::Request(format!(
                                "the prompt shows image `{image}` but the request carries no pixels"
                            ))
                        })?;
                        parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                    }
                }
            }
            Value::Array(parts)
        } else {
            Value::String(
                message
                    .content
                    .iter()
                    .filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None })
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        };
        messages.push(json!({"role": role, "content": content}));
    }
    Ok(Value::Array(messages))
}

/// Adds the knobs a request sets to a chat-completions body. A knob left unset is not sent, so the server
/// applies its own default (vLLM: the model's generation_config.json); the run manifest says which were sent.
fn add_sampling_knobs(body: &mut Value, s: &SamplingParams) {
    if let Some(t) = s.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(p) = s.top_p {
        body["top_p"] = json!(p);
    }
    // top_k 0 means "keep every token"; servers spell that -1 (older vLLM and SGLang reject 0; llama.cpp
    // takes any value ≤ 0).
    if let Some(k) = s.top_k {
        body["top_k"] = if k == 0 { json!(-1) } else { json!(k) };
    }
    // vLLM's and SGLang's name, with HF's meaning; llama.cpp's server ignores it (it reads `repeat_penalty`,
    // over the last 64 tokens only, which is not HF's penalty).
    if let Some(r) = s.repetition_penalty {
        body["repetition_penalty"] = json!(r);
    }
}

fn png_data_url(pixels: &image::RgbImage) -> Result<String> {
    let mut png = Vec::new();
    pixels
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| InferError::Request(format!("encoding the image as PNG: {e}")))?;
    Ok(format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sampling_knobs_a_request_sets_are_sent() {
        let mut body = json!({"max_tokens": 5});
        let unset = SamplingParams {
            temperature: None,
            top_p: None,
            top_k: None,
            repetition_penalty: None,
            ..Default::default()
        };
        add_sampling_knobs(&mut body, &unset);
        assert_eq!(body, json!({"max_tokens": 5}), "unset knobs are left to the server");
        let set = SamplingParams {
            temperature: Some(0.7),
            top_p: Some(0.8),
            top_k: Some(20),
            repetition_penalty: Some(1.1),
            ..Default::default()
        };
        add_sampling_knobs(&mut body, &set);
        assert_eq!(
            body,
            json!({"max_tokens": 5, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.1})
        );
        // "No top-k cut" is spelled -1, which every server takes.
        add_sampling_knobs(&mut body, &SamplingParams { top_k: Some(0), ..unset });
        assert_eq!(body["top_k"], -1);
    }

    #[test]
    fn an_image_shown_in_many_requests_is_encoded_once() {
        let options = super::super::OpenAiOptions::new(vec!["http://127.0.0.1:1".into()], "served");
        let wire = Wire::new(&options, "served", None).unwrap();
        let image = Arc::new(image::RgbImage::from_pixel(40, 20, image::Rgb([200, 10, 10])));
        let first = wire.image_url(Some(&image)).unwrap().unwrap();
        assert!(first.starts_with("data:image/png;base64,"));
        // The same pixels handed on again: the same encoding, not a new one.
        let again = wire.image_url(Some(&Arc::clone(&image))).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // Another image is encoded for itself.
        let other = Arc::new(image::RgbImage::from_pixel(40, 20, image::Rgb([10, 200, 10])));
        let second = wire.image_url(Some(&other)).unwrap().unwrap();
        assert_ne!(first, second);
        // Once an image is dropped, its entry goes and a new image cannot take it over.
        drop(image);
        let third = Arc::new(image::RgbImage::from_pixel(40, 20, image::Rgb([10, 10, 200])));
        let url = wire.image_url(Some(&third)).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&url, &first) && url != first);
        assert_eq!(wire.data_urls.lock().unwrap().recent.len(), 2, "the dropped image's entry is gone");
    }
}
