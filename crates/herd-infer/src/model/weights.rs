//! Named tensors from a GGUF file or an HF safetensors folder turned into a [`Decoder`]: each format's
//! tensor names, the linear layers' weights in the chosen format (int8 mapped from or written to the
//! prepared-weights cache), and the loaders of both formats.

use super::*;
use crate::error::model_file;
use crate::prepared::{self, LoadReport, PreparedCache, PreparedStatus};
use candle_core::quantized::gguf_file;
use std::collections::HashMap;
use std::path::Path;

/// Named weights, from whichever file format, before they become a [`Decoder`].
struct WeightSource<'a> {
    file: &'a Path,
    tensors: HashMap<String, QTensorOrDense>,
    device: Device,
    dtype: DType,
    format: WeightFormat,
    /// Int8 matrices read from a prepared-weights file, by key (see [`crate::prepared`]).
    prepared: HashMap<String, Arc<Int8Matrix>>,
    /// Every int8 matrix the decoder holds, by key, and whether any was requantised here (rather than
    /// read prepared): what a prepared-weights file is written from.
    int8: Vec<(String, Arc<Int8Matrix>)>,
    requantised: bool,
    report: LoadReport,
}

enum QTensorOrDense {
    Q(Arc<QTensor>),
    Dense(Tensor),
    /// Not read: every use of it is in `WeightSource::prepared`.
    Prepared {
        rows: usize,
    },
}

impl QTensorOrDense {
    fn rows(&self) -> usize {
        match self {
            QTensorOrDense::Q(q) => q.shape().dims()[0],
            QTensorOrDense::Dense(d) => d.dims()[0],
            QTensorOrDense::Prepared { rows } => *rows,
        }
    }
}

impl<'a> WeightSource<'a> {
    fn new(
        file: &'a Path,
        tensors: HashMap<String, QTensorOrDense>,
        device: &Device,
        dtype: DType,
        format: WeightFormat,
    ) -> Self {
        Self {
            file,
            tensors,
            device: device.clone(),
            dtype,
            format,
            prepared: HashMap::new(),
            int8: Vec::new(),
            requantised: false,
            report: LoadReport::default(),
        }
    }

    fn take(&mut self, name: &str) -> Result<QTensorOrDense> {
        self.tensors.remove(name).ok_or_else(|| model_file(self.file, format!("missing tensor `{name}`")))
    }

    fn dense(&mut self, name: &str) -> Result<Tensor> {
        Ok(match self.take(name)? {
            QTensorOrDense::Q(q) => q.dequantize(&self.device)?,
            QTensorOrDense::Dense(t) => t,
            QTensorOrDense::Prepared { .. } => {
                return Err(model_file(
                    self.file,
                    format!("internal: tensor `{name}` was left unread for prepared weights but is needed dense"),
                ));
            }
        }
        .to_dtype(self.dtype)?)
    }

    fn optional_dense(&mut self, name: &str) -> Result<Option<Tensor>> {
        if self.tensors.contains_key(name) { self.dense(name).map(Some) } else { Ok(None) }
    }

    /// The linear layer `key` (its tensor's name, `NAME#i` for part `i` of a split one) of `weight`:
    /// from the prepared weights where they hold it, else converted to the source's format.
    fn linear_from(&mut self, key: &str, weight: QTensorOrDense, bias: Option<Tensor>) -> Result<Linear> {
        if let Some(m) = self.prepared.get(key) {
            self.int8.push((key.to_string(), m.clone()));
            return Ok(Linear { weight: LinearWeight::Int8(Int8Linear(m.clone())), bias });
        }
        let start = std::time::Instant::now();
        let weight = match weight {
            // Int8 requantises from the blocks directly (to_format below).
            QTensorOrDense::Q(q) if matches!(self.format, WeightFormat::Native | WeightFormat::Int8) => {
                LinearWeight::Quantized(q)
            }
            QTensorOrDense::Q(q) => {
                LinearWeight::DenseT(q.dequantize(&self.device)?.to_dtype(self.dtype)?.t()?.contiguous()?)
            }
            QTensorOrDense::Dense(t) => LinearWeight::DenseT(t.to_dtype(self.dtype)?.t()?.contiguous()?),
            QTensorOrDense::Prepared { .. } => {
                return Err(model_file(self.file, format!("internal: prepared weights hold no `{key}`")));
            }
        };
        let linear = Linear { weight, bias };
        let linear = if matches!(self.format, WeightFormat::Q8_0 | WeightFormat::Int8) {
            linear.to_format(self.format)?
        } else {
            linear
        };
        if let LinearWeight::Int8(Int8Linear(m)) = &linear.weight {
            self.int8.push((key.to_string(), m.clone()));
            self.requantised = true;
        }
        self.report.add(
            if self.format == WeightFormat::Int8 { "requantise to int8" } else { "convert weights" },
            start.elapsed(),
        );
        Ok(linear)
    }

    fn linear(&mut self, name: &str, bias: Option<&str>) -> Result<Linear> {
        let w = self.take(name)?;
        let b = match bias {
            Some(b) => self.optional_dense(b)?,
            None => None,
        };
        self.linear_from(name, w, b)
    }

    /// Splits a fused weight (phi3's qkv and gate_up) along its output rows.
    fn split_linear(&mut self, name: &str, sizes: &[usize]) -> Result<Vec<Linear>> {
        let keys: Vec<String> = (0..sizes.len()).map(|i| format!("{name}#{i}")).collect();
        if keys.iter().all(|k| self.prepared.contains_key(k)) {
            self.take(name)?;
            return keys.iter().map(|k| self.linear_from(k, QTensorOrDense::Prepared { rows: 0 }, None)).collect();
        }
        let w = self.dense(name)?;
        let mut out = Vec::new();
        let mut start = 0;
        for (&n, key) in sizes.iter().zip(&keys) {
            out.push(self.linear_from(key, QTensorOrDense::Dense(w.narrow(0, start, n)?.contiguous()?), None)?);
            start += n;
        }
        Ok(out)
    }

    fn norm(&mut self, name: &str, eps: f64) -> Result<RmsNorm> {
        Ok(RmsNorm { weight: self.dense(name)?, eps })
    }
}

/// Tensor names of one family and file format.
struct Names {
    embed: &'static str,
    norm: &'static str,
    lm_head: &'static str,
    layer: fn(usize, &str) -> String,
    attn_norm: &'static str,
    q: &'static str,
    k: &'static str,
    v: &'static str,
    qkv: &'static str,
    o: &'static str,
    q_norm: &'static str,
    k_norm: &'static str,
    mlp_norm: &'static str,
    gate: &'static str,
    up: &'static str,
    gate_up: &'static str,
    down: &'static str,
}

const GGUF_NAMES: Names = Names {
    embed: "token_embd.weight",
    norm: "output_norm.weight",
    lm_head: "output.weight",
    layer: |i, s| format!("blk.{i}.{s}"),
    attn_norm: "attn_norm.weight",
    q: "attn_q",
    k: "attn_k",
    v: "attn_v",
    qkv: "attn_qkv",
    o: "attn_output",
    q_norm: "attn_q_norm.weight",
    k_norm: "attn_k_norm.weight",
    mlp_norm: "ffn_norm.weight",
    gate: "ffn_gate",
    up: "ffn_up",
    gate_up: "ffn_up",
    down: "ffn_down",
};

const HF_NAMES: Names = Names {
    embed: "model.embed_tokens.weight",
    norm: "model.norm.weight",
    lm_head: "lm_head.weight",
    layer: |i, s| format!("model.layers.{i}.{s}"),
    attn_norm: "input_layernorm.weight",
    q: "self_attn.q_proj",
    k: "self_attn.k_proj",
    v: "self_attn.v_proj",
    qkv: "self_attn.qkv_proj",
    o: "self_attn.o_proj",
    q_norm: "self_attn.q_norm.weight",
    k_norm: "self_attn.k_norm.weight",
    mlp_norm: "post_attention_layernorm.weight",
    gate: "mlp.gate_proj",
    up: "mlp.up_proj",
    gate_up: "mlp.gate_up_proj",
    down: "mlp.down_proj",
};

fn build(config: DecoderConfig, src: &mut WeightSource<'_>, names: &Names) -> Result<Decoder> {
    let c = &config;
    let embed_q = src.take(names.embed)?;
    let embed = match &embed_q {
        // Rows are dequantised as they are looked up; blocks must not straddle rows.
        QTensorOrDense::Q(q) if src.device.is_cpu() && c.hidden_size.is_multiple_of(q.dtype().block_size()) => {
            Embedding::Quantized(q.clone())
        }
        QTensorOrDense::Q(q) => {
            Embedding::Dense(src.report.time("dequantise embeddings", || q.dequantize(&src.device))?)
        }
        QTensorOrDense::Dense(t) => Embedding::Dense(t.to_dtype(DType::F32)?),
        QTensorOrDense::Prepared { .. } => {
            return Err(model_file(src.file, "internal: the embedding table was left unread"));
        }
    };
    let lm_head = if src.tensors.contains_key(names.lm_head) {
        src.linear(names.lm_head, None)?
    } else {
        // Tied embeddings: the output layer is the embedding matrix, held in the requested format (keyed
        // as the output layer's tensor would be).
        src.linear_from(names.lm_head, embed_q, None)?
    };
    let norm = src.norm(names.norm, c.rms_norm_eps)?;
    let mut layers = Vec::with_capacity(c.num_layers);
    let (qn, kvn) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
    for i in 0..c.num_layers {
        let n = |s: &str| (names.layer)(i, s);
        let (q, k, v) = if c.family == Family::Phi3 {
            let mut parts = src.split_linear(&n(&format!("{}.weight", names.qkv)), &[qn, kvn, kvn])?.into_iter();
            (parts.next().expect("3 parts"), parts.next().expect("3 parts"), parts.next().expect("3 parts"))
        } else {
            let lin = |src: &mut WeightSource<'_>, s: &str| {
                src.linear(&n(&format!("{s}.weight")), Some(&n(&format!("{s}.bias"))))
            };
            (lin(src, names.q)?, lin(src, names.k)?, lin(src, names.v)?)
        };
        let o = src.linear(&n(&format!("{}.weight", names.o)), None)?;
        let (gate, up) = if c.family == Family::Phi3 {
            let inter = src.tensors.get(&n(&format!("{}.weight", names.gate_up))).map(|t| t.rows() / 2);
            let inter = inter.ok_or_else(|| {
                model_file(src.file, format!("missing tensor `{}`", n(&format!("{}.weight", names.gate_up))))
            })?;
            let mut parts = src.split_linear(&n(&format!("{}.weight", names.gate_up)), &[inter, inter])?.into_iter();
            (parts.next().expect("2 parts"), parts.next().expect("2 parts"))
        } else {
            (
                src.linear(&n(&format!("{}.weight", names.gate)), None)?,
                src.linear(&n(&format!("{}.weight", names.up)), None)?,
            )
        };
        let down = src.linear(&n(&format!("{}.weight", names.down)), None)?;
        let (q_norm, k_norm) = if c.family == Family::Qwen3 {
            (Some(src.norm(&n(names.q_norm), c.rms_norm_eps)?), Some(src.norm(&n(names.k_norm), c.rms_norm_eps)?))
        } else {
            (None, None)
        };
        layers.push(Layer {
            attn_norm: src.norm(&n(names.attn_norm), c.rms_norm_eps)?,
            q,
            k,
            v,
            o,
            q_norm,
            k_norm,
            mlp_norm: src.norm(&n(names.mlp_norm), c.rms_norm_eps)?,
            gate,
            up,
            down,
        });
    }
    let (cos, sin) = src.report.time("rope tables", || rope_tables(c, &src.device, src.dtype))?;
    Ok(Decoder { embed, layers, norm, lm_head, cos, sin, dtype: src.dtype, device: src.device.clone(), config })
}

/// Loads a GGUF file (architectures llama, qwen2, qwen3, phi3), preparing its weights without a cache.
#[cfg(test)]
pub(crate) fn load_gguf(file: &Path, device: &Device, format: WeightFormat) -> Result<(Decoder, gguf_file::Content)> {
    load_gguf_cached(file, device, format, &PreparedCache::Off).map(|(decoder, content, _)| (decoder, content))
}

/// Loads a GGUF file (architectures llama, qwen2, qwen3, phi3). Int8 weights on CPU are mapped from the
/// prepared-weights file in `cache` where it holds a usable one, else requantised and written there
/// (see [`crate::prepared`]); the report says where the time went.
pub fn load_gguf_cached(
    file: &Path,
    device: &Device,
    format: WeightFormat,
    cache: &PreparedCache,
) -> Result<(Decoder, gguf_file::Content, LoadReport)> {
    let mut report = LoadReport::default();
    let start = std::time::Instant::now();
    // Buffered: the metadata is read a few bytes at a time (Qwen's 151,936 tokens and 151,387 merges
    // took 0.3 s of unbuffered reads).
    let mut reader =
        std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(file).map_err(crate::error::io_error(file))?);
    let content = read_gguf(file, &mut reader)?;
    report.add("read GGUF metadata", start.elapsed());
    let config = gguf_decoder_config(file, &content)?;
    // Prepared int8 weights apply where the int8 kernels run: on this CPU.
    let cached = format == WeightFormat::Int8 && device.is_cpu();
    let source = if cached { report.time("identify model file", || prepared::Source::of(file)).ok() } else { None };
    let cache_path = source.as_ref().and_then(|s| prepared::path_for(cache, file, s));
    let mut prepared = None;
    let mut replaced = None;
    if let (Some(path), Some(source)) = (&cache_path, &source) {
        let mut shapes: HashMap<String, (usize, usize)> = content
            .tensor_infos
            .iter()
            .filter_map(|(name, info)| match info.shape.dims() {
                &[rows, cols] => Some((name.clone(), (rows, cols))),
                _ => None,
            })
            .collect();
        // A tied output layer is keyed as its own tensor would be.
        if let (false, Some(&shape)) = (shapes.contains_key(GGUF_NAMES.lm_head), shapes.get(GGUF_NAMES.embed)) {
            shapes.insert(GGUF_NAMES.lm_head.to_string(), shape);
        }
        match report.time("read prepared weights", || prepared::read(path, source, &shapes)) {
            Ok(found) => prepared = found,
            Err(why) => {
                eprintln!(
                    "warning: prepared weights {}: {why}; preparing them again from {}",
                    path.display(),
                    file.display()
                );
                replaced = Some(why);
            }
        }
    }
    let prepared_matrices = prepared.as_ref().map(|p| p.matrices.clone()).unwrap_or_default();
    let start = std::time::Instant::now();
    let mut tensors = HashMap::new();
    for (name, info) in &content.tensor_infos {
        // The embedding table is read whatever a prepared file holds (it is looked up, not multiplied).
        if prepared_matrices.contains_key(name) && name != GGUF_NAMES.embed {
            tensors.insert(
                name.clone(),
                QTensorOrDense::Prepared { rows: info.shape.dims().first().copied().unwrap_or(0) },
            );
            continue;
        }
        let t =
            content.tensor(&mut reader, name, device).map_err(|e| model_file(file, format!("tensor `{name}`: {e}")))?;
        tensors.insert(name.clone(), QTensorOrDense::Q(Arc::new(t)));
    }
    report.add("read tensors", start.elapsed());
    let mut src = WeightSource::new(file, tensors, device, DType::F32, format);
    src.prepared = prepared_matrices;
    src.report = report;
    let decoder = build(config, &mut src, &GGUF_NAMES)?;
    let mut report = std::mem::take(&mut src.report);
    report.prepared = match (cache_path, source, prepared) {
        (Some(path), Some(source), found) if src.requantised || found.is_none() => {
            match report.time("write prepared weights", || prepared::write(&path, &source, &src.int8)) {
                Ok(()) => PreparedStatus::Written { path, replaced },
                Err(e) => PreparedStatus::NotWritten { path, problem: e.to_string() },
            }
        }
        (_, _, Some(found)) => PreparedStatus::Read(found.path),
        _ => PreparedStatus::NotUsed,
    };
    report.total_s = report.phases.iter().map(|(_, s)| s).sum();
    Ok((decoder, content, report))
}

/// Loads an HF safetensors folder (config.json `model_type` llama, qwen2, qwen3, phi3).
pub fn load_hf_folder(dir: &Path, device: &Device, dtype: DType, format: WeightFormat) -> Result<Decoder> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(crate::error::io_error(&config_path))?;
    let config = parse_hf_config(&config_path, &text)?;
    // The files the index names (else model.safetensors), memory-mapped: herd-tensor's one loader.
    let files = herd_tensor::WeightFiles::find(dir).map_err(|e| model_file(dir, e))?;
    let mut tensors = HashMap::new();
    for (name, t) in files.load_all(device).map_err(|e| model_file(dir, e))? {
        tensors.insert(name, QTensorOrDense::Dense(t));
    }
    let mut src = WeightSource::new(dir, tensors, device, dtype, format);
    build(config, &mut src, &HF_NAMES)
}
