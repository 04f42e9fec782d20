//! The decoder of the families that share one (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Mistral3): a Qwen2 /
//! Qwen3 / Mistral decoder with 3-D rotary positions (MRoPE; Mistral3 gives all three rows the same
//! position, which is plain RoPE), whose keys and values are kept in a [`KvCache`] so that a shared
//! prefix (template, image, question) is computed once and each continuation, or each generated token,
//! only computes its own tokens.
//!
//! What differs between the families is a [`DecoderSpec`], which the family fills in: Qwen3-VL
//! normalises q and k per head (`q_norm`/`k_norm`), gives q/k/v/o biases by `attention_bias`, spreads
//! MRoPE's frequencies interleaved over (t, h, w), and adds DeepStack features after its first layers;
//! Qwen2-VL and Qwen2.5-VL have biased q/k/v and an unbiased o, and give the frequencies in three
//! consecutive sections; Mistral has neither biases nor q/k norms.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, Linear, RmsNorm, VarBuilder, embedding, linear_b, linear_no_bias, rms_norm};
use herd_tensor::KvCache;

use crate::config::{Config, TextConfig};
use crate::layers::{TextMlp, rotary_attention};

/// The switches of the decoder that differ between the families using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecoderSpec {
    /// Biases on the q, k and v projections.
    pub(crate) qkv_bias: bool,
    /// A bias on the output projection.
    pub(crate) o_bias: bool,
    /// RMS norms of q and k per head (`q_norm`, `k_norm`).
    pub(crate) qk_norm: bool,
    /// MRoPE's frequencies interleaved over (t, h, w) (Qwen3-VL) rather than in three consecutive
    /// sections.
    pub(crate) interleaved_mrope: bool,
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
    fn new(spec: DecoderSpec, cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let hd = cfg.head_dim();
        let (nh, nkv, h) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size);
        let (qkv_bias, o_bias) = (spec.qkv_bias, spec.o_bias);
        let qk_norm = if spec.qk_norm {
            Some((rms_norm(hd, cfg.rms_norm_eps, vb.pp("q_norm"))?, rms_norm(hd, cfg.rms_norm_eps, vb.pp("k_norm"))?))
        } else {
            None
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

    /// Attention of the new tokens `xs` over the keys and values of layer `layer` of `cache` plus their
    /// own, which are appended to it.
    fn forward(
        &self,
        xs: &Tensor,
        (cos, sin): (&Tensor, &Tensor),
        mask: &Tensor,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
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
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let out = rotary_attention(&q, &k, v, cos, sin, mask, cache, layer, scale)?;
        self.o.forward(&out)
    }
}

struct DecoderLayer {
    attn: TextAttention,
    mlp: TextMlp,
    input_norm: RmsNorm,
    post_norm: RmsNorm,
}

impl DecoderLayer {
    fn new(spec: DecoderSpec, cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            attn: TextAttention::new(spec, cfg, vb.pp("self_attn"))?,
            mlp: TextMlp::new(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act, vb.pp("mlp"))?,
            input_norm: rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            post_norm: rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("post_attention_layernorm"))?,
        })
    }

    fn forward(
        &self,
        xs: &Tensor,
        rope: (&Tensor, &Tensor),
        mask: &Tensor,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let attn = self.attn.forward(&self.input_norm.forward(xs)?, rope, mask, cache, layer)?;
        let xs = (xs + attn)?;
        &xs + self.mlp.forward(&self.post_norm.forward(&xs)?)?
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
    /// Qwen2-VL and Qwen2.5-VL files); `spec`: the family's switches.
    pub(crate) fn new(cfg: &Config, spec: DecoderSpec, vb: VarBuilder<'_>, prefix: &str) -> Result<Self> {
        let t = &cfg.text_config;
        let vbm = vb.pp(prefix);
        let embed = embedding(t.vocab_size, t.hidden_size, vbm.pp("embed_tokens"))?;
        let layers = (0..t.num_hidden_layers)
            .map(|i| DecoderLayer::new(spec, t, vbm.pp(format!("layers.{i}"))))
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
            .map(|j| match spec.interleaved_mrope {
                // transformers' `apply_interleaved_mrope`: h on j % 3 == 1 below 3·s[1], w on j % 3 == 2
                // below 3·s[2], t elsewhere.
                true if j % 3 == 1 && j < s[1] * 3 => 1,
                true if j % 3 == 2 && j < s[2] * 3 => 2,
                true => 0,
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
        let mut cache = past.cloned().unwrap_or_else(|| KvCache::new(self.layers.len()));
        let before = cache.len();
        let device = xs.device().clone();
        let (cos, sin) = self.mrope(pos, &device, xs.dtype())?;
        // New token i sits at `before + i` and sees every key up to itself.
        let mask: Vec<f32> = (0..seq)
            .flat_map(|i| (0..before + seq).map(move |j| if j > before + i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        let mask = Tensor::from_vec(mask, (seq, before + seq), &device)?;
        for (i, layer) in self.layers.iter().enumerate() {
            xs = layer.forward(&xs, (&cos, &sin), &mask, &mut cache, i)?;
            if let Some(v) = &visual
                && let Some(feat) = v.deepstack.get(i)
            {
                xs = add_rows(&xs, v.start, v.len, feat)?;
            }
        }
        let last = xs.narrow(1, seq - 1, 1)?;
        let logits = self.lm_head.forward(&self.norm.forward(&last)?)?;
        Ok((logits.flatten_all()?.to_dtype(DType::F32)?, cache))
    }
}

/// `xs[0, start..start+n, :] += rows` without in-place ops.
fn add_rows(xs: &Tensor, start: usize, n: usize, rows: &Tensor) -> Result<Tensor> {
    let seq = xs.dim(1)?;
    let mid = (xs.narrow(1, start, n)? + rows.to_dtype(xs.dtype())?.unsqueeze(0)?)?;
    Tensor::cat(&[xs.narrow(1, 0, start)?, mid, xs.narrow(1, start + n, seq - start - n)?], 1)
}

impl TextModel {
    /// Text tokens `ids` after `past` at 1-D positions from `start` (all three MRoPE rows equal): a
    /// continuation of a prefix, or a Mistral3 prompt without an image.
    pub(crate) fn forward_text(
        &self,
        ids: &[u32],
        start: u32,
        past: Option<&KvCache>,
        device: &Device,
    ) -> Result<(Tensor, KvCache)> {
        let row: Vec<u32> = (0..ids.len() as u32).map(|i| start + i).collect();
        let pos = [row.clone(), row.clone(), row];
        let input = Tensor::new(ids, device)?.unsqueeze(0)?;
        self.forward(self.embed(&input)?, &pos, past, None)
    }
}
