//! Gemma 3's vision side: the SigLIP tower (candle-transformers' `siglip::VisionModel`, without its
//! pooling head: Gemma 3 takes the post-layernorm hidden states) and `Gemma3MultiModalProjector`.
//!
//! The projector, as transformers writes it: the tower's `[patches, width]` output laid back on its
//! square patch grid, average-pooled by `kernel = patches_per_side / sqrt(mm_tokens_per_image)` (4 on
//! the released 896-pixel, patch-14 tower: 64×64 patches to 16×16 = 256 tokens, raster order), then
//! `mm_soft_emb_norm` (Gemma's RMSNorm, `x / rms(x) * (1 + w)` in f32) and a matmul by
//! `mm_input_projection_weight` (`[vision width, text width]`, not transposed as a Linear would be).

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::siglip;

use crate::gemma3::config::Gemma3Config;

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
    tower: siglip::VisionModel,
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
            tower: siglip::VisionModel::new(v, false, tower)?,
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
