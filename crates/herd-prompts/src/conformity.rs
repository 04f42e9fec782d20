//! Conformity trials: what each family adds to the baseline prompt, and the draws that fill it.

use crate::bank::{ConformityBank, NormativeSentences, PromptError};
use crate::chat::{ChatPrompt, Modality, Part};
use crate::fill::fill;
use herd_design::rand::Rng;
use herd_design::rand::seq::SliceRandom;
use herd_design::{
    Answer, ConformityExperiment, ConformityTrial, ExperimentFile, Family, UnanimityRule, UnitKey, factor,
    wrong_share_count,
};
use herd_stimuli::{Stimulus, text_rendering};
use serde::Serialize;

/// One confederate reply: its answer, which wording, and (proximity families) its distance or time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedReply {
    pub answer: Answer,
    pub template: usize,
    pub annotation: Option<String>,
}

/// Everything a conformity prompt leaves to chance, drawn; stored with the trial so rows are self-describing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConformityPlan {
    pub correct: Answer,
    /// The word for the confederates in the replies header.
    pub role: String,
    pub replies: Vec<PlannedReply>,
    /// The model's own identity and the confederates' (nationality, ethnicity, letter group).
    pub own_identity: Option<String>,
    pub their_identity: Option<String>,
    /// The normative framing sentence.
    pub framing: Option<String>,
}

impl ConformityPlan {
    /// The confederates' answers, e.g. `BBAB`.
    pub fn confederate_answers(&self) -> String {
        self.replies.iter().map(|r| r.answer.as_str()).collect()
    }
}

/// Renders conformity prompts for one experiment.
#[derive(Debug, Clone)]
pub struct ConformityPrompter {
    pub bank: ConformityBank,
    pub normative: Option<NormativeSentences>,
    pub experiment: ConformityExperiment,
}

impl ConformityPrompter {
    /// Loads the experiment's bank files and checks that they hold what the experiment asks for.
    pub fn load(file: &ExperimentFile, experiment: &ConformityExperiment) -> Result<Self, PromptError> {
        let bank = ConformityBank::load(&file.resolve(&experiment.prompts.bank))?;
        let normative = match &experiment.families.normative {
            Some(n) => {
                let path = file.resolve(&n.sentences);
                let sentences = NormativeSentences::load(&path)?;
                if (n.paraphrases as usize) > sentences.pairs() {
                    return Err(PromptError::Bank {
                        file: file.path.clone(),
                        problem: format!(
                            "`families.normative.paraphrases` asks for {} sentence pairs but {} has {}",
                            n.paraphrases,
                            path.display(),
                            sentences.pairs()
                        ),
                        fix: format!("use at most {} paraphrases or add sentences to the bank", sentences.pairs()),
                    });
                }
                Some(sentences)
            }
            None => None,
        };
        Ok(ConformityPrompter { bank, normative, experiment: experiment.clone() })
    }

    /// Draws the trial's replies, identities and framing. `correct` is the shown image's correct answer.
    pub fn plan(&self, key: &UnitKey, trial: &ConformityTrial, correct: Answer) -> Result<ConformityPlan, PromptError> {
        let wrong = correct.other();
        let families = &self.experiment.families;
        let level = trial.level.as_deref().unwrap_or("");
        let n = trial.n as usize;
        let mut plan = ConformityPlan {
            correct,
            role: families.source_strength.as_ref().map_or("participants", |s| s.baseline_role.as_str()).to_owned(),
            replies: Vec::new(),
            own_identity: None,
            their_identity: None,
            framing: None,
        };
        // N = 0 is the plain baseline prompt in every family.
        if n == 0 {
            return Ok(plan);
        }
        let mut answers = vec![wrong; n];
        // Streams shared by the levels of a family (same task, N and trial) keep everything but the
        // manipulation identical across conditions.
        let shared = |purpose: &str| key.stream_over(&[factor::TASK, factor::N], purpose).rng();
        let own = |purpose: &str| key.stream(purpose).rng();
        match trial.family {
            Family::GroupSize | Family::Difficulty => {}
            Family::Unanimity => {
                let rule = families
                    .unanimity
                    .as_ref()
                    .and_then(|u| u.levels.iter().find(|l| l.name == level))
                    .and_then(|l| l.rule())
                    .ok_or_else(|| {
                        PromptError::Design(format!("unanimity level `{level}` is not in the experiment"))
                    })?;
                let mut rng = own("composition");
                match rule {
                    UnanimityRule::WrongShare(share) => {
                        // Below 100% at least one confederate is right, at every N (docs/deviations.md).
                        let wrong_count = wrong_share_count(share, trial.n) as usize;
                        answers = [vec![wrong; wrong_count], vec![correct; n - wrong_count]].concat();
                        answers.shuffle(&mut rng);
                    }
                    UnanimityRule::WrongProbability(p) => {
                        answers = (0..n).map(|_| if rng.random_bool(p) { wrong } else { correct }).collect();
                    }
                    UnanimityRule::Allies(allies) => {
                        for _ in 0..allies {
                            let at = rng.random_range(0..=answers.len());
                            answers.insert(at, correct);
                        }
                    }
                }
            }
            Family::Normative => {
                let sentences = self
                    .normative
                    .as_ref()
                    .ok_or_else(|| PromptError::Design("the normative family has no sentence bank".into()))?;
                let list = if level == "public" { &sentences.public } else { &sentences.private };
                let sentence = list.get(trial.trial as usize).ok_or_else(|| {
                    PromptError::Design(format!(
                        "paraphrase {} is not in the sentence bank ({} pairs)",
                        trial.trial,
                        list.len()
                    ))
                })?;
                plan.framing = Some(sentence.clone());
            }
            Family::SourceStrength => plan.role = level.to_owned(),
            Family::Nationality | Family::Ethnicity | Family::MinimalGroup => {
                let values: Vec<String> = match trial.family {
                    Family::Nationality => families.nationality.as_ref().map(|f| f.values.clone()),
                    Family::Ethnicity => families.ethnicity.as_ref().map(|f| f.values.clone()),
                    _ => families.minimal_group.as_ref().map(|f| f.letters.chars().map(String::from).collect()),
                }
                .unwrap_or_default();
                if values.is_empty() {
                    return Err(PromptError::Design(format!("the {} family has no values", trial.family)));
                }
                let own_index = shared("identity").random_range(0..values.len());
                let their_index = if level == "same" || values.len() < 2 {
                    own_index
                } else {
                    // Uniform over the other values.
                    let k = own("other-identity").random_range(0..values.len() - 1);
                    if k >= own_index { k + 1 } else { k }
                };
                plan.own_identity = Some(values[own_index].clone());
                plan.their_identity = Some(values[their_index].clone());
            }
            Family::Spatial | Family::Temporal => {}
        }
        let mut templates = shared("replies");
        let template_count = self.bank.reply_templates.len();
        let proximity = match trial.family {
            Family::Spatial => families.spatial.as_ref(),
            Family::Temporal => families.temporal.as_ref(),
            _ => None,
        };
        let mut annotations = own("annotation");
        plan.replies = answers
            .into_iter()
            .map(|answer| PlannedReply {
                answer,
                template: templates.random_range(0..template_count),
                annotation: proximity.map(|p| {
                    if level == "near" {
                        p.near.clone()
                    } else {
                        p.far[annotations.random_range(0..p.far.len())].clone()
                    }
                }),
            })
            .collect();
        Ok(plan)
    }

    /// The prompt text (without the image) for a plan.
    pub fn body(&self, trial: &ConformityTrial, plan: &ConformityPlan) -> Result<String, PromptError> {
        let bank = &self.bank;
        let wording = bank
            .tasks
            .get(&trial.task)
            .ok_or_else(|| PromptError::Design(format!("no wording for task {}", trial.task)))?;
        let identity = match trial.family {
            Family::Nationality => bank.identity.get("nationality"),
            Family::Ethnicity => bank.identity.get("ethnicity"),
            Family::MinimalGroup => bank.identity.get("minimal_group"),
            _ => None,
        };
        let proximity = match trial.family {
            Family::Spatial => bank.proximity.get("spatial"),
            Family::Temporal => bank.proximity.get("temporal"),
            _ => None,
        };
        let mut lines: Vec<String> = Vec::new();
        let has_replies = !plan.replies.is_empty();
        if let (true, Some(identity), Some(own)) = (has_replies, identity, &plan.own_identity) {
            lines.push(fill(&identity.intro, &[("identity", own)])?);
        }
        lines.push(wording.description.clone());
        lines.push(wording.question.clone());
        if let Some(framing) = &plan.framing {
            lines.push(framing.clone());
        }
        if has_replies {
            lines.push(match proximity {
                Some(p) => p.header.clone(),
                None => fill(&bank.replies_header, &[("role", &plan.role)])?,
            });
            let prefix = match (identity, &plan.their_identity) {
                (Some(identity), Some(theirs)) => fill(&identity.reply_prefix, &[("identity", theirs)])?,
                _ => String::new(),
            };
            for (i, reply) in plan.replies.iter().enumerate() {
                let template = bank.reply_templates.get(reply.template).ok_or_else(|| {
                    PromptError::Design(format!("reply template {} is not in the bank", reply.template))
                })?;
                let text = fill(template, &[("answer", reply.answer.as_str())])?;
                let index = (i + 1).to_string();
                let line_template = proximity.map_or(&bank.reply_line, |p| &p.reply_line);
                let annotation = reply.annotation.as_deref().unwrap_or("");
                let line = fill(line_template, &[("index", &index), ("reply", &text), ("annotation", annotation)])?;
                lines.push(format!("{prefix}{line}"));
            }
        }
        lines.push(bank.closing.clone());
        Ok(lines.join("\n"))
    }

    /// The chat prompt of a planned trial: image first, then the text; text-only models get the stimulus's
    /// text rendering where the image would be.
    pub fn render_plan(
        &self,
        trial: &ConformityTrial,
        plan: &ConformityPlan,
        stimulus: &Stimulus,
        modality: Modality,
    ) -> Result<ChatPrompt, PromptError> {
        let body = self.body(trial, plan)?;
        let content = match modality {
            Modality::Vision => vec![Part::Image { image: stimulus.id.clone() }, Part::Text { text: body }],
            Modality::Text => {
                let image = fill(&self.bank.text_modality.image, &[("rendering", &text_rendering(stimulus))])?;
                vec![Part::Text { text: format!("{image}\n\n{body}") }]
            }
        };
        Ok(ChatPrompt::user(content))
    }

    /// Plans and renders a trial for the image it shows.
    pub fn render(
        &self,
        key: &UnitKey,
        trial: &ConformityTrial,
        stimulus: &Stimulus,
        modality: Modality,
    ) -> Result<ChatPrompt, PromptError> {
        let plan = self.plan(key, trial, stimulus.correct)?;
        self.render_plan(trial, &plan, stimulus, modality)
    }
}
