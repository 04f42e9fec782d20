//! How much an experiment plans before its first unit runs: the units `expand` returns, the images the
//! runner draws into its pools and the prompts it sends. All three are counted from the experiment's
//! counts alone, without building anything, so that a design too large to hold is an error at
//! validation rather than an allocation failure (an abort) minutes into `herd expand` or `herd run`.

use crate::expand::{Family, balanced_families, difficulty_images_per_level, difficulty_levels};
use crate::experiment::*;
use serde::Serialize;

/// The most units an experiment may expand to. `expand` holds every unit (about 1 KB each with its
/// key strings) and the store's resume index holds every unit id, so this keeps a plan near 1 GB;
/// it is 12 times the full conformity grid (82,500 units) and about 900 times the full minimal-group
/// grid.
pub const MAX_UNITS: u64 = 1_000_000;

/// The most images the runner may draw into one model's pools (general pools and difficulty pools of
/// every task), each held with its dot positions while the run lasts; the papers' grid draws 1,800.
pub const MAX_IMAGES: u64 = 1_000_000;

/// The most prompts a run may send (conformity trials and baseline candidates; one per decider of every
/// society pass). Each becomes stored rows that an analysis reads into memory at once (a decider's
/// prompt gives society size − 1 dyads); the full grids send about 300,000 and 21,600.
pub const MAX_PROMPTS: u64 = 10_000_000;

/// One term of a plan's size: the counts that multiply to it, each with the key it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanPart {
    /// What the term counts, e.g. `families.unanimity` or `difficulty pool of dots`.
    pub name: String,
    pub factors: Vec<(String, u64)>,
    /// The product of the factors (saturating: only compared with the limits).
    pub size: u64,
}

impl PlanPart {
    fn new(name: impl Into<String>, factors: Vec<(String, u64)>) -> Self {
        let size = factors.iter().fold(1u64, |acc, (_, n)| acc.saturating_mul(*n));
        PlanPart { name: name.into(), factors, size }
    }

    /// `name: key a × key b = size`.
    pub fn describe(&self) -> String {
        let factors: Vec<String> = self.factors.iter().map(|(key, n)| format!("{key} {n}")).collect();
        format!("{}: {} = {}", self.name, factors.join(" × "), self.size)
    }
}

/// The size of an experiment's plan, with the terms each total sums.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanSize {
    pub units: Vec<PlanPart>,
    pub images: Vec<PlanPart>,
    pub prompts: Vec<PlanPart>,
}

fn total(parts: &[PlanPart]) -> u64 {
    parts.iter().fold(0u64, |acc, p| acc.saturating_add(p.size))
}

impl PlanSize {
    /// Units `expand` returns (every shard expands them all and keeps its own).
    pub fn units(&self) -> u64 {
        total(&self.units)
    }

    pub fn images(&self) -> u64 {
        total(&self.images)
    }

    pub fn prompts(&self) -> u64 {
        total(&self.prompts)
    }
}

fn count(key: impl Into<String>, n: usize) -> (String, u64) {
    (key.into(), n as u64)
}

/// Counts what `experiment` plans, without allocating any unit, image or prompt.
pub fn plan_size(experiment: &Experiment) -> PlanSize {
    match experiment {
        Experiment::Conformity(e) => conformity(e),
        Experiment::MinimalGroup(e) => minimal_group(e),
    }
}

fn conformity(e: &ConformityExperiment) -> PlanSize {
    let mut units = Vec::new();
    for spec in balanced_families(e) {
        let [tasks, levels, n_values, seeds] = spec.keys;
        let mut factors = vec![count(tasks, spec.tasks.len())];
        if spec.levels.len() > 1 || spec.levels.first().is_some_and(Option::is_some) {
            factors.push(count(levels, spec.levels.len()));
        }
        factors.push(count(n_values, spec.n_values.len()));
        factors.push((seeds, u64::from(spec.seeds)));
        units.push(PlanPart::new(format!("families.{}", spec.family), factors));
    }
    let difficulty_levels_of =
        |task: Task| (format!("stimuli.{task}.difficulty_spreads"), u64::from(difficulty_levels(e, task)));
    let per_level_key = |task: Task| match e.families.difficulty.as_ref().and_then(|d| d.images_per_level) {
        Some(_) => "families.difficulty.images_per_level".to_owned(),
        None => format!("stimuli.{task}.images_per_level"),
    };
    if let Some(d) = &e.families.difficulty {
        let (n_key, n_values) = match &d.n_values {
            Some(n) => ("families.difficulty.n_values", n.len()),
            None => ("trials.n_values", e.trials.n_values.len()),
        };
        for &task in d.tasks.as_deref().unwrap_or(&e.stimuli.tasks) {
            let factors = vec![
                difficulty_levels_of(task),
                count(n_key, n_values),
                (per_level_key(task), u64::from(difficulty_images_per_level(e, task))),
            ];
            units.push(PlanPart::new(format!("families.{} ({task})", Family::Difficulty), factors));
        }
    }

    // Every task's general pool and difficulty pools are drawn (previewed, or filtered by the baseline),
    // whichever families use them.
    let mut images = Vec::new();
    for &task in &e.stimuli.tasks {
        let general = vec![("stimuli.general_pool_size".to_owned(), u64::from(e.stimuli.general_pool_size))];
        images.push(PlanPart::new(format!("general pool of {task}"), general));
        let difficulty =
            vec![difficulty_levels_of(task), (per_level_key(task), u64::from(difficulty_images_per_level(e, task)))];
        images.push(PlanPart::new(format!("difficulty pools of {task}"), difficulty));
    }

    // One scored prompt per unit, and up to max_candidates per pool the baseline filter fills.
    let mut prompts = units.clone();
    if e.baseline_filter.enabled {
        for &task in &e.stimuli.tasks {
            let pools = 1 + if e.families.difficulty.is_some() { difficulty_levels(e, task) } else { 0 };
            let factors = vec![
                (format!("1 + stimuli.{task}.difficulty_spreads"), u64::from(pools)),
                ("baseline_filter.max_candidates".to_owned(), u64::from(e.baseline_filter.max_candidates)),
            ];
            prompts.push(PlanPart::new(format!("baseline candidates of {task}"), factors));
        }
    }
    PlanSize { units, images, prompts }
}

fn minimal_group(e: &MinimalGroupExperiment) -> PlanSize {
    let d = &e.design;
    let mut units = Vec::new();
    let mut prompts = Vec::new();
    for (i, instrument) in e.instruments.iter().enumerate() {
        let seeds = match instrument.seeds {
            Some(s) => (format!("instruments[{i}].seeds"), u64::from(s)),
            None => ("design.seeds".to_owned(), u64::from(d.seeds)),
        };
        let factors = vec![
            count("society.minority_sizes", e.society.minority_sizes.len()),
            count("design.labels", d.labels.len()),
            count("design.reasoning", d.reasoning.len()),
            seeds,
            ("passes (design.swap_pass)".to_owned(), if d.swap_pass { 2 } else { 1 }),
        ];
        let name = format!("instrument `{}`", instrument.name);
        let mut deciders = factors.clone();
        deciders.push(("society.size".to_owned(), u64::from(e.society.size)));
        units.push(PlanPart::new(name.clone(), factors));
        prompts.push(PlanPart::new(name, deciders));
    }
    PlanSize { units, images: Vec::new(), prompts }
}
