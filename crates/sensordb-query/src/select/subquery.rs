//! How a SELECT runs as another's subquery: InfluxDB 1.8 hands the inner query options of the
//! outer one (`newIteratorOptionsSubstatement`), and answers change with them.

use super::plan::is_aggregate;
use sensordb_influxql::{Dimension, Fill, SelectStatement};

/// The inner statement as InfluxDB runs it under `outer`.
///
/// - The outer query's GROUP BY tags group the inner query too: `SELECT count(x) FROM
///   (SELECT model, x FROM m) GROUP BY model` counts per model, and an inner `mean` under an
///   outer `GROUP BY host` is a mean per host. A raw inner query's LIMIT and OFFSET then count
///   per group of the inner and outer tags together: InfluxDB limits each stored series, merges
///   a group's series ordered by those tags (missing ones empty) and time, and limits again
///   where they change (`createVarRefIterator`, `query.NewLimitIterator`).
/// - The inner query walks time in the outer query's order (an inner `ORDER BY time DESC`
///   under an ascending outer query takes the first points, not the last).
/// - An aggregate inner query's `fill(null)` becomes `fill(none)`: empty buckets are not rows.
pub(super) fn under(inner: &SelectStatement, outer: &SelectStatement) -> SelectStatement {
    let mut adapted = inner.clone();
    adapted.order = outer.order;
    let aggregate = inner.fields.iter().any(|f| is_aggregate(&f.expr));
    if aggregate && adapted.fill == Fill::Null {
        adapted.fill = Fill::None;
    }
    for dimension in &outer.group_by {
        if !matches!(dimension, Dimension::Time { .. }) && !adapted.group_by.contains(dimension) {
            adapted.group_by.push(dimension.clone());
        }
    }
    adapted
}
