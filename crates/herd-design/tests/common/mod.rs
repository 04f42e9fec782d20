//! Experiment-file fixtures shared by herd-design's test files.

/// A valid minimal-group file in the paper's shape (20 agents, m = 3, 5, 10, 30 seeds, both passes).
pub const MINIMAL_GROUP: &str = r#"
[experiment]
name = "t"
study = "minimal_group"
seed = 1
[prompts]
bank = "../banks/minimal-group-prompts.toml"
[society]
size = 20
minority_sizes = [3, 5, 10]
pool = 100
group_names = "../banks/nonce-group-names.toml"
[design]
labels = ["visible", "hidden"]
seeds = 30
swap_pass = true
reasoning = ["on"]
[[instruments]]
name = "base"
"#;
