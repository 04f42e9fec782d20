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

use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector};

use crate::distributions::{Alternative, normal_p_value};
use crate::error::{StatsError, check_finite, check_same_length};
use crate::formula::DesignMatrix;
use crate::linalg::{require_full_column_rank, spd_inverse};

/// statsmodels' `fit(maxiter=60, ctol=1e-6)` defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeeOptions {
    pub max_iter: usize,
    pub ctol: f64,
}

impl Default for GeeOptions {
    fn default() -> Self {
        Self {
            max_iter: 60,
            ctol: 1e-6,
        }
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

struct Cluster {
    x: DMatrix<f64>,
    y: DVector<f64>,
}

impl Cluster {
    /// Vᵢ⁻¹ applied to the columns of `m` for the exchangeable correlation (statsmodels'
    /// closed form; the variance function of the Gaussian family is 1).
    fn solve(&self, rho: f64, m: &DMatrix<f64>) -> DMatrix<f64> {
        let k = self.y.len() as f64;
        let c = rho / (1.0 - rho) / (1.0 + rho * (k - 1.0));
        let mut out = m / (1.0 - rho);
        for (j, column_sum) in m.row_sum().iter().enumerate() {
            for v in out.column_mut(j).iter_mut() {
                *v -= c * column_sum;
            }
        }
        out
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
        return Err(StatsError::TooFewObservations {
            needed: p + 1,
            got: n,
        });
    }
    require_full_column_rank(&design.matrix)?;

    let mut rows_by_cluster: BTreeMap<&C, Vec<usize>> = BTreeMap::new();
    for (i, id) in cluster_ids.iter().enumerate() {
        rows_by_cluster.entry(id).or_default().push(i);
    }
    let clusters: Vec<Cluster> = rows_by_cluster
        .values()
        .map(|rows| Cluster {
            x: design.matrix.select_rows(rows),
            y: DVector::from_iterator(rows.len(), rows.iter().map(|&i| y[i])),
        })
        .collect();
    let n_pairs: f64 = clusters
        .iter()
        .map(|c| {
            let k = c.y.len() as f64;
            0.5 * k * (k - 1.0)
        })
        .sum();
    let ddof = p as f64;
    let n_f = n as f64;

    let residuals = |beta: &DVector<f64>| -> Vec<DVector<f64>> {
        clusters.iter().map(|c| &c.y - &c.x * beta).collect()
    };
    let scale_of = |res: &[DVector<f64>]| -> f64 {
        let ssr: f64 = res.iter().map(|r| r.norm_squared()).sum();
        ssr / (n_f * (n_f - ddof) / n_f)
    };

    // Start: OLS (statsmodels fits a Gaussian GLM, i.e. OLS).
    let x = &design.matrix;
    let y_vec = DVector::from_column_slice(y);
    let xtx_inv = spd_inverse(&(x.transpose() * x))?;
    let mut beta = &xtx_inv * (x.transpose() * &y_vec);
    let mut rho = 0.0;
    let mut score_norm = -1.0;
    let mut iterations = 0;
    for iteration in 0..options.max_iter {
        iterations = iteration + 1;
        let res = residuals(&beta);
        let mut bmat = DMatrix::<f64>::zeros(p, p);
        let mut score = DVector::<f64>::zeros(p);
        for (c, r) in clusters.iter().zip(&res) {
            bmat += c.x.transpose() * c.solve(rho, &c.x);
            let r_mat = DMatrix::from_column_slice(r.len(), 1, r.as_slice());
            score += (c.x.transpose() * c.solve(rho, &r_mat)).column(0);
        }
        let update = bmat
            .clone()
            .lu()
            .solve(&score)
            .ok_or(StatsError::SingularDesign {
                rank: crate::linalg::numerical_rank(&bmat),
                columns: p,
            })?;
        beta += update;
        score_norm = score.norm();
        if !score_norm.is_finite() || !beta.iter().all(|b| b.is_finite()) {
            return Err(StatsError::GeeNotFinite { rho });
        }
        // ρ is updated after every iteration, so "at least one ρ update" means iteration > 0.
        if score_norm < options.ctol && iteration > 0 {
            break;
        }
        let res = residuals(&beta);
        rho = exchangeable_rho(&res, scale_of(&res), n_pairs, ddof);
    }

    // Covariances at the final estimates with the final ρ (statsmodels' _covmat).
    let res = residuals(&beta);
    let scale = scale_of(&res);
    let mut bmat = DMatrix::<f64>::zeros(p, p);
    let mut cmat = DMatrix::<f64>::zeros(p, p);
    for (c, r) in clusters.iter().zip(&res) {
        bmat += c.x.transpose() * c.solve(rho, &c.x);
        let r_mat = DMatrix::from_column_slice(r.len(), 1, r.as_slice());
        let d_vinv_r = c.x.transpose() * c.solve(rho, &r_mat);
        cmat += &d_vinv_r * d_vinv_r.transpose();
    }
    let bmat_inv = bmat
        .clone()
        .try_inverse()
        .ok_or(StatsError::SingularDesign {
            rank: crate::linalg::numerical_rank(&bmat),
            columns: p,
        })?;
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
fn exchangeable_rho(res: &[DVector<f64>], scale: f64, n_pairs: f64, ddof: f64) -> f64 {
    let cross: f64 = res
        .iter()
        .map(|r| {
            let sum = r.sum();
            (sum * sum - r.norm_squared()) / 2.0
        })
        .sum();
    (cross / scale) / (n_pairs * (n_pairs - ddof) / n_pairs)
}
