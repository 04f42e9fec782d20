//! Fig. 3: conformity against difficulty (AUC by level with Spearman ρ, and the hexagon heat map of
//! performance and difficulty).

use super::{absent, family_auc};
use crate::chart::{Chart, Heatmap, LineChart, LineSeries, Point};
use crate::figure::{Figure, FigureResult, mean_interval, num, p_is};
use herd_analysis::conformity::{normalised_images, unit_aucs};
use herd_analysis::{ConformityTable, ConformityTables, PWrong};
use std::collections::BTreeMap;

/// Paper fig. 3a: AUC against difficulty level per model and task, Spearman ρ in the legend, each level's
/// AUC with its 95% t-interval over trial indices.
pub fn auc_by_difficulty(trials: &ConformityTable, tables: &ConformityTables, measure: PWrong) -> FigureResult {
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
    let rhos = tables.difficulty_rhos();
    let rho = |model: &str, task: &str| {
        let defined = |v: f64| v.is_finite().then_some(v);
        rhos.iter()
            .find(|r| r.model == model && r.task == task && r.measure == measure.column())
            .map(|r| (defined(r.rho), defined(r.p)))
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
                "{model} · {task} {rho_text} ({}), AUC {} → {}",
                p.map_or("p n/a".into(), p_is),
                num(first),
                num(last)
            ));
            let label =
                if several { format!("{model} · {task} ({rho_text})") } else { format!("{task} ({rho_text})") };
            let points = points
                .into_iter()
                .map(|(x, y)| {
                    // Drawn where the trial indices' mean is the level's AUC (every index ran the same N).
                    let units = unit_aucs(trials, measure, &model, &task, "difficulty", &format!("{x}"), false);
                    let (mean, interval) = mean_interval(&units.into_values().collect::<Vec<_>>());
                    Point { x, y, interval: interval.filter(|_| (mean - y).abs() < 1e-9) }
                })
                .collect();
            LineSeries { label, points }
        })
        .collect();
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity AUC rises with difficulty".into(),
        reading: format!(
            "Spearman ρ between difficulty level and AUC: {}. The paper: ρ = 0.97 for Qwen2.5 32B on the colour task \
             (fig. 3a). Bands: 95% t-interval over trial indices.",
            readings.join("; ")
        ),
        chart: Chart::Line(LineChart {
            title: "Conformity AUC by difficulty level".into(),
            x_label: "difficulty level (1 = easiest)".into(),
            y_label: "conformity AUC (mean p_wrong over N, 0–1)".into(),
            legend_title: "task (Spearman ρ); band: 95% t-interval over trial indices".into(),
            series,
            y_limits: Some((0.0, 1.0)),
            reference_y: None,
            baselines: false,
            paper: None,
        }),
    })
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
    let mut cells = vec![vec![Vec::<f64>::new(); BINS]; BINS];
    let mut images = 0;
    for image in normalised_images(&trials.rows, measure).values().flatten() {
        let bin = |v: f64| ((v * BINS as f64) as usize).min(BINS - 1);
        cells[bin(image.difficulty)][bin(image.performance)].push(image.conformity);
        images += 1;
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
    let ols = tables.difficulty_fits();
    let term = |task: &str, term: &str| {
        ols.iter()
            .find(|f| f.task == task && f.measure == measure.column() && f.term == term)
            .map(|f| format!("β_{term} = {} ({})", num(f.coef), p_is(f.p)))
    };
    let mut tasks: Vec<&str> = ols.iter().map(|f| f.task.as_str()).collect();
    tasks.dedup();
    let fits: Vec<String> = tasks
        .iter()
        .map(|task| {
            let r2 = ols
                .iter()
                .find(|f| f.task == *task && f.measure == measure.column())
                .map(|f| f.r_squared)
                .filter(|v| v.is_finite());
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
