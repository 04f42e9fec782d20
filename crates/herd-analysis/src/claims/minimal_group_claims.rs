//! The minimal-group paper's claims beside its main headlines, each per model on the society as the
//! unit (herd-analysis's `model_claims`, golden-tested against scipy): the minority gap closing at
//! equal groups, the size-robust excess share confirming the minority concentration, one model's
//! majority deciders reversing at the smallest m, the gap falling with thinking off, and bootstrap
//! and analytic standard errors agreeing.

use crate::ResultTable;
use crate::minimal_group::{ON_MINUS_OFF, model_claims};

use super::evidence::{ALPHA, Claim, Combine, Evidence, Row, judge, wilcoxon_min_p};
use super::minimal_group::{PAPER_EXCEPTION_MODEL, is_paper_exception};
use super::societies::Selection;
use super::{Outcome, PaperHeadline, Verdict};
use crate::format::{num, signed};
use crate::results::Results;
use crate::table::rows_where;

/// The per-model claims table on `selection`, or why it could not be computed.
pub(super) fn claims_on(dyads: &crate::DyadTable, selection: &Selection) -> Result<ResultTable, String> {
    model_claims(dyads, |k| selection.takes_design(k)).map_err(|e| e.to_string())
}

/// The rows of `quantity` (and label condition) in a claims table.
pub(super) fn claim_rows(claims: &ResultTable, labels: &str, quantity: &str) -> Vec<usize> {
    rows_where(claims, &[("labels", labels), ("quantity", quantity)])
}

/// A claims row as evidence: its Wilcoxon signed-rank over societies, the exact smallest p at its
/// number of nonzero values, and the 95% t-interval of the mean.
pub(super) fn claim_evidence(claims: &ResultTable, r: usize, test: &str) -> Evidence {
    let n = claims.number("n_societies", r).unwrap_or(0.0) as usize;
    let nonzero = claims.number("n_nonzero", r).unwrap_or(0.0) as usize;
    let mut e = Evidence::new(test, n, "societies").with_note(claims.text("note", r));
    e.estimate = claims.number("mean", r);
    e.p = claims.number("wilcoxon_p", r);
    e.nonzero = Some(nonzero);
    e.min_p = Some(if e.p.is_some() { wilcoxon_min_p(nonzero, true) } else { 1.0 });
    e.interval = claims.number("ci_low", r).zip(claims.number("ci_high", r));
    e.interval_name = "95% t-interval";
    e
}

/// The row's model (and `· m = 3, 5`), for labels.
pub(super) fn claim_model(claims: &ResultTable, r: usize) -> String {
    claims.text("model", r).unwrap_or("model").to_owned()
}

/// `m = 3, 5` for a claims row.
pub(super) fn claim_ms(claims: &ResultTable, r: usize) -> String {
    format!("m = {}", claims.text("m", r).unwrap_or_default().replace(',', ", "))
}

/// A headline that could not be computed: one inconclusive row saying why.
fn failed(why: String) -> Outcome {
    let row = Row {
        label: "model claims".into(),
        value: String::new(),
        evidence: Evidence::new("per-model claims", 0, "societies"),
        verdict: Verdict::Inconclusive,
        reason: format!("the per-model claims could not be computed: {why}"),
        members: Vec::new(),
        claim: None,
    };
    Outcome { summary: String::new(), rows: vec![row], combine: Combine::All }
}

/// Rows judging one `quantity` of the visible claims per model under `claim`.
fn per_model(
    claims: &ResultTable,
    quantity: &str,
    test: &str,
    claim: Claim,
    value: impl Fn(f64) -> String,
) -> Vec<Row> {
    claim_rows(claims, "visible", quantity)
        .into_iter()
        .map(|r| {
            let e = claim_evidence(claims, r, test);
            let v = format!("{} ({})", e.estimate.map_or("n/a".into(), &value), claim_ms(claims, r));
            Row::judged(claim_model(claims, r), v, e, claim)
        })
        .collect()
}

/// Section 2.3's "the gap closes at m = 10": per model, minority − majority favouritism at equal
/// groups is not significant and its interval lies within ± the paper's smallest unequal gap.
pub(super) fn gap_closes_equal_groups(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let claims = match claims_on(&m.dyads, &selection) {
        Ok(c) => c,
        Err(why) => return Some(failed(why)),
    };
    let margin = h.effect.unwrap_or(0.0);
    let mut rows = per_model(
        &claims,
        "equal_groups_gap",
        "seed-level Wilcoxon signed-rank over societies",
        Claim::Within { margin },
        signed,
    );
    // A null that a test too small to reject could never fail decides nothing: the gap "closes" only
    // where the signed-rank test could have found it open.
    for row in &mut rows {
        if let Some(why) = row.evidence.too_few(ALPHA) {
            row.verdict = Verdict::Inconclusive;
            row.reason = why;
        }
    }
    let summary = format!(
        "Per model: minority − majority deciders' mean favouritism within each society at equal groups (m = half \
         the society), visible labels, on {}",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// Section 2.3's size-robust confirmation: per model, minority − majority excess share over the
/// societies with unequal groups is positive.
pub(super) fn excess_share_gap(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let claims = match claims_on(&m.dyads, &selection) {
        Ok(c) => c,
        Err(why) => return Some(failed(why)),
    };
    let rows = per_model(
        &claims,
        "excess_share_gap",
        "seed-level Wilcoxon signed-rank over societies",
        Claim::positive(h.effect),
        |v| format!("{v:+.4}"),
    );
    let summary = format!(
        "Per model: minority − majority deciders' mean excess share (own-group share − in-group targets / targets) \
         within each society, over the visible societies with unequal groups, on {}",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// Section 2.3 and S5.7's exception: some model's majority deciders at the smallest m give the small
/// out-group more than per-capita, in points/target and in excess share, both significant.
pub(super) fn majority_reversal(_: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let claims = match claims_on(&m.dyads, &selection) {
        Ok(c) => c,
        Err(why) => return Some(failed(why)),
    };
    let test = "seed-level Wilcoxon signed-rank over societies";
    let excess = claim_rows(&claims, "visible", "majority_excess_share_smallest_m");
    let rows = claim_rows(&claims, "visible", "majority_favouritism_smallest_m")
        .into_iter()
        .map(|r| {
            let model = claim_model(&claims, r);
            let points = claim_evidence(&claims, r, test);
            let share = excess
                .iter()
                .find(|&&x| claims.text("model", x) == claims.text("model", r))
                .map(|&x| claim_evidence(&claims, x, test));
            let (v1, why1) = judge(&points, Claim::negative(None));
            let (v2, why2) = share
                .as_ref()
                .map_or((Verdict::Inconclusive, "no excess-share row".into()), |e| judge(e, Claim::negative(None)));
            let exception_model = is_paper_exception(&model);
            let verdict = match (v1, v2) {
                (Verdict::Replicates, Verdict::Replicates) => Verdict::Replicates,
                // Another model without the reversal is like the paper's other three: not its subject.
                _ if !exception_model => Verdict::NotInRun,
                (Verdict::DoesNotReplicate, _) | (_, Verdict::DoesNotReplicate) => Verdict::DoesNotReplicate,
                _ => Verdict::Inconclusive,
            };
            let share_text = share.as_ref().map_or("n/a".into(), |e| {
                format!("excess share {} ({})", e.estimate.map_or("n/a".into(), |v| format!("{v:+.4}")), e.describe())
            });
            let value = format!(
                "majority deciders at {}: {} points/target; {share_text}",
                claim_ms(&claims, r),
                points.estimate.map_or("n/a".into(), signed)
            );
            let mut reason = format!("points/target: {why1}; excess share: {why2}");
            if verdict == Verdict::NotInRun {
                reason = format!(
                    "no reversal, like the paper's other models ({reason}); the paper's exception, \
                     {PAPER_EXCEPTION_MODEL}, is not this model"
                );
            }
            Row { label: model, value, evidence: points, verdict, reason, members: Vec::new(), claim: None }
        })
        .collect();
    let summary = format!(
        "Per model: majority deciders' mean favouritism (points/target; the evidence shown) and excess share per \
         society at the smallest m, visible labels, on {}",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::Any })
}

/// Section 2.4 and S6: with thinking off the minority − majority gap falls (on − off, paired by
/// society) and stays above zero.
pub(super) fn reasoning_gap(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None).every_mode();
    let claims = match claims_on(&m.dyads, &selection) {
        Ok(c) => c,
        Err(why) => return Some(failed(why)),
    };
    let test = "seed-level Wilcoxon signed-rank over societies";
    let mut rows = Vec::new();
    for r in claim_rows(&claims, "visible", "minority_gap") {
        if claims.text("reasoning", r) != Some(ON_MINUS_OFF) {
            continue;
        }
        let model = claim_model(&claims, r);
        let e = claim_evidence(&claims, r, test);
        let value =
            format!("{} ({}, paired by society)", e.estimate.map_or("n/a".into(), signed), claim_ms(&claims, r));
        rows.push(Row::judged(format!("{model} · gap on − off"), value, e, Claim::positive(h.effect)));
        let off = claim_rows(&claims, "visible", "minority_gap").into_iter().find(|&x| {
            claims.text("model", x) == claims.text("model", r) && claims.text("reasoning", x) == Some("off")
        });
        if let Some(x) = off {
            let e = claim_evidence(&claims, x, test);
            let value = format!("{} ({})", e.estimate.map_or("n/a".into(), signed), claim_ms(&claims, x));
            rows.push(Row::judged(format!("{model} · gap with thinking off"), value, e, Claim::positive(None)));
        }
    }
    let summary = format!(
        "Per model run with thinking on and off: minority − majority deciders' mean favouritism per society over \
         the visible societies with unequal groups, on {}",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// The paper's bound on |bootstrap SE − analytic SE| (S5.7), in points/target.
const SE_AGREEMENT: f64 = 0.003;
/// The share of the robust SE by which the bootstrap SE may differ from it: with 30 seeds the
/// sandwich and the seed bootstrap differ by a few percent beyond the bootstrap's Monte Carlo error
/// (a fit's dependence on which seeds were drawn), and SEs a tenth apart give intervals a tenth apart.
const SE_RELATIVE: f64 = 0.10;
/// Fewest societies on which the two standard errors are compared (as the GEE verdicts).
const SE_MIN_SOCIETIES: usize = 6;
/// The terms S5.7 compares: favouritism and the minority − majority interaction.
const SE_TERMS: [(&str, &str); 2] =
    [("points ~ same_group", "same_group"), ("points ~ same_group * minority_decider", "same_group:minority_decider")];

/// S5.7: per visible cell of the headline selection, the seed-level cluster bootstrap SE of the GEE
/// coefficient (favouritism, and the minority interaction) against its robust SE. They agree when
/// they differ by at most the largest of the paper's 0.003 points/target, a tenth of the robust SE
/// (`SE_RELATIVE`) and the bootstrap's own Monte Carlo error. The Monte Carlo bound is family-wise:
/// with k comparisons each allows z · SE / √(2(B − 1)) for B resamples, z the normal quantile at
/// 1 − 0.025/k (Bonferroni), so that few resamples cannot fail two SEs that agree.
pub(super) fn bootstrap_se_agreement(_: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let gee = &m.tables.gee;
    let boot = &m.tables.bootstrap;
    // A cell: the design columns present and m (text in `gee`, an integer in `bootstrap`).
    let cell_of = |t: &ResultTable, r: usize| -> (Vec<Option<String>>, String) {
        let design = ["model", "reasoning", "instrument", "swap_pass"].iter().map(|c| t.text(c, r).map(str::to_owned));
        let m = t.text("m", r).map(str::to_owned).or_else(|| t.number("m", r).map(|v| (v as i64).to_string()));
        (design.collect(), m.unwrap_or_default())
    };
    struct Comparison {
        label: String,
        se: f64,
        se_boot: f64,
        clusters: usize,
        resamples: f64,
    }
    let mut comparisons = Vec::new();
    for (formula, term) in SE_TERMS {
        for r in rows_where(gee, &[("analysis", "cell"), ("labels", "visible"), ("formula", formula), ("term", term)]) {
            if !selection.takes_row(gee, r) {
                continue;
            }
            let (Some(se), Some(se_boot)) = (gee.number("se_robust", r), gee.number("se_bootstrap", r)) else {
                continue;
            };
            let key = cell_of(gee, r);
            let resamples = (0..boot.n_rows())
                .find(|&b| {
                    boot.text("passes", b) == gee.text("passes", r)
                        && boot.text("labels", b) == Some("visible")
                        && cell_of(boot, b) == key
                })
                .and_then(|b| boot.number("resamples", b))
                .unwrap_or(0.0);
            // model · reasoning · instrument · m = 3 · term (the pooled pass is the selection's).
            let mut parts: Vec<String> = key.0[..3].iter().flatten().cloned().collect();
            parts.push(format!("m = {}", key.1));
            parts.push(term.to_owned());
            let clusters = gee.number("n_clusters", r).unwrap_or(0.0) as usize;
            comparisons.push(Comparison { label: parts.join(" · "), se, se_boot, clusters, resamples });
        }
    }
    let z = herd_stats::normal_quantile(1.0 - 0.025 / comparisons.len().max(1) as f64);
    let rows = comparisons
        .into_iter()
        .map(|c| {
            let difference = (c.se_boot - c.se).abs();
            let monte_carlo = if c.resamples > 1.0 { z * c.se / (2.0 * (c.resamples - 1.0)).sqrt() } else { f64::NAN };
            let tolerance = SE_AGREEMENT.max(SE_RELATIVE * c.se).max(monte_carlo);
            let mut e = Evidence::new("|bootstrap SE − robust SE| against its tolerance", c.clusters, "societies");
            e.estimate = Some(difference);
            let (verdict, reason) = if c.clusters < SE_MIN_SOCIETIES {
                (
                    Verdict::Inconclusive,
                    format!("{} societies: too few for either standard error to be compared", c.clusters),
                )
            } else if !tolerance.is_finite() || !difference.is_finite() {
                (Verdict::Inconclusive, "a standard error or the number of resamples is undefined".into())
            } else if difference <= tolerance {
                (Verdict::Replicates, format!("{} ≤ {}", num(difference), num(tolerance)))
            } else {
                (Verdict::DoesNotReplicate, format!("{} > {}", num(difference), num(tolerance)))
            };
            let value = format!(
                "bootstrap SE {} vs robust SE {} (|Δ| {}; tolerance {} from {} resamples, z = {:.2})",
                num(c.se_boot),
                num(c.se),
                num(difference),
                num(tolerance),
                c.resamples as usize,
                z
            );
            Row { label: c.label, value, evidence: e, verdict, reason, members: Vec::new(), claim: None }
        })
        .collect();
    let summary = format!(
        "Per visible cell (model × m) on {}: the GEE coefficients of favouritism (same_group) and of the minority \
         interaction (same_group:minority_decider), seed-level cluster bootstrap SE against the robust SE, within \
         0.003, a tenth of the robust SE or the bootstrap's family-wise 95% Monte Carlo error",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// The abstract's "majority deciders allocated close to proportionally" (S6: +0.01 excess share with
/// thinking on): per model, majority deciders' mean excess share over the visible societies with
/// unequal groups lies within ±`effect` (a quarter of the minority's +0.26), judged by two one-sided
/// t-tests as the hidden floor is. Every model must pass.
pub(super) fn majority_proportional(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let margin = h.effect?;
    let selection = Selection::new(&m.dyads, None);
    let claims = match claims_on(&m.dyads, &selection) {
        Ok(c) => c,
        Err(why) => return Some(failed(why)),
    };
    let test = "mean excess share over societies, two one-sided t-tests against the margin (p: Wilcoxon signed-rank)";
    let rows = per_model(&claims, "majority_excess_share", test, Claim::Within { margin }, |v| format!("{v:+.4}"));
    if rows.is_empty() {
        return None;
    }
    let summary = format!(
        "Per model: majority deciders' mean excess share (own-group share − in-group targets / targets) per society, \
         over the visible societies with unequal groups, within ±{}, on {}",
        num(margin),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// The claims table over every reasoning mode, and the models run in both `on` and `off`.
fn both_modes(results: &Results) -> Option<Result<(ResultTable, Selection), Outcome>> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None).every_mode();
    let claims = match claims_on(&m.dyads, &selection) {
        Ok(c) => c,
        Err(why) => return Some(Err(failed(why))),
    };
    // A model's paired on − off rows exist only where it ran both modes.
    let paired = (0..claims.n_rows()).any(|r| claims.text("reasoning", r) == Some(ON_MINUS_OFF));
    paired.then_some(Ok((claims, selection)))
}

/// Whether claims row `r` belongs to a model that has paired on − off rows.
fn in_both_modes(claims: &ResultTable, r: usize) -> bool {
    (0..claims.n_rows()).any(|x| {
        claims.text("reasoning", x) == Some(ON_MINUS_OFF) && claims.text("model", x) == claims.text("model", r)
    })
}

/// S6's control validation: "both reasoning modes had clean group-blind floors" (0.011 ± 0.008 and
/// −0.003 ± 0.004): per model run in both modes, each mode's hidden-label favouritism within the
/// hidden floor's margin, by the hidden floor's equivalence rule.
pub(super) fn hidden_floor_reasoning(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let (claims, selection) = match both_modes(results)? {
        Ok(c) => c,
        Err(failed) => return Some(failed),
    };
    let margin = h.effect?;
    let test = "mean favouritism over societies, two one-sided t-tests against the margin (p: Wilcoxon signed-rank)";
    let rows: Vec<Row> = claim_rows(&claims, "hidden", "favouritism")
        .into_iter()
        .filter(|&r| in_both_modes(&claims, r))
        .map(|r| {
            let e = claim_evidence(&claims, r, test);
            let mode = claims.text("reasoning", r).unwrap_or("?");
            let value = format!(
                "{} points/target ({}, {})",
                e.estimate.map_or("n/a".into(), signed),
                claim_ms(&claims, r),
                e.p_text()
            );
            Row::judged(format!("{} · thinking {mode}", claim_model(&claims, r)), value, e, Claim::Within { margin })
        })
        .collect();
    let summary = format!(
        "Per model run with thinking on and off, each mode with hidden labels: mean favouritism over its societies \
         (pooled over m) within ±{} points/target, on {}",
        num(margin),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// S6: "thinking-enabled majority deciders had +0.01 excess share, versus +0.15 for non-thinking
/// majority deciders": per model run in both modes, the on − off majority excess share per society
/// (paired, visible labels, unequal groups) is negative.
pub(super) fn reasoning_majority_share(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let (claims, selection) = match both_modes(results)? {
        Ok(c) => c,
        Err(failed) => return Some(failed),
    };
    let test = "seed-level Wilcoxon signed-rank over societies";
    let rows = claim_rows(&claims, "visible", "majority_excess_share")
        .into_iter()
        .filter(|&r| claims.text("reasoning", r) == Some(ON_MINUS_OFF))
        .map(|r| {
            let model = claim_model(&claims, r);
            let mode_mean = |mode: &str| {
                claim_rows(&claims, "visible", "majority_excess_share")
                    .into_iter()
                    .find(|&x| {
                        claims.text("model", x) == Some(model.as_str()) && claims.text("reasoning", x) == Some(mode)
                    })
                    .and_then(|x| claims.number("mean", x))
                    .map_or("n/a".into(), |v| format!("{v:+.4}"))
            };
            let e = claim_evidence(&claims, r, test);
            let value = format!(
                "on − off {} (on {}, off {}; {}, paired by society)",
                e.estimate.map_or("n/a".into(), |v| format!("{v:+.4}")),
                mode_mean("on"),
                mode_mean("off"),
                claim_ms(&claims, r)
            );
            Row::judged(format!("{model} · majority excess share on − off"), value, e, Claim::negative(h.effect))
        })
        .collect();
    let summary = format!(
        "Per model run with thinking on and off: majority deciders' mean excess share per society, on − off, over the \
         visible societies with unequal groups, on {}",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}
