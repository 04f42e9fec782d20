//! Matrix products with 8-bit weights and 8-bit activations, accumulated in 32-bit integers.
//!
//! The arithmetic is llama.cpp's for its Q4_1/Q8_1 pair: weights are asymmetric per block of 32 inputs
//! (`w ≈ scale · q + min`, `q` in 0..=255), activations symmetric per block (`x ≈ s · q`, `q` in
//! -127..=127), so a block's contribution is `scale · s · Σ qw·qx + min · s · Σ qx`. The integer sums are
//! what VNNI's `vpdpbusd` computes (unsigned × signed bytes, four per 32-bit lane): 64 multiply-adds
//! per AVX-512 instruction against 16 for an f32 FMA (32 and 8 at 256 bits, with AVX-VNNI).

use crate::KernelError;
use crate::mapped::{Buffer, MappedFile};
use rayon::prelude::*;
use std::sync::Arc;

/// Inputs per quantisation block: GGUF's 32, so activations are quantised exactly as llama.cpp's Q8_1
/// quantises them. (Blocks of 64 run the kernel 12 % faster, but moved answer log-probabilities up to
/// 0.34 nats from llama.cpp's against 0.25 with 32, on the golden prompts.)
pub const BLOCK: usize = 32;
/// Output columns per panel: one 512-bit register of 32-bit lanes.
const LANES: usize = 16;
/// Register tile: activation rows × panels of 16 outputs (6 × 2: 12 integer and 12 float accumulators,
/// enough independent `vpdpbusd` chains to cover its latency).
const TILE_ROWS: usize = 6;
const TILE_PANELS: usize = 2;

/// The instruction sets the int8 tiles are written for. Both compute the same integer sums and the
/// same float operations in the same order, so their results are identical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    /// AVX-512 F/BW and VNNI: 6 rows × 32 outputs per tile (server CPUs since Ice Lake, AMD Zen 4).
    Avx512,
    /// AVX2, FMA and AVX-VNNI (256-bit `vpdpbusd`, 16 registers): 2 rows × 16 outputs (Intel laptop
    /// and desktop CPUs since Alder Lake).
    AvxVnni,
}

impl Isa {
    /// Every set this CPU has, best first.
    fn available() -> Vec<Isa> {
        let mut sets = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
            {
                sets.push(Isa::Avx512);
            }
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("avxvnni")
            {
                sets.push(Isa::AvxVnni);
            }
        }
        sets
    }

    fn best() -> Option<Isa> {
        static BEST: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| Isa::available().first().copied())
    }

    /// Activation rows and 16-output panels per tile.
    fn tile(self) -> (usize, usize) {
        match self {
            Isa::Avx512 => (TILE_ROWS, TILE_PANELS),
            Isa::AvxVnni => (2, 1),
        }
    }
}

/// Whether this CPU runs the int8 kernels (AVX-512 VNNI, or AVX-VNNI with AVX2 and FMA; checked at
/// run time).
pub fn int8_supported() -> bool {
    Isa::best().is_some()
}

/// The instruction set the int8 kernels run with here (`avx512-vnni` or `avx-vnni`), if any: what a
/// file of prepared weights records, with [`INT8_LAYOUT_VERSION`].
pub fn int8_isa() -> Option<&'static str> {
    Isa::best().map(|isa| match isa {
        Isa::Avx512 => "avx512-vnni",
        Isa::AvxVnni => "avx-vnni",
    })
}

/// The version of [`Int8Matrix`]'s quantisation and byte layout ([`Int8Matrix::parts`]). Raise it with
/// any change to either, so that prepared weights written before are not read as if they were current.
pub const INT8_LAYOUT_VERSION: u32 = 1;

/// An [`Int8Matrix`]'s bytes as they lie in memory (little-endian `f32` scales and minimums), for
/// writing to a file that [`Int8Matrix::from_mapped`] reads back.
#[derive(Clone, Copy, Debug)]
pub struct Int8Parts<'a> {
    /// `[panel][cols / 4][16 lanes][4]` bytes.
    pub quants: &'a [u8],
    /// `[panel][block][16 lanes]` `f32`.
    pub scales: &'a [u8],
    pub mins: &'a [u8],
}

/// A weight matrix `[rows (outputs), cols (inputs)]` quantised to 8 bits per block of 32 inputs and
/// laid out for the kernel: panels of 16 output rows, each panel's bytes ordered by groups of four
/// inputs, so one 64-byte load feeds 16 output lanes with four inputs each.
/// The values are owned, or borrowed from a [`MappedFile`] of prepared weights.
#[derive(Clone, Debug)]
pub struct Int8Matrix {
    rows: usize,
    cols: usize,
    /// `[panel][cols / 4][16 lanes][4]`, rows past `rows` zero.
    quants: Buffer<u8>,
    /// `[panel][block][16 lanes]`.
    scales: Buffer<f32>,
    mins: Buffer<f32>,
}

impl Int8Matrix {
    /// Quantises row-major f32 weights `[rows, cols]`; `cols` must be a multiple of [`BLOCK`].
    pub fn quantize(weights: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        if cols == 0 || !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Blocks { cols });
        }
        if weights.len() != rows * cols {
            return Err(KernelError::Shape { what: "weights", got: weights.len(), rows, cols });
        }
        let panels = rows.div_ceil(LANES);
        let blocks = cols / BLOCK;
        let mut quants = vec![0u8; panels * LANES * cols];
        let mut scales = vec![0f32; panels * blocks * LANES];
        let mut mins = vec![0f32; panels * blocks * LANES];
        // Panels are independent: each writes its own slices, so the result does not depend on the split.
        quants
            .par_chunks_mut(LANES * cols)
            .zip(scales.par_chunks_mut(blocks * LANES).zip(mins.par_chunks_mut(blocks * LANES)))
            .enumerate()
            .for_each(|(panel, (quants, (scales, mins)))| {
                for lane in 0..LANES.min(rows - panel * LANES) {
                    let r = panel * LANES + lane;
                    for b in 0..blocks {
                        let values = &weights[r * cols + b * BLOCK..r * cols + (b + 1) * BLOCK];
                        let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
                        let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let scale = (hi - lo) / 255.0;
                        let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                        scales[b * LANES + lane] = scale;
                        mins[b * LANES + lane] = lo;
                        for (i, &v) in values.iter().enumerate() {
                            let k = b * BLOCK + i;
                            let q = ((v - lo) * inv).round().clamp(0.0, 255.0) as u8;
                            quants[((k / 4) * LANES + lane) * 4 + k % 4] = q;
                        }
                    }
                }
            });
        Ok(Self { rows, cols, quants: Buffer::Owned(quants), scales: Buffer::Owned(scales), mins: Buffer::Owned(mins) })
    }

    /// Bytes per part for a `[rows, cols]` matrix: quants, scales, minimums.
    fn part_sizes(rows: usize, cols: usize) -> [usize; 3] {
        let panels = rows.div_ceil(LANES);
        let floats = panels * (cols / BLOCK) * LANES;
        [panels * LANES * cols, 4 * floats, 4 * floats]
    }

    /// This matrix's bytes, to be written where [`Int8Matrix::from_mapped`] finds them.
    pub fn parts(&self) -> Int8Parts<'_> {
        Int8Parts { quants: self.quants.as_bytes(), scales: self.scales.as_bytes(), mins: self.mins.as_bytes() }
    }

    /// A `[rows, cols]` matrix whose [`Int8Matrix::parts`] lie in `file` at byte offsets `offsets`
    /// (quants, scales, minimums; the last two 4-byte aligned), borrowed rather than copied.
    pub fn from_mapped(
        file: &Arc<MappedFile>,
        rows: usize,
        cols: usize,
        offsets: [u64; 3],
    ) -> Result<Self, KernelError> {
        if cols == 0 || !cols.is_multiple_of(BLOCK) {
            return Err(KernelError::Blocks { cols });
        }
        let [q, s, m] = Self::part_sizes(rows, cols);
        let outside = || KernelError::Mapped { rows, cols, file_len: file.len() };
        let at = |i: usize| usize::try_from(offsets[i]).map_err(|_| outside());
        Ok(Self {
            rows,
            cols,
            quants: Buffer::mapped(file, at(0)?, q).ok_or_else(outside)?,
            scales: Buffer::mapped(file, at(1)?, s / 4).ok_or_else(outside)?,
            mins: Buffer::mapped(file, at(2)?, m / 4).ok_or_else(outside)?,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held (quants, scales and minimums).
    pub fn size_bytes(&self) -> usize {
        self.quants.len() + 4 * (self.scales.len() + self.mins.len())
    }

    /// Row `r` as the kernel sees it (`scale · q + min`).
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let (panel, lane, blocks) = (r / LANES, r % LANES, self.cols / BLOCK);
        (0..self.cols)
            .map(|k| {
                let q = self.quants[((panel * (self.cols / 4) + k / 4) * LANES + lane) * 4 + k % 4];
                let at = (panel * blocks + k / BLOCK) * LANES + lane;
                self.scales[at] * f32::from(q) + self.mins[at]
            })
            .collect()
    }

    fn panels(&self) -> usize {
        self.rows.div_ceil(LANES)
    }

    /// `x · Wᵀ` for row-major `x` `[m, cols]`: returns `[m, rows]` row-major. Needs [`int8_supported`].
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        self.matmul_with(Isa::best().ok_or(KernelError::Unsupported)?, x, m)
    }

    fn matmul_with(&self, isa: Isa, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        if x.len() != m * self.cols {
            return Err(KernelError::Shape { what: "activations", got: x.len(), rows: m, cols: self.cols });
        }
        let start = std::time::Instant::now();
        let (tile_rows, tile_panels) = isa.tile();
        let acts = QuantizedActivations::new(x, m, self.cols, isa);
        // Not zeroed first: the tiles write every element (zeroing was 5 % of a scoring run).
        let mut out = Vec::<f32>::with_capacity(m * self.rows);
        let out_ptr = OutPtr(out.as_mut_ptr());
        let groups = self.panels().div_ceil(tile_panels);
        (0..groups).into_par_iter().for_each(|g| {
            let out_ptr = &out_ptr;
            let panel0 = g * tile_panels;
            let panels = tile_panels.min(self.panels() - panel0);
            let mut row0 = 0;
            while row0 < m {
                let rows = tile_rows.min(m - row0);
                // SAFETY: the CPU has the features (`isa` came from detection); each task writes only
                // the output columns of its own panels, so no two tasks write the same element.
                unsafe { self.tile_dispatch(isa, &acts, panel0, panels, row0, rows, out_ptr.0) };
                row0 += rows;
            }
        });
        // SAFETY: the panels cover every output column and the row loop every row, so all
        // `m × rows` elements were written above.
        unsafe { out.set_len(m * self.rows) };
        crate::stats::int8_call(start, (m * self.rows * self.cols) as u64, self.size_bytes() as u64);
        Ok(out)
    }

    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile_dispatch(
        &self,
        isa: Isa,
        acts: &QuantizedActivations,
        panel0: usize,
        panels: usize,
        row0: usize,
        rows: usize,
        out: *mut f32,
    ) {
        // SAFETY: forwarded from `matmul`.
        unsafe {
            if isa == Isa::AvxVnni {
                match rows {
                    2 => x86::tile_avx_vnni::<2>(self, acts, panel0, row0, out),
                    1 => x86::tile_avx_vnni::<1>(self, acts, panel0, row0, out),
                    _ => unreachable!("AVX-VNNI tiles are at most 2 rows"),
                }
                return;
            }
            match (rows, panels) {
                (6, 2) => x86::tile_6x2(self, acts, panel0, row0, out),
                (5, 2) => x86::tile::<5, 2>(self, acts, panel0, row0, out),
                (4, 2) => x86::tile::<4, 2>(self, acts, panel0, row0, out),
                (3, 2) => x86::tile::<3, 2>(self, acts, panel0, row0, out),
                (2, 2) => x86::tile::<2, 2>(self, acts, panel0, row0, out),
                (1, 2) => x86::tile::<1, 2>(self, acts, panel0, row0, out),
                (6, 1) => x86::tile::<6, 1>(self, acts, panel0, row0, out),
                (5, 1) => x86::tile::<5, 1>(self, acts, panel0, row0, out),
                (4, 1) => x86::tile::<4, 1>(self, acts, panel0, row0, out),
                (3, 1) => x86::tile::<3, 1>(self, acts, panel0, row0, out),
                (2, 1) => x86::tile::<2, 1>(self, acts, panel0, row0, out),
                (1, 1) => x86::tile::<1, 1>(self, acts, panel0, row0, out),
                _ => unreachable!("tiles are at most {TILE_ROWS} × {TILE_PANELS}"),
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile_dispatch(
        &self,
        _: Isa,
        _: &QuantizedActivations,
        _: usize,
        _: usize,
        _: usize,
        _: usize,
        _: *mut f32,
    ) {
        unreachable!("int8_supported() is false off x86_64")
    }
}

/// This machine's int8 multiply-add rate (per second) with every thread of rayon's pool issuing
/// `vpdpbusd` (64 multiply-adds each with AVX-512, 32 with AVX-VNNI) on 12 independent accumulators, with
/// no memory traffic: the ceiling the int8 products run under. `None` where the kernels do not run.
pub fn int8_peak_macs_per_second() -> Option<f64> {
    let isa = Isa::best()?;
    const ITERATIONS: u64 = 4_000_000;
    let threads = rayon::current_num_threads();
    let start = std::time::Instant::now();
    let macs_per_thread: u64 = (0..threads)
        .into_par_iter()
        // SAFETY: `isa` came from detection.
        .map(|_| unsafe { x86_peak(isa, ITERATIONS) })
        .min()
        .unwrap_or(0);
    Some((macs_per_thread * threads as u64) as f64 / start.elapsed().as_secs_f64())
}

#[cfg(target_arch = "x86_64")]
unsafe fn x86_peak(isa: Isa, iterations: u64) -> u64 {
    // SAFETY: forwarded.
    unsafe {
        match isa {
            Isa::Avx512 => x86::peak_avx512(iterations),
            Isa::AvxVnni => x86::peak_avx_vnni(iterations),
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn x86_peak(_: Isa, _: u64) -> u64 {
    unreachable!("int8_supported() is false off x86_64")
}

struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint columns of the output (see `Int8Matrix::matmul`).
unsafe impl Sync for OutPtr {}

/// Activations `[m, cols]` quantised per block of 32: `x ≈ scale · q`.
struct QuantizedActivations {
    quants: Vec<i8>,
    /// `[m][block]`.
    scales: Vec<f32>,
    /// `scale · Σ q` per block: what the weights' minimums multiply.
    scaled_sums: Vec<f32>,
}

impl QuantizedActivations {
    /// `isa` must be available: AVX-512 quantises sixteen lanes at a time, the rest one value at a time.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    fn new(x: &[f32], m: usize, cols: usize, isa: Isa) -> Self {
        let blocks = cols / BLOCK;
        let mut quants = vec![0i8; m * cols];
        let mut scales = vec![0f32; m * blocks];
        let mut scaled_sums = vec![0f32; m * blocks];
        // One row: its int8 values and block scales (written), its scaled sums (written) and its input.
        type RowParts<'r> = ((&'r mut [i8], &'r mut [f32]), (&'r mut [f32], &'r [f32]));
        let quantize_rows = |((q, s), (ss, x)): RowParts<'_>| {
            #[cfg(target_arch = "x86_64")]
            if isa == Isa::Avx512 {
                // SAFETY: the CPU has AVX-512 F/BW; the slices hold `cols` values and `blocks` blocks.
                unsafe { x86::quantize_row(x, q, s, ss) };
                return;
            }
            quantize_row(x, q, s, ss);
        };
        // Small batches (decoding) stay on the calling thread: splitting costs more than it saves.
        let min_rows = (1 << 16) / cols.max(1);
        quants
            .par_chunks_mut(cols)
            .zip(scales.par_chunks_mut(blocks))
            .zip(scaled_sums.par_chunks_mut(blocks).zip(x.par_chunks(cols)))
            .with_min_len(min_rows.max(1))
            .for_each(quantize_rows);
        Self { quants, scales, scaled_sums }
    }
}

/// One activation row: per block, `scale = amax / 127` and `q = round(x / scale)`.
fn quantize_row(x: &[f32], q: &mut [i8], scales: &mut [f32], scaled_sums: &mut [f32]) {
    for ((x, q), (scale, scaled_sum)) in
        x.chunks(BLOCK).zip(q.chunks_mut(BLOCK)).zip(scales.iter_mut().zip(scaled_sums.iter_mut()))
    {
        let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
        let mut sum = 0i32;
        for (qi, &v) in q.iter_mut().zip(x) {
            // Ties to even, as the SIMD path's conversion rounds.
            *qi = (v * inv).round_ties_even() as i8;
            sum += i32::from(*qi);
        }
        *scale = amax / 127.0;
        *scaled_sum = *scale * sum as f32;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BLOCK, Int8Matrix, LANES, QuantizedActivations};
    use std::arch::x86_64::*;

    /// Multiply-adds of `iterations` rounds of 12 independent `vpdpbusd` (512-bit).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn peak_avx512(iterations: u64) -> u64 {
        let (w, x) = (_mm512_set1_epi8(std::hint::black_box(3)), _mm512_set1_epi8(std::hint::black_box(-2)));
        let mut acc = [_mm512_setzero_si512(); 12];
        for _ in 0..iterations {
            for a in acc.iter_mut() {
                *a = _mm512_dpbusd_epi32(*a, w, x);
            }
        }
        std::hint::black_box(acc);
        iterations * 12 * 64
    }

    /// Multiply-adds of `iterations` rounds of 12 independent `vpdpbusd` (256-bit, AVX-VNNI).
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn peak_avx_vnni(iterations: u64) -> u64 {
        let (w, x) = (_mm256_set1_epi8(std::hint::black_box(3)), _mm256_set1_epi8(std::hint::black_box(-2)));
        let mut acc = [_mm256_setzero_si256(); 12];
        for _ in 0..iterations {
            for a in acc.iter_mut() {
                *a = _mm256_dpbusd_avx_epi32(*a, w, x);
            }
        }
        std::hint::black_box(acc);
        iterations * 12 * 32
    }

    /// [`super::quantize_row`] sixteen lanes at a time.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_row(x: &[f32], q: &mut [i8], scales: &mut [f32], scaled_sums: &mut [f32]) {
        // SAFETY: `x` and `q` hold `scales.len()` blocks of `BLOCK` values.
        unsafe {
            let sign = _mm512_set1_ps(-0.0);
            const CHUNKS: usize = BLOCK / 16;
            for b in 0..scales.len() {
                let v: [__m512; CHUNKS] = std::array::from_fn(|c| _mm512_loadu_ps(x.as_ptr().add(b * BLOCK + c * 16)));
                let amax = _mm512_reduce_max_ps(
                    v.iter().fold(_mm512_setzero_ps(), |m, &v| _mm512_max_ps(m, _mm512_andnot_ps(sign, v))),
                );
                let inv = _mm512_set1_ps(if amax > 0.0 { 127.0 / amax } else { 0.0 });
                let mut sum = _mm512_setzero_si512();
                for (c, &v) in v.iter().enumerate() {
                    let q16 = _mm512_cvtps_epi32(_mm512_mul_ps(v, inv));
                    _mm_storeu_si128(q.as_mut_ptr().add(b * BLOCK + c * 16).cast(), _mm512_cvtsepi32_epi8(q16));
                    sum = _mm512_add_epi32(sum, q16);
                }
                let sum = _mm512_reduce_add_epi32(sum);
                scales[b] = amax / 127.0;
                scaled_sums[b] = scales[b] * sum as f32;
            }
        }
    }

    /// The full tile, written out so that its 16 accumulators stay in registers (the generic
    /// [`tile`] is for the edges, where LLVM keeps some in memory).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile_6x2(w: &Int8Matrix, a: &QuantizedActivations, panel0: usize, row0: usize, out: *mut f32) {
        let (cols, blocks) = (w.cols, w.cols / BLOCK);
        let quads = cols / 4;
        // SAFETY (whole body): as for `tile`, with ROWS = 6 and PANELS = 2.
        unsafe {
            let (w_scales, w_mins) = (w.scales.as_ptr(), w.mins.as_ptr());
            let wa = w.quants.as_ptr().add(panel0 * quads * LANES * 4);
            let wb = wa.add(quads * LANES * 4);
            let x = [0, 1, 2, 3, 4, 5].map(|r| a.quants.as_ptr().add((row0 + r) * cols));
            let zero = _mm512_setzero_ps();
            let (mut f0a, mut f0b, mut f1a, mut f1b, mut f2a, mut f2b, mut f3a, mut f3b) =
                (zero, zero, zero, zero, zero, zero, zero, zero);
            let (mut f4a, mut f4b, mut f5a, mut f5b) = (zero, zero, zero, zero);
            for b in 0..blocks {
                let z = _mm512_setzero_si512();
                let (mut s0a, mut s0b, mut s1a, mut s1b, mut s2a, mut s2b, mut s3a, mut s3b) = (z, z, z, z, z, z, z, z);
                let (mut s4a, mut s4b, mut s5a, mut s5b) = (z, z, z, z);
                for s in 0..BLOCK / 4 {
                    let quad = b * (BLOCK / 4) + s;
                    let qa = _mm512_loadu_si512(wa.add(quad * LANES * 4).cast());
                    let qb = _mm512_loadu_si512(wb.add(quad * LANES * 4).cast());
                    macro_rules! row {
                        ($x:expr, $sa:ident, $sb:ident) => {
                            let xv = _mm512_set1_epi32($x.add(quad * 4).cast::<i32>().read_unaligned());
                            $sa = _mm512_dpbusd_epi32($sa, qa, xv);
                            $sb = _mm512_dpbusd_epi32($sb, qb, xv);
                        };
                    }
                    row!(x[0], s0a, s0b);
                    row!(x[1], s1a, s1b);
                    row!(x[2], s2a, s2b);
                    row!(x[3], s3a, s3b);
                    row!(x[4], s4a, s4b);
                    row!(x[5], s5a, s5b);
                }
                let at_a = (panel0 * blocks + b) * LANES;
                let at_b = ((panel0 + 1) * blocks + b) * LANES;
                let (da, db) = (_mm512_loadu_ps(w_scales.add(at_a)), _mm512_loadu_ps(w_scales.add(at_b)));
                let (ma, mb) = (_mm512_loadu_ps(w_mins.add(at_a)), _mm512_loadu_ps(w_mins.add(at_b)));
                macro_rules! scale_row {
                    ($r:expr, $sa:ident, $sb:ident, $fa:ident, $fb:ident) => {
                        let xs = _mm512_set1_ps(*a.scales.get_unchecked((row0 + $r) * blocks + b));
                        let xss = _mm512_set1_ps(*a.scaled_sums.get_unchecked((row0 + $r) * blocks + b));
                        $fa = _mm512_fmadd_ps(
                            ma,
                            xss,
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps($sa), _mm512_mul_ps(da, xs), $fa),
                        );
                        $fb = _mm512_fmadd_ps(
                            mb,
                            xss,
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps($sb), _mm512_mul_ps(db, xs), $fb),
                        );
                    };
                }
                scale_row!(0, s0a, s0b, f0a, f0b);
                scale_row!(1, s1a, s1b, f1a, f1b);
                scale_row!(2, s2a, s2b, f2a, f2b);
                scale_row!(3, s3a, s3b, f3a, f3b);
                scale_row!(4, s4a, s4b, f4a, f4b);
                scale_row!(5, s5a, s5b, f5a, f5b);
            }
            store_tile(w, out, panel0, row0, &[[f0a, f0b], [f1a, f1b], [f2a, f2b], [f3a, f3b], [f4a, f4b], [f5a, f5b]]);
        }
    }

    /// `ROWS` activation rows × one panel of 16 outputs in two 256-bit halves: the same sums and float
    /// operations, in the same order, as the AVX-512 tiles.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    pub(super) unsafe fn tile_avx_vnni<const ROWS: usize>(
        w: &Int8Matrix,
        a: &QuantizedActivations,
        panel: usize,
        row0: usize,
        out: *mut f32,
    ) {
        let (cols, blocks) = (w.cols, w.cols / BLOCK);
        let quads = cols / 4;
        // SAFETY (whole body): as for `tile`, with one panel; stores are masked to the matrix's rows.
        unsafe {
            let (w_scales, w_mins) = (w.scales.as_ptr(), w.mins.as_ptr());
            let wp = w.quants.as_ptr().add(panel * quads * LANES * 4);
            let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
            for b in 0..blocks {
                let mut sums = [[_mm256_setzero_si256(); 2]; ROWS];
                for s in 0..BLOCK / 4 {
                    let quad = b * (BLOCK / 4) + s;
                    let lo = _mm256_loadu_si256(wp.add(quad * LANES * 4).cast());
                    let hi = _mm256_loadu_si256(wp.add(quad * LANES * 4 + 32).cast());
                    for (r, row_sums) in sums.iter_mut().enumerate() {
                        let xv = _mm256_set1_epi32(
                            a.quants.as_ptr().add((row0 + r) * cols + quad * 4).cast::<i32>().read_unaligned(),
                        );
                        row_sums[0] = _mm256_dpbusd_avx_epi32(row_sums[0], lo, xv);
                        row_sums[1] = _mm256_dpbusd_avx_epi32(row_sums[1], hi, xv);
                    }
                }
                let at = (panel * blocks + b) * LANES;
                let scale = [_mm256_loadu_ps(w_scales.add(at)), _mm256_loadu_ps(w_scales.add(at + 8))];
                let min = [_mm256_loadu_ps(w_mins.add(at)), _mm256_loadu_ps(w_mins.add(at + 8))];
                for r in 0..ROWS {
                    let xs = _mm256_set1_ps(*a.scales.get_unchecked((row0 + r) * blocks + b));
                    let xss = _mm256_set1_ps(*a.scaled_sums.get_unchecked((row0 + r) * blocks + b));
                    for h in 0..2 {
                        let block =
                            _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r][h]), _mm256_mul_ps(scale[h], xs), acc[r][h]);
                        acc[r][h] = _mm256_fmadd_ps(min[h], xss, block);
                    }
                }
            }
            let lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            for (r, halves) in acc.iter().enumerate() {
                for (h, v) in halves.iter().enumerate() {
                    let col = panel * LANES + h * 8;
                    let valid = 8.min(w.rows.saturating_sub(col));
                    let dst = out.add((row0 + r) * w.rows + col);
                    if valid == 8 {
                        _mm256_storeu_ps(dst, *v);
                    } else if valid > 0 {
                        _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(valid as i32), lane_ids), *v);
                    }
                }
            }
        }
    }

    /// Writes a tile's rows; columns past the matrix's last row (a partial panel) are masked off.
    #[target_feature(enable = "avx512f")]
    unsafe fn store_tile<const ROWS: usize, const PANELS: usize>(
        w: &Int8Matrix,
        out: *mut f32,
        panel0: usize,
        row0: usize,
        acc: &[[__m512; PANELS]; ROWS],
    ) {
        for (r, row_acc) in acc.iter().enumerate() {
            for (j, v) in row_acc.iter().enumerate() {
                let col = (panel0 + j) * LANES;
                let valid = LANES.min(w.rows.saturating_sub(col));
                // SAFETY: the caller's tile lies inside the `[m, rows]` output.
                unsafe {
                    let dst = out.add((row0 + r) * w.rows + col);
                    if valid == LANES {
                        _mm512_storeu_ps(dst, *v);
                    } else if valid > 0 {
                        _mm512_mask_storeu_ps(dst, ((1u32 << valid) - 1) as u16, *v);
                    }
                }
            }
        }
    }

    /// `ROWS` activation rows × `PANELS` panels of 16 outputs, accumulated over every input block.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile<const ROWS: usize, const PANELS: usize>(
        w: &Int8Matrix,
        a: &QuantizedActivations,
        panel0: usize,
        row0: usize,
        out: *mut f32,
    ) {
        let (cols, blocks) = (w.cols, w.cols / BLOCK);
        let quads = cols / 4;
        let mut acc = [[_mm512_setzero_ps(); PANELS]; ROWS];
        let (w_quants, w_scales, w_mins) = (w.quants.as_ptr(), w.scales.as_ptr(), w.mins.as_ptr());
        // SAFETY (whole body): indices stay inside the buffers `Int8Matrix::quantize` and
        // `QuantizedActivations::new` sized from the same `cols`, `panel0 + PANELS <= panels` and
        // `row0 + ROWS <= m`; stores stay inside `[m, rows]` (partial panels are masked).
        unsafe {
            for b in 0..blocks {
                let mut sums = [[_mm512_setzero_si512(); PANELS]; ROWS];
                for s in 0..BLOCK / 4 {
                    let quad = b * (BLOCK / 4) + s;
                    let mut wv = [_mm512_setzero_si512(); PANELS];
                    for (j, v) in wv.iter_mut().enumerate() {
                        *v = _mm512_loadu_si512(w_quants.add(((panel0 + j) * quads + quad) * LANES * 4).cast());
                    }
                    for (r, row_sums) in sums.iter_mut().enumerate() {
                        let x4 = a.quants.as_ptr().add((row0 + r) * cols + quad * 4).cast::<i32>().read_unaligned();
                        let xv = _mm512_set1_epi32(x4);
                        for (sum, &wq) in row_sums.iter_mut().zip(&wv) {
                            *sum = _mm512_dpbusd_epi32(*sum, wq, xv);
                        }
                    }
                }
                let mut scale = [_mm512_setzero_ps(); PANELS];
                let mut min = [_mm512_setzero_ps(); PANELS];
                for j in 0..PANELS {
                    let at = ((panel0 + j) * blocks + b) * LANES;
                    scale[j] = _mm512_loadu_ps(w_scales.add(at));
                    min[j] = _mm512_loadu_ps(w_mins.add(at));
                }
                for r in 0..ROWS {
                    let xs = _mm512_set1_ps(*a.scales.get_unchecked((row0 + r) * blocks + b));
                    let xss = _mm512_set1_ps(*a.scaled_sums.get_unchecked((row0 + r) * blocks + b));
                    for j in 0..PANELS {
                        let block =
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[r][j]), _mm512_mul_ps(scale[j], xs), acc[r][j]);
                        acc[r][j] = _mm512_fmadd_ps(min[j], xss, block);
                    }
                }
            }
            store_tile(w, out, panel0, row0, &acc);
        }
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

    /// The kernel's arithmetic, one output at a time in f64: what the SIMD tiles must reproduce.
    fn reference(w: &Int8Matrix, x: &[f32], m: usize) -> Vec<f64> {
        let acts = QuantizedActivations::new(x, m, w.cols, Isa::AvxVnni);
        let blocks = w.cols / BLOCK;
        let mut out = vec![0f64; m * w.rows];
        for i in 0..m {
            for r in 0..w.rows {
                let (panel, lane) = (r / LANES, r % LANES);
                let mut total = 0f64;
                for b in 0..blocks {
                    let dot: i32 = (b * BLOCK..(b + 1) * BLOCK)
                        .map(|k| {
                            i32::from(w.quants[((panel * (w.cols / 4) + k / 4) * LANES + lane) * 4 + k % 4])
                                * i32::from(acts.quants[i * w.cols + k])
                        })
                        .sum();
                    let at = (panel * blocks + b) * LANES + lane;
                    total += f64::from(w.scales[at]) * f64::from(acts.scales[i * blocks + b]) * f64::from(dot)
                        + f64::from(w.mins[at]) * f64::from(acts.scaled_sums[i * blocks + b]);
                }
                out[i * w.rows + r] = total;
            }
        }
        out
    }

    #[test]
    fn tiles_reproduce_the_quantised_arithmetic_at_every_edge() {
        assert!(int8_supported(), "these tests run where the kernels do (AVX-512 VNNI or AVX-VNNI)");
        for (m, rows, cols) in [
            (1, 1, 64),
            (1, 16, 128),
            (3, 17, 192),
            (4, 32, 64),
            (5, 33, 128),
            (6, 32, 64),
            (9, 48, 128),
            (13, 70, 576),
            (20, 40, 1536),
        ] {
            let w = Int8Matrix::quantize(&random(rows * cols, 1), rows, cols).unwrap();
            let x = random(m * cols, 2);
            let want = reference(&w, &x, m);
            let results: Vec<Vec<f32>> =
                Isa::available().into_iter().map(|isa| w.matmul_with(isa, &x, m).unwrap()).collect();
            for (got, isa) in results.iter().zip(Isa::available()) {
                for (g, e) in got.iter().zip(&want) {
                    assert!(
                        (f64::from(*g) - e).abs() <= 1e-5 * (1.0 + e.abs()),
                        "{isa:?} {m}×{rows}×{cols}: {g} vs {e}"
                    );
                }
            }
            // Same sums, same float operations in the same order: the same bits on either set.
            assert!(results.windows(2).all(|p| p[0] == p[1]), "{m}×{rows}×{cols}: AVX-512 and AVX-VNNI differ");
        }
    }

    #[test]
    fn simd_activation_quantisation_equals_the_scalar_one() {
        let mut x = random(4 * BLOCK, 5);
        x[BLOCK..2 * BLOCK].fill(0.0);
        x[2 * BLOCK] = 1e30;
        // amax 127 makes the scale 1, so these land on ties (rounded to even on both paths).
        x[3 * BLOCK..3 * BLOCK + 4].copy_from_slice(&[127.0, 0.5, 1.5, -2.5]);
        let (mut q1, mut s1, mut ss1) = (vec![0i8; x.len()], vec![0f32; 4], vec![0f32; 4]);
        quantize_row(&x, &mut q1, &mut s1, &mut ss1);
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        let simd = QuantizedActivations::new(&x, 1, x.len(), Isa::Avx512);
        assert_eq!((q1, s1, ss1), (simd.quants, simd.scales, simd.scaled_sums));
    }

    #[test]
    fn products_stay_within_quantisation_error_of_f32() {
        let (m, rows, cols) = (7, 40, 256);
        let wf = random(rows * cols, 3);
        let x = random(m * cols, 4);
        let got = Int8Matrix::quantize(&wf, rows, cols).unwrap().matmul(&x, m).unwrap();
        for i in 0..m {
            for r in 0..rows {
                let exact: f32 = (0..cols).map(|k| x[i * cols + k] * wf[r * cols + k]).sum();
                // Each factor is off by up to half a step (2/510 for weights, 2/254 for activations),
                // uniformly: about 0.002 per term, so a standard deviation of 0.03 over 256 terms.
                assert!((got[i * rows + r] - exact).abs() < 0.15, "{i},{r}: {} vs {exact}", got[i * rows + r]);
            }
        }
    }

    #[test]
    fn blocks_that_hold_a_few_levels_dequantise_exactly() {
        // Q4_1 blocks (min + scale · 0..15) and constant blocks survive requantisation unchanged.
        let (rows, cols) = (3, 64);
        let mut w = Vec::new();
        for r in 0..rows {
            for k in 0..cols {
                w.push(if r == 2 { 0.25 } else { -0.5 + 0.0625 * ((k * 7 + r) % 16) as f32 });
            }
        }
        let m = Int8Matrix::quantize(&w, rows, cols).unwrap();
        for r in 0..rows {
            for (k, v) in m.dequantize_row(r).iter().enumerate() {
                assert!((v - w[r * cols + k]).abs() < 1e-6, "{r},{k}: {v}");
            }
        }
    }

    #[test]
    fn misfit_shapes_are_errors() {
        assert!(matches!(Int8Matrix::quantize(&[0.0; 48], 1, 48), Err(KernelError::Blocks { cols: 48 })));
        assert!(matches!(Int8Matrix::quantize(&[0.0; 120], 2, 64), Err(KernelError::Shape { .. })));
        let w = Int8Matrix::quantize(&[0.0; 128], 2, 64).unwrap();
        assert!(matches!(w.matmul(&[0.0; 65], 1), Err(KernelError::Shape { .. })));
    }
}
