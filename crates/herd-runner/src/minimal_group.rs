//! The minimal-group study: each society pass is one generation batch of its 20 deciders (a model here
//! decodes `RunOptions::batch_units` passes as one batch).

use crate::pipeline::{Flow, Stage};
use crate::progress::Progress;
use crate::{FailureGuard, Result, RunContext, RunOptions, RunSummary, RunnerError, TrialRows, TrialSink, seed_of};
use herd_backend::{
    AllocationFacts, EffectiveSampling, GenerateRequest, Generation, SamplingOverrides, SharedBackend,
    allocation_schema, request_name, resolve_sampling,
};
use herd_design::{Labels, MinimalGroupExperiment, SocietyRun, Unit, UnitPlan};
use herd_parse::{ParseStatus, Roster, parse_allocation, strip_reasoning};
use herd_prompts::{AllocationBank, AllocationPrompt, GroupNames, Society, allocation_prompts, draw_society};
use herd_store::{AllocationDeciderRow, AllocationDyadRow};
use std::time::Duration;

fn society_of(unit: &Unit) -> &SocietyRun {
    match &unit.plan {
        UnitPlan::Society(run) => run,
        UnitPlan::Conformity(_) => unreachable!("a minimal-group experiment expands to society units"),
    }
}

/// Labels the columns of one society pass share.
struct PassLabels<'a> {
    run_id: &'a str,
    unit_id: String,
    experiment: &'a str,
    model: &'a str,
    backend: &'a str,
    run: &'a SocietyRun,
}

pub(crate) fn run(ctx: &mut RunContext<'_, '_>, exp: &MinimalGroupExperiment, units: Vec<Unit>) -> Result<()> {
    let (options, progress) = (ctx.options, ctx.progress);
    let bank = AllocationBank::load(&ctx.file.resolve(&exp.prompts.bank))?;
    let names = GroupNames::load(&ctx.file.resolve(&exp.society.group_names))?;
    let pending: Vec<Unit> = units.into_iter().filter(|u| !ctx.sink.is_stored(&u.key.id())).collect();
    progress.set_total(pending.len() as u64);
    progress.family("allocation", pending.len() as u64);
    let info = ctx.respondent.info();
    // The values every request samples with, and where each came from, for the run manifest.
    ctx.summary.notes.insert("generation.effective".into(), effective_sampling(exp, options).manifest_record());
    // A generating study says what it generated, even when nothing was left to run.
    ctx.summary.tokens_generated.get_or_insert(0);
    let run_id = ctx.sink.run_id();
    let local = ctx.respondent.batch_file().is_none() && ctx.respondent.shared().is_none();
    let mut stage = Pipelined {
        pending: pending.iter(),
        exp,
        bank: &bank,
        names: &names,
        options,
        run_id: &run_id,
        model: &info.model,
        backend: &info.backend,
        pool: f64::from(exp.society.pool),
        sink: &mut *ctx.sink,
        summary: &mut *ctx.summary,
        progress,
        guard: FailureGuard::new(options.max_consecutive_failures),
        stopped: None,
        parsed: 0,
        filled: 0,
    };
    // A model here: `batch_units` societies per call; a batch file in plan order; servers with many
    // batches in flight.
    let mut throughput = None;
    if local {
        let respondent = &mut ctx.respondent;
        crate::pipeline::run_together(&mut stage, options.batch_units, |passes| {
            let requests: Vec<GenerateRequest> = passes.iter().flat_map(|p| p.requests.iter().cloned()).collect();
            let facts: Vec<AllocationFacts> = passes.iter().flat_map(|p| p.facts.iter().cloned()).collect();
            respondent.generate(&requests, &facts)
        })?;
    } else if let Some(backend) = ctx.respondent.batch_file() {
        crate::pipeline::run_in_order(&mut stage, backend)?;
    } else if let Some(backend) = ctx.respondent.shared() {
        throughput = Some((crate::pipeline::run(&mut stage, backend, progress)?, backend));
    }
    let Pipelined { stopped, summary, parsed, filled, .. } = stage;
    if let Some((throughput, backend)) = throughput {
        crate::record_throughput(summary, &throughput, backend);
    }
    note_parse_rate(summary, parsed, filled);
    stopped.map_or(Ok(()), Err)
}

fn note_parse_rate(summary: &mut RunSummary, parsed: u64, filled: u64) {
    if parsed > 0 {
        summary.notes.insert(
            "allocation/parse".into(),
            serde_json::json!({"deciders": parsed, "filled": filled, "fill_rate": filled as f64 / parsed as f64}),
        );
    }
}

/// One society pass ready to send: its deciders' prompts and requests.
struct Pass<'a> {
    unit: &'a Unit,
    society: Society,
    prompts: Vec<AllocationPrompt>,
    requests: Vec<GenerateRequest>,
    /// What each decider is, for the simulated agent.
    facts: Vec<AllocationFacts>,
}

/// The minimal-group study as pipeline stages (through servers, a batch file or a model here): society
/// passes drawn as slots free, each stored when all its deciders are answered, failed (alone) when one is not.
struct Pipelined<'a, 'r> {
    pending: std::slice::Iter<'a, Unit>,
    exp: &'a MinimalGroupExperiment,
    bank: &'a AllocationBank,
    names: &'a GroupNames,
    options: &'a RunOptions,
    run_id: &'a str,
    model: &'a str,
    backend: &'a str,
    pool: f64,
    sink: &'r mut dyn TrialSink,
    summary: &'r mut RunSummary,
    progress: &'a Progress,
    guard: FailureGuard,
    stopped: Option<RunnerError>,
    parsed: u64,
    filled: u64,
}

impl<'a> Stage for Pipelined<'a, '_> {
    type Batch = Pass<'a>;
    type Output = Generation;

    fn next(&mut self) -> Result<Option<Pass<'a>>> {
        for unit in self.pending.by_ref() {
            let run = society_of(unit);
            if let Some(reason) = self.options.skipped_by_design(unit) {
                self.summary.skip(reason, &unit.key.id(), true);
                self.progress.advance("allocation", 1);
                continue;
            }
            let society = draw_society(self.exp, &unit.key, run, self.names);
            let prompts = allocation_prompts(self.exp, self.bank, &society, &unit.key, run)?;
            let (requests, facts) = prompts
                .iter()
                .enumerate()
                .map(|(i, p)| request(self.exp, unit, run, &society, i, p, self.options))
                .unzip();
            return Ok(Some(Pass { unit, society, prompts, requests, facts }));
        }
        Ok(None)
    }

    fn requests(pass: &Pass<'a>) -> usize {
        pass.requests.len()
    }

    fn send(backend: &dyn SharedBackend, pass: &Pass<'a>) -> Vec<herd_backend::Result<Generation>> {
        backend.generate_each(&pass.requests)
    }

    fn tokens(output: &Generation) -> usize {
        output.prompt_tokens + output.completion_tokens
    }

    fn commit(
        &mut self,
        pass: Pass<'a>,
        results: Vec<herd_backend::Result<Generation>>,
        elapsed: Duration,
    ) -> Result<Flow> {
        let id = pass.unit.key.id();
        self.progress.advance("allocation", 1);
        // Its answers are not all in the batch file yet: the society awaits the next import.
        if results.len() == pass.requests.len() && crate::awaiting(&results) {
            self.summary.awaiting.units += 1;
            return Ok(if self.stopped.is_some() { Flow::Stop } else { Flow::Go });
        }
        let generations = crate::all_results(pass.requests.len(), results.into_iter().collect());
        let generations = match generations {
            Ok(g) => g,
            Err(error) if self.stopped.is_some() => {
                drop(error);
                self.summary.failed.push(id);
                return Ok(Flow::Stop);
            }
            Err(error) => {
                return match self.guard.record(std::slice::from_ref(&id), error, self.summary) {
                    Ok(()) => Ok(Flow::Go),
                    Err(stop) => {
                        self.stopped = Some(stop);
                        Ok(Flow::Stop)
                    }
                };
            }
        };
        self.guard.success();
        let latency = elapsed.as_secs_f64() / pass.requests.len().max(1) as f64;
        let run = society_of(pass.unit);
        let labels = PassLabels {
            run_id: self.run_id,
            unit_id: id.clone(),
            experiment: &self.exp.experiment.name,
            model: self.model,
            backend: self.backend,
            run,
        };
        let mut rows = TrialRows::default();
        for (prompt, generation) in pass.prompts.iter().zip(&generations) {
            let was_filled = decider_rows(&labels, &pass.society, prompt, generation, self.pool, latency, &mut rows);
            self.parsed += 1;
            self.filled += u64::from(was_filled);
        }
        let tokens = rows.tokens_generated();
        self.sink.store(vec![id], rows)?;
        self.summary.count_generated(tokens);
        self.summary.units_run += 1;
        Ok(if self.stopped.is_some() { Flow::Stop } else { Flow::Go })
    }
}

/// The sampling knobs of this experiment with this model, as HF `generate` would take them: the
/// experiment's [generation] overrides, else the model's defaults, else the fallback (HF's defaults, or the
/// server's for knobs not sent).
pub(crate) fn effective_sampling(exp: &MinimalGroupExperiment, options: &RunOptions) -> EffectiveSampling {
    let g = &exp.generation;
    let overrides =
        SamplingOverrides { temperature: g.temperature, top_p: g.top_p, top_k: g.top_k.map(|k| k as usize) };
    resolve_sampling(&overrides, &options.sampling_defaults, options.sampling_fallback)
}

/// The swap pass as the rows store it.
fn swap_pass_name(run: &SocietyRun) -> &'static str {
    if run.swapped { "swapped" } else { "original" }
}

/// The request of a pass's `index`th decider, and the facts a simulated agent answers it from.
fn request(
    exp: &MinimalGroupExperiment,
    unit: &Unit,
    run: &SocietyRun,
    society: &Society,
    index: usize,
    prompt: &AllocationPrompt,
    options: &RunOptions,
) -> (GenerateRequest, AllocationFacts) {
    let g = &exp.generation;
    let ids: Vec<String> = prompt.roster.iter().map(|r| r.id.clone()).collect();
    let decider_minority = prompt.minority_decider;
    let seed = seed_of(&unit.key.stream(&format!("sampling/{}", prompt.decider)));
    let sampling = effective_sampling(exp, options).params(seed, g.max_new_tokens as usize);
    let facts = AllocationFacts {
        key: format!("{}/{}", unit.key.id(), prompt.decider),
        same_group: prompt.roster.iter().map(|r| r.minority == decider_minority).collect(),
        target_names: prompt
            .roster
            .iter()
            .map(|r| if r.minority { society.minority_name.clone() } else { society.majority_name.clone() })
            .collect(),
        roster: ids.clone(),
        labels_visible: run.labels == Labels::Visible,
        minority_decider: decider_minority,
        pool: exp.society.pool,
        reasoning: run.reasoning.as_str().to_owned(),
        instrument: run.instrument.clone(),
        swap_pass: swap_pass_name(run).to_owned(),
        minority_size: run.minority_size,
        society_size: exp.society.size,
    };
    let request = GenerateRequest {
        schema: g.constrained.then(|| allocation_schema(&ids, exp.society.pool)),
        thinking: options.switch_thinking.then_some(run.reasoning.as_str() == "on"),
        name: Some(request_name(&unit.key.id(), index)),
        ..GenerateRequest::new(prompt.prompt.clone(), sampling)
    };
    (request, facts)
}

/// Appends the decider's row and its dyads; returns whether the allocation is a uniform fill.
fn decider_rows(
    labels: &PassLabels<'_>,
    society: &Society,
    prompt: &AllocationPrompt,
    generation: &Generation,
    pool: f64,
    latency: f64,
    rows: &mut TrialRows,
) -> bool {
    let roster = Roster::new(society.ids.iter().cloned()).expect("society ids are unique and non-empty");
    let parse = parse_allocation(generation.text.as_bytes(), &roster, &prompt.decider, pool).with_uniform_fill(
        &roster,
        &prompt.decider,
        pool,
    );
    let agent = |id: &str| society.ids.iter().position(|x| x == id).map_or(0, |i| i as i64 + 1);
    let decider = agent(&prompt.decider);
    let run = labels.run;
    let swap_pass = swap_pass_name(run);
    let status = match parse.status {
        ParseStatus::Ok => "ok",
        ParseStatus::Repaired => "repaired",
        ParseStatus::Failed => "failed",
    };
    let flags: Vec<&str> =
        parse.repairs.iter().map(|r| r.code()).chain(parse.failure.as_ref().map(|f| f.code())).collect();
    // The names this pass's prompts show (`Society::group_name`: the minority's or the majority's),
    // kept in the hidden arm too, where the same society's latent groups carry them unseen.
    let group_of =
        |minority: bool| if minority { society.minority_name.clone() } else { society.majority_name.clone() };
    rows.deciders.push(AllocationDeciderRow {
        run_id: labels.run_id.to_owned(),
        unit_id: labels.unit_id.clone(),
        experiment: labels.experiment.to_owned(),
        model: labels.model.to_owned(),
        backend: labels.backend.to_owned(),
        reasoning: run.reasoning.as_str().to_owned(),
        instrument: run.instrument.clone(),
        labels: run.labels.as_str().to_owned(),
        m: i64::from(run.minority_size),
        seed: i64::from(run.seed),
        swap_pass: swap_pass.to_owned(),
        decider,
        decider_id: prompt.decider.clone(),
        minority_decider: prompt.minority_decider,
        decider_group: group_of(prompt.minority_decider),
        prompt_hash: prompt.prompt.hash(),
        raw_output: generation.text.clone(),
        reasoning_output: generation.reasoning.clone(),
        stripped_output: strip_reasoning(&generation.text).answer_text,
        parse_status: status.to_owned(),
        filled: parse.filled,
        qc_flags: flags.join(","),
        finish_reason: serde_json::to_value(generation.finish_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        prompt_tokens: generation.prompt_tokens as i64,
        tokens_generated: generation.completion_tokens as i64,
        latency_s: latency,
    });
    if let Some(allocation) = &parse.allocation {
        for entry in &prompt.roster {
            rows.dyads.push(AllocationDyadRow {
                run_id: labels.run_id.to_owned(),
                unit_id: labels.unit_id.clone(),
                experiment: labels.experiment.to_owned(),
                model: labels.model.to_owned(),
                backend: labels.backend.to_owned(),
                reasoning: run.reasoning.as_str().to_owned(),
                instrument: run.instrument.clone(),
                labels: run.labels.as_str().to_owned(),
                m: i64::from(run.minority_size),
                seed: i64::from(run.seed),
                swap_pass: swap_pass.to_owned(),
                decider,
                target: agent(&entry.id),
                target_id: entry.id.clone(),
                minority_decider: prompt.minority_decider,
                minority_target: entry.minority,
                same_group: entry.minority == prompt.minority_decider,
                decider_group: group_of(prompt.minority_decider),
                target_group: group_of(entry.minority),
                target_position: f64::from(entry.position),
                points: allocation.get(&entry.id).copied().unwrap_or(0.0),
                filled: parse.filled,
            });
        }
    }
    parse.filled
}
