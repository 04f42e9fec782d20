//! The Qwen3-VL network (vision encoder with DeepStack, text decoder with interleaved MRoPE).
//!
//! This is an own copy rather than `candle_transformers::models::qwen3_vl` (0.11.1), because that
//! module cannot give correct next-token logits for a prompt with an image:
//! - its vision and text submodules are private (`mod vision; mod text;`), so no part can be reused
//!   alone, and `Qwen3VLModel` has no way to clear its private, never-reset KV cache, so a second
//!   call sees the first call's keys (no determinism);
//! - its prefill runs without a causal mask (the mask is built only when `seqlen <= 1`);
//! - its text RoPE is 1-D over sequence indices, while Qwen3-VL uses interleaved 3-D MRoPE with
//!   `get_rope_index` positions (image tokens at (t, row, column), text after the image shifted);
//! - its patch merger uses tanh-approximated GELU where transformers uses exact `nn.GELU()`.
//!
//! Tensor names are those of the Hugging Face checkpoints (`model.visual.*`,
//! `model.language_model.*`, `lm_head.weight`), so shipped weights load unchanged.

use candle_core::{D, DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::{
    Activation, Embedding, LayerNorm, LayerNormConfig, Linear, RmsNorm, VarBuilder, embedding, layer_norm, linear,
    linear_b, linear_no_bias, rms_norm,
};

use crate::config::{Config, TextConfig, VisionConfig};

// ---------------------------------------------------------------- vision

fn ln_cfg() -> LayerNormConfig {
    LayerNormConfig { eps: 1e-6, ..Default::default() }
}

/// `Conv3d(kernel = stride = (T, P, P), bias = True)` on pre-flattened patches is one matmul.
struct PatchEmbed {
    weight: Tensor, // [hidden, C*T*P*P]
    bias: Tensor,   // [hidden]
}

impl PatchEmbed {
    fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let vb = vb.pp("proj");
        let w = vb.get(
            (cfg.hidden_size, cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size, cfg.patch_size),
            "weight",
        )?;
        let weight = w.reshape((cfg.hidden_size, ()))?.t()?.contiguous()?;
        let bias = vb.get(cfg.hidden_size, "bias")?;
        Ok(Self { weight, bias })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        xs.matmul(&self.weight)?.broadcast_add(&self.bias)
    }
}

struct VisionMlp {
    fc1: Linear,
    fc2: Linear,
    act: Activation,
}

impl VisionMlp {
    fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            fc1: linear(cfg.hidden_size, cfg.intermediate_size, vb.pp("linear_fc1"))?,
            fc2: linear(cfg.intermediate_size, cfg.hidden_size, vb.pp("linear_fc2"))?,
            act: cfg.hidden_act,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(xs)?.apply(&self.act)?)
    }
}

fn rotate_half(xs: &Tensor) -> Result<Tensor> {
    let d = xs.dim(D::Minus1)?;
    let x1 = xs.narrow(D::Minus1, 0, d / 2)?;
    let x2 = xs.narrow(D::Minus1, d / 2, d - d / 2)?;
    Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)
}

struct VisionAttention {
    qkv: Linear,
    proj: Linear,
    num_heads: usize,
    head_dim: usize,
}

impl VisionAttention {
    fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let dim = cfg.hidden_size;
        Ok(Self {
            qkv: linear(dim, dim * 3, vb.pp("qkv"))?,
            proj: linear(dim, dim, vb.pp("proj"))?,
            num_heads: cfg.num_heads,
            head_dim: dim / cfg.num_heads,
        })
    }

    /// `cos`/`sin`: [seq, head_dim] in f32. Attention runs in f32 within each frame (`cu_seqlens`).
    fn forward(&self, xs: &Tensor, cu_seqlens: &[usize], cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let seq = xs.dim(0)?;
        let qkv = self.qkv.forward(xs)?.reshape((seq, 3, self.num_heads, self.head_dim))?.to_dtype(DType::F32)?;
        let (q, k, v) = (qkv.i((.., 0))?, qkv.i((.., 1))?, qkv.i((.., 2))?);
        let cos = cos.unsqueeze(1)?;
        let sin = sin.unsqueeze(1)?;
        let q = (q.broadcast_mul(&cos)? + rotate_half(&q)?.broadcast_mul(&sin)?)?;
        let k = (k.broadcast_mul(&cos)? + rotate_half(&k)?.broadcast_mul(&sin)?)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let mut outs = Vec::with_capacity(cu_seqlens.len());
        for win in cu_seqlens.windows(2) {
            let (start, len) = (win[0], win[1] - win[0]);
            if len == 0 {
                continue;
            }
            let qc = q.narrow(0, start, len)?.transpose(0, 1)?.contiguous()?;
            let kc = k.narrow(0, start, len)?.transpose(0, 1)?.contiguous()?;
            let vc = v.narrow(0, start, len)?.transpose(0, 1)?.contiguous()?;
            let w = (qc.matmul(&kc.t()?)? * scale)?;
            let w = candle_nn::ops::softmax_last_dim(&w)?;
            let o = w.matmul(&vc)?.transpose(0, 1)?.reshape((len, ()))?;
            outs.push(o);
        }
        let out = Tensor::cat(&outs, 0)?.to_dtype(xs.dtype())?;
        self.proj.forward(&out)
    }
}

struct VisionBlock {
    norm1: LayerNorm,
    norm2: LayerNorm,
    attn: VisionAttention,
    mlp: VisionMlp,
}

impl VisionBlock {
    fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            norm1: layer_norm(cfg.hidden_size, ln_cfg(), vb.pp("norm1"))?,
            norm2: layer_norm(cfg.hidden_size, ln_cfg(), vb.pp("norm2"))?,
            attn: VisionAttention::new(cfg, vb.pp("attn"))?,
            mlp: VisionMlp::new(cfg, vb.pp("mlp"))?,
        })
    }

    fn forward(&self, xs: &Tensor, cu: &[usize], cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let xs = (xs + self.attn.forward(&self.norm1.forward(xs)?, cu, cos, sin)?)?;
        &xs + self.mlp.forward(&self.norm2.forward(&xs)?)?
    }
}

struct PatchMerger {
    norm: LayerNorm,
    postshuffle: bool,
    merged: usize,
    fc1: Linear,
    fc2: Linear,
}

impl PatchMerger {
    fn new(cfg: &VisionConfig, postshuffle: bool, vb: VarBuilder<'_>) -> Result<Self> {
        let merged = cfg.hidden_size * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let norm_dim = if postshuffle { merged } else { cfg.hidden_size };
        Ok(Self {
            norm: layer_norm(norm_dim, ln_cfg(), vb.pp("norm"))?,
            postshuffle,
            merged,
            fc1: linear(merged, merged, vb.pp("linear_fc1"))?,
            fc2: linear(merged, cfg.out_hidden_size, vb.pp("linear_fc2"))?,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let xs = if self.postshuffle {
            self.norm.forward(&xs.reshape(((), self.merged))?)?
        } else {
            self.norm.forward(xs)?.reshape(((), self.merged))?
        };
        // transformers: nn.GELU() (exact, erf-based).
        self.fc2.forward(&self.fc1.forward(&xs)?.gelu_erf()?)
    }
}

pub(crate) struct VisionModel {
    patch_embed: PatchEmbed,
    pos_embed: Embedding,
    blocks: Vec<VisionBlock>,
    merger: PatchMerger,
    deepstack_mergers: Vec<PatchMerger>,
    deepstack_lookup: Vec<Option<usize>>,
    inv_freq: Vec<f32>,
    merge: usize,
    grid_side: usize,
    hidden: usize,
}

/// `torch.linspace(start, end, steps)` in f32, with torch's symmetric evaluation.
fn linspace(start: f32, end: f32, steps: usize) -> Vec<f32> {
    if steps == 1 {
        return vec![start];
    }
    let step = (end - start) / (steps - 1) as f32;
    let half = steps / 2;
    (0..steps).map(|i| if i < half { start + step * i as f32 } else { end - step * (steps - 1 - i) as f32 }).collect()
}

impl VisionModel {
    pub(crate) fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let blocks =
            (0..cfg.depth).map(|i| VisionBlock::new(cfg, vb.pp(format!("blocks.{i}")))).collect::<Result<Vec<_>>>()?;
        let deepstack_mergers = (0..cfg.deepstack_visual_indexes.len())
            .map(|i| PatchMerger::new(cfg, true, vb.pp(format!("deepstack_merger_list.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let mut deepstack_lookup = vec![None; cfg.depth];
        for (i, &layer) in cfg.deepstack_visual_indexes.iter().enumerate() {
            deepstack_lookup[layer] = Some(i);
        }
        // Qwen3VLVisionRotaryEmbedding(head_dim / 2, theta = 10000).
        let rot_dim = cfg.hidden_size / cfg.num_heads / 2;
        let inv_freq = (0..rot_dim).step_by(2).map(|i| 1f32 / 10000f32.powf(i as f32 / rot_dim as f32)).collect();
        Ok(Self {
            patch_embed: PatchEmbed::new(cfg, vb.pp("patch_embed"))?,
            pos_embed: embedding(cfg.num_position_embeddings, cfg.hidden_size, vb.pp("pos_embed"))?,
            blocks,
            merger: PatchMerger::new(cfg, false, vb.pp("merger"))?,
            deepstack_mergers,
            deepstack_lookup,
            inv_freq,
            merge: cfg.spatial_merge_size,
            grid_side: (cfg.num_position_embeddings as f64).sqrt().round() as usize,
            hidden: cfg.hidden_size,
        })
    }

    /// Bilinear interpolation of the learned position grid to (h, w), in merge-block order.
    fn pos_embeds(&self, [t, h, w]: [usize; 3], device: &Device) -> Result<Tensor> {
        let n = self.grid_side;
        let hs = linspace(0.0, (n - 1) as f32, h);
        let ws = linspace(0.0, (n - 1) as f32, w);
        let mut idx: [Vec<u32>; 4] = Default::default();
        let mut wt: [Vec<f32>; 4] = Default::default();
        for &hv in &hs {
            let hf = hv as usize; // `.int()` truncates; values are >= 0
            let hc = (hf + 1).min(n - 1);
            let dh = hv - hf as f32;
            for &wv in &ws {
                let wf = wv as usize;
                let wc = (wf + 1).min(n - 1);
                let dw = wv - wf as f32;
                let cells = [(hf, wf), (hf, wc), (hc, wf), (hc, wc)];
                let weights = [(1.0 - dh) * (1.0 - dw), (1.0 - dh) * dw, dh * (1.0 - dw), dh * dw];
                for k in 0..4 {
                    idx[k].push((cells[k].0 * n + cells[k].1) as u32);
                    wt[k].push(weights[k]);
                }
            }
        }
        let table = self.pos_embed.embeddings();
        let dtype = table.dtype();
        let mut acc: Option<Tensor> = None;
        for k in 0..4 {
            let ids = Tensor::new(idx[k].as_slice(), device)?;
            let ws = Tensor::new(wt[k].as_slice(), device)?.to_dtype(dtype)?.unsqueeze(1)?;
            let term = table.index_select(&ids, 0)?.broadcast_mul(&ws)?;
            acc = Some(match acc {
                None => term,
                Some(a) => (a + term)?,
            });
        }
        let pe = acc.expect("four terms were added");
        let m = self.merge;
        pe.repeat((t, 1))?
            .reshape((t, h / m, m, w / m, m, self.hidden))?
            .permute((0, 1, 3, 2, 4, 5))?
            .reshape((t * h * w, self.hidden))
    }

    /// cos and sin of the 2-D rotary embedding, [t*h*w, head_dim], f32.
    fn rotary(&self, [t, h, w]: [usize; 3], device: &Device) -> Result<(Tensor, Tensor)> {
        let m = self.merge;
        let half = self.inv_freq.len();
        let mut emb = Vec::with_capacity(t * h * w * half * 4);
        for _ in 0..t {
            for bh in 0..h / m {
                for bw in 0..w / m {
                    for ih in 0..m {
                        for iw in 0..m {
                            let (r, c) = ((bh * m + ih) as f32, (bw * m + iw) as f32);
                            // [row freqs, col freqs] then duplicated: cat((rot, rot), -1).
                            let row: Vec<f32> = self
                                .inv_freq
                                .iter()
                                .map(|f| r * f)
                                .chain(self.inv_freq.iter().map(|f| c * f))
                                .collect();
                            emb.extend_from_slice(&row);
                            emb.extend_from_slice(&row);
                        }
                    }
                }
            }
        }
        let emb = Tensor::from_vec(emb, (t * h * w, half * 4), device)?;
        Ok((emb.cos()?, emb.sin()?))
    }

    /// Image tokens [t*h*w / merge², out_hidden] and the DeepStack features, one per index.
    pub(crate) fn forward(&self, pixels: &Tensor, grid: [usize; 3]) -> Result<(Tensor, Vec<Tensor>)> {
        let device = pixels.device();
        let dtype = self.pos_embed.embeddings().dtype();
        let xs = self.patch_embed.forward(&pixels.to_dtype(dtype)?)?;
        let mut xs = (xs + self.pos_embeds(grid, device)?)?;
        let (cos, sin) = self.rotary(grid, device)?;
        let area = grid[1] * grid[2];
        let cu: Vec<usize> = (0..=grid[0]).map(|i| i * area).collect();
        let mut deepstack = Vec::with_capacity(self.deepstack_mergers.len());
        for (i, block) in self.blocks.iter().enumerate() {
            xs = block.forward(&xs, &cu, &cos, &sin)?;
            if let Some(j) = self.deepstack_lookup[i] {
                deepstack.push(self.deepstack_mergers[j].forward(&xs)?);
            }
        }
        Ok((self.merger.forward(&xs)?, deepstack))
    }
}

// ---------------------------------------------------------------- text

struct TextMlp {
    gate: Linear,
    up: Linear,
    down: Linear,
    act: Activation,
}

impl TextMlp {
    fn new(cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            gate: linear_no_bias(cfg.hidden_size, cfg.intermediate_size, vb.pp("gate_proj"))?,
            up: linear_no_bias(cfg.hidden_size, cfg.intermediate_size, vb.pp("up_proj"))?,
            down: linear_no_bias(cfg.intermediate_size, cfg.hidden_size, vb.pp("down_proj"))?,
            act: cfg.hidden_act,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let g = self.gate.forward(xs)?.apply(&self.act)?;
        self.down.forward(&(g * self.up.forward(xs)?)?)
    }
}

struct TextAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl TextAttention {
    fn new(cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let (hd, b) = (cfg.head_dim(), cfg.attention_bias);
        let (nh, nkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
        Ok(Self {
            q: linear_b(cfg.hidden_size, nh * hd, b, vb.pp("q_proj"))?,
            k: linear_b(cfg.hidden_size, nkv * hd, b, vb.pp("k_proj"))?,
            v: linear_b(cfg.hidden_size, nkv * hd, b, vb.pp("v_proj"))?,
            o: linear_b(nh * hd, cfg.hidden_size, b, vb.pp("o_proj"))?,
            q_norm: rms_norm(hd, cfg.rms_norm_eps, vb.pp("q_norm"))?,
            k_norm: rms_norm(hd, cfg.rms_norm_eps, vb.pp("k_norm"))?,
            heads: nh,
            kv_heads: nkv,
            head_dim: hd,
        })
    }

    fn forward(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, s, _) = xs.dims3()?;
        let shape = |t: Tensor, n: usize| -> Result<Tensor> {
            t.reshape((b, s, n, self.head_dim))?.transpose(1, 2)?.contiguous()
        };
        let q = self.q_norm.forward(&shape(self.q.forward(xs)?, self.heads)?)?;
        let k = self.k_norm.forward(&shape(self.k.forward(xs)?, self.kv_heads)?)?;
        let v = shape(self.v.forward(xs)?, self.kv_heads)?;
        let q = candle_nn::rotary_emb::rope(&q.contiguous()?, cos, sin)?;
        let k = candle_nn::rotary_emb::rope(&k.contiguous()?, cos, sin)?;
        let rep = self.heads / self.kv_heads;
        let (k, v) = if rep == 1 {
            (k, v)
        } else {
            let expand = |t: Tensor| -> Result<Tensor> {
                t.unsqueeze(2)?.expand((b, self.kv_heads, rep, s, self.head_dim))?.reshape((
                    b,
                    self.heads,
                    s,
                    self.head_dim,
                ))
            };
            (expand(k)?, expand(v)?)
        };
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let w = (q.matmul(&k.t()?.contiguous()?)? * scale)?;
        // Eager attention in transformers: softmax in f32, then back to the model dtype.
        let w = w.to_dtype(DType::F32)?.broadcast_add(mask)?;
        let w = candle_nn::ops::softmax_last_dim(&w)?.to_dtype(v.dtype())?;
        let out = w.matmul(&v.contiguous()?)?.transpose(1, 2)?.reshape((b, s, ()))?;
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
    fn new(cfg: &TextConfig, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Self {
            attn: TextAttention::new(cfg, vb.pp("self_attn"))?,
            mlp: TextMlp::new(cfg, vb.pp("mlp"))?,
            input_norm: rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            post_norm: rms_norm(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("post_attention_layernorm"))?,
        })
    }

    fn forward(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let xs = (xs + self.attn.forward(&self.input_norm.forward(xs)?, cos, sin, mask)?)?;
        &xs + self.mlp.forward(&self.post_norm.forward(&xs)?)?
    }
}

pub(crate) struct TextModel {
    embed: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Linear,
    inv_freq: Vec<f32>,
    mrope_section: [usize; 3],
}

impl TextModel {
    pub(crate) fn new(cfg: &Config, vb: VarBuilder<'_>) -> Result<Self> {
        let t = &cfg.text_config;
        let vbm = vb.pp("model").pp("language_model");
        let embed = embedding(t.vocab_size, t.hidden_size, vbm.pp("embed_tokens"))?;
        let layers = (0..t.num_hidden_layers)
            .map(|i| DecoderLayer::new(t, vbm.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let norm = rms_norm(t.hidden_size, t.rms_norm_eps, vbm.pp("norm"))?;
        let lm_head = if cfg.tie_word_embeddings() {
            Linear::new(embed.embeddings().clone(), None)
        } else {
            linear_no_bias(t.hidden_size, t.vocab_size, vb.pp("lm_head"))?
        };
        let hd = t.head_dim();
        let theta = t.rope_theta() as f32;
        let inv_freq = (0..hd).step_by(2).map(|i| 1f32 / theta.powf(i as f32 / hd as f32)).collect();
        let s = t.rope().mrope_section;
        Ok(Self { embed, layers, norm, lm_head, inv_freq, mrope_section: [s[0], s[1], s[2]] })
    }

    pub(crate) fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        self.embed.forward(ids)
    }

    pub(crate) fn dtype(&self) -> DType {
        self.embed.embeddings().dtype()
    }

    /// cos/sin [seq, head_dim/2] of interleaved MRoPE: frequency j takes the height position when
    /// j % 3 == 1 and j < 3·section[1], the width position when j % 3 == 2 and j < 3·section[2], and
    /// the temporal one otherwise (transformers' `apply_interleaved_mrope`).
    fn mrope(&self, pos: &[Vec<u32>; 3], device: &Device, dtype: DType) -> Result<(Tensor, Tensor)> {
        let seq = pos[0].len();
        let half = self.inv_freq.len();
        let axis: Vec<usize> = (0..half)
            .map(|j| {
                if j % 3 == 1 && j < self.mrope_section[1] * 3 {
                    1
                } else if j % 3 == 2 && j < self.mrope_section[2] * 3 {
                    2
                } else {
                    0
                }
            })
            .collect();
        let mut freqs = Vec::with_capacity(seq * half);
        for (s, _) in pos[0].iter().enumerate() {
            for (&a, f) in axis.iter().zip(&self.inv_freq) {
                freqs.push(pos[a][s] as f32 * f);
            }
        }
        let freqs = Tensor::from_vec(freqs, (seq, half), device)?;
        Ok((freqs.cos()?.to_dtype(dtype)?, freqs.sin()?.to_dtype(dtype)?))
    }

    /// Logits (f32, [vocab]) after the last position. `visual`: the image's token span
    /// (start, count) and its DeepStack features, added after the first layers.
    pub(crate) fn forward(
        &self,
        mut xs: Tensor,
        pos: &[Vec<u32>; 3],
        visual: Option<(usize, usize, &[Tensor])>,
    ) -> Result<Tensor> {
        let (_, seq, _) = xs.dims3()?;
        let device = xs.device().clone();
        let (cos, sin) = self.mrope(pos, &device, xs.dtype())?;
        let mask: Vec<f32> =
            (0..seq).flat_map(|i| (0..seq).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 })).collect();
        let mask = Tensor::from_vec(mask, (seq, seq), &device)?;
        for (i, layer) in self.layers.iter().enumerate() {
            xs = layer.forward(&xs, &cos, &sin, &mask)?;
            if let Some((start, n, feats)) = visual
                && let Some(feat) = feats.get(i)
            {
                xs = add_rows(&xs, start, n, feat)?;
            }
        }
        let last = xs.narrow(1, seq - 1, 1)?;
        let logits = self.lm_head.forward(&self.norm.forward(&last)?)?;
        logits.flatten_all()?.to_dtype(DType::F32)
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
