//! The side-by-side table: each headline result of the papers (`data/paper-headlines.toml`, bundled)
//! against this run's number, with herd's rule for calling it a replication.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use herd_analysis::{ConformityTable, ConformityTables, MinimalGroupTables, ResultTable};

use crate::error::ReportError;
use crate::figure::{Z95, mean_interval, num, p_value, rows_where, signed};
use crate::results::Results;

static HEADLINES: &str = include_str!("../../../data/paper-headlines.toml");

/// One headline result as the papers state it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperHeadline {
    pub id: String,
    /// `conformity` or `minimal_group`.
    pub study: String,
    pub quantity: String,
    pub paper: String,
    pub replicates_if: String,
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadlineFile {
    headline: Vec<PaperHeadline>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Replicates,
    DoesNotReplicate,
    /// The run lacks the study, family or condition.
    NotInRun,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Self::Replicates => "replicates",
            Self::DoesNotReplicate => "does not replicate",
            Self::NotInRun => "not in this run",
        }
    }
}

/// A paper's headline next to this run's number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadlineComparison {
    pub headline: PaperHeadline,
    pub this_run: String,
    pub verdict: Verdict,
}

/// The papers' headline results bundled with herd.
pub fn paper_headlines() -> Result<Vec<PaperHeadline>, ReportError> {
    let file: HeadlineFile = toml::from_str(HEADLINES).map_err(|e| ReportError::Headlines(e.to_string()))?;
    for h in &file.headline {
        if measure_of(&h.id).is_none() {
            return Err(ReportError::Headlines(format!("no computation for id `{}`", h.id)));
        }
        if !["conformity", "minimal_group"].contains(&h.study.as_str()) {
            return Err(ReportError::Headlines(format!("`{}`: study `{}` is not conformity or minimal_group", h.id, h.study)));
        }
    }
    Ok(file.headline)
}

/// This run's number as text and whether it meets the rule; `None` when the run lacks what it needs.
type Measure = fn(&Results) -> Option<(String, bool)>;

fn measure_of(id: &str) -> Option<Measure> {
    Some(match id {
        "group_size_rise" => group_size_rise,
        "unanimity_dissent" => unanimity_dissent,
        "difficulty_rho" => difficulty_rho,
        "performance_effect" => performance_effect,
        "public_private" => public_private,
        "source_strength" => source_strength,
        "same_group" => same_group,
        "near_far" => near_far,
        "favouritism_visible" => favouritism_visible,
        "hidden_floor" => hidden_floor,
        "minority_gap" => minority_gap,
        "prevalence" => prevalence,
        "extreme_allocations" => extreme_allocations,
        "bh_survivors" => bh_survivors,
        "reasoning_interaction" => reasoning_interaction,
        _ => return None,
    })
}

/// Every headline of the papers with this run's number and verdict.
pub fn compare_headlines(results: &Results) -> Result<Vec<HeadlineComparison>, ReportError> {
    Ok(paper_headlines()?
        .into_iter()
        .map(|headline| {
            let outcome = measure_of(&headline.id).and_then(|measure| measure(results));
            let (this_run, verdict) = match outcome {
                Some((text, true)) => (text, Verdict::Replicates),
                Some((text, false)) => (text, Verdict::DoesNotReplicate),
                None => ("—".to_owned(), Verdict::NotInRun),
            };
            HeadlineComparison { headline, this_run, verdict }
        })
        .collect())
}

fn conformity(results: &Results) -> Option<(&ConformityTable, &ConformityTables)> {
    results.conformity.as_ref().map(|c| (&c.trials, &c.tables))
}

fn minimal_group(results: &Results) -> Option<&MinimalGroupTables> {
    results.minimal_group.as_ref().map(|m| &m.tables)
}

fn nonempty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn group_size_rise(results: &Results) -> Option<(String, bool)> {
    let (trials, _) = conformity(results)?;
    // model → N → p_wrong values
    let mut curves: BTreeMap<&str, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for t in trials.rows.iter().filter(|t| t.family == "group_size") {
        curves.entry(&t.model).or_default().entry(t.n).or_default().push(t.p_wrong_full);
    }
    let rows = nonempty(
        curves
            .iter()
            .filter(|(_, c)| c.len() >= 2)
            .filter_map(|(model, curve)| {
                let (first, last) = (curve.first_key_value()?, curve.last_key_value()?);
                let (a, ia) = mean_interval(first.1);
                let (b, ib) = mean_interval(last.1);
                // SE of a difference of independent means, from each mean's interval half-width.
                let half = match (ia, ib) {
                    (Some(x), Some(y)) => Some((((x.1 - a) / Z95).powi(2) + ((y.1 - b) / Z95).powi(2)).sqrt() * Z95),
                    _ => None,
                };
                let rise = b - a;
                let ok = half.is_some_and(|h| rise - h > 0.0);
                let interval = half.map_or(String::new(), |h| format!(" [{}, {}]", num(rise - h), num(rise + h)));
                Some((format!("{model}: {} → {} (N = {} → {}), rise {}{interval}", num(a), num(b), first.0, last.0, signed(rise)), ok))
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

fn join(rows: &[(String, bool)]) -> String {
    rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>().join("; ")
}

fn unanimity_dissent(results: &Results) -> Option<(String, bool)> {
    let (_, tables) = conformity(results)?;
    let auc = &tables.auc;
    let mut groups: BTreeMap<(String, String), BTreeMap<String, f64>> = BTreeMap::new();
    for r in rows_where(auc, &[("family", "unanimity"), ("measure", "p_wrong_full")]) {
        let (Some(m), Some(t), Some(l), Some(a)) = (auc.text("model", r), auc.text("task", r), auc.text("level", r), auc.number("auc", r)) else {
            continue;
        };
        groups.entry((m.into(), t.into())).or_default().insert(l.into(), a);
    }
    let rows = nonempty(
        groups
            .iter()
            .filter_map(|((m, t), levels)| {
                let (a, b, c) = (levels.get("wrong_100")?, levels.get("wrong_80")?, levels.get("wrong_50")?);
                Some((format!("{m} · {t}: AUC {} → {} → {}", num(*a), num(*b), num(*c)), a > b && b > c))
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

fn difficulty_rho(results: &Results) -> Option<(String, bool)> {
    let (_, tables) = conformity(results)?;
    let s = &tables.difficulty_spearman;
    let rows = nonempty(
        rows_where(s, &[("measure", "p_wrong_full")])
            .into_iter()
            .filter_map(|r| {
                let rho = s.number("rho", r)?;
                let p = s.number("p", r)?;
                Some((
                    format!("{} · {}: ρ = {} (p = {})", s.text("model", r)?, s.text("task", r)?, num(rho), p_value(p)),
                    rho > 0.0 && p < 0.05,
                ))
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

fn performance_effect(results: &Results) -> Option<(String, bool)> {
    let (_, tables) = conformity(results)?;
    let o = &tables.difficulty_ols;
    let rows = nonempty(
        rows_where(o, &[("measure", "p_wrong_full"), ("term", "performance")])
            .into_iter()
            .filter_map(|r| {
                let p = o.number("p", r)?;
                Some((
                    format!("{}: β_performance = {} (SE {}, p = {})", o.text("task", r)?, num(o.number("coef", r)?), num(o.number("se", r)?), p_value(p)),
                    p >= 0.05,
                ))
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

/// (label, Δ, p) of the `deltas` rows of `families`.
fn deltas(tables: &ConformityTables, families: &[&str]) -> Vec<(String, String, f64, f64)> {
    let d = &tables.deltas;
    (0..d.n_rows())
        .filter(|&r| d.text("measure", r) == Some("p_wrong_full") && families.iter().any(|f| d.text("family", r) == Some(*f)))
        .filter_map(|r| {
            Some((
                format!("{} · {} · {} {} − {}", d.text("model", r)?, d.text("task", r)?, d.text("family", r)?, d.text("level_a", r)?, d.text("level_b", r)?),
                d.text("level_a", r)?.to_owned(),
                d.number("delta", r)?,
                d.number("z_p", r).unwrap_or(f64::NAN),
            ))
        })
        .collect()
}

fn describe(rows: &[(String, String, f64, f64)]) -> String {
    rows.iter().map(|(l, _, d, p)| format!("{l}: {} (p = {})", signed(*d), p_value(*p))).collect::<Vec<_>>().join("; ")
}

fn public_private(results: &Results) -> Option<(String, bool)> {
    let (_, tables) = conformity(results)?;
    let rows = nonempty(deltas(tables, &["normative"]))?;
    let significant = rows.iter().filter(|r| r.2 > 0.0 && r.3 < 0.05).count();
    Some((describe(&rows), 2 * significant > rows.len()))
}

fn source_strength(results: &Results) -> Option<(String, bool)> {
    const AUTHORITIES: [&str; 6] = ["experts", "policemen", "scientists", "doctors", "judges", "military officers"];
    const LOW: [&str; 2] = ["kids", "chatbots"];
    let (_, tables) = conformity(results)?;
    let rows = deltas(tables, &["source_strength"]);
    let mean_of = |set: &[&str]| {
        let v: Vec<f64> = rows.iter().filter(|r| set.contains(&r.1.as_str())).map(|r| r.2).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let (authority, low) = (mean_of(&AUTHORITIES)?, mean_of(&LOW)?);
    Some((
        format!("mean Δ authorities {}, kids/chatbots {} ({})", signed(authority), signed(low), describe(&rows)),
        authority > 0.0 && low < 0.0,
    ))
}

fn positive_and_one_significant(rows: &[(String, String, f64, f64)]) -> bool {
    rows.iter().all(|r| r.2 > 0.0) && rows.iter().any(|r| r.3 < 0.05)
}

fn same_group(results: &Results) -> Option<(String, bool)> {
    let (_, tables) = conformity(results)?;
    let rows = nonempty(deltas(tables, &["nationality", "ethnicity", "minimal_group"]))?;
    Some((describe(&rows), positive_and_one_significant(&rows)))
}

fn near_far(results: &Results) -> Option<(String, bool)> {
    let (_, tables) = conformity(results)?;
    let rows = nonempty(deltas(tables, &["spatial", "temporal"]))?;
    Some((describe(&rows), positive_and_one_significant(&rows)))
}

/// A cell's name from the design columns present, labels and m.
fn cell(t: &ResultTable, r: usize) -> String {
    let mut parts: Vec<String> = ["model", "reasoning", "instrument", "swap_pass"]
        .iter()
        .filter_map(|c| t.text(c, r).map(str::to_owned))
        .collect();
    parts.push(format!("m = {}", t.number("m", r).map_or("?".into(), |m| m.to_string())));
    parts.join(" · ")
}

fn seed_rows(tables: &MinimalGroupTables, labels: &str, deciders: &str) -> Vec<usize> {
    rows_where(&tables.seed_tests, &[("labels", labels), ("deciders", deciders), ("measure", "favouritism")])
}

fn favouritism_visible(results: &Results) -> Option<(String, bool)> {
    let tables = minimal_group(results)?;
    let t = &tables.seed_tests;
    let rows = nonempty(
        seed_rows(tables, "visible", "all")
            .into_iter()
            .map(|r| {
                let (mean, p) = (t.number("mean", r).unwrap_or(f64::NAN), t.number("wilcoxon_p", r).unwrap_or(f64::NAN));
                (format!("{}: {} (p = {})", cell(t, r), signed(mean), p_value(p)), mean > 0.0 && p < 0.05)
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

fn hidden_floor(results: &Results) -> Option<(String, bool)> {
    let tables = minimal_group(results)?;
    let t = &tables.seed_tests;
    let rows = nonempty(
        seed_rows(tables, "hidden", "all")
            .into_iter()
            .map(|r| {
                let (mean, q) = (t.number("mean", r).unwrap_or(f64::NAN), t.number("bh_q", r).unwrap_or(f64::NAN));
                (format!("{}: {} (q = {})", cell(t, r), signed(mean), p_value(q)), q.is_nan() || q >= 0.05)
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

fn minority_gap(results: &Results) -> Option<(String, bool)> {
    let m = results.minimal_group.as_ref()?;
    let t = &m.tables.seed_tests;
    // Society size from the dyads: each decider rates every other member.
    let society = m.dyads.rows.iter().filter(|d| d.decider == m.dyads.rows[0].decider && d.seed == m.dyads.rows[0].seed
        && d.design == m.dyads.rows[0].design && d.labels == m.dyads.rows[0].labels && d.m == m.dyads.rows[0].m).count() + 1;
    let rows = nonempty(
        seed_rows(&m.tables, "visible", "minority_minus_majority")
            .into_iter()
            .filter(|&r| t.number("m", r).is_some_and(|minority| 2.0 * minority < society as f64))
            .map(|r| {
                let (mean, p) = (t.number("mean", r).unwrap_or(f64::NAN), t.number("wilcoxon_p", r).unwrap_or(f64::NAN));
                (format!("{}: {} (p = {})", cell(t, r), signed(mean), p_value(p)), mean > 0.0 && p < 0.05)
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

fn robustness_rows(tables: &MinimalGroupTables, check: &str, labels: &str, deciders: &str) -> Vec<(String, f64)> {
    let t = &tables.robustness;
    rows_where(t, &[("check", check), ("labels", labels), ("deciders", deciders), ("fills", "included")])
        .into_iter()
        .filter_map(|r| Some((cell(t, r), t.number("estimate", r)?)))
        .collect()
}

fn percent_list(rows: &[(String, f64)]) -> String {
    rows.iter().map(|(c, v)| format!("{c}: {:.1}%", 100.0 * v)).collect::<Vec<_>>().join(", ")
}

fn prevalence(results: &Results) -> Option<(String, bool)> {
    let tables = minimal_group(results)?;
    let visible = robustness_rows(tables, "prevalence", "visible", "minority");
    let hidden = robustness_rows(tables, "prevalence", "hidden", "all");
    if visible.is_empty() && hidden.is_empty() {
        return None;
    }
    let ok = !visible.is_empty() && visible.iter().all(|r| r.1 > 0.5) && hidden.iter().all(|r| r.1 < 0.5);
    Some((format!("visible minority deciders: {}; hidden: {}", percent_list(&visible), percent_list(&hidden)), ok))
}

fn extreme_allocations(results: &Results) -> Option<(String, bool)> {
    let tables = minimal_group(results)?;
    let visible = robustness_rows(tables, "extreme_allocations", "visible", "all");
    let hidden = robustness_rows(tables, "extreme_allocations", "hidden", "all");
    if visible.is_empty() || hidden.is_empty() {
        return None;
    }
    let max = |rows: &[(String, f64)]| rows.iter().map(|r| r.1).fold(f64::NEG_INFINITY, f64::max);
    Some((
        format!("up to {:.1}% visible, {:.1}% hidden ({}; hidden {})", 100.0 * max(&visible), 100.0 * max(&hidden), percent_list(&visible), percent_list(&hidden)),
        max(&visible) > max(&hidden),
    ))
}

fn bh_survivors(results: &Results) -> Option<(String, bool)> {
    let tables = minimal_group(results)?;
    let t = &tables.seed_tests;
    let count = |labels: &str| {
        let rows = seed_rows(tables, labels, "all");
        let survive = rows.iter().filter(|&&r| t.number("bh_q", r).is_some_and(|q| q < 0.05)).count();
        (survive, rows.len())
    };
    let (visible, hidden) = (count("visible"), count("hidden"));
    if visible.1 == 0 {
        return None;
    }
    Some((
        format!("{} of {} visible cells; {} of {} hidden", visible.0, visible.1, hidden.0, hidden.1),
        2 * visible.0 >= visible.1 && visible.0 > hidden.0,
    ))
}

fn reasoning_interaction(results: &Results) -> Option<(String, bool)> {
    let tables = minimal_group(results)?;
    let g = &tables.gee;
    let rows = nonempty(
        rows_where(g, &[("labels", "visible"), ("term", "same_group:reasoning")])
            .into_iter()
            .filter_map(|r| {
                let (coef, p) = (g.number("coef", r)?, g.number("p", r).unwrap_or(f64::NAN));
                let model = g.text("model", r).unwrap_or("model");
                Some((format!("{model}: {} (p = {})", signed(coef), p_value(p)), coef < 0.0 && p < 0.05))
            })
            .collect(),
    )?;
    Some((join(&rows), rows.iter().all(|r| r.1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_headline_has_a_computation() {
        let headlines = paper_headlines().unwrap();
        let mut ids: Vec<&str> = headlines.iter().map(|h| h.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), headlines.len(), "ids are unique");
        // And every computation has its entry (the file is the table's row list).
        let mut computed = vec![
            "group_size_rise", "unanimity_dissent", "difficulty_rho", "performance_effect", "public_private",
            "source_strength", "same_group", "near_far", "favouritism_visible", "hidden_floor", "minority_gap",
            "prevalence", "extreme_allocations", "bh_survivors", "reasoning_interaction",
        ];
        computed.sort_unstable();
        assert!(computed.iter().all(|id| measure_of(id).is_some()));
        assert_eq!(ids, computed);
    }
}
