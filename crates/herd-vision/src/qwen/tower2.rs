//! The vision encoders of Qwen2-VL and Qwen2.5-VL, from the shared blocks (`qwen::vision`).
//!
//! Qwen2-VL: every block attends over the whole frame; LayerNorm; QuickGELU MLP; no position table (only
//! the 2-D rotary embedding). Qwen2.5-VL: the blocks listed in `fullatt_block_indexes` attend over the
//! whole frame, the others within square windows of `window_size` pixels; RMSNorm; SwiGLU MLP. For the
//! windows, transformers reorders the patches window by window (whole merge squares, so the merger
//! still sees its squares together) before the first block, runs every block in that order, and puts
//! the merged tokens back into raster order at the end; attention is invariant to the order within a
//! span, so this gives the same result as masking, and it is what is done here.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::VisionConfig;
use crate::family::VlFamily;
use crate::qwen::vision::{
    BlockKind, PatchEmbed, PatchMerger, QWEN2_MERGER, VisionBlock, frame_spans, rotary, rotary_inv_freq,
};

pub(crate) struct Qwen2Tower {
    patch_embed: PatchEmbed,
    blocks: Vec<VisionBlock>,
    merger: PatchMerger,
    inv_freq: Vec<f32>,
    merge: usize,
    /// Qwen2.5-VL: merged tokens per window side, and whether each block attends over the whole frame.
    windows: Option<(usize, Vec<bool>)>,
}

impl Qwen2Tower {
    pub(crate) fn new(family: VlFamily, cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let kind = if family == VlFamily::Qwen2_5Vl { BlockKind::Qwen2_5 } else { BlockKind::Qwen2 };
        let rms = kind == BlockKind::Qwen2_5;
        let blocks = (0..cfg.depth)
            .map(|i| VisionBlock::new(cfg, kind, vb.pp(format!("blocks.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let windows = (kind == BlockKind::Qwen2_5).then(|| {
            let side = cfg.window_size.unwrap_or(0) / cfg.spatial_merge_size / cfg.patch_size;
            (side, (0..cfg.depth).map(|i| cfg.fullatt_block_indexes.contains(&i)).collect())
        });
        Ok(Self {
            patch_embed: PatchEmbed::new(cfg, false, vb.pp("patch_embed"))?,
            blocks,
            merger: PatchMerger::new(cfg, QWEN2_MERGER, rms, false, vb.pp("merger"))?,
            inv_freq: rotary_inv_freq(cfg),
            merge: cfg.spatial_merge_size,
            windows,
        })
    }

    /// Image tokens `[t*h*w / merge², out_hidden]` in raster order of the merged grid.
    pub(crate) fn forward(&self, pixels: &Tensor, grid: [usize; 3]) -> Result<Tensor> {
        let device = pixels.device();
        let mut xs = self.patch_embed.forward(pixels)?;
        let (mut cos, mut sin) = rotary(&self.inv_freq, grid, self.merge, device)?;
        let frames = frame_spans(grid);
        let Some((side, full)) = &self.windows else {
            for block in &self.blocks {
                xs = block.forward(&xs, &frames, &cos, &sin)?;
            }
            return self.merger.forward(&xs);
        };
        let (order, spans) = window_order(grid, self.merge, *side);
        let unit = self.merge * self.merge;
        let order_t = Tensor::new(order.iter().map(|&i| i as u32).collect::<Vec<_>>().as_slice(), device)?;
        let by_window = |t: &Tensor| -> Result<Tensor> {
            let (rows, cols) = t.dims2()?;
            t.reshape((rows / unit, unit, cols))?.index_select(&order_t, 0)?.reshape((rows, cols))
        };
        xs = by_window(&xs)?;
        cos = by_window(&cos)?;
        sin = by_window(&sin)?;
        for (block, &whole) in self.blocks.iter().zip(full) {
            xs = block.forward(&xs, if whole { &frames } else { &spans }, &cos, &sin)?;
        }
        let merged = self.merger.forward(&xs)?;
        // Back to raster order: the token at window position i is merged unit order[i].
        let mut inverse = vec![0u32; order.len()];
        for (i, &unit_index) in order.iter().enumerate() {
            inverse[unit_index] = i as u32;
        }
        merged.index_select(&Tensor::new(inverse.as_slice(), device)?, 0)
    }
}

/// transformers' `get_vision_window_index` for one image: the merged units (merge² patches each) window
/// by window (windows row-major, units row-major within a window; windows at the right and bottom edges
/// are cut short), and the span boundaries in patch rows of each window.
pub(crate) fn window_order([t, h, w]: [usize; 3], merge: usize, side: usize) -> (Vec<usize>, Vec<usize>) {
    let (lh, lw) = (h / merge, w / merge);
    let mut order = Vec::with_capacity(t * lh * lw);
    let mut spans = vec![0usize];
    for frame in 0..t {
        for wr in (0..lh).step_by(side) {
            for wc in (0..lw).step_by(side) {
                let before = order.len();
                for r in wr..(wr + side).min(lh) {
                    for c in wc..(wc + side).min(lw) {
                        order.push(frame * lh * lw + r * lw + c);
                    }
                }
                let last = *spans.last().expect("spans start with 0");
                spans.push(last + (order.len() - before) * merge * merge);
            }
        }
    }
    (order, spans)
}

#[cfg(test)]
mod tests {
    use super::window_order;

    #[test]
    fn windows_cover_the_grid_once_in_window_order() {
        // 6×8 patches, merge 2 → 3×4 units; windows of 2×2 units → 2 rows × 2 columns of windows,
        // the bottom ones one unit high.
        let (order, spans) = window_order([1, 6, 8], 2, 2);
        assert_eq!(order, vec![0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 10, 11]);
        assert_eq!(spans, vec![0, 16, 32, 40, 48]);
        // Windows larger than the grid: one window in raster order.
        let (order, spans) = window_order([1, 6, 8], 2, 8);
        assert_eq!(order, (0..12).collect::<Vec<_>>());
        assert_eq!(spans, vec![0, 48]);
    }
}
