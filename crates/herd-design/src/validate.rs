//! Checks that go beyond the schema: ranges, consistency between tables, and what would make a design
//! impossible to run. Every problem names its key and how to fix it.

use crate::error::{DesignErrors, Problems};
use crate::expand::Family;
use crate::experiment::*;
use crate::plan::{MAX_IMAGES, MAX_PROMPTS, MAX_UNITS, PlanPart, plan_size};
use std::collections::BTreeSet;
use std::path::Path;

pub(crate) fn experiment(experiment: &Experiment, file: &Path) -> Result<(), DesignErrors> {
    let mut p = Problems::new(file);
    meta(experiment.meta(), &mut p);
    match experiment {
        Experiment::Conformity(e) => conformity(e, &mut p),
        Experiment::MinimalGroup(e) => minimal_group(e, &mut p),
    }
    plan(experiment, &mut p);
    p.into_result()
}

/// The product of the counts, against what herd holds in memory: each count may be within its own
/// limit and their product still far too large (500 minority sizes × 100,000 seeds).
fn plan(experiment: &Experiment, p: &mut Problems) {
    let size = plan_size(experiment);
    for (what, total, max, parts, held) in [
        ("units", size.units(), MAX_UNITS, &size.units, "herd holds in memory"),
        ("images", size.images(), MAX_IMAGES, &size.images, "herd holds in memory"),
        ("prompts", size.prompts(), MAX_PROMPTS, &size.prompts, "one run stores and analyses"),
    ] {
        if total <= max {
            continue;
        }
        let mut largest: Vec<&PlanPart> = parts.iter().collect();
        largest.sort_by_key(|part| std::cmp::Reverse(part.size));
        // The largest count of the largest term is the likely typo; the key names it.
        let key = largest[0].factors.iter().max_by_key(|(_, n)| *n).map_or("<file>", |(k, _)| k.as_str());
        let terms: Vec<String> = largest.iter().take(3).map(|t| t.describe()).collect();
        let more = if largest.len() > 3 { format!("; and {} smaller terms", largest.len() - 3) } else { String::new() };
        p.push(
            key,
            format!("the design plans {total} {what}, more than the {max} {held} ({}{more})", terms.join("; ")),
            format!(
                "lower `{key}` or the other counts named until there are at most {max} {what}, or split the design \
                 into several experiment files (e.g. one per task, family or minority size), each run into its own \
                 --out; --shard does not help, as every shard plans the whole design"
            ),
        );
    }
}

fn meta(m: &ExperimentMeta, p: &mut Problems) {
    let valid = !m.name.is_empty()
        && m.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' || c == '.');
    if !valid {
        p.push(
            "experiment.name",
            format!("`{}` is not a valid experiment name", m.name),
            "use lower-case letters, digits, `-`, `_` or `.`, e.g. \"conformity-quick\"",
        );
    }
}

fn unique<T: Ord + Clone>(items: &[T]) -> bool {
    items.iter().cloned().collect::<BTreeSet<_>>().len() == items.len()
}

fn non_empty_unique<T: Ord + Clone>(items: &[T], key: &str, what: &str, p: &mut Problems) {
    if items.is_empty() {
        p.push(key, format!("the list of {what} is empty"), format!("list at least one of the {what}"));
    } else if !unique(items) {
        p.push(key, format!("the list of {what} repeats an entry"), "list each entry once");
    }
}

fn at_least(value: u64, min: u64, key: &str, p: &mut Problems) {
    if value < min {
        p.push(key, format!("{value} is out of range"), format!("use a value of at least {min}"));
    }
}

/// The largest value herd accepts for a count that multiplies the grid. Units, stimuli and prompts are
/// held in memory while a run plans its batches, so a typo such as 1e9 trials must be an error here,
/// not an allocation failure minutes into a run. Far above the papers' grids (64 trials, 100 images,
/// 30 seeds).
pub const MAX_GRID_COUNT: u64 = 100_000;

/// The largest `generation.top_k` accepted: above every vocabulary (the largest are about 260k tokens).
const MAX_TOP_K: u32 = 1_000_000;

/// The largest `generation.max_new_tokens`: beyond every model's context length.
const MAX_NEW_TOKENS: u32 = 1_000_000;

/// The largest canvas side in pixels: a rendered image is width × height × 3 bytes, allocated at once;
/// the originals are at most 1,170 px wide.
const MAX_CANVAS: u32 = 10_000;

/// The smallest minority: favouritism compares a decider's in-group and out-group targets, and a
/// minority of one has no in-group target. herd-analysis names the same bound when a table breaks it.
pub const MIN_MINORITY_SIZE: u32 = 2;

fn at_most_grid(value: u64, key: &str, p: &mut Problems) {
    if value > MAX_GRID_COUNT {
        p.push(
            key,
            format!("{value} is larger than herd plans in memory"),
            format!("use at most {MAX_GRID_COUNT}; split a larger design into several experiment files or shards"),
        );
    }
}

fn conformity(e: &ConformityExperiment, p: &mut Problems) {
    let tasks = &e.stimuli.tasks;
    non_empty_unique(tasks, "stimuli.tasks", "tasks", p);
    at_least(e.stimuli.general_pool_size.into(), 1, "stimuli.general_pool_size", p);
    at_most_grid(e.stimuli.general_pool_size.into(), "stimuli.general_pool_size", p);
    lines(&e.stimuli.lines, p);
    color(&e.stimuli.color, p);
    dots(&e.stimuli.dots, p);

    let f = &e.baseline_filter;
    if !(f.min_p_correct > 0.0 && f.min_p_correct <= 1.0) {
        p.push(
            "baseline_filter.min_p_correct",
            format!("{} is out of range", f.min_p_correct),
            "use a probability in (0, 1], e.g. 0.95",
        );
    }
    at_least(f.max_candidates.into(), 1, "baseline_filter.max_candidates", p);
    at_most_grid(f.max_candidates.into(), "baseline_filter.max_candidates", p);

    n_values(&e.trials.n_values, "trials.n_values", p);
    trials_per_n(Some(e.trials.trials_per_n), "trials.trials_per_n", p);

    let fam = &e.families;
    if !Family::ALL.iter().any(|&family| fam.has(family)) {
        p.push(
            "families",
            "no family is defined, so the experiment has no trials",
            "add at least one table such as [families.group_size]",
        );
    }
    for family in Family::ALL {
        if let Some(scope) = fam.scope(family) {
            scope_checks(family.as_str(), scope.tasks(), scope.n_values(), scope.trials_per_n(), tasks, p);
        }
    }
    if let Some(d) = &fam.difficulty {
        scope_checks("difficulty", d.tasks.as_deref(), d.n_values.as_deref(), None, tasks, p);
        if let Some(n) = d.images_per_level {
            at_least(n.into(), 1, "families.difficulty.images_per_level", p);
            at_most_grid(n.into(), "families.difficulty.images_per_level", p);
        }
    }
    if let Some(u) = &fam.unanimity {
        unanimity(u, p);
    }
    if let Some(perf) = &fam.performance {
        if perf.derived_from != "difficulty" {
            p.push(
                "families.performance.derived_from",
                format!("`{}` cannot provide performance", perf.derived_from),
                "use \"difficulty\": performance is read from the difficulty pool's N = 0 trials",
            );
        } else if fam.difficulty.is_none() {
            p.push(
                "families.performance.derived_from",
                "the difficulty family is not defined",
                "add [families.difficulty] or remove [families.performance]",
            );
        }
    }
    if let Some(n) = &fam.normative {
        at_least(n.paraphrases.into(), 1, "families.normative.paraphrases", p);
        at_most_grid(n.paraphrases.into(), "families.normative.paraphrases", p);
        if n.n_values.as_deref().unwrap_or(&e.trials.n_values).iter().all(|&n| n == 0) {
            p.push(
                "families.normative.n_values",
                "framing only appears with confederates, but every N is 0",
                "include some N > 0",
            );
        }
    }
    if let Some(s) = &fam.source_strength {
        non_empty_unique(&s.roles, "families.source_strength.roles", "roles", p);
        if s.baseline_role.trim().is_empty() || s.roles.iter().any(|r| r.trim().is_empty()) {
            p.push(
                "families.source_strength.roles",
                "a role is empty",
                "give every role as a plural noun, e.g. \"scientists\"",
            );
        }
        for role in s.classes.keys() {
            if *role != s.baseline_role && !s.roles.contains(role) {
                p.push(
                    format!("families.source_strength.classes.{role}"),
                    format!("classes a role `{role}` that is neither the baseline_role nor in roles"),
                    format!(
                        "add \"{role}\" to roles, or remove its class{}",
                        crate::suggest::did_you_mean(role, s.roles.iter().map(String::as_str))
                    ),
                );
            }
        }
    }
    for (name, family) in [("nationality", &fam.nationality), ("ethnicity", &fam.ethnicity)] {
        if let Some(f) = family {
            let key = format!("families.{name}");
            non_empty_unique(&f.values, &format!("{key}.values"), "values", p);
            non_empty_unique(&f.relations, &format!("{key}.relations"), "relations", p);
            if f.relations.contains(&Relation::Different) && f.values.len() < 2 {
                p.push(
                    format!("{key}.values"),
                    "a different-group condition needs at least two values",
                    "list at least two values",
                );
            }
        }
    }
    if let Some(g) = &fam.minimal_group {
        let letters: Vec<char> = g.letters.chars().collect();
        if letters.len() < 2 || !unique(&letters) || letters.iter().any(|c| !c.is_alphanumeric()) {
            p.push(
                "families.minimal_group.letters",
                format!("`{}` is not a set of at least two distinct letters", g.letters),
                "give distinct letters, e.g. \"CDEFGHJKLMNPQRSTUVWXYZ\"",
            );
        }
        if letters.iter().any(|c| matches!(c, 'A' | 'B' | 'a' | 'b')) {
            p.push(
                "families.minimal_group.letters",
                "A and B are the answer options and would be confused with group names",
                "remove A and B from the letters",
            );
        }
        non_empty_unique(&g.relations, "families.minimal_group.relations", "relations", p);
    }
    for (name, family) in [("spatial", &fam.spatial), ("temporal", &fam.temporal)] {
        if let Some(f) = family {
            let key = format!("families.{name}.far");
            non_empty_unique(&f.far, &key, "far annotations", p);
            if f.near.trim().is_empty() {
                p.push(format!("families.{name}.near"), "the near annotation is empty", "give it, e.g. \"right here\"");
            }
        }
    }
}

fn n_values(values: &[u32], key: &str, p: &mut Problems) {
    if values.is_empty() {
        p.push(key, "no N value is given", "list the numbers of confederates, e.g. [0, 1, 2, 3]");
    } else if !unique(values) {
        p.push(key, "an N value is repeated", "list each N once");
    }
    for (i, &n) in values.iter().enumerate() {
        if n > 100 {
            p.push(format!("{key}[{i}]"), format!("N = {n} is out of range"), "use at most 100 confederates");
        }
    }
}

fn trials_per_n(value: Option<u32>, key: &str, p: &mut Problems) {
    if let Some(t) = value {
        if t == 0 || t % 2 == 1 {
            p.push(
                key,
                format!("{t} is out of range"),
                "use a positive even number, so that A and B are the correct answer equally often",
            );
        }
        at_most_grid(t.into(), key, p);
    }
}

fn scope_checks(
    name: &str,
    family_tasks: Option<&[Task]>,
    family_n: Option<&[u32]>,
    trials: Option<u32>,
    tasks: &[Task],
    p: &mut Problems,
) {
    if let Some(ft) = family_tasks {
        non_empty_unique(ft, &format!("families.{name}.tasks"), "tasks", p);
        for (i, t) in ft.iter().enumerate() {
            if !tasks.contains(t) {
                p.push(
                    format!("families.{name}.tasks[{i}]"),
                    format!("task `{t}` is not rendered by [stimuli]"),
                    "add it to stimuli.tasks or remove it here",
                );
            }
        }
    }
    if let Some(n) = family_n {
        n_values(n, &format!("families.{name}.n_values"), p);
    }
    trials_per_n(trials, &format!("families.{name}.trials_per_n"), p);
}

fn unanimity(u: &UnanimityFamily, p: &mut Problems) {
    if u.levels.is_empty() {
        p.push("families.unanimity.levels", "no level is given", "add [[families.unanimity.levels]] entries");
    }
    let names: Vec<&str> = u.levels.iter().map(|l| l.name.as_str()).collect();
    if !unique(&names) {
        p.push("families.unanimity.levels", "two levels share a name", "give every level its own name");
    }
    for (i, level) in u.levels.iter().enumerate() {
        let key = format!("families.unanimity.levels[{i}]");
        if level.name.trim().is_empty() {
            p.push(format!("{key}.name"), "the level has no name", "name it, e.g. \"wrong_80\"");
        }
        match level.rule() {
            None => p.push(
                key.clone(),
                "a level needs exactly one of wrong_share, wrong_probability, allies",
                "keep exactly one of the three keys",
            ),
            Some(UnanimityRule::WrongShare(s)) if !(0.0..=1.0).contains(&s) => {
                p.push(format!("{key}.wrong_share"), format!("{s} is out of range"), "use a share in [0, 1]");
            }
            Some(UnanimityRule::WrongProbability(q)) if !(0.0..=1.0).contains(&q) => {
                p.push(
                    format!("{key}.wrong_probability"),
                    format!("{q} is out of range"),
                    "use a probability in [0, 1]",
                );
            }
            Some(UnanimityRule::Allies(a)) if a == 0 || a > 10 => {
                p.push(format!("{key}.allies"), format!("{a} is out of range"), "use 1 to 10 allies");
            }
            Some(_) => {}
        }
    }
}

fn spreads(values: &[u32], key: &str, max: u32, p: &mut Problems) {
    if values.is_empty() {
        p.push(key, "no difficulty level is given", "list one spread per level");
    } else if !unique(values) {
        p.push(key, "a spread is repeated", "list each spread once");
    }
    for (i, &v) in values.iter().enumerate() {
        if v == 0 || v > max {
            p.push(format!("{key}[{i}]"), format!("{v} is out of range"), format!("use a spread in 1..={max}"));
        }
    }
}

fn lines(l: &LinesConfig, p: &mut Problems) {
    let k = "stimuli.lines";
    if !(l.min_length >= 1 && l.min_length < l.reference_length && l.reference_length < l.max_length) {
        p.push(
            format!("{k}.reference_length"),
            "lengths must satisfy 1 ≤ min_length < reference_length < max_length",
            "adjust min_length, reference_length and max_length",
        );
    }
    if l.max_length > l.layout.baseline + 1 {
        p.push(
            format!("{k}.max_length"),
            format!("a line of {} px does not fit above the baseline at row {}", l.max_length, l.layout.baseline),
            "lower max_length or move layout.baseline down",
        );
    }
    let room_below = l.reference_length.saturating_sub(l.min_length);
    let room_above = l.max_length.saturating_sub(l.reference_length);
    if l.general_gap == 0 || (l.general_gap > room_below && l.general_gap > room_above) {
        p.push(
            format!("{k}.general_gap"),
            format!("no distractor length is at least {} px from the reference", l.general_gap),
            "use a gap smaller than the room between the reference and min_length or max_length",
        );
    }
    spreads(&l.difficulty_spreads, &format!("{k}.difficulty_spreads"), l.max_length, p);
    at_least(l.images_per_level.into(), 1, &format!("{k}.images_per_level"), p);
    at_most_grid(l.images_per_level.into(), &format!("{k}.images_per_level"), p);
    let lay = &l.layout;
    canvas(lay.width, lay.height, lay.label_size, &format!("{k}.layout"), p);
    if lay.centres.iter().any(|&c| u64::from(c) + u64::from(lay.line_width / 2) >= u64::from(lay.width))
        || lay.baseline >= lay.height
        || lay.label_top >= lay.height
        || lay.line_width == 0
    {
        p.push(
            format!("{k}.layout"),
            "the line layout does not fit the canvas",
            "keep centres, baseline and label_top inside width × height",
        );
    }
}

/// Canvas sides and label sizes a renderer can allocate and draw.
fn canvas(width: u32, height: u32, label_size: f32, key: &str, p: &mut Problems) {
    for (side, value) in [("width", width), ("height", height)] {
        if value == 0 || value > MAX_CANVAS {
            p.push(format!("{key}.{side}"), format!("{value} px is out of range"), format!("use 1 to {MAX_CANVAS} px"));
        }
    }
    if !(label_size.is_finite() && label_size > 0.0 && label_size <= 1000.0) {
        p.push(format!("{key}.label_size"), format!("{label_size} is out of range"), "use a font size in (0, 1000] px");
    }
}

fn boxes_layout(lay: &BoxesLayout, key: &str, p: &mut Problems) {
    canvas(lay.width, lay.height, lay.label_size, key, p);
    // In u64: pixel counts near u32::MAX must be an error, not an overflow.
    let [left, top, side, pitch, edge] = [lay.left, lay.top, lay.side, lay.pitch, lay.edge].map(u64::from);
    if left + 2 * pitch + side > u64::from(lay.width)
        || top + side > u64::from(lay.height)
        || pitch < side
        || 2 * edge >= side
        || lay.label_top >= lay.height
    {
        p.push(
            key,
            "the three boxes do not fit the canvas side by side",
            "keep left + 2·pitch + side ≤ width, top + side ≤ height and pitch ≥ side",
        );
    }
}

fn color(c: &ColorConfig, p: &mut Problems) {
    let k = "stimuli.color";
    if c.general_spread == 0 || c.general_spread > 127 {
        p.push(
            format!("{k}.general_spread"),
            format!("{} is out of range", c.general_spread),
            "use a spread in 1..=127",
        );
    }
    spreads(&c.difficulty_spreads, &format!("{k}.difficulty_spreads"), 127, p);
    at_least(c.images_per_level.into(), 1, &format!("{k}.images_per_level"), p);
    at_most_grid(c.images_per_level.into(), &format!("{k}.images_per_level"), p);
    boxes_layout(&c.layout, &format!("{k}.layout"), p);
}

fn dots(d: &DotsConfig, p: &mut Problems) {
    let k = "stimuli.dots";
    boxes_layout(&d.layout, &format!("{k}.layout"), p);
    if d.dot_radius == 0 {
        p.push(format!("{k}.dot_radius"), "0 is out of range", "use a radius of at least 1 px");
    }
    if d.reference_count > d.max_count {
        p.push(
            format!("{k}.reference_count"),
            "the reference has more dots than max_count allows",
            "raise max_count or lower reference_count",
        );
    }
    // Random sequential placement jams at about 54.7% of the area covered by the exclusion disks; staying
    // below 50% keeps rejection sampling of dot positions quick.
    let [edge, margin, radius, gap] = [d.layout.edge, d.margin, d.dot_radius, d.min_gap].map(u64::from);
    let inner = u64::from(d.layout.side).saturating_sub(2 * edge + 2 * margin + 2 * radius) as f64;
    let distance = (2 * radius + 1 + gap) as f64;
    let capacity = (0.5 * (inner + distance).powi(2) / (std::f64::consts::PI * (distance / 2.0).powi(2))) as u32;
    if d.max_count > capacity {
        p.push(
            format!("{k}.max_count"),
            format!("{} non-overlapping dots do not fit in a box (at most {capacity} do)", d.max_count),
            "lower max_count or dot_radius, or enlarge layout.side",
        );
    }
    spreads(
        &d.difficulty_spreads,
        &format!("{k}.difficulty_spreads"),
        capacity.saturating_sub(d.reference_count).max(1),
        p,
    );
    at_least(d.images_per_level.into(), 1, &format!("{k}.images_per_level"), p);
    at_most_grid(d.images_per_level.into(), &format!("{k}.images_per_level"), p);
}

fn minimal_group(e: &MinimalGroupExperiment, p: &mut Problems) {
    let s = &e.society;
    // Both groups need at least MIN_MINORITY_SIZE members, so the smallest society has twice that.
    let min_size = 2 * MIN_MINORITY_SIZE;
    if s.size < min_size || s.size > 1000 {
        p.push(
            "society.size",
            format!("{} is out of range", s.size),
            format!("use a society of {min_size} to 1000 agents (the paper uses 20)"),
        );
    }
    non_empty_unique(&s.minority_sizes, "society.minority_sizes", "minority sizes", p);
    for (i, &m) in s.minority_sizes.iter().enumerate() {
        if m < MIN_MINORITY_SIZE || m > s.size / 2 {
            let problem = if m > s.size / 2 {
                format!("a minority of {m} in a society of {} is not a minority", s.size)
            } else {
                format!("a minority of {m} leaves a minority decider no in-group target, so favouritism is undefined")
            };
            p.push(
                format!("society.minority_sizes[{i}]"),
                problem,
                format!(
                    "use m from {MIN_MINORITY_SIZE} to {} (at least two members, at most half the society; the paper uses 3, 5 and 10)",
                    s.size / 2
                ),
            );
        }
    }
    at_least(s.pool.into(), 1, "society.pool", p);
    if s.id_prefix.is_empty() || s.id_prefix.chars().any(|c| c.is_ascii_digit() || c.is_whitespace()) {
        p.push(
            "society.id_prefix",
            format!("`{}` cannot prefix agent ids", s.id_prefix),
            "use letters and `_`, e.g. \"agent_\"",
        );
    }
    if s.id_width == 0 || s.id_width > 6 || 10u64.pow(s.id_width) <= u64::from(s.size) {
        p.push(
            "society.id_width",
            format!("{} digits cannot number {} agents", s.id_width, s.size),
            "use enough digits for the society size, e.g. 2 for 20 agents",
        );
    }
    let d = &e.design;
    non_empty_unique(&d.labels, "design.labels", "label conditions", p);
    at_least(d.seeds.into(), 1, "design.seeds", p);
    at_most_grid(d.seeds.into(), "design.seeds", p);
    non_empty_unique(&d.reasoning, "design.reasoning", "reasoning modes", p);
    let names: Vec<&str> = e.instruments.iter().map(|i| i.name.as_str()).collect();
    non_empty_unique(&names, "instruments", "instruments", p);
    for (i, inst) in e.instruments.iter().enumerate() {
        if let Some(seeds) = inst.seeds
            && (seeds == 0 || seeds > d.seeds)
        {
            p.push(
                format!("instruments[{i}].seeds"),
                format!("{seeds} is out of range"),
                format!("use 1 to design.seeds = {}", d.seeds),
            );
        }
    }
    let g = &e.generation;
    if let Some(t) = g.temperature.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        p.push(
            "generation.temperature",
            format!("{t} is out of range"),
            "use a temperature ≥ 0 (0 decodes greedily), e.g. 0.7, or leave it out for the model's default",
        );
    }
    if let Some(top_p) = g.top_p.filter(|v| !(*v > 0.0 && *v <= 1.0)) {
        p.push(
            "generation.top_p",
            format!("{top_p} is out of range"),
            "use top_p in (0, 1] (1 keeps every token), or leave it out for the model's default",
        );
    }
    // No vocabulary comes near this; a larger top_k is a typo (and 0 already means "keep every token").
    if let Some(k) = g.top_k.filter(|k| *k > MAX_TOP_K) {
        p.push(
            "generation.top_k",
            format!("{k} is out of range"),
            format!("use top_k from 0 (keep every token) to {MAX_TOP_K}, or leave it out for the model's default"),
        );
    }
    at_least(g.max_new_tokens.into(), 1, "generation.max_new_tokens", p);
    if g.max_new_tokens > MAX_NEW_TOKENS {
        p.push(
            "generation.max_new_tokens",
            format!("{} is out of range", g.max_new_tokens),
            format!("use at most {MAX_NEW_TOKENS} tokens, beyond every model's context (the paper's runs used 8192)"),
        );
    }
}
