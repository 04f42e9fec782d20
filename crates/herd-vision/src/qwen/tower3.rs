//! Qwen3-VL's vision encoder: the shared blocks (`vision`) plus a learned position grid, bilinearly
//! interpolated to the image's patch grid, and DeepStack mergers whose outputs are added to the first
//! text layers.

use candle_core::{Device, Result, Tensor};
use candle_nn::{Embedding, VarBuilder, embedding};

use crate::config::VisionConfig;
use crate::qwen::vision::{
    BlockKind, PatchEmbed, PatchMerger, QWEN3_MERGER, VisionBlock, frame_spans, rotary, rotary_inv_freq,
};

pub(crate) struct Qwen3Tower {
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

impl Qwen3Tower {
    pub(crate) fn new(cfg: &VisionConfig, vb: VarBuilder<'_>) -> Result<Self> {
        let blocks = (0..cfg.depth)
            .map(|i| VisionBlock::new(cfg, BlockKind::Qwen3, vb.pp(format!("blocks.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let deepstack_mergers = (0..cfg.deepstack_visual_indexes.len())
            .map(|i| PatchMerger::new(cfg, QWEN3_MERGER, false, true, vb.pp(format!("deepstack_merger_list.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let mut deepstack_lookup = vec![None; cfg.depth];
        for (i, &layer) in cfg.deepstack_visual_indexes.iter().enumerate() {
            deepstack_lookup[layer] = Some(i);
        }
        Ok(Self {
            patch_embed: PatchEmbed::new(cfg, true, vb.pp("patch_embed"))?,
            pos_embed: embedding(cfg.num_position_embeddings, cfg.hidden_size, vb.pp("pos_embed"))?,
            blocks,
            merger: PatchMerger::new(cfg, QWEN3_MERGER, false, false, vb.pp("merger"))?,
            deepstack_mergers,
            deepstack_lookup,
            inv_freq: rotary_inv_freq(cfg),
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

    /// Image tokens [t*h*w / merge², out_hidden] and the DeepStack features, one per index.
    pub(crate) fn forward(&self, pixels: &Tensor, grid: [usize; 3]) -> Result<(Tensor, Vec<Tensor>)> {
        let device = pixels.device();
        let xs = self.patch_embed.forward(pixels)?;
        let mut xs = (xs + self.pos_embeds(grid, device)?)?;
        let (cos, sin) = rotary(&self.inv_freq, grid, self.merge, device)?;
        let cu = frame_spans(grid);
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
