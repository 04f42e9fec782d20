//! A small Wilkinson-formula helper for numeric columns.
//!
//! `points ~ same_group * minority_decider` gives the columns `Intercept`, `same_group`,
//! `minority_decider`, `same_group:minority_decider`, named and ordered as patsy 1.0 does for
//! numeric factors: intercept first, then terms in order of appearance after expanding `*`
//! left to right (`a*b*c` → a, b, a:b, c, a:c, b:c, a:b:c); a repeated term keeps its first
//! spelling (`b:a + a:b` → `b:a`). Supported syntax: `+` between terms, `a:b` for an interaction,
//! `a*b` for `a + b + a:b` (any number of factors), `1` / `0` / `- 1` for the intercept.
//! Every column is numeric (0/1 indicators or measurements); there is no categorical coding.

use nalgebra::DMatrix;

use crate::error::{StatsError, check_finite, check_same_length};

/// Named columns of a design matrix, one row per observation.
#[derive(Debug, Clone, PartialEq)]
pub struct DesignMatrix {
    pub column_names: Vec<String>,
    pub matrix: DMatrix<f64>,
}

impl DesignMatrix {
    /// Checks that names match the column count and every entry is finite.
    pub fn new(column_names: Vec<String>, matrix: DMatrix<f64>) -> Result<Self, StatsError> {
        check_same_length("column_names", matrix.ncols(), column_names.len())?;
        check_finite(matrix.as_slice(), "design matrix")?;
        Ok(Self { column_names, matrix })
    }

    /// Builds from row-major rows.
    pub fn from_rows(column_names: Vec<String>, rows: &[Vec<f64>]) -> Result<Self, StatsError> {
        let p = column_names.len();
        for row in rows {
            check_same_length("design row", p, row.len())?;
        }
        let matrix = DMatrix::from_fn(rows.len(), p, |i, j| rows[i][j]);
        Self::new(column_names, matrix)
    }

    pub fn n_obs(&self) -> usize {
        self.matrix.nrows()
    }

    pub fn n_columns(&self) -> usize {
        self.matrix.ncols()
    }

    /// Index of a named column.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.column_names.iter().position(|c| c == name)
    }

    /// Whether some column is constant and nonzero (statsmodels' `k_constant > 0`).
    pub fn has_constant(&self) -> bool {
        (0..self.n_columns()).any(|j| {
            let col = self.matrix.column(j);
            col[0] != 0.0 && col.iter().all(|&v| v == col[0])
        })
    }
}

/// A parsed formula: response name, whether there is an intercept, and the terms, each a list
/// of factor (column) names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formula {
    pub response: String,
    pub intercept: bool,
    pub terms: Vec<Vec<String>>,
}

impl Formula {
    pub fn parse(formula: &str) -> Result<Self, StatsError> {
        let (lhs, rhs) =
            formula.split_once('~').ok_or_else(|| StatsError::Formula(format!("missing '~' in {formula:?}")))?;
        let response = lhs.trim();
        if !is_name(response) {
            return Err(StatsError::Formula(format!("bad response {response:?}")));
        }
        let mut intercept = true;
        let mut terms: Vec<Vec<String>> = Vec::new();
        // Turn "a - 1" into "a + -1" so that '+' splits everything.
        let rhs = rhs.replace('-', "+-");
        for (position, raw) in rhs.split('+').enumerate() {
            let piece: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
            match piece.as_str() {
                // A leading "- 1" leaves an empty piece before it.
                "" if position == 0 && rhs.trim_start().starts_with("+-") => continue,
                "" => return Err(StatsError::Formula(format!("empty term in {formula:?}"))),
                "1" => intercept = true,
                "0" | "-1" => intercept = false,
                _ if piece.starts_with('-') => {
                    return Err(StatsError::Formula(format!("only '- 1' may be subtracted, got {piece:?}")));
                }
                _ => {
                    for term in expand_product(&piece)? {
                        if !terms.iter().any(|t| same_factors(t, &term)) {
                            terms.push(term);
                        }
                    }
                }
            }
        }
        Ok(Self { response: response.to_owned(), intercept, terms })
    }

    /// Column names of the design matrix, patsy style.
    pub fn column_names(&self) -> Vec<String> {
        let mut names = Vec::with_capacity(self.terms.len() + 1);
        if self.intercept {
            names.push("Intercept".to_owned());
        }
        names.extend(self.terms.iter().map(|t| t.join(":")));
        names
    }

    /// Builds the design matrix and the response from named columns of equal length.
    pub fn build(&self, data: &[(&str, &[f64])]) -> Result<(DesignMatrix, Vec<f64>), StatsError> {
        let column = |name: &str| -> Result<&[f64], StatsError> {
            data.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| StatsError::UnknownColumn(name.to_owned()))
        };
        let response = column(&self.response)?;
        let n = response.len();
        if n == 0 {
            return Err(StatsError::EmptyInput);
        }
        check_finite(response, "response")?;
        // Columns are written one after another: nalgebra's storage is column-major.
        let p = usize::from(self.intercept) + self.terms.len();
        let mut storage = Vec::with_capacity(n * p);
        if self.intercept {
            storage.resize(n, 1.0);
        }
        for term in &self.terms {
            let start = storage.len();
            storage.resize(start + n, 1.0);
            for factor in term {
                let factor_values = column(factor)?;
                check_same_length("formula column", n, factor_values.len())?;
                for (v, f) in storage[start..].iter_mut().zip(factor_values) {
                    *v *= f;
                }
            }
        }
        let matrix = DMatrix::from_vec(n, p, storage);
        Ok((DesignMatrix::new(self.column_names(), matrix)?, response.to_vec()))
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && !s.chars().next().is_some_and(|c| c.is_ascii_digit())
}

fn same_factors(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|f| b.contains(f))
}

/// `a*b*c` → patsy's left-to-right expansion: `x*q` is `x + q + x:q`, so `a*b*c` gives
/// a, b, a:b, c, a:c, b:c, a:b:c.
fn expand_product(piece: &str) -> Result<Vec<Vec<String>>, StatsError> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for part in piece.split('*') {
        let mut factors: Vec<String> = Vec::new();
        for f in part.split(':') {
            if !is_name(f) {
                return Err(StatsError::Formula(format!("bad factor name {f:?}")));
            }
            if !factors.iter().any(|g| g == f) {
                factors.push(f.to_owned());
            }
        }
        let mut next = out.clone();
        next.push(factors.clone());
        for term in &out {
            let mut product = term.clone();
            for f in &factors {
                if !product.contains(f) {
                    product.push(f.clone());
                }
            }
            next.push(product);
        }
        out = Vec::new();
        for term in next {
            if !out.iter().any(|t| same_factors(t, &term)) {
                out.push(term);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn interaction_names_match_patsy() {
        let f = Formula::parse("points ~ same_group * minority_decider").unwrap();
        assert_eq!(f.column_names(), ["Intercept", "same_group", "minority_decider", "same_group:minority_decider"]);
    }

    #[test]
    fn three_way_and_no_intercept() {
        // Expected names are patsy 1.0.3's for numeric columns.
        let f = Formula::parse("y ~ a*b*c - 1").unwrap();
        assert_eq!(f.column_names(), ["a", "b", "a:b", "c", "a:c", "b:c", "a:b:c"]);
        let g = Formula::parse("y ~ a:b + c").unwrap();
        assert_eq!(g.column_names(), ["Intercept", "a:b", "c"]);
        let h = Formula::parse("y ~ c + a*b - 1").unwrap();
        assert_eq!(h.column_names(), ["c", "a", "b", "a:b"]);
        let k = Formula::parse("y ~ b:a + a:b + a").unwrap();
        assert_eq!(k.column_names(), ["Intercept", "b:a", "a"]);
        let m = Formula::parse("y ~ a*b*c*b").unwrap();
        assert_eq!(m.column_names().len(), 8);
    }

    #[test]
    fn build_multiplies_columns() {
        let f = Formula::parse("y ~ a * b").unwrap();
        let (x, y) = f.build(&[("y", &[1.0, 2.0]), ("a", &[1.0, 0.0]), ("b", &[3.0, 4.0])]).unwrap();
        assert_eq!(y, vec![1.0, 2.0]);
        assert_eq!(x.matrix.row(0).iter().copied().collect::<Vec<_>>(), [1.0, 1.0, 3.0, 3.0]);
        assert_eq!(x.matrix.row(1).iter().copied().collect::<Vec<_>>(), [1.0, 0.0, 4.0, 0.0]);
        assert!(f.build(&[("y", &[1.0])]).is_err());
    }

    #[test]
    fn rejects_garbage() {
        assert!(Formula::parse("y a").is_err());
        assert!(Formula::parse("y ~ a + ").is_err());
        assert!(Formula::parse("y ~ a - b").is_err());
        assert!(Formula::parse("y ~ + a").is_err());
        assert_eq!(Formula::parse("y ~ -1 + a").unwrap().column_names(), ["a"]);
    }
}
