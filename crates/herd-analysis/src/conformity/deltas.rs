//! The `deltas` table: AUC differences between the levels of a family, per pairing unit, with their tests.

use std::collections::BTreeMap;

use herd_stats::{Alternative, ttest_one_sample, z_test};

use super::curves::{CurveKey, curve_auc};
use super::{ConformityOptions, ConformityTable, ConformityTrial, PWrong, mean};
use crate::error::{AnalysisError, stats_context, undefined_reason};
use crate::table::{ResultTable, TableBuilder, Value};

/// Families whose same − different contrasts fig. 4d / S6 average.
const SOCIAL_FAMILIES: [&str; 3] = ["nationality", "ethnicity", "minimal_group"];

/// The contrasts of one family: (level a, level b, pairing unit, alternative).
fn contrasts(
    family: &str,
    levels: &[String],
    options: &ConformityOptions,
) -> Vec<(String, String, &'static str, Alternative)> {
    let pair = |a: &str, b: &str, unit, alt| {
        (levels.iter().any(|l| l == a) && levels.iter().any(|l| l == b))
            .then(|| (a.to_owned(), b.to_owned(), unit, alt))
    };
    match family {
        "normative" => pair("public", "private", "paraphrase", Alternative::Greater).into_iter().collect(),
        "nationality" | "ethnicity" | "minimal_group" => {
            pair("same", "different", "seed", Alternative::TwoSided).into_iter().collect()
        }
        "spatial" | "temporal" => pair("near", "far", "seed", Alternative::TwoSided).into_iter().collect(),
        "source_strength" => levels
            .iter()
            .filter(|l| **l != options.source_base)
            .filter_map(|l| pair(l.as_str(), options.source_base.as_str(), "seed", Alternative::TwoSided))
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn deltas_table(
    table: &ConformityTable,
    options: &ConformityOptions,
    measures: &[PWrong],
    level_auc: &BTreeMap<(&str, CurveKey), f64>,
) -> Result<ResultTable, AnalysisError> {
    let mut out = TableBuilder::new(
        "deltas",
        &[
            ("model", 't'),
            ("task", 't'),
            ("family", 't'),
            ("measure", 't'),
            ("level_a", 't'),
            ("level_b", 't'),
            ("pairing", 't'),
            ("alternative", 't'),
            ("n_pairs", 'i'),
            ("auc_a", 'f'),
            ("auc_b", 'f'),
            ("delta", 'f'),
            ("se", 'f'),
            ("t", 'f'),
            ("df", 'f'),
            ("t_p", 'f'),
            ("z", 'f'),
            ("z_p", 'f'),
            ("note", 't'),
        ],
    );
    // (model, task, family) → level list
    let mut families: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    // (model, task, measure) → social family → (seed → same − different, AUC same, AUC different)
    type SocialContrast = (BTreeMap<String, f64>, f64, f64);
    let mut social: BTreeMap<(String, String, &str), BTreeMap<String, SocialContrast>> = BTreeMap::new();
    for t in &table.rows {
        let levels = families.entry((t.model.clone(), t.task.clone(), t.family.clone())).or_default();
        if !levels.contains(&t.level) {
            levels.push(t.level.clone());
        }
    }
    for ((model, task, family), mut levels) in families {
        levels.sort();
        for (a, b, unit, alternative) in contrasts(&family, &levels, options) {
            if unit == "paraphrase" && table.rows.iter().any(|t| t.family == family && t.paraphrase.is_none()) {
                return Err(AnalysisError::MissingColumn {
                    origin: table.origin.clone(),
                    column: "paraphrase".into(),
                    fix: "the normative contrast pairs public and private by paraphrase: add the paraphrase id of every normative trial".into(),
                });
            }
            for &m in measures {
                let (measure, pick) = (m.column(), |t: &ConformityTrial| t.p_wrong(m).unwrap_or(f64::NAN));
                // level → unit → N → values
                let mut units: BTreeMap<&str, BTreeMap<String, BTreeMap<u32, Vec<f64>>>> = BTreeMap::new();
                for t in table.rows.iter().filter(|t| {
                    t.model == model && t.task == task && t.family == family && (t.level == a || t.level == b)
                }) {
                    let id = if unit == "paraphrase" {
                        t.paraphrase.clone().unwrap_or_default()
                    } else {
                        t.seed.to_string()
                    };
                    let side = if t.level == a { "a" } else { "b" };
                    units.entry(side).or_default().entry(id).or_default().entry(t.n).or_default().push(pick(t));
                }
                let (Some(ua), Some(ub)) = (units.get("a"), units.get("b")) else { continue };
                let mut by_unit = BTreeMap::new();
                for (id, curve_a) in ua {
                    let Some(curve_b) = ub.get(id) else { continue };
                    if let (Some(x), Some(y)) = (curve_auc(curve_a), curve_auc(curve_b)) {
                        by_unit.insert(id.clone(), x - y);
                    }
                }
                let differences: Vec<f64> = by_unit.values().copied().collect();
                let cell = || format!("{family} {a} − {b} (model={model}, task={task}, {measure})");
                if differences.is_empty() {
                    return Err(AnalysisError::EmptyCell {
                        origin: table.origin.clone(),
                        cell: cell(),
                        what: format!("{unit} with trials of both levels at two or more N"),
                        fix: format!("the contrast pairs {a} and {b} by {unit}: run both levels for the same {unit}s"),
                    });
                }
                let test = unit_test(&table.origin, &differences, alternative, || format!("t test of {}", cell()))?;
                let key = |level: &str| (measure, (model.clone(), task.clone(), family.clone(), level.to_owned()));
                let auc_a = level_auc.get(&key(&a)).copied().unwrap_or(f64::NAN);
                let auc_b = level_auc.get(&key(&b)).copied().unwrap_or(f64::NAN);
                push_delta(
                    &mut out,
                    [&model, &task, &family, measure, &a, &b, unit],
                    alternative,
                    (auc_a, auc_b),
                    &test,
                    differences.len(),
                );
                if SOCIAL_FAMILIES.contains(&family.as_str()) {
                    social
                        .entry((model.clone(), task.clone(), measure))
                        .or_default()
                        .insert(family.clone(), (by_unit, auc_a, auc_b));
                }
            }
        }
    }
    // Fig. 4d / S6: the same − different difference averaged over the social families, per seed over
    // the families that seed has; only where two or more families ran (with one it is that family's
    // own row).
    for ((model, task, measure), by_family) in social {
        if by_family.len() < 2 {
            continue;
        }
        let mut per_seed: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for (by_unit, _, _) in by_family.values() {
            for (seed, d) in by_unit {
                per_seed.entry(seed).or_default().push(*d);
            }
        }
        let differences: Vec<f64> = per_seed.values().map(|v| mean(v)).collect();
        let cell = || format!("{SOCIAL_MEAN} same − different (model={model}, task={task}, {measure})");
        let test = unit_test(&table.origin, &differences, Alternative::TwoSided, || format!("t test of {}", cell()))?;
        let aucs: Vec<&SocialContrast> = by_family.values().collect();
        let auc_same = aucs.iter().map(|c| c.1).sum::<f64>() / aucs.len() as f64;
        let auc_different = aucs.iter().map(|c| c.2).sum::<f64>() / aucs.len() as f64;
        push_delta(
            &mut out,
            [&model, &task, SOCIAL_MEAN, measure, "same", "different", "seed"],
            Alternative::TwoSided,
            (auc_same, auc_different),
            &test,
            differences.len(),
        );
    }
    Ok(out.finish())
}

/// The test of a contrast's unit differences: the one-sample t test and z = mean/SE with its normal p,
/// or, where they are undefined (every difference equal, a single unit), the mean difference (and SE
/// where there is one) with t, df, p, z and z's p null and the reason in `note`.
struct UnitTest {
    mean: f64,
    se: f64,
    t: f64,
    df: f64,
    p: f64,
    z: f64,
    z_p: f64,
    note: Option<&'static str>,
}

fn unit_test(
    origin: &str,
    differences: &[f64],
    alternative: Alternative,
    context: impl Fn() -> String,
) -> Result<UnitTest, AnalysisError> {
    match ttest_one_sample(differences, 0.0, alternative) {
        Ok(test) => {
            let z = test.mean / test.se;
            let z_p = z_test(z, alternative).map_err(stats_context(origin, &context))?;
            Ok(UnitTest { mean: test.mean, se: test.se, t: test.t, df: test.df, p: test.p_value, z, z_p, note: None })
        }
        Err(e) => {
            let Some(note) = undefined_reason(&e) else { return Err(stats_context(origin, &context)(e)) };
            let n = differences.len();
            // With one unit there is no SE; with every difference equal it is zero.
            let se = if n >= 2 { 0.0 } else { f64::NAN };
            Ok(UnitTest {
                mean: mean(differences),
                se,
                t: f64::NAN,
                df: f64::NAN,
                p: f64::NAN,
                z: f64::NAN,
                z_p: f64::NAN,
                note: Some(note),
            })
        }
    }
}

/// The `deltas` row of fig. 4d / S6's averaged social-proximity contrast.
pub const SOCIAL_MEAN: &str = "social_mean";

/// One `deltas` row: keys (model, task, family, measure, level a, level b, pairing unit), then the
/// test of the unit differences.
fn push_delta(
    out: &mut TableBuilder,
    keys: [&str; 7],
    alternative: Alternative,
    (auc_a, auc_b): (f64, f64),
    test: &UnitTest,
    n_pairs: usize,
) {
    let alternative = match alternative {
        Alternative::Greater => "greater",
        Alternative::Less => "less",
        Alternative::TwoSided => "two-sided",
    };
    let mut row: Vec<Value> = keys.iter().map(|&k| k.into()).collect();
    row.extend([
        alternative.into(),
        n_pairs.into(),
        auc_a.into(),
        auc_b.into(),
        test.mean.into(),
        test.se.into(),
        test.t.into(),
        test.df.into(),
        test.p.into(),
        test.z.into(),
        test.z_p.into(),
        test.note.into(),
    ]);
    out.push(row);
}
