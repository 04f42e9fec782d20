//! Cumulative counts of the kernels' work in this process, for benchmarks that say where the time goes
//! (`cargo xtask bench infer`): relaxed atomic additions, one clock read per call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

static INT8_CALLS: AtomicU64 = AtomicU64::new(0);
static INT8_NANOS: AtomicU64 = AtomicU64::new(0);
static INT8_MACS: AtomicU64 = AtomicU64::new(0);
static INT8_WEIGHT_BYTES: AtomicU64 = AtomicU64::new(0);
static ATTENTION_CALLS: AtomicU64 = AtomicU64::new(0);
static ATTENTION_NANOS: AtomicU64 = AtomicU64::new(0);
static ATTENTION_KV_BYTES: AtomicU64 = AtomicU64::new(0);

/// What the kernels did since the process started; subtract two snapshots for a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelStats {
    /// [`crate::Int8Matrix::matmul`] calls, their wall time, multiply-adds (`rows × outputs × inputs`) and
    /// weight bytes read (each call reads its whole matrix).
    pub int8_calls: u64,
    pub int8_seconds: f64,
    pub int8_macs: u64,
    pub int8_weight_bytes: u64,
    /// [`crate::masked_attention`] calls, their wall time, and the key and value bytes the queries
    /// visit (each query's own keys; queries that share keys count them again).
    pub attention_calls: u64,
    pub attention_seconds: f64,
    pub attention_kv_bytes: u64,
}

impl std::ops::Sub for KernelStats {
    type Output = KernelStats;
    fn sub(self, earlier: KernelStats) -> KernelStats {
        KernelStats {
            int8_calls: self.int8_calls - earlier.int8_calls,
            int8_seconds: self.int8_seconds - earlier.int8_seconds,
            int8_macs: self.int8_macs - earlier.int8_macs,
            int8_weight_bytes: self.int8_weight_bytes - earlier.int8_weight_bytes,
            attention_calls: self.attention_calls - earlier.attention_calls,
            attention_seconds: self.attention_seconds - earlier.attention_seconds,
            attention_kv_bytes: self.attention_kv_bytes - earlier.attention_kv_bytes,
        }
    }
}

/// The counts so far.
pub fn kernel_stats() -> KernelStats {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    KernelStats {
        int8_calls: load(&INT8_CALLS),
        int8_seconds: load(&INT8_NANOS) as f64 * 1e-9,
        int8_macs: load(&INT8_MACS),
        int8_weight_bytes: load(&INT8_WEIGHT_BYTES),
        attention_calls: load(&ATTENTION_CALLS),
        attention_seconds: load(&ATTENTION_NANOS) as f64 * 1e-9,
        attention_kv_bytes: load(&ATTENTION_KV_BYTES),
    }
}

pub(crate) fn int8_call(start: Instant, macs: u64, weight_bytes: u64) {
    INT8_CALLS.fetch_add(1, Ordering::Relaxed);
    INT8_NANOS.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    INT8_MACS.fetch_add(macs, Ordering::Relaxed);
    INT8_WEIGHT_BYTES.fetch_add(weight_bytes, Ordering::Relaxed);
}

pub(crate) fn attention_call(start: Instant, kv_bytes: u64) {
    ATTENTION_CALLS.fetch_add(1, Ordering::Relaxed);
    ATTENTION_KV_BYTES.fetch_add(kv_bytes, Ordering::Relaxed);
    ATTENTION_NANOS.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
}
