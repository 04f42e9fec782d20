//! Choosing the next token from logits as HF `generate` with `do_sample` does: repetition penalty, then
//! temperature, top-k and top-p, with a per-sequence seeded RNG so a sequence draws the same tokens whether
//! it is decoded alone or in a batch. The knobs come resolved from herd-backend's sampling settings.

use crate::error::{InferError, Result};
use herd_backend::{HF_DEFAULT_TEMPERATURE, HF_DEFAULT_TOP_K, HF_DEFAULT_TOP_P, SamplingParams};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use std::collections::HashSet;

pub fn sequence_rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// HF's `RepetitionPenaltyLogitsProcessor` for one sequence: the logit of every token id in the prompt or
/// generated so far is divided by the penalty where positive and multiplied by it where negative, once per
/// id however often it occurs. Kept per sequence, so batched and unbatched decoding penalise alike.
#[derive(Clone, Debug)]
pub struct RepetitionPenalty {
    penalty: f32,
    seen: HashSet<u32>,
    ids: Vec<u32>,
}

impl RepetitionPenalty {
    /// `None` where there is nothing to do (no penalty, or 1), so decoding without one costs nothing.
    pub fn new(penalty: Option<f64>, prompt: &[u32]) -> Result<Option<Self>> {
        let Some(penalty) = penalty.filter(|p| *p != 1.0) else { return Ok(None) };
        if !(penalty.is_finite() && penalty > 0.0) {
            return Err(InferError::Request(format!(
                "repetition_penalty {penalty} is out of range: use a number > 0 (1 is none)"
            )));
        }
        // HF computes in the logits' precision (f32).
        let mut this = RepetitionPenalty { penalty: penalty as f32, seen: HashSet::new(), ids: Vec::new() };
        for &token in prompt {
            this.push(token);
        }
        Ok(Some(this))
    }

    /// Records a token of the sequence.
    pub fn push(&mut self, token: u32) {
        if self.seen.insert(token) {
            self.ids.push(token);
        }
    }

    /// Penalises `logits` in place. Ids beyond the logits (a prompt token outside the output vocabulary)
    /// have no logit to penalise.
    pub fn apply(&self, logits: &mut [f32]) {
        for &id in &self.ids {
            if let Some(l) = logits.get_mut(id as usize) {
                *l = if *l < 0.0 { *l * self.penalty } else { *l / self.penalty };
            }
        }
    }
}

/// The knobs the draw uses, `None`s replaced by HF's defaults.
#[derive(Clone, Copy, Debug)]
struct Knobs {
    temperature: f64,
    top_k: usize,
    top_p: f64,
}

impl Knobs {
    fn of(params: &SamplingParams) -> Self {
        Knobs {
            temperature: params.temperature.unwrap_or(HF_DEFAULT_TEMPERATURE),
            top_k: params.top_k.unwrap_or(HF_DEFAULT_TOP_K),
            top_p: params.top_p.unwrap_or(HF_DEFAULT_TOP_P),
        }
    }
}

/// Picks a token from `logits` (entries of -inf are never picked). The choice depends on the values
/// and the draw only: ties break towards the lower id.
///
/// Without a cut (top-k 0, top-p 1) the draw walks the tokens in id order; with one it walks them from
/// the most likely down, and sorts only as many as the cut can keep (a full sort of a 50k vocabulary
/// for every sequence at every step was a tenth of a batched decoding step).
///
/// Logits with no finite entry (a model that produced NaN or infinities, or a constraint that allows no
/// token) are an error: returning some token would write text the model never chose.
///
/// Knobs left `None` take HF's defaults (temperature 1, top-k 50, top-p 1). The repetition penalty is the
/// caller's to apply first ([`RepetitionPenalty`]), since it needs the sequence's history.
pub fn sample_token(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> Result<u32> {
    let order: Vec<u32> = (0..logits.len() as u32).filter(|&i| logits[i as usize].is_finite()).collect();
    if order.is_empty() {
        let nan = logits.iter().filter(|l| l.is_nan()).count();
        return Err(InferError::Sampling(format!(
            "none of the {} logits is finite ({nan} NaN, the rest ±inf): the model's output is broken or the JSON constraint allows no token; nothing was sampled",
            logits.len()
        )));
    }
    Ok(draw(logits, order, Knobs::of(params), rng))
}

/// [`sample_token`] where the constraint allows `token` alone: the draw picks it whatever the logits,
/// so they are not needed; `rng` moves on as that draw moves it (one number unless greedy), so the
/// sequence's later draws are those of the plain path.
pub fn sample_forced(token: u32, params: &SamplingParams, rng: &mut ChaCha20Rng) -> u32 {
    // The draw's use of the RNG depends on the knobs and the number of candidates, not on the values.
    draw(&[0.0], vec![0], Knobs::of(params), rng);
    token
}

/// [`sample_token`] over the finite candidates `order` (not empty).
fn draw(logits: &[f32], mut order: Vec<u32>, params: Knobs, rng: &mut ChaCha20Rng) -> u32 {
    let likelier = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
    if params.temperature <= 0.0 {
        return *order.iter().min_by(|a, b| likelier(a, b)).expect("non-empty");
    }
    let max = order.iter().map(|&i| logits[i as usize]).fold(f32::NEG_INFINITY, f32::max) as f64;
    let weight = |i: u32| ((logits[i as usize] as f64 - max) / params.temperature).exp();
    // Top-p shares are of the weight after top-k, which the sorted head may no longer hold in full.
    let mut cut_total = None;
    if params.top_k > 0 || params.top_p < 1.0 {
        if params.top_k > 0 && order.len() > params.top_k {
            order.select_nth_unstable_by(params.top_k - 1, likelier);
            order.truncate(params.top_k);
        }
        let total: f64 = order.iter().map(|&i| weight(i)).sum();
        sort_likeliest(&mut order, params.top_p * total, &weight, likelier);
        cut_total = Some(total);
    }
    let weights: Vec<f64> = order.iter().map(|&i| weight(i)).collect();
    let total = cut_total.unwrap_or_else(|| weights.iter().sum());
    let mut keep = weights.len();
    if params.top_p < 1.0 {
        let mut cumulative = 0.0;
        for (n, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= params.top_p {
                keep = n + 1;
                break;
            }
        }
    }
    let kept_total: f64 = weights[..keep].iter().sum();
    let mut target = rng.random::<f64>() * kept_total;
    for (n, w) in weights[..keep].iter().enumerate() {
        target -= w;
        if target <= 0.0 {
            return order[n];
        }
    }
    order[keep - 1]
}

/// Sorts the head of `order` most likely first, far enough that its weights reach `needed` (the whole
/// of `order` when they never do); the tail past that head is left out, since no cut keeps it.
fn sort_likeliest(
    order: &mut Vec<u32>,
    needed: f64,
    weight: &impl Fn(u32) -> f64,
    likelier: impl Fn(&u32, &u32) -> std::cmp::Ordering + Copy,
) {
    let mut head = 64;
    while head < order.len() {
        order.select_nth_unstable_by(head - 1, likelier);
        if order[..head].iter().map(|&i| weight(i)).sum::<f64>() >= needed {
            order.truncate(head);
            break;
        }
        head *= 8;
    }
    order.sort_by(likelier);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> u32 {
        sample_token(logits, params, rng).unwrap()
    }

    #[test]
    fn logits_with_nothing_finite_are_an_error_not_token_zero() {
        for logits in
            [vec![f32::NAN; 4], vec![f32::NEG_INFINITY; 4], vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY], vec![]]
        {
            for p in [params(0.0, 0, 1.0), params(0.7, 40, 0.9)] {
                let err = sample_token(&logits, &p, &mut sequence_rng(1)).unwrap_err().to_string();
                assert!(err.contains("finite") && err.contains("nothing was sampled"), "{err}");
            }
        }
    }

    fn params(temperature: f64, top_k: usize, top_p: f64) -> SamplingParams {
        SamplingParams { temperature: Some(temperature), top_k: Some(top_k), top_p: Some(top_p), ..Default::default() }
    }

    #[test]
    fn greedy_takes_the_largest_and_breaks_ties_low() {
        let mut rng = sequence_rng(1);
        assert_eq!(sample(&[0.1, 3.0, 3.0, f32::NEG_INFINITY], &params(0.0, 0, 1.0), &mut rng), 1);
    }

    #[test]
    fn top_k_one_is_greedy_and_masked_tokens_never_drawn() {
        let logits = [2.0, f32::NEG_INFINITY, 1.9, 0.5];
        for seed in 0..200 {
            let mut rng = sequence_rng(seed);
            assert_eq!(sample(&logits, &params(1.0, 1, 1.0), &mut rng), 0);
            let mut rng = sequence_rng(seed);
            assert_ne!(sample(&logits, &params(5.0, 0, 1.0), &mut rng), 1);
        }
    }

    #[test]
    fn frequencies_follow_softmax_and_top_p_cuts_the_tail() {
        let logits = [(0.6f32).ln(), (0.3f32).ln(), (0.1f32).ln()];
        let mut counts = [0usize; 3];
        let mut rng = sequence_rng(7);
        for _ in 0..20_000 {
            counts[sample(&logits, &params(1.0, 0, 1.0), &mut rng) as usize] += 1;
        }
        let share = counts[0] as f64 / 20_000.0;
        assert!((share - 0.6).abs() < 0.02, "{counts:?}");
        let mut rng = sequence_rng(7);
        for _ in 0..2_000 {
            assert_ne!(sample(&logits, &params(1.0, 0, 0.85), &mut rng), 2);
        }
    }

    #[test]
    fn same_seed_same_draws() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let draw = |seed| {
            let mut rng = sequence_rng(seed);
            (0..20).map(|_| sample(&logits, &params(0.8, 10, 0.9), &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    /// The cut draws through a fully sorted vocabulary, as a reader of the code would write it.
    fn sample_fully_sorted(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> u32 {
        let params = Knobs::of(params);
        let mut order: Vec<u32> = (0..logits.len() as u32).filter(|&i| logits[i as usize].is_finite()).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
        if params.top_k > 0 {
            order.truncate(params.top_k);
        }
        let max = logits[order[0] as usize] as f64;
        let weights: Vec<f64> =
            order.iter().map(|&i| ((logits[i as usize] as f64 - max) / params.temperature).exp()).collect();
        let total: f64 = weights.iter().sum();
        let (mut keep, mut cumulative) = (weights.len(), 0.0);
        for (n, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= params.top_p {
                keep = n + 1;
                break;
            }
        }
        let mut target = rng.random::<f64>() * weights[..keep].iter().sum::<f64>();
        for (n, w) in weights[..keep].iter().enumerate() {
            target -= w;
            if target <= 0.0 {
                return order[n];
            }
        }
        order[keep - 1]
    }

    #[test]
    fn knobs_left_unset_take_hf_defaults_top_k_50_included() {
        // 200 tokens, likeliest first: HF's default top-k of 50 must keep the draw among the first 50,
        // and unset knobs must draw exactly what HF's explicit defaults draw.
        let logits: Vec<f32> = (0..200).map(|i| -(i as f32) * 0.01).collect();
        let unset = SamplingParams { temperature: None, top_p: None, top_k: None, ..Default::default() };
        let explicit = params(HF_DEFAULT_TEMPERATURE, HF_DEFAULT_TOP_K, HF_DEFAULT_TOP_P);
        let mut highest = 0;
        for seed in 0..400 {
            let (mut a, mut b) = (sequence_rng(seed), sequence_rng(seed));
            let token = sample(&logits, &unset, &mut a);
            assert_eq!(token, sample(&logits, &explicit, &mut b), "seed {seed}");
            highest = highest.max(token);
        }
        assert!(highest < 50 && highest > 40, "draws reach {highest}: top-k 50 should cut at 49");
    }

    #[test]
    fn repetition_penalty_divides_positive_multiplies_negative_once_per_id() {
        // The prompt repeats id 1; id 3 comes later in the output; id 9 is beyond the logits.
        let mut penalty = RepetitionPenalty::new(Some(1.25), &[0, 1, 1, 9]).unwrap().expect("a penalty ≠ 1 is kept");
        penalty.push(3);
        penalty.push(3);
        let mut logits = [2.0f32, -1.0, 0.5, 3.0, f32::NEG_INFINITY];
        penalty.apply(&mut logits);
        // As transformers' RepetitionPenaltyLogitsProcessor computes in f32: where(s < 0, s * p, s / p),
        // gathered and scattered once per id.
        assert_eq!(logits, [2.0 / 1.25, -1.25, 0.5, 3.0 / 1.25, f32::NEG_INFINITY], "-1 is multiplied: -1.25");
        // The draw follows the penalised logits.
        let mut counts = [0usize; 5];
        let mut rng = sequence_rng(5);
        for _ in 0..5_000 {
            counts[sample(&logits, &params(1.0, 0, 1.0), &mut rng) as usize] += 1;
        }
        let p3 = counts[3] as f64 / 5_000.0;
        let expected = {
            let w: Vec<f64> = logits.iter().map(|&l| (l as f64).exp()).collect();
            w[3] / w.iter().sum::<f64>()
        };
        assert!((p3 - expected).abs() < 0.03, "{counts:?}: P(3) {p3} vs {expected}");
        // No penalty: nothing to do; a bad one is an error, not a silent 1.
        assert!(RepetitionPenalty::new(None, &[1]).unwrap().is_none());
        assert!(RepetitionPenalty::new(Some(1.0), &[1]).unwrap().is_none());
        for bad in [0.0, -1.1, f64::NAN, f64::INFINITY] {
            let err = RepetitionPenalty::new(Some(bad), &[1]).unwrap_err().to_string();
            assert!(err.contains("repetition_penalty") && err.contains("out of range"), "{err}");
        }
    }

    #[test]
    fn partial_sorting_draws_what_a_full_sort_draws() {
        // A vocabulary-sized row with ties and masked entries; cuts that keep a few, many and all tokens.
        let logits: Vec<f32> = (0..49_152u32)
            .map(|i| {
                if i % 97 == 0 {
                    f32::NEG_INFINITY
                } else {
                    ((i.wrapping_mul(2_654_435_761) >> 16) % 2_000) as f32 / 150.0
                }
            })
            .collect();
        for (temperature, top_k, top_p) in
            [(0.7, 0, 0.9), (1.0, 0, 0.5), (1.5, 0, 0.999), (0.7, 40, 1.0), (1.0, 500, 0.95), (2.0, 20_000, 0.99)]
        {
            let p = params(temperature, top_k, top_p);
            for seed in 0..30 {
                let (mut a, mut b) = (sequence_rng(seed), sequence_rng(seed));
                assert_eq!(sample(&logits, &p, &mut a), sample_fully_sorted(&logits, &p, &mut b), "{p:?} seed {seed}");
            }
        }
    }

    /// A forced token skips the logits, not the draw: the RNG ends where sampling the masked row leaves
    /// it, so the tokens drawn after it are the plain path's, greedy or not, with or without cuts.
    #[test]
    fn a_forced_token_moves_the_rng_as_sampling_its_masked_row_does() {
        let mut masked = vec![f32::NEG_INFINITY; 1_000];
        masked[417] = -3.25;
        let free: Vec<f32> = (0..1_000).map(|i| ((i * 7_919) % 1_000) as f32 / 100.0).collect();
        for p in [params(0.0, 0, 1.0), params(0.7, 0, 1.0), params(1.0, 40, 0.9), SamplingParams::default()] {
            for seed in 0..20 {
                let (mut plain, mut skipped) = (sequence_rng(seed), sequence_rng(seed));
                assert_eq!(sample(&masked, &p, &mut plain), 417);
                assert_eq!(sample_forced(417, &p, &mut skipped), 417);
                for _ in 0..5 {
                    assert_eq!(sample(&free, &p, &mut plain), sample(&free, &p, &mut skipped), "{p:?} seed {seed}");
                }
            }
        }
    }
}
