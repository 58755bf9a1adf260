//! Aggregate queries: every SELECT field computed per time bucket (or over the whole range
//! without `GROUP BY time`), empty buckets filled, transformations run over the bucket series.

use super::plan::{compile, dedupe_names, Agg};
use super::table::Table;
use super::{merged_rows, Context};
use crate::error::QueryError;
use crate::eval::{apply, Regexes};
use crate::fill::{fill_column, Fill};
use crate::reduce::{reduce, Reduced, Reducer};
use crate::result::{ResultRow, ResultSeries};
use crate::time::TimeRange;
use crate::transform;
use crate::value::{Column, FieldValue};
use crate::window::Windows;
use sensordb_influxql::{Expr, SelectStatement, TimeOffset};
use std::collections::{BTreeMap, BTreeSet};

/// One computed value of a field: its row time, the value, whether its bucket had no points
/// for it, and a selector's own point time.
#[derive(Clone, Debug)]
struct Cell {
    time: i64,
    value: FieldValue,
    empty: bool,
    point_time: Option<i64>,
}

/// A bucket: its start and the rows `lo..hi` of the merged rows.
struct Bucket {
    start: i64,
    lo: usize,
    hi: usize,
}

type Rows<'t> = [(i64, &'t Table, usize)];

pub(super) fn run(
    statement: &SelectStatement,
    members: &[&Table],
    range: TimeRange,
    interval: Option<(i64, Option<TimeOffset>)>,
    context: &Context<'_>,
    _regexes: &Regexes,
) -> Result<ResultSeries, QueryError> {
    let rows = merged_rows(members);
    let Some(&(first, _, _)) = rows.first() else { return Ok(ResultSeries::default()) };
    let last = rows.last().map_or(first, |r| r.0);
    let (projections, names) = expand(statement, members, interval.map(|i| i.0))?;
    let zone = crate::time::zone_of(statement)?;
    let buckets = buckets(&rows, range, interval, zone.as_ref(), context, first, last)?;
    let starts: Vec<i64> = buckets.iter().map(|b| b.start).collect();
    assemble(
        statement,
        &projections,
        names,
        &starts,
        &RowSource { rows: &rows, buckets: &buckets, gathered: Default::default() },
        interval.is_none(),
    )
}

/// Where an aggregate query's reducers find the points of a bucket: rows of tables on the
/// general path, running accumulators on the streaming path (`fast.rs`).
pub(super) trait BucketSource {
    /// `reducer` over the values of `field` in bucket `bucket`; `None` when the bucket has no
    /// value of the field.
    fn reduce(&self, reducer: Reducer, field: &str, bucket: usize) -> Result<Option<Vec<Reduced>>, QueryError>;
    /// Every point of `field` in time order (a transformation of a raw field, `elapsed`).
    fn points(&self, field: &str) -> (Vec<i64>, Option<Column>);
}

struct RowSource<'r, 't> {
    rows: &'r Rows<'t>,
    buckets: &'r [Bucket],
    /// Fields gathered over all rows, by name (`None`: of mixed types).
    gathered: std::cell::RefCell<BTreeMap<String, Option<std::rc::Rc<Gathered>>>>,
}

/// The non-null values of one field over all rows, of one type, and where each row's begin.
struct Gathered {
    times: Vec<i64>,
    column: Column,
    /// `before[r]`: values of rows `..r`.
    before: Vec<u32>,
}

impl RowSource<'_, '_> {
    /// `field` gathered once for every bucket and reducer: a field is asked for once per bucket
    /// and reducer (`sum(x)/count(x)` twice over), each a pass over the rows. Only a field of one
    /// type: a bucket's values of a field of mixed types are typed by what that bucket holds.
    fn gathered(&self, field: &str) -> Option<std::rc::Rc<Gathered>> {
        if let Some(known) = self.gathered.borrow().get(field) {
            return known.clone();
        }
        let mut before = Vec::with_capacity(self.rows.len() + 1);
        let (times, values) = gather_values(self.rows, field, |gathered| before.push(gathered as u32));
        before.push(values.len() as u32);
        let one_type = values.windows(2).all(|w| std::mem::discriminant(&w[0]) == std::mem::discriminant(&w[1]));
        let gathered = match column_of(values) {
            Some(column) if one_type && u32::try_from(self.rows.len()).is_ok() => {
                Some(std::rc::Rc::new(Gathered { times, column, before }))
            }
            _ => None,
        };
        self.gathered.borrow_mut().insert(field.to_string(), gathered.clone());
        gathered
    }
}

impl BucketSource for RowSource<'_, '_> {
    fn reduce(&self, reducer: Reducer, field: &str, bucket: usize) -> Result<Option<Vec<Reduced>>, QueryError> {
        let Bucket { lo, hi, .. } = self.buckets[bucket];
        let reduced = match self.gathered(field) {
            Some(g) => {
                let range = g.before[lo] as usize..g.before[hi] as usize;
                if range.is_empty() {
                    return Ok(None);
                }
                reduce(reducer, &g.times[range.clone()], g.column.slice(range))
            }
            None => {
                let (times, column) = gather(&self.rows[lo..hi], field);
                let Some(column) = column else { return Ok(None) };
                reduce(reducer, &times, column.as_slice())
            }
        };
        Ok(Some(reduced.map_err(|e| QueryError::invalid(e.to_string()))?))
    }

    fn points(&self, field: &str) -> (Vec<i64>, Option<Column>) {
        gather(self.rows, field)
    }
}

/// The result series of one group from its compiled fields (`projections`, named `names`) over
/// buckets starting at `starts`: each field's cells, empty buckets filled, transformations run,
/// rows joined on time.
pub(super) fn assemble(
    statement: &SelectStatement,
    projections: &[Agg],
    mut names: Vec<String>,
    starts: &[i64],
    source: &dyn BucketSource,
    without_time_buckets: bool,
) -> Result<ResultSeries, QueryError> {
    dedupe_names(&mut names);
    let fill = Fill::from(statement.fill);
    let mut columns: Vec<Vec<Cell>> = Vec::with_capacity(projections.len());
    for agg in projections {
        columns.push(cells(agg, source, starts, &fill)?);
    }
    let any_transform = projections.iter().any(Agg::is_transform);
    let single_selector = without_time_buckets && projections.len() == 1 && projections[0].selector().is_some();
    let mut out_rows = Vec::new();
    if any_transform || columns.iter().any(|c| c.len() != starts.len()) {
        // Columns of their own lengths (transformations, distinct): joined on time.
        let mut by_time: BTreeMap<i64, Vec<FieldValue>> = BTreeMap::new();
        let mut multi: Vec<ResultRow> = Vec::new();
        if columns.len() == 1 {
            for cell in &columns[0] {
                if !(cell.empty && fill == Fill::None) {
                    multi.push(ResultRow { time: cell.time, values: vec![cell.value.clone()] });
                }
            }
            out_rows = multi;
        } else {
            for (c, column) in columns.iter().enumerate() {
                for cell in column.iter().filter(|cell| !cell.empty || fill != Fill::None) {
                    by_time.entry(cell.time).or_insert_with(|| vec![FieldValue::Null; columns.len()])[c] = cell.value.clone();
                }
            }
            out_rows = by_time.into_iter().map(|(time, values)| ResultRow { time, values }).collect();
        }
    } else {
        for column in &mut columns {
            fill_cells(&fill, column);
        }
        for (b, &start) in starts.iter().enumerate() {
            if fill == Fill::None && columns.iter().all(|c| c[b].empty) {
                continue;
            }
            let time = if single_selector { columns[0][b].point_time.unwrap_or(start) } else { start };
            out_rows.push(ResultRow { time, values: columns.iter().map(|c| c[b].value.clone()).collect() });
        }
    }
    Ok(ResultSeries { columns: crate::result::time_and(names), rows: out_rows, has_time: true, ..ResultSeries::default() })
}

/// The SELECT fields compiled, `f(*)` expanded to one field per column (`f_<column>`, or
/// `<alias>_<column>`), with their names.
fn expand(statement: &SelectStatement, members: &[&Table], interval: Option<i64>) -> Result<(Vec<Agg>, Vec<String>), QueryError> {
    let mut projections = Vec::new();
    let mut names = Vec::new();
    for field in &statement.fields {
        if let Expr::Call(call) = &field.expr {
            if matches!(call.args.first(), Some(Expr::Wildcard(_))) {
                let all: BTreeSet<String> = members.iter().flat_map(|t| t.columns.iter().map(|c| c.to_string())).collect();
                for column in all {
                    let mut expanded = call.clone();
                    expanded.args[0] = Expr::VarRef(sensordb_influxql::VarRef { name: column.clone(), data_type: None });
                    projections.push(compile(&Expr::Call(expanded), interval)?);
                    names.push(format!("{}_{column}", field.alias.as_deref().unwrap_or(&call.name)));
                }
                continue;
            }
        }
        projections.push(compile(&field.expr, interval)?);
        names.push(field.alias.clone().unwrap_or_else(|| super::plan::column_name(&field.expr)));
    }
    Ok((projections, names))
}

fn buckets(
    rows: &Rows<'_>,
    range: TimeRange,
    interval: Option<(i64, Option<TimeOffset>)>,
    zone: Option<&jiff::tz::TimeZone>,
    context: &Context<'_>,
    first: i64,
    last: i64,
) -> Result<Vec<Bucket>, QueryError> {
    let Some((length, offset)) = interval else {
        let start = if range.has_lower_bound() { range.from } else { 0 };
        return Ok(vec![Bucket { start, lo: 0, hi: rows.len() }]);
    };
    let from = if range.has_lower_bound() { range.from } else { first };
    let to = if range.has_upper_bound() { range.to } else { context.now.max(last) };
    let edges = bucket_edges(length, offset, zone, from, to, context)?;
    let mut buckets = Vec::with_capacity(edges.len().saturating_sub(1));
    let mut lo = 0;
    for pair in edges.windows(2) {
        let (start, end) = (pair[0], pair[1]);
        lo += rows[lo..].partition_point(|r| r.0 < start);
        let hi = lo + rows[lo..].partition_point(|r| r.0 < end);
        buckets.push(Bucket { start, lo, hi });
        lo = hi;
    }
    Ok(buckets)
}

/// The edges of the `GROUP BY time(length[, offset])` buckets that meet `[from, to]` (bucket
/// `i` is `[edges[i], edges[i + 1])`; in `zone`'s local time with `tz()`), or a limit error
/// beyond `max_buckets`.
pub(super) fn bucket_edges(
    length: i64,
    offset: Option<TimeOffset>,
    zone: Option<&jiff::tz::TimeZone>,
    from: i64,
    to: i64,
    context: &Context<'_>,
) -> Result<Vec<i64>, QueryError> {
    let offset = match offset {
        None => 0,
        Some(TimeOffset::Duration(d)) => d.nanos(),
        Some(TimeOffset::Now) => context.now.rem_euclid(length),
    };
    Windows::new(length, offset).in_zone(zone.cloned()).edges(from, to, context.limits.max_buckets).ok_or_else(|| {
        QueryError::Limit(format!(
            "GROUP BY time gives more than {} buckets (max_buckets); use a longer interval",
            context.limits.max_buckets
        ))
    })
}

/// The non-null values of `field` over `rows`, as one typed column (numbers of mixed types
/// become floats) with their times.
fn gather(rows: &Rows<'_>, field: &str) -> (Vec<i64>, Option<Column>) {
    let (times, values) = gather_values(rows, field, |_| {});
    (times, column_of(values))
}

/// The non-null values of `field` over `rows` with their times; `at_row(n)` is called before
/// each row with the values gathered so far.
fn gather_values(rows: &Rows<'_>, field: &str, mut at_row: impl FnMut(usize)) -> (Vec<i64>, Vec<FieldValue>) {
    let mut times = Vec::with_capacity(rows.len());
    let mut values = Vec::with_capacity(rows.len());
    // The column of the table of the row before: rows of one table come in runs, and the tables
    // of a raw subquery's group (interleaved by time) share their column names.
    let mut last: Option<(&Table, Option<usize>)> = None;
    for &(time, table, index) in rows {
        at_row(values.len());
        let column = match last {
            Some((seen, column)) if std::ptr::eq(seen, table) || same_columns(seen, table) => column,
            _ => {
                let column = table.column(field);
                last = Some((table, column));
                column
            }
        };
        if let Some(c) = column {
            let v = &table.row(index)[c];
            if !v.is_null() {
                times.push(time);
                values.push(v.clone());
            }
        }
    }
    (times, values)
}

/// Whether two tables have the very same column names (one allocation each: a subquery's
/// tables), so that a name's column in one is its column in the other.
fn same_columns(a: &Table, b: &Table) -> bool {
    a.columns.len() == b.columns.len() && a.columns.iter().zip(&b.columns).all(|(x, y)| std::sync::Arc::ptr_eq(x, y))
}

fn column_of(values: Vec<FieldValue>) -> Option<Column> {
    let first = values.first()?;
    let same = |f: fn(&FieldValue) -> bool| values.iter().all(f);
    Some(match first {
        FieldValue::Integer(_) if same(|v| matches!(v, FieldValue::Integer(_))) => {
            Column::Integer(values.iter().map(|v| if let FieldValue::Integer(x) = v { *x } else { 0 }).collect())
        }
        FieldValue::Unsigned(_) if same(|v| matches!(v, FieldValue::Unsigned(_))) => {
            Column::Unsigned(values.iter().map(|v| if let FieldValue::Unsigned(x) = v { *x } else { 0 }).collect())
        }
        FieldValue::Boolean(_) => Column::Boolean(values.iter().map(|v| matches!(v, FieldValue::Boolean(true))).collect()),
        FieldValue::String(_) => {
            Column::String(values.into_iter().map(|v| if let FieldValue::String(s) = v { s.to_string() } else { v.to_string() }).collect())
        }
        _ => Column::Float(values.iter().map(|v| v.as_f64().unwrap_or(f64::NAN)).collect()),
    })
}

/// The cells of one compiled field, one per bucket (or, for transformations and `distinct`,
/// one per result).
fn cells(agg: &Agg, source: &dyn BucketSource, starts: &[i64], fill: &Fill) -> Result<Vec<Cell>, QueryError> {
    Ok(match agg {
        Agg::Reduce { reducer, field } => {
            let mut out = Vec::with_capacity(starts.len());
            for (b, &start) in starts.iter().enumerate() {
                let reduced = source.reduce(*reducer, field, b)?;
                let empty = reduced.is_none();
                let reduced = reduced.unwrap_or_default();
                if reduced.is_empty() {
                    out.push(Cell { time: start, value: reducer.empty_value(), empty, point_time: None });
                }
                for r in reduced {
                    out.push(Cell { time: start, value: r.value, empty: false, point_time: r.time });
                }
            }
            if out.len() == starts.len() {
                fill_reduced(fill, *reducer, &mut out);
            }
            out
        }
        Agg::Literal(value) => {
            starts.iter().map(|&start| Cell { time: start, value: value.clone(), empty: true, point_time: None }).collect()
        }
        Agg::Math { math, arg } => {
            cells(arg, source, starts, fill)?.into_iter().map(|c| Cell { value: math.apply(&c.value), ..c }).collect()
        }
        Agg::Binary { op, lhs, rhs } => {
            let (left, right) = (cells(lhs, source, starts, fill)?, cells(rhs, source, starts, fill)?);
            if left.len() != right.len() {
                return Err(QueryError::invalid("cannot combine a multi-valued function with another field in one expression"));
            }
            left.into_iter()
                .zip(right)
                .map(|(l, r)| {
                    let literal_right = matches!(**rhs, Agg::Literal(_));
                    let literal_left = matches!(**lhs, Agg::Literal(_));
                    let empty = match (literal_left, literal_right) {
                        (true, false) => r.empty,
                        (false, true) => l.empty,
                        _ => l.empty && r.empty,
                    };
                    Cell { time: l.time, value: apply(*op, &l.value, &r.value), empty, point_time: None }
                })
                .collect()
        }
        Agg::Field(field) => {
            let (times, column) = source.points(field);
            let column = column.unwrap_or(Column::Float(Vec::new()));
            times.iter().enumerate().map(|(i, &t)| Cell { time: t, value: column.get(i), empty: false, point_time: None }).collect()
        }
        Agg::Elapsed { field, unit } => {
            let (times, _) = source.points(field);
            times
                .windows(2)
                .filter(|w| w[1] != w[0])
                .map(|w| Cell { time: w[1], value: FieldValue::Integer((w[1] - w[0]) / unit), empty: false, point_time: None })
                .collect()
        }
        Agg::Transform { transform: t, inner } => {
            let mut inner_cells = cells(inner, source, starts, fill)?;
            if !matches!(**inner, Agg::Field(_)) {
                let times: Vec<i64> = inner_cells.iter().map(|c| c.time).collect();
                let empty: Vec<bool> = inner_cells.iter().map(|c| c.empty).collect();
                let mut values: Vec<FieldValue> = inner_cells.iter().map(|c| c.value.clone()).collect();
                fill_column(fill, &times, &mut values, &empty);
                if *fill == Fill::None {
                    values.iter_mut().zip(&empty).filter(|(_, e)| **e).for_each(|(v, _)| *v = FieldValue::Null);
                }
                for (cell, value) in inner_cells.iter_mut().zip(values) {
                    cell.value = value;
                }
            }
            let points: Vec<(i64, FieldValue)> = inner_cells.into_iter().map(|c| (c.time, c.value)).collect();
            transform::apply(*t, &points, false)
                .into_iter()
                .map(|(time, value)| Cell { time, value, empty: false, point_time: None })
                .collect()
        }
    })
}

/// Fills the empty buckets of one aggregate's column, before any math over it, as InfluxDB
/// fills its aggregate iterators: `fill(5)` on `mean(x) * 2` shows 10. A fill value takes the
/// aggregate's type (`fill(0)` on a mean is the float 0). Filled cells are no longer empty, so
/// nothing fills them again above.
fn fill_reduced(fill: &Fill, reducer: crate::reduce::Reducer, column: &mut [Cell]) {
    use crate::reduce::Reducer;
    if matches!(fill, Fill::Null | Fill::None) {
        return;
    }
    let float_output =
        matches!(reducer, Reducer::Mean | Reducer::Stddev) || column.iter().any(|c| !c.empty && matches!(c.value, FieldValue::Float(_)));
    let fill = match fill {
        Fill::Value(FieldValue::Integer(n)) if float_output => Fill::Value(FieldValue::Float(*n as f64)),
        other => other.clone(),
    };
    fill_cells(&fill, column);
    for cell in column.iter_mut().filter(|c| c.empty && !c.value.is_null()) {
        cell.empty = false;
    }
}

/// Fills the empty cells of one per-bucket column.
fn fill_cells(fill: &Fill, column: &mut [Cell]) {
    let times: Vec<i64> = column.iter().map(|c| c.time).collect();
    let empty: Vec<bool> = column.iter().map(|c| c.empty).collect();
    let mut values: Vec<FieldValue> = column.iter().map(|c| c.value.clone()).collect();
    fill_column(fill, &times, &mut values, &empty);
    for (cell, value) in column.iter_mut().zip(values) {
        cell.value = value;
    }
}
