//! Mistral3's vision side: the Pixtral tower (transformers' `PixtralVisionModel`) and the multi-modal
//! projector (`Mistral3MultiModalProjector`), as one [`PixtralTower`] that turns an image's patch rows
//! into one token per merge×merge square of patches, in the text model's width.
//!
//! - Patch embedding: `patch_conv`, a bias-free Conv2d with kernel = stride = patch, is one matrix
//!   product on the flattened patches (columns channel, y, x: the convolution weight's order);
//! - `ln_pre` RMSNorm (eps 1e-5), then blocks of `attention_norm` → self-attention (no biases, 2-D
//!   rotary) → `ffn_norm` → gated MLP `down(act(gate(x)) * up(x))`, all norms RMS with eps 1e-5;
//! - the rotary embedding is axial: head_dim/2 base frequencies `1 / θ^(2i/d)`, the even-indexed ones
//!   turned by the patch's row and the odd-indexed ones by its column (`[rows | cols]`, then repeated,
//!   rotate-half style);
//! - attention covers the whole image (one image a prompt: the block-diagonal mask is one block);
//! - `vision_feature_layer` picks the hidden state (-1: the last block's output);
//! - projector: RMSNorm (the text model's eps), the patch merger (`unfold` of each 2×2 square into a
//!   vector ordered channel-major: for each channel its four patches row-major; then `merging_layer`),
//!   `linear_1`, the projector activation, `linear_2`.
//!
//! Patch rows arrive in the shared layout (merge blocks row-major, patches row-major within a block),
//! so the merger's four patches of a token are consecutive rows; positions follow the same order.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Activation, Linear, RmsNorm, VarBuilder, linear_b, linear_no_bias, rms_norm};

use crate::config::{Config, VisionActivation, VisionConfig};
use crate::layers::rotate_half;

const PIXTRAL_EPS: f64 = 1e-5;

struct PixtralBlock {
    attention_norm: RmsNorm,
    ffn_norm: RmsNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    gate: Linear,
    up: Linear,
    down: Linear,
    act: VisionActivation,
    heads: usize,
    head_dim: usize,
}

impl PixtralBlock {
    fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let (att, ff) = (vb.pp("attention"), vb.pp("feed_forward"));
        Ok(Self {
            attention_norm: rms_norm(h, PIXTRAL_EPS, vb.pp("attention_norm"))?,
            ffn_norm: rms_norm(h, PIXTRAL_EPS, vb.pp("ffn_norm"))?,
            q: linear_no_bias(h, h, att.pp("q_proj"))?,
            k: linear_no_bias(h, h, att.pp("k_proj"))?,
            v: linear_no_bias(h, h, att.pp("v_proj"))?,
            o: linear_no_bias(h, h, att.pp("o_proj"))?,
            gate: linear_no_bias(h, i, ff.pp("gate_proj"))?,
            up: linear_no_bias(h, i, ff.pp("up_proj"))?,
            down: linear_no_bias(i, h, ff.pp("down_proj"))?,
            act: cfg.hidden_act,
            heads: cfg.num_heads,
            head_dim: h / cfg.num_heads,
        })
    }

    /// `cos`/`sin`: [seq, head_dim], f32.
    fn attention(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let seq = xs.dim(0)?;
        // [heads, seq, head_dim]
        let split = |t: Tensor| -> Result<Tensor> { t.reshape((seq, self.heads, self.head_dim))?.transpose(0, 1) };
        let q = split(self.q.forward(xs)?)?;
        let k = split(self.k.forward(xs)?)?;
        let v = split(self.v.forward(xs)?)?.contiguous()?;
        let dtype = q.dtype();
        let (cos, sin) = (cos.to_dtype(dtype)?.unsqueeze(0)?, sin.to_dtype(dtype)?.unsqueeze(0)?);
        let rot = |t: &Tensor| -> Result<Tensor> { t.broadcast_mul(&cos)? + rotate_half(t)?.broadcast_mul(&sin)? };
        let (q, k) = (rot(&q)?.contiguous()?, rot(&k)?.contiguous()?);
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let w = (q.matmul(&k.t()?.contiguous()?)? * scale)?;
        // Eager attention: softmax in f32, then back to the model dtype.
        let w = candle_nn::ops::softmax_last_dim(&w.to_dtype(DType::F32)?)?.to_dtype(dtype)?;
        let out = w.matmul(&v)?.transpose(0, 1)?.reshape((seq, ()))?;
        self.o.forward(&out)
    }

    fn forward(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let xs = (xs + self.attention(&self.attention_norm.forward(xs)?, cos, sin)?)?;
        let h = self.ffn_norm.forward(&xs)?;
        let g = self.act.forward(&self.gate.forward(&h)?)?;
        &xs + self.down.forward(&(g * self.up.forward(&h)?)?)?
    }
}

/// The Pixtral encoder and Mistral3's projector.
pub(crate) struct PixtralTower {
    patch_weight: Tensor, // [3*p*p, hidden]
    ln_pre: RmsNorm,
    blocks: Vec<PixtralBlock>,
    /// Index into [ln_pre output, block 1, …, block L] of the hidden state the projector takes.
    feature_layer: usize,
    norm: RmsNorm,
    merging_layer: Linear,
    linear_1: Linear,
    linear_2: Linear,
    act: Activation,
    merge: usize,
    inv_freq: Vec<f32>,
}

impl PixtralTower {
    /// `vision`: the tower's weights (`vision_tower`), `projector`: `multi_modal_projector`.
    pub(crate) fn new(cfg: &Config, vision: VarBuilder<'_>, projector: VarBuilder<'_>) -> Result<Self> {
        let v = &cfg.vision_config;
        let settings = cfg.mistral3.as_ref().ok_or_else(|| candle_core::Error::Msg("not a mistral3 config".into()))?;
        let (h, p, m) = (v.hidden_size, v.patch_size, v.spatial_merge_size);
        let conv = vision.get((h, v.in_channels, p, p), "patch_conv.weight")?;
        let patch_weight = conv.reshape((h, ()))?.t()?.contiguous()?;
        let blocks = (0..v.depth)
            .map(|i| PixtralBlock::new(v, vision.pp(format!("transformer.layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let layers = v.depth as i64;
        let f = settings.vision_feature_layer;
        let feature_layer = if f < 0 { layers + 1 + f } else { f };
        if !(0..=layers).contains(&feature_layer) {
            return Err(candle_core::Error::Msg(format!(
                "vision_feature_layer {f} is outside the {} hidden states of a {layers}-block tower",
                layers + 1
            )));
        }
        let t = cfg.text_config.hidden_size;
        let bias = settings.projector_bias;
        // Frequencies of the full head width, even-indexed ones for rows then odd-indexed ones for columns.
        let d = h / v.num_heads;
        let base: Vec<f32> =
            (0..d).step_by(2).map(|i| 1f32 / (settings.vision_rope_theta as f32).powf(i as f32 / d as f32)).collect();
        let inv_freq = base.iter().step_by(2).chain(base.iter().skip(1).step_by(2)).copied().collect();
        Ok(Self {
            patch_weight,
            ln_pre: rms_norm(h, PIXTRAL_EPS, vision.pp("ln_pre"))?,
            blocks,
            feature_layer: feature_layer as usize,
            norm: rms_norm(h, cfg.text_config.rms_norm_eps, projector.pp("norm"))?,
            merging_layer: linear_no_bias(h * m * m, h, projector.pp("patch_merger.merging_layer"))?,
            linear_1: linear_b(h, t, bias, projector.pp("linear_1"))?,
            linear_2: linear_b(t, t, bias, projector.pp("linear_2"))?,
            act: settings.projector_act,
            merge: m,
            inv_freq,
        })
    }

    /// cos and sin [seq, head_dim] (f32) of the axial rotary embedding, rows in the patch-row order.
    fn rotary(&self, [_, gh, gw]: [usize; 3], device: &Device) -> Result<(Tensor, Tensor)> {
        let (m, quarter) = (self.merge, self.inv_freq.len() / 2);
        let mut emb = Vec::with_capacity(gh * gw * self.inv_freq.len() * 2);
        for bh in 0..gh / m {
            for bw in 0..gw / m {
                for ih in 0..m {
                    for iw in 0..m {
                        let (r, c) = ((bh * m + ih) as f32, (bw * m + iw) as f32);
                        let row: Vec<f32> = self
                            .inv_freq
                            .iter()
                            .enumerate()
                            .map(|(j, f)| if j < quarter { r * f } else { c * f })
                            .collect();
                        emb.extend_from_slice(&row);
                        emb.extend_from_slice(&row);
                    }
                }
            }
        }
        let emb = Tensor::from_vec(emb, (gh * gw, self.inv_freq.len() * 2), device)?;
        Ok((emb.cos()?, emb.sin()?))
    }

    /// Patch rows [gh*gw, 3*p*p] of grid `[1, gh, gw]` → image tokens [gh*gw / merge², text hidden].
    pub(crate) fn forward(&self, pixels: &Tensor, grid: [usize; 3]) -> Result<Tensor> {
        let (cos, sin) = self.rotary(grid, pixels.device())?;
        let mut xs = self.ln_pre.forward(&pixels.to_dtype(self.patch_weight.dtype())?.matmul(&self.patch_weight)?)?;
        for block in &self.blocks[..self.feature_layer] {
            xs = block.forward(&xs, &cos, &sin)?;
        }
        let (n, d) = xs.dims2()?;
        let mm = self.merge * self.merge;
        let xs = self.norm.forward(&xs)?;
        // unfold: for each token, channel-major over its merge² patches.
        let merged = xs.reshape((n / mm, mm, d))?.transpose(1, 2)?.contiguous()?.reshape((n / mm, d * mm))?;
        let xs = self.merging_layer.forward(&merged)?;
        self.linear_2.forward(&self.linear_1.forward(&xs)?.apply(&self.act)?)
    }
}
