//! The paper's nonce-label checks per model (S5: "swap-pass differences were at most 0.41
//! points/target, and token-receipt standard deviations were at most 0.24 points/target"), on the
//! visible-label societies a selection takes, every m pooled.
//!
//! Both measure what a group name does whichever group carries it (its valence), which the swap pass
//! is there to cancel. Per cell (about three societies per name pair at 30 seeds) neither can tell a
//! valence from noise at the paper's bounds (docs/deviations.md), so both pool a model's visible cells:
//! - **swap-pass difference**: per society, the second pass's mean decider favouritism − the first's
//!   (passes in name order: `original`, `swapped`), then the mean over societies with its 90%
//!   t-interval (the equivalence interval of two one-sided tests at 5%).
//! - **token receipt**: within a society run in both passes each name labels each group once, so the
//!   two names' receipts (points per target over both passes) sit symmetrically about the society's
//!   mean, and their difference δ = receipt(first name) − receipt(second) is the only thing a name can
//!   move. The names' SD about that mean is √(Σ_p n_p·δ_p² / 4N) over name pairs p with n_p societies,
//!   N in all. Its estimate nets out each society's noise: Σ n_p·δ̄_p² has expectation
//!   Σ n_p·δ_p² + k·σ² (k pairs, σ² the within-pair variance of δ, estimated on N − k degrees of
//!   freedom), so F = (Σ n_p·δ̄_p² / k) / s²_within is noncentral F(k, N − k) with noncentrality
//!   Σ n_p·δ_p² / σ², whose 90% interval ([`herd_stats::noncentrality_interval`]) gives the SD's, with
//!   s²_within standing for σ². The paper's own number, the SD (ddof 1) of the names' mean receipts,
//!   is kept beside it: it carries each name's sampling noise, which is why it is not judged.

use std::collections::BTreeMap;

use herd_stats::{noncentrality_interval, sample_std, students_t_quantile};

use super::{DesignKey, DyadTable, Labels, MODEL, REASONING, SWAP_PASS, decider_outcomes};

/// The swap-pass difference pooled over a model's (and reasoning mode's) visible societies.
#[derive(Debug, Clone, PartialEq)]
pub struct SwapPassDifference {
    pub model: Option<String>,
    pub reasoning: Option<String>,
    pub societies: usize,
    /// Mean over societies of second − first pass favouritism (points/target).
    pub mean: f64,
    /// Its 90% t-interval (societies − 1 df); `None` with fewer than two societies.
    pub interval90: Option<(f64, f64)>,
}

/// The spread of the names' receipts pooled over a model's (and reasoning mode's) visible societies.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenReceiptSpread {
    pub model: Option<String>,
    pub reasoning: Option<String>,
    pub societies: usize,
    /// Name pairs (k).
    pub pairs: usize,
    pub names: usize,
    /// The paper's number: SD (ddof 1) of the names' mean receipts, sampling noise included; NaN with
    /// fewer than two names.
    pub raw_sd: f64,
    /// The names' SD net of the societies' noise (module docs); `None` without a noise estimate (no pair
    /// run in two societies, or every δ equal within its pair).
    pub net: Option<NetSpread>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NetSpread {
    pub sd: f64,
    pub interval90: (f64, f64),
    /// F on (pairs, societies − pairs) degrees of freedom.
    pub f: f64,
    pub df: (usize, usize),
}

/// A society with both passes pooled: (design without the pass, m, seed).
type Society = (DesignKey, u32, i64);
/// (model, reasoning).
type Group = (Option<String>, Option<String>);
/// Per swap pass: (sum of decider favouritism, deciders).
type PassFavouritism = BTreeMap<Option<String>, (f64, usize)>;
/// Per (swap pass, name): (points received, dyads).
type Receipts = BTreeMap<(Option<String>, String), (f64, usize)>;

fn group_of(design: &DesignKey) -> Group {
    (design.0[MODEL].clone(), design.0[REASONING].clone())
}

/// The society a row of either pass belongs to.
fn society_of(design: &DesignKey, m: u32, seed: i64) -> Society {
    let mut pooled = design.clone();
    pooled.0[SWAP_PASS] = None;
    (pooled, m, seed)
}

/// The swap-pass difference per (model, reasoning) over the visible-label deciders `take` selects; none
/// for a model without societies run in two passes.
pub fn swap_pass_differences(dyads: &DyadTable, take: impl Fn(&DesignKey) -> bool) -> Vec<SwapPassDifference> {
    let mut passes: BTreeMap<Group, BTreeMap<Society, PassFavouritism>> = BTreeMap::new();
    for o in decider_outcomes(dyads).into_iter().filter(|o| o.labels == Labels::Visible && take(&o.design)) {
        let pass = o.design.0[SWAP_PASS].clone();
        let e = passes
            .entry(group_of(&o.design))
            .or_default()
            .entry(society_of(&o.design, o.m, o.seed))
            .or_default()
            .entry(pass)
            .or_default();
        e.0 += o.favouritism;
        e.1 += 1;
    }
    passes.into_iter().filter_map(|(group, societies)| swap_pass_difference(group, &societies)).collect()
}

/// The names' receipt spread per (model, reasoning) over the visible-label dyads `take` selects; none
/// without the `target_group` column, or for a model without societies run in two passes under two names.
pub fn token_receipt_spreads(dyads: &DyadTable, take: impl Fn(&DesignKey) -> bool) -> Vec<TokenReceiptSpread> {
    let mut receipts: BTreeMap<Group, BTreeMap<Society, Receipts>> = BTreeMap::new();
    for d in dyads.rows.iter().filter(|d| d.labels == Labels::Visible && take(&d.design)) {
        let Some(name) = &d.target_group else { continue };
        let e = receipts
            .entry(group_of(&d.design))
            .or_default()
            .entry(society_of(&d.design, d.m, d.seed))
            .or_default()
            .entry((d.design.0[SWAP_PASS].clone(), name.clone()))
            .or_default();
        e.0 += d.points;
        e.1 += 1;
    }
    receipts.into_iter().filter_map(|(group, societies)| token_receipt_spread(group, &societies)).collect()
}

fn swap_pass_difference(
    (model, reasoning): Group,
    societies: &BTreeMap<Society, PassFavouritism>,
) -> Option<SwapPassDifference> {
    let differences: Vec<f64> = societies
        .values()
        .filter(|p| p.len() == 2)
        .map(|p| {
            let mut means = p.values().map(|&(sum, n)| sum / n as f64);
            let first = means.next().expect("two passes");
            means.next().expect("two passes") - first
        })
        .collect();
    let n = differences.len();
    if n == 0 {
        return None;
    }
    let mean = differences.iter().sum::<f64>() / n as f64;
    let interval90 = (n >= 2).then(|| {
        let var = differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = students_t_quantile(0.95, (n - 1) as f64) * (var / n as f64).sqrt();
        (mean - half, mean + half)
    });
    Some(SwapPassDifference { model, reasoning, societies: n, mean, interval90 })
}

fn token_receipt_spread(
    (model, reasoning): Group,
    societies: &BTreeMap<Society, Receipts>,
) -> Option<TokenReceiptSpread> {
    // Per name pair: each society's δ; per name: (points, dyads) over its societies.
    let mut pairs: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    let mut names: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for receipts in societies.values() {
        let passes: std::collections::BTreeSet<&Option<String>> = receipts.keys().map(|(p, _)| p).collect();
        let mut by_name: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
        for ((_, name), &(points, n)) in receipts {
            let e = by_name.entry(name).or_default();
            e.0 += points;
            e.1 += n;
        }
        // Only a society run in both passes under two names balances membership between its names.
        if passes.len() != 2 || by_name.len() != 2 {
            continue;
        }
        let mut it = by_name.iter();
        let ((a, ra), (b, rb)) = (it.next().expect("two names"), it.next().expect("two names"));
        pairs.entry((a, b)).or_default().push(ra.0 / ra.1 as f64 - rb.0 / rb.1 as f64);
        for (name, &(points, n)) in &by_name {
            let e = names.entry(name).or_default();
            e.0 += points;
            e.1 += n;
        }
    }
    let societies: usize = pairs.values().map(Vec::len).sum();
    if societies == 0 {
        return None;
    }
    let means: Vec<f64> = names.values().map(|&(points, n)| points / n as f64).collect();
    let raw_sd = if means.len() >= 2 { sample_std(&means).unwrap_or(f64::NAN) } else { f64::NAN };
    let k = pairs.len();
    let (mut between, mut within) = (0.0, 0.0);
    for deltas in pairs.values() {
        let n = deltas.len() as f64;
        let mean = deltas.iter().sum::<f64>() / n;
        between += n * mean * mean;
        within += deltas.iter().map(|d| (d - mean).powi(2)).sum::<f64>();
    }
    let df_within = societies - k;
    let net = (df_within > 0 && within > 0.0)
        .then(|| {
            let s2 = within / df_within as f64;
            let f = between / k as f64 / s2;
            let sd_of = |noncentrality: f64| (noncentrality * s2 / (4.0 * societies as f64)).sqrt();
            let (low, high) = noncentrality_interval(f, k as f64, df_within as f64, 0.9)?;
            let sd = ((between - k as f64 * s2).max(0.0) / (4.0 * societies as f64)).sqrt();
            Some(NetSpread { sd, interval90: (sd_of(low), sd_of(high)), f, df: (k, df_within) })
        })
        .flatten();
    Some(TokenReceiptSpread { model, reasoning, societies, pairs: k, names: names.len(), raw_sd, net })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Societies of two name pairs, each run in two passes, whose first name's receipt exceeds its
    /// partner's by the given δs (receipts 5 ± δ/2 over 10 dyads each).
    fn societies(deltas: &[(&str, &str, &[f64])]) -> BTreeMap<Society, Receipts> {
        let mut out = BTreeMap::new();
        let mut seed = 0;
        for &(a, b, ds) in deltas {
            for &d in ds {
                seed += 1;
                let receipts = BTreeMap::from([
                    ((Some("original".to_owned()), a.to_owned()), (10.0 * (5.0 + d / 2.0), 10)),
                    ((Some("swapped".to_owned()), b.to_owned()), (10.0 * (5.0 - d / 2.0), 10)),
                ]);
                out.insert((DesignKey::default(), 3, seed), receipts);
            }
        }
        out
    }

    #[test]
    fn the_names_spread_is_netted_of_the_noise_within_pairs() {
        // Pair means 2 and 0 over 3 societies each: Σ n·δ̄² = 12 on 2 pairs; within-pair SS 2 + 2 on 4 df.
        let t = token_receipt_spread(
            (None, None),
            &societies(&[("a", "b", &[1.0, 2.0, 3.0]), ("c", "d", &[-1.0, 0.0, 1.0])]),
        )
        .unwrap();
        assert_eq!((t.societies, t.pairs, t.names), (6, 2, 4));
        let net = t.net.unwrap();
        assert_eq!((net.df, net.f), ((2, 4), 6.0));
        assert!((net.sd - (10.0_f64 / 24.0).sqrt()).abs() < 1e-12, "(12 − 2·1) / (4·6)");
        let (low, high) = noncentrality_interval(6.0, 2.0, 4.0, 0.9).unwrap();
        assert!((net.interval90.0 - (low / 24.0).sqrt()).abs() < 1e-12);
        assert!((net.interval90.1 - (high / 24.0).sqrt()).abs() < 1e-12);
        // The paper's SD: names' means 6, 4, 5, 5.
        assert!((t.raw_sd - sample_std(&[6.0, 4.0, 5.0, 5.0]).unwrap()).abs() < 1e-12);

        // Noise alone (pair means at 0) nets to 0; one society per pair gives no noise estimate.
        let t = token_receipt_spread((None, None), &societies(&[("a", "b", &[1.0, -1.0]), ("c", "d", &[0.5, -0.5])]))
            .unwrap();
        assert_eq!(t.net.unwrap().sd, 0.0);
        assert_eq!(
            token_receipt_spread((None, None), &societies(&[("a", "b", &[1.0]), ("c", "d", &[2.0])])).unwrap().net,
            None
        );
    }
}
