//! Wilcoxon signed-rank test with the semantics of `scipy.stats.wilcoxon` (scipy 1.17.1).
//!
//! What scipy 1.17 does, and herd replicates:
//! - `method = auto`: more than 50 observations (zeros included) → asymptotic. Otherwise, after
//!   ranking: no ties and no zeros → exact null distribution; ties or zeros and n ≤ 13 → an
//!   exhaustive sign-flip permutation test over all 2ⁿ sign patterns (scipy's
//!   `PermutationMethod()` with 9999 resamples enumerates when 2ⁿ ≤ 9999); otherwise asymptotic.
//! - `exact` uses the no-ties distribution of R+ for `count` ranks, rounding a non-integral R+ up
//!   for the lower tail and down for the upper tail (gh-19872).
//! - `asymptotic`: z = (R+ − mean)/se with tie-corrected se, Pratt's zero adjustment (Cureton
//!   1967), optional continuity correction of 0.5 towards the null.
//! - zero handling: `wilcox` drops zeros; `pratt` ranks zeros but gives them to neither sum;
//!   `zsplit` ranks zeros and splits their rank sum evenly between R+ and R−.
//! - reported statistic: min(R+, R−) for two-sided, R+ otherwise.
//!
//! Zero detection and ties use the tolerance of [`crate::rank`]: a difference is zero when
//! `isclose(x, y)` (paired) or `isclose(d, 0)` (one-sample) with rel/abs tolerance 1e-9.
//!
//! Effect size: the matched-pairs rank-biserial correlation r = (R+ − R−)/(R+ + R−), computed
//! from the R+ and R− of the chosen zero method (so zeros shrink r towards 0 under `zsplit`, and
//! do not enter it under `wilcox` and `pratt`). It lies in [−1, 1]; positive means differences
//! are mostly positive (x > y).

use crate::distributions::{Alternative, normal_p_value};
use crate::error::{StatsError, check_finite, check_same_length};
use crate::rank::{approx_equal, average_ranks_by};

/// How zero differences are treated (scipy's `zero_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroMethod {
    /// Drop zeros (scipy's default).
    #[default]
    Wilcox,
    /// Rank zeros, exclude them from R+ and R−, adjust the normal approximation.
    Pratt,
    /// Rank zeros and split their ranks between R+ and R−.
    Zsplit,
}

/// Which null distribution to use (scipy's `method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WilcoxonMethod {
    /// scipy's resolution rule (see module docs).
    #[default]
    Auto,
    /// Exact distribution of R+ assuming no ties.
    Exact,
    /// Normal approximation.
    Asymptotic,
    /// Exhaustive sign-flip permutation test (at most [`MAX_PERMUTATION_N`] observations).
    Permutation,
}

/// Largest sample for which an exhaustive sign-flip enumeration is allowed when requested.
pub const MAX_PERMUTATION_N: usize = 24;

/// Sample size up to which `auto` enumerates sign flips when there are ties or zeros.
const AUTO_PERMUTATION_MAX_N: usize = 13;
/// Sample size above which `auto` goes straight to the normal approximation.
const AUTO_EXACT_MAX_N: usize = 50;

/// Options, defaulting to scipy's defaults (`wilcox`, no correction, two-sided, auto).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WilcoxonOptions {
    pub zero_method: ZeroMethod,
    /// Continuity correction (only affects the asymptotic path).
    pub correction: bool,
    pub alternative: Alternative,
    pub method: WilcoxonMethod,
}

/// Outcome of a signed-rank test.
#[derive(Debug, Clone, PartialEq)]
pub struct WilcoxonResult {
    /// scipy's `statistic`: min(R+, R−) if two-sided, else R+.
    pub statistic: f64,
    pub r_plus: f64,
    pub r_minus: f64,
    pub p_value: f64,
    /// z after the continuity correction, reported when the asymptotic path was used
    /// (as scipy: −|z| for two-sided).
    pub z: Option<f64>,
    /// The method that produced the p-value (never `Auto`).
    pub method_used: WilcoxonMethod,
    /// Number of observations (zeros included).
    pub n: usize,
    /// Number of zero differences.
    pub n_zero: usize,
    /// Whether nonzero |differences| (or zeros, under pratt/zsplit) contain ties.
    pub has_ties: bool,
    /// Matched-pairs rank-biserial correlation (R+ − R−)/(R+ + R−).
    pub rank_biserial: f64,
}

/// One-sample test of whether `differences` are symmetric about zero.
pub fn wilcoxon_one_sample(differences: &[f64], options: &WilcoxonOptions) -> Result<WilcoxonResult, StatsError> {
    check_finite(differences, "differences")?;
    let is_zero: Vec<bool> = differences.iter().map(|&d| approx_equal(d, 0.0)).collect();
    signed_rank(differences, &is_zero, options)
}

/// Paired test on `x − y`.
pub fn wilcoxon_paired(x: &[f64], y: &[f64], options: &WilcoxonOptions) -> Result<WilcoxonResult, StatsError> {
    check_same_length("y", x.len(), y.len())?;
    check_finite(x, "x")?;
    check_finite(y, "y")?;
    let differences: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
    let is_zero: Vec<bool> = x.iter().zip(y).map(|(&a, &b)| approx_equal(a, b)).collect();
    signed_rank(&differences, &is_zero, options)
}

/// Rank sums and the normal-approximation moments of one sample (scipy's `_wilcoxon_statistic`).
struct SignedRanks {
    /// Rank of every observation (0 for zeros under `wilcox`).
    ranks: Vec<f64>,
    positive: Vec<bool>,
    nonzero: Vec<bool>,
    /// Half the rank sum of zeros, added to both R+ and R− under `zsplit`.
    zero_half: f64,
    r_plus: f64,
    r_minus: f64,
    /// Number of ranked observations.
    count: usize,
    has_ties: bool,
    mean: f64,
    se: f64,
}

fn signed_ranks(d: &[f64], is_zero: &[bool], zero_method: ZeroMethod) -> SignedRanks {
    let n_zero = is_zero.iter().filter(|&&z| z).count();
    let ranked: Vec<usize> = (0..d.len()).filter(|&i| zero_method != ZeroMethod::Wilcox || !is_zero[i]).collect();
    // Zeros become exactly 0 so they form one tie group of their own, below every nonzero value.
    let magnitudes: Vec<f64> = ranked.iter().map(|&i| if is_zero[i] { 0.0 } else { d[i].abs() }).collect();
    let ranking =
        average_ranks_by(&magnitudes, |a, b| (a == 0.0 && b == 0.0) || (a != 0.0 && b != 0.0 && approx_equal(a, b)));
    let mut ranks = vec![0.0; d.len()];
    for (k, &i) in ranked.iter().enumerate() {
        ranks[i] = ranking.ranks[k];
    }
    let positive: Vec<bool> = (0..d.len()).map(|i| !is_zero[i] && d[i] > 0.0).collect();
    let negative = |i: usize| !is_zero[i] && d[i] < 0.0;
    let mut r_plus: f64 = (0..d.len()).filter(|&i| positive[i]).map(|i| ranks[i]).sum();
    let mut r_minus: f64 = (0..d.len()).filter(|&i| negative(i)).map(|i| ranks[i]).sum();
    let mut zero_half = 0.0;
    if zero_method == ZeroMethod::Zsplit {
        zero_half = (0..d.len()).filter(|&i| is_zero[i]).map(|i| ranks[i]).sum::<f64>() / 2.0;
        r_plus += zero_half;
        r_minus += zero_half;
    }
    let count = ranked.len() as f64;
    let mut mean = count * (count + 1.0) * 0.25;
    let mut variance_x24 = count * (count + 1.0) * (2.0 * count + 1.0);
    let mut tie_sizes = ranking.tie_sizes.clone();
    if zero_method == ZeroMethod::Pratt && n_zero > 0 {
        let nz = n_zero as f64;
        mean -= nz * (nz + 1.0) * 0.25;
        variance_x24 -= nz * (nz + 1.0) * (2.0 * nz + 1.0);
        // The zeros are the first tie group; they take no part in the tie correction.
        tie_sizes[0] = 0;
    }
    let tie_correction: f64 = tie_sizes
        .iter()
        .map(|&t| {
            let t = t as f64;
            t * t * t - t
        })
        .sum();
    SignedRanks {
        ranks,
        positive,
        nonzero: is_zero.iter().map(|&z| !z).collect(),
        zero_half,
        r_plus,
        r_minus,
        count: ranked.len(),
        has_ties: ranking.has_ties(),
        mean,
        se: ((variance_x24 - tie_correction / 2.0) / 24.0).sqrt(),
    }
}

fn signed_rank(d: &[f64], is_zero: &[bool], options: &WilcoxonOptions) -> Result<WilcoxonResult, StatsError> {
    let n = d.len();
    if n == 0 {
        return Err(StatsError::EmptyInput);
    }
    let n_zero = is_zero.iter().filter(|&&z| z).count();
    if n_zero == n {
        return Err(StatsError::AllZeroDifferences);
    }
    let s = signed_ranks(d, is_zero, options.zero_method);
    let method = match options.method {
        WilcoxonMethod::Auto if n > AUTO_EXACT_MAX_N => WilcoxonMethod::Asymptotic,
        WilcoxonMethod::Auto if !(s.has_ties || n_zero > 0) => WilcoxonMethod::Exact,
        WilcoxonMethod::Auto if n <= AUTO_PERMUTATION_MAX_N => WilcoxonMethod::Permutation,
        WilcoxonMethod::Auto => WilcoxonMethod::Asymptotic,
        other => other,
    };
    let mut z = None;
    let p_value = match method {
        WilcoxonMethod::Asymptotic => {
            let mut zv = (s.r_plus - s.mean) / s.se;
            if options.correction {
                let sign = match options.alternative {
                    Alternative::Greater => 1.0,
                    Alternative::Less => -1.0,
                    Alternative::TwoSided => sign_or_zero(zv),
                };
                zv -= sign * 0.5 / s.se;
            }
            let p = normal_p_value(zv, options.alternative);
            z = Some(if options.alternative == Alternative::TwoSided { -zv.abs() } else { zv });
            p
        }
        WilcoxonMethod::Exact => exact_p_value(s.r_plus, s.count, options.alternative),
        WilcoxonMethod::Permutation => {
            if n > MAX_PERMUTATION_N {
                return Err(StatsError::InvalidArgument(format!(
                    "exhaustive sign-flip permutation needs n ≤ {MAX_PERMUTATION_N}, got {n}"
                )));
            }
            sign_flip_p_value(&s, options.alternative)
        }
        WilcoxonMethod::Auto => unreachable!("auto is resolved above"),
    };
    let statistic = if options.alternative == Alternative::TwoSided { s.r_plus.min(s.r_minus) } else { s.r_plus };
    let rank_sum = s.r_plus + s.r_minus;
    Ok(WilcoxonResult {
        statistic,
        r_plus: s.r_plus,
        r_minus: s.r_minus,
        p_value,
        z,
        method_used: method,
        n,
        n_zero,
        has_ties: s.has_ties,
        rank_biserial: if rank_sum > 0.0 { (s.r_plus - s.r_minus) / rank_sum } else { 0.0 },
    })
}

fn sign_or_zero(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// Null distribution of R+ for `n` untied ranks: P(R+ = r), r = 0..=n(n+1)/2
/// (scipy's `_get_wilcoxon_distr`, same recursion and floating-point operations).
pub fn signed_rank_null_pmf(n: usize) -> Vec<f64> {
    let mut pmf = vec![1.0];
    for k in 1..=n {
        let mut next = vec![0.0; k * (k + 1) / 2 + 1];
        let m = pmf.len();
        let len = next.len();
        for (j, &p) in pmf.iter().enumerate() {
            next[j] = p * 0.5;
        }
        for (j, &p) in pmf.iter().enumerate() {
            next[len - m + j] += p * 0.5;
        }
        pmf = next;
    }
    pmf
}

fn exact_p_value(r_plus: f64, count: usize, alternative: Alternative) -> f64 {
    let pmf = signed_rank_null_pmf(count);
    let mean = (count * (count + 1)) as f64 / 4.0;
    let sum_range = |from: usize, to_exclusive: usize| -> f64 {
        let to = to_exclusive.min(pmf.len());
        if from >= to { 0.0 } else { pmf[from..to].iter().sum() }
    };
    // scipy's WilcoxonDistribution.cdf / .sf, which sum the shorter tail.
    let cdf = |k: usize| {
        if k as f64 <= mean { sum_range(0, k + 1) } else { 1.0 - sum_range(k + 1, pmf.len()) }
    };
    let sf = |k: usize| {
        if k as f64 <= mean { sum_range(k, pmf.len()) } else { 1.0 - sum_range(0, k) }
    };
    let lower = r_plus.ceil() as usize;
    let upper = r_plus.floor() as usize;
    match alternative {
        Alternative::Less => cdf(lower),
        Alternative::Greater => sf(upper),
        Alternative::TwoSided => (2.0 * sf(upper).min(cdf(lower))).clamp(0.0, 1.0),
    }
}

/// scipy's `permutation_test(..., permutation_type='samples')` for one sample with all 2ⁿ sign
/// patterns (exact test: no +1 adjustment), including its relative tolerance of 100·ε.
fn sign_flip_p_value(s: &SignedRanks, alternative: Alternative) -> f64 {
    let n = s.ranks.len();
    let observed = s.r_plus;
    let gamma = (f64::EPSILON * 100.0 * observed).abs();
    let total: u64 = 1 << n;
    let (mut at_most, mut at_least) = (0u64, 0u64);
    for mask in 0..total {
        // Flipping a zero changes nothing; zsplit's constant half rank sum is added after.
        let mut stat = 0.0;
        for i in 0..n {
            let flipped = (mask >> i) & 1 == 1;
            if s.nonzero[i] && (s.positive[i] != flipped) {
                stat += s.ranks[i];
            }
        }
        stat += s.zero_half;
        if stat <= observed + gamma {
            at_most += 1;
        }
        if stat >= observed - gamma {
            at_least += 1;
        }
    }
    let less = at_most as f64 / total as f64;
    let greater = at_least as f64 / total as f64;
    let p = match alternative {
        Alternative::Less => less,
        Alternative::Greater => greater,
        Alternative::TwoSided => 2.0 * less.min(greater),
    };
    p.clamp(0.0, 1.0)
}
