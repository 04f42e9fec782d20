//! The committed calibration of the papers' designs (`docs/calibration.csv`, written by `cargo xtask
//! calibrate`), bundled so that every headline rule can cite its measured error rates: how often it
//! reads "replicates" on an agent with the papers' effects (its power) and how often it gives the
//! false verdict on an agent with none.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::claims::Verdict;

static SHIPPED: &str = include_str!("../../../../docs/calibration.csv");

/// The shipped agent with the papers' effects, and the one with none, as the table names them.
const PAPER_AGENT: &str = "data/sim/paper-effects.toml";
const NULL_AGENT: &str = "data/sim/null.toml";

/// The claims that the paper states as an absence (no effect, no difference, a floor): their false
/// verdict is "does not replicate" on an agent that has the absence; every other claim's is
/// "replicates" on an agent without the effect.
pub const NULL_CLAIMS: [&str; 11] = [
    "hidden_floor",
    "tasks_alike",
    "temporal_vs_spatial",
    "performance_effect",
    "gap_closes_equal_groups",
    "bootstrap_se_agreement",
    "roster_position",
    "fills_change",
    "parse_success",
    "majority_proportional",
    "hidden_floor_reasoning",
];

/// One verdict's share of the replications, with its 95% Wilson interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub rate: f64,
    pub low: f64,
    pub high: f64,
    pub replications: u32,
}

impl Rate {
    /// `0.97 [0.92, 0.99]`
    pub fn text(&self) -> String {
        format!("{} [{}, {}]", num2(self.rate), num2(self.low), num2(self.high))
    }
}

fn num2(v: f64) -> String {
    format!("{v:.2}")
}

/// A claim's calibrated rates on the paper's design.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleRates {
    pub claim: String,
    /// Share of "replicates" on the agent with the papers' effects; `None` where that agent's
    /// replications never put the claim in the run (the sim cannot plant what it needs).
    pub power: Option<Rate>,
    /// The verdict that is false on the agent without effects, and its share there.
    pub false_verdict: (Verdict, Rate),
    /// Whether the agent with the papers' effects had the claim in its run at all.
    pub planted: bool,
}

impl RuleRates {
    /// One sentence for a report: what the rule's rates are, where they were measured, and how to
    /// measure them for another design.
    pub fn sentence(&self) -> String {
        let (verdict, rate) = &self.false_verdict;
        let design = format!(
            "Calibrated on the paper's full design (docs/calibration.md, {} replications per shipped agent)",
            rate.replications
        );
        let power = match (&self.power, self.planted) {
            (Some(p), true) => format!("reads replicates in {} of runs of an agent with the papers' effects", p.text()),
            _ => "the shipped agent with the papers' effects cannot plant what it needs, so its power is unmeasured"
                .into(),
        };
        format!(
            "{design}: {power}; reads {} (a false verdict) in {} of runs of an agent with none. For another design: \
             herd calibrate --experiment FILE.",
            verdict.text(),
            rate.text()
        )
    }
}

/// claim → agent → verdict → rate
type Table = BTreeMap<String, BTreeMap<String, BTreeMap<String, Rate>>>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| parse(SHIPPED))
}

/// The committed table's rows; a malformed line is skipped (the bundled table is tested whole).
fn parse(csv: &str) -> Table {
    let mut table = Table::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [agent, claim, _study, verdict, _count, replications, rate, low, high, ..] = f[..] else { continue };
        let (Ok(rate), Ok(low), Ok(high), Ok(replications)) =
            (rate.parse(), low.parse(), high.parse(), replications.parse())
        else {
            continue;
        };
        table
            .entry(claim.to_owned())
            .or_default()
            .entry(agent.to_owned())
            .or_default()
            .insert(verdict.to_owned(), Rate { rate, low, high, replications });
    }
    table
}

/// The committed rates of `claim` (a headline id), where the table has both shipped agents for it.
pub fn shipped_rates(claim: &str) -> Option<RuleRates> {
    let agents = table().get(claim)?;
    let (paper, null) = (agents.get(PAPER_AGENT)?, agents.get(NULL_AGENT)?);
    let false_verdict = if NULL_CLAIMS.contains(&claim) { Verdict::DoesNotReplicate } else { Verdict::Replicates };
    let planted = paper.get(Verdict::NotInRun.text()).is_none_or(|r| r.rate < 1.0);
    Some(RuleRates {
        claim: claim.to_owned(),
        power: paper.get(Verdict::Replicates.text()).copied(),
        false_verdict: (false_verdict, *null.get(false_verdict.text())?),
        planted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_headline_cites_its_committed_rates() {
        // A claim added without regenerating docs/calibration.csv (cargo xtask calibrate) fails here.
        for h in crate::claims::paper_headlines().unwrap() {
            let rates = shipped_rates(&h.id).unwrap_or_else(|| panic!("`{}` is not in docs/calibration.csv", h.id));
            let sentence = rates.sentence();
            assert!(sentence.starts_with("Calibrated on the paper's full design"), "{sentence}");
            assert!(sentence.contains("(a false verdict) in "), "{sentence}");
        }
    }

    #[test]
    fn rates_are_read_per_claim_and_agent() {
        let csv = "agent,claim,study,verdict,count,replications,rate,ci_low,ci_high,seconds\n\
            data/sim/paper-effects.toml,x,conformity,replicates,97,100,0.97,0.9148,0.9897,1\n\
            data/sim/paper-effects.toml,x,conformity,not in this run,0,100,0,0,0.037,1\n\
            data/sim/null.toml,x,conformity,replicates,3,100,0.03,0.0103,0.0846,1\n";
        let t = parse(csv);
        let paper = &t["x"][PAPER_AGENT];
        assert_eq!(paper["replicates"].text(), "0.97 [0.91, 0.99]");
        assert_eq!(t["x"][NULL_AGENT]["replicates"].replications, 100);
    }
}
