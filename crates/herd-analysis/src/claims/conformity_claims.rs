//! The conformity paper's claims of likeness and order, beside its main headlines: the three tasks'
//! curves alike (fig. 2b), the neutral baseline between same and different group (fig. 4b), and the
//! temporal proximity effect comparable to the spatial one (S8). Each compares samples drawn apart:
//! a task's or a family's images come from its own stream per trial index, so trial index k of one
//! is not paired with trial index k of the other. They are compared with Welch's t over trial
//! indices (herd-stats' `ttest_welch`, golden-tested against scipy), each unit's AUC taken over the
//! N values both samples ran, so that a family run on fewer N is not set against a longer curve.

use std::collections::{BTreeMap, BTreeSet};

use crate::{ConformityTable, ConformityTrial, PWrong};
use herd_stats::Alternative;

use super::conformity::{SOCIAL, model_tasks};
use super::evidence::{Claim, Combine, Row, judge, welch_evidence, wilcoxon_evidence};
use super::{Outcome, PaperHeadline, Verdict, population};
use crate::format::{num, signed};
use crate::results::Results;

/// Per unit (trial index): mean p_wrong per N, over the trials `keep` takes.
type Curves = BTreeMap<i64, BTreeMap<u32, f64>>;

fn curves(trials: &ConformityTable, measure: PWrong, keep: impl Fn(&ConformityTrial) -> bool) -> Curves {
    let mut sums: BTreeMap<i64, BTreeMap<u32, (f64, usize)>> = BTreeMap::new();
    for t in trials.rows.iter().filter(|t| keep(t)) {
        let Some(p) = t.p_wrong(measure) else { continue };
        let e = sums.entry(t.seed).or_default().entry(t.n).or_default();
        e.0 += p;
        e.1 += 1;
    }
    sums.into_iter()
        .map(|(unit, by_n)| (unit, by_n.into_iter().map(|(n, (s, k))| (n, s / k as f64)).collect()))
        .collect()
}

/// The N values every unit of `curves` ran.
fn ns_of(curves: &Curves) -> BTreeSet<u32> {
    let mut all = curves.values().map(|c| c.keys().copied().collect::<BTreeSet<u32>>());
    let first = all.next().unwrap_or_default();
    all.fold(first, |acc, ns| acc.intersection(&ns).copied().collect())
}

/// Each unit's AUC over the N values `ns` (trapezoid of p_wrong over N, divided by the N range),
/// for units that ran all of them; empty for fewer than two N.
fn aucs(curves: &Curves, ns: &BTreeSet<u32>) -> BTreeMap<i64, f64> {
    curves
        .iter()
        .filter_map(|(unit, curve)| {
            let points: Option<Vec<(u32, f64)>> = ns.iter().map(|&n| curve.get(&n).map(|&p| (n, p))).collect();
            crate::conformity::auc(points?).map(|a| (*unit, a))
        })
        .collect()
}

/// Two samples' unit AUCs over the N values both ran.
fn on_shared_ns(a: &Curves, b: &Curves) -> (Vec<f64>, Vec<f64>, BTreeSet<u32>) {
    let ns: BTreeSet<u32> = ns_of(a).intersection(&ns_of(b)).copied().collect();
    (aucs(a, &ns).into_values().collect(), aucs(b, &ns).into_values().collect(), ns)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn n_list(ns: &BTreeSet<u32>) -> String {
    format!("N ∈ {{{}}}", ns.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
}

/// A row comparing sample `a` with sample `b` by Welch's t: "AUC 0.41 vs 0.38 over N ∈ {…}"; `None`
/// where a side has no unit (the measure is missing there, or the two ran no N in common).
fn welch_row(label: String, a: &[f64], b: &[f64], ns: &BTreeSet<u32>, claim: Claim) -> Option<Row> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let value = format!("AUC {} vs {} over {}", num(mean(a)), num(mean(b)), n_list(ns));
    Some(Row::judged(label, value, welch_evidence(a, b, "trial indices"), claim))
}

/// (model, task) pairs that ran `family`, as a set.
fn model_task_set(trials: &ConformityTable, family: &str) -> BTreeSet<(String, String)> {
    model_tasks(trials, family).into_iter().collect()
}

/// Fig. 2b: per model and pair of tasks, the group-size curves' AUC difference; alike when no
/// difference is significant and each 95% interval lies within ±`effect`.
pub(super) fn tasks_alike(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let trials = &results.conformity.as_ref()?.trials;
    let margin = h.effect?;
    // A task outside the paper's population is left out of its model's comparisons, so that a
    // model's tasks inside it are still compared; with none inside, every row rests on tasks outside
    // and `population::mark` gives it that verdict.
    let population = population::pooled(results, model_tasks(trials, "group_size"));
    let mut by_model: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (model, task) in &population.pairs {
        by_model.entry(model.clone()).or_default().push(task.clone());
    }
    let mut rows = Vec::new();
    for (model, tasks) in &by_model {
        let curve =
            |task: &str| curves(trials, measure, |t| t.family == "group_size" && &t.model == model && t.task == task);
        for (i, a) in tasks.iter().enumerate() {
            for b in &tasks[i + 1..] {
                let (x, y, ns) = on_shared_ns(&curve(a), &curve(b));
                let members = vec![(model.clone(), a.clone()), (model.clone(), b.clone())];
                let row = welch_row(format!("{model} · {a} − {b}"), &x, &y, &ns, Claim::Within { margin });
                rows.extend(row.map(|r| r.on(members)));
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut outcome = Outcome { summary: String::new(), rows, combine: Combine::All };
    population.mark(&mut outcome);
    Some(outcome)
}

/// Fig. 4b: per model and task, the neutral curve (the group-size family: no identity given) against
/// the same-group and different-group curves of the social families (each unit's AUC averaged over
/// the families it ran, as fig. 4d averages them): same above neutral, neutral above different.
pub(super) fn neutral_between(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let trials = &results.conformity.as_ref()?.trials;
    let neutral_pairs = model_task_set(trials, "group_size");
    let pairs: BTreeSet<(String, String)> =
        SOCIAL.iter().flat_map(|f| model_tasks(trials, f)).filter(|p| neutral_pairs.contains(p)).collect();
    let mut rows = Vec::new();
    for (model, task) in pairs {
        let of = |t: &ConformityTrial| t.model == model && t.task == task;
        let neutral = curves(trials, measure, |t| of(t) && t.family == "group_size");
        // A unit's same (different) curve: its mean over the social families at each N.
        let relation =
            |level: &str| curves(trials, measure, |t| of(t) && SOCIAL.contains(&t.family.as_str()) && t.level == level);
        for (label, upper, lower) in [
            ("same − neutral", relation("same"), neutral.clone()),
            ("neutral − different", neutral.clone(), relation("different")),
        ] {
            let (a, b, ns) = on_shared_ns(&upper, &lower);
            let row = welch_row(format!("{model} · {task} · {label}"), &a, &b, &ns, Claim::positive(h.effect));
            rows.extend(row.map(|r| r.on(vec![(model.clone(), task.clone())])));
        }
    }
    (!rows.is_empty()).then_some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// S8: per model and task that ran both, the temporal near − far difference against the spatial one
/// (each paired within its family by trial index, the two families compared by Welch's t); comparable
/// when no difference is significant and each 95% interval lies within ±`effect`. The paper's "more
/// often significant" is counted in the summary (the `near_far` rule per family), not judged.
pub(super) fn temporal_vs_spatial(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let trials = &results.conformity.as_ref()?.trials;
    let margin = h.effect?;
    let pairs: BTreeSet<(String, String)> =
        model_task_set(trials, "spatial").intersection(&model_task_set(trials, "temporal")).cloned().collect();
    let mut rows = Vec::new();
    let mut significant = [0_usize; 2];
    for (model, task) in &pairs {
        let curve = |family: &str, level: &str| {
            curves(trials, measure, |t| &t.model == model && &t.task == task && t.family == family && t.level == level)
        };
        let four =
            [curve("temporal", "near"), curve("temporal", "far"), curve("spatial", "near"), curve("spatial", "far")];
        // Both families' effects over the N values all four curves ran, so neither rests on a longer curve.
        let ns = four.iter().map(ns_of).reduce(|a, b| a.intersection(&b).copied().collect()).unwrap_or_default();
        let effect = |near: &Curves, far: &Curves| -> Vec<f64> {
            let (near, far) = (aucs(near, &ns), aucs(far, &ns));
            near.iter().filter_map(|(u, a)| far.get(u).map(|b| a - b)).collect()
        };
        let (temporal, spatial) = (effect(&four[0], &four[1]), effect(&four[2], &four[3]));
        if temporal.is_empty() || spatial.is_empty() {
            continue;
        }
        for (k, d) in [&temporal, &spatial].into_iter().enumerate() {
            let e = wilcoxon_evidence(d, Alternative::TwoSided, "seeds");
            if judge(&e, Claim::positive(None)).0 == Verdict::Replicates {
                significant[k] += 1;
            }
        }
        let value = format!(
            "Δ near − far {} temporal vs {} spatial over {}",
            signed(mean(&temporal)),
            signed(mean(&spatial)),
            n_list(&ns)
        );
        let evidence = welch_evidence(&temporal, &spatial, "trial indices");
        rows.push(
            Row::judged(format!("{model} · {task} · temporal − spatial"), value, evidence, Claim::Within { margin })
                .on(vec![(model.clone(), task.clone())]),
        );
    }
    if rows.is_empty() {
        return None;
    }
    let summary = format!(
        "near − far significant and positive (Wilcoxon signed-rank p < 0.05) in {} of {k} temporal and {} of {k} spatial rows",
        significant[0],
        significant[1],
        k = rows.len()
    );
    Some(Outcome { summary, rows, combine: Combine::All })
}
