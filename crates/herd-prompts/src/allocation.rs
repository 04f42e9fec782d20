//! Minimal-group allocation trials: the society (who is in the minority, the group names) and the prompt
//! each of its deciders sees.

use crate::bank::{AllocationBank, GroupNames, PromptError};
use crate::chat::{ChatPrompt, Part};
use crate::fill::fill;
use herd_design::rand::Rng;
use herd_design::rand::seq::{IndexedRandom, SliceRandom};
use herd_design::{Labels, MinimalGroupExperiment, Reasoning, RosterOrder, SocietyRun, UnitKey, factor};
use serde::Serialize;

/// One society: agent ids, who carries the minority label, and the group names of this pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Society {
    pub ids: Vec<String>,
    pub minority: Vec<bool>,
    pub minority_name: String,
    pub majority_name: String,
}

impl Society {
    pub fn group_name(&self, index: usize) -> &str {
        if self.minority[index] { &self.minority_name } else { &self.majority_name }
    }
}

/// Draws a society. Membership and the name pair come from streams keyed by minority size and seed only,
/// so the visible and hidden arms, both instruments, both reasoning modes and both passes of a seed share
/// one society; the swap pass exchanges the names.
pub fn draw_society(
    experiment: &MinimalGroupExperiment,
    key: &UnitKey,
    run: &SocietyRun,
    names: &GroupNames,
) -> Society {
    let size = experiment.society.size as usize;
    let mut order: Vec<usize> = (0..size).collect();
    order.shuffle(&mut key.stream_over(&[factor::MINORITY_SIZE], "membership").rng());
    let mut minority = vec![false; size];
    for &i in order.iter().take(run.minority_size as usize) {
        minority[i] = true;
    }
    let mut rng = key.stream_over(&[factor::MINORITY_SIZE], "group-names").rng();
    let pair = names.pairs.choose(&mut rng).cloned().unwrap_or_else(|| ["X".into(), "Y".into()]);
    let first_to_minority = rng.random_bool(0.5) != run.swapped;
    let (minority_name, majority_name) =
        if first_to_minority { (pair[0].clone(), pair[1].clone()) } else { (pair[1].clone(), pair[0].clone()) };
    let width = experiment.society.id_width as usize;
    let ids = (1..=size).map(|i| format!("{}{i:0width$}", experiment.society.id_prefix)).collect();
    Society { ids, minority, minority_name, majority_name }
}

/// A participant as one decider sees it, with its 1-based position in the presented roster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RosterEntry {
    pub id: String,
    pub minority: bool,
    pub position: u32,
}

/// The prompt of one decider of a society.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationPrompt {
    pub decider: String,
    pub minority_decider: bool,
    pub roster: Vec<RosterEntry>,
    pub reasoning: Reasoning,
    pub prompt: ChatPrompt,
}

/// The prompts of all deciders of a society, in agent order (one generation batch).
pub fn allocation_prompts(
    experiment: &MinimalGroupExperiment,
    bank: &AllocationBank,
    society: &Society,
    key: &UnitKey,
    run: &SocietyRun,
) -> Result<Vec<AllocationPrompt>, PromptError> {
    let wording = bank.instrument(&run.instrument)?;
    let visible = run.labels == Labels::Visible;
    let size = society.ids.len();
    let pool = experiment.society.pool.to_string();
    let (size_text, others_text) = (size.to_string(), (size - 1).to_string());
    (0..size)
        .map(|decider| {
            let mut others: Vec<usize> = (0..size).filter(|&i| i != decider).collect();
            if experiment.society.roster_order == RosterOrder::Shuffled {
                let purpose = format!("roster/{}", society.ids[decider]);
                others.shuffle(&mut key.stream_over(&[factor::MINORITY_SIZE], &purpose).rng());
            }
            let decider_id = society.ids[decider].as_str();
            let decider_values = [
                ("decider", decider_id),
                ("society_size", size_text.as_str()),
                ("others", others_text.as_str()),
                ("pool", pool.as_str()),
                ("group", society.group_name(decider)),
            ];
            let fill_with = |template: &str| fill(template, &decider_values);
            let mut lines = vec![fill_with(&wording.intro)?];
            if visible {
                lines.push(fill_with(&wording.own_group)?);
            }
            lines.push(fill_with(&wording.task)?);
            if visible {
                lines.push(fill_with(&wording.label_note)?);
            }
            lines.push(String::new());
            lines.push(fill_with(&wording.roster_header)?);
            let item = if visible { &wording.roster_item_visible } else { &wording.roster_item_hidden };
            let mut roster = Vec::with_capacity(others.len());
            for (position, &other) in others.iter().enumerate() {
                let id = society.ids[other].as_str();
                // `group` here is the listed participant's group, not the decider's.
                lines.push(fill(item, &[("id", id), ("group", society.group_name(other))])?);
                roster.push(RosterEntry {
                    id: id.to_owned(),
                    minority: society.minority[other],
                    position: position as u32 + 1,
                });
            }
            lines.push(String::new());
            lines.push(fill_with(&wording.answer_format)?);
            Ok(AllocationPrompt {
                decider: decider_id.to_owned(),
                minority_decider: society.minority[decider],
                roster,
                reasoning: run.reasoning,
                prompt: ChatPrompt::user(vec![Part::Text { text: lines.join("\n") }]),
            })
        })
        .collect()
}
