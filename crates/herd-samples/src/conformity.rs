//! Conformity samples: each picked trial's image drawn again from its id and checked against the
//! stored parameters, its prompt re-rendered as the runner rendered it (herd-prompts'
//! `ConformityPrompter` on the unit's own streams) and checked against the stored `prompt_hash`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use herd_design::{Experiment, ExperimentFile, Unit, UnitPlan, expand, sha256_hex};
use herd_prompts::{ConformityPrompter, Modality};
use herd_stimuli::{Stimulus, candidate_by_id};

use crate::rows::TrialRow;
use crate::sample::{PromptCheck, Sample, logit, messages, probability};

/// The factors of a trial's condition, in the order the page shows them.
pub(crate) fn condition(row: &TrialRow) -> Vec<(&'static str, String)> {
    vec![
        ("model", row.model.clone()),
        ("task", row.task.clone()),
        ("family", row.family.clone()),
        ("level", row.level.clone().unwrap_or_default()),
        ("difficulty_level", row.difficulty_level.map(|l| l.to_string()).unwrap_or_default()),
        ("n", row.n.to_string()),
        ("modality", row.modality.clone()),
    ]
}

/// The key that spreads the picks: a trial index of a task and family, whatever its N and level.
pub(crate) fn spread(row: &TrialRow) -> String {
    format!("{}\u{0}{}\u{0}{}\u{0}{}", row.run_id, row.task, row.family, row.seed)
}

/// What the stimulus images of the samples are, by the file name the page shows them under.
pub(crate) type Images = BTreeMap<String, Stimulus>;

/// The samples of `rows` (picked trials of one run) with `file` the run's experiment, or why it could
/// not be rebuilt; images to write go into `images`.
pub(crate) fn samples(rows: Vec<TrialRow>, file: &Result<ExperimentFile, String>, images: &mut Images) -> Vec<Sample> {
    let rendering = file.as_ref().map_err(Clone::clone).and_then(|file| Renderer::new(file, &rows));
    rows.into_iter()
        .map(|row| {
            let mut sample = shown(&row);
            match &rendering {
                Ok(renderer) => renderer.render(&row, &mut sample, images),
                Err(why) => sample.check = PromptCheck::Unavailable { why: why.clone() },
            }
            sample
        })
        .collect()
}

/// The stored numbers of a trial, before its prompt is re-rendered.
fn shown(row: &TrialRow) -> Sample {
    let correct = row.correct_label.as_str();
    let wrong = if correct == "A" { "B" } else { "A" };
    // P(wrong answer) = p_wrong_ab × (P(A) + P(B)): the stored columns, read back.
    let p_wrong = row.p_wrong_ab.map(|p| p * row.mass_ab);
    let mut outcome = vec![
        ("correct answer", correct.to_owned()),
        (
            "confederates answered",
            if row.confederate_answers.is_empty() { "none (N = 0)".into() } else { row.confederate_answers.clone() },
        ),
        (
            "answer probabilities",
            format!(
                "P({correct}) = {} · P({wrong}) = {} · P(A) + P(B) = {}",
                probability(row.p_correct),
                p_wrong.map_or_else(|| "undefined".into(), probability),
                probability(row.mass_ab)
            ),
        ),
        ("p_wrong (full vocabulary)", probability(row.p_wrong_full)),
        ("p_wrong (A/B only)", row.p_wrong_ab.map_or_else(|| "undefined: no mass on A or B".into(), probability)),
        ("logits A · B", format!("{} · {}", logit(row.logit_a), logit(row.logit_b))),
    ];
    outcome.push(("image", row.image_id.clone()));
    let mut flags = Vec::new();
    if row.p_bound {
        let kind = if row.p_bound_kind.is_empty() { "upper" } else { row.p_bound_kind.as_str() };
        flags.push(format!("p_bound: {kind} (a probability is only a bound: left out of p_wrong by default)"));
    }
    if row.p_wrong_ab.is_none() {
        flags.push("no probability mass on A or B".into());
    }
    Sample {
        study: "conformity",
        model: row.model.clone(),
        run_id: row.run_id.clone(),
        unit: row.unit_id.clone(),
        condition: condition(row),
        check: PromptCheck::Unavailable { why: String::new() },
        messages: Vec::new(),
        outcome,
        raw_output: None,
        reasoning_output: None,
        allocation: Vec::new(),
        flags,
    }
}

/// The run's prompter and the units of the picked rows.
struct Renderer<'f> {
    file: &'f ExperimentFile,
    prompter: ConformityPrompter,
    units: HashMap<String, Unit>,
}

impl<'f> Renderer<'f> {
    fn new(file: &'f ExperimentFile, rows: &[TrialRow]) -> Result<Self, String> {
        let Experiment::Conformity(exp) = &file.experiment else {
            return Err(
                "the run's manifest describes a minimal-group experiment, but it stored conformity trials".into()
            );
        };
        let prompter = ConformityPrompter::load(file, exp).map_err(|e| format!("the prompt banks: {e}"))?;
        let wanted: BTreeSet<&str> = rows.iter().map(|r| r.unit_id.as_str()).collect();
        let units = expand(&file.experiment)
            .into_iter()
            .filter(|u| wanted.contains(u.key.id().as_str()))
            .map(|u| (u.key.id(), u))
            .collect();
        Ok(Renderer { file, prompter, units })
    }

    fn render(&self, row: &TrialRow, sample: &mut Sample, images: &mut Images) {
        let Experiment::Conformity(exp) = &self.file.experiment else { return };
        let unavailable = |why: String| PromptCheck::Unavailable { why };
        let Some(unit) = self.units.get(&row.unit_id) else {
            sample.check = unavailable(format!("the run's experiment has no unit `{}`", row.unit_id));
            return;
        };
        let UnitPlan::Conformity(trial) = &unit.plan else { return };
        let meta = &exp.experiment;
        let stimulus = match candidate_by_id(&meta.name, meta.seed, &exp.stimuli, &row.image_id) {
            Some(Ok(stimulus)) => stimulus,
            Some(Err(e)) => {
                return sample.check = unavailable(format!("image {} cannot be drawn again: {e}", row.image_id));
            }
            None => return sample.check = unavailable(format!("`{}` is not an image id herd draws", row.image_id)),
        };
        // The runner stores the stimulus's JSON: the image drawn again must be the one the trial showed.
        if serde_json::to_string(&stimulus).ok().as_deref() != Some(row.image_params.as_str()) {
            sample.flags.push(format!(
                "image {} drawn again differs from the stored image_params (the experiment's stimuli settings or herd changed)",
                row.image_id
            ));
        }
        let modality = match row.modality.parse::<Modality>() {
            Ok(m) => m,
            Err(e) => return sample.check = unavailable(format!("column modality: {e}")),
        };
        let prompt = match self
            .prompter
            .plan(&unit.key, trial, stimulus.correct)
            .and_then(|plan| self.prompter.render_plan(trial, &plan, &stimulus, modality))
        {
            Ok(p) => p,
            Err(e) => return sample.check = unavailable(format!("re-rendering the prompt: {e}")),
        };
        // Vision models saw the image; text models read its text rendering, which is in the prompt.
        let src = (modality == Modality::Vision).then(|| {
            let name = format!("{}.png", &sha256_hex(row.image_params.as_bytes())[..16]);
            images.entry(name.clone()).or_insert(stimulus);
            format!("samples/{name}")
        });
        sample.check = PromptCheck::of(&prompt, &row.prompt_hash);
        sample.messages = messages(&prompt, src.as_deref());
    }
}
