//! Old sim files answer as they did: the agent's replies to a few trials, pinned with the values the
//! agent gave before the keys of issue 40 (reasoning mode, equal groups, instruments, swap passes,
//! families, tasks, the difficulty index, all-zero allocations, parse failures) were added. A new key
//! left out of a file must change nothing: every new draw comes from a stream of its own, and every new
//! term is exactly zero by default.

use herd_backend::chat::{ChatPrompt, Part};
use herd_backend::{
    AllocationFacts, ConformityFacts, GenerateRequest, SamplingParams, ScoreRequest, SimAgent, SimBackend, SimParams,
};

/// `data/sim/paper-effects.toml` as it was before issue 40 (with the agent's field name `noise_sd`;
/// herd-cli reads the file's `noise` as it).
const PAPER_EFFECTS_BEFORE: &str = r#"
seed = 1001

[conformity]
intercept = -4.5
per_log_wrong = 1.8
per_log_right = -1.0
difficulty = 1.5
noise_sd = 0.5

[conformity.level_shift]
public = 0.4
same = 0.4
different = -0.3
near = 0.3
judges = 0.3
scientists = 0.5
kids = -0.5
chatbots = -0.3

[allocation]
ingroup_minority = 0.6
ingroup_majority = 0.2
noise_sd = 0.5
"#;

fn prompt() -> ChatPrompt {
    ChatPrompt::user(vec![Part::Text { text: "x".into() }])
}

/// (key, wrong replies, right replies, difficulty, level, task, family, difficulty index)
type Trial = (&'static str, u32, u32, f64, Option<&'static str>, &'static str, &'static str, f64);

const TRIALS: [Trial; 6] = [
    ("conformity/group_size#3.0", 0, 0, 0.0, None, "lines", "group_size", 0.004),
    ("conformity/group_size#3.7", 7, 0, 0.0, None, "color", "group_size", 400.0),
    ("conformity/unanimity#1.2", 4, 1, 0.0, Some("wrong_80"), "dots", "unanimity", 0.05),
    ("conformity/normative#9.0", 5, 0, 0.0, Some("public"), "lines", "normative", 0.002),
    ("conformity/difficulty#2.4", 3, 0, 0.7, None, "dots", "difficulty", 0.5),
    ("conformity/nationality#4.1", 10, 0, 0.0, Some("different"), "color", "nationality", 420.0),
];

fn conformity_facts(t: &Trial) -> ConformityFacts {
    let (key, wrong_replies, right_replies, difficulty, level, task, family, difficulty_index) = *t;
    ConformityFacts {
        key: key.into(),
        correct: "A".into(),
        wrong: "B".into(),
        wrong_replies,
        right_replies,
        difficulty,
        level: level.map(str::to_owned),
        task: task.into(),
        family: family.into(),
        difficulty_index,
    }
}

/// (key, minority size, labels visible, minority decider, reasoning, instrument, swap pass)
type Decider = (&'static str, u32, bool, bool, &'static str, &'static str, &'static str);

const DECIDERS: [Decider; 5] = [
    ("minimal_group/m3#0.0/agent_01", 3, true, true, "on", "base", "original"),
    ("minimal_group/m3#0.0/agent_07", 3, true, false, "off", "base", "swapped"),
    ("minimal_group/m10#4.1/agent_12", 10, true, true, "on", "paraphrase", "original"),
    ("minimal_group/m5#2.0/agent_03", 5, false, true, "on", "base", "original"),
    ("minimal_group/m5#2.0/agent_19", 5, false, false, "off", "base", "swapped"),
];

/// A society of 20 whose first `m` agents are the minority, seen by decider `d` (its index).
fn allocation_facts(d: &Decider, decider: usize) -> AllocationFacts {
    let (key, m, labels_visible, minority_decider, reasoning, instrument, swap_pass) = *d;
    let targets: Vec<usize> = (0..20).filter(|&i| i != decider).collect();
    AllocationFacts {
        key: key.into(),
        roster: targets.iter().map(|i| format!("agent_{:02}", i + 1)).collect(),
        same_group: targets.iter().map(|&i| (i < m as usize) == minority_decider).collect(),
        target_names: targets.iter().map(|&i| if i < m as usize { "Alpha" } else { "Beta" }.to_owned()).collect(),
        labels_visible,
        minority_decider,
        pool: 100,
        reasoning: reasoning.into(),
        instrument: instrument.into(),
        swap_pass: swap_pass.into(),
        minority_size: m,
        society_size: 20,
    }
}

/// Each trial's P(wrong) and the wrong answer's logit, bit for bit; each decider's reply text.
fn answers(params: SimParams) -> (Vec<(u64, u32)>, Vec<String>) {
    let mut agent = SimAgent::new(params);
    let facts: Vec<ConformityFacts> = TRIALS.iter().map(conformity_facts).collect();
    let requests: Vec<ScoreRequest> =
        facts.iter().map(|_| ScoreRequest::new(prompt(), vec!["A".into(), "B".into()])).collect();
    let scores = agent.score_trials(&requests, &facts).unwrap();
    let scores = scores.iter().map(|s| (s.answers["B"].p.to_bits(), s.answers["B"].logit.to_bits())).collect();
    let deciders: Vec<AllocationFacts> = DECIDERS
        .iter()
        .map(|d| {
            let decider = if d.3 { 1 } else { 12 };
            allocation_facts(d, decider)
        })
        .collect();
    let requests: Vec<GenerateRequest> =
        deciders.iter().map(|_| GenerateRequest::new(prompt(), SamplingParams::default())).collect();
    let texts = agent.generate_trials(&requests, &deciders).unwrap().into_iter().map(|g| g.text).collect();
    (scores, texts)
}

// The values below were printed from this file's `answers` (scores with `{:?}`, each reply as a raw
// string) with the agent as it was before issue 40.
const DEFAULT_SCORES: [(u64, u32); 6] = [
    (4582202272138699138, 3220227569),
    (4600759059523170915, 3193808444),
    (4592604894961808730, 3213209060),
    (4595677860714832401, 3208740855),
    (4596562603046069009, 3207416604),
    (4603633131939387747, 1046237916),
];
const DEFAULT_REPLIES: [&str; 5] = [
    r#"{"agent_01":21,"agent_03":8,"agent_04":4,"agent_05":10,"agent_06":4,"agent_07":5,"agent_08":5,"agent_09":5,"agent_10":6,"agent_11":5,"agent_12":6,"agent_13":4,"agent_14":2,"agent_15":2,"agent_16":3,"agent_17":2,"agent_18":4,"agent_19":2,"agent_20":2}"#,
    r#"{"agent_01":4,"agent_02":5,"agent_03":3,"agent_04":17,"agent_05":7,"agent_06":3,"agent_07":2,"agent_08":7,"agent_09":3,"agent_10":8,"agent_11":6,"agent_12":2,"agent_14":3,"agent_15":9,"agent_16":2,"agent_17":4,"agent_18":5,"agent_19":3,"agent_20":7}"#,
    r#"{"agent_01":6,"agent_03":12,"agent_04":6,"agent_05":4,"agent_06":7,"agent_07":17,"agent_08":4,"agent_09":11,"agent_10":9,"agent_11":3,"agent_12":3,"agent_13":1,"agent_14":4,"agent_15":3,"agent_16":1,"agent_17":4,"agent_18":2,"agent_19":2,"agent_20":1}"#,
    r#"{"agent_01":11,"agent_03":4,"agent_04":3,"agent_05":4,"agent_06":3,"agent_07":7,"agent_08":9,"agent_09":2,"agent_10":8,"agent_11":5,"agent_12":5,"agent_13":4,"agent_14":12,"agent_15":3,"agent_16":3,"agent_17":4,"agent_18":4,"agent_19":6,"agent_20":3}"#,
    r#"{"agent_01":5,"agent_02":6,"agent_03":6,"agent_04":5,"agent_05":2,"agent_06":7,"agent_07":4,"agent_08":2,"agent_09":4,"agent_10":2,"agent_11":7,"agent_12":6,"agent_14":10,"agent_15":15,"agent_16":6,"agent_17":3,"agent_18":3,"agent_19":5,"agent_20":2}"#,
];
const PAPER_EFFECTS_SCORES: [(u64, u32); 6] = [
    (4580698273215260353, 3221285243),
    (4600545546052910568, 3195484163),
    (4595435763423640141, 3209127290),
    (4601041055760462158, 3191621928),
    (4598632102861156037, 3203904423),
    (4601903428579119131, 3182476714),
];
const PAPER_EFFECTS_REPLIES: [&str; 5] = [
    r#"{"agent_01":6,"agent_03":9,"agent_04":4,"agent_05":6,"agent_06":4,"agent_07":5,"agent_08":6,"agent_09":2,"agent_10":1,"agent_11":12,"agent_12":2,"agent_13":8,"agent_14":4,"agent_15":8,"agent_16":3,"agent_17":3,"agent_18":5,"agent_19":3,"agent_20":9}"#,
    r#"{"agent_01":4,"agent_02":2,"agent_03":6,"agent_04":3,"agent_05":6,"agent_06":6,"agent_07":2,"agent_08":7,"agent_09":6,"agent_10":10,"agent_11":5,"agent_12":6,"agent_14":8,"agent_15":5,"agent_16":4,"agent_17":8,"agent_18":3,"agent_19":3,"agent_20":6}"#,
    r#"{"agent_01":2,"agent_03":5,"agent_04":5,"agent_05":10,"agent_06":8,"agent_07":4,"agent_08":5,"agent_09":5,"agent_10":13,"agent_11":1,"agent_12":3,"agent_13":3,"agent_14":5,"agent_15":3,"agent_16":6,"agent_17":5,"agent_18":7,"agent_19":7,"agent_20":3}"#,
    r#"{"agent_01":3,"agent_03":6,"agent_04":2,"agent_05":12,"agent_06":3,"agent_07":3,"agent_08":3,"agent_09":3,"agent_10":4,"agent_11":6,"agent_12":10,"agent_13":8,"agent_14":3,"agent_15":3,"agent_16":8,"agent_17":3,"agent_18":7,"agent_19":4,"agent_20":9}"#,
    r#"{"agent_01":5,"agent_02":7,"agent_03":6,"agent_04":5,"agent_05":6,"agent_06":3,"agent_07":3,"agent_08":4,"agent_09":14,"agent_10":5,"agent_11":4,"agent_12":3,"agent_14":8,"agent_15":7,"agent_16":2,"agent_17":3,"agent_18":4,"agent_19":6,"agent_20":5}"#,
];

fn pinned(scores: &[(u64, u32)], replies: &[&str]) -> (Vec<(u64, u32)>, Vec<String>) {
    (scores.to_vec(), replies.iter().map(|r| (*r).to_owned()).collect())
}

#[test]
fn the_default_agent_answers_as_before() {
    assert_eq!(answers(SimParams::default()), pinned(&DEFAULT_SCORES, &DEFAULT_REPLIES));
}

#[test]
fn the_paper_effects_file_of_before_answers_as_before() {
    let params: SimParams = toml::from_str(PAPER_EFFECTS_BEFORE).unwrap();
    assert_eq!(answers(params), pinned(&PAPER_EFFECTS_SCORES, &PAPER_EFFECTS_REPLIES));
}

#[test]
fn new_keys_at_their_defaults_change_nothing() {
    // Written out at their defaults, the new keys give the same answers as when left out.
    let written = format!(
        "{PAPER_EFFECTS_BEFORE}
zero_outgroup_rate = 0.0
parse_failure_rate = 0.0
rescale_rate = 0.0
missing_target_rate = 0.0
ingroup_hidden = 0.0
[allocation.reasoning.off]
[conformity.task_shift]
[conformity.family_shift]
"
    );
    let written = written.replacen("[conformity]\n", "[conformity]\ndifficulty_index = 0.0\n", 1);
    let params: SimParams = toml::from_str(&written).unwrap();
    assert_eq!(answers(params), pinned(&PAPER_EFFECTS_SCORES, &PAPER_EFFECTS_REPLIES));
}
