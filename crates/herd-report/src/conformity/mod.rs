//! The conformity paper's figures: one function per figure, each from the trial rows (for curves
//! with confidence bands from the trials themselves) or the analysis tables (AUC, contrasts).

use herd_analysis::{ConformityTable, ConformityTables, ConformityTrial, PWrong};

mod difficulty;
mod social;

pub use difficulty::{auc_by_difficulty, conformity_by_difficulty_and_performance};
pub use social::{
    auc_by_source_strength_per_task, p_wrong_by_source_strength, p_wrong_near_vs_far, p_wrong_same_vs_different_group,
    proximity_auc_differences, public_minus_private_auc_per_model,
};

use crate::chart::{Chart, LineChart, LineSeries, PaperBand, Point};
use crate::figure::{AbsentFigure, Figure, FigureResult, band_name, num};
use herd_analysis::conformity::curves_by_key;

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
        auc_by_difficulty(trials, tables, measure),
        conformity_by_difficulty_and_performance(trials, tables, measure),
        public_minus_private_auc_per_model(tables, measure),
        p_wrong_by_source_strength(trials, measure),
        p_wrong_same_vs_different_group(trials, tables, measure),
        p_wrong_near_vs_far(trials, tables, measure),
        auc_by_source_strength_per_task(trials, tables, measure),
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
    let mut grouped = curves_by_key(trials, measure, series_of);
    let labels: Vec<String> = match order {
        Some(order) => order.iter().filter(|l| grouped.contains_key(*l)).cloned().collect(),
        None => grouped.keys().cloned().collect(),
    };
    let counts = labels.iter().flat_map(|l| grouped[l].iter().map(|p| p.trials)).collect();
    let series = labels
        .into_iter()
        .map(|label| {
            let points = grouped
                .remove(&label)
                .unwrap_or_default()
                .into_iter()
                .map(|p| Point { x: f64::from(p.n), y: p.mean, interval: p.interval })
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
    // Read two-way, a model guessing between A and B sits at 0.5: every curve chart of that measure draws
    // it and says so, so that a flat curve there reads as chance, not as resistance to the crowd.
    let (y_label, reference_y) = match measure {
        PWrong::Ab => (format!("{}; black line: chance (0.5)", measure.describe()), 0.5),
        PWrong::Full => (measure.describe().to_owned(), 0.0),
    };
    Chart::Line(LineChart {
        title: title.to_owned(),
        x_label: GROUP_SIZE.into(),
        y_label,
        legend_title: format!(
            "{legend_title}; band: {}; dotted: the curve's value at N = 0",
            band_name(counts.into_iter(), "trials")
        ),
        series,
        y_limits: Some((0.0, 1.0)),
        reference_y: Some(reference_y),
        baselines: true,
        paper: None,
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
    let points: Vec<String> = tables
        .curve_aucs()
        .into_iter()
        .filter(|a| a.family == "group_size" && a.measure == measure.column())
        .filter(|a| task.is_none_or(|task| a.task == task))
        .map(|a| {
            let at = a.saturation_n.map_or("none (the curve does not rise)".to_owned(), |n| format!("N = {n}"));
            format!("{} · {} {at}", a.model, a.task)
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
    let chance =
        if measure == PWrong::Ab { " The black line is chance (0.5, an even guess between A and B)." } else { "" };
    let reading = format!(
        "p_wrong per model, tasks pooled: {}.{}{chance} In the paper (fig. 2a) p_wrong rises with N for every model, some reaching about 1 by N = 10; the grey band is the human plateau it cites (30–40% wrong from N ≈ 3–4).",
        curves.0.iter().map(rise).collect::<Vec<_>>().join("; "),
        saturation(tables, measure, None)
    );
    let mut chart = curve_chart("Conformity by group size, per model", "model", curves, measure);
    // The human plateau the paper sets its models against (section 2.1): 30–40% wrong from N ≈ 3–4.
    if let Chart::Line(c) = &mut chart {
        c.paper =
            Some(PaperBand { low: 0.30, high: 0.40, label: "humans (Asch), as the paper cites: 30–40%".into() });
    }
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity by group size, per model, tasks pooled".into(),
        reading,
        chart,
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
    tables
        .curve_aucs()
        .into_iter()
        .filter(|a| a.family == family && a.measure == measure.column() && a.auc.is_finite())
        .map(|a| (a.model, a.task, a.level, a.auc))
        .collect()
}

/// Paper fig. 2c: unanimity curves, one per share of wrong confederates (and allies).
/// A unanimity level in words for a legend: `wrong_80` → `80% wrong`, `one_ally` → `one ally`,
/// `random` → `each wrong with p = 0.5`; a name of the user's own is kept as written.
fn unanimity_words(level: &str) -> String {
    if let Some(share) = level.strip_prefix("wrong_").filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    {
        return format!("{share}% wrong");
    }
    match level {
        "random" => "each wrong with p = 0.5".into(),
        "one_ally" => "one ally".into(),
        "two_allies" => "two allies".into(),
        other => other.to_owned(),
    }
}

pub fn p_wrong_by_unanimity(trials: &ConformityTable, tables: &ConformityTables, measure: PWrong) -> FigureResult {
    const NAME: &str = "p_wrong_by_unanimity";
    const PAPER: &str = "conformity paper, fig. 2c";
    let levels: Vec<String> = levels_in_order(family(trials, "unanimity")).iter().map(|l| unanimity_words(l)).collect();
    let several = models(trials) > 1;
    let label = |model: &str, level: &str| if several { format!("{model} · {level}") } else { level.to_owned() };
    // Each model's levels in the experiment's order (from all wrong to allies), not alphabetically.
    let mut names: Vec<&str> = family(trials, "unanimity").map(|t| t.model.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let order: Vec<String> = names.iter().flat_map(|m| levels.iter().map(move |l| label(m, l))).collect();
    let curves =
        curves_by(family(trials, "unanimity"), measure, |t| label(&t.model, &unanimity_words(&t.level)), Some(&order));
    if curves.0.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no unanimity trials"));
    }
    let aucs = family_auc(tables, "unanimity", measure);
    let reading = format!(
        "AUC by unanimity condition: {}.",
        aucs.iter()
            .map(|(m, t, l, a)| format!("{} {} ({m}, {t})", unanimity_words(l), num(*a)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Conformity when confederates are not unanimous".into(),
        reading,
        chart: curve_chart(
            "Conformity when confederates are not unanimous",
            "share of wrong replies / correct allies",
            curves,
            measure,
        ),
    })
}
