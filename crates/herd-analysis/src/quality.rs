//! The quality tables a report shows beside each study's results: how much of what was asked the
//! models answered in a form the analyses can use.

use std::collections::BTreeMap;

use polars::prelude::DataFrame;

use crate::error::AnalysisError;
use crate::io::Columns;
use crate::table::{ResultTable, TableBuilder, Value};

/// Per model × task of the `conformity_trials` `frame`: trials, mean P(A)+P(B), share of bounded
/// probabilities, and (from `baseline`, the `baseline_candidates` table) baseline acceptance. Columns
/// a plain table may lack (`mass_ab`, `p_bound`, `modality`) leave their cells empty.
pub(crate) fn conformity(
    frame: &DataFrame,
    origin: &str,
    baseline: Option<(DataFrame, String)>,
) -> Result<ResultTable, AnalysisError> {
    let c = Columns::new(frame, origin);
    let (model, task) = (c.text("model", "model name")?, c.text("task", "task")?);
    let mass = c.optional("mass_ab", |c| c.float("mass_ab", "P(A) + P(B)"))?;
    let bound = c
        .optional("p_bound", |c| c.flag("p_bound", "1 if a probability is only a bound"))?
        .unwrap_or_else(|| vec![false; c.height()]);
    // Tables written before lower bounds were told apart have no kind: their bounds are upper ones.
    let bound_kind = c.optional("p_bound_kind", |c| c.text("p_bound_kind", "upper, lower or empty"))?;
    let modality = c.optional("modality", |c| c.text("modality", "vision or text"))?;
    /// Trials, mass sum, bounded, lower-bounded, text-modality trials, and whether the modality is unknown.
    type Counts = (usize, f64, usize, usize, usize, bool);
    let mut groups: BTreeMap<(String, String), Counts> = BTreeMap::new();
    for i in 0..c.height() {
        let g = groups.entry((model[i].clone(), task[i].clone())).or_default();
        g.0 += 1;
        g.1 += mass.as_ref().map_or(f64::NAN, |m| m[i]);
        g.2 += usize::from(bound[i]);
        g.3 += usize::from(bound[i] && bound_kind.as_ref().is_some_and(|k| k[i] == "lower"));
        g.4 += usize::from(modality.as_ref().is_some_and(|m| m[i] == "text"));
        g.5 |= modality.is_none();
    }
    // (model, task) → (candidates, accepted)
    let mut accepted_by: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    if let Some((frame, baseline_origin)) = baseline {
        let b = Columns::new(&frame, baseline_origin);
        let (bm, bt, accepted) =
            (b.text("model", "model")?, b.text("task", "task")?, b.flag("accepted", "1 if accepted")?);
        for i in 0..b.height() {
            let e = accepted_by.entry((bm[i].clone(), bt[i].clone())).or_default();
            e.0 += 1;
            e.1 += usize::from(accepted[i]);
        }
    }
    let mut q = quality_table(
        "conformity_quality",
        &["model", "task", "modality"],
        &[
            "trials",
            "mean_mass_ab",
            "bounded_share",
            "bounded_excluded",
            "lower_bounded_excluded",
            "baseline_candidates",
            "baseline_accepted_share",
        ],
    );
    for ((m, t), (n, mass_sum, bounded, lower, text, unknown)) in groups {
        let (candidates, accepted) = accepted_by.get(&(m.clone(), t.clone())).copied().unwrap_or((0, 0));
        let modality = if unknown {
            "unknown"
        } else if text == n {
            "text"
        } else if text == 0 {
            "vision"
        } else {
            "mixed"
        };
        q.push(quality_row(
            vec![m, t, modality.into()],
            vec![
                Some(n as f64),
                Some(mass_sum / n as f64),
                Some(bounded as f64 / n as f64),
                Some(bounded as f64),
                Some(lower as f64),
                Some(candidates as f64),
                (candidates > 0).then(|| accepted as f64 / candidates as f64),
            ],
        ));
    }
    Ok(q.finish())
}

/// Per model × reasoning × instrument of the `allocation_deciders` table: deciders, parse success,
/// fills, QC flags, tokens; no rows without the table.
pub(crate) fn minimal_group(deciders: Option<(DataFrame, String)>) -> Result<ResultTable, AnalysisError> {
    let mut q = quality_table(
        "allocation_quality",
        &["model", "reasoning", "instrument"],
        &["deciders", "parsed_share", "filled_share", "qc_flagged_share", "mean_tokens_generated"],
    );
    if let Some((frame, deciders_origin)) = deciders {
        let c = Columns::new(&frame, deciders_origin);
        let (model, reasoning, instrument) =
            (c.text("model", "model")?, c.text("reasoning", "on or off")?, c.text("instrument", "instrument name")?);
        let status = c.text("parse_status", "ok or the failure")?;
        let filled = c.flag("filled", "1 if uniformly filled")?;
        let flags = c.text("qc_flags", "comma-separated QC flags")?;
        let tokens = c.float("tokens_generated", "tokens generated")?;
        /// Deciders, parsed, filled, flagged, tokens.
        type Counts = (usize, usize, usize, usize, f64);
        let mut groups: BTreeMap<(String, String, String), Counts> = BTreeMap::new();
        for i in 0..c.height() {
            let g = groups.entry((model[i].clone(), reasoning[i].clone(), instrument[i].clone())).or_default();
            g.0 += 1;
            g.1 += usize::from(status[i] == "ok");
            g.2 += usize::from(filled[i]);
            g.3 += usize::from(!flags[i].is_empty());
            g.4 += tokens[i];
        }
        for ((m, r, i), (n, parsed, fills, flagged, tokens)) in groups {
            let share = |k: usize| Some(k as f64 / n as f64);
            q.push(quality_row(
                vec![m, r, i],
                vec![Some(n as f64), share(parsed), share(fills), share(flagged), Some(tokens / n as f64)],
            ));
        }
    }
    Ok(q.finish())
}

/// A quality table: text key columns, then number columns, written through [`TableBuilder`] like
/// every result table.
fn quality_table(name: &str, keys: &[&str], numbers: &[&str]) -> TableBuilder {
    let schema: Vec<(&str, char)> = keys.iter().map(|&k| (k, 't')).chain(numbers.iter().map(|&n| (n, 'f'))).collect();
    TableBuilder::new(name, &schema)
}

/// A quality row: the keys, then the numbers (`None` and NaN are nulls).
fn quality_row(keys: Vec<String>, numbers: Vec<Option<f64>>) -> Vec<Value> {
    keys.into_iter().map(Value::from).chain(numbers.into_iter().map(Value::from)).collect()
}
