//! How a SELECT runs as another's subquery: InfluxDB 1.8 hands the inner query options of the
//! outer one (`newIteratorOptionsSubstatement`), and answers change with them.

use super::plan::is_aggregate;
use sensordb_influxql::{Dimension, Fill, SelectStatement};
use std::collections::BTreeSet;

/// The inner statement as InfluxDB runs it under `outer`, and whether its LIMIT and OFFSET
/// count per stored series instead of per group.
///
/// - The outer query's GROUP BY tags group the inner query too: `SELECT count(x) FROM
///   (SELECT model, x FROM m) GROUP BY model` counts per model, and an inner `mean` under an
///   outer `GROUP BY host` is a mean per host.
/// - The inner query walks time in the outer query's order (an inner `ORDER BY time DESC`
///   under an ascending outer query takes the first points, not the last).
/// - An aggregate inner query's `fill(null)` becomes `fill(none)`: empty buckets are not rows.
/// - Its `tz()` is its own: the outer query's does not reach it (`newIteratorOptionsStmt`).
/// - A raw inner query whose GROUP BY tags are not all among the outer query's applies LIMIT
///   and OFFSET to each stored series (each tag set) of a group, not to the group: InfluxDB's
///   engine limits each series when the final grouping differs from the current one.
pub(super) fn under(inner: &SelectStatement, outer: &SelectStatement) -> (SelectStatement, bool) {
    let mut adapted = inner.clone();
    adapted.order = outer.order;
    let aggregate = inner.fields.iter().any(|f| is_aggregate(&f.expr));
    if aggregate && adapted.fill == Fill::Null {
        adapted.fill = Fill::None;
    }
    let outer_tags = tags(outer);
    let all: BTreeSet<&str> = outer_tags.union(&tags(inner)).copied().collect();
    let limited = inner.limit.is_some_and(|l| l > 0) || inner.offset.is_some_and(|o| o > 0);
    let per_series = !aggregate && limited && all.len() != outer_tags.len();
    for dimension in &outer.group_by {
        if !matches!(dimension, Dimension::Time { .. }) && !adapted.group_by.contains(dimension) {
            adapted.group_by.push(dimension.clone());
        }
    }
    (adapted, per_series)
}

fn tags(statement: &SelectStatement) -> BTreeSet<&str> {
    statement
        .group_by
        .iter()
        .filter_map(|d| match d {
            Dimension::Tag(k) => Some(k.as_str()),
            _ => None,
        })
        .collect()
}
