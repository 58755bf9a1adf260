//! Raw queries: rows projected through the SELECT fields, one output row per stored row that has
//! a value in at least one selected field.

use super::plan::{column_name, dedupe_names};
use super::table::Table;
use crate::bound::Bound;
use crate::error::QueryError;
use crate::eval::Regexes;
use crate::result::ResultSeries;
use crate::value::FieldValue;
use sensordb_influxql::{Dimension, Expr, SelectStatement, VarRef, WildcardType};
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) fn run(statement: &SelectStatement, members: &[&Table], regexes: &Regexes) -> Result<ResultSeries, QueryError> {
    run_table(statement, members, regexes).map(super::table::series_of_table)
}

/// [`run`]'s rows as one flat table (unnamed, untagged): a subquery's rows go to the outer
/// query as a table, and a vector a row would be made only to be taken apart again (432,000 rows
/// in TSBS breakdown-frequency at scale 100).
pub(super) fn run_table(statement: &SelectStatement, members: &[&Table], regexes: &Regexes) -> Result<Table, QueryError> {
    let (exprs, mut names) = expand(statement, members);
    dedupe_names(&mut names);
    let width = exprs.len();
    // Each member's output rows, projected front to back: a member's rows are read in the
    // order they lie in memory. Projected in time order across hundreds of members (TSBS
    // breakdown-frequency reads 500 tables into one group), nearly every row was a cache miss.
    let mut projected: Vec<(Vec<i64>, Vec<FieldValue>)> = members
        .iter()
        .map(|table| {
            let projection = Projection::new(&exprs, table, regexes);
            let (mut times, mut values) = (Vec::new(), Vec::new());
            for (index, &time) in table.times.iter().enumerate() {
                if projection.row_into(table, index, &mut values) {
                    times.push(time);
                }
            }
            (times, values)
        })
        .collect();
    let (times, values) = if projected.len() == 1 && projected[0].0.is_sorted() {
        projected.pop().unwrap_or_default()
    } else {
        // The members' rows merged by time (a tie keeps the members' order), by member and row.
        let mut order: Vec<(i64, u32, u32)> = Vec::with_capacity(projected.iter().map(|p| p.0.len()).sum());
        for (m, (times, _)) in projected.iter().enumerate() {
            assert!(u32::try_from(times.len()).is_ok(), "a table of more than 2^32 rows");
            order.extend(times.iter().enumerate().map(|(i, &t)| (t, m as u32, i as u32)));
        }
        // A subquery's rows may come newest first, and members interleave. The stable sort finds
        // the members' sorted runs and merges them (an unstable sort of the whole entries gave the
        // same order at twice the cost).
        if !order.is_sorted_by_key(|&(t, _, _)| t) {
            order.sort_by_key(|&(t, _, _)| t);
        }
        let mut times = Vec::with_capacity(order.len());
        let mut values = Vec::with_capacity(order.len() * width);
        for (time, member, index) in order {
            times.push(time);
            let row = index as usize * width..(index as usize + 1) * width;
            values.extend(projected[member as usize].1[row].iter_mut().map(|v| std::mem::replace(v, FieldValue::Null)));
        }
        (times, values)
    };
    let columns = names.into_iter().map(|n| Arc::from(n.as_str())).collect();
    Ok(Table { name: Arc::from(""), tags: Arc::from(Vec::new()), columns, times, values })
}

/// Which rows of a table a raw statement returns (before ORDER, OFFSET and LIMIT): its
/// condition holds and the row gives an output row. Made once per statement, used on every
/// table a LIMIT reads (hundreds in TSBS' per-truck queries).
pub(super) struct RowFilter<'s> {
    statement: &'s SelectStatement,
    condition: Option<&'s Expr>,
    regexes: &'s Regexes,
    /// The SELECT fields when no wildcard makes them depend on the table.
    fields: Option<Vec<Expr>>,
}

impl<'s> RowFilter<'s> {
    pub(super) fn new(statement: &'s SelectStatement, condition: Option<&'s Expr>, regexes: &'s Regexes) -> RowFilter<'s> {
        let wildcard = statement.fields.iter().any(|f| matches!(f.expr, Expr::Wildcard(_)));
        let fields = (!wildcard).then(|| expand(statement, &[]).0);
        RowFilter { statement, condition, regexes, fields }
    }

    /// A verdict for each row of `table`.
    pub(super) fn counted(&self, table: &Table) -> Vec<bool> {
        let expanded;
        let fields = match &self.fields {
            Some(fields) => fields,
            None => {
                expanded = expand(self.statement, &[table]).0;
                &expanded
            }
        };
        let projection = Projection::new(fields, table, self.regexes);
        let condition = self.condition.map(|c| Bound::new(c, &table.scope(), self.regexes).into_condition());
        (0..table.times.len())
            .map(|index| {
                if condition.as_ref().is_some_and(|c| !c.holds(table.times[index], table.row(index))) {
                    return false;
                }
                projection.gives_row(table, index)
            })
            .collect()
    }
}

/// The SELECT fields bound to one table.
struct Projection<'r> {
    exprs: Vec<Bound<'r>>,
    /// Which of them read a field column.
    reads_field: Vec<bool>,
}

impl<'r> Projection<'r> {
    fn new(exprs: &[Expr], table: &Table, regexes: &'r Regexes) -> Projection<'r> {
        let scope = table.scope();
        Projection {
            exprs: exprs.iter().map(|e| Bound::new(e, &scope, regexes)).collect(),
            reads_field: exprs.iter().map(|e| Bound::reads_field(e, &scope)).collect(),
        }
    }

    /// Appends the output row of row `index` to `out` if it gives one (and says whether).
    fn row_into(&self, table: &Table, index: usize, out: &mut Vec<FieldValue>) -> bool {
        let (time, row) = (table.times[index], table.row(index));
        let start = out.len();
        out.extend(self.exprs.iter().map(|e| e.value(time, row).into_owned()));
        let gives = self.gives_by(|i| out[start + i].is_null(), row);
        if !gives {
            out.truncate(start);
        }
        gives
    }

    /// Whether row `index` gives an output row; only the fields that decide it are evaluated.
    fn gives_row(&self, table: &Table, index: usize) -> bool {
        let (time, row) = (table.times[index], table.row(index));
        self.gives_by(|i| self.exprs[i].value(time, row).is_null(), row)
    }

    /// A row exists where a selected field has a value; selecting only tags, where any field
    /// the query reads has one.
    fn gives_by(&self, is_null: impl Fn(usize) -> bool, row: &[FieldValue]) -> bool {
        let mut selects_field = false;
        for (i, &reads) in self.reads_field.iter().enumerate() {
            if reads {
                selects_field = true;
                if !is_null(i) {
                    return true;
                }
            }
        }
        !selects_field && row.iter().any(|v| !v.is_null())
    }
}

/// The SELECT fields with wildcards replaced by the fields and tags they stand for (sorted by
/// name, GROUP BY tags left out), and their column names.
fn expand(statement: &SelectStatement, members: &[&Table]) -> (Vec<Expr>, Vec<String>) {
    let grouped: BTreeSet<&str> = statement
        .group_by
        .iter()
        .filter_map(|d| match d {
            Dimension::Tag(k) => Some(k.as_str()),
            _ => None,
        })
        .collect();
    let group_all = statement.group_by.iter().any(|d| matches!(d, Dimension::Wildcard));
    let mut exprs = Vec::new();
    let mut names = Vec::new();
    for field in &statement.fields {
        match &field.expr {
            Expr::Wildcard(kind) => {
                let mut all: BTreeSet<String> = BTreeSet::new();
                for table in members {
                    if *kind != Some(WildcardType::Tag) {
                        all.extend(table.columns.iter().map(|c| c.to_string()));
                    }
                    if *kind != Some(WildcardType::Field) && !group_all {
                        all.extend(table.tags.iter().map(|(k, _)| k.clone()).filter(|k| !grouped.contains(k.as_str())));
                    }
                }
                for name in all {
                    exprs.push(Expr::VarRef(VarRef { name: name.clone(), data_type: None }));
                    names.push(name);
                }
            }
            expr => {
                exprs.push(expr.clone());
                names.push(field.alias.clone().unwrap_or_else(|| column_name(expr)));
            }
        }
    }
    (exprs, names)
}
