//! Raw queries: rows projected through the SELECT fields, one output row per stored row that has
//! a value in at least one selected field.

use super::merged_rows;
use super::plan::{column_name, dedupe_names};
use super::table::{Table, TableRow};
use crate::error::QueryError;
use crate::eval::{eval, holds, Regexes};
use crate::result::{ResultRow, ResultSeries};
use crate::value::FieldValue;
use sensordb_influxql::{Dimension, Expr, SelectStatement, VarRef, WildcardType};
use std::collections::BTreeSet;

pub(super) fn run(statement: &SelectStatement, members: &[&Table], regexes: &Regexes) -> Result<ResultSeries, QueryError> {
    let (exprs, mut names) = expand(statement, members);
    dedupe_names(&mut names);
    let mut rows = Vec::new();
    for (time, table, index) in merged_rows(members) {
        let row = TableRow { table, index };
        let values: Vec<FieldValue> = exprs.iter().map(|e| eval(e, &row, regexes)).collect();
        if gives_row(&exprs, &values, table, index) {
            rows.push(ResultRow { time, values });
        }
    }
    let mut columns = vec!["time".to_string()];
    columns.extend(names);
    Ok(ResultSeries { columns: columns.into(), rows, has_time: true, ..ResultSeries::default() })
}

/// Which rows of `table` the statement returns (before ORDER, OFFSET and LIMIT): `condition`
/// holds and the row gives an output row.
pub(super) fn counted_rows(statement: &SelectStatement, table: &Table, condition: Option<&Expr>, regexes: &Regexes) -> Vec<bool> {
    let (exprs, _) = expand(statement, &[table]);
    (0..table.times.len())
        .map(|index| {
            let row = TableRow { table, index };
            if condition.is_some_and(|c| !holds(c, &row, regexes)) {
                return false;
            }
            let values: Vec<FieldValue> = exprs.iter().map(|e| eval(e, &row, regexes)).collect();
            gives_row(&exprs, &values, table, index)
        })
        .collect()
}

/// A row exists where a selected field has a value; selecting only tags, where any field the
/// query reads has one.
fn gives_row(exprs: &[Expr], values: &[FieldValue], table: &Table, index: usize) -> bool {
    let mut selects_field = false;
    for (expr, value) in exprs.iter().zip(values) {
        if refers_to_field(expr, table) {
            selects_field = true;
            if !value.is_null() {
                return true;
            }
        }
    }
    !selects_field && table.rows[index].iter().any(|v| !v.is_null())
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

fn refers_to_field(expr: &Expr, table: &Table) -> bool {
    match expr {
        Expr::VarRef(v) => table.column(&v.name).is_some(),
        Expr::Binary(b) => refers_to_field(&b.lhs, table) || refers_to_field(&b.rhs, table),
        Expr::Paren(inner) | Expr::Negate(inner) => refers_to_field(inner, table),
        Expr::Call(call) => call.args.iter().any(|a| refers_to_field(a, table)),
        _ => false,
    }
}
