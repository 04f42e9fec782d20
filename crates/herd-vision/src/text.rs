//! The language model of the VL families: a Qwen2 / Qwen3 decoder with 3-D rotary positions (MRoPE),
//! whose keys and values can be kept ([`KvCache`]) so that a shared prefix (template, image, question)
//! is computed once and each continuation, or each generated token, only computes its own tokens.
//!
//! Family switches: Qwen3-VL normalises q and k per head (`q_norm`/`k_norm`), gives q/k/v/o biases by
//! `attention_bias`, spreads MRoPE's frequencies interleaved over (t, h, w), and adds DeepStack features
//! after its first layers; Qwen2-VL and Qwen2.5-VL have biased q/k/v and an unbiased o, and give the
//! frequencies in three consecutive sections.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Activation, Embedding, Linear, RmsNorm, VarBuilder, embedding, linear_b, linear_no_bias, rms_norm};

use crate::config::{Config, TextConfig, VlFamily};

/// The gated MLP of the decoders (Qwen's and Gemma 3's): `down(act(gate(x)) · up(x))`.
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

struct TextAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl TextAttention {
    fn new(family: VlFamily, cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let hd = cfg.head_dim();
        let (nh, nkv, h) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size);
        let (qkv_bias, o_bias) =
            if family.is_qwen2() { (true, false) } else { (cfg.attention_bias, cfg.attention_bias) };
        // Mistral3's text model (Mistral) has no q/k norms and, by `attention_bias` (false), no biases.
        let qk_norm = if family.is_qwen2() || family == VlFamily::Mistral3 {
            None
        } else {
            Some((rms_norm(hd, cfg.rms_norm_eps, vb.pp("q_norm"))?, rms_norm(hd, cfg.rms_norm_eps, vb.pp("k_norm"))?))
        };
        Ok(Self {
            q: linear_b(h, nh * hd, qkv_bias, vb.pp("q_proj"))?,
            k: linear_b(h, nkv * hd, qkv_bias, vb.pp("k_proj"))?,
            v: linear_b(h, nkv * hd, qkv_bias, vb.pp("v_proj"))?,
            o: linear_b(nh * hd, h, o_bias, vb.pp("o_proj"))?,
            qk_norm,
            heads: nh,
            kv_heads: nkv,
            head_dim: hd,
        })
    }

    /// Attention of the new tokens `xs` over the cached keys and values plus their own; returns the
    /// output and the keys and values including the new ones ([1, kv_heads, past + new, head_dim]).
    fn forward(
        &self,
        xs: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &Tensor,
        past: Option<&(Tensor, Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let (b, s, _) = xs.dims3()?;
        let shape = |t: Tensor, n: usize| -> Result<Tensor> {
            t.reshape((b, s, n, self.head_dim))?.transpose(1, 2)?.contiguous()
        };
        let mut q = shape(self.q.forward(xs)?, self.heads)?;
        let mut k = shape(self.k.forward(xs)?, self.kv_heads)?;
        let v = shape(self.v.forward(xs)?, self.kv_heads)?;
        if let Some((qn, kn)) = &self.qk_norm {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let (out, kv) = rotary_attention(&q, &k, v, cos, sin, mask, past, 1.0 / (self.head_dim as f64).sqrt())?;
        Ok((self.o.forward(&out)?, kv))
    }
}

/// Eager grouped-query attention as transformers runs it, shared by the VL decoders: rotary positions
/// on q (`[b, heads, s, head_dim]`) and k (`[b, kv_heads, s, head_dim]`), the cached keys and values
/// prepended, scores times `scale`, the mask added and the softmax taken in f32 (then back to the
/// model's dtype), heads merged. Returns `[b, s, heads · head_dim]` (before the output projection) and
/// the keys and values including the new ones.
#[allow(clippy::too_many_arguments)] // q, k, v and their positions, mask and cache: one attention call.
pub(crate) fn rotary_attention(
    q: &Tensor,
    k: &Tensor,
    v: Tensor,
    cos: &Tensor,
    sin: &Tensor,
    mask: &Tensor,
    past: Option<&(Tensor, Tensor)>,
    scale: f64,
) -> Result<(Tensor, (Tensor, Tensor))> {
    let (b, heads, s, head_dim) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let q = candle_nn::rotary_emb::rope(&q.contiguous()?, cos, sin)?;
    let k = candle_nn::rotary_emb::rope(&k.contiguous()?, cos, sin)?;
    let (k, v) = match past {
        Some((pk, pv)) => (Tensor::cat(&[pk, &k], 2)?, Tensor::cat(&[pv, &v], 2)?),
        None => (k, v),
    };
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
    let out = w.matmul(&ve.contiguous()?)?.transpose(1, 2)?.reshape((b, s, ()))?;
    Ok((out, (k, v)))
}

struct DecoderLayer {
    attn: TextAttention,
    mlp: TextMlp,
    input_norm: RmsNorm,
    post_norm: RmsNorm,
}

impl DecoderLayer {
    fn new(family: VlFamily, cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            attn: TextAttention::new(family, cfg, vb.pp("self_attn"))?,
            mlp: TextMlp::new(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act, vb.pp("mlp"))?,
            input_norm: rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            post_norm: rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("post_attention_layernorm"))?,
        })
    }

    fn forward(
        &self,
        xs: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &Tensor,
        past: Option<&(Tensor, Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let (attn, kv) = self.attn.forward(&self.input_norm.forward(xs)?, cos, sin, mask, past)?;
        let xs = (xs + attn)?;
        Ok(((&xs + self.mlp.forward(&self.post_norm.forward(&xs)?)?)?, kv))
    }
}

/// The keys and values of every layer for the tokens computed so far, and how many there are.
///
/// A snapshot: extending a prompt from it returns a new cache and leaves this one as it was, so one
/// prefix serves many continuations.
#[derive(Clone)]
pub struct KvCache {
    pub(crate) layers: Vec<(Tensor, Tensor)>,
    pub(crate) len: usize,
}

impl KvCache {
    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache").field("len", &self.len).field("layers", &self.layers.len()).finish()
    }
}

/// Where the image's tokens lie among the tokens of one forward call, and its DeepStack features.
pub(crate) struct Visual<'a> {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) deepstack: &'a [Tensor],
}

pub(crate) struct TextModel {
    embed: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Linear,
    inv_freq: Vec<f32>,
    /// For each frequency, which position row (t, h or w) turns it.
    axis: Vec<usize>,
}

impl TextModel {
    /// `prefix`: where the decoder's weights are (`model.language_model`, or `model` in the released
    /// Qwen2-VL and Qwen2.5-VL files).
    pub(crate) fn new(cfg: &Config, vb: VarBuilder<'_>, prefix: &str) -> Result<Self> {
        let t = &cfg.text_config;
        let vbm = vb.pp(prefix);
        let embed = embedding(t.vocab_size, t.hidden_size, vbm.pp("embed_tokens"))?;
        let layers = (0..t.num_hidden_layers)
            .map(|i| DecoderLayer::new(cfg.family, t, vbm.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let norm = rms_norm(t.hidden_size, t.rms_norm_eps, vbm.pp("norm"))?;
        let lm_head = if cfg.tie_word_embeddings() {
            Linear::new(embed.embeddings().clone(), None)
        } else {
            linear_no_bias(t.hidden_size, t.vocab_size, vb.pp("lm_head"))?
        };
        let hd = t.head_dim();
        let theta = t.rope_theta() as f32;
        let inv_freq: Vec<f32> = (0..hd).step_by(2).map(|i| 1f32 / theta.powf(i as f32 / hd as f32)).collect();
        let s = t.rope().mrope_section;
        let axis = (0..inv_freq.len())
            .map(|j| match cfg.family {
                // transformers' `apply_interleaved_mrope`: h on j % 3 == 1 below 3·s[1], w on j % 3 == 2
                // below 3·s[2], t elsewhere.
                VlFamily::Qwen3Vl if j % 3 == 1 && j < s[1] * 3 => 1,
                VlFamily::Qwen3Vl if j % 3 == 2 && j < s[2] * 3 => 2,
                VlFamily::Qwen3Vl => 0,
                // Qwen2: the first s[0] frequencies take t, the next s[1] h, the rest w.
                _ if j < s[0] => 0,
                _ if j < s[0] + s[1] => 1,
                _ => 2,
            })
            .collect();
        Ok(Self { embed, layers, norm, lm_head, inv_freq, axis })
    }

    pub(crate) fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        self.embed.forward(ids)
    }

    pub(crate) fn dtype(&self) -> DType {
        self.embed.embeddings().dtype()
    }

    /// cos/sin [seq, head_dim/2]: frequency j turned by position row `axis[j]`.
    fn mrope(&self, pos: &[Vec<u32>; 3], device: &Device, dtype: DType) -> Result<(Tensor, Tensor)> {
        let seq = pos[0].len();
        let half = self.inv_freq.len();
        let freqs: Vec<f32> = (0..seq)
            .flat_map(|s| self.axis.iter().zip(&self.inv_freq).map(move |(&a, f)| pos[a][s] as f32 * f))
            .collect();
        let freqs = Tensor::from_vec(freqs, (seq, half), device)?;
        Ok((freqs.cos()?.to_dtype(dtype)?, freqs.sin()?.to_dtype(dtype)?))
    }

    /// Runs the new tokens' embeddings `xs` ([1, new, hidden], positions `pos`) after the tokens of `past`.
    /// Returns the logits (f32, [vocab]) after the last new token and the cache extended by the new tokens.
    pub(crate) fn forward(
        &self,
        mut xs: Tensor,
        pos: &[Vec<u32>; 3],
        past: Option<&KvCache>,
        visual: Option<Visual<'_>>,
    ) -> Result<(Tensor, KvCache)> {
        let (_, seq, _) = xs.dims3()?;
        let before = past.map_or(0, |p| p.len);
        let device = xs.device().clone();
        let (cos, sin) = self.mrope(pos, &device, xs.dtype())?;
        // New token i sits at `before + i` and sees every key up to itself.
        let mask: Vec<f32> = (0..seq)
            .flat_map(|i| (0..before + seq).map(move |j| if j > before + i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        let mask = Tensor::from_vec(mask, (seq, before + seq), &device)?;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (i, layer) in self.layers.iter().enumerate() {
            let (out, kv) = layer.forward(&xs, &cos, &sin, &mask, past.map(|p| &p.layers[i]))?;
            xs = out;
            layers.push(kv);
            if let Some(v) = &visual
                && let Some(feat) = v.deepstack.get(i)
            {
                xs = add_rows(&xs, v.start, v.len, feat)?;
            }
        }
        let last = xs.narrow(1, seq - 1, 1)?;
        let logits = self.lm_head.forward(&self.norm.forward(&last)?)?;
        Ok((logits.flatten_all()?.to_dtype(DType::F32)?, KvCache { layers, len: before + seq }))
    }
}

/// `xs[0, start..start+n, :] += rows` without in-place ops.
fn add_rows(xs: &Tensor, start: usize, n: usize, rows: &Tensor) -> Result<Tensor> {
    let seq = xs.dim(1)?;
    let mid = (xs.narrow(1, start, n)? + rows.to_dtype(xs.dtype())?.unsqueeze(0)?)?;
    Tensor::cat(&[xs.narrow(1, 0, start)?, mid, xs.narrow(1, start + n, seq - start - n)?], 1)
}

/// `xs[0, start..start+n, :] = rows`.
pub(crate) fn replace_rows(xs: &Tensor, start: usize, n: usize, rows: &Tensor) -> Result<Tensor> {
    let seq = xs.dim(1)?;
    Tensor::cat(
        &[xs.narrow(1, 0, start)?, rows.to_dtype(xs.dtype())?.unsqueeze(0)?, xs.narrow(1, start + n, seq - start - n)?],
        1,
    )
}
