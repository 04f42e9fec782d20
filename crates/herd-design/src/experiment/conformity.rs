//! The conformity study's schema: the experiment, its answers and tasks, the p_wrong measure, trial defaults and every family.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{BankRef, BaselineFilter, ExperimentMeta, StimuliConfig};

/// The answer options of a conformity trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Answer {
    A,
    B,
}

impl Answer {
    pub fn other(self) -> Answer {
        match self {
            Answer::A => Answer::B,
            Answer::B => Answer::A,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Answer::A => "A",
            Answer::B => "B",
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The three visual discrimination tasks of the conformity study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Lines,
    Color,
    Dots,
}

impl Task {
    pub const ALL: [Task; 3] = [Task::Lines, Task::Color, Task::Dots];

    pub fn as_str(self) -> &'static str {
        match self {
            Task::Lines => "lines",
            Task::Color => "color",
            Task::Dots => "dots",
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Task {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lines" => Ok(Task::Lines),
            "color" | "colour" => Ok(Task::Color),
            "dots" => Ok(Task::Dots),
            other => Err(format!("unknown task `{other}`: expected lines, color or dots")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformityExperiment {
    pub experiment: ExperimentMeta,
    pub prompts: BankRef,
    pub stimuli: StimuliConfig,
    #[serde(default)]
    pub baseline_filter: BaselineFilter,
    pub trials: TrialDefaults,
    pub families: ConformityFamilies,
    #[serde(default)]
    pub analysis: ConformityAnalysis,
}

/// How the report reads the trials.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConformityAnalysis {
    /// The measure figures and headlines lead with; the other is shown beside it.
    pub measure: PWrong,
}

/// The two readings of p_wrong (docs/deviations.md, "Measure p_wrong"). The analysis tables carry both
/// (their `measure` column); which one a report leads with is the experiment file's `analysis.measure`.
/// Defined here, where the experiment file names it, and re-exported by herd-analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PWrong {
    /// `p_wrong_full`: 1 − P(correct) over the whole vocabulary, what the paper's code computed.
    #[default]
    #[serde(rename = "p_wrong_full")]
    Full,
    /// `p_wrong_ab`: P(wrong) / (P(A) + P(B)), the two-way measure, how the paper's text reads.
    #[serde(rename = "p_wrong_ab")]
    Ab,
}

impl PWrong {
    /// The trial column, the `measure` value of the result tables and the experiment file's spelling.
    pub fn column(self) -> &'static str {
        match self {
            Self::Full => "p_wrong_full",
            Self::Ab => "p_wrong_ab",
        }
    }

    /// The measure named by its column, e.g. from a run manifest.
    pub fn from_column(column: &str) -> Option<Self> {
        [Self::Full, Self::Ab].into_iter().find(|m| m.column() == column)
    }

    pub fn other(self) -> Self {
        match self {
            Self::Full => Self::Ab,
            Self::Ab => Self::Full,
        }
    }

    /// An axis label.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Full => "p(wrong answer), whole vocabulary (probability)",
            Self::Ab => "p(wrong) / (p(A) + p(B)) (probability)",
        }
    }
}

/// Settings every family inherits unless it overrides them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialDefaults {
    /// Numbers of confederates; N = 0 is the plain baseline prompt.
    pub n_values: Vec<u32>,
    /// Trials per cell and N, half with A correct and half with B correct.
    pub trials_per_n: u32,
}

/// Every conformity family; a missing table means the family is not run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformityFamilies {
    pub group_size: Option<GroupSizeFamily>,
    pub unanimity: Option<UnanimityFamily>,
    pub difficulty: Option<DifficultyFamily>,
    pub performance: Option<PerformanceFamily>,
    pub normative: Option<NormativeFamily>,
    pub source_strength: Option<SourceStrengthFamily>,
    pub nationality: Option<IdentityFamily>,
    pub ethnicity: Option<IdentityFamily>,
    pub minimal_group: Option<LetterGroupFamily>,
    pub spatial: Option<ProximityFamily>,
    pub temporal: Option<ProximityFamily>,
}

/// Which tasks, N values and trial count a family uses; `None` inherits from `[stimuli]` and `[trials]`.
pub trait FamilyScope {
    fn tasks(&self) -> Option<&[Task]>;
    fn n_values(&self) -> Option<&[u32]>;
    fn trials_per_n(&self) -> Option<u32>;
}

macro_rules! family_scope {
    ($($ty:ty),*) => {$(
        impl FamilyScope for $ty {
            fn tasks(&self) -> Option<&[Task]> { self.tasks.as_deref() }
            fn n_values(&self) -> Option<&[u32]> { self.n_values.as_deref() }
            fn trials_per_n(&self) -> Option<u32> { self.trials_per_n }
        }
    )*};
}
family_scope!(
    GroupSizeFamily,
    UnanimityFamily,
    NormativeFamily,
    SourceStrengthFamily,
    IdentityFamily,
    LetterGroupFamily,
    ProximityFamily
);

/// All N confederates give the wrong answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSizeFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    pub trials_per_n: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnanimityFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    pub trials_per_n: Option<u32>,
    pub levels: Vec<UnanimityLevel>,
}

/// How a unanimity level breaks the group: exactly one of the three fields is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnanimityLevel {
    pub name: String,
    /// This share of the N replies is wrong, at random positions; the count is
    /// [`wrong_share_count`]: floor(share × N), and below 1 never more than N − 1, so broken unanimity
    /// always leaves a dissenter.
    pub wrong_share: Option<f64>,
    /// Each reply is independently wrong with this probability.
    pub wrong_probability: Option<f64>,
    /// N wrong replies plus this many correct "allies" inserted at random positions (N + allies replies).
    pub allies: Option<u32>,
}

/// How the confederate replies of a unanimity level are composed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnanimityRule {
    WrongShare(f64),
    WrongProbability(f64),
    Allies(u32),
}

/// How many of `n` confederate replies are wrong under `wrong_share`.
///
/// A share of 1 is unanimity: all `n` are wrong. Any share below 1 breaks unanimity, so at least one
/// confederate answers correctly at every N: wrong = min(N − 1, floor(share × N)). Rounding goes
/// towards the correct answer (50% of 5 is 2 wrong, not 3), because rounding towards wrong made
/// "80%" unanimous at N ≤ 2 and tilted "50%" towards the wrong answer at odd N, confounding the
/// unanimity manipulation with group size. At N = 1 no reply can be both in a group and a dissent, so
/// a share below 1 gives the single confederate the correct answer (0 wrong); the stored row's
/// `wrong_replies` = 0 says so. See docs/deviations.md.
pub fn wrong_share_count(share: f64, n: u32) -> u32 {
    if n == 0 || share <= 0.0 {
        return 0;
    }
    if share >= 1.0 {
        return n;
    }
    // The tolerance keeps shares written in decimal on the integer they name (0.57 × 100 is
    // 56.99999999999999 in floating point, 0.29 × 100 is 28.999999999999996).
    let floor = (share * f64::from(n) + 1e-9).floor() as u32;
    floor.min(n - 1)
}

impl UnanimityLevel {
    /// The rule this level states; validation guarantees exactly one field is set.
    pub fn rule(&self) -> Option<UnanimityRule> {
        match (self.wrong_share, self.wrong_probability, self.allies) {
            (Some(s), None, None) => Some(UnanimityRule::WrongShare(s)),
            (None, Some(p), None) => Some(UnanimityRule::WrongProbability(p)),
            (None, None, Some(a)) => Some(UnanimityRule::Allies(a)),
            _ => None,
        }
    }
}

/// Each image of the difficulty pool is shown once per N; the correct answer is the image's own.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DifficultyFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    /// Overrides the task's `images_per_level` for this family.
    pub images_per_level: Option<u32>,
}

/// Performance is the logit of the correct answer at N = 0 for each image of another family's pool;
/// it adds no trials of its own, only an analysis over that family's N = 0 rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerformanceFamily {
    pub derived_from: String,
}

/// Public vs private framing sentence inserted after the question, one matched pair per paraphrase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormativeFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    /// Ignored for this family: each paraphrase pair is one trial per N (kept for a uniform scope).
    pub trials_per_n: Option<u32>,
    /// JSON file with `public` and `private` arrays of matched sentences.
    pub sentences: PathBuf,
    /// How many of the sentence pairs to use (the first `paraphrases` of the bank).
    pub paraphrases: u32,
}

/// The confederates are called by another role; `baseline_role` is the neutral word of the base prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceStrengthFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    pub trials_per_n: Option<u32>,
    pub baseline_role: String,
    pub roles: Vec<String>,
    /// How the report's headlines class a role the paper did not use (`surgeons = "authority"`); the
    /// paper's roles are classed by [`paper_source_class`], and an entry here overrides that too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, SourceClass>,
}

/// Where a source role stands in the conformity paper's fig. 4c: authorities raise conformity over the
/// neutral base, low-status sources lower it, neutral ones are the base's peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceClass {
    Authority,
    LowStatus,
    Neutral,
}

impl SourceClass {
    pub const ALL: [SourceClass; 3] = [SourceClass::Authority, SourceClass::LowStatus, SourceClass::Neutral];

    pub fn as_str(self) -> &'static str {
        match self {
            SourceClass::Authority => "authority",
            SourceClass::LowStatus => "low_status",
            SourceClass::Neutral => "neutral",
        }
    }
}

/// The conformity paper's own source roles (fig. 4c, S1) and their class.
pub const PAPER_SOURCE_CLASSES: [(&str, SourceClass); 12] = [
    ("participants", SourceClass::Neutral),
    ("strangers", SourceClass::Neutral),
    ("people", SourceClass::Neutral),
    ("humans", SourceClass::Neutral),
    ("kids", SourceClass::LowStatus),
    ("chatbots", SourceClass::LowStatus),
    ("experts", SourceClass::Authority),
    ("policemen", SourceClass::Authority),
    ("scientists", SourceClass::Authority),
    ("doctors", SourceClass::Authority),
    ("judges", SourceClass::Authority),
    ("military officers", SourceClass::Authority),
];

/// The class the paper gives `role`, if it used the role.
pub fn paper_source_class(role: &str) -> Option<SourceClass> {
    PAPER_SOURCE_CLASSES.iter().find(|(r, _)| *r == role).map(|&(_, class)| class)
}

impl SourceStrengthFamily {
    /// The role's class: the file's `classes` entry, else the paper's; `None` for a role of neither.
    pub fn class_of(&self, role: &str) -> Option<SourceClass> {
        self.classes.get(role).copied().or_else(|| paper_source_class(role))
    }
}

/// Same vs different group of the model and its confederates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    Same,
    Different,
}

impl Relation {
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Same => "same",
            Relation::Different => "different",
        }
    }
}

fn both_relations() -> Vec<Relation> {
    vec![Relation::Same, Relation::Different]
}

/// Nationality or ethnicity: the model is told its own identity; replies are prefixed with theirs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    pub trials_per_n: Option<u32>,
    pub values: Vec<String>,
    #[serde(default = "both_relations")]
    pub relations: Vec<Relation>,
}

/// Minimal group inside the conformity study: arbitrary letters as group names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LetterGroupFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    pub trials_per_n: Option<u32>,
    /// Letters to draw group names from. A and B are the answer options, so the default leaves them out.
    pub letters: String,
    #[serde(default = "both_relations")]
    pub relations: Vec<Relation>,
}

/// Spatial or temporal proximity: near = every reply annotated with `near`; far = each reply with a random
/// entry of `far`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProximityFamily {
    pub tasks: Option<Vec<Task>>,
    pub n_values: Option<Vec<u32>>,
    pub trials_per_n: Option<u32>,
    pub near: String,
    pub far: Vec<String>,
}
