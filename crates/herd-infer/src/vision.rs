//! Vision-language models (Qwen3-VL through `herd-vision`) behind the same [`Backend`] trait: the prompt's
//! image part becomes the model's image placeholder and the pixels go through the model's own processor.

use crate::backend::{Backend, BackendInfo, FinishReason, GenerateRequest, Generation, ScoreRequest, ScoreResult};
use crate::constraint::ConstraintEngine;
use crate::error::{InferError, Result};
use crate::local::{LoadOptions, answer_scores, device_name, safetensors_dtype};
use crate::registry::{ModelEntry, ModelFiles};
use crate::sampling::{RepetitionPenalty, sample_token, sequence_rng};
use crate::tokenizer::TextTokenizer;
use candle_core::DType;
use herd_chat::{ChatTemplate, ContentPart, TemplateMessage};
use herd_prompts::{ChatPrompt, Part};

pub struct VisionModel {
    pub alias: String,
    model: herd_vision::Qwen3Vl,
    pub tokenizer: TextTokenizer,
    template: ChatTemplate,
    template_options: serde_json::Map<String, serde_json::Value>,
    constraint: Option<ConstraintEngine>,
    device_name: String,
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
        Ok(Self {
            alias: entry.alias.clone(),
            model: herd_vision::Qwen3Vl::load(dir, &device, safetensors_dtype(entry.dtype, &device))?,
            tokenizer: TextTokenizer::from_hf_folder(dir)?,
            template: ChatTemplate::from_hf_folder(dir)?,
            template_options: entry.template_options.clone(),
            constraint: None,
            device_name: device_name(&device),
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
        let tokens = self.model.encode(&self.render(prompt)?)?;
        let tokens = match &prepared {
            Some(p) => self.model.expand_image_tokens(&tokens, p)?,
            None => tokens,
        };
        Ok((tokens, prepared))
    }

    fn logits(&mut self, tokens: &[u32], image: Option<&herd_vision::PreparedImage>) -> Result<Vec<f32>> {
        Ok(self.model.next_token_logits(tokens, image)?.to_dtype(DType::F32)?.to_vec1()?)
    }
}

impl Backend for VisionModel {
    fn score(&mut self, group: &[ScoreRequest]) -> Result<Vec<ScoreResult>> {
        group
            .iter()
            .map(|r| {
                let (tokens, prepared) = self.prepare(&r.prompt, r.image.as_deref())?;
                let logits = self.logits(&tokens, prepared.as_ref())?;
                Ok(answer_scores(&self.tokenizer, &logits, &r.answers, tokens.len(), 0))
            })
            .collect()
    }

    /// Decodes one request at a time; each step reruns the whole sequence (herd-vision keeps no cache),
    /// which is fine for the short answers of the conformity study.
    fn generate(&mut self, batch: &[GenerateRequest]) -> Result<Vec<Generation>> {
        let mut out = Vec::with_capacity(batch.len());
        for request in batch {
            let (mut tokens, prepared) = self.prepare(&request.prompt, request.image.as_deref())?;
            let prompt_tokens = tokens.len();
            let mut constraint = match &request.schema {
                Some(schema) => {
                    if self.constraint.is_none() {
                        self.constraint =
                            Some(ConstraintEngine::new(&self.tokenizer, self.model.config().text_config.vocab_size)?);
                    }
                    Some(self.constraint.as_ref().expect("just built").matcher(schema)?)
                }
                None => None,
            };
            let mut rng = sequence_rng(request.sampling.seed);
            // Over the whole sequence, image placeholders included, as HF's input_ids hold them.
            let mut penalty = RepetitionPenalty::new(request.sampling.repetition_penalty, &tokens)?;
            let mut generated = Vec::new();
            let (text, finish_reason) = loop {
                let mut logits = self.logits(&tokens, prepared.as_ref())?;
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
                tokens.push(token);
                let text = self.tokenizer.decode(&generated)?;
                if let Some(cut) = request.sampling.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                    break (text[..cut].to_string(), FinishReason::Stop);
                }
                if generated.len() >= request.sampling.max_tokens {
                    break (text, FinishReason::Length);
                }
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

    fn info(&self) -> BackendInfo {
        BackendInfo {
            backend: "candle".into(),
            model: self.alias.clone(),
            family: "qwen3_vl".into(),
            device: self.device_name.clone(),
            vision: true,
        }
    }
}
