//! The shipped experiment files, validation errors for bad files, determinism and sharding.

use herd_design::rand::Rng;
use herd_design::{
    Experiment, PWrong, Shard, UnanimityRule, Unit, UnitPlan, bank_files, expand, family_names, load_experiment,
    parse_experiment, wrong_share_count,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;
use common::MINIMAL_GROUP;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments").join(name)
}

fn per_family(units: &[Unit]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for u in units {
        *counts.entry(u.key.cell.family.clone()).or_default() += 1;
    }
    counts
}

#[test]
fn full_conformity_has_the_papers_grid() {
    let file = load_experiment(&data("conformity.toml")).unwrap();
    let units = expand(&file.experiment);
    let counts = per_family(&units);
    // 3 tasks × 11 N × 64 trials; unanimity × 7 levels; difficulty 10 levels × 50 images × 11 N;
    // normative 2 framings × 100 paraphrases × 11 N; 12 roles; 2 relations; near/far.
    let expected = [
        ("group_size", 3 * 11 * 64),
        ("unanimity", 7 * 3 * 11 * 64),
        ("difficulty", 3 * 10 * 50 * 11),
        ("normative", 3 * 2 * 100 * 11),
        ("source_strength", 12 * 3 * 11 * 64),
        ("nationality", 2 * 3 * 11 * 64),
        ("ethnicity", 2 * 3 * 11 * 64),
        ("minimal_group", 2 * 3 * 11 * 64),
        ("spatial", 2 * 3 * 11 * 64),
        ("temporal", 2 * 3 * 11 * 64),
    ];
    for (family, n) in expected {
        assert_eq!(counts.get(family), Some(&n), "{family}");
    }
    // Every balanced cell has as many A-correct as B-correct trials.
    let mut balance: BTreeMap<String, i64> = BTreeMap::new();
    for u in &units {
        if let UnitPlan::Conformity(t) = &u.plan
            && let herd_design::ImageSelection::Balanced { correct } = t.image
        {
            *balance.entry(u.key.cell.id()).or_default() += if correct == herd_design::Answer::A { 1 } else { -1 };
        }
    }
    assert!(balance.values().all(|&b| b == 0));
}

#[test]
fn full_minimal_group_has_the_papers_grid() {
    let file = load_experiment(&data("minimal-group.toml")).unwrap();
    let units = expand(&file.experiment);
    // 3 m × 2 labels × 2 reasoning × (30 base + 15 paraphrase seeds) × 2 passes.
    assert_eq!(units.len(), 3 * 2 * 2 * (30 + 15) * 2);
    let ids: BTreeSet<String> = units.iter().map(|u| u.key.id()).collect();
    assert_eq!(ids.len(), units.len(), "unit ids are unique");
}

#[test]
fn quick_profiles_keep_every_family() {
    for study in ["conformity", "minimal-group"] {
        let full = load_experiment(&data(&format!("{study}.toml"))).unwrap();
        let quick = load_experiment(&data(&format!("{study}.quick.toml"))).unwrap();
        assert_eq!(family_names(&full.experiment), family_names(&quick.experiment), "{study}");
        let (f, q) = (expand(&full.experiment), expand(&quick.experiment));
        assert!(q.len() * 20 < f.len(), "{study}: quick is much smaller");
        assert_eq!(per_family(&f).keys().collect::<Vec<_>>(), per_family(&q).keys().collect::<Vec<_>>());
    }
    let Experiment::MinimalGroup(q) = load_experiment(&data("minimal-group.quick.toml")).unwrap().experiment else {
        panic!("minimal-group.quick.toml is a minimal-group experiment")
    };
    // Quick keeps both groups' deciders, both label conditions and both reasoning modes; the paraphrase
    // instrument is the full profile's.
    assert_eq!(q.society.minority_sizes, vec![5]);
    assert_eq!(q.instruments.len(), 1);
    assert_eq!(q.design.labels.len(), 2);
    assert_eq!(q.design.reasoning.len(), 2);
    // Enough societies per label arm for every seed-level test to be defined and able to reach
    // p < 0.01 (a signed-rank test's smallest p on n seeds is 2 / 2^n).
    assert!(q.design.seeds >= 8, "quick runs {} societies per cell", q.design.seeds);
}

#[test]
fn shipped_minimal_group_files_set_only_the_papers_temperature() {
    // The paper called HF `generate` with temperature 0.7 and nothing else, so top_p and top_k stay the
    // model's own (its generation_config.json); setting them here would override every model's defaults.
    for name in ["minimal-group.toml", "minimal-group.quick.toml"] {
        let Experiment::MinimalGroup(e) = load_experiment(&data(name)).unwrap().experiment else {
            panic!("{name} is a minimal-group experiment")
        };
        assert_eq!(
            (e.generation.temperature, e.generation.top_p, e.generation.top_k),
            (Some(0.7), None, None),
            "{name}"
        );
    }
    // Left out entirely (the base text has no [generation] table), nothing is overridden.
    assert!(!MINIMAL_GROUP.contains("[generation]"));
    let Experiment::MinimalGroup(e) = parse_experiment(MINIMAL_GROUP, Path::new("m.toml")).unwrap() else { panic!() };
    assert_eq!((e.generation.temperature, e.generation.top_p, e.generation.top_k), (None, None, None));
    let with = MINIMAL_GROUP.replacen(
        "reasoning = [\"on\"]",
        "reasoning = [\"on\"]\n[generation]\ntemperature = 0.0\ntop_p = 1.0\ntop_k = 0",
        1,
    );
    let Experiment::MinimalGroup(e) = parse_experiment(&with, Path::new("m.toml")).unwrap() else { panic!() };
    assert_eq!(
        (e.generation.temperature, e.generation.top_p, e.generation.top_k),
        (Some(0.0), Some(1.0), Some(0)),
        "greedy, no cut: the edges are valid"
    );
}

#[test]
fn expansion_is_deterministic_and_draws_do_not_depend_on_order() {
    let file = load_experiment(&data("conformity.quick.toml")).unwrap();
    let a = expand(&file.experiment);
    let b = expand(&file.experiment);
    assert_eq!(a, b);
    let draws = |units: &[Unit]| -> BTreeMap<String, u64> {
        units.iter().map(|u| (u.key.id(), u.key.stream("replies").rng().random::<u64>())).collect()
    };
    let mut reversed = a.clone();
    reversed.reverse();
    assert_eq!(draws(&a), draws(&reversed));
    // Shared streams agree across the levels of a family, own streams do not.
    let public =
        a.iter().find(|u| u.key.cell.factor("level") == Some("public") && u.key.cell.factor("n") == Some("5")).unwrap();
    let private = a
        .iter()
        .find(|u| {
            u.key.cell.factor("level") == Some("private")
                && u.key.cell.factor("n") == Some("5")
                && u.key.cell.factor("task") == public.key.cell.factor("task")
                && u.key.seed == public.key.seed
        })
        .unwrap();
    let shared = |u: &Unit| u.key.stream_over(&["task", "n"], "image").rng().random::<u64>();
    assert_eq!(shared(public), shared(private));
    assert_ne!(public.key.stream("x").rng().random::<u64>(), private.key.stream("x").rng().random::<u64>());
}

#[test]
fn master_seed_changes_every_stream() {
    let text = std::fs::read_to_string(data("conformity.quick.toml")).unwrap();
    let other = text.replace("seed = 20250601", "seed = 20250602");
    let a = expand(&parse_experiment(&text, Path::new("a.toml")).unwrap());
    let b = expand(&parse_experiment(&other, Path::new("b.toml")).unwrap());
    assert_eq!(a.len(), b.len());
    let same = a.iter().zip(&b).filter(|(x, y)| x.key.stream("r").digest() == y.key.stream("r").digest()).count();
    assert_eq!(same, 0);
}

#[test]
fn shards_partition_the_units() {
    for name in ["conformity.toml", "minimal-group.toml"] {
        let units = expand(&load_experiment(&data(name)).unwrap().experiment);
        for n in [1u32, 2, 3, 7] {
            let shards: Vec<Shard> = (1..=n).map(|k| format!("{k}/{n}").parse().unwrap()).collect();
            let mut sizes = vec![0usize; n as usize];
            for u in &units {
                let owners: Vec<usize> = (0..n as usize).filter(|&k| shards[k].contains(u)).collect();
                assert_eq!(owners.len(), 1, "{name}: {} is in {} shards of {n}", u.key.id(), owners.len());
                sizes[owners[0]] += 1;
            }
            assert_eq!(sizes.iter().sum::<usize>(), units.len());
            // Hash sharding is balanced within a generous margin on grids this large.
            let mean = units.len() as f64 / f64::from(n);
            assert!(sizes.iter().all(|&s| (s as f64) > 0.35 * mean), "{name} {n}: {sizes:?}");
        }
        // Units that share an image or a society stay together.
        let shard: Shard = "2/5".parse().unwrap();
        let mut groups: BTreeMap<String, BTreeSet<bool>> = BTreeMap::new();
        for u in &units {
            groups.entry(u.shard_group()).or_default().insert(shard.contains(u));
        }
        assert!(groups.values().all(|s| s.len() == 1));
    }
}

#[test]
fn shard_syntax_errors_are_clear() {
    for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
        let err = bad.parse::<Shard>().unwrap_err();
        assert!(err.contains("k/n"), "{bad}: {err}");
    }
}

/// A minimal valid file of each study, mutated one way per case.
const CONFORMITY: &str = r#"
[experiment]
name = "t"
study = "conformity"
seed = 1
[prompts]
bank = "../banks/conformity-prompts.toml"
[stimuli]
tasks = ["lines", "color", "dots"]
[trials]
n_values = [0, 1, 2]
trials_per_n = 4
[families.group_size]
[families.unanimity]
levels = [{ name = "wrong_80", wrong_share = 0.8 }]
[families.minimal_group]
letters = "CDEF"
"#;

#[test]
fn bad_experiment_files_name_file_key_and_fix() {
    // (base, replace this, with this, expected key, expected words in the problem or fix)
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (CONFORMITY, "seed = 1", "seed = 1\ncolour = 3", "experiment.colour", "unknown field `colour`"),
        (CONFORMITY, "trials_per_n = 4", "trials_per_n = 4\nn_max = 3", "trials.n_max", "unknown field `n_max`"),
        (
            CONFORMITY,
            "[families.group_size]",
            "[families.group_sizes]",
            "families.group_sizes",
            "unknown field `group_sizes`",
        ),
        (CONFORMITY, "trials_per_n = 4", "trials_per_n = 3", "trials.trials_per_n", "even"),
        (CONFORMITY, "trials_per_n = 4", "trials_per_n = \"4\"", "trials.trials_per_n", "invalid type"),
        (CONFORMITY, "n_values = [0, 1, 2]", "n_values = [0, 1, 200]", "trials.n_values[2]", "out of range"),
        (CONFORMITY, "n_values = [0, 1, 2]", "n_values = []", "trials.n_values", "no N value"),
        (
            CONFORMITY,
            "tasks = [\"lines\", \"color\", \"dots\"]",
            "tasks = [\"lines\", \"shapes\"]",
            "stimuli.tasks[1]",
            "unknown variant `shapes`",
        ),
        (CONFORMITY, "study = \"conformity\"", "study = \"asch\"", "experiment.study", "unknown study"),
        (CONFORMITY, "study = \"conformity\"\n", "", "experiment.study", "missing"),
        (
            CONFORMITY,
            "wrong_share = 0.8",
            "wrong_share = 1.8",
            "families.unanimity.levels[0].wrong_share",
            "out of range",
        ),
        (
            CONFORMITY,
            "wrong_share = 0.8",
            "wrong_share = 0.8, allies = 1",
            "families.unanimity.levels[0]",
            "exactly one",
        ),
        (CONFORMITY, "letters = \"CDEF\"", "letters = \"ABCD\"", "families.minimal_group.letters", "answer options"),
        (
            CONFORMITY,
            "[families.group_size]",
            "[families.group_size]\ntasks = [\"lines\"]\n[stimuli.lines]\nreference_length = 700",
            "stimuli.lines.reference_length",
            "min_length < reference_length",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[stimuli.dots]\nmax_count = 5000\n[families.group_size]",
            "stimuli.dots.max_count",
            "do not fit",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[families.performance]\nderived_from = \"difficulty\"\n[families.group_size]",
            "families.performance.derived_from",
            "not defined",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[baseline_filter]\nmin_p_correct = 1.5\n[families.group_size]",
            "baseline_filter.min_p_correct",
            "out of range",
        ),
        (CONFORMITY, "name = \"t\"", "name = \"Has Spaces\"", "experiment.name", "not a valid experiment name"),
        (CONFORMITY, "n_values = [0, 1, 2]", "n_values = [0, 1, 2", "<file>", "TOML"),
        (
            CONFORMITY,
            "[families.group_size]",
            "[analysis]\nmeasure = \"p_wrong\"\n[families.group_size]",
            "analysis.measure",
            "unknown variant `p_wrong`",
        ),
        (
            MINIMAL_GROUP,
            "minority_sizes = [3, 5, 10]",
            "minority_sizes = [0, 5]",
            "society.minority_sizes[0]",
            "no in-group target",
        ),
        (
            MINIMAL_GROUP,
            "minority_sizes = [3, 5, 10]",
            "minority_sizes = [1, 5]",
            "society.minority_sizes[0]",
            "use m from 2 to 10",
        ),
        (MINIMAL_GROUP, "size = 20", "size = 3", "society.size", "use a society of 4 to 1000"),
        (
            MINIMAL_GROUP,
            "minority_sizes = [3, 5, 10]",
            "minority_sizes = [3, 11]",
            "society.minority_sizes[1]",
            "at most half",
        ),
        (MINIMAL_GROUP, "seeds = 30", "seeds = 0", "design.seeds", "at least 1"),
        (MINIMAL_GROUP, "seeds = 30", "seeds = 4000000000", "design.seeds", "at most 100000"),
        (CONFORMITY, "trials_per_n = 4", "trials_per_n = 2000000", "trials.trials_per_n", "at most 100000"),
        (
            CONFORMITY,
            "tasks = [\"lines\", \"color\", \"dots\"]",
            "tasks = [\"lines\", \"color\", \"dots\"]\ngeneral_pool_size = 4000000000",
            "stimuli.general_pool_size",
            "at most 100000",
        ),
        (MINIMAL_GROUP, "name = \"base\"", "name = \"base\"\nseeds = 40", "instruments[0].seeds", "out of range"),
        (
            MINIMAL_GROUP,
            "labels = [\"visible\", \"hidden\"]",
            "labels = [\"visible\", \"visible\"]",
            "design.labels",
            "repeats",
        ),
        (
            MINIMAL_GROUP,
            "labels = [\"visible\", \"hidden\"]",
            "labels = [\"shown\"]",
            "design.labels[0]",
            "unknown variant",
        ),
        (MINIMAL_GROUP, "size = 20", "size = 20\nid_width = 1", "society.id_width", "cannot number"),
        (MINIMAL_GROUP, "pool = 100", "pool = -5", "society.pool", "invalid value"),
        (MINIMAL_GROUP, "[[instruments]]\nname = \"base\"\n", "", "instruments", "missing field"),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\ntemperature = -1.0",
            "generation.temperature",
            "out of range",
        ),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\ntop_p = 0.0",
            "generation.top_p",
            "out of range",
        ),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\ntop_p = 1.5",
            "generation.top_p",
            "out of range",
        ),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\ntop_k = 2000000",
            "generation.top_k",
            "out of range",
        ),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\ntop_k = -1",
            "generation.top_k",
            "invalid value",
        ),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\ntop_k = 2.5",
            "generation.top_k",
            "invalid type",
        ),
        (
            MINIMAL_GROUP,
            "reasoning = [\"on\"]",
            "reasoning = [\"on\"]\n[generation]\nmin_p = 0.1",
            "generation.min_p",
            "unknown field",
        ),
    ];
    for (base, from, to, key, words) in cases {
        assert!(base.contains(from), "case setup: `{from}` not in base");
        let text = base.replacen(from, to, 1);
        let errors = parse_experiment(&text, Path::new("bad.toml")).expect_err(&format!("accepted: {from} -> {to}"));
        let found =
            errors.0.iter().find(|e| e.key == *key).unwrap_or_else(|| panic!("no error at `{key}` for {to}: {errors}"));
        let message = found.to_string();
        assert!(message.starts_with("bad.toml: "), "{message}");
        assert!(message.contains(words), "`{to}`: expected `{words}` in: {message}");
        assert!(!found.fix.is_empty());
    }
}

#[test]
fn the_experiment_file_chooses_the_measure_a_report_leads_with() {
    for name in ["conformity.toml", "conformity.quick.toml"] {
        let Experiment::Conformity(c) = load_experiment(&data(name)).unwrap().experiment else { panic!("{name}") };
        assert_eq!(c.analysis.measure, PWrong::Full, "{name}: the paper's code read the whole vocabulary");
    }
    let lead = |text: &str| match parse_experiment(text, Path::new("m.toml")).unwrap() {
        Experiment::Conformity(c) => c.analysis.measure,
        Experiment::MinimalGroup(_) => panic!("a conformity experiment"),
    };
    assert_eq!(lead(CONFORMITY), PWrong::Full, "the default");
    let two_way =
        CONFORMITY.replacen("[families.group_size]", "[analysis]\nmeasure = \"p_wrong_ab\"\n[families.group_size]", 1);
    assert_eq!(lead(&two_way), PWrong::Ab);
}

#[test]
fn missing_bank_file_is_named() {
    let dir = std::env::temp_dir().join(format!("herd-design-bank-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("exp.toml");
    std::fs::write(&path, CONFORMITY.replace("../banks/conformity-prompts.toml", "nowhere/prompts.toml")).unwrap();
    let errors = load_experiment(&path).unwrap_err();
    let e = errors.first();
    assert_eq!(e.key, "prompts.bank");
    assert!(e.problem.contains("`nowhere/prompts.toml` was not found"), "{e}");
    // Every place herd looked, each absolute and without `..`: next to the file, then herd's data/.
    let data = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")).unwrap();
    for place in [
        dir.join("nowhere/prompts.toml"),
        data.join("experiments/nowhere/prompts.toml"),
        data.join("nowhere/prompts.toml"),
    ] {
        assert!(e.problem.contains(&format!("\n    {}", place.display())), "{}: {e}", place.display());
    }
    assert!(!e.problem.contains(".."), "{e}");
    let errors = load_experiment(&dir.join("absent.toml")).unwrap_err();
    assert!(errors.first().problem.contains("cannot read"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shipped_file_copied_elsewhere_finds_herds_banks_and_a_bank_beside_it_comes_first() {
    let dir = tempfile_dir("copied");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments");
    let data = std::fs::canonicalize(root.join("..")).unwrap();
    for name in ["conformity.quick.toml", "minimal-group.quick.toml"] {
        let copy = dir.join(name);
        std::fs::copy(root.join(name), &copy).unwrap();
        let file = load_experiment(&copy).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (key, written) in bank_files(&file.experiment) {
            let resolved = file.resolve(&written);
            assert!(resolved.starts_with(&data) && resolved.is_file(), "{name} {key}: {}", resolved.display());
        }
    }
    // A bank of the user's own next to the file wins over herd's.
    let own = dir.join("../banks");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("nonce-group-names.toml"), "pairs = [[\"Wozzle\", \"Tirven\"]]\n").unwrap();
    let file = load_experiment(&dir.join("minimal-group.quick.toml")).unwrap();
    let Experiment::MinimalGroup(exp) = &file.experiment else { panic!("a minimal-group file") };
    let resolved = file.resolve(&exp.society.group_names);
    assert_eq!(resolved, std::fs::canonicalize(own.join("nonce-group-names.toml")).unwrap());
    std::fs::remove_dir_all(dir.join("..")).unwrap();
}

/// A fresh folder two levels down in the temp dir (its parent is the test's own, removed at the end).
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("herd-design-{name}-{}", std::process::id())).join("experiments");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(dir).unwrap()
}

#[test]
fn broken_unanimity_leaves_a_dissenter_at_every_group_size() {
    // Every wrong_share of the shipped experiment files.
    let mut shares: Vec<f64> = Vec::new();
    for name in ["conformity.toml", "conformity.quick.toml"] {
        let file = load_experiment(&data(name)).unwrap();
        let Experiment::Conformity(c) = file.experiment else { panic!("{name} is a conformity experiment") };
        for level in &c.families.unanimity.expect("the files run the unanimity family").levels {
            if let Some(UnanimityRule::WrongShare(s)) = level.rule()
                && !shares.contains(&s)
            {
                shares.push(s);
            }
        }
    }
    shares.sort_by(f64::total_cmp);
    assert_eq!(shares, [0.0, 0.5, 0.8, 1.0], "a new share needs its row in the table below");
    // Wrong replies for N = 1..=10. 80%: floor(0.8 N), one right at N = 1 and 2 (round() made N = 1
    // and 2 unanimous); 50%: floor(N / 2), so odd N lean towards right, never wrong.
    let expected: [(f64, [u32; 10]); 4] = [
        (1.0, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        (0.8, [0, 1, 2, 3, 4, 4, 5, 6, 7, 8]),
        (0.5, [0, 1, 1, 2, 2, 3, 3, 4, 4, 5]),
        (0.0, [0; 10]),
    ];
    for (share, wrong) in expected {
        for n in 1..=10_u32 {
            let got = wrong_share_count(share, n);
            assert_eq!(got, wrong[n as usize - 1], "share {share} at N = {n}");
            if share < 1.0 {
                assert!(got < n, "share {share} at N = {n}: {got} wrong leaves nobody right");
                assert!(f64::from(got) <= share * f64::from(n), "share {share} at N = {n}: rounded towards wrong");
            }
        }
    }
    // Shares written in decimal land on the count they name, and N = 0 has no replies.
    assert_eq!(wrong_share_count(0.7, 10), 7);
    assert_eq!(wrong_share_count(0.57, 100), 57);
    assert_eq!(wrong_share_count(0.29, 100), 29);
    assert_eq!(wrong_share_count(0.99, 1), 0);
    assert_eq!(wrong_share_count(0.8, 0), 0);
}
