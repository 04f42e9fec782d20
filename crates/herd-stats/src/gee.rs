//! Generalised estimating equations: Gaussian outcome, identity link, replicating statsmodels 0.15
//! `GEE(y, X, groups, cov_struct=…, family=Gaussian()).fit()` with the exchangeable
//! ([`gee_gaussian_exchangeable`]) or the independence ([`gee_gaussian_independence`]) working
//! correlation, the latter optionally with one intercept per stratum absorbed
//! ([`gee_gaussian_independence_within`], statsmodels' `y ~ X + C(stratum)`).
//!
//! The fitting loop is statsmodels' own: start from OLS with ρ = 0; each iteration solves the
//! estimating equations for the current ρ (one Newton step, exact for the identity link), stops
//! when the score norm is below `ctol` (1e-6) after at least one correlation update, and
//! otherwise re-estimates ρ; at most `max_iter` (60) iterations. Both the scale and ρ use
//! statsmodels' degrees-of-freedom convention (`ddof_scale` = number of mean parameters):
//! scale = Σr²/(N − p), ρ = Σ_clusters Σ_{j<k} r_j r_k / scale / (n_pairs − p).
//! ρ is never clamped: designs where every decider's points sum to 100 put ρ near its lower
//! bound −1/(n_cluster − 1), and clamping would change the estimates. Under independence ρ stays
//! 0: the estimates are OLS's, and the loop stops at its second step.
//!
//! Robust covariance = B⁻¹ C B⁻¹ (B = Σ Xᵢ'Vᵢ⁻¹Xᵢ, C = Σ Xᵢ'Vᵢ⁻¹rᵢ rᵢ'Vᵢ⁻¹Xᵢ, no small-sample
//! correction, statsmodels' default `cov_type="robust"`); naive covariance = B⁻¹ · scale.
//! z = β/SE, p = 2·P(Z > |z|). Both working correlations share this sandwich; under
//! independence Vᵢ = I.
//!
//! **A sum constraint.** Where the outcomes of a cluster sum to a constant (every decider of a
//! minimal-group society splits 100 points) and the clusters' compositions differ (societies with
//! different minority sizes), the exchangeable ρ sits at its singular bound −1/(n − 1): Vᵢ⁻¹ then
//! weighs each cluster's residual sum without limit, and the fit forces the coefficients to satisfy
//! the clusters' sums, which for `points ~ same_group` pins `same_group` near 0 with a collapsed
//! robust SE whatever the data (`tests/golden_gee_independence.rs`). The independence fit has no
//! such weight. Its pooled contrast still mixes deciders whose per-target baseline the constraint
//! sets ((100 − in-group targets × favouritism)/targets), so a decider's intercept is absorbed
//! (`gee_gaussian_independence_within`, strata = deciders) where the per-decider contrast is wanted.

use std::borrow::Cow;
use std::ops::Range;

use nalgebra::{DMatrix, DVector};

use crate::distributions::{Alternative, normal_p_value};
use crate::error::{StatsError, check_finite, check_same_length};
use crate::formula::DesignMatrix;
use crate::linalg::{require_full_column_rank_gram, spd_inverse};

/// statsmodels' `fit(maxiter=60, ctol=1e-6)` defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeeOptions {
    pub max_iter: usize,
    pub ctol: f64,
}

impl Default for GeeOptions {
    fn default() -> Self {
        Self { max_iter: 60, ctol: 1e-6 }
    }
}

/// One coefficient of a GEE fit.
#[derive(Debug, Clone, PartialEq)]
pub struct GeeCoefficient {
    pub name: String,
    pub estimate: f64,
    pub robust_se: f64,
    pub robust_z: f64,
    pub robust_p: f64,
    pub naive_se: f64,
    pub naive_z: f64,
    pub naive_p: f64,
}

/// The working within-cluster correlation of a GEE fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkingCorrelation {
    /// statsmodels' `Exchangeable()`: one correlation ρ between any two rows of a cluster.
    Exchangeable,
    /// statsmodels' `Independence()`: ρ = 0.
    Independence,
}

impl WorkingCorrelation {
    /// `exchangeable` or `independence`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exchangeable => "exchangeable",
            Self::Independence => "independence",
        }
    }
}

/// A fitted Gaussian GEE.
///
/// An outcome the design fits exactly (zero residual variance, e.g. the same value in every row)
/// has its OLS estimates and NaN for every SE, z and p, and for an exchangeable ρ, as statsmodels
/// gives (with warnings) for the exchangeable fit: the working correlation is 0/0 there (an
/// independence fit there has zero SEs in statsmodels; herd reports them undefined too).
/// `converged` is then false and `iterations` 0.
#[derive(Debug, Clone, PartialEq)]
pub struct GeeFit {
    /// Every column of the design, in order; absorbed intercepts are not among them.
    pub coefficients: Vec<GeeCoefficient>,
    pub robust_covariance: DMatrix<f64>,
    pub naive_covariance: DMatrix<f64>,
    pub working_correlation: WorkingCorrelation,
    /// Working within-cluster correlation ρ used for the final estimates (0 under independence).
    pub rho: f64,
    /// Residual variance Σr²/(N − p) at the final estimates (p counts absorbed intercepts).
    pub scale: f64,
    pub iterations: usize,
    /// Whether the score norm fell below `ctol` (statsmodels' `converged`).
    pub converged: bool,
    pub n_obs: usize,
    pub n_clusters: usize,
    /// Strata whose intercepts were absorbed (0 without).
    pub absorbed: usize,
}

impl GeeFit {
    /// The coefficient with this column name.
    pub fn coefficient(&self, name: &str) -> Option<&GeeCoefficient> {
        self.coefficients.iter().find(|c| c.name == name)
    }
}

/// Observations grouped by cluster, with the per-cluster sums that the exchangeable working
/// correlation needs: Vᵢ⁻¹ = I/(1 − ρ) − cᵢ11ᵀ, so Xᵢ'Vᵢ⁻¹Xᵢ and Xᵢ'Vᵢ⁻¹rᵢ follow from Xᵢ'Xᵢ,
/// Xᵢ'1, Xᵢ'rᵢ and 1'rᵢ without forming any nᵢ × nᵢ or nᵢ × p product per iteration.
struct Clusters<'a> {
    p: usize,
    /// The design, column-major, and the response, with rows in cluster order (ascending id,
    /// table order within): borrowed when the rows already come that way.
    x: Cow<'a, [f64]>,
    y: Cow<'a, [f64]>,
    /// Cluster c holds rows `bounds[c]..bounds[c + 1]`.
    bounds: Vec<usize>,
    /// Per cluster: Xᵢ'Xᵢ (p × p, row-major), Xᵢ'1 and Xᵢ'yᵢ (p each).
    gram: Vec<f64>,
    sums: Vec<f64>,
    xty: Vec<f64>,
}

/// Residual summaries of every cluster at one β.
struct Residuals {
    /// Per cluster: 1'rᵢ, rᵢ'rᵢ and Xᵢ'rᵢ (p).
    sum: Vec<f64>,
    sum_sq: Vec<f64>,
    xtr: Vec<f64>,
}

/// Calls `$kernel::<P>` with the column count as a constant for the usual small designs, so
/// the per-row loops unroll; `P = 0` reads it at run time. Both give the same operation order.
macro_rules! by_width {
    ($p:expr, $kernel:ident($($arg:expr),* $(,)?)) => {
        match $p {
            1 => $kernel::<1>($($arg),*),
            2 => $kernel::<2>($($arg),*),
            3 => $kernel::<3>($($arg),*),
            4 => $kernel::<4>($($arg),*),
            5 => $kernel::<5>($($arg),*),
            6 => $kernel::<6>($($arg),*),
            7 => $kernel::<7>($($arg),*),
            8 => $kernel::<8>($($arg),*),
            _ => $kernel::<0>($($arg),*),
        }
    };
}

/// One cluster's Xᵢ'Xᵢ, Xᵢ'1 and Xᵢ'yᵢ (`rows` of the n × p column-major `x`), summed into
/// zeroed outputs.
fn cluster_sums<const P: usize>(
    p: usize,
    x: &[f64],
    y: &[f64],
    rows: Range<usize>,
    gram: &mut [f64],
    sums: &mut [f64],
    xty: &mut [f64],
) {
    let p = if P == 0 { p } else { P };
    let n = y.len();
    let (gram, sums, xty) = (&mut gram[..p * p], &mut sums[..p], &mut xty[..p]);
    for i in rows {
        for l in 0..p {
            let xl = x[l * n + i];
            sums[l] += xl;
            xty[l] += xl * y[i];
            for j in l..p {
                gram[l * p + j] += xl * x[j * n + i];
            }
        }
    }
    // X'X is symmetric: the lower triangle is the upper one, summed in the same order.
    for l in 0..p {
        for j in 0..l {
            gram[l * p + j] = gram[j * p + l];
        }
    }
}

/// One cluster's residuals r = y − Xβ (`rows` of the n × p column-major `x`) summarised as
/// (1'r, r'r), with X'r written to `xtr`.
fn cluster_residuals<const P: usize>(
    p: usize,
    x: &[f64],
    y: &[f64],
    rows: Range<usize>,
    beta: &[f64],
    xtr: &mut [f64],
) -> (f64, f64) {
    let p = if P == 0 { p } else { P };
    let n = y.len();
    let (beta, xtr) = (&beta[..p], &mut xtr[..p]);
    xtr.fill(0.0);
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    for i in rows {
        let mut fitted = 0.0;
        for l in 0..p {
            fitted += x[l * n + i] * beta[l];
        }
        let r = y[i] - fitted;
        sum += r;
        sum_sq += r * r;
        for l in 0..p {
            xtr[l] += x[l * n + i] * r;
        }
    }
    (sum, sum_sq)
}

impl<'a> Clusters<'a> {
    fn new<C: Ord>(design: &'a DMatrix<f64>, y: &'a [f64], cluster_ids: &[C]) -> Self {
        let (n, p) = design.shape();
        // Clusters in ascending id, table order within (a stable sort), as grouping into a
        // BTreeMap gave; rows usually arrive grouped already, and then need no copy.
        let (x, y, bounds) = if cluster_ids.windows(2).all(|w| w[0] <= w[1]) {
            let mut bounds = vec![0];
            bounds.extend((1..n).filter(|&i| cluster_ids[i - 1] != cluster_ids[i]));
            (Cow::Borrowed(design.as_slice()), Cow::Borrowed(y), bounds)
        } else {
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| cluster_ids[a].cmp(&cluster_ids[b]));
            let mut bounds = vec![0];
            bounds.extend((1..n).filter(|&k| cluster_ids[order[k - 1]] != cluster_ids[order[k]]));
            let x: Vec<f64> = design.column_iter().flat_map(|column| order.iter().map(move |&i| column[i])).collect();
            let y: Vec<f64> = order.iter().map(|&i| y[i]).collect();
            (Cow::Owned(x), Cow::Owned(y), bounds)
        };
        let mut bounds = bounds;
        bounds.push(n);
        let n_clusters = bounds.len() - 1;
        let mut gram = vec![0.0; n_clusters * p * p];
        let mut sums = vec![0.0; n_clusters * p];
        let mut xty = vec![0.0; n_clusters * p];
        for c in 0..n_clusters {
            by_width!(
                p,
                cluster_sums(
                    p,
                    &x,
                    &y,
                    bounds[c]..bounds[c + 1],
                    &mut gram[c * p * p..(c + 1) * p * p],
                    &mut sums[c * p..(c + 1) * p],
                    &mut xty[c * p..(c + 1) * p],
                )
            );
        }
        Self { p, x, y, bounds, gram, sums, xty }
    }

    fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    fn size(&self, c: usize) -> f64 {
        (self.bounds[c + 1] - self.bounds[c]) as f64
    }

    /// X'X and X'y over all observations.
    fn normal_equations(&self) -> (DMatrix<f64>, DVector<f64>) {
        let p = self.p;
        let mut xtx = DMatrix::<f64>::zeros(p, p);
        for g in self.gram.chunks_exact(p * p) {
            for l in 0..p {
                for j in 0..p {
                    xtx[(l, j)] += g[l * p + j];
                }
            }
        }
        let mut xty = DVector::<f64>::zeros(p);
        for part in self.xty.chunks_exact(p) {
            for (t, v) in xty.iter_mut().zip(part) {
                *t += v;
            }
        }
        (xtx, xty)
    }

    fn residuals(&self, beta: &DVector<f64>) -> Residuals {
        let (p, n_clusters) = (self.p, self.len());
        let mut out =
            Residuals { sum: vec![0.0; n_clusters], sum_sq: vec![0.0; n_clusters], xtr: vec![0.0; n_clusters * p] };
        for c in 0..n_clusters {
            (out.sum[c], out.sum_sq[c]) = by_width!(
                p,
                cluster_residuals(
                    p,
                    &self.x,
                    &self.y,
                    self.bounds[c]..self.bounds[c + 1],
                    beta.as_slice(),
                    &mut out.xtr[c * p..(c + 1) * p],
                )
            );
        }
        out
    }

    /// cᵢ in Vᵢ⁻¹ = I/(1 − ρ) − cᵢ·11ᵀ for cluster c (statsmodels' closed form; the variance
    /// function of the Gaussian family is 1).
    fn weight(&self, rho: f64, c: usize) -> f64 {
        let k = self.size(c);
        rho / (1.0 - rho) / (1.0 + rho * (k - 1.0))
    }

    /// Xᵢ'Vᵢ⁻¹rᵢ of cluster c.
    fn score_of(&self, rho: f64, res: &Residuals, c: usize) -> DVector<f64> {
        let p = self.p;
        let w = self.weight(rho, c);
        let s = &self.sums[c * p..(c + 1) * p];
        DVector::from_fn(p, |l, _| res.xtr[c * p + l] / (1.0 - rho) - w * s[l] * res.sum[c])
    }

    /// B = Σ Xᵢ'Vᵢ⁻¹Xᵢ.
    fn bread(&self, rho: f64) -> DMatrix<f64> {
        let p = self.p;
        let mut bmat = DMatrix::<f64>::zeros(p, p);
        for c in 0..self.len() {
            let w = self.weight(rho, c);
            let g = &self.gram[c * p * p..(c + 1) * p * p];
            let s = &self.sums[c * p..(c + 1) * p];
            for l in 0..p {
                for j in 0..p {
                    bmat[(l, j)] += g[l * p + j] / (1.0 - rho) - w * s[l] * s[j];
                }
            }
        }
        bmat
    }

    /// Σ Xᵢ'Vᵢ⁻¹rᵢ.
    fn score(&self, rho: f64, res: &Residuals) -> DVector<f64> {
        let mut score = DVector::<f64>::zeros(self.p);
        for c in 0..self.len() {
            score += self.score_of(rho, res, c);
        }
        score
    }

    /// The robust (sandwich) and naive covariances at the final estimates with the final ρ
    /// (statsmodels' `_covmat`): B⁻¹CB⁻¹ with C = Σ Xᵢ'Vᵢ⁻¹rᵢ rᵢ'Vᵢ⁻¹Xᵢ, and B⁻¹ · scale. Under
    /// independence (ρ = 0) Vᵢ = I: (X'X)⁻¹ Σ Xᵢ'rᵢrᵢ'Xᵢ (X'X)⁻¹.
    fn covariances(&self, rho: f64, res: &Residuals, scale: f64) -> Result<(DMatrix<f64>, DMatrix<f64>), StatsError> {
        let p = self.p;
        let bmat = self.bread(rho);
        let mut cmat = DMatrix::<f64>::zeros(p, p);
        for c in 0..self.len() {
            let d_vinv_r = self.score_of(rho, res, c);
            cmat += &d_vinv_r * d_vinv_r.transpose();
        }
        // LU with partial pivoting, as numpy's inv: nalgebra's `try_inverse` uses cofactors for
        // p ≤ 4, which lose ~1e-6 when ρ is near −1/(n − 1) and B is badly conditioned.
        let bmat_inv = bmat
            .clone()
            .lu()
            .try_inverse()
            .ok_or(StatsError::SingularDesign { rank: crate::linalg::numerical_rank(&bmat), columns: p })?;
        let robust = &bmat_inv * cmat * &bmat_inv;
        let naive = &bmat_inv * scale;
        if !rho.is_finite() || !robust.iter().all(|v| v.is_finite()) || !naive.iter().all(|v| v.is_finite()) {
            return Err(StatsError::GeeNotFinite { rho });
        }
        Ok((robust, naive))
    }
}

/// Fits `y ~ design` with the exchangeable working correlation, clusters given by `cluster_ids`
/// (any ordered id; cluster sizes may differ): statsmodels'
/// `GEE(y, X, groups, cov_struct=Exchangeable(), family=Gaussian()).fit()`.
pub fn gee_gaussian_exchangeable<C: Ord>(
    design: &DesignMatrix,
    y: &[f64],
    cluster_ids: &[C],
    options: &GeeOptions,
) -> Result<GeeFit, StatsError> {
    check_input(design, y, cluster_ids)?;
    let problem = Problem::of(design, y, cluster_ids);
    fit_gaussian(&problem, options, WorkingCorrelation::Exchangeable)
}

/// Fits `y ~ design` with the independence working correlation, clusters given by `cluster_ids`:
/// statsmodels' `GEE(y, X, groups, cov_struct=Independence(), family=Gaussian()).fit()`. The
/// estimates are OLS's; the robust covariance is the cluster sandwich (X'X)⁻¹ Σ Xᵢ'rᵢrᵢ'Xᵢ (X'X)⁻¹.
pub fn gee_gaussian_independence<C: Ord>(
    design: &DesignMatrix,
    y: &[f64],
    cluster_ids: &[C],
    options: &GeeOptions,
) -> Result<GeeFit, StatsError> {
    check_input(design, y, cluster_ids)?;
    let problem = Problem::of(design, y, cluster_ids);
    fit_gaussian(&problem, options, WorkingCorrelation::Independence)
}

/// [`gee_gaussian_independence`] with one intercept per stratum (`strata`, any ordered id; each
/// stratum within one cluster) in place of the design's `Intercept` column: statsmodels'
/// `GEE.from_formula("y ~ X + C(stratum)", groups, cov_struct=Independence(), family=Gaussian()).fit()`
/// for every coefficient but the intercepts, which are not reported. The intercepts are absorbed
/// (y and every other column centred within each stratum, the Frisch–Waugh–Lovell theorem): no
/// column per stratum is formed. Because strata nest in clusters each cluster's score for the
/// intercepts is zero, so the robust covariance of the other coefficients is the sandwich of the
/// centred design; the scale's degrees of freedom count the intercepts (N − p − strata).
///
/// A column other than `Intercept` that is constant within every stratum is collinear with the
/// intercepts: [`StatsError::SingularDesign`].
pub fn gee_gaussian_independence_within<C: Ord, S: Ord>(
    design: &DesignMatrix,
    y: &[f64],
    cluster_ids: &[C],
    strata: &[S],
    options: &GeeOptions,
) -> Result<GeeFit, StatsError> {
    check_input(design, y, cluster_ids)?;
    check_same_length("strata", design.n_obs(), strata.len())?;
    let within = Within::absorb(design, y, cluster_ids, strata)?;
    let problem = Problem {
        x: Cow::Owned(within.x),
        names: within.names,
        y: Cow::Owned(within.y),
        cluster_ids,
        ddof: within.ddof,
        outcome_size: mean_square(y),
        absorbed: within.strata,
    };
    fit_gaussian(&problem, options, WorkingCorrelation::Independence)
}

/// Errors on an empty, mismatched or non-finite input, or on fewer rows than columns + 1.
fn check_input<C>(design: &DesignMatrix, y: &[f64], cluster_ids: &[C]) -> Result<(), StatsError> {
    let n = design.n_obs();
    let p = design.n_columns();
    if n == 0 || p == 0 {
        return Err(StatsError::EmptyInput);
    }
    check_same_length("y", n, y.len())?;
    check_same_length("cluster_ids", n, cluster_ids.len())?;
    check_finite(y, "y")?;
    if n <= p {
        return Err(StatsError::TooFewObservations { needed: p + 1, got: n });
    }
    Ok(())
}

fn mean_square(y: &[f64]) -> f64 {
    y.iter().map(|v| v * v).sum::<f64>() / y.len() as f64
}

/// What one fit works on: the design as fitted (the centred one where intercepts are absorbed).
struct Problem<'a, C> {
    x: Cow<'a, DMatrix<f64>>,
    names: Vec<String>,
    y: Cow<'a, [f64]>,
    cluster_ids: &'a [C],
    /// statsmodels' `ddof_scale`: the number of mean parameters, absorbed intercepts included.
    ddof: usize,
    /// Mean square of the outcome as given, the yardstick of an exact fit.
    outcome_size: f64,
    absorbed: usize,
}

impl<'a, C> Problem<'a, C> {
    fn of(design: &'a DesignMatrix, y: &'a [f64], cluster_ids: &'a [C]) -> Self {
        Self {
            x: Cow::Borrowed(&design.matrix),
            names: design.column_names.clone(),
            y: Cow::Borrowed(y),
            cluster_ids,
            ddof: design.n_columns(),
            outcome_size: mean_square(y),
            absorbed: 0,
        }
    }
}

/// A design with one intercept per stratum absorbed: y and the columns other than `Intercept`
/// centred within each stratum, rows in their given order.
struct Within {
    x: DMatrix<f64>,
    names: Vec<String>,
    y: Vec<f64>,
    strata: usize,
    ddof: usize,
}

impl Within {
    fn absorb<C: Ord, S: Ord>(
        design: &DesignMatrix,
        y: &[f64],
        cluster_ids: &[C],
        strata: &[S],
    ) -> Result<Self, StatsError> {
        let n = design.n_obs();
        let kept: Vec<usize> = (0..design.n_columns()).filter(|&j| design.column_names[j] != "Intercept").collect();
        if kept.is_empty() {
            return Err(StatsError::InvalidArgument(
                "no column besides the intercept: nothing is left once the strata's intercepts are absorbed".into(),
            ));
        }
        // Rows grouped by stratum (a stable sort, so each stratum's mean sums its rows in table order).
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| strata[a].cmp(&strata[b]));
        let mut runs: Vec<Range<usize>> = Vec::new();
        let mut start = 0;
        for k in 1..=n {
            if k == n || strata[order[k - 1]] != strata[order[k]] {
                runs.push(start..k);
                start = k;
            }
        }
        let mut x = DMatrix::<f64>::zeros(n, kept.len());
        let mut centred_y = vec![0.0; n];
        let mut varies = vec![false; kept.len()];
        for run in &runs {
            let rows = &order[run.clone()];
            let cluster = &cluster_ids[rows[0]];
            if rows.iter().any(|&i| cluster_ids[i] != *cluster) {
                return Err(StatsError::InvalidArgument(format!(
                    "stratum of row {} spans more than one cluster: strata must nest within clusters",
                    rows[0] + 1
                )));
            }
            let size = rows.len() as f64;
            let mean = rows.iter().map(|&i| y[i]).sum::<f64>() / size;
            for &i in rows {
                centred_y[i] = y[i] - mean;
            }
            for (k, &j) in kept.iter().enumerate() {
                let column = design.matrix.column(j);
                varies[k] |= rows.iter().any(|&i| column[i] != column[rows[0]]);
                let mean = rows.iter().map(|&i| column[i]).sum::<f64>() / size;
                for &i in rows {
                    x[(i, k)] = column[i] - mean;
                }
            }
        }
        let rank = varies.iter().filter(|&&v| v).count();
        if rank < kept.len() {
            return Err(StatsError::SingularDesign { rank, columns: kept.len() });
        }
        let ddof = kept.len() + runs.len();
        if n <= ddof {
            return Err(StatsError::TooFewObservations { needed: ddof + 1, got: n });
        }
        let names = kept.iter().map(|&j| design.column_names[j].clone()).collect();
        Ok(Self { x, names, y: centred_y, strata: runs.len(), ddof })
    }
}

/// The fitting loop shared by both working correlations (statsmodels' `GEE.fit`); under
/// independence ρ stays 0, so the first step already sits at OLS and the loop stops after the
/// second, as statsmodels' does.
fn fit_gaussian<C: Ord>(
    problem: &Problem<'_, C>,
    options: &GeeOptions,
    correlation: WorkingCorrelation,
) -> Result<GeeFit, StatsError> {
    let (n, p) = problem.x.shape();
    let clusters = Clusters::new(&problem.x, &problem.y, problem.cluster_ids);
    let (xtx, xty) = clusters.normal_equations();
    require_full_column_rank_gram(&problem.x, &xtx)?;
    let n_pairs: f64 = (0..clusters.len())
        .map(|c| {
            let k = clusters.size(c);
            0.5 * k * (k - 1.0)
        })
        .sum();
    let ddof = problem.ddof as f64;
    let n_f = n as f64;
    let scale_of = |res: &Residuals| -> f64 {
        let ssr: f64 = res.sum_sq.iter().sum();
        ssr / (n_f * (n_f - ddof) / n_f)
    };
    let update_rho = |res: &Residuals| match correlation {
        WorkingCorrelation::Exchangeable => exchangeable_rho(res, scale_of(res), n_pairs, ddof),
        WorkingCorrelation::Independence => 0.0,
    };
    let fitted = |coefficients, robust_covariance, naive_covariance, rho, scale, iterations, converged| GeeFit {
        coefficients,
        robust_covariance,
        naive_covariance,
        working_correlation: correlation,
        rho,
        scale,
        iterations,
        converged,
        n_obs: n,
        n_clusters: clusters.len(),
        absorbed: problem.absorbed,
    };

    // Start: OLS (statsmodels fits a Gaussian GLM, i.e. OLS).
    let xtx_inv = spd_inverse(&xtx)?;
    let mut beta = &xtx_inv * xty;
    let mut rho = 0.0;
    let mut score_norm = -1.0;
    let mut iterations = 0;
    let mut res = clusters.residuals(&beta);
    // A zero scale makes ρ 0/0: the fit is exact and everything but the estimates is undefined.
    // Zero means below rounding: residuals within ~1e-12 of the outcome's size. (Iterating on would
    // feed NaN into the linear algebra.)
    if scale_of(&res) <= 1e-24 * problem.outcome_size.max(f64::MIN_POSITIVE) {
        let nan = f64::NAN;
        let coefficients = (0..p)
            .map(|j| GeeCoefficient {
                name: problem.names[j].clone(),
                estimate: beta[j],
                robust_se: nan,
                robust_z: nan,
                robust_p: nan,
                naive_se: nan,
                naive_z: nan,
                naive_p: nan,
            })
            .collect();
        let nan_matrix = DMatrix::from_element(p, p, nan);
        let rho = match correlation {
            WorkingCorrelation::Exchangeable => nan,
            WorkingCorrelation::Independence => 0.0,
        };
        return Ok(fitted(coefficients, nan_matrix.clone(), nan_matrix, rho, 0.0, 0, false));
    }
    for iteration in 0..options.max_iter {
        iterations = iteration + 1;
        let bmat = clusters.bread(rho);
        let score = clusters.score(rho, &res);
        let update = bmat
            .clone()
            .lu()
            .solve(&score)
            .ok_or(StatsError::SingularDesign { rank: crate::linalg::numerical_rank(&bmat), columns: p })?;
        beta += update;
        score_norm = score.norm();
        if !score_norm.is_finite() || !beta.iter().all(|b| b.is_finite()) {
            return Err(StatsError::GeeNotFinite { rho });
        }
        res = clusters.residuals(&beta);
        // ρ is updated after every iteration, so "at least one ρ update" means iteration > 0.
        if score_norm < options.ctol && iteration > 0 {
            break;
        }
        rho = update_rho(&res);
        if !rho.is_finite() {
            return Err(StatsError::GeeNotFinite { rho });
        }
    }

    let scale = scale_of(&res);
    let (robust_covariance, naive_covariance) = clusters.covariances(rho, &res, scale)?;
    let coefficients = (0..p)
        .map(|j| {
            let estimate = beta[j];
            let robust_se = robust_covariance[(j, j)].sqrt();
            let naive_se = naive_covariance[(j, j)].sqrt();
            let robust_z = estimate / robust_se;
            let naive_z = estimate / naive_se;
            GeeCoefficient {
                name: problem.names[j].clone(),
                estimate,
                robust_se,
                robust_z,
                robust_p: normal_p_value(robust_z, Alternative::TwoSided),
                naive_se,
                naive_z,
                naive_p: normal_p_value(naive_z, Alternative::TwoSided),
            }
        })
        .collect();
    let converged = score_norm >= 0.0 && score_norm < options.ctol;
    Ok(fitted(coefficients, robust_covariance, naive_covariance, rho, scale, iterations, converged))
}

/// statsmodels' `Exchangeable.update`: pairwise residual products over the scale, with
/// `ddof` subtracted from the number of pairs.
fn exchangeable_rho(res: &Residuals, scale: f64, n_pairs: f64, ddof: f64) -> f64 {
    let cross: f64 = res.sum.iter().zip(&res.sum_sq).map(|(sum, sum_sq)| (sum * sum - sum_sq) / 2.0).sum();
    (cross / scale) / (n_pairs * (n_pairs - ddof) / n_pairs)
}
