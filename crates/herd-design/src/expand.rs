//! Expansion of an experiment into cells × seeds × units.
//!
//! A *cell* is one combination of factor levels of a family, a *seed* is a replicate of that cell (a trial
//! index, a paraphrase, a society), and a *unit* is what is run and stored as one piece (a conformity trial;
//! one pass of a society). Expansion is a pure function of the experiment; every random draw a unit needs
//! later comes from a stream keyed by the unit ([`UnitKey::stream`]), never from expansion order.

use crate::experiment::*;
use crate::rng::StreamKey;
use serde::Serialize;

/// One combination of factor levels of a family; factors keep the order in which they were declared.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Cell {
    pub family: String,
    pub factors: Vec<(String, String)>,
}

impl Cell {
    /// `family/name=value/…`: stable, human-readable, and the basis of RNG keys and resume indices.
    pub fn id(&self) -> String {
        let mut id = self.family.clone();
        for (name, value) in &self.factors {
            id.push('/');
            id.push_str(name);
            id.push('=');
            id.push_str(value);
        }
        id
    }

    pub fn factor(&self, name: &str) -> Option<&str> {
        self.factors.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct UnitKey {
    pub experiment: String,
    pub master_seed: u64,
    pub cell: Cell,
    pub seed: u32,
    pub unit: u32,
}

impl UnitKey {
    /// `cell-id#seed.unit`, unique within an experiment.
    pub fn id(&self) -> String {
        format!("{}#{}.{}", self.cell.id(), self.seed, self.unit)
    }

    /// The stream of draws that belong to this unit alone.
    pub fn stream(&self, purpose: &str) -> StreamKey {
        StreamKey::new(&self.experiment, self.master_seed)
            .with("cell", self.cell.id())
            .with("seed", self.seed)
            .with("unit", self.unit)
            .with("purpose", purpose)
    }

    /// A stream shared by every unit of the same family and seed that agrees on `factors`: draws that must
    /// be paired across the other factors (the same image and the same reply wordings for the public and
    /// the private framing of a paraphrase, the same society with labels visible and hidden).
    pub fn stream_over(&self, factors: &[&str], purpose: &str) -> StreamKey {
        let mut key = StreamKey::new(&self.experiment, self.master_seed).with("family", &self.cell.family);
        for name in factors {
            key = key.with(name, self.cell.factor(name).unwrap_or("-"));
        }
        key.with("seed", self.seed).with("purpose", purpose)
    }
}

/// A conformity family, in the order families are expanded and reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    GroupSize,
    Unanimity,
    Difficulty,
    Normative,
    SourceStrength,
    Nationality,
    Ethnicity,
    MinimalGroup,
    Spatial,
    Temporal,
}

impl Family {
    pub const ALL: [Family; 10] = [
        Family::GroupSize,
        Family::Unanimity,
        Family::Difficulty,
        Family::Normative,
        Family::SourceStrength,
        Family::Nationality,
        Family::Ethnicity,
        Family::MinimalGroup,
        Family::Spatial,
        Family::Temporal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Family::GroupSize => "group_size",
            Family::Unanimity => "unanimity",
            Family::Difficulty => "difficulty",
            Family::Normative => "normative",
            Family::SourceStrength => "source_strength",
            Family::Nationality => "nationality",
            Family::Ethnicity => "ethnicity",
            Family::MinimalGroup => "minimal_group",
            Family::Spatial => "spatial",
            Family::Temporal => "temporal",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ConformityFamilies {
    /// The scope of a family the experiment defines; `None` for absent families and for difficulty,
    /// whose images come from the difficulty pools rather than a trial count.
    pub(crate) fn scope(&self, family: Family) -> Option<&dyn FamilyScope> {
        fn dynamic<T: FamilyScope>(f: &Option<T>) -> Option<&dyn FamilyScope> {
            f.as_ref().map(|f| f as &dyn FamilyScope)
        }
        match family {
            Family::GroupSize => dynamic(&self.group_size),
            Family::Unanimity => dynamic(&self.unanimity),
            Family::Difficulty => None,
            Family::Normative => dynamic(&self.normative),
            Family::SourceStrength => dynamic(&self.source_strength),
            Family::Nationality => dynamic(&self.nationality),
            Family::Ethnicity => dynamic(&self.ethnicity),
            Family::MinimalGroup => dynamic(&self.minimal_group),
            Family::Spatial => dynamic(&self.spatial),
            Family::Temporal => dynamic(&self.temporal),
        }
    }

    /// Whether the experiment defines `family`.
    pub fn has(&self, family: Family) -> bool {
        match family {
            Family::Difficulty => self.difficulty.is_some(),
            other => self.scope(other).is_some(),
        }
    }
}

/// Which image a conformity trial shows. Pools are per model (after the baseline filter), so the design
/// only says which slot to take; the runner resolves it against the model's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ImageSelection {
    /// A random image of the general pool whose correct answer is `correct` (drawn from the trial's
    /// `image` stream, shared across the levels of the family).
    Balanced { correct: Answer },
    /// Image `index` of difficulty level `level` (1 = easiest); the correct answer is the image's own.
    DifficultySlot { level: u32, index: u32 },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConformityTrial {
    pub family: Family,
    /// The condition level (unanimity level, role, relation, framing, near/far); `None` for group size
    /// and difficulty.
    pub level: Option<String>,
    pub task: Task,
    /// Number of confederates.
    pub n: u32,
    pub trial: u32,
    pub image: ImageSelection,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SocietyRun {
    pub minority_size: u32,
    pub labels: Labels,
    pub instrument: String,
    pub reasoning: Reasoning,
    pub seed: u32,
    /// Second pass with the two group names swapped between the groups.
    pub swapped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitPlan {
    Conformity(ConformityTrial),
    Society(SocietyRun),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unit {
    pub key: UnitKey,
    pub plan: UnitPlan,
}

impl Unit {
    /// Units of one group go to the same shard: every N and level of one conformity trial index (they share
    /// an image and a prompt prefix), every pass and condition of one society.
    pub fn shard_group(&self) -> String {
        match &self.plan {
            UnitPlan::Conformity(t) => format!("{}/{}/{}", t.family, t.task, self.key.seed),
            UnitPlan::Society(s) => format!("society/m={}/seed={}", s.minority_size, s.seed),
        }
    }
}

/// Factor names used in conformity cells.
pub mod factor {
    pub const TASK: &str = "task";
    pub const LEVEL: &str = "level";
    pub const N: &str = "n";
    pub const DIFFICULTY_LEVEL: &str = "difficulty_level";
    pub const MINORITY_SIZE: &str = "m";
    pub const LABELS: &str = "labels";
    pub const INSTRUMENT: &str = "instrument";
    pub const REASONING: &str = "reasoning";
}

/// Every unit of the experiment, in a fixed order (family, task, level, N, seed).
pub fn expand(experiment: &Experiment) -> Vec<Unit> {
    match experiment {
        Experiment::Conformity(e) => expand_conformity(e),
        Experiment::MinimalGroup(e) => expand_minimal_group(e),
    }
}

/// The levels of a family (`None` for families without levels) and the resolved scope.
pub(crate) struct FamilySpec {
    pub(crate) family: Family,
    pub(crate) levels: Vec<Option<String>>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) n_values: Vec<u32>,
    pub(crate) seeds: u32,
    /// The keys the tasks, levels, N values and seeds come from (for `plan_size`'s account).
    pub(crate) keys: [String; 4],
}

fn scoped(
    family: Family,
    scope: &dyn FamilyScope,
    levels: (Vec<Option<String>>, &str),
    e: &ConformityExperiment,
) -> FamilySpec {
    let own = |set: bool, key: &str, inherited: &str| {
        if set { format!("families.{family}.{key}") } else { inherited.to_owned() }
    };
    FamilySpec {
        family,
        keys: [
            own(scope.tasks().is_some(), "tasks", "stimuli.tasks"),
            levels.1.to_owned(),
            own(scope.n_values().is_some(), "n_values", "trials.n_values"),
            own(scope.trials_per_n().is_some(), "trials_per_n", "trials.trials_per_n"),
        ],
        levels: levels.0,
        tasks: scope.tasks().map(<[Task]>::to_vec).unwrap_or_else(|| e.stimuli.tasks.clone()),
        n_values: scope.n_values().map(<[u32]>::to_vec).unwrap_or_else(|| e.trials.n_values.clone()),
        seeds: scope.trials_per_n().unwrap_or(e.trials.trials_per_n),
    }
}

fn named<I: IntoIterator<Item = S>, S: ToString>(levels: I) -> Vec<Option<String>> {
    levels.into_iter().map(|l| Some(l.to_string())).collect()
}

fn relations(relations: &[Relation]) -> Vec<Option<String>> {
    named(relations.iter().map(|r| r.as_str()))
}

/// The balanced families of an experiment with their resolved scope, in expansion order.
pub(crate) fn balanced_families(e: &ConformityExperiment) -> Vec<FamilySpec> {
    let f = &e.families;
    let mut specs = Vec::new();
    if let Some(g) = &f.group_size {
        specs.push(scoped(Family::GroupSize, g, (vec![None], "no levels"), e));
    }
    if let Some(u) = &f.unanimity {
        let levels = named(u.levels.iter().map(|l| &l.name));
        specs.push(scoped(Family::Unanimity, u, (levels, "families.unanimity.levels"), e));
    }
    if let Some(n) = &f.normative {
        let mut spec = scoped(Family::Normative, n, (named(["public", "private"]), "public and private"), e);
        spec.seeds = n.paraphrases;
        spec.keys[3] = "families.normative.paraphrases".into();
        specs.push(spec);
    }
    if let Some(s) = &f.source_strength {
        let roles = std::iter::once(&s.baseline_role).chain(s.roles.iter().filter(|r| **r != s.baseline_role));
        specs.push(scoped(Family::SourceStrength, s, (named(roles), "families.source_strength.roles"), e));
    }
    if let Some(n) = &f.nationality {
        specs.push(scoped(Family::Nationality, n, (relations(&n.relations), "families.nationality.relations"), e));
    }
    if let Some(n) = &f.ethnicity {
        specs.push(scoped(Family::Ethnicity, n, (relations(&n.relations), "families.ethnicity.relations"), e));
    }
    if let Some(g) = &f.minimal_group {
        let levels = relations(&g.relations);
        specs.push(scoped(Family::MinimalGroup, g, (levels, "families.minimal_group.relations"), e));
    }
    if let Some(s) = &f.spatial {
        specs.push(scoped(Family::Spatial, s, (named(["near", "far"]), "near and far"), e));
    }
    if let Some(t) = &f.temporal {
        specs.push(scoped(Family::Temporal, t, (named(["near", "far"]), "near and far"), e));
    }
    specs
}

fn conformity_key(e: &ConformityExperiment, family: Family, factors: Vec<(String, String)>, seed: u32) -> UnitKey {
    UnitKey {
        experiment: e.experiment.name.clone(),
        master_seed: e.experiment.seed,
        cell: Cell { family: family.as_str().to_owned(), factors },
        seed,
        unit: 0,
    }
}

fn expand_conformity(e: &ConformityExperiment) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut specs = balanced_families(e);
    // Difficulty sits third in the family order, like in the papers' figures.
    let difficulty_at = specs.iter().position(|s| s.family > Family::Difficulty).unwrap_or(specs.len());
    let difficulty = e.families.difficulty.as_ref();
    let tail = specs.split_off(difficulty_at);
    for spec in specs.iter() {
        balanced_units(e, spec, &mut units);
    }
    if let Some(d) = difficulty {
        difficulty_units(e, d, &mut units);
    }
    for spec in tail.iter() {
        balanced_units(e, spec, &mut units);
    }
    units
}

fn balanced_units(e: &ConformityExperiment, spec: &FamilySpec, units: &mut Vec<Unit>) {
    for &task in &spec.tasks {
        for level in &spec.levels {
            for &n in &spec.n_values {
                let mut factors = vec![(factor::TASK.to_owned(), task.to_string())];
                if let Some(level) = level {
                    factors.push((factor::LEVEL.to_owned(), level.clone()));
                }
                factors.push((factor::N.to_owned(), n.to_string()));
                for seed in 0..spec.seeds {
                    // Alternating keeps A and B balanced within every cell and across the levels of a seed.
                    let correct = if seed % 2 == 0 { Answer::A } else { Answer::B };
                    units.push(Unit {
                        key: conformity_key(e, spec.family, factors.clone(), seed),
                        plan: UnitPlan::Conformity(ConformityTrial {
                            family: spec.family,
                            level: level.clone(),
                            task,
                            n,
                            trial: seed,
                            image: ImageSelection::Balanced { correct },
                        }),
                    });
                }
            }
        }
    }
}

/// Images per level of the difficulty pool of `task`, honouring the family's override.
pub fn difficulty_images_per_level(e: &ConformityExperiment, task: Task) -> u32 {
    let from_task = match task {
        Task::Lines => e.stimuli.lines.images_per_level,
        Task::Color => e.stimuli.color.images_per_level,
        Task::Dots => e.stimuli.dots.images_per_level,
    };
    e.families.difficulty.as_ref().and_then(|d| d.images_per_level).unwrap_or(from_task)
}

/// Number of difficulty levels of `task`.
pub fn difficulty_levels(e: &ConformityExperiment, task: Task) -> u32 {
    let spreads = match task {
        Task::Lines => &e.stimuli.lines.difficulty_spreads,
        Task::Color => &e.stimuli.color.difficulty_spreads,
        Task::Dots => &e.stimuli.dots.difficulty_spreads,
    };
    spreads.len() as u32
}

fn difficulty_units(e: &ConformityExperiment, d: &DifficultyFamily, units: &mut Vec<Unit>) {
    let tasks = d.tasks.clone().unwrap_or_else(|| e.stimuli.tasks.clone());
    let n_values = d.n_values.clone().unwrap_or_else(|| e.trials.n_values.clone());
    for task in tasks {
        let per_level = difficulty_images_per_level(e, task);
        for level in 1..=difficulty_levels(e, task) {
            for &n in &n_values {
                let factors = vec![
                    (factor::TASK.to_owned(), task.to_string()),
                    (factor::DIFFICULTY_LEVEL.to_owned(), level.to_string()),
                    (factor::N.to_owned(), n.to_string()),
                ];
                for index in 0..per_level {
                    units.push(Unit {
                        key: conformity_key(e, Family::Difficulty, factors.clone(), index),
                        plan: UnitPlan::Conformity(ConformityTrial {
                            family: Family::Difficulty,
                            level: None,
                            task,
                            n,
                            trial: index,
                            image: ImageSelection::DifficultySlot { level, index },
                        }),
                    });
                }
            }
        }
    }
}

fn expand_minimal_group(e: &MinimalGroupExperiment) -> Vec<Unit> {
    let mut units = Vec::new();
    let d = &e.design;
    let passes: &[bool] = if d.swap_pass { &[false, true] } else { &[false] };
    for &m in &e.society.minority_sizes {
        for &labels in &d.labels {
            for instrument in &e.instruments {
                for &reasoning in &d.reasoning {
                    let factors = vec![
                        (factor::MINORITY_SIZE.to_owned(), m.to_string()),
                        (factor::LABELS.to_owned(), labels.as_str().to_owned()),
                        (factor::INSTRUMENT.to_owned(), instrument.name.clone()),
                        (factor::REASONING.to_owned(), reasoning.as_str().to_owned()),
                    ];
                    for seed in 0..instrument.seeds.unwrap_or(d.seeds) {
                        for &swapped in passes {
                            units.push(Unit {
                                key: UnitKey {
                                    experiment: e.experiment.name.clone(),
                                    master_seed: e.experiment.seed,
                                    cell: Cell { family: "allocation".to_owned(), factors: factors.clone() },
                                    seed,
                                    unit: u32::from(swapped),
                                },
                                plan: UnitPlan::Society(SocietyRun {
                                    minority_size: m,
                                    labels,
                                    instrument: instrument.name.clone(),
                                    reasoning,
                                    seed,
                                    swapped,
                                }),
                            });
                        }
                    }
                }
            }
        }
    }
    units
}

/// The family names an experiment defines, in expansion order (derived families included).
pub fn family_names(experiment: &Experiment) -> Vec<&'static str> {
    match experiment {
        Experiment::MinimalGroup(_) => vec!["allocation"],
        Experiment::Conformity(e) => {
            let f = &e.families;
            let mut names: Vec<&'static str> =
                Family::ALL.iter().filter(|&&family| f.has(family)).map(|f| f.as_str()).collect();
            if f.performance.is_some() {
                let at = names.iter().position(|n| *n == "difficulty").map_or(names.len(), |i| i + 1);
                names.insert(at, "performance");
            }
            names
        }
    }
}
