//! The conformity paper's figures: one function per figure, each from the trial rows (for curves
//! with confidence bands from the trials themselves) or the analysis tables (AUC, contrasts).

use std::collections::BTreeMap;

use herd_analysis::{ConformityTable, ConformityTables, ConformityTrial, PWrong, SOCIAL_MEAN};
use herd_stats::trapezoid;

use crate::chart::{Bar, BarChart, BarSeries, Chart, Heatmap, LineChart, LineSeries, Point};
use crate::figure::{
    AbsentFigure, Figure, FigureResult, Z95, band_name, mean_interval, num, p_value, rows_where, signed, t_quantile,
};

/// Fig. 4c's sources in order of strength, as the paper lists them: the neutral base, low-authority
/// sources, ordinary people, then authorities (the conformity paper, section 2.3 and fig. 4a).
const SOURCE_ORDER: [&str; 12] = [
    "participants",
    "chatbots",
    "kids",
    "strangers",
    "people",
    "humans",
    "experts",
    "policemen",
    "scientists",
    "doctors",
    "judges",
    "military officers",
];

const GROUP_SIZE: &str = "number of confederates N (replies)";

/// Every conformity figure in the report's order, read with `measure` (the `measure` column of the
/// analysis tables, and the trials' p_wrong of that name).
pub fn conformity_figures(trials: &ConformityTable, tables: &ConformityTables, measure: PWrong) -> Vec<FigureResult> {
    vec![
        p_wrong_by_group_size_per_model_color(trials, tables, measure),
        p_wrong_by_group_size_per_model(trials, tables, measure),
        p_wrong_by_group_size_per_task(trials, measure),
        p_wrong_by_unanimity(trials, tables, measure),
        auc_by_difficulty(tables, measure),
        conformity_by_difficulty_and_performance(trials, tables, measure),
        public_minus_private_auc_per_model(tables, measure),
        p_wrong_by_source_strength(trials, measure),
        p_wrong_same_vs_different_group(trials, tables, measure),
        p_wrong_near_vs_far(trials, tables, measure),
        auc_by_source_strength_per_task(tables, measure),
        proximity_auc_differences(tables, measure),
    ]
}

fn absent(name: &'static str, paper_figure: &'static str, reason: impl Into<String>) -> AbsentFigure {
    AbsentFigure { name, paper_figure, reason: reason.into() }
}

/// Levels in order of first appearance in the trials (the experiment file's order).
fn levels_in_order<'a>(trials: impl Iterator<Item = &'a ConformityTrial>) -> Vec<String> {
    let mut levels: Vec<String> = Vec::new();
    for t in trials {
        if !levels.contains(&t.level) {
            levels.push(t.level.clone());
        }
    }
    levels
}

/// p_wrong(N) curves with 95% t-interval bands over the trials at each N, one per label
/// `series_of` gives (in the order of `order`, or sorted), and the trial count of every point (for
/// the band's name).
fn curves_by<'a>(
    trials: impl Iterator<Item = &'a ConformityTrial>,
    measure: PWrong,
    series_of: impl Fn(&ConformityTrial) -> String,
    order: Option<&[String]>,
) -> (Vec<LineSeries>, Vec<usize>) {
    let mut grouped: BTreeMap<String, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for t in trials {
        if let Some(p) = t.p_wrong(measure) {
            grouped.entry(series_of(t)).or_default().entry(t.n).or_default().push(p);
        }
    }
    let labels: Vec<String> = match order {
        Some(order) => order.iter().filter(|l| grouped.contains_key(*l)).cloned().collect(),
        None => grouped.keys().cloned().collect(),
    };
    let counts = labels.iter().flat_map(|l| grouped[l].values().map(Vec::len)).collect();
    let series = labels
        .into_iter()
        .map(|label| {
            let points = grouped[&label]
                .iter()
                .map(|(&n, values)| {
                    let (y, interval) = mean_interval(values);
                    Point { x: f64::from(n), y, interval }
                })
                .collect();
            LineSeries { label, points }
        })
        .collect();
    (series, counts)
}

/// A curve chart whose legend says what its bands are (`95% t-interval over 8 trials`).
fn curve_chart(
    title: &str,
    legend_title: &str,
    (series, counts): (Vec<LineSeries>, Vec<usize>),
    measure: PWrong,
) -> Chart {
    Chart::Line(LineChart {
        title: title.to_owned(),
        x_label: GROUP_SIZE.into(),
        y_label: measure.describe().into(),
        legend_title: format!("{legend_title}; band: {}", band_name(counts.into_iter(), "trials")),
        series,
        y_range: Some((0.0, 1.0)),
        reference_y: None,
    })
}

fn family<'a>(trials: &'a ConformityTable, name: &'a str) -> impl Iterator<Item = &'a ConformityTrial> + 'a {
    trials.rows.iter().filter(move |t| t.family == name)
}

fn models(trials: &ConformityTable) -> usize {
    let mut names: Vec<&str> = trials.rows.iter().map(|t| t.model.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.len()
}

/// "first → last" of a curve, for readings.
fn rise(series: &LineSeries) -> String {
    match (series.points.first(), series.points.last()) {
        (Some(a), Some(b)) => {
            format!("{} from {} at N = {} to {} at N = {}", series.label, num(a.y), a.x, num(b.y), b.x)
        }
        _ => series.label.clone(),
    }
}

/// Where each model's group-size curve saturates (the `auc` table's `saturation_n`: the first N whose rise from
/// N = 0 reaches 90% of the rise at the largest N), per task, for readings.
fn saturation(tables: &ConformityTables, measure: PWrong, task: Option<&str>) -> String {
    let auc = &tables.auc;
    let points: Vec<String> = rows_where(auc, &[("family", "group_size"), ("measure", measure.column())])
        .into_iter()
        .filter(|&r| task.is_none_or(|task| auc.text("task", r) == Some(task)))
        .map(|r| {
            let at = auc
                .number("saturation_n", r)
                .map_or("none (the curve does not rise)".to_owned(), |n| format!("N = {n}"));
            format!("{} · {} {at}", auc.text("model", r).unwrap_or("?"), auc.text("task", r).unwrap_or("?"))
        })
        .collect();
    if points.is_empty() {
        String::new()
    } else {
        format!(" Saturation (first N at 90% of the largest N's p_wrong): {}.", points.join(", "))
    }
}

/// Paper fig. 2a: p_wrong(N) per model on the colour task, in the group-size family.
pub fn p_wrong_by_group_size_per_model_color(
    trials: &ConformityTable,
    tables: &ConformityTables,
    measure: PWrong,
) -> FigureResult {
    const NAME: &str = "p_wrong_by_group_size_per_model_color";
    const PAPER: &str = "conformity paper, fig. 2a (colour task)";
    let color = family(trials, "group_size").filter(|t| t.task == "color");
    let curves = curves_by(color, measure, |t| t.model.clone(), None);
    if curves.0.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no group_size trials on the colour task"));
    }
    let reading = format!(
        "p_wrong per model, colour task: {}.{}",
        curves.0.iter().map(rise).collect::<Vec<_>>().join("; "),
        saturation(tables, measure, Some("color"))
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity by group size, per model (colour task)".into(),
        reading,
        chart: curve_chart("Conformity by group size, per model (colour)", "model", curves, measure),
    })
}

/// Fig. 2a pooled over the tasks the run has (herd's summary; the paper's panel is the colour task).
pub fn p_wrong_by_group_size_per_model(
    trials: &ConformityTable,
    tables: &ConformityTables,
    measure: PWrong,
) -> FigureResult {
    const NAME: &str = "p_wrong_by_group_size_per_model";
    const PAPER: &str = "conformity paper, fig. 2a, tasks pooled (herd's)";
    let curves = curves_by(family(trials, "group_size"), measure, |t| t.model.clone(), None);
    if curves.0.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no group_size trials"));
    }
    let reading = format!(
        "p_wrong per model, tasks pooled: {}.{}",
        curves.0.iter().map(rise).collect::<Vec<_>>().join("; "),
        saturation(tables, measure, None)
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity by group size, per model, tasks pooled".into(),
        reading,
        chart: curve_chart("Conformity by group size, per model", "model", curves, measure),
    })
}

/// Paper fig. 2b: p_wrong(N) per task, models pooled.
pub fn p_wrong_by_group_size_per_task(trials: &ConformityTable, measure: PWrong) -> FigureResult {
    const NAME: &str = "p_wrong_by_group_size_per_task";
    const PAPER: &str = "conformity paper, fig. 2b";
    let several = models(trials) > 1;
    let curves = curves_by(
        family(trials, "group_size"),
        measure,
        |t| if several { format!("{} · {}", t.model, t.task) } else { t.task.clone() },
        None,
    );
    if curves.0.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no group_size trials"));
    }
    let reading = format!("p_wrong per task: {}.", curves.0.iter().map(rise).collect::<Vec<_>>().join("; "));
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity by group size, per task".into(),
        reading,
        chart: curve_chart(
            "Conformity by group size, per task",
            if several { "model · task" } else { "task" },
            curves,
            measure,
        ),
    })
}

/// AUCs of one family from the `auc` table, (model, task, level) → AUC.
fn family_auc(tables: &ConformityTables, family: &str, measure: PWrong) -> Vec<(String, String, String, f64)> {
    rows_where(&tables.auc, &[("family", family), ("measure", measure.column())])
        .into_iter()
        .filter_map(|r| {
            Some((
                tables.auc.text("model", r)?.to_owned(),
                tables.auc.text("task", r)?.to_owned(),
                tables.auc.text("level", r).unwrap_or_default().to_owned(),
                tables.auc.number("auc", r)?,
            ))
        })
        .collect()
}

/// Paper fig. 2c: unanimity curves, one per share of wrong confederates (and allies).
pub fn p_wrong_by_unanimity(trials: &ConformityTable, tables: &ConformityTables, measure: PWrong) -> FigureResult {
    const NAME: &str = "p_wrong_by_unanimity";
    const PAPER: &str = "conformity paper, fig. 2c";
    let order = levels_in_order(family(trials, "unanimity"));
    let several = models(trials) > 1;
    let curves = curves_by(
        family(trials, "unanimity"),
        measure,
        |t| if several { format!("{} · {}", t.model, t.level) } else { t.level.clone() },
        if several { None } else { Some(&order) },
    );
    if curves.0.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no unanimity trials"));
    }
    let aucs = family_auc(tables, "unanimity", measure);
    let reading = format!(
        "AUC by unanimity condition: {}.",
        aucs.iter().map(|(m, t, l, a)| format!("{l} {} ({m}, {t})", num(*a))).collect::<Vec<_>>().join(", ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity when confederates are not unanimous".into(),
        reading,
        chart: curve_chart("Conformity when confederates are not unanimous", "wrong share / allies", curves, measure),
    })
}

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
            y_range: None,
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
            let ns: Vec<f64> = curve.keys().map(|&n| f64::from(n)).collect();
            let means: Vec<f64> = curve.values().map(|v| v.iter().sum::<f64>() / v.len() as f64).collect();
            let Ok(area) = trapezoid(&means, &ns) else { continue };
            conformity.push(area / (ns[ns.len() - 1] - ns[0]));
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

/// Contrast rows of `families` from the `deltas` table.
struct Contrast {
    model: String,
    task: String,
    family: String,
    level_a: String,
    level_b: String,
    delta: f64,
    se: f64,
    /// Paired units (trials, paraphrases) and the one-sample t-test over them (the `deltas` table's).
    n_pairs: usize,
    t: f64,
    df: f64,
    t_p: f64,
    z: f64,
    z_p: f64,
}

impl Contrast {
    /// The contrast's test as a reading prints it: the normal z only on 30 or more paired units
    /// (the `deltas` table's z-test, the paper's), else the one-sample t-test with its df, so that no
    /// p rests on a normal approximation two trials cannot support.
    fn test(&self) -> String {
        if self.n_pairs >= Z_MIN_UNITS {
            format!("z = {}, p = {}, {} pairs", fixed2(self.z), p_value(self.z_p), self.n_pairs)
        } else {
            format!("t({}) = {}, p = {}", num_df(self.df), fixed2(self.t), p_value(self.t_p))
        }
    }

    /// 95% interval of the difference: t quantile on the t-test's df (normal from 30 pairs on).
    fn interval(&self) -> Option<(f64, f64)> {
        if !(self.se.is_finite() && self.delta.is_finite()) {
            return None;
        }
        let q = if self.n_pairs >= Z_MIN_UNITS || self.df.is_nan() || self.df < 1.0 {
            Z95
        } else {
            t_quantile(0.975, self.df)
        };
        Some((self.delta - q * self.se, self.delta + q * self.se))
    }
}

/// Fewest paired units on which a reading prints a normal-theory p.
const Z_MIN_UNITS: usize = 30;

fn fixed2(v: f64) -> String {
    if v.is_finite() { format!("{v:.2}") } else { "n/a".into() }
}

fn num_df(df: f64) -> String {
    if df.is_finite() && df.fract() == 0.0 { format!("{df:.0}") } else { num(df) }
}

fn contrasts(tables: &ConformityTables, families: &[&str], measure: PWrong) -> Vec<Contrast> {
    let d = &tables.deltas;
    (0..d.n_rows())
        .filter(|&r| {
            d.text("measure", r) == Some(measure.column()) && families.iter().any(|f| d.text("family", r) == Some(*f))
        })
        .map(|r| Contrast {
            model: d.text("model", r).unwrap_or_default().to_owned(),
            task: d.text("task", r).unwrap_or_default().to_owned(),
            family: d.text("family", r).unwrap_or_default().to_owned(),
            level_a: d.text("level_a", r).unwrap_or_default().to_owned(),
            level_b: d.text("level_b", r).unwrap_or_default().to_owned(),
            delta: d.number("delta", r).unwrap_or(f64::NAN),
            se: d.number("se", r).unwrap_or(f64::NAN),
            n_pairs: d.number("n_pairs", r).unwrap_or(0.0) as usize,
            t: d.number("t", r).unwrap_or(f64::NAN),
            df: d.number("df", r).unwrap_or(f64::NAN),
            t_p: d.number("t_p", r).unwrap_or(f64::NAN),
            z: d.number("z", r).unwrap_or(f64::NAN),
            z_p: d.number("z_p", r).unwrap_or(f64::NAN),
        })
        .collect()
}

fn contrast_bar(c: &Contrast) -> Bar {
    Bar { value: c.delta, interval: c.interval(), note: Some(c.test()) }
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
            .map(|c| format!("{} {} {} ({})", c.model, c.task, signed(c.delta), c.test()))
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
            .map(|c| format!("{} {} − {}: {} ({})", c.family, c.level_a, c.level_b, signed(c.delta), c.test()))
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

/// Paper fig. 4c: AUC by source strength per task.
pub fn auc_by_source_strength_per_task(tables: &ConformityTables, measure: PWrong) -> FigureResult {
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
                    aucs.iter().find(|a| &format!("{} · {}", a.0, a.1) == s && &a.2 == l).map(|a| Bar {
                        value: a.3,
                        interval: None,
                        note: None,
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
            legend_title: "model · task".into(),
            categories: levels,
            series,
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
            .map(|c| format!("{} · {} {} {} ({})", c.model, c.task, c.family, signed(c.delta), c.test()))
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
        }),
    })
}
