//! Choosing the next token from logits: temperature, top-k, top-p, with a per-sequence seeded RNG so a
//! sequence draws the same tokens whether it is decoded alone or in a batch.

use crate::backend::SamplingParams;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;

pub fn sequence_rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Picks a token from `logits` (entries of -inf are never picked). Ties break towards the lower id, so
/// the choice depends on the values only.
pub fn sample_token(logits: &[f32], params: &SamplingParams, rng: &mut ChaCha20Rng) -> u32 {
    let mut order: Vec<u32> = (0..logits.len() as u32).filter(|&i| logits[i as usize].is_finite()).collect();
    if order.is_empty() {
        return 0;
    }
    if params.temperature <= 0.0 {
        return *order.iter().max_by(|&&a, &&b| logits[a as usize].total_cmp(&logits[b as usize]).then(b.cmp(&a))).expect("non-empty");
    }
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    if params.top_k > 0 && order.len() > params.top_k {
        order.truncate(params.top_k);
    }
    let max = logits[order[0] as usize] as f64;
    let weights: Vec<f64> = order.iter().map(|&i| ((logits[i as usize] as f64 - max) / params.temperature).exp()).collect();
    let total: f64 = weights.iter().sum();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f64, top_k: usize, top_p: f64) -> SamplingParams {
        SamplingParams { temperature, top_k, top_p, ..Default::default() }
    }

    #[test]
    fn greedy_takes_the_largest_and_breaks_ties_low() {
        let mut rng = sequence_rng(1);
        assert_eq!(sample_token(&[0.1, 3.0, 3.0, f32::NEG_INFINITY], &params(0.0, 0, 1.0), &mut rng), 1);
    }

    #[test]
    fn top_k_one_is_greedy_and_masked_tokens_never_drawn() {
        let logits = [2.0, f32::NEG_INFINITY, 1.9, 0.5];
        for seed in 0..200 {
            let mut rng = sequence_rng(seed);
            assert_eq!(sample_token(&logits, &params(1.0, 1, 1.0), &mut rng), 0);
            let mut rng = sequence_rng(seed);
            assert_ne!(sample_token(&logits, &params(5.0, 0, 1.0), &mut rng), 1);
        }
    }

    #[test]
    fn frequencies_follow_softmax_and_top_p_cuts_the_tail() {
        let logits = [(0.6f32).ln(), (0.3f32).ln(), (0.1f32).ln()];
        let mut counts = [0usize; 3];
        let mut rng = sequence_rng(7);
        for _ in 0..20_000 {
            counts[sample_token(&logits, &params(1.0, 0, 1.0), &mut rng) as usize] += 1;
        }
        let share = counts[0] as f64 / 20_000.0;
        assert!((share - 0.6).abs() < 0.02, "{counts:?}");
        let mut rng = sequence_rng(7);
        for _ in 0..2_000 {
            assert_ne!(sample_token(&logits, &params(1.0, 0, 0.85), &mut rng), 2);
        }
    }

    #[test]
    fn same_seed_same_draws() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let draw = |seed| {
            let mut rng = sequence_rng(seed);
            (0..20).map(|_| sample_token(&logits, &params(0.8, 10, 0.9), &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
