//! A simulated agent with stated parameters: the `sim` backend. It answers from what each trial is (its
//! [`ConformityFacts`] or [`AllocationFacts`], which the runner hands it beside the requests through
//! [`SimBackend`]) rather than from the prompt, so its effects are known exactly. It serves power analysis,
//! `herd calibrate` and the end-to-end tests that must recover planted effects (and find none where none
//! was planted). The [`Backend`](crate::Backend) contract knows nothing of it.
//!
//! Conformity: `logit P(wrong) = intercept + per_log_wrong·ln(1 + wrong replies) + per_log_right·ln(1 +
//! right replies) + difficulty·d + difficulty_index[task]·x + level_shift[level] + task_shift[task] +
//! family_shift[family] + ε`, ε ~ N(0, noise_sd²) per trial, d ∈ [0, 1] the image's normalised difficulty
//! level and x its difficulty index as the conformity paper defines it ([`ConformityFacts::difficulty_index`]).
//! With `saturates_at` = K the wrong replies count up to K (`ln(1 + min(wrong replies, K))`): a curve that
//! levels off, as fig. 2a's "others saturate around N ∼ 3–4".
//!
//! Allocation: each target's weight is `exp(bias·same_group + v[name] + ε)`, bias the in-group log-weight
//! of the decider (by its group's size and the labels: [`SimParams::allocation_behaviour`]), v[name] the
//! valence of the group name the target carries (visible labels, `name_valence`), ε ~ N(0, noise_sd²);
//! with probability `zero_outgroup` a decider with visible labels gives the out-group nothing (its weights
//! 0). Points are the pool split in proportion, rounded to integers by largest remainder and written as a
//! JSON object. Some replies are planted to exercise herd-parse: no JSON object at all (a parse failure,
//! which the runner fills uniformly), points summing to another total (rescaled to the pool) and a
//! recipient left out (read as 0 points). The bias and rate keys can be replaced per reasoning mode,
//! instrument and swap pass ([`AllocationOverride`]).
//!
//! Every draw comes from a stream keyed by the seed, the trial's key and what it draws, so a trial's answer
//! does not depend on batch order or sharding, and a key added since keeps every older draw as it was.

use crate::backend::{
    AnswerScore, BackendInfo, FinishReason, GenerateRequest, Generation, ScoreBound, ScoreRequest, ScoreResult,
};
use crate::error::{BackendError, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// What a conformity trial is, stated for simulated agents (real models read only the prompt).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConformityFacts {
    /// Identifies the trial; the agent's noise is drawn from a stream keyed by it.
    pub key: String,
    pub correct: String,
    pub wrong: String,
    pub wrong_replies: u32,
    pub right_replies: u32,
    /// The image's difficulty level normalised to [0, 1] (level / levels; 0 for the general pool).
    pub difficulty: f64,
    pub level: Option<String>,
    /// The task: `lines`, `color` or `dots`.
    pub task: String,
    /// The family (`group_size`, `unanimity`, `difficulty`, …). The baseline filter's trials are the
    /// plain N = 0 prompt, `group_size`'s.
    pub family: String,
    /// The image's difficulty index as the conformity paper defines it, higher is harder (the stimulus's
    /// `difficulty_index`, which fig. 3b's regression reads): 1/|Δlength| for lines and 1/|Δcount| for
    /// dots, in (0, 1]; 255·√3 − ‖ΔRGB‖ for colours, in (0, 441.7).
    pub difficulty_index: f64,
}

/// What one decider's allocation is, stated for simulated agents.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocationFacts {
    pub key: String,
    /// Roster ids in the order shown, and whether each target shares the decider's group.
    pub roster: Vec<String>,
    pub same_group: Vec<bool>,
    /// The group name each target carries in this pass, in roster order (shown only with visible labels).
    pub target_names: Vec<String>,
    pub labels_visible: bool,
    pub minority_decider: bool,
    pub pool: u32,
    /// The reasoning mode (`on`, `off`).
    pub reasoning: String,
    /// The instrument's name (`base`, `paraphrase`, …).
    pub instrument: String,
    /// The swap pass (`original`, `swapped`).
    pub swap_pass: String,
    /// m: the minority's size (the group flagged minority; at 2m = `society_size` the groups are equal).
    pub minority_size: u32,
    pub society_size: u32,
}

impl AllocationFacts {
    /// Whether the two groups are the same size (m = half the society): no decider is in a minority.
    pub fn equal_groups(&self) -> bool {
        2 * u64::from(self.minority_size) == u64::from(self.society_size)
    }
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// The conformity curve of a simulated agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConformity {
    pub intercept: f64,
    pub per_log_wrong: f64,
    pub per_log_right: f64,
    /// Logit per unit of the image's normalised difficulty level ([`ConformityFacts::difficulty`]).
    pub difficulty: f64,
    /// Logit per unit of the image's difficulty index ([`ConformityFacts::difficulty_index`]), for every
    /// task without an entry in `difficulty_index_by_task`. 0 by default.
    #[serde(skip_serializing_if = "is_zero")]
    pub difficulty_index: f64,
    /// Per task (`lines`, `color`, `dots`): logit per unit of the difficulty index, replacing
    /// `difficulty_index` for that task (the index's scale differs by task: at most 1 for lines and
    /// dots, hundreds for colours).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub difficulty_index_by_task: BTreeMap<String, f64>,
    /// Added to the logit at these condition levels (public, scientists, same, near, …).
    pub level_shift: BTreeMap<String, f64>,
    /// Added to the logit of every trial of a task (the baseline filter's included).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub task_shift: BTreeMap<String, f64>,
    /// Added to the logit of every trial of a family, N = 0 included.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub family_shift: BTreeMap<String, f64>,
    /// The wrong replies past which the crowd pulls no harder: `per_log_wrong` multiplies
    /// `ln(1 + min(wrong replies, saturates_at))`. None (the default): the curve rises with every reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saturates_at: Option<f64>,
    pub noise_sd: f64,
}

impl Default for SimConformity {
    fn default() -> Self {
        let level_shift = [
            ("public", 0.4),
            ("scientists", 0.5),
            ("judges", 0.3),
            ("kids", -0.5),
            ("chatbots", -0.3),
            ("same", 0.4),
            ("near", 0.3),
        ];
        SimConformity {
            intercept: -4.5,
            per_log_wrong: 1.8,
            per_log_right: -1.0,
            difficulty: 1.5,
            difficulty_index: 0.0,
            difficulty_index_by_task: BTreeMap::new(),
            level_shift: level_shift.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            task_shift: BTreeMap::new(),
            family_shift: BTreeMap::new(),
            saturates_at: None,
            noise_sd: 0.5,
        }
    }
}

/// The allocation behaviour of a simulated agent. Keys added after the first three are left out of its
/// serialisation (and so of a run's fingerprint) at their defaults, so an old sim file's run resumes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimAllocation {
    /// Log-weight added to in-group targets by a minority decider (labels visible).
    pub ingroup_minority: f64,
    /// The same for a majority decider.
    pub ingroup_majority: f64,
    /// The in-group log-weight of every decider when the groups are the same size (2m = society size),
    /// labels visible. Absent: by the minority flag, as with unequal groups (one equal group is flagged
    /// minority).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingroup_equal: Option<f64>,
    /// The in-group (latent group) log-weight with hidden labels: 0, a group-blind agent, by default; any
    /// other value plants a broken hidden floor.
    #[serde(skip_serializing_if = "is_zero")]
    pub ingroup_hidden: f64,
    pub noise_sd: f64,
    /// The standard deviation of a group name's own log-weight: each name draws one, N(0, name_valence²),
    /// from a stream keyed by the seed and the name, so a name weighs the same in every society, pass and
    /// decider, whichever group carries it (the valence the swap pass cancels). Visible labels only. 0 by
    /// default: no name counts.
    #[serde(skip_serializing_if = "is_zero")]
    pub name_valence: f64,
    /// Probability that a decider with visible labels gives every out-group target 0 points (its points
    /// go to its own group in proportion to their weights). 0 by default.
    #[serde(skip_serializing_if = "is_zero")]
    pub zero_outgroup_rate: f64,
    /// `zero_outgroup_rate` for minority deciders (unequal groups, or equal ones without
    /// `zero_outgroup_equal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_minority: Option<f64>,
    /// `zero_outgroup_rate` for majority deciders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_majority: Option<f64>,
    /// `zero_outgroup_rate` for every decider when the groups are the same size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_equal: Option<f64>,
    /// Probability that a reply holds no JSON object (herd-parse: `no_object`; the runner stores it
    /// failed, with the uniform fill). 0 by default.
    #[serde(skip_serializing_if = "is_zero")]
    pub parse_failure_rate: f64,
    /// Probability that a reply's points sum to another total than the pool (a whole number within ±20%
    /// of it); herd-parse rescales them to the pool (`repaired`, flag `renormalised`). 0 by default.
    #[serde(skip_serializing_if = "is_zero")]
    pub rescale_rate: f64,
    /// Probability that a reply leaves out one recipient (drawn at random); herd-parse gives a missing
    /// recipient 0 points and, when it had points, rescales the rest to the pool (`renormalised`).
    #[serde(skip_serializing_if = "is_zero")]
    pub missing_target_rate: f64,
    /// Keys replaced for deciders in a reasoning mode (`on`, `off`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub reasoning: BTreeMap<String, AllocationOverride>,
    /// Keys replaced for deciders asked with an instrument (`base`, `paraphrase`, …); over `reasoning`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub instrument: BTreeMap<String, AllocationOverride>,
    /// Keys replaced for deciders in a swap pass (`original`, `swapped`); over `instrument`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub swap_pass: BTreeMap<String, AllocationOverride>,
    /// Keys replaced for deciders of societies with one minority size m (`3`, `5`, …); over `swap_pass`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub minority_size: BTreeMap<String, AllocationOverride>,
}

impl Default for SimAllocation {
    fn default() -> Self {
        SimAllocation {
            ingroup_minority: 0.6,
            ingroup_majority: 0.2,
            ingroup_equal: None,
            ingroup_hidden: 0.0,
            noise_sd: 0.5,
            name_valence: 0.0,
            zero_outgroup_rate: 0.0,
            zero_outgroup_minority: None,
            zero_outgroup_majority: None,
            zero_outgroup_equal: None,
            parse_failure_rate: 0.0,
            rescale_rate: 0.0,
            missing_target_rate: 0.0,
            reasoning: BTreeMap::new(),
            instrument: BTreeMap::new(),
            swap_pass: BTreeMap::new(),
            minority_size: BTreeMap::new(),
        }
    }
}

/// A partial table of [`SimAllocation`]'s bias and rate keys (and `noise_sd`): the keys it gives replace
/// the base values for the deciders of one reasoning mode, instrument, swap pass or minority size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocationOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingroup_minority: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingroup_majority: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingroup_equal: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingroup_hidden: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_sd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_valence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_minority: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_majority: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_outgroup_equal: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_failure_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescale_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_target_rate: Option<f64>,
}

/// What kind of value a key of [`AllocationOverride`] is, for validation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Effect,
    Noise,
    Rate,
}

impl AllocationOverride {
    /// The key names an override table takes (those of [`SimAllocation`] it may replace).
    pub const KEYS: [&'static str; 13] = [
        "ingroup_minority",
        "ingroup_majority",
        "ingroup_equal",
        "ingroup_hidden",
        "noise_sd",
        "name_valence",
        "zero_outgroup_rate",
        "zero_outgroup_minority",
        "zero_outgroup_majority",
        "zero_outgroup_equal",
        "parse_failure_rate",
        "rescale_rate",
        "missing_target_rate",
    ];

    /// Each key given, with its kind.
    fn given(&self) -> Vec<(&'static str, KeyKind, f64)> {
        use KeyKind::*;
        [
            ("ingroup_minority", Effect, self.ingroup_minority),
            ("ingroup_majority", Effect, self.ingroup_majority),
            ("ingroup_equal", Effect, self.ingroup_equal),
            ("ingroup_hidden", Effect, self.ingroup_hidden),
            ("noise_sd", Noise, self.noise_sd),
            ("name_valence", Noise, self.name_valence),
            ("zero_outgroup_rate", Rate, self.zero_outgroup_rate),
            ("zero_outgroup_minority", Rate, self.zero_outgroup_minority),
            ("zero_outgroup_majority", Rate, self.zero_outgroup_majority),
            ("zero_outgroup_equal", Rate, self.zero_outgroup_equal),
            ("parse_failure_rate", Rate, self.parse_failure_rate),
            ("rescale_rate", Rate, self.rescale_rate),
            ("missing_target_rate", Rate, self.missing_target_rate),
        ]
        .into_iter()
        .filter_map(|(key, kind, value)| value.map(|v| (key, kind, v)))
        .collect()
    }
}

/// The bias and rates one decider applies: [`SimAllocation`]'s keys after the overrides of its reasoning
/// mode, instrument, swap pass and minority size, resolved for its labels and its group's size.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocationBehaviour {
    /// The in-group log-weight.
    pub ingroup: f64,
    pub noise_sd: f64,
    /// The SD of the names' own log-weights (0 with hidden labels: no name is shown).
    pub name_valence: f64,
    /// Probability of giving every out-group target 0 points (0 with hidden labels).
    pub zero_outgroup: f64,
    pub parse_failure_rate: f64,
    pub rescale_rate: f64,
    pub missing_target_rate: f64,
}

/// Every parameter of a simulated agent (`--sim FILE` takes them as TOML).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimParams {
    pub conformity: SimConformity,
    pub allocation: SimAllocation,
    /// Keys the agent's noise, with each trial's key.
    pub seed: u64,
}

/// The largest magnitude of a log-weight or logit term: e^50 already gives every point to the favoured
/// targets (and p_wrong within 2e-22 of 0 or 1), and with noise of at most [`MAX_NOISE_SD`] the
/// exponent stays far from where `exp` overflows (709.8, where weights became infinite and shares NaN).
pub const MAX_LOG_EFFECT: f64 = 50.0;

/// The largest noise standard deviation (on the logit and log-weight scale).
pub const MAX_NOISE_SD: f64 = 10.0;

/// A sim parameter outside the range the agent's formulas are defined on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("sim parameter `{key}` = {value} is out of range: {allowed}")]
pub struct SimParamError {
    /// Dotted key as in a `--sim` file, e.g. `allocation.ingroup_minority`.
    pub key: String,
    pub value: f64,
    /// The allowed range, as a fix: `use a value in [-50, 50] …`.
    pub allowed: String,
}

fn check_effect(key: String, value: f64) -> std::result::Result<(), SimParamError> {
    if value.is_finite() && value.abs() <= MAX_LOG_EFFECT {
        return Ok(());
    }
    let allowed = format!(
        "use a finite value in [-{MAX_LOG_EFFECT}, {MAX_LOG_EFFECT}] (a logit or log-weight; ±{MAX_LOG_EFFECT} already saturates the effect)"
    );
    Err(SimParamError { key, value, allowed })
}

fn check_noise(key: String, value: f64) -> std::result::Result<(), SimParamError> {
    if value.is_finite() && (0.0..=MAX_NOISE_SD).contains(&value) {
        return Ok(());
    }
    let allowed = format!("use a standard deviation in [0, {MAX_NOISE_SD}]");
    Err(SimParamError { key, value, allowed })
}

fn check_rate(key: String, value: f64) -> std::result::Result<(), SimParamError> {
    if (0.0..=1.0).contains(&value) {
        return Ok(());
    }
    Err(SimParamError { key, value, allowed: "use a probability in [0, 1]".into() })
}

fn check(key: String, kind: KeyKind, value: f64) -> std::result::Result<(), SimParamError> {
    match kind {
        KeyKind::Effect => check_effect(key, value),
        KeyKind::Noise => check_noise(key, value),
        KeyKind::Rate => check_rate(key, value),
    }
}

impl SimParams {
    /// Every parameter finite and in its range; the first that is not, by key. Checked where
    /// parameters come in (`--sim`, `herd power --effect`) and before the agent answers, so an
    /// out-of-range value is an error, never uniform allocations or p_wrong = NaN.
    pub fn validate(&self) -> std::result::Result<(), SimParamError> {
        let c = &self.conformity;
        for (key, value) in [
            ("intercept", c.intercept),
            ("per_log_wrong", c.per_log_wrong),
            ("per_log_right", c.per_log_right),
            ("difficulty", c.difficulty),
            ("difficulty_index", c.difficulty_index),
        ] {
            check_effect(format!("conformity.{key}"), value)?;
        }
        for (table, map) in [
            ("difficulty_index_by_task", &c.difficulty_index_by_task),
            ("level_shift", &c.level_shift),
            ("task_shift", &c.task_shift),
            ("family_shift", &c.family_shift),
        ] {
            for (name, &value) in map {
                check_effect(format!("conformity.{table}.{name}"), value)?;
            }
        }
        check_noise("conformity.noise_sd".into(), c.noise_sd)?;
        if let Some(k) = c.saturates_at
            && !(k.is_finite() && k > 0.0)
        {
            let allowed = "use a positive number of wrong replies (e.g. 3), or leave the key out for a curve that \
                           never levels off"
                .into();
            return Err(SimParamError { key: "conformity.saturates_at".into(), value: k, allowed });
        }
        let a = &self.allocation;
        let base = AllocationOverride {
            ingroup_minority: Some(a.ingroup_minority),
            ingroup_majority: Some(a.ingroup_majority),
            ingroup_equal: a.ingroup_equal,
            ingroup_hidden: Some(a.ingroup_hidden),
            noise_sd: Some(a.noise_sd),
            name_valence: Some(a.name_valence),
            zero_outgroup_rate: Some(a.zero_outgroup_rate),
            zero_outgroup_minority: a.zero_outgroup_minority,
            zero_outgroup_majority: a.zero_outgroup_majority,
            zero_outgroup_equal: a.zero_outgroup_equal,
            parse_failure_rate: Some(a.parse_failure_rate),
            rescale_rate: Some(a.rescale_rate),
            missing_target_rate: Some(a.missing_target_rate),
        };
        for (key, kind, value) in base.given() {
            check(format!("allocation.{key}"), kind, value)?;
        }
        for (table, overrides) in [
            ("reasoning", &a.reasoning),
            ("instrument", &a.instrument),
            ("swap_pass", &a.swap_pass),
            ("minority_size", &a.minority_size),
        ] {
            for (name, o) in overrides {
                for (key, kind, value) in o.given() {
                    check(format!("allocation.{table}.{name}.{key}"), kind, value)?;
                }
            }
        }
        Ok(())
    }

    /// Logit per unit of the difficulty index for a task.
    pub fn difficulty_index_slope(&self, task: &str) -> f64 {
        let c = &self.conformity;
        c.difficulty_index_by_task.get(task).copied().unwrap_or(c.difficulty_index)
    }

    /// The logit of P(wrong) before noise.
    pub fn conformity_logit(&self, facts: &ConformityFacts) -> f64 {
        let c = &self.conformity;
        let shift = facts.level.as_ref().and_then(|l| c.level_shift.get(l)).copied().unwrap_or(0.0);
        let wrong = f64::from(facts.wrong_replies);
        let logit = c.intercept
            + c.per_log_wrong * c.saturates_at.map_or(wrong, |k| wrong.min(k)).ln_1p()
            + c.per_log_right * f64::from(facts.right_replies).ln_1p()
            + c.difficulty * facts.difficulty
            + shift;
        // The terms added since are left out at 0 (not added as 0·x), so an old file's logit keeps its
        // bits whatever the index.
        let mut extra = 0.0;
        let slope = self.difficulty_index_slope(&facts.task);
        if slope != 0.0 {
            extra += slope * facts.difficulty_index;
        }
        extra += c.task_shift.get(&facts.task).copied().unwrap_or(0.0);
        extra += c.family_shift.get(&facts.family).copied().unwrap_or(0.0);
        if extra == 0.0 { logit } else { logit + extra }
    }

    /// The bias and rates a decider applies: the base keys, replaced by those its reasoning mode's,
    /// instrument's, swap pass's and minority size's override tables give (in that order, the last given
    /// winning), then
    /// resolved for its role. With hidden labels the in-group log-weight is `ingroup_hidden` and no
    /// decider gives the out-group nothing. With visible labels and groups of the same size,
    /// `ingroup_equal` and `zero_outgroup_equal` apply where given; otherwise the minority flag picks
    /// `ingroup_minority` or `ingroup_majority`, and `zero_outgroup_minority` or `zero_outgroup_majority`
    /// where given, else `zero_outgroup_rate`.
    pub fn allocation_behaviour(&self, facts: &AllocationFacts) -> AllocationBehaviour {
        let a = &self.allocation;
        let overrides: Vec<&AllocationOverride> = [
            a.reasoning.get(&facts.reasoning),
            a.instrument.get(&facts.instrument),
            a.swap_pass.get(&facts.swap_pass),
            a.minority_size.get(&facts.minority_size.to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        let given = |key: fn(&AllocationOverride) -> Option<f64>| overrides.iter().rev().find_map(|o| key(o));
        let value = |key: fn(&AllocationOverride) -> Option<f64>, base: f64| given(key).unwrap_or(base);
        let optional = |key: fn(&AllocationOverride) -> Option<f64>, base: Option<f64>| given(key).or(base);
        let equal = facts.equal_groups();
        let by_flag = |minority: f64, majority: f64| if facts.minority_decider { minority } else { majority };
        let (ingroup, zero_outgroup) = if facts.labels_visible {
            let ingroup_equal = optional(|o| o.ingroup_equal, a.ingroup_equal).filter(|_| equal);
            let ingroup = ingroup_equal.unwrap_or_else(|| {
                by_flag(
                    value(|o| o.ingroup_minority, a.ingroup_minority),
                    value(|o| o.ingroup_majority, a.ingroup_majority),
                )
            });
            let zero_equal = optional(|o| o.zero_outgroup_equal, a.zero_outgroup_equal).filter(|_| equal);
            let zero_role = if facts.minority_decider {
                optional(|o| o.zero_outgroup_minority, a.zero_outgroup_minority)
            } else {
                optional(|o| o.zero_outgroup_majority, a.zero_outgroup_majority)
            };
            let zero =
                zero_equal.or(zero_role).unwrap_or_else(|| value(|o| o.zero_outgroup_rate, a.zero_outgroup_rate));
            (ingroup, zero)
        } else {
            (value(|o| o.ingroup_hidden, a.ingroup_hidden), 0.0)
        };
        AllocationBehaviour {
            ingroup,
            noise_sd: value(|o| o.noise_sd, a.noise_sd),
            name_valence: if facts.labels_visible { value(|o| o.name_valence, a.name_valence) } else { 0.0 },
            zero_outgroup,
            parse_failure_rate: value(|o| o.parse_failure_rate, a.parse_failure_rate),
            rescale_rate: value(|o| o.rescale_rate, a.rescale_rate),
            missing_target_rate: value(|o| o.missing_target_rate, a.missing_target_rate),
        }
    }

    /// A seeded stream per trial key and purpose, so a trial's answer does not depend on batch order or
    /// sharding, and each kind of draw has its own stream.
    fn rng(&self, key: &str, purpose: &str) -> ChaCha20Rng {
        let mut hash = Sha256::new();
        for part in [self.seed.to_string().as_str(), key, purpose] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        ChaCha20Rng::from_seed(hash.finalize().into())
    }

    /// A group name's standard-normal valence draw, the same wherever the name appears.
    fn name_valence_draw(&self, name: &str) -> f64 {
        standard_normal(&mut self.rng(name, "allocation/name_valence"))
    }

    /// Whether this decider gives every out-group target 0 points (only where it has targets in both
    /// groups).
    pub fn zero_outgroup(&self, facts: &AllocationFacts) -> bool {
        let rate = self.allocation_behaviour(facts).zero_outgroup;
        let both = facts.same_group.contains(&true) && facts.same_group.contains(&false);
        let draw: f64 = self.rng(&facts.key, "allocation/zero_outgroup").random();
        both && draw < rate
    }

    /// The points one decider gives, before rounding.
    pub fn allocation_shares(&self, facts: &AllocationFacts) -> Vec<f64> {
        let mut rng = self.rng(&facts.key, "allocation");
        let behaviour = self.allocation_behaviour(facts);
        let (bias, noise_sd) = (behaviour.ingroup, behaviour.noise_sd);
        let zero_outgroup = self.zero_outgroup(facts);
        let weights: Vec<f64> = facts
            .same_group
            .iter()
            .enumerate()
            .map(|(i, &same)| {
                // The draw is made for every target, so the in-group's weights are the same either way.
                let mut log_weight = bias * f64::from(u8::from(same)) + noise_sd * standard_normal(&mut rng);
                // Left out at 0 (not added as 0), so an agent without valence keeps its bits.
                if let Some(name) = facts.target_names.get(i).filter(|_| behaviour.name_valence != 0.0) {
                    log_weight += behaviour.name_valence * self.name_valence_draw(name);
                }
                let weight = log_weight.exp();
                if zero_outgroup && !same { 0.0 } else { weight }
            })
            .collect();
        let total: f64 = weights.iter().sum();
        weights.iter().map(|w| f64::from(facts.pool) * w / total).collect()
    }

    /// The reply one decider writes: the JSON object of its points, or one of the planted replies that
    /// exercise the parser (see [`SimAllocation`]'s rates).
    pub fn allocation_reply(&self, facts: &AllocationFacts) -> String {
        let behaviour = self.allocation_behaviour(facts);
        // Every draw is made whatever the rates, so one rate's change moves no other draw.
        let mut rng = self.rng(&facts.key, "allocation/reply");
        let fails = rng.random::<f64>() < behaviour.parse_failure_rate;
        let rescales = rng.random::<f64>() < behaviour.rescale_rate;
        let misses = rng.random::<f64>() < behaviour.missing_target_rate;
        let total_draw: f64 = rng.random();
        let missing_draw: f64 = rng.random();
        if fails {
            return "I would rather not split the points between these participants.".to_owned();
        }
        let shares = self.allocation_shares(facts);
        let points = if rescales {
            let total = other_total(facts.pool, total_draw);
            let scale = f64::from(total) / f64::from(facts.pool);
            let scaled: Vec<f64> = shares.iter().map(|s| s * scale).collect();
            largest_remainder(&scaled, total)
        } else {
            largest_remainder(&shares, facts.pool)
        };
        let left_out = (misses && facts.roster.len() >= 2)
            .then(|| ((missing_draw * facts.roster.len() as f64) as usize).min(facts.roster.len() - 1));
        let object: serde_json::Map<String, serde_json::Value> = facts
            .roster
            .iter()
            .zip(points)
            .enumerate()
            .filter(|(i, _)| Some(*i) != left_out)
            .map(|(_, (id, p))| (id.clone(), p.into()))
            .collect();
        serde_json::Value::Object(object).to_string()
    }
}

/// A whole-number total other than `pool`, uniform within ±20% of it (at least one away; `pool + 1`
/// where ±20% holds no other whole number).
fn other_total(pool: u32, draw: f64) -> u32 {
    let low = (f64::from(pool) * 0.8).ceil() as u32;
    let high = (f64::from(pool) * 1.2).floor() as u32;
    let choices = high.saturating_sub(low); // the whole numbers of [low, high] but pool
    if choices == 0 || pool == 0 {
        return pool.saturating_add(1);
    }
    let k = ((draw * f64::from(choices)) as u32).min(choices - 1);
    let total = low + k;
    if total >= pool { total + 1 } else { total }
}

/// Box–Muller; one draw per call keeps the stream's use simple to follow.
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Integers summing to `pool`, by largest remainder (ties to the earlier target).
fn largest_remainder(shares: &[f64], pool: u32) -> Vec<u32> {
    let mut points: Vec<u32> = shares.iter().map(|s| s.floor() as u32).collect();
    let left = pool.saturating_sub(points.iter().sum());
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| (shares[b] - shares[b].floor()).total_cmp(&(shares[a] - shares[a].floor())).then(a.cmp(&b)));
    for &i in order.iter().take(left as usize) {
        points[i] += 1;
    }
    points
}

/// What answers from each trial's facts rather than from its prompt: the simulated agent, and test
/// doubles that wrap it. The runner hands every request's facts beside it: `facts[i]` is `group[i]`'s.
pub trait SimBackend {
    /// Scores conformity trials (P(wrong) from the planted curve).
    fn score_trials(&mut self, group: &[ScoreRequest], facts: &[ConformityFacts]) -> Result<Vec<ScoreResult>>;
    /// Writes one allocation per decider (points from the planted in-group bias).
    fn generate_trials(&mut self, batch: &[GenerateRequest], facts: &[AllocationFacts]) -> Result<Vec<Generation>>;
    fn info(&self) -> BackendInfo;
}

/// The `sim` backend.
pub struct SimAgent {
    pub params: SimParams,
}

impl SimAgent {
    pub fn new(params: SimParams) -> Self {
        SimAgent { params }
    }
}

/// Every request needs its trial's facts: a request without them has nothing to answer from.
fn check_facts(what: &str, requests: usize, facts: usize) -> Result<()> {
    if requests == facts {
        return Ok(());
    }
    Err(BackendError::Request(format!(
        "the sim backend was asked to {what} {requests} requests with the facts of {facts} trials; it answers from each trial's facts, which herd's runner hands it beside the requests"
    )))
}

fn checked(params: &SimParams) -> Result<()> {
    params.validate().map_err(|e| BackendError::Request(format!("{e}; fix the --sim parameters")))
}

impl SimBackend for SimAgent {
    fn score_trials(&mut self, group: &[ScoreRequest], facts: &[ConformityFacts]) -> Result<Vec<ScoreResult>> {
        checked(&self.params)?;
        check_facts("score", group.len(), facts.len())?;
        group
            .iter()
            .zip(facts)
            .map(|(request, facts)| {
                let noise =
                    self.params.conformity.noise_sd * standard_normal(&mut self.params.rng(&facts.key, "conformity"));
                let logit = self.params.conformity_logit(facts) + noise;
                let p_wrong = 1.0 / (1.0 + (-logit).exp());
                let mut answers = BTreeMap::new();
                for answer in &request.answers {
                    // Logits ±logit/2: their difference is the planted logit, and both vary across trials.
                    let (p, logit) = if *answer == facts.wrong {
                        (p_wrong, (logit / 2.0) as f32)
                    } else if *answer == facts.correct {
                        (1.0 - p_wrong, (-logit / 2.0) as f32)
                    } else {
                        (0.0, f32::NEG_INFINITY)
                    };
                    answers.insert(
                        answer.clone(),
                        AnswerScore { p, logit, token_ids: Vec::new(), bound: ScoreBound::Exact },
                    );
                }
                let mass = answers.values().map(|a| a.p).sum();
                Ok(ScoreResult { answers, mass, top: Vec::new(), prompt_tokens: 0, reused_tokens: 0 })
            })
            .collect()
    }

    fn generate_trials(&mut self, batch: &[GenerateRequest], facts: &[AllocationFacts]) -> Result<Vec<Generation>> {
        checked(&self.params)?;
        check_facts("generate", batch.len(), facts.len())?;
        facts
            .iter()
            .map(|facts| {
                Ok(Generation {
                    text: self.params.allocation_reply(facts),
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    finish_reason: FinishReason::Eos,
                    constrained: false,
                    reasoning: None,
                })
            })
            .collect()
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            backend: "sim".into(),
            model: "sim".into(),
            family: "sim".into(),
            device: "none".into(),
            vision: false,
            compute: crate::ComputePath::elsewhere("none", "simulated"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_remainder_sums_to_the_pool() {
        let shares = [33.4, 33.3, 33.3];
        assert_eq!(largest_remainder(&shares, 100), vec![34, 33, 33]);
        let shares: Vec<f64> = (0..19).map(|i| 100.0 * f64::from(i + 1) / 190.0).collect();
        assert_eq!(largest_remainder(&shares, 100).iter().sum::<u32>(), 100);
    }

    #[test]
    fn out_of_range_parameters_are_refused_by_key_and_range() {
        assert_eq!(SimParams::default().validate(), Ok(()));
        for value in [1000.0, 710.0, f64::NAN, f64::INFINITY, -51.0] {
            let mut params = SimParams::default();
            params.allocation.ingroup_majority = value;
            let e = params.validate().unwrap_err();
            assert_eq!(e.key, "allocation.ingroup_majority");
            assert!(e.to_string().contains("[-50, 50]"), "{e}");
        }
        let mut params = SimParams::default();
        params.conformity.level_shift.insert("public".into(), f64::NEG_INFINITY);
        assert_eq!(params.validate().unwrap_err().key, "conformity.level_shift.public");
        let mut params = SimParams::default();
        params.conformity.noise_sd = -0.1;
        assert!(params.validate().unwrap_err().to_string().contains("conformity.noise_sd"));
        // The edges are valid.
        params.conformity.noise_sd = MAX_NOISE_SD;
        params.allocation.ingroup_minority = -MAX_LOG_EFFECT;
        assert_eq!(params.validate(), Ok(()));
    }

    #[test]
    fn a_saturating_curve_stops_rising_at_its_cap_and_rises_as_before_below_it() {
        let trial = |wrong_replies: u32| ConformityFacts {
            key: format!("t{wrong_replies}"),
            correct: "A".into(),
            wrong: "B".into(),
            wrong_replies,
            right_replies: 0,
            difficulty: 0.0,
            level: None,
            task: "lines".into(),
            family: "group_size".into(),
            difficulty_index: 0.5,
        };
        let steady = SimParams::default();
        let mut saturating = SimParams::default();
        saturating.conformity.saturates_at = Some(3.0);
        for n in 0..=3 {
            assert_eq!(saturating.conformity_logit(&trial(n)), steady.conformity_logit(&trial(n)), "N = {n}");
        }
        for n in [4, 6, 10] {
            assert_eq!(saturating.conformity_logit(&trial(n)), saturating.conformity_logit(&trial(3)), "N = {n}");
            assert!(steady.conformity_logit(&trial(n)) > steady.conformity_logit(&trial(3)), "N = {n}");
        }
        for bad in [0.0, -1.0, f64::NAN] {
            saturating.conformity.saturates_at = Some(bad);
            assert_eq!(saturating.validate().unwrap_err().key, "conformity.saturates_at");
        }
    }

    #[test]
    fn the_agent_refuses_to_answer_with_parameters_out_of_range() {
        let mut params = SimParams::default();
        params.allocation.ingroup_minority = 1000.0;
        let facts = AllocationFacts {
            key: "k".into(),
            roster: vec!["a".into(), "b".into()],
            same_group: vec![true, false],
            target_names: vec!["Alpha".into(), "Beta".into()],
            labels_visible: true,
            minority_decider: true,
            pool: 100,
            reasoning: "on".into(),
            instrument: "base".into(),
            swap_pass: "original".into(),
            minority_size: 2,
            society_size: 3,
        };
        let prompt = crate::chat::ChatPrompt::user(vec![crate::chat::Part::Text { text: "x".into() }]);
        let request = GenerateRequest::new(prompt, crate::backend::SamplingParams::default());
        let e = SimAgent::new(params).generate_trials(&[request], &[facts]).unwrap_err().to_string();
        assert!(e.contains("allocation.ingroup_minority") && e.contains("1000"), "{e}");
    }

    /// A decider of a society of `size` whose first `m` agents are the minority.
    fn decider(m: u32, size: u32, minority: bool, visible: bool) -> AllocationFacts {
        let me = if minority { 0 } else { size - 1 };
        let targets: Vec<u32> = (0..size).filter(|&i| i != me).collect();
        AllocationFacts {
            key: format!("society/{m}/{minority}/{visible}"),
            roster: targets.iter().map(|i| format!("agent_{i:02}")).collect(),
            same_group: targets.iter().map(|&i| (i < m) == minority).collect(),
            target_names: targets.iter().map(|&i| if i < m { "Alpha" } else { "Beta" }.to_owned()).collect(),
            labels_visible: visible,
            minority_decider: minority,
            pool: 100,
            reasoning: "on".into(),
            instrument: "base".into(),
            swap_pass: "original".into(),
            minority_size: m,
            society_size: size,
        }
    }

    #[test]
    fn a_name_weighs_the_same_whichever_group_carries_it_and_only_when_shown() {
        let mut params = SimParams::default();
        (params.allocation.ingroup_minority, params.allocation.ingroup_majority) = (0.0, 0.0);
        params.allocation.noise_sd = 0.0;
        let ratio = |params: &SimParams, facts: &AllocationFacts| {
            let shares = params.allocation_shares(facts);
            let alpha = facts.target_names.iter().position(|n| n == "Alpha").unwrap();
            let beta = facts.target_names.iter().position(|n| n == "Beta").unwrap();
            shares[alpha] / shares[beta]
        };
        let shown = decider(3, 20, true, true);
        assert_eq!(ratio(&params, &shown), 1.0, "no valence: every target weighs the same");
        params.allocation.name_valence = 1.0;
        let planted = ratio(&params, &shown);
        assert!((planted - 1.0).abs() > 1e-6, "a name with a valence of its own: {planted}");
        // The swap pass: the names change groups, and each keeps its weight.
        let mut swapped = decider(3, 20, true, true);
        swapped.key = "another society".into();
        for name in &mut swapped.target_names {
            *name = if name == "Alpha" { "Beta".into() } else { "Alpha".into() };
        }
        assert!((ratio(&params, &swapped) - planted).abs() < 1e-12);
        assert_eq!(ratio(&params, &decider(3, 20, true, false)), 1.0, "hidden labels show no name");
    }

    #[test]
    fn hidden_labels_carry_no_bias() {
        let params = SimParams::default();
        assert_eq!(params.allocation_behaviour(&decider(3, 20, true, false)).ingroup, 0.0);
        let minority = params.allocation_behaviour(&decider(3, 20, true, true)).ingroup;
        assert!(minority > params.allocation_behaviour(&decider(3, 20, false, true)).ingroup);
    }

    #[test]
    fn each_decider_takes_its_role_s_keys() {
        let mut params = SimParams::default();
        let a = &mut params.allocation;
        (a.ingroup_minority, a.ingroup_majority, a.ingroup_hidden) = (1.0, 0.5, 0.25);
        a.zero_outgroup_rate = 0.1;
        a.zero_outgroup_majority = Some(0.2);
        let role = |p: &SimParams, m, minority, visible| {
            let b = p.allocation_behaviour(&decider(m, 20, minority, visible));
            (b.ingroup, b.zero_outgroup)
        };
        assert_eq!(role(&params, 3, true, true), (1.0, 0.1));
        assert_eq!(role(&params, 3, false, true), (0.5, 0.2));
        assert_eq!(role(&params, 3, true, false), (0.25, 0.0), "hidden labels: ingroup_hidden, never all-zero");
        // Equal groups go by the minority flag until `ingroup_equal` and `zero_outgroup_equal` are given.
        assert_eq!(role(&params, 10, true, true), (1.0, 0.1));
        params.allocation.ingroup_equal = Some(0.75);
        params.allocation.zero_outgroup_equal = Some(0.3);
        assert_eq!(role(&params, 10, true, true), (0.75, 0.3));
        assert_eq!(role(&params, 10, false, true), (0.75, 0.3));
        assert_eq!(role(&params, 9, false, true), (0.5, 0.2), "m = 9 of 20 is not equal groups");
        assert_eq!(role(&params, 10, true, false), (0.25, 0.0));
    }

    #[test]
    fn overrides_replace_the_keys_they_give_base_reasoning_instrument_swap_pass_minority_size() {
        let mut params = SimParams::default();
        let a = &mut params.allocation;
        a.reasoning.insert(
            "off".into(),
            AllocationOverride { ingroup_minority: Some(1.0), noise_sd: Some(0.1), ..Default::default() },
        );
        a.instrument.insert(
            "paraphrase".into(),
            AllocationOverride { ingroup_minority: Some(2.0), parse_failure_rate: Some(0.5), ..Default::default() },
        );
        a.swap_pass.insert("swapped".into(), AllocationOverride { ingroup_minority: Some(3.0), ..Default::default() });
        let behaviour = |reasoning: &str, instrument: &str, pass: &str| {
            let facts = AllocationFacts {
                reasoning: reasoning.into(),
                instrument: instrument.into(),
                swap_pass: pass.into(),
                ..decider(3, 20, true, true)
            };
            let b = params.allocation_behaviour(&facts);
            (b.ingroup, b.noise_sd, b.parse_failure_rate)
        };
        assert_eq!(behaviour("on", "base", "original"), (0.6, 0.5, 0.0));
        assert_eq!(behaviour("off", "base", "original"), (1.0, 0.1, 0.0));
        assert_eq!(behaviour("off", "paraphrase", "original"), (2.0, 0.1, 0.5));
        assert_eq!(behaviour("off", "paraphrase", "swapped"), (3.0, 0.1, 0.5));
        assert_eq!(behaviour("on", "base", "swapped"), (3.0, 0.5, 0.0));
        // A majority decider keeps the base majority weight: the tables gave only the minority's.
        let majority = AllocationFacts { reasoning: "off".into(), ..decider(3, 20, false, true) };
        assert_eq!(params.allocation_behaviour(&majority).ingroup, 0.2);
        // A majority that favours the out-group at m = 3 only, over every other table.
        let mut by_m = params.clone();
        by_m.allocation
            .minority_size
            .insert("3".into(), AllocationOverride { ingroup_majority: Some(-0.4), ..Default::default() });
        assert_eq!(by_m.allocation_behaviour(&majority).ingroup, -0.4);
        assert_eq!(by_m.allocation_behaviour(&decider(5, 20, false, true)).ingroup, 0.2);
        let minority = AllocationFacts {
            reasoning: "off".into(),
            instrument: "paraphrase".into(),
            swap_pass: "swapped".into(),
            ..decider(3, 20, true, true)
        };
        assert_eq!(by_m.allocation_behaviour(&minority).ingroup, 3.0, "the minority keeps the other tables' key");
    }

    #[test]
    fn new_keys_are_refused_out_of_range_by_their_dotted_key() {
        let refused = |edit: &dyn Fn(&mut SimParams), key: &str, range: &str| {
            let mut params = SimParams::default();
            edit(&mut params);
            let e = params.validate().unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.to_string().contains(range), "{e}");
        };
        refused(&|p| p.conformity.difficulty_index = 60.0, "conformity.difficulty_index", "[-50, 50]");
        refused(
            &|p| _ = p.conformity.difficulty_index_by_task.insert("color".into(), f64::NAN),
            "conformity.difficulty_index_by_task.color",
            "[-50, 50]",
        );
        refused(
            &|p| _ = p.conformity.task_shift.insert("dots".into(), -51.0),
            "conformity.task_shift.dots",
            "[-50, 50]",
        );
        refused(
            &|p| _ = p.conformity.family_shift.insert("spatial".into(), 1e9),
            "conformity.family_shift.spatial",
            "[-50, 50]",
        );
        refused(&|p| p.allocation.ingroup_equal = Some(f64::INFINITY), "allocation.ingroup_equal", "[-50, 50]");
        refused(&|p| p.allocation.ingroup_hidden = 99.0, "allocation.ingroup_hidden", "[-50, 50]");
        refused(&|p| p.allocation.zero_outgroup_rate = 1.5, "allocation.zero_outgroup_rate", "[0, 1]");
        refused(&|p| p.allocation.zero_outgroup_equal = Some(-0.1), "allocation.zero_outgroup_equal", "[0, 1]");
        refused(&|p| p.allocation.parse_failure_rate = f64::NAN, "allocation.parse_failure_rate", "[0, 1]");
        refused(&|p| p.allocation.rescale_rate = 2.0, "allocation.rescale_rate", "[0, 1]");
        refused(&|p| p.allocation.missing_target_rate = -1.0, "allocation.missing_target_rate", "[0, 1]");
        refused(
            &|p| {
                let o = AllocationOverride { ingroup_majority: Some(-70.0), ..Default::default() };
                p.allocation.reasoning.insert("off".into(), o);
            },
            "allocation.reasoning.off.ingroup_majority",
            "[-50, 50]",
        );
        refused(
            &|p| {
                let o = AllocationOverride { zero_outgroup_minority: Some(3.0), ..Default::default() };
                p.allocation.instrument.insert("paraphrase".into(), o);
            },
            "allocation.instrument.paraphrase.zero_outgroup_minority",
            "[0, 1]",
        );
        refused(
            &|p| {
                let o = AllocationOverride { noise_sd: Some(11.0), ..Default::default() };
                p.allocation.swap_pass.insert("swapped".into(), o);
            },
            "allocation.swap_pass.swapped.noise_sd",
            "[0, 10]",
        );
        // The edges are valid.
        let mut params = SimParams::default();
        params.allocation.zero_outgroup_rate = 1.0;
        params.allocation.parse_failure_rate = 0.0;
        params.conformity.difficulty_index = -MAX_LOG_EFFECT;
        assert_eq!(params.validate(), Ok(()));
    }

    #[test]
    fn an_override_table_refuses_a_key_it_does_not_have() {
        let e = toml::from_str::<SimParams>("[allocation.reasoning.off]\ningroup = 1.0\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `ingroup`") && e.contains("ingroup_minority"), "{e}");
    }

    #[test]
    fn another_total_is_never_the_pool_and_within_a_fifth_of_it() {
        for pool in [1, 2, 5, 10, 19, 100, 1000] {
            for i in 0..100 {
                let total = other_total(pool, f64::from(i) / 100.0);
                assert_ne!(total, pool);
                let off = f64::from(total.abs_diff(pool)) / f64::from(pool);
                assert!(off <= 0.2 || total == pool + 1, "pool {pool}: {total}");
            }
        }
    }

    #[test]
    fn planted_replies_take_the_shape_the_parser_reads() {
        let facts = decider(5, 20, true, true);
        let reply = |edit: &dyn Fn(&mut SimAllocation)| {
            let mut params = SimParams::default();
            edit(&mut params.allocation);
            let text = params.allocation_reply(&facts);
            serde_json::from_str::<BTreeMap<String, u32>>(&text).map_err(|_| text)
        };
        let plain = reply(&|_| {}).unwrap();
        assert_eq!((plain.len(), plain.values().sum::<u32>()), (19, 100));
        let failed = reply(&|a| a.parse_failure_rate = 1.0).unwrap_err();
        assert!(!failed.contains('{'), "{failed}");
        let rescaled = reply(&|a| a.rescale_rate = 1.0).unwrap();
        let total = rescaled.values().sum::<u32>();
        assert!(total != 100 && (80..=120).contains(&total), "{total}");
        let missing = reply(&|a| a.missing_target_rate = 1.0).unwrap();
        assert_eq!(missing.len(), 18);
        assert!(missing.iter().all(|(id, p)| plain[id] == *p), "the others keep their points");
        let zero = reply(&|a| a.zero_outgroup_rate = 1.0).unwrap();
        for (same, id) in facts.same_group.iter().zip(&facts.roster) {
            assert_eq!(zero[id] == 0, !same, "{id}: {zero:?}");
        }
        assert_eq!(zero.values().sum::<u32>(), 100);
    }
}
