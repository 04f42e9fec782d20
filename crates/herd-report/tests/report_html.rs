//! The report as a reader opens it: written from a stored result set, loaded in headless Chromium
//! (Debian's `chromium`, installed by `.ci/run`), with every image decoded and every link resolving,
//! and a screenshot taken.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Variant, stored_results};
use herd_analysis::load_results;
use herd_report::write_report;

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium() -> &'static str {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (`apt-get update && apt-get install -y --no-install-recommends chromium`, as .ci/run does)"
    );
    CHROMIUM
}

/// Runs headless Chromium on `page` with `args`, a fresh profile, and no network chatter.
fn run_chromium(page: &Path, args: &[String]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--allow-file-access-from-files",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// A copy of `report` beside it with a script that, once everything has loaded, writes into the DOM
/// every image that failed to decode and every link target, for the test to read with --dump-dom.
fn instrumented_copy(report: &Path) -> PathBuf {
    let html = std::fs::read_to_string(report).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const broken = images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'));
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'));
  const out = document.createElement('pre');
  out.id = 'herd-check';
  out.textContent = JSON.stringify({images: images.length, broken, links});
  document.body.appendChild(out);
});
</script></body>"#;
    assert!(html.contains("</body>"));
    let path = report.with_file_name("check.html");
    std::fs::write(&path, html.replace("</body>", probe)).unwrap();
    path
}

struct PageCheck {
    images: u64,
    broken: Vec<String>,
    links: Vec<String>,
    ids: Vec<String>,
}

fn check_page(page: &Path) -> PageCheck {
    let output = run_chromium(page, &["--virtual-time-budget=10000".into(), "--dump-dom".into()]);
    let dom = String::from_utf8(output.stdout).unwrap();
    let start =
        dom.find("<pre id=\"herd-check\">").expect("the probe ran after load") + "<pre id=\"herd-check\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end].replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let strings =
        |key: &str| value[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let ids = dom.split(" id=\"").skip(1).map(|s| s[..s.find('"').unwrap()].to_owned()).collect();
    PageCheck { images: value["images"].as_u64().unwrap(), broken: strings("broken"), links: strings("links"), ids }
}

/// Links that do not resolve: relative files that are missing, anchors with no element.
fn dead_links(dir: &Path, check: &PageCheck) -> Vec<String> {
    check
        .links
        .iter()
        .filter(|href| match href.strip_prefix('#') {
            Some(anchor) => !check.ids.iter().any(|id| id == anchor),
            None => href.contains("://") || !dir.join(href).is_file(),
        })
        .cloned()
        .collect()
}

const CONFORMITY_FIGURES: usize = 12;
const MINIMAL_GROUP_FIGURES: usize = 7;

#[test]
fn the_report_loads_in_chromium_with_every_image_and_link_intact() {
    let work = tempfile::tempdir().unwrap();
    let results = load_results(&stored_results(&work.path().join("results"), Variant::Planted), &mut |_| {}).unwrap();
    let out = work.path().join("report");
    let written = write_report(&results, &out, &mut |_| {}).unwrap();
    assert!(written.absent.is_empty(), "{:?}", written.absent);
    // Every conformity figure twice (the lead measure, then the other), every minimal-group figure once.
    let figures = 2 * CONFORMITY_FIGURES + MINIMAL_GROUP_FIGURES;
    assert_eq!(written.figures.len(), 2 * figures, "a PNG and an SVG each");
    assert!(written.figures.iter().any(|f| f.ends_with("p_wrong_by_group_size_per_model.p_wrong_ab.png")));

    let page = instrumented_copy(&written.html);
    let check = check_page(&page);
    assert_eq!(check.images, figures as u64, "every figure is on the page");
    assert!(check.broken.is_empty(), "broken images: {:?}", check.broken);
    assert!(check.links.iter().filter(|l| l.ends_with(".svg")).count() == figures, "{:?}", check.links);
    assert!(check.links.iter().any(|l| l == "report.md"));
    assert!(
        check.links.iter().any(|l| l == "deviations.md"),
        "the headline table links herd's deviations from the papers"
    );
    assert_eq!(dead_links(&out, &check), Vec::<String>::new());

    // The check can fail: a missing figure is reported as a broken image and a dead link.
    std::fs::remove_file(out.join("figures/auc_by_difficulty.png")).unwrap();
    std::fs::remove_file(out.join("figures/auc_by_difficulty.svg")).unwrap();
    let damaged = check_page(&page);
    assert_eq!(damaged.broken, vec!["figures/auc_by_difficulty.png".to_owned()]);
    // The figure links its full-size PNG and its SVG.
    assert_eq!(
        dead_links(&out, &damaged),
        ["figures/auc_by_difficulty.png", "figures/auc_by_difficulty.svg"].map(String::from)
    );

    // A screenshot of the page as a reader sees it.
    let written = write_report(&results, &out, &mut |_| {}).unwrap();
    let shot = work.path().join("report.png");
    run_chromium(
        &written.html,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2400".into(),
            "--virtual-time-budget=10000".into(),
        ],
    );
    let image = image::open(&shot).unwrap().to_rgb8();
    assert_eq!((image.width(), image.height()), (1280, 2400));
    let inked = image.pixels().filter(|p| p.0 != [255, 255, 255]).count();
    assert!(inked > 50_000, "the screenshot is nearly blank ({inked} inked pixels)");
    if let Ok(keep) = std::env::var("HERD_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// Where the scorecard ends on a `width` × `height` window: a probe writes the window's size, the
/// scorecard's bottom edge, its claim rows and its tables' right edge into the DOM after load.
struct ScorecardBox {
    width: f64,
    height: f64,
    bottom: f64,
    rows: u64,
    /// The right edge of the widest scorecard table.
    right: f64,
}

fn measure_scorecard(report: &Path, width: u32, height: u32) -> ScorecardBox {
    let html = std::fs::read_to_string(report).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  const card = document.getElementById('scorecard');
  const out = document.createElement('pre');
  out.id = 'herd-scorecard';
  out.textContent = JSON.stringify({
    width: window.innerWidth, height: window.innerHeight,
    bottom: card.getBoundingClientRect().bottom + window.scrollY,
    rows: card.querySelectorAll('tr td .badge').length,
    right: Math.max(...Array.from(card.querySelectorAll('table')).map(t => t.getBoundingClientRect().right)),
  });
  document.body.appendChild(out);
});
</script></body>"#;
    let page = report.with_file_name("scorecard-check.html");
    std::fs::write(&page, html.replace("</body>", probe)).unwrap();
    let output = run_chromium(
        &page,
        &[format!("--window-size={width},{height}"), "--virtual-time-budget=10000".into(), "--dump-dom".into()],
    );
    let dom = String::from_utf8(output.stdout).unwrap();
    let start = dom.find("<pre id=\"herd-scorecard\">").expect("the probe ran after load")
        + "<pre id=\"herd-scorecard\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let value: serde_json::Value = serde_json::from_str(&dom[start..end].replace("&quot;", "\"")).unwrap();
    let number = |key: &str| value[key].as_f64().unwrap();
    ScorecardBox {
        width: number("width"),
        height: number("height"),
        bottom: number("bottom"),
        rows: value["rows"].as_u64().unwrap(),
        right: number("right"),
    }
}

#[test]
fn the_scorecard_fits_one_screen_at_1400_px() {
    let work = tempfile::tempdir().unwrap();
    // Both studies with every family and condition: more claims tested than the quick run's.
    let results = load_results(&stored_results(&work.path().join("results"), Variant::Planted), &mut |_| {}).unwrap();
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let tested = herd_analysis::compare_headlines(&results)
        .unwrap()
        .iter()
        .filter(|c| c.verdict != herd_analysis::Verdict::NotInRun)
        .count();
    assert!(tested >= 12, "the fixture tests most claims ({tested})");
    // The papers' robustness checks are folded under the main claims, one click away.
    let html = std::fs::read_to_string(&written.html).unwrap();
    assert!(html.contains("<details class=\"robustness\"><summary>Robustness checks (S3, S5): "), "no folded checks");

    // The screen as a reader sees it.
    let shot = work.path().join("scorecard.png");
    run_chromium(
        &written.html,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,900".into(),
            "--virtual-time-budget=10000".into(),
        ],
    );
    let image = image::open(&shot).unwrap().to_rgb8();
    assert_eq!((image.width(), image.height()), (1400, 900));
    // The badges are drawn: the "replicates" blue (#0072b2) is on the screen.
    let badge_blue = image.pixels().filter(|p| p.0 == [0x00, 0x72, 0xb2]).count();
    assert!(badge_blue > 500, "no replicates badge on the screenshot ({badge_blue} blue pixels)");
    if let Ok(keep) = std::env::var("HERD_SCORECARD_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    let screen = measure_scorecard(&written.html, 1400, 900);
    // Headless Chromium keeps room for a browser's frame: the page sees about 1400 × 757 of the
    // 1400 × 900 window, as a reader's browser with its toolbars would.
    assert_eq!(screen.width, 1400.0, "the window is as wide as asked");
    assert!((700.0..=900.0).contains(&screen.height), "the viewport is {} px tall", screen.height);
    assert_eq!(screen.rows, tested as u64, "one scorecard row per claim tested");
    assert!(
        screen.bottom <= screen.height,
        "the scorecard ends at {} px, below the {} px viewport",
        screen.bottom,
        screen.height
    );
    assert!(screen.right <= screen.width, "the scorecard is wider than the window ({} px)", screen.right);
    // The measurement can fail: on a screen a third as tall the scorecard does not fit.
    let short = measure_scorecard(&written.html, 1400, 300);
    assert!(short.bottom > short.height, "the scorecard ends at {} px on a 300 px screen", short.bottom);
}

#[test]
fn text_from_data_is_escaped_in_html_and_markdown() {
    let work = tempfile::tempdir().unwrap();
    let dir = stored_results(&work.path().join("results"), Variant::Planted);
    // A hostile model name in the manifest: it must appear as text, never as markup.
    let manifest_path = dir.join("runs/conformity/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["identity"]["model"] = "<img src=x onerror=alert(1)>|pipe".into();
    std::fs::write(&manifest_path, serde_json::to_string(&manifest).unwrap()).unwrap();
    let results = load_results(&dir, &mut |_| {}).unwrap();
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let html = std::fs::read_to_string(&written.html).unwrap();
    assert!(!html.contains("<img src=x"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;|pipe"));
    let md = std::fs::read_to_string(&written.markdown).unwrap();
    assert!(!md.contains("<img src=x"));
    assert!(md.contains("&lt;img src=x onerror=alert(1)&gt;\\|pipe"));
}

/// The page's extent on a `width` × `height` window: the document's scroll width and height, and the
/// scorecard's right edge (its section and every table in it). `tweak` is a script run on the page first,
/// to show a measurement can fail.
struct PageBox {
    width: f64,
    scroll_width: f64,
    scroll_height: f64,
    scorecard_right: f64,
}

fn measure_page(report: &Path, width: u32, tweak: &str) -> PageBox {
    let html = std::fs::read_to_string(report).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  TWEAK
  const card = document.getElementById('scorecard');
  const boxes = [card, ...card.querySelectorAll('table, td, p, li')].map(e => e.getBoundingClientRect().right);
  const out = document.createElement('pre');
  out.id = 'herd-page';
  out.textContent = JSON.stringify({
    width: window.innerWidth,
    scroll_width: document.documentElement.scrollWidth,
    scroll_height: document.documentElement.scrollHeight,
    scorecard_right: Math.max(...boxes),
  });
  out.style.position = 'absolute'; out.style.top = '0'; out.style.left = '0'; out.style.margin = '0';
  document.body.appendChild(out);
});
</script></body>"#;
    let page = report.with_file_name(format!("page-check-{width}.html"));
    std::fs::write(&page, html.replace("</body>", &probe.replace("TWEAK", tweak))).unwrap();
    let output = run_chromium(
        &page,
        &[format!("--window-size={width},900"), "--virtual-time-budget=10000".into(), "--dump-dom".into()],
    );
    let dom = String::from_utf8(output.stdout).unwrap();
    let start = dom.find("<pre id=\"herd-page\"").expect("the probe ran after load");
    let start = start + dom[start..].find('>').unwrap() + 1;
    let end = start + dom[start..].find("</pre>").unwrap();
    let value: serde_json::Value = serde_json::from_str(&dom[start..end].replace("&quot;", "\"")).unwrap();
    let number = |key: &str| value[key].as_f64().unwrap();
    PageBox {
        width: number("width"),
        scroll_width: number("scroll_width"),
        scroll_height: number("scroll_height"),
        scorecard_right: number("scorecard_right"),
    }
}

/// `html` with the entities minijinja writes turned back into characters, for comparing text.
fn unescape(html: &str) -> String {
    html.replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The quick run's report at its tallest allowed: 12,000 px at 1400 px wide (issue 44).
const QUICK_PAGE_MAX_HEIGHT: f64 = 12_000.0;

#[test]
fn the_quick_report_fits_1280_px_wide_and_12000_px_tall() {
    let work = tempfile::tempdir().unwrap();
    let dir = common::quick::quick_results(&work.path().join("results"), common::quick::Quality::Poor);
    let results = load_results(&dir, &mut |_| {}).unwrap();
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    // HERD_QUICK_REPORT=DIR keeps the report to look at (before the checks, so a failing one can be seen).
    if let Ok(keep) = std::env::var("HERD_QUICK_REPORT") {
        let status = Command::new("cp").arg("-r").arg(work.path().join("report")).arg(keep).status().unwrap();
        assert!(status.success());
    }

    // At 1280 px nothing scrolls sideways: not the scorecard, not the page.
    let narrow = measure_page(&written.html, 1280, "");
    assert_eq!(narrow.width, 1280.0, "the window is as wide as asked");
    assert!(narrow.scorecard_right <= narrow.width, "the scorecard reaches {} px", narrow.scorecard_right);
    assert!(narrow.scroll_width <= narrow.width, "the page scrolls sideways to {} px", narrow.scroll_width);
    // The check can fail: scorecard cells kept on one line (the page before issue 44) overflow 1280 px.
    let unwrapped = measure_page(
        &written.html,
        1280,
        "document.querySelectorAll('#scorecard td').forEach(td => { td.style.whiteSpace = 'nowrap'; });",
    );
    assert!(unwrapped.scorecard_right > unwrapped.width, "unwrapped cells end at {} px", unwrapped.scorecard_right);

    // At 1400 px the page is at most 12,000 px tall, its figures and long tables folded.
    let wide = measure_page(&written.html, 1400, "");
    assert!(
        wide.scroll_height <= QUICK_PAGE_MAX_HEIGHT,
        "the quick report is {} px tall at 1400 px",
        wide.scroll_height
    );
    // A scorecard claim's link opens its row in the folded detail table (the page's own inline script).
    let html = std::fs::read_to_string(&written.html).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre');
  out.id = 'herd-unfold';
  out.textContent = String(document.getElementById('headline-details').open);
  document.body.appendChild(out);
});
</script></body>"#;
    let page = written.html.with_file_name("unfold-check.html");
    std::fs::write(&page, html.replace("</body>", probe)).unwrap();
    let opened = |target: &str| {
        let dom = run_chromium(
            Path::new(&format!("{}{target}", page.display())),
            &["--virtual-time-budget=10000".into(), "--dump-dom".into()],
        )
        .stdout;
        String::from_utf8(dom).unwrap().contains("<pre id=\"herd-unfold\">true</pre>")
    };
    assert!(opened("#headline-group_size_rise"), "the detail table stays folded under its row's link");
    assert!(!opened(""), "the detail table is folded when the page opens");

    // The check can fail: with every folded block open the page is far taller.
    let unfolded =
        measure_page(&written.html, 1400, "document.querySelectorAll('details').forEach(d => { d.open = true; });");
    assert!(
        unfolded.scroll_height > QUICK_PAGE_MAX_HEIGHT,
        "unfolded, the page is only {} px tall",
        unfolded.scroll_height
    );
}

#[test]
fn the_quick_report_opens_with_a_summary_and_a_reason_and_next_step_per_unusual_verdict() {
    let work = tempfile::tempdir().unwrap();
    let dir = common::quick::quick_results(&work.path().join("results"), common::quick::Quality::Poor);
    let results = load_results(&dir, &mut |_| {}).unwrap();
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let html = unescape(&std::fs::read_to_string(&written.html).unwrap());
    let md = std::fs::read_to_string(&written.markdown).unwrap();
    let scorecard = &html[html.find("<section id=\"scorecard\">").unwrap()..html.find("</section>").unwrap()];
    let summary = scorecard.find("<p class=\"summary\" id=\"summary\">Conformity: ").expect("a summary line first");
    assert!(summary < scorecard.find("<table>").unwrap(), "the summary line opens the scorecard");
    assert!(
        scorecard
            .contains("Conformity: 15 claims tested, 15 not the paper's population. Minimal groups: 13 claims tested"),
        "{scorecard}"
    );
    // The conformity model at chance, with its accuracy, and the paper's smallest vision model next.
    let at_chance = "15 claims not the paper's population: qwen2.5-coder-0.5b (two-way accuracy 0.50 over 24 trials on \
                     color, dots and lines) is at or near chance at N = 0";
    assert!(scorecard.contains(at_chance), "{scorecard}");
    let next = "e.g. <code>herd run --experiment data/experiments/conformity.quick.toml --model qwen2.5-vl-3b --device \
                cuda --out runs/conformity-qwen2.5-vl-3b</code> (about 16 GB of memory in f32 on a CPU, docs/models.md";
    assert!(scorecard.contains(next), "{scorecard}");
    // The minimal-group model outside the population: why, and a reasoning model next.
    assert!(scorecard.contains("smollm2-135m: 1% of its 320 allocations parsed as written"), "{scorecard}");
    assert!(scorecard.contains("<code>cargo xtask replicate --profile full --model qwen3-8b --device cuda</code>"));
    // The key effects follow the scorecard; p_wrong read two-way draws chance, where this model sits.
    let key = &html[html.find("<section id=\"key-effects\">").expect("a key-effects section")..];
    assert!(
        key.find("figure-p_wrong_by_group_size_per_model").unwrap()
            < key.find("figure-favouritism_visible_vs_hidden").unwrap()
    );
    assert!(key.contains("The black line is chance (0.5, an even guess between A and B)"), "{key}");
    let c = results.conformity.as_ref().unwrap();
    for (measure, line) in [(herd_analysis::PWrong::Ab, 0.5), (herd_analysis::PWrong::Full, 0.0)] {
        let figure = herd_report::p_wrong_by_group_size_per_model(&c.trials, &c.tables, measure).unwrap();
        let herd_report::Chart::Line(chart) = figure.chart else { panic!("a line chart") };
        assert_eq!(chart.reference_y, Some(line), "{measure:?}");
    }
    // Favouritism with labels visible and hidden, by decider group.
    let m = results.minimal_group.as_ref().unwrap();
    let floor = herd_report::minimal_group_figures(&m.dyads, &m.tables)
        .into_iter()
        .flatten()
        .find(|f| f.name == "favouritism_visible_vs_hidden")
        .unwrap();
    let herd_report::Chart::Bar(bars) = floor.chart else { panic!("a bar chart") };
    let labels: Vec<&str> = bars.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        ["visible · minority", "visible · majority", "hidden · minority", "hidden · majority"]
            .map(|l| format!("smollm2-135m · {l}")),
    );
    // The Markdown twin says the same, commands as code.
    assert!(md.contains("**Conformity: 15 claims tested, 15 not the paper's population."), "{md}");
    assert!(
        md.contains(at_chance) && md.contains("`cargo xtask replicate --profile full --model qwen3-8b --device cuda`")
    );
}

#[test]
fn data_quality_banners_show_for_repaired_allocations_and_low_answer_mass_only() {
    let work = tempfile::tempdir().unwrap();
    let report = |quality, name: &str| {
        let dir = common::quick::quick_results(&work.path().join(name), quality);
        let results = load_results(&dir, &mut |_| {}).unwrap();
        let written = write_report(&results, &work.path().join(format!("{name}-report")), &mut |_| {}).unwrap();
        (std::fs::read_to_string(&written.html).unwrap(), std::fs::read_to_string(&written.markdown).unwrap())
    };
    let (html, md) = report(common::quick::Quality::Poor, "poor");
    let html = unescape(&html);
    let banners: Vec<&str> =
        html.split("<p class=\"banner\">").skip(1).map(|b| &b[..b.find("</p>").unwrap()]).collect();
    assert_eq!(banners.len(), 2, "{banners:?}");
    assert!(
        banners[0].contains("qwen2.5-coder-0.5b puts 0.17–0.37 of its next-token probability on A or B"),
        "{}",
        banners[0]
    );
    assert!(
        banners[1].contains("4 of 320 of smollm2-135m's allocations parsed as written; 316 of 320 were repaired"),
        "{}",
        banners[1]
    );
    // Under the scorecard, before the first figure.
    assert!(html.find("class=\"banner\"").unwrap() < html.find("<figure").unwrap());
    assert!(
        md.contains("**Data quality**: Allocations: 4 of 320 of smollm2-135m's allocations parsed as written"),
        "{md}"
    );
    // The same grid with the mass on the answers and every allocation parsed has none.
    let (html, md) = report(common::quick::Quality::Clean, "clean");
    assert!(!html.contains("class=\"banner\"") && !md.contains("Data quality"));
    // Run facts in both: units, machine, herd version, tokens generated.
    assert!(html.contains("<section id=\"run-facts\">"));
    assert!(md.contains("- minimal groups · smollm2-135m: 16 units committed in "), "{md}");
    // 320 deciders × 224 tokens.
    assert!(md.contains(" over 1 session, 71,680 tokens generated; cpu; herd "), "{md}");
    // A conformity run generates nothing: it says how it was scored instead.
    assert!(md.contains(" over 1 session, scored from next-token probabilities, no tokens generated; "), "{md}");
}

#[test]
fn several_models_get_a_claims_by_models_matrix_and_one_model_none() {
    let work = tempfile::tempdir().unwrap();
    // The planted conformity run has two models (model-a, model-b); its minimal-group run one.
    let results = load_results(&stored_results(&work.path().join("results"), Variant::Planted), &mut |_| {}).unwrap();
    let written = write_report(&results, &work.path().join("report"), &mut |_| {}).unwrap();
    let html = unescape(&std::fs::read_to_string(&written.html).unwrap());
    let section = &html[html.find("<section id=\"claims-models\">").expect("a matrix section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains("<h3>Conformity: claims × models</h3>"), "{section}");
    assert!(!section.contains("Minimal groups"), "one minimal-group model: no matrix for it");
    assert!(section.contains("<tr><th>claim</th><th>model-a</th><th>model-b</th></tr>"), "{section}");
    // Both models' conformity rises with N in the fixture: the claim replicates in each column.
    let rise = section.split("<tr>").find(|row| row.contains("#headline-group_size_rise")).unwrap();
    assert_eq!(rise.matches("<span class=\"badge replicates\">replicates</span>").count(), 2, "{rise}");
    // A claim pooled over models (the source-strength contrast) has no cell of its own per model.
    let pooled = section.split("<tr>").find(|row| row.contains("#headline-source_strength")).unwrap();
    assert_eq!(pooled.matches(">—</span>").count(), 2, "{pooled}");
    let md = std::fs::read_to_string(&written.markdown).unwrap();
    assert!(md.contains("## Conformity: claims × models\n\n| claim | model-a | model-b |"), "{md}");

    // One model per study (the quick run's shape): no matrix.
    let dir = common::quick::quick_results(&work.path().join("quick"), common::quick::Quality::Poor);
    let results = load_results(&dir, &mut |_| {}).unwrap();
    let written = write_report(&results, &work.path().join("quick-report"), &mut |_| {}).unwrap();
    assert!(!std::fs::read_to_string(&written.html).unwrap().contains("claims-models"));
}
