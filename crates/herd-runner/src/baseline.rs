//! The conformity baseline filter: a model's image pools hold only images it answers correctly with no
//! social pressure (N = 0). Candidates are drawn in index order (each from its own stream), scored in
//! fixed chunks and stored as `baseline_candidates` rows, so a resumed run reuses every score and ends
//! with the same pool. A pool takes the first accepted images in candidate order; it stops at the
//! experiment's `max_candidates` with what it has, and reports its acceptance rate.

use crate::trial::{answers, conformity_facts, score_prompt};
use crate::{Result, RunContext, RunnerError, TrialRows};
use herd_backend::ScoreRequest;
use herd_design::{Answer, Cell, ConformityExperiment, ConformityTrial, Family, ImageSelection, Task, UnitKey};
use herd_design::{difficulty_images_per_level, difficulty_levels};
use herd_prompts::ConformityPrompter;
use herd_stimuli::{ImagePools, Pool, Stimulus, candidate};
use herd_store::BaselineCandidateRow;
use std::collections::BTreeMap;

/// When an image counts as answered correctly at N = 0.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BaselineRule {
    /// `false`: pools are the unfiltered candidates.
    pub enabled: bool,
    pub min_p_correct: f64,
    /// Read P(correct) / (P(A) + P(B)) instead of P(correct) over the whole vocabulary.
    pub two_way: bool,
}

impl BaselineRule {
    fn accepts(&self, p_correct: f64, p_correct_ab: Option<f64>) -> bool {
        let p = if self.two_way { p_correct_ab.unwrap_or(0.0) } else { p_correct };
        p >= self.min_p_correct
    }
}

fn pool_name(pool: Pool) -> String {
    match pool {
        Pool::General => "general".into(),
        Pool::Difficulty(level) => format!("d{level:02}"),
    }
}

fn candidate_unit(task: Task, pool: Pool, index: u32) -> String {
    format!("{}task={task}/pool={}#{index}", herd_store::SHARED_BY_SHARDS_PREFIX, pool_name(pool))
}

/// How many accepted images a pool needs: per correct answer for the general pool (trials ask for a
/// given correct answer), in total for a difficulty level (trials take slot i).
enum Need {
    PerAnswer(usize),
    Total(usize),
}

impl Need {
    fn met(&self, accepted: &[Stimulus]) -> bool {
        match *self {
            Need::PerAnswer(n) => {
                [Answer::A, Answer::B].iter().all(|&a| accepted.iter().filter(|s| s.correct == a).count() >= n)
            }
            Need::Total(n) => accepted.len() >= n,
        }
    }

    /// The pool: the first accepted images, in candidate order.
    fn take(&self, accepted: Vec<Stimulus>) -> Vec<Stimulus> {
        match *self {
            Need::PerAnswer(n) => {
                let mut count: BTreeMap<Answer, usize> = BTreeMap::new();
                accepted
                    .into_iter()
                    .filter(|s| {
                        let c = count.entry(s.correct).or_default();
                        *c += 1;
                        *c <= n
                    })
                    .collect()
            }
            Need::Total(n) => accepted.into_iter().take(n).collect(),
        }
    }

    fn wanted(&self) -> usize {
        match *self {
            Need::PerAnswer(n) => 2 * n,
            Need::Total(n) => n,
        }
    }
}

/// The N = 0 trial a candidate is scored with: the plain baseline prompt, the same in every family.
fn baseline_trial(task: Task, index: u32, correct: Answer) -> ConformityTrial {
    ConformityTrial {
        family: Family::GroupSize,
        level: None,
        task,
        n: 0,
        trial: index,
        image: ImageSelection::Balanced { correct },
    }
}

/// One chunk of a pool's candidates, scored in one request group.
struct Chunk<'c> {
    task: Task,
    pool: Pool,
    /// The task's difficulty levels (facts normalise the image's level by it).
    levels: u32,
    indices: &'c [u32],
    stimuli: &'c [Stimulus],
    units: &'c [String],
}

pub(crate) fn filtered_pools(
    run: &mut RunContext<'_, '_>,
    exp: &ConformityExperiment,
    task: Task,
    rule: &BaselineRule,
    prompter: &ConformityPrompter,
) -> Result<ImagePools> {
    let progress = run.progress;
    let stored: BTreeMap<String, BaselineCandidateRow> =
        run.sink.stored_baseline()?.into_iter().map(|r| (r.unit_id.clone(), r)).collect();
    let levels = difficulty_levels(exp, task);
    let mut pools: Vec<(Pool, Need)> =
        vec![(Pool::General, Need::PerAnswer(exp.stimuli.general_pool_size.div_ceil(2) as usize))];
    if exp.families.difficulty.is_some() {
        let per_level = difficulty_images_per_level(exp, task) as usize;
        pools.extend((1..=levels).map(|level| (Pool::Difficulty(level), Need::Total(per_level))));
    }
    let mut general = Vec::new();
    let mut difficulty = Vec::new();
    for (pool, need) in pools {
        let name = format!("baseline {task} {}", pool_name(pool));
        progress.message(format!("building {name} pool"));
        let mut accepted: Vec<Stimulus> = Vec::new();
        let mut scored = 0u32;
        let chunk = run.options.baseline_chunk.max(1) as u32;
        let limit = exp.baseline_filter.max_candidates;
        let mut start = 0;
        while start < limit && !need.met(&accepted) {
            let indices: Vec<u32> = (start..(start + chunk).min(limit)).collect();
            start += chunk;
            let stimuli = indices
                .iter()
                .map(|&i| candidate(&exp.experiment.name, exp.experiment.seed, task, &exp.stimuli, pool, i))
                .collect::<Result<Vec<_>, _>>()?;
            let units: Vec<String> = indices.iter().map(|&i| candidate_unit(task, pool, i)).collect();
            let rows = if units.iter().all(|u| stored.contains_key(u)) {
                units.iter().map(|u| stored[u].clone()).collect()
            } else {
                let candidates = Chunk { task, pool, levels, indices: &indices, stimuli: &stimuli, units: &units };
                let rows = score_candidates(run, exp, &candidates, rule, prompter)?;
                run.sink.store(units.clone(), TrialRows { baseline: rows.clone(), ..TrialRows::default() })?;
                rows
            };
            for (stimulus, row) in stimuli.into_iter().zip(rows) {
                scored += 1;
                if row.accepted {
                    accepted.push(stimulus);
                }
            }
        }
        let n_accepted = accepted.len();
        let chosen = need.take(accepted);
        let report = serde_json::json!({
            "scored": scored,
            "accepted": n_accepted,
            "acceptance_rate": if scored == 0 { 0.0 } else { n_accepted as f64 / f64::from(scored) },
            "pool_size": chosen.len(),
            "wanted": need.wanted(),
            "complete": need.met(&chosen),
            "threshold": rule.min_p_correct,
            "measure": if rule.two_way { "ab" } else { "full" },
        });
        progress.println(format!(
            "{name}: {n_accepted} of {scored} candidates accepted ({:.0}%), pool {}/{}{}",
            100.0 * report["acceptance_rate"].as_f64().unwrap_or(0.0),
            chosen.len(),
            need.wanted(),
            if need.met(&chosen) { "" } else { " — stopped at max_candidates" }
        ));
        run.summary.notes.insert(format!("baseline/{task}/{}", pool_name(pool)), report);
        match pool {
            Pool::General => general = chosen,
            Pool::Difficulty(_) => difficulty.push(chosen),
        }
    }
    Ok(ImagePools { task, general, difficulty })
}

fn score_candidates(
    run: &mut RunContext<'_, '_>,
    exp: &ConformityExperiment,
    chunk: &Chunk<'_>,
    rule: &BaselineRule,
    prompter: &ConformityPrompter,
) -> Result<Vec<BaselineCandidateRow>> {
    let Chunk { task, pool, levels, indices, stimuli, units } = *chunk;
    let info = run.respondent.info();
    let model = info.model;
    let modality = if info.vision { herd_prompts::Modality::Vision } else { herd_prompts::Modality::Text };
    let mut requests = Vec::with_capacity(stimuli.len());
    let mut facts = Vec::with_capacity(stimuli.len());
    for ((stimulus, &index), unit) in stimuli.iter().zip(indices).zip(units) {
        let trial = baseline_trial(task, index, stimulus.correct);
        let key = UnitKey {
            experiment: exp.experiment.name.clone(),
            master_seed: exp.experiment.seed,
            cell: Cell {
                family: "baseline".into(),
                factors: vec![("task".into(), task.to_string()), ("pool".into(), pool_name(pool))],
            },
            seed: index,
            unit: 0,
        };
        let plan = prompter.plan(&key, &trial, stimulus.correct)?;
        let (prompt, image) = score_prompt(prompter, &trial, &plan, stimulus, modality)?;
        requests.push(ScoreRequest { image, ..ScoreRequest::new(prompt, answers()) });
        facts.push(conformity_facts(unit, &trial, &plan, stimulus, levels));
    }
    let results = crate::all_results(requests.len(), run.respondent.score(&requests, &facts))
        .map_err(|source| RunnerError::Backend { unit: units[0].clone(), source: Box::new(source) })?;
    let run_id = run.sink.run_id();
    Ok(stimuli
        .iter()
        .zip(indices)
        .zip(units)
        .zip(results)
        .map(|(((stimulus, &index), unit), result)| {
            let correct = stimulus.correct.as_str();
            let p_correct = result.answers.get(correct).map_or(0.0, |a| a.p);
            let p_correct_ab = (result.mass > 0.0).then(|| p_correct / result.mass);
            BaselineCandidateRow {
                run_id: run_id.clone(),
                unit_id: unit.clone(),
                model: model.clone(),
                task: task.to_string(),
                pool: pool_name(pool),
                candidate: i64::from(index),
                image_id: stimulus.id.clone(),
                correct_label: correct.to_owned(),
                p_correct,
                p_correct_ab,
                logit_correct: result.answers.get(correct).map_or(f64::NAN, |a| f64::from(a.logit)),
                accepted: rule.accepts(p_correct, p_correct_ab),
            }
        })
        .collect())
}
