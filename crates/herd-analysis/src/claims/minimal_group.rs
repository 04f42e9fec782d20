//! The minimal-group paper's headlines, each on the paper's unit and selection. Every headline uses
//! the base instrument, each model's default reasoning mode and both swap passes of a society pooled
//! ([`Selection`]); the paraphrase instrument and each pass alone have their own robustness rows.
//! The paper's per-model claims (favouritism, the minority gap, prevalence) are judged per model on
//! the model's societies pooled over m; its per-cell claims (the hidden floor, extreme allocations,
//! the BH count) per cell. The society is the unit of every test, as in the paper: seed-level
//! Wilcoxon tests over societies, with the dyad-level GEE coefficient as the per-model estimate.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Dyad, DyadTable, Labels, MinimalGroupTables, ResultTable};
use herd_stats::{Alternative, students_t_cdf};

use super::evidence::{ALPHA, Claim, Combine, Evidence, Row, t_quantile, wilcoxon_evidence, wilcoxon_min_p};
use super::minimal_group_claims::{claim_evidence, claim_model, claim_ms, claim_rows, claims_on};
use super::societies::{Selection, Society, deciders_by_model, model_name, society_means};
use super::{Outcome, PaperHeadline, Verdict};
use crate::format::{num, p_is, p_value, signed};
use crate::minimal_group::is_main_row;
use crate::results::Results;
use crate::table::rows_where;

/// Fewest units on which a normal-theory (z) p-value is printed: below it the report shows the
/// seed-level test's p alone.
pub(crate) const Z_MIN_UNITS: usize = 30;

const DESIGN: [&str; 4] = ["model", "reasoning", "instrument", "swap_pass"];

/// `1 seed`, `4 seeds`.
fn seeds(n: usize) -> String {
    if n == 1 { "1 seed".into() } else { format!("{n} seeds") }
}

/// The rows of one label arm and decider set in `selection` (main rows: both passes of a society
/// together; or one pass alone where the selection says so).
fn seed_rows(tables: &MinimalGroupTables, selection: &Selection, labels: &str, deciders: &str) -> Vec<usize> {
    let t = &tables.seed_tests;
    rows_where(t, &[("labels", labels), ("deciders", deciders), ("measure", "favouritism")])
        .into_iter()
        .filter(|&r| selection.takes_row(t, r))
        .collect()
}

/// A model's dyad-level favouritism: `points ~ same_group` over its cells of one label condition
/// pooled over m (herd-analysis's `m_pooled` GEE rows), clustered by society.
struct ModelFit {
    coef: f64,
    se: f64,
    clusters: usize,
    z: f64,
    p: f64,
}

fn model_fit(gee: &ResultTable, selection: &Selection, model: &Option<String>, labels: Labels) -> Option<ModelFit> {
    let conditions = [
        ("analysis", "m_pooled"),
        ("labels", labels.as_str()),
        ("formula", "points ~ same_group"),
        ("term", "same_group"),
    ];
    rows_where(gee, &conditions)
        .into_iter()
        .find(|&r| selection.takes_row(gee, r) && gee.text("model", r).map(str::to_owned) == *model)
        .and_then(|r| {
            Some(ModelFit {
                coef: gee.number("coef", r)?,
                se: gee.number("se_robust", r)?,
                clusters: gee.number("n_clusters", r)? as usize,
                z: gee.number("z", r).unwrap_or(f64::NAN),
                p: gee.number("p", r).unwrap_or(f64::NAN),
            })
        })
}

/// The 95% interval of a cluster-robust estimate on `clusters` clusters with Student's t on
/// clusters − 1 degrees of freedom (the usual small-sample correction of a sandwich SE; on 30
/// societies it is 4% wider than the normal interval, on 8 it is 21% wider).
pub(super) fn cluster_t_interval(estimate: f64, se: f64, clusters: usize) -> Option<(f64, f64)> {
    if clusters < 2 || !(estimate.is_finite() && se.is_finite()) {
        return None;
    }
    let half = t_quantile(0.975, (clusters - 1) as f64) * se;
    Some((estimate - half, estimate + half))
}

/// `GEE same_group +2.410 (robust SE 0.210, 24 societies)`, with the GEE's own z-test only on 30 or
/// more societies (a normal-theory p on fewer is not printed).
fn describe_fit(f: &ModelFit) -> String {
    let z =
        if f.clusters >= Z_MIN_UNITS { format!("; GEE robust z = {}, {}", num(f.z), p_is(f.p)) } else { String::new() };
    format!(
        "GEE same_group {} (independence, an intercept per decider; robust SE {}, {} societies{z})",
        signed(f.coef),
        num(f.se),
        f.clusters
    )
}

/// The paper's per-model favouritism on `selection`: each model's mean favouritism over its visible
/// societies (m × seed), judged with the seed-level Wilcoxon signed-rank test and the mean's 95%
/// t-interval, with the dyad-level GEE `same_group` coefficient (pooled over m) beside it.
fn per_model_favouritism(h: &PaperHeadline, results: &Results, selection: &Selection, label: &str) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    if !selection.instrument_in(&m.dyads) {
        return None;
    }
    let claims = claims_on(&m.dyads, selection).ok()?;
    let rows = claim_rows(&claims, "visible", "favouritism")
        .into_iter()
        .map(|r| {
            let model = claims.text("model", r).map(str::to_owned);
            let model = &model;
            // The paper's favouritism: each decider's mean to same-group targets minus its mean to
            // other-group targets, averaged per society; the estimate is the mean over societies with
            // its 95% t-interval and seed-level Wilcoxon test, the GEE coefficient beside it.
            let e = claim_evidence(
                &claims,
                r,
                "mean favouritism over societies with its 95% t-interval; p: seed-level Wilcoxon signed-rank over societies",
            );
            let fit = model_fit(&m.tables.gee, selection, model, Labels::Visible);
            let value = format!(
                "{} points/target; {}",
                e.estimate.map_or("n/a".into(), signed),
                fit.as_ref().map_or("no per-model GEE row (`m_pooled`) in the tables".into(), describe_fit)
            );
            let name = if label.is_empty() { model_name(model) } else { format!("{} · {label}", model_name(model)) };
            Row::judged(name, value, e, Claim::positive(h.effect))
        })
        .collect();
    let summary = format!(
        "Per model: mean favouritism (mean to same-group minus mean to other-group targets per decider, averaged \
         per society) over the model's visible societies pooled over m, with the dyad-level GEE same_group \
         coefficient (points ~ same_group + an intercept per decider, independence, clustered by society) beside it, on {}; the per-cell values are in the \
         seed_tests table",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

pub(super) fn favouritism_visible(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    per_model_favouritism(h, results, &Selection::new(&m.dyads, None), "")
}

/// Robustness: each swap pass alone, per model (the headline pools both).
pub(super) fn favouritism_per_pass(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let mut rows = Vec::new();
    let mut summary = String::new();
    for pass in Selection::passes(&m.dyads) {
        let selection = Selection::new(&m.dyads, None).on_pass(&pass);
        if let Some(o) = per_model_favouritism(h, results, &selection, &format!("{pass} pass")) {
            rows.extend(o.rows);
            summary = o.summary.replace(&format!("the {pass} swap pass alone"), "each swap pass alone");
        }
    }
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// Robustness: the paraphrase instrument's favouritism, per model (the paper: direction kept, the
/// magnitude changed, so only the sign is judged).
pub(super) fn favouritism_paraphrase(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let mut rows = Vec::new();
    let mut summary = String::new();
    let sign_only = PaperHeadline { effect: None, ..h.clone() };
    for instrument in Selection::other_instruments(&m.dyads) {
        let selection = Selection::new(&m.dyads, Some(instrument.as_str()));
        if let Some(o) = per_model_favouritism(&sign_only, results, &selection, &instrument) {
            rows.extend(o.rows);
            summary = o.summary;
        }
    }
    Some(Outcome { summary, rows, combine: Combine::All })
}

pub(super) fn minority_gap(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let claims = claims_on(&m.dyads, &selection).ok()?;
    let rows = claim_rows(&claims, "visible", "minority_gap")
        .into_iter()
        .map(|r| {
            let e = claim_evidence(&claims, r, "seed-level Wilcoxon signed-rank over societies");
            let value = format!("{} ({} pooled)", e.estimate.map_or("n/a".into(), signed), claim_ms(&claims, r));
            Row::judged(claim_model(&claims, r), value, e, Claim::positive(h.effect))
        })
        .collect();
    let summary = format!(
        "Per model: minority − majority deciders' mean favouritism within each society, over the model's visible \
         societies with unequal groups, on {}; per-cell gaps (the paper's R1-Distill-Llama-8B m = 3 exception) \
         are in the seed_tests table",
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// The paper's exception to the paraphrase floor and the majority reversal: the one model that
/// broke each, as the papers name it (matched case-insensitively within a model id).
pub(super) const PAPER_EXCEPTION_MODEL: &str = "R1-Distill-Llama-8B";

/// Whether a model id names the paper's exception model (`deepseek-ai/DeepSeek-R1-Distill-Llama-8B`).
pub(super) fn is_paper_exception(model: &str) -> bool {
    model.to_lowercase().contains(&PAPER_EXCEPTION_MODEL.to_lowercase())
}

/// The per-model hidden-label favouritism on `selection`, judged as an equivalence within ±`margin`:
/// the mean over the model's societies (pooled over m) of each society's mean favouritism, its
/// 95% t-interval and seed-level Wilcoxon p beside.
fn hidden_rows(results: &Results, selection: &Selection, margin: f64) -> Option<Vec<Row>> {
    let m = results.minimal_group.as_ref()?;
    if !selection.instrument_in(&m.dyads) {
        return None;
    }
    let claims = claims_on(&m.dyads, selection).ok()?;
    let rows = claim_rows(&claims, "hidden", "favouritism")
        .into_iter()
        .map(|r| {
            let e = claim_evidence(
                &claims,
                r,
                "mean favouritism over societies, two one-sided t-tests against the margin (p: Wilcoxon signed-rank)",
            );
            let value = format!(
                "{} points/target ({}, {})",
                e.estimate.map_or("n/a".into(), signed),
                claim_ms(&claims, r),
                e.p_text()
            );
            Row::judged(claim_model(&claims, r), value, e, Claim::Within { margin })
        })
        .collect();
    Some(rows)
}

/// The hidden-label floor as an equivalence judgement per model: each model's mean favouritism with
/// hidden labels within ±margin (a quarter of the paper's smallest visible favouritism) by two
/// one-sided t-tests over its societies. Every model must pass, an intersection-union test that
/// needs no multiplicity correction. The paper's own description (within ±0.03, all p > 0.13 per
/// cell) describes its result; as a test over twelve cells a group-blind agent fails it in about
/// two runs of five (docs/calibration.md). docs/deviations.md, "The hidden-label floor".
pub(super) fn hidden_floor(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let margin = h.effect?;
    let rows = hidden_rows(results, &selection, margin)?;
    let summary = format!(
        "Per model with hidden labels: mean favouritism over its societies (pooled over m) within ±{} points/target, \
         on {}; the per-cell tests are in the seed_tests table",
        num(margin),
        selection.describe()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}

/// The paper's robustness finding: under the paraphrase one model (R1-Distill-Llama-8B) breaks the
/// hidden floor that holds on the base instrument (0.74–1.31 points/target, significant), while the
/// other three stay within ±0.28 (the headline's `effect`). A row per model and paraphrase:
/// "replicates" where the base floor holds and the paraphrase shows the exception (positive, p <
/// 0.05, the 95% interval above the other models' ±0.28); a model within ±0.28 under the
/// paraphrase is "like the paper's other models", which decides nothing about the exception unless
/// it is the paper's exception model.
pub(super) fn hidden_floor_paraphrase(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let others = Selection::other_instruments(&m.dyads);
    if others.is_empty() {
        return None;
    }
    let band = h.effect?;
    let floor_margin = paper_headlines_effect("hidden_floor")?;
    let base = hidden_rows(results, &Selection::new(&m.dyads, None), floor_margin)?;
    let mut rows = Vec::new();
    for instrument in &others {
        let selection = Selection::new(&m.dyads, Some(instrument.as_str()));
        for paraphrase in hidden_rows(results, &selection, band)? {
            let model = paraphrase.label.clone();
            let base_row = base.iter().find(|b| b.label == model);
            let base_holds = base_row.is_some_and(|b| b.verdict == Verdict::Replicates);
            let e = &paraphrase.evidence;
            let exception = e.estimate.is_some_and(|v| v > 0.0)
                && e.p.is_some_and(|p| p < ALPHA)
                && e.interval.is_some_and(|(lo, _)| lo > band);
            let base_text = base_row.map_or("no base cells".into(), |b| format!("base {}", b.value));
            let (verdict, reason) = if exception && base_holds {
                (
                    Verdict::Replicates,
                    format!("the base floor holds and the {instrument} breaks it: {}", paraphrase.reason),
                )
            } else if exception {
                (
                    Verdict::Inconclusive,
                    format!(
                        "the {instrument} breaks the floor, but the base floor does not hold ({base_text}): not a wording effect alone"
                    ),
                )
            } else if is_paper_exception(&model) && paraphrase.verdict == Verdict::Replicates {
                (
                    Verdict::DoesNotReplicate,
                    format!("the paper's exception model stays within ±{} under the {instrument}", num(band)),
                )
            } else if is_paper_exception(&model) {
                (Verdict::Inconclusive, paraphrase.reason.clone())
            } else {
                let like = if paraphrase.verdict == Verdict::Replicates {
                    format!("like the paper's other models (within ±{} under the {instrument})", num(band))
                } else {
                    format!("no exception shown ({})", paraphrase.reason)
                };
                (
                    Verdict::NotInRun,
                    format!("{like}; the paper's exception, {PAPER_EXCEPTION_MODEL}, is not this model"),
                )
            };
            let value = format!("{instrument} {}; {base_text}", paraphrase.value);
            rows.push(Row {
                label: format!("{model} · {instrument}"),
                value,
                evidence: paraphrase.evidence.clone(),
                verdict,
                reason,
                members: Vec::new(),
                claim: None,
            });
        }
    }
    let summary = format!(
        "Per model, hidden-label favouritism under the {} instrument{} beside the same model's base instrument (each \
         model's default reasoning mode, both passes)",
        others.iter().cloned().collect::<Vec<_>>().join(", "),
        if others.len() > 1 { "s" } else { "" }
    );
    Some(Outcome { summary, rows, combine: Combine::Any })
}

/// A bundled headline's `effect`.
fn paper_headlines_effect(id: &str) -> Option<f64> {
    super::paper_headlines().ok()?.into_iter().find(|h| h.id == id)?.effect
}

/// Per society, the share of the chosen deciders meeting `test`.
fn shares(
    societies: &BTreeMap<Society, Vec<super::societies::Decider>>,
    choose: fn(&super::societies::Decider) -> bool,
    test: fn(&super::societies::Decider) -> bool,
) -> BTreeMap<Society, f64> {
    society_means(societies, choose, |d| f64::from(u8::from(test(d))))
}

/// Prevalence per model: with visible labels, the share of minority deciders favouring their group
/// above 50% (two-sided test, the paper's smallest 78.7%); with hidden labels, the share of all
/// deciders *not above* 50% (one-sided: a group-blind agent's share is near 50%, and the paper's
/// "below 50%" is its ties at zero favouritism), confirmed where the one-sided 95% bound stays below
/// the paper's smallest visible share. docs/deviations.md, "Prevalence with hidden labels".
pub(super) fn prevalence(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    let claims = claims_on(&m.dyads, &selection).ok()?;
    let hidden = deciders_by_model(&m.dyads, &selection);
    // Minority deciders of the unequal societies with visible labels (at m = half the society
    // "minority" is one of two equal groups); all deciders with hidden labels.
    let rows = rows_where(&claims, &[("quantity", "prevalence")])
        .into_iter()
        .filter_map(|r| {
            let visible = claims.text("labels", r) == Some("visible");
            let e = claim_evidence(&claims, r, "Wilcoxon signed-rank of share − 0.5 over societies");
            let (who, claim, e) = if visible {
                ("minority deciders", Claim::positive(h.effect.map(|e| e - 0.5)), e)
            } else {
                // The same societies' shares (the claims row's values) tested one-sided, "greater".
                let model = claims.text("model", r).map(str::to_owned);
                let societies = hidden.get(&(model, Labels::Hidden))?;
                let d: Vec<f64> = shares(societies, |_| true, |d| d.favours).into_values().map(|v| v - 0.5).collect();
                let mut one_sided = wilcoxon_evidence(&d, Alternative::Greater, "societies");
                // The claims row's own values, recounted: the same societies and deciders.
                debug_assert!(
                    e.estimate.zip(one_sided.estimate).is_none_or(|(a, b)| (a - b).abs() < 1e-9),
                    "hidden prevalence recounted differently: {:?} vs {:?}",
                    e.estimate,
                    one_sided.estimate
                );
                one_sided.test = "Wilcoxon signed-rank of share − 0.5 over societies (one-sided, above)".into();
                let margin = h.effect.map_or(f64::INFINITY, |e| e - 0.5);
                ("all deciders", Claim::NotAbove { margin, zero: "50%" }, one_sided)
            };
            let value = format!("{:.1}% of {who}", 100.0 * (e.estimate? + 0.5));
            let label = format!("{} · {}", claim_model(&claims, r), claims.text("labels", r).unwrap_or_default());
            Some(Row::judged(label, value, e, claim))
        })
        .collect();
    let summary =
        format!("Per model and label condition, over its societies (pooled over m) on {}", selection.describe());
    Some(Outcome { summary, rows, combine: Combine::All })
}

pub(super) fn extreme_allocations(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let selection = Selection::new(&m.dyads, None);
    // (model, labels, m) → seed → deciders
    type Cell = (Option<String>, Labels, u32);
    let mut cells: BTreeMap<Cell, BTreeMap<Society, Vec<super::societies::Decider>>> = BTreeMap::new();
    for ((model, labels), societies) in deciders_by_model(&m.dyads, &selection) {
        for (society, ds) in societies {
            cells.entry((model.clone(), labels, society.0)).or_default().insert(society, ds);
        }
    }
    let overall = |key: &Cell| {
        let ds: Vec<&super::societies::Decider> = cells[key].values().flatten().collect();
        ds.iter().filter(|d| d.extreme).count() as f64 / ds.len() as f64
    };
    let name = |k: &Cell| format!("{} · m = {}", model_name(&k.0), k.2);
    let listing = |labels: Labels| {
        cells
            .keys()
            .filter(|k| k.1 == labels)
            .map(|k| format!("{}: {:.1}%", name(k), 100.0 * overall(k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // The visible cell with the most extreme allocations, against the same societies with hidden labels.
    let hidden_of = |k: &Cell| (k.0.clone(), Labels::Hidden, k.2);
    let top = cells
        .keys()
        .filter(|k| k.1 == Labels::Visible && cells.contains_key(&hidden_of(k)))
        .max_by(|a, b| overall(a).total_cmp(&overall(b)))?;
    let share = |k: &Cell| shares(&cells[k], |_| true, |d| d.extreme);
    let hidden = share(&hidden_of(top));
    let d: Vec<f64> = share(top).iter().filter_map(|(s, v)| hidden.get(s).map(|h| v - h)).collect();
    let value = format!("{:.1}% visible vs {:.1}% hidden", 100.0 * overall(top), 100.0 * overall(&hidden_of(top)));
    let mut e = wilcoxon_evidence(&d, Alternative::TwoSided, "seeds");
    e.test = "Wilcoxon signed-rank, visible − hidden by society".into();
    let row = Row::judged(name(top), value, e, Claim::positive(h.effect));
    let summary = format!(
        "On {}: visible {}; hidden {}",
        selection.describe(),
        listing(Labels::Visible),
        listing(Labels::Hidden)
    );
    Some(Outcome { summary, rows: vec![row], combine: Combine::All })
}

/// The paper's count (S5, "21 of 24 visible; 1 of 24 hidden"): cells are model × m × decider block
/// (minority and majority deciders) in each model's default reasoning mode on the base instrument,
/// and a cell survives when its Benjamini–Hochberg q over that family (`q_paper_family`, per label
/// arm, mode and instrument) is below 0.05.
pub(super) fn bh_survivors(_: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let tables = &m.tables;
    let selection = Selection::new(&m.dyads, None);
    let t = &tables.seed_tests;
    let blocks = |labels: &str| -> Vec<usize> {
        ["minority", "majority"].iter().flat_map(|deciders| seed_rows(tables, &selection, labels, deciders)).collect()
    };
    let (visible, hidden) = (blocks("visible"), blocks("hidden"));
    if visible.is_empty() {
        return None;
    }
    let q = |r: usize| t.number("q_paper_family", r);
    let survive = |rows: &[usize]| rows.iter().filter(|&&r| q(r).is_some_and(|q| q < ALPHA)).count();
    let undefined = visible.iter().chain(&hidden).filter(|&&r| q(r).is_none_or(|q| !q.is_finite())).count();
    let n = visible.iter().chain(&hidden).filter_map(|&r| t.number("n_seeds", r)).fold(0.0, f64::max) as usize;
    let (v, hd) = (survive(&visible), survive(&hidden));
    let min_p = wilcoxon_min_p(n, true);
    let (verdict, reason) = if undefined > 0 {
        (Verdict::Inconclusive, format!("q is undefined for {undefined} cells"))
    } else if min_p >= ALPHA {
        (
            Verdict::Inconclusive,
            format!("with {} the smallest attainable p is {}: no cell can survive", seeds(n), p_value(min_p)),
        )
    } else if 2 * v >= visible.len() && v > hd {
        (Verdict::Replicates, format!("{v} of {} visible cells survive, more than the {hd} hidden", visible.len()))
    } else {
        (Verdict::DoesNotReplicate, format!("{v} of {} visible cells survive, {hd} hidden", visible.len()))
    };
    let family = format!(
        "Benjamini–Hochberg per label arm over model × m × decider block, {} Wilcoxon signed-rank tests",
        visible.len() + hidden.len()
    );
    let mut e = Evidence::new(family, n, "seeds");
    e.min_p = Some(min_p);
    let value = format!("{v} of {} visible cells; {hd} of {} hidden", visible.len(), hidden.len());
    let row = Row { label: "cells".into(), value, evidence: e, verdict, reason, members: Vec::new(), claim: None };
    let summary = format!("Cells on {}", selection.describe());
    Some(Outcome { summary, rows: vec![row], combine: Combine::All })
}

/// The paper's "every minority-decider block survived correction, with rank-biserial effect sizes up to
/// +1.00" (S5): every visible minority-decider cell (model × m, base instrument, default mode) survives
/// Benjamini–Hochberg as in [`bh_survivors`] (q < 0.05 over the same family) with positive favouritism
/// (its seed mean). The row lists the cells that do not.
pub(super) fn minority_blocks_survive(_: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let tables = &m.tables;
    let selection = Selection::new(&m.dyads, None);
    let t = &tables.seed_tests;
    let blocks = seed_rows(tables, &selection, "visible", "minority");
    if blocks.is_empty() {
        return None;
    }
    let cell = |r: usize| {
        let model = t.text("model", r).map_or(String::new(), |model| format!("{model} "));
        format!("{model}m = {}", t.number("m", r).map_or("?".into(), |m| format!("{m}")))
    };
    let q = |r: usize| t.number("q_paper_family", r).filter(|q| q.is_finite());
    let survives = |r: usize| q(r).is_some_and(|q| q < ALPHA) && t.number("mean", r).is_some_and(|mean| mean > 0.0);
    let undefined: Vec<String> = blocks.iter().filter(|&&r| q(r).is_none()).map(|&r| cell(r)).collect();
    let fallen: Vec<String> = blocks.iter().filter(|&&r| !survives(r)).map(|&r| cell(r)).collect();
    let n = blocks.iter().filter_map(|&r| t.number("n_seeds", r)).fold(0.0, f64::max) as usize;
    let min_p = wilcoxon_min_p(n, true);
    let kept = blocks.len() - fallen.len();
    let largest_rb = blocks.iter().filter_map(|&r| t.number("rank_biserial", r)).fold(f64::NAN, f64::max);
    let (verdict, reason) = if !undefined.is_empty() {
        (Verdict::Inconclusive, format!("q is undefined for {}", undefined.join(", ")))
    } else if min_p >= ALPHA {
        (
            Verdict::Inconclusive,
            format!("with {} the smallest attainable p is {}: no block can survive", seeds(n), p_value(min_p)),
        )
    } else if fallen.is_empty() {
        (Verdict::Replicates, format!("all {} minority-decider blocks survive with positive favouritism", blocks.len()))
    } else {
        (Verdict::DoesNotReplicate, format!("{} do not survive (or favour the out-group)", fallen.join(", ")))
    };
    let mut e = Evidence::new(
        "Benjamini–Hochberg per label arm over model × m × decider block, Wilcoxon signed-rank tests",
        n,
        "seeds",
    );
    e.min_p = Some(min_p);
    let largest =
        if largest_rb.is_finite() { format!("; largest rank-biserial {largest_rb:+.2}") } else { String::new() };
    let value = format!("{kept} of {} visible minority-decider blocks{largest}", blocks.len());
    let row =
        Row { label: "minority blocks".into(), value, evidence: e, verdict, reason, members: Vec::new(), claim: None };
    let summary = format!("Visible minority-decider blocks on {}", selection.describe());
    Some(Outcome { summary, rows: vec![row], combine: Combine::All })
}

/// Societies per reasoning mode behind a pooled reasoning fit (the fewest over the modes).
fn societies_per_mode(dyads: &DyadTable, gee: &ResultTable, r: usize) -> usize {
    let matches = |d: &Dyad| {
        d.labels == Labels::Visible
            && DESIGN.iter().enumerate().all(|(i, c)| {
                // The fit pools the modes, and both passes where the row says `both`.
                i == 1
                    || gee
                        .text(c, r)
                        .is_none_or(|v| v == "both" || v == "pooled" || d.design.0[i].as_deref() == Some(v))
            })
    };
    // reasoning mode → societies (m, seed)
    let mut per_mode: BTreeMap<Option<String>, BTreeSet<(u32, i64)>> = BTreeMap::new();
    for d in dyads.rows.iter().filter(|d| matches(d)) {
        per_mode.entry(d.design.0[1].clone()).or_default().insert((d.m, d.seed));
    }
    per_mode.values().map(BTreeSet::len).min().unwrap_or(0)
}

pub(super) fn reasoning_interaction(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let g = &m.tables.gee;
    let base = Selection::new(&m.dyads, None);
    // The paper's control: `points ~ same_group * reasoning` per model (herd-analysis's
    // `reasoning_control` rows; the three-way model has the same term and is not this estimand).
    let rows =
        rows_where(g, &[("labels", "visible"), ("term", "same_group:reasoning"), ("analysis", "reasoning_control")])
            .into_iter()
            .filter(|&r| is_main_row(g, r) && base.takes_instrument(g, r))
            .map(|r| {
                let n = societies_per_mode(&m.dyads, g, r);
                let coef = g.number("coef", r);
                let se = g.number("se_robust", r);
                let clusters = g.number("n_clusters", r).unwrap_or(0.0) as usize;
                let mut e = Evidence::new(
                    "GEE same_group × reasoning, robust-SE t-test on societies − 1 df",
                    n,
                    "societies per mode",
                );
                e.estimate = coef;
                // The GEE's normal p rests on asymptotics in the number of clusters; on the t
                // distribution with clusters − 1 df it is the usual small-sample reading, and the
                // same on the paper's 90 societies.
                e.p = coef
                    .zip(se)
                    .filter(|_| clusters >= 2)
                    .map(|(c, se)| 2.0 * students_t_cdf(-(c / se).abs(), (clusters - 1) as f64));
                // Robust SEs rest on the societies (clusters); as few as a seed-level test cannot decide on
                // leave the GEE's p unsupported.
                e.min_p = Some(wilcoxon_min_p(n, true));
                // A gate, not the t-test's floor: its p is printed as it is.
                e.min_p_is_floor = false;
                e.interval = coef.zip(se).and_then(|(c, se)| cluster_t_interval(c, se, clusters));
                e.interval_name = "95% t-interval";
                // The fit pools the reasoning modes and the minority sizes; the other design columns name it.
                let parts: Vec<&str> =
                    DESIGN.iter().filter(|&&c| c != "reasoning").filter_map(|c| g.text(c, r)).collect();
                let label = if parts.is_empty() { "pooled".to_owned() } else { parts.join(" · ") };
                Row::judged(label, coef.map_or("n/a".into(), signed), e, Claim::negative(h.effect))
            })
            .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_robust_intervals_and_p_use_t_on_clusters_minus_one() {
        // scipy.stats.t.ppf(0.975, 23) = 2.0686576104190486 (24 societies).
        let (lo, hi) = cluster_t_interval(1.0, 0.5, 24).unwrap();
        assert!((hi - 1.0 - 0.5 * 2.068_657_610_419_048_6).abs() < 1e-9 && (lo + hi - 2.0).abs() < 1e-12);
        // One cluster gives no interval.
        assert_eq!(cluster_t_interval(1.0, 0.5, 1), None);
        // 2 · scipy.stats.t.sf(2.5, 9) = 0.033861827682985735: the reasoning interaction's p on 10 societies.
        let p = 2.0 * students_t_cdf(-2.5, 9.0);
        assert!((p - 0.033_861_827_682_985_735).abs() < 1e-6 * 0.034, "{p}");
    }
}
