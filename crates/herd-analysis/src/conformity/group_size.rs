//! The test of "p_wrong rises with N" (the group-size family) that the report's headline and `herd power` share.

use std::collections::BTreeMap;

use herd_stats::{Alternative, StatsError, WilcoxonOptions, WilcoxonResult, wilcoxon_one_sample};

use super::{ConformityTable, PWrong, mean};

/// The test of "p_wrong rises with N" (the group-size family, the paper's fig. 2a), as the report's
/// headline and `herd power` both run it. The paper gives curves and no test; herd pairs, per model and
/// task, trial index k at the smallest N with trial index k at the largest N (images are drawn per N,
/// so the pairs are independent and their differences estimate the rise) and tests the differences,
/// pooled over the model's tasks, with a two-sided Wilcoxon signed-rank test.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSizeRise {
    pub model: String,
    /// The smallest and largest N of the model's tasks.
    pub n_low: u32,
    pub n_high: u32,
    /// Mean p_wrong of the paired trials at the smallest and at the largest N.
    pub mean_low: f64,
    pub mean_high: f64,
    /// `task#trial` → p_wrong at the largest N − p_wrong at the smallest.
    pub differences: BTreeMap<String, f64>,
}

impl GroupSizeRise {
    /// The test's alternative: a rise and a fall are both findings.
    pub const ALTERNATIVE: Alternative = Alternative::TwoSided;

    /// The Wilcoxon signed-rank test of the differences (scipy's defaults, two-sided).
    pub fn wilcoxon(&self) -> Result<WilcoxonResult, StatsError> {
        let differences: Vec<f64> = self.differences.values().copied().collect();
        wilcoxon_one_sample(&differences, &WilcoxonOptions { alternative: Self::ALTERNATIVE, ..Default::default() })
    }
}

/// Each model's [`GroupSizeRise`] under `measure`, in model order; a model none of whose tasks ran
/// two values of N has none.
pub fn group_size_rises(table: &ConformityTable, measure: PWrong) -> Vec<GroupSizeRise> {
    // model → task → N → trial index → p_wrong values
    type Curve = BTreeMap<u32, BTreeMap<i64, Vec<f64>>>;
    let mut curves: BTreeMap<&str, BTreeMap<&str, Curve>> = BTreeMap::new();
    for t in table.rows.iter().filter(|t| t.family == "group_size") {
        let Some(p) = t.p_wrong(measure) else { continue };
        let by_n = curves.entry(&t.model).or_default().entry(&t.task).or_default();
        by_n.entry(t.n).or_default().entry(t.seed).or_default().push(p);
    }
    let mut out = Vec::new();
    for (model, tasks) in curves {
        let (mut differences, mut low, mut high, mut ns) = (BTreeMap::new(), Vec::new(), Vec::new(), Vec::new());
        for (task, by_n) in tasks {
            let (Some((&n0, first)), Some((&n1, last))) = (by_n.first_key_value(), by_n.last_key_value()) else {
                continue;
            };
            if n0 == n1 {
                continue;
            }
            ns.extend([n0, n1]);
            for (seed, values) in last {
                if let Some(base) = first.get(seed) {
                    differences.insert(format!("{task}#{seed}"), mean(values) - mean(base));
                    low.push(mean(base));
                    high.push(mean(values));
                }
            }
        }
        let (Some(&n_low), Some(&n_high)) = (ns.iter().min(), ns.iter().max()) else { continue };
        out.push(GroupSizeRise {
            model: model.to_owned(),
            n_low,
            n_high,
            mean_low: mean(&low),
            mean_high: mean(&high),
            differences,
        });
    }
    out
}
