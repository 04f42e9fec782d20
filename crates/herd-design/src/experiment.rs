//! The experiment-file schema: plain serde types, one per TOML table. Defaults are the protocol values of
//! the two papers (../shared/spec), so a file only needs to state what it changes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Which study an experiment file belongs to; read from `experiment.study`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Study {
    Conformity,
    MinimalGroup,
}

impl Study {
    pub fn as_str(self) -> &'static str {
        match self {
            Study::Conformity => "conformity",
            Study::MinimalGroup => "minimal_group",
        }
    }
}

/// The experiment-file format this herd reads; files of a newer format are refused with a clear error.
pub const FORMAT_VERSION: u32 = 1;

fn current_format() -> u32 {
    FORMAT_VERSION
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentMeta {
    /// Version of the experiment-file format the file is written for (see [`FORMAT_VERSION`]).
    #[serde(default = "current_format")]
    pub format: u32,
    /// Short identifier; part of every RNG stream key and of every trial row.
    pub name: String,
    pub study: Study,
    /// Master seed: changing it redraws every stimulus, reply, roster and sample of the experiment.
    pub seed: u64,
    #[serde(default)]
    pub description: String,
    /// Where the protocol values come from (paper, code, our choice).
    #[serde(default)]
    pub source: String,
}

/// A file of protocol strings that an experiment refers to, relative to the experiment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankRef {
    pub bank: PathBuf,
}

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

// ---------------------------------------------------------------------------------------------------------
// Conformity
// ---------------------------------------------------------------------------------------------------------

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StimuliConfig {
    pub tasks: Vec<Task>,
    /// Candidate images per task and answer label in the general pool (before any baseline filter).
    #[serde(default = "default_general_pool_size")]
    pub general_pool_size: u32,
    #[serde(default)]
    pub lines: LinesConfig,
    #[serde(default)]
    pub color: ColorConfig,
    #[serde(default)]
    pub dots: DotsConfig,
}

fn default_general_pool_size() -> u32 {
    100
}

impl StimuliConfig {
    /// The protocol's stimulus parameters and layouts for `tasks`.
    pub fn protocol(tasks: Vec<Task>) -> Self {
        StimuliConfig {
            tasks,
            general_pool_size: default_general_pool_size(),
            lines: LinesConfig::default(),
            color: ColorConfig::default(),
            dots: DotsConfig::default(),
        }
    }
}

/// Line-judgment task. Lengths are in pixels of the rendered image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinesConfig {
    pub reference_length: u32,
    pub min_length: u32,
    pub max_length: u32,
    /// General pool: the distractor differs from the reference by at least this many pixels.
    pub general_gap: u32,
    /// Difficulty pool: one level per spread d, easiest (widest) first; the distractor lies within d of the
    /// reference (≠ reference).
    pub difficulty_spreads: Vec<u32>,
    pub images_per_level: u32,
    pub layout: LinesLayout,
}

impl Default for LinesConfig {
    fn default() -> Self {
        LinesConfig {
            reference_length: 300,
            min_length: 1,
            max_length: 580,
            general_gap: 150,
            difficulty_spreads: (0..10).map(|i| 250 - 20 * i).collect(),
            images_per_level: 50,
            layout: LinesLayout::default(),
        }
    }
}

/// Pixel layout measured on the original line stimulus (../shared/reference/stimuli/lines.png).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinesLayout {
    pub width: u32,
    pub height: u32,
    /// Horizontal centres of A, REFERENCE and B.
    pub centres: [u32; 3],
    /// Lowest pixel row of every line.
    pub baseline: u32,
    pub line_width: u32,
    /// Top of the capital letters of the first label line.
    pub label_top: u32,
    pub label_size: f32,
}

impl Default for LinesLayout {
    fn default() -> Self {
        LinesLayout {
            width: 450,
            height: 960,
            centres: [45, 225, 405],
            baseline: 873,
            line_width: 8,
            label_top: 889,
            label_size: 29.0,
        }
    }
}

/// Colour-recognition task. `spread` b bounds each channel's difference from the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ColorConfig {
    pub general_spread: u32,
    pub difficulty_spreads: Vec<u32>,
    pub images_per_level: u32,
    pub layout: BoxesLayout,
}

impl Default for ColorConfig {
    fn default() -> Self {
        ColorConfig {
            general_spread: 50,
            difficulty_spreads: (1..=10).rev().map(|i| 10 * i).collect(),
            images_per_level: 50,
            layout: BoxesLayout::color(),
        }
    }
}

/// Dots-estimation task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DotsConfig {
    pub reference_count: u32,
    /// Most dots of a general-pool distractor. Difficulty levels go up to reference + spread.
    pub max_count: u32,
    pub difficulty_spreads: Vec<u32>,
    pub images_per_level: u32,
    pub dot_radius: u32,
    /// Free space between a dot's edge and the box's inner edge.
    pub margin: u32,
    /// Minimum free pixels between two dots, so that every dot is its own connected component.
    pub min_gap: u32,
    pub layout: BoxesLayout,
}

impl Default for DotsConfig {
    fn default() -> Self {
        DotsConfig {
            reference_count: 10,
            max_count: 110,
            difficulty_spreads: (1..=10).rev().map(|i| 20 * i).collect(),
            images_per_level: 50,
            dot_radius: 5,
            margin: 10,
            min_gap: 2,
            layout: BoxesLayout::dots(),
        }
    }
}

/// Three square boxes in a row with a black edge (colour squares, dot boxes); measured on the originals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BoxesLayout {
    pub width: u32,
    pub height: u32,
    /// Left edge of the first box.
    pub left: u32,
    pub top: u32,
    /// Outer side of a box, edge included.
    pub side: u32,
    /// Distance between the left edges of neighbouring boxes.
    pub pitch: u32,
    pub edge: u32,
    pub label_top: u32,
    pub label_size: f32,
}

impl BoxesLayout {
    pub fn color() -> Self {
        BoxesLayout {
            width: 870,
            height: 332,
            left: 31,
            top: 49,
            side: 187,
            pitch: 274,
            edge: 4,
            label_top: 258,
            label_size: 29.0,
        }
    }

    pub fn dots() -> Self {
        BoxesLayout {
            width: 1170,
            height: 431,
            left: 32,
            top: 50,
            side: 284,
            pitch: 374,
            edge: 4,
            label_top: 357,
            label_size: 29.0,
        }
    }
}

impl Default for BoxesLayout {
    fn default() -> Self {
        BoxesLayout::color()
    }
}

/// Keeps only images a model answers correctly without social pressure (N = 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaselineFilter {
    pub enabled: bool,
    /// The paper demands p_correct(0) = 1; its code used 0.95.
    pub min_p_correct: f64,
    /// Give up (cleanly, with a report) after scoring this many candidates for one pool.
    pub max_candidates: u32,
}

impl Default for BaselineFilter {
    fn default() -> Self {
        BaselineFilter { enabled: true, min_p_correct: 0.95, max_candidates: 6000 }
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

// ---------------------------------------------------------------------------------------------------------
// Minimal groups
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinimalGroupExperiment {
    pub experiment: ExperimentMeta,
    pub prompts: BankRef,
    pub society: SocietyConfig,
    pub design: MinimalGroupDesign,
    pub instruments: Vec<InstrumentConfig>,
    #[serde(default)]
    pub generation: GenerationConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocietyConfig {
    pub size: u32,
    /// Number of agents carrying the minority label; each in 1..=size/2.
    pub minority_sizes: Vec<u32>,
    /// Points each decider distributes among the others.
    pub pool: u32,
    /// Agent ids are `{id_prefix}{index:0id_width}`, index from 1.
    #[serde(default = "default_id_prefix")]
    pub id_prefix: String,
    #[serde(default = "default_id_width")]
    pub id_width: u32,
    /// File of nonce group-name pairs (TOML, `pairs = [["…", "…"], …]`).
    pub group_names: PathBuf,
    #[serde(default)]
    pub roster_order: RosterOrder,
}

fn default_id_prefix() -> String {
    "agent_".to_owned()
}
fn default_id_width() -> u32 {
    2
}

/// Order in which a decider sees the other participants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RosterOrder {
    /// By agent id; group membership is random with respect to id, so position is independent of group.
    #[default]
    Id,
    /// A fresh random order for every decider.
    Shuffled,
}

/// Whether group labels are shown (the minimal-group label arm); herd-analysis reads the `labels`
/// column into the same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Labels {
    Visible,
    Hidden,
}

impl Labels {
    pub fn as_str(self) -> &'static str {
        match self {
            Labels::Visible => "visible",
            Labels::Hidden => "hidden",
        }
    }

    /// The condition a table's `labels` column names.
    pub fn parse(s: &str) -> Option<Self> {
        [Labels::Visible, Labels::Hidden].into_iter().find(|l| l.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reasoning {
    /// The model's default mode (thinking on for reasoning models).
    On,
    /// Thinking disabled through the chat template (e.g. Qwen3's `enable_thinking = false`).
    Off,
}

impl Reasoning {
    pub fn as_str(self) -> &'static str {
        match self {
            Reasoning::On => "on",
            Reasoning::Off => "off",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinimalGroupDesign {
    pub labels: Vec<Labels>,
    /// Independent societies per cell.
    pub seeds: u32,
    /// Run every society a second time with the two group names swapped.
    pub swap_pass: bool,
    pub reasoning: Vec<Reasoning>,
}

/// A wording of the allocation prompt; `seeds` limits it to the first seeds (matched societies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentConfig {
    pub name: String,
    pub seeds: Option<u32>,
}

/// How deciders' replies are sampled. `temperature`, `top_p` and `top_k` override the model's own defaults
/// (an HF folder's `generation_config.json`, else the registry's `generation` entry); one left out takes the
/// model's default, else HF `generate`'s (temperature 1, top_p 1, top_k 50), as HF `generate` called with only
/// the overridden arguments would. They are optional because the paper set only the temperature (0.7): a fixed
/// default here would silently replace each model's own top_p and top_k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerationConfig {
    /// 0 decodes greedily.
    pub temperature: Option<f64>,
    /// Nucleus size in (0, 1]; 1 keeps every token.
    pub top_p: Option<f64>,
    /// 0 keeps every token.
    pub top_k: Option<u32>,
    pub max_new_tokens: u32,
    /// Constrain decoding to the allocation JSON schema where the backend supports it.
    pub constrained: bool,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        GenerationConfig { temperature: None, top_p: None, top_k: None, max_new_tokens: 8192, constrained: false }
    }
}

/// A parsed experiment of either study.
#[derive(Debug, Clone, PartialEq)]
// A process holds one or two experiments, never a collection of them: boxing the larger study would
// cost every match a dereference and save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Experiment {
    Conformity(ConformityExperiment),
    MinimalGroup(MinimalGroupExperiment),
}

impl Experiment {
    pub fn meta(&self) -> &ExperimentMeta {
        match self {
            Experiment::Conformity(e) => &e.experiment,
            Experiment::MinimalGroup(e) => &e.experiment,
        }
    }
}
