//! The committed calibration of the papers' designs (`docs/calibration.csv`, written by `cargo xtask
//! calibrate`), bundled so that every headline rule can cite its measured error rates: how often it
//! reads "replicates" on an agent with the papers' effects (its power) and how often it gives the
//! false verdict on an agent with none.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::claims::Verdict;

static SHIPPED: &str = include_str!("../../../../docs/calibration.csv");

/// Where a rule's rates are read in the committed table: an agent file and the model id its answers were
/// stored under (`herd calibrate --agent FILE --model ID`), and what the agent is, for the sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    pub file: &'static str,
    pub model: &'static str,
    pub described: &'static str,
}

/// The shipped agent with the papers' effects: every rule's power, except where it cannot plant what the
/// rule needs.
const PAPERS: Agent =
    Agent { file: "data/sim/paper-effects.toml", model: "sim", described: "an agent with the papers' effects" };
/// The shipped agent with none: every rule's false-verdict rate.
const NONE: Agent = Agent { file: "data/sim/null.toml", model: "sim", described: "an agent with none" };
/// "Some models saturate around N ∼ 3–4": the papers' agent rises steadily like most of the paper's models.
const SATURATING: Agent = Agent {
    file: "data/sim/saturating-model.toml",
    model: "sim",
    described: "an agent whose conformity levels off after three wrong replies",
};
/// The paper's exception model by name: the claims about it are judged only on a model of that name.
const EXCEPTION_MODEL: &str = "deepseek-ai/DeepSeek-R1-Distill-Llama-8B";
const EXCEPTION: Agent = Agent {
    file: "data/sim/exception-model.toml",
    model: EXCEPTION_MODEL,
    described: "an agent with R1-Distill-Llama-8B's two exceptions, stored under that model's id",
};
const NONE_AS_EXCEPTION: Agent =
    Agent { file: "data/sim/null.toml", model: EXCEPTION_MODEL, described: "an agent with none, stored under that id" };

/// The agent whose "replicates" is a claim's power, and the agent without its effect.
fn agents(claim: &str) -> (Agent, Agent) {
    match claim {
        "majority_reversal" | "hidden_floor_paraphrase" => (EXCEPTION, NONE_AS_EXCEPTION),
        "saturation" => (SATURATING, NONE),
        _ => (PAPERS, NONE),
    }
}

/// The claims that the paper states as an absence (no effect, no difference, a floor): their false
/// verdict is "does not replicate" on an agent that has the absence; every other claim's is
/// "replicates" on an agent without the effect.
pub const NULL_CLAIMS: [&str; 13] = [
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
    "swap_pass_bound",
    "token_receipt_bound",
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
    /// Share of "replicates" on the agent that carries the claim's effect; `None` where that agent's
    /// replications never put the claim in the run (the sim cannot plant what it needs).
    pub power: Option<Rate>,
    /// The agent `power` was measured on.
    pub power_agent: Agent,
    /// The verdict that is false on the agent without the effect, and its share there.
    pub false_verdict: (Verdict, Rate),
    /// The agent the false verdict was counted on.
    pub false_agent: Agent,
    /// Whether the power agent had the claim in its run at all.
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
            (Some(p), true) => {
                format!("reads replicates in {} of runs of {}", p.text(), with_file(&self.power_agent))
            }
            _ => format!(
                "{} cannot plant what it needs, so its power is unmeasured",
                with_file(&self.power_agent).replacen("an agent", "the shipped agent", 1)
            ),
        };
        format!(
            "{design}: {power}; reads {} (a false verdict) in {} of runs of {}. For another design: herd calibrate \
             --experiment FILE.",
            verdict.text(),
            rate.text(),
            with_file(&self.false_agent)
        )
    }
}

/// "an agent with none", or with the file named where it is not one of the pair every rule uses.
fn with_file(agent: &Agent) -> String {
    if *agent == PAPERS || *agent == NONE {
        agent.described.to_owned()
    } else {
        format!("{} ({})", agent.described, agent.file)
    }
}

/// claim → (agent file, model) → verdict → rate
type Table = BTreeMap<String, BTreeMap<(String, String), BTreeMap<String, Rate>>>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| parse(SHIPPED))
}

/// The committed table's rows; a malformed line is skipped (the bundled table is tested whole). A
/// table written before the `model` column stored every agent's answers as `sim`.
fn parse(csv: &str) -> Table {
    let mut table = Table::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [agent, claim, _study, verdict, _count, replications, rate, low, high, ..] = f[..] else { continue };
        let model = f.get(10).copied().unwrap_or("sim");
        let (Ok(rate), Ok(low), Ok(high), Ok(replications)) =
            (rate.parse(), low.parse(), high.parse(), replications.parse())
        else {
            continue;
        };
        table
            .entry(claim.to_owned())
            .or_default()
            .entry((agent.to_owned(), model.to_owned()))
            .or_default()
            .insert(verdict.to_owned(), Rate { rate, low, high, replications });
    }
    table
}

/// The committed rates of `claim` (a headline id), where the table has both of its agents.
pub fn shipped_rates(claim: &str) -> Option<RuleRates> {
    let rows = table().get(claim)?;
    let (power_agent, false_agent) = agents(claim);
    let key = |a: &Agent| (a.file.to_owned(), a.model.to_owned());
    let (carrier, without) = (rows.get(&key(&power_agent))?, rows.get(&key(&false_agent))?);
    let false_verdict = if NULL_CLAIMS.contains(&claim) { Verdict::DoesNotReplicate } else { Verdict::Replicates };
    let planted = carrier.get(Verdict::NotInRun.text()).is_none_or(|r| r.rate < 1.0);
    Some(RuleRates {
        claim: claim.to_owned(),
        power: carrier.get(Verdict::Replicates.text()).copied(),
        power_agent,
        false_verdict: (false_verdict, *without.get(false_verdict.text())?),
        false_agent,
        planted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_headline_cites_its_committed_rates() {
        // A claim added without regenerating docs/calibration.csv (cargo xtask calibrate) fails here.
        let mut unmeasured = Vec::new();
        for h in crate::claims::paper_headlines().unwrap() {
            let rates = shipped_rates(&h.id).unwrap_or_else(|| panic!("`{}` is not in docs/calibration.csv", h.id));
            let sentence = rates.sentence();
            assert!(sentence.starts_with("Calibrated on the paper's full design"), "{sentence}");
            assert!(sentence.contains("(a false verdict) in "), "{sentence}");
            if !rates.planted {
                unmeasured.push(h.id.clone());
            }
        }
        // Every claim's power is measured: the claims about one model or some models on agents of their
        // own, the bootstrap's agreement on a calibration with the GEE bootstrap.
        assert!(unmeasured.is_empty(), "no power figure for {unmeasured:?}");
        for claim in ["majority_reversal", "hidden_floor_paraphrase", "saturation"] {
            let sentence = shipped_rates(claim).unwrap().sentence();
            assert!(sentence.contains("reads replicates in ") && sentence.contains("data/sim/"), "{sentence}");
        }
    }

    #[test]
    fn the_committed_rules_pass_their_calibration() {
        // Issue 40's bar on the papers' designs: a claim reads "replicates" in at least 90% of the runs of
        // the agent that carries it, and gives its false verdict in at most 5% of the runs of the agent
        // without it. A claim of no difference left out of NULL_CLAIMS fails here: the null agent
        // "replicates" it in every run, which the report would cite as a false verdict.
        for h in crate::claims::paper_headlines().unwrap() {
            let rates = shipped_rates(&h.id).unwrap();
            let power = rates.power.unwrap_or_else(|| panic!("{}: no power", h.id));
            assert!(power.rate >= 0.9, "{}: power {}", h.id, power.text());
            let (verdict, rate) = rates.false_verdict;
            assert!(
                rate.rate <= 0.05,
                "{}: reads {} under {} in {}",
                h.id,
                verdict.text(),
                rates.false_agent.file,
                rate.text()
            );
        }
    }

    #[test]
    fn rates_are_read_per_claim_agent_and_model() {
        let csv = "agent,claim,study,verdict,count,replications,rate,ci_low,ci_high,seconds,model\n\
            data/sim/paper-effects.toml,x,conformity,replicates,97,100,0.97,0.9148,0.9897,1,sim\n\
            data/sim/paper-effects.toml,x,conformity,not in this run,0,100,0,0,0.037,1,sim\n\
            data/sim/null.toml,x,conformity,replicates,3,100,0.03,0.0103,0.0846,1,sim\n\
            data/sim/null.toml,x,conformity,replicates,9,100,0.09,0.0481,0.1620,1,deepseek-ai/DeepSeek-R1-Distill-Llama-8B\n";
        let t = parse(csv);
        let paper = &t["x"][&(PAPERS.file.to_owned(), "sim".to_owned())];
        assert_eq!(paper["replicates"].text(), "0.97 [0.91, 0.99]");
        let none = |model: &str| t["x"][&(NONE.file.to_owned(), model.to_owned())]["replicates"].rate;
        assert_eq!((none("sim"), none(EXCEPTION_MODEL)), (0.03, 0.09));
        // A table from before the model column: every agent stored as `sim`.
        let old = parse("h\ndata/sim/null.toml,x,conformity,replicates,3,100,0.03,0.0103,0.0846,1\n");
        assert_eq!(old["x"][&(NONE.file.to_owned(), "sim".to_owned())]["replicates"].replications, 100);
    }
}
