//! Writing the page: `samples.html` with the samples embedded as JSON (a `file://` page may not
//! fetch a file beside it) and its script inline (no server, no network), and the stimulus images
//! of the vision samples under `samples/`.

use std::path::{Path, PathBuf};

use minijinja::{Environment, context};

use crate::SampleSet;
use crate::error::SamplesError;

/// What [`write_page`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenSamples {
    pub html: PathBuf,
    pub samples: usize,
    pub images: usize,
    /// Samples whose re-rendered prompt's hash differs from the stored one.
    pub mismatched: usize,
    /// Samples whose prompt could not be re-rendered.
    pub unavailable: usize,
}

/// The folder beside the page that holds its images.
const IMAGES: &str = "samples";

/// Writes `set` as `OUT/samples.html` and its images as `OUT/samples/*.png` (images an earlier page
/// left there and this one does not show are removed).
pub fn write_page(set: &SampleSet, out: &Path) -> Result<WrittenSamples, SamplesError> {
    let images = out.join(IMAGES);
    std::fs::create_dir_all(&images).map_err(|e| SamplesError::write(&images, e))?;
    for entry in std::fs::read_dir(&images).map_err(|e| SamplesError::write(&images, e))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".png") && !set.images.contains_key(&name) {
            std::fs::remove_file(entry.path()).map_err(|e| SamplesError::write(&entry.path(), e))?;
        }
    }
    // Drawing and encoding dominate: on every core, as herd-stimuli draws its pools.
    let (names, stimuli): (Vec<&String>, Vec<herd_stimuli::Stimulus>) =
        set.images.iter().map(|(name, stimulus)| (name, stimulus.clone())).unzip();
    for (name, png) in names.into_iter().zip(herd_stimuli::render_each(&stimuli, herd_stimuli::render_png)) {
        let path = images.join(name);
        let png = png.map_err(|e| SamplesError::write(&path, e))?;
        std::fs::write(&path, png).map_err(|e| SamplesError::write(&path, e))?;
    }
    let data = serde_json::to_string(&set.samples).map_err(|e| SamplesError::Template(e.to_string()))?;
    // Inside <script> only `</script` could end the data early: no `<` is left in it (JSON reads
    // `\u003c` as `<`).
    let data = data.replace('<', "\\u003c");
    let count = |status: &str| set.samples.iter().filter(|s| s.check.word() == status).count();
    let (mismatched, unavailable) = (count("mismatch"), count("unavailable"));
    let mut env = Environment::new();
    env.add_template("samples.html", include_str!("../templates/samples.html"))
        .map_err(|e| SamplesError::Template(e.to_string()))?;
    let html = env
        .get_template("samples.html")
        .and_then(|t| {
            t.render(context! {
                samples => set.samples.len(),
                verified => count("verified"),
                mismatched,
                unavailable,
                per_condition => set.per_condition,
                conditions => set.conditions,
                units => set.units,
                runs => &set.runs,
                herd_version => env!("CARGO_PKG_VERSION"),
                data,
            })
        })
        .map_err(|e| SamplesError::Template(e.to_string()))?;
    let path = out.join("samples.html");
    std::fs::write(&path, html).map_err(|e| SamplesError::write(&path, e))?;
    Ok(WrittenSamples { html: path, samples: set.samples.len(), images: set.images.len(), mismatched, unavailable })
}
