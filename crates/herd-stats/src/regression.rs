//! Ordinary least squares, as statsmodels `OLS(y, X).fit()` (non-robust covariance), with each
//! coefficient's heteroscedasticity-robust HC3 standard error and t-test beside it, as
//! `OLS(y, X).fit(cov_type="HC3", use_t=True)`.

use nalgebra::DVector;

use crate::distributions::{Alternative, students_t_p_value};
use crate::error::{StatsError, check_finite, check_same_length};
use crate::formula::DesignMatrix;
use crate::linalg::{require_full_column_rank, spd_inverse};

/// One OLS coefficient with its t test (df = n − p).
#[derive(Debug, Clone, PartialEq)]
pub struct OlsCoefficient {
    pub name: String,
    pub estimate: f64,
    pub se: f64,
    pub t: f64,
    pub p_value: f64,
    /// HC3 standard error (MacKinnon and White): the sandwich with each squared residual inflated by
    /// 1/(1 − leverage)²; NaN where an observation has leverage 1.
    pub se_hc3: f64,
    /// Two-sided p of estimate / `se_hc3` on Student's t with the residual degrees of freedom.
    pub p_hc3: f64,
}

/// An OLS fit.
#[derive(Debug, Clone, PartialEq)]
pub struct OlsFit {
    pub coefficients: Vec<OlsCoefficient>,
    /// R² about the mean when the design has a constant column, uncentered otherwise
    /// (statsmodels' convention).
    pub r_squared: f64,
    pub adj_r_squared: f64,
    /// Residual variance SSR/(n − p).
    pub scale: f64,
    pub df_resid: f64,
    pub n_obs: usize,
}

impl OlsFit {
    pub fn coefficient(&self, name: &str) -> Option<&OlsCoefficient> {
        self.coefficients.iter().find(|c| c.name == name)
    }
}

/// Fits `y = Xβ + ε`. A rank-deficient design is an error (statsmodels would silently use a
/// pseudo-inverse).
pub fn ols(design: &DesignMatrix, y: &[f64]) -> Result<OlsFit, StatsError> {
    let x = &design.matrix;
    let (n, p) = (x.nrows(), x.ncols());
    if n == 0 || p == 0 {
        return Err(StatsError::EmptyInput);
    }
    check_same_length("y", n, y.len())?;
    check_finite(y, "y")?;
    if n <= p {
        return Err(StatsError::TooFewObservations { needed: p + 1, got: n });
    }
    require_full_column_rank(x)?;
    let y_vec = DVector::from_column_slice(y);
    // QR is better conditioned than the normal equations for the coefficients.
    let qr = x.clone().qr();
    let qty = qr.q().transpose() * &y_vec;
    let beta = qr.r().solve_upper_triangular(&qty).ok_or(StatsError::SingularDesign { rank: 0, columns: p })?;
    let residuals = &y_vec - x * &beta;
    let ssr = residuals.norm_squared();
    let df_resid = (n - p) as f64;
    let scale = ssr / df_resid;
    let xtx_inv = spd_inverse(&(x.transpose() * x))?;
    // HC3: (X'X)⁻¹ X' diag(eᵢ² / (1 − hᵢ)²) X (X'X)⁻¹, hᵢ = xᵢ'(X'X)⁻¹xᵢ.
    let mut meat = nalgebra::DMatrix::<f64>::zeros(p, p);
    for i in 0..n {
        let row = x.row(i);
        let leverage = (row * &xtx_inv * row.transpose())[(0, 0)];
        let weight = residuals[i] * residuals[i] / ((1.0 - leverage) * (1.0 - leverage));
        meat += row.transpose() * row * weight;
    }
    let hc3 = &xtx_inv * meat * &xtx_inv;
    let has_constant = design.has_constant();
    let tss = if has_constant {
        let mean = y.iter().sum::<f64>() / n as f64;
        y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>()
    } else {
        y.iter().map(|v| v * v).sum::<f64>()
    };
    if tss == 0.0 {
        return Err(StatsError::ConstantInput { what: "y" });
    }
    let r_squared = 1.0 - ssr / tss;
    let df_model_plus_const = if has_constant { 1.0 } else { 0.0 };
    let adj_r_squared = 1.0 - (n as f64 - df_model_plus_const) / df_resid * (1.0 - r_squared);
    let coefficients = (0..p)
        .map(|j| {
            let se = (scale * xtx_inv[(j, j)]).sqrt();
            let t = beta[j] / se;
            let se_hc3 = hc3[(j, j)].sqrt();
            let p_hc3 = if se_hc3.is_finite() && se_hc3 > 0.0 {
                students_t_p_value(beta[j] / se_hc3, df_resid, Alternative::TwoSided)
            } else {
                f64::NAN
            };
            OlsCoefficient {
                name: design.column_names[j].clone(),
                estimate: beta[j],
                se,
                t,
                p_value: students_t_p_value(t, df_resid, Alternative::TwoSided),
                se_hc3,
                p_hc3,
            }
        })
        .collect();
    Ok(OlsFit { coefficients, r_squared, adj_r_squared, scale, df_resid, n_obs: n })
}
