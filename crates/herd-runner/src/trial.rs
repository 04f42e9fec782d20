//! A conformity trial as the respondent is asked it, shared by the baseline filter and the study: its
//! answers, its prompt (and image, for vision models) and the facts a simulated agent answers from.

use crate::Result;
use herd_backend::ConformityFacts;
use herd_design::ConformityTrial;
use herd_prompts::{ChatPrompt, ConformityPlan, ConformityPrompter, Modality};
use herd_stimuli::Stimulus;
use std::sync::Arc;

pub(crate) fn answers() -> Vec<String> {
    vec!["A".into(), "B".into()]
}

/// The prompt of a planned trial and, for vision models, the pixels of its image.
pub(crate) fn score_prompt(
    prompter: &ConformityPrompter,
    trial: &ConformityTrial,
    plan: &ConformityPlan,
    stimulus: &Stimulus,
    modality: Modality,
) -> Result<(ChatPrompt, Option<Arc<image::RgbImage>>)> {
    let prompt = prompter.render_plan(trial, plan, stimulus, modality)?;
    let image = (modality == Modality::Vision).then(|| Arc::new(herd_stimuli::render(stimulus).to_rgb8()));
    Ok((prompt, image))
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
