//! `cargo xtask bench infer`: herd's candle backend against llama.cpp (llama-cpp-python) on the same GGUF,
//! prompts and thread count, in one run. (a) scoring 200 conformity prompts that share prefixes per
//! image; (b) generating for one 20-decider society, llama.cpp serving the deciders one by one and as
//! parallel sequences. herd runs from the release build that `cargo xtask test` and `cargo xtask replicate`
//! make (the binary users run; no debug build, no second target folder), once per CPU path this machine
//! has (`HERD_CPU_PATH`; herd-kernels picks its SIMD at run time), against one llama.cpp measurement.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const MAX_TOKENS: &str = "64";
/// The quick minimal-group study: sections (b) and (c) decode its first society, and (c) prices its
/// society passes from that one.
const QUICK_SOCIETIES: &str = "data/experiments/minimal-group.quick.toml";
const THREADS: &str = "2";

fn herd(binary: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(binary).args(args).output()?;
    if !out.status.success() {
        bail!("herd {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// The targets of issue 30 for a CPU path: (scoring, society generation) as multiples of llama.cpp.
fn targets(path: &str) -> Option<(f64, f64)> {
    match path {
        "avx512-vnni" | "avx-vnni" => Some((3.0, 2.0)),
        "avx512" | "avx2" => Some((2.0, 2.0)),
        _ => None,
    }
}

/// The Python that has llama-cpp-python: `$HERD_LLAMA_PYTHON`, else the environment `cargo xtask
/// llama-server` makes (llama-cpp-python with numpy and jinja2, built with AMX off).
fn llama_python() -> Result<PathBuf> {
    let path = match std::env::var_os("HERD_LLAMA_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => crate::llama_server::python()?,
    };
    if !path.exists() {
        bail!("no Python with llama-cpp-python at {} (HERD_LLAMA_PYTHON)", path.display());
    }
    Ok(path)
}

/// Benchmarks the GGUF model `alias` (a PyPI-sourced alias of data/models.toml; default smollm2-135m).
/// `paths`: the CPU paths to measure (empty: every path `herd models --cpu-paths` lists).
pub fn run(alias: &str, paths: &[String]) -> Result<()> {
    let python = llama_python()?;
    println!("building herd (release, the build `cargo xtask test` and `replicate` use)…");
    let binary = crate::replicate::build_herd("cpu")?;
    let available = crate::replicate::cpu_paths(&binary)?;
    let paths: Vec<String> = if paths.is_empty() { available.clone() } else { paths.to_vec() };
    if let Some(missing) = paths.iter().find(|p| !available.contains(p)) {
        bail!("--path {missing}: this machine runs {} (herd models --cpu-paths)", available.join(", "));
    }
    let dir = Path::new("target/bench-infer");
    std::fs::create_dir_all(dir)?;
    println!("model {alias}");
    let gguf = crate::llama_server::gguf(&binary, alias)?;

    // 200 conformity prompts, grouped by image as the runner groups them (all N of one image together).
    let all = herd(
        &binary,
        &[
            "prompts",
            "--experiment",
            "data/experiments/conformity.toml",
            "--family",
            "group_size",
            "--modality",
            "text",
            "--limit",
            "2000",
            "--jsonl",
        ],
    )?;
    let mut lines: Vec<(String, u64, &str)> = all
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("herd prompts --jsonl prints JSON");
            (v["image"].as_str().unwrap_or("").to_string(), v["n"].as_u64().unwrap_or(0), l)
        })
        .collect();
    lines.sort();
    let scoring: Vec<&str> = lines.iter().take(200).map(|(_, _, l)| *l).collect();
    let scoring_path = dir.join("scoring.jsonl");
    std::fs::write(&scoring_path, scoring.join("\n") + "\n")?;
    let society_path = dir.join("society.jsonl");
    std::fs::write(
        &society_path,
        herd(&binary, &["prompts", "--experiment", QUICK_SOCIETIES, "--limit", "20", "--jsonl"])?,
    )?;

    // The society passes the quick minimal-group study runs on this model (section (c) times one).
    let society_passes = crate::bench_replicate::plan_units(&binary, QUICK_SOCIETIES, alias, "1/1")?;

    println!("building herd's benchmark (herd-infer's example bench_infer, the same release build)…");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // `--workspace` keeps the workspace's feature set, so nothing the tests or `herd` built recompiles.
    crate::replicate::run(
        Command::new(&cargo).args(["build", "--quiet", "--release", "--workspace", "--example", "bench_infer"]),
        "building herd-infer's bench_infer example",
    )?;
    let example = crate::replicate::release_example("bench_infer");

    println!("running llama.cpp (llama-cpp-python, {THREADS} threads)…");
    let out = Command::new(&python)
        .args([
            "xtask/bench/llamacpp_infer.py",
            path_str(&gguf)?,
            path_str(&scoring_path)?,
            path_str(&society_path)?,
            MAX_TOKENS,
            THREADS,
        ])
        .output()?;
    if !out.status.success() {
        bail!("llama.cpp's benchmark failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let theirs: Value = serde_json::from_slice(&out.stdout).context("llama.cpp's benchmark printed no JSON")?;

    let mut summary = Vec::new();
    for path in &paths {
        println!(
            "\n======== herd on the {path} path (HERD_CPU_PATH={path}) against llama.cpp at its own best ========"
        );
        let out = Command::new(&example)
            .args([alias, path_str(&gguf)?, path_str(&scoring_path)?, path_str(&society_path)?, MAX_TOKENS])
            .env("HERD_CPU_PATH", path)
            .output()?;
        if !out.status.success() {
            bail!("herd's benchmark on the {path} path failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let ours: Value = serde_json::from_slice(&out.stdout).context("herd's benchmark printed no JSON")?;
        summary.push((path.clone(), report(&ours, &theirs, society_passes)?));
    }
    println!("\nsummary ({alias}, {THREADS} threads; ratios are herd ÷ llama.cpp, higher is faster):");
    println!("    {:<12} {:>9} {:>12}   {:>17}   targets (issue 30)", "CPU path", "scoring", "generation", "ceilings");
    for (path, ratios) in &summary {
        let target = match targets(path) {
            Some((s, g)) => format!(
                "≥ {s}× / ≥ {g}×: {} / {}",
                verdict(ratios.scoring, ratios.scoring_ceiling, s),
                verdict(ratios.generation, ratios.generation_ceiling, g)
            ),
            None => "none for this path".to_string(),
        };
        println!(
            "    {path:<12} {:>8.2}× {:>11.2}×   {:>7.2}× / {:>5.2}×   {target}",
            ratios.scoring, ratios.generation, ratios.scoring_ceiling, ratios.generation_ceiling
        );
    }
    println!(
        "    (a ceiling: llama.cpp's time over herd's int8 multiply-adds at this path's measured peak; a target above \
         it cannot be met by any code that computes the tokens herd computes)"
    );
    Ok(())
}

/// One CPU path's ratios against llama.cpp (herd ÷ llama.cpp, higher is faster) and the ratios herd
/// would reach with its int8 products at the path's peak and nothing else taking time: the ceilings.
struct PathRatios {
    scoring: f64,
    generation: f64,
    scoring_ceiling: f64,
    generation_ceiling: f64,
}

/// "met", "not met", or "out of reach" when the target lies above the ceiling.
fn verdict(ratio: f64, ceiling: f64, target: f64) -> &'static str {
    if ratio >= target {
        "met"
    } else if ceiling < target {
        "out of reach"
    } else {
        "not met"
    }
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str().context("non-UTF-8 path")
}

/// The int8 products, attention and the rest of a phase of `seconds`, and what fraction of the bound
/// that suits it the phase reaches: int8 multiply-adds against the int8 peak where `bound` is
/// "compute", weight and key/value bytes against the memory bandwidth where it is "memory".
fn phase(name: &str, seconds: f64, k: &Value, machine: &Value, bound: &str) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let (int8, attention) = (f(&k["int8_seconds"]), f(&k["attention_seconds"]));
    println!(
        "    {name:<24} {seconds:6.1} s = int8 products {int8:5.1} s ({:3.0} %), attention {attention:5.1} s ({:3.0} %), rest {:5.1} s ({:3.0} %)",
        100.0 * int8 / seconds,
        100.0 * attention / seconds,
        seconds - int8 - attention,
        100.0 * (seconds - int8 - attention) / seconds
    );
    let macs = f(&k["int8_macs"]);
    let peak = f(&machine["int8_peak_macs_per_s"]);
    let bandwidth = f(&machine["memory_bytes_per_s"]);
    let bytes = f(&k["int8_weight_bytes"]) + f(&k["attention_kv_bytes"]);
    let compute = format!(
        "int8 {:.0} GMAC/s = {:.0} % of peak (in the products alone {:.0} %)",
        macs / seconds / 1e9,
        100.0 * macs / seconds / peak,
        100.0 * macs / int8 / peak
    );
    let memory = format!(
        "weights and keys/values read {:.1} GB/s = {:.0} % of bandwidth",
        bytes / seconds / 1e9,
        100.0 * bytes / seconds / bandwidth
    );
    match bound {
        "memory" => println!("    {:<24} bound: memory. {memory}; {compute}", ""),
        _ => println!("    {:<24} bound: int8 compute. {compute}; {memory}", ""),
    }
}

/// Prints one path's comparison; returns its scoring and generation (against parallel sequences) ratios
/// and their ceilings.
fn report(ours: &Value, theirs: &Value, society_passes: u64) -> Result<PathRatios> {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let machine = &ours["machine"];
    let (bandwidth, peak) = (f(&machine["memory_bytes_per_s"]), f(&machine["int8_peak_macs_per_s"]));
    let threads = f(&machine["threads"]);
    println!("\nmachine ({threads} threads, measured in herd's process before loading):");
    println!(
        "    memory read bandwidth  {:6.1} GB/s  (all threads summing a 512 MiB buffer, best of 3)",
        bandwidth / 1e9
    );
    // The sequence herd-kernels' peak loop issues on the path, and what two multiply ports retire of
    // it per cycle: two vpdpbusd (64 multiply-adds at 512 bits, 32 at 256), one vpmaddubsw + vpmaddwd
    // pair (32), two SSE2 pmaddwd (8 each).
    let (sequence, per_cycle) = match machine["cpu_path"].as_str().unwrap_or("") {
        "avx512-vnni" => ("vpdpbusd (512-bit)", 128.0),
        "avx-vnni" => ("vpdpbusd (256-bit)", 64.0),
        "avx512" | "avx2" => ("vpmaddubsw + vpmaddwd + vpaddd (256-bit)", 32.0),
        _ => ("pmaddwd + paddd (SSE2)", 16.0),
    };
    let nominal = machine["cpu_mhz"]
        .as_f64()
        .map(|mhz| format!("; the kernel reports {:.2} GHz nominal", mhz / 1e3))
        .unwrap_or_default();
    println!(
        "    int8 peak              {:6.0} GMAC/s  (measured: {sequence} on independent registers per thread, no memory traffic = {threads} threads × {per_cycle} MAC/cycle × {:.2} GHz effective{nominal})",
        peak / 1e9,
        peak / threads / per_cycle / 1e9
    );

    let (herd_load, llama_load) = (f(&ours["load_s"]), f(&theirs["load_s"]));
    println!(
        "\nload: herd {herd_load:.2} s ({}), llama.cpp {llama_load:.2} s: {:.2}× llama.cpp's time (target ≤ 2×)",
        ours["load"]["prepared"].as_str().unwrap_or("?"),
        herd_load / llama_load
    );
    let phases: Vec<String> = ours["load"]["phases"]
        .as_array()
        .map(|a| a.iter().map(|p| format!("{} {:.3} s", p[0].as_str().unwrap_or("?"), f(&p[1]))).collect())
        .unwrap_or_default();
    println!("    where herd's time goes: {}", phases.join(", "));
    if let Some(s) = ours["load"]["preparing_s"].as_f64() {
        println!("    (this run prepared the weights first: that load took {s:.1} s and wrote the cache)");
    }

    let prompts = f(&ours["scoring"]["prompts"]);
    let herd_score = prompts / f(&ours["scoring"]["seconds"]);
    let llama_score = prompts / f(&theirs["scoring"]["seconds"]);
    // Every prompt's continuation, and each group's shared prefix once.
    let computed = f(&ours["scoring"]["prompt_tokens"]) - f(&ours["scoring"]["reused_tokens"])
        + f(&ours["scoring"]["prefix_tokens"]);
    println!(
        "\n(a) scoring {} prompts in {} image groups ({} prompt tokens, {} computed after prefix reuse)",
        prompts, ours["scoring"]["groups"], ours["scoring"]["prompt_tokens"], computed
    );
    println!(
        "    herd       {herd_score:8.2} prompts/s   ({:.0} computed tokens/s)",
        computed / f(&ours["scoring"]["seconds"])
    );
    println!("    llama.cpp  {llama_score:8.2} prompts/s   (prefix kept between consecutive prompts)");
    let scoring_ratio = herd_score / llama_score;
    println!("    ratio      {scoring_ratio:8.2}×");
    let scoring_macs = f(&ours["scoring"]["kernels"]["int8_macs"]);
    let scoring_ceiling = f(&theirs["scoring"]["seconds"]) / (scoring_macs / peak);
    println!(
        "    ceiling    {scoring_ceiling:8.2}×   (herd's {:.0} G int8 multiply-adds alone take {:.1} s at this path's peak)",
        scoring_macs / 1e9,
        scoring_macs / peak
    );
    let pa_ours: Vec<f64> = ours["scoring"]["p_a"].as_array().map(|a| a.iter().map(f).collect()).unwrap_or_default();
    let pa_theirs: Vec<f64> =
        theirs["scoring"]["p_a"].as_array().map(|a| a.iter().map(f).collect()).unwrap_or_default();
    let worst = pa_ours.iter().zip(&pa_theirs).map(|(a, b)| (a.ln() - b.ln()).abs()).fold(0.0, f64::max);
    println!(
        "    agreement  largest |Δ log P(\"A\" token)| = {worst:.3} (herd sums every token spelling A; llama.cpp side reads token \"A\" only)"
    );
    let prefix_s = f(&ours["scoring"]["prefix_seconds"]);
    println!("    the groups' shared prefixes, scored alone (without the reuse between groups), take {prefix_s:.1} s");
    phase("scoring", f(&ours["scoring"]["seconds"]), &ours["scoring"]["kernels"], machine, "compute");

    let herd_gen = f(&ours["generation"]["completion_tokens"]) / f(&ours["generation"]["seconds"]);
    let seq = f(&theirs["generation_sequential"]["completion_tokens"]) / f(&theirs["generation_sequential"]["seconds"]);
    println!(
        "\n(b) generating for a 20-decider society, up to {MAX_TOKENS} tokens each (prefill included; {} prompt tokens)",
        ours["generation"]["prompt_tokens"]
    );
    println!(
        "    herd (one batch)              {herd_gen:8.1} tokens/s   ({} tokens in {:.1} s)",
        ours["generation"]["completion_tokens"],
        f(&ours["generation"]["seconds"])
    );
    println!("    llama.cpp one by one          {seq:8.1} tokens/s   ratio {:.2}×", herd_gen / seq);
    let (mut generation_ratio, mut generation_ceiling) = (f64::NAN, f64::NAN);
    let generation_macs =
        f(&ours["generation"]["kernels_prefill"]["int8_macs"]) + f(&ours["generation"]["kernels_decode"]["int8_macs"]);
    match theirs["generation_parallel"]["seconds"].as_f64() {
        Some(s) => {
            let par = f(&theirs["generation_parallel"]["completion_tokens"]) / s;
            generation_ratio = herd_gen / par;
            generation_ceiling = f(&ours["generation"]["completion_tokens"]) / (generation_macs / peak) / par;
            println!("    llama.cpp parallel sequences  {par:8.1} tokens/s   ratio {generation_ratio:.2}×");
            println!(
                "    ceiling {generation_ceiling:.2}× (herd's {:.0} G int8 multiply-adds alone take {:.1} s at this path's peak)",
                generation_macs / 1e9,
                generation_macs / peak
            );
            let prefill = f(&theirs["generation_parallel"]["prefill_seconds"]);
            println!("    where llama.cpp's time goes: prompts {prefill:.1} s, decoding {:.1} s", s - prefill);
        }
        None => println!("    llama.cpp parallel sequences  not measured: {}", theirs["generation_parallel"]["error"]),
    }
    let (total, prefill, sampling) = (
        f(&ours["generation"]["seconds"]),
        f(&ours["generation"]["prefill_seconds"]),
        f(&ours["generation"]["sampling_seconds"]),
    );
    println!(
        "    where herd's time goes: prompts and first token {prefill:.1} s, decoding {:.1} s, of which sampling {sampling:.1} s",
        total - prefill
    );
    phase("prompts and first token", prefill, &ours["generation"]["kernels_prefill"], machine, "compute");
    phase("decoding", total - prefill, &ours["generation"]["kernels_decode"], machine, "memory");
    let grammar = &ours["generation"]["grammar"];
    let (sequences, steps) = (f(&grammar["sequences"]), f(&grammar["steps"]));
    // A decode step of the batch: the decoding time over the steps of its longest sequence.
    let step_s = (total - prefill) / (f(&ours["generation"]["completion_tokens"]) / sequences).max(1.0);
    let per_step = f(&grammar["seconds"]) / (steps / sequences);
    println!(
        "    grammar masking (the allocation schema the quick study decodes under, measured alone): {:.1} ms a step for {sequences} sequences = {:.0} % of a decode step ({:.0} ms); {:.0} % of its {steps} steps leave one token; its engine built in {:.1} s",
        1e3 * per_step,
        100.0 * per_step / step_s,
        1e3 * step_s,
        100.0 * f(&grammar["forced_steps"]) / steps,
        f(&grammar["engine_seconds"])
    );
    let constrained = &ours["generation"]["constrained"];
    let (skipping, plain, prompts) =
        (f(&constrained["seconds"]), f(&constrained["plain_seconds"]), f(&constrained["prompts_seconds"]));
    println!(
        "\n(c) the same society under its allocation schema, up to {} tokens each as the quick study (herd only): {} tokens, {} of them forced by the grammar, the longest {}",
        constrained["max_tokens"],
        constrained["completion_tokens"],
        constrained["forced_tokens"],
        constrained["longest"]
    );
    println!(
        "    plain path (every token through the output layer and the draw) {plain:6.1} s, of which decoding {:.1} s ({:.0} ms a step)",
        plain - prompts,
        1e3 * (plain - prompts) / f(&constrained["longest"]).max(1.0)
    );
    println!(
        "    forced tokens without either (herd's default)               {skipping:6.1} s, of which decoding {:.1} s ({:.0} ms a step); the same samples",
        skipping - prompts,
        1e3 * (skipping - prompts) / f(&constrained["longest"]).max(1.0)
    );
    println!(
        "    ratio {:.2}× in all, {:.2}× in decoding (the prompts, {prompts:.1} s, timed once apart)",
        plain / skipping,
        (plain - prompts) / (skipping - prompts)
    );
    let society_macs = f(&constrained["kernels"]["int8_macs"]);
    let society_floor = society_macs / peak;
    println!(
        "    at this path's int8 peak the society's {:.0} G multiply-adds alone take {society_floor:.1} s ({:.0} % of the {skipping:.1} s it took); \
         the quick minimal-group study runs {society_passes} society passes on this model, about {:.1} min at that peak, {:.1} min at this \
         run's pace (this society has visible labels; the hidden-label half's prompts are about 30 % shorter)",
        society_macs / 1e9,
        100.0 * society_floor / skipping,
        society_passes as f64 * society_floor / 60.0,
        society_passes as f64 * skipping / 60.0
    );
    Ok(PathRatios { scoring: scoring_ratio, generation: generation_ratio, scoring_ceiling, generation_ceiling })
}
