//! CPU compute kernels for herd's local inference, free of any tensor library: herd-infer wraps them
//! as candle operations where they beat candle's own (see herd-infer's README, "Local inference speed").
//!
//! - [`Int8Matrix`]: linear layers with 8-bit weights and activations, llama.cpp's Q4_1 × Q8_1
//!   arithmetic; on AVX-512 VNNI or AVX-VNNI at four times the multiply-adds per instruction of f32,
//!   on AVX2 with `vpmaddwd`, elsewhere in portable code, all with the same results.
//!   [`int8_peak_macs_per_second`] measures each path's ceiling (`examples/int8_bench.rs` prints the
//!   products against it).
//! - [`masked_attention`]: attention that visits only the keys a query may see, each query computed
//!   alone in a fixed order, so batching, padding and prefix caches never change a result's bits.
//! - [`keep_freed_pages`]: the allocator policy those speeds rely on (mimalloc keeping freed pages).
//! - [`CpuPath`]: which of these code paths the CPU takes, lowered on request with `HERD_CPU_PATH`.
//! - [`MappedFile`]: prepared weights read from a memory-mapped file instead of copied
//!   ([`Int8Matrix::from_mapped`]), with a fast [`checksum`] to detect damaged files.
//!
//! ```
//! use herd_kernels::Int8Matrix;
//!
//! // y = x · Wᵀ for a 2 × 64 weight and one activation row.
//! let weights: Vec<f32> = (0..128).map(|i| (i % 7) as f32 / 7.0 - 0.5).collect();
//! let w = Int8Matrix::quantize(&weights, 2, 64).unwrap();
//! let y = w.matmul(&[1.0; 64], 1).unwrap();
//! let exact: f32 = weights[..64].iter().sum();
//! assert!((y[0] - exact).abs() < 0.05, "{} vs {exact}", y[0]);
//! ```

// SIMD intrinsics and disjoint parallel writes need `unsafe`; every block says why it holds.
#![allow(unsafe_code)]

mod allocator;
mod attention;
mod cpu;
mod int8;
mod mapped;
mod stats;

pub use allocator::keep_freed_pages;
pub use attention::{AttentionShape, HeadsView, KeyMask, masked_attention};
pub use cpu::{CPU_PATH_VAR, CpuPath};
pub use int8::{BLOCK, INT8_LAYOUT_VERSION, Int8Matrix, Int8Parts, int8_peak_macs_per_second, int8_uses_vnni};
pub use mapped::{MappedFile, checksum};
pub use stats::{KernelStats, kernel_stats};

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("int8 weights need an input size that is a multiple of {BLOCK}, got {cols}")]
    Blocks { cols: usize },
    #[error("{what} have {got} values, expected {rows} × {cols}")]
    Shape { what: &'static str, got: usize, rows: usize, cols: usize },
    #[error("{heads} query heads cannot share {kv_heads} key/value heads evenly")]
    Heads { heads: usize, kv_heads: usize },
    #[error("{0}")]
    CpuPath(String),
    #[error(
        "a {rows} × {cols} int8 matrix does not fit where stated in a mapped file of {file_len} bytes (or is misaligned)"
    )]
    Mapped { rows: usize, cols: usize, file_len: usize },
}
