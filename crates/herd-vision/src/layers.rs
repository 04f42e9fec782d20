//! Building blocks the families' networks share: the gated MLP of the decoders, grouped-query
//! attention with rotary positions over a [`KvCache`], rotate-half, and replacing the image's rows of a
//! sequence by its features.

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Activation, Linear, VarBuilder, linear_no_bias};
use herd_tensor::KvCache;

/// The gated MLP of the decoders (Qwen's, Mistral's and Gemma 3's): `down(act(gate(x)) · up(x))`.
pub(crate) struct TextMlp {
    gate: Linear,
    up: Linear,
    down: Linear,
    act: Activation,
}

impl TextMlp {
    pub(crate) fn new(hidden: usize, intermediate: usize, act: Activation, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            gate: linear_no_bias(hidden, intermediate, vb.pp("gate_proj"))?,
            up: linear_no_bias(hidden, intermediate, vb.pp("up_proj"))?,
            down: linear_no_bias(intermediate, hidden, vb.pp("down_proj"))?,
            act,
        })
    }

    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let g = self.gate.forward(xs)?.apply(&self.act)?;
        self.down.forward(&(g * self.up.forward(xs)?)?)
    }
}

/// Eager grouped-query attention as transformers runs it, shared by the VL decoders: rotary positions
/// on q (`[b, heads, s, head_dim]`) and k (`[b, kv_heads, s, head_dim]`), the new keys and values
/// appended to layer `layer` of `cache` and attended with everything cached before them, scores times
/// `scale`, the mask added and the softmax taken in f32 (then back to the model's dtype), heads merged.
/// Returns `[b, s, heads · head_dim]` (before the output projection).
#[allow(clippy::too_many_arguments)] // q, k, v and their positions, mask and cache: one attention call.
pub(crate) fn rotary_attention(
    q: &Tensor,
    k: &Tensor,
    v: Tensor,
    cos: &Tensor,
    sin: &Tensor,
    mask: &Tensor,
    cache: &mut KvCache,
    layer: usize,
    scale: f64,
) -> Result<Tensor> {
    let (b, heads, s, head_dim) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let q = candle_nn::rotary_emb::rope(&q.contiguous()?, cos, sin)?;
    let k = candle_nn::rotary_emb::rope(&k.contiguous()?, cos, sin)?;
    let (k, v) = cache.append(layer, k, v)?;
    let total = k.dim(2)?;
    let rep = heads / kv_heads;
    let expand = |t: &Tensor| -> Result<Tensor> {
        if rep == 1 {
            return Ok(t.clone());
        }
        t.unsqueeze(2)?.expand((b, kv_heads, rep, total, head_dim))?.reshape((b, heads, total, head_dim))
    };
    let (ke, ve) = (expand(&k)?, expand(&v)?);
    let w = (q.matmul(&ke.t()?.contiguous()?)? * scale)?;
    let w = w.to_dtype(DType::F32)?.broadcast_add(mask)?;
    let w = candle_nn::ops::softmax_last_dim(&w)?.to_dtype(ve.dtype())?;
    w.matmul(&ve.contiguous()?)?.transpose(1, 2)?.reshape((b, s, ()))
}

/// `[-x2, x1]` of the last axis' halves (the rotate-half form of a rotary embedding).
pub(crate) fn rotate_half(xs: &Tensor) -> Result<Tensor> {
    let d = xs.dim(D::Minus1)?;
    let x1 = xs.narrow(D::Minus1, 0, d / 2)?;
    let x2 = xs.narrow(D::Minus1, d / 2, d - d / 2)?;
    Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)
}

/// `xs[0, start..start+n, :] = rows`.
pub(crate) fn replace_rows(xs: &Tensor, start: usize, n: usize, rows: &Tensor) -> Result<Tensor> {
    let seq = xs.dim(1)?;
    Tensor::cat(
        &[xs.narrow(1, 0, start)?, rows.to_dtype(xs.dtype())?.unsqueeze(0)?, xs.narrow(1, start + n, seq - start - n)?],
        1,
    )
}
