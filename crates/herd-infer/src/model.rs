//! herd's decoder-only transformer for the text families (llama, qwen2, qwen3, phi3), from GGUF or HF
//! safetensors.
//!
//! An own copy rather than candle-transformers' models because those keep the KV cache private, return
//! only last-position logits, build their own causal mask and share one position for the whole batch;
//! scoring needs a cache it can snapshot and extend per request, and batched generation needs per-row
//! positions and a padding mask.

use crate::error::{Result, model_file};
use crate::prepared::{self, LoadReport, PreparedCache, PreparedStatus};
use crate::registry::Family;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{D, DType, Device, Tensor};
use herd_kernels::{AttentionShape, HeadsView, Int8Matrix, KeyMask, masked_attention};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// How a model's linear weights are held, chosen per operation (see ARCHITECTURE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// Dense at the activation dtype: fastest prefill (large matrix products).
    Dense,
    /// Requantised to Q8_0: fastest single-token decoding on CPU, close to the original weights.
    Q8_0,
    /// The GGUF file's own quantisation, untouched.
    Native,
    /// 8-bit weights and activations ([`herd_kernels::Int8Matrix`]), the same bits on every CPU path;
    /// on AVX-512 VNNI or AVX-VNNI faster than dense f32 for prefill and than Q8_0 for batched
    /// decoding, so one copy serves both. Layers whose input size is not a multiple of
    /// [`herd_kernels::BLOCK`] stay dense.
    Int8,
}

/// Rotary embedding layout: llama.cpp stores llama Q/K weights permuted for interleaved pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    Interleaved,
    Halves,
}

#[derive(Clone, Debug)]
pub struct DecoderConfig {
    pub family: Family,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_style: RopeStyle,
    pub rope_scaling: Option<Llama3RopeScaling>,
    pub max_positions: usize,
}

impl DecoderConfig {
    /// Sizes the decoder divides by or splits into: a zero or an uneven split would panic (or silently
    /// misshape tensors) deep inside the first forward pass, so a model file that states one is refused.
    pub fn check_sizes(&self) -> std::result::Result<(), String> {
        let named = [
            ("vocabulary size", self.vocab_size),
            ("hidden size", self.hidden_size),
            ("layer count", self.num_layers),
            ("attention head count", self.num_heads),
            ("key/value head count", self.num_kv_heads),
            ("head dimension", self.head_dim),
        ];
        if let Some((what, _)) = named.iter().find(|(_, n)| *n == 0) {
            return Err(format!("the {what} is 0"));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(format!(
                "{} attention heads cannot be shared by {} key/value heads",
                self.num_heads, self.num_kv_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(format!("the head dimension {} is odd: rotary embeddings rotate pairs", self.head_dim));
        }
        Ok(())
    }
}

/// Llama 3.1's frequency-dependent rope scaling (DeepSeek-R1-Distill-Llama uses it).
#[derive(Clone, Copy, Debug)]
pub struct Llama3RopeScaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: f64,
}

/// A linear layer's weight in the form its products want.
#[derive(Clone, Debug)]
enum LinearWeight {
    /// Dense and stored transposed, `[in, out]`: gemm multiplies activations by it faster than by a
    /// transposed view of `[out, in]` (measured with the AVX-512 kernels: 1.7× at 20 rows, 0.95–1.4× at
    /// 424 rows, by shape).
    DenseT(Tensor),
    /// Quantised blocks, `[out, in]` as GGUF stores them.
    Quantized(Arc<QTensor>),
    /// herd's own 8-bit format, applied as a candle custom operation.
    Int8(Int8Linear),
}

/// [`Int8Matrix`] as a candle operation on f32 CPU tensors `[rows, in]` → `[rows, out]`.
#[derive(Clone, Debug)]
struct Int8Linear(Arc<Int8Matrix>);

impl candle_core::CustomOp1 for Int8Linear {
    fn name(&self) -> &'static str {
        "herd-int8-linear"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let candle_core::CpuStorage::F32(values) = storage else {
            candle_core::bail!("int8 linear layers take f32 activations")
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("int8 linear layers take contiguous activations")
        };
        let cols = self.0.cols();
        let rows = (end - start) / cols;
        let out = self.0.matmul(&values[start..end], rows).map_err(candle_core::Error::wrap)?;
        Ok((candle_core::CpuStorage::F32(out), candle_core::Shape::from((rows, self.0.rows()))))
    }
}

#[derive(Clone, Debug)]
struct Linear {
    weight: LinearWeight,
    bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        // One 2-D product over all rows: faster than broadcasting the weight over batch dims.
        let dims = xs.dims().to_vec();
        let rows: usize = dims[..dims.len() - 1].iter().product();
        let flat = xs.reshape((rows, dims[dims.len() - 1]))?;
        let out = match &self.weight {
            LinearWeight::DenseT(wt) => flat.matmul(wt)?,
            LinearWeight::Quantized(q) => flat.contiguous()?.apply_op1_no_bwd(q.as_ref())?,
            LinearWeight::Int8(w) => {
                flat.to_dtype(DType::F32)?.contiguous()?.apply_op1_no_bwd(w)?.to_dtype(xs.dtype())?
            }
        };
        let out = match &self.bias {
            Some(b) => out.broadcast_add(b)?,
            None => out,
        };
        let mut out_dims = dims;
        *out_dims.last_mut().expect("rank >= 1") = out.dim(1)?;
        out.reshape(out_dims)
    }

    fn to_format(&self, format: WeightFormat) -> candle_core::Result<Self> {
        let weight = match (format, &self.weight) {
            (WeightFormat::Q8_0, LinearWeight::DenseT(wt)) if wt.dim(0)? % 32 == 0 => LinearWeight::Quantized(
                Arc::new(QTensor::quantize(&wt.t()?.to_dtype(DType::F32)?.contiguous()?, GgmlDType::Q8_0)?),
            ),
            (WeightFormat::Int8, LinearWeight::DenseT(wt))
                if wt.device().is_cpu() && wt.dim(0)? % herd_kernels::BLOCK == 0 =>
            {
                int8_weight(&wt.t()?)?
            }
            (WeightFormat::Int8, LinearWeight::Quantized(q))
                if q.device().is_cpu() && q.shape().dims()[1] % herd_kernels::BLOCK == 0 =>
            {
                int8_weight(&q.dequantize(&q.device())?)?
            }
            // Where int8 does not apply, dense is the faster of the rest for prefill.
            (WeightFormat::Dense | WeightFormat::Int8, LinearWeight::Quantized(q)) => {
                LinearWeight::DenseT(q.dequantize(&q.device())?.t()?.contiguous()?)
            }
            _ => self.weight.clone(),
        };
        Ok(Self { weight, bias: self.bias.clone() })
    }
}

/// [`herd_kernels::masked_attention`] as a candle operation: q `[b, heads, t, d]` (contiguous), k and v
/// `[b, kv_heads, keys, d]` (cache views) → `[b, t, heads · d]`.
#[derive(Clone, Debug)]
struct FusedAttention {
    mask: Arc<KeyMask>,
    scale: f32,
}

impl candle_core::CustomOp3 for FusedAttention {
    fn name(&self) -> &'static str {
        "herd-masked-attention"
    }

    fn cpu_fwd(
        &self,
        q: &candle_core::CpuStorage,
        q_layout: &candle_core::Layout,
        k: &candle_core::CpuStorage,
        k_layout: &candle_core::Layout,
        v: &candle_core::CpuStorage,
        v_layout: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        fn view<'a>(
            storage: &'a candle_core::CpuStorage,
            layout: &candle_core::Layout,
        ) -> candle_core::Result<HeadsView<'a>> {
            let candle_core::CpuStorage::F32(data) = storage else {
                candle_core::bail!("herd's attention takes f32 tensors")
            };
            let &[batch_stride, head_stride, position_stride, 1] = layout.stride() else {
                candle_core::bail!(
                    "herd's attention takes [batch, heads, positions, head_dim] with head_dim contiguous, got strides {:?}",
                    layout.stride()
                )
            };
            Ok(HeadsView { data: &data[layout.start_offset()..], batch_stride, head_stride, position_stride })
        }
        let (batch, heads, queries, head_dim) = q_layout.shape().dims4()?;
        let (_, kv_heads, keys, _) = k_layout.shape().dims4()?;
        if keys != self.mask.keys() || v_layout.shape().dims4()?.2 != keys {
            candle_core::bail!("attention mask covers {} keys but the cache holds {keys}", self.mask.keys())
        }
        let shape = AttentionShape { batch, heads, kv_heads, queries, head_dim };
        let out =
            masked_attention(shape, view(q, q_layout)?, view(k, k_layout)?, view(v, v_layout)?, &self.mask, self.scale)
                .map_err(candle_core::Error::wrap)?;
        Ok((candle_core::CpuStorage::F32(out), candle_core::Shape::from((batch, queries, heads * head_dim))))
    }
}

/// Quantises `[out, in]` weights to herd's int8 format.
fn int8_weight(w: &Tensor) -> candle_core::Result<LinearWeight> {
    let (rows, cols) = w.dims2()?;
    let values = w.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    Ok(LinearWeight::Int8(Int8Linear(Arc::new(
        Int8Matrix::quantize(&values, rows, cols).map_err(candle_core::Error::wrap)?,
    ))))
}

#[derive(Clone, Debug)]
struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::rms_norm(&xs.contiguous()?, &self.weight, self.eps as f32)
    }
}

#[derive(Clone, Debug)]
struct Layer {
    attn_norm: RmsNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    mlp_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// Keys and values of every layer for the tokens seen so far, `[batch, kv_heads, seq, head_dim]`.
/// Cloning is cheap and a clone is a snapshot: extending one leaves the others intact, which is how
/// scoring reuses a shared prefix.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    layers: Vec<Option<LayerCache>>,
}

/// One layer's keys and values in buffers with spare room along the sequence axis, so a decoding step
/// writes one position in place instead of concatenating (copying) the whole cache. Clones share the
/// buffers copy-on-write: `owner` counts the clones, and one that appends while others hold the buffer
/// first copies its valid part into a buffer of its own.
#[derive(Clone, Debug)]
struct LayerCache {
    k: Tensor,
    v: Tensor,
    len: usize,
    owner: Arc<()>,
}

/// Positions a grown buffer keeps free beyond what it must hold (a generation's worth of steps).
const KV_HEADROOM: usize = 128;

impl LayerCache {
    fn capacity(&self) -> usize {
        self.k.dim(2).unwrap_or(0)
    }

    /// The cached keys and values, as views into the buffers.
    fn valid(&self) -> candle_core::Result<(Tensor, Tensor)> {
        Ok((self.k.narrow(2, 0, self.len)?, self.v.narrow(2, 0, self.len)?))
    }

    /// Appends `[b, h, t, d]` keys and values; returns views of everything cached.
    fn append(&mut self, k: &Tensor, v: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let t = k.dim(2)?;
        let shared = Arc::strong_count(&self.owner) > 1;
        if shared || self.len + t > self.capacity() {
            let capacity = (self.len + t + KV_HEADROOM).max(if shared { 0 } else { 2 * self.capacity() });
            let grow = |old: &Tensor| -> candle_core::Result<Tensor> {
                let (b, h, _, d) = old.dims4()?;
                let buffer = Tensor::zeros((b, h, capacity, d), old.dtype(), old.device())?;
                if self.len > 0 {
                    buffer.slice_set(&old.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
                }
                Ok(buffer)
            };
            self.k = grow(&self.k)?;
            self.v = grow(&self.v)?;
            self.owner = Arc::new(());
        }
        self.k.slice_set(&k.contiguous()?, 2, self.len)?;
        self.v.slice_set(&v.contiguous()?, 2, self.len)?;
        self.len += t;
        self.valid()
    }

    /// A cache of its own made of rows of this one (the spare room comes along, so decoding goes on
    /// writing in place).
    fn select_rows(&self, rows: &Tensor) -> candle_core::Result<Self> {
        Ok(Self {
            k: self.k.index_select(rows, 0)?,
            v: self.v.index_select(rows, 0)?,
            len: self.len,
            owner: Arc::new(()),
        })
    }
}

impl KvCache {
    pub fn new(num_layers: usize) -> Self {
        Self { layers: vec![None; num_layers] }
    }

    /// Tokens cached so far.
    pub fn len(&self) -> usize {
        self.layers.first().and_then(|l| l.as_ref()).map(|l| l.len).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one layer's new keys and values; returns everything that layer has cached.
    fn append(&mut self, layer: usize, k: Tensor, v: Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        match &mut self.layers[layer] {
            Some(cache) => cache.append(&k, &v),
            slot @ None => {
                let mut cache =
                    LayerCache { k: k.narrow(2, 0, 0)?, v: v.narrow(2, 0, 0)?, len: 0, owner: Arc::new(()) };
                let out = cache.append(&k, &v)?;
                *slot = Some(cache);
                Ok(out)
            }
        }
    }

    /// A snapshot of the first `len` cached tokens (sharing the buffers copy-on-write, so extending it
    /// leaves this cache intact).
    pub fn truncated(&self, len: usize) -> Self {
        let layers =
            self.layers.iter().map(|l| l.as_ref().map(|l| LayerCache { len: l.len.min(len), ..l.clone() })).collect();
        Self { layers }
    }

    /// Keeps the given batch rows, in that order (finished sequences leave a generation batch).
    pub fn select_rows(&self, rows: &Tensor) -> candle_core::Result<Self> {
        let layers = self
            .layers
            .iter()
            .map(|l| l.as_ref().map(|l| l.select_rows(rows)).transpose())
            .collect::<candle_core::Result<_>>()?;
        Ok(Self { layers })
    }
}

/// The token embedding table.
#[derive(Clone, Debug)]
enum Embedding {
    /// `[vocab, hidden]` f32 (HF folders, unquantised GGUF tables).
    Dense(Tensor),
    /// The GGUF file's quantised table: a lookup dequantises only its rows, to the values a dequantised
    /// copy would hold (that copy was 933 MB for Qwen2.5-Coder-1.5B and a second of every load).
    Quantized(Arc<QTensor>),
}

impl Embedding {
    fn lookup(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Embedding::Dense(table) => table.index_select(ids, 0),
            Embedding::Quantized(table) => table.embedding(ids),
        }
    }
}

/// A loaded decoder. `forward` takes explicit positions and an additive attention mask so one code path
/// serves single prompts, prefix continuations and left-padded batches.
#[derive(Clone, Debug)]
pub struct Decoder {
    pub config: DecoderConfig,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Linear,
    cos: Tensor,
    sin: Tensor,
    dtype: DType,
    device: Device,
}

impl Decoder {
    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// A copy whose linear weights are held in `format` (embeddings and norms stay as they are).
    pub fn with_weight_format(&self, format: WeightFormat) -> Result<Self> {
        let conv = |l: &Linear| l.to_format(format);
        let layers = self
            .layers
            .iter()
            .map(|l| {
                Ok(Layer {
                    q: conv(&l.q)?,
                    k: conv(&l.k)?,
                    v: conv(&l.v)?,
                    o: conv(&l.o)?,
                    gate: conv(&l.gate)?,
                    up: conv(&l.up)?,
                    down: conv(&l.down)?,
                    ..l.clone()
                })
            })
            .collect::<candle_core::Result<_>>()?;
        Ok(Self { layers, lm_head: conv(&self.lm_head)?, ..self.clone() })
    }

    /// Runs `tokens` (`[batch, seq]` u32) at `positions` (`[batch, seq]` u32) after what `cache` holds,
    /// appending to it. `mask` is additive, `[batch, 1, seq, cached + seq]` (0 or -inf); `None` means
    /// plain causal attention (no padding). Returns the final-normed hidden states `[batch, seq, hidden]`.
    pub fn forward(
        &self,
        tokens: &Tensor,
        positions: &Tensor,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (b, t) = tokens.dims2()?;
        let c = &self.config;
        let past = cache.len();
        let owned_mask;
        let mask = match mask {
            Some(m) => Some(m),
            None if t > 1 => {
                owned_mask = causal_mask(t, past, &self.device)?;
                Some(&owned_mask)
            }
            None => None,
        };
        let cos = self.cos.index_select(&positions.flatten_all()?, 0)?.reshape((b, t, ()))?;
        let sin = self.sin.index_select(&positions.flatten_all()?, 0)?.reshape((b, t, ()))?;
        let mut x = self.embed.lookup(&tokens.flatten_all()?)?.reshape((b, t, c.hidden_size))?.to_dtype(self.dtype)?;
        let scale = 1.0 / (c.head_dim as f64).sqrt();
        let groups = c.num_heads / c.num_kv_heads;
        // On CPU, herd's own attention: it skips masked keys and makes every row independent of its batch.
        let fused = match mask {
            _ if !self.device.is_cpu() || self.dtype != DType::F32 => None,
            Some(m) => {
                let (mb, _, mt, keys) = m.dims4()?;
                let entries = m.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                Some(KeyMask::from_additive(&entries, mb, mt, keys).map_err(candle_core::Error::wrap)?)
            }
            None => Some(KeyMask::causal(t, past)),
        }
        .map(|mask| FusedAttention { mask: Arc::new(mask), scale: scale as f32 });
        for (i, layer) in self.layers.iter().enumerate() {
            let h = layer.attn_norm.forward(&x)?;
            let heads = |lin: &Linear, n: usize| -> candle_core::Result<Tensor> {
                lin.forward(&h)?.reshape((b, t, n, c.head_dim))?.transpose(1, 2)?.contiguous()
            };
            let mut q = heads(&layer.q, c.num_heads)?;
            let mut k = heads(&layer.k, c.num_kv_heads)?;
            let v = heads(&layer.v, c.num_kv_heads)?;
            if let Some(n) = &layer.q_norm {
                q = n.forward(&q)?;
            }
            if let Some(n) = &layer.k_norm {
                k = n.forward(&k)?;
            }
            let (q, k) = match c.rope_style {
                RopeStyle::Interleaved => {
                    (candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?, candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?)
                }
                RopeStyle::Halves => {
                    (candle_nn::rotary_emb::rope(&q, &cos, &sin)?, candle_nn::rotary_emb::rope(&k, &cos, &sin)?)
                }
            };
            let (k, v) = cache.append(i, k, v)?;
            let y = if let Some(op) = &fused {
                q.contiguous()?.apply_op3_no_bwd(&k, &v, op)?
            } else {
                let kv_len = k.dim(2)?;
                // Grouped-query attention: fold the query groups into the row dimension instead of copying K/V.
                // Scaling the queries costs t × head_dim products; scaling the scores would cost t × kv_len.
                let q = (q * scale)?.reshape((b, c.num_kv_heads, groups * t, c.head_dim))?;
                let mut att = q.matmul(&k.t()?)?;
                if let Some(m) = mask {
                    let att5 = att.reshape((b, c.num_kv_heads, groups, t, kv_len))?;
                    let m = m.to_dtype(att.dtype())?.reshape((m.dim(0)?, 1, 1, t, kv_len))?;
                    att = att5.broadcast_add(&m)?.reshape((b, c.num_kv_heads, groups * t, kv_len))?;
                }
                let att = candle_nn::ops::softmax_last_dim(&att.to_dtype(DType::F32)?)?.to_dtype(self.dtype)?;
                let y = att.matmul(&v)?.reshape((b, c.num_heads, t, c.head_dim))?;
                y.transpose(1, 2)?.reshape((b, t, c.num_heads * c.head_dim))?
            };
            x = (x + layer.o.forward(&y)?)?;
            let h = layer.mlp_norm.forward(&x)?;
            let mlp =
                layer.down.forward(&(candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?)?;
            x = (x + mlp)?;
        }
        Ok(self.norm.forward(&x)?)
    }

    /// Logits (f32, `[rows, vocab]`) of hidden states `[rows, hidden]`.
    pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        Ok(self.lm_head.forward(&hidden.contiguous()?)?.to_dtype(DType::F32)?)
    }

    pub fn new_cache(&self) -> KvCache {
        KvCache::new(self.config.num_layers)
    }
}

/// Additive causal mask `[1, 1, t, past + t]`.
pub fn causal_mask(t: usize, past: usize, device: &Device) -> candle_core::Result<Tensor> {
    let mask: Vec<f32> =
        (0..t).flat_map(|i| (0..past + t).map(move |j| if j <= past + i { 0.0 } else { f32::NEG_INFINITY })).collect();
    Tensor::from_vec(mask, (1, 1, t, past + t), device)
}

fn rope_tables(c: &DecoderConfig, device: &Device, dtype: DType) -> candle_core::Result<(Tensor, Tensor)> {
    let half = c.head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let freq = 1.0 / c.rope_theta.powf(2.0 * i as f64 / c.head_dim as f64);
            let freq = match c.rope_scaling {
                Some(s) => {
                    let low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
                    let high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
                    let wavelen = 2.0 * std::f64::consts::PI / freq;
                    if wavelen < high_wavelen {
                        freq
                    } else if wavelen > low_wavelen {
                        freq / s.factor
                    } else {
                        let smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor)
                            / (s.high_freq_factor - s.low_freq_factor);
                        (1.0 - smooth) * freq / s.factor + smooth * freq
                    }
                }
                None => freq,
            };
            freq as f32
        })
        .collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, half), device)?;
    let t =
        Tensor::arange(0u32, c.max_positions as u32, device)?.to_dtype(DType::F32)?.reshape((c.max_positions, 1))?;
    let freqs = t.matmul(&inv_freq)?;
    Ok((freqs.cos()?.to_dtype(dtype)?, freqs.sin()?.to_dtype(dtype)?))
}

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
pub fn load_gguf(file: &Path, device: &Device, format: WeightFormat) -> Result<(Decoder, gguf_file::Content)> {
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

/// Reads a GGUF file's metadata and tensor index with candle's reader; `file` names the file in errors.
/// Every GGUF read of herd goes through here (fuzzed: `fuzz/fuzz_targets/gguf.rs`).
pub fn read_gguf<R: std::io::Read + std::io::Seek>(file: &Path, reader: &mut R) -> Result<gguf_file::Content> {
    let start = reader.stream_position().map_err(crate::error::io_error(file))?;
    // candle 0.11 rounds the tensor data offset up to `general.alignment` without checking it for zero,
    // which panics (a division by zero) on a damaged or hostile file instead of returning its error.
    if let Some(problem) = gguf_alignment_problem(reader) {
        return Err(model_file(file, format!("not a readable GGUF file: {problem}")));
    }
    reader.seek(std::io::SeekFrom::Start(start)).map_err(crate::error::io_error(file))?;
    gguf_file::Content::read(reader).map_err(|e| model_file(file, format!("not a readable GGUF file: {e}")))
}

/// Walks the GGUF header's metadata (the layout candle reads) looking for a `general.alignment` of 0.
/// Anything else that is wrong stops the walk quietly: candle's own reader then reports it.
fn gguf_alignment_problem<R: std::io::Read + std::io::Seek>(reader: &mut R) -> Option<String> {
    let mut walk = GgufWalk { reader, wide: true };
    let magic = walk.u32()?;
    if magic != 0x4655_4747 && magic != 0x4747_5546 {
        return None;
    }
    // Version 1 writes lengths as u32, later versions as u64.
    walk.wide = walk.u32()? != 1;
    let _tensors = walk.length()?;
    for _ in 0..walk.length()? {
        // candle keeps a key as lossy UTF-8 without trailing NULs: compare the same way.
        let key_len = walk.length()?;
        let mut key = vec![0; usize::try_from(key_len.min(64)).ok()?];
        walk.reader.read_exact(&mut key).ok()?;
        walk.skip(key_len - key.len() as u64)?;
        while key.last() == Some(&0) {
            key.pop();
        }
        let value_type = walk.u32()?;
        // The integer types candle takes an alignment from: U8, I8, U16, I16, U32, I32.
        if key == b"general.alignment" && value_type <= 5 {
            let mut value = [0; 4];
            walk.reader.read_exact(&mut value[..GgufWalk::<R>::scalar_size(value_type)? as usize]).ok()?;
            if value == [0; 4] {
                return Some(
                    "`general.alignment` is 0; tensor data is aligned to a positive number of bytes (32 by default)"
                        .into(),
                );
            }
            continue;
        }
        walk.skip_value(value_type, 0)?;
    }
    None
}

/// A forward walk over GGUF metadata that reads only what it must (lengths, keys, array types).
struct GgufWalk<'a, R> {
    reader: &'a mut R,
    /// Lengths are u64 (GGUF v2, v3), else u32 (v1).
    wide: bool,
}

impl<R: std::io::Read + std::io::Seek> GgufWalk<'_, R> {
    fn u32(&mut self) -> Option<u32> {
        let mut b = [0; 4];
        self.reader.read_exact(&mut b).ok().map(|()| u32::from_le_bytes(b))
    }

    fn length(&mut self) -> Option<u64> {
        if !self.wide {
            return self.u32().map(u64::from);
        }
        let mut b = [0; 8];
        self.reader.read_exact(&mut b).ok().map(|()| u64::from_le_bytes(b))
    }

    fn skip(&mut self, bytes: u64) -> Option<()> {
        // Short skips read through: a seek empties a `BufReader`'s buffer, and a tokenizer's metadata is
        // hundreds of thousands of short strings.
        if bytes <= 1 << 20 {
            let read = std::io::copy(&mut std::io::Read::take(&mut *self.reader, bytes), &mut std::io::sink()).ok()?;
            return (read == bytes).then_some(());
        }
        self.reader.seek(std::io::SeekFrom::Current(i64::try_from(bytes).ok()?)).ok().map(drop)
    }

    /// Bytes of one value of a scalar GGUF type; `None` for strings (8), arrays (9) and unknown types.
    fn scalar_size(value_type: u32) -> Option<u64> {
        match value_type {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        }
    }

    fn skip_value(&mut self, value_type: u32, depth: u32) -> Option<()> {
        if let Some(size) = Self::scalar_size(value_type) {
            return self.skip(size);
        }
        match value_type {
            8 => {
                let len = self.length()?;
                self.skip(len)
            }
            // candle's own nesting limit.
            9 if depth < 64 => {
                let inner = self.u32()?;
                let n = self.length()?;
                if let Some(size) = Self::scalar_size(inner) {
                    return self.skip(n.checked_mul(size)?);
                }
                (0..n).try_for_each(|_| self.skip_value(inner, depth + 1))
            }
            _ => None,
        }
    }
}

/// The decoder configuration a GGUF file's metadata states (`{architecture}.*` keys and the token list),
/// checked so that no size the decoder divides by or splits into is impossible.
pub fn gguf_decoder_config(file: &Path, content: &gguf_file::Content) -> Result<DecoderConfig> {
    let md =
        |key: &str| content.metadata.get(key).ok_or_else(|| model_file(file, format!("GGUF metadata has no `{key}`")));
    let arch = md("general.architecture")?.to_string().map_err(|e| model_file(file, e))?.clone();
    let family = match arch.as_str() {
        "llama" => Family::Llama,
        "qwen2" => Family::Qwen2,
        "qwen3" => Family::Qwen3,
        "phi3" => Family::Phi3,
        other => {
            return Err(model_file(
                file,
                format!("GGUF architecture `{other}` is not supported (llama, qwen2, qwen3, phi3 are)"),
            ));
        }
    };
    let u = |key: &str| -> Result<usize> {
        Ok(md(&format!("{arch}.{key}"))?.to_u32().map_err(|e| model_file(file, e))? as usize)
    };
    let hidden_size = u("embedding_length")?;
    let num_heads = u("attention.head_count")?;
    let num_kv_heads = u("attention.head_count_kv").unwrap_or(num_heads);
    let head_dim = u("attention.key_length").unwrap_or_else(|_| hidden_size.checked_div(num_heads).unwrap_or(0));
    let rms_norm_eps =
        md(&format!("{arch}.attention.layer_norm_rms_epsilon"))?.to_f32().map_err(|e| model_file(file, e))? as f64;
    let rope_theta =
        content.metadata.get(&format!("{arch}.rope.freq_base")).and_then(|v| v.to_f32().ok()).unwrap_or(10_000.0)
            as f64;
    let tokens = md("tokenizer.ggml.tokens")?.to_vec().map_err(|e| model_file(file, e))?.len();
    let config = DecoderConfig {
        family,
        vocab_size: tokens,
        hidden_size,
        num_layers: u("block_count")?,
        num_heads,
        num_kv_heads,
        head_dim,
        rms_norm_eps,
        rope_theta,
        rope_style: if family == Family::Llama { RopeStyle::Interleaved } else { RopeStyle::Halves },
        rope_scaling: None,
        max_positions: u("context_length")?.min(32_768),
    };
    config.check_sizes().map_err(|problem| {
        model_file(file, format!("GGUF metadata `{arch}.*`: {problem}; the file is not a usable model"))
    })?;
    Ok(config)
}

/// Loads an HF safetensors folder (config.json `model_type` llama, qwen2, qwen3, phi3).
pub fn load_hf_folder(dir: &Path, device: &Device, dtype: DType, format: WeightFormat) -> Result<Decoder> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(crate::error::io_error(&config_path))?;
    let config = parse_hf_config(&config_path, &text)?;
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(crate::error::io_error(dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    let mut tensors = HashMap::new();
    for f in &files {
        for (name, t) in candle_core::safetensors::load(f, device).map_err(|e| model_file(f, e))? {
            tensors.insert(name, QTensorOrDense::Dense(t));
        }
    }
    let mut src = WeightSource::new(dir, tensors, device, dtype, format);
    build(config, &mut src, &HF_NAMES)
}

/// Reads the decoder shape from an HF `config.json`.
pub fn parse_hf_config(path: &Path, text: &str) -> Result<DecoderConfig> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| model_file(path, e))?;
    let bad = |key: &str, what: &str| model_file(path, format!("`{key}` {what}"));
    let model_type = v["model_type"].as_str().ok_or_else(|| bad("model_type", "is missing"))?;
    let family = match model_type {
        "llama" => Family::Llama,
        "qwen2" => Family::Qwen2,
        "qwen3" => Family::Qwen3,
        "phi3" => Family::Phi3,
        other => return Err(bad("model_type", &format!("is `{other}`; text families are llama, qwen2, qwen3, phi3"))),
    };
    let usize_key =
        |key: &str| v[key].as_u64().map(|n| n as usize).ok_or_else(|| bad(key, "is missing or not an integer"));
    let hidden_size = usize_key("hidden_size")?;
    let num_heads = usize_key("num_attention_heads")?;
    let num_kv_heads = v["num_key_value_heads"].as_u64().map(|n| n as usize).unwrap_or(num_heads);
    let head_dim =
        v["head_dim"].as_u64().map(|n| n as usize).unwrap_or_else(|| hidden_size.checked_div(num_heads).unwrap_or(0));
    if v["partial_rotary_factor"].as_f64().is_some_and(|f| f != 1.0) {
        return Err(bad("partial_rotary_factor", "is not 1: partial rotary embeddings are not supported"));
    }
    let rope_scaling = match &v["rope_scaling"] {
        serde_json::Value::Null => None,
        s => {
            let kind = s["rope_type"].as_str().or(s["type"].as_str()).unwrap_or("");
            match kind {
                "llama3" => Some(Llama3RopeScaling {
                    factor: s["factor"].as_f64().ok_or_else(|| bad("rope_scaling.factor", "is missing"))?,
                    low_freq_factor: s["low_freq_factor"]
                        .as_f64()
                        .ok_or_else(|| bad("rope_scaling.low_freq_factor", "is missing"))?,
                    high_freq_factor: s["high_freq_factor"]
                        .as_f64()
                        .ok_or_else(|| bad("rope_scaling.high_freq_factor", "is missing"))?,
                    original_max_position_embeddings: s["original_max_position_embeddings"]
                        .as_f64()
                        .ok_or_else(|| bad("rope_scaling.original_max_position_embeddings", "is missing"))?,
                }),
                "default" => None,
                other => {
                    return Err(bad("rope_scaling", &format!("type `{other}` is not supported (llama3 and none are)")));
                }
            }
        }
    };
    let config = DecoderConfig {
        family,
        vocab_size: usize_key("vocab_size")?,
        hidden_size,
        num_layers: usize_key("num_hidden_layers")?,
        num_heads,
        num_kv_heads,
        head_dim,
        rms_norm_eps: v["rms_norm_eps"].as_f64().unwrap_or(1e-6),
        rope_theta: v["rope_theta"].as_f64().unwrap_or(10_000.0),
        rope_style: RopeStyle::Halves,
        rope_scaling,
        max_positions: v["max_position_embeddings"].as_u64().map(|n| n as usize).unwrap_or(4096).min(32_768),
    };
    config
        .check_sizes()
        .map_err(|problem| model_file(path, format!("{problem}; fix the config.json of this model")))?;
    Ok(config)
}

/// Softmax over the last dimension in f32.
pub fn softmax(logits: &Tensor) -> Result<Tensor> {
    Ok(candle_nn::ops::softmax(logits, D::Minus1)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::gguf_file::Value;

    const CONFIG: &str = r#"{"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "vocab_size": 100}"#;

    #[test]
    fn config_json_with_impossible_sizes_is_refused_by_name() {
        let path = Path::new("m/config.json");
        assert!(parse_hf_config(path, CONFIG).is_ok());
        let cases = [
            (CONFIG.replace("\"num_attention_heads\": 4", "\"num_attention_heads\": 0"), "attention head count is 0"),
            (
                CONFIG.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
                "4 attention heads cannot be shared by 3",
            ),
            (CONFIG.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 0"), "key/value head count is 0"),
            (CONFIG.replace("\"hidden_size\": 64, ", ""), "`hidden_size` is missing"),
            (CONFIG.replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0"), "layer count is 0"),
            (CONFIG.replace("\"hidden_size\": 64", "\"hidden_size\": 4"), "head dimension 1 is odd"),
        ];
        for (text, expected) in cases {
            let err = parse_hf_config(path, &text).unwrap_err().to_string();
            assert!(err.contains(expected) && err.contains("m/config.json"), "{text}\n→ {err}");
        }
    }

    /// A GGUF file with llama metadata and no tensors.
    fn gguf_with(head_count: u32) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), gguf_bytes(head_count, Vec::new())).unwrap();
        file
    }

    /// The bytes of a GGUF file with llama metadata, `extra` keys and no tensors.
    fn gguf_bytes(head_count: u32, extra: Vec<(&str, Value)>) -> Vec<u8> {
        let tokens = Value::Array(vec![Value::String("a".into()), Value::String("b".into())]);
        let mut metadata = vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.embedding_length", Value::U32(64)),
            ("llama.attention.head_count", Value::U32(head_count)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            ("llama.block_count", Value::U32(2)),
            ("llama.context_length", Value::U32(128)),
            ("tokenizer.ggml.tokens", tokens),
        ];
        metadata.extend(extra);
        let refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let mut bytes = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut bytes, &refs, &[]).unwrap();
        bytes.into_inner()
    }

    #[test]
    fn gguf_with_zero_alignment_is_refused_by_name_not_a_panic() {
        // candle 0.11 divides by `general.alignment` unchecked: its reader panics on such a file (when this
        // fails, candle checks it itself and `gguf_alignment_problem` can go).
        let zero_aligned = gguf_bytes(4, vec![("general.alignment", Value::U32(0))]);
        let candle = std::panic::catch_unwind(|| gguf_file::Content::read(&mut std::io::Cursor::new(&zero_aligned)));
        assert!(candle.is_err(), "candle's reader no longer panics on a zero alignment");
        for zero in [Value::U32(0), Value::U8(0), Value::I32(0)] {
            let bytes = gguf_bytes(4, vec![("general.alignment", zero)]);
            let err = read_gguf(Path::new("m.gguf"), &mut std::io::Cursor::new(bytes)).map(drop).unwrap_err();
            let err = err.to_string();
            assert!(err.contains("m.gguf") && err.contains("`general.alignment` is 0"), "{err}");
        }
        // A positive (or candle's default) alignment reads, from where the reader stands.
        for extra in [vec![("general.alignment", Value::U32(64))], vec![]] {
            let mut bytes = vec![7u8; 3];
            bytes.extend(gguf_bytes(4, extra));
            let mut reader = std::io::Cursor::new(bytes);
            reader.set_position(3);
            let content = read_gguf(Path::new("m.gguf"), &mut reader).unwrap();
            assert_eq!(gguf_decoder_config(Path::new("m.gguf"), &content).unwrap().num_heads, 4);
        }
    }

    /// Small valid GGUF headers for the fuzz corpus: `HERD_GGUF_SEEDS=fuzz/corpus/gguf cargo test --workspace
    /// --lib gguf_fuzz_seeds` writes them there (fuzz/Cargo.toml).
    #[test]
    fn gguf_fuzz_seeds_read_as_decoder_configs() {
        let seeds = [
            ("llama", gguf_bytes(4, vec![])),
            ("aligned", gguf_bytes(4, vec![("general.alignment", Value::U32(32))])),
            ("grouped", gguf_bytes(8, vec![("llama.attention.head_count_kv", Value::U32(2))])),
            (
                "keyed",
                gguf_bytes(
                    4,
                    vec![("llama.attention.key_length", Value::U32(16)), ("llama.rope.freq_base", Value::F32(1e6))],
                ),
            ),
            ("zero-heads", gguf_bytes(0, vec![])),
        ];
        for (name, bytes) in &seeds {
            let content = read_gguf(Path::new(name), &mut std::io::Cursor::new(bytes)).unwrap();
            assert_eq!(gguf_decoder_config(Path::new(name), &content).is_ok(), *name != "zero-heads", "{name}");
        }
        if let Some(dir) = std::env::var_os("HERD_GGUF_SEEDS") {
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &seeds {
                std::fs::write(Path::new(&dir).join(format!("{name}.gguf")), bytes).unwrap();
            }
        }
    }

    #[test]
    fn gguf_with_zero_attention_heads_is_refused_by_name() {
        let file = gguf_with(0);
        let err = load_gguf(file.path(), &Device::Cpu, WeightFormat::Native).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("attention head count is 0") && err.contains("llama.*"), "{err}");
        // The same file with heads passes the size check and fails only for its missing tensors.
        let err =
            load_gguf(gguf_with(4).path(), &Device::Cpu, WeightFormat::Native).map(|_| ()).unwrap_err().to_string();
        assert!(!err.contains("head count"), "{err}");
    }
}
