//! How often each headline verdict comes out on replications of one design with one simulated agent
//! (`herd calibrate`): the counts per claim and verdict, and each rate's 95% Wilson interval, the
//! Monte Carlo uncertainty of a rate estimated from R replications.

use std::collections::BTreeMap;

use crate::claims::{HeadlineComparison, Verdict};
use crate::summary::Z95;

mod shipped;
pub use shipped::{Agent, NULL_CLAIMS, RuleRates, shipped_rates};

/// Every verdict, in the order a calibration table shows them.
pub const VERDICTS: [Verdict; 5] = [
    Verdict::Replicates,
    Verdict::DoesNotReplicate,
    Verdict::Inconclusive,
    Verdict::NotPaperPopulation,
    Verdict::NotInRun,
];

/// One claim's verdicts over the replications.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimCounts {
    /// `conformity` or `minimal_group`.
    pub study: String,
    /// How many replications gave each verdict, in [`VERDICTS`] order.
    pub counts: [u32; 5],
}

impl ClaimCounts {
    pub fn replications(&self) -> u32 {
        self.counts.iter().sum()
    }

    /// How many replications gave `verdict`.
    pub fn count(&self, verdict: Verdict) -> u32 {
        VERDICTS.iter().position(|&v| v == verdict).map_or(0, |i| self.counts[i])
    }

    /// The share of replications that gave `verdict`, with its 95% Wilson interval.
    pub fn rate(&self, verdict: Verdict) -> (f64, (f64, f64)) {
        let (k, n) = (self.count(verdict), self.replications());
        (f64::from(k) / f64::from(n.max(1)), wilson_interval(k, n))
    }
}

/// The verdicts of every claim over the replications of one agent, by claim id in the catalogue's
/// order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    pub claims: Vec<(String, ClaimCounts)>,
}

impl Calibration {
    /// Adds one replication's verdicts.
    pub fn add(&mut self, comparisons: &[HeadlineComparison]) {
        for c in comparisons {
            let i = match self.claims.iter().position(|(id, _)| *id == c.headline.id) {
                Some(i) => i,
                None => {
                    let counts = ClaimCounts { study: c.headline.study.clone(), counts: [0; 5] };
                    self.claims.push((c.headline.id.clone(), counts));
                    self.claims.len() - 1
                }
            };
            let slot = VERDICTS.iter().position(|&v| v == c.verdict).expect("every verdict is listed");
            self.claims[i].1.counts[slot] += 1;
        }
    }

    /// Adds another calibration's counts (replications run apart, e.g. on other threads).
    pub fn merge(&mut self, other: Calibration) {
        for (id, counts) in other.claims {
            match self.claims.iter_mut().find(|(mine, _)| *mine == id) {
                Some((_, mine)) => mine.counts.iter_mut().zip(counts.counts).for_each(|(a, b)| *a += b),
                None => self.claims.push((id, counts)),
            }
        }
    }

    /// Claims ordered as `order` lists their ids (the catalogue's order); others after, by id.
    pub fn ordered_as(mut self, order: &[&str]) -> Self {
        let rank: BTreeMap<&str, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        self.claims.sort_by_key(|(id, _)| (rank.get(id.as_str()).copied().unwrap_or(usize::MAX), id.clone()));
        self
    }
}

/// The 95% Wilson score interval of a binomial proportion k/n (statsmodels' `proportion_confint(k, n,
/// method="wilson")`); (0, 1) for n = 0. It stays inside [0, 1] and is not degenerate at k = 0 or n,
/// where calibration rates often sit.
pub fn wilson_interval(k: u32, n: u32) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (f64::from(k), f64::from(n), Z95);
    let p = k / n;
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}
