//! The rows a SELECT works on: one table per series of tags (a measurement's fields joined on
//! time, or one series of a subquery's result), read from storage within the query's range.

use crate::error::QueryError;
use crate::eval::{tag_condition, Regexes, Row, Verdict};
use crate::result::ResultSeries;
use crate::storage::{Storage, StoredSeries};
use crate::time::TimeRange;
use crate::value::{ColumnSlice, FieldValue};
use sensordb_influxql::Expr;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Rows of one series of tags, sorted by time.
#[derive(Debug)]
pub(crate) struct Table {
    pub name: Arc<str>,
    pub tags: Arc<[(String, String)]>,
    pub columns: Vec<Arc<str>>,
    pub times: Vec<i64>,
    /// `rows[i][c]` is column `c` at `times[i]`.
    pub rows: Vec<Vec<FieldValue>>,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| &**c == name)
    }

    pub fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Row `index` of `table`, as expressions see it.
pub(crate) struct TableRow<'a> {
    pub table: &'a Table,
    pub index: usize,
}

impl Row for TableRow<'_> {
    fn time(&self) -> i64 {
        self.table.times[self.index]
    }
    fn tag(&self, name: &str) -> Option<&str> {
        self.table.tag(name)
    }
    fn field(&self, name: &str) -> Option<FieldValue> {
        self.table.column(name).map(|c| self.table.rows[self.index][c].clone())
    }
}

/// Counts the points a query reads against its limit.
pub(crate) struct Budget {
    pub max_points: u64,
    pub used: Cell<u64>,
}

impl Budget {
    pub fn take(&self, points: usize) -> Result<(), QueryError> {
        let used = self.used.get() + points as u64;
        self.used.set(used);
        if used > self.max_points {
            return Err(QueryError::Limit(format!(
                "query would scan more than {} points (max_points_scanned); narrow its time range or series",
                self.max_points
            )));
        }
        Ok(())
    }
}

/// A tag set, sorted by key.
pub(crate) type Tags = Arc<[(String, String)]>;

/// The series of a measurement grouped into series of tags: tags -> field name -> series.
pub(crate) fn tag_series(series: Vec<StoredSeries>) -> BTreeMap<Tags, BTreeMap<Arc<str>, StoredSeries>> {
    let mut by_tags: BTreeMap<Tags, BTreeMap<Arc<str>, StoredSeries>> = BTreeMap::new();
    for s in series {
        by_tags.entry(s.tags.clone()).or_default().insert(s.field.clone(), s);
    }
    by_tags
}

/// Reads the tables of `measurement` whose tags can satisfy `condition`, with the columns
/// `wanted` (`None`: every field), over `range`.
#[allow(clippy::too_many_arguments)] // the parts of one read, named at the call
pub(crate) fn read_measurement(
    storage: &dyn Storage,
    database: &str,
    measurement: &str,
    wanted: Option<&[String]>,
    condition: Option<&Expr>,
    regexes: &Regexes,
    range: TimeRange,
    budget: &Budget,
) -> Result<Vec<Table>, QueryError> {
    let all = storage.series(database, Some(measurement));
    let field_names: std::collections::BTreeSet<Arc<str>> = all.iter().map(|s| s.field.clone()).collect();
    let is_field = |name: &str| field_names.contains(name);
    let mut tables = Vec::new();
    for (tags, fields) in tag_series(all) {
        if let Some(condition) = condition {
            if tag_condition(condition, &tags, &is_field, regexes) == Verdict::False {
                continue;
            }
        }
        let columns: Vec<Arc<str>> = match wanted {
            None => field_names.iter().cloned().collect(),
            Some(names) => field_names.iter().filter(|f| names.iter().any(|n| n.as_str() == &***f)).cloned().collect(),
        };
        let mut per_column = Vec::with_capacity(columns.len());
        for column in &columns {
            let mut times = Vec::new();
            let mut values = Vec::new();
            if let Some(series) = fields.get(column) {
                if !range.is_empty() {
                    let mut failed = Ok(());
                    storage.read(series, range.from, range.to, &mut |t: &[i64], v: ColumnSlice<'_>| {
                        if failed.is_err() {
                            return;
                        }
                        failed = budget.take(t.len());
                        times.extend_from_slice(t);
                        values.extend((0..v.len()).map(|i| v.get(i)));
                    })?;
                    failed?;
                }
            }
            per_column.push((times, values));
        }
        let (times, rows) = join_on_time(per_column);
        if !times.is_empty() {
            tables.push(Table { name: Arc::from(measurement), tags, columns, times, rows });
        }
    }
    Ok(tables)
}

/// Joins per-column sorted points into rows, null where a column has no point at a time.
fn join_on_time(columns: Vec<(Vec<i64>, Vec<FieldValue>)>) -> (Vec<i64>, Vec<Vec<FieldValue>>) {
    let mut positions = vec![0usize; columns.len()];
    let mut times = Vec::new();
    let mut rows = Vec::new();
    loop {
        let next = columns.iter().zip(&positions).filter_map(|((t, _), &p)| t.get(p).copied()).min();
        let Some(time) = next else { break };
        let mut row = Vec::with_capacity(columns.len());
        for ((t, v), p) in columns.iter().zip(positions.iter_mut()) {
            if t.get(*p) == Some(&time) {
                row.push(v[*p].clone());
                *p += 1;
            } else {
                row.push(FieldValue::Null);
            }
        }
        times.push(time);
        rows.push(row);
    }
    (times, rows)
}

/// A subquery's result series as tables: their group tags become tags, their columns fields.
pub(crate) fn tables_of_result(series: Vec<ResultSeries>) -> Vec<Table> {
    series
        .into_iter()
        .map(|s| {
            let columns: Vec<Arc<str>> = s.columns.iter().skip(usize::from(s.has_time)).map(|c| Arc::from(c.as_str())).collect();
            let (times, rows) = s.rows.into_iter().map(|r| (r.time, r.values)).unzip();
            Table { name: Arc::from(s.name.as_str()), tags: Arc::from(s.tags), columns, times, rows }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_join_on_time_with_nulls_for_missing_points() {
        let a = (vec![1, 2, 4], vec![FieldValue::Integer(1), FieldValue::Integer(2), FieldValue::Integer(4)]);
        let b = (vec![2, 3], vec![FieldValue::Float(2.5), FieldValue::Float(3.5)]);
        let (times, rows) = join_on_time(vec![a, b]);
        assert_eq!(times, vec![1, 2, 3, 4]);
        assert_eq!(rows[0], vec![FieldValue::Integer(1), FieldValue::Null]);
        assert_eq!(rows[1], vec![FieldValue::Integer(2), FieldValue::Float(2.5)]);
        assert_eq!(rows[2], vec![FieldValue::Null, FieldValue::Float(3.5)]);
    }
}
