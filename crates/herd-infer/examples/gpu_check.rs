//! The GPU check that `cargo xtask cuda-build` packs (with `xtask/gpu-check.sh`) for a GPU machine with
//! no cargo: CUDA against CPU on the same inputs, in one process.
//!
//!     gpu_check prepare DIR
//!     gpu_check check --dir DIR [--device cuda[:N]|cpu] [--model ALIAS[=FILE]]… [--json FILE]
//!                     [--compare-prompts N] [--max-tokens N]
//!
//! `prepare` (run where the repository is) writes DIR/tiny/ (the tiny random checkpoints of every family
//! herd runs: llama, qwen2, qwen3, phi3; qwen3_vl, qwen2_vl and qwen2_5_vl with their image) and
//! DIR/prompts/ (the 200 conformity prompts and the 20-decider society that `cargo xtask bench infer` runs).
//!
//! `check` compares, for each tiny checkpoint in f32 and in bf16, the logits on the device with those on
//! the CPU (every position of a 12-token pass, then 4 tokens decoded one by one through the KV cache; the
//! VL models with and without their image), and LocalModel's answer probabilities on the tiny llama. For each
//! `--model` whose GGUF file is present (the herd cache, or FILE) it compares answer probabilities of the
//! first N conformity prompts with f32 weights on both sides, then times scoring all 200 prompts and
//! generating for the society on the device. Exit status: 0 all within tolerance, 1 a mismatch, 2 the
//! check could not run (no device, missing inputs). `--device cpu` compares the CPU with itself: every
//! step runs, which shows the check works on a machine without a GPU.

use candle_core::{DType, Device, Tensor};
use herd_backend::{Backend, GenerateRequest, ModelFiles, ModelRegistry, SamplingParams, WeightChoice};
use herd_infer::{DeviceChoice, LoadOptions, LocalModel};
use herd_infer::{WeightFormat, causal_mask, load_hf_folder};
use herd_prompts::{ChatPrompt, Message, Part, Role};
use herd_test_support::tiny_text as tiny;
use herd_vision::VlFamily;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Largest |Δlogit| between device and CPU in f32, relative to max(1, largest |logit|). Both sides
/// compute in f32 (candle 0.11 keeps cuBLAS off TF32 and reduced-precision reductions by default), so
/// they should differ only by summation order (cuBLAS against gemm, herd-kernels' CPU attention against
/// candle's matrix products): of the order of 1e-6 of the logits; a wrong kernel, mask or position
/// moves them by 0.1 or more.
const F32_TOL: f32 = 5e-4;
/// The same in bf16. Every operation rounds its output to 8 significant bits (0.4 %), and one value
/// rounded the other way on one side propagates: on CPU, bf16 logits differ from f32 ones by 1.0–1.6 %
/// of the largest logit on these checkpoints (`prepare` prints it: 0.037 of 3.5 for llama, 0.25 of 19.1
/// for qwen3), and the device's bf16 should differ from the CPU's bf16 by that order (cuBLAS accumulates
/// bf16 products in f32). 0.06 is about four times that and still fails a wrong kernel.
const BF16_TOL: f32 = 0.06;
/// Largest |Δp| of an answer probability between device and CPU for the real models, with f32 weights
/// dequantised from the GGUF file on both: a difference in the 5th decimal is round-off, one in the 2nd
/// is a bug.
const P_TOL: f64 = 2e-3;
/// Tokens decoded one at a time after the first pass in the tiny logit checks.
const DECODED: usize = 4;

/// The vision-language families herd runs, each as a tiny checkpoint.
const VL_FAMILIES: [VlFamily; 5] =
    [VlFamily::Qwen3Vl, VlFamily::Qwen2Vl, VlFamily::Qwen2_5Vl, VlFamily::Gemma3, VlFamily::Mistral3];

const MODELS_TOML: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/models.toml"));

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("prepare") if args.len() == 2 => prepare(Path::new(&args[1])).map(|()| ExitCode::SUCCESS),
        Some("check") => Options::parse(&args[1..]).and_then(|o| check(&o)),
        _ => Err(USAGE.into()),
    };
    result.unwrap_or_else(|e| {
        eprintln!("gpu_check: {e}");
        ExitCode::from(2)
    })
}

const USAGE: &str = "usage: gpu_check prepare DIR\n       gpu_check check --dir DIR [--device cuda[:N]|cpu] \
                     [--model ALIAS[=FILE]]... [--json FILE] [--compare-prompts N] [--max-tokens N]";

struct Options {
    dir: PathBuf,
    device: String,
    models: Vec<(String, Option<PathBuf>)>,
    json: Option<PathBuf>,
    compare_prompts: usize,
    max_tokens: usize,
}

impl Options {
    fn parse(args: &[String]) -> AnyResult<Self> {
        let mut o = Options {
            dir: PathBuf::new(),
            device: "cuda".into(),
            models: Vec::new(),
            json: None,
            compare_prompts: 40,
            max_tokens: 64,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
            match flag.as_str() {
                "--dir" => o.dir = PathBuf::from(value()?),
                "--device" => o.device = value()?.clone(),
                "--model" => {
                    let v = value()?;
                    o.models.push(match v.split_once('=') {
                        Some((alias, file)) => (alias.to_string(), Some(PathBuf::from(file))),
                        None => (v.clone(), None),
                    });
                }
                "--json" => o.json = Some(PathBuf::from(value()?)),
                "--compare-prompts" => o.compare_prompts = value()?.parse()?,
                "--max-tokens" => o.max_tokens = value()?.parse()?,
                other => return Err(format!("unknown argument `{other}`\n{USAGE}").into()),
            }
        }
        if o.dir.as_os_str().is_empty() {
            return Err(format!("--dir is required\n{USAGE}").into());
        }
        Ok(o)
    }
}

// ---------------------------------------------------------------------------------------------
// prepare

fn prepare(out: &Path) -> AnyResult<()> {
    let tiny_dir = out.join("tiny");
    tiny::write_all(&tiny_dir, tiny::SEED)?;
    let vl = tiny_dir.join("vl");
    for family in VL_FAMILIES {
        let dir = vl.join(herd_test_support::tiny_vl::folder(family.model_type()));
        herd_test_support::tiny_vl::write_checkpoint(
            &dir,
            family.model_type(),
            herd_test_support::tiny_vl::SEED,
            &herd_test_support::tiny_vl::DEFAULT,
        )?;
    }
    herd_test_support::tiny_vl::image().save(vl.join("image.png"))?;
    let prompts = out.join("prompts");
    std::fs::create_dir_all(&prompts)?;
    let scoring = conformity_prompts(200)?;
    std::fs::write(prompts.join("scoring.jsonl"), scoring.join("\n") + "\n")?;
    let society = society_prompts(20)?;
    std::fs::write(prompts.join("society.jsonl"), society.join("\n") + "\n")?;
    println!("wrote {} (tiny checkpoints, {} scoring and {} society prompts)", out.display(), 200, society.len());
    // The bf16 noise floor that BF16_TOL is set against: CPU bf16 against CPU f32.
    for family in tiny::FAMILIES {
        let dir = tiny_dir.join(family.name());
        let f32s = text_logits(&dir, &Device::Cpu, DType::F32)?;
        let bf16s = text_logits(&dir, &Device::Cpu, DType::BF16)?;
        let (d, scale) = compare_rows(&bf16s, &f32s);
        println!("  {:<8} CPU bf16 vs CPU f32: max |Δlogit| {:.2e} of scale {scale:.2}", family.name(), d);
    }
    Ok(())
}

fn data_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(rel)
}

/// `herd prompts --experiment data/experiments/conformity.toml --family group_size --modality text
/// --limit 2000 --jsonl`, sorted by image and N, the first `count`: what `cargo xtask bench infer` scores.
fn conformity_prompts(count: usize) -> AnyResult<Vec<String>> {
    use herd_design::{Experiment, Task, UnitPlan, expand, load_experiment};
    let file = load_experiment(&data_file("experiments/conformity.toml"))?;
    let Experiment::Conformity(exp) = &file.experiment else {
        return Err("conformity.toml is not a conformity experiment".into());
    };
    let prompter = herd_prompts::ConformityPrompter::load(&file, exp)?;
    let mut pools: std::collections::BTreeMap<Task, herd_stimuli::ImagePools> = Default::default();
    let mut lines = Vec::new();
    for unit in expand(&file.experiment).into_iter().filter(|u| u.key.cell.family == "group_size") {
        let UnitPlan::Conformity(trial) = &unit.plan else { continue };
        if lines.len() >= 2000 {
            break;
        }
        if let std::collections::btree_map::Entry::Vacant(e) = pools.entry(trial.task) {
            e.insert(herd_stimuli::ImagePools::preview(exp, trial.task)?);
        }
        let Some(image) = pools[&trial.task].select(&unit.key, trial) else { continue };
        let plan = prompter.plan(&unit.key, trial, image.correct)?;
        let prompt = prompter.render_plan(trial, &plan, image, herd_prompts::Modality::Text)?;
        let line = json!({"unit": unit.key.id(), "image": image.id, "n": trial.n, "messages": prompt.messages});
        lines.push((image.id.clone(), trial.n, line.to_string()));
    }
    lines.sort();
    Ok(lines.into_iter().take(count).map(|(_, _, l)| l).collect())
}

/// The first `count` deciders of data/experiments/minimal-group.quick.toml (one society).
fn society_prompts(count: usize) -> AnyResult<Vec<String>> {
    use herd_design::{Experiment, UnitPlan, expand, load_experiment};
    use herd_prompts::{AllocationBank, GroupNames, allocation_prompts, draw_society};
    let file = load_experiment(&data_file("experiments/minimal-group.quick.toml"))?;
    let Experiment::MinimalGroup(exp) = &file.experiment else {
        return Err("minimal-group.quick.toml is not a minimal-group experiment".into());
    };
    let bank = AllocationBank::load(&file.resolve(&exp.prompts.bank))?;
    let names = GroupNames::load(&file.resolve(&exp.society.group_names))?;
    let mut lines = Vec::new();
    for unit in expand(&file.experiment) {
        let UnitPlan::Society(run) = &unit.plan else { continue };
        let society = draw_society(exp, &unit.key, run, &names);
        for decider in allocation_prompts(exp, &bank, &society, &unit.key, run)? {
            if lines.len() == count {
                return Ok(lines);
            }
            lines.push(
                json!({"unit": unit.key.id(), "decider": decider.decider, "messages": decider.prompt.messages})
                    .to_string(),
            );
        }
    }
    Ok(lines)
}

/// Reads prompts in `herd prompts --jsonl`'s form (text parts only), keeping each line's `image`.
fn read_prompts(path: &Path) -> AnyResult<Vec<(Option<String>, ChatPrompt)>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)?;
        let messages = v["messages"]
            .as_array()
            .ok_or("a prompt line without messages")?
            .iter()
            .map(|m| Message {
                role: match m["role"].as_str() {
                    Some("system") => Role::System,
                    Some("assistant") => Role::Assistant,
                    _ => Role::User,
                },
                content: m["content"]
                    .as_array()
                    .map(|parts| {
                        parts.iter().map(|p| Part::Text { text: p["text"].as_str().unwrap_or("").into() }).collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        out.push((v["image"].as_str().map(str::to_string), ChatPrompt { messages }));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// check

/// One comparison's outcome, printed as a line and kept for the JSON report.
struct Report {
    checks: Vec<Value>,
    failed: usize,
}

impl Report {
    fn record(&mut self, name: &str, max_diff: f64, scale: f64, tol: f64, extra: Value) {
        let pass = max_diff <= tol * scale;
        if !pass {
            self.failed += 1;
        }
        println!(
            "{} {name:<44} max |Δ| {max_diff:.2e} (tolerance {:.1e} × scale {scale:.2})",
            if pass { "ok  " } else { "FAIL" },
            tol
        );
        let mut v = json!({"name": name, "max_abs_diff": max_diff, "scale": scale, "tolerance": tol, "pass": pass});
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        self.checks.push(v);
    }

    /// A check that fails with an error (an operation the device lacks, say) is a failure of its own,
    /// and the others still run.
    fn failure(&mut self, name: &str, e: &dyn std::fmt::Display) {
        let first = e.to_string().lines().next().unwrap_or_default().to_string();
        self.failed += 1;
        println!("FAIL {name:<44} error: {first}");
        self.checks.push(json!({"name": name, "error": e.to_string(), "pass": false}));
    }

    /// Runs `compare` (max |Δ|, scale, details) and records it against `tol`.
    fn run(&mut self, name: &str, tol: f64, compare: impl FnOnce() -> AnyResult<(f64, f64, Value)>) {
        match compare() {
            Ok((d, scale, extra)) => self.record(name, d, scale, tol, extra),
            Err(e) => self.failure(name, &e),
        }
    }
}

fn check(o: &Options) -> AnyResult<ExitCode> {
    let choice: DeviceChoice = o.device.parse()?;
    let device = match choice.open() {
        Ok(d) => d,
        Err(e) => {
            // candle appends a backtrace where RUST_BACKTRACE is set: the first line says what failed.
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            let stub =
                if first.contains("STUB_LIBRARY") { " (the stub driver library: no NVIDIA driver here)" } else { "" };
            let why = format!("cannot open device `{}`: {first}{stub}", o.device);
            if let Some(path) = &o.json {
                std::fs::write(path, serde_json::to_string_pretty(&json!({"device": o.device, "error": why}))?)?;
            }
            return Err(why.into());
        }
    };
    let tiny_dir = o.dir.join("tiny");
    if !tiny_dir.join("inputs.json").is_file() {
        return Err(format!(
            "{} has no tiny checkpoints; run `gpu_check prepare {}` first",
            tiny_dir.display(),
            o.dir.display()
        )
        .into());
    }
    println!("device {} (CPU is the reference; {} threads)", o.device, rayon::current_num_threads());
    let start = Instant::now();
    let mut report = Report { checks: Vec::new(), failed: 0 };
    // Usage errors (an unknown alias, missing prompts) before any check runs.
    let registry = ModelRegistry::parse(Path::new("data/models.toml"), MODELS_TOML)?;
    for (alias, _) in &o.models {
        registry.get(alias)?;
    }
    let scoring = read_prompts(&o.dir.join("prompts/scoring.jsonl"))?;
    let society = read_prompts(&o.dir.join("prompts/society.jsonl"))?;

    for family in tiny::FAMILIES {
        let dir = tiny_dir.join(family.name());
        for (dtype, tol) in [(DType::F32, F32_TOL), (DType::BF16, BF16_TOL)] {
            report.run(&format!("tiny {} {} logits", family.name(), dtype.as_str()), tol as f64, || {
                let cpu = text_logits(&dir, &Device::Cpu, dtype)?;
                let dev = text_logits(&dir, &device, dtype)?;
                let (d, scale) = compare_rows(&dev, &cpu);
                Ok((d as f64, scale as f64, json!({"rows": cpu.len()})))
            });
        }
    }
    let vl_dir = tiny_dir.join("vl");
    for family in VL_FAMILIES {
        for (dtype, tol) in [(DType::F32, F32_TOL), (DType::BF16, BF16_TOL)] {
            let name = format!("tiny {} {} logits (image, text)", family.model_type(), dtype.as_str());
            report.run(&name, tol as f64, || {
                let cpu = vl_logits(&vl_dir, family, &Device::Cpu, dtype)?;
                let dev = vl_logits(&vl_dir, family, &device, dtype)?;
                let (d, scale) = compare_rows(&dev, &cpu);
                Ok((d as f64, scale as f64, json!({"rows": cpu.len()})))
            });
        }
    }
    if let Err(e) = tiny_local_model(&tiny_dir.join("llama"), choice, &mut report) {
        report.failure("tiny llama LocalModel", &e);
    }

    let mut models = Vec::new();
    for (alias, file) in &o.models {
        let entry = registry.get(alias)?;
        let files = match file {
            Some(f) if f.is_file() => Ok(ModelFiles::Gguf(f.clone())),
            Some(f) => Err(format!("{} does not exist", f.display())),
            None => herd_backend::locate_model(entry).map_err(|e| e.to_string()),
        };
        let files = match files {
            Ok(files) => files,
            Err(why) => {
                println!("skip {alias}: NOT CHECKED, its file is not here ({why})");
                models.push(json!({"alias": alias, "checked": false, "why": why}));
                continue;
            }
        };
        match real_model(entry, &files, choice, &scoring, &society, o, &mut report) {
            Ok(v) => models.push(v),
            Err(e) => {
                report.failure(&format!("{alias} on {}", o.device), &e);
                models.push(json!({"alias": alias, "checked": true, "error": e.to_string()}));
            }
        }
    }

    let seconds = start.elapsed().as_secs_f64();
    let pass = report.failed == 0;
    let judged = report.checks.iter().filter(|c| c.get("pass").is_some()).count();
    let summary = json!({
        "device": o.device,
        "cuda_compute_cap_built": option_env!("CUDA_COMPUTE_CAP"),
        "threads": rayon::current_num_threads(),
        "tolerances": {"f32_logits": F32_TOL, "bf16_logits": BF16_TOL, "answer_p": P_TOL,
                       "rule": "max |device - cpu| <= tolerance * max(1, max |cpu|) (answer_p: scale 1)"},
        "checks": report.checks,
        "models": models,
        "seconds": seconds,
        "failed": report.failed,
        "pass": pass,
    });
    if let Some(path) = &o.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)? + "\n")?;
    }
    let skipped: Vec<&str> = summary["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["checked"] == false)
        .filter_map(|m| m["alias"].as_str())
        .collect();
    if !skipped.is_empty() {
        println!("NOT CHECKED (no model file here): {}", skipped.join(", "));
    }
    println!("{} passed, {} failed ({seconds:.1} s)", judged - report.failed, report.failed);
    Ok(if pass { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Largest |a - b| over all rows (non-finite counts as infinite) and the scale max(1, max |b|).
fn compare_rows(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f32, f32) {
    assert_eq!(a.len(), b.len(), "row counts differ");
    let mut d = 0f32;
    let mut scale = 1f32;
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len(), "row lengths differ");
        for (p, q) in x.iter().zip(y) {
            d = d.max(if p.is_finite() && q.is_finite() { (p - q).abs() } else { f32::INFINITY });
            scale = scale.max(q.abs());
        }
    }
    (d, scale)
}

/// The logits of every position of a 12-token pass, then of 4 tokens decoded one at a time after the
/// first 8 (the KV cache's in-place writes and single-row products).
fn text_logits(dir: &Path, device: &Device, dtype: DType) -> AnyResult<Vec<Vec<f32>>> {
    let dec = load_hf_folder(dir, device, dtype, WeightFormat::Dense)?;
    let tokens = &tiny::FULL;
    let run = |toks: &[u32], past: usize, cache: &mut herd_infer::KvCache| -> AnyResult<Vec<Vec<f32>>> {
        let t = toks.len();
        let input = Tensor::new(toks, device)?.reshape((1, t))?;
        let positions = Tensor::arange(past as u32, (past + t) as u32, device)?.reshape((1, t))?;
        let mask = if t > 1 { Some(causal_mask(t, past, device)?) } else { None };
        let hidden = dec.forward(&input, &positions, mask.as_ref(), cache)?;
        Ok(dec.logits(&hidden.reshape((t, ()))?)?.to_vec2()?)
    };
    let mut rows = run(tokens, 0, &mut dec.new_cache())?;
    let first = tokens.len() - DECODED;
    let mut cache = dec.new_cache();
    run(&tokens[..first], 0, &mut cache)?;
    for i in first..tokens.len() {
        rows.extend(run(&tokens[i..=i], i, &mut cache)?);
    }
    Ok(rows)
}

/// A tiny VL checkpoint's next-token logits for its prompt with the image, and without an image.
fn vl_logits(dir: &Path, family: VlFamily, device: &Device, dtype: DType) -> AnyResult<Vec<Vec<f32>>> {
    use herd_test_support::tiny_vl::{folder, prompt, text_prompt};
    let model = herd_vision::VlModel::load(&dir.join(folder(family.model_type())), device, dtype)?;
    let prepared = model.preprocess(&image::open(dir.join("image.png"))?)?;
    let ids = model.encode_prompt(prompt(family.model_type()), Some(&prepared))?;
    let with_image = model.next_token_logits(&ids, Some(&prepared))?.to_dtype(DType::F32)?.to_vec1()?;
    let text_only = model
        .next_token_logits(&model.encode(text_prompt(family.model_type()))?, None)?
        .to_dtype(DType::F32)?
        .to_vec1()?;
    Ok(vec![with_image, text_only])
}

/// A registry entry for a tiny checkpoint folder, so LocalModel loads it as it loads a real model.
fn tiny_entry(alias: &str, family: &str, dir: &Path) -> AnyResult<herd_backend::ModelEntry> {
    let text = format!(
        "default = \"{alias}\"\n[models.{alias}]\ndescription = \"tiny random checkpoint\"\nfamily = \"{family}\"\n\
         modality = \"text\"\ndtype = \"f32\"\nsource = {{ path = {} }}\n",
        serde_json::to_string(&dir.to_string_lossy())?
    );
    Ok(ModelRegistry::parse(Path::new("gpu_check"), &text)?.get(alias)?.clone())
}

fn load_options(device: DeviceChoice) -> LoadOptions {
    // Exact: f32 weights on both sides (a GGUF file dequantised), so CPU and device compute the same thing.
    LoadOptions { device, weights: Some(WeightChoice::Exact), ..Default::default() }
}

/// Short prompts sharing a prefix (the packed prefix-tree scoring path) in the tiny vocabulary.
fn tiny_prompts() -> Vec<ChatPrompt> {
    let words = ["red", "blue", "green", "the reference", "which line", "longer"];
    words
        .iter()
        .enumerate()
        .map(|(i, w)| ChatPrompt {
            messages: vec![
                Message { role: Role::System, content: vec![Part::Text { text: "answer a or b .".into() }] },
                Message {
                    role: Role::User,
                    content: vec![Part::Text {
                        text: format!("which line matches the reference ? {w} {} answer a or b .", words[(i + 2) % 6]),
                    }],
                },
            ],
        })
        .collect()
}

/// LocalModel on the tiny llama: answer probabilities of packed prompts on both sides, and greedy
/// generation (reported, not judged: a near tie may go either way).
fn tiny_local_model(dir: &Path, device: DeviceChoice, report: &mut Report) -> AnyResult<()> {
    let entry = tiny_entry("tiny-llama", "llama", dir)?;
    let files = ModelFiles::HfFolder(dir.to_path_buf());
    let mut cpu = LocalModel::load(&entry, &files, &load_options(DeviceChoice::Cpu))?;
    let mut dev = LocalModel::load(&entry, &files, &load_options(device))?;
    let prompts = tiny_prompts();
    let answers = vec![vec!["a".to_string(), "b".to_string()]; prompts.len()];
    let score = |m: &LocalModel| -> AnyResult<Vec<f64>> {
        let tokens = prompts.iter().map(|p| m.prompt_tokens(p)).collect::<Result<Vec<_>, _>>()?;
        let results = m.score_tokens(&tokens, &answers)?;
        Ok(results.iter().flat_map(|r| r.answers.values().map(|a| a.p)).collect())
    };
    let (a, b) = (score(&dev)?, score(&cpu)?);
    let d = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    report.record("tiny llama LocalModel answer p (packed)", d, 1.0, P_TOL, json!({"prompts": prompts.len()}));
    let requests: Vec<GenerateRequest> = prompts
        .iter()
        .map(|p| {
            GenerateRequest::new(
                p.clone(),
                SamplingParams {
                    temperature: Some(0.0),
                    top_p: None,
                    top_k: None,
                    repetition_penalty: None,
                    seed: 0,
                    max_tokens: 8,
                    stop: vec![],
                },
            )
        })
        .collect();
    let (ga, gb) = (dev.generate(&requests)?, cpu.generate(&requests)?);
    let same = ga.iter().zip(&gb).filter(|(x, y)| x.text == y.text).count();
    println!("info tiny llama greedy generation: {same} of {} sequences identical on both sides", ga.len());
    report.checks.push(json!({"name": "tiny llama greedy generation (info)", "identical": same, "of": ga.len()}));
    Ok(())
}

/// Groups consecutive prompts of one image (the runner's scoring groups) as token sequences.
fn groups(model: &LocalModel, prompts: &[(Option<String>, ChatPrompt)]) -> AnyResult<Vec<Vec<Vec<u32>>>> {
    let mut groups: Vec<Vec<Vec<u32>>> = Vec::new();
    let mut last: Option<&Option<String>> = None;
    for (image, prompt) in prompts {
        if last != Some(image) {
            groups.push(Vec::new());
            last = Some(image);
        }
        groups.last_mut().ok_or("no group")?.push(model.prompt_tokens(prompt)?);
    }
    Ok(groups)
}

/// Answer probabilities of every prompt of `groups`, and the seconds it took.
fn score_groups(model: &LocalModel, groups: &[Vec<Vec<u32>>]) -> AnyResult<(Vec<f64>, f64)> {
    let answers = vec!["A".to_string(), "B".to_string()];
    let start = Instant::now();
    let mut p = Vec::new();
    for group in groups {
        for r in model.score_tokens(group, &vec![answers.clone(); group.len()])? {
            p.extend(r.answers.values().map(|a| a.p));
        }
    }
    Ok((p, start.elapsed().as_secs_f64()))
}

/// A real model: answer probabilities on the device against the CPU on the first prompts (f32 weights on
/// both), then scoring and society generation throughput on the device.
fn real_model(
    entry: &herd_backend::ModelEntry,
    files: &ModelFiles,
    device: DeviceChoice,
    scoring: &[(Option<String>, ChatPrompt)],
    society: &[(Option<String>, ChatPrompt)],
    o: &Options,
    report: &mut Report,
) -> AnyResult<Value> {
    let alias = &entry.alias;
    let t = Instant::now();
    let mut dev = LocalModel::load(entry, files, &load_options(device))?;
    let dev_load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let cpu = LocalModel::load(entry, files, &load_options(DeviceChoice::Cpu))?;
    let cpu_load_s = t.elapsed().as_secs_f64();
    let all = groups(&dev, scoring)?;
    // Whole groups up to the requested number of prompts.
    let mut compared = Vec::new();
    for g in &all {
        if compared.iter().map(Vec::len).sum::<usize>() >= o.compare_prompts {
            break;
        }
        compared.push(g.clone());
    }
    let n_compared: usize = compared.iter().map(Vec::len).sum();
    if n_compared == 0 {
        return Err("prompts/scoring.jsonl holds no prompt".into());
    }
    // The first call on a device loads (and on a newer GPU JIT-compiles) its kernels: not timed.
    score_groups(&dev, &compared[..1])?;
    let (p_dev, dev_s) = score_groups(&dev, &compared)?;
    let (p_cpu, cpu_s) = score_groups(&cpu, &compared)?;
    drop(cpu);
    let d = p_dev.iter().zip(&p_cpu).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    report.record(
        &format!("{alias} answer p, {n_compared} prompts (f32)"),
        d,
        1.0,
        P_TOL,
        json!({"cpu_seconds": cpu_s, "device_seconds": dev_s}),
    );

    let (_, scoring_s) = score_groups(&dev, &all)?;
    let prompt_tokens: usize = all.iter().flatten().map(Vec::len).sum();
    let requests: Vec<GenerateRequest> = society
        .iter()
        .enumerate()
        .map(|(i, (_, prompt))| {
            GenerateRequest::new(
                prompt.clone(),
                SamplingParams {
                    temperature: Some(0.7),
                    top_p: Some(1.0),
                    top_k: Some(0),
                    repetition_penalty: None,
                    seed: i as u64,
                    max_tokens: o.max_tokens,
                    stop: vec![],
                },
            )
        })
        .collect();
    let t = Instant::now();
    let generations = dev.generate(&requests)?;
    let generation_s = t.elapsed().as_secs_f64();
    let completion: usize = generations.iter().map(|g| g.completion_tokens).sum();
    println!(
        "perf {alias}: load {dev_load_s:.1} s (CPU {cpu_load_s:.1} s); scoring {} prompts ({prompt_tokens} tokens) in \
         {scoring_s:.2} s = {:.1} prompts/s (the first {n_compared}: {dev_s:.2} s here, {cpu_s:.2} s on CPU); society of \
         {} deciders, {completion} tokens in {generation_s:.2} s = {:.1} tokens/s",
        scoring.len(),
        scoring.len() as f64 / scoring_s,
        requests.len(),
        completion as f64 / generation_s
    );
    Ok(json!({
        "alias": alias, "checked": true, "file": files.path(),
        "load_seconds": {"device": dev_load_s, "cpu": cpu_load_s},
        "compare": {"prompts": n_compared, "max_abs_diff_p": d, "device_seconds": dev_s, "cpu_seconds": cpu_s},
        "scoring": {"prompts": scoring.len(), "prompt_tokens": prompt_tokens, "seconds": scoring_s,
                    "prompts_per_s": scoring.len() as f64 / scoring_s},
        "generation": {"sequences": requests.len(), "max_tokens": o.max_tokens, "completion_tokens": completion,
                       "seconds": generation_s, "tokens_per_s": completion as f64 / generation_s},
    }))
}
