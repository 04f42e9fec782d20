//! Writing the report: `OUT/report.html` (one self-contained page, figures beside it in
//! `OUT/figures/` by relative links), `OUT/report.md` (its Markdown twin), the figures as PNG and
//! SVG, and `OUT/deviations.md`, a copy of herd's list of where it differs from the papers
//! (`docs/deviations.md`), which both pages link. All text from data is escaped: HTML by
//! minijinja's auto-escaping, Markdown table cells by [`markdown_cell`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use herd_analysis::ResultTable;

use crate::chart::{FIGURE_HEIGHT, FIGURE_WIDTH};
use crate::conformity::conformity_figures;
use crate::error::ReportError;
use crate::figure::{AbsentFigure, Figure, FigureResult};
use crate::minimal_group::minimal_group_figures;
use crate::scorecard::{StudyScorecard, samples_link, scorecard, verdict_class};
use herd_analysis::claims::{HeadlineComparison, compare_headlines};
use herd_analysis::results::{Provenance, Results, RunFolder};

mod runs;
mod tables;

use runs::{RunView, compute_differences, run_view};
use tables::{TableView, table_view};

static PAGE_TEMPLATE: &str = include_str!("../templates/report.html");
static TABLE_TEMPLATE: &str = include_str!("../templates/table.html");
static FIGURE_TEMPLATE: &str = include_str!("../templates/figure.html");
/// Bundled so that a report folder copied elsewhere still holds what its verdicts refer to.
static DEVIATIONS: &str = include_str!("../../../docs/deviations.md");

/// What [`write_report`] wrote.
#[derive(Debug, Clone)]
pub struct WrittenReport {
    pub html: PathBuf,
    pub markdown: PathBuf,
    /// `deviations.md`: where herd differs from the papers, linked from both pages.
    pub deviations: PathBuf,
    /// PNG and SVG of every figure drawn.
    pub figures: Vec<PathBuf>,
    /// Figures the data could not support, with the reason.
    pub absent: Vec<AbsentFigure>,
    /// The claims as a terminal shows them ([`crate::claims_lines`]).
    pub claims: Vec<String>,
}

#[derive(Serialize)]
struct FigureView {
    /// File stem.
    name: String,
    title: String,
    paper_figure: &'static str,
    reading: String,
    /// The same figure read with the other conformity measure, folded under this one.
    twin: Option<Box<FigureView>>,
}

/// The two key effects, shown right after the scorecard: conformity's rise with N per model and
/// favouritism with labels visible and hidden.
const KEY_FIGURES: [&str; 2] = ["p_wrong_by_group_size_per_model", "favouritism_visible_vs_hidden"];

#[derive(Serialize)]
struct AbsentView {
    name: &'static str,
    paper_figure: &'static str,
    reason: String,
}

#[derive(Serialize)]
struct StudyView {
    id: &'static str,
    title: &'static str,
    /// A line above the figures (e.g. which measure they lead with); may be empty.
    note: String,
    quality: TableView,
    figures: Vec<FigureView>,
    absent_figures: Vec<AbsentView>,
    tables: Vec<TableView>,
}

#[derive(Serialize)]
struct HeadlineView {
    /// The row's anchor is `headline-{id}`, which the scorecard links.
    id: String,
    study: String,
    quantity: String,
    paper: String,
    source: String,
    this_run: String,
    verdict: String,
    verdict_text: String,
    /// The test and n the verdict rests on, and why.
    basis: String,
    rule: String,
}

/// What a report read from plain tables cannot say.
const PLAIN_NOTE: &str = "Without a run manifest this report cannot say which model file (and its SHA-256), device, \
compute path, herd version or experiment parameters produced these trials, nor whether every unit of the design ran; \
conformity figures lead with p_wrong_full. Report on the run folders themselves to have them.";

/// What the three verdicts mean, above the headline table of both pages.
const VERDICTS_NOTE: &str = "Each headline result of the two papers beside this run's number, with the test and the n it \
rests on. Replicates: the test reaches p < 0.05 in the paper's direction and its interval excludes zero. Does not \
replicate: significant the other way, or the interval stops short of the paper's smallest reported effect. \
Inconclusive: a statistic is undefined, the test cannot reach p < 0.05 with this many units (a signed-rank test on n \
seeds can give no p below 2/2^n, so fewer than 6 seeds decide nothing), or the interval holds both zero and the \
paper's effect. Not the paper's population: the conformity rows rest on a model at or near chance at N = 0, while the \
paper's claims are about images a model solves alone (its baseline accuracy is given, and the crowd-following reading \
beside it).";

#[derive(Serialize)]
struct Page {
    title: String,
    verdicts_note: &'static str,
    source: String,
    herd_version: &'static str,
    width: u32,
    height: u32,
    absent_studies: Vec<&'static str>,
    empty_runs: Vec<String>,
    /// Plain tables read without a manifest.
    plain_tables: Vec<String>,
    plain_note: &'static str,
    /// One line per run whose numbers were computed another way than the first run's.
    compute_differences: Vec<String>,
    /// Per study, how many claims got each verdict, in one line above the scorecard.
    summary: String,
    /// The opening screen: per study, one line per claim tested and one for those not.
    scorecard: Vec<StudyScorecard>,
    /// Per study run on several models, each claim's verdict per model.
    matrices: Vec<crate::matrix::StudyMatrix>,
    /// Data-quality warnings, one sentence each, under the scorecard.
    banners: Vec<String>,
    /// One line per run: units, duration, tokens, machine, herd version.
    facts: Vec<String>,
    /// [`KEY_FIGURES`], taken out of their studies' lists.
    key_figures: Vec<FigureView>,
    headlines: Vec<HeadlineView>,
    runs: Vec<RunView>,
    studies: Vec<StudyView>,
}

/// Draws, writes and describes a study's figures.
fn write_figures(
    outcomes: Vec<FigureResult>,
    dir: &Path,
    written: &mut Vec<PathBuf>,
    absent: &mut Vec<AbsentFigure>,
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<FigureView>, Vec<AbsentView>), ReportError> {
    let mut figures = Vec::new();
    let mut absent_views = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(figure) => {
                progress(&format!("figure {}", figure.name));
                write_figure(&figure, figure.name, dir, written)?;
                figures.push(FigureView {
                    name: figure.name.to_owned(),
                    title: figure.title,
                    paper_figure: figure.paper_figure,
                    reading: figure.reading,
                    twin: None,
                });
            }
            Err(a) => {
                absent_views.push(AbsentView { name: a.name, paper_figure: a.paper_figure, reason: a.reason.clone() });
                absent.push(a);
            }
        }
    }
    Ok((figures, absent_views))
}

/// Each conformity figure read with the lead measure, with the same figure read with the other
/// measure (file stem `NAME.p_wrong_ab` or `NAME.p_wrong_full`) as its twin, where the trials define it.
fn write_conformity_figures(
    c: &herd_analysis::results::ConformityResults,
    dir: &Path,
    written: &mut Vec<PathBuf>,
    absent: &mut Vec<AbsentFigure>,
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<FigureView>, Vec<AbsentView>), ReportError> {
    let (lead, other) = (c.measure, c.measure.other());
    let (lead_figures, absent_views) =
        write_figures(conformity_figures(&c.trials, &c.tables, lead), dir, written, absent, progress)?;
    let mut others: Vec<Figure> = conformity_figures(&c.trials, &c.tables, other).into_iter().flatten().collect();
    let mut figures = Vec::new();
    for mut view in lead_figures {
        let twin = others.iter().position(|f| f.name == view.name).map(|i| others.remove(i));
        if let Some(figure) = twin {
            let stem = format!("{}.{}", figure.name, other.column());
            progress(&format!("figure {stem}"));
            write_figure(&figure, &stem, dir, written)?;
            view.twin = Some(Box::new(FigureView {
                name: stem,
                title: format!("{} — read with {}", figure.title, other.column()),
                paper_figure: figure.paper_figure,
                reading: figure.reading,
                twin: None,
            }));
        }
        figures.push(view);
    }
    Ok((figures, absent_views))
}

/// Where a study's analysis came from and how it was computed, in a sentence or two.
fn analysis_note(analysis: &Provenance) -> String {
    let mut how = Vec::new();
    if let Some((resamples, seed)) = analysis.settings.bootstrap {
        how.push(format!("{resamples} seed-bootstrap resamples (seed {seed})"));
    }
    if analysis.settings.pool.is_some() {
        how.push(if analysis.settings.gee_bootstrap {
            "the GEE fits bootstrapped".to_owned()
        } else {
            "the GEE fits not bootstrapped (`herd analyze minimal-group` adds it)".to_owned()
        });
    }
    let how = if how.is_empty() { String::new() } else { format!(", with {}", how.join(" and ")) };
    let mut text = match (&analysis.folder, analysis.read_back) {
        (Some(dir), true) => format!("The analysis tables were read from {}{how}.", dir.display()),
        (Some(dir), false) => {
            format!("The analysis tables were computed for this report{how} and kept in {}.", dir.display())
        }
        (None, _) => format!("The analysis tables were computed for this report{how}."),
    };
    if let Some(note) = &analysis.note {
        text = format!("{text} Note: {note}.");
    }
    text
}

fn write_figure(figure: &Figure, stem: &str, dir: &Path, written: &mut Vec<PathBuf>) -> Result<(), ReportError> {
    let (png, svg) = figure.render()?;
    let png_path = dir.join(format!("{stem}.png"));
    let svg_path = dir.join(format!("{stem}.svg"));
    write_atomic(&png_path, &png)?;
    write_atomic(&svg_path, svg.as_bytes())?;
    written.extend([png_path, svg_path]);
    Ok(())
}

/// Writes `out/report.html`, `out/report.md` and `out/figures/*.{png,svg}` from `results`;
/// `progress` hears each step.
pub fn write_report(
    results: &Results,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<WrittenReport, ReportError> {
    write_report_with(results, out, &ReportOptions::default(), progress)
}

/// What a report links to beyond itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportOptions {
    /// A samples page (herd-samples' `samples.html`) is beside the report: each scorecard row links to
    /// the samples its claim rests on.
    pub samples_page: bool,
}

/// [`write_report`], with `options` saying what is beside it.
pub fn write_report_with(
    results: &Results,
    out: &Path,
    options: &ReportOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<WrittenReport, ReportError> {
    let figures_dir = out.join("figures");
    std::fs::create_dir_all(&figures_dir).map_err(|e| ReportError::io(&figures_dir, e))?;
    let mut written = Vec::new();
    let mut absent = Vec::new();
    let mut studies = Vec::new();
    let mut runs = Vec::new();
    let mut absent_studies = Vec::new();

    match &results.conformity {
        Some(c) => {
            runs.extend(c.runs.iter().map(|r| run_view("conformity", r)));
            let (figures, absent_figures) =
                write_conformity_figures(c, &figures_dir, &mut written, &mut absent, progress)?;
            let t = &c.tables;
            let mut note = format!(
                "Figures and headlines lead with {} (the experiment file's [analysis] measure; docs/deviations.md, \"Measure p_wrong\"); \
                 under each figure, the same figure read with {} is folded where the trials define it.",
                c.measure.column(),
                c.measure.other().column()
            );
            if let Some(why) = &c.measure_note {
                note = format!("{why} {note}");
            }
            note = format!("{note} {}", analysis_note(&c.analysis));
            studies.push(StudyView {
                id: "conformity",
                title: "Conformity (Asch paradigm)",
                note,
                quality: table_view(&c.quality, "Trials per model and task, mean probability mass on the two answers P(A)+P(B) (a validity check), share and count of trials left out of p_wrong because an answer's probability is only a bound (an openai server's top-k lacked the answer, or, for lower_bounded_excluded, one of its spellings), and the baseline filter's acceptance rate."),
                figures,
                absent_figures,
                tables: vec![
                    table_view(&t.auc, "AUC: area under the mean p_wrong(N) curve divided by the N range, per model × task × family × level."),
                    table_view(&t.deltas, "Condition contrasts of AUC per pairing unit (paraphrase or trial index): one-sample t test and z = mean/SE with its normal p (public − private one-tailed)."),
                    table_view(&t.difficulty_spearman, "Spearman ρ between difficulty level and AUC per model × task."),
                    table_view(&t.difficulty_ols, "OLS of min-max normalised image AUC on normalised difficulty index and performance (logit of the correct answer at N = 0), per task, pooled over models."),
                ],
            });
        }
        None => absent_studies.push("conformity"),
    }
    match &results.minimal_group {
        Some(m) => {
            runs.extend(m.runs.iter().map(|r| run_view("minimal groups", r)));
            let (figures, absent_figures) = write_figures(
                minimal_group_figures(&m.dyads, &m.tables),
                &figures_dir,
                &mut written,
                &mut absent,
                progress,
            )?;
            let t = &m.tables;
            studies.push(StudyView {
                id: "minimal-group",
                title: "Minimal groups (allocation)",
                note: analysis_note(&m.analysis),
                quality: table_view(&m.quality, "Deciders per model × reasoning × instrument: share parsed, share filled uniformly after a parse failure, share with QC flags (repairs, renormalisation), mean tokens generated."),
                figures,
                absent_figures,
                tables: vec![
                    table_view(&t.seed_tests, "Seed-level tests: one-sample Wilcoxon signed-rank over societies against zero, rank-biserial r, Benjamini–Hochberg q across the cells of one measure and decider set."),
                    table_view(&t.gee, "GEE (Gaussian, exchangeable, clustered by society, robust SEs) per cell and pooled with × visible and × reasoning."),
                    table_view(&t.bootstrap, "Seed-level cluster bootstrap of mean favouritism and of the minority − majority gap: SE and percentile interval."),
                    table_view(&t.robustness, "Robustness: prevalence, extreme allocations, position effect, position balance (mean presented position of in- and out-group targets), token receipt (mean points per target by group name and the SD across names) and swap-pass difference, with uniform fills included and excluded."),
                ],
            });
        }
        None => absent_studies.push("minimal groups"),
    }

    // The key effects lead the page, right after the scorecard, instead of in their studies' lists.
    let mut key_figures = Vec::new();
    for name in KEY_FIGURES {
        for study in &mut studies {
            if let Some(i) = study.figures.iter().position(|f| f.name == name) {
                key_figures.push(study.figures.remove(i));
            }
        }
    }
    // Each table the page shows, as herd analyze writes it (CSV and Parquet), for a folded table to link.
    herd_analysis::io::write_tables(&out.join("tables"), result_tables(results))?;

    progress("headline comparison");
    let comparisons = compare_headlines(results)?;
    let mut card = scorecard(&comparisons, &absent_ids(results));
    crate::explain::explain(&mut card, &comparisons, results);
    let compared_runs: Vec<&RunFolder> = results
        .conformity
        .iter()
        .flat_map(|c| &c.runs)
        .chain(results.minimal_group.iter().flat_map(|m| &m.runs))
        .collect();
    let page = Page {
        title: "herd report".into(),
        verdicts_note: VERDICTS_NOTE,
        source: results.source.display().to_string(),
        herd_version: env!("CARGO_PKG_VERSION"),
        width: FIGURE_WIDTH,
        height: FIGURE_HEIGHT,
        absent_studies,
        empty_runs: results.empty_runs.iter().map(|p| p.display().to_string()).collect(),
        plain_tables: results.plain_tables.iter().map(|p| p.display().to_string()).collect(),
        plain_note: PLAIN_NOTE,
        compute_differences: compute_differences(&compared_runs),
        summary: crate::explain::summary_line(&card),
        matrices: crate::matrix::matrices(
            &comparisons,
            &[("conformity", "Conformity"), ("minimal_group", "Minimal groups")],
        ),
        scorecard: scorecard_with_samples(card, options.samples_page),
        banners: crate::facts::banners(results),
        facts: crate::facts::run_facts(results),
        key_figures,
        headlines: comparisons.iter().map(headline_view).collect(),
        runs,
        studies,
    };

    let html_path = out.join("report.html");
    let html = render_html(&page)?;
    write_atomic(&html_path, html.as_bytes())?;
    let md_path = out.join("report.md");
    write_atomic(&md_path, render_markdown(&page).as_bytes())?;
    let deviations = out.join("deviations.md");
    write_atomic(&deviations, DEVIATIONS.as_bytes())?;
    let claims = crate::claims_lines(&comparisons);
    Ok(WrittenReport { html: html_path, markdown: md_path, deviations, figures: written, absent, claims })
}

/// `card` with each row's link into the samples page, when there is one.
fn scorecard_with_samples(mut card: Vec<StudyScorecard>, samples_page: bool) -> Vec<StudyScorecard> {
    if samples_page {
        for study in &mut card {
            for row in &mut study.rows {
                row.samples = Some(samples_link(&study.study, &row.id));
            }
        }
    }
    card
}

/// The studies not in `results` (`conformity`, `minimal_group`).
fn absent_ids(results: &Results) -> Vec<&'static str> {
    [("conformity", results.conformity.is_none()), ("minimal_group", results.minimal_group.is_none())]
        .into_iter()
        .filter_map(|(id, absent)| absent.then_some(id))
        .collect()
}

/// Every table the page shows, each written as CSV beside it.
fn result_tables(results: &Results) -> Vec<&ResultTable> {
    let mut tables = Vec::new();
    if let Some(c) = &results.conformity {
        let t = &c.tables;
        tables.extend([&c.quality, &t.auc, &t.deltas, &t.difficulty_spearman, &t.difficulty_ols]);
    }
    if let Some(m) = &results.minimal_group {
        let t = &m.tables;
        tables.extend([&m.quality, &t.seed_tests, &t.gee, &t.bootstrap, &t.robustness]);
    }
    tables
}

fn headline_view(c: &HeadlineComparison) -> HeadlineView {
    HeadlineView {
        id: c.headline.id.clone(),
        study: c.headline.study.replace('_', " "),
        quantity: c.headline.quantity.clone(),
        paper: c.headline.paper.clone(),
        source: c.headline.source.clone(),
        this_run: c.this_run.clone(),
        verdict: verdict_class(c.verdict),
        verdict_text: c.verdict_text(),
        basis: c.basis.clone(),
        rule: format!(
            "Replicates if {}. Does not replicate if {}.{}",
            c.headline.replicates_if,
            c.headline.does_not_replicate_if,
            herd_analysis::calibration::shipped_rates(&c.headline.id)
                .map_or(String::new(), |r| format!(" {}", r.sentence()))
        ),
    }
}

fn render_html(page: &Page) -> Result<String, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_template("report.html", PAGE_TEMPLATE).map_err(|e| ReportError::Template(e.to_string()))?;
    env.add_template("table.html", TABLE_TEMPLATE).map_err(|e| ReportError::Template(e.to_string()))?;
    env.add_template("figure.html", FIGURE_TEMPLATE).map_err(|e| ReportError::Template(e.to_string()))?;
    env.get_template("report.html").and_then(|t| t.render(page)).map_err(|e| ReportError::Template(format!("{e:#}")))
}

/// Writes `path` through a temporary `.<name>.tmp` beside it, then renames it over the old file: a
/// reader (a browser reloading the report) never sees half a page, and a kill leaves the previous one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ReportError::io(path, e)
    })
}

/// Text made safe for one Markdown table cell: backslashes, pipes and brackets escaped (no link or
/// image can be made of data: `[text](url)` stays text), line breaks flattened, and HTML
/// metacharacters written as entities so no tag from data is rendered.
pub fn markdown_cell(text: &str) -> String {
    let mut cell = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => cell.push_str("&amp;"),
            '<' => cell.push_str("&lt;"),
            '>' => cell.push_str("&gt;"),
            '\\' | '|' | '[' | ']' => {
                cell.push('\\');
                cell.push(c);
            }
            '\n' | '\r' => cell.push(' '),
            _ => cell.push(c),
        }
    }
    cell
}

fn markdown_table(md: &mut String, columns: &[String], rows: impl Iterator<Item = Vec<String>>) {
    markdown_table_of_cells(md, columns, rows.map(|row| row.iter().map(|c| markdown_cell(c)).collect()));
}

/// A table whose cells are Markdown already (each text escaped with [`markdown_cell`] by the caller,
/// around links of its own).
fn markdown_table_of_cells(md: &mut String, columns: &[String], rows: impl Iterator<Item = Vec<String>>) {
    let _ = writeln!(md, "| {} |", columns.iter().map(|c| markdown_cell(c)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(columns.len()));
    for row in rows {
        let _ = writeln!(md, "| {} |", row.join(" | "));
    }
    md.push('\n');
}

/// A result table; a folded one inside `<details>` (GitHub and most Markdown viewers fold it too).
fn markdown_result_table(md: &mut String, t: &TableView) {
    let name = markdown_cell(&t.name);
    if t.folded {
        let _ = writeln!(
            md,
            "<details><summary>{name} ({} rows × {} columns; every value in {})</summary>\n",
            t.rows.len(),
            t.columns.len(),
            t.csv
        );
    } else {
        let _ = writeln!(md, "#### {name}\n");
    }
    let _ = writeln!(md, "{} As CSV: [{}]({}).\n", markdown_cell(&t.caption), t.csv, t.csv);
    markdown_table(md, &t.columns, t.rows.iter().map(|r| r.iter().map(|c| c.text.clone()).collect()));
    if t.folded {
        let _ = writeln!(md, "</details>\n");
    }
}

/// A figure, its twin (the other measure) as a link under it.
fn markdown_figure(md: &mut String, f: &FigureView) {
    let _ = writeln!(
        md,
        "![{}](figures/{}.png)\n\n**{}** ({}; [SVG](figures/{}.svg)). {}\n",
        markdown_cell(&f.title.replace(['[', ']'], "")),
        f.name,
        markdown_cell(&f.title),
        f.paper_figure,
        f.name,
        markdown_cell(&f.reading)
    );
    if let Some(twin) = &f.twin {
        let _ = writeln!(
            md,
            "Read with {}: [PNG](figures/{}.png), [SVG](figures/{}.svg). {}\n",
            twin.name.rsplit('.').next().unwrap_or_default(),
            twin.name,
            twin.name,
            markdown_cell(&twin.reading)
        );
    }
}

/// The scorecard as one compact table per study, the claims not in the run on one line after it
/// (after [`markdown_summary`]).
fn markdown_scorecard(md: &mut String, studies: &[StudyScorecard]) {
    for study in studies {
        let _ = writeln!(md, "### {}\n", study.title);
        if !study.rows.is_empty() {
            // The claim links its detail row and its samples: links of herd's own (ids and filters), around
            // text escaped as every cell is.
            markdown_table_of_cells(
                md,
                &["claim", "paper", "this run", "verdict"].map(String::from),
                study.rows.iter().map(|r| {
                    let samples = r.samples.as_ref().map_or(String::new(), |link| format!(" ([samples]({link}))"));
                    vec![
                        format!("[{}](#headline-{}){samples}", markdown_cell(&r.claim), r.id),
                        markdown_cell(&r.paper),
                        markdown_cell(&format!("{} ({})", r.this_run, r.row)),
                        format!("**{}**", markdown_cell(&r.verdict)),
                    ]
                }),
            );
        }
        if !study.not_in_run.is_empty() {
            let _ = writeln!(
                md,
                "Not in this run: {} — {}.\n",
                markdown_cell(&study.not_in_run.join(" · ")),
                markdown_cell(&study.not_in_run_why)
            );
        }
    }
}

/// The summary line, then each study's sentences on its unusual verdicts, as the page opens.
fn markdown_summary(md: &mut String, summary: &str, studies: &[StudyScorecard]) {
    let _ = writeln!(md, "## Scorecard\n\n**{}**\n", markdown_cell(summary));
    for study in studies.iter().filter(|s| !s.explanations.is_empty()) {
        // The sentences' `commands` stay code spans; the rest is escaped like any cell.
        let parts: Vec<String> = study
            .explanations
            .join(" ")
            .split('`')
            .enumerate()
            .map(|(i, part)| if i % 2 == 1 { format!("`{part}`") } else { markdown_cell(part) })
            .collect();
        let _ = writeln!(md, "- **{}**: {}", study.title, parts.concat());
    }
    md.push('\n');
}

fn render_markdown(page: &Page) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", page.title);
    let _ = writeln!(
        md,
        "Results from `{}`, report made by herd {}. HTML version: [report.html](report.html).\n",
        page.source.replace('`', "'"),
        page.herd_version
    );
    if !page.absent_studies.is_empty() {
        let _ = writeln!(md, "Not in these results: {}.\n", page.absent_studies.join(", "));
    }
    markdown_summary(&mut md, &page.summary, &page.scorecard);
    markdown_scorecard(&mut md, &page.scorecard);
    for banner in &page.banners {
        let _ = writeln!(md, "> **Data quality**: {}\n", markdown_cell(banner));
    }
    if !page.key_figures.is_empty() {
        let _ = writeln!(md, "## Key effects\n");
        for f in &page.key_figures {
            markdown_figure(&mut md, f);
        }
    }
    for m in &page.matrices {
        let _ = writeln!(md, "## {}: claims × models\n", m.title);
        let columns: Vec<String> = std::iter::once("claim".to_owned()).chain(m.models.iter().cloned()).collect();
        markdown_table(
            &mut md,
            &columns,
            m.rows.iter().map(|r| {
                std::iter::once(format!("[{}](#headline-{})", r.claim, r.id))
                    .chain(r.cells.iter().map(|c| c.text.to_owned()))
                    .collect()
            }),
        );
    }
    if !page.facts.is_empty() {
        let _ = writeln!(md, "## Run facts\n");
        for fact in &page.facts {
            let _ = writeln!(md, "- {}", markdown_cell(fact));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## This run against the papers\n");
    let _ = writeln!(
        md,
        "{VERDICTS_NOTE} Where herd's estimands and tests differ from the papers', and where the papers contradict themselves: [deviations.md](deviations.md) (`docs/deviations.md` in herd).\n"
    );
    markdown_table(
        &mut md,
        &["study", "quantity", "paper", "this run", "verdict", "rule"].map(String::from),
        page.headlines.iter().map(|h| {
            vec![
                h.study.clone(),
                h.quantity.clone(),
                format!("{} ({})", h.paper, h.source),
                h.this_run.clone(),
                format!("**{}**: {}", h.verdict_text, h.basis),
                h.rule.clone(),
            ]
        }),
    );
    let _ = writeln!(md, "## Runs (manifest)\n");
    for line in &page.compute_differences {
        let _ = writeln!(md, "- **Computed differently**: {}", line.replace('`', "'"));
    }
    if !page.compute_differences.is_empty() {
        md.push('\n');
    }
    for r in &page.empty_runs {
        let _ = writeln!(md, "- run folder without trial rows yet: `{}`", r.replace('`', "'"));
    }
    if !page.plain_tables.is_empty() {
        let files =
            page.plain_tables.iter().map(|f| format!("`{}`", f.replace('`', "'"))).collect::<Vec<_>>().join(", ");
        let _ = writeln!(md, "Plain tables without a run manifest: {files}. {}\n", page.plain_note);
    }
    for run in &page.runs {
        let _ = writeln!(md, "### {}: `{}`\n", run.study, run.run_id.replace('`', "'"));
        let mut rows = vec![
            vec!["folder".to_owned(), run.path.clone()],
            vec!["experiment".into(), format!("{} (SHA-256 {})", run.experiment_file, run.experiment_sha256)],
            vec!["model · backend · shard".into(), format!("{} · {} · {}", run.model, run.backend, run.shard)],
            vec!["units stored".into(), run.units.clone()],
            vec!["rows".into(), run.rows.clone()],
            vec!["compute path".into(), run.compute.clone()],
        ];
        rows.extend(run.skipped.iter().map(|s| vec!["skipped".into(), s.clone()]));
        if run.failed > 0 {
            rows.push(vec!["failed units".into(), run.failed.to_string()]);
        }
        rows.extend(run.notes.iter().map(|(k, v)| vec![k.clone(), v.clone()]));
        markdown_table(&mut md, &["field".into(), "value".into()], rows.into_iter());
        markdown_table(
            &mut md,
            &["session started (UTC)", "ended", "herd", "git commit", "device", "units run", "status"]
                .map(String::from),
            run.sessions.iter().map(|s| {
                vec![
                    s.started.clone(),
                    s.ended.clone(),
                    s.herd_version.clone(),
                    s.git_commit.clone(),
                    s.device.clone(),
                    s.units_run.to_string(),
                    s.status.clone(),
                ]
            }),
        );
        markdown_table(
            &mut md,
            &["file role", "path", "bytes", "SHA-256"].map(String::from),
            run.files.iter().map(|f| vec![f.role.clone(), f.path.clone(), f.bytes.to_string(), f.sha256.clone()]),
        );
    }
    for study in &page.studies {
        let _ = writeln!(md, "## {}\n\n### Parse and quality control\n", study.title);
        markdown_result_table(&mut md, &study.quality);
        let _ = writeln!(md, "### Figures\n");
        if !study.note.is_empty() {
            let _ = writeln!(md, "{}\n", markdown_cell(&study.note));
        }
        for f in &study.figures {
            markdown_figure(&mut md, f);
        }
        if !study.absent_figures.is_empty() {
            let _ = writeln!(md, "Figures this run cannot show:\n");
            for a in &study.absent_figures {
                let _ = writeln!(md, "- `{}` ({}): {}", a.name, a.paper_figure, markdown_cell(&a.reason));
            }
            md.push('\n');
        }
        let _ = writeln!(md, "### Tables\n");
        for t in &study.tables {
            markdown_result_table(&mut md, t);
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cells_cannot_break_the_table_or_inject_html() {
        assert_eq!(markdown_cell("a|b\n<script>"), "a\\|b &lt;script&gt;");
        // A model's text cannot become a link or an image, nor undo an escape with its own backslash.
        assert_eq!(markdown_cell("[click](http://evil.example)"), "\\[click\\](http://evil.example)");
        assert_eq!(markdown_cell("![x](y)"), "!\\[x\\](y)");
        assert_eq!(markdown_cell("a\\|b"), "a\\\\\\|b");
    }

    #[test]
    fn outputs_are_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.md");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["report.md"], "no temporary file is left");
    }
}
