//! `cargo xtask bench serve`: herd's share of the ceiling of servers of known capacity.
//!
//! Starts capacity servers on loopback (`herd_test_support::capacity_server`: a slot per request held for
//! a fixed latency, requests beyond capacity queue), runs both studies' full designs through
//! `herd run --backend openai` at default settings for a bounded number of units (`--limit`), on 1 and on 4
//! endpoints, and prints requests/s, the share of the servers' ceiling (endpoints × capacity ÷ latency)
//! and the concurrency each endpoint reached. Each case also prints herd's own CPU time per request (the
//! `herd` child's user + system time; the servers are threads of this process, so theirs is not counted)
//! and the requests/s two cores would drive at that cost; the last case, scoring against a server far
//! faster than herd, is the one where herd itself is the limit. Then, given `--llama-server BIN --gguf
//! FILE`, the same conformity design against llama.cpp's own server with several slots serving that
//! model (`herd_test_support::llama_cpp_server`; 2 threads): its requests/s and the share of its slots
//! herd keeps busy, polled from `/slots`, beside a plain client's on the same requests.
//! Usage: bench_serve HERD [--scale F] [--llama-server BIN --gguf FILE] (F scales the units run; 1 by
//! default).

use herd_test_support::capacity_server::{Capacity, CapacityServer};
use herd_test_support::llama_cpp_server::{SlotOccupancy, SlotServer, plain_client};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

struct Case {
    study: &'static str,
    experiment: &'static str,
    /// A registry model with the modes the design needs: Qwen3-8B runs both reasoning modes of the
    /// minimal-group design; SmolLM2 has no conformity baseline filter (a capacity server's fixed answers
    /// pass no filter), so the trials are scored at once.
    model: &'static str,
    endpoints: usize,
    capacity: usize,
    latency: Duration,
    units: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(herd) = args.first().map(PathBuf::from) else {
        eprintln!(
            "usage: bench_serve HERD [--scale F] [--llama-server BIN --gguf FILE]  (HERD: the herd binary, e.g. target/release/herd)"
        );
        std::process::exit(2);
    };
    let scale: f64 = match args.iter().position(|a| a == "--scale") {
        Some(i) => match args.get(i + 1).and_then(|v| v.parse().ok()).filter(|s: &f64| *s > 0.0 && s.is_finite()) {
            Some(s) => s,
            None => {
                eprintln!("--scale needs a positive number (1 runs the default units)");
                std::process::exit(2);
            }
        },
        None => 1.0,
    };
    let path_after = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let llama_cpp = match (path_after("--llama-server"), path_after("--gguf")) {
        (Some(binary), Some(gguf)) => Some((binary, gguf)),
        (None, None) => None,
        _ => {
            eprintln!("--llama-server BIN and --gguf FILE go together (cargo xtask bench serve passes both)");
            std::process::exit(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mg = "data/experiments/minimal-group.toml";
    let conformity = "data/experiments/conformity.toml";
    let second = Duration::from_secs(1);
    let ms50 = Duration::from_millis(50);
    // About 40–60 s each at the ceiling: long enough that ramping up each endpoint's concurrency (a few
    // round trips) is a small part of the run.
    let cases = [
        Case {
            study: "minimal groups",
            experiment: mg,
            model: "qwen3-8b",
            endpoints: 1,
            capacity: 128,
            latency: second,
            units: 360,
        },
        Case {
            study: "minimal groups",
            experiment: mg,
            model: "qwen3-8b",
            endpoints: 4,
            capacity: 128,
            latency: second,
            units: 1080,
        },
        Case {
            study: "conformity",
            experiment: conformity,
            model: "smollm2-135m",
            endpoints: 1,
            capacity: 32,
            latency: ms50,
            units: 20_000,
        },
        Case {
            study: "conformity",
            experiment: conformity,
            model: "smollm2-135m",
            endpoints: 4,
            capacity: 32,
            latency: ms50,
            units: 40_000,
        },
        // A server far faster than herd (ceiling 51,200 requests/s): what herd's own work allows.
        Case {
            study: "conformity",
            experiment: conformity,
            model: "smollm2-135m",
            endpoints: 1,
            capacity: 256,
            latency: Duration::from_millis(5),
            units: 40_000,
        },
    ];
    let cpu = cpu_name();
    println!("herd run --backend openai at default settings against loopback capacity servers, on {cpu}");
    println!(
        "{:<15} {:>9} {:>9} {:>7} {:>10} {:>10} {:>9} {:>8}  per endpoint: peak in flight / limit reached",
        "study", "endpoints", "capacity", "latency", "units", "requests/s", "ceiling", "share"
    );
    let out = tempfile_dir();
    for (i, case) in cases.iter().enumerate() {
        let units = ((case.units as f64 * scale).round() as usize).max(1);
        let servers: Vec<CapacityServer> = (0..case.endpoints)
            .map(|_| CapacityServer::start(Capacity::new(case.capacity, case.latency, case.latency)))
            .collect();
        let run_dir = out.join(format!("run-{i}"));
        let urls: Vec<String> = servers.iter().map(CapacityServer::url).collect();
        let run = run_herd(&herd, &root, case.experiment, case.model, &urls, units, &run_dir);
        let rate = run.requests_per_s();
        let answered: usize = servers.iter().map(|s| s.stats.answered.load(Ordering::Relaxed)).sum();
        let ceiling = case.endpoints as f64 * case.capacity as f64 / case.latency.as_secs_f64();
        println!(
            "{:<15} {:>9} {:>9} {:>6}ms {:>10} {:>10.0} {:>9.0} {:>7.1}%  {}",
            case.study,
            case.endpoints,
            case.capacity,
            case.latency.as_millis(),
            units,
            rate,
            ceiling,
            100.0 * rate / ceiling,
            run.endpoints()
        );
        println!(
            "{:<15} wall {:.1} s for {answered} answered requests (herd's start and commit included): {:.1}% of the ceiling",
            "",
            run.wall,
            100.0 * answered as f64 / run.wall / ceiling
        );
        let per_request = run.herd_cpu / answered.max(1) as f64;
        println!(
            "{:<15} herd's CPU: {:.1} s, {:.0} µs per request: two cores drive about {:.0} requests/s",
            "",
            run.herd_cpu,
            per_request * 1e6,
            2.0 / per_request
        );
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    if let Some((binary, gguf)) = &llama_cpp {
        llama_cpp_case(&herd, &root, binary, gguf, scale, &out.join("run-llama-cpp"));
    } else {
        println!(
            "(llama.cpp's server with several slots: pass --llama-server BIN --gguf FILE, as cargo xtask bench serve does unless --no-llama-cpp)"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// llama.cpp's server with 4 slots on 2 threads, serving `gguf` (smollm2-135m's file: herd's requests
/// name that model) the conformity design's scoring requests: herd's requests/s and the share of the
/// slots it keeps busy while it has work, against the same requests (`herd run --backend batch --export`)
/// from a plain client with 16 connections, each on a fresh server.
fn llama_cpp_case(herd: &Path, root: &Path, binary: &Path, gguf: &Path, scale: f64, run_dir: &Path) {
    const SLOTS: usize = 4;
    const PEER_CONNECTIONS: usize = 16;
    const MODEL: &str = "smollm2-135m";
    let conformity = "data/experiments/conformity.toml";
    // About 80 s at the 3 requests/s a 2-core machine serves: the ramp and the tail are a small part.
    let units = ((240.0 * scale).round() as usize).max(1);
    println!(
        "\nllama.cpp's llama-server ({SLOTS} slots, 2 threads) serving {}, conformity scoring, {units} units:",
        gguf.file_name().map_or_else(|| gguf.display().to_string(), |n| n.to_string_lossy().into_owned())
    );
    let start = || {
        SlotServer::start(binary, gguf, SLOTS, 2).unwrap_or_else(|e| {
            eprintln!("llama.cpp's server did not start: {e}");
            std::process::exit(1);
        })
    };
    let percent = |share: Option<f64>| share.map_or_else(|| "n/a".to_owned(), |s| format!("{:.1}%", 100.0 * s));
    let occupancy_text = |o: &SlotOccupancy| {
        format!(
            "{} of slot time busy, all {SLOTS} busy in {} of {} polls of /slots",
            percent(o.mean_busy()),
            percent(o.all_busy()),
            o.serving_polls()
        )
    };

    let requests = exported_requests(herd, root, conformity, MODEL, units, &run_dir.with_extension("export"));
    let peer_server = start();
    let sampler = peer_server.sample_slots(Duration::from_millis(20));
    let (answered, seconds) = plain_client(peer_server.port, &requests, PEER_CONNECTIONS);
    let peer_occupancy = sampler.finish();
    drop(peer_server);
    if answered < requests.len() {
        eprintln!("the plain client had {} of {} requests answered 200", answered, requests.len());
        std::process::exit(1);
    }
    let peer_rate = answered as f64 / seconds;
    println!(
        "  plain client, {PEER_CONNECTIONS} connections: {peer_rate:.2} requests/s; {}",
        occupancy_text(&peer_occupancy)
    );

    let server = start();
    let sampler = server.sample_slots(Duration::from_millis(20));
    let run = run_herd(herd, root, conformity, MODEL, &[server.url()], units, run_dir);
    let occupancy = sampler.finish();
    println!(
        "  herd, default settings:      {:.2} requests/s ({:.2}× the plain client); {}; peak in flight / limit {}",
        run.requests_per_s(),
        run.requests_per_s() / peer_rate,
        occupancy_text(&occupancy),
        run.endpoints()
    );
    let _ = std::fs::remove_dir_all(run_dir);
}

/// The requests of the first `units` units of `experiment` for `model` as `herd run --backend batch
/// --export` writes them: (path, JSON body) each.
fn exported_requests(
    herd: &Path,
    root: &Path,
    experiment: &str,
    model: &str,
    units: usize,
    dir: &Path,
) -> Vec<(String, Vec<u8>)> {
    let file = dir.with_extension("jsonl");
    let output = Command::new(herd)
        .current_dir(root)
        .args(["run", "--backend", "batch", "--model", model, "--experiment", experiment, "--quiet"])
        .args(["--limit", &units.to_string(), "--out"])
        .arg(dir)
        .arg("--export")
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("starting {}: {e}", herd.display()));
    if !output.status.success() {
        eprintln!("herd run --backend batch --export failed:\n{}", String::from_utf8_lossy(&output.stderr));
        std::process::exit(1);
    }
    let text = std::fs::read_to_string(&file).expect("the exported requests");
    let requests: Vec<(String, Vec<u8>)> = text
        .lines()
        .map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).expect("an export line is JSON");
            let path = entry["url"].as_str().expect("an export line has a url").to_owned();
            (path, serde_json::to_vec(&entry["body"]).expect("a JSON body"))
        })
        .collect();
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_file(&file);
    requests
}

/// One `herd run --backend openai` and what it cost.
struct HerdRun {
    manifest: serde_json::Value,
    wall: f64,
    /// herd's user + system CPU seconds.
    herd_cpu: f64,
}

impl HerdRun {
    fn requests_per_s(&self) -> f64 {
        self.manifest["notes"]["throughput"]["requests_per_s"].as_f64().unwrap_or(0.0)
    }

    /// Each endpoint's peak requests in flight and the peak of its adaptive limit, as `peak/limit`.
    fn endpoints(&self) -> String {
        self.manifest["notes"]["endpoints"]
            .as_array()
            .map(|e| e.iter().map(|e| format!("{}/{}", e["peak_in_flight"], e["peak_limit"])).collect::<Vec<_>>())
            .unwrap_or_default()
            .join(" ")
    }
}

/// Runs `herd run --backend openai` on `experiment` for `units` units against `endpoints`, at default
/// settings, and reads its manifest.
fn run_herd(
    herd: &Path,
    root: &Path,
    experiment: &str,
    model: &str,
    endpoints: &[String],
    units: usize,
    run_dir: &Path,
) -> HerdRun {
    let mut command = Command::new(herd);
    command.current_dir(root).args([
        "run",
        "--backend",
        "openai",
        "--model",
        model,
        "--experiment",
        experiment,
        "--out",
        run_dir.to_str().expect("UTF-8 temp path"),
        "--limit",
        &units.to_string(),
        "--quiet",
        "--no-quick-look",
    ]);
    for url in endpoints {
        command.args(["--endpoint", url]);
    }
    let started = Instant::now();
    let cpu_before = children_cpu_seconds();
    let output = command.output().unwrap_or_else(|e| panic!("starting {}: {e}", herd.display()));
    let wall = started.elapsed().as_secs_f64();
    let herd_cpu = children_cpu_seconds() - cpu_before;
    if !output.status.success() {
        eprintln!("herd run failed:\n{}", String::from_utf8_lossy(&output.stderr));
        std::process::exit(1);
    }
    let manifest = serde_json::from_slice(&std::fs::read(run_dir.join("manifest.json")).expect("manifest.json"))
        .expect("manifest JSON");
    HerdRun { manifest, wall, herd_cpu }
}

/// A fresh folder under the system's temporary folder for the runs.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herd-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    dir
}

/// The CPU's model name and the cores this process may use (herd and the servers share them).
fn cpu_name() -> String {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "an unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{name}, {cores} cores")
}

/// The user + system CPU seconds of this process's children that have been waited for: fields 16 and
/// 17 (cutime, cstime) of /proc/self/stat, in the kernel's USER_HZ ticks, which Linux fixes at 100 for
/// every interface it exports to user space.
fn children_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat (Linux)");
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3, so field k is fields[k - 3].
    let ticks = |k: usize| fields[k - 3].parse::<f64>().expect("a tick count");
    (ticks(16) + ticks(17)) / 100.0
}
