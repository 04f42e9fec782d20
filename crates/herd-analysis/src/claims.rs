//! The side-by-side table: each headline result of the papers (`data/paper-headlines.toml`, bundled)
//! against this run's number, with one of three verdicts and the test and n it rests on.
//!
//! Each headline is computed per row (a model, task, cell or contrast) by one function per id
//! (`conformity` and `minimal_group` submodules); `evidence` judges a row from its test and
//! combines the rows. "Inconclusive" is a verdict in its own right: a run too small for its test,
//! or with an undefined statistic, or with an interval that holds both zero and the paper's effect,
//! neither replicates nor fails to.

mod conformity;
mod conformity_claims;
mod evidence;
mod families;
mod labels;
mod minimal_group;
mod minimal_group_claims;
mod minimal_group_population;
mod nonce_labels;
mod per_model;
mod population;
mod robustness;
mod societies;

use serde::{Deserialize, Serialize};

use crate::PWrong;

use crate::error::AnalysisError;
use crate::results::Results;
use evidence::{Combine, Row, combine};
pub use minimal_group_population::{PARSED_MIN, models_outside};
pub use population::{LowBaseline, POPULATION_MIN, low_baselines};

static HEADLINES: &str = include_str!("../../../data/paper-headlines.toml");

/// One headline result as the papers state it, and herd's rules for judging a run against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperHeadline {
    pub id: String,
    /// `conformity` or `minimal_group`.
    pub study: String,
    pub quantity: String,
    pub paper: String,
    pub replicates_if: String,
    pub does_not_replicate_if: String,
    /// The smallest effect the paper reports (a magnitude), or for a null claim the margin within
    /// which an effect counts as none; absent where the paper gives no usable number.
    #[serde(default)]
    pub effect: Option<f64>,
    pub source: String,
    /// The claim in a few words, for the scorecard; `quantity` where absent.
    #[serde(default)]
    pub claim: Option<String>,
    /// The paper's number in a few words, for the scorecard; `paper` where absent.
    #[serde(default)]
    pub paper_value: Option<String>,
    /// One of the papers' robustness checks (S3, S5, S5.7), which the scorecard folds under the main
    /// claims.
    #[serde(default)]
    pub robustness: bool,
}

impl PaperHeadline {
    /// The claim as the scorecard names it.
    pub fn short_claim(&self) -> &str {
        self.claim.as_deref().unwrap_or(&self.quantity)
    }

    /// The paper's number as the scorecard gives it.
    pub fn short_paper_value(&self) -> &str {
        self.paper_value.as_deref().unwrap_or(&self.paper)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadlineFile {
    headline: Vec<PaperHeadline>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Replicates,
    DoesNotReplicate,
    /// The run cannot decide: too few units for the test, an undefined statistic, or an interval
    /// holding both zero and the paper's effect.
    Inconclusive,
    /// The run lacks the study, family or condition.
    NotInRun,
    /// The rows rest on models outside the paper's population: the conformity paper's claims are
    /// about images a model solves alone (its baseline filter), and a model at or near chance at
    /// N = 0 follows a crowd from chance, a different estimand.
    NotPaperPopulation,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Self::Replicates => "replicates",
            Self::DoesNotReplicate => "does not replicate",
            Self::Inconclusive => "inconclusive",
            Self::NotInRun => "not in this run",
            Self::NotPaperPopulation => "not the paper's population",
        }
    }
}

/// A paper's headline next to this run's number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadlineComparison {
    pub headline: PaperHeadline,
    /// Every row with its number, test, n, p, interval and verdict.
    pub this_run: String,
    pub verdict: Verdict,
    /// What the verdict rests on: the deciding rows and why, or the tests and their n.
    pub basis: String,
    /// The one number the scorecard shows: the first row that carries the verdict; `None` when
    /// the run lacks what the headline needs.
    pub number: Option<RunNumber>,
    /// Why an inconclusive verdict's rows decide nothing (`every value equal`, `too few units`), when
    /// every row that leaves it inconclusive has an undefined statistic or a test that cannot reach
    /// p < 0.05 at its n; `None` otherwise.
    pub undefined: Option<String>,
    /// The verdict per model with rows of its own, in model order (the report's claims × models matrix);
    /// empty when the run lacks the claim.
    pub per_model: Vec<ModelVerdict>,
}

/// One model's verdict on a claim: its own rows combined by the claim's rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelVerdict {
    pub model: String,
    pub verdict: Verdict,
}

impl HeadlineComparison {
    /// The verdict in words, with the reason where its statistics are undefined: `inconclusive: every
    /// value equal`.
    pub fn verdict_text(&self) -> String {
        match &self.undefined {
            Some(why) if self.verdict == Verdict::Inconclusive => format!("{}: {why}", self.verdict.text()),
            _ => self.verdict.text().to_owned(),
        }
    }
}

/// The notes of the rows that leave an inconclusive verdict undecided, when every one of them rests
/// on an undefined statistic or on too few units for its test (distinct notes joined by `; `).
fn undefined_notes(rows: &[Row], verdict: Verdict) -> Option<String> {
    if verdict != Verdict::Inconclusive {
        return None;
    }
    let mut notes: Vec<&str> = Vec::new();
    for row in rows.iter().filter(|r| r.verdict == Verdict::Inconclusive) {
        // An undefined statistic says why; a test that cannot reach p < 0.05 at its n has too few units.
        let too_few = row.evidence.too_few(evidence::ALPHA).map(|_| crate::TOO_FEW_UNITS);
        let note = row.evidence.note.as_deref().or(too_few)?;
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// One row's estimate with its interval and n, as the scorecard shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunNumber {
    /// The row it comes from (a model, task, cell or contrast).
    pub label: String,
    /// The row's own reading, shown where it has no estimate (e.g. `3 of 4 visible cells; …`).
    pub value: String,
    pub estimate: Option<f64>,
    pub interval: Option<(f64, f64)>,
    /// E.g. `95% t-interval`; empty without an interval.
    pub interval_name: &'static str,
    pub n: usize,
    /// What `n` counts (`seeds`, `societies`, …).
    pub unit: &'static str,
    /// How many rows the headline has, this one among them.
    pub rows: usize,
    /// Whether the estimate is a size (an SD, a share): written without a sign.
    pub magnitude: bool,
}

impl RunNumber {
    fn of(row: &Row, rows: usize) -> Self {
        let e = &row.evidence;
        Self {
            label: row.label.clone(),
            value: row.value.clone(),
            estimate: e.estimate,
            interval: e.interval,
            interval_name: e.interval_name,
            n: e.n,
            unit: if e.n == 1 { evidence::singular(e.unit) } else { e.unit },
            rows,
            magnitude: e.magnitude,
        }
    }

    /// `+0.412 [0.301, 0.523], 8 seeds`: the estimate (a size unsigned: `0.120 [0.000, 0.290]`), its
    /// interval and n; an interval whose bounds print alike is no interval (`no variation: every seed
    /// +0.000, 8 seeds`); without an estimate, the row's reading (a count of cells; up to its first
    /// `;`, and at most 48 characters, where long: the detail table has the rest), or `undefined`.
    pub fn value_text(&self) -> String {
        const LONGEST: usize = 48;
        let mut reading = if self.value.chars().count() <= LONGEST {
            self.value.clone()
        } else {
            self.value.split("; ").next().unwrap_or_default().to_owned()
        };
        if reading.chars().count() > LONGEST {
            reading = reading.chars().take(LONGEST - 1).collect::<String>() + "…";
        }
        let estimate = match self.estimate {
            Some(estimate) if self.magnitude => crate::format::num(estimate),
            Some(estimate) => crate::format::signed(estimate),
            None if !reading.is_empty() => reading,
            None => "undefined".to_owned(),
        };
        if let (Some(_), Some((lo, hi))) = (self.estimate, self.interval)
            && evidence::zero_width(lo, hi)
        {
            let unit = evidence::singular(self.unit);
            return format!("no variation: every {unit} {estimate}, {} {}", self.n, self.unit);
        }
        let interval = self
            .interval
            .map(|(lo, hi)| format!(" [{}, {}]", crate::format::num(lo), crate::format::num(hi)))
            .unwrap_or_default();
        format!("{estimate}{interval}, {} {}", self.n, self.unit)
    }

    /// Which row it is, and of how many: `model-a · colour (1 of 4 rows)`.
    pub fn row_text(&self) -> String {
        if self.rows > 1 { format!("{} (1 of {} rows)", self.label, self.rows) } else { self.label.clone() }
    }
}

/// The papers' headline results bundled with herd.
pub fn paper_headlines() -> Result<Vec<PaperHeadline>, AnalysisError> {
    let file: HeadlineFile = toml::from_str(HEADLINES).map_err(|e| AnalysisError::Headlines(e.to_string()))?;
    for h in &file.headline {
        if measure_of(&h.id).is_none() {
            return Err(AnalysisError::Headlines(format!("no computation for id `{}`", h.id)));
        }
        if !["conformity", "minimal_group"].contains(&h.study.as_str()) {
            return Err(AnalysisError::Headlines(format!(
                "`{}`: study `{}` is not conformity or minimal_group",
                h.id, h.study
            )));
        }
        if h.effect.is_some_and(|e| !(e.is_finite() && e > 0.0)) {
            return Err(AnalysisError::Headlines(format!("`{}`: effect must be a positive magnitude", h.id)));
        }
    }
    Ok(file.headline)
}

/// A headline's rows for this run and how they combine; `None` when the run lacks what it needs.
pub(crate) struct Outcome {
    /// A line before the rows (e.g. the shares the rows summarise); may be empty.
    pub summary: String,
    pub rows: Vec<Row>,
    pub combine: Combine,
}

/// How a headline is computed: conformity headlines once per p_wrong measure.
#[derive(Clone, Copy)]
enum Measure {
    Conformity(fn(&PaperHeadline, &Results, PWrong) -> Option<Outcome>),
    MinimalGroup(fn(&PaperHeadline, &Results) -> Option<Outcome>),
}

fn measure_of(id: &str) -> Option<Measure> {
    use Measure::{Conformity, MinimalGroup};
    Some(match id {
        "group_size_rise" => Conformity(conformity::group_size_rise),
        "saturation" => Conformity(conformity::saturation),
        "unanimity_dissent" => Conformity(conformity::unanimity_dissent),
        "difficulty_rho" => Conformity(conformity::difficulty_rho),
        "performance_effect" => Conformity(conformity::performance_effect),
        "difficulty_predicts" => Conformity(conformity::difficulty_predicts),
        "public_private" => Conformity(conformity::public_private),
        "source_strength" => Conformity(conformity::source_strength),
        "same_group" => Conformity(conformity::same_group),
        "identity_each" => Conformity(conformity::identity_each),
        "source_order" => Conformity(conformity::source_order),
        "near_far" => Conformity(conformity::near_far),
        "tasks_alike" => Conformity(conformity_claims::tasks_alike),
        "neutral_between" => Conformity(conformity_claims::neutral_between),
        "temporal_vs_spatial" => Conformity(conformity_claims::temporal_vs_spatial),
        "favouritism_visible" => MinimalGroup(minimal_group::favouritism_visible),
        "hidden_floor" => MinimalGroup(minimal_group::hidden_floor),
        "hidden_floor_paraphrase" => MinimalGroup(minimal_group::hidden_floor_paraphrase),
        "favouritism_per_pass" => MinimalGroup(minimal_group::favouritism_per_pass),
        "favouritism_paraphrase" => MinimalGroup(minimal_group::favouritism_paraphrase),
        "minority_gap" => MinimalGroup(minimal_group::minority_gap),
        "prevalence" => MinimalGroup(minimal_group::prevalence),
        "extreme_allocations" => MinimalGroup(minimal_group::extreme_allocations),
        "bh_survivors" => MinimalGroup(minimal_group::bh_survivors),
        "minority_blocks_survive" => MinimalGroup(minimal_group::minority_blocks_survive),
        "roster_position" => MinimalGroup(robustness::roster_position),
        "fills_change" => MinimalGroup(robustness::fills_change),
        "parse_success" => MinimalGroup(robustness::parse_success),
        "swap_pass_bound" => MinimalGroup(nonce_labels::swap_pass_bound),
        "token_receipt_bound" => MinimalGroup(nonce_labels::token_receipt_bound),
        "reasoning_interaction" => MinimalGroup(minimal_group::reasoning_interaction),
        "gap_closes_equal_groups" => MinimalGroup(minimal_group_claims::gap_closes_equal_groups),
        "excess_share_gap" => MinimalGroup(minimal_group_claims::excess_share_gap),
        "majority_reversal" => MinimalGroup(minimal_group_claims::majority_reversal),
        "reasoning_gap" => MinimalGroup(minimal_group_claims::reasoning_gap),
        "majority_proportional" => MinimalGroup(minimal_group_claims::majority_proportional),
        "hidden_floor_reasoning" => MinimalGroup(minimal_group_claims::hidden_floor_reasoning),
        "reasoning_majority_share" => MinimalGroup(minimal_group_claims::reasoning_majority_share),
        "bootstrap_se_agreement" => MinimalGroup(minimal_group_claims::bootstrap_se_agreement),
        _ => return None,
    })
}

/// A headline's outcome. A conformity headline is judged on the lead measure; each row's value is
/// followed by the same row read with the other measure, so both are in the table.
fn outcome(headline: &PaperHeadline, measure: Measure, results: &Results) -> Option<Outcome> {
    match measure {
        Measure::MinimalGroup(f) => {
            let mut outcome = f(headline, results)?;
            minimal_group_population::mark(&mut outcome, results);
            Some(outcome)
        }
        Measure::Conformity(f) => {
            let lead = results.conformity.as_ref()?.measure;
            let mut outcome = f(headline, results, lead)?;
            // Every conformity row names the (model, task) pairs it rests on, so none escapes the gate.
            debug_assert!(
                outcome.rows.iter().all(|r| !r.members.is_empty()),
                "`{}`: a conformity row without members",
                headline.id
            );
            population::mark(&mut outcome, results);
            let other = f(headline, results, lead.other()).map(|o| o.rows).unwrap_or_default();
            for row in &mut outcome.rows {
                let twin = other.iter().find(|r| r.label == row.label && !r.value.is_empty());
                let lead_value =
                    if row.value.is_empty() { String::new() } else { format!("{}: {}", lead.column(), row.value) };
                row.value = match twin {
                    Some(twin) if lead_value.is_empty() => format!("{}: {}", lead.other().column(), twin.value),
                    Some(twin) => format!("{lead_value} (with {}: {})", lead.other().column(), twin.value),
                    None => lead_value,
                };
            }
            Some(outcome)
        }
    }
}

/// Why a headline has no rows in this run.
fn why_absent(headline: &PaperHeadline, results: &Results) -> String {
    if headline.id == "bootstrap_se_agreement"
        && let Some(m) = &results.minimal_group
        && !m.analysis.settings.gee_bootstrap
    {
        return "the analysis did not bootstrap the GEE fits (one refit per resample, which `herd report` and the \
                quick look skip): run `herd analyze minimal-group --dyads DIR` on the run folder and report again"
            .to_owned();
    }
    "the run lacks the study, family or condition".to_owned()
}

/// Every headline of the papers with this run's number and verdict.
pub fn compare_headlines(results: &Results) -> Result<Vec<HeadlineComparison>, AnalysisError> {
    let models = per_model::run_models(results);
    let mut comparisons: Vec<HeadlineComparison> = paper_headlines()?
        .into_iter()
        .map(|headline| {
            let outcome = measure_of(&headline.id)
                .and_then(|measure| outcome(&headline, measure, results))
                .filter(|o| !o.rows.is_empty());
            let (this_run, verdict, basis, number, undefined, per_model) = match outcome {
                Some(o) => {
                    let (verdict, basis) = combine(&o.rows, o.combine);
                    let per_model = per_model::per_model(&o.rows, o.combine, &models);
                    let undefined = undefined_notes(&o.rows, verdict);
                    let rows = o.rows.iter().map(Row::describe).collect::<Vec<_>>().join("; ");
                    let text = if o.summary.is_empty() { rows } else { format!("{}. {rows}", o.summary) };
                    // The number shown is one that carries the verdict, so the two never disagree.
                    let deciding = o.rows.iter().find(|r| r.verdict == verdict).unwrap_or(&o.rows[0]);
                    (text, verdict, basis, Some(RunNumber::of(deciding, o.rows.len())), undefined, per_model)
                }
                None => ("—".to_owned(), Verdict::NotInRun, why_absent(&headline, results), None, None, Vec::new()),
            };
            let mut headline = headline;
            labels::in_run_terms(&mut headline, results);
            HeadlineComparison { headline, this_run, verdict, basis, number, undefined, per_model }
        })
        .collect();
    families::presuppose(&mut comparisons);
    Ok(comparisons)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_headline_has_a_computation() {
        let headlines = paper_headlines().unwrap();
        let mut ids: Vec<&str> = headlines.iter().map(|h| h.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), headlines.len(), "ids are unique");
        // And every computation has its entry (the file is the table's row list).
        let mut computed = vec![
            "group_size_rise",
            "unanimity_dissent",
            "difficulty_rho",
            "performance_effect",
            "difficulty_predicts",
            "public_private",
            "source_strength",
            "same_group",
            "identity_each",
            "source_order",
            "near_far",
            "favouritism_visible",
            "hidden_floor",
            "hidden_floor_paraphrase",
            "favouritism_per_pass",
            "favouritism_paraphrase",
            "minority_gap",
            "prevalence",
            "extreme_allocations",
            "bh_survivors",
            "minority_blocks_survive",
            "roster_position",
            "fills_change",
            "parse_success",
            "swap_pass_bound",
            "token_receipt_bound",
            "saturation",
            "reasoning_interaction",
            "gap_closes_equal_groups",
            "excess_share_gap",
            "majority_reversal",
            "reasoning_gap",
            "majority_proportional",
            "hidden_floor_reasoning",
            "reasoning_majority_share",
            "bootstrap_se_agreement",
            "tasks_alike",
            "neutral_between",
            "temporal_vs_spatial",
        ];
        computed.sort_unstable();
        assert!(computed.iter().all(|id| measure_of(id).is_some()));
        assert_eq!(ids, computed);
    }

    #[test]
    fn the_papers_numbers_are_where_the_rules_use_them() {
        let effect = |id: &str| paper_headlines().unwrap().into_iter().find(|h| h.id == id).unwrap().effect;
        assert_eq!(effect("favouritism_visible"), Some(0.84));
        assert_eq!(effect("minority_gap"), Some(2.38));
        assert_eq!(effect("reasoning_interaction"), Some(1.50));
        assert_eq!(effect("gap_closes_equal_groups"), Some(2.38));
        assert_eq!(effect("reasoning_gap"), Some(3.54));
        // "Up to" claims give no smallest effect.
        assert_eq!(effect("same_group"), None);
    }

    #[test]
    fn every_bundled_headline_has_its_scorecard_words() {
        for h in paper_headlines().unwrap() {
            let (claim, paper) = (h.claim.as_deref().unwrap_or(""), h.paper_value.as_deref().unwrap_or(""));
            // A scorecard row is one line at 1400 px: a few words each.
            assert!(!claim.is_empty() && claim.chars().count() <= 60, "`{}`: claim {claim:?}", h.id);
            assert!(!paper.is_empty() && paper.chars().count() <= 40, "`{}`: paper_value {paper:?}", h.id);
        }
    }

    #[test]
    fn a_run_number_gives_estimate_interval_and_n() {
        let number = RunNumber {
            label: "model-a · colour".into(),
            value: String::new(),
            estimate: Some(0.4123),
            interval: Some((0.301, 0.5234)),
            interval_name: "95% t-interval",
            n: 8,
            unit: "seeds",
            rows: 4,
            magnitude: false,
        };
        assert_eq!(number.value_text(), "+0.412 [0.301, 0.523], 8 seeds");
        // A size (an SD, a share) is no difference: no sign.
        let spread = RunNumber { estimate: Some(0.0), interval: Some((0.0, 0.029)), magnitude: true, ..number.clone() };
        assert_eq!(spread.value_text(), "0.000 [0.000, 0.029], 8 seeds");
        assert_eq!(number.row_text(), "model-a · colour (1 of 4 rows)");
        // A zero-width interval is no evidence of precision: it says the units did not vary.
        let constant = RunNumber { estimate: Some(0.0), interval: Some((0.0, 0.0)), ..number.clone() };
        assert_eq!(constant.value_text(), "no variation: every seed +0.000, 8 seeds");
        let rounded = RunNumber { estimate: Some(0.30001), interval: Some((0.29999, 0.30004)), ..number.clone() };
        assert_eq!(rounded.value_text(), "no variation: every seed +0.300, 8 seeds");
        let alone = RunNumber { estimate: None, interval: None, rows: 1, ..number };
        assert_eq!(alone.value_text(), "undefined, 8 seeds");
        assert_eq!(alone.row_text(), "model-a · colour");
        let count = RunNumber { value: "3 of 4 visible cells; 0 of 4 hidden".into(), ..alone.clone() };
        assert_eq!(count.value_text(), "3 of 4 visible cells; 0 of 4 hidden, 8 seeds");
        let long = RunNumber { value: format!("3 of 4 visible cells; {}", "x".repeat(40)), ..alone.clone() };
        assert_eq!(long.value_text(), "3 of 4 visible cells, 8 seeds");
        let unbroken = RunNumber { value: "y".repeat(60), ..alone };
        assert_eq!(unbroken.value_text(), format!("{}…, 8 seeds", "y".repeat(47)));
    }
}
