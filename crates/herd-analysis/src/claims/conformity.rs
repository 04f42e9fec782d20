//! The conformity paper's headlines. Contrasts are tested at the seed level: each unit (trial index,
//! or paraphrase for the normative family) has its own p_wrong(N) curve per level, the levels of a
//! family share images and reply wordings per unit, so unit AUC differences are paired.

use std::collections::{BTreeMap, BTreeSet};

use crate::conformity::{ImageConformity, TaskFit, difficulty_fits, unit_aucs};
use crate::{ConformityTable, ConformityTables, GroupSizeRise, PWrong, group_size_rises};
use herd_design::{SourceClass, SourceStrengthFamily};
use herd_stats::Alternative;

use super::evidence::{
    Claim, Combine, Evidence, Row, spearman_interval, spearman_min_p, t_quantile, wilcoxon_evidence,
};
use super::{Outcome, PaperHeadline, Verdict, population};
use crate::format::{num, p_is, signed};
use crate::results::Results;
use crate::table::rows_where;

/// The neutral source of the source-strength family (`herd analyze`'s default).
const SOURCE_BASE: &str = "participants";

/// Every conformity headline is computed once per measure: the lead measure decides the verdict,
/// the other is shown beside it (`headline::compare_headlines`).
fn conformity(results: &Results) -> Option<(&ConformityTable, &ConformityTables)> {
    results.conformity.as_ref().map(|c| (&c.trials, &c.tables))
}

/// (model, task) pairs that ran `family`, in order.
pub(super) fn model_tasks(trials: &ConformityTable, family: &str) -> Vec<(String, String)> {
    let set: BTreeSet<(String, String)> =
        trials.rows.iter().filter(|t| t.family == family).map(|t| (t.model.clone(), t.task.clone())).collect();
    set.into_iter().collect()
}

/// Unit differences a − b over the units both levels have.
fn paired(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    a.iter().filter_map(|(unit, x)| b.get(unit).map(|y| (unit.clone(), x - y))).collect()
}

/// The `auc` table's value (the mean curve's AUC) of one level, for the reading.
fn level_auc(
    tables: &ConformityTables,
    measure: PWrong,
    model: &str,
    task: &str,
    family: &str,
    level: &str,
) -> Option<f64> {
    let auc = &tables.auc;
    rows_where(
        auc,
        &[("model", model), ("task", task), ("family", family), ("level", level), ("measure", measure.column())],
    )
    .first()
    .and_then(|&r| auc.number("auc", r))
}

fn auc_text(value: Option<f64>) -> String {
    value.map_or("n/a".into(), num)
}

/// A paired contrast row: Wilcoxon on the unit differences a − b.
fn contrast_row(
    label: String,
    value: String,
    differences: &BTreeMap<String, f64>,
    alternative: Alternative,
    unit: &'static str,
    claim: Claim,
) -> Row {
    let d: Vec<f64> = differences.values().copied().collect();
    Row::judged(label, value, wilcoxon_evidence(&d, alternative, unit), claim)
}

pub(super) fn group_size_rise(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, _) = conformity(results)?;
    let pairs = model_tasks(trials, "group_size");
    // herd-analysis's pairing and test, which `herd power` runs too.
    let rows = group_size_rises(trials, measure)
        .into_iter()
        .map(|rise| {
            // A model's rise pools its tasks.
            let members = pairs.iter().filter(|(m, _)| m == &rise.model).cloned().collect();
            let value = format!(
                "{} → {} (N = {} → {}), rise {}",
                num(rise.mean_low),
                num(rise.mean_high),
                rise.n_low,
                rise.n_high,
                signed(rise.mean_high - rise.mean_low)
            );
            contrast_row(
                rise.model,
                value,
                &rise.differences,
                GroupSizeRise::ALTERNATIVE,
                "trial pairs",
                Claim::positive(h.effect),
            )
            .on(members)
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// Fig. 2a's "others saturate around N ∼ 3–4": a model whose group-size curve rises (the rise of
/// [`group_size_rise`], tested the same way) and reaches 90% of that rise by N = `effect` on every task
/// it ran (the `auc` table's `saturation_n`). The paper names no model and says most rise steadily, so
/// a model rising past N = `effect` is like those, not the claim's subject; the claim replicates when
/// some model saturates, and a model without a significant rise has nothing to saturate (inconclusive).
pub(super) fn saturation(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, tables) = conformity(results)?;
    let by = h.effect?;
    let pairs = model_tasks(trials, "group_size");
    let aucs = tables.curve_aucs();
    let rows = group_size_rises(trials, measure)
        .into_iter()
        .map(|rise| {
            let members: Vec<(String, String)> = pairs.iter().filter(|(m, _)| m == &rise.model).cloned().collect();
            let at: Vec<(String, Option<i64>)> = aucs
                .iter()
                .filter(|a| a.family == "group_size" && a.model == rise.model && a.measure == measure.column())
                .map(|a| (a.task.clone(), a.saturation_n))
                .collect();
            let listing = at
                .iter()
                .map(|(task, n)| format!("{task} {}", n.map_or("none".to_owned(), |n| format!("N = {n}"))))
                .collect::<Vec<_>>()
                .join(", ");
            let mut row = contrast_row(
                rise.model.clone(),
                format!("90% of the rise reached at {listing}; rise {}", signed(rise.mean_high - rise.mean_low)),
                &rise.differences,
                GroupSizeRise::ALTERNATIVE,
                "trial pairs",
                Claim::positive(None),
            );
            let latest = at.iter().map(|(_, n)| n.map_or(f64::INFINITY, |n| n as f64)).fold(f64::NAN, f64::max);
            (row.verdict, row.reason) = if row.verdict != Verdict::Replicates {
                (
                    Verdict::Inconclusive,
                    format!("the curve does not rise significantly, so nothing saturates ({})", row.reason),
                )
            } else if latest <= by {
                (Verdict::Replicates, format!("the curve rises and reaches 90% of its rise by N = {by:.0}"))
            } else {
                (
                    Verdict::NotInRun,
                    format!(
                        "the curve rises without saturating by N = {by:.0}, like the paper's models that rise \
                         steadily: not the claim's subject"
                    ),
                )
            };
            row.claim = None;
            row.on(members)
        })
        .collect();
    let summary = format!(
        "Per model: the first N whose mean p_wrong reaches 90% of the rise from N = 0 to the largest N, per task, on \
         a rise that is significant; saturated by N = {by:.0}"
    );
    Some(Outcome { summary, rows, combine: Combine::Any })
}

pub(super) fn unanimity_dissent(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, tables) = conformity(results)?;
    let mut rows = Vec::new();
    for (model, task) in model_tasks(trials, "unanimity") {
        let aucs: Vec<BTreeMap<String, f64>> = ["wrong_100", "wrong_80", "wrong_50"]
            .iter()
            .map(|level| unit_aucs(trials, measure, &model, &task, "unanimity", level, false))
            .collect();
        if aucs.iter().any(BTreeMap::is_empty) {
            continue;
        }
        for (a, b, i) in [("wrong_100", "wrong_80", 0), ("wrong_80", "wrong_50", 1)] {
            let value = format!(
                "AUC {} → {}",
                auc_text(level_auc(tables, measure, &model, &task, "unanimity", a)),
                auc_text(level_auc(tables, measure, &model, &task, "unanimity", b))
            );
            // The claim is that AUC falls as dissent grows: a − b > 0.
            let differences = paired(&aucs[i], &aucs[i + 1]);
            rows.push(
                contrast_row(
                    format!("{model} · {task} · {a} − {b}"),
                    value,
                    &differences,
                    Alternative::TwoSided,
                    "seeds",
                    Claim::positive(h.effect),
                )
                .on(vec![(model.clone(), task.clone())]),
            );
        }
    }
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

pub(super) fn difficulty_rho(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (_, tables) = conformity(results)?;
    let s = &tables.difficulty_spearman;
    let rows = rows_where(s, &[("measure", measure.column())])
        .into_iter()
        .map(|r| {
            let n = s.number("n_levels", r).unwrap_or(0.0) as usize;
            let rho = s.number("rho", r);
            let mut e = Evidence::new("Spearman ρ", n, "difficulty levels").with_note(s.text("note", r));
            e.estimate = rho;
            e.p = s.number("p", r);
            e.min_p = Some(spearman_min_p(n));
            e.interval = rho.and_then(|rho| spearman_interval(rho, n));
            e.interval_name = "95% Fisher-z interval";
            let (model, task) = (s.text("model", r).unwrap_or("?"), s.text("task", r).unwrap_or("?"));
            Row::judged(
                format!("{model} · {task}"),
                format!("ρ = {}", rho.map_or("n/a".into(), num)),
                e,
                Claim::positive(h.effect),
            )
            .on(vec![(model.to_owned(), task.to_owned())])
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// Fig. 3b's β_performance per task, pooled over the task's models inside the paper's population,
/// with each image's conformity read over N > 0 ([`ImageConformity::WithoutBaseline`]): the
/// performance regressor is the correct answer's logit in the N = 0 trial, and a conformity AUC
/// holding that trial's p_wrong shares its noise, which alone gives an agent with no performance
/// effect a significant negative β. The paper's whole-curve β (the `difficulty_ols` table) is
/// shown beside it. docs/deviations.md, "Performance effect without the N = 0 trial".
pub(super) fn performance_effect(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let margin = h.effect.unwrap_or(f64::INFINITY);
    fig_3b_term(results, measure, "performance", Claim::Within { margin })
}

/// Fig. 3b and S4's other finding, "task difficulty emerges as a significant predictor": β_difficulty
/// of the same regression per task, positive (higher = harder, the paper's definition; S4's
/// negative signs are the other coding, docs/deviations.md), against S4's smallest |β| (0.548).
pub(super) fn difficulty_predicts(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    fig_3b_term(results, measure, "difficulty", Claim::positive(h.effect))
}

/// One coefficient (`term`) of fig. 3b's regression per task, judged under `claim`, on the models
/// inside the paper's population, with the whole-curve coefficient (the `difficulty_ols` table)
/// beside it.
fn fig_3b_term(results: &Results, measure: PWrong, term: &str, claim: Claim) -> Option<Outcome> {
    let (trials, tables) = conformity(results)?;
    // A measure some trials lack is not analysed (as the analysis's own tables do not).
    if trials.rows.iter().any(|t| t.p_wrong(measure).is_none()) {
        return None;
    }
    // Per task, the models pooled into its fit: those inside the population where any is.
    let mut by_task: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (model, task) in model_tasks(trials, "difficulty") {
        by_task.entry(task.clone()).or_default().push((model, task));
    }
    let pools: BTreeMap<String, population::Pooled> =
        by_task.into_iter().map(|(task, pairs)| (task, population::pooled(results, pairs))).collect();
    let kept: BTreeSet<(String, String)> = pools.values().flat_map(|p| p.pairs.iter().cloned()).collect();
    let keep = |model: &str, task: &str| kept.contains(&(model.to_owned(), task.to_owned()));
    let test = "OLS on difficulty and performance, conformity over N > 0, HC3 standard errors";
    let fits = match difficulty_fits(trials, measure, ImageConformity::WithoutBaseline, &keep) {
        Ok(fits) => fits,
        Err(error) => {
            let e = Evidence::new(test, 0, "fig. 3b hexagons").with_note(Some(&error.to_string()));
            let row = Row::judged("difficulty pool", "", e, claim).on(kept.into_iter().collect());
            return Some(Outcome { summary: String::new(), rows: vec![row], combine: Combine::All });
        }
    };
    let o = &tables.difficulty_ols;
    let mut rows = Vec::new();
    for TaskFit { task, n, fit, .. } in fits {
        let mut e = Evidence::new(test, n, "fig. 3b hexagons");
        let mut classical = None;
        let coefficient = fit.as_ref().ok().and_then(|f| f.coefficients.iter().find(|c| c.name == term));
        match (&fit, coefficient) {
            (Ok(fit), Some(c)) => {
                e.estimate = Some(c.estimate);
                // Hexagons hold from one image to dozens, so their means' variance differs several-fold
                // along the axes: the classical SE is too small there (an agent without a performance
                // effect read "does not replicate" in 15 of 100 runs), and HC3 is the robust one
                // (statsmodels `fit(cov_type="HC3", use_t=True)`). The classical p is printed beside.
                e.p = Some(c.p_hc3);
                // Intercept and two slopes leave n − 3 residual degrees of freedom (statsmodels' df_resid).
                e.interval = (fit.df_resid >= 1.0).then(|| {
                    let half = t_quantile(0.975, fit.df_resid) * c.se_hc3;
                    (c.estimate - half, c.estimate + half)
                });
                classical = Some(c.p_value);
                e.df = Some(fit.df_resid);
            }
            (Err(note), _) => e = e.with_note(Some(note)),
            (Ok(_), None) => {}
        }
        e.interval_name = "95% t-interval";
        // The paper's whole-curve fit, from the table.
        let whole = rows_where(o, &[("task", task.as_str()), ("measure", measure.column()), ("term", term)])
            .first()
            .and_then(|&r| o.number("coef", r));
        let value = format!(
            "β_{term} = {} over N > 0, classical OLS {} (whole curve, N = 0 included: {})",
            e.estimate.map_or("n/a".into(), num),
            classical.map_or("p = n/a".into(), p_is),
            whole.map_or("n/a".into(), num)
        );
        let members = pools.get(&task).map(|p| p.pairs.clone()).unwrap_or_default();
        rows.push(Row::judged(task, value, e, claim).on(members));
    }
    let mut outcome = Outcome { summary: String::new(), rows, combine: Combine::All };
    for pool in pools.into_values() {
        pool.mark(&mut outcome);
    }
    Some(outcome)
}

pub(super) fn public_private(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, tables) = conformity(results)?;
    let rows = model_tasks(trials, "normative")
        .into_iter()
        .map(|(model, task)| {
            let public = unit_aucs(trials, measure, &model, &task, "normative", "public", true);
            let private = unit_aucs(trials, measure, &model, &task, "normative", "private", true);
            let d = paired(&public, &private);
            let value = format!(
                "AUC {} vs {}, Δ {}",
                auc_text(level_auc(tables, measure, &model, &task, "normative", "public")),
                auc_text(level_auc(tables, measure, &model, &task, "normative", "private")),
                signed(d.values().sum::<f64>() / d.len().max(1) as f64)
            );
            // The paper's test is one-tailed (public > private).
            contrast_row(
                format!("{model} · {task}"),
                value,
                &d,
                Alternative::Greater,
                "paraphrases",
                Claim::positive(h.effect),
            )
            .on(vec![(model, task)])
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::Most })
}

/// Per (model, task, trial index) of `pairs`: the mean over `levels` present of AUC(level) − AUC(base).
fn source_contrast(
    trials: &ConformityTable,
    measure: PWrong,
    pairs: &[(String, String)],
    base_role: &str,
    levels: &[&str],
) -> (BTreeMap<String, f64>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (model, task) in pairs {
        let base = unit_aucs(trials, measure, model, task, "source_strength", base_role, false);
        let mut sums: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for level in levels {
            let aucs = unit_aucs(trials, measure, model, task, "source_strength", level, false);
            if !aucs.is_empty() {
                seen.insert((*level).to_owned());
            }
            for (unit, d) in paired(&aucs, &base) {
                sums.entry(unit).or_default().push(d);
            }
        }
        for (unit, v) in sums {
            out.insert(format!("{model}·{task}#{unit}"), v.iter().sum::<f64>() / v.len() as f64);
        }
    }
    (out, seen.into_iter().collect())
}

/// The source-strength family's baseline role and each role's class, as the runs' experiment files
/// state them (`families.source_strength.classes`, else the paper's class); for plain tables without a
/// manifest, the paper's.
fn source_classes(results: &Results) -> (String, impl Fn(&str) -> Option<SourceClass>) {
    let family: Vec<SourceStrengthFamily> = results
        .conformity
        .iter()
        .flat_map(|c| &c.runs)
        .filter_map(|run| run.manifest.parameters.pointer("/families/source_strength"))
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let base = family.first().map_or_else(|| SOURCE_BASE.to_owned(), |f| f.baseline_role.clone());
    let class_of = move |role: &str| {
        family.iter().find_map(|f| f.classes.get(role).copied()).or_else(|| herd_design::paper_source_class(role))
    };
    (base, class_of)
}

pub(super) fn source_strength(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, _) = conformity(results)?;
    let (base, class_of) = source_classes(results);
    let levels: BTreeSet<&str> =
        trials.rows.iter().filter(|t| t.family == "source_strength").map(|t| t.level.as_str()).collect();
    // The rows pool models and tasks, so the paper's population is applied to the pool itself.
    let population = population::pooled(results, model_tasks(trials, "source_strength"));
    let mut rows = Vec::new();
    for (name, class, claim) in [
        ("authorities", SourceClass::Authority, Claim::positive(h.effect)),
        ("low-status sources", SourceClass::LowStatus, Claim::negative(None)),
    ] {
        let members: Vec<&str> = levels.iter().copied().filter(|l| class_of(l) == Some(class)).collect();
        let (d, seen) = source_contrast(trials, measure, &population.pairs, &base, &members);
        if d.is_empty() {
            continue;
        }
        let mean = d.values().sum::<f64>() / d.len() as f64;
        let value = format!("mean Δ {} ({} − {base})", signed(mean), seen.join(", "));
        rows.push(
            contrast_row(name.to_owned(), value, &d, Alternative::TwoSided, "seeds", claim)
                .on(population.pairs.clone()),
        );
    }
    // The paper's claim has two sides; a run with only one of them cannot judge it.
    if rows.len() != 2 {
        return None;
    }
    let mut outcome = Outcome { summary: String::new(), rows, combine: Combine::All };
    population.mark(&mut outcome);
    Some(outcome)
}

/// The rank of a source class on fig. 4c's strength axis: low-status sources below the neutral
/// participants (the baseline role, or a role classed neutral), authorities above; an unclassed role
/// has none.
fn class_rank(class: Option<SourceClass>, role: &str, base: &str) -> Option<f64> {
    match class {
        Some(SourceClass::LowStatus) => Some(-1.0),
        Some(SourceClass::Authority) => Some(1.0),
        Some(SourceClass::Neutral) => Some(0.0),
        None if role == base => Some(0.0),
        None => None,
    }
}

/// Fig. 4c: "a consistent positive trend emerges, with stronger sources producing up to a
/// fifteen–twenty percent increase", shown per task. Per task (its models inside the paper's
/// population pooled), each trial index's least-squares slope of AUC on the source's rank (low
/// status −1, the neutral participants 0, authority +1) over the roles it ran, tested over the trial
/// indices (Wilcoxon signed-rank) for a positive trend.
pub(super) fn source_order(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, _) = conformity(results)?;
    let (base, class_of) = source_classes(results);
    let levels: BTreeSet<&str> =
        trials.rows.iter().filter(|t| t.family == "source_strength").map(|t| t.level.as_str()).collect();
    let ranked: Vec<(&str, f64)> =
        levels.iter().filter_map(|&l| class_rank(class_of(l), l, &base).map(|rank| (l, rank))).collect();
    // A trend needs the three ranks.
    let ranks: BTreeSet<i64> = ranked.iter().map(|(_, r)| *r as i64).collect();
    if ranks.len() < 3 {
        return None;
    }
    let population = population::pooled(results, model_tasks(trials, "source_strength"));
    let mut by_task: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for (model, task) in &population.pairs {
        by_task.entry(task.as_str()).or_default().push((model.clone(), task.clone()));
    }
    let mut rows = Vec::new();
    for (task, pairs) in by_task {
        let mut slopes = BTreeMap::new();
        let mut by_rank: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
        for (model, task) in &pairs {
            let mut points: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for &(level, rank) in &ranked {
                for (unit, auc) in unit_aucs(trials, measure, model, task, "source_strength", level, false) {
                    points.entry(unit).or_default().push((rank, auc));
                    by_rank.entry(rank as i64).or_default().push(auc);
                }
            }
            for (unit, p) in points {
                if let Some(slope) = least_squares_slope(&p) {
                    slopes.insert(format!("{model}#{unit}"), slope);
                }
            }
        }
        let mean_at = |rank: i64| by_rank.get(&rank).map(|v| v.iter().sum::<f64>() / v.len() as f64);
        let value = format!(
            "AUC by source rank: low status {}, {base} {}, authority {}; mean slope {} per rank",
            auc_text(mean_at(-1)),
            auc_text(mean_at(0)),
            auc_text(mean_at(1)),
            if slopes.is_empty() { "n/a".into() } else { signed(slopes.values().sum::<f64>() / slopes.len() as f64) }
        );
        rows.push(
            contrast_row(
                task.to_owned(),
                value,
                &slopes,
                Alternative::TwoSided,
                "trial indices",
                Claim::positive(h.effect),
            )
            .on(pairs),
        );
    }
    if rows.is_empty() {
        return None;
    }
    let mut outcome = Outcome { summary: String::new(), rows, combine: Combine::All };
    population.mark(&mut outcome);
    Some(outcome)
}

/// The least-squares slope of y on x, where x varies.
fn least_squares_slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let (mx, my) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The families of fig. 4b's social proximity (fig. 4d averages the same three).
pub(super) const SOCIAL: [&str; 3] = ["nationality", "ethnicity", "minimal_group"];

/// One model, task and social family's same − different AUC difference per trial index.
fn identity_differences(
    trials: &ConformityTable,
    measure: PWrong,
    model: &str,
    task: &str,
    family: &str,
) -> BTreeMap<String, f64> {
    let same = unit_aucs(trials, measure, model, task, family, "same", false);
    let different = unit_aucs(trials, measure, model, task, family, "different", false);
    paired(&same, &different)
}

pub(super) fn same_group(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let (trials, _) = conformity(results)?;
    let pairs: BTreeSet<(String, String)> = SOCIAL.iter().flat_map(|f| model_tasks(trials, f)).collect();
    let rows = pairs
        .into_iter()
        .map(|(model, task)| {
            // Fig. 4d's estimand: the same − different difference averaged over the three families.
            let mut per_unit: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut families = Vec::new();
            for family in SOCIAL {
                let d = identity_differences(trials, measure, &model, &task, family);
                if !d.is_empty() {
                    families.push(family);
                }
                for (unit, v) in d {
                    per_unit.entry(unit).or_default().push(v);
                }
            }
            let d: BTreeMap<String, f64> =
                per_unit.into_iter().map(|(u, v)| (u, v.iter().sum::<f64>() / v.len() as f64)).collect();
            let mean = d.values().sum::<f64>() / d.len().max(1) as f64;
            let value = format!("Δ {} (averaged over {})", signed(mean), families.join(", "));
            contrast_row(
                format!("{model} · {task}"),
                value,
                &d,
                Alternative::TwoSided,
                "seeds",
                Claim::positive(h.effect),
            )
            .on(vec![(model, task)])
        })
        .collect();
    Some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// Section 2.3.2 and fig. 4b: each identity raises conformity on its own, nationality and ethnicity
/// ("conformity increases when the confederates share the same nationality or ethnicity") and an
/// arbitrary group alone ("even in the absence of any defining group characteristics"): per model,
/// task and family, same − different AUC paired by trial index.
pub(super) fn identity_each(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let rows = level_contrasts(h, results, measure, &SOCIAL, ("same", "different"))?;
    (!rows.is_empty()).then_some(Outcome { summary: String::new(), rows, combine: Combine::All })
}

/// Per family of `families`, model and task: AUC of level `a` − level `b`, paired by trial index, under
/// the headline's positive claim.
fn level_contrasts(
    h: &PaperHeadline,
    results: &Results,
    measure: PWrong,
    families: &[&str],
    (a, b): (&str, &str),
) -> Option<Vec<Row>> {
    let (trials, tables) = conformity(results)?;
    let mut rows = Vec::new();
    for &family in families {
        for (model, task) in model_tasks(trials, family) {
            let upper = unit_aucs(trials, measure, &model, &task, family, a, false);
            let lower = unit_aucs(trials, measure, &model, &task, family, b, false);
            let value = format!(
                "AUC {} vs {}",
                auc_text(level_auc(tables, measure, &model, &task, family, a)),
                auc_text(level_auc(tables, measure, &model, &task, family, b))
            );
            rows.push(
                contrast_row(
                    format!("{model} · {task} · {family}"),
                    value,
                    &paired(&upper, &lower),
                    Alternative::TwoSided,
                    "seeds",
                    Claim::positive(h.effect),
                )
                .on(vec![(model, task)]),
            );
        }
    }
    Some(rows)
}

pub(super) fn near_far(h: &PaperHeadline, results: &Results, measure: PWrong) -> Option<Outcome> {
    let rows = level_contrasts(h, results, measure, &["spatial", "temporal"], ("near", "far"))?;
    Some(Outcome { summary: String::new(), rows, combine: Combine::Most })
}
