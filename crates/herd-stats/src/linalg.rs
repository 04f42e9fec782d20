//! Shared linear-algebra checks.

use nalgebra::DMatrix;

use crate::error::StatsError;

/// Numerical rank with numpy's `matrix_rank` tolerance (σ_max · max(n, p) · ε).
pub(crate) fn numerical_rank(x: &DMatrix<f64>) -> usize {
    // nalgebra's SVD never returns on a matrix holding NaN or ±inf; such a matrix has no rank to
    // report, and every caller is already on its error path.
    if !x.iter().all(|v| v.is_finite()) {
        return 0;
    }
    let singular_values = x.clone().svd(false, false).singular_values;
    let largest = singular_values.iter().copied().fold(0.0, f64::max);
    let tolerance = largest * x.nrows().max(x.ncols()) as f64 * f64::EPSILON;
    singular_values.iter().filter(|&&s| s > tolerance).count()
}

/// Errors unless `x` has full column rank.
pub(crate) fn require_full_column_rank(x: &DMatrix<f64>) -> Result<(), StatsError> {
    let rank = numerical_rank(x);
    if rank < x.ncols() { Err(StatsError::SingularDesign { rank, columns: x.ncols() }) } else { Ok(()) }
}

/// As [`require_full_column_rank`], given `gram` = X'X: when X'X is well conditioned its
/// eigenvalues (σ² of X, each within ~n·ε·λ_max) put every singular value far above numpy's
/// tolerance σ_max·max(n, p)·ε, so the SVD of the tall X is needed only for nearly singular designs.
pub(crate) fn require_full_column_rank_gram(x: &DMatrix<f64>, gram: &DMatrix<f64>) -> Result<(), StatsError> {
    let eigenvalues = gram.clone().symmetric_eigenvalues();
    let largest = eigenvalues.iter().copied().fold(0.0, f64::max);
    let smallest = eigenvalues.iter().copied().fold(f64::INFINITY, f64::min);
    let margin = 1e-8_f64.max(1e3 * x.nrows() as f64 * f64::EPSILON);
    if largest > 0.0 && smallest > margin * largest { Ok(()) } else { require_full_column_rank(x) }
}

/// Inverse of a symmetric positive-definite matrix (Cholesky), or a singular-design error.
pub(crate) fn spd_inverse(a: &DMatrix<f64>) -> Result<DMatrix<f64>, StatsError> {
    a.clone()
        .cholesky()
        .map(|c| c.inverse())
        .or_else(|| a.clone().try_inverse())
        .ok_or(StatsError::SingularDesign { rank: numerical_rank(a), columns: a.ncols() })
}
