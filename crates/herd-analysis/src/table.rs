//! Tidy result tables: named, typed columns of equal length, written by [`crate::io`] as CSV and
//! Parquet. Missing values (a statistic that is undefined for a cell) are `None`, never NaN; a table
//! with tests (`deltas`, `difficulty_spearman`, `difficulty_ols`, `seed_tests`, `robustness`, the
//! per-model claims) has a `note` column that gives the reason where a row's test is undefined
//! ([`crate::EVERY_VALUE_EQUAL`], [`crate::TOO_FEW_UNITS`], [`crate::COLLINEAR_REGRESSORS`]), so a
//! run without variation analyses rather than failing.

/// The values of one result column.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    Text(Vec<Option<String>>),
    Float(Vec<Option<f64>>),
    Integer(Vec<Option<i64>>),
}

impl ColumnValues {
    pub fn len(&self) -> usize {
        match self {
            Self::Text(v) => v.len(),
            Self::Float(v) => v.len(),
            Self::Integer(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A named result table (e.g. `seed_tests`), column order as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultTable {
    pub name: String,
    pub columns: Vec<(String, ColumnValues)>,
}

impl ResultTable {
    pub fn n_rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    pub fn column(&self, name: &str) -> Option<&ColumnValues> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// The text value of `column` in `row` (`None` when absent, null or not text).
    pub fn text(&self, column: &str, row: usize) -> Option<&str> {
        match self.column(column)? {
            ColumnValues::Text(v) => v.get(row)?.as_deref(),
            _ => None,
        }
    }

    /// The numeric value of `column` in `row` (integers widened), `None` when null or not numeric.
    pub fn number(&self, column: &str, row: usize) -> Option<f64> {
        match self.column(column)? {
            ColumnValues::Float(v) => *v.get(row)?,
            ColumnValues::Integer(v) => v.get(row)?.map(|i| i as f64),
            ColumnValues::Text(_) => None,
        }
    }
}

/// Builds a [`ResultTable`] row by row: every result table of herd's analyses and of its report
/// (quality tables) is written through it, so a NaN is a null everywhere.
pub struct TableBuilder {
    table: ResultTable,
}

/// One cell value when pushing a row.
#[derive(Clone)]
pub enum Value {
    Text(Option<String>),
    Float(f64),
    Integer(i64),
    /// Null in a column of any kind.
    Null,
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Self::Text(Some(v.to_owned()))
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Self::Text(Some(v))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Self::Integer(v)
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Self::Integer(v as i64)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Self::Integer(i64::from(v))
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl TableBuilder {
    /// `schema`: column names with a sample kind (`'t'` text, `'f'` float, `'i'` integer).
    pub fn new(name: &str, schema: &[(&str, char)]) -> Self {
        let columns = schema
            .iter()
            .map(|&(n, kind)| {
                let values = match kind {
                    't' => ColumnValues::Text(Vec::new()),
                    'i' => ColumnValues::Integer(Vec::new()),
                    _ => ColumnValues::Float(Vec::new()),
                };
                (n.to_owned(), values)
            })
            .collect();
        Self { table: ResultTable { name: name.to_owned(), columns } }
    }

    /// Appends a row; values must follow the schema's order and kinds. NaN floats become null.
    pub fn push(&mut self, row: Vec<Value>) {
        debug_assert_eq!(row.len(), self.table.columns.len());
        for ((_, column), value) in self.table.columns.iter_mut().zip(row) {
            match (column, value) {
                (ColumnValues::Text(c), Value::Text(v)) => c.push(v),
                (ColumnValues::Float(c), Value::Float(v)) => c.push(v.is_finite().then_some(v)),
                (ColumnValues::Float(c), Value::Integer(v)) => c.push(Some(v as f64)),
                (ColumnValues::Integer(c), Value::Integer(v)) => c.push(Some(v)),
                (ColumnValues::Text(c), Value::Integer(v)) => c.push(Some(v.to_string())),
                (ColumnValues::Integer(c), _) => c.push(None),
                (ColumnValues::Text(c), Value::Float(v)) => c.push(Some(v.to_string())),
                (ColumnValues::Float(c), Value::Text(_)) => c.push(None),
                (ColumnValues::Text(c), Value::Null) => c.push(None),
                (ColumnValues::Float(c), Value::Null) => c.push(None),
            }
        }
    }

    pub fn finish(self) -> ResultTable {
        self.table
    }
}

/// Row indices of `table` where every `(column, value)` matches (text columns).
pub fn rows_where(table: &ResultTable, conditions: &[(&str, &str)]) -> Vec<usize> {
    (0..table.n_rows()).filter(|&r| conditions.iter().all(|(c, v)| table.text(c, r) == Some(*v))).collect()
}

/// Takes tables out of `tables` by name; a missing one is an error naming `origin`.
pub(crate) fn taker(
    tables: Vec<ResultTable>,
    origin: &str,
) -> impl FnMut(&str) -> Result<ResultTable, crate::AnalysisError> {
    let mut tables: Vec<Option<ResultTable>> = tables.into_iter().map(Some).collect();
    let origin = origin.to_owned();
    move |name| {
        tables.iter_mut().find(|t| t.as_ref().is_some_and(|t| t.name == name)).and_then(Option::take).ok_or_else(|| {
            crate::AnalysisError::Io {
                file: origin.clone(),
                problem: format!("has no `{name}` table\n  fix: run `herd analyze` again to rewrite the analysis"),
            }
        })
    }
}
