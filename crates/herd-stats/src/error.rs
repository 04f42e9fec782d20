use thiserror::Error;

/// Every way a herd-stats function can refuse its input. No function in this crate panics on
/// user data; it returns one of these instead.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    #[error("input is empty")]
    EmptyInput,
    #[error("length mismatch: {what} has {got} entries, expected {expected}")]
    LengthMismatch { what: &'static str, expected: usize, got: usize },
    #[error("input contains NaN or an infinite value ({what})")]
    NonFinite { what: &'static str },
    #[error("need at least {needed} observations, got {got}")]
    TooFewObservations { needed: usize, got: usize },
    #[error("every difference is zero; the signed-rank statistic is undefined")]
    AllZeroDifferences,
    #[error("input is constant ({what}); the statistic is undefined")]
    ConstantInput { what: &'static str },
    #[error("design matrix is singular (rank {rank} < {columns} columns)")]
    SingularDesign { rank: usize, columns: usize },
    #[error("p-value {0} is outside [0, 1]")]
    InvalidPValue(f64),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("formula error: {0}")]
    Formula(String),
    #[error("unknown column {0:?} in formula")]
    UnknownColumn(String),
    #[error("GEE estimate is not finite (working correlation {rho})")]
    GeeNotFinite { rho: f64 },

    #[error("bootstrap statistic returned a non-finite value in resample {resample}")]
    NonFiniteStatistic { resample: usize },
}

pub(crate) fn check_finite(values: &[f64], what: &'static str) -> Result<(), StatsError> {
    if values.iter().all(|v| v.is_finite()) { Ok(()) } else { Err(StatsError::NonFinite { what }) }
}

pub(crate) fn check_same_length(what: &'static str, expected: usize, got: usize) -> Result<(), StatsError> {
    if expected == got { Ok(()) } else { Err(StatsError::LengthMismatch { what, expected, got }) }
}
