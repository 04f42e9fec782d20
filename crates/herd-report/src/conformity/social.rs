//! Fig. 4 and the contrasts: public − private framing, source strength, social / spatial / temporal
//! proximity, each with the paired test its headline uses.

use super::{SOURCE_ORDER, absent, curve_chart, curves_by, family, family_auc, levels_in_order, models};
use crate::chart::{Bar, BarChart, BarSeries, Chart, LineSeries};
use crate::figure::{Figure, FigureResult, mean_interval, num, p_is, signed};
use herd_analysis::conformity::unit_aucs;
use herd_analysis::rows::{AucDelta, NORMAL_MIN_UNITS};
use herd_analysis::{ConformityTable, ConformityTables, ConformityTrial, PWrong, SOCIAL_MEAN};

/// A contrast row of the `deltas` table.
type Contrast = AucDelta;

/// The contrast's test as a reading prints it: the normal z only on [`NORMAL_MIN_UNITS`] or more
/// paired units (the `deltas` table's z-test, the paper's), else the one-sample t-test with its df, so
/// that no p rests on a normal approximation two trials cannot support.
fn contrast_test(c: &Contrast) -> String {
    if c.n_pairs >= NORMAL_MIN_UNITS {
        format!("z = {}, {}, {} pairs", fixed2(c.z), p_is(c.z_p), c.n_pairs)
    } else {
        format!("t({}) = {}, {}", num_df(c.df), fixed2(c.t), p_is(c.t_p))
    }
}

fn fixed2(v: f64) -> String {
    if v.is_finite() { format!("{v:.2}") } else { "n/a".into() }
}

fn num_df(df: f64) -> String {
    if df.is_finite() && df.fract() == 0.0 { format!("{df:.0}") } else { num(df) }
}

fn contrasts(tables: &ConformityTables, families: &[&str], measure: PWrong) -> Vec<Contrast> {
    tables
        .auc_deltas()
        .into_iter()
        .filter(|d| d.measure == measure.column() && families.contains(&d.family.as_str()))
        .collect()
}

fn contrast_bar(c: &Contrast) -> Bar {
    Bar { value: c.delta, interval: c.interval95(), note: Some(contrast_test(c)) }
}

/// Paper fig. 3c: public − private ΔAUC per model (and task), with z.
pub fn public_minus_private_auc_per_model(tables: &ConformityTables, measure: PWrong) -> FigureResult {
    const NAME: &str = "public_minus_private_auc_per_model";
    const PAPER: &str = "conformity paper, fig. 3c";
    let rows = contrasts(tables, &["normative"], measure);
    if rows.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no normative (public/private) contrast"));
    }
    let categories: Vec<String> = rows.iter().map(|c| format!("{} · {}", c.model, c.task)).collect();
    let reading = format!(
        "public − private ΔAUC (one-tailed): {}.",
        rows.iter()
            .map(|c| format!("{} {} {} ({})", c.model, c.task, signed(c.delta), contrast_test(c)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Public minus private framing".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Public − private conformity (ΔAUC)".into(),
            x_label: "model · task".into(),
            y_label: "ΔAUC, public − private (probability)".into(),
            legend_title: "95% t-interval over paraphrases (normal from 30 on)".into(),
            categories,
            series: vec![BarSeries {
                label: "public − private".into(),
                bars: rows.iter().map(|c| Some(contrast_bar(c))).collect(),
            }],
            paper: None,
        }),
    })
}

/// Paper fig. 4a: curves by source strength (the role named before the replies).
pub fn p_wrong_by_source_strength(trials: &ConformityTable, measure: PWrong) -> FigureResult {
    const NAME: &str = "p_wrong_by_source_strength";
    const PAPER: &str = "conformity paper, fig. 4a";
    let order = levels_in_order(family(trials, "source_strength"));
    let several = models(trials) > 1;
    let curves = curves_by(
        family(trials, "source_strength"),
        measure,
        |t| if several { format!("{} · {}", t.model, t.level) } else { t.level.clone() },
        if several { None } else { Some(&order) },
    );
    if curves.0.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no source_strength trials"));
    }
    let last = |s: &LineSeries| s.points.last().map_or(f64::NAN, |p| p.y);
    let highest = curves.0.iter().max_by(|a, b| last(a).total_cmp(&last(b)));
    let lowest = curves.0.iter().min_by(|a, b| last(a).total_cmp(&last(b)));
    let reading = match (highest, lowest) {
        (Some(h), Some(l)) => format!(
            "At the largest N, {} draws the most conformity ({}) and {} the least ({}).",
            h.label,
            num(last(h)),
            l.label,
            num(last(l))
        ),
        _ => String::new(),
    };
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity by source strength".into(),
        reading,
        chart: curve_chart("Conformity by source strength", "source named before replies", curves, measure),
    })
}

/// What a proximity figure shows: its families, names, and whether it adds the neutral baseline.
struct PairedCurves {
    families: &'static [&'static str],
    name: &'static str,
    paper: &'static str,
    title: &'static str,
    legend: &'static str,
    /// Add the group-size curve of the same models and tasks as the neutral baseline (fig. 4b's
    /// black curve: no identity named).
    neutral: bool,
}

const NEUTRAL: &str = "neutral (no identity; group-size family)";

fn paired_curves(
    trials: &ConformityTable,
    tables: &ConformityTables,
    measure: PWrong,
    spec: &PairedCurves,
) -> FigureResult {
    let PairedCurves { families, name, paper, title, legend, neutral } = *spec;
    let several = models(trials) > 1;
    let rows: Vec<&ConformityTrial> = trials.rows.iter().filter(|t| families.contains(&t.family.as_str())).collect();
    let mut curves = curves_by(
        rows.iter().copied(),
        measure,
        |t| {
            if several {
                format!("{} · {} · {}", t.model, t.family, t.level)
            } else {
                format!("{} · {}", t.family, t.level)
            }
        },
        None,
    );
    if curves.0.is_empty() {
        return Err(absent(name, paper, format!("the run has no {} trials", families.join(" or "))));
    }
    if neutral {
        let shown: std::collections::BTreeSet<(&str, &str)> =
            rows.iter().map(|t| (t.model.as_str(), t.task.as_str())).collect();
        let baseline = family(trials, "group_size").filter(|t| shown.contains(&(t.model.as_str(), t.task.as_str())));
        let label =
            |t: &ConformityTrial| if several { format!("{} · {NEUTRAL}", t.model) } else { NEUTRAL.to_owned() };
        let (more, counts) = curves_by(baseline, measure, label, None);
        curves.0.extend(more);
        curves.1.extend(counts);
    }
    let deltas = contrasts(tables, families, measure);
    let reading = format!(
        "ΔAUC {}.",
        deltas
            .iter()
            .map(|c| format!("{} {} − {}: {} ({})", c.family, c.level_a, c.level_b, signed(c.delta), contrast_test(c)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(Figure {
        name,
        paper_figure: paper,
        title: title.to_owned(),
        reading,
        chart: curve_chart(title, legend, curves, measure),
    })
}

/// Paper fig. 4b: same versus different group (nationality, ethnicity, minimal group), with the
/// neutral baseline.
pub fn p_wrong_same_vs_different_group(
    trials: &ConformityTable,
    tables: &ConformityTables,
    measure: PWrong,
) -> FigureResult {
    paired_curves(
        trials,
        tables,
        measure,
        &PairedCurves {
            families: &["nationality", "ethnicity", "minimal_group"],
            name: "p_wrong_same_vs_different_group",
            paper: "conformity paper, fig. 4b",
            title: "Conformity to same- and different-group sources",
            legend: "identity · relation",
            neutral: true,
        },
    )
}

/// The spatial/temporal supplement: near versus far sources.
pub fn p_wrong_near_vs_far(trials: &ConformityTable, tables: &ConformityTables, measure: PWrong) -> FigureResult {
    paired_curves(
        trials,
        tables,
        measure,
        &PairedCurves {
            families: &["spatial", "temporal"],
            name: "p_wrong_near_vs_far",
            paper: "conformity paper, supplement (spatial and temporal proximity)",
            title: "Conformity to near and far sources (space, time)",
            legend: "proximity · level",
            neutral: false,
        },
    )
}

/// Paper fig. 4c: AUC by source strength per task, each bar with its 95% t-interval over trial indices.
pub fn auc_by_source_strength_per_task(
    trials: &ConformityTable,
    tables: &ConformityTables,
    measure: PWrong,
) -> FigureResult {
    const NAME: &str = "auc_by_source_strength_per_task";
    const PAPER: &str = "conformity paper, fig. 4c";
    let aucs = family_auc(tables, "source_strength", measure);
    if aucs.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no source_strength trials"));
    }
    let mut levels: Vec<String> = Vec::new();
    let mut series_names: Vec<String> = Vec::new();
    for (model, task, level, _) in &aucs {
        if !levels.contains(level) {
            levels.push(level.clone());
        }
        let s = format!("{model} · {task}");
        if !series_names.contains(&s) {
            series_names.push(s);
        }
    }
    let mean_auc = |level: &str| {
        let v: Vec<f64> = aucs.iter().filter(|a| a.2 == level).map(|a| a.3).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    // The paper's fixed order of source strength (the neutral `participants` first, low-authority
    // sources, then authorities), never the bars' own values: sorting by AUC draws a monotone
    // "trend" from any data. Roles the list lacks follow in the order the trials name them.
    let rank = |level: &str| SOURCE_ORDER.iter().position(|r| *r == level).unwrap_or(SOURCE_ORDER.len());
    levels.sort_by_key(|l| rank(l));
    let series = series_names
        .iter()
        .map(|s| BarSeries {
            label: s.clone(),
            bars: levels
                .iter()
                .map(|l| {
                    aucs.iter().find(|a| &format!("{} · {}", a.0, a.1) == s && &a.2 == l).map(|a| {
                        // The mean of the trial indices' AUCs is the mean curve's AUC where every index
                        // ran the same N; the interval is drawn only where it is that mean's.
                        let units = unit_aucs(trials, measure, &a.0, &a.1, "source_strength", l, false);
                        let (mean, interval) = mean_interval(&units.into_values().collect::<Vec<_>>());
                        let interval = interval.filter(|_| (mean - a.3).abs() < 1e-9);
                        Bar { value: a.3, interval, note: None }
                    })
                })
                .collect(),
        })
        .collect();
    let reading = format!(
        "Mean AUC by source, in the paper's order of source strength (neutral `participants` first): {}.",
        levels.iter().map(|l| format!("{l} {}", num(mean_auc(l)))).collect::<Vec<_>>().join(", ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity AUC by source strength and task".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Conformity AUC by source strength and task".into(),
            x_label: "source named before the replies".into(),
            y_label: "conformity AUC (0–1)".into(),
            legend_title: "model · task (95% t-interval over trial indices)".into(),
            categories: levels,
            series,
            paper: None,
        }),
    })
}

/// Paper fig. 4d / S6: the social-proximity ΔAUC (same − different) averaged over nationality,
/// ethnicity and minimal group with its z (`social_mean`), then each family's own ΔAUC and near − far.
pub fn proximity_auc_differences(tables: &ConformityTables, measure: PWrong) -> FigureResult {
    const NAME: &str = "proximity_auc_differences";
    const PAPER: &str = "conformity paper, fig. 4d and S6";
    let families = [SOCIAL_MEAN, "nationality", "ethnicity", "minimal_group", "spatial", "temporal"];
    let rows = contrasts(tables, &families, measure);
    if rows.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no social, spatial or temporal proximity contrast"));
    }
    let categories: Vec<String> =
        families.iter().filter(|f| rows.iter().any(|c| c.family == **f)).map(|f| (*f).to_owned()).collect();
    let mut series_names: Vec<String> = Vec::new();
    for c in &rows {
        let s = format!("{} · {}", c.model, c.task);
        if !series_names.contains(&s) {
            series_names.push(s);
        }
    }
    let series = series_names
        .iter()
        .map(|s| BarSeries {
            label: s.clone(),
            bars: categories
                .iter()
                .map(|f| {
                    rows.iter().find(|c| &c.family == f && &format!("{} · {}", c.model, c.task) == s).map(contrast_bar)
                })
                .collect(),
        })
        .collect();
    let reading = format!(
        "ΔAUC closer − farther source ({SOCIAL_MEAN}: same − different averaged over the social families, as fig. 4d / S6): {}.",
        rows.iter()
            .map(|c| format!("{} · {} {} {} ({})", c.model, c.task, c.family, signed(c.delta), contrast_test(c)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Proximity: same − different and near − far".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Proximity effects (ΔAUC, same − different / near − far)".into(),
            x_label: "proximity family".into(),
            y_label: "ΔAUC (probability)".into(),
            legend_title: "model · task (95% t-interval over the paired units; normal from 30 on)".into(),
            categories,
            series,
            paper: None,
        }),
    })
}
