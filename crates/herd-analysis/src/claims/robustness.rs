//! The minimal-group paper's robustness bounds (S3, S5), each on the headline selection: roster position
//! unable to drive favouritism, removing uniform fills changing favouritism by at most 0.03, and parse
//! success above 98.8% in every model.
//!
//! Roster position reads herd-analysis's `robustness` table per visible cell (model × m) and is judged by
//! what position could do there, its effect × the in − out-group imbalance, over both intervals; the
//! other two count deciders in the dyads and compare the paper's descriptive number (a change of an
//! estimate, a share of replies) with its bound, as the paper does, and say so. The nonce-label checks
//! (swap-pass difference at most 0.41, token-receipt SD at most 0.24) are in `nonce_labels`.

use std::collections::BTreeMap;

use crate::minimal_group::model_claims;
use crate::table::rows_where;
use crate::{DyadTable, Labels, ResultTable};

use super::evidence::{Combine, Evidence, Row, t_quantile};
use super::societies::Selection;
use super::{Outcome, PaperHeadline, Verdict};
use crate::format::{num, signed};
use crate::results::Results;
use crate::summary::Z95;

/// The rows of `check` in the `robustness` table for the selection's visible main cells, fills included.
fn visible_checks(table: &ResultTable, selection: &Selection, check: &str) -> Vec<usize> {
    rows_where(table, &[("check", check), ("fills", "included"), ("labels", "visible")])
        .into_iter()
        .filter(|&r| selection.takes_row(table, r))
        .collect()
}

/// `model · m = 3` for a robustness row.
fn cell_label(table: &ResultTable, r: usize) -> String {
    let model = table.text("model", r).unwrap_or("model");
    let m = table.number("m", r).map_or("?".to_owned(), |m| format!("{m:.0}"));
    format!("{model} · m = {m}")
}

/// A seed-level mean of the `robustness` table: its n seeds, the mean and its 95% t-interval from the
/// standard error (ddof 1) on n − 1 degrees of freedom; `None` where either is undefined.
fn seed_mean_interval(table: &ResultTable, r: usize) -> Option<(usize, f64, (f64, f64))> {
    let n = table.number("n", r)? as usize;
    let (estimate, se) = (table.number("estimate", r)?, table.number("se", r)?);
    let half = (n >= 2).then(|| t_quantile(0.975, n as f64 - 1.0) * se)?;
    Some((n, estimate, (estimate - half, estimate + half)))
}

/// A row judged against a descriptive bound: "replicates" when `value` is at most `bound` (above it
/// for a lower bound), "does not replicate" otherwise, inconclusive when it is undefined.
fn bounded(label: String, value: String, evidence: Evidence, at_most: bool, bound: f64, what: &str) -> Row {
    let x = evidence.estimate.unwrap_or(f64::NAN);
    let (verdict, reason) = if !x.is_finite() {
        (Verdict::Inconclusive, format!("the {what} is undefined"))
    } else if at_most && x.abs() <= bound {
        (Verdict::Replicates, format!("the {what} {} is at most the paper's {}", num(x.abs()), num(bound)))
    } else if at_most {
        (Verdict::DoesNotReplicate, format!("the {what} {} exceeds the paper's {}", num(x.abs()), num(bound)))
    } else if x > bound {
        (Verdict::Replicates, format!("the {what} {} is above the paper's {}", num(x), num(bound)))
    } else {
        (Verdict::DoesNotReplicate, format!("the {what} {} is not above the paper's {}", num(x), num(bound)))
    };
    Row { label, value, evidence, verdict, reason, members: Vec::new(), claim: None }
}

/// S5's roster position: per visible cell, the favouritism position could put there, the GEE position
/// effect (points per position) × the in − out-group mean presented position (mean over societies),
/// judged by the range of that product over both 95% intervals against ±`effect` points/target.
pub(super) fn roster_position(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let margin = h.effect?;
    let selection = Selection::new(&m.dyads, None);
    let t = &m.tables.robustness;
    let effects = visible_checks(t, &selection, "position_effect");
    let same_cell = |a: usize, b: usize| {
        ["model", "reasoning", "instrument", "swap_pass", "passes"].iter().all(|c| t.text(c, a) == t.text(c, b))
            && t.number("m", a) == t.number("m", b)
    };
    let test = "position effect (GEE, robust SE) × in − out-group mean roster position (over societies)";
    let rows: Vec<Row> = visible_checks(t, &selection, "position_balance")
        .into_iter()
        .filter_map(|r| {
            let (n, b, b_range) = seed_mean_interval(t, r)?;
            let effect = *effects.iter().find(|&&x| same_cell(x, r))?;
            let (beta, se) = (t.number("estimate", effect)?, t.number("se", effect)?);
            let beta_range = (beta - Z95 * se, beta + Z95 * se);
            let corners = [
                b_range.0 * beta_range.0,
                b_range.0 * beta_range.1,
                b_range.1 * beta_range.0,
                b_range.1 * beta_range.1,
            ];
            let range = (
                corners.iter().copied().fold(f64::INFINITY, f64::min),
                corners.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            );
            let mut e = Evidence::new(test, n, "seeds");
            e.estimate = Some(b * beta);
            e.interval = Some(range);
            e.interval_name = "range over both 95% intervals";
            let value = format!(
                "position effect {} points per position × in − out {} positions = {} points/target",
                signed(beta),
                signed(b),
                signed(b * beta)
            );
            let (verdict, reason) = if !(range.0.is_finite() && range.1.is_finite()) {
                (Verdict::Inconclusive, "the position effect or the balance is undefined".to_owned())
            } else if range.0 > -margin && range.1 < margin {
                (Verdict::Replicates, format!("[{}, {}] lies within ±{}", num(range.0), num(range.1), num(margin)))
            } else if range.0 > margin || range.1 < -margin {
                (
                    Verdict::DoesNotReplicate,
                    format!(
                        "[{}, {}] lies beyond ±{}: position drives favouritism",
                        num(range.0),
                        num(range.1),
                        num(margin)
                    ),
                )
            } else {
                (Verdict::Inconclusive, format!("[{}, {}] still reaches ±{}", num(range.0), num(range.1), num(margin)))
            };
            Some(Row { label: cell_label(t, r), value, evidence: e, verdict, reason, members: Vec::new(), claim: None })
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let summary = format!(
        "Per visible cell: the favouritism roster position could put there, its GEE effect (points per position) × \
         in-group − out-group targets' mean presented position per society (uniform fills included), within ±{} \
         points/target, on {}",
        num(margin),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// One decider's reply: (model, the rest of its design, labels, m, seed, decider).
type DeciderKey<'a> = (Option<&'a str>, [Option<&'a str>; 3], Labels, u32, i64, i64);

/// Per model: (deciders, deciders uniformly filled) over the dyads `take` keeps; `None` without a
/// `filled` column.
fn fill_counts(
    dyads: &DyadTable,
    take: impl Fn(&crate::DesignKey) -> bool,
) -> Option<BTreeMap<String, (usize, usize)>> {
    if !dyads.has_filled() {
        return None;
    }
    let mut filled: BTreeMap<DeciderKey<'_>, bool> = BTreeMap::new();
    for d in dyads.rows.iter().filter(|d| take(&d.design)) {
        let k = &d.design.0;
        let key =
            (k[0].as_deref(), [k[1].as_deref(), k[2].as_deref(), k[3].as_deref()], d.labels, d.m, d.seed, d.decider);
        *filled.entry(key).or_default() |= d.filled == Some(true);
    }
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (key, f) in filled {
        let c = counts.entry(key.0.unwrap_or("model").to_owned()).or_default();
        c.0 += 1;
        c.1 += usize::from(f);
    }
    Some(counts)
}

/// S5's parsing robustness: per model and label arm, the per-model favouritism with uniform fills
/// included − with the filled deciders removed, at most 0.03 points/target.
pub(super) fn fills_change(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let bound = h.effect?;
    let selection = Selection::new(&m.dyads, None);
    let fills = fill_counts(&m.dyads, |k| selection.takes_design(k))?;
    let with = model_claims(&m.dyads, |k| selection.takes_design(k)).ok()?;
    // With no fills the estimate cannot change; without any decider left it is undefined.
    let without = if fills.values().all(|&(_, f)| f == 0) {
        Some(with.clone())
    } else {
        let kept: Vec<crate::Dyad> = m.dyads.rows.iter().filter(|d| d.filled != Some(true)).cloned().collect();
        DyadTable::new(m.dyads.origin.clone(), kept)
            .ok()
            .and_then(|d| model_claims(&d, |k| selection.takes_design(k)).ok())
    };
    let favouritism = |table: &ResultTable, model: Option<&str>, labels: &str| -> Option<f64> {
        rows_where(table, &[("labels", labels), ("quantity", "favouritism")])
            .into_iter()
            .find(|&r| table.text("model", r) == model)
            .and_then(|r| table.number("mean", r))
    };
    let mut rows = Vec::new();
    for labels in ["visible", "hidden"] {
        for r in rows_where(&with, &[("labels", labels), ("quantity", "favouritism")]) {
            let model = with.text("model", r);
            let name = model.unwrap_or("model");
            let (deciders, filled) = fills.get(name).copied().unwrap_or((0, 0));
            let included = with.number("mean", r);
            let excluded = without.as_ref().and_then(|w| favouritism(w, model, labels));
            let change = included.zip(excluded).map(|(a, b)| a - b);
            let societies = with.number("n_societies", r).unwrap_or(0.0) as usize;
            let mut e = Evidence::new(
                "favouritism with − without uniform fills, against the paper's bound",
                societies,
                "societies",
            );
            e.estimate = change;
            let value = format!(
                "{} with fills, {} without ({filled} of {deciders} deciders filled); change {}",
                included.map_or("n/a".into(), signed),
                excluded.map_or("n/a".into(), signed),
                change.map_or("n/a".into(), signed)
            );
            rows.push(bounded(format!("{name} · {labels}"), value, e, true, bound, "change"));
        }
    }
    if rows.is_empty() {
        return None;
    }
    let summary = format!(
        "Per model and label arm: favouritism (mean over societies of each society's mean decider favouritism, \
         pooled over m) with uniform fills included − with the filled deciders removed, at most {}, on {}",
        num(bound),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// S3's parse success: per model over every decider it answered, the share whose reply parsed (not
/// uniformly filled after a parse failure), above 98.8%.
pub(super) fn parse_success(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let bound = h.effect?;
    let rows: Vec<Row> = fill_counts(&m.dyads, |_| true)?
        .into_iter()
        .map(|(model, (deciders, filled))| {
            let share = 1.0 - filled as f64 / deciders.max(1) as f64;
            let mut e = Evidence::new("share of replies parsed against the paper's bound", deciders, "deciders");
            e.estimate = Some(share);
            e.magnitude = true;
            let value = format!("{:.1}% parsed ({filled} of {deciders} replies filled)", 100.0 * share);
            bounded(model, value, e, false, bound, "parse success")
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let summary = "Per model over every decider it answered (every cell, reasoning mode, instrument and pass): the \
                   share of replies that parsed, as written or repaired (a failed parse is uniformly filled)"
        .to_owned();
    Some(Outcome { summary, rows, combine: Combine::All })
}
