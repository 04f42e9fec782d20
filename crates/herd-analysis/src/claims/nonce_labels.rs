//! S5's nonce-label counterbalancing: "swap-pass differences were at most 0.41 points/target, and
//! token-receipt standard deviations were at most 0.24 points/target", judged per model on the headline
//! selection's visible societies, every m pooled ([`crate::minimal_group::swap_pass_differences`] and
//! [`crate::minimal_group::token_receipt_spreads`] compute them; their module docs say why pooled and how
//! the token-receipt SD nets out noise).
//!
//! Each bound is an equivalence judged on a 90% interval (two one-sided tests at 5%): *replicates* when
//! the interval lies within the bound, *does not replicate* when it lies wholly beyond it, inconclusive
//! otherwise. The paper's "at most" is over its four models, so every model must pass.

use crate::minimal_group::{swap_pass_differences, token_receipt_spreads};
use crate::results::Results;

use super::evidence::{Combine, Evidence, Row};
use super::societies::Selection;
use super::{Outcome, PaperHeadline, Verdict};
use crate::format::{num, signed};

fn label(model: &Option<String>) -> String {
    model.clone().unwrap_or_else(|| "model".to_owned())
}

/// The verdict of `interval` against ±`bound` (a two-sided bound; an SD is never below 0); `beyond` says
/// what an interval wholly beyond the bound means.
fn judged(interval: (f64, f64), bound: f64, what: &str, beyond: &str) -> (Verdict, String) {
    let (low, high) = interval;
    let range = format!("{what}'s 90% interval [{}, {}]", num(low), num(high));
    if low > -bound && high < bound {
        (Verdict::Replicates, format!("{range} lies within ±{}", num(bound)))
    } else if low > bound || high < -bound {
        (Verdict::DoesNotReplicate, format!("{range} lies beyond ±{}: {beyond}", num(bound)))
    } else {
        (Verdict::Inconclusive, format!("{range} still reaches ±{}", num(bound)))
    }
}

/// Per model: the swap-pass difference (second − first pass favouritism per society, mean over its
/// visible societies) within ±0.41 points/target.
pub(super) fn swap_pass_bound(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let bound = h.effect?;
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let rows: Vec<Row> = swap_pass_differences(&m.dyads, |k| selection.takes_design(k))
        .into_iter()
        .map(|d| {
            let mut e =
                Evidence::new("mean over societies of second − first pass favouritism", d.societies, "societies");
            e.estimate = Some(d.mean);
            e.interval = d.interval90;
            e.interval_name = "90% t-interval";
            let value = format!("{} points/target over {} societies", signed(d.mean), d.societies);
            let (verdict, reason) = match d.interval90 {
                Some(interval) => {
                    judged(interval, bound, "the difference", "a group's favouritism depends on the name it carries")
                }
                None => (Verdict::Inconclusive, "one society gives no interval".to_owned()),
            };
            Row { label: label(&d.model), value, evidence: e, verdict, reason, members: Vec::new(), claim: None }
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let summary = format!(
        "Per model, every visible cell pooled: per society, the second swap pass's mean decider favouritism − the \
         first's (uniform fills included), its mean over societies within ±{} points/target (90% interval), on {}",
        num(bound),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// Per model: the SD of the names' receipts net of the societies' noise at most 0.24 points/target.
pub(super) fn token_receipt_bound(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let bound = h.effect?;
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let rows: Vec<Row> = token_receipt_spreads(&m.dyads, |k| selection.takes_design(k))
        .into_iter()
        .map(|t| {
            let test = "names' receipt SD net of noise (noncentral F on name pairs)";
            let mut e = Evidence::new(test, t.societies, "societies");
            let raw = format!("the names' receipt SD as the paper's {} (noise included)", num(t.raw_sd));
            let (value, verdict, reason) = match &t.net {
                Some(net) => {
                    e.estimate = Some(net.sd);
                    e.magnitude = true;
                    e.interval = Some(net.interval90);
                    e.interval_name = "90% interval (noncentral F)";
                    let value = format!(
                        "net SD {} points/target, F({}, {}) = {} over {} name pairs; {raw}",
                        num(net.sd),
                        net.df.0,
                        net.df.1,
                        num(net.f),
                        t.pairs
                    );
                    let (verdict, reason) =
                        judged(net.interval90, bound, "the net SD", "the group names carry a valence");
                    (value, verdict, reason)
                }
                None => (
                    format!("{} name pairs; {raw}", t.pairs),
                    Verdict::Inconclusive,
                    "no name pair ran in two societies with different receipts: the noise cannot be told from \
                     the names"
                        .to_owned(),
                ),
            };
            Row { label: label(&t.model), value, evidence: e, verdict, reason, members: Vec::new(), claim: None }
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let summary = format!(
        "Per model, every visible cell pooled: the SD of the group names' receipts (points per target, both passes \
         of a society pooled so that each name labels each group once) net of the societies' noise, at most {} \
         points/target (90% interval), on {}",
        num(bound),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}
