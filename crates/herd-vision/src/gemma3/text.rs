//! Gemma 3's language model, as transformers' `Gemma3TextModel` runs it inside
//! `Gemma3ForConditionalGeneration`, with a key/value cache ([`KvCache`]) for prefix reuse.
//!
//! - token embeddings times `sqrt(hidden_size)` (the scale rounded to the weights' dtype first); the
//!   image's soft tokens are replaced by the projector's output after scaling, so image features are
//!   not scaled;
//! - four Gemma RMSNorms a layer (`x / rms(x) * (1 + w)` in f32): before and after attention, before
//!   and after the MLP, and `q_norm`/`k_norm` per head;
//! - attention scores scaled by `query_pre_attn_scalar^-0.5`; sliding layers see the last
//!   `sliding_window` positions and use the local RoPE base (`rope_local_base_freq`, 10 000), full layers
//!   see everything before them with the global base and its linear scaling (factor 8 on 4b/12b/27b);
//! - the tokens of one image attend to each other both ways (transformers' `token_type_ids` block mask:
//!   full layers OR(causal, same image); sliding layers AND(window, OR(causal, same image))), all else
//!   causally;
//! - a GELU (tanh) gated MLP; lm_head tied to the embedding in the released files; no logit
//!   soft-capping (the released configs set none, and `Gemma3ForConditionalGeneration` applies none).

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, Linear, VarBuilder, embedding, linear_b, linear_no_bias};

use herd_tensor::KvCache;

use crate::gemma3::config::{Gemma3Config, Gemma3TextConfig, LayerType, Rope};
use crate::gemma3::siglip::{gemma_norm_weight, gemma_rms_norm};
use crate::layers::{TextMlp, rotary_attention};

struct Norm {
    weight: Tensor,
    eps: f64,
}

impl Norm {
    fn new(dim: usize, eps: f64, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self { weight: gemma_norm_weight(dim, vb)?, eps })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        gemma_rms_norm(xs, &self.weight, self.eps)
    }
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Norm,
    k_norm: Norm,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    scale: f64,
}

impl Attention {
    fn new(cfg: &Gemma3TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let (hd, nh, nkv, h, bias) =
            (cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size, cfg.attention_bias);
        Ok(Self {
            q: linear_b(h, nh * hd, bias, vb.pp("q_proj"))?,
            k: linear_b(h, nkv * hd, bias, vb.pp("k_proj"))?,
            v: linear_b(h, nkv * hd, bias, vb.pp("v_proj"))?,
            o: linear_b(nh * hd, h, bias, vb.pp("o_proj"))?,
            q_norm: Norm::new(hd, cfg.rms_norm_eps, vb.pp("q_norm"))?,
            k_norm: Norm::new(hd, cfg.rms_norm_eps, vb.pp("k_norm"))?,
            heads: nh,
            kv_heads: nkv,
            head_dim: hd,
            scale: cfg.query_pre_attn_scalar.powf(-0.5),
        })
    }

    /// Attention over layer `layer` of `cache` plus the new tokens, whose keys and values are appended.
    fn forward(&self, xs: &Tensor, side: &Side, cache: &mut KvCache, layer: usize) -> Result<Tensor> {
        let (b, s, _) = xs.dims3()?;
        let shape = |t: Tensor, n: usize| -> Result<Tensor> {
            t.reshape((b, s, n, self.head_dim))?.transpose(1, 2)?.contiguous()
        };
        let q = self.q_norm.forward(&shape(self.q.forward(xs)?, self.heads)?)?;
        let k = self.k_norm.forward(&shape(self.k.forward(xs)?, self.kv_heads)?)?;
        let v = shape(self.v.forward(xs)?, self.kv_heads)?;
        let out = rotary_attention(&q, &k, v, &side.cos, &side.sin, &side.mask, cache, layer, self.scale)?;
        self.o.forward(&out)
    }
}

struct Layer {
    attn: Attention,
    mlp: TextMlp,
    input_norm: Norm,
    post_attn_norm: Norm,
    pre_ff_norm: Norm,
    post_ff_norm: Norm,
    kind: LayerType,
}

impl Layer {
    fn new(cfg: &Gemma3TextConfig, kind: LayerType, vb: VarBuilder<'_>) -> Result<Self> {
        let norm = |name: &str| Norm::new(cfg.hidden_size, cfg.rms_norm_eps, vb.pp(name));
        Ok(Self {
            attn: Attention::new(cfg, vb.pp("self_attn"))?,
            mlp: TextMlp::new(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_activation, vb.pp("mlp"))?,
            input_norm: norm("input_layernorm")?,
            post_attn_norm: norm("post_attention_layernorm")?,
            pre_ff_norm: norm("pre_feedforward_layernorm")?,
            post_ff_norm: norm("post_feedforward_layernorm")?,
            kind,
        })
    }
}

/// Per-layer-type rotary tables and masks of one forward call.
struct Side {
    cos: Tensor,
    sin: Tensor,
    mask: Tensor,
}

pub(crate) struct Gemma3Text {
    embed: Embedding,
    embed_scale: f64,
    layers: Vec<Layer>,
    norm: Norm,
    lm_head: Linear,
    sliding_window: usize,
    rope_global: Vec<f32>,
    rope_local: Vec<f32>,
}

fn inv_freq(rope: Rope, head_dim: usize) -> Vec<f32> {
    let theta = rope.theta as f32;
    let factor = rope.linear_factor as f32;
    (0..head_dim).step_by(2).map(|i| 1f32 / theta.powf(i as f32 / head_dim as f32) / factor).collect()
}

impl Gemma3Text {
    /// `prefix`: where the decoder's weights are (`language_model.model` in the released files,
    /// `model.language_model` as transformers 5 saves); `lm_head`: the untied head's tensor prefix.
    pub(crate) fn new(cfg: &Gemma3Config, vb: VarBuilder<'_>, prefix: &str, lm_head: &str) -> Result<Self> {
        let t = &cfg.text_config;
        let vbm = vb.pp(prefix);
        let embed = embedding(t.vocab_size, t.hidden_size, vbm.pp("embed_tokens"))?;
        let layers = t
            .layer_types
            .iter()
            .enumerate()
            .map(|(i, &kind)| Layer::new(t, kind, vbm.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let norm = Norm::new(t.hidden_size, t.rms_norm_eps, vbm.pp("norm"))?;
        let lm_head = if cfg.tie_word_embeddings {
            Linear::new(embed.embeddings().clone(), None)
        } else {
            linear_no_bias(t.hidden_size, t.vocab_size, vb.pp(lm_head))?
        };
        // transformers keeps sqrt(hidden_size) as an f32 tensor and casts it to the weights' dtype.
        let dtype = embed.embeddings().dtype();
        let scale = Tensor::new((t.hidden_size as f64).sqrt() as f32, &Device::Cpu)?.to_dtype(dtype)?;
        let embed_scale = f64::from(scale.to_dtype(DType::F32)?.to_scalar::<f32>()?);
        Ok(Self {
            embed,
            embed_scale,
            layers,
            norm,
            lm_head,
            sliding_window: t.sliding_window,
            rope_global: inv_freq(t.rope_global, t.head_dim),
            rope_local: inv_freq(t.rope_local, t.head_dim),
        })
    }

    /// Scaled token embeddings `[1, seq, hidden]`.
    pub(crate) fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        self.embed.forward(ids)? * self.embed_scale
    }

    pub(crate) fn dtype(&self) -> DType {
        self.embed.embeddings().dtype()
    }

    fn rope(inv_freq: &[f32], start: usize, seq: usize, device: &Device, dtype: DType) -> Result<(Tensor, Tensor)> {
        let freqs: Vec<f32> = (0..seq).flat_map(|s| inv_freq.iter().map(move |f| (start + s) as f32 * f)).collect();
        let freqs = Tensor::from_vec(freqs, (seq, inv_freq.len()), device)?;
        Ok((freqs.cos()?.to_dtype(dtype)?, freqs.sin()?.to_dtype(dtype)?))
    }

    /// `[seq, before + seq]`: 0 where new token i (at `before + i`) sees key j, -inf elsewhere.
    fn mask(
        &self,
        before: usize,
        seq: usize,
        window: Option<usize>,
        image: Option<(usize, usize)>,
        device: &Device,
    ) -> Result<Tensor> {
        let in_image = |p: usize| image.is_some_and(|(s, n)| p >= s && p < s + n);
        let mask: Vec<f32> = (0..seq)
            .flat_map(|i| {
                let q = before + i;
                (0..before + seq).map(move |j| {
                    let seen = j <= q || (in_image(q) && in_image(j));
                    let near = window.is_none_or(|w| j + w > q);
                    if seen && near { 0.0 } else { f32::NEG_INFINITY }
                })
            })
            .collect();
        Tensor::from_vec(mask, (seq, before + seq), device)
    }

    /// Runs the new tokens' embeddings `xs` (`[1, new, hidden]`) after the tokens of `past`. `image`:
    /// (first index, count) of the image's soft tokens among the new tokens, attended bidirectionally.
    /// Returns the logits (f32, `[vocab]`) after the last new token and the extended cache.
    pub(crate) fn forward(
        &self,
        mut xs: Tensor,
        past: Option<&KvCache>,
        image: Option<(usize, usize)>,
    ) -> Result<(Tensor, KvCache)> {
        let (_, seq, _) = xs.dims3()?;
        let mut cache = past.cloned().unwrap_or_else(|| KvCache::new(self.layers.len()));
        let before = cache.len();
        let device = xs.device().clone();
        let dtype = xs.dtype();
        let side = |inv: &[f32], window: Option<usize>| -> Result<Side> {
            let (cos, sin) = Self::rope(inv, before, seq, &device, dtype)?;
            let mask = self.mask(before, seq, window, image, &device)?;
            Ok(Side { cos, sin, mask })
        };
        let full = side(&self.rope_global, None)?;
        let sliding = side(&self.rope_local, Some(self.sliding_window))?;
        for (i, layer) in self.layers.iter().enumerate() {
            let s = if layer.kind == LayerType::Full { &full } else { &sliding };
            let h = layer.input_norm.forward(&xs)?;
            let h = layer.attn.forward(&h, s, &mut cache, i)?;
            xs = (xs + layer.post_attn_norm.forward(&h)?)?;
            let h = layer.post_ff_norm.forward(&layer.mlp.forward(&layer.pre_ff_norm.forward(&xs)?)?)?;
            xs = (xs + h)?;
        }
        let last = xs.narrow(1, seq - 1, 1)?;
        let logits = self.lm_head.forward(&self.norm.forward(&last)?)?;
        Ok((logits.flatten_all()?.to_dtype(DType::F32)?, cache))
    }
}
