//! Matrix products with 8-bit weights and 8-bit activations, accumulated in 32-bit integers.
//!
//! The arithmetic is llama.cpp's for its Q4_1/Q8_1 pair: weights are asymmetric per block of 32 inputs
//! (`w ≈ scale · q + min`, `q` in 0..=255), activations symmetric per block (`x ≈ s · q`, `q` in
//! -127..=127), so a block's contribution is `scale · s · Σ qw·qx + min · s · Σ qx`. The integer sums are
//! what VNNI's `vpdpbusd` computes (unsigned × signed bytes, four per 32-bit lane): 64 multiply-adds
//! per AVX-512 instruction against 16 for an f32 FMA (32 and 8 at 256 bits, with AVX-VNNI).

use crate::KernelError;
use crate::cpu::CpuPath;
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

/// The int8 tiles a [`CpuPath`] runs. All compute the same integer sums and the same fused float
/// operations in the same order, so their results are identical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tiles {
    /// AVX-512 F/BW and VNNI: 6 rows × 32 outputs per tile.
    Avx512,
    /// AVX2, FMA and AVX-VNNI (256-bit `vpdpbusd`, 16 registers): 2 rows × 16 outputs.
    AvxVnni,
    /// AVX2 and FMA without VNNI: `vpmaddwd` on weights widened to 16 bits, 2 rows × 16 outputs.
    Avx2,
    /// Baseline: SSE2's `pmaddwd` on x86-64, plain Rust elsewhere; the float update in scalar code
    /// (`f32::mul_add`, a library call where the build has no FMA).
    Portable,
}

impl Tiles {
    fn for_path(path: CpuPath) -> Tiles {
        match path {
            CpuPath::Avx512Vnni => Tiles::Avx512,
            CpuPath::AvxVnni => Tiles::AvxVnni,
            CpuPath::Avx512 | CpuPath::Avx2 => Tiles::Avx2,
            CpuPath::Baseline => Tiles::Portable,
        }
    }

    /// The tiles of every path this CPU runs, best first.
    #[cfg(test)]
    fn available() -> Vec<Tiles> {
        let mut tiles = Vec::new();
        for t in CpuPath::available().into_iter().map(Tiles::for_path) {
            if !tiles.contains(&t) {
                tiles.push(t);
            }
        }
        tiles
    }

    /// Activation rows and 16-output panels per tile.
    fn tile(self) -> (usize, usize) {
        match self {
            Tiles::Avx512 => (TILE_ROWS, TILE_PANELS),
            // Two rows keep AVX2's eight pair accumulators, four widened weights and the activations in
            // its sixteen registers.
            Tiles::AvxVnni | Tiles::Avx2 => (2, 1),
            // SSE2's sixteen registers hold one row's eight pair accumulators and the weights.
            Tiles::Portable if cfg!(target_arch = "x86_64") => (1, 1),
            Tiles::Portable => (PORTABLE_ROWS, 1),
        }
    }
}

/// Rows per portable tile.
const PORTABLE_ROWS: usize = 4;

/// Whether the int8 products run on `vpdpbusd` here (AVX-512 VNNI or AVX-VNNI on the active
/// [`CpuPath`]); elsewhere they run the portable tiles, with the same results, several times slower.
pub fn int8_uses_vnni() -> bool {
    matches!(Tiles::for_path(CpuPath::current()), Tiles::Avx512 | Tiles::AvxVnni)
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

    /// `x · Wᵀ` for row-major `x` `[m, cols]`: returns `[m, rows]` row-major, with the tiles of the
    /// active [`CpuPath`] (the same bits on every path).
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        self.matmul_with(Tiles::for_path(CpuPath::current()), x, m)
    }

    fn matmul_with(&self, tiles: Tiles, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        if x.len() != m * self.cols {
            return Err(KernelError::Shape { what: "activations", got: x.len(), rows: m, cols: self.cols });
        }
        let start = std::time::Instant::now();
        let (tile_rows, tile_panels) = tiles.tile();
        let acts = QuantizedActivations::new(x, m, self.cols, tiles);
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
                // SAFETY: `tiles` came from a path this CPU runs (`CpuPath::current` or `available`);
                // each task writes only the output columns of its own panels, so no two tasks write
                // the same element.
                unsafe { self.tile_dispatch(tiles, &acts, panel0, panels, row0, rows, out_ptr.0) };
                row0 += rows;
            }
        });
        // SAFETY: the panels cover every output column and the row loop every row, so all
        // `m × rows` elements were written above.
        unsafe { out.set_len(m * self.rows) };
        crate::stats::int8_call(start, (m * self.rows * self.cols) as u64, self.size_bytes() as u64);
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn tile_dispatch(
        &self,
        tiles: Tiles,
        acts: &QuantizedActivations,
        panel0: usize,
        panels: usize,
        row0: usize,
        rows: usize,
        out: *mut f32,
    ) {
        // SAFETY: forwarded from `matmul`.
        unsafe {
            match tiles {
                // x86-64 always has SSE2.
                #[cfg(target_arch = "x86_64")]
                Tiles::Portable => match rows {
                    1 => x86::tile_sse2(self, acts, panel0, row0, out),
                    _ => unreachable!("SSE2 tiles are 1 row"),
                },
                #[cfg(not(target_arch = "x86_64"))]
                Tiles::Portable => match rows {
                    4 => tile_portable::<4>(self, acts, panel0, row0, out),
                    3 => tile_portable::<3>(self, acts, panel0, row0, out),
                    2 => tile_portable::<2>(self, acts, panel0, row0, out),
                    1 => tile_portable::<1>(self, acts, panel0, row0, out),
                    _ => unreachable!("portable tiles are at most {PORTABLE_ROWS} rows"),
                },
                #[cfg(target_arch = "x86_64")]
                Tiles::Avx2 => match rows {
                    2 => x86::tile_avx2::<2>(self, acts, panel0, row0, out),
                    1 => x86::tile_avx2::<1>(self, acts, panel0, row0, out),
                    _ => unreachable!("AVX2 tiles are at most 2 rows"),
                },
                #[cfg(target_arch = "x86_64")]
                Tiles::AvxVnni => match rows {
                    2 => x86::tile_avx_vnni::<2>(self, acts, panel0, row0, out),
                    1 => x86::tile_avx_vnni::<1>(self, acts, panel0, row0, out),
                    _ => unreachable!("AVX-VNNI tiles are at most 2 rows"),
                },
                #[cfg(target_arch = "x86_64")]
                Tiles::Avx512 => match (rows, panels) {
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
                },
                #[cfg(not(target_arch = "x86_64"))]
                _ => unreachable!("only the portable tiles exist off x86-64"),
            }
        }
    }
}

/// `ROWS` activation rows × one panel of 16 outputs without VNNI or AVX2: the block sums from
/// `block_sums` (exact integers, in any order), then each block's float update as the SIMD tiles' two
/// fused multiply-adds (`f32::mul_add` rounds once, as `vfmadd` does), so the results are the same bits.
///
/// # Safety
/// `panel` is a panel of `w`, `row0 + ROWS <= m` rows of `a`, and `out` holds `[m, w.rows]` values of
/// which this call writes only its own panel's columns.
#[inline(always)]
unsafe fn tile_scalar_float<const ROWS: usize>(
    w: &Int8Matrix,
    a: &QuantizedActivations,
    panel: usize,
    row0: usize,
    out: *mut f32,
    block_sums: impl Fn(usize, &mut [[i32; LANES]; ROWS]),
) {
    let blocks = w.cols / BLOCK;
    let mut acc = [[0f32; LANES]; ROWS];
    let mut sums = [[0i32; LANES]; ROWS];
    for b in 0..blocks {
        block_sums(b, &mut sums);
        let at = (panel * blocks + b) * LANES;
        let (scale, min) = (&w.scales[at..at + LANES], &w.mins[at..at + LANES]);
        for r in 0..ROWS {
            let xs = a.scales[(row0 + r) * blocks + b];
            let xss = a.scaled_sums[(row0 + r) * blocks + b];
            for lane in 0..LANES {
                let block = (sums[r][lane] as f32).mul_add(scale[lane] * xs, acc[r][lane]);
                acc[r][lane] = min[lane].mul_add(xss, block);
            }
        }
    }
    let valid = LANES.min(w.rows.saturating_sub(panel * LANES));
    for (r, row_acc) in acc.iter().enumerate() {
        // SAFETY: the caller's tile lies inside the `[m, rows]` output; only this panel's columns.
        unsafe {
            let dst = out.add((row0 + r) * w.rows + panel * LANES);
            std::ptr::copy_nonoverlapping(row_acc.as_ptr(), dst, valid);
        }
    }
}

/// [`tile_scalar_float`] with block sums in plain Rust (other architectures; compilers vectorise the
/// four-input dot products with what the build targets, NEON on aarch64). On x86-64 only the tests run
/// it, against the SIMD tiles.
///
/// # Safety
/// As [`tile_scalar_float`].
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
unsafe fn tile_portable<const ROWS: usize>(
    w: &Int8Matrix,
    a: &QuantizedActivations,
    panel: usize,
    row0: usize,
    out: *mut f32,
) {
    let quads = w.cols / 4;
    let panel_quants = &w.quants[panel * quads * LANES * 4..(panel + 1) * quads * LANES * 4];
    let block_sums = |b: usize, sums: &mut [[i32; LANES]; ROWS]| {
        *sums = [[0; LANES]; ROWS];
        for s in 0..BLOCK / 4 {
            let quad = b * (BLOCK / 4) + s;
            let wq = &panel_quants[quad * LANES * 4..(quad + 1) * LANES * 4];
            for (r, row_sums) in sums.iter_mut().enumerate() {
                let xq = &a.quants[(row0 + r) * w.cols + quad * 4..][..4];
                for (sum, wl) in row_sums.iter_mut().zip(wq.chunks_exact(4)) {
                    *sum += wl.iter().zip(xq).map(|(&w, &x)| i32::from(w) * i32::from(x)).sum::<i32>();
                }
            }
        }
    };
    // SAFETY: forwarded.
    unsafe { tile_scalar_float::<ROWS>(w, a, panel, row0, out, block_sums) }
}

/// This machine's int8 multiply-add rate (per second) with every thread of rayon's pool issuing
/// `vpdpbusd` (64 multiply-adds each with AVX-512, 32 with AVX-VNNI) on 12 independent accumulators, with
/// no memory traffic: the ceiling the int8 products run under. `None` where the active path has no
/// VNNI tiles.
pub fn int8_peak_macs_per_second() -> Option<f64> {
    let tiles = Tiles::for_path(CpuPath::current());
    if !matches!(tiles, Tiles::Avx512 | Tiles::AvxVnni) {
        return None;
    }
    const ITERATIONS: u64 = 4_000_000;
    let threads = rayon::current_num_threads();
    let start = std::time::Instant::now();
    let macs_per_thread: u64 = (0..threads)
        .into_par_iter()
        // SAFETY: `tiles` came from the active path, which this CPU runs.
        .map(|_| unsafe { x86_peak(tiles, ITERATIONS) })
        .min()
        .unwrap_or(0);
    Some((macs_per_thread * threads as u64) as f64 / start.elapsed().as_secs_f64())
}

#[cfg(target_arch = "x86_64")]
unsafe fn x86_peak(tiles: Tiles, iterations: u64) -> u64 {
    // SAFETY: forwarded.
    unsafe {
        match tiles {
            Tiles::Avx512 => x86::peak_avx512(iterations),
            _ => x86::peak_avx_vnni(iterations),
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn x86_peak(_: Tiles, _: u64) -> u64 {
    unreachable!("no VNNI tiles off x86-64")
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
    /// `tiles` must run here: the AVX-512 tiles quantise sixteen lanes at a time, the rest one value
    /// at a time (the same values).
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    fn new(x: &[f32], m: usize, cols: usize, tiles: Tiles) -> Self {
        let blocks = cols / BLOCK;
        let mut quants = vec![0i8; m * cols];
        let mut scales = vec![0f32; m * blocks];
        let mut scaled_sums = vec![0f32; m * blocks];
        // One row: its int8 values and block scales (written), its scaled sums (written) and its input.
        type RowParts<'r> = ((&'r mut [i8], &'r mut [f32]), (&'r mut [f32], &'r [f32]));
        let quantize_rows = |((q, s), (ss, x)): RowParts<'_>| {
            #[cfg(target_arch = "x86_64")]
            if tiles == Tiles::Avx512 {
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

    /// `ROWS` activation rows × one panel of 16 outputs in two 256-bit halves: each block's integer sums
    /// from `block_sums` (per row, lanes 0–7 and 8–15), then the AVX-512 tiles' float operations in
    /// their order ([`add_block_256`]). Inlined into the tiles below, which have AVX2 and FMA.
    #[inline(always)]
    unsafe fn tile_256<const ROWS: usize>(
        w: &Int8Matrix,
        a: &QuantizedActivations,
        panel: usize,
        row0: usize,
        out: *mut f32,
        block_sums: impl Fn(usize) -> [[__m256i; 2]; ROWS],
    ) {
        // SAFETY: forwarded from the tiles.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
            for b in 0..w.cols / BLOCK {
                add_block_256(w, a, panel, b, row0, &block_sums(b), &mut acc);
            }
            store_halves(w, out, panel, row0, &acc);
        }
    }

    /// `ROWS` activation rows × one panel of 16 outputs on AVX-VNNI (`vpdpbusd` at 256 bits): the same
    /// sums and float operations, in the same order, as the AVX-512 tiles.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    pub(super) unsafe fn tile_avx_vnni<const ROWS: usize>(
        w: &Int8Matrix,
        a: &QuantizedActivations,
        panel: usize,
        row0: usize,
        out: *mut f32,
    ) {
        let cols = w.cols;
        // SAFETY (whole body): as for `tile`, with one panel; stores are masked to the matrix's rows.
        unsafe {
            let wp = w.quants.as_ptr().add(panel * (cols / 4) * LANES * 4);
            let block_sums = |b: usize| {
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
                sums
            };
            tile_256::<ROWS>(w, a, panel, row0, out, block_sums);
        }
    }

    /// `ROWS` activation rows × one panel of 16 outputs on AVX2 without VNNI: the weight bytes widened
    /// to 16 bits and multiplied by the activations with `vpmaddwd` (each product fits in 16 bits, each
    /// pair sum in 32), the pairs then added lane by lane. The same integer sums as the VNNI tiles and,
    /// from there, the same float operations in the same order as [`tile_avx_vnni`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_avx2<const ROWS: usize>(
        w: &Int8Matrix,
        a: &QuantizedActivations,
        panel: usize,
        row0: usize,
        out: *mut f32,
    ) {
        let cols = w.cols;
        // SAFETY (whole body): as for `tile`, with one panel; stores are masked to the matrix's rows.
        unsafe {
            let wp = w.quants.as_ptr().add(panel * (cols / 4) * LANES * 4);
            let block_sums = |b: usize| {
                // Per row, four chunks of four lanes; each 32-bit element holds one lane's pair sum.
                let mut pairs = [[_mm256_setzero_si256(); 4]; ROWS];
                for s in 0..BLOCK / 4 {
                    let quad = b * (BLOCK / 4) + s;
                    let wq: [__m256i; 4] = std::array::from_fn(|c| {
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(wp.add(quad * LANES * 4 + c * 16).cast()))
                    });
                    for (r, row_pairs) in pairs.iter_mut().enumerate() {
                        // The row's four activations as 16-bit values, repeated for the four lanes.
                        let x4 = a.quants.as_ptr().add((row0 + r) * cols + quad * 4).cast::<i32>().read_unaligned();
                        let x16 = _mm_cvtepi8_epi16(_mm_cvtsi32_si128(x4));
                        let xv = _mm256_set1_epi64x(_mm_cvtsi128_si64(x16));
                        for (p, &wc) in row_pairs.iter_mut().zip(&wq) {
                            *p = _mm256_add_epi32(*p, _mm256_madd_epi16(wc, xv));
                        }
                    }
                }
                // hadd gives lanes [0 1 4 5 | 2 3 6 7]; the permute puts them in order.
                std::array::from_fn(|r| {
                    [
                        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(pairs[r][0], pairs[r][1])),
                        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(pairs[r][2], pairs[r][3])),
                    ]
                })
            };
            tile_256::<ROWS>(w, a, panel, row0, out, block_sums);
        }
    }

    /// One activation row × one panel of 16 outputs with SSE2 only (every x86-64 CPU): the AVX2 tile's
    /// `pmaddwd` pair sums at 128 bits, added lane by lane and scaled in scalar code at each block's end.
    pub(super) unsafe fn tile_sse2(w: &Int8Matrix, a: &QuantizedActivations, panel: usize, row: usize, out: *mut f32) {
        let quads = w.cols / 4;
        // SAFETY (whole body): as for `tile`, with one panel and one row.
        unsafe {
            let wp = w.quants.as_ptr().add(panel * quads * LANES * 4);
            let block_sums = |b: usize, sums: &mut [[i32; LANES]; 1]| {
                let zero = _mm_setzero_si128();
                // Eight accumulators: each 16-byte chunk of a quad (four lanes) widens to two halves.
                let mut pairs = [_mm_setzero_si128(); 8];
                for s in 0..BLOCK / 4 {
                    let quad = b * (BLOCK / 4) + s;
                    let xq = std::slice::from_raw_parts(a.quants.as_ptr().add(row * w.cols + quad * 4), 4);
                    let x16 = xq.iter().enumerate().fold(0u64, |v, (t, &x)| v | u64::from(x as i16 as u16) << (16 * t));
                    let xv = _mm_set1_epi64x(x16 as i64);
                    for c in 0..4 {
                        let wc = _mm_loadu_si128(wp.add(quad * LANES * 4 + c * 16).cast());
                        let (lo, hi) = (_mm_unpacklo_epi8(wc, zero), _mm_unpackhi_epi8(wc, zero));
                        pairs[2 * c] = _mm_add_epi32(pairs[2 * c], _mm_madd_epi16(lo, xv));
                        pairs[2 * c + 1] = _mm_add_epi32(pairs[2 * c + 1], _mm_madd_epi16(hi, xv));
                    }
                }
                let mut flat = [0i32; 32];
                for (k, p) in pairs.iter().enumerate() {
                    _mm_storeu_si128(flat.as_mut_ptr().add(4 * k).cast(), *p);
                }
                for (lane, sum) in sums[0].iter_mut().enumerate() {
                    *sum = flat[2 * lane] + flat[2 * lane + 1];
                }
            };
            super::tile_scalar_float::<1>(w, a, panel, row, out, block_sums)
        }
    }

    /// Adds block `b`'s contribution to `ROWS` rows of one panel held as two 256-bit halves: the
    /// AVX-512 tiles' two fused multiply-adds, in their order. Inlined into its callers, which have
    /// AVX2 and FMA.
    #[inline(always)]
    unsafe fn add_block_256<const ROWS: usize>(
        w: &Int8Matrix,
        a: &QuantizedActivations,
        panel: usize,
        b: usize,
        row0: usize,
        sums: &[[__m256i; 2]; ROWS],
        acc: &mut [[__m256; 2]; ROWS],
    ) {
        let blocks = w.cols / BLOCK;
        // SAFETY: the callers have AVX2 and FMA; indices as in `tile`.
        unsafe {
            let at = (panel * blocks + b) * LANES;
            let (w_scales, w_mins) = (w.scales.as_ptr(), w.mins.as_ptr());
            let scale = [_mm256_loadu_ps(w_scales.add(at)), _mm256_loadu_ps(w_scales.add(at + 8))];
            let min = [_mm256_loadu_ps(w_mins.add(at)), _mm256_loadu_ps(w_mins.add(at + 8))];
            for r in 0..ROWS {
                let xs = _mm256_set1_ps(*a.scales.get_unchecked((row0 + r) * blocks + b));
                let xss = _mm256_set1_ps(*a.scaled_sums.get_unchecked((row0 + r) * blocks + b));
                for h in 0..2 {
                    let block = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r][h]), _mm256_mul_ps(scale[h], xs), acc[r][h]);
                    acc[r][h] = _mm256_fmadd_ps(min[h], xss, block);
                }
            }
        }
    }

    /// Writes `ROWS` rows of one panel held as two 256-bit halves; columns past the matrix's last row
    /// are masked off.
    #[target_feature(enable = "avx2")]
    unsafe fn store_halves<const ROWS: usize>(
        w: &Int8Matrix,
        out: *mut f32,
        panel: usize,
        row0: usize,
        acc: &[[__m256; 2]; ROWS],
    ) {
        let lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for (r, halves) in acc.iter().enumerate() {
            for (h, v) in halves.iter().enumerate() {
                let col = panel * LANES + h * 8;
                let valid = 8.min(w.rows.saturating_sub(col));
                // SAFETY: the caller's tile lies inside the `[m, rows]` output.
                unsafe {
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
        let acts = QuantizedActivations::new(x, m, w.cols, Tiles::Portable);
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
        // Every path this CPU runs, whatever HERD_CPU_PATH says: the portable tiles at least.
        let available = Tiles::available();
        eprintln!("int8 tiles compared: {available:?}");
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
            let results: Vec<Vec<f32>> = available.iter().map(|&tiles| w.matmul_with(tiles, &x, m).unwrap()).collect();
            for (got, isa) in results.iter().zip(&available) {
                for (g, e) in got.iter().zip(&want) {
                    assert!(
                        (f64::from(*g) - e).abs() <= 1e-5 * (1.0 + e.abs()),
                        "{isa:?} {m}×{rows}×{cols}: {g} vs {e}"
                    );
                }
            }
            // The plain-Rust tile other architectures run, one row and panel at a time.
            let mut portable = vec![0f32; m * rows];
            let acts = QuantizedActivations::new(&x, m, cols, Tiles::Portable);
            for panel in 0..w.panels() {
                for row in 0..m {
                    // SAFETY: every panel and row of the output, one call each.
                    unsafe { tile_portable::<1>(&w, &acts, panel, row, portable.as_mut_ptr()) };
                }
            }
            assert_eq!(portable, results[0], "{m}×{rows}×{cols}: the plain-Rust tile differs");
            // Same sums, same float operations in the same order: the same bits on either set.
            assert!(results.windows(2).all(|p| p[0] == p[1]), "{m}×{rows}×{cols}: the tiles of {available:?} differ");
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
        if !Tiles::available().contains(&Tiles::Avx512) {
            eprintln!("not compared: this CPU has no AVX-512 VNNI, so only the scalar quantisation runs here");
            return;
        }
        let simd = QuantizedActivations::new(&x, 1, x.len(), Tiles::Avx512);
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
