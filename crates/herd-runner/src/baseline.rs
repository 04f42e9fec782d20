//! The conformity baseline filter: a model's image pools hold only images it answers correctly with no
//! social pressure (N = 0). Candidates are drawn in index order (each from its own stream), scored in
//! fixed chunks and stored as `baseline_candidates` rows, so a resumed run reuses every score and ends
//! with the same pool. A pool takes the first accepted images in candidate order; it stops at the
//! experiment's `max_candidates` with what it has, and reports its acceptance rate.
//!
//! Through a batch file the chunks are answered later, so a pool is built over several sessions: each
//! chunk with every answer in the file is stored as a live chunk would be, and a chunk without answers
//! awaits the next import. Its candidates count as accepted at the pool's acceptance rate so far (all of
//! them before any is known), so one export asks for about as many candidates as the pool still needs;
//! the task's trials wait until every pool of the task is built.

use crate::trial::{answers, conformity_facts, score_prompt};
use crate::{Result, RunContext, RunnerError, TrialRows};
use herd_backend::{ConformityFacts, ScoreRequest, ScoreResult, request_name};
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

/// The pools of `task`: the general pool, then each difficulty level's when the design has that family.
fn task_pools(exp: &ConformityExperiment, task: Task) -> Vec<Pool> {
    let mut pools = vec![Pool::General];
    if exp.families.difficulty.is_some() {
        pools.extend((1..=difficulty_levels(exp, task)).map(Pool::Difficulty));
    }
    pools
}

/// The name every chunk of candidates the baseline filter could score goes by in a batch file: its first
/// candidate's unit (a chunk is stored, and answered, whole).
pub(crate) fn chunk_units(exp: &ConformityExperiment, chunk: usize) -> Vec<String> {
    let chunk = chunk.max(1) as u32;
    let mut names = Vec::new();
    for &task in &exp.stimuli.tasks {
        for pool in task_pools(exp, task) {
            names.extend(
                (0..exp.baseline_filter.max_candidates).step_by(chunk as usize).map(|i| candidate_unit(task, pool, i)),
            );
        }
    }
    names
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

/// A task's image pools, filtered; `None` when some pool awaits a batch file's answers (the chunks that
/// need them are written to its export), so the task's trials cannot be planned yet.
pub(crate) fn filtered_pools(
    run: &mut RunContext<'_, '_>,
    exp: &ConformityExperiment,
    task: Task,
    rule: &BaselineRule,
    prompter: &ConformityPrompter,
) -> Result<Option<ImagePools>> {
    let progress = run.progress;
    let stored: BTreeMap<String, BaselineCandidateRow> =
        run.sink.stored_baseline()?.into_iter().map(|r| (r.unit_id.clone(), r)).collect();
    let levels = difficulty_levels(exp, task);
    let per_level = difficulty_images_per_level(exp, task) as usize;
    let pools: Vec<(Pool, Need)> = task_pools(exp, task)
        .into_iter()
        .map(|pool| match pool {
            Pool::General => (pool, Need::PerAnswer(exp.stimuli.general_pool_size.div_ceil(2) as usize)),
            Pool::Difficulty(_) => (pool, Need::Total(per_level)),
        })
        .collect();
    let mut general = Vec::new();
    let mut difficulty = Vec::new();
    let mut task_waits = false;
    for (pool, need) in pools {
        let name = format!("baseline {task} {}", pool_name(pool));
        progress.message(format!("building {name} pool"));
        let mut accepted: Vec<Stimulus> = Vec::new();
        let mut scored = 0u32;
        let chunk = run.options.baseline_chunk.max(1) as u32;
        let limit = exp.baseline_filter.max_candidates;
        let mut start = 0;
        // Through a batch file: the accepted images as far as they can be foreseen (those known, and the
        // candidates awaiting answers at the acceptance rate so far), and the candidates that await.
        let mut outlook = Outlook::default();
        let mut failed = false;
        while start < limit && !need.met(if outlook.awaiting > 0 { &outlook.accepted } else { &accepted }) {
            let indices: Vec<u32> = (start..(start + chunk).min(limit)).collect();
            start += chunk;
            let stimuli = indices
                .iter()
                .map(|&i| candidate(&exp.experiment.name, exp.experiment.seed, task, &exp.stimuli, pool, i))
                .collect::<Result<Vec<_>, _>>()?;
            let units: Vec<String> = indices.iter().map(|&i| candidate_unit(task, pool, i)).collect();
            let candidates = Chunk { task, pool, levels, indices: &indices, stimuli: &stimuli, units: &units };
            let rows = if units.iter().all(|u| stored.contains_key(u)) {
                units.iter().map(|u| stored[u].clone()).collect()
            } else if run.respondent.batch_file().is_some() {
                match batch_candidates(run, exp, &candidates, rule, prompter)? {
                    Batched::Answered(rows) => {
                        run.sink.store(units.clone(), TrialRows { baseline: rows.clone(), ..TrialRows::default() })?;
                        rows
                    }
                    Batched::Awaiting => {
                        outlook.expect(&stimuli, scored, accepted.len());
                        continue;
                    }
                    // A refused answer: the pool cannot go past this chunk until it is answered again.
                    Batched::Refused => {
                        failed = true;
                        break;
                    }
                }
            } else {
                let rows = score_candidates(run, exp, &candidates, rule, prompter)?;
                run.sink.store(units.clone(), TrialRows { baseline: rows.clone(), ..TrialRows::default() })?;
                rows
            };
            for (stimulus, row) in stimuli.into_iter().zip(rows) {
                scored += 1;
                if row.accepted {
                    outlook.accepted.push(stimulus.clone());
                    accepted.push(stimulus);
                }
            }
        }
        if outlook.awaiting > 0 || failed {
            task_waits = true;
            run.summary.awaiting.baseline_candidates += outlook.awaiting;
            progress.println(format!(
                "{name}: {} candidates await answers from a batch file{}; the {task} trials wait for the pool",
                outlook.awaiting,
                if failed { " (and a chunk's answers were refused)" } else { "" }
            ));
            continue;
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
    Ok((!task_waits).then_some(ImagePools { task, general, difficulty }))
}

/// What a pool that awaits a batch file's answers will likely hold: the accepted images known, then the
/// awaited candidates taken as accepted at the pool's acceptance rate so far (every one, before any
/// answer is known), one in every 1/rate in candidate order.
#[derive(Default)]
struct Outlook {
    accepted: Vec<Stimulus>,
    awaiting: u64,
    /// The share of an accepted image carried to the next awaited candidate.
    credit: f64,
}

impl Outlook {
    fn expect(&mut self, stimuli: &[Stimulus], scored: u32, accepted: usize) {
        let rate = if scored == 0 { 1.0 } else { accepted as f64 / f64::from(scored) };
        for stimulus in stimuli {
            self.awaiting += 1;
            self.credit += rate;
            if self.credit >= 1.0 {
                self.credit -= 1.0;
                self.accepted.push(stimulus.clone());
            }
        }
    }
}

fn score_candidates(
    run: &mut RunContext<'_, '_>,
    exp: &ConformityExperiment,
    chunk: &Chunk<'_>,
    rule: &BaselineRule,
    prompter: &ConformityPrompter,
) -> Result<Vec<BaselineCandidateRow>> {
    let (requests, facts) = candidate_requests(run, exp, chunk, prompter)?;
    let results = crate::all_results(requests.len(), run.respondent.score(&requests, &facts))
        .map_err(|source| RunnerError::Backend { unit: chunk.units[0].clone(), source: Box::new(source) })?;
    Ok(candidate_rows(run, chunk, rule, results))
}

/// What a batch file holds for a chunk of candidates.
enum Batched {
    Answered(Vec<BaselineCandidateRow>),
    /// No answers yet: the chunk awaits the next import (and is written to the export).
    Awaiting,
    /// An answer was refused: the chunk's candidates are listed as failed.
    Refused,
}

fn batch_candidates(
    run: &mut RunContext<'_, '_>,
    exp: &ConformityExperiment,
    chunk: &Chunk<'_>,
    rule: &BaselineRule,
    prompter: &ConformityPrompter,
) -> Result<Batched> {
    let (requests, _) = candidate_requests(run, exp, chunk, prompter)?;
    let batch = run.respondent.batch_file().expect("asked through a batch file");
    let results = batch.score_each(&requests);
    if crate::awaiting(&results) {
        return Ok(Batched::Awaiting);
    }
    match crate::all_results(requests.len(), results.into_iter().collect()) {
        Ok(results) => Ok(Batched::Answered(candidate_rows(run, chunk, rule, results))),
        Err(error) => {
            run.summary.note_failure(chunk.units, &error);
            Ok(Batched::Refused)
        }
    }
}

/// A chunk's requests (each named after the chunk: its first candidate's unit and its place in it), and
/// the facts a simulated agent answers them from.
fn candidate_requests(
    run: &RunContext<'_, '_>,
    exp: &ConformityExperiment,
    chunk: &Chunk<'_>,
    prompter: &ConformityPrompter,
) -> Result<(Vec<ScoreRequest>, Vec<ConformityFacts>)> {
    let Chunk { task, pool, levels, indices, stimuli, units } = *chunk;
    let modality =
        if run.respondent.info().vision { herd_prompts::Modality::Vision } else { herd_prompts::Modality::Text };
    let mut requests = Vec::with_capacity(stimuli.len());
    let mut facts = Vec::with_capacity(stimuli.len());
    for (i, ((stimulus, &index), unit)) in stimuli.iter().zip(indices).zip(units).enumerate() {
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
        let (prompt, image) = score_prompt(prompter, &trial, &plan, stimulus, modality, None)?;
        let name = Some(request_name(&units[0], i));
        requests.push(ScoreRequest { image, name, ..ScoreRequest::new(prompt, answers()) });
        facts.push(conformity_facts(unit, &trial, &plan, stimulus, levels));
    }
    Ok((requests, facts))
}

fn candidate_rows(
    run: &RunContext<'_, '_>,
    chunk: &Chunk<'_>,
    rule: &BaselineRule,
    results: Vec<ScoreResult>,
) -> Vec<BaselineCandidateRow> {
    let Chunk { task, pool, indices, stimuli, units, .. } = *chunk;
    let model = run.respondent.info().model;
    let run_id = run.sink.run_id();
    stimuli
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
        .collect()
}
