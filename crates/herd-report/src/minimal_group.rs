//! The minimal-group paper's figures: favouritism by model × minority size × decider group with
//! seed-level intervals, the hidden-label floor, excess share, per-decider distributions, extreme
//! allocations, the reasoning control and the robustness checks.
//!
//! Intervals are over seeds (societies), the unit of every test in the paper: deciders are averaged
//! within a society first.

use std::collections::{BTreeMap, BTreeSet};

use herd_analysis::minimal_group::{DeciderOutcome, decider_outcomes};
use herd_analysis::{DyadTable, Labels, MinimalGroupTables};

use crate::chart::{Bar, BarChart, BarSeries, Chart, LineChart, LineSeries, PaperBand, Point};
use crate::figure::{AbsentFigure, Figure, FigureResult, mean_interval, num, p_is, signed};
use herd_analysis::rows::{GeeTerm, RobustnessCheck, SeedTest};

const FAVOURITISM: &str = "favouritism (points per in-group − per out-group target)";

/// What one decider did: herd-analysis's per-decider outcome (the paper's definitions).
type Decider = DeciderOutcome;

fn deciders(table: &DyadTable) -> Vec<Decider> {
    decider_outcomes(table)
}

const MODEL: usize = 0;
const REASONING: usize = 1;
const INSTRUMENT: usize = 2;
const SWAP_PASS: usize = 3;

/// The values a design column takes in the table.
fn levels(deciders: &[Decider], column: usize) -> BTreeSet<String> {
    deciders.iter().filter_map(|d| d.design.0[column].clone()).collect()
}

/// The paper's main condition, the headlines' selection: the base instrument where the run has it,
/// with both swap passes of a society pooled (a seed's deciders of both passes averaged together,
/// as herd-analysis's main rows and the headline rows do).
fn is_main(d: &Decider, instruments: &BTreeSet<String>) -> bool {
    let main_instrument = instruments.contains("base").then_some("base");
    main_instrument.is_none_or(|i| d.design.0[INSTRUMENT].as_deref() == Some(i))
}

/// What the main-condition figures show, for their readings.
fn main_selection(context: &Context) -> String {
    let mut parts = Vec::new();
    if context.instruments.contains("base") {
        parts.push("the base instrument");
    }
    if context.passes.len() > 1 {
        parts.push("both swap passes pooled");
    }
    if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) }
}

/// Model, with the reasoning mode when the run has several.
fn condition_label(d: &Decider, several_reasoning: bool) -> String {
    let model = d.design.0[MODEL].clone().unwrap_or_else(|| "model".into());
    match (&d.design.0[REASONING], several_reasoning) {
        (Some(r), true) => format!("{model} · thinking {r}"),
        _ => model,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum DeciderSet {
    All,
    Minority,
    Majority,
}

impl DeciderSet {
    fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Minority => "minority",
            Self::Majority => "majority",
        }
    }
    fn contains(self, d: &Decider) -> bool {
        match self {
            Self::All => true,
            Self::Minority => d.minority,
            Self::Majority => !d.minority,
        }
    }
}

/// Seed-level mean of `value` over the chosen deciders: averaged within each society, then over
/// societies, with a 95% interval over societies.
fn seed_level<'a>(
    chosen: impl Iterator<Item = &'a Decider>,
    value: fn(&Decider) -> f64,
) -> Option<(f64, Option<(f64, f64)>)> {
    let mut by_seed: BTreeMap<i64, (f64, usize)> = BTreeMap::new();
    for d in chosen {
        let e = by_seed.entry(d.seed).or_default();
        e.0 += value(d);
        e.1 += 1;
    }
    if by_seed.is_empty() {
        return None;
    }
    let means: Vec<f64> = by_seed.values().map(|(s, n)| s / *n as f64).collect();
    Some(mean_interval(&means))
}

struct Context {
    deciders: Vec<Decider>,
    instruments: BTreeSet<String>,
    passes: BTreeSet<String>,
    several_reasoning: bool,
    minority_sizes: Vec<u32>,
    /// The run's society sizes (agents per society, deciders and targets), for the axes.
    society_sizes: BTreeSet<usize>,
}

impl Context {
    fn new(table: &DyadTable) -> Self {
        let deciders = deciders(table);
        let instruments = levels(&deciders, INSTRUMENT);
        let passes = levels(&deciders, SWAP_PASS);
        let several_reasoning = levels(&deciders, REASONING).len() > 1;
        let minority_sizes: BTreeSet<u32> = deciders.iter().map(|d| d.m).collect();
        let society_sizes = herd_analysis::minimal_group::society_sizes(table).into_values().collect();
        Self {
            deciders,
            instruments,
            passes,
            several_reasoning,
            minority_sizes: minority_sizes.into_iter().collect(),
            society_sizes,
        }
    }

    /// The minority-size axis, with the society size the design has: "minority size m (of 20 agents)".
    fn minority_axis(&self) -> String {
        let sizes: Vec<String> = self.society_sizes.iter().map(usize::to_string).collect();
        match sizes.as_slice() {
            [] => "minority size m".into(),
            [one] => format!("minority size m (of {one} agents)"),
            several => format!("minority size m (of {} agents)", several.join(" or ")),
        }
    }

    fn main(&self) -> impl Iterator<Item = &Decider> {
        self.deciders.iter().filter(|d| is_main(d, &self.instruments))
    }

    fn conditions(&self) -> Vec<String> {
        let set: BTreeSet<String> = self.main().map(|d| condition_label(d, self.several_reasoning)).collect();
        set.into_iter().collect()
    }
}

/// A line chart's legend title, naming the seed-level 95% interval only where one is drawn (two or
/// more societies at some point).
fn interval_legend(title: &str, series: &[LineSeries]) -> String {
    if series.iter().flat_map(|s| &s.points).any(|p| p.interval.is_some()) {
        format!("{title} (95% t-interval over seeds)")
    } else {
        format!("{title} (one society per point: no interval)")
    }
}

/// Every minimal-group figure in the report's order.
pub fn minimal_group_figures(dyads: &DyadTable, tables: &MinimalGroupTables) -> Vec<FigureResult> {
    let context = Context::new(dyads);
    vec![
        favouritism_by_minority_size(&context, tables),
        favouritism_visible_vs_hidden(&context, tables),
        excess_share_by_minority_size(&context),
        favouritism_distribution_per_decider(&context),
        extreme_allocations_by_minority_size(&context),
        favouritism_by_reasoning_mode(&context, tables),
        favouritism_across_swap_pass_and_paraphrase(&context, tables),
    ]
}

fn absent(name: &'static str, paper_figure: &'static str, reason: impl Into<String>) -> AbsentFigure {
    AbsentFigure { name, paper_figure, reason: reason.into() }
}

fn by_m_series(context: &Context, labels: Labels, sets: &[DeciderSet], value: fn(&Decider) -> f64) -> Vec<LineSeries> {
    let mut series = Vec::new();
    for condition in context.conditions() {
        for &set in sets {
            let points: Vec<Point> = context
                .minority_sizes
                .iter()
                .filter_map(|&m| {
                    let chosen = context.main().filter(|d| {
                        d.labels == labels
                            && d.m == m
                            && set.contains(d)
                            && condition_label(d, context.several_reasoning) == condition
                    });
                    seed_level(chosen, value).map(|(y, interval)| Point { x: f64::from(m), y, interval })
                })
                .collect();
            if !points.is_empty() {
                series.push(LineSeries { label: format!("{condition} · {} deciders", set.name()), points });
            }
        }
    }
    series
}

/// Seed-test rows of the main condition (as the figures show it): (condition · m, mean, p).
fn seed_test(
    context: &Context,
    tables: &MinimalGroupTables,
    labels: &str,
    deciders: &str,
    measure: &str,
) -> Vec<(String, f64, f64)> {
    tables
        .seed_test_rows()
        .into_iter()
        .filter(|t| t.labels == labels && t.deciders == deciders && t.measure == measure)
        .filter(|t| (!context.instruments.contains("base") || t.instrument.as_deref() == Some("base")) && t.is_main())
        .map(|t| {
            let mut name: Vec<String> = t.model.into_iter().collect();
            if context.several_reasoning {
                name.extend(t.reasoning.map(|v| format!("thinking {v}")));
            }
            name.push(t.m.map_or("m = ?".into(), |m| format!("m = {m}")));
            (name.join(" · "), t.mean, t.wilcoxon_p)
        })
        .collect()
}

/// Minimal-group paper, main figure: favouritism by minority size and decider group, visible labels.
fn favouritism_by_minority_size(context: &Context, tables: &MinimalGroupTables) -> FigureResult {
    const NAME: &str = "favouritism_by_minority_size";
    const PAPER: &str = "minimal-group paper, favouritism by model × m × decider group";
    let sets = [DeciderSet::All, DeciderSet::Minority, DeciderSet::Majority];
    let series = by_m_series(context, Labels::Visible, &sets, |d| d.favouritism);
    if series.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no visible-label societies"));
    }
    let tests = seed_test(context, tables, "visible", "all", "favouritism");
    let reading = format!(
        "Visible labels, all deciders{} (seed-level Wilcoxon): {}. The grey band is the paper's per-model range \
         (+0.84 to +4.06 points/target).",
        main_selection(context),
        tests
            .iter()
            .map(|(cell, mean, p)| format!("{cell}: {} points/target ({})", signed(*mean), p_is(*p)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "In-group favouritism by minority size".into(),
        reading,
        chart: Chart::Line(LineChart {
            title: "In-group favouritism by minority size (labels visible)".into(),
            x_label: context.minority_axis(),
            y_label: FAVOURITISM.into(),
            legend_title: interval_legend("condition · deciders", &series),
            series,
            y_limits: None,
            reference_y: Some(0.0),
            baselines: false,
            // The paper's per-model favouritism (all deciders, pooled over m): its four models' range.
            paper: Some(PaperBand {
                low: 0.84,
                high: 4.06,
                label: "paper: +0.84 to +4.06 per model (all deciders, m pooled)".into(),
            }),
        }),
    })
}

fn bars_by_m(
    context: &Context,
    groups: &[(Labels, DeciderSet)],
    value: fn(&Decider) -> f64,
    scale: f64,
) -> (Vec<String>, Vec<BarSeries>) {
    let categories = context.minority_sizes.iter().map(|m| format!("m = {m}")).collect();
    let mut series = Vec::new();
    for condition in context.conditions() {
        for &(labels, set) in groups {
            let bars: Vec<Option<Bar>> = context
                .minority_sizes
                .iter()
                .map(|&m| {
                    let chosen = context.main().filter(|d| {
                        d.labels == labels
                            && d.m == m
                            && set.contains(d)
                            && condition_label(d, context.several_reasoning) == condition
                    });
                    seed_level(chosen, value).map(|(v, interval)| Bar {
                        value: v * scale,
                        interval: interval.map(|(lo, hi)| (lo * scale, hi * scale)),
                        note: None,
                    })
                })
                .collect();
            if bars.iter().any(Option::is_some) {
                series.push(BarSeries { label: format!("{condition} · {} · {}", labels.as_str(), set.name()), bars });
            }
        }
    }
    (categories, series)
}

/// Visible versus hidden labels by decider group (minority, majority): the group-blind floor, and
/// which group's favouritism the labels bring out (one of the report's two key effects).
fn favouritism_visible_vs_hidden(context: &Context, tables: &MinimalGroupTables) -> FigureResult {
    const NAME: &str = "favouritism_visible_vs_hidden";
    const PAPER: &str = "minimal-group paper, visible vs hidden labels (floor)";
    let (categories, series) = bars_by_m(
        context,
        &[
            (Labels::Visible, DeciderSet::Minority),
            (Labels::Visible, DeciderSet::Majority),
            (Labels::Hidden, DeciderSet::Minority),
            (Labels::Hidden, DeciderSet::Majority),
        ],
        |d| d.favouritism,
        1.0,
    );
    let has_hidden = series.iter().any(|s| s.label.contains("· hidden ·"));
    if series.is_empty() || !has_hidden {
        return Err(absent(NAME, PAPER, "the run has no hidden-label societies"));
    }
    let visible = seed_test(context, tables, "visible", "all", "favouritism");
    let hidden = seed_test(context, tables, "hidden", "all", "favouritism");
    let reading = format!(
        "Bars by decider group (minority, majority); the tests on all deciders, visible vs hidden labels{}: {}. The \
         grey band is the paper's hidden-label floor (within ±0.03 points/target).",
        main_selection(context),
        hidden
            .iter()
            .map(|(cell, mean, p)| {
                let shown = visible.iter().find(|v| &v.0 == cell).map_or("n/a".into(), |v| signed(v.1));
                format!("{cell}: {shown} vs {} (hidden {})", signed(*mean), p_is(*p))
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Favouritism with visible and hidden labels".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Favouritism with labels visible and hidden".into(),
            x_label: context.minority_axis(),
            y_label: FAVOURITISM.into(),
            legend_title: "condition · labels · deciders".into(),
            categories,
            series,
            // The group-blind floor the paper reports for every model and m.
            paper: Some(PaperBand { low: -0.03, high: 0.03, label: "paper, hidden labels: within ±0.03".into() }),
        }),
    })
}

/// Excess share of the decider's own group by minority size, minority and majority deciders.
fn excess_share_by_minority_size(context: &Context) -> FigureResult {
    const NAME: &str = "excess_share_by_minority_size";
    const PAPER: &str = "minimal-group paper, excess share";
    let series =
        by_m_series(context, Labels::Visible, &[DeciderSet::Minority, DeciderSet::Majority], |d| d.excess_share);
    if series.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no visible-label societies"));
    }
    let reading = format!(
        "Excess share, visible labels: {}.",
        series
            .iter()
            .map(|s| format!(
                "{} {}",
                s.label,
                s.points.iter().map(|p| format!("m = {}: {}", p.x, signed(p.y))).collect::<Vec<_>>().join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Excess share by minority size".into(),
        reading,
        chart: Chart::Line(LineChart {
            title: "Excess share of the own group (labels visible)".into(),
            x_label: context.minority_axis(),
            y_label: "excess share (own-group share − per-capita share)".into(),
            legend_title: interval_legend("condition · deciders", &series),
            series,
            y_limits: None,
            reference_y: Some(0.0),
            baselines: false,
            paper: None,
        }),
    })
}

/// Distribution of per-decider favouritism (prevalence = share above zero).
fn favouritism_distribution_per_decider(context: &Context) -> FigureResult {
    const NAME: &str = "favouritism_distribution_per_decider";
    const PAPER: &str = "minimal-group paper, per-decider distributions (prevalence)";
    const BINS: usize = 12;
    let groups: [(&str, Labels, DeciderSet); 3] = [
        ("visible · minority deciders", Labels::Visible, DeciderSet::Minority),
        ("visible · majority deciders", Labels::Visible, DeciderSet::Majority),
        ("hidden · all deciders", Labels::Hidden, DeciderSet::All),
    ];
    let values: Vec<(usize, f64)> = context
        .main()
        .filter_map(|d| groups.iter().position(|(_, l, s)| d.labels == *l && s.contains(d)).map(|g| (g, d.favouritism)))
        .collect();
    if values.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no deciders"));
    }
    let lo = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min).min(-1.0);
    let hi = values.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max).max(1.0);
    let width = (hi - lo) / BINS as f64;
    let mut series = Vec::new();
    let mut prevalence = Vec::new();
    for (g, (label, _, _)) in groups.iter().enumerate() {
        let own: Vec<f64> = values.iter().filter(|v| v.0 == g).map(|v| v.1).collect();
        if own.is_empty() {
            continue;
        }
        let mut counts = [0usize; BINS];
        for v in &own {
            counts[(((v - lo) / width) as usize).min(BINS - 1)] += 1;
        }
        let points = counts
            .iter()
            .enumerate()
            .map(|(k, &c)| Point {
                x: lo + (k as f64 + 0.5) * width,
                y: 100.0 * c as f64 / own.len() as f64,
                interval: None,
            })
            .collect();
        let share = own.iter().filter(|v| **v > 0.0).count() as f64 / own.len() as f64;
        let median = herd_analysis::summary::median(&own);
        prevalence.push(format!("{label} {:.1}% of {} deciders (median {})", 100.0 * share, own.len(), signed(median)));
        series.push(LineSeries { label: format!("{label} (n = {})", own.len()), points });
    }
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Per-decider favouritism".into(),
        reading: format!("Prevalence (favouritism > 0): {}.", prevalence.join("; ")),
        chart: Chart::Line(LineChart {
            title: "Distribution of per-decider favouritism".into(),
            x_label: "favouritism of one decider (points per target)".into(),
            y_label: "share of deciders in bin (%)".into(),
            legend_title: "labels · deciders".into(),
            series,
            y_limits: None,
            reference_y: None,
            baselines: false,
            paper: None,
        }),
    })
}

/// Extreme allocations (nothing to any out-group target) by minority size.
fn extreme_allocations_by_minority_size(context: &Context) -> FigureResult {
    const NAME: &str = "extreme_allocations_by_minority_size";
    const PAPER: &str = "minimal-group paper, extreme allocations by m";
    let (categories, series) = bars_by_m(
        context,
        &[
            (Labels::Visible, DeciderSet::Minority),
            (Labels::Visible, DeciderSet::Majority),
            (Labels::Hidden, DeciderSet::All),
        ],
        |d| f64::from(u8::from(d.extreme)),
        100.0,
    );
    if series.is_empty() {
        return Err(absent(NAME, PAPER, "the run has no deciders"));
    }
    let reading = format!(
        "Share of deciders giving the out-group nothing: {}.",
        series
            .iter()
            .map(|s| format!(
                "{} {}",
                s.label,
                s.bars
                    .iter()
                    .zip(&categories)
                    .filter_map(|(b, c)| b.as_ref().map(|b| format!("{c}: {:.1}%", b.value)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Extreme allocations by minority size".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Extreme allocations (zero points to every out-group target)".into(),
            x_label: context.minority_axis(),
            y_label: "deciders with extreme allocations (%)".into(),
            legend_title: "condition · labels · deciders".into(),
            categories,
            series,
            paper: None,
        }),
    })
}

/// The reasoning control: favouritism with thinking on and off, by decider group.
fn favouritism_by_reasoning_mode(context: &Context, tables: &MinimalGroupTables) -> FigureResult {
    const NAME: &str = "favouritism_by_reasoning_mode";
    const PAPER: &str = "minimal-group paper, reasoning on/off interaction";
    if !context.several_reasoning {
        return Err(absent(NAME, PAPER, "the run has one reasoning mode (the control needs thinking on and off)"));
    }
    let sets = [DeciderSet::All, DeciderSet::Minority, DeciderSet::Majority];
    let series: Vec<BarSeries> = context
        .conditions()
        .into_iter()
        .map(|condition| BarSeries {
            label: condition.clone(),
            bars: sets
                .iter()
                .map(|&set| {
                    let chosen = context.main().filter(|d| {
                        d.labels == Labels::Visible && set.contains(d) && condition_label(d, true) == condition
                    });
                    seed_level(chosen, |d| d.favouritism).map(|(value, interval)| Bar { value, interval, note: None })
                })
                .collect(),
        })
        .filter(|s| s.bars.iter().any(Option::is_some))
        .collect();
    let interaction: Vec<String> = tables
        .gee_terms()
        .into_iter()
        .filter(|g| g.labels == "visible" && g.term == "same_group:reasoning" && g.analysis == "reasoning_control")
        .filter(|g| g.is_main())
        .map(|g| {
            let (coef, se, clusters) = (g.coef, g.se_robust, g.n_clusters);
            // The headline's test: the robust-SE t on societies − 1 df (a normal p on few
            // clusters would claim more than the societies give).
            let p = if clusters >= 2 {
                herd_analysis::summary::t_two_sided_p(coef / se, (clusters - 1) as f64)
            } else {
                f64::NAN
            };
            format!(
                "same_group × reasoning = {} (robust SE {}, t({}) {}, {clusters} societies)",
                num(coef),
                num(se),
                clusters.saturating_sub(1),
                p_is(p)
            )
        })
        .collect();
    let reading = if interaction.is_empty() {
        "No pooled reasoning GEE in the analysis (it needs reasoning modes `on` and `off`).".to_owned()
    } else {
        format!("GEE, visible labels{}: {}.", main_selection(context), interaction.join("; "))
    };
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Favouritism with thinking on and off".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Favouritism with thinking on and off (labels visible)".into(),
            x_label: "deciders".into(),
            y_label: FAVOURITISM.into(),
            legend_title: "model · reasoning (95% over seeds)".into(),
            categories: sets.iter().map(|s| s.name().to_owned()).collect(),
            series,
            paper: None,
        }),
    })
}

/// Robustness: favouritism per instrument (paper wording vs paraphrase) and swap pass.
fn favouritism_across_swap_pass_and_paraphrase(context: &Context, tables: &MinimalGroupTables) -> FigureResult {
    const NAME: &str = "favouritism_across_swap_pass_and_paraphrase";
    const PAPER: &str = "minimal-group paper, swap-pass and paraphrase robustness";
    let variant = |d: &Decider| {
        let mut parts = vec![condition_label(d, context.several_reasoning)];
        parts.extend(d.design.0[INSTRUMENT].clone());
        parts.extend(d.design.0[SWAP_PASS].clone());
        parts.join(" · ")
    };
    let variants: BTreeSet<String> =
        context.deciders.iter().filter(|d| d.labels == Labels::Visible).map(variant).collect();
    let robust_variants = context.instruments.len() > 1 || context.passes.len() > 1;
    if !robust_variants || variants.len() < 2 {
        return Err(absent(NAME, PAPER, "the run has one instrument and no swap pass"));
    }
    let categories: Vec<String> = context.minority_sizes.iter().map(|m| format!("m = {m}")).collect();
    let series = variants
        .iter()
        .map(|v| BarSeries {
            label: v.clone(),
            bars: context
                .minority_sizes
                .iter()
                .map(|&m| {
                    let chosen =
                        context.deciders.iter().filter(|d| d.labels == Labels::Visible && d.m == m && &variant(d) == v);
                    seed_level(chosen, |d| d.favouritism).map(|(value, interval)| Bar { value, interval, note: None })
                })
                .collect(),
        })
        .collect();
    let swaps: Vec<String> = tables
        .robustness_checks()
        .iter()
        .filter(|c| c.labels == "visible" && c.check == "swap_pass_difference" && c.fills == "included")
        .map(|c| format!("{}: {} ({})", robustness_cell(c), signed(c.estimate), p_is(c.p)))
        .collect();
    let mut reading = vec![if swaps.is_empty() {
        format!("Favouritism per instrument and pass, visible labels ({} variants).", variants.len())
    } else {
        format!("Swap-pass difference (swapped − original), visible labels: {}.", swaps.join("; "))
    }];
    reading.extend(paraphrase_counts(context, tables));
    reading.extend(token_receipt_reading(tables));
    reading.extend(position_balance_reading(tables));
    let reading = reading.join(" ");
    Ok(Figure {
        name: NAME,
        paper_figure: PAPER,
        title: "Robustness: swap pass and paraphrase".into(),
        reading,
        chart: Chart::Bar(BarChart {
            title: "Favouritism across instruments and swap passes (labels visible)".into(),
            x_label: context.minority_axis(),
            y_label: FAVOURITISM.into(),
            legend_title: "condition · instrument · pass".into(),
            categories,
            series,
            paper: None,
        }),
    })
}

/// The paper's paraphrase check (S5.7: "positive favouritism in 22 of 24 visible cells and … the GEE
/// coefficient positive in every model×size cell but one"), for each instrument beside the original
/// (`base`, else the first by name). A favouritism cell is a model × m × decider block (minority,
/// majority) with its seed-level mean above zero: the paper's 24 visible cells are 4 models × 3
/// sizes × 2 blocks, as in its Benjamini–Hochberg count; a GEE cell is a model × m fit of
/// `points ~ same_group`. Both count main rows (both passes pooled) of visible labels in each
/// model's default reasoning mode, the paper's cells.
fn paraphrase_counts(context: &Context, tables: &MinimalGroupTables) -> Option<String> {
    if context.instruments.len() < 2 {
        return None;
    }
    let original = if context.instruments.contains("base") { "base" } else { context.instruments.first()?.as_str() };
    let seed = tables.seed_test_rows();
    let gee = tables.gee_terms();
    let default_mode = |t: &SeedTest| t.default_reasoning.is_none_or(|d| d == 1);
    // (model, reasoning) of the default modes, to pick the matching GEE rows (which lack the flag).
    let defaults: BTreeSet<(Option<&str>, Option<&str>)> =
        seed.iter().filter(|t| default_mode(t)).map(|t| (t.model.as_deref(), t.reasoning.as_deref())).collect();
    let count = |instrument: &str| {
        let cells: Vec<&SeedTest> = ["minority", "majority"]
            .iter()
            .flat_map(|&deciders| {
                seed.iter().filter(move |t| {
                    t.labels == "visible"
                        && t.deciders == deciders
                        && t.measure == "favouritism"
                        && t.instrument.as_deref() == Some(instrument)
                })
            })
            .filter(|t| t.is_main() && default_mode(t))
            .collect();
        let fits: Vec<&GeeTerm> = gee
            .iter()
            .filter(|g| {
                g.labels == "visible"
                    && g.analysis == "cell"
                    && g.formula == "points ~ same_group"
                    && g.term == "same_group"
                    && g.instrument.as_deref() == Some(instrument)
            })
            .filter(|g| g.is_main() && defaults.contains(&(g.model.as_deref(), g.reasoning.as_deref())))
            .collect();
        let positive =
            |values: Vec<f64>| format!("{} of {}", values.iter().filter(|&&v| v > 0.0).count(), values.len());
        (positive(cells.iter().map(|t| t.mean).collect()), positive(fits.iter().map(|g| g.coef).collect()))
    };
    let (base_cells, base_fits) = count(original);
    let sentences: Vec<String> = context
        .instruments
        .iter()
        .filter(|i| i.as_str() != original)
        .map(|instrument| {
            let (cells, fits) = count(instrument);
            format!(
                "Instrument {instrument}: positive favouritism in {cells} visible cells (model × m × decider group; {original}: \
                 {base_cells}) and a positive GEE same_group coefficient in {fits} model × m cells ({original}: {base_fits})."
            )
        })
        .collect();
    Some(sentences.join(" "))
}

/// A robustness row's cell: model, reasoning and instrument where present, labels and m.
fn robustness_cell(c: &RobustnessCheck) -> String {
    let mut parts: Vec<String> = c.model.iter().cloned().collect();
    parts.extend(c.reasoning.as_ref().map(|v| format!("thinking {v}")));
    parts.extend(c.instrument.iter().cloned());
    parts.push(c.labels.clone());
    parts.push(c.m.map_or("m = ?".into(), |m| format!("m = {m}")));
    parts.join(" · ")
}

/// Main robustness rows of `check` with uniform fills included and a defined estimate.
fn robustness_rows<'a>(checks: &'a [RobustnessCheck], check: &str) -> Vec<&'a RobustnessCheck> {
    checks
        .iter()
        .filter(|c| c.check == check && c.fills == "included" && c.is_main() && c.estimate.is_finite())
        .collect()
}

/// The paper's nonce-label check ("token-receipt standard deviations were at most 0.24
/// points/target"): the largest SD across group names of the mean points a target receives.
fn token_receipt_reading(tables: &MinimalGroupTables) -> Option<String> {
    let checks = tables.robustness_checks();
    let rows = robustness_rows(&checks, "token_receipt_sd");
    let top = *rows.iter().max_by(|a, b| a.estimate.total_cmp(&b.estimate))?;
    Some(format!(
        "Token receipt (mean points per target by group name, visible labels): SD across names at most {} points/target over {} cells (largest: {}, {} names).",
        num(top.estimate),
        rows.len(),
        robustness_cell(top),
        top.n.map_or("n/a".into(), |n| format!("{n}"))
    ))
}

/// The paper's roster-position check ("In- and out-group targets had balanced presented
/// positions"): the largest in − out difference of mean presented position, with its cell's means.
fn position_balance_reading(tables: &MinimalGroupTables) -> Option<String> {
    let checks = tables.robustness_checks();
    let rows = robustness_rows(&checks, "position_balance");
    let top = *rows.iter().max_by(|a, b| a.estimate.abs().total_cmp(&b.estimate.abs()))?;
    let same_cell = |c: &RobustnessCheck| {
        (&c.model, &c.reasoning, &c.instrument, &c.swap_pass, &c.passes, &c.labels, &c.fills, c.m)
            == (
                &top.model,
                &top.reasoning,
                &top.instrument,
                &top.swap_pass,
                &top.passes,
                &top.labels,
                &top.fills,
                top.m,
            )
    };
    let mean_of = |check: &str| checks.iter().find(|c| c.check == check && same_cell(c)).map(|c| c.estimate);
    Some(format!(
        "Presented positions: in- minus out-group mean position within ±{} over {} cells (largest: {}, in-group {} vs out-group {}, Wilcoxon over seeds {}).",
        num(top.estimate.abs()),
        rows.len(),
        robustness_cell(top),
        mean_of("position_in_group").map_or("n/a".into(), num),
        mean_of("position_out_group").map_or("n/a".into(), num),
        p_is(top.p)
    ))
}
