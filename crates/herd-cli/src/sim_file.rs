//! The sim agent's file (`herd run --sim FILE`, `herd power --sim FILE`, `herd calibrate --agent FILE`)
//! and `herd power --effect`: one vocabulary of keys for all, documented in `herd run --help` from the
//! agent's own defaults and in docs/variants.md.
//!
//! The file's keys are `herd power --effect`'s names: `[allocation] ingroup` sets both deciders'
//! in-group log-weight (as `--effect ingroup=…` does), and `noise` is each section's noise sd; both
//! work in the override tables (`[allocation.reasoning.off]`, …) too. The agent's own field names
//! (`noise_sd`) are accepted as well, so files written before the rename still work. Names the agent
//! matches against a run's (tasks, families, reasoning modes, swap passes) are checked here, so a
//! misspelt one is an error rather than an effect that never applies.

use anyhow::{Result, bail};
use herd_backend::{AllocationOverride, SimParams};

/// The override tables of `[allocation]`, each keyed by the name of a unit's reasoning mode, instrument
/// or swap pass, or by its minority size.
const OVERRIDE_TABLES: [&str; 4] = ["reasoning", "instrument", "swap_pass", "minority_size"];

/// `herd run --sim`'s long help: every key with its default and meaning.
pub fn sim_help() -> String {
    let d = SimParams::default();
    let (c, a) = (&d.conformity, &d.allocation);
    let shifts: Vec<String> = c.level_shift.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    format!(
        "The simulated agent's parameters (TOML), for `--backend sim`; every key is optional\n\
         (defaults shown). The keys are `herd power --effect`'s names. Old spelling still read:\n\
         noise_sd for noise. docs/variants.md (\"The simulated agent's keys\") says what each plants.\n\n\
         seed = {seed}                 keys the agent's noise, with each trial's key\n\
         [conformity]             logit P(wrong) = intercept + per_log_wrong·ln(1 + wrong replies)\n\
         \x20                        + per_log_right·ln(1 + right replies) + difficulty·d\n\
         \x20                        + difficulty_index·x + level_shift[level] + task_shift[task]\n\
         \x20                        + family_shift[family] + ε\n\
         intercept = {intercept}\n\
         per_log_wrong = {plw}      --effect per_log_wrong=…\n\
         per_log_right = {plr}\n\
         difficulty = {difficulty}         d: the image's difficulty level / levels (0: general pool)\n\
         difficulty_index = 0     x: the image's difficulty index (the paper's, fig. 3b):\n\
         \x20                        1/|Δlength| (lines), 1/|Δcount| (dots) in (0, 1];\n\
         \x20                        255·√3 − ‖ΔRGB‖ (color) in (0, 441.7)\n\
         noise = {cnoise}              sd of ε per trial; --effect noise=… sets both sections'\n\
         saturates_at = …         the wrong replies counted stop at this many: per_log_wrong·\n\
         \x20                        ln(1 + min(wrong replies, saturates_at)), a curve that levels\n\
         \x20                        off; left out: it rises with every reply\n\
         [conformity.difficulty_index_by_task]\n\
         \x20                        a task's own difficulty_index, e.g. color = 0.04, dots = 20\n\
         [conformity.level_shift] added at a family level; a table given replaces the default:\n\
         \x20                        {shifts}\n\
         \x20                        (e.g. surgeons = 0.5 for a role of your own)\n\
         [conformity.task_shift]  added to every trial of a task: lines, color, dots\n\
         [conformity.family_shift]\n\
         \x20                        added to every trial of a family, N = 0 included: group_size\n\
         \x20                        (and the baseline filter), unanimity, difficulty, normative,\n\
         \x20                        source_strength, nationality, ethnicity, minimal_group,\n\
         \x20                        spatial, temporal\n\
         [allocation]             each target's weight is exp(ingroup·same_group + valence + ε)\n\
         ingroup = …              both deciders' in-group log-weight; --effect ingroup=…\n\
         ingroup_minority = {imin}   a minority decider's (over ingroup)\n\
         ingroup_majority = {imaj}   a majority decider's (over ingroup)\n\
         ingroup_equal = …        every decider's when the groups are equal (m = half the\n\
         \x20                        society); left out: by the minority flag\n\
         ingroup_hidden = 0       with hidden labels (0: the group-blind floor)\n\
         noise = {anoise}              sd of ε per target\n\
         name_valence = 0         sd of each group name's own log-weight, drawn once per name\n\
         \x20                        (visible labels): what the swap pass cancels\n\
         zero_outgroup_rate = 0   probability that a decider (labels visible) gives every\n\
         \x20                        out-group target 0 points\n\
         zero_outgroup_minority = …, zero_outgroup_majority = …, zero_outgroup_equal = …\n\
         \x20                        that probability for one role, over zero_outgroup_rate\n\
         parse_failure_rate = 0   probability of a reply with no JSON object (a parse failure)\n\
         rescale_rate = 0         probability of points summing to another total (rescaled)\n\
         missing_target_rate = 0  probability of a reply leaving out one recipient (0 points)\n\
         [allocation.reasoning.on], [allocation.reasoning.off], [allocation.instrument.NAME],\n\
         [allocation.swap_pass.original], [allocation.swap_pass.swapped],\n\
         [allocation.minority_size.M] (societies whose minority has M members)\n\
         \x20                        any [allocation] key above, for those deciders only; applied\n\
         \x20                        in the order base, reasoning, instrument, swap pass, minority\n\
         \x20                        size (the last that gives a key wins)\n\n\
         Effects are logits or log-weights in [-50, 50]; noise in [0, 10]; rates in [0, 1].",
        seed = d.seed,
        intercept = c.intercept,
        plw = c.per_log_wrong,
        plr = c.per_log_right,
        difficulty = c.difficulty,
        cnoise = c.noise_sd,
        shifts = shifts.join(", "),
        imin = a.ingroup_minority,
        imaj = a.ingroup_majority,
        anoise = a.noise_sd,
    )
}

/// Power's names in one table of the file translated to the agent's fields: `noise` → `noise_sd`, and
/// in allocation tables `ingroup` → `ingroup_minority` and `ingroup_majority` (where not given).
fn agent_names(place: &str, t: &mut toml::Table, allocation: bool) -> Result<()> {
    if let Some(noise) = t.remove("noise") {
        if t.contains_key("noise_sd") {
            bail!("[{place}] gives both `noise` and its old spelling `noise_sd`; keep `noise`");
        }
        t.insert("noise_sd".into(), noise);
    }
    if allocation && let Some(ingroup) = t.remove("ingroup") {
        for key in ["ingroup_minority", "ingroup_majority"] {
            t.entry(key).or_insert_with(|| ingroup.clone());
        }
    }
    Ok(())
}

/// The keys an override table takes, as the file writes them.
fn override_keys() -> Vec<&'static str> {
    let keys = AllocationOverride::KEYS.iter().map(|&k| if k == "noise_sd" { "noise" } else { k });
    std::iter::once("ingroup").chain(keys).collect()
}

/// Parses a sim file's text: power's names translated to the agent's fields, then the typed parse
/// (which rejects an unknown key, naming the allowed ones), then the names a run is matched by.
pub fn parse_sim(text: &str) -> Result<SimParams> {
    let mut table: toml::Table = toml::from_str(text)?;
    for section in ["conformity", "allocation"] {
        let Some(toml::Value::Table(t)) = table.get_mut(section) else { continue };
        agent_names(section, t, section == "allocation")?;
        if section != "allocation" {
            continue;
        }
        for group in OVERRIDE_TABLES {
            let Some(toml::Value::Table(units)) = t.get_mut(group) else { continue };
            for (name, keys) in units.iter_mut() {
                let place = format!("allocation.{group}.{name}");
                let toml::Value::Table(keys) = keys else {
                    bail!("`{place}` must be a table of [allocation] keys, e.g. [{place}] ingroup_minority = 0.4");
                };
                agent_names(&place, keys, true)?;
                for key in keys.keys() {
                    if !AllocationOverride::KEYS.contains(&key.as_str()) {
                        let hint = herd_design::did_you_mean(key, override_keys());
                        bail!(
                            "[{place}] has no key `{key}`{hint}; an override table takes {}",
                            override_keys().join(", ")
                        );
                    }
                }
            }
        }
    }
    let params: SimParams = table.try_into()?;
    check_names(&params)?;
    Ok(params)
}

/// Every task, family, reasoning mode and swap pass the file names is one a run has: the agent matches
/// them against each trial's, so a misspelt one would plant nothing. (Instruments and condition levels
/// are the experiment's own names, so any is taken.)
pub fn check_names(params: &SimParams) -> Result<()> {
    let tasks: Vec<&str> = herd_design::Task::ALL.iter().map(|t| t.as_str()).collect();
    let families: Vec<&str> = herd_design::Family::ALL.iter().map(|f| f.as_str()).collect();
    let modes = ["on", "off"];
    let passes = ["original", "swapped"];
    let c = &params.conformity;
    let a = &params.allocation;
    let named: [(&str, Vec<&String>, &[&str], &str); 5] = [
        ("conformity.difficulty_index_by_task", c.difficulty_index_by_task.keys().collect(), &tasks, "task"),
        ("conformity.task_shift", c.task_shift.keys().collect(), &tasks, "task"),
        ("conformity.family_shift", c.family_shift.keys().collect(), &families, "family"),
        ("allocation.reasoning", a.reasoning.keys().collect(), &modes, "reasoning mode"),
        ("allocation.swap_pass", a.swap_pass.keys().collect(), &passes, "swap pass"),
    ];
    for (table, names, allowed, what) in named {
        for name in names {
            if !allowed.contains(&name.as_str()) {
                let hint = herd_design::did_you_mean(name, allowed.iter().copied());
                bail!("`{table}.{name}`: no {what} is called `{name}`{hint}; use {}", allowed.join(", "));
            }
        }
    }
    for m in a.minority_size.keys() {
        // Matched against the society's m written in decimal: `03` or `three` would plant nothing.
        if m.parse::<u32>().ok().filter(|&v| v > 0).map(|v| v.to_string()).as_deref() != Some(m.as_str()) {
            bail!(
                "`allocation.minority_size.{m}`: a minority size is a whole number of agents, e.g. [allocation.minority_size.3]"
            );
        }
    }
    Ok(())
}

/// A range error with the key as the file writes it (`allocation.noise`, not the agent's `noise_sd`).
pub fn named_as_in_the_file(e: &herd_backend::SimParamError) -> String {
    let key = e.key.strip_suffix("noise_sd").map_or_else(|| e.key.clone(), |section| format!("{section}noise"));
    herd_backend::SimParamError { key, ..e.clone() }.to_string()
}

/// Sets one `--effect NAME=VALUE`: power's shorthands (`ingroup`, `ingroup_minority`, `ingroup_majority`,
/// `per_log_wrong`, `noise`), or any key of the sim file written with its section and tables
/// (`conformity.intercept`, `conformity.level_shift.surgeons`, `allocation.noise`,
/// `allocation.reasoning.off.ingroup_minority`).
pub fn apply_effect(params: &mut SimParams, name: &str, value: f64) -> Result<()> {
    match name {
        "ingroup" => {
            params.allocation.ingroup_minority = value;
            params.allocation.ingroup_majority = value;
        }
        "ingroup_minority" => params.allocation.ingroup_minority = value,
        "ingroup_majority" => params.allocation.ingroup_majority = value,
        "per_log_wrong" => params.conformity.per_log_wrong = value,
        "noise" => {
            params.allocation.noise_sd = value;
            params.conformity.noise_sd = value;
        }
        dotted if dotted.contains('.') => {
            let (table, key) = dotted.rsplit_once('.').unwrap_or_default();
            match key {
                "ingroup" if table.starts_with("allocation") => {
                    for key in ["ingroup_minority", "ingroup_majority"] {
                        apply_effect(params, &format!("{table}.{key}"), value)?;
                    }
                    return Ok(());
                }
                "noise" => return apply_effect(params, &format!("{table}.noise_sd"), value),
                _ => {}
            }
            // Set the value in the parameters' JSON, making the tables on the way (a map's entry, such as
            // `level_shift.surgeons` or `reasoning.off`, may be new), then read it back: the typed parse
            // refuses a key the agent does not have.
            let unknown = || anyhow::anyhow!("unknown effect `{dotted}`; {EFFECTS}");
            let mut json = serde_json::to_value(&*params)?;
            let mut place = &mut json;
            for part in table.split('.') {
                let object = place.as_object_mut().ok_or_else(unknown)?;
                place = object.entry(part).or_insert_with(|| serde_json::json!({}));
            }
            place.as_object_mut().ok_or_else(unknown)?.insert(key.to_owned(), value.into());
            *params = serde_json::from_value(json)
                .map_err(|e| anyhow::anyhow!("unknown effect `{dotted}` ({e}); {EFFECTS}"))?;
            check_names(params)?;
        }
        other => {
            let hint = herd_design::did_you_mean(
                other,
                ["ingroup", "ingroup_minority", "ingroup_majority", "per_log_wrong", "noise"],
            );
            bail!("unknown effect `{other}`{hint}; {EFFECTS}")
        }
    }
    Ok(())
}

const EFFECTS: &str = "use ingroup, ingroup_minority, ingroup_majority, per_log_wrong or noise, or a sim file key with its \
                       section and tables, e.g. conformity.intercept, conformity.level_shift.surgeons or \
                       allocation.reasoning.off.ingroup_minority (see `herd run --help`)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_names_and_old_spellings_read_the_same() {
        let new = parse_sim("[allocation]\ningroup = 0.9\nnoise = 0.1\n[conformity]\nnoise = 0.2\n").unwrap();
        let old = parse_sim(
            "[allocation]\ningroup_minority = 0.9\ningroup_majority = 0.9\nnoise_sd = 0.1\n[conformity]\nnoise_sd = 0.2\n",
        )
        .unwrap();
        assert_eq!(new, old);
        assert_eq!(new.allocation.ingroup_majority, 0.9);
        // A per-decider key wins over the shorthand.
        let both = parse_sim("[allocation]\ningroup = 0.9\ningroup_majority = 0.1\n").unwrap();
        assert_eq!((both.allocation.ingroup_minority, both.allocation.ingroup_majority), (0.9, 0.1));
        let err = parse_sim("[allocation]\nnoise = 1\nnoise_sd = 1\n").unwrap_err().to_string();
        assert!(err.contains("both `noise` and its old spelling `noise_sd`"), "{err}");
        let err = parse_sim("[allocation]\ningroop = 1\n").unwrap_err().to_string();
        assert!(err.contains("ingroop"), "{err}");
    }

    #[test]
    fn every_effect_name_is_a_sim_file_key_and_dotted_keys_reach_the_rest() {
        for (effect, file) in [
            ("ingroup", "[allocation]\ningroup = 1.5\n"),
            ("ingroup_minority", "[allocation]\ningroup_minority = 1.5\n"),
            ("ingroup_majority", "[allocation]\ningroup_majority = 1.5\n"),
            ("per_log_wrong", "[conformity]\nper_log_wrong = 1.5\n"),
            ("noise", "[conformity]\nnoise = 1.5\n[allocation]\nnoise = 1.5\n"),
            ("conformity.intercept", "[conformity]\nintercept = 1.5\n"),
            ("allocation.noise", "[allocation]\nnoise = 1.5\n"),
        ] {
            let mut params = SimParams::default();
            apply_effect(&mut params, effect, 1.5).unwrap();
            assert_eq!(params, parse_sim(file).unwrap(), "{effect}");
        }
        let mut params = SimParams::default();
        apply_effect(&mut params, "conformity.level_shift.surgeons", 0.5).unwrap();
        assert_eq!(params.conformity.level_shift["surgeons"], 0.5);
        assert_eq!(params.conformity.level_shift["kids"], SimParams::default().conformity.level_shift["kids"]);
        let err = apply_effect(&mut params, "ingrup", 1.0).unwrap_err().to_string();
        assert!(err.contains("did you mean `ingroup`?"), "{err}");
        let err = apply_effect(&mut params, "conformity.slope", 1.0).unwrap_err().to_string();
        assert!(err.contains("unknown effect `conformity.slope`"), "{err}");
    }

    #[test]
    fn the_help_shows_every_key_with_the_agents_default() {
        let help = sim_help();
        let d = SimParams::default();
        for line in [
            format!("intercept = {}", d.conformity.intercept),
            format!("ingroup_minority = {}", d.allocation.ingroup_minority),
            format!("ingroup_majority = {}", d.allocation.ingroup_majority),
            "ingroup = …".to_owned(),
            "noise_sd for noise".to_owned(),
        ] {
            assert!(help.contains(&line), "{line}: {help}");
        }
        // Every key of the agent is in the help.
        let mut every = serde_json::to_value(SimParams::default()).unwrap();
        let keys = AllocationOverride::KEYS.iter().map(|k| format!("allocation.{k}"));
        let tables = ["difficulty_index_by_task", "task_shift", "family_shift"].map(|t| format!("conformity.{t}"));
        let mut all: Vec<String> =
            keys.chain(tables).chain(OVERRIDE_TABLES.map(|t| format!("allocation.{t}"))).collect();
        all.push("conformity.difficulty_index".into());
        for section in ["conformity", "allocation"] {
            let o = every[section].as_object_mut().unwrap();
            all.extend(o.keys().map(|k| format!("{section}.{k}")));
        }
        for key in all {
            let name = key.rsplit('.').next().unwrap().replace("noise_sd", "noise");
            assert!(help.contains(&name), "{key}: {help}");
        }
    }

    /// `data/sim/paper-effects.toml` as it was before issue 40, verbatim.
    const PAPER_EFFECTS_BEFORE: &str = "seed = 1001\n[conformity]\nintercept = -4.5\nper_log_wrong = 1.8\n\
        per_log_right = -1.0\ndifficulty = 1.5\nnoise = 0.5\n[conformity.level_shift]\npublic = 0.4\nsame = 0.4\n\
        different = -0.3\nnear = 0.3\njudges = 0.3\nscientists = 0.5\nkids = -0.5\nchatbots = -0.3\n\
        [allocation]\ningroup_minority = 0.6\ningroup_majority = 0.2\nnoise = 0.5\n";

    #[test]
    fn an_old_file_reads_as_before_and_fingerprints_as_before() {
        let params = parse_sim(PAPER_EFFECTS_BEFORE).unwrap();
        let agent_names: SimParams = toml::from_str(&PAPER_EFFECTS_BEFORE.replace("noise =", "noise_sd =")).unwrap();
        assert_eq!(params, agent_names);
        // The run fingerprint hashes the parameters' JSON: the keys added since are left out at their
        // defaults, so a run started with this file before resumes with it now.
        let json = serde_json::to_value(&params).unwrap();
        let keys = |section: &str| {
            let mut keys: Vec<String> = json[section].as_object().unwrap().keys().cloned().collect();
            keys.sort();
            keys
        };
        assert_eq!(
            keys("conformity"),
            ["difficulty", "intercept", "level_shift", "noise_sd", "per_log_right", "per_log_wrong"]
        );
        assert_eq!(keys("allocation"), ["ingroup_majority", "ingroup_minority", "noise_sd"]);
    }

    #[test]
    fn override_tables_take_the_file_s_names_and_refuse_other_keys() {
        let params = parse_sim(
            "[allocation.reasoning.off]\ningroup = 0.9\nnoise = 0.3\n\
             [allocation.instrument.paraphrase]\nparse_failure_rate = 0.1\n\
             [allocation.swap_pass.swapped]\ningroup_majority = 0.1\n",
        )
        .unwrap();
        let off = &params.allocation.reasoning["off"];
        assert_eq!((off.ingroup_minority, off.ingroup_majority, off.noise_sd), (Some(0.9), Some(0.9), Some(0.3)));
        assert_eq!(params.allocation.instrument["paraphrase"].parse_failure_rate, Some(0.1));
        assert_eq!(params.allocation.swap_pass["swapped"].ingroup_majority, Some(0.1));
        let err = parse_sim("[allocation.reasoning.off]\ningroup_minorty = 1\n").unwrap_err().to_string();
        assert!(err.contains("[allocation.reasoning.off] has no key `ingroup_minorty`"), "{err}");
        assert!(err.contains("did you mean `ingroup_minority`?"), "{err}");
        let err = parse_sim("[allocation.instrument.base]\nreasoning = 1\n").unwrap_err().to_string();
        assert!(err.contains("[allocation.instrument.base] has no key `reasoning`"), "{err}");
        let err = parse_sim("[allocation.swap_pass]\nswapped = 1\n").unwrap_err().to_string();
        assert!(err.contains("`allocation.swap_pass.swapped` must be a table"), "{err}");
    }

    #[test]
    fn names_a_run_is_matched_by_are_checked() {
        for (file, err) in [
            (
                "[conformity.task_shift]\ncolour = 1\n",
                "`conformity.task_shift.colour`: no task is called `colour` (did you mean `color`?)",
            ),
            ("[conformity.difficulty_index_by_task]\nline = 1\n", "no task is called `line`"),
            (
                "[conformity.family_shift]\ngroupsize = 1\n",
                "no family is called `groupsize` (did you mean `group_size`?)",
            ),
            ("[allocation.reasoning.thinking]\ningroup = 1\n", "no reasoning mode is called `thinking`; use on, off"),
            ("[allocation.swap_pass.swap]\ningroup = 1\n", "no swap pass is called `swap`"),
            ("[allocation.minority_size.03]\ningroup = 1\n", "a minority size is a whole number of agents"),
            ("[allocation.minority_size.three]\ningroup = 1\n", "`allocation.minority_size.three`"),
        ] {
            let e = parse_sim(file).unwrap_err().to_string();
            assert!(e.contains(err), "{file}: {e}");
        }
        // Instruments and condition levels are the experiment's own names.
        parse_sim("[allocation.instrument.my_wording]\ningroup = 1\n[conformity.level_shift]\nsurgeons = 1\n").unwrap();
        let p = parse_sim("[allocation.minority_size.3]\ningroup_majority = -0.4\nnoise = 0.2\n").unwrap();
        assert_eq!(p.allocation.minority_size["3"].noise_sd, Some(0.2), "the table takes the file's names");
    }

    #[test]
    fn dotted_effects_reach_the_new_keys_and_tables() {
        for (effect, file) in [
            ("conformity.difficulty_index", "[conformity]\ndifficulty_index = 0.5\n"),
            ("conformity.difficulty_index_by_task.color", "[conformity.difficulty_index_by_task]\ncolor = 0.5\n"),
            ("conformity.task_shift.dots", "[conformity.task_shift]\ndots = 0.5\n"),
            ("conformity.family_shift.spatial", "[conformity.family_shift]\nspatial = 0.5\n"),
            ("allocation.ingroup_equal", "[allocation]\ningroup_equal = 0.5\n"),
            ("allocation.zero_outgroup_rate", "[allocation]\nzero_outgroup_rate = 0.5\n"),
            ("allocation.reasoning.off.ingroup", "[allocation.reasoning.off]\ningroup = 0.5\n"),
            ("allocation.instrument.paraphrase.noise", "[allocation.instrument.paraphrase]\nnoise = 0.5\n"),
            ("allocation.swap_pass.swapped.rescale_rate", "[allocation.swap_pass.swapped]\nrescale_rate = 0.5\n"),
        ] {
            let mut params = SimParams::default();
            apply_effect(&mut params, effect, 0.5).unwrap();
            assert_eq!(params, parse_sim(file).unwrap(), "{effect}");
        }
        let mut params = SimParams::default();
        let err = apply_effect(&mut params, "allocation.reasoning.off.slope", 1.0).unwrap_err();
        assert!(format!("{err:#}").contains("unknown effect `allocation.reasoning.off.slope`"), "{err:#}");
        let err = apply_effect(&mut params, "conformity.task_shift.colour", 1.0).unwrap_err();
        assert!(format!("{err:#}").contains("no task is called `colour`"), "{err:#}");
        let err = apply_effect(&mut params, "conformity.intercept.x", 1.0).unwrap_err();
        assert!(format!("{err:#}").contains("unknown effect `conformity.intercept.x`"), "{err:#}");
    }

    #[test]
    fn the_sim_files_of_the_docs_and_data_read() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let page = std::fs::read_to_string(root.join("docs/variants.md")).unwrap();
        let keys = page.split("## The simulated agent's keys").nth(1).expect("docs/variants.md documents the keys");
        let mut blocks = keys.split("```toml\n").skip(1).map(|b| b.split("```").next().unwrap()).peekable();
        assert!(blocks.peek().is_some(), "the keys section has an example");
        for block in blocks {
            parse_sim(block).unwrap_or_else(|e| panic!("{e:#}\n{block}"));
        }
        let mut shipped = 0;
        for entry in std::fs::read_dir(root.join("data/sim")).unwrap() {
            let agent = entry.unwrap().path();
            let text = std::fs::read_to_string(&agent).unwrap();
            let params = parse_sim(&text).unwrap_or_else(|e| panic!("{}: {e:#}", agent.display()));
            params.validate().unwrap_or_else(|e| panic!("{}: {e}", agent.display()));
            shipped += 1;
        }
        assert!(shipped >= 5, "the shipped agents: paper effects, null, name effects, exception and saturating model");
        // Every key of the agent is named in the section.
        for key in AllocationOverride::KEYS.iter().map(|k| k.replace("noise_sd", "noise")).chain(
            [
                "difficulty_index",
                "difficulty_index_by_task",
                "level_shift",
                "task_shift",
                "family_shift",
                "saturates_at",
            ]
            .map(String::from),
        ) {
            assert!(keys.contains(&format!("`{key}`")) || keys.contains(&format!("{key}]")), "{key}");
        }
    }
}
