//! The x86-64 tiles: AVX-512 VNNI, AVX-VNNI, AVX2 and SSE2, and their peak loops.

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

/// Multiply-adds of `iterations` rounds of six independent `vpmaddubsw` → `vpmaddwd` → `vpaddd`
/// sequences (256-bit, 32 multiply-adds each). In assembly: with intrinsics the compiler would
/// hoist the loop-invariant products out of the loop.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn peak_avx2(iterations: u64) -> u64 {
    // SAFETY: the CPU has AVX2; the asm touches only the registers it names.
    unsafe {
        std::arch::asm!(
            "vpxor ymm0, ymm0, ymm0", "vpxor ymm1, ymm1, ymm1", "vpxor ymm2, ymm2, ymm2",
            "vpxor ymm3, ymm3, ymm3", "vpxor ymm4, ymm4, ymm4", "vpxor ymm5, ymm5, ymm5",
            "vpcmpeqb ymm13, ymm13, ymm13", "vpabsb ymm14, ymm13", "vpabsw ymm15, ymm13",
            "2:",
            "vpmaddubsw ymm6, ymm13, ymm14", "vpmaddubsw ymm7, ymm13, ymm14", "vpmaddubsw ymm8, ymm13, ymm14",
            "vpmaddubsw ymm9, ymm13, ymm14", "vpmaddubsw ymm10, ymm13, ymm14", "vpmaddubsw ymm11, ymm13, ymm14",
            "vpmaddwd ymm6, ymm6, ymm15", "vpmaddwd ymm7, ymm7, ymm15", "vpmaddwd ymm8, ymm8, ymm15",
            "vpmaddwd ymm9, ymm9, ymm15", "vpmaddwd ymm10, ymm10, ymm15", "vpmaddwd ymm11, ymm11, ymm15",
            "vpaddd ymm0, ymm0, ymm6", "vpaddd ymm1, ymm1, ymm7", "vpaddd ymm2, ymm2, ymm8",
            "vpaddd ymm3, ymm3, ymm9", "vpaddd ymm4, ymm4, ymm10", "vpaddd ymm5, ymm5, ymm11",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) iterations => _,
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _,
            out("ymm6") _, out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
            out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack, nomem),
        );
    }
    iterations * 6 * 32
}

/// Multiply-adds of `iterations` rounds of six independent `pmaddwd` → `paddd` pairs (SSE2, 8
/// multiply-adds each), in assembly for the reason given at [`peak_avx2`].
pub(super) unsafe fn peak_sse2(iterations: u64) -> u64 {
    // SAFETY: every x86-64 CPU has SSE2; the asm touches only the registers it names.
    unsafe {
        std::arch::asm!(
            "pxor xmm0, xmm0", "pxor xmm1, xmm1", "pxor xmm2, xmm2",
            "pxor xmm3, xmm3", "pxor xmm4, xmm4", "pxor xmm5, xmm5",
            "pcmpeqb xmm14, xmm14", "pcmpeqb xmm15, xmm15",
            "2:",
            "movdqa xmm6, xmm14", "movdqa xmm7, xmm14", "movdqa xmm8, xmm14",
            "movdqa xmm9, xmm14", "movdqa xmm10, xmm14", "movdqa xmm11, xmm14",
            "pmaddwd xmm6, xmm15", "pmaddwd xmm7, xmm15", "pmaddwd xmm8, xmm15",
            "pmaddwd xmm9, xmm15", "pmaddwd xmm10, xmm15", "pmaddwd xmm11, xmm15",
            "paddd xmm0, xmm6", "paddd xmm1, xmm7", "paddd xmm2, xmm8",
            "paddd xmm3, xmm9", "paddd xmm4, xmm10", "paddd xmm5, xmm11",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) iterations => _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _,
            out("xmm6") _, out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm14") _, out("xmm15") _,
            options(nostack, nomem),
        );
    }
    iterations * 6 * 8
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

/// [`super::quantize_row`] eight lanes at a time, for the 256-bit tiles: the same maximum, the same
/// rounded products and conversions (`vcvtps2dq` rounds ties to even), the same integer sum.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quantize_row_avx2(x: &[f32], q: &mut [i8], scales: &mut [f32], scaled_sums: &mut [f32]) {
    // SAFETY: `x` and `q` hold `scales.len()` blocks of `BLOCK` values.
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        // `vpackssdw` and `vpacksswb` work within 128-bit halves; this puts the bytes back in order.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const CHUNKS: usize = BLOCK / 8;
        for b in 0..scales.len() {
            let v: [__m256; CHUNKS] = std::array::from_fn(|c| _mm256_loadu_ps(x.as_ptr().add(b * BLOCK + c * 8)));
            let m = v.iter().fold(_mm256_setzero_ps(), |m, &v| _mm256_max_ps(m, _mm256_andnot_ps(sign, v)));
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)));
            let inv = _mm256_set1_ps(if amax > 0.0 { 127.0 / amax } else { 0.0 });
            let q32: [__m256i; CHUNKS] = std::array::from_fn(|c| _mm256_cvtps_epi32(_mm256_mul_ps(v[c], inv)));
            let packed = _mm256_packs_epi16(_mm256_packs_epi32(q32[0], q32[1]), _mm256_packs_epi32(q32[2], q32[3]));
            _mm256_storeu_si256(q.as_mut_ptr().add(b * BLOCK).cast(), _mm256_permutevar8x32_epi32(packed, order));
            let s = _mm256_add_epi32(_mm256_add_epi32(q32[0], q32[1]), _mm256_add_epi32(q32[2], q32[3]));
            let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            let sum = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)));
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
                    $fa =
                        _mm512_fmadd_ps(ma, xss, _mm512_fmadd_ps(_mm512_cvtepi32_ps($sa), _mm512_mul_ps(da, xs), $fa));
                    $fb =
                        _mm512_fmadd_ps(mb, xss, _mm512_fmadd_ps(_mm512_cvtepi32_ps($sb), _mm512_mul_ps(db, xs), $fb));
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

/// How far ahead (in groups of four inputs, 64 bytes each) the AVX2 tile prefetches its weights.
const PREFETCH_QUADS: usize = 16;

/// `ROWS` activation rows × one panel of 16 outputs on AVX-VNNI (`vpdpbusd` at 256 bits): the same
/// sums and float operations, in the same order, as the AVX-512 tiles. Up to six rows: twelve
/// independent `vpdpbusd` chains cover the instruction's latency at two per cycle (two rows, four chains,
/// ran at a third of the peak), and the twelve integer sums, two weight halves and one broadcast
/// activation fill fifteen of the sixteen registers; the float accumulators, touched once a block,
/// live in memory.
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
        let xp: [*const u8; ROWS] = std::array::from_fn(|r| a.quants.as_ptr().add((row0 + r) * cols).cast());
        let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
        for b in 0..cols / BLOCK {
            let mut sums = [[_mm256_setzero_si256(); 2]; ROWS];
            for s in 0..BLOCK / 4 {
                let quad = b * (BLOCK / 4) + s;
                let lo = _mm256_loadu_si256(wp.add(quad * LANES * 4).cast());
                let hi = _mm256_loadu_si256(wp.add(quad * LANES * 4 + 32).cast());
                for (row_sums, x) in sums.iter_mut().zip(&xp) {
                    let xv = _mm256_set1_epi32(x.add(quad * 4).cast::<i32>().read_unaligned());
                    row_sums[0] = _mm256_dpbusd_avx_epi32(row_sums[0], lo, xv);
                    row_sums[1] = _mm256_dpbusd_avx_epi32(row_sums[1], hi, xv);
                }
            }
            add_block_256(w, a, panel, b, row0, &sums, &mut acc);
        }
        store_halves(w, out, panel, row0, &acc);
    }
}

/// `ROWS` activation rows × one panel of 16 outputs on AVX2 without VNNI, on `vpmaddwd` with exact
/// 16-bit operands: each 32-bit weight group `[q0 q1 q2 q3]` of a lane splits, with one AND and one
/// shift, into its even bytes `[q0 q2]` and odd bytes `[q1 q3]` as 16-bit values, which `vpmaddwd`
/// multiplies by the activations `[x0 x2]` and `[x1 x3]` ([`QuantizedActivations::pairs`], widened
/// once per product): one 32-bit sum per lane and no reduction across lanes. (`vpmaddubsw` on the
/// bytes themselves would saturate: 255 · 127 · 2 overflows 16 bits.) The same integer sums as the
/// VNNI tiles and, from there, the same float operations in the same order.
///
/// Up to four rows: their eight integer sums, the four split weight vectors and two broadcast
/// activations fill the sixteen registers; the float accumulators live in memory.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile_avx2<const ROWS: usize>(
    w: &Int8Matrix,
    a: &QuantizedActivations,
    panel: usize,
    row0: usize,
    out: *mut f32,
) {
    let (cols, quads) = (w.cols, w.cols / 4);
    // SAFETY (whole body): as for `tile`, with one panel; `a.pairs` holds two 32-bit pairs per quad of
    // each row (the caller made `a` for these tiles); stores are masked to the matrix's rows.
    unsafe {
        let wp = w.quants.as_ptr().add(panel * quads * LANES * 4);
        let xp: [*const i32; ROWS] = std::array::from_fn(|r| a.pairs.as_ptr().add((row0 + r) * quads * 2));
        let even = _mm256_set1_epi16(0x00ff);
        let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
        for b in 0..cols / BLOCK {
            let mut sums = [[_mm256_setzero_si256(); 2]; ROWS];
            for s in 0..BLOCK / 4 {
                let quad = b * (BLOCK / 4) + s;
                // The panel's weights come from memory on the first rows' pass: 13 % more at 20 rows
                // (a prefetch past the end of the buffer is harmless: it never faults). The same
                // prefetch slowed the AVX-VNNI tile by a quarter, so it has none.
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add((quad + PREFETCH_QUADS) * LANES * 4).cast());
                let lo = _mm256_loadu_si256(wp.add(quad * LANES * 4).cast());
                let hi = _mm256_loadu_si256(wp.add(quad * LANES * 4 + 32).cast());
                let (lo_even, lo_odd) = (_mm256_and_si256(lo, even), _mm256_srli_epi16::<8>(lo));
                let (hi_even, hi_odd) = (_mm256_and_si256(hi, even), _mm256_srli_epi16::<8>(hi));
                for (row_sums, x) in sums.iter_mut().zip(&xp) {
                    let x_even = _mm256_set1_epi32(x.add(2 * quad).read_unaligned());
                    let x_odd = _mm256_set1_epi32(x.add(2 * quad + 1).read_unaligned());
                    let l = _mm256_add_epi32(_mm256_madd_epi16(lo_even, x_even), _mm256_madd_epi16(lo_odd, x_odd));
                    let h = _mm256_add_epi32(_mm256_madd_epi16(hi_even, x_even), _mm256_madd_epi16(hi_odd, x_odd));
                    row_sums[0] = _mm256_add_epi32(row_sums[0], l);
                    row_sums[1] = _mm256_add_epi32(row_sums[1], h);
                }
            }
            add_block_256(w, a, panel, b, row0, &sums, &mut acc);
        }
        store_halves(w, out, panel, row0, &acc);
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
                    let block = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[r][j]), _mm512_mul_ps(scale[j], xs), acc[r][j]);
                    acc[r][j] = _mm512_fmadd_ps(min[j], xss, block);
                }
            }
        }
        store_tile(w, out, panel0, row0, &acc);
    }
}
