//! Gemma 3's vision side: the SigLIP tower (transformers' `SiglipVisionTransformer` without its pooling
//! head: Gemma 3 takes the post-layernorm hidden states) and `Gemma3MultiModalProjector`.
//!
//! The tower is herd's own: candle-transformers has one, but it was the only thing herd's binary took from
//! that crate, whose other models cost 110 CPU-seconds of every fresh build (issue 29). As transformers
//! runs it: a patch convolution (stride = kernel = patch size) plus a learned position embedding per patch,
//! then pre-norm encoder layers (LayerNorm, attention with biased q/k/v/out projections and the softmax in
//! f32, residual; LayerNorm, `fc2(act(fc1(x)))`, residual) and a final LayerNorm.
//!
//! The projector, as transformers writes it: the tower's `[patches, width]` output laid back on its
//! square patch grid, average-pooled by `kernel = patches_per_side / sqrt(mm_tokens_per_image)` (4 on
//! the released 896-pixel, patch-14 tower: 64×64 patches to 16×16 = 256 tokens, raster order), then
//! `mm_soft_emb_norm` (Gemma's RMSNorm, `x / rms(x) * (1 + w)` in f32) and a matmul by
//! `mm_input_projection_weight` (`[vision width, text width]`, not transposed as a Linear would be).

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Activation, Conv2d, Conv2dConfig, LayerNorm, Linear, VarBuilder, conv2d, layer_norm, linear};

use crate::gemma3::config::{Gemma3Config, SiglipConfig};

/// One pre-norm encoder layer of the SigLIP tower.
struct EncoderLayer {
    norm1: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    norm2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    act: Activation,
    heads: usize,
}

impl EncoderLayer {
    fn new(cfg: &SiglipConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let (h, attn) = (cfg.hidden_size, vb.pp("self_attn"));
        Ok(Self {
            norm1: layer_norm(h, cfg.layer_norm_eps, vb.pp("layer_norm1"))?,
            q: linear(h, h, attn.pp("q_proj"))?,
            k: linear(h, h, attn.pp("k_proj"))?,
            v: linear(h, h, attn.pp("v_proj"))?,
            out: linear(h, h, attn.pp("out_proj"))?,
            norm2: layer_norm(h, cfg.layer_norm_eps, vb.pp("layer_norm2"))?,
            fc1: linear(h, cfg.intermediate_size, vb.pp("mlp").pp("fc1"))?,
            fc2: linear(cfg.intermediate_size, h, vb.pp("mlp").pp("fc2"))?,
            act: cfg.hidden_act,
            heads: cfg.num_attention_heads,
        })
    }

    /// `xs` `[b, patches, width]`: every patch attends to every patch (no mask).
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let (b, n, width) = xs.dims3()?;
        let head_dim = width / self.heads;
        let normed = self.norm1.forward(xs)?;
        let split = |proj: &Linear| -> Result<Tensor> {
            proj.forward(&normed)?.reshape((b, n, self.heads, head_dim))?.transpose(1, 2)?.contiguous()
        };
        let (q, k, v) = (split(&self.q)?, split(&self.k)?, split(&self.v)?);
        let scores = (q.matmul(&k.t()?)? * (head_dim as f64).powf(-0.5))?;
        // transformers' eager attention takes the softmax in f32 and casts back.
        let weights = candle_nn::ops::softmax_last_dim(&scores.to_dtype(DType::F32)?)?.to_dtype(v.dtype())?;
        let attended = weights.matmul(&v)?.transpose(1, 2)?.reshape((b, n, width))?;
        let xs = (xs + self.out.forward(&attended)?)?;
        let mlp = self.fc2.forward(&self.fc1.forward(&self.norm2.forward(&xs)?)?.apply(&self.act)?)?;
        xs + mlp
    }
}

/// `SiglipVisionTransformer` without its head: pixels `[b, 3, size, size]` to `[b, patches, width]`.
struct VisionTransformer {
    patch_embedding: Conv2d,
    /// `[1, patches, width]`, in raster order of the patch grid.
    position_embedding: Tensor,
    layers: Vec<EncoderLayer>,
    post_layernorm: LayerNorm,
    patch_size: usize,
    patches_per_side: usize,
}

impl VisionTransformer {
    fn new(cfg: &SiglipConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let embeddings = vb.pp("embeddings");
        let conv = Conv2dConfig { stride: cfg.patch_size, ..Default::default() };
        let patches_per_side = cfg.image_size / cfg.patch_size;
        let patches = patches_per_side * patches_per_side;
        Ok(Self {
            patch_embedding: conv2d(
                cfg.num_channels,
                cfg.hidden_size,
                cfg.patch_size,
                conv,
                embeddings.pp("patch_embedding"),
            )?,
            position_embedding: embeddings
                .pp("position_embedding")
                .get((patches, cfg.hidden_size), "weight")?
                .unsqueeze(0)?,
            layers: (0..cfg.num_hidden_layers)
                .map(|i| EncoderLayer::new(cfg, vb.pp("encoder").pp("layers").pp(i)))
                .collect::<Result<_>>()?,
            post_layernorm: layer_norm(cfg.hidden_size, cfg.layer_norm_eps, vb.pp("post_layernorm"))?,
            patch_size: cfg.patch_size,
            patches_per_side,
        })
    }

    fn forward(&self, pixels: &Tensor) -> Result<Tensor> {
        let (_, _, height, width) = pixels.dims4()?;
        let (rows, cols) = (height / self.patch_size, width / self.patch_size);
        if (rows, cols) != (self.patches_per_side, self.patches_per_side) {
            // transformers interpolates the position embedding only when asked to; Gemma 3 never asks.
            candle_core::bail!(
                "SigLIP tower: a {height}x{width} image gives {rows}x{cols} patches, the tower's position embedding \
                 holds {0}x{0}",
                self.patches_per_side
            );
        }
        // [b, width, rows, cols] → [b, patches, width] in raster order.
        let patches = self.patch_embedding.forward(pixels)?.flatten_from(2)?.transpose(1, 2)?;
        let mut xs = patches.broadcast_add(&self.position_embedding)?;
        for layer in &self.layers {
            xs = layer.forward(&xs)?;
        }
        self.post_layernorm.forward(&xs)
    }
}

/// Gemma's RMSNorm: in f32, `x * rsqrt(mean(x²) + eps) * (1 + w)`, back to x's dtype. `one_plus_w` is
/// `1 + w` in f32.
pub(crate) fn gemma_rms_norm(xs: &Tensor, one_plus_w: &Tensor, eps: f64) -> Result<Tensor> {
    let dtype = xs.dtype();
    let x = xs.to_dtype(DType::F32)?;
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = x.broadcast_mul(&(ms + eps)?.sqrt()?.recip()?)?;
    normed.broadcast_mul(one_plus_w)?.to_dtype(dtype)
}

/// `1 + weight` of a Gemma RMSNorm, in f32.
pub(crate) fn gemma_norm_weight(dim: usize, vb: VarBuilder<'_>) -> Result<Tensor> {
    vb.get(dim, "weight")?.to_dtype(DType::F32)? + 1.0
}

pub(crate) struct SiglipTower {
    tower: VisionTransformer,
    norm: Tensor,
    eps: f64,
    projection: Tensor,
    patches_per_side: usize,
    kernel: usize,
}

impl SiglipTower {
    /// `tower`: the folder's `vision_tower.vision_model` (or `model.vision_tower.vision_model`);
    /// `projector`: its `multi_modal_projector` (or `model.multi_modal_projector`).
    pub(crate) fn new(cfg: &Gemma3Config, tower: VarBuilder<'_>, projector: VarBuilder<'_>) -> Result<Self> {
        let v = &cfg.vision_config;
        Ok(Self {
            tower: VisionTransformer::new(v, tower)?,
            norm: gemma_norm_weight(v.hidden_size, projector.pp("mm_soft_emb_norm"))?,
            eps: v.layer_norm_eps,
            projection: projector.get((v.hidden_size, cfg.text_config.hidden_size), "mm_input_projection_weight")?,
            patches_per_side: cfg.patches_per_side(),
            kernel: cfg.pool_kernel(),
        })
    }

    /// `pixels` `[1, 3, image_size, image_size]` to the image's soft tokens `[mm_tokens_per_image, text width]`.
    pub(crate) fn forward(&self, pixels: &Tensor) -> Result<Tensor> {
        let hidden = self.tower.forward(&pixels.to_dtype(self.projection.dtype())?)?;
        let (b, _, width) = hidden.dims3()?;
        let p = self.patches_per_side;
        let grid = hidden.transpose(1, 2)?.reshape((b, width, p, p))?.contiguous()?;
        let pooled = grid.avg_pool2d(self.kernel)?.flatten_from(2)?.transpose(1, 2)?;
        let normed = gemma_rms_norm(&pooled, &self.norm, self.eps)?;
        let projected = normed.broadcast_matmul(&self.projection)?;
        projected.squeeze(0)
    }
}
