//! The sim agent's file (`herd run --sim FILE`, `herd power --sim FILE`) and `herd power --effect`: one
//! vocabulary of keys for both, documented in `herd run --help` from the agent's own defaults.
//!
//! The file's keys are `herd power --effect`'s names: `[allocation] ingroup` sets both deciders'
//! in-group log-weight (as `--effect ingroup=…` does), and `noise` is each section's noise sd. The
//! agent's own field names (`noise_sd`) are accepted too, so files written before the rename still work.

use anyhow::{Context, Result, bail};
use herd_backend::SimParams;

/// `herd run --sim`'s long help: every key with its default and meaning.
pub fn sim_help() -> String {
    let d = SimParams::default();
    let (c, a) = (&d.conformity, &d.allocation);
    let shifts: Vec<String> = c.level_shift.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    format!(
        "The simulated agent's parameters (TOML), for `--backend sim`; every key is optional (defaults shown).\n\
         The keys are `herd power --effect`'s names. Old spelling still read: noise_sd for noise.\n\n\
         seed = {seed}                   keys the agent's noise, with each trial's key\n\
         [conformity]               logit P(wrong) = intercept + per_log_wrong·ln(1 + wrong replies)\n\
         \x20                          + per_log_right·ln(1 + right replies) + difficulty·d + level_shift[level] + ε\n\
         intercept = {intercept}\n\
         per_log_wrong = {plw}          --effect per_log_wrong=…\n\
         per_log_right = {plr}\n\
         difficulty = {difficulty}            d: the image's difficulty in [0, 1]\n\
         noise = {cnoise}                 sd of ε per trial; --effect noise=… sets both sections'\n\
         [conformity.level_shift]   added to the logit at a family level (a table given replaces the default:\n\
         \x20                          {shifts}); e.g. surgeons = 0.5 for a role of your own\n\
         [allocation]               each target's weight is exp(ingroup·same_group + ε), 0 with hidden labels\n\
         ingroup = …                both deciders' in-group log-weight; --effect ingroup=…\n\
         ingroup_minority = {imin}     a minority decider's (over ingroup); --effect ingroup_minority=…\n\
         ingroup_majority = {imaj}     a majority decider's (over ingroup); --effect ingroup_majority=…\n\
         noise = {anoise}                 sd of ε per target\n\n\
         Effects are logits or log-weights in [-50, 50]; noise in [0, 10].",
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

/// Parses a sim file's text: power's names translated to the agent's fields, then the typed parse
/// (which rejects an unknown key, naming the allowed ones).
pub fn parse_sim(text: &str) -> Result<SimParams> {
    let mut table: toml::Table = toml::from_str(text)?;
    for section in ["conformity", "allocation"] {
        let Some(toml::Value::Table(t)) = table.get_mut(section) else { continue };
        if let Some(noise) = t.remove("noise") {
            if t.contains_key("noise_sd") {
                bail!("[{section}] gives both `noise` and its old spelling `noise_sd`; keep `noise`");
            }
            t.insert("noise_sd".into(), noise);
        }
        if section == "allocation"
            && let Some(ingroup) = t.remove("ingroup")
        {
            for key in ["ingroup_minority", "ingroup_majority"] {
                t.entry(key).or_insert_with(|| ingroup.clone());
            }
        }
    }
    let params: SimParams = table.try_into()?;
    Ok(params)
}

/// A range error with the key as the file writes it (`allocation.noise`, not the agent's `noise_sd`).
pub fn named_as_in_the_file(e: &herd_backend::SimParamError) -> String {
    let key = e.key.strip_suffix("noise_sd").map_or_else(|| e.key.clone(), |section| format!("{section}noise"));
    herd_backend::SimParamError { key, ..e.clone() }.to_string()
}

/// Sets one `--effect NAME=VALUE`: power's shorthands (`ingroup`, `ingroup_minority`, `ingroup_majority`,
/// `per_log_wrong`, `noise`), or any key of the sim file written with its section
/// (`conformity.intercept`, `conformity.level_shift.surgeons`, `allocation.noise`).
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
            let (section, key) = dotted.split_once('.').unwrap_or_default();
            let key = match key {
                "noise" => "noise_sd",
                "ingroup" if section == "allocation" => {
                    apply_effect(params, "ingroup", value)?;
                    return Ok(());
                }
                other => other,
            };
            let mut json = serde_json::to_value(&*params)?;
            // A map's entry (`level_shift.surgeons`) may be new; a struct's field must exist.
            if let Some((map, entry)) = key.split_once('.')
                && let Some(serde_json::Value::Object(o)) = json.pointer_mut(&format!("/{section}/{map}"))
            {
                o.entry(entry).or_insert(0.into());
            }
            let place = json.pointer_mut(&format!("/{section}/{}", key.replace('.', "/")));
            match place {
                Some(slot @ serde_json::Value::Number(_)) => *slot = value.into(),
                _ => bail!("unknown effect `{dotted}`; {}", EFFECTS),
            }
            *params = serde_json::from_value(json).with_context(|| format!("--effect {dotted}"))?;
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
                       section, e.g. conformity.intercept or conformity.level_shift.surgeons (see `herd run --help`)";

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
    }
}
