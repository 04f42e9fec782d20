//! The int8 products against each CPU path's int8 peak, at Qwen2.5-Coder-1.5B's shapes.
//!
//! `cargo run -p herd-kernels --release --example int8_bench [PATH…]` runs itself once per CPU path this
//! machine has (or the paths named) and per thread count (1 and 2, or `HERD_BENCH_THREADS=1,4`), since
//! the path is fixed per process (`HERD_CPU_PATH`) and so is rayon's pool. Each run prints the path's
//! peak (a register-only loop of the path's multiply-add sequence, [`int8_peak_macs_per_second`]) and,
//! for 1, 20 and 256 activation rows, each product's rate in GMAC/s and as a share of that peak: the
//! best of several repetitions, since the machine may be shared. It prints numbers, it asserts none.

use herd_kernels::{CPU_PATH_VAR, CpuPath, Int8Matrix, int8_peak_macs_per_second, keep_freed_pages};
use mimalloc::MiMalloc;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::process::Command;
use std::time::{Duration, Instant};

/// Set in the runs this program starts, to tell them apart from the one that starts them.
const CHILD_VAR: &str = "HERD_INT8_BENCH_CHILD";

/// Qwen2.5-Coder-1.5B's linear layers: (name, outputs, inputs, how many per decoder layer).
const SHAPES: [(&str, usize, usize, usize); 5] = [
    ("q/o 1536×1536", 1536, 1536, 2),
    ("k/v 256×1536", 256, 1536, 2),
    ("gate/up 8960×1536", 8960, 1536, 2),
    ("down 1536×8960", 1536, 8960, 1),
    ("layer (all 7)", 0, 0, 0),
];
const ROWS: [usize; 3] = [1, 20, 256];

// The allocator herd's binaries run with, so that outputs land in pages already faulted in.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() {
    keep_freed_pages();
    if std::env::var_os(CHILD_VAR).is_some() {
        measure();
        return;
    }
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let paths: Vec<CpuPath> = CpuPath::available()
        .into_iter()
        .filter(|p| wanted.is_empty() || wanted.iter().any(|w| w == p.name()))
        .collect();
    let threads = std::env::var("HERD_BENCH_THREADS").unwrap_or_else(|_| "1,2".into());
    let exe = std::env::current_exe().expect("the benchmark knows its own path");
    println!("cpu: {}", cpu_model());
    for path in paths {
        for t in threads.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let status = Command::new(&exe)
                .env(CHILD_VAR, "1")
                .env(CPU_PATH_VAR, path.name())
                .env("RAYON_NUM_THREADS", t)
                .status()
                .expect("the benchmark runs itself");
            assert!(status.success(), "the run on {path} with {t} threads failed");
        }
    }
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn random_matrix(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..rows * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// The best time of `f` over at least three calls and about half a second.
fn best_of(mut f: impl FnMut()) -> f64 {
    let (start, mut best, mut calls) = (Instant::now(), f64::INFINITY, 0);
    while calls < 3 || start.elapsed() < Duration::from_millis(500) {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        calls += 1;
    }
    best
}

fn measure() {
    let path = CpuPath::active().unwrap_or_else(|e| panic!("{e}"));
    let threads = rayon::current_num_threads();
    // A shared machine lowers a measurement, never raises it: the peak is the best of several spread
    // over the run (before each batch size and after the last), each product the best of its calls.
    let mut peak = f64::NAN;
    let mut measure_peak = || {
        for _ in 0..3 {
            peak = peak.max(int8_peak_macs_per_second().unwrap_or(f64::NAN));
        }
    };
    let matrices: Vec<Int8Matrix> = SHAPES[..4]
        .iter()
        .enumerate()
        .map(|(i, &(_, out, inp, _))| Int8Matrix::quantize(&random_matrix(out, inp, i as u64), out, inp).unwrap())
        .collect();
    let mut rates = vec![Vec::new(); SHAPES.len()];
    for &m in &ROWS {
        measure_peak();
        let (mut layer_macs, mut layer_seconds) = (0.0, 0.0);
        for (i, w) in matrices.iter().enumerate() {
            let x = random_matrix(m, w.cols(), 100 + i as u64);
            let seconds = best_of(|| {
                std::hint::black_box(w.matmul(&x, m).unwrap());
            });
            let macs = (m * w.rows() * w.cols()) as f64;
            layer_macs += SHAPES[i].3 as f64 * macs;
            layer_seconds += SHAPES[i].3 as f64 * seconds;
            rates[i].push(macs / seconds);
        }
        rates[4].push(layer_macs / layer_seconds);
    }
    measure_peak();
    println!("\n{path}, {threads} thread(s): int8 peak {:.0} GMAC/s", peak / 1e9);
    let header: String = ROWS.iter().map(|m| format!("{:>22}", format!("{m} rows"))).collect();
    println!("    {:<20}{header}", "GMAC/s (% of peak)");
    for ((name, ..), rates) in SHAPES.iter().zip(&rates) {
        let line: String = rates.iter().map(|&r| cell(r, peak)).collect();
        println!("    {name:<20}{line}");
    }
}

fn cell(rate: f64, peak: f64) -> String {
    format!("{:>22}", format!("{:.1} ({:.0} %)", rate / 1e9, 100.0 * rate / peak))
}
