//! Masked grouped-query attention that visits only the keys each query may see, in position order.
//!
//! Every query row is computed alone from its own query vector and the keys and values it attends to,
//! with a fixed order of operations: its result does not depend on which other rows share the batch,
//! how much left padding they carry, or whether its prefix came from a cache. That is what makes
//! batched generation equal unbatched generation and prefix reuse equal full recomputation bit for
//! bit, even behind 8-bit activations, where a last-bit difference can flip a rounding. Skipping
//! masked keys (rather than adding -inf and multiplying by zero) is also where packed scoring saves
//! most of its attention work: each packed continuation sees the shared prefix and itself only.

use crate::KernelError;
use crate::cpu::CpuPath;
use rayon::prelude::*;
use std::ops::Range;

/// Which keys each query row attends to: per (batch row, query position), sorted disjoint spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyMask {
    batch: usize,
    queries: usize,
    keys: usize,
    /// Per (batch row, query): `offsets[i]..offsets[i + 1]` indexes `spans`.
    offsets: Vec<usize>,
    spans: Vec<Range<usize>>,
}

impl KeyMask {
    /// Causal attention for `queries` new positions after `past` cached ones, the same for every row.
    pub fn causal(queries: usize, past: usize) -> Self {
        let spans = (0..queries).map(|i| 0..past + i + 1).collect();
        Self { batch: 1, queries, keys: past + queries, offsets: (0..=queries).collect(), spans }
    }

    /// From an additive mask `[batch, queries, keys]` (batch 1 is shared by every row): a finite entry
    /// is attended to, -inf is not.
    pub fn from_additive(mask: &[f32], batch: usize, queries: usize, keys: usize) -> Result<Self, KernelError> {
        if mask.len() != batch * queries * keys {
            return Err(KernelError::Shape {
                what: "mask entries",
                got: mask.len(),
                rows: batch * queries,
                cols: keys,
            });
        }
        let mut offsets = Vec::with_capacity(batch * queries + 1);
        let mut spans = Vec::new();
        offsets.push(0);
        for row in mask.chunks(keys) {
            let mut start = None;
            for (j, m) in row.iter().enumerate() {
                match (m.is_finite(), start) {
                    (true, None) => start = Some(j),
                    (false, Some(s)) => {
                        spans.push(s..j);
                        start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = start {
                spans.push(s..keys);
            }
            offsets.push(spans.len());
        }
        Ok(Self { batch, queries, keys, offsets, spans })
    }

    pub fn queries(&self) -> usize {
        self.queries
    }

    pub fn keys(&self) -> usize {
        self.keys
    }

    fn spans(&self, row: usize, query: usize) -> &[Range<usize>] {
        let i = if self.batch == 1 { query } else { row * self.queries + query };
        &self.spans[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// A `[batch, heads, positions, head_dim]` tensor in memory, `head_dim` contiguous, positions possibly
/// fewer than its buffer holds (a KV cache with spare room).
#[derive(Clone, Copy, Debug)]
pub struct HeadsView<'a> {
    pub data: &'a [f32],
    pub batch_stride: usize,
    pub head_stride: usize,
    pub position_stride: usize,
}

impl HeadsView<'_> {
    fn row(&self, b: usize, h: usize, p: usize, head_dim: usize) -> &[f32] {
        let at = b * self.batch_stride + h * self.head_stride + p * self.position_stride;
        &self.data[at..at + head_dim]
    }
}

/// Sizes of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub queries: usize,
    pub head_dim: usize,
}

/// `softmax(scale · q·kᵀ + mask) · v` per head; query head `h` reads key/value head
/// `h / (heads / kv_heads)`. Returns `[batch, queries, heads, head_dim]` (the layout the output
/// projection reads). A query that may see no key gets zeros.
pub fn masked_attention(
    shape: AttentionShape,
    q: HeadsView<'_>,
    k: HeadsView<'_>,
    v: HeadsView<'_>,
    mask: &KeyMask,
    scale: f32,
) -> Result<Vec<f32>, KernelError> {
    attention_on(CpuPath::current(), shape, q, k, v, mask, scale)
}

/// [`masked_attention`] on a given CPU path (every path gives the same bits; the tests check that).
fn attention_on(
    path: CpuPath,
    shape: AttentionShape,
    q: HeadsView<'_>,
    k: HeadsView<'_>,
    v: HeadsView<'_>,
    mask: &KeyMask,
    scale: f32,
) -> Result<Vec<f32>, KernelError> {
    let AttentionShape { batch, heads, kv_heads, queries, head_dim } = shape;
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(KernelError::Heads { heads, kv_heads });
    }
    if mask.queries != queries || (mask.batch != 1 && mask.batch != batch) {
        return Err(KernelError::Shape {
            what: "mask rows",
            got: mask.batch * mask.queries,
            rows: batch,
            cols: queries,
        });
    }
    let last = |view: &HeadsView<'_>, hs: usize, ps: usize| {
        (batch - 1) * view.batch_stride + (hs - 1) * view.head_stride + (ps - 1) * view.position_stride + head_dim
    };
    if batch * queries * heads * head_dim > 0
        && (last(&q, heads, queries) > q.data.len()
            || last(&k, kv_heads, mask.keys.max(1)) > k.data.len()
            || last(&v, kv_heads, mask.keys.max(1)) > v.data.len())
    {
        return Err(KernelError::Shape {
            what: "query, key or value entries",
            got: q.data.len(),
            rows: batch * heads * queries,
            cols: head_dim,
        });
    }
    let group = heads / kv_heads;
    let mut out = vec![0f32; batch * queries * heads * head_dim];
    if out.is_empty() {
        return Ok(out);
    }
    let start = std::time::Instant::now();
    // Keys and values each query visits (for the benchmark's memory-traffic account).
    let visited: usize = (0..batch)
        .flat_map(|b| (0..queries).map(move |i| (b, i)))
        .map(|(b, i)| mask.spans(b, i).iter().map(|s| s.len()).sum::<usize>())
        .sum();
    let kv_bytes = (visited * kv_heads * head_dim * 2 * size_of::<f32>()) as u64;
    #[cfg(target_arch = "x86_64")]
    if head_dim % 16 == 0 && path.avx512() {
        // Blocks of consecutive queries of one sequence, with their group's heads side by side in the
        // 16 lanes of a register; each lane still computes its own query alone.
        let rows_per_block = (16 / group).max(1);
        let row_len = heads * head_dim;
        out.par_chunks_mut(queries * row_len).enumerate().for_each(|(b, out_b)| {
            out_b.par_chunks_mut(rows_per_block * row_len).enumerate().for_each(|(block, out_block)| {
                let task = lanes::BlockTask {
                    q,
                    k,
                    v,
                    mask,
                    b,
                    first: block * rows_per_block,
                    rows: out_block.len() / row_len,
                    kv_heads,
                    group,
                    head_dim,
                    scale,
                };
                // SAFETY: the CPU has AVX-512 F (the path runs here); the views were bounds-checked above.
                unsafe { lanes::attend_block(&task, out_block) };
            });
        });
        crate::stats::attention_call(start, kv_bytes);
        return Ok(out);
    }
    let isa = RowLoop::for_path(path);
    out.par_chunks_mut(heads * head_dim).enumerate().with_min_len(4).for_each(|(row, out_row)| {
        let (b, i) = (row / queries, row % queries);
        let spans = mask.spans(b, i);
        let seen: usize = spans.iter().map(|s| s.len()).sum();
        if seen == 0 {
            return;
        }
        let mut scores = vec![0f32; seen * group];
        let mut query = vec![0f32; head_dim * group];
        for kv in 0..kv_heads {
            for (g, qg) in query.chunks_exact_mut(head_dim).enumerate() {
                for (x, &y) in qg.iter_mut().zip(q.row(b, kv * group + g, i, head_dim)) {
                    *x = y * scale;
                }
            }
            let out_group = &mut out_row[kv * group * head_dim..(kv + 1) * group * head_dim];
            let task = GroupTask { query: &query, keys: k, values: v, b, kv, spans, head_dim };
            isa.run(&task, &mut scores, out_group);
        }
    });
    crate::stats::attention_call(start, kv_bytes);
    Ok(out)
}

/// The AVX-512 path: a block's queries (× the heads of a group) in the lanes of one register.
///
/// Per lane, the arithmetic is the row loop's (`attend`), operation for operation, so both give the
/// same bits: a score is `dot`'s sixteen partial sums and pairwise reduction, masked keys score -inf
/// (so they add exactly 0 to the max and the sum, and nothing to the values), the softmax uses
/// `exp_nonpositive` and sums keys in order, and the values are accumulated over the lane's keys in
/// order, each multiply and add rounded on its own. Which other queries share the register changes
/// nothing.
#[cfg(target_arch = "x86_64")]
mod lanes {
    use super::{HeadsView, KeyMask};
    use std::arch::x86_64::*;

    pub(super) struct BlockTask<'a> {
        pub q: HeadsView<'a>,
        pub k: HeadsView<'a>,
        pub v: HeadsView<'a>,
        pub mask: &'a KeyMask,
        pub b: usize,
        pub first: usize,
        pub rows: usize,
        pub kv_heads: usize,
        pub group: usize,
        pub head_dim: usize,
        pub scale: f32,
    }

    /// `out`: the block's rows, `[rows][heads · head_dim]`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn attend_block(t: &BlockTask<'_>, out: &mut [f32]) {
        let d = t.head_dim;
        let row_len = t.kv_heads * t.group * d;
        // The keys any query of the block sees, and for each, which of the block's queries see it.
        let spans: Vec<_> = (0..t.rows).map(|r| t.mask.spans(t.b, t.first + r)).collect();
        let Some(lo) = spans.iter().filter_map(|s| s.first()).map(|s| s.start).min() else { return };
        let hi = spans.iter().filter_map(|s| s.last()).map(|s| s.end).max().unwrap_or(lo);
        let mut seen_by = vec![0u16; hi - lo];
        for (r, row_spans) in spans.iter().enumerate() {
            for j in row_spans.iter().flat_map(Clone::clone) {
                seen_by[j - lo] |= 1 << r;
            }
        }
        let keys: Vec<usize> = (lo..hi).filter(|j| seen_by[j - lo] != 0).collect();
        let n = keys.len();
        let mut qt = vec![0f32; d * 16];
        let mut scores = vec![0f32; n * 16];
        // SAFETY (whole body): rows come from views checked by `masked_attention`; `qt` holds `d`
        // registers and `scores` `n`; output indices stay inside the block's `rows × row_len`.
        unsafe {
            for kv in 0..t.kv_heads {
                for first_head in (0..t.group).step_by(16) {
                    let heads = (t.group - first_head).min(16);
                    let lanes = t.rows * heads;
                    debug_assert!(lanes <= 16);
                    qt.fill(0.0);
                    for lane in 0..lanes {
                        let (r, g) = (lane / heads, lane % heads);
                        for (x, &value) in
                            t.q.row(t.b, kv * t.group + first_head + g, t.first + r, d).iter().enumerate()
                        {
                            qt[x * 16 + lane] = value * t.scale;
                        }
                    }
                    let lane_mask = |rows_bits: u16| -> u16 {
                        let mut m = 0u16;
                        for r in 0..t.rows {
                            if rows_bits & (1 << r) != 0 {
                                m |= (((1u32 << heads) - 1) << (r * heads)) as u16;
                            }
                        }
                        m
                    };
                    // Scores: lanes × keys. Per lane this is `dot` exactly: sixteen partial sums by
                    // position modulo 16 (multiply, then add), then the same pairwise reduction.
                    let neg_inf = _mm512_set1_ps(f32::NEG_INFINITY);
                    for (key, &position) in keys.iter().enumerate() {
                        let row = t.k.row(t.b, kv, position, d).as_ptr();
                        let mut acc = [_mm512_setzero_ps(); 16];
                        for x0 in (0..d).step_by(16) {
                            for (l, a) in acc.iter_mut().enumerate() {
                                let qx = _mm512_loadu_ps(qt.as_ptr().add((x0 + l) * 16));
                                *a = _mm512_add_ps(*a, _mm512_mul_ps(qx, _mm512_set1_ps(*row.add(x0 + l))));
                            }
                        }
                        let mut width = 8;
                        while width > 0 {
                            for l in 0..width {
                                acc[l] = _mm512_add_ps(acc[l], acc[l + width]);
                            }
                            width /= 2;
                        }
                        let m = lane_mask(seen_by[position - lo]);
                        _mm512_storeu_ps(scores.as_mut_ptr().add(key * 16), _mm512_mask_blend_ps(m, neg_inf, acc[0]));
                    }
                    let mut max = neg_inf;
                    for key in 0..n {
                        max = _mm512_max_ps(max, _mm512_loadu_ps(scores.as_ptr().add(key * 16)));
                    }
                    // A lane that sees nothing keeps -inf scores: subtract 0 so they become exp(-inf) = 0.
                    max = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(max, neg_inf, _CMP_EQ_OQ), max, _mm512_setzero_ps());
                    let mut total = _mm512_setzero_ps();
                    for key in 0..n {
                        let at = scores.as_mut_ptr().add(key * 16);
                        let p = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(at), max));
                        _mm512_storeu_ps(at, p);
                        total = _mm512_add_ps(total, p);
                    }
                    let mut totals = [0f32; 16];
                    _mm512_storeu_ps(totals.as_mut_ptr(), total);
                    for (lane, &lane_total) in totals.iter().enumerate().take(lanes) {
                        let (r, g) = (lane / heads, lane % heads);
                        let dst = out.as_mut_ptr().add(r * row_len + (kv * t.group + first_head + g) * d);
                        let inv = _mm512_set1_ps(if lane_total > 0.0 { 1.0 / lane_total } else { 0.0 });
                        let mut x0 = 0;
                        while x0 < d {
                            let width = (d - x0).min(64) / 16;
                            let mut acc = [_mm512_setzero_ps(); 4];
                            for (key, &position) in keys.iter().enumerate().take(n) {
                                let p = *scores.get_unchecked(key * 16 + lane);
                                if p != 0.0 {
                                    let pv = _mm512_set1_ps(p);
                                    let value = t.v.row(t.b, kv, position, d).as_ptr().add(x0);
                                    for (c, a) in acc.iter_mut().enumerate().take(width) {
                                        *a = _mm512_add_ps(*a, _mm512_mul_ps(pv, _mm512_loadu_ps(value.add(c * 16))));
                                    }
                                }
                            }
                            for (c, a) in acc.iter().enumerate().take(width) {
                                _mm512_storeu_ps(dst.add(x0 + c * 16), _mm512_mul_ps(*a, inv));
                            }
                            x0 += width * 16;
                        }
                    }
                }
            }
        }
    }

    /// [`super::exp_nonpositive`] for 16 lanes, operation for operation.
    #[target_feature(enable = "avx512f")]
    fn exp_nonpositive(x: __m512) -> __m512 {
        use super::exp_constants::*;
        let underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(LOWEST), _CMP_NGE_UQ);
        let t = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E));
        let n = _mm512_sub_ps(_mm512_add_ps(t, _mm512_set1_ps(ROUND)), _mm512_set1_ps(ROUND));
        let r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(LN2_HI)));
        let r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(LN2_LO)));
        let mut y = _mm512_set1_ps(POLY[0]);
        for c in &POLY[1..] {
            y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(*c));
        }
        let y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(y, _mm512_mul_ps(r, r)), r), _mm512_set1_ps(1.0));
        let scale = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
            _mm512_cvtps_epi32(n),
            _mm512_set1_epi32(127),
        )));
        _mm512_maskz_mov_ps(!underflow, _mm512_mul_ps(y, scale))
    }
}

/// Cephes' single-precision `exp` (about 1 ulp), with every multiply and add rounded on its own so
/// that the scalar and the vector code give the same bits on any CPU (a fused multiply-add would not).
mod exp_constants {
    /// Below this, `e^x` is under f32's smallest normal number: the result is 0.
    pub const LOWEST: f32 = -87.33;
    /// Adding and subtracting 1.5 · 2²³ rounds to the nearest integer, ties to even (|x| < 2²²).
    pub const ROUND: f32 = 12_582_912.0;
    /// ln 2 in two parts; `n · LN2_HI` is exact for the `n` that occur.
    pub const LN2_HI: f32 = 0.693_359_4;
    pub const LN2_LO: f32 = -2.121_944_4e-4;
    pub const POLY: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5];
}

/// `e^x` for the `x ≤ 0` softmax takes (a score minus its row's maximum); 0 below [`exp_constants::LOWEST`]
/// and for NaN. The vector twin is `lanes::exp_nonpositive`.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    use exp_constants::*;
    if x.is_nan() || x < LOWEST {
        return 0.0;
    }
    let t = x * std::f32::consts::LOG2_E;
    let n = (t + ROUND) - ROUND;
    let r = x - n * LN2_HI;
    let r = r - n * LN2_LO;
    let mut y = POLY[0];
    for c in &POLY[1..] {
        y = y * r + c;
    }
    let y = (y * (r * r) + r) + 1.0;
    // n is an integer in -126..=0 here, so 2ⁿ is a normal f32.
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// One query position's heads that share key/value head `kv`.
struct GroupTask<'a> {
    /// `[group][head_dim]`, already scaled.
    query: &'a [f32],
    keys: HeadsView<'a>,
    values: HeadsView<'a>,
    b: usize,
    kv: usize,
    spans: &'a [Range<usize>],
    head_dim: usize,
}

/// The instruction sets the row loop is compiled for (the same source, so the same order of operations).
#[derive(Clone, Copy)]
enum RowLoop {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Baseline,
}

impl RowLoop {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    fn for_path(path: CpuPath) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if path.avx512() {
                return RowLoop::Avx512;
            }
            if path.avx2() {
                return RowLoop::Avx2;
            }
        }
        RowLoop::Baseline
    }

    fn run(self, task: &GroupTask<'_>, scores: &mut [f32], out: &mut [f32]) {
        match self {
            // SAFETY: the path came from `CpuPath::current`, which this CPU runs.
            #[cfg(target_arch = "x86_64")]
            RowLoop::Avx512 => unsafe { attend_avx512(task, scores, out) },
            #[cfg(target_arch = "x86_64")]
            RowLoop::Avx2 => unsafe { attend_avx2(task, scores, out) },
            RowLoop::Baseline => attend::<false>(task, scores, out),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn attend_avx512(task: &GroupTask<'_>, scores: &mut [f32], out: &mut [f32]) {
    attend::<false>(task, scores, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn attend_avx2(task: &GroupTask<'_>, scores: &mut [f32], out: &mut [f32]) {
    attend::<true>(task, scores, out)
}

/// Scores of every visible key for each head of the group, softmax, then the weighted values; each
/// key's row is read once for all the group's heads. `AVX2`: the scores through [`dot_avx2`] (only
/// from `attend_avx2`, whose CPU has AVX2).
#[inline(always)]
fn attend<const AVX2: bool>(task: &GroupTask<'_>, scores: &mut [f32], out: &mut [f32]) {
    let d = task.head_dim;
    let group = task.query.len() / d;
    let seen = scores.len() / group;
    for (n, j) in task.spans.iter().flat_map(Clone::clone).enumerate() {
        let key = task.keys.row(task.b, task.kv, j, d);
        for (g, qg) in task.query.chunks_exact(d).enumerate() {
            scores[g * seen + n] = match AVX2 {
                // SAFETY: `AVX2` is set only by `attend_avx2`, which runs where the CPU has AVX2.
                #[cfg(target_arch = "x86_64")]
                true => unsafe { dot_avx2(qg, key) },
                _ => dot(qg, key),
            };
        }
    }
    let mut totals = [0f32; 16];
    let mut spill = Vec::new();
    let totals: &mut [f32] = if group <= 16 {
        &mut totals[..group]
    } else {
        spill.resize(group, 0f32);
        &mut spill
    };
    for (s, total) in scores.chunks_exact_mut(seen).zip(totals.iter_mut()) {
        let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for x in s.iter_mut() {
            *x = exp_nonpositive(*x - max);
            *total += *x;
        }
    }
    for (n, j) in task.spans.iter().flat_map(Clone::clone).enumerate() {
        let value = task.values.row(task.b, task.kv, j, d);
        for (g, acc) in out.chunks_exact_mut(d).enumerate() {
            let p = scores[g * seen + n];
            // As the AVX-512 path: a key whose weight underflowed to 0 adds nothing.
            if p == 0.0 {
                continue;
            }
            for (a, &x) in acc.iter_mut().zip(value) {
                *a += p * x;
            }
        }
    }
    for (acc, total) in out.chunks_exact_mut(d).zip(totals.iter()) {
        let inv = 1.0 / total;
        acc.iter_mut().for_each(|a| *a *= inv);
    }
}

/// A dot product whose summation order depends only on the length: 16 running lanes, then a fixed
/// pairwise reduction (vectorised by the compiler, the same order whatever the instruction set).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    let (a16, b16) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = a16.remainder().iter().zip(b16.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a16.zip(b16) {
        for l in 0..16 {
            lanes[l] += x[l] * y[l];
        }
    }
    let mut width = 8;
    while width > 0 {
        for l in 0..width {
            lanes[l] += lanes[l + width];
        }
        width /= 2;
    }
    lanes[0] + tail
}

/// [`dot`] in two 256-bit registers, operation for operation: lanes 0–7 and 8–15 each multiply, then
/// add; then the same pairwise reduction (8, 4, 2, 1) and the tail. The compiler vectorises `dot`'s
/// sixteen lanes only 128 bits at a time (two lanes a load), which left AVX2's attention at a third
/// of its scoring time on SmolLM2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let whole = a.len().min(b.len()) / 16 * 16;
    // SAFETY: loads stay below `whole`, within both slices; the caller's CPU has AVX2.
    unsafe {
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let (mut low, mut high) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i < whole {
            low = _mm256_add_ps(low, _mm256_mul_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i))));
            high = _mm256_add_ps(high, _mm256_mul_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8))));
            i += 16;
        }
        let eight = _mm256_add_ps(low, high);
        let four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps::<1>(eight));
        let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
        let one = _mm_add_ss(two, _mm_shuffle_ps::<0b01>(two, two));
        let tail: f32 = a[whole..].iter().zip(&b[whole..]).map(|(x, y)| x * y).sum();
        _mm_cvtss_f32(one) + tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    fn contiguous(data: &[f32], heads: usize, positions: usize, head_dim: usize) -> HeadsView<'_> {
        HeadsView {
            data,
            batch_stride: heads * positions * head_dim,
            head_stride: positions * head_dim,
            position_stride: head_dim,
        }
    }

    /// Dense masked softmax attention in f64.
    fn reference(
        shape: AttentionShape,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        keys: usize,
        mask: &[f32],
        scale: f64,
    ) -> Vec<f64> {
        let AttentionShape { batch, heads, kv_heads, queries, head_dim: d } = shape;
        let mut out = vec![0f64; batch * queries * heads * d];
        for b in 0..batch {
            for h in 0..heads {
                let kv = h / (heads / kv_heads);
                for i in 0..queries {
                    let row = &mask[(b * queries + i) * keys..(b * queries + i + 1) * keys];
                    let scores: Vec<f64> = (0..keys)
                        .map(|j| {
                            let s: f64 = (0..d)
                                .map(|x| {
                                    f64::from(q[((b * heads + h) * queries + i) * d + x])
                                        * f64::from(k[((b * kv_heads + kv) * keys + j) * d + x])
                                })
                                .sum();
                            s * scale + f64::from(row[j])
                        })
                        .collect();
                    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for x in 0..d {
                        out[((b * queries + i) * heads + h) * d + x] = (0..keys)
                            .map(|j| e[j] * f64::from(v[((b * kv_heads + kv) * keys + j) * d + x]))
                            .sum::<f64>()
                            / total;
                    }
                }
            }
        }
        out
    }

    /// Two sequences of 7 queries over 11 keys: row 0 causal after 4 cached keys; row 1 two
    /// left-padding keys, then causal, and its fourth query also skips key 5 (a mask with a hole, as
    /// packed continuations have).
    struct Case {
        shape: AttentionShape,
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        mask: Vec<f32>,
    }

    const KEYS: usize = 11;

    impl Case {
        fn new(heads: usize, kv_heads: usize, d: usize) -> Case {
            let queries = 7;
            let mut mask = vec![f32::NEG_INFINITY; 2 * queries * KEYS];
            for i in 0..queries {
                for j in 0..=4 + i {
                    mask[i * KEYS + j] = 0.0;
                    if j >= 2 && !(i == 3 && j == 5) {
                        mask[(queries + i) * KEYS + j] = 0.0;
                    }
                }
            }
            Case {
                shape: AttentionShape { batch: 2, heads, kv_heads, queries, head_dim: d },
                q: random(2 * heads * queries * d, 1),
                k: random(2 * kv_heads * KEYS * d, 2),
                v: random(2 * kv_heads * KEYS * d, 3),
                mask,
            }
        }

        fn run(&self, path: CpuPath, scale: f32) -> Vec<f32> {
            let AttentionShape { heads, kv_heads, queries, head_dim: d, .. } = self.shape;
            let km = KeyMask::from_additive(&self.mask, 2, queries, KEYS).unwrap();
            let (q, k, v) = (&self.q, &self.k, &self.v);
            let (q, k, v) =
                (contiguous(q, heads, queries, d), contiguous(k, kv_heads, KEYS, d), contiguous(v, kv_heads, KEYS, d));
            attention_on(path, self.shape, q, k, v, &km, scale).unwrap()
        }
    }

    #[test]
    fn matches_dense_masked_softmax_attention() {
        // head_dim 40 takes the per-query path, 64 the lane blocks; groups of 1, 3 and 8 heads.
        for (heads, kv_heads, d) in [(6, 2, 40), (6, 2, 64), (2, 2, 64), (16, 2, 32)] {
            let case = Case::new(heads, kv_heads, d);
            let want = reference(case.shape, &case.q, &case.k, &case.v, KEYS, &case.mask, 0.3);
            for (g, w) in case.run(CpuPath::current(), 0.3).iter().zip(&want) {
                assert!((f64::from(*g) - w).abs() < 1e-5, "{heads}/{kv_heads} heads, d {d}: {g} vs {w}");
            }
        }
    }

    #[test]
    fn a_row_gives_the_same_bits_alone_padded_or_after_a_cache_with_spare_room() {
        let (heads, d, keys) = (4, 64, 12);
        let shape = AttentionShape { batch: 1, heads, kv_heads: 2, queries: 1, head_dim: d };
        let q = random(heads * d, 4);
        let k = random(2 * keys * d, 5);
        let v = random(2 * keys * d, 6);
        let alone = masked_attention(
            shape,
            contiguous(&q, heads, 1, d),
            contiguous(&k, 2, keys, d),
            contiguous(&v, 2, keys, d),
            &KeyMask::causal(1, keys - 1),
            0.125,
        )
        .unwrap();
        // The same keys behind three padding positions, in buffers with room for 20 positions.
        let (pad, cap) = (3, 20);
        let mut kp = vec![9.0f32; 2 * cap * d];
        let mut vp = vec![-9.0f32; 2 * cap * d];
        for h in 0..2 {
            for j in 0..keys {
                kp[(h * cap + pad + j) * d..(h * cap + pad + j + 1) * d]
                    .copy_from_slice(&k[(h * keys + j) * d..(h * keys + j + 1) * d]);
                vp[(h * cap + pad + j) * d..(h * cap + pad + j + 1) * d]
                    .copy_from_slice(&v[(h * keys + j) * d..(h * keys + j + 1) * d]);
            }
        }
        let mut mask = vec![0f32; pad + keys];
        mask[..pad].fill(f32::NEG_INFINITY);
        let padded = masked_attention(
            shape,
            contiguous(&q, heads, 1, d),
            HeadsView { data: &kp, batch_stride: 2 * cap * d, head_stride: cap * d, position_stride: d },
            HeadsView { data: &vp, batch_stride: 2 * cap * d, head_stride: cap * d, position_stride: d },
            &KeyMask::from_additive(&mask, 1, 1, pad + keys).unwrap(),
            0.125,
        )
        .unwrap();
        assert_eq!(alone, padded);
    }

    #[test]
    fn queries_computed_together_equal_each_computed_alone() {
        // Within a block a query sits in other lanes, beside other queries; alone it sits in lane 0.
        let (heads, kv_heads, d, queries, past) = (9, 3, 64, 13, 5);
        let keys = past + queries;
        let q = random(heads * queries * d, 7);
        let k = random(kv_heads * keys * d, 8);
        let v = random(kv_heads * keys * d, 9);
        let kview = contiguous(&k, kv_heads, keys, d);
        let vview = contiguous(&v, kv_heads, keys, d);
        let together = masked_attention(
            AttentionShape { batch: 1, heads, kv_heads, queries, head_dim: d },
            contiguous(&q, heads, queries, d),
            kview,
            vview,
            &KeyMask::causal(queries, past),
            0.125,
        )
        .unwrap();
        for i in 0..queries {
            let qi = HeadsView { data: &q[i * d..], batch_stride: 0, head_stride: queries * d, position_stride: d };
            // Query i alone sees the first past + i + 1 keys (a cache view with spare room behind).
            let mask = KeyMask::causal(1, past + i);
            let alone = masked_attention(
                AttentionShape { batch: 1, heads, kv_heads, queries: 1, head_dim: d },
                qi,
                kview,
                vview,
                &mask,
                0.125,
            )
            .unwrap();
            assert_eq!(alone, together[i * heads * d..(i + 1) * heads * d], "query {i}");
        }
    }

    #[test]
    fn exp_is_within_two_ulps_of_the_exact_value_and_zero_below_the_normal_range() {
        let xs = (0..200_000).map(|i| -i as f32 * 4.4e-4).chain([-0.0, -1e-8, -87.3, -87.34, -1e30, f32::NEG_INFINITY]);
        for x in xs {
            let got = exp_nonpositive(x);
            let want = f64::from(x).exp();
            if x < exp_constants::LOWEST {
                assert_eq!(got, 0.0, "exp({x})");
            } else {
                let ulp = f64::from(f32::EPSILON) * want;
                assert!((f64::from(got) - want).abs() <= 2.0 * ulp, "exp({x}) = {got}, exactly {want}");
            }
        }
        assert_eq!(exp_nonpositive(f32::NAN), 0.0);
    }

    #[test]
    fn every_cpu_path_gives_the_same_bits() {
        // head_dim 64 takes the AVX-512 lane blocks where the path has AVX-512, 40 always the row
        // loop; groups of 1, 3, 8 and 20 heads; a scale large enough that some weights underflow to 0.
        let cases = [(6, 2, 64, 0.125), (2, 2, 64, 0.3), (16, 2, 64, 40.0), (20, 1, 32, 0.2), (6, 2, 40, 0.3)];
        for (heads, kv_heads, d, scale) in cases {
            let case = Case::new(heads, kv_heads, d);
            let bits = |path| case.run(path, scale).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let baseline = bits(CpuPath::Baseline);
            for path in CpuPath::available() {
                assert!(
                    bits(path) == baseline,
                    "{} differs from baseline ({heads}/{kv_heads} heads, d {d})",
                    path.name()
                );
            }
        }
    }

    #[test]
    fn a_query_that_sees_nothing_gets_zeros_and_misfits_are_errors() {
        let shape = AttentionShape { batch: 1, heads: 1, kv_heads: 1, queries: 1, head_dim: 4 };
        let km = KeyMask::from_additive(&[f32::NEG_INFINITY; 3], 1, 1, 3).unwrap();
        let data = [1.0f32; 12];
        let view = contiguous(&data, 1, 3, 4);
        assert_eq!(
            masked_attention(shape, contiguous(&data[..4], 1, 1, 4), view, view, &km, 1.0).unwrap(),
            vec![0.0; 4]
        );
        assert!(matches!(KeyMask::from_additive(&[0.0; 5], 1, 2, 3), Err(KernelError::Shape { .. })));
        let bad = AttentionShape { kv_heads: 2, heads: 3, ..shape };
        assert!(matches!(masked_attention(bad, view, view, view, &km, 1.0), Err(KernelError::Heads { .. })));
        let none = AttentionShape { queries: 0, ..shape };
        assert_eq!(masked_attention(none, view, view, view, &KeyMask::causal(0, 3), 1.0).unwrap(), Vec::<f32>::new());
        let short = contiguous(&data[..8], 1, 2, 4);
        assert!(matches!(
            masked_attention(shape, view, short, view, &KeyMask::causal(1, 2), 1.0),
            Err(KernelError::Shape { .. })
        ));
    }
}
