//! The exact text of every family's prompt, the draws that fill it, and the allocation prompts.

use herd_design::{
    Answer, ConformityExperiment, ConformityTrial, Experiment, ExperimentFile, Family, ImageSelection, Labels,
    MinimalGroupExperiment, Reasoning, SocietyRun, Task, Unit, UnitPlan, expand, load_experiment,
};
use herd_prompts::{
    AllocationBank, ConformityPlan, ConformityPrompter, GroupNames, Modality, Part, PlannedReply, Society,
    allocation_prompts, draw_society,
};
use herd_stimuli::ImagePools;
use std::path::Path;

fn load(name: &str) -> ExperimentFile {
    load_experiment(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments").join(name)).unwrap()
}

fn conformity() -> (ExperimentFile, ConformityExperiment, ConformityPrompter) {
    let file = load("conformity.quick.toml");
    let Experiment::Conformity(exp) = file.experiment.clone() else { panic!() };
    let prompter = ConformityPrompter::load(&file, &exp).unwrap();
    (file, exp, prompter)
}

fn trial(family: Family, level: Option<&str>, task: Task, n: u32) -> ConformityTrial {
    ConformityTrial {
        family,
        level: level.map(str::to_owned),
        task,
        n,
        trial: 1,
        image: ImageSelection::Balanced { correct: Answer::A },
    }
}

fn plan(replies: &[(Answer, usize, Option<&str>)]) -> ConformityPlan {
    ConformityPlan {
        correct: Answer::A,
        role: "participants".into(),
        replies: replies
            .iter()
            .map(|&(answer, template, a)| PlannedReply { answer, template, annotation: a.map(str::to_owned) })
            .collect(),
        own_identity: None,
        their_identity: None,
        framing: None,
    }
}

const COLOR: &str = "In the image, there are three colored squares labeled A, REFERENCE COLOR, and B.\nWhich of the squares, A or B, has the same color as the REFERENCE COLOR?";
const CLOSING: &str = "Provide only the final answer, either A or B, without generating anything else.";
const THREE: &[(Answer, usize, Option<&str>)] = &[(Answer::B, 0, None), (Answer::B, 6, None), (Answer::B, 9, None)];

#[test]
fn baseline_prompts_of_the_three_tasks() {
    let (_, _, p) = conformity();
    let expected = [
        (
            Task::Lines,
            "In the image, there are three vertical lines labeled A, REFERENCE LINE, and B.\nWhich of the lines, A or B, is the same length as the REFERENCE LINE?",
        ),
        (Task::Color, COLOR),
        (
            Task::Dots,
            "In the image, there are three boxes labeled A, REFERENCE BOX, and B.\nWhich of the boxes, A or B, contains the same number of black dots as the REFERENCE BOX?",
        ),
    ];
    for (task, question) in expected {
        let body = p.body(&trial(Family::GroupSize, None, task, 0), &plan(&[])).unwrap();
        assert_eq!(body, format!("{question}\n{CLOSING}"));
    }
}

#[test]
fn group_size_and_source_strength() {
    let (_, _, p) = conformity();
    let replies = "reply 1: I think the answer is B.\nreply 2: B is my choice.\nreply 3: I'm leaning toward B.";
    let body = p.body(&trial(Family::GroupSize, None, Task::Color, 3), &plan(THREE)).unwrap();
    assert_eq!(
        body,
        format!("{COLOR}\nThe participants before you provided the following replies:\n{replies}\n{CLOSING}")
    );
    let mut scientists = plan(THREE);
    scientists.role = "scientists".into();
    let body = p.body(&trial(Family::SourceStrength, Some("scientists"), Task::Color, 3), &scientists).unwrap();
    assert_eq!(
        body,
        format!("{COLOR}\nThe scientists before you provided the following replies:\n{replies}\n{CLOSING}")
    );
}

#[test]
fn normative_framing_sits_between_question_and_replies() {
    let (_, _, p) = conformity();
    let mut public = plan(&THREE[..1]);
    public.framing = Some("Your response will be shared with other participants.".into());
    let body = p.body(&trial(Family::Normative, Some("public"), Task::Color, 1), &public).unwrap();
    assert_eq!(
        body,
        format!(
            "{COLOR}\nYour response will be shared with other participants.\nThe participants before you provided the following replies:\nreply 1: I think the answer is B.\n{CLOSING}"
        )
    );
}

#[test]
fn identity_families_prefix_intro_and_replies() {
    let (_, _, p) = conformity();
    let cases = [
        (Family::Nationality, "Italian", "French", "Your nationality is Italian."),
        (Family::Ethnicity, "Asian", "Asian", "Your ethnicity is Asian."),
        (Family::MinimalGroup, "K", "Q", "You will be divided into groups with other participants.\nYour group is K."),
    ];
    for (family, own, theirs, intro) in cases {
        let mut pl = plan(&THREE[..2]);
        pl.own_identity = Some(own.into());
        pl.their_identity = Some(theirs.into());
        let body = p.body(&trial(family, Some("different"), Task::Color, 2), &pl).unwrap();
        assert_eq!(
            body,
            format!(
                "{intro}\n{COLOR}\nThe participants before you provided the following replies:\n{theirs}: reply 1: I think the answer is B.\n{theirs}: reply 2: B is my choice.\n{CLOSING}"
            )
        );
    }
}

#[test]
fn proximity_families_annotate_every_reply() {
    let (_, _, p) = conformity();
    let spatial = plan(&[(Answer::B, 1, Some("right here")), (Answer::B, 2, Some("ten meters away"))]);
    let body = p.body(&trial(Family::Spatial, Some("far"), Task::Color, 2), &spatial).unwrap();
    assert_eq!(
        body,
        format!(
            "{COLOR}\nThe participants before you provided the following answers.\nEach participant is located at a specific distance from you, which is indicated before their response:\nreply 1 (distance from you: right here): My answer is B.\nreply 2 (distance from you: ten meters away): I'm going with B.\n{CLOSING}"
        )
    );
    let temporal = plan(&[(Answer::B, 3, Some("2 minutes ago"))]);
    let body = p.body(&trial(Family::Temporal, Some("far"), Task::Color, 1), &temporal).unwrap();
    assert_eq!(
        body,
        format!(
            "{COLOR}\nThe participants before you provided the following answers.\nEach participant responded at a different time, which is indicated before their response:\nreply 1 (time of reply: 2 minutes ago): It could be B.\n{CLOSING}"
        )
    );
}

fn unit_plan(units: &[Unit], family: &str, level: Option<&str>, n: &str) -> (herd_design::UnitKey, ConformityTrial) {
    let u = units
        .iter()
        .find(|u| {
            u.key.cell.family == family && u.key.cell.factor("level") == level && u.key.cell.factor("n") == Some(n)
        })
        .unwrap_or_else(|| panic!("no unit {family} {level:?} {n}"));
    let UnitPlan::Conformity(t) = &u.plan else { panic!() };
    (u.key.clone(), t.clone())
}

#[test]
fn drawn_plans_follow_each_level() {
    let (file, exp, p) = conformity();
    let units = expand(&file.experiment);
    let wrongs = |level: &str, n: &str| {
        let (key, t) = unit_plan(&units, "unanimity", Some(level), n);
        let plan = p.plan(&key, &t, Answer::A).unwrap();
        (plan.replies.len(), plan.replies.iter().filter(|r| r.answer == Answer::B).count())
    };
    assert_eq!(wrongs("wrong_100", "5"), (5, 5));
    assert_eq!(wrongs("wrong_80", "5"), (5, 4));
    assert_eq!(wrongs("wrong_50", "5"), (5, 2)); // 2.5 rounds towards the correct answer
    assert_eq!(wrongs("wrong_0", "5"), (5, 0));
    assert_eq!(wrongs("one_ally", "5"), (6, 5));
    assert_eq!(wrongs("two_allies", "5"), (7, 5));

    // N = 0 is the plain baseline in every family.
    let (key, t) = unit_plan(&units, "nationality", Some("same"), "0");
    assert!(p.plan(&key, &t, Answer::B).unwrap().replies.is_empty());

    // Same vs different identity, with the model's own identity and the reply wordings shared by the levels.
    for family in ["nationality", "ethnicity", "minimal_group"] {
        let (ks, ts) = unit_plan(&units, family, Some("same"), "5");
        let (kd, td) = unit_plan(&units, family, Some("different"), "5");
        let same = p.plan(&ks, &ts, Answer::A).unwrap();
        let different = p.plan(&kd, &td, Answer::A).unwrap();
        assert_eq!(same.own_identity, same.their_identity);
        assert_ne!(different.own_identity, different.their_identity);
        assert_eq!(same.own_identity, different.own_identity, "{family}: own identity is paired across levels");
        assert_eq!(same.replies, different.replies);
    }
    // Near: every reply right here; far: every reply from the far list.
    let far_list = &exp.families.spatial.as_ref().unwrap().far;
    let (k, t) = unit_plan(&units, "spatial", Some("near"), "5");
    assert!(p.plan(&k, &t, Answer::A).unwrap().replies.iter().all(|r| r.annotation.as_deref() == Some("right here")));
    let (k, t) = unit_plan(&units, "spatial", Some("far"), "5");
    assert!(
        p.plan(&k, &t, Answer::A).unwrap().replies.iter().all(|r| far_list.contains(r.annotation.as_ref().unwrap()))
    );
    // Source strength replaces the role word only.
    let (k, t) = unit_plan(&units, "source_strength", Some("kids"), "5");
    let kids = p.plan(&k, &t, Answer::A).unwrap();
    assert_eq!(kids.role, "kids");
    // Normative: paraphrase i of the bank, public and private matched.
    let (k, t) = unit_plan(&units, "normative", Some("private"), "5");
    let private = p.plan(&k, &t, Answer::A).unwrap();
    assert_eq!(private.framing.as_deref(), Some(p.normative.as_ref().unwrap().private[t.trial as usize].as_str()));
}

#[test]
fn broken_unanimity_plans_keep_a_right_confederate_at_every_n() {
    // The full profile runs N = 1..=10; every planned trial of a share below 100% has a dissenter.
    let file = load("conformity.toml");
    let Experiment::Conformity(exp) = file.experiment.clone() else { panic!() };
    let p = ConformityPrompter::load(&file, &exp).unwrap();
    let expected: [(&str, [usize; 10]); 4] = [
        ("wrong_100", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        ("wrong_80", [0, 1, 2, 3, 4, 4, 5, 6, 7, 8]),
        ("wrong_50", [0, 1, 1, 2, 2, 3, 3, 4, 4, 5]),
        ("wrong_0", [0; 10]),
    ];
    let mut planned = 0;
    for u in expand(&file.experiment) {
        let UnitPlan::Conformity(t) = &u.plan else { continue };
        let Some((level, wrong)) =
            expected.iter().find(|(l, _)| t.family == Family::Unanimity && t.level.as_deref() == Some(*l))
        else {
            continue;
        };
        if t.task != Task::Lines || t.n == 0 || t.trial > 1 {
            continue;
        }
        for correct in [Answer::A, Answer::B] {
            let plan = p.plan(&u.key, t, correct).unwrap();
            let n_wrong = plan.replies.iter().filter(|r| r.answer != correct).count();
            assert_eq!(plan.replies.len(), t.n as usize, "{level} N = {}", t.n);
            assert_eq!(n_wrong, wrong[t.n as usize - 1], "{level} N = {}: {}", t.n, plan.confederate_answers());
            if *level != "wrong_100" {
                assert!(n_wrong < plan.replies.len(), "{level} N = {}: nobody is right", t.n);
            }
            planned += 1;
        }
    }
    assert_eq!(planned, 4 * 10 * 2 * 2, "every level, N = 1..=10, two trials, both answers");
}

#[test]
fn rendered_prompts_put_the_image_first_or_its_text() {
    let (file, exp, p) = conformity();
    let units = expand(&file.experiment);
    let pools = ImagePools::preview(&exp, Task::Lines).unwrap();
    let (key, t) = units
        .iter()
        .find_map(|u| match &u.plan {
            UnitPlan::Conformity(t) if t.task == Task::Lines && t.family == Family::GroupSize && t.n == 2 => {
                Some((u.key.clone(), t.clone()))
            }
            _ => None,
        })
        .unwrap();
    let image = pools.select(&key, &t).unwrap();
    let vision = p.render(&key, &t, image, Modality::Vision).unwrap();
    let content = &vision.messages[0].content;
    assert_eq!(content[0], Part::Image { image: image.id.clone() });
    assert!(matches!(&content[1], Part::Text { text } if text.ends_with(CLOSING)));
    let text = p.render(&key, &t, image, Modality::Text).unwrap();
    let Part::Text { text } = &text.messages[0].content[0] else { panic!() };
    let herd_stimuli::TaskParams::Lines { distractor_length, .. } = image.params else { panic!() };
    let wrong_first = image.correct == Answer::B;
    let expected_start = if wrong_first {
        format!(
            "The image is given below as text.\nA: a vertical line {distractor_length} pixels long\nREFERENCE LINE: a vertical line 300 pixels long\nB: a vertical line 300 pixels long\n\nIn the image"
        )
    } else {
        format!(
            "The image is given below as text.\nA: a vertical line 300 pixels long\nREFERENCE LINE: a vertical line 300 pixels long\nB: a vertical line {distractor_length} pixels long\n\nIn the image"
        )
    };
    assert!(text.starts_with(&expected_start), "{text}");
    // Deterministic: the same unit renders to the same prompt.
    assert_eq!(vision.hash(), p.render(&key, &t, image, Modality::Vision).unwrap().hash());
}

fn minimal_group() -> (ExperimentFile, MinimalGroupExperiment, AllocationBank, GroupNames) {
    let file = load("minimal-group.toml");
    let Experiment::MinimalGroup(exp) = file.experiment.clone() else { panic!() };
    let bank = AllocationBank::load(&file.resolve(&exp.prompts.bank)).unwrap();
    let names = GroupNames::load(&file.resolve(&exp.society.group_names)).unwrap();
    (file, exp, bank, names)
}

fn run(labels: Labels, instrument: &str, swapped: bool) -> SocietyRun {
    SocietyRun { minority_size: 3, labels, instrument: instrument.into(), reasoning: Reasoning::On, seed: 0, swapped }
}

#[test]
fn allocation_prompt_exact_text() {
    let (file, exp, bank, _) = minimal_group();
    let mut minority = vec![false; 20];
    for i in [1, 4, 16] {
        minority[i] = true;
    }
    let society = Society {
        ids: (1..=20).map(|i| format!("agent_{i:02}")).collect(),
        minority,
        minority_name: "Kalvo".into(),
        majority_name: "Tesim".into(),
    };
    let key = expand(&file.experiment).remove(0).key;
    let roster = |visible: bool| -> String {
        (1..=20)
            .filter(|&i| i != 2)
            .map(|i| {
                let group = if [2, 5, 17].contains(&i) { "Kalvo" } else { "Tesim" };
                if visible { format!("- agent_{i:02} [{group}]") } else { format!("- agent_{i:02}") }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let visible = allocation_prompts(&exp, &bank, &society, &key, &run(Labels::Visible, "base", false)).unwrap();
    assert_eq!(visible.len(), 20);
    let decider = &visible[1];
    assert_eq!(decider.decider, "agent_02");
    assert!(decider.minority_decider);
    assert_eq!(decider.roster.len(), 19);
    assert_eq!(decider.roster[0].position, 1);
    assert_eq!(
        decider.prompt.text(),
        format!(
            "You are agent_02, one of 20 participants in this study.\nYou belong to group Kalvo.\nYou have 100 points to distribute among the other 19 participants listed below.\nThe group of each participant is shown in brackets after their id.\n\nParticipants:\n{}\n\nRespond with exactly one JSON object that maps each listed participant id to a whole number of points. The numbers must be non-negative and sum to 100. Do not include yourself. Output nothing else.",
            roster(true)
        )
    );
    let hidden = allocation_prompts(&exp, &bank, &society, &key, &run(Labels::Hidden, "base", false)).unwrap();
    let text = hidden[1].prompt.text();
    assert_eq!(
        text,
        format!(
            "You are agent_02, one of 20 participants in this study.\nYou have 100 points to distribute among the other 19 participants listed below.\n\nParticipants:\n{}\n\nRespond with exactly one JSON object that maps each listed participant id to a whole number of points. The numbers must be non-negative and sum to 100. Do not include yourself. Output nothing else.",
            roster(false)
        )
    );
    assert!(!text.contains("Kalvo") && !text.contains("Tesim"), "hidden labels leak nowhere");
    let paraphrase =
        allocation_prompts(&exp, &bank, &society, &key, &run(Labels::Visible, "paraphrase", false)).unwrap();
    assert!(
        paraphrase[1]
            .prompt
            .text()
            .starts_with("Participant agent_02: this task involves 20 people, you included.\nYour group is Kalvo.\n")
    );
    assert!(allocation_prompts(&exp, &bank, &society, &key, &run(Labels::Visible, "nonexistent", false)).is_err());
}

#[test]
fn societies_are_paired_across_arms_and_swapped_between_passes() {
    let (file, exp, _, names) = minimal_group();
    let units = expand(&file.experiment);
    let societies: Vec<(SocietyRun, Society)> = units
        .iter()
        .filter_map(|u| match &u.plan {
            UnitPlan::Society(r) if r.seed == 4 && r.minority_size == 5 => {
                Some((r.clone(), draw_society(&exp, &u.key, r, &names)))
            }
            _ => None,
        })
        .collect();
    assert!(societies.len() >= 8);
    let (first_run, first) = &societies[0];
    for (r, s) in &societies {
        assert_eq!(s.minority.iter().filter(|&&m| m).count(), 5);
        assert_eq!(s.minority, first.minority, "membership shared by visible/hidden, instruments, passes");
        if r.swapped == first_run.swapped {
            assert_eq!((&s.minority_name, &s.majority_name), (&first.minority_name, &first.majority_name));
        } else {
            assert_eq!((&s.minority_name, &s.majority_name), (&first.majority_name, &first.minority_name));
        }
    }
    // Different seeds give different societies.
    let other = units.iter().find_map(|u| match &u.plan {
        UnitPlan::Society(r) if r.seed == 5 && r.minority_size == 5 => Some(draw_society(&exp, &u.key, r, &names)),
        _ => None,
    });
    assert_ne!(other.unwrap().minority, first.minority);
}

#[test]
fn a_group_name_bank_with_other_than_two_names_in_a_pair_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("herd-group-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, names) in
        [("pairs = [[\"Kalvo\", \"Tesim\"], [\"Feltu\", \"Brivo\", \"Zank\"]]", 3), ("pairs = [[\"Solo\"]]", 1)]
    {
        let file = dir.join(format!("names-{names}.toml"));
        std::fs::write(&file, text).unwrap();
        let err = GroupNames::load(&file).unwrap_err().to_string();
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(err.contains(&format!("has {names} names")) && err.contains("exactly two"), "{err}");
    }
    let two = dir.join("two.toml");
    std::fs::write(&two, "pairs = [[\"Kalvo\", \"Tesim\"]]").unwrap();
    assert_eq!(GroupNames::load(&two).unwrap().pairs, vec![["Kalvo".to_owned(), "Tesim".to_owned()]]);
    std::fs::remove_dir_all(&dir).ok();
}
