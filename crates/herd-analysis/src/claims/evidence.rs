//! What a headline verdict rests on (a test, its n, its p and interval) and the rules that turn it
//! into one of three verdicts. A verdict never rests on an undefined statistic, and a test that
//! cannot reach significance at its n (an exact test on too few units) decides nothing.

use crate::undefined_reason;
use herd_stats::{Alternative, WilcoxonOptions, ttest_welch, wilcoxon_one_sample};

use super::Verdict;
use crate::format::{num, p_is, p_value, signed};
use crate::summary::Z95;
pub(crate) use crate::summary::t_quantile;

/// Significance level of every headline test.
pub(crate) const ALPHA: f64 = 0.05;

/// One test's outcome on one row of a headline (a model, a cell, a contrast).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Evidence {
    /// The test, e.g. `Wilcoxon signed-rank`.
    pub test: String,
    pub n: usize,
    /// What `n` counts: `seeds`, `paraphrases`, `difficulty levels`, `images`, `societies`.
    pub unit: &'static str,
    pub estimate: Option<f64>,
    pub p: Option<f64>,
    /// The smallest p the test can give at this n (exact rank tests), where it matters.
    pub min_p: Option<f64>,
    /// Whether `min_p` is the floor of the test that gave `p` (true unless set otherwise), so that a
    /// smaller `p` (a large-sample approximation's) is printed as `p ≤ min_p`. False where `min_p`
    /// only gates a test of another kind (a t-test on as few units as a rank test could not decide on).
    pub min_p_is_floor: bool,
    /// Units with a nonzero difference, where a rank test drops the others.
    pub nonzero: Option<usize>,
    pub interval: Option<(f64, f64)>,
    /// E.g. `95% t-interval`.
    pub interval_name: &'static str,
    /// Why the test's statistic is undefined on this input (herd-analysis's `note`: `every value
    /// equal`, `too few units`), where it is.
    pub note: Option<String>,
    /// The degrees of freedom of the t distribution behind `interval`, where they are not `n` − 1
    /// (Welch's, a regression's residual ones).
    pub df: Option<f64>,
    /// Whether the estimate is a size that cannot be negative (an SD, a share): written without the
    /// `+` of a difference.
    pub magnitude: bool,
}

impl Evidence {
    pub fn new(test: impl Into<String>, n: usize, unit: &'static str) -> Self {
        Self {
            test: test.into(),
            n,
            unit,
            estimate: None,
            p: None,
            min_p: None,
            min_p_is_floor: true,
            nonzero: None,
            interval: None,
            interval_name: "",
            note: None,
            df: None,
            magnitude: false,
        }
    }

    /// Records why the statistic is undefined (`note`), where `note` says.
    pub fn with_note(mut self, note: Option<&str>) -> Self {
        if let Some(note) = note {
            self.note = Some(note.to_owned());
        }
        self
    }

    /// `Wilcoxon signed-rank, 8 seeds, p = 0.012, 95% t-interval [0.010, 0.050]`.
    pub fn describe(&self) -> String {
        let mut text = format!("{}, {} {}", self.test, self.n, self.unit_text());
        if self.p.is_some() {
            text.push_str(&format!(", {}", self.p_text()));
        }
        if let Some(interval) = self.interval_text() {
            text.push_str(&format!(", {interval}"));
        }
        text
    }

    /// The p as a referee may read it: `p = 0.012`; `p < 1e-16` for a p of exactly 0; and a p below
    /// the smallest the test attains at this n (`min_p`: the exact distribution's most extreme
    /// outcome, e.g. 2/n! for Spearman on n points, 2/2ⁿ for a signed-rank test on n nonzero
    /// differences) as `p ≤` that floor. Such a p comes from a large-sample approximation (the
    /// t approximation of a Spearman table, the normal approximation of a signed-rank test with
    /// ties), whose digits below the floor an exact test on the same n could never give: the
    /// approximation's p is at most the floor, which is all it can say.
    pub(crate) fn p_text(&self) -> String {
        match (self.p, self.min_p) {
            (Some(p), Some(floor)) if self.min_p_is_floor && p.is_finite() && p < floor => {
                format!("p ≤ {} (the smallest an exact test attains at this n)", p_value(floor))
            }
            (Some(p), _) => p_is(p),
            (None, _) => "p = n/a".into(),
        }
    }

    /// The interval as evidence: `95% t-interval [0.010, 0.050]`. An interval whose bounds print
    /// alike has no width to show (units that all read the same: a deterministic or saturated
    /// model): `no variation: every seed 0.000`, never `[0.000, 0.000]`.
    pub(crate) fn interval_text(&self) -> Option<String> {
        let (lo, hi) = self.interval?;
        Some(if zero_width(lo, hi) {
            format!("no variation: every {} {}", singular(self.unit), num(lo))
        } else {
            format!("{} [{}, {}]", self.interval_name, num(lo), num(hi))
        })
    }

    /// The interval as the subject of a sentence: `the 95% t-interval [0.010, 0.050]`, or `every
    /// seed at 0.000 (no variation)`.
    fn interval_phrase(&self) -> String {
        match self.interval {
            Some((lo, hi)) if zero_width(lo, hi) => {
                format!("every {} at {} (no variation)", singular(self.unit), num(lo))
            }
            Some((lo, hi)) => format!("the {} [{}, {}]", self.interval_name, num(lo), num(hi)),
            None => "no interval".into(),
        }
    }

    /// The unit, singular for n = 1.
    fn unit_text(&self) -> &'static str {
        if self.n == 1 { singular(self.unit) } else { self.unit }
    }

    fn undefined(&self) -> Option<String> {
        self.undefined_detail().map(|why| match &self.note {
            Some(note) => format!("{note} ({why})"),
            None => why,
        })
    }

    fn undefined_detail(&self) -> Option<String> {
        let finite = |v: Option<f64>| v.is_some_and(f64::is_finite);
        let interval_ok = self.interval.is_none_or(|(lo, hi)| lo.is_finite() && hi.is_finite());
        if !finite(self.estimate) {
            Some("the estimate is undefined".into())
        } else if !finite(self.p) && self.nonzero == Some(0) {
            Some(format!("no {} differs from zero: the signed-rank test is undefined", singular(self.unit)))
        } else if !finite(self.p) {
            Some("the p-value is undefined".into())
        } else if !interval_ok {
            Some("the interval is undefined".into())
        } else {
            None
        }
    }

    /// Why the test cannot decide at this n, if it cannot reach `alpha`.
    pub(crate) fn too_few(&self, alpha: f64) -> Option<String> {
        self.min_p.filter(|&m| m >= alpha).map(|m| {
            let nonzero = match self.nonzero {
                Some(k) if k < self.n => format!(" ({k} with a nonzero difference)"),
                _ => String::new(),
            };
            format!(
                "with {} {}{nonzero} the smallest attainable p is {} ≥ {alpha}: the test cannot decide",
                self.n,
                self.unit_text(),
                p_value(m)
            )
        })
    }
}

/// Whether an interval's bounds print alike (the same [`num`] spelling): no width to show.
pub(crate) fn zero_width(lo: f64, hi: f64) -> bool {
    lo.is_finite() && hi.is_finite() && num(lo) == num(hi)
}

/// One of a unit: `seed` for `seeds`.
pub(crate) fn singular(unit: &'static str) -> &'static str {
    match unit {
        "seeds" => "seed",
        "trial indices" => "trial index",
        "trial pairs" => "trial pair",
        "paraphrases" => "paraphrase",
        "difficulty levels" => "difficulty level",
        "fig. 3b hexagons" => "fig. 3b hexagon",
        "societies per mode" => "society per mode",
        "societies" => "society",
        other => other,
    }
}

/// What the paper claims for a quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Claim {
    /// An effect of this sign (+1 or −1); `effect` is the smallest size the paper reports, `None`
    /// where it gives none (then only an interval on the wrong side of zero rules the paper out).
    Effect { sign: f64, effect: Option<f64> },
    /// Not above zero (one-sided; e.g. a share not above 50%, whose group-blind reading is the
    /// expected one): the evidence's test is one-sided towards "above" and its interval the 90%
    /// two-sided one, whose upper bound is the one-sided 95% bound. Significantly above zero fails
    /// it; an upper bound below `margin` (the effect the paper contrasts it with) confirms it.
    /// `zero` names the estimate's zero in the reasons (`50%` for a share − 0.5).
    NotAbove { margin: f64, zero: &'static str },
    /// Equivalent to zero within ±`margin` (an equivalence judgement, the papers' "no significant
    /// difference", "nearly identical", "comparable", "closed"): two one-sided t-tests at 5%, i.e. the
    /// 90% t-interval (from the evidence's 95% t-interval, on its `df` or `n` − 1) within ±`margin`,
    /// confirm it; a 95% interval wholly beyond ±`margin` (an effect demonstrably larger) refutes it. A
    /// significant effect inside the margin still confirms it: the claim is "no effect as large as the
    /// margin", and the row prints its p beside.
    Within { margin: f64 },
}

impl Claim {
    pub fn positive(effect: Option<f64>) -> Self {
        Self::Effect { sign: 1.0, effect }
    }

    pub fn negative(effect: Option<f64>) -> Self {
        Self::Effect { sign: -1.0, effect }
    }
}

/// A row of a headline: what it is, this run's number, what it rests on and its verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub label: String,
    pub value: String,
    pub evidence: Evidence,
    pub verdict: Verdict,
    pub reason: String,
    /// The conformity (model, task) pairs whose trials the row rests on, which the paper's
    /// population gate reads (`population::mark`); empty for minimal-group rows.
    pub members: Vec<(String, String)>,
    /// The claim the row was judged under, where one rule judged it ([`Row::judged`]).
    pub claim: Option<Claim>,
}

impl Row {
    pub fn judged(label: impl Into<String>, value: impl Into<String>, evidence: Evidence, claim: Claim) -> Self {
        let (verdict, reason) = judge(&evidence, claim);
        Self {
            label: label.into(),
            value: value.into(),
            evidence,
            verdict,
            reason,
            members: Vec::new(),
            claim: Some(claim),
        }
    }

    /// The row resting on the trials of `members` (model, task).
    pub fn on(mut self, members: Vec<(String, String)>) -> Self {
        self.members = members;
        self
    }

    pub fn describe(&self) -> String {
        let value = if self.value.is_empty() { String::new() } else { format!("{}; ", self.value) };
        format!("{}: {value}{} [{}]", self.label, self.evidence.describe(), self.verdict.text())
    }
}

/// The verdict of one row under `claim`, and why.
///
/// An effect replicates when p < 0.05 in the paper's direction and the interval (if any) excludes
/// zero on that side. It does not replicate when it is significant the other way or the interval's
/// bound towards the paper's effect falls short of the paper's smallest effect (of zero where the
/// paper gives no size). Anything else is inconclusive: an undefined statistic, a test that cannot
/// reach p < 0.05 at this n, or an interval that holds both zero and the paper's effect.
pub(crate) fn judge(e: &Evidence, claim: Claim) -> (Verdict, String) {
    if let Some(why) = e.undefined() {
        return (Verdict::Inconclusive, why);
    }
    let (estimate, p) = (e.estimate.unwrap_or(f64::NAN), e.p.unwrap_or(f64::NAN));
    match claim {
        Claim::Effect { sign, effect } => {
            if let Some(why) = e.too_few(ALPHA) {
                return (Verdict::Inconclusive, why);
            }
            let excludes_zero = e.interval.is_none_or(|(lo, hi)| if sign > 0.0 { lo > 0.0 } else { hi < 0.0 });
            let toward = e.interval.map(|(lo, hi)| if sign > 0.0 { hi } else { lo });
            let paper = effect.unwrap_or(0.0).abs();
            let short = toward.is_some_and(|b| sign * b < paper);
            if p < ALPHA && sign * estimate > 0.0 && excludes_zero {
                let smaller = match (effect, toward) {
                    (Some(size), Some(b)) if sign * b < size.abs() => {
                        format!("; smaller than the paper's {}", signed(sign * size.abs()))
                    }
                    _ => String::new(),
                };
                return (Verdict::Replicates, format!("p < {ALPHA} in the paper's direction{smaller}"));
            }
            if p < ALPHA && sign * estimate < 0.0 {
                return (Verdict::DoesNotReplicate, format!("significant in the opposite direction ({})", e.p_text()));
            }
            if short {
                let what = match effect {
                    Some(size) => format!("the paper's effect ({})", signed(sign * size.abs())),
                    None => "every effect in the paper's direction".into(),
                };
                return (Verdict::DoesNotReplicate, format!("{} excludes {what}", e.interval_phrase()));
            }
            let why = match e.interval {
                Some(_) => format!("{}; {} holds both zero and the paper's effect", e.p_text(), e.interval_phrase()),
                None => {
                    format!("{} ≥ {ALPHA}, and no interval says whether the paper's effect is ruled out", e.p_text())
                }
            };
            (Verdict::Inconclusive, why)
        }
        Claim::NotAbove { margin, zero } => {
            if p < ALPHA && estimate > 0.0 {
                return (Verdict::DoesNotReplicate, format!("significantly above {zero} (one-sided {})", e.p_text()));
            }
            match e.interval {
                Some((_, hi)) if hi < margin => (
                    Verdict::Replicates,
                    format!(
                        "not significantly above {zero} (one-sided {}), and {} stays below {zero} + {}",
                        e.p_text(),
                        e.interval_phrase(),
                        num(margin)
                    ),
                ),
                Some(_) => (
                    Verdict::Inconclusive,
                    format!(
                        "not significantly above {zero} (one-sided {}), but {} still reaches {zero} + {}",
                        e.p_text(),
                        e.interval_phrase(),
                        num(margin)
                    ),
                ),
                None => (Verdict::Inconclusive, "no interval says whether the paper's contrast is ruled out".into()),
            }
        }
        Claim::Within { margin } => {
            let Some((lo, hi)) = e.interval else {
                return (Verdict::Inconclusive, "no interval says whether an effect of the margin is ruled out".into());
            };
            if lo > margin || hi < -margin {
                return (
                    Verdict::DoesNotReplicate,
                    format!("{} lies beyond ±{}: an effect larger than the margin", e.interval_phrase(), num(margin)),
                );
            }
            let df = e.df.unwrap_or(e.n as f64 - 1.0);
            let name = e.interval_name.replacen("95%", "90%", 1);
            let Some((lo90, hi90)) = narrower_interval(estimate, (lo, hi), df) else {
                return (Verdict::Inconclusive, format!("with {} {} there is no {name}", e.n, e.unit_text()));
            };
            if lo90 > -margin && hi90 < margin {
                (
                    Verdict::Replicates,
                    format!(
                        "the {name} [{}, {}] lies within ±{} (two one-sided t-tests at 5%)",
                        num(lo90),
                        num(hi90),
                        num(margin)
                    ),
                )
            } else {
                (
                    Verdict::Inconclusive,
                    format!("the {name} [{}, {}] still reaches ±{}", num(lo90), num(hi90), num(margin)),
                )
            }
        }
    }
}

/// The 90% t-interval from a 95% t-interval on `df` degrees of freedom.
fn narrower_interval(estimate: f64, (lo, hi): (f64, f64), df: f64) -> Option<(f64, f64)> {
    if df.is_nan() || df < 1.0 {
        return None;
    }
    let half = (hi - lo) / 2.0 * t_quantile(0.95, df) / t_quantile(0.975, df);
    Some((estimate - half, estimate + half))
}

/// How a headline's rows combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Every row must replicate: one that does not decides; else one inconclusive row decides.
    All,
    /// More than half of the rows must replicate; inconclusive rows could still make it.
    Most,
    /// One row replicating is enough (a model-specific finding, e.g. the paper's paraphrase floor
    /// violation in one of four models); it does not replicate when every row does not.
    Any,
}

/// The headline's verdict from its rows, and the rows or count it rests on.
pub(crate) fn combine(rows: &[Row], how: Combine) -> (Verdict, String) {
    // Rows outside the paper's population say nothing about its claim, nor do rows that are not its
    // subject (a model-specific finding's other models): the rest decide, and with none left the
    // headline takes their verdict.
    for (aside, prefix) in [(Verdict::NotPaperPopulation, "outside the paper's population: "), (Verdict::NotInRun, "")]
    {
        let set_aside: Vec<&Row> = rows.iter().filter(|r| r.verdict == aside).collect();
        if set_aside.is_empty() {
            continue;
        }
        let note = set_aside.iter().map(|r| format!("{}: {}", r.label, r.reason)).collect::<Vec<_>>().join("; ");
        let rest: Vec<Row> = rows.iter().filter(|r| r.verdict != aside).cloned().collect();
        if rest.is_empty() {
            return (aside, note);
        }
        let (verdict, basis) = combine(&rest, how);
        return (verdict, format!("{basis}; {prefix}{note}"));
    }
    let with = |v: Verdict| rows.iter().filter(|r| r.verdict == v).collect::<Vec<_>>();
    let (replicate, inconclusive, fail) =
        (with(Verdict::Replicates), with(Verdict::Inconclusive), with(Verdict::DoesNotReplicate));
    let list = |rs: &[&Row]| {
        let mut parts: Vec<String> = rs.iter().take(3).map(|r| format!("{}: {}", r.label, r.reason)).collect();
        if rs.len() > 3 {
            parts.push(format!("and {} more", rs.len() - 3));
        }
        parts.join("; ")
    };
    let tests = || {
        let mut seen: Vec<String> = Vec::new();
        for r in rows {
            let (lo, hi) = rows
                .iter()
                .filter(|o| o.evidence.test == r.evidence.test)
                .fold((usize::MAX, 0), |(lo, hi), o| (lo.min(o.evidence.n), hi.max(o.evidence.n)));
            let n = if lo == hi { lo.to_string() } else { format!("{lo}–{hi}") };
            let t = format!("{}, {n} {}", r.evidence.test, r.evidence.unit);
            if !seen.contains(&t) {
                seen.push(t);
            }
        }
        seen.join("; ")
    };
    match how {
        Combine::All => {
            if !fail.is_empty() {
                (Verdict::DoesNotReplicate, list(&fail))
            } else if !inconclusive.is_empty() {
                (Verdict::Inconclusive, list(&inconclusive))
            } else {
                let all = if rows.len() == 1 {
                    "the row replicates".to_owned()
                } else {
                    format!("all {} rows replicate", rows.len())
                };
                (Verdict::Replicates, format!("{all} ({})", tests()))
            }
        }
        Combine::Any => {
            if !replicate.is_empty() {
                (Verdict::Replicates, list(&replicate))
            } else if !inconclusive.is_empty() {
                (Verdict::Inconclusive, list(&inconclusive))
            } else {
                (Verdict::DoesNotReplicate, list(&fail))
            }
        }
        Combine::Most => {
            let k = rows.len();
            let counts = format!(
                "{} of {k} rows replicate, {} inconclusive, {} do not ({})",
                replicate.len(),
                inconclusive.len(),
                fail.len(),
                tests()
            );
            if 2 * replicate.len() > k {
                (Verdict::Replicates, counts)
            } else if 2 * (replicate.len() + inconclusive.len()) > k {
                (Verdict::Inconclusive, format!("{counts}; {}", list(&inconclusive)))
            } else {
                (Verdict::DoesNotReplicate, counts)
            }
        }
    }
}

/// The smallest two-sided p of an exact signed-rank test on `n` nonzero differences: every sign
/// alike, 2 / 2ⁿ (one-sided: 1 / 2ⁿ). Fewer than 6 seeds can never give p < 0.05 two-sided.
pub(crate) fn wilcoxon_min_p(n: usize, two_sided: bool) -> f64 {
    let tails = if two_sided { 2.0 } else { 1.0 };
    (tails * 0.5_f64.powi(n.min(1074) as i32)).min(1.0)
}

/// The smallest two-sided p of an exact Spearman test on `n` points: the permutation distribution of
/// ρ over the n! orderings of one variable (scipy's `spearmanr(..., method=PermutationMethod())`
/// when it enumerates them all) puts 1/n! on ρ = 1, and its two-sided p doubles the smaller tail
/// (capped at 1), so no ordering gives less than 2/n!. The `difficulty_spearman` table's p is
/// scipy's default t approximation (n − 2 df), which goes far below this near |ρ| = 1.
pub(crate) fn spearman_min_p(n: usize) -> f64 {
    let factorial: f64 = (1..=n).map(|k| k as f64).product();
    (2.0 / factorial).min(1.0)
}

/// Mean and two-sided t-interval of `values` at `level`; `None` for fewer than two values.
pub(crate) fn t_interval(values: &[f64], level: f64) -> Option<(f64, (f64, f64))> {
    let n = values.len();
    if n < 2 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile(0.5 + level / 2.0, (n - 1) as f64) * (var / n as f64).sqrt();
    Some((mean, (mean - half, mean + half)))
}

/// Seed-level evidence for unit differences: the Wilcoxon signed-rank test (`alternative` as the
/// paper tests) with its exact smallest p, and the t-interval of the mean difference (95%, or 90%
/// for a one-sided test, whose lower bound is then the one-sided 95% bound).
pub(crate) fn wilcoxon_evidence(differences: &[f64], alternative: Alternative, unit: &'static str) -> Evidence {
    let two_sided = alternative == Alternative::TwoSided;
    let test = if two_sided { "Wilcoxon signed-rank" } else { "Wilcoxon signed-rank (one-sided)" };
    let mut e = Evidence::new(test, differences.len(), unit);
    let options = WilcoxonOptions { alternative, ..Default::default() };
    match wilcoxon_one_sample(differences, &options) {
        Ok(w) => {
            e.p = Some(w.p_value);
            e.min_p = Some(wilcoxon_min_p(w.n - w.n_zero, two_sided));
            e.nonzero = Some(w.n - w.n_zero);
        }
        Err(error) => {
            // All differences zero or too few: the exact distribution has no mass below 1.
            e.min_p = Some(1.0);
            e.nonzero = Some(differences.iter().filter(|d| !herd_stats::approx_equal(**d, 0.0)).count());
            e = e.with_note(undefined_reason(&error));
        }
    }
    let level = if two_sided { 0.95 } else { 0.90 };
    if let Some((mean, interval)) = t_interval(differences, level) {
        e.estimate = Some(mean);
        e.interval = Some(interval);
    } else if !differences.is_empty() {
        e.estimate = Some(differences.iter().sum::<f64>() / differences.len() as f64);
    }
    e.interval_name = if two_sided { "95% t-interval" } else { "90% t-interval" };
    e
}

/// Evidence that mean(a) − mean(b) differs from zero, for two samples drawn apart: Welch's t test
/// (two-sided) and its 95% interval on the Welch–Satterthwaite df. Fewer than two units on a side,
/// or no variance in either, leave the p undefined (inconclusive).
pub(crate) fn welch_evidence(a: &[f64], b: &[f64], unit: &'static str) -> Evidence {
    let mut e = Evidence::new(format!("Welch t ({} vs {})", a.len(), b.len()), a.len() + b.len(), unit);
    e.interval_name = "95% Welch t-interval";
    // Both samples constant (to the tie tolerance of herd-stats' ranks: a deterministic or saturated
    // model's trial indices differ only by summation order): Welch's t is undefined, however small the
    // rounding noise that gives it a variance.
    let constant = |v: &[f64]| v.iter().all(|x| herd_stats::approx_equal(*x, v[0]));
    let tested = if a.len() >= 2 && b.len() >= 2 && constant(a) && constant(b) {
        Err(herd_stats::StatsError::ConstantInput { what: "both samples" })
    } else {
        ttest_welch(a, b, Alternative::TwoSided)
    };
    match tested {
        Ok(w) => {
            e.test = format!("Welch t ({} vs {}, df {:.1})", a.len(), b.len(), w.df);
            e.estimate = Some(w.mean_difference);
            e.p = Some(w.p_value);
            e.interval = Some(w.confidence_interval(0.95));
            e.df = Some(w.df);
        }
        Err(error) => {
            if !a.is_empty() && !b.is_empty() {
                let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
                e.estimate = Some(mean(a) - mean(b));
            }
            e = e.with_note(undefined_reason(&error));
        }
    }
    e
}

/// Fisher-z interval of a Spearman ρ on `n` points (SE √(1.06 / (n − 3)), Fieller, Hartley and
/// Pearson 1957); `None` for n ≤ 3, and where |ρ| is at 1 (the levels in perfect order): z = atanh ρ
/// is infinite there and the interval collapses to the point ±1, which is no interval ([`zero_width`]).
pub(crate) fn spearman_interval(rho: f64, n: usize) -> Option<(f64, f64)> {
    if n <= 3 || !rho.is_finite() {
        return None;
    }
    let z = rho.clamp(-1.0, 1.0).atanh();
    let half = Z95 * (1.06 / (n as f64 - 3.0)).sqrt();
    let (lo, hi) = ((z - half).tanh(), (z + half).tanh());
    (!zero_width(lo, hi)).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_equivalence_needs_its_90_percent_interval_within_the_margin() {
        let within = |estimate: f64, interval: (f64, f64), n: usize| {
            let mut e = Evidence::new("mean over societies", n, "societies");
            e.estimate = Some(estimate);
            e.p = Some(0.5);
            e.interval = Some(interval);
            e.interval_name = "95% t-interval";
            judge(&e, Claim::Within { margin: 0.21 })
        };
        // 95% [-0.1, 0.1] on 30 units: the 90% interval is narrower by t(0.95, 29)/t(0.975, 29).
        let (v, why) = within(0.0, (-0.1, 0.1), 30);
        assert_eq!(v, Verdict::Replicates, "{why}");
        // scipy: t.ppf(0.95, 29) / t.ppf(0.975, 29) · 0.1 = 1.6991270265334972 / 2.045229642132703 · 0.1
        assert!(why.contains("[-0.083, 0.083] lies within ±0.210"), "{why}");
        // A 95% bound past the margin with the 90% one inside still passes (TOST at 5%).
        assert_eq!(within(0.0, (-0.22, 0.22), 30).0, Verdict::Replicates);
        // Reaching the margin: undecided; wholly beyond it: refuted, whatever the sign.
        assert_eq!(within(0.2, (0.1, 0.3), 30).0, Verdict::Inconclusive);
        assert_eq!(within(0.5, (0.3, 0.7), 30).0, Verdict::DoesNotReplicate);
        assert_eq!(within(-0.5, (-0.7, -0.3), 30).0, Verdict::DoesNotReplicate);
        // One unit has no interval to judge.
        assert_eq!(within(0.0, (0.0, 0.0), 1).0, Verdict::Inconclusive);
    }

    fn evidence(estimate: f64, p: f64, interval: (f64, f64), min_p: f64) -> Evidence {
        Evidence {
            estimate: Some(estimate),
            p: Some(p),
            interval: Some(interval),
            min_p: Some(min_p),
            interval_name: "95% t-interval",
            ..Evidence::new("Wilcoxon signed-rank", 8, "seeds")
        }
    }

    #[test]
    fn exact_minimum_p_values() {
        // Five seeds cannot reach 0.05 two-sided; six can.
        assert_eq!(wilcoxon_min_p(5, true), 0.0625);
        assert_eq!(wilcoxon_min_p(6, true), 0.03125);
        assert_eq!(wilcoxon_min_p(5, false), 0.03125);
        assert_eq!(wilcoxon_min_p(0, true), 1.0);
        assert!((spearman_min_p(4) - 2.0 / 24.0).abs() < 1e-15);
        assert!((spearman_min_p(10) - 2.0 / 3_628_800.0).abs() < 1e-18);
    }

    #[test]
    fn t_quantiles_match_tables() {
        assert!((t_quantile(0.975, 1.0) - 12.706_204_736).abs() < 1e-6);
        assert!((t_quantile(0.975, 7.0) - 2.364_624_252).abs() < 1e-6);
        assert!((t_quantile(0.95, 3.0) - 2.353_363_435).abs() < 1e-6);
        let (mean, (lo, hi)) = t_interval(&[1.0, 2.0, 3.0], 0.95).unwrap();
        assert_eq!(mean, 2.0);
        assert!((hi - 2.0 - 4.302_652_730 / 3.0_f64.sqrt()).abs() < 1e-6 && (lo + hi - 4.0).abs() < 1e-9);
    }

    #[test]
    fn effect_verdicts() {
        let paper = Claim::positive(Some(0.5));
        // Significant, interval above zero: replicates (and says when it is smaller than the paper's).
        assert_eq!(judge(&evidence(0.3, 0.01, (0.1, 0.45), 0.008), paper).0, Verdict::Replicates);
        assert!(judge(&evidence(0.3, 0.01, (0.1, 0.45), 0.008), paper).1.contains("smaller than the paper's +0.500"));
        // Interval holds zero and the paper's 0.5: inconclusive.
        let (v, why) = judge(&evidence(0.2, 0.2, (-0.1, 0.6), 0.008), paper);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("both zero and the paper's effect"), "{why}");
        // Interval holds zero but stops short of 0.5: does not replicate.
        assert_eq!(judge(&evidence(0.01, 0.4, (-0.02, 0.04), 0.008), paper).0, Verdict::DoesNotReplicate);
        // Significant the other way.
        assert_eq!(judge(&evidence(-0.3, 0.01, (-0.5, -0.1), 0.008), paper).0, Verdict::DoesNotReplicate);
        // A tiny, significant-looking change on five seeds cannot decide.
        let (v, why) = judge(&evidence(-0.001, 0.0625, (-0.002, -0.0005), 0.0625), Claim::negative(None));
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("smallest attainable p is 0.062"), "{why}");
        // NaN never decides.
        let mut e = evidence(0.3, 0.01, (0.1, 0.45), 0.008);
        e.p = Some(f64::NAN);
        assert_eq!(judge(&e, paper), (Verdict::Inconclusive, "the p-value is undefined".into()));
        e.p = None;
        assert_eq!(judge(&e, paper).0, Verdict::Inconclusive);
        // Without a paper size, only an interval on the wrong side of zero rules the paper out.
        assert_eq!(judge(&evidence(0.01, 0.4, (-0.02, 0.04), 0.008), Claim::positive(None)).0, Verdict::Inconclusive);
        assert_eq!(
            judge(&evidence(-0.03, 0.06, (-0.05, -0.01), 0.008), Claim::positive(None)).0,
            Verdict::DoesNotReplicate
        );
    }

    #[test]
    fn unit_differences_get_a_signed_rank_test_and_a_t_interval() {
        let e = wilcoxon_evidence(&[0.1, 0.2, 0.15, 0.3, 0.12, 0.22, 0.18, 0.25], Alternative::TwoSided, "seeds");
        assert_eq!(e.p, Some(2.0 / 256.0));
        assert_eq!(e.min_p, Some(2.0 / 256.0));
        assert!(e.interval.unwrap().0 > 0.0);
        assert!(
            e.describe().starts_with("Wilcoxon signed-rank, 8 seeds, p = 0.008, 95% t-interval ["),
            "{}",
            e.describe()
        );
        // Two seeds: the test cannot decide however consistent they are.
        let two = wilcoxon_evidence(&[-0.001, -0.0011], Alternative::TwoSided, "seeds");
        assert_eq!(judge(&two, Claim::positive(None)).0, Verdict::Inconclusive);
        // All zeros: no test at all.
        let zeros = wilcoxon_evidence(&[0.0; 8], Alternative::TwoSided, "seeds");
        assert_eq!(
            judge(&zeros, Claim::positive(None)),
            (
                Verdict::Inconclusive,
                "every value equal (no seed differs from zero: the signed-rank test is undefined)".into()
            )
        );
    }

    #[test]
    fn not_above_verdicts() {
        let not_above = Claim::NotAbove { margin: 0.287, zero: "50%" };
        // A group-blind share near 50%: not significantly above, and the bound excludes the contrast.
        let (v, why) = judge(&evidence(0.031, 0.266, (-0.058, 0.121), 0.004), not_above);
        assert_eq!(v, Verdict::Replicates);
        assert_eq!(
            why,
            "not significantly above 50% (one-sided p = 0.266), and the 95% t-interval [-0.058, 0.121] stays below 50% + 0.287"
        );
        // Far below 50% is what the paper reports: the one-sided test never fails it.
        assert_eq!(judge(&evidence(-0.3, 0.998, (-0.4, -0.2), 0.004), not_above).0, Verdict::Replicates);
        // Significantly above 50% fails it, however small the excess.
        let (v, why) = judge(&evidence(0.05, 0.004, (0.02, 0.08), 0.004), not_above);
        assert_eq!((v, why.as_str()), (Verdict::DoesNotReplicate, "significantly above 50% (one-sided p = 0.004)"));
        // Not significant, but the interval still reaches the paper's contrast: undecided.
        let (v, why) = judge(&evidence(0.05, 0.3, (-0.2, 0.4), 0.004), not_above);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.ends_with("still reaches 50% + 0.287"), "{why}");
        // An undefined statistic never decides.
        let mut e = evidence(0.0, 0.5, (0.0, 0.0), 1.0);
        e.p = None;
        assert_eq!(judge(&e, not_above).0, Verdict::Inconclusive);
    }

    #[test]
    fn no_p_below_the_tests_floor_and_no_interval_without_width() {
        // A normal-approximation p below what the exact signed-rank test on 8 seeds attains (2/2⁸).
        let mut e = evidence(0.3, 1e-10, (0.1, 0.5), wilcoxon_min_p(8, true));
        assert_eq!(e.p_text(), "p ≤ 0.008 (the smallest an exact test attains at this n)");
        assert!(e.describe().contains(", p ≤ 0.008 (the smallest"), "{}", e.describe());
        assert!(!e.describe().contains("1.0e-10"), "{}", e.describe());
        // At or above the floor the p is printed as it is.
        e.p = Some(0.0078125);
        assert_eq!(e.p_text(), "p = 0.008");
        // Where `min_p` only gates a test of another kind (a t-test), that test's p stands.
        e.p = Some(1e-10);
        e.min_p_is_floor = false;
        assert_eq!(e.p_text(), "p = 1.0e-10");
        // A p of exactly 0 (an underflow) is below 1e-16, never 0.
        e.p = Some(0.0);
        e.min_p = None;
        assert_eq!(e.p_text(), "p < 1e-16");
        let (_, why) = judge(&evidence(-0.3, 0.0, (-0.5, -0.1), 0.0), Claim::positive(None));
        assert_eq!(why, "significant in the opposite direction (p < 1e-16)");

        // Seeds that all read the same: no interval to show, but that nothing varied.
        let flat = evidence(0.3, 0.008, (0.3, 0.3), 0.008);
        assert_eq!(flat.interval_text().as_deref(), Some("no variation: every seed 0.300"));
        assert!(!flat.describe().contains("[0.300, 0.300]"), "{}", flat.describe());
        assert_eq!(
            judge(&evidence(0.01, 0.2, (0.01, 0.01), 0.008), Claim::positive(Some(0.5))),
            (
                Verdict::DoesNotReplicate,
                "every seed at 0.010 (no variation) excludes the paper's effect (+0.500)".into()
            )
        );
        // An interval with width keeps its bounds.
        assert_eq!(
            evidence(0.3, 0.008, (0.299, 0.301), 0.008).interval_text().as_deref(),
            Some("95% t-interval [0.299, 0.301]")
        );
        // ρ at 1: the Fisher-z interval collapses to the point 1, which is no interval.
        assert_eq!(spearman_interval(1.0, 10), None);
        assert_eq!(spearman_interval(-0.999_999_999, 10), None);
        let (lo, hi) = spearman_interval(0.9, 10).unwrap();
        assert!(lo < 0.9 && 0.9 < hi && hi < 1.0);
    }

    fn row(verdict: Verdict) -> Row {
        Row {
            label: "r".into(),
            value: String::new(),
            evidence: Evidence::new("t", 8, "seeds"),
            verdict,
            reason: "why".into(),
            members: Vec::new(),
            claim: None,
        }
    }

    #[test]
    fn rows_combine() {
        use Verdict::{DoesNotReplicate as D, Inconclusive as I, Replicates as R};
        let all = |vs: &[Verdict]| combine(&vs.iter().map(|&v| row(v)).collect::<Vec<_>>(), Combine::All).0;
        let most = |vs: &[Verdict]| combine(&vs.iter().map(|&v| row(v)).collect::<Vec<_>>(), Combine::Most).0;
        assert_eq!(all(&[R, R]), R);
        assert_eq!(all(&[R, I]), I);
        assert_eq!(all(&[I, D]), D);
        assert_eq!(most(&[R, R, D]), R);
        assert_eq!(most(&[R, I, D]), I);
        assert_eq!(most(&[R, D, D]), D);
        assert_eq!(most(&[R, D]), D);
        let any = |vs: &[Verdict]| combine(&vs.iter().map(|&v| row(v)).collect::<Vec<_>>(), Combine::Any).0;
        assert_eq!(any(&[D, R, D]), R);
        assert_eq!(any(&[D, I]), I);
        assert_eq!(any(&[D, D]), D);
    }
}
