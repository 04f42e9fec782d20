//! Fig. 3: conformity against difficulty (AUC by level with Spearman ρ, and the hexagon heat map of
//! performance and difficulty).

use super::{absent, family, family_auc};
use crate::chart::{Chart, Heatmap, LineChart, LineSeries, Point};
use crate::figure::{Figure, FigureResult, num, p_value, rows_where};
use herd_analysis::conformity::auc;
use herd_analysis::{ConformityTable, ConformityTables, PWrong};
use std::collections::BTreeMap;

/// Paper fig. 3a: AUC against difficulty level per model and task, Spearman ρ in the legend.
pub fn auc_by_difficulty(tables: &ConformityTables, measure: PWrong) -> FigureResult {
    const NAME: &str = "auc_by_difficulty";
    const PAPER: &str = "conformity paper, fig. 3a";
    let mut curves: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    for (model, task, level, auc) in family_auc(tables, "difficulty", measure) {
        if let Ok(level) = level.parse::<f64>() {
            curves.entry((model, task)).or_default().push((level, auc));
        }
    }
    if curves.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no difficulty trials"));
    }
    let rho = |model: &str, task: &str| {
        rows_where(&tables.difficulty_spearman, &[("model", model), ("task", task), ("measure", measure.column())])
            .first()
            .map(|&r| (tables.difficulty_spearman.number("rho", r), tables.difficulty_spearman.number("p", r)))
    };
    let several = curves.keys().map(|(m, _)| m).collect::<std::collections::BTreeSet<_>>().len() > 1;
    let mut readings = Vec::new();
    let series = curves
        .into_iter()
        .map(|((model, task), mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (r, p) = rho(&model, &task).unwrap_or((None, None));
            let rho_text = r.map_or("ρ n/a".to_owned(), |r| format!("ρ = {}", num(r)));
            let (first, last) = (points.first().map_or(f64::NAN, |p| p.1), points.last().map_or(f64::NAN, |p| p.1));
            readings.push(format!(
                "{model} · {task} {rho_text} (p = {}), AUC {} → {}",
                p.map_or("n/a".into(), p_value),
                num(first),
                num(last)
            ));
            let label =
                if several { format!("{model} · {task} ({rho_text})") } else { format!("{task} ({rho_text})") };
            LineSeries { label, points: points.into_iter().map(|(x, y)| Point { x, y, interval: None }).collect() }
        })
        .collect();
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity AUC rises with difficulty".into(),
        reading: format!("Spearman ρ between difficulty level and AUC: {}.", readings.join("; ")),
        chart: Chart::Line(LineChart {
            title: "Conformity AUC by difficulty level".into(),
            x_label: "difficulty level (1 = easiest)".into(),
            y_label: "conformity AUC (mean p_wrong over N, 0–1)".into(),
            legend_title: "task (Spearman ρ)".into(),
            series,
            y_limits: Some((0.0, 1.0)),
            reference_y: None,
        }),
    })
}

/// Min-max normalisation in place; false when the values do not vary.
fn normalise(values: &mut [f64]) -> bool {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if hi <= lo {
        return false;
    }
    values.iter_mut().for_each(|v| *v = (*v - lo) / (hi - lo));
    true
}

/// Paper fig. 3b: conformity (image AUC) over normalised difficulty × normalised performance, as
/// a heatmap of mean normalised conformity; normalisation within model and task, as in the
/// regression.
pub fn conformity_by_difficulty_and_performance(
    trials: &ConformityTable,
    tables: &ConformityTables,
    measure: PWrong,
) -> FigureResult {
    const NAME: &str = "conformity_by_difficulty_and_performance";
    const PAPER: &str = "conformity paper, fig. 3b";
    const BINS: usize = 5;
    // (model, task) → image → (N → p_wrong, difficulty index, correct logit at N = 0)
    type Image = (BTreeMap<u32, Vec<f64>>, Vec<f64>, Vec<f64>);
    let mut groups: BTreeMap<(&str, &str), BTreeMap<&str, Image>> = BTreeMap::new();
    for t in family(trials, "difficulty") {
        let (Some(image), Some(index), Some(p)) = (t.image_id.as_deref(), t.difficulty_index, t.p_wrong(measure))
        else {
            continue;
        };
        let entry = groups.entry((t.model.as_str(), t.task.as_str())).or_default().entry(image).or_default();
        entry.0.entry(t.n).or_default().push(p);
        entry.1.push(index);
        if t.n == 0 {
            let correct = if t.correct_label.as_deref() == Some("A") { t.logit_a } else { t.logit_b };
            entry.2.extend(correct);
        }
    }
    let mut cells = vec![vec![Vec::<f64>::new(); BINS]; BINS];
    let mut images = 0;
    for images_of_group in groups.values() {
        let (mut conformity, mut difficulty, mut performance) = (Vec::new(), Vec::new(), Vec::new());
        for (curve, indices, logits) in images_of_group.values() {
            if curve.len() < 2 || logits.is_empty() {
                continue;
            }
            let means = curve.iter().map(|(&n, v)| (n, v.iter().sum::<f64>() / v.len() as f64));
            let Some(area) = auc(means) else { continue };
            conformity.push(area);
            difficulty.push(indices.iter().sum::<f64>() / indices.len() as f64);
            performance.push(logits.iter().sum::<f64>() / logits.len() as f64);
        }
        if !(normalise(&mut conformity) && normalise(&mut difficulty) && normalise(&mut performance)) {
            continue;
        }
        for ((c, d), p) in conformity.iter().zip(&difficulty).zip(&performance) {
            let bin = |v: f64| ((v * BINS as f64) as usize).min(BINS - 1);
            cells[bin(*d)][bin(*p)].push(*c);
            images += 1;
        }
    }
    if images == 0 {
        return Err(absent(
            NAME,
            PAPER,
            "no difficulty-family images with trials at N = 0 and a second N, varying in difficulty and performance",
        ));
    }
    let cells = cells
        .into_iter()
        .map(|column| {
            column.into_iter().map(|v| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)).collect()
        })
        .collect();
    let ols = &tables.difficulty_ols;
    let term = |task: &str, term: &str| {
        rows_where(ols, &[("task", task), ("measure", measure.column()), ("term", term)]).first().map(|&r| {
            format!(
                "β_{term} = {} (p = {})",
                num(ols.number("coef", r).unwrap_or(f64::NAN)),
                p_value(ols.number("p", r).unwrap_or(f64::NAN))
            )
        })
    };
    let mut tasks: Vec<&str> = (0..ols.n_rows()).filter_map(|r| ols.text("task", r)).collect();
    tasks.dedup();
    let fits: Vec<String> = tasks
        .iter()
        .map(|task| {
            let r2 = rows_where(ols, &[("task", task), ("measure", measure.column())])
                .first()
                .and_then(|&r| ols.number("r_squared", r));
            format!(
                "{task}: {}, {}, R² = {}",
                term(task, "difficulty").unwrap_or_default(),
                term(task, "performance").unwrap_or_default(),
                r2.map_or("n/a".into(), num)
            )
        })
        .collect();
    let reading = if fits.is_empty() {
        format!("{images} images binned; the regression needs more images per model.")
    } else {
        format!("{images} images; OLS of normalised conformity: {}.", fits.join("; "))
    };
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity over difficulty and performance".into(),
        reading,
        chart: Chart::Heat(Heatmap {
            title: "Conformity over difficulty and performance".into(),
            x_label: "difficulty index, min-max normalised within model and task (0–1)".into(),
            y_label: "performance: logit of correct answer at N = 0, normalised (0–1)".into(),
            value_label: "mean normalised AUC".into(),
            cells,
        }),
    })
}
