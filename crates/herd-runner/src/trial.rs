//! A conformity trial as the respondent is asked it, shared by the baseline filter and the study: its
//! answers, its prompt (and image, for vision models) and the facts a simulated agent answers from.

use crate::Result;
use herd_backend::ConformityFacts;
use herd_design::ConformityTrial;
use herd_prompts::{ChatPrompt, ConformityPlan, ConformityPrompter, Modality};
use herd_stimuli::Stimulus;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub(crate) fn answers() -> Vec<String> {
    vec!["A".into(), "B".into()]
}

/// The prompt of a planned trial and, for vision models, the pixels of its image: from `images` where
/// the trial's image is shown again (the study), else drawn for it alone (the baseline filter, one trial
/// per image).
pub(crate) fn score_prompt(
    prompter: &ConformityPrompter,
    trial: &ConformityTrial,
    plan: &ConformityPlan,
    stimulus: &Stimulus,
    modality: Modality,
    images: Option<&RenderedImages>,
) -> Result<(ChatPrompt, Option<Arc<image::RgbImage>>)> {
    let prompt = prompter.render_plan(trial, plan, stimulus, modality)?;
    let image = (modality == Modality::Vision).then(|| match images {
        Some(images) => images.pixels(stimulus),
        None => Arc::new(herd_stimuli::render(stimulus).to_rgb8()),
    });
    Ok((prompt, image))
}

/// Images a run keeps drawn: one trial index's image is shown at every N of its cell, and the plan
/// runs a cell's trial indices N by N, so an image recurs one N later (64 units in the papers' grid).
const IMAGES_KEPT: usize = 96;

/// The pixels of the images drawn last, by stimulus. An image shown in many trials is drawn once and
/// every trial's request holds the same `Arc`, which also lets the openai backend encode it once.
pub(crate) struct RenderedImages {
    recent: Mutex<VecDeque<(String, Arc<image::RgbImage>)>>,
}

impl RenderedImages {
    pub(crate) fn new() -> Self {
        RenderedImages { recent: Mutex::new(VecDeque::new()) }
    }

    /// `stimulus`'s pixels: the ones drawn before, or drawn now and kept.
    pub(crate) fn pixels(&self, stimulus: &Stimulus) -> Arc<image::RgbImage> {
        let key = format!("{}/{}", stimulus.task, stimulus.id);
        if let Some((_, pixels)) = self.recent.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == key)
        {
            return Arc::clone(pixels);
        }
        let pixels = Arc::new(herd_stimuli::render(stimulus).to_rgb8());
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= IMAGES_KEPT {
            recent.pop_front();
        }
        recent.push_back((key, Arc::clone(&pixels)));
        pixels
    }
}

/// What a simulated agent needs to know about a trial.
pub(crate) fn conformity_facts(
    unit: &str,
    trial: &ConformityTrial,
    plan: &ConformityPlan,
    stimulus: &Stimulus,
    levels: u32,
) -> ConformityFacts {
    let wrong_replies = plan.replies.iter().filter(|r| r.answer != plan.correct).count() as u32;
    ConformityFacts {
        key: unit.to_owned(),
        correct: plan.correct.as_str().to_owned(),
        wrong: plan.correct.other().as_str().to_owned(),
        wrong_replies,
        right_replies: plan.replies.len() as u32 - wrong_replies,
        difficulty: stimulus.difficulty_level.map_or(0.0, |l| f64::from(l) / f64::from(levels.max(1))),
        level: trial.level.clone(),
        task: trial.task.to_string(),
        family: trial.family.to_string(),
        difficulty_index: stimulus.difficulty_index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_design::{StimuliConfig, StreamKey, Task};
    use herd_stimuli::{Pool, generate};

    fn stimulus(id: &str, index: u32) -> Stimulus {
        let config = StimuliConfig::protocol(vec![Task::Color]);
        let mut rng = StreamKey::new("test", 1).with("image", index).rng();
        generate(Task::Color, &config, Pool::General, id, &mut rng).unwrap()
    }

    #[test]
    fn an_image_shown_again_is_drawn_once_and_shared() {
        let images = RenderedImages::new();
        let (a, b) = (stimulus("color-0000", 0), stimulus("color-0001", 1));
        let first = images.pixels(&a);
        assert!(Arc::ptr_eq(&first, &images.pixels(&a)), "the same image, the same pixels");
        assert!(!Arc::ptr_eq(&first, &images.pixels(&b)));
        // The kept pixels are the image's own.
        assert_eq!(*first, herd_stimuli::render(&a).to_rgb8());
        // Past what is kept, the oldest is drawn again (and still equal).
        for i in 2..(IMAGES_KEPT as u32 + 2) {
            images.pixels(&stimulus(&format!("color-{i:04}"), i));
        }
        let redrawn = images.pixels(&a);
        assert!(!Arc::ptr_eq(&first, &redrawn));
        assert_eq!(first, redrawn);
    }
}
