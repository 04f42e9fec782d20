//! The minimal-group paper's headlines. The society (seed) is the unit of every test, as in the
//! paper: seed-level Wilcoxon tests and bootstrap intervals from the analysis tables, and per-society
//! shares computed here from the dyads for prevalence and extreme allocations.

use std::collections::{BTreeMap, BTreeSet};

use herd_analysis::{Dyad, DyadTable, Labels, MinimalGroupTables, ResultTable};
use herd_stats::Alternative;

use super::evidence::{ALPHA, Claim, Combine, Evidence, Row, wilcoxon_evidence, wilcoxon_min_p, z_interval};
use super::{Outcome, PaperHeadline, Verdict};
use crate::figure::{is_main_row, num, p_value, rows_where, signed};
use crate::results::Results;

/// The paper's hidden-label floor (section 2.1): every hidden cell's raw seed-level p above this…
const FLOOR_P: f64 = 0.13;
/// …and its dyad-level GEE |z| below this.
const FLOOR_Z: f64 = 1.5;
const DESIGN: [&str; 4] = ["model", "reasoning", "instrument", "swap_pass"];

/// `1 seed`, `4 seeds`.
fn seeds(n: usize) -> String {
    if n == 1 { "1 seed".into() } else { format!("{n} seeds") }
}

fn minimal_group(results: &Results) -> Option<&MinimalGroupTables> {
    results.minimal_group.as_ref().map(|m| &m.tables)
}

/// A cell of a result table: the design columns present, labels and m (text or integer columns).
type CellKey = (Vec<Option<String>>, String, String);

fn cell_key(t: &ResultTable, r: usize) -> CellKey {
    let design = DESIGN.iter().map(|c| t.text(c, r).map(str::to_owned)).collect();
    let m = t
        .text("m", r)
        .map(str::to_owned)
        .or_else(|| t.number("m", r).map(|m| (m as i64).to_string()))
        .unwrap_or_default();
    (design, t.text("labels", r).unwrap_or_default().to_owned(), m)
}

fn dyad_key(d: &Dyad) -> CellKey {
    (d.design.0.to_vec(), d.labels.as_str().to_owned(), d.m.to_string())
}

/// A cell's name from the design columns present, labels and m.
fn cell_name(key: &CellKey) -> String {
    let mut parts: Vec<String> = key.0.iter().flatten().cloned().collect();
    parts.push(format!("m = {}", key.2));
    parts.join(" · ")
}

/// The main rows (both passes of a society together, not each alone) of one label arm and decider set.
fn seed_rows(tables: &MinimalGroupTables, labels: &str, deciders: &str) -> Vec<usize> {
    let t = &tables.seed_tests;
    rows_where(t, &[("labels", labels), ("deciders", deciders), ("measure", "favouritism")])
        .into_iter()
        .filter(|&r| is_main_row(t, r))
        .collect()
}

/// The seed-level test of one `seed_tests` row, with the bootstrap interval of `quantity` for its cell.
fn seed_evidence(tables: &MinimalGroupTables, r: usize, quantity: &str) -> Evidence {
    let t = &tables.seed_tests;
    let n = t.number("n_seeds", r).unwrap_or(0.0) as usize;
    let mut e = Evidence::new("Wilcoxon signed-rank", n, "seeds");
    e.estimate = t.number("mean", r);
    e.p = t.number("wilcoxon_p", r);
    e.min_p = Some(wilcoxon_min_p(n, true));
    let key = cell_key(t, r);
    let b = &tables.bootstrap;
    e.interval = rows_where(b, &[("quantity", quantity)])
        .into_iter()
        .find(|&i| is_main_row(b, i) && cell_key(b, i) == key)
        .and_then(|i| Some((b.number("ci_low", i)?, b.number("ci_high", i)?)));
    e.interval_name = "95% bootstrap interval";
    e
}

pub(super) fn favouritism_visible(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let tables = minimal_group(results)?;
    let rows = seed_rows(tables, "visible", "all")
        .into_iter()
        .map(|r| {
            let e = seed_evidence(tables, r, "favouritism");
            let value = e.estimate.map_or("n/a".into(), signed);
            Row::judged(cell_name(&cell_key(&tables.seed_tests, r)), value, e, Claim::positive(h.effect))
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

pub(super) fn minority_gap(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let t = &m.tables.seed_tests;
    // Society size from the dyads: each decider rates every other member.
    let first = m.dyads.rows.first()?;
    let society = m
        .dyads
        .rows
        .iter()
        .filter(|d| dyad_key(d) == dyad_key(first) && d.seed == first.seed && d.decider == first.decider)
        .count()
        + 1;
    let rows = seed_rows(&m.tables, "visible", "minority_minus_majority")
        .into_iter()
        .filter(|&r| t.number("m", r).is_some_and(|minority| 2.0 * minority < society as f64))
        .map(|r| {
            let e = seed_evidence(&m.tables, r, "minority_minus_majority");
            let value = e.estimate.map_or("n/a".into(), signed);
            Row::judged(cell_name(&cell_key(t, r)), value, e, Claim::positive(h.effect))
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// The GEE z of `same_group` in `points ~ same_group` for a cell (its main fit, both passes pooled).
fn floor_z(gee: &ResultTable, key: &CellKey) -> Option<f64> {
    rows_where(gee, &[("formula", "points ~ same_group"), ("term", "same_group")])
        .into_iter()
        .find(|&r| {
            gee.text("analysis", r).is_none_or(|a| a == "cell") && is_main_row(gee, r) && cell_key(gee, r) == *key
        })
        .and_then(|r| gee.number("z", r))
}

pub(super) fn hidden_floor(_: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let tables = minimal_group(results)?;
    let t = &tables.seed_tests;
    let rows = seed_rows(tables, "hidden", "all")
        .into_iter()
        .map(|r| {
            let key = cell_key(t, r);
            let n = t.number("n_seeds", r).unwrap_or(0.0) as usize;
            let mut e = Evidence::new("Wilcoxon signed-rank and GEE z", n, "seeds");
            e.estimate = t.number("mean", r).filter(|v| v.is_finite());
            e.p = t.number("wilcoxon_p", r).filter(|v| v.is_finite());
            e.min_p = Some(wilcoxon_min_p(n, true));
            let z = floor_z(&tables.gee, &key).filter(|v| v.is_finite());
            // The paper's rule, on the raw (not BH-adjusted) p: p > 0.13 and |z| < 1.5 in every cell. With
            // too few seeds the Wilcoxon cannot fail it, and a GEE on as few clusters gives no usable z
            // (one society gives |z| ≈ 10¹⁵), so such a cell decides nothing either way.
            let (verdict, reason) = match (e.estimate, e.p, z) {
                (None, _, _) | (_, None, _) | (_, _, None) => {
                    (Verdict::Inconclusive, "the mean, p or z is undefined: no floor can rest on it".to_owned())
                }
                _ if wilcoxon_min_p(n, true) > FLOOR_P => (
                    Verdict::Inconclusive,
                    format!(
                        "with {} the smallest attainable p is {} > {FLOOR_P}: the floor test cannot fail",
                        seeds(n),
                        p_value(wilcoxon_min_p(n, true))
                    ),
                ),
                (_, Some(p), Some(z)) if p <= FLOOR_P || z.abs() >= FLOOR_Z => (
                    Verdict::DoesNotReplicate,
                    format!("p = {} (floor needs > {FLOOR_P}), |z| = {} (needs < {FLOOR_Z})", p_value(p), num(z.abs())),
                ),
                (_, Some(p), Some(z)) => (
                    Verdict::Replicates,
                    format!("p = {} > {FLOOR_P} and |z| = {} < {FLOOR_Z}", p_value(p), num(z.abs())),
                ),
            };
            let value = format!("{}, GEE z = {}", e.estimate.map_or("n/a".into(), signed), z.map_or("n/a".into(), num));
            Row { label: cell_name(&key), value, evidence: e, verdict, reason }
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// One decider's favouritism and whether it gave every out-group target zero.
struct Decider {
    minority: bool,
    favouritism: f64,
    extreme: bool,
}

/// One decider's points so far: in-group and out-group sums and counts.
#[derive(Default)]
struct Tally {
    minority: bool,
    in_sum: f64,
    n_in: usize,
    out_sum: f64,
    n_out: usize,
    out_nonzero: bool,
}

/// Deciders per cell and society (seed), from the dyads.
fn deciders(dyads: &DyadTable) -> BTreeMap<CellKey, BTreeMap<i64, Vec<Decider>>> {
    let mut tallies: BTreeMap<(CellKey, i64, i64), Tally> = BTreeMap::new();
    for d in &dyads.rows {
        let t = tallies.entry((dyad_key(d), d.seed, d.decider)).or_default();
        t.minority = d.minority_decider;
        if d.same_group {
            t.in_sum += d.points;
            t.n_in += 1;
        } else {
            t.out_sum += d.points;
            t.n_out += 1;
            t.out_nonzero |= d.points != 0.0;
        }
    }
    let mut out: BTreeMap<CellKey, BTreeMap<i64, Vec<Decider>>> = BTreeMap::new();
    for ((cell, seed, _), t) in tallies {
        if t.n_in == 0 || t.n_out == 0 {
            continue;
        }
        let favouritism = t.in_sum / t.n_in as f64 - t.out_sum / t.n_out as f64;
        out.entry(cell).or_default().entry(seed).or_default().push(Decider {
            minority: t.minority,
            favouritism,
            extreme: !t.out_nonzero,
        });
    }
    out
}

/// Per society, the share of the chosen deciders meeting `test`.
fn shares(
    societies: &BTreeMap<i64, Vec<Decider>>,
    choose: fn(&Decider) -> bool,
    test: fn(&Decider) -> bool,
) -> BTreeMap<i64, f64> {
    societies
        .iter()
        .filter_map(|(&seed, ds)| {
            let chosen: Vec<&Decider> = ds.iter().filter(|d| choose(d)).collect();
            (!chosen.is_empty()).then(|| (seed, chosen.iter().filter(|d| test(d)).count() as f64 / chosen.len() as f64))
        })
        .collect()
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    sum / n as f64
}

pub(super) fn prevalence(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let mut rows = Vec::new();
    for (key, societies) in deciders(&m.dyads) {
        let visible = key.1 == Labels::Visible.as_str();
        let (choose, who, claim): (fn(&Decider) -> bool, &str, Claim) = if visible {
            (|d| d.minority, "minority deciders", Claim::positive(h.effect.map(|e| e - 0.5)))
        } else {
            (|_| true, "all deciders", Claim::negative(None))
        };
        let per_society = shares(&societies, choose, |d| d.favouritism > 0.0);
        let d: Vec<f64> = per_society.values().map(|s| s - 0.5).collect();
        let value = format!("{:.1}% of {who}", 100.0 * mean(per_society.values().copied()));
        let mut e = wilcoxon_evidence(&d, Alternative::TwoSided, "seeds");
        e.test = "Wilcoxon signed-rank of share − 0.5".into();
        rows.push(Row::judged(format!("{} · {}", key.1, cell_name(&key)), value, e, claim));
    }
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

pub(super) fn extreme_allocations(h: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let m = results.minimal_group.as_ref()?;
    let cells = deciders(&m.dyads);
    let per_cell: BTreeMap<&CellKey, BTreeMap<i64, f64>> =
        cells.iter().map(|(key, societies)| (key, shares(societies, |_| true, |d| d.extreme))).collect();
    let overall = |key: &CellKey| {
        let ds: Vec<&Decider> = cells[key].values().flatten().collect();
        ds.iter().filter(|d| d.extreme).count() as f64 / ds.len() as f64
    };
    let listing = |labels: &str| {
        per_cell
            .keys()
            .filter(|k| k.1 == labels)
            .map(|k| format!("{}: {:.1}%", cell_name(k), 100.0 * overall(k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // The visible cell with the most extreme allocations, against the same societies with hidden labels.
    let hidden_of = |k: &CellKey| (k.0.clone(), Labels::Hidden.as_str().to_owned(), k.2.clone());
    let top = per_cell
        .keys()
        .filter(|k| k.1 == Labels::Visible.as_str() && per_cell.contains_key(&hidden_of(k)))
        .max_by(|a, b| overall(a).total_cmp(&overall(b)))?;
    let hidden = &per_cell[&hidden_of(top)];
    let d: Vec<f64> = per_cell[top].iter().filter_map(|(seed, v)| hidden.get(seed).map(|h| v - h)).collect();
    let value = format!("{:.1}% visible vs {:.1}% hidden", 100.0 * overall(top), 100.0 * overall(&hidden_of(top)));
    let mut e = wilcoxon_evidence(&d, Alternative::TwoSided, "seeds");
    e.test = "Wilcoxon signed-rank, visible − hidden by society".into();
    let row = Row::judged(cell_name(top), value, e, Claim::positive(h.effect));
    let summary = format!("visible {}; hidden {}", listing("visible"), listing("hidden"));
    Some(Outcome { summary, rows: vec![row], combine: Combine::All })
}

/// The paper's count (S5, "21 of 24 visible; 1 of 24 hidden"): cells are model × m × decider block
/// (minority and majority deciders) in each model's default reasoning mode, and a cell survives when its
/// Benjamini–Hochberg q over that family (`q_paper_family`, per label arm and mode) is below 0.05.
pub(super) fn bh_survivors(_: &PaperHeadline, results: &Results) -> Option<Outcome> {
    let tables = minimal_group(results)?;
    let t = &tables.seed_tests;
    let blocks = |labels: &str| -> Vec<usize> {
        ["minority", "majority"]
            .iter()
            .flat_map(|deciders| seed_rows(tables, labels, deciders))
            .filter(|&r| t.number("default_reasoning", r).is_none_or(|d| d == 1.0))
            .collect()
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
    let row = Row { label: "cells".into(), value, evidence: e, verdict, reason };
    Some(Outcome { summary: String::new(), rows: vec![row], combine: Combine::All })
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
    // The paper's control: `points ~ same_group * reasoning` per model (herd-analysis's
    // `reasoning_control` rows; the three-way model has the same term and is not this estimand).
    let rows =
        rows_where(g, &[("labels", "visible"), ("term", "same_group:reasoning"), ("analysis", "reasoning_control")])
            .into_iter()
            .filter(|&r| is_main_row(g, r))
            .map(|r| {
                let n = societies_per_mode(&m.dyads, g, r);
                let coef = g.number("coef", r);
                let mut e = Evidence::new("GEE same_group × reasoning (robust SE)", n, "societies per mode");
                e.estimate = coef;
                e.p = g.number("p", r);
                // Robust SEs rest on the societies (clusters); as few as a seed-level test cannot decide on
                // leave the GEE's p unsupported.
                e.min_p = Some(wilcoxon_min_p(n, true));
                e.interval = coef.zip(g.number("se_robust", r)).and_then(|(c, se)| z_interval(c, se));
                e.interval_name = "95% robust interval";
                // The fit pools the reasoning modes and the minority sizes; the other design columns name it.
                let parts: Vec<&str> =
                    DESIGN.iter().filter(|&&c| c != "reasoning").filter_map(|c| g.text(c, r)).collect();
                let label = if parts.is_empty() { "pooled".to_owned() } else { parts.join(" · ") };
                Row::judged(label, coef.map_or("n/a".into(), signed), e, Claim::negative(h.effect))
            })
            .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}
