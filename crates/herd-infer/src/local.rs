//! The candle backend: a model loaded into this process, scored and sampled on CPU, CUDA or Metal.

use crate::constraint::{ConstraintEngine, SequenceConstraint};
use crate::error::{InferError, Result, io_error, model_file};
use crate::model::{Decoder, KvCache, WeightFormat, causal_mask, load_gguf_cached, load_hf_folder};
use crate::prepared::{LoadReport, PreparedCache};
use crate::sampler::{RepetitionPenalty, sample_forced, sample_token, sequence_rng};
use crate::tokenizer::TextTokenizer;
use candle_core::{DType, Device, Tensor};
use herd_backend::chat::{ChatPrompt, Part};
use herd_backend::{
    AnswerScore, Backend, BackendInfo, ComputePath, Family, FinishReason, GenerateRequest, Generation, ModelEntry,
    ModelFiles, ScoreBound, ScoreRequest, ScoreResult, TopToken, WeightChoice, WeightDType,
};
use herd_chat::{ChatTemplate, SpecialTokens, TemplateMessage};
use std::collections::BTreeMap;
use std::path::Path;

/// Where a model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    #[default]
    Cpu,
    Cuda(usize),
    Metal(usize),
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (kind, index) = s.split_once(':').unwrap_or((s, "0"));
        let index: usize = index.parse().map_err(|_| format!("device `{s}`: the index after `:` must be a number"))?;
        match kind {
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(index)),
            "metal" => Ok(DeviceChoice::Metal(index)),
            _ => Err(format!("device `{s}`: use cpu, cuda[:N] or metal[:N]")),
        }
    }
}

impl DeviceChoice {
    pub fn open(self) -> Result<Device> {
        let hint = |what: &str, feature: &str| {
            InferError::Request(format!(
                "{what} is not available: build herd with `--features {feature}` on a machine with that device"
            ))
        };
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Cuda(i) => {
                if !candle_core::utils::cuda_is_available() {
                    return Err(hint("CUDA", "cuda"));
                }
                Ok(Device::new_cuda(i)?)
            }
            DeviceChoice::Metal(i) => {
                if !candle_core::utils::metal_is_available() {
                    return Err(hint("Metal", "metal"));
                }
                Ok(Device::new_metal(i)?)
            }
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub device: DeviceChoice,
    /// The weights' precision; `None` takes the registry entry's `weights`, else `auto`.
    pub weights: Option<WeightChoice>,
    /// Overrides the weight formats `weights` chooses (tests and benchmarks): the format prefill
    /// (scoring, prompts) runs with, and the one decoding runs with.
    pub prefill_format: Option<WeightFormat>,
    pub decode_format: Option<WeightFormat>,
    /// Where int8 weights prepared from a GGUF file are kept between loads (herd's cache by default).
    pub prepared: PreparedCache,
}

/// A text model held in memory, with the weights it scores with and the weights it decodes with (the
/// same copy unless a benchmark overrides one): int8 or exact, as [`WeightChoice`] says.
pub struct LocalModel {
    pub alias: String,
    pub family: Family,
    pub tokenizer: TextTokenizer,
    renderer: PromptRenderer,
    prefill: Decoder,
    decode: Option<Decoder>,
    constraint: Option<ConstraintEngine>,
    device: Device,
    compute: ComputePath,
    load_report: LoadReport,
    /// The last scoring group's shared prefix and its keys and values: the next group extends the part
    /// it shares (a system prompt, the instructions) instead of computing it again.
    last_prefix: std::sync::Mutex<Option<(Vec<u32>, KvCache)>>,
    /// Whether a token the grammar forces is appended without the output layer and the draw (the
    /// default); off, it goes through both like any other, the plain path the tests and the benchmark
    /// compare against.
    skip_forced_logits: bool,
    /// Forced tokens appended so, since the model was loaded (what the tests and the benchmark read).
    forced_tokens_skipped: usize,
}

/// A model's own chat template with its registry options: turns a [`ChatPrompt`] into the text the
/// model reads. Loaded with the model, or alone ([`PromptRenderer::load`]) where a server runs the model.
pub struct PromptRenderer {
    alias: String,
    template: ChatTemplate,
    template_options: serde_json::Map<String, serde_json::Value>,
}

impl PromptRenderer {
    /// Reads only the template (GGUF metadata, or the folder's tokenizer files), not the weights.
    pub fn load(entry: &ModelEntry, files: &ModelFiles) -> Result<Self> {
        let template = match files {
            ModelFiles::Gguf(path) => {
                let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(io_error(path))?);
                let content = crate::model::read_gguf(path, &mut file)?;
                let tokenizer = TextTokenizer::from_gguf(path, &content)?;
                gguf_chat_template(path, &content, &tokenizer)?
            }
            ModelFiles::HfFolder(dir) => ChatTemplate::from_hf_folder(dir)?,
        };
        Ok(PromptRenderer { alias: entry.alias.clone(), template, template_options: entry.template_options.clone() })
    }

    /// The prompt after the template with the generation prompt added; `thinking` sets `enable_thinking`
    /// where the template has the switch.
    pub fn render(&self, prompt: &ChatPrompt, thinking: Option<bool>) -> Result<String> {
        let mut messages = Vec::new();
        for m in &prompt.messages {
            let mut texts = Vec::new();
            for part in &m.content {
                match part {
                    Part::Text { text } => texts.push(text.as_str()),
                    Part::Image { image } => {
                        return Err(InferError::Request(format!(
                            "`{}` is a text model but the prompt has image `{image}`; use the text modality for it",
                            self.alias
                        )));
                    }
                }
            }
            messages.push(TemplateMessage::text(m.role.as_str(), texts.join("\n")));
        }
        Ok(self.template.render(&messages, true, &with_thinking(&self.template_options, thinking))?)
    }
}

fn gguf_chat_template(
    path: &Path,
    content: &candle_core::quantized::gguf_file::Content,
    tokenizer: &TextTokenizer,
) -> Result<ChatTemplate> {
    let source = content
        .metadata
        .get("tokenizer.chat_template")
        .and_then(|v| v.to_string().ok())
        .ok_or_else(|| model_file(path, "GGUF metadata has no `tokenizer.chat_template`"))?;
    let special = SpecialTokens {
        bos_token: tokenizer.bos_token.clone().unwrap_or_default(),
        eos_token: tokenizer.eos_token.clone().unwrap_or_default(),
        pad_token: None,
        unk_token: None,
    };
    Ok(ChatTemplate::new(source, special)?)
}

impl LocalModel {
    pub fn load(entry: &ModelEntry, files: &ModelFiles, options: &LoadOptions) -> Result<Self> {
        if entry.family.is_vision() {
            return Err(InferError::Request(format!(
                "`{}` is a vision model; load it with herd_infer::VisionModel",
                entry.alias
            )));
        }
        let start = std::time::Instant::now();
        let device = options.device.open()?;
        let choice = options.weights.or(entry.weights).unwrap_or_default();
        let gguf = matches!(files, ModelFiles::Gguf(_));
        let int8 = match choice {
            WeightChoice::Int8 if !device.is_cpu() => {
                return Err(InferError::Request(format!(
                    "`{}`: --weights int8 runs herd-kernels' CPU code; on {} use --weights exact (or auto)",
                    entry.alias,
                    device_name(&device)
                )));
            }
            WeightChoice::Int8 => true,
            WeightChoice::Exact => false,
            WeightChoice::Auto => gguf && device.is_cpu(),
        };
        let prefill_format =
            options.prefill_format.unwrap_or(if int8 { WeightFormat::Int8 } else { WeightFormat::Dense });
        let dtype = if gguf { DType::F32 } else { safetensors_dtype(entry.dtype, &device) };
        let (prefill, tokenizer, template, mut report) = match files {
            ModelFiles::Gguf(path) => {
                let (decoder, content, mut report) =
                    load_gguf_cached(path, &device, prefill_format, &options.prepared)?;
                let tokenizer = report.time("tokenizer", || TextTokenizer::from_gguf(path, &content))?;
                let template = report.time("chat template", || gguf_chat_template(path, &content, &tokenizer))?;
                (decoder, tokenizer, template, report)
            }
            ModelFiles::HfFolder(dir) => {
                let mut report = LoadReport::default();
                let decoder = report.time("weights", || load_hf_folder(dir, &device, dtype, prefill_format))?;
                let tokenizer = report.time("tokenizer", || TextTokenizer::from_hf_folder(dir))?;
                (decoder, tokenizer, ChatTemplate::from_hf_folder(dir)?, report)
            }
        };
        let decode_format = options.decode_format.unwrap_or(prefill_format);
        let decode = if decode_format == prefill_format {
            None
        } else {
            Some(report.time("decoding weights", || prefill.with_weight_format(decode_format))?)
        };
        let compute = compute_path(&device, gguf, dtype, prefill_format, decode_format)?;
        let renderer =
            PromptRenderer { alias: entry.alias.clone(), template, template_options: entry.template_options.clone() };
        report.total_s = start.elapsed().as_secs_f64();
        if std::env::var_os("HERD_LOAD_TIMING").is_some_and(|v| !v.is_empty() && v != "0") {
            eprintln!("{}: {}", entry.alias, report.summary());
        }
        Ok(Self {
            alias: entry.alias.clone(),
            family: entry.family,
            tokenizer,
            renderer,
            prefill,
            decode,
            constraint: None,
            device,
            compute,
            load_report: report,
            last_prefix: Default::default(),
            skip_forced_logits: true,
            forced_tokens_skipped: 0,
        })
    }

    /// What this model's numbers are computed with.
    pub fn compute_path(&self) -> &ComputePath {
        &self.compute
    }

    /// Where this model's load spent its time, and whether its prepared weights came from the cache.
    pub fn load_report(&self) -> &LoadReport {
        &self.load_report
    }

    /// The prompt text after the model's chat template, ready to tokenize.
    pub fn render(&self, prompt: &ChatPrompt) -> Result<String> {
        self.renderer.render(prompt, None)
    }

    /// [`LocalModel::render`] with thinking switched on or off where the template has the switch.
    pub fn render_thinking(&self, prompt: &ChatPrompt, thinking: Option<bool>) -> Result<String> {
        self.renderer.render(prompt, thinking)
    }

    pub fn prompt_tokens(&self, prompt: &ChatPrompt) -> Result<Vec<u32>> {
        self.tokenizer.encode(&self.render(prompt)?)
    }

    fn positions(&self, start: usize, len: usize) -> Result<Tensor> {
        Ok(Tensor::arange(start as u32, (start + len) as u32, &self.device)?.reshape((1, len))?)
    }

    /// Next-token logits after `tokens`, continuing `cache` (which is extended).
    pub fn next_token_logits(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        let past = cache.len();
        let input = Tensor::new(tokens, &self.device)?.reshape((1, tokens.len()))?;
        let mask = if tokens.len() > 1 { Some(causal_mask(tokens.len(), past, &self.device)?) } else { None };
        let hidden = self.prefill.forward(&input, &self.positions(past, tokens.len())?, mask.as_ref(), cache)?;
        let last = hidden.narrow(1, tokens.len() - 1, 1)?.reshape((1, ()))?;
        Ok(self.prefill.logits(&last)?.flatten_all()?.to_vec1()?)
    }

    /// Scores token sequences, computing their longest common prefix once and their continuations
    /// packed side by side into one row per forward pass (large matrix products, no padding). Within a
    /// pass, a continuation computes only the tokens after the longest prefix it shares with an earlier
    /// one, and attends to that one's tokens for the rest (a prefix tree packed in one row).
    pub fn score_tokens(&self, sequences: &[Vec<u32>], answers: &[Vec<String>]) -> Result<Vec<ScoreResult>> {
        if let Some(i) = sequences.iter().position(|s| s.is_empty()) {
            return Err(InferError::Request(format!("request {i} renders to no tokens")));
        }
        let shared = if sequences.len() > 1 { common_prefix_len(sequences) } else { 0 };
        let prefix_cache = self.shared_prefix_cache(&sequences[0][..shared])?;
        let mut results = Vec::with_capacity(sequences.len());
        let mut start = 0;
        while start < sequences.len() {
            // As many continuations as fit the token budget, and always at least one; each after the
            // longest prefix it shares with an earlier one of the pass (always leaving its last token).
            let mut plan: Vec<Continuation<'_>> = Vec::new();
            let mut packed = 0;
            for (i, s) in sequences.iter().enumerate().skip(start) {
                let parent = (start..i)
                    .map(|j| (common_prefix(&sequences[j], s).min(s.len() - 1), j))
                    .filter(|&(l, _)| l > shared)
                    .max_by_key(|&(l, j)| (l, std::cmp::Reverse(j)));
                let (from, parent) = match parent {
                    Some((l, j)) => (l, Some(j - start)),
                    None => (shared, None),
                };
                if !plan.is_empty() && packed + s.len() - from > SCORE_PACK_TOKENS {
                    break;
                }
                packed += s.len() - from;
                plan.push(Continuation { tokens: s, from, parent });
            }
            let pack = PackedSuffixes::new(&plan, shared, &self.device)?;
            let mut cache = prefix_cache.clone();
            let hidden = self.prefill.forward(&pack.tokens, &pack.positions, Some(&pack.mask), &mut cache)?;
            let last = Tensor::new(pack.last.as_slice(), &self.device)?;
            let logits: Vec<Vec<f32>> = self.prefill.logits(&hidden.squeeze(0)?.index_select(&last, 0)?)?.to_vec2()?;
            for (i, logits) in logits.iter().enumerate() {
                results.push(answer_scores(
                    &self.tokenizer,
                    logits,
                    &answers[start + i],
                    sequences[start + i].len(),
                    plan[i].from,
                ));
            }
            start += plan.len();
        }
        Ok(results)
    }

    /// The keys and values of `prefix`, a prefix every sequence of a group shares (empty: an empty
    /// cache). What it shares with the last group's prefix comes from that one's cache, and it becomes
    /// the last prefix: each row's keys and values do not depend on how the rows before it were batched,
    /// so this changes no number.
    fn shared_prefix_cache(&self, prefix: &[u32]) -> Result<KvCache> {
        if prefix.is_empty() {
            return Ok(self.prefill.new_cache());
        }
        let mut last = self.last_prefix.lock().unwrap_or_else(|e| e.into_inner());
        let reuse = last.as_ref().map_or(0, |(tokens, _)| common_prefix(tokens, prefix));
        let mut cache = match last.as_ref() {
            Some((_, cache)) if reuse > 0 => cache.truncated(reuse),
            _ => self.prefill.new_cache(),
        };
        if prefix.len() > reuse {
            self.next_token_logits(&prefix[reuse..], &mut cache)?;
        }
        *last = Some((prefix.to_vec(), cache.clone()));
        Ok(cache)
    }

    /// The token that fills left padding (never attended to, so any id would do).
    fn pad_id(&self) -> u32 {
        self.tokenizer.pad_id.or(self.tokenizer.eos_ids.first().copied()).unwrap_or(0)
    }

    fn constraint_engine(&mut self) -> Result<&ConstraintEngine> {
        if self.constraint.is_none() {
            self.constraint = Some(ConstraintEngine::new(&self.tokenizer, self.prefill.config.vocab_size)?);
        }
        Ok(self.constraint.as_ref().expect("just built"))
    }

    /// Whether generation appends a token the JSON grammar forces (the only one its mask leaves) without
    /// computing that row's logits or sampling them (on by default). The samples are the same either way,
    /// bit for bit; off is the plain path, for the tests and the benchmark that compare the two.
    #[doc(hidden)]
    pub fn set_skip_forced_logits(&mut self, skip: bool) {
        self.skip_forced_logits = skip;
    }

    /// The forced tokens generation has appended without their logits since the model was loaded.
    #[doc(hidden)]
    pub fn forced_tokens_skipped(&self) -> usize {
        self.forced_tokens_skipped
    }

    /// Samples one completion per prompt, decoding the batch together (left padding, per-row positions
    /// and mask), so each row gets what it would get alone at the same seed.
    ///
    /// A row whose grammar leaves one token (a key's next piece, the punctuation of an allocation
    /// object: most of an allocation's tokens) takes it without the output layer or the draw, which
    /// would pick it whatever the logits; its RNG moves as the draw would move it. The token still
    /// goes through the decoder one step at a time, with the batch: on a CPU a step of 20 rows costs
    /// about what its tokens cost (compute, not memory, bounds it), so packing a row's run of forced
    /// tokens into one step would save the steps but not the work.
    pub fn generate_tokens(&mut self, prompts: &[Vec<u32>], requests: &[GenerateRequest]) -> Result<Vec<Generation>> {
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(i) = prompts.iter().position(|p| p.is_empty()) {
            return Err(InferError::Request(format!("request {i} renders to no tokens")));
        }
        let mut constraints: Vec<Option<SequenceConstraint>> = Vec::with_capacity(requests.len());
        for r in requests {
            constraints.push(match &r.schema {
                Some(schema) => Some(self.constraint_engine()?.matcher(schema)?),
                None => None,
            });
        }
        let b = prompts.len();
        // The prompts' common start (a society's instructions) is computed once, as one row, and its keys
        // and values copied to every row; each row's rest follows it, left-padded to the longest. The
        // attention visits each row's own keys in position order whatever lies between them, so every row
        // samples what it would alone.
        let shared = if b > 1 { common_prefix_len(prompts) } else { 0 };
        let dev = &self.device;
        let mut cache = self.shared_prefix_cache(&prompts[0][..shared])?;
        if shared > 0 {
            cache = cache.select_rows(&Tensor::new(vec![0u32; b], dev)?)?;
        }
        let rows: Vec<&[u32]> = prompts.iter().map(|p| &p[shared..]).collect();
        let PaddedBatch { tokens, positions, mask, pads, width } =
            PaddedBatch::after_prefix(&rows, shared, self.pad_id(), dev)?;
        let hidden = self.prefill.forward(&tokens, &positions, Some(&mask), &mut cache)?;
        // `[rows, hidden]`: the last position of each active row, which the output layer reads.
        let mut last_hidden = hidden.narrow(1, width - 1, 1)?.reshape((b, ()))?;
        let decoder = self.decode.as_ref().unwrap_or(&self.prefill);
        let mut head = &self.prefill;
        let mut rngs: Vec<_> = requests.iter().map(|r| sequence_rng(r.sampling.seed)).collect();
        // HF penalises the ids of the whole sequence (prompt and output; not the left padding, which a row
        // decoded alone would not have).
        let mut penalties = Vec::with_capacity(b);
        for (r, prompt) in requests.iter().zip(prompts) {
            penalties.push(RepetitionPenalty::new(r.sampling.repetition_penalty, prompt)?);
        }
        let mut generated: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut finished: Vec<Option<FinishReason>> = vec![None; b];
        let mut texts: Vec<String> = vec![String::new(); b];
        let mut active: Vec<usize> = (0..b).collect();
        loop {
            let mut masks = Vec::with_capacity(active.len());
            for &row in &active {
                masks.push(constraints[row].as_mut().map(SequenceConstraint::next_mask).transpose()?);
            }
            let forced: Vec<Option<u32>> =
                masks.iter().map(|m| m.as_ref().and_then(|m| m.forced()).filter(|_| self.skip_forced_logits)).collect();
            // The output layer over the rows that draw; each row's logits are what it gets in any batch.
            let free: Vec<u32> = (0..active.len() as u32).filter(|&slot| forced[slot as usize].is_none()).collect();
            self.forced_tokens_skipped += active.len() - free.len();
            let mut free_logits: std::vec::IntoIter<Vec<f32>> = match free.len() {
                0 => Vec::new(),
                n if n == active.len() => head.logits(&last_hidden)?.to_vec2()?,
                _ => head.logits(&last_hidden.index_select(&Tensor::new(free.as_slice(), dev)?, 0)?)?.to_vec2()?,
            }
            .into_iter();
            let mut next = Vec::with_capacity(active.len());
            for (slot, &row) in active.iter().enumerate() {
                let token = match forced[slot] {
                    Some(token) => sample_forced(token, &requests[row].sampling, &mut rngs[row]),
                    None => {
                        let mut row_logits = free_logits.next().expect("a row of logits for every drawing row");
                        if let Some(mask) = &masks[slot] {
                            mask.apply(&mut row_logits);
                        }
                        if let Some(p) = &penalties[row] {
                            p.apply(&mut row_logits);
                        }
                        sample_token(&row_logits, &requests[row].sampling, &mut rngs[row])?
                    }
                };
                if let Some(p) = penalties[row].as_mut() {
                    p.push(token);
                }
                next.push(token);
                if self.tokenizer.eos_ids.contains(&token) {
                    finished[row] = Some(FinishReason::Eos);
                    continue;
                }
                if let Some(c) = constraints[row].as_mut() {
                    c.accept(token)?;
                }
                generated[row].push(token);
                let stop = &requests[row].sampling.stop;
                // Decoding the text so far at every step costs only where a stop string may end it.
                if !stop.is_empty() {
                    let text = self.tokenizer.decode(&generated[row])?;
                    if let Some(cut) = stop.iter().filter_map(|s| text.find(s.as_str())).min() {
                        texts[row] = text[..cut].to_string();
                        finished[row] = Some(FinishReason::Stop);
                        continue;
                    }
                }
                if generated[row].len() >= requests[row].sampling.max_tokens {
                    finished[row] = Some(FinishReason::Length);
                }
            }
            let keep: Vec<usize> = (0..active.len()).filter(|&slot| finished[active[slot]].is_none()).collect();
            if keep.is_empty() {
                break;
            }
            if keep.len() < active.len() {
                cache = cache.select_rows(&Tensor::new(keep.iter().map(|&s| s as u32).collect::<Vec<_>>(), dev)?)?;
                active = keep.iter().map(|&s| active[s]).collect();
                next = keep.iter().map(|&s| next[s]).collect();
            }
            let n = active.len();
            let past = cache.len();
            let positions: Vec<u32> = active.iter().map(|&row| (past - pads[row]) as u32).collect();
            // Each row's padding lies between the shared prefix and its own tokens.
            let step_mask: Vec<f32> = active
                .iter()
                .flat_map(|&row| {
                    let padding = shared..shared + pads[row];
                    (0..=past).map(move |j| if padding.contains(&j) { f32::NEG_INFINITY } else { 0.0 })
                })
                .collect();
            let any_padding = active.iter().any(|&row| pads[row] > 0);
            let step_mask =
                if any_padding { Some(Tensor::from_vec(step_mask, (n, 1, 1, past + 1), dev)?) } else { None };
            last_hidden = decoder
                .forward(
                    &Tensor::from_vec(next, (n, 1), dev)?,
                    &Tensor::from_vec(positions, (n, 1), dev)?,
                    step_mask.as_ref(),
                    &mut cache,
                )?
                .reshape((n, ()))?;
            head = decoder;
        }
        for row in 0..b {
            if finished[row] != Some(FinishReason::Stop) {
                texts[row] = self.tokenizer.decode(&generated[row])?;
            }
        }
        Ok((0..b)
            .map(|row| Generation {
                text: std::mem::take(&mut texts[row]),
                prompt_tokens: prompts[row].len(),
                completion_tokens: generated[row].len(),
                finish_reason: finished[row].expect("every row finishes"),
                constrained: requests[row].schema.is_some(),
                reasoning: None,
            })
            .collect())
    }

    pub fn device_name(&self) -> String {
        device_name(&self.device)
    }
}

/// Continuation tokens packed into one forward pass at most (bounds the attention matrix, which grows
/// with the square of the packed length).
const SCORE_PACK_TOKENS: usize = 1024;

/// One sequence of a packed pass: computed from position `from` on; its tokens before `from` past the
/// cached prefix are those of the pass's earlier continuation `parent` (index in the pass).
struct Continuation<'a> {
    tokens: &'a [u32],
    from: usize,
    parent: Option<usize>,
}

/// Continuations of one cached prefix packed into a single row: each attends to the prefix, to the
/// tokens it shares with its parent where the parent's line (its ancestors) computed them, and to its
/// own earlier tokens, at the positions it would have alone, so it computes what it would alone: the
/// keys it sees are the same, in the same order of positions.
struct PackedSuffixes {
    /// `[1, total]` token ids.
    tokens: Tensor,
    /// `[1, total]` positions, from `past` within each continuation.
    positions: Tensor,
    /// `[1, 1, total, past + total]` additive mask.
    mask: Tensor,
    /// Index of each continuation's last token in the row.
    last: Vec<u32>,
}

impl PackedSuffixes {
    fn new(plan: &[Continuation<'_>], past: usize, device: &Device) -> Result<Self> {
        let total: usize = plan.iter().map(|c| c.tokens.len() - c.from).sum();
        let mut tokens = Vec::with_capacity(total);
        let mut positions = Vec::with_capacity(total);
        let mut mask = vec![f32::NEG_INFINITY; total * (past + total)];
        let mut last = Vec::with_capacity(plan.len());
        // Where each continuation's computed tokens start in the row.
        let mut starts: Vec<usize> = Vec::with_capacity(plan.len());
        for c in plan {
            let start = tokens.len();
            // The spans of the row holding positions past..c.from: up the parent line, each ancestor
            // contributing the positions it computed below the limit its child leaves.
            let mut inherited = Vec::new();
            let (mut line, mut limit) = (c.parent, c.from);
            while let Some(p) = line {
                let ancestor = &plan[p];
                if limit > ancestor.from {
                    inherited.push(starts[p]..starts[p] + (limit - ancestor.from));
                    limit = ancestor.from;
                }
                line = ancestor.parent;
            }
            debug_assert_eq!(limit, past, "a continuation's line reaches back to the cached prefix");
            for (i, &token) in c.tokens[c.from..].iter().enumerate() {
                let row = &mut mask[(start + i) * (past + total)..(start + i + 1) * (past + total)];
                row[..past].fill(0.0);
                // Earlier positions sit earlier in the row (parents are packed before their children).
                for span in inherited.iter().rev() {
                    row[past + span.start..past + span.end].fill(0.0);
                }
                row[past + start..=past + start + i].fill(0.0);
                tokens.push(token);
                positions.push((c.from + i) as u32);
            }
            starts.push(start);
            last.push((tokens.len() - 1) as u32);
        }
        Ok(Self {
            tokens: Tensor::from_vec(tokens, (1, total), device)?,
            positions: Tensor::from_vec(positions, (1, total), device)?,
            mask: Tensor::from_vec(mask, (1, 1, total, past + total), device)?,
            last,
        })
    }
}

/// Token rows of different lengths as one left-padded batch.
struct PaddedBatch {
    /// `[b, width]` token ids after the prefix, padding first.
    tokens: Tensor,
    /// `[b, width]` positions: each row's tokens start right after the prefix whatever its padding.
    positions: Tensor,
    /// `[b, 1, width, prefix + width]` additive mask: the prefix, then causal, blind to padding. A padding
    /// position attends to itself alone, so no softmax row is over nothing (all -inf gives NaN that spreads).
    mask: Tensor,
    pads: Vec<usize>,
    width: usize,
}

impl PaddedBatch {
    /// Rows that follow `prefix` cached positions every row shares (0: rows from the start).
    fn after_prefix(rows: &[&[u32]], prefix: usize, pad_id: u32, device: &Device) -> Result<Self> {
        let b = rows.len();
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
        let keys = prefix + width;
        let pads: Vec<usize> = rows.iter().map(|r| width - r.len()).collect();
        let mut tokens = Vec::with_capacity(b * width);
        let mut positions = Vec::with_capacity(b * width);
        let mut mask = Vec::with_capacity(b * width * keys);
        for (row, &pad) in rows.iter().zip(&pads) {
            tokens.extend(std::iter::repeat_n(pad_id, pad).chain(row.iter().copied()));
            positions.extend((0..width).map(|j| (prefix + j.saturating_sub(pad)) as u32));
            for i in 0..width {
                let padding = i < pad;
                mask.extend((0..keys).map(|key| {
                    let seen = match key.checked_sub(prefix) {
                        None => !padding,
                        Some(j) => j <= i && (j >= pad || j == i),
                    };
                    if seen { 0.0f32 } else { f32::NEG_INFINITY }
                }));
            }
        }
        Ok(Self {
            tokens: Tensor::from_vec(tokens, (b, width), device)?,
            positions: Tensor::from_vec(positions, (b, width), device)?,
            mask: Tensor::from_vec(mask, (b, 1, width, keys), device)?,
            pads,
            width,
        })
    }
}

/// The path a model loaded on `device` computes with; on CPU, `HERD_CPU_PATH` must name a path this
/// CPU runs.
fn compute_path(
    device: &Device,
    gguf: bool,
    dtype: DType,
    prefill: WeightFormat,
    decode: WeightFormat,
) -> Result<ComputePath> {
    let weights = |format: WeightFormat| match format {
        WeightFormat::Int8 => "int8".to_owned(),
        WeightFormat::Q8_0 => "q8_0".into(),
        WeightFormat::Native => "the GGUF file's own quantisation".into(),
        WeightFormat::Dense => dtype_name(dtype).into(),
    };
    let activations = match prefill {
        WeightFormat::Int8 => format!("int8 per block of {}", herd_kernels::BLOCK),
        // candle's quantised products quantise their input to Q8 per block of 32 on CPU.
        WeightFormat::Q8_0 | WeightFormat::Native if device.is_cpu() => "q8 per block of 32".into(),
        _ => dtype_name(dtype).into(),
    };
    Ok(ComputePath {
        device: device_name(device),
        isa: device_isa(device)?,
        weights: weights(prefill),
        weights_from: if gguf { "gguf" } else { "safetensors" }.into(),
        decode_weights: (decode != prefill).then(|| weights(decode)),
        activations,
        dtype: dtype_name(dtype).into(),
        herd_version: env!("CARGO_PKG_VERSION").into(),
    })
}

/// herd-kernels' path on CPU, the compute capability on CUDA.
pub(crate) fn device_isa(device: &Device) -> Result<String> {
    match device {
        Device::Cpu => {
            Ok(herd_kernels::CpuPath::active().map_err(|e| InferError::Request(e.to_string()))?.name().into())
        }
        #[cfg(feature = "cuda")]
        Device::Cuda(cuda) => Ok(match cuda.cuda_stream().context().compute_capability() {
            Ok((major, minor)) => format!("cuda sm_{major}{minor}"),
            Err(_) => "cuda (compute capability unknown)".into(),
        }),
        _ => Ok(device_name(device)),
    }
}

pub(crate) fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::F64 => "f64",
        _ => "other",
    }
}

pub(crate) fn device_name(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(_) => "cuda".into(),
        Device::Metal(_) => "metal".into(),
    }
}

/// The dtype safetensors weights are held in: f32 on CPU (bf16 matrix products are slow there), the
/// registry's dtype (default bf16) on accelerators.
pub(crate) fn safetensors_dtype(stated: Option<WeightDType>, device: &Device) -> DType {
    match (stated, device.is_cpu()) {
        (_, true) => DType::F32,
        (Some(WeightDType::F16), false) => DType::F16,
        (Some(WeightDType::F32), false) => DType::F32,
        (_, false) => DType::BF16,
    }
}

/// Reads each answer's probability (summed over every token that spells it), the mass on the answers
/// and the top 10 tokens from next-token logits.
pub(crate) fn answer_scores(
    tokenizer: &TextTokenizer,
    logits: &[f32],
    answers: &[String],
    prompt_tokens: usize,
    reused: usize,
) -> ScoreResult {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let total: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let prob = |id: u32| ((logits[id as usize] as f64 - max).exp()) / total;
    let mut scores = BTreeMap::new();
    for answer in answers {
        let ids: Vec<u32> =
            tokenizer.answer_token_ids(answer).into_iter().filter(|&id| (id as usize) < logits.len()).collect();
        let p = ids.iter().map(|&id| prob(id)).sum();
        let logit = ids.iter().map(|&id| logits[id as usize]).fold(f32::NEG_INFINITY, f32::max);
        scores.insert(answer.clone(), AnswerScore { p, logit, token_ids: ids, bound: ScoreBound::Exact });
    }
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let k = 10.min(order.len());
    order.select_nth_unstable_by(k - 1, |&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    order.truncate(k);
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    let top = order
        .iter()
        .map(|&id| TopToken {
            id: Some(id),
            text: tokenizer.token_text(id).to_string(),
            p: prob(id),
            logit: logits[id as usize],
        })
        .collect();
    ScoreResult {
        mass: scores.values().map(|s: &AnswerScore| s.p).sum(),
        answers: scores,
        top,
        prompt_tokens,
        reused_tokens: reused,
    }
}

/// Length of the longest prefix all sequences share, leaving at least one token of each to run.
/// The template variables with `enable_thinking` set as a request asks (the Qwen3 family's switch; other
/// templates ignore the variable).
pub(crate) fn with_thinking(
    options: &serde_json::Map<String, serde_json::Value>,
    thinking: Option<bool>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut options = options.clone();
    if let Some(on) = thinking {
        options.insert("enable_thinking".into(), on.into());
    }
    options
}

/// Length of the longest common prefix of two token sequences.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

pub fn common_prefix_len(sequences: &[Vec<u32>]) -> usize {
    let first = &sequences[0];
    let mut n = sequences.iter().map(Vec::len).min().unwrap_or(0).saturating_sub(1);
    for s in &sequences[1..] {
        n = n.min(first.iter().zip(s).take_while(|(a, b)| a == b).count());
    }
    n
}

impl LocalModel {
    fn score_requests(&mut self, group: &[ScoreRequest]) -> Result<Vec<ScoreResult>> {
        if group.iter().any(|r| r.image.is_some()) {
            return Err(InferError::Request(format!(
                "`{}` is a text model; requests with images need a vision model",
                self.alias
            )));
        }
        let sequences = group.iter().map(|r| self.prompt_tokens(&r.prompt)).collect::<Result<Vec<_>>>()?;
        let answers: Vec<Vec<String>> = group.iter().map(|r| r.answers.clone()).collect();
        self.score_tokens(&sequences, &answers)
    }

    fn generate_requests(&mut self, batch: &[GenerateRequest]) -> Result<Vec<Generation>> {
        if batch.iter().any(|r| r.image.is_some()) {
            return Err(InferError::Request(format!(
                "`{}` is a text model; requests with images need a vision model",
                self.alias
            )));
        }
        let prompts = batch
            .iter()
            .map(|r| self.tokenizer.encode(&self.render_thinking(&r.prompt, r.thinking)?))
            .collect::<Result<Vec<_>>>()?;
        self.generate_tokens(&prompts, batch)
    }

    fn backend_info(&self) -> BackendInfo {
        BackendInfo {
            backend: "candle".into(),
            model: self.alias.clone(),
            family: self.family.name().into(),
            device: self.device_name(),
            vision: false,
            compute: self.compute.clone(),
        }
    }
}

impl Backend for LocalModel {
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
