//! Every figure rendered from a small stored result set: a PNG of the stated size with real content,
//! an SVG that parses and holds the chart's elements, and both change when the data change.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Variant, stored_results};
use herd_analysis::PWrong;
use herd_analysis::load_results;
use herd_report::{FIGURE_HEIGHT, FIGURE_WIDTH, Figure, conformity_figures, minimal_group_figures};

/// Every figure of both studies, rendered, by name (conformity read with p_wrong_full).
fn rendered(variant: Variant) -> BTreeMap<&'static str, (Figure, Vec<u8>, String)> {
    rendered_with(variant, PWrong::Full)
}

fn rendered_with(variant: Variant, measure: PWrong) -> BTreeMap<&'static str, (Figure, Vec<u8>, String)> {
    let dir = tempfile::tempdir().unwrap();
    let results = load_results(&stored_results(dir.path(), variant), &mut |_| {}).unwrap();
    let c = results.conformity.as_ref().expect("the fixture has a conformity run");
    let m = results.minimal_group.as_ref().expect("the fixture has a minimal-group run");
    let mut out = BTreeMap::new();
    for outcome in
        conformity_figures(&c.trials, &c.tables, measure).into_iter().chain(minimal_group_figures(&m.dyads, &m.tables))
    {
        let figure = outcome.unwrap_or_else(|a| panic!("{} is absent: {}", a.name, a.reason));
        let (png, svg) = figure.render().unwrap();
        out.insert(figure.name, (figure, png, svg));
    }
    out
}

const EXPECTED: [&str; 19] = [
    "p_wrong_by_group_size_per_model_color",
    "p_wrong_by_group_size_per_model",
    "p_wrong_by_group_size_per_task",
    "p_wrong_by_unanimity",
    "auc_by_difficulty",
    "conformity_by_difficulty_and_performance",
    "public_minus_private_auc_per_model",
    "p_wrong_by_source_strength",
    "p_wrong_same_vs_different_group",
    "p_wrong_near_vs_far",
    "auc_by_source_strength_per_task",
    "proximity_auc_differences",
    "favouritism_by_minority_size",
    "favouritism_visible_vs_hidden",
    "excess_share_by_minority_size",
    "favouritism_distribution_per_decider",
    "extreme_allocations_by_minority_size",
    "favouritism_by_reasoning_mode",
    "favouritism_across_swap_pass_and_paraphrase",
];

#[test]
fn every_figure_renders_changes_with_the_data_and_reads_its_numbers() {
    let planted = rendered(Variant::Planted);
    let shifted = rendered(Variant::Shifted);
    let names: BTreeSet<&str> = planted.keys().copied().collect();
    assert_eq!(names, EXPECTED.into_iter().collect::<BTreeSet<_>>());

    for (name, (figure, png, svg)) in &planted {
        // PNG: decodes, the stated size, and more than a blank canvas (axes, text, data colours).
        let image =
            image::load_from_memory(png).unwrap_or_else(|e| panic!("{name}: PNG does not decode: {e}")).to_rgb8();
        assert_eq!((image.width(), image.height()), (FIGURE_WIDTH, FIGURE_HEIGHT), "{name}");
        let colours: BTreeSet<[u8; 3]> = image.pixels().map(|p| p.0).collect();
        assert!(colours.len() > 20, "{name}: only {} colours", colours.len());
        let inked = image.pixels().filter(|p| p.0 != [255, 255, 255]).count();
        assert!(inked > 5_000, "{name}: only {inked} non-white pixels");

        // SVG: well-formed XML of the stated size, with the title and drawn shapes.
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{name}: SVG does not parse: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg", "{name}");
        assert_eq!(root.attribute("width"), Some(FIGURE_WIDTH.to_string().as_str()), "{name}");
        assert_eq!(root.attribute("height"), Some(FIGURE_HEIGHT.to_string().as_str()), "{name}");
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_owned()))
            .collect();
        assert!(texts.iter().any(|t| t == &figure_caption(figure)), "{name}: no title among {texts:?}");
        let shapes = doc
            .descendants()
            .filter(|n| ["polyline", "rect", "circle", "polygon", "path", "line"].contains(&n.tag_name().name()))
            .count();
        assert!(shapes > 10, "{name}: {shapes} shapes");

        // The data drive the picture and its reading.
        let (other, other_png, other_svg) = &shifted[name];
        let other_image = image::load_from_memory(other_png).unwrap().to_rgb8();
        let differing = image.pixels().zip(other_image.pixels()).filter(|(a, b)| a != b).count();
        assert!(differing > 100, "{name}: only {differing} pixels change when the data change");
        assert_ne!(svg, other_svg, "{name}: SVG unchanged");
        assert_ne!(figure.reading, other.reading, "{name}: reading unchanged");
        assert!(
            figure.reading.chars().any(|c| c.is_ascii_digit()),
            "{name}: reading without numbers: {}",
            figure.reading
        );
    }
}

/// The caption drawn at the top of the chart.
fn figure_caption(figure: &Figure) -> String {
    match &figure.chart {
        herd_report::Chart::Line(c) => c.title.clone(),
        herd_report::Chart::Bar(c) => c.title.clone(),
        herd_report::Chart::Heat(c) => c.title.clone(),
    }
}

#[test]
fn conformity_figures_read_with_either_measure() {
    let full = rendered_with(Variant::Planted, PWrong::Full);
    let ab = rendered_with(Variant::Planted, PWrong::Ab);
    for name in EXPECTED.iter().filter(|n| full[*n].0.paper_figure.starts_with("conformity")) {
        let (a, b) = (&full[name].0, &ab[name].0);
        assert_ne!(a.chart, b.chart, "{name}: the same chart under both measures");
        // The p_wrong(N) curves name their measure on the y axis (AUC charts say AUC).
        if let (herd_report::Chart::Line(a), herd_report::Chart::Line(b)) = (&a.chart, &b.chart)
            && a.y_label.starts_with("p(")
        {
            assert!(
                a.y_label.contains("whole vocabulary") && b.y_label.contains("p(A) + p(B)"),
                "{name}: {} / {}",
                a.y_label,
                b.y_label
            );
        }
    }
    // The colour-only panel (the paper's fig. 2a) holds the colour task alone, and the reading gives
    // where each curve saturates.
    let color = &full["p_wrong_by_group_size_per_model_color"].0;
    assert!(color.reading.contains("colour task") && color.reading.contains("Saturation"), "{}", color.reading);
    let herd_report::Chart::Line(pooled) = &full["p_wrong_by_group_size_per_model"].0.chart else {
        panic!("a line chart")
    };
    let herd_report::Chart::Line(only) = &color.chart else { panic!("a line chart") };
    assert_ne!(pooled.series, only.series);
    // Fig. 4b carries the neutral baseline; fig. 4d leads with the averaged social contrast and its z.
    let herd_report::Chart::Line(social) = &full["p_wrong_same_vs_different_group"].0.chart else {
        panic!("a line chart")
    };
    assert!(
        social.series.iter().any(|s| s.label.contains("neutral")),
        "{:?}",
        social.series.iter().map(|s| &s.label).collect::<Vec<_>>()
    );
    let herd_report::Chart::Bar(proximity) = &full["proximity_auc_differences"].0.chart else { panic!("a bar chart") };
    assert_eq!(proximity.categories[0], "social_mean");
    assert!(
        proximity
            .series
            .iter()
            .all(|s| s.bars[0].as_ref().is_some_and(|b| b.note.as_deref().is_some_and(|n| n.starts_with("t(3) = "))))
    );
}

#[test]
fn few_units_get_t_tests_and_named_t_bands_and_fig_4c_keeps_the_papers_order() {
    let full = rendered(Variant::Planted);
    // Four seeds per contrast: no reading prints a normal z or its p; each names its t-test and df.
    for (name, (figure, _, _)) in &full {
        assert!(!figure.reading.contains("z = "), "{name}: {}", figure.reading);
    }
    let near_far = &full["p_wrong_near_vs_far"].0.reading;
    assert!(near_far.contains("(t(3) = "), "{near_far}");
    // Curve bands say what they are.
    for name in ["p_wrong_by_group_size_per_model", "p_wrong_by_unanimity", "p_wrong_same_vs_different_group"] {
        let herd_report::Chart::Line(chart) = &full[name].0.chart else { panic!("a line chart") };
        assert!(chart.legend_title.contains("band: 95% t-interval over "), "{name}: {}", chart.legend_title);
    }
    // Unanimity levels in words, in the experiment's order, not as level ids.
    let herd_report::Chart::Line(unanimity) = &full["p_wrong_by_unanimity"].0.chart else { panic!("a line chart") };
    let labels: Vec<&str> = unanimity.series.iter().map(|s| s.label.as_str()).collect();
    let model_a = ["model-a · 100% wrong", "model-a · 80% wrong", "model-a · 50% wrong"];
    assert_eq!(labels[..3], model_a, "{labels:?}");
    assert!(
        full["p_wrong_by_unanimity"].0.reading.contains("100% wrong "),
        "{}",
        full["p_wrong_by_unanimity"].0.reading
    );
    // Read two-way, every p_wrong(N) chart draws chance at 0.5 and its axis says so; read whole-vocabulary,
    // the reference line is 0.
    let two_way = rendered_with(Variant::Planted, PWrong::Ab);
    for name in ["p_wrong_by_group_size_per_model", "p_wrong_by_unanimity", "p_wrong_same_vs_different_group"] {
        let herd_report::Chart::Line(chart) = &two_way[name].0.chart else { panic!("a line chart") };
        assert_eq!(chart.reference_y, Some(0.5), "{name}");
        assert!(chart.y_label.ends_with("black line: chance (0.5)"), "{name}: {}", chart.y_label);
        let herd_report::Chart::Line(chart) = &full[name].0.chart else { panic!("a line chart") };
        assert_eq!(chart.reference_y, Some(0.0), "{name}");
    }
    // A band over four trials is a t-interval: ±t₀.₉₇₅(3)·SE = ±3.18·SE, not ±1.96·SE.
    let herd_report::Chart::Line(per_model) = &full["p_wrong_by_group_size_per_model_color"].0.chart else {
        panic!("a line chart")
    };
    let dir = tempfile::tempdir().unwrap();
    let results = load_results(&stored_results(dir.path(), Variant::Planted), &mut |_| {}).unwrap();
    let c = results.conformity.as_ref().unwrap();
    let curves = &c.tables.curves;
    let point = &per_model.series[0].points.last().unwrap();
    let row = (0..curves.n_rows())
        .find(|&r| {
            curves.text("family", r) == Some("group_size")
                && curves.text("task", r) == Some("color")
                && curves.text("model", r) == Some(per_model.series[0].label.as_str())
                && curves.text("measure", r) == Some("p_wrong_full")
                && curves.number("n", r) == Some(point.x)
        })
        .unwrap();
    let (trials, se) = (curves.number("trials", row).unwrap(), curves.number("se", row).unwrap());
    let (lo, hi) = point.interval.unwrap();
    // scipy.stats.t.ppf(0.975, df) for the trial count at that N (df 3: 3.182446305).
    let t975 = [(3.0, 3.182_446_305), (7.0, 2.364_624_252), (11.0, 2.200_985_160)]
        .iter()
        .find(|(df, _)| *df == trials - 1.0)
        .map(|(_, q)| *q);
    if let Some(q) = t975 {
        assert!(((hi - lo) / 2.0 - q * se).abs() < 1e-6 * se.max(1e-12) + 1e-9, "{lo} {hi} {se} {trials}");
    } else {
        panic!("no tabulated t quantile for {trials} trials");
    }
    // Fig. 4c: the sources in the paper's order of strength, not sorted by their own AUC (the fixture's
    // chatbots sit above kids, and experts above judges).
    let herd_report::Chart::Bar(sources) = &full["auc_by_source_strength_per_task"].0.chart else {
        panic!("a bar chart")
    };
    assert_eq!(sources.categories, ["participants", "chatbots", "kids", "experts", "judges"]);
    // Each source's bar carries its interval over trial indices, around the bar's own AUC.
    for bar in sources.series.iter().flat_map(|s| s.bars.iter().flatten()) {
        let (lo, hi) = bar.interval.expect("a bar over several trial indices has its interval");
        assert!(lo < bar.value && bar.value < hi, "{lo} {} {hi}", bar.value);
    }
    assert!(sources.legend_title.contains("95% t-interval over trial indices"), "{}", sources.legend_title);
}

#[test]
fn axes_and_legends_say_what_the_design_and_the_drawing_have() {
    let full = rendered(Variant::Planted);
    // The fixture's societies have 20 agents: the m axis says so from the data, not from a constant.
    for name in ["favouritism_by_minority_size", "excess_share_by_minority_size"] {
        let herd_report::Chart::Line(chart) = &full[name].0.chart else { panic!("a line chart") };
        assert_eq!(chart.x_label, "minority size m (of 20 agents)", "{name}");
        // Four societies per point: an interval is drawn, and the legend names it.
        assert!(chart.series.iter().flat_map(|s| &s.points).all(|p| p.interval.is_some()), "{name}");
        assert!(chart.legend_title.ends_with("(95% t-interval over seeds)"), "{name}: {}", chart.legend_title);
    }
    // Conformity curves are fitted to their data within a probability's bounds, zero drawn.
    let herd_report::Chart::Line(curve) = &full["p_wrong_by_group_size_per_model"].0.chart else {
        panic!("a line chart")
    };
    assert_eq!((curve.y_limits, curve.reference_y), (Some((0.0, 1.0)), Some(0.0)));
    // Each model's curve is read against its own N = 0 (no confederates), drawn on and named.
    assert!(
        curve.baselines && curve.legend_title.contains("dotted: the curve's value at N = 0"),
        "{}",
        curve.legend_title
    );
    // The papers' values are drawn: the human plateau the conformity paper cites, the minimal-group
    // paper's per-model favouritism and its hidden-label floor, each named in the figure's reading.
    let band = |name: &str| match &full[name].0.chart {
        herd_report::Chart::Line(c) => c.paper.clone(),
        herd_report::Chart::Bar(c) => c.paper.clone(),
        herd_report::Chart::Heat(_) => None,
    };
    let bands = ["p_wrong_by_group_size_per_model", "favouritism_by_minority_size", "favouritism_visible_vs_hidden"]
        .map(|name| band(name).map(|b| (b.low, b.high)));
    assert_eq!(bands, [Some((0.30, 0.40)), Some((0.84, 4.06)), Some((-0.03, 0.03))]);
    for name in ["p_wrong_by_group_size_per_model", "favouritism_by_minority_size", "favouritism_visible_vs_hidden"] {
        assert!(full[name].0.reading.contains("grey band"), "{name}: {}", full[name].0.reading);
        // The label is the legend's last entry, wrapped there: its first words open a line of the SVG.
        let label = band(name).unwrap().label;
        let opening = label.split(' ').take(2).collect::<Vec<_>>().join(" ");
        assert!(full[name].2.contains(&opening), "{name}: the SVG draws the band's label {label:?}");
    }
}

#[test]
fn planted_effects_show_in_the_figure_data() {
    let planted = rendered(Variant::Planted);
    // Conformity rises with N for each model.
    let herd_report::Chart::Line(per_model) = &planted["p_wrong_by_group_size_per_model"].0.chart else {
        panic!("a line chart")
    };
    assert_eq!(per_model.series.len(), 2);
    for s in &per_model.series {
        let first = s.points.first().unwrap();
        let last = s.points.last().unwrap();
        assert_eq!((first.x, last.x), (0.0, 10.0));
        assert!(last.y > first.y + 0.4, "{}: {} → {}", s.label, first.y, last.y);
        let (lo, hi) = last.interval.expect("a band from four trials");
        assert!(lo < last.y && last.y < hi);
    }
    // Visible-label favouritism is positive, with minority deciders above majority deciders.
    let herd_report::Chart::Line(favouritism) = &planted["favouritism_by_minority_size"].0.chart else {
        panic!("a line chart")
    };
    let at = |label: &str| favouritism.series.iter().find(|s| s.label.contains(label)).unwrap().points[0].y;
    assert!(at("thinking on · minority") > at("thinking on · majority"));
    assert!(at("thinking on · majority") > 0.0);
    // The hidden-label floor sits near zero.
    let herd_report::Chart::Bar(floor) = &planted["favouritism_visible_vs_hidden"].0.chart else {
        panic!("a bar chart")
    };
    for s in floor.series.iter().filter(|s| s.label.contains("hidden")) {
        for bar in s.bars.iter().flatten() {
            assert!(bar.value.abs() < 0.5, "{}: {}", s.label, bar.value);
        }
    }
}
