//! Generalised estimating equations: Gaussian outcome, identity link, exchangeable working
//! correlation, replicating statsmodels 0.15
//! `GEE(y, X, groups, cov_struct=Exchangeable(), family=Gaussian()).fit()`.
//!
//! The fitting loop is statsmodels' own: start from OLS with ρ = 0; each iteration solves the
//! estimating equations for the current ρ (one Newton step, exact for the identity link), stops
//! when the score norm is below `ctol` (1e-6) after at least one correlation update, and
//! otherwise re-estimates ρ; at most `max_iter` (60) iterations. Both the scale and ρ use
//! statsmodels' degrees-of-freedom convention (`ddof_scale` = number of columns):
//! scale = Σr²/(N − p), ρ = Σ_clusters Σ_{j<k} r_j r_k / scale / (n_pairs − p).
//! ρ is never clamped: designs where every decider's points sum to 100 put ρ near its lower
//! bound −1/(n_cluster − 1), and clamping would change the estimates.
//!
//! Robust covariance = B⁻¹ C B⁻¹ (B = Σ Xᵢ'Vᵢ⁻¹Xᵢ, C = Σ Xᵢ'Vᵢ⁻¹rᵢ rᵢ'Vᵢ⁻¹Xᵢ, no small-sample
//! correction); naive covariance = B⁻¹ · scale. z = β/SE, p = 2·P(Z > |z|).

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

/// A fitted exchangeable Gaussian GEE.
#[derive(Debug, Clone, PartialEq)]
///
/// An outcome the design fits exactly (zero residual variance, e.g. the same value in every row)
/// has its OLS estimates and NaN for ρ, every SE, z and p, as statsmodels gives (with warnings):
/// the working correlation is 0/0 there. `converged` is then false and `iterations` 0.
pub struct GeeFit {
    pub coefficients: Vec<GeeCoefficient>,
    pub robust_covariance: DMatrix<f64>,
    pub naive_covariance: DMatrix<f64>,
    /// Working within-cluster correlation ρ used for the final estimates.
    pub rho: f64,
    /// Residual variance Σr²/(N − p) at the final estimates.
    pub scale: f64,
    pub iterations: usize,
    /// Whether the score norm fell below `ctol` (statsmodels' `converged`).
    pub converged: bool,
    pub n_obs: usize,
    pub n_clusters: usize,
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
}

/// Fits `y ~ design` with clusters given by `cluster_ids` (any ordered id; cluster sizes may
/// differ).
pub fn gee_gaussian_exchangeable<C: Ord>(
    design: &DesignMatrix,
    y: &[f64],
    cluster_ids: &[C],
    options: &GeeOptions,
) -> Result<GeeFit, StatsError> {
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

    let clusters = Clusters::new(&design.matrix, y, cluster_ids);
    let (xtx, xty) = clusters.normal_equations();
    require_full_column_rank_gram(&design.matrix, &xtx)?;
    let n_pairs: f64 = (0..clusters.len())
        .map(|c| {
            let k = clusters.size(c);
            0.5 * k * (k - 1.0)
        })
        .sum();
    let ddof = p as f64;
    let n_f = n as f64;
    let scale_of = |res: &Residuals| -> f64 {
        let ssr: f64 = res.sum_sq.iter().sum();
        ssr / (n_f * (n_f - ddof) / n_f)
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
    let outcome_size: f64 = y.iter().map(|v| v * v).sum::<f64>() / n_f;
    if scale_of(&res) <= 1e-24 * outcome_size.max(f64::MIN_POSITIVE) {
        let nan = f64::NAN;
        let coefficients = (0..p)
            .map(|j| GeeCoefficient {
                name: design.column_names[j].clone(),
                estimate: beta[j],
                robust_se: nan,
                robust_z: nan,
                robust_p: nan,
                naive_se: nan,
                naive_z: nan,
                naive_p: nan,
            })
            .collect();
        return Ok(GeeFit {
            coefficients,
            robust_covariance: DMatrix::from_element(p, p, nan),
            naive_covariance: DMatrix::from_element(p, p, nan),
            rho: nan,
            scale: 0.0,
            iterations: 0,
            converged: false,
            n_obs: n,
            n_clusters: clusters.len(),
        });
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
        rho = exchangeable_rho(&res, scale_of(&res), n_pairs, ddof);
        if !rho.is_finite() {
            return Err(StatsError::GeeNotFinite { rho });
        }
    }

    // Covariances at the final estimates with the final ρ (statsmodels' _covmat).
    let scale = scale_of(&res);
    let bmat = clusters.bread(rho);
    let mut cmat = DMatrix::<f64>::zeros(p, p);
    for c in 0..clusters.len() {
        let d_vinv_r = clusters.score_of(rho, &res, c);
        cmat += &d_vinv_r * d_vinv_r.transpose();
    }
    // LU with partial pivoting, as numpy's inv: nalgebra's `try_inverse` uses cofactors for
    // p ≤ 4, which lose ~1e-6 when ρ is near −1/(n − 1) and B is badly conditioned.
    let bmat_inv = bmat
        .clone()
        .lu()
        .try_inverse()
        .ok_or(StatsError::SingularDesign { rank: crate::linalg::numerical_rank(&bmat), columns: p })?;
    let robust_covariance = &bmat_inv * cmat * &bmat_inv;
    let naive_covariance = &bmat_inv * scale;
    if !rho.is_finite()
        || !robust_covariance.iter().all(|v| v.is_finite())
        || !naive_covariance.iter().all(|v| v.is_finite())
    {
        return Err(StatsError::GeeNotFinite { rho });
    }

    let coefficients = (0..p)
        .map(|j| {
            let estimate = beta[j];
            let robust_se = robust_covariance[(j, j)].sqrt();
            let naive_se = naive_covariance[(j, j)].sqrt();
            let robust_z = estimate / robust_se;
            let naive_z = estimate / naive_se;
            GeeCoefficient {
                name: design.column_names[j].clone(),
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
    Ok(GeeFit {
        coefficients,
        robust_covariance,
        naive_covariance,
        rho,
        scale,
        iterations,
        converged: score_norm >= 0.0 && score_norm < options.ctol,
        n_obs: n,
        n_clusters: clusters.len(),
    })
}

/// statsmodels' `Exchangeable.update`: pairwise residual products over the scale, with
/// `ddof` subtracted from the number of pairs.
fn exchangeable_rho(res: &Residuals, scale: f64, n_pairs: f64, ddof: f64) -> f64 {
    let cross: f64 = res.sum.iter().zip(&res.sum_sq).map(|(sum, sum_sq)| (sum * sum - sum_sq) / 2.0).sum();
    (cross / scale) / (n_pairs * (n_pairs - ddof) / n_pairs)
}
