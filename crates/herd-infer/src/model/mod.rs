//! herd's decoder-only transformer for the text families (llama, qwen2, qwen3, phi3), from GGUF or HF
//! safetensors.
//!
//! An own copy rather than candle-transformers' models because those keep the KV cache private, return
//! only last-position logits, build their own causal mask and share one position for the whole batch;
//! scoring needs a cache it can snapshot and extend per request, and batched generation needs per-row
//! positions and a padding mask.
//!
//! `mod.rs` holds the decoder itself (layers, attention, the KV cache); [`weights`] turns named tensors
//! from either format into one, [`gguf`] reads GGUF files and [`hf_config`] an HF `config.json`.

mod gguf;
mod hf_config;
mod weights;

pub use gguf::{gguf_decoder_config, read_gguf};
pub use hf_config::parse_hf_config;
#[cfg(test)]
use weights::load_gguf;
pub use weights::{load_gguf_cached, load_hf_folder};

use crate::error::Result;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use herd_backend::Family;
use herd_kernels::{AttentionShape, HeadsView, Int8Matrix, KeyMask, masked_attention};
use std::sync::Arc;

/// How a model's linear weights are held, chosen per operation (see herd-infer's README, "Loading and prepared weights").
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

// The key/value cache is herd-tensor's, the one both engines use (text decoders here, vision models).
pub use herd_tensor::KvCache;

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
