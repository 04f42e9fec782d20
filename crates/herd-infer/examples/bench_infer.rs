//! herd's side of `cargo xtask bench infer`: scoring throughput on conformity prompts that share
//! prefixes, and generation throughput for one 20-decider society, with where the time goes (load
//! phases; per phase the int8 products, attention and the rest; sampling and the allocation grammar's
//! masking alone) and this machine's bounds (memory read bandwidth, int8 multiply-add peak) measured in
//! the same process. Prints one JSON line.
//!
//! cargo run --release -p herd-infer --example bench_infer -- GGUF SCORING.jsonl SOCIETY.jsonl MAX_TOKENS

use herd_backend::{Backend, GenerateRequest, ModelFiles, ModelRegistry, SamplingParams};
use herd_infer::{LoadOptions, LocalModel, PreparedStatus};
use herd_kernels::{KernelStats, kernel_stats};
use herd_prompts::{ChatPrompt, Message, Part, Role};
use rayon::prelude::*;
use serde_json::Value;
use std::path::Path;
use std::time::Instant;

// As herd's binary does (see herd-cli's main).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Reads `herd prompts --jsonl` output.
fn read_prompts(path: &str) -> Vec<(Value, ChatPrompt)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            let messages = v["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| {
                    let role = match m["role"].as_str() {
                        Some("system") => Role::System,
                        Some("assistant") => Role::Assistant,
                        _ => Role::User,
                    };
                    let content = m["content"]
                        .as_array()
                        .expect("parts")
                        .iter()
                        .map(|p| Part::Text { text: p["text"].as_str().unwrap_or("").to_string() })
                        .collect();
                    Message { role, content }
                })
                .collect();
            (v, ChatPrompt { messages })
        })
        .collect()
}

/// Bytes per second that every thread of rayon's pool reads together from a buffer far larger than the
/// caches (summing 64-bit words; the best of three passes).
fn memory_read_bandwidth() -> f64 {
    let words: Vec<u64> = (0..(512u64 << 20) / 8).collect();
    let mut best = 0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let sum: u64 = words
            .par_chunks(1 << 16)
            .map(|c| c.iter().fold(0u64, |a, &w| a.wrapping_add(w)))
            .reduce(|| 0, u64::wrapping_add);
        std::hint::black_box(sum);
        best = best.max((words.len() * 8) as f64 / start.elapsed().as_secs_f64());
    }
    best
}

/// The first core's clock as the kernel reports it (`cpu MHz` in /proc/cpuinfo), if it does.
fn cpu_mhz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse().ok()
}

fn kernels_json(k: KernelStats) -> Value {
    serde_json::json!({"int8_seconds": k.int8_seconds, "int8_macs": k.int8_macs, "int8_weight_bytes": k.int8_weight_bytes, "int8_calls": k.int8_calls,
                       "attention_seconds": k.attention_seconds, "attention_kv_bytes": k.attention_kv_bytes})
}

fn main() {
    herd_kernels::keep_freed_pages();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [alias, gguf, scoring, society, max_tokens] = args.as_slice() else {
        eprintln!("usage: bench_infer ALIAS GGUF SCORING.jsonl SOCIETY.jsonl MAX_TOKENS");
        std::process::exit(2);
    };
    let max_tokens: usize = max_tokens.parse().expect("MAX_TOKENS is a number");
    let registry = ModelRegistry::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/models.toml")))
        .expect("registry");
    let entry = registry.get(alias).expect("an alias of data/models.toml");
    let machine = serde_json::json!({
        "threads": rayon::current_num_threads(),
        "memory_bytes_per_s": memory_read_bandwidth(),
        "int8_peak_macs_per_s": herd_kernels::int8_peak_macs_per_second(),
        "cpu_path": herd_kernels::CpuPath::active().map(|p| p.name()).unwrap_or("invalid HERD_CPU_PATH"),
        "cpu_mhz": cpu_mhz(),
    });
    // The load a `herd score` call makes: with the prepared weights in the cache. Where this run had
    // to prepare them first, that load is reported apart and the model loaded again.
    let load = || {
        let start = Instant::now();
        let model =
            LocalModel::load(entry, &ModelFiles::Gguf(gguf.into()), &LoadOptions::default()).expect("model loads");
        (model, start.elapsed().as_secs_f64())
    };
    let (mut model, mut load_s) = load();
    let mut preparing_s = None;
    if !matches!(model.load_report().prepared, PreparedStatus::Read(_) | PreparedStatus::NotUsed) {
        drop(model);
        preparing_s = Some(load_s);
        (model, load_s) = load();
    }
    let report = model.load_report();
    let load_phases: Vec<Value> = report.phases.iter().map(|(p, s)| serde_json::json!([p, s])).collect();
    let prepared = match &report.prepared {
        PreparedStatus::Read(_) => "prepared weights mapped from the cache",
        PreparedStatus::NotUsed => "no prepared weights (not int8 on this CPU)",
        _ => "prepared weights could not be cached",
    };

    // Scoring: consecutive prompts of one image form one group (their shared prefix is computed once).
    let prompts = read_prompts(scoring);
    let mut groups: Vec<Vec<Vec<u32>>> = Vec::new();
    let mut last_image = None;
    let mut prompt_tokens = 0usize;
    for (v, prompt) in &prompts {
        let tokens = model.prompt_tokens(prompt).expect("renders");
        prompt_tokens += tokens.len();
        let image = v["image"].as_str().map(str::to_string);
        if image != last_image || groups.is_empty() {
            groups.push(Vec::new());
            last_image = image;
        }
        groups.last_mut().expect("a group").push(tokens);
    }
    let answers = vec!["A".to_string(), "B".to_string()];
    let before = kernel_stats();
    let start = Instant::now();
    let mut reused = 0usize;
    let mut p_a = Vec::new();
    for group in &groups {
        let results = model.score_tokens(group, &vec![answers.clone(); group.len()]).expect("scores");
        reused += results.iter().map(|r| r.reused_tokens).sum::<usize>();
        p_a.extend(results.iter().map(|r| r.answers["A"].p));
    }
    let scoring_s = start.elapsed().as_secs_f64();
    let scoring_kernels = kernel_stats() - before;
    // Where scoring's time goes: the groups' shared prefixes alone, scored as prompts of their own.
    let start = Instant::now();
    let mut prefix_tokens = 0;
    for group in groups.iter().filter(|g| g.len() > 1) {
        let shared = herd_infer::common_prefix_len(group);
        prefix_tokens += shared;
        model.score_tokens(&[group[0][..shared.max(1)].to_vec()], std::slice::from_ref(&answers)).expect("scores");
    }
    let prefix_s = start.elapsed().as_secs_f64();

    // Generation: one society of 20 deciders as one batch.
    let deciders = read_prompts(society);
    let requests: Vec<GenerateRequest> = deciders
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
                    max_tokens,
                    stop: vec![],
                },
            )
        })
        .collect();
    let before = kernel_stats();
    let start = Instant::now();
    let generations = model.generate(&requests).expect("generates");
    let generation_s = start.elapsed().as_secs_f64();
    let generation_kernels = kernel_stats() - before;
    // Where generation's time goes: the batch's prompts and first token alone, then sampling alone
    // (every step's draw for every live sequence, on logits of the vocabulary's size).
    let first_only: Vec<GenerateRequest> = requests
        .iter()
        .cloned()
        .map(|mut r| {
            r.sampling.max_tokens = 1;
            r
        })
        .collect();
    let before = kernel_stats();
    let start = Instant::now();
    model.generate(&first_only).expect("generates");
    let generation_prefill_s = start.elapsed().as_secs_f64();
    let prefill_kernels = kernel_stats() - before;
    let vocab = model.tokenizer.vocab_size();
    let logits: Vec<f32> = (0..vocab).map(|i| ((i * 7919) % 1000) as f32 / 100.0).collect();
    let draws: usize = generations.iter().map(|g| g.completion_tokens + 1).sum();
    let start = Instant::now();
    for (i, r) in requests.iter().enumerate().cycle().take(draws) {
        std::hint::black_box(
            herd_infer::sample_token(&logits, &r.sampling, &mut herd_infer::sequence_rng(i as u64))
                .expect("finite logits"),
        );
    }
    let sampling_s = start.elapsed().as_secs_f64();
    let completion_tokens: usize = generations.iter().map(|g| g.completion_tokens).sum();
    let grammar = grammar_masking(&model, &deciders);
    let constrained = constrained_generation(&mut model, &deciders, &requests);
    let generation_prompt_tokens: usize = generations.iter().map(|g| g.prompt_tokens).sum();
    println!(
        "{}",
        serde_json::json!({
            "load_s": load_s,
            "load": {"phases": load_phases, "prepared": prepared, "preparing_s": preparing_s},
            "machine": machine,
            "compute": model.compute_path(),
            "scoring": {"prompts": prompts.len(), "groups": groups.len(), "prompt_tokens": prompt_tokens, "reused_tokens": reused, "seconds": scoring_s, "prefix_seconds": prefix_s, "prefix_tokens": prefix_tokens, "p_a": p_a,
                        "kernels": kernels_json(scoring_kernels)},
            "generation": {"sequences": generations.len(), "prompt_tokens": generation_prompt_tokens, "completion_tokens": completion_tokens, "seconds": generation_s, "prefill_seconds": generation_prefill_s, "sampling_seconds": sampling_s,
                           "kernels_prefill": kernels_json(prefill_kernels), "kernels_decode": kernels_json(generation_kernels - prefill_kernels),
                           "grammar": grammar, "constrained": constrained},
        })
    );
}

/// The allocation grammar's cost as its own phase (the quick minimal-group study decodes under it): each
/// decider's matcher walks a whole allocation object, written compactly and tokenised as the model's
/// tokenizer does, masking a vocabulary-sized row of logits before every token, as decoding does, and
/// once more where only end-of-sequence is left. Also counts the steps whose mask leaves one token (what
/// a fast-forward could append without a decode step).
fn grammar_masking(model: &LocalModel, deciders: &[(Value, ChatPrompt)]) -> Value {
    let vocab = model.tokenizer.vocab_size();
    let start = Instant::now();
    let engine = herd_infer::ConstraintEngine::new(&model.tokenizer, vocab).expect("the grammar engine builds");
    let engine_s = start.elapsed().as_secs_f64();
    let (mut steps, mut forced, mut masking_s) = (0usize, 0usize, 0.0f64);
    let mut logits = vec![0f32; vocab];
    for (v, _) in deciders {
        let roster = roster(v);
        // 100 points over the roster, the remainder on the first: a valid allocation of realistic length.
        let share = 100 / roster.len();
        let object: serde_json::Map<String, Value> = roster
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), Value::from(share + if i == 0 { 100 - share * roster.len() } else { 0 })))
            .collect();
        let text = serde_json::to_string(&object).expect("JSON");
        let tokens = model.tokenizer.encode(&text).expect("tokenises");
        let mut matcher = engine.matcher(&herd_backend::allocation_schema(&roster, 100)).expect("the schema compiles");
        for token in tokens.iter().copied().map(Some).chain([None]) {
            logits.fill(0.0);
            let start = Instant::now();
            matcher.mask_logits(&mut logits).expect("masks");
            masking_s += start.elapsed().as_secs_f64();
            steps += 1;
            forced += usize::from(logits.iter().filter(|l| l.is_finite()).count() == 1);
            if let Some(token) = token {
                matcher.accept(token).unwrap_or_else(|e| panic!("the grammar refuses {text}'s tokens: {e}"));
            }
        }
    }
    serde_json::json!({"sequences": deciders.len(), "steps": steps, "forced_steps": forced, "seconds": masking_s, "engine_seconds": engine_s})
}

/// The ids a decider allocates among, from its `herd prompts` line.
fn roster(decider: &Value) -> Vec<String> {
    decider["roster"]
        .as_array()
        .expect("society prompts carry their roster")
        .iter()
        .map(|id| id.as_str().expect("an id").to_string())
        .collect()
}

/// The quick minimal-group study's `max_new_tokens`: room for a whole allocation object.
const STUDY_MAX_TOKENS: usize = 224;

/// The society under its allocation schema, as the minimal-group study decodes it (its token limit too):
/// the plain path (each token through the output layer and the draw), then herd's default, the tokens
/// the grammar forces appended without either, which must sample the same text. A first pass of one
/// token builds the grammar engine and times the prompts, so the rest is decoding.
fn constrained_generation(
    model: &mut LocalModel,
    deciders: &[(Value, ChatPrompt)],
    requests: &[GenerateRequest],
) -> Value {
    let with_limit = |max_tokens: usize| -> Vec<GenerateRequest> {
        requests
            .iter()
            .zip(deciders)
            .map(|(r, (v, _))| {
                let mut r =
                    GenerateRequest { schema: Some(herd_backend::allocation_schema(&roster(v), 100)), ..r.clone() };
                r.sampling.max_tokens = max_tokens;
                r
            })
            .collect()
    };
    let timed = |model: &mut LocalModel, batch: &[GenerateRequest]| {
        let start = Instant::now();
        let generations = model.generate(batch).expect("generates");
        (generations, start.elapsed().as_secs_f64())
    };
    let (_, prompts_seconds) = timed(model, &with_limit(1));
    let constrained = with_limit(STUDY_MAX_TOKENS);
    model.set_skip_forced_logits(false);
    let (plain, plain_seconds) = timed(model, &constrained);
    model.set_skip_forced_logits(true);
    let forced_before = model.forced_tokens_skipped();
    let kernels_before = kernel_stats();
    let (skipping, seconds) = timed(model, &constrained);
    let kernels = kernel_stats() - kernels_before;
    let forced = model.forced_tokens_skipped() - forced_before;
    for (a, b) in skipping.iter().zip(&plain) {
        assert_eq!(a.text, b.text, "skipping the forced tokens' logits changed a sample");
    }
    let completion_tokens: usize = skipping.iter().map(|g| g.completion_tokens).sum();
    let longest = skipping.iter().map(|g| g.completion_tokens).max().unwrap_or(0);
    serde_json::json!({"max_tokens": STUDY_MAX_TOKENS, "seconds": seconds, "plain_seconds": plain_seconds, "prompts_seconds": prompts_seconds,
                       "completion_tokens": completion_tokens, "longest": longest, "forced_tokens": forced,
                       "kernels": kernels_json(kernels)})
}
