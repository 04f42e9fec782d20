//! Counts beyond what herd can hold are errors at validation, naming the key and the fix: each count
//! key has its own limit, and the product of the counts (units, images, prompts) is computed from the
//! counts before anything is allocated. Before these checks the values below aborted `herd expand`
//! with "memory allocation failed" (or grew to gigabytes first).

use herd_design::{
    DesignErrors, Experiment, MAX_IMAGES, MAX_PROMPTS, MAX_UNITS, expand, load_experiment, parse_experiment, plan_size,
};
use std::path::Path;

mod common;
use common::MINIMAL_GROUP;

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
"#;

fn errors(text: &str) -> DesignErrors {
    parse_experiment(text, Path::new("big.toml")).expect_err("a design too large to hold must be refused")
}

/// The error at `key`, as the user reads it.
fn at(errors: &DesignErrors, key: &str) -> String {
    errors.0.iter().find(|e| e.key == key).unwrap_or_else(|| panic!("no error at `{key}`: {errors}")).to_string()
}

#[test]
fn every_count_key_has_a_limit() {
    let cases = [
        (
            CONFORMITY,
            "[families.group_size]",
            "[stimuli.color]\nimages_per_level = 4000000000\n[families.group_size]",
            "stimuli.color.images_per_level",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[stimuli.dots]\nimages_per_level = 4000000000\n[families.group_size]",
            "stimuli.dots.images_per_level",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[stimuli.lines]\nimages_per_level = 4000000000\n[families.group_size]",
            "stimuli.lines.images_per_level",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[families.normative]\nsentences = \"s.json\"\nparaphrases = 4000000000\n[families.group_size]",
            "families.normative.paraphrases",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[families.difficulty]\nimages_per_level = 4000000000\n[families.group_size]",
            "families.difficulty.images_per_level",
        ),
        (
            CONFORMITY,
            "[families.group_size]",
            "[baseline_filter]\nmax_candidates = 4000000000\n[families.group_size]",
            "baseline_filter.max_candidates",
        ),
        (MINIMAL_GROUP, "seeds = 30", "seeds = 4000000000", "design.seeds"),
    ];
    for (base, from, to, key) in cases {
        assert!(base.contains(from));
        let message = at(&errors(&base.replacen(from, to, 1)), key);
        assert!(message.contains("4000000000") && message.contains("at most 100000"), "{message}");
    }
}

#[test]
fn canvases_and_token_budgets_are_bounded() {
    let cases = [
        (CONFORMITY, "[stimuli.color.layout]\nwidth = 4000000000", "stimuli.color.layout.width", "1 to 10000 px"),
        (CONFORMITY, "[stimuli.lines.layout]\nheight = 4000000000", "stimuli.lines.layout.height", "1 to 10000 px"),
        (CONFORMITY, "[stimuli.dots.layout]\nlabel_size = inf", "stimuli.dots.layout.label_size", "(0, 1000]"),
        // Pixel sums near u32::MAX are an error, not an overflow.
        (CONFORMITY, "[stimuli.dots.layout]\npitch = 4294967295", "stimuli.dots.layout", "do not fit"),
        (CONFORMITY, "[stimuli.dots]\nmargin = 4294967295", "stimuli.dots.max_count", "do not fit"),
    ];
    for (base, table, key, words) in cases {
        let text = base.replacen("[families.group_size]", &format!("{table}\n[families.group_size]"), 1);
        let message = at(&errors(&text), key);
        assert!(message.contains(words), "{table}: {message}");
    }
    let text = MINIMAL_GROUP.replacen(
        "reasoning = [\"on\"]",
        "reasoning = [\"on\"]\n[generation]\nmax_new_tokens = 4000000000",
        1,
    );
    assert!(at(&errors(&text), "generation.max_new_tokens").contains("at most 1000000"));
}

#[test]
fn the_product_of_counts_is_refused_before_anything_is_allocated() {
    // The issue's design: minority sizes 1 to 500 in a society of 1,000, 100,000 seeds each (every count
    // within its own limit); expanding it grew to 7.8 GB and aborted.
    let sizes: Vec<String> = (1..=500).map(|m| m.to_string()).collect();
    let text = MINIMAL_GROUP
        .replacen("size = 20", "size = 1000\nid_width = 4", 1)
        .replacen("minority_sizes = [3, 5, 10]", &format!("minority_sizes = [{}]", sizes.join(", ")), 1)
        .replacen("seeds = 30", "seeds = 100000", 1);
    let found = errors(&text);
    // m = 1 is refused on its own (no in-group target), and the plan by its size.
    assert!(at(&found, "society.minority_sizes[0]").contains("no in-group target"));
    let message = at(&found, "design.seeds");
    assert!(
        message.contains("200000000 units")
            && message.contains(&format!("{MAX_UNITS}"))
            && message.contains("society.minority_sizes 500")
            && message.contains("design.seeds 100000")
            && message.contains("split the design"),
        "{message}"
    );
    let prompts = found.0.iter().find(|e| e.problem.contains(" prompts,")).expect("the prompts are counted too");
    assert!(prompts.problem.contains("society.size 1000") && prompts.problem.contains(&format!("{MAX_PROMPTS}")));

    // Conformity: 3 tasks × 3 N × 100,000 trials = 900,000 units are held; a second family doubles that.
    let text = CONFORMITY.replacen("trials_per_n = 4", "trials_per_n = 100000", 1);
    assert!(parse_experiment(&text, Path::new("x.toml")).is_ok());
    let two = text.replacen(
        "[families.group_size]",
        "[families.group_size]\n[families.unanimity]\nlevels = [{ name = \"w\", wrong_share = 0.5 }]",
        1,
    );
    let message = at(&errors(&two), "trials.trials_per_n");
    assert!(message.contains("1800000 units") && message.contains("families.unanimity"), "{message}");

    // Images: every task's difficulty pools are drawn, whichever families run.
    let text = CONFORMITY.replacen(
        "[families.group_size]",
        "[stimuli.color]\nimages_per_level = 100000\n[families.group_size]",
        1,
    );
    let message = at(&errors(&text), "stimuli.color.images_per_level");
    assert!(message.contains("images") && message.contains(&format!("{MAX_IMAGES}")), "{message}");
}

#[test]
fn the_plan_counts_what_expansion_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/experiments");
    for name in ["conformity.toml", "conformity.quick.toml", "minimal-group.toml", "minimal-group.quick.toml"] {
        let file = load_experiment(&root.join(name)).unwrap();
        let plan = plan_size(&file.experiment);
        assert_eq!(plan.units(), expand(&file.experiment).len() as u64, "{name}");
        match &file.experiment {
            Experiment::Conformity(_) => assert!(plan.images() > 0 && plan.prompts() > plan.units(), "{name}"),
            Experiment::MinimalGroup(e) => {
                assert_eq!(plan.prompts(), plan.units() * u64::from(e.society.size), "{name}: one prompt per decider")
            }
        }
    }
    // The full conformity grid's images: 3 tasks × (100 general + 10 levels × 50).
    let full = load_experiment(&root.join("conformity.toml")).unwrap();
    assert_eq!(plan_size(&full.experiment).images(), 3 * (100 + 10 * 50));
}
