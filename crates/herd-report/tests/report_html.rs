//! The report as a reader opens it: written from a stored result set, loaded in headless Chromium
//! (Debian's `chromium`, installed by `.ci/run`), with every image decoded and every link resolving,
//! and a screenshot taken.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Variant, stored_results};
use herd_report::{load_results, write_report};

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
    assert_eq!(dead_links(&out, &damaged), vec!["figures/auc_by_difficulty.svg".to_owned()]);

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
