//! Values as InfluxQL sees them: typed points of a field, and the single values that results,
//! conditions and arithmetic work on.
//!
//! A field keeps one type per series; the columns here hold one type each so that the reducers
//! run over plain slices (a mean over a million floats is a loop over `&[f64]`, not a match per
//! point).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// One value of a result row or an expression. `Null` is InfluxQL's missing value (a field absent
/// from a row, an empty bucket under `fill(null)`).
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    Null,
    Float(f64),
    Integer(i64),
    Unsigned(u64),
    Boolean(bool),
    /// Shared: a tag's value selected on every row of a table, or a string field copied from
    /// row to row through subqueries, is one allocation (a `String` a row cost a malloc and a
    /// free per row: 432,000 of them in TSBS breakdown-frequency at scale 100).
    String(Arc<str>),
}

impl FieldValue {
    pub fn is_null(&self) -> bool {
        matches!(self, FieldValue::Null)
    }

    /// The value as a float, for arithmetic and numeric comparison; `None` for non-numbers.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            FieldValue::Float(x) => Some(x),
            FieldValue::Integer(x) => Some(x as f64),
            FieldValue::Unsigned(x) => Some(x as f64),
            _ => None,
        }
    }

    /// InfluxQL's comparison of two values: numbers compare numerically across types, strings
    /// and booleans only with their own kind; anything else (a null, a string against a number)
    /// does not compare, and a condition on it is false.
    #[inline]
    pub fn compare(&self, other: &FieldValue) -> Option<Ordering> {
        match (self, other) {
            (FieldValue::Float(a), FieldValue::Float(b)) => a.partial_cmp(b),
            (FieldValue::Integer(a), FieldValue::Integer(b)) => Some(a.cmp(b)),
            (FieldValue::Unsigned(a), FieldValue::Unsigned(b)) => Some(a.cmp(b)),
            (FieldValue::String(a), FieldValue::String(b)) => Some(a.cmp(b)),
            (FieldValue::Boolean(a), FieldValue::Boolean(b)) => Some(a.cmp(b)),
            _ => self.as_f64()?.partial_cmp(&other.as_f64()?),
        }
    }
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Null => f.write_str("null"),
            FieldValue::Float(x) => write!(f, "{x}"),
            FieldValue::Integer(x) => write!(f, "{x}"),
            FieldValue::Unsigned(x) => write!(f, "{x}"),
            FieldValue::Boolean(x) => write!(f, "{x}"),
            FieldValue::String(x) => f.write_str(x),
        }
    }
}

/// The values of one field over a run of points, one type throughout.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    Float(Vec<f64>),
    Integer(Vec<i64>),
    Unsigned(Vec<u64>),
    Boolean(Vec<bool>),
    String(Vec<String>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Float(v) => v.len(),
            Column::Integer(v) => v.len(),
            Column::Unsigned(v) => v.len(),
            Column::Boolean(v) => v.len(),
            Column::String(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> FieldValue {
        match self {
            Column::Float(v) => FieldValue::Float(v[i]),
            Column::Integer(v) => FieldValue::Integer(v[i]),
            Column::Unsigned(v) => FieldValue::Unsigned(v[i]),
            Column::Boolean(v) => FieldValue::Boolean(v[i]),
            Column::String(v) => FieldValue::String(Arc::from(v[i].as_str())),
        }
    }

    /// An empty column of the same type.
    pub fn empty_like(&self) -> Column {
        match self {
            Column::Float(_) => Column::Float(Vec::new()),
            Column::Integer(_) => Column::Integer(Vec::new()),
            Column::Unsigned(_) => Column::Unsigned(Vec::new()),
            Column::Boolean(_) => Column::Boolean(Vec::new()),
            Column::String(_) => Column::String(Vec::new()),
        }
    }

    /// Values `range` of this column.
    pub fn slice(&self, range: std::ops::Range<usize>) -> ColumnSlice<'_> {
        match self {
            Column::Float(v) => ColumnSlice::Float(&v[range]),
            Column::Integer(v) => ColumnSlice::Integer(&v[range]),
            Column::Unsigned(v) => ColumnSlice::Unsigned(&v[range]),
            Column::Boolean(v) => ColumnSlice::Boolean(&v[range]),
            Column::String(v) => ColumnSlice::String(&v[range]),
        }
    }

    pub fn as_slice(&self) -> ColumnSlice<'_> {
        self.slice(0..self.len())
    }
}

/// A borrowed run of one field's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ColumnSlice<'a> {
    Float(&'a [f64]),
    Integer(&'a [i64]),
    Unsigned(&'a [u64]),
    Boolean(&'a [bool]),
    String(&'a [String]),
}

impl ColumnSlice<'_> {
    pub fn len(&self) -> usize {
        match self {
            ColumnSlice::Float(v) => v.len(),
            ColumnSlice::Integer(v) => v.len(),
            ColumnSlice::Unsigned(v) => v.len(),
            ColumnSlice::Boolean(v) => v.len(),
            ColumnSlice::String(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends values `range` to `out`, the last first when `reversed`: one match on the type
    /// for the run, where a [`ColumnSlice::get`] a value matched every point (a sixth of a
    /// TSBS low-fuel query, whose 1,024-point rounds are copied to be filtered).
    pub fn push_values(&self, range: std::ops::Range<usize>, reversed: bool, out: &mut Vec<FieldValue>) {
        fn push<T: Copy>(values: &[T], reversed: bool, out: &mut Vec<FieldValue>, make: fn(T) -> FieldValue) {
            if reversed {
                out.extend(values.iter().rev().map(|&x| make(x)));
            } else {
                out.extend(values.iter().map(|&x| make(x)));
            }
        }
        match self {
            ColumnSlice::Float(v) => push(&v[range], reversed, out, FieldValue::Float),
            ColumnSlice::Integer(v) => push(&v[range], reversed, out, FieldValue::Integer),
            ColumnSlice::Unsigned(v) => push(&v[range], reversed, out, FieldValue::Unsigned),
            ColumnSlice::Boolean(v) => push(&v[range], reversed, out, FieldValue::Boolean),
            ColumnSlice::String(v) => {
                let string = |s: &String| FieldValue::String(Arc::from(s.as_str()));
                if reversed {
                    out.extend(v[range].iter().rev().map(string));
                } else {
                    out.extend(v[range].iter().map(string));
                }
            }
        }
    }

    pub fn get(&self, i: usize) -> FieldValue {
        match self {
            ColumnSlice::Float(v) => FieldValue::Float(v[i]),
            ColumnSlice::Integer(v) => FieldValue::Integer(v[i]),
            ColumnSlice::Unsigned(v) => FieldValue::Unsigned(v[i]),
            ColumnSlice::Boolean(v) => FieldValue::Boolean(v[i]),
            ColumnSlice::String(v) => FieldValue::String(Arc::from(v[i].as_str())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_across_types_and_strings_only_with_strings() {
        assert_eq!(FieldValue::Integer(2).compare(&FieldValue::Float(1.5)), Some(Ordering::Greater));
        assert_eq!(FieldValue::Unsigned(u64::MAX).compare(&FieldValue::Unsigned(u64::MAX - 1)), Some(Ordering::Greater));
        assert_eq!(FieldValue::String("a".into()).compare(&FieldValue::Float(1.0)), None);
        assert_eq!(FieldValue::Null.compare(&FieldValue::Null), None);
        assert_eq!(FieldValue::String("a".into()).compare(&FieldValue::String("b".into())), Some(Ordering::Less));
    }

    #[test]
    fn a_column_slice_reads_its_own_range() {
        let column = Column::Integer(vec![1, 2, 3, 4]);
        let slice = column.slice(1..3);
        assert_eq!(slice.len(), 2);
        assert_eq!(slice.get(0), FieldValue::Integer(2));
        assert_eq!(slice.get(1), FieldValue::Integer(3));
    }

    #[test]
    fn a_run_of_values_is_pushed_in_order_or_reversed_as_get_gives_them() {
        let strings = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let columns = [
            ColumnSlice::Float(&[1.5, 2.5, 3.5]),
            ColumnSlice::Integer(&[1, 2, 3]),
            ColumnSlice::Unsigned(&[1, 2, 3]),
            ColumnSlice::Boolean(&[true, false, true]),
            ColumnSlice::String(&strings),
        ];
        for column in columns {
            let mut out = vec![FieldValue::Null];
            column.push_values(1..3, false, &mut out);
            assert_eq!(out, [FieldValue::Null, column.get(1), column.get(2)], "{column:?}");
            let mut out = Vec::new();
            column.push_values(0..3, true, &mut out);
            assert_eq!(out, [column.get(2), column.get(1), column.get(0)], "{column:?}");
        }
    }
}
