//! The conformity study: baseline pools per task, then every trial scored at the answer position.

use crate::baseline::{BaselineRule, filtered_pools};
use crate::pipeline::{Flow, Stage};
use crate::progress::Progress;
use crate::trial::{RenderedImages, answers, conformity_facts, score_prompt};
use crate::{FailureGuard, Result, RunContext, RunSummary, RunnerError, TrialRows, TrialSink};
use herd_backend::{ConformityFacts, ScoreBound, ScoreRequest, ScoreResult, SharedBackend, request_name};
use herd_design::{ConformityExperiment, ConformityTrial, Family, Task, Unit, UnitPlan};
use herd_prompts::{ConformityPlan, ConformityPrompter, Modality};
use herd_stimuli::{ImagePools, Stimulus};
use herd_store::ConformityTrialRow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

fn trial_of(unit: &Unit) -> &ConformityTrial {
    match &unit.plan {
        UnitPlan::Conformity(trial) => trial,
        UnitPlan::Society(_) => unreachable!("a conformity experiment expands to conformity units"),
    }
}

/// Units grouped by shard group, in order of first appearance: the runner's batches.
pub(crate) fn batches(units: Vec<Unit>) -> Vec<Vec<Unit>> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<Unit>> = BTreeMap::new();
    for unit in units {
        let group = unit.shard_group();
        if !groups.contains_key(&group) {
            order.push(group.clone());
        }
        groups.entry(group).or_default().push(unit);
    }
    order.into_iter().map(|g| groups.remove(&g).expect("grouped above")).collect()
}

/// A trial ready to score.
struct Prepared<'a> {
    unit: &'a Unit,
    stimulus: &'a Stimulus,
    plan: ConformityPlan,
    request: ScoreRequest,
    facts: ConformityFacts,
}

/// What every row of a run shares.
struct RowLabels<'a> {
    run_id: &'a str,
    experiment: &'a str,
    model: &'a str,
    backend: &'a str,
    modality: Modality,
}

pub(crate) fn run(run: &mut RunContext<'_, '_>, exp: &ConformityExperiment, units: Vec<Unit>) -> Result<()> {
    let prompter = ConformityPrompter::load(run.file, exp)?;
    let modality = if run.respondent.info().vision { Modality::Vision } else { run.options.modality };
    let progress = run.progress;
    let mut pending: Vec<Unit> = units.into_iter().filter(|u| !run.sink.is_stored(&u.key.id())).collect();
    progress.set_total(pending.len() as u64);
    let mut per_family: BTreeMap<String, u64> = BTreeMap::new();
    for unit in &pending {
        *per_family.entry(unit.key.cell.family.clone()).or_default() += 1;
    }
    for (family, n) in &per_family {
        progress.family(family, *n);
    }

    let tasks: BTreeSet<Task> = pending.iter().map(|u| trial_of(u).task).collect();
    let rule = run.options.baseline_override.clone().unwrap_or(BaselineRule {
        enabled: true,
        min_p_correct: exp.baseline_filter.min_p_correct,
        two_way: false,
    });
    let mut pools: BTreeMap<Task, ImagePools> = BTreeMap::new();
    for task in tasks {
        let pool = if exp.baseline_filter.enabled && rule.enabled {
            filtered_pools(run, exp, task, &rule, &prompter)?
        } else {
            Some(ImagePools::preview(exp, task)?)
        };
        pools.extend(pool.map(|p| (task, p)));
    }
    progress.message("");
    // Through a batch file, a task whose pools await answers cannot have its trials planned yet.
    pending.retain(|unit| {
        let ready = pools.contains_key(&trial_of(unit).task);
        if !ready {
            run.summary.awaiting.after_baseline += 1;
            progress.advance(&unit.key.cell.family, 1);
        }
        ready
    });

    let info = run.respondent.info();
    let run_id = run.sink.run_id();
    let labels = RowLabels {
        run_id: &run_id,
        experiment: &exp.experiment.name,
        model: &info.model,
        backend: &info.backend,
        modality,
    };
    let guard = FailureGuard::new(run.options.max_consecutive_failures);
    let batches = batches(pending);
    let images = RenderedImages::new();
    let draw = Draw { pools: &pools, prompter: &prompter, modality, images: &images };
    let local = run.respondent.batch_file().is_none() && run.respondent.shared().is_none();
    let mut stage = Pipelined {
        batches: batches.iter(),
        draw,
        labels,
        sink: &mut *run.sink,
        summary: &mut *run.summary,
        progress,
        guard,
        stopped: None,
    };
    if local {
        // `batch_units` batches per call. A text model scores as many images' trials together (its packed
        // prefix tree keeps each image's shared prefix); a vision model shares computation only within
        // one image, so it scores one image's trials per call.
        let batch_units = run.options.batch_units.max(1);
        let images_per_call = if info.vision { 1 } else { batch_units };
        let respondent = &mut run.respondent;
        crate::pipeline::run_together(&mut stage, batch_units, |batches| {
            let trials: Vec<&Prepared<'_>> = batches.iter().flatten().collect();
            score_by_image(respondent, &trials, images_per_call)
        })?;
    } else if let Some(backend) = run.respondent.batch_file() {
        // A batch file in plan order.
        crate::pipeline::run_in_order(&mut stage, backend)?;
    } else if let Some(backend) = run.respondent.shared() {
        // Servers with many batches in flight.
        let throughput = crate::pipeline::run(&mut stage, backend, progress)?;
        crate::record_throughput(stage.summary, &throughput, backend);
    }
    stage.stopped.map_or(Ok(()), Err)
}

/// Scores `trials` through a model here, `images_per_call` images' trials per call (requests that show
/// the same image share the longest prompt prefix, so each image's trials go to one call together);
/// results in `trials`' order. A failed call fails them all.
fn score_by_image(
    respondent: &mut crate::Respondent<'_>,
    trials: &[&Prepared<'_>],
    images_per_call: usize,
) -> herd_backend::Result<Vec<ScoreResult>> {
    let images: Vec<Vec<usize>> = by_image(trials.iter().map(|p| p.stimulus.id.as_str())).into_values().collect();
    let mut results: Vec<Option<ScoreResult>> = vec![None; trials.len()];
    for indices in images.chunks(images_per_call.max(1)).map(<[Vec<usize>]>::concat) {
        let requests: Vec<ScoreRequest> = indices.iter().map(|&i| trials[i].request.clone()).collect();
        let facts: Vec<ConformityFacts> = indices.iter().map(|&i| trials[i].facts.clone()).collect();
        let scores = crate::all_results(requests.len(), respondent.score(&requests, &facts))?;
        for (&i, score) in indices.iter().zip(scores) {
            results[i] = Some(score);
        }
    }
    Ok(results.into_iter().map(|r| r.expect("every trial is in one image's group")).collect())
}

/// The indices of trials showing `images` (each trial's image id, in order), grouped by image (in image
/// order).
fn by_image<'p>(images: impl Iterator<Item = &'p str>) -> BTreeMap<&'p str, Vec<usize>> {
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, image) in images.enumerate() {
        groups.entry(image).or_default().push(i);
    }
    groups
}

/// What turns a batch of units into requests: the pools their images come from and the prompter.
#[derive(Clone, Copy)]
struct Draw<'d> {
    pools: &'d BTreeMap<Task, ImagePools>,
    prompter: &'d ConformityPrompter,
    modality: Modality,
    images: &'d RenderedImages,
}

impl<'d> Draw<'d> {
    /// The batch's trials ready to score; units without an image that passed the baseline filter are
    /// recorded as skipped.
    fn prepare<'a>(&self, batch: &'a [Unit], summary: &mut RunSummary, progress: &Progress) -> Result<Vec<Prepared<'a>>>
    where
        'd: 'a,
    {
        let mut prepared = Vec::with_capacity(batch.len());
        for unit in batch {
            let trial = trial_of(unit);
            let id = unit.key.id();
            let pool = &self.pools[&trial.task];
            let Some(stimulus) = pool.select(&unit.key, trial) else {
                let reason =
                    format!("no {} image with the needed correct answer passed the baseline filter", trial.task);
                summary.skip(reason, &id, false);
                progress.advance(&unit.key.cell.family, 1);
                continue;
            };
            let plan = self.prompter.plan(&unit.key, trial, stimulus.correct)?;
            let (prompt, image) =
                score_prompt(self.prompter, trial, &plan, stimulus, self.modality, Some(self.images))?;
            let levels = pool.difficulty.len() as u32;
            let facts = conformity_facts(&id, trial, &plan, stimulus, levels);
            let name = Some(request_name(&id, 0));
            let request = ScoreRequest { image, name, ..ScoreRequest::new(prompt, answers()) };
            prepared.push(Prepared { unit, stimulus, plan, request, facts });
        }
        Ok(prepared)
    }
}

/// The conformity study as pipeline stages (through servers, a batch file or a model here): shard groups
/// drawn as slots free, each trial's unit stored when its request succeeds and failed alone when it does not.
struct Pipelined<'a, 'r> {
    batches: std::slice::Iter<'a, Vec<Unit>>,
    draw: Draw<'a>,
    labels: RowLabels<'a>,
    sink: &'r mut dyn TrialSink,
    summary: &'r mut RunSummary,
    progress: &'a Progress,
    guard: FailureGuard,
    /// Why the run stopped (failures in a row), once it has.
    stopped: Option<RunnerError>,
}

impl<'a> Stage for Pipelined<'a, '_> {
    type Batch = Vec<Prepared<'a>>;
    type Output = ScoreResult;

    fn next(&mut self) -> Result<Option<Self::Batch>> {
        for batch in self.batches.by_ref() {
            let prepared = self.draw.prepare(batch, self.summary, self.progress)?;
            if !prepared.is_empty() {
                return Ok(Some(prepared));
            }
        }
        Ok(None)
    }

    fn requests(batch: &Self::Batch) -> usize {
        batch.len()
    }

    fn send(backend: &dyn SharedBackend, batch: &Self::Batch) -> Vec<herd_backend::Result<ScoreResult>> {
        // One call per image (its trials share the prompt's start, so the backend keeps them on one
        // server), the images of a batch at once.
        let groups: Vec<Vec<usize>> = by_image(batch.iter().map(|p| p.stimulus.id.as_str())).into_values().collect();
        let score = |indices: &Vec<usize>| {
            let requests: Vec<ScoreRequest> = indices.iter().map(|&i| batch[i].request.clone()).collect();
            backend.score_each(&requests)
        };
        let per_group: Vec<Vec<herd_backend::Result<ScoreResult>>> = if groups.len() == 1 {
            vec![score(&groups[0])]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = groups.iter().map(|g| scope.spawn(|| score(g))).collect();
                handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
            })
        };
        let mut results: Vec<Option<herd_backend::Result<ScoreResult>>> = batch.iter().map(|_| None).collect();
        for (indices, group) in groups.iter().zip(per_group) {
            for (&i, result) in indices.iter().zip(group) {
                results[i] = Some(result);
            }
        }
        results.into_iter().map(|r| r.unwrap_or_else(|| Err(crate::pipeline::no_result()))).collect()
    }

    fn tokens(output: &ScoreResult) -> usize {
        output.prompt_tokens + 1
    }

    fn commit(
        &mut self,
        batch: Self::Batch,
        results: Vec<herd_backend::Result<ScoreResult>>,
        elapsed: Duration,
    ) -> Result<Flow> {
        let latency = elapsed.as_secs_f64() / batch.len().max(1) as f64;
        let (mut stored, mut rows, mut failed, mut failure) = (Vec::new(), Vec::new(), Vec::new(), None);
        let mut results = results.into_iter();
        for p in &batch {
            match results.next().unwrap_or_else(|| Err(crate::pipeline::no_result())) {
                Ok(score) => {
                    rows.push(trial_row(p, &score, latency, &self.labels)?);
                    stored.push(p.unit.key.id());
                }
                // Its answer is not in the batch file yet: the unit awaits the next import.
                Err(error) if crate::is_pending(&error) => self.summary.awaiting.units += 1,
                Err(error) => {
                    failed.push(p.unit.key.id());
                    failure.get_or_insert(error);
                }
            }
            self.progress.advance(&p.unit.key.cell.family, 1);
        }
        if !stored.is_empty() {
            let n = stored.len() as u64;
            self.sink.store(stored, TrialRows { conformity: rows, ..TrialRows::default() })?;
            self.summary.units_run += n;
        }
        let Some(error) = failure else {
            self.guard.success();
            return Ok(Flow::Go);
        };
        if self.stopped.is_some() {
            // Batches that were in flight when the run stopped: their failures are listed, nothing more.
            self.summary.failed.extend(failed);
            return Ok(Flow::Stop);
        }
        match self.guard.record(&failed, error, self.summary) {
            Ok(()) => Ok(Flow::Go),
            Err(stop) => {
                self.stopped = Some(stop);
                Ok(Flow::Stop)
            }
        }
    }
}

fn trial_row(
    p: &Prepared<'_>,
    score: &ScoreResult,
    latency: f64,
    labels: &RowLabels<'_>,
) -> Result<ConformityTrialRow> {
    let RowLabels { run_id, experiment, model, backend, modality } = *labels;
    let trial = trial_of(p.unit);
    let correct = p.plan.correct;
    let wrong = correct.other();
    let get = |answer: herd_design::Answer| score.answers.get(answer.as_str());
    let (p_correct, p_wrong) = (get(correct).map_or(0.0, |a| a.p), get(wrong).map_or(0.0, |a| a.p));
    let logit = |answer| get(answer).map_or(f64::NEG_INFINITY, |a| f64::from(a.logit));
    // Two upper bounds (both answers outside a server's top-k) are each the whole mass left out, so
    // their sum may pass 1; the mass of A and B together is at most 1, which is still an upper bound.
    let mass_ab = (p_correct + p_wrong).min(1.0);
    let bounds = [correct, wrong].map(|a| get(a).map_or(ScoreBound::Exact, |s| s.bound));
    let bound = if bounds.contains(&ScoreBound::Upper) {
        ScoreBound::Upper
    } else if bounds.contains(&ScoreBound::Lower) {
        ScoreBound::Lower
    } else {
        ScoreBound::Exact
    };
    let token_ids = score
        .answers
        .iter()
        .map(|(answer, s)| format!("{answer}:{}", s.token_ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
        .collect::<Vec<_>>()
        .join(" ");
    let image_params =
        serde_json::to_string(p.stimulus).map_err(|e| RunnerError::Plan(format!("image {}: {e}", p.stimulus.id)))?;
    let wrong_replies = p.plan.replies.iter().filter(|r| r.answer != correct).count();
    Ok(ConformityTrialRow {
        run_id: run_id.to_owned(),
        unit_id: p.unit.key.id(),
        experiment: experiment.to_owned(),
        model: model.to_owned(),
        backend: backend.to_owned(),
        modality: modality.as_str().to_owned(),
        task: trial.task.to_string(),
        family: trial.family.to_string(),
        level: trial.level.clone(),
        n: i64::from(trial.n),
        seed: i64::from(trial.trial),
        paraphrase: (trial.family == Family::Normative).then(|| trial.trial.to_string()),
        confederate_answers: p.plan.confederate_answers(),
        wrong_replies: wrong_replies as i64,
        correct_label: correct.as_str().to_owned(),
        image_id: p.stimulus.id.clone(),
        image_params,
        difficulty_level: p.stimulus.difficulty_level.map(i64::from),
        difficulty_index: p.stimulus.difficulty_index,
        prompt_hash: p.request.prompt.hash(),
        p_correct,
        p_wrong_full: 1.0 - p_correct,
        p_wrong_ab: (mass_ab > 0.0).then(|| p_wrong / mass_ab),
        logit_a: logit(herd_design::Answer::A),
        logit_b: logit(herd_design::Answer::B),
        mass_ab,
        p_bound: bound.is_bound(),
        p_bound_kind: bound.as_str().to_owned(),
        answer_token_ids: token_ids,
        prompt_tokens: score.prompt_tokens as i64,
        reused_tokens: score.reused_tokens as i64,
        latency_s: latency,
    })
}
