//! Minimal-group samples: each picked decider's prompt re-rendered as the runner rendered it (the
//! society drawn again, herd-prompts' `allocation_prompts`) and checked against the stored
//! `prompt_hash`, beside what the model wrote and the allocation parsed from it.

use std::collections::{BTreeSet, HashMap};

use herd_design::{Experiment, ExperimentFile, Unit, UnitPlan, expand};
use herd_prompts::{AllocationBank, AllocationPrompt, GroupNames, allocation_prompts, draw_society};

use crate::rows::{DeciderRow, DyadRow};
use crate::sample::{Allocated, PromptCheck, Sample};

/// The factors of a decider's condition, in the order the page shows them.
pub(crate) fn condition(row: &DeciderRow) -> Vec<(&'static str, String)> {
    vec![
        ("model", row.model.clone()),
        ("reasoning", row.reasoning.clone()),
        ("instrument", row.instrument.clone()),
        ("labels", row.labels.clone()),
        ("m", row.m.to_string()),
        ("swap_pass", row.swap_pass.clone()),
        ("decider", if row.minority_decider { "minority" } else { "majority" }.to_owned()),
    ]
}

/// The key that spreads the picks: one decider of one society, whatever its reasoning, instrument,
/// labels and pass (they share the society).
pub(crate) fn spread(row: &DeciderRow) -> String {
    format!("{}\u{0}{}\u{0}{}\u{0}{}", row.run_id, row.m, row.seed, row.decider)
}

/// The samples of `rows` (picked deciders of one run, `dyads` all of its allocations) with `file` the
/// run's experiment, or why it could not be rebuilt.
pub(crate) fn samples(rows: Vec<DeciderRow>, dyads: &[DyadRow], file: &Result<ExperimentFile, String>) -> Vec<Sample> {
    let wanted: BTreeSet<(&str, i64)> = rows.iter().map(|r| (r.unit_id.as_str(), r.decider)).collect();
    let mut allocations: HashMap<(&str, i64), Vec<&DyadRow>> = HashMap::new();
    for d in dyads.iter().filter(|d| wanted.contains(&(d.unit_id.as_str(), d.decider))) {
        allocations.entry((d.unit_id.as_str(), d.decider)).or_default().push(d);
    }
    let rendering = file.as_ref().map_err(Clone::clone).and_then(|file| Renderer::new(file, &rows));
    rows.iter()
        .map(|row| {
            let mut sample = shown(row, allocations.remove(&(row.unit_id.as_str(), row.decider)).unwrap_or_default());
            match &rendering {
                Ok(renderer) => renderer.render(row, &mut sample),
                Err(why) => sample.check = PromptCheck::Unavailable { why: why.clone() },
            }
            sample
        })
        .collect()
}

fn shown(row: &DeciderRow, mut allocation: Vec<&DyadRow>) -> Sample {
    allocation.sort_by(|a, b| a.target_position.total_cmp(&b.target_position));
    let mut outcome = vec![
        (
            "decider",
            format!(
                "{} (agent {}, {} group {})",
                row.decider_id,
                row.decider,
                if row.minority_decider { "minority" } else { "majority" },
                row.decider_group
            ),
        ),
        ("parse status", row.parse_status.clone()),
        ("finish reason", if row.finish_reason.is_empty() { "not recorded".into() } else { row.finish_reason.clone() }),
    ];
    if row.labels == "hidden" {
        outcome.push(("groups", "hidden from the model: the names shown are the society's latent groups".into()));
    }
    let mut flags = Vec::new();
    if row.parse_status != "ok" {
        flags.push(format!("parse: {}", row.parse_status));
    }
    if row.filled {
        flags.push("filled: the output was unusable, every target got an equal share".into());
    }
    flags.extend(row.qc_flags.split(',').filter(|f| !f.is_empty()).map(|f| format!("qc: {f}")));
    if row.finish_reason == "length" {
        flags.push("finish: length (cut at max_new_tokens)".into());
    }
    Sample {
        study: "minimal_group",
        model: row.model.clone(),
        run_id: row.run_id.clone(),
        unit: format!("{}/{}", row.unit_id, row.decider_id),
        condition: condition(row),
        check: PromptCheck::Unavailable { why: String::new() },
        messages: Vec::new(),
        outcome,
        raw_output: Some(row.raw_output.clone()),
        reasoning_output: row.reasoning_output.clone(),
        allocation: allocation
            .iter()
            .map(|d| Allocated {
                target: d.target_id.clone(),
                group: d.target_group.clone(),
                same_group: d.same_group,
                points: d.points,
            })
            .collect(),
        flags,
    }
}

/// The run's banks and the prompts of every society pass a picked decider belongs to.
struct Renderer {
    prompts: HashMap<String, Result<Vec<AllocationPrompt>, String>>,
}

impl Renderer {
    fn new(file: &ExperimentFile, rows: &[DeciderRow]) -> Result<Self, String> {
        let Experiment::MinimalGroup(exp) = &file.experiment else {
            return Err("the run's manifest describes a conformity experiment, but it stored allocations".into());
        };
        let bank =
            AllocationBank::load(&file.resolve(&exp.prompts.bank)).map_err(|e| format!("the prompt bank: {e}"))?;
        let names =
            GroupNames::load(&file.resolve(&exp.society.group_names)).map_err(|e| format!("the group names: {e}"))?;
        let wanted: BTreeSet<&str> = rows.iter().map(|r| r.unit_id.as_str()).collect();
        let units: Vec<Unit> =
            expand(&file.experiment).into_iter().filter(|u| wanted.contains(u.key.id().as_str())).collect();
        let prompts = units
            .iter()
            .filter_map(|unit| {
                let UnitPlan::Society(run) = &unit.plan else { return None };
                let society = draw_society(exp, &unit.key, run, &names);
                let prompts = allocation_prompts(exp, &bank, &society, &unit.key, run)
                    .map_err(|e| format!("re-rendering the prompts: {e}"));
                Some((unit.key.id(), prompts))
            })
            .collect();
        Ok(Renderer { prompts })
    }

    fn render(&self, row: &DeciderRow, sample: &mut Sample) {
        let prompt = match self.prompts.get(&row.unit_id) {
            None => Err(format!("the run's experiment has no unit `{}`", row.unit_id)),
            Some(Err(why)) => Err(why.clone()),
            Some(Ok(prompts)) => prompts
                .iter()
                .find(|p| p.decider == row.decider_id)
                .ok_or_else(|| format!("the society drawn again has no decider `{}`", row.decider_id)),
        };
        match prompt {
            Ok(p) => {
                sample.check = PromptCheck::of(&p.prompt, &row.prompt_hash);
                sample.messages = crate::sample::messages(&p.prompt, None);
            }
            Err(why) => sample.check = PromptCheck::Unavailable { why },
        }
    }
}
