//! Matrix products with 8-bit weights and 8-bit activations, accumulated in 32-bit integers.
//!
//! The arithmetic is llama.cpp's for its Q4_1/Q8_1 pair: weights are asymmetric per block of 32 inputs
//! (`w ≈ scale · q + min`, `q` in 0..=255), activations symmetric per block (`x ≈ s · q`, `q` in
//! -127..=127), so a block's contribution is `scale · s · Σ qw·qx + min · s · Σ qx`. The integer sums are
//! what VNNI's `vpdpbusd` computes (unsigned × signed bytes, four per 32-bit lane): 64 multiply-adds
//! per AVX-512 instruction against 16 for an f32 FMA (32 and 8 at 256 bits, with AVX-VNNI). Without
//! VNNI, AVX2's `vpmaddwd` computes the same sums from the bytes widened to 16 bits.
//!
//! Code layout: this file holds the matrix, the activations' quantisation, the portable tile and the
//! dispatch from `Tiles`; each architecture's SIMD tiles and peak loops live in their own module
//! (`int8/x86.rs`). A NEON/dotprod path for aarch64 is one module away: an `int8/aarch64.rs` with its
//! tiles (`sdot`/`udot` compute `vpdpbusd`'s four-byte sums; the float update as in `add_block_256`'s
//! callers) and peak loop, a `CpuPath` and a `Tiles` variant, and its arms in `tile_dispatch` and
//! `simd_peak`; the bit-equality tests then compare it with the portable tile, which on aarch64 is
//! the baseline that runs today.

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
    /// AVX2, FMA and AVX-VNNI (256-bit `vpdpbusd`, 16 registers): up to 6 rows × 16 outputs.
    AvxVnni,
    /// AVX2 and FMA without VNNI: `vpmaddwd` on weights split into 16-bit even and odd bytes, up to
    /// 4 rows × 16 outputs.
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

    /// The rows of the tile that starts at `row0` of `m`: the AVX-512 tiles take full tiles and then the
    /// rest (their full tile is written out by hand); the 256-bit tiles spread the rows evenly over as
    /// few tiles as hold them (20 rows: 5 + 5 + 5 + 5 rather than 6 + 6 + 6 + 2, whose last tile would
    /// have too few independent sums to cover `vpdpbusd`'s latency). Rows are independent, so the split
    /// never changes a result.
    fn rows_at(self, row0: usize, m: usize) -> usize {
        let most = self.tile().0;
        match self {
            Tiles::AvxVnni | Tiles::Avx2 => {
                let tiles = m.div_ceil(most);
                let (base, extra) = (m / tiles, m % tiles);
                // The first `extra` tiles take `base + 1` rows.
                if row0 < extra * (base + 1) { base + 1 } else { base }
            }
            _ => most.min(m - row0),
        }
    }

    /// Activation rows (at most) and 16-output panels per tile.
    fn tile(self) -> (usize, usize) {
        match self {
            Tiles::Avx512 => (TILE_ROWS, TILE_PANELS),
            // What fits in AVX2's sixteen registers (see the tiles).
            Tiles::AvxVnni => (6, 1),
            Tiles::Avx2 => (4, 1),
            // SSE2's sixteen registers hold one row's eight pair accumulators and the weights.
            Tiles::Portable if cfg!(target_arch = "x86_64") => (1, 1),
            Tiles::Portable => (PORTABLE_ROWS, 1),
        }
    }
}

/// Weight bytes of the panels one task of [`Int8Matrix::matmul`] runs each row tile through: what a
/// core's L2 cache holds beside the activations.
const SPAN_BYTES: usize = 192 << 10;

/// Rows per portable tile.
const PORTABLE_ROWS: usize = 4;

/// Whether the int8 products run on `vpdpbusd` here (AVX-512 VNNI or AVX-VNNI on the active
/// [`CpuPath`]); elsewhere they run the AVX2 or portable tiles, with the same results, slower.
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
        let tile_panels = tiles.tile().1;
        let acts = QuantizedActivations::new(x, m, self.cols, tiles);
        // Not zeroed first: the tiles write every element (zeroing was 5 % of a scoring run).
        let mut out = Vec::<f32>::with_capacity(m * self.rows);
        let out_ptr = OutPtr(out.as_mut_ptr());
        let groups = self.panels().div_ceil(tile_panels);
        // Each task takes `span` consecutive tile groups and runs each row tile through all of them,
        // so that a row tile's activations, once in L1, serve `span` panels whose weights (at most
        // SPAN_BYTES) stay in L2: with one group per task, 256 rows' activations (768 KiB as the AVX2
        // tiles' 16-bit pairs) streamed from L2 or beyond once per panel. Enough tasks remain to keep
        // every thread busy.
        let group_bytes = tile_panels * LANES * self.cols;
        let span = (SPAN_BYTES / group_bytes).clamp(1, groups.div_ceil(4 * rayon::current_num_threads()).max(1));
        (0..groups.div_ceil(span)).into_par_iter().for_each(|task| {
            let out_ptr = &out_ptr;
            let mut row0 = 0;
            while row0 < m {
                let rows = tiles.rows_at(row0, m);
                for g in task * span..((task + 1) * span).min(groups) {
                    let panel0 = g * tile_panels;
                    let panels = tile_panels.min(self.panels() - panel0);
                    // SAFETY: `tiles` came from a path this CPU runs (`CpuPath::current` or
                    // `available`); each task writes only the output columns of its own panels, so no
                    // two tasks write the same element.
                    unsafe { self.tile_dispatch(tiles, &acts, panel0, panels, row0, rows, out_ptr.0) };
                }
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
                    4 => x86::tile_avx2::<4>(self, acts, panel0, row0, out),
                    3 => x86::tile_avx2::<3>(self, acts, panel0, row0, out),
                    2 => x86::tile_avx2::<2>(self, acts, panel0, row0, out),
                    1 => x86::tile_avx2::<1>(self, acts, panel0, row0, out),
                    _ => unreachable!("AVX2 tiles are at most 4 rows"),
                },
                #[cfg(target_arch = "x86_64")]
                Tiles::AvxVnni => match rows {
                    6 => x86::tile_avx_vnni::<6>(self, acts, panel0, row0, out),
                    5 => x86::tile_avx_vnni::<5>(self, acts, panel0, row0, out),
                    4 => x86::tile_avx_vnni::<4>(self, acts, panel0, row0, out),
                    3 => x86::tile_avx_vnni::<3>(self, acts, panel0, row0, out),
                    2 => x86::tile_avx_vnni::<2>(self, acts, panel0, row0, out),
                    1 => x86::tile_avx_vnni::<1>(self, acts, panel0, row0, out),
                    _ => unreachable!("AVX-VNNI tiles are at most 6 rows"),
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

/// This machine's int8 multiply-add rate (per second) on the active [`CpuPath`]'s tiles, with every
/// thread of rayon's pool issuing the instruction sequence those tiles multiply with, on independent
/// registers and with no memory traffic: the ceiling the int8 products run under.
///
/// The sequence per path: `vpdpbusd` (64 multiply-adds at 512 bits with AVX-512 VNNI, 32 at 256 with
/// AVX-VNNI); on AVX2 `vpmaddubsw` + `vpmaddwd` + `vpaddd` (32 multiply-adds per three instructions,
/// llama.cpp's sequence); on the x86-64 baseline SSE2's `pmaddwd` + `paddd` (8). `None` off x86-64.
pub fn int8_peak_macs_per_second() -> Option<f64> {
    let tiles = Tiles::for_path(CpuPath::current());
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    const ITERATIONS: u64 = 4_000_000;
    let threads = rayon::current_num_threads();
    let start = std::time::Instant::now();
    let macs_per_thread: u64 = (0..threads)
        .into_par_iter()
        // SAFETY: `tiles` came from the active path, which this CPU runs.
        .map(|_| unsafe { simd_peak(tiles, ITERATIONS) })
        .min()
        .unwrap_or(0);
    Some((macs_per_thread * threads as u64) as f64 / start.elapsed().as_secs_f64())
}

#[cfg(target_arch = "x86_64")]
unsafe fn simd_peak(tiles: Tiles, iterations: u64) -> u64 {
    // SAFETY: forwarded.
    unsafe {
        match tiles {
            Tiles::Avx512 => x86::peak_avx512(iterations),
            Tiles::AvxVnni => x86::peak_avx_vnni(iterations),
            Tiles::Avx2 => x86::peak_avx2(iterations),
            Tiles::Portable => x86::peak_sse2(iterations),
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn simd_peak(_: Tiles, _: u64) -> u64 {
    unreachable!("measured on x86-64 only")
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
    /// For the AVX2 tiles only (else empty): per row and group of four inputs `[x0 x1 x2 x3]`, the
    /// 16-bit pairs `[x0 x2]` and `[x1 x3]` as two 32-bit words, which `vpmaddwd` multiplies by a
    /// lane's even and odd weight bytes.
    pairs: Vec<i32>,
}

impl QuantizedActivations {
    /// `tiles` must run here: the AVX-512 tiles quantise sixteen lanes at a time, the 256-bit ones
    /// eight, the portable ones one value at a time (the same values). (In scalar code this was a
    /// quarter of the 256-bit paths' product time: `round_ties_even` is a library call without SSE4.1.)
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
            match tiles {
                // SAFETY: the CPU has AVX-512 F/BW; the slices hold `cols` values and `blocks` blocks.
                Tiles::Avx512 => return unsafe { x86::quantize_row(x, q, s, ss) },
                // SAFETY: the CPU has AVX2, as above.
                Tiles::AvxVnni | Tiles::Avx2 => return unsafe { x86::quantize_row_avx2(x, q, s, ss) },
                Tiles::Portable => {}
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
        let pairs = if tiles == Tiles::Avx2 { pairs(&quants) } else { Vec::new() };
        Self { quants, scales, scaled_sums, pairs }
    }
}

/// [`QuantizedActivations::pairs`] of the activations `quants` (a multiple of four values).
fn pairs(quants: &[i8]) -> Vec<i32> {
    let word = |lo: i8, hi: i8| i32::from(lo as i16 as u16) | i32::from(hi) << 16;
    quants.chunks_exact(4).flat_map(|x| [word(x[0], x[2]), word(x[1], x[3])]).collect()
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
mod x86;

#[cfg(test)]
mod tests;
