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
        (2, 16, 64),
        (3, 17, 192),
        (4, 32, 64),
        (5, 33, 128),
        (6, 32, 64),
        (7, 24, 96),
        (9, 48, 128),
        (12, 48, 256),
        (13, 70, 576),
        (20, 40, 1536),
        (23, 17, 64),
        // Enough panels that each task runs its row tiles through several of them.
        (5, 16 * 40 + 5, 64),
    ] {
        let w = Int8Matrix::quantize(&random(rows * cols, 1), rows, cols).unwrap();
        let x = random(m * cols, 2);
        let want = reference(&w, &x, m);
        let results: Vec<Vec<f32>> = available.iter().map(|&tiles| w.matmul_with(tiles, &x, m).unwrap()).collect();
        for (got, isa) in results.iter().zip(&available) {
            for (g, e) in got.iter().zip(&want) {
                assert!((f64::from(*g) - e).abs() <= 1e-5 * (1.0 + e.abs()), "{isa:?} {m}×{rows}×{cols}: {g} vs {e}");
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

/// Every path this CPU runs gets a measured peak (the AVX2 one once printed "NaN": it had none), and
/// each of its tile sizes splits any batch into tiles that cover every row once.
#[test]
fn every_path_has_a_peak_and_a_row_split() {
    for tiles in Tiles::available() {
        #[cfg(target_arch = "x86_64")]
        {
            let start = std::time::Instant::now();
            // SAFETY: `available` lists only tiles this CPU runs.
            let macs = unsafe { simd_peak(tiles, 100_000) };
            let rate = macs as f64 / start.elapsed().as_secs_f64();
            assert!(macs > 0 && rate.is_finite(), "{tiles:?}: {macs} multiply-adds at {rate}/s");
        }
        for m in 1..=40 {
            let (mut row0, mut sizes) = (0, Vec::new());
            while row0 < m {
                sizes.push(tiles.rows_at(row0, m));
                row0 += sizes.last().unwrap();
            }
            let most = tiles.tile().0;
            assert_eq!(row0, m, "{tiles:?}, {m} rows: {sizes:?}");
            assert!(sizes.iter().all(|&r| (1..=most).contains(&r)), "{tiles:?}, {m} rows: {sizes:?}");
            assert_eq!(sizes.len(), m.div_ceil(most), "{tiles:?}, {m} rows: {sizes:?}");
        }
    }
    #[cfg(target_arch = "x86_64")]
    assert!(int8_peak_macs_per_second().is_some_and(|p| p > 0.0));
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
    let simd: Vec<Tiles> = Tiles::available().into_iter().filter(|&t| t != Tiles::Portable).collect();
    if simd.is_empty() {
        eprintln!("not compared: this CPU has no AVX2, so only the scalar quantisation runs here");
    }
    for tiles in simd {
        let q = QuantizedActivations::new(&x, 1, x.len(), tiles);
        assert_eq!((&q1, &s1, &ss1), (&q.quants, &q.scales, &q.scaled_sums), "{tiles:?}");
    }
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
