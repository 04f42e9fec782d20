//! The parts of the vision encoder that Qwen2-VL, Qwen2.5-VL and Qwen3-VL share: the patch embedding
//! (a strided Conv3d, here one matrix product), pre-norm blocks of 2-D rotary self-attention within
//! spans of patches, and the patch merger that concatenates each merge×merge square of patches into one
//! token for the language model. What differs is chosen by [`BlockKind`] and the names of the weights;
//! the towers themselves are in `tower2` and `tower3`.

use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::{LayerNorm, LayerNormConfig, Linear, RmsNorm, VarBuilder, layer_norm, linear, linear_b, rms_norm};

use crate::config::{VisionActivation, VisionConfig};
use crate::layers::rotate_half;

const NORM_EPS: f64 = 1e-6;

/// LayerNorm (Qwen2-VL, Qwen3-VL) or RMSNorm (Qwen2.5-VL), both with eps 1e-6.
pub(crate) enum Norm {
    Layer(LayerNorm),
    Rms(RmsNorm),
}

impl Norm {
    pub(crate) fn new(rms: bool, dim: usize, vb: VarBuilder<'_>) -> Result<Self> {
        Ok(if rms {
            Norm::Rms(rms_norm(dim, NORM_EPS, vb)?)
        } else {
            Norm::Layer(layer_norm(dim, LayerNormConfig { eps: NORM_EPS, ..Default::default() }, vb)?)
        })
    }

    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Norm::Layer(n) => n.forward(xs),
            Norm::Rms(n) => n.forward(xs),
        }
    }
}

/// `Conv3d(kernel = stride = (T, P, P))` on pre-flattened patches is one matmul.
pub(crate) struct PatchEmbed {
    weight: Tensor, // [hidden, C*T*P*P]
    bias: Option<Tensor>,
}

impl PatchEmbed {
    /// Qwen3-VL's convolution has a bias, Qwen2-VL's and Qwen2.5-VL's none.
    pub(crate) fn new(cfg: &VisionConfig, bias: bool, vb: VarBuilder<'_>) -> Result<Self> {
        let vb = vb.pp("proj");
        let w = vb.get(
            (cfg.hidden_size, cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size, cfg.patch_size),
            "weight",
        )?;
        let weight = w.reshape((cfg.hidden_size, ()))?.t()?.contiguous()?;
        let bias = if bias { Some(vb.get(cfg.hidden_size, "bias")?) } else { None };
        Ok(Self { weight, bias })
    }

    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let out = xs.to_dtype(self.weight.dtype())?.matmul(&self.weight)?;
        match &self.bias {
            Some(b) => out.broadcast_add(b),
            None => Ok(out),
        }
    }
}

/// Which block the family has.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// LayerNorm, `mlp.linear_fc1`/`linear_fc2` (Qwen3-VL).
    Qwen3,
    /// LayerNorm, `mlp.fc1`/`fc2` with QuickGELU (Qwen2-VL).
    Qwen2,
    /// RMSNorm, SwiGLU `mlp.gate_proj`/`up_proj`/`down_proj` with biases (Qwen2.5-VL).
    Qwen2_5,
}

enum VisionMlp {
    Plain { fc1: Linear, fc2: Linear, act: VisionActivation },
    Gated { gate: Linear, up: Linear, down: Linear, act: VisionActivation },
}

impl VisionMlp {
    fn new(cfg: &VisionConfig, kind: BlockKind, vb: VarBuilder<'_>) -> Result<Self> {
        let (h, i, act) = (cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act);
        Ok(match kind {
            BlockKind::Qwen3 => VisionMlp::Plain {
                fc1: linear(h, i, vb.pp("linear_fc1"))?,
                fc2: linear(i, h, vb.pp("linear_fc2"))?,
                act,
            },
            BlockKind::Qwen2 => {
                VisionMlp::Plain { fc1: linear(h, i, vb.pp("fc1"))?, fc2: linear(i, h, vb.pp("fc2"))?, act }
            }
            BlockKind::Qwen2_5 => VisionMlp::Gated {
                gate: linear_b(h, i, true, vb.pp("gate_proj"))?,
                up: linear_b(h, i, true, vb.pp("up_proj"))?,
                down: linear_b(i, h, true, vb.pp("down_proj"))?,
                act,
            },
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            VisionMlp::Plain { fc1, fc2, act } => fc2.forward(&act.forward(&fc1.forward(xs)?)?),
            VisionMlp::Gated { gate, up, down, act } => {
                down.forward(&(act.forward(&gate.forward(xs)?)? * up.forward(xs)?)?)
            }
        }
    }
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

    /// `cos`/`sin`: [seq, head_dim] in f32. Attention runs in f32 within each span of `cu_seqlens`
    /// (a frame, or a window), as transformers' eager path does chunk by chunk.
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

/// A pre-norm transformer block of the vision encoder.
pub(crate) struct VisionBlock {
    norm1: Norm,
    norm2: Norm,
    attn: VisionAttention,
    mlp: VisionMlp,
}

impl VisionBlock {
    pub(crate) fn new(cfg: &VisionConfig, kind: BlockKind, vb: VarBuilder<'_>) -> Result<Self> {
        let rms = kind == BlockKind::Qwen2_5;
        Ok(Self {
            norm1: Norm::new(rms, cfg.hidden_size, vb.pp("norm1"))?,
            norm2: Norm::new(rms, cfg.hidden_size, vb.pp("norm2"))?,
            attn: VisionAttention::new(cfg, vb.pp("attn"))?,
            mlp: VisionMlp::new(cfg, kind, vb.pp("mlp"))?,
        })
    }

    pub(crate) fn forward(&self, xs: &Tensor, cu: &[usize], cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let xs = (xs + self.attn.forward(&self.norm1.forward(xs)?, cu, cos, sin)?)?;
        &xs + self.mlp.forward(&self.norm2.forward(&xs)?)?
    }
}

/// The merger: norm, concatenate each merge² patches, linear, exact GELU, linear.
pub(crate) struct PatchMerger {
    norm: Norm,
    /// Qwen3-VL's DeepStack mergers normalise after concatenating.
    postshuffle: bool,
    merged: usize,
    fc1: Linear,
    fc2: Linear,
}

/// Weight names of a merger: (norm, first linear, second linear).
pub(crate) type MergerNames = (&'static str, &'static str, &'static str);
/// Qwen3-VL's names.
pub(crate) const QWEN3_MERGER: MergerNames = ("norm", "linear_fc1", "linear_fc2");
/// Qwen2-VL's and Qwen2.5-VL's names (`mlp` is an `nn.Sequential`: 0 linear, 1 GELU, 2 linear).
pub(crate) const QWEN2_MERGER: MergerNames = ("ln_q", "mlp.0", "mlp.2");

impl PatchMerger {
    pub(crate) fn new(
        cfg: &VisionConfig,
        names: MergerNames,
        rms: bool,
        postshuffle: bool,
        vb: VarBuilder<'_>,
    ) -> Result<Self> {
        let merged = cfg.hidden_size * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let norm_dim = if postshuffle { merged } else { cfg.hidden_size };
        Ok(Self {
            norm: Norm::new(rms, norm_dim, vb.pp(names.0))?,
            postshuffle,
            merged,
            fc1: linear(merged, merged, vb.pp(names.1))?,
            fc2: linear(merged, cfg.out_hidden_size, vb.pp(names.2))?,
        })
    }

    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let xs = if self.postshuffle {
            self.norm.forward(&xs.reshape(((), self.merged))?)?
        } else {
            self.norm.forward(xs)?.reshape(((), self.merged))?
        };
        // transformers: nn.GELU() (exact, erf-based).
        self.fc2.forward(&self.fc1.forward(&xs)?.gelu_erf()?)
    }
}

/// The inverse frequencies of the 2-D rotary embedding: head_dim / 4 of them, base 10000, shared by the
/// row and the column position.
pub(crate) fn rotary_inv_freq(cfg: &VisionConfig) -> Vec<f32> {
    let rot_dim = cfg.hidden_size / cfg.num_heads / 2;
    (0..rot_dim).step_by(2).map(|i| 1f32 / 10000f32.powf(i as f32 / rot_dim as f32)).collect()
}

/// cos and sin of the 2-D rotary embedding, [t*h*w, head_dim], f32, rows in the processor's patch order
/// (merge blocks row-major, patches row-major within a block).
pub(crate) fn rotary(inv_freq: &[f32], [t, h, w]: [usize; 3], m: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = inv_freq.len();
    let mut emb = Vec::with_capacity(t * h * w * half * 4);
    for _ in 0..t {
        for bh in 0..h / m {
            for bw in 0..w / m {
                for ih in 0..m {
                    for iw in 0..m {
                        let (r, c) = ((bh * m + ih) as f32, (bw * m + iw) as f32);
                        // [row freqs, col freqs] then duplicated: cat((rot, rot), -1).
                        let row: Vec<f32> =
                            inv_freq.iter().map(|f| r * f).chain(inv_freq.iter().map(|f| c * f)).collect();
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

/// Span boundaries of one frame each: the vision encoder attends within a frame.
pub(crate) fn frame_spans([t, h, w]: [usize; 3]) -> Vec<usize> {
    (0..=t).map(|i| i * h * w).collect()
}
