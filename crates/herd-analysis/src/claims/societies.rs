//! What the minimal-group headlines rest on: the paper's selection of cells (the base instrument,
//! each model's default reasoning mode, both swap passes of a society pooled) and the deciders and
//! societies of each model, recomputed from the dyads (the analysis tables hold cell-level
//! summaries only; the definitions are herd-analysis's).

use std::collections::{BTreeMap, BTreeSet};

use crate::{DesignKey, DyadTable, Labels, ResultTable};

const MODEL: usize = 0;
const REASONING: usize = 1;
const INSTRUMENT: usize = 2;
const SWAP_PASS: usize = 3;

/// The instrument the paper's headlines use: `base` where the run has it, else the run's only one.
pub(super) const BASE: &str = "base";

/// The cells a headline rests on, and how to say so.
#[derive(Debug, Clone)]
pub(super) struct Selection {
    /// The instrument selected (`None` where the dyads have no `instrument` column).
    instrument: Option<String>,
    /// Each model's default reasoning mode (`None` where the dyads have no `reasoning` column):
    /// thinking `on` where the model has it, else its only mode; a model with several modes and no
    /// `on` has none, and none of its cells is selected.
    defaults: Option<BTreeMap<Option<String>, Option<String>>>,
    /// Whether any cell has two swap passes (then the selection pools them, unless `pass` is set).
    two_passes: bool,
    /// One swap pass alone (a robustness selection), else both pooled.
    pass: Option<String>,
    /// Every reasoning mode (the reasoning control compares them), not each model's default.
    every_mode: bool,
}

impl Selection {
    /// The paper's headline selection in `dyads`, on `instrument` (`None`: the base instrument).
    pub(super) fn new(dyads: &DyadTable, instrument: Option<&str>) -> Self {
        let columns = dyads.design_columns();
        let instruments: BTreeSet<&str> = dyads.rows.iter().filter_map(|d| d.design.0[INSTRUMENT].as_deref()).collect();
        let instrument = columns.contains(&"instrument").then(|| match instrument {
            Some(i) => i.to_owned(),
            None if instruments.contains(BASE) || instruments.len() != 1 => BASE.to_owned(),
            None => instruments.first().map(|i| (*i).to_owned()).unwrap_or_default(),
        });
        let defaults = crate::minimal_group::default_reasoning(dyads);
        let passes: BTreeSet<&str> = dyads.rows.iter().filter_map(|d| d.design.0[SWAP_PASS].as_deref()).collect();
        Self { instrument, defaults, two_passes: passes.len() > 1, pass: None, every_mode: false }
    }

    /// The same selection over every reasoning mode of each model.
    pub(super) fn every_mode(mut self) -> Self {
        self.every_mode = self.defaults.is_some();
        self.defaults = None;
        self
    }

    /// Whether a dyad with these design values is in the selection.
    pub(super) fn takes_design(&self, design: &DesignKey) -> bool {
        let d = &design.0;
        self.takes(d[MODEL].as_deref(), d[REASONING].as_deref(), d[INSTRUMENT].as_deref(), d[SWAP_PASS].as_deref())
    }

    /// The same selection on one swap pass alone.
    pub(super) fn on_pass(mut self, pass: &str) -> Self {
        self.pass = Some(pass.to_owned());
        self
    }

    /// The swap passes of the run, where it has two or more.
    pub(super) fn passes(dyads: &DyadTable) -> Vec<String> {
        let passes: BTreeSet<String> = dyads.rows.iter().filter_map(|d| d.design.0[SWAP_PASS].clone()).collect();
        if passes.len() > 1 { passes.into_iter().collect() } else { Vec::new() }
    }

    /// The paraphrase instruments of the run (every instrument but the base one).
    pub(super) fn other_instruments(dyads: &DyadTable) -> BTreeSet<String> {
        dyads.rows.iter().filter_map(|d| d.design.0[INSTRUMENT].clone()).filter(|i| i != BASE).collect()
    }

    /// Whether the run has the selected instrument at all.
    pub(super) fn instrument_in(&self, dyads: &DyadTable) -> bool {
        self.instrument
            .as_deref()
            .is_none_or(|i| dyads.rows.iter().any(|d| d.design.0[INSTRUMENT].as_deref() == Some(i)))
    }

    fn takes(
        &self,
        model: Option<&str>,
        reasoning: Option<&str>,
        instrument: Option<&str>,
        pass: Option<&str>,
    ) -> bool {
        let mode_ok = match &self.defaults {
            None => true,
            Some(defaults) => {
                defaults.get(&model.map(str::to_owned)).and_then(Option::as_deref).is_some_and(|d| reasoning == Some(d))
            }
        };
        mode_ok
            && self.instrument.as_deref().is_none_or(|i| instrument == Some(i))
            && self.pass.as_deref().is_none_or(|p| pass == Some(p))
    }

    /// Whether a main row (`passes` ≠ `per_pass`) of a result table is in the selection.
    pub(super) fn takes_row(&self, t: &ResultTable, r: usize) -> bool {
        let role_ok = match &self.pass {
            None => t.text("passes", r) != Some("per_pass"),
            Some(p) => t.text("passes", r) == Some("per_pass") && t.text("swap_pass", r) == Some(p.as_str()),
        };
        role_ok
            && self.takes(t.text("model", r), t.text("reasoning", r), t.text("instrument", r), t.text("swap_pass", r))
    }

    /// Whether a result row is on the selected instrument (for fits pooled over reasoning modes).
    pub(super) fn takes_instrument(&self, t: &ResultTable, r: usize) -> bool {
        self.instrument.as_deref().is_none_or(|i| t.text("instrument", r) == Some(i))
    }

    /// What the selection is, for a headline's summary and a figure's caption.
    pub(super) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(i) = &self.instrument {
            parts.push(format!("the {i} instrument"));
        }
        if self.defaults.is_some() {
            parts.push("each model's default reasoning mode (thinking on where it has it)".into());
        }
        if self.every_mode {
            parts.push("both reasoning modes".into());
        }
        match &self.pass {
            Some(p) => parts.push(format!("the {p} swap pass alone")),
            None if self.two_passes => parts.push("both swap passes of a society pooled".into()),
            None => {}
        }
        if parts.is_empty() { "every cell".into() } else { parts.join(", ") }
    }
}

/// One decider in one pass.
#[derive(Debug, Clone)]
pub(super) struct Decider {
    /// Every out-group target got zero points.
    pub(super) extreme: bool,
    /// Favouritism > 0: more points per in-group target than per out-group target (herd-analysis's
    /// decider favouritism, `minimal_group::claims`, the `prevalence` quantity's test).
    pub(super) favours: bool,
}

/// A model (its design values, without the swap pass) × label condition of the selection.
pub(super) type ModelKey = (Option<String>, Labels);
/// A society: (m, seed).
pub(super) type Society = (u32, i64);

/// The selection's deciders per model and label condition, society by society (both passes of a
/// society together, so a decider of each pass counts once per pass, as herd-analysis's pooled
/// cells do).
pub(super) fn deciders_by_model(
    dyads: &DyadTable,
    selection: &Selection,
) -> BTreeMap<ModelKey, BTreeMap<Society, Vec<Decider>>> {
    #[derive(Default)]
    struct Tally {
        n_in: usize,
        n_out: usize,
        in_sum: f64,
        out_sum: f64,
        out_nonzero: bool,
    }
    // (model, labels, m, seed, pass, decider) → tally
    type Key = (Option<String>, Labels, u32, i64, Option<String>, i64);
    let mut tallies: BTreeMap<Key, Tally> = BTreeMap::new();
    for d in &dyads.rows {
        let design = &d.design.0;
        let (model, reasoning, instrument) =
            (design[MODEL].as_deref(), design[REASONING].as_deref(), design[INSTRUMENT].as_deref());
        if !selection.takes(model, reasoning, instrument, design[SWAP_PASS].as_deref()) {
            continue;
        }
        let key = (design[MODEL].clone(), d.labels, d.m, d.seed, design[SWAP_PASS].clone(), d.decider);
        let t = tallies.entry(key).or_default();
        if d.same_group {
            t.n_in += 1;
            t.in_sum += d.points;
        } else {
            t.n_out += 1;
            t.out_sum += d.points;
            t.out_nonzero |= d.points != 0.0;
        }
    }
    let mut out: BTreeMap<ModelKey, BTreeMap<Society, Vec<Decider>>> = BTreeMap::new();
    for ((model, labels, m, seed, _, _), t) in tallies {
        if t.n_in == 0 || t.n_out == 0 {
            continue;
        }
        let favouritism = t.in_sum / t.n_in as f64 - t.out_sum / t.n_out as f64;
        let decider = Decider { extreme: !t.out_nonzero, favours: favouritism > 0.0 };
        out.entry((model, labels)).or_default().entry((m, seed)).or_default().push(decider);
    }
    out
}

/// Mean of `value` over the chosen deciders of each society (societies with none are left out).
pub(super) fn society_means(
    societies: &BTreeMap<Society, Vec<Decider>>,
    choose: impl Fn(&Decider) -> bool,
    value: impl Fn(&Decider) -> f64,
) -> BTreeMap<Society, f64> {
    societies
        .iter()
        .filter_map(|(&s, ds)| {
            let chosen: Vec<f64> = ds.iter().filter(|d| choose(d)).map(&value).collect();
            (!chosen.is_empty()).then(|| (s, chosen.iter().sum::<f64>() / chosen.len() as f64))
        })
        .collect()
}

/// The model's name for a row label.
pub(super) fn model_name(model: &Option<String>) -> String {
    model.clone().unwrap_or_else(|| "model".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DesignKey, Dyad};

    fn dyad(
        model: &str,
        reasoning: &str,
        instrument: &str,
        pass: &str,
        decider: i64,
        target: i64,
        points: f64,
    ) -> Dyad {
        let design =
            DesignKey([Some(model.into()), Some(reasoning.into()), Some(instrument.into()), Some(pass.into())]);
        Dyad::from_membership((design, Labels::Visible, 1), 0, (decider, target), |agent| agent == 0, points)
    }

    #[test]
    fn the_selection_is_base_default_mode_and_both_passes() {
        // Society of three: agent 0 alone in the minority; agents 1 and 2 the majority.
        let mut rows = Vec::new();
        for (reasoning, instrument, pass, bias) in [
            ("on", "base", "original", 10.0),
            ("on", "base", "swapped", 20.0),
            ("off", "base", "original", 99.0),
            ("on", "paraphrase", "original", 50.0),
        ] {
            for decider in 1..=2 {
                let other = 3 - decider;
                rows.push(dyad("q", reasoning, instrument, pass, decider, other, 50.0 + bias / 2.0));
                rows.push(dyad("q", reasoning, instrument, pass, decider, 0, 50.0 - bias / 2.0));
            }
        }
        let dyads = DyadTable::new("test", rows).unwrap();
        let selection = Selection::new(&dyads, None);
        assert_eq!(
            selection.describe(),
            "the base instrument, each model's default reasoning mode (thinking on where it has it), both swap passes of a society pooled"
        );
        let by_model = deciders_by_model(&dyads, &selection);
        let societies = &by_model[&(Some("q".into()), Labels::Visible)];
        // Two deciders in each of the two base passes with thinking on; the off mode and paraphrase left out.
        assert_eq!(societies[&(1, 0)].len(), 4);
        let favouritism = |selection: &Selection| {
            let claims = crate::minimal_group::model_claims(&dyads, |k| selection.takes_design(k)).unwrap();
            (0..claims.n_rows())
                .filter(|&r| claims.text("quantity", r) == Some("favouritism"))
                .map(|r| {
                    (claims.text("reasoning", r).unwrap_or_default().to_owned(), claims.number("mean", r).unwrap())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(favouritism(&selection), [("on".to_owned(), 15.0)]);
        assert_eq!(favouritism(&Selection::new(&dyads, Some("paraphrase"))), [("on".to_owned(), 50.0)]);
        // The reasoning control's selection takes both modes of the base instrument.
        let every = Selection::new(&dyads, None).every_mode();
        assert!(every.describe().contains("both reasoning modes"), "{}", every.describe());
        assert_eq!(favouritism(&every), [("off".to_owned(), 99.0), ("on".to_owned(), 15.0)]);
    }
}
