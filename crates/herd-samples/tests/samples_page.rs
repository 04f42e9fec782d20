//! The samples page as a reader opens it: runs made with the simulated agent (a vision run, whose
//! trials show images, and a minimal-group run), the page written from their stored folders alone,
//! opened in headless Chromium (Debian's `chromium`, as the report's tests use) from a copied folder,
//! and read back through a probe script: the prompts it shows hash to the stored `prompt_hash`, images
//! decode, answers, raw outputs and allocations are there, a tampered hash is marked, and the filters
//! (set by a link's fragment or by a reader's choice) show only what they name.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use herd_backend::{
    AllocationFacts, BackendInfo, ConformityFacts, GenerateRequest, Generation, ScoreRequest, ScoreResult, SimAgent,
    SimBackend, SimParams,
};
use herd_prompts::{ChatPrompt, Part};
use herd_runner::{Respondent, RunOptions, run_experiment, run_parameters};
use herd_samples::{PromptCheck, read_run, sample_runs, write_page, write_samples};
use herd_store::{FileRecord, Manifest, ReadOptions, RunIdentity, RunStore};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The simulated agent, declaring itself a vision model: the runner then attaches each trial's image
/// and stores vision-modality rows, as a real vision model's run does.
struct Seeing(SimAgent);

impl SimBackend for Seeing {
    fn score_trials(
        &mut self,
        group: &[ScoreRequest],
        facts: &[ConformityFacts],
    ) -> herd_backend::Result<Vec<ScoreResult>> {
        assert!(group.iter().all(|r| r.image.is_some()), "a vision run attaches every image");
        self.0.score_trials(group, facts)
    }
    fn generate_trials(
        &mut self,
        batch: &[GenerateRequest],
        facts: &[AllocationFacts],
    ) -> herd_backend::Result<Vec<Generation>> {
        self.0.generate_trials(batch, facts)
    }
    fn info(&self) -> BackendInfo {
        BackendInfo { model: "sim-vision".into(), vision: true, ..self.0.info() }
    }
}

/// Runs the shipped experiment `experiment` with the simulated agent (seeing images when `vision`) into
/// the run folder `out`, with the manifest `herd run` writes (parameters, experiment file, banks), and
/// `banks` in place of the bank records when given.
fn sim_run(experiment: &str, out: &Path, vision: bool, banks: &[(&str, PathBuf)]) {
    sim_shard(experiment, out, vision, banks, None);
}

/// [`sim_run`] of one shard (`k/n`).
fn sim_shard(experiment: &str, out: &Path, vision: bool, banks: &[(&str, PathBuf)], shard: Option<&str>) {
    let shard: Option<herd_design::Shard> = shard.map(|s| s.parse().unwrap());
    let file = herd_design::load_experiment(&root().join(experiment)).unwrap();
    let mut agent = SimAgent::new(SimParams::default());
    let mut seeing = Seeing(SimAgent::new(SimParams::default()));
    let respondent: &mut dyn SimBackend = if vision { &mut seeing } else { &mut agent };
    let meta = file.experiment.meta();
    let identity = RunIdentity {
        experiment: meta.name.clone(),
        study: meta.study.as_str().into(),
        experiment_sha256: file.sha256.clone(),
        model: respondent.info().model,
        backend: "sim".into(),
        shard: shard.map_or_else(|| "all".into(), |s| s.to_string()),
    };
    let files = herd_design::bank_files(&file.experiment)
        .into_iter()
        .map(|(role, written)| {
            let path =
                banks.iter().find(|(r, _)| *r == role).map_or_else(|| file.resolve(&written), |(_, p)| p.clone());
            FileRecord { role: role.into(), path: path.display().to_string(), bytes: 0, sha256: None }
        })
        .collect();
    let manifest = Manifest {
        experiment_file: file.path.display().to_string(),
        parameters: run_parameters(&file),
        files,
        ..Manifest::new(identity)
    };
    let mut store = RunStore::open(out, manifest, "none").unwrap();
    let options = RunOptions { shard, ..RunOptions::default() };
    let summary = run_experiment(&file, Respondent::Sim(respondent), &mut store, &options).unwrap();
    assert!(summary.complete(), "{summary:?}");
    store.finish("complete").unwrap();
}

const CHROMIUM: &str = "/usr/bin/chromium";

/// What the probe read from the page after load: the count line and every sample on screen.
struct Probe {
    count: String,
    title: String,
    samples: Vec<Value>,
}

/// Opens `page` (with `fragment`) in headless Chromium after putting a probe beside it that runs
/// `action` once the page has loaded, then reports every visible sample.
fn open(page: &Path, fragment: &str, action: &str) -> Probe {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (`apt-get update && apt-get install -y --no-install-recommends chromium`, as .ci/run does)"
    );
    let html = std::fs::read_to_string(page).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  ACTION;
  const text = e => e ? e.textContent : null;
  const samples = [...document.querySelectorAll('article.sample')].map(a => ({
    unit: a.dataset.unit,
    check: a.dataset.check,
    heading: text(a.querySelector('section.prompt h3')),
    warning: text(a.querySelector('section.prompt .warning')),
    texts: [...a.querySelectorAll('pre.prompt-text')].map(p => p.textContent),
    images: [...a.querySelectorAll('section.prompt img')].map(i => ({src: i.getAttribute('src'), width: i.naturalWidth})),
    outcome: [...a.querySelectorAll('section.answer tr')].map(tr => [...tr.children].map(c => c.textContent)),
    raw: text(a.querySelector('pre.raw-output')),
    flags: [...a.querySelectorAll('ul.flags li')].map(l => l.textContent),
  }));
  const json = JSON.stringify({count: document.getElementById('count').textContent, title: document.title, samples});
  const out = document.createElement('pre');
  out.id = 'herd-probe';
  out.textContent = btoa(unescape(encodeURIComponent(json)));
  document.body.appendChild(out);
});
</script></body>"#
        .replace("ACTION", action);
    let check = page.with_file_name("probe.html");
    std::fs::write(&check, html.replace("</body>", &probe)).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}{fragment}", check.display()))
        .output()
        .expect("chromium starts");
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    let dom = String::from_utf8(output.stdout).unwrap();
    let start =
        dom.find("<pre id=\"herd-probe\">").expect("the probe ran after load") + "<pre id=\"herd-probe\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = base64::engine::general_purpose::STANDARD.decode(&dom[start..end]).unwrap();
    let value: Value = serde_json::from_slice(&json).unwrap();
    Probe {
        count: value["count"].as_str().unwrap().to_owned(),
        title: value["title"].as_str().unwrap().to_owned(),
        samples: value["samples"].as_array().unwrap().clone(),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// A copy of `from` at `to`, files and folders.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_copied_samples_page_shows_each_prompt_as_the_model_saw_it_with_its_image_and_answer() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("runs/conformity");
    sim_run("data/experiments/conformity.quick.toml", &run, true, &[]);
    let made = work.path().join("made");
    let written = write_samples(std::slice::from_ref(&run), &made, 2, ReadOptions::default()).unwrap();
    assert_eq!((written.mismatched, written.unavailable), (0, 0), "{written:?}");
    assert!(written.images > 0 && written.samples > 0, "{written:?}");

    // The page and its images travel; the run folder is not needed to open it.
    let copy = work.path().join("copied");
    copy_tree(&made, &copy);
    std::fs::remove_dir_all(&made).unwrap();
    // The lines task's group-size trials: N = 0, 2, 5 and 10, two trials each.
    let probe = open(&copy.join("samples.html"), "#task=lines&family=group_size", "");
    assert_eq!(probe.count, format!("8 of {} samples", written.samples));
    assert_eq!(probe.samples.len(), 8);

    // Every prompt on the page is, byte for byte, the one whose hash the run stored.
    let stored = read_run(&run, ReadOptions::default()).unwrap();
    for shown in &probe.samples {
        let unit = shown["unit"].as_str().unwrap();
        let row = stored.trials.iter().find(|r| r.unit_id == unit).expect("a stored unit");
        assert_eq!(shown["check"], "verified", "{unit}");
        assert_eq!(shown["heading"], "Prompt as the model saw it");
        let texts = strings(&shown["texts"]);
        assert_eq!(texts.len(), 1, "{unit}");
        let prompt =
            ChatPrompt::user(vec![Part::Image { image: row.image_id.clone() }, Part::Text { text: texts[0].clone() }]);
        assert_eq!(prompt.hash(), row.prompt_hash, "{unit}: the page's prompt is not the one the model saw");
        // The stimulus the model saw, drawn from a file beside the page.
        let images = shown["images"].as_array().unwrap();
        assert_eq!(images.len(), 1, "{unit}");
        assert!(images[0]["width"].as_u64().unwrap() > 0, "{unit}: the image does not decode: {images:?}");
        let png = image::open(copy.join(images[0]["src"].as_str().unwrap())).unwrap();
        assert!(png.to_rgb8() == herd_stimuli_image(&stored.manifest, &row.image_id), "{unit}: another image");
        // The answer probabilities as stored.
        let outcome: Vec<Vec<String>> = shown["outcome"].as_array().unwrap().iter().map(strings).collect();
        let probabilities = outcome.iter().find(|r| r[0] == "answer probabilities").expect("answer probabilities");
        assert!(
            probabilities[1].starts_with(&format!("P({}) = {:.4}", row.correct_label, row.p_correct)),
            "{unit}: {probabilities:?}"
        );
        assert!(
            outcome.iter().any(|r| r[0] == "p_wrong (full vocabulary)" && r[1] == format!("{:.4}", row.p_wrong_full))
        );
    }
    // A known prompt: the lines task's question, with the confederates' replies where N > 0.
    let texts: Vec<String> = probe.samples.iter().map(|s| strings(&s["texts"])[0].clone()).collect();
    assert!(texts.iter().all(|t| t.contains("Which of the lines, A or B, is the same length as the REFERENCE LINE?")));
    assert_eq!(texts.iter().filter(|t| t.contains("reply 10:")).count(), 2, "{texts:?}");
    assert_eq!(texts.iter().filter(|t| !t.contains("reply 1:")).count(), 2, "two trials at N = 0: {texts:?}");
}

/// The pixels of image `id` of the run, drawn again as the runner drew them.
fn herd_stimuli_image(manifest: &Manifest, id: &str) -> image::RgbImage {
    let exp: herd_design::ConformityExperiment = serde_json::from_value(manifest.parameters.clone()).unwrap();
    let stimulus = herd_stimuli::candidate_by_id(&exp.experiment.name, exp.experiment.seed, &exp.stimuli, id)
        .expect("an image id")
        .unwrap();
    herd_stimuli::render(&stimulus).to_rgb8()
}

#[test]
fn a_minimal_group_sample_shows_the_raw_output_and_the_parsed_allocation() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    sim_run("data/experiments/minimal-group.quick.toml", &run, false, &[]);
    let out = work.path().join("report");
    let written = write_samples(std::slice::from_ref(&run), &out, 1, ReadOptions::default()).unwrap();
    assert_eq!((written.mismatched, written.unavailable, written.images), (0, 0, 0), "{written:?}");
    let probe = open(&out.join("samples.html"), "", "");
    let stored = read_run(&run, ReadOptions::default()).unwrap();
    assert!(!probe.samples.is_empty());
    for shown in &probe.samples {
        let unit = shown["unit"].as_str().unwrap();
        let row = stored.deciders.iter().find(|r| format!("{}/{}", r.unit_id, r.decider_id) == unit).unwrap();
        let texts = strings(&shown["texts"]);
        assert_eq!(ChatPrompt::user(vec![Part::Text { text: texts[0].clone() }]).hash(), row.prompt_hash, "{unit}");
        assert!(texts[0].contains(&format!("You are {},", row.decider_id)), "{unit}: {}", texts[0]);
        assert_eq!(shown["raw"].as_str(), Some(row.raw_output.as_str()), "{unit}");
        // The allocation as the dyads table stored it, target by target.
        let outcome: Vec<Vec<String>> = shown["outcome"].as_array().unwrap().iter().map(strings).collect();
        let allocated: Vec<&Vec<String>> = outcome.iter().filter(|r| r.len() == 3 && r[0] != "target").collect();
        let dyads: Vec<_> =
            stored.dyads.iter().filter(|d| d.unit_id == row.unit_id && d.decider == row.decider).collect();
        assert_eq!(allocated.len(), dyads.len(), "{unit}: {outcome:?}");
        assert_eq!(dyads.len(), 19, "every other member of the society of 20");
        for d in dyads {
            let line = allocated.iter().find(|r| r[0] == d.target_id).expect("each target on the page");
            assert_eq!(line[2].parse::<f64>().unwrap(), d.points, "{unit} → {}", d.target_id);
        }
        assert!(outcome.iter().any(|r| r[0] == "parse status" && r[1] == row.parse_status));
    }
}

#[test]
fn a_prompt_whose_stored_hash_differs_is_marked_and_not_shown_as_what_the_model_saw() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    sim_run("data/experiments/conformity.quick.toml", &run, false, &[]);
    let mut rows = read_run(&run, ReadOptions::default()).unwrap();
    let tampered = rows.trials[5].unit_id.clone();
    rows.trials[5].prompt_hash = "0".repeat(64);
    let set = sample_runs(vec![rows], usize::MAX);
    let marked: Vec<_> = set.samples.iter().filter(|s| s.check != PromptCheck::Verified).collect();
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0].unit, tampered);
    assert!(matches!(&marked[0].check, PromptCheck::Mismatch { stored, .. } if stored == &"0".repeat(64)));
    let out = work.path().join("report");
    let written = write_page(&set, &out).unwrap();
    assert_eq!(written.mismatched, 1);
    let html = std::fs::read_to_string(&written.html).unwrap();
    assert!(html.contains("<strong>1 do not match</strong>"), "the page's header says so");

    // The filter on the check finds it, and the page says the text is not what the model saw.
    let probe = open(&written.html, "#prompt=mismatch", "");
    assert_eq!(probe.samples.len(), 1, "{}", probe.count);
    let shown = &probe.samples[0];
    assert_eq!(shown["unit"], tampered.as_str());
    assert_eq!(shown["heading"], "Re-rendered prompt: not verified");
    assert!(shown["warning"].as_str().unwrap().contains("is not necessarily what the model saw"), "{shown}");
}

#[test]
fn prompts_from_bank_files_changed_since_the_run_are_all_marked() {
    let work = tempfile::tempdir().unwrap();
    // The run recorded a bank file that has been edited since (one word of the question changed).
    let bank = work.path().join("conformity-prompts.toml");
    let original = std::fs::read_to_string(root().join("data/banks/conformity-prompts.toml")).unwrap();
    assert!(original.contains("Which of the lines"));
    let run = work.path().join("run");
    std::fs::write(&bank, &original).unwrap();
    sim_run("data/experiments/conformity.quick.toml", &run, false, &[("prompts.bank", bank.clone())]);
    std::fs::write(&bank, original.replace("Which of the lines", "Which one of the lines")).unwrap();
    let out = work.path().join("report");
    let written = write_samples(&[run], &out, 1, ReadOptions::default()).unwrap();
    let lines = std::fs::read_to_string(&written.html).unwrap();
    assert!(written.mismatched > 0, "{written:?}");
    assert!(lines.contains("Which one of the lines"), "the re-rendering is shown");
    let probe = open(&written.html, "#task=lines", "");
    assert!(!probe.samples.is_empty());
    for shown in &probe.samples {
        assert_eq!(shown["check"], "mismatch", "{}", shown["unit"]);
        assert_ne!(shown["heading"], "Prompt as the model saw it");
    }
}

#[test]
fn filters_from_a_link_or_a_choice_show_only_the_samples_they_name() {
    let work = tempfile::tempdir().unwrap();
    let runs = [work.path().join("conformity"), work.path().join("minimal-group")];
    sim_run("data/experiments/conformity.quick.toml", &runs[0], false, &[]);
    sim_run("data/experiments/minimal-group.quick.toml", &runs[1], false, &[]);
    let out = work.path().join("report");
    let written = write_samples(&runs, &out, 1, ReadOptions::default()).unwrap();
    let page = out.join("samples.html");
    let units = |p: &Probe| p.samples.iter().map(|s| s["unit"].as_str().unwrap().to_owned()).collect::<Vec<_>>();

    // A scorecard link's fragment: several families at once.
    let linked = open(&page, "#study=conformity&family=unanimity,normative", "");
    let shown = units(&linked);
    assert!(!shown.is_empty());
    assert!(shown.iter().all(|u| u.starts_with("unanimity/") || u.starts_with("normative/")), "{shown:?}");
    assert!(shown.iter().any(|u| u.starts_with("unanimity/")) && shown.iter().any(|u| u.starts_with("normative/")));
    assert!(linked.count.starts_with(&format!("{} of {}", shown.len(), written.samples)), "{}", linked.count);

    // The difficulty family's levels are conditions of their own.
    let difficulty = units(&open(&page, "#family=difficulty&task=lines&n=5", ""));
    let levels: std::collections::BTreeSet<&str> =
        difficulty.iter().map(|u| u.split('/').find(|p| p.starts_with("difficulty_level=")).unwrap()).collect();
    assert!(levels.len() > 1 && levels.len() == difficulty.len(), "one sample per level: {difficulty:?}");

    // A reader's choice in the form.
    let chosen = open(
        &page,
        "",
        "const s = document.querySelector('select[name=labels]'); s.value = 'hidden'; s.dispatchEvent(new Event('change'))",
    );
    let shown = units(&chosen);
    assert!(!shown.is_empty());
    assert!(shown.iter().all(|u| u.contains("/labels=hidden/")), "{shown:?}");
    assert!(chosen.samples.iter().all(|s| strings(&s["texts"])[0].contains("You are agent_")));

    // The check can fail: without a filter the page holds both studies and both label arms, a page of
    // 100 at a time, the rest a click away.
    let first = open(&page, "", "");
    assert_eq!(first.count, format!("{0} of {0} samples", written.samples));
    assert!(written.samples > 100 && first.samples.len() == 100, "{}", written.samples);
    let more = "const b = document.getElementById('more'); while (!b.hidden) b.click()";
    let all = units(&open(&page, "", more));
    assert_eq!(all.len(), written.samples);
    assert!(all.iter().any(|u| u.contains("/labels=visible/")) && all.iter().any(|u| u.starts_with("group_size/")));
}

#[test]
fn the_shards_of_a_run_share_their_conditions_and_their_bound() {
    let work = tempfile::tempdir().unwrap();
    let whole = work.path().join("whole");
    sim_run("data/experiments/conformity.quick.toml", &whole, false, &[]);
    let shards: Vec<PathBuf> = (1..=2).map(|k| work.path().join(format!("shard-{k}"))).collect();
    for (k, dir) in shards.iter().enumerate() {
        sim_shard("data/experiments/conformity.quick.toml", dir, false, &[], Some(&format!("{}/2", k + 1)));
    }
    let read = |dirs: &[PathBuf]| dirs.iter().map(|d| read_run(d, ReadOptions::default()).unwrap()).collect::<Vec<_>>();
    let one = sample_runs(read(std::slice::from_ref(&whole)), 2);
    let split = sample_runs(read(&shards), 2);
    assert_eq!((split.units, split.conditions), (one.units, one.conditions));
    // At most K per condition over both shards, and as many as the whole run shows.
    assert_eq!(split.samples.len(), one.samples.len());
    let mut per_condition = std::collections::BTreeMap::new();
    for s in &split.samples {
        *per_condition.entry(format!("{:?}", s.condition)).or_insert(0) += 1;
    }
    assert_eq!(per_condition.len(), split.conditions);
    assert!(per_condition.values().all(|&n| n <= 2), "{per_condition:?}");
    assert!(split.samples.iter().all(|s| s.check == PromptCheck::Verified));
}

#[test]
fn a_run_whose_manifest_has_no_experiment_shows_its_samples_with_why_their_prompts_are_missing() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    sim_run("data/experiments/minimal-group.quick.toml", &run, false, &[]);
    let mut rows = read_run(&run, ReadOptions::default()).unwrap();
    // A folder written before herd recorded the experiment's parameters.
    rows.manifest.parameters = Value::Null;
    let set = sample_runs(vec![rows], 1);
    assert!(!set.samples.is_empty());
    for s in &set.samples {
        assert!(s.messages.is_empty(), "{}", s.unit);
        assert!(s.raw_output.is_some() && !s.allocation.is_empty(), "{}: the stored answer is still shown", s.unit);
        match &s.check {
            PromptCheck::Unavailable { why } => assert!(why.contains("`parameters`"), "{why}"),
            other => panic!("{}: {other:?}", s.unit),
        }
    }
    assert!(set.runs[0].note.contains("`parameters`"), "{:?}", set.runs);
    let written = write_page(&set, &work.path().join("report")).unwrap();
    assert_eq!(written.unavailable, set.samples.len());
}

#[test]
fn model_output_that_looks_like_markup_stays_text() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    sim_run("data/experiments/minimal-group.quick.toml", &run, false, &[]);
    let mut rows = read_run(&run, ReadOptions::default()).unwrap();
    let hostile =
        "</script><script>document.title='owned'</script><img src=x onerror=\"document.title='owned'\">{\"a\": 1}";
    for row in &mut rows.deciders {
        row.raw_output = hostile.into();
    }
    let written = write_page(&sample_runs(vec![rows], 1), &work.path().join("report")).unwrap();
    let probe = open(&written.html, "", "");
    assert!(!probe.samples.is_empty());
    assert_eq!(probe.title, "herd samples: every trial one click away", "no script of the output ran");
    for shown in &probe.samples {
        assert_eq!(shown["raw"].as_str(), Some(hostile), "shown as the text it is");
        assert!(shown["images"].as_array().unwrap().is_empty(), "no element made of it");
    }
    let html = std::fs::read_to_string(&written.html).unwrap();
    assert!(!html.contains("</script><script>document.title"), "the embedded data cannot close its script");
}
