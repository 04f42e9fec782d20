//! Vision-language models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 3 and Mistral3 through `herd-vision`)
//! behind the same [`Backend`] trait: the prompt's image part becomes the image marker the model's own chat
//! template writes for it (`<|vision_start|><|image_pad|><|vision_end|>`, Gemma's `<start_of_image>`,
//! Mistral's `[IMG]`), the model's processor expands it (`VlModel::encode_prompt`), and the pixels go
//! through the model's own processor.

use crate::constraint::ConstraintEngine;
use crate::error::{InferError, Result};
use crate::local::{LoadOptions, answer_scores, device_isa, device_name, dtype_name, safetensors_dtype};
use crate::sampler::{RepetitionPenalty, sample_token, sequence_rng};
use crate::tokenizer::TextTokenizer;
use candle_core::DType;
use herd_backend::chat::{ChatPrompt, Part};
use herd_backend::{
    Backend, BackendInfo, ComputePath, FinishReason, GenerateRequest, Generation, ModelEntry, ModelFiles, ScoreRequest,
    ScoreResult, WeightChoice,
};
use herd_chat::{ChatTemplate, ContentPart, TemplateMessage};

pub struct VisionModel {
    pub alias: String,
    model: herd_vision::VlModel,
    pub tokenizer: TextTokenizer,
    template: ChatTemplate,
    template_options: serde_json::Map<String, serde_json::Value>,
    constraint: Option<ConstraintEngine>,
    device_name: String,
    compute: ComputePath,
}

impl VisionModel {
    pub fn load(entry: &ModelEntry, files: &ModelFiles, options: &LoadOptions) -> Result<Self> {
        let ModelFiles::HfFolder(dir) = files else {
            return Err(InferError::Request(format!(
                "`{}`: vision models load from an HF folder, not {}",
                entry.alias,
                files.path().display()
            )));
        };
        let device = options.device.open()?;
        if options.weights.or(entry.weights) == Some(WeightChoice::Int8) {
            return Err(InferError::Request(format!(
                "`{}`: vision models run with their exact weights; use --weights exact (or auto)",
                entry.alias
            )));
        }
        let dtype = safetensors_dtype(entry.dtype, &device);
        let compute = ComputePath {
            device: device_name(&device),
            isa: device_isa(&device)?,
            weights: dtype_name(dtype).into(),
            weights_from: "safetensors".into(),
            decode_weights: None,
            activations: dtype_name(dtype).into(),
            dtype: dtype_name(dtype).into(),
            herd_version: env!("CARGO_PKG_VERSION").into(),
        };
        Ok(Self {
            alias: entry.alias.clone(),
            model: herd_vision::VlModel::load(dir, &device, dtype)?,
            tokenizer: TextTokenizer::from_hf_folder(dir)?,
            template: ChatTemplate::from_hf_folder(dir)?,
            template_options: entry.template_options.clone(),
            constraint: None,
            device_name: device_name(&device),
            compute,
        })
    }

    /// The prompt after the model's chat template; image parts become the template's image marker.
    pub fn render(&self, prompt: &ChatPrompt) -> Result<String> {
        let messages: Vec<TemplateMessage> = prompt
            .messages
            .iter()
            .map(|m| {
                let role = m.role.as_str();
                let parts = m
                    .content
                    .iter()
                    .map(|p| match p {
                        Part::Image { .. } => ContentPart::Image,
                        Part::Text { text } => ContentPart::Text { text: text.clone() },
                    })
                    .collect();
                TemplateMessage::parts(role, parts)
            })
            .collect();
        Ok(self.template.render(&messages, true, &self.template_options)?)
    }

    fn prepare(
        &self,
        prompt: &ChatPrompt,
        image: Option<&image::RgbImage>,
    ) -> Result<(Vec<u32>, Option<herd_vision::PreparedImage>)> {
        let has_image_part = prompt.messages.iter().flat_map(|m| &m.content).any(|p| matches!(p, Part::Image { .. }));
        let prepared = match (has_image_part, image) {
            (true, Some(pixels)) => Some(self.model.preprocess(&image::DynamicImage::ImageRgb8(pixels.clone()))?),
            (false, None) => None,
            (true, None) => {
                return Err(InferError::Request(
                    "the prompt has an image part but the request carries no pixels".into(),
                ));
            }
            (false, Some(_)) => {
                return Err(InferError::Request("the request carries pixels but the prompt has no image part".into()));
            }
        };
        let tokens = self.model.encode_prompt(&self.render(prompt)?, prepared.as_ref())?;
        Ok((tokens, prepared))
    }

    fn logits(&self, tokens: &[u32], image: Option<&herd_vision::PreparedImage>) -> Result<Vec<f32>> {
        Ok(self.model.next_token_logits(tokens, image)?.to_dtype(DType::F32)?.to_vec1()?)
    }
}

impl VisionModel {
    /// A group that shows one image (the runner groups by image) is computed as one shared prefix (the
    /// template, the image and the question: the longest token prefix all requests share, if it holds the
    /// whole image) and each request's own continuation after it; otherwise request by request.
    fn score_requests(&mut self, group: &[ScoreRequest]) -> Result<Vec<ScoreResult>> {
        let items = group.iter().map(|r| self.prepare(&r.prompt, r.image.as_deref())).collect::<Result<Vec<_>>>()?;
        let same_image = group.windows(2).all(|w| match (&w[0].image, &w[1].image) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b) || a == b,
            (None, None) => true,
            _ => false,
        });
        let shared = match items.as_slice() {
            [first, rest @ ..] if same_image && !rest.is_empty() => {
                let shortest = items.iter().map(|(t, _)| t.len()).min().unwrap_or(0);
                // Every request keeps at least its last token to compute.
                let common = rest.iter().fold(shortest.saturating_sub(1), |n, (t, _)| {
                    n.min(first.0.iter().zip(t).take_while(|(a, b)| a == b).count())
                });
                let image_id = self.model.image_token_id();
                let image_end = first.0.iter().rposition(|&t| t == image_id).map_or(0, |i| i + 1);
                (common > 0 && common >= image_end).then_some(common)
            }
            _ => None,
        };
        let Some(common) = shared else {
            return items
                .iter()
                .zip(group)
                .map(|((tokens, prepared), r)| {
                    let logits = self.logits(tokens, prepared.as_ref())?;
                    Ok(answer_scores(&self.tokenizer, &logits, &r.answers, tokens.len(), 0))
                })
                .collect();
        };
        let prefix = self.model.prefill(&items[0].0[..common], items[0].1.as_ref())?;
        items
            .iter()
            .zip(group)
            .map(|((tokens, _), r)| {
                let state = self.model.extend(&prefix, &tokens[common..])?;
                let logits: Vec<f32> = state.logits().to_dtype(DType::F32)?.to_vec1()?;
                Ok(answer_scores(&self.tokenizer, &logits, &r.answers, tokens.len(), common))
            })
            .collect()
    }

    /// Decodes one request at a time: the prompt is computed once, then each token extends its keys and
    /// values.
    fn generate_requests(&mut self, batch: &[GenerateRequest]) -> Result<Vec<Generation>> {
        let mut out = Vec::with_capacity(batch.len());
        for request in batch {
            let (tokens, prepared) = self.prepare(&request.prompt, request.image.as_deref())?;
            let prompt_tokens = tokens.len();
            let mut constraint = match &request.schema {
                Some(schema) => {
                    if self.constraint.is_none() {
                        self.constraint = Some(ConstraintEngine::new(&self.tokenizer, self.model.vocab_size())?);
                    }
                    Some(self.constraint.as_ref().expect("just built").matcher(schema)?)
                }
                None => None,
            };
            let mut rng = sequence_rng(request.sampling.seed);
            // Over the whole sequence, image placeholders included, as HF's input_ids hold them.
            let mut penalty = RepetitionPenalty::new(request.sampling.repetition_penalty, &tokens)?;
            let mut generated = Vec::new();
            let mut state = self.model.prefill(&tokens, prepared.as_ref())?;
            let (text, finish_reason) = loop {
                let mut logits: Vec<f32> = state.logits().to_dtype(DType::F32)?.to_vec1()?;
                if let Some(c) = constraint.as_mut() {
                    c.mask_logits(&mut logits)?;
                }
                if let Some(p) = &penalty {
                    p.apply(&mut logits);
                }
                let token = sample_token(&logits, &request.sampling, &mut rng)?;
                if let Some(p) = penalty.as_mut() {
                    p.push(token);
                }
                if self.tokenizer.eos_ids.contains(&token) {
                    break (self.tokenizer.decode(&generated)?, FinishReason::Eos);
                }
                if let Some(c) = constraint.as_mut() {
                    c.accept(token)?;
                }
                generated.push(token);
                let text = self.tokenizer.decode(&generated)?;
                if let Some(cut) = request.sampling.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                    break (text[..cut].to_string(), FinishReason::Stop);
                }
                if generated.len() >= request.sampling.max_tokens {
                    break (text, FinishReason::Length);
                }
                state = self.model.extend(&state, &[token])?;
            };
            out.push(Generation {
                text,
                prompt_tokens,
                completion_tokens: generated.len(),
                finish_reason,
                constrained: request.schema.is_some(),
                reasoning: None,
            });
        }
        Ok(out)
    }

    fn backend_info(&self) -> BackendInfo {
        BackendInfo {
            backend: "candle".into(),
            model: self.alias.clone(),
            family: self.model.family().model_type().into(),
            device: self.device_name.clone(),
            vision: true,
            compute: self.compute.clone(),
        }
    }
}

impl Backend for VisionModel {
    fn score(&mut self, group: &[ScoreRequest]) -> herd_backend::Result<Vec<ScoreResult>> {
        Ok(self.score_requests(group)?)
    }

    fn generate(&mut self, batch: &[GenerateRequest]) -> herd_backend::Result<Vec<Generation>> {
        Ok(self.generate_requests(batch)?)
    }

    fn info(&self) -> BackendInfo {
        self.backend_info()
    }
}
