//! The streaming path of the aggregate queries graphs and dashboards send most: simple
//! aggregates (`count`, `sum`, `mean`, `min`, `max`, `first`, `last`, `spread`) of float fields
//! of one measurement, per `GROUP BY time` bucket and tags, with a WHERE clause on tags and time
//! only. Points go from storage straight into per-bucket accumulators, run by run, without
//! building rows: a week at 1 Hz (604,800 points) is one pass over a few decoded blocks.
//!
//! Anything else (fields of other types, conditions on fields, subqueries, other functions)
//! goes to the general path in `aggregate`, which gives the same answers; the tests run both.

use super::accumulator::Acc;
use super::aggregate::BucketSource;
use super::plan::{column_name, compile, Agg};
use super::table::{candidate_tag_sets, read_column, Budget, ColumnPoints, TagSetSeries, Tags};
use super::Context;
use crate::error::QueryError;
use crate::eval::{holds, tag_condition, Regexes, Row, Verdict};
use crate::reduce::{Reduced, Reducer};
use crate::result::ResultSeries;
use crate::storage::{FieldKind, ScanOrder, StoredSeries};
use crate::time::TimeRange;
use crate::value::{Column, ColumnSlice, FieldValue};
use sensordb_influxql::{BinaryOp, DataType, Dimension, Expr, MeasurementName, SelectStatement, Source, TimeOffset};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A tag set to read: its tags, its series by field, and whether its rows must pass the
/// condition one by one.
type TagSetRead<'a> = (Tags, TagSetSeries<'a>, bool);

fn streamable(reducer: Reducer) -> bool {
    matches!(
        reducer,
        Reducer::Count | Reducer::Sum | Reducer::Mean | Reducer::Spread | Reducer::Min | Reducer::Max | Reducer::First | Reducer::Last
    )
}

#[cfg(test)]
thread_local! {
    /// Tests switch the streaming path off to compare it with the general one.
    pub(super) static DISABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Statements the streaming path answered.
    pub(super) static TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `statement` on the streaming path, or `None` when it is not one of its shapes.
pub(super) fn run(
    context: &Context<'_>,
    statement: &SelectStatement,
    range: TimeRange,
    condition: Option<&Expr>,
    interval: Option<(i64, Option<TimeOffset>)>,
    regexes: &Regexes,
    budget: &Budget,
) -> Result<Option<Vec<ResultSeries>>, QueryError> {
    #[cfg(test)]
    if DISABLED.with(|d| d.get()) {
        return Ok(None);
    }
    let [Source::Measurement(source)] = statement.sources.as_slice() else { return Ok(None) };
    let MeasurementName::Name(measurement) = &source.name else { return Ok(None) };
    if statement.group_by.iter().any(|d| matches!(d, Dimension::Regex(_))) {
        return Ok(None);
    }
    // Every field a bare streamable reducer over a named field.
    // Every field streamable reducers of named fields, or math over them.
    let mut projections = Vec::new();
    let mut calls = Vec::new();
    for field in &statement.fields {
        if matches!(&field.expr, Expr::Call(c) if matches!(c.args.first(), Some(Expr::Wildcard(_)))) {
            return Ok(None);
        }
        let agg = compile(&field.expr, interval.map(|i| i.0))?;
        if !reducers_of(&agg, &mut calls) {
            return Ok(None);
        }
        projections.push(agg);
    }
    let bare_lasts = projections.iter().all(|a| matches!(a, Agg::Reduce { reducer: Reducer::Last, .. }));
    if interval.is_none() && bare_lasts {
        let query = super::newest::LatestQuery {
            statement,
            measurement,
            database: source.database.as_deref(),
            range,
            condition,
            regexes,
            calls: &calls,
        };
        if let Some(series) = super::newest::run(context, &query)? {
            #[cfg(test)]
            TAKEN.with(|t| t.set(t.get() + 1));
            return Ok(Some(series));
        }
    }
    // With GROUP BY time, both ends of the range must be known to lay out the buckets as the
    // general path does from the data.
    if interval.is_some() && !(range.has_lower_bound() && range.has_upper_bound()) {
        return Ok(None);
    }
    let database = source.database.as_deref().unwrap_or(context.database);
    let all = super::table::measurement_series(context.storage, database, measurement, condition);
    let field_names = super::FieldNames::of(&all);
    // Float fields; integers only where the answer's type does not follow the field's
    // (`mean`, `count`).
    let numeric_ok = |s: &StoredSeries, reducer: Reducer| match s.kind {
        FieldKind::Float => true,
        FieldKind::Integer | FieldKind::Unsigned => matches!(reducer, Reducer::Mean | Reducer::Count),
        _ => false,
    };
    if all.iter().any(|s| calls.iter().any(|(r, f)| f.as_str() == &*s.field && !numeric_ok(s, *r))) {
        return Ok(None);
    }
    let is_field = |name: &str| field_names.contains(name);
    // Tag sets by group, each with whether its rows must pass the condition one by one (the
    // condition names fields).
    let mut groups: BTreeMap<Vec<(String, String)>, Vec<TagSetRead>> = BTreeMap::new();
    let keys = all.tag_keys();
    for fields in candidate_tag_sets(&all, condition, &is_field) {
        let tags = fields.tags().clone();
        let mut per_row = false;
        if let Some(condition) = condition {
            match tag_condition(condition, &tags, &is_field, regexes) {
                Verdict::False => continue,
                Verdict::True => {}
                Verdict::Unknown => per_row = true,
            }
        }
        let key = super::group_key(&statement.group_by, &[], keys, &tags);
        groups.entry(key).or_default().push((tags, fields, per_row));
    }
    let zone = crate::time::zone_of(statement)?;
    let edges = match interval {
        None => None,
        Some((length, offset)) => Some(super::aggregate::bucket_edges(length, offset, zone.as_ref(), range.from, range.to, context)?),
    };
    let starts: Vec<i64> = match &edges {
        None => vec![if range.has_lower_bound() { range.from } else { 0 }],
        Some(edges) => edges[..edges.len().saturating_sub(1)].to_vec(),
    };
    let grid = edges.as_deref();
    let names: Vec<String> = statement.fields.iter().map(|f| f.alias.clone().unwrap_or_else(|| column_name(&f.expr))).collect();
    let mut out = Vec::new();
    for (tags, members) in groups {
        // Accumulators per distinct field, each a row of buckets.
        let mut per_field: BTreeMap<&str, Vec<Acc>> = BTreeMap::new();
        for (_, field) in &calls {
            let extremes = calls.iter().any(|(r, f)| f == field && matches!(r, Reducer::Min | Reducer::Max | Reducer::Spread));
            per_field.entry(field.as_str()).or_insert_with(|| vec![Acc::empty(extremes); starts.len()]);
        }
        let mut any = false;
        for (tags, fields, per_row) in &members {
            if *per_row {
                let condition = condition.expect("BUG: a per-row verdict without a condition");
                let filter = RowFilter { condition, regexes, tags, field_names: &field_names };
                any |= add_filtered(context, *fields, &filter, range, &mut per_field, grid, budget)?;
                continue;
            }
            for (field, accs) in per_field.iter_mut() {
                let Some(series) = fields.get(field) else { continue };
                let mut failed = Ok(());
                let mut floats = Vec::new();
                context.storage.read(series, range.from, range.to, &mut |times: &[i64], values: ColumnSlice<'_>| {
                    if failed.is_err() {
                        return;
                    }
                    failed = budget.take(times.len());
                    any |= !times.is_empty();
                    add_run(accs, grid, times, as_floats(&values, &mut floats));
                })?;
                failed?;
            }
        }
        if !any {
            continue;
        }
        let source = AccSource { per_field: &per_field };
        let mut series = super::aggregate::assemble(statement, &projections, names.clone(), &starts, &source, interval.is_none())?;
        series.name = measurement.as_str().into();
        series.tags = tags.into();
        out.push(series);
    }
    #[cfg(test)]
    TAKEN.with(|t| t.set(t.get() + 1));
    Ok(Some(out))
}

/// Adds the reducers `agg` needs to `calls`; false when it needs more than this path has
/// (other reducers, raw fields, `elapsed`).
fn reducers_of(agg: &Agg, calls: &mut Vec<(Reducer, String)>) -> bool {
    match agg {
        Agg::Reduce { reducer, field } if streamable(*reducer) => {
            calls.push((*reducer, field.clone()));
            true
        }
        Agg::Literal(_) => true,
        Agg::Math { arg, .. } => reducers_of(arg, calls),
        Agg::Binary { lhs, rhs, .. } => reducers_of(lhs, calls) && reducers_of(rhs, calls),
        Agg::Transform { inner, .. } => !matches!(**inner, Agg::Field(_)) && reducers_of(inner, calls),
        Agg::Reduce { .. } | Agg::Field(_) | Agg::Elapsed { .. } => false,
    }
}

/// A group's buckets as the accumulators left them.
struct AccSource<'a> {
    per_field: &'a BTreeMap<&'a str, Vec<Acc>>,
}

impl BucketSource for AccSource<'_> {
    fn reduce(&self, reducer: Reducer, field: &str, bucket: usize) -> Result<Option<Vec<Reduced>>, QueryError> {
        let Some(acc) = self.per_field.get(field).map(|accs| accs[bucket]) else { return Ok(None) };
        if acc.count == 0 {
            return Ok(None);
        }
        let (value, time) = acc.result(reducer);
        Ok(Some(vec![Reduced { time, value }]))
    }

    fn points(&self, _field: &str) -> (Vec<i64>, Option<Column>) {
        unreachable!("BUG: the streaming path took a query over raw points (see reducers_of)")
    }
}

/// The values of a numeric column as floats (`buffer` holds converted integers).
fn as_floats<'v>(values: &'v ColumnSlice<'_>, buffer: &'v mut Vec<f64>) -> &'v [f64] {
    match values {
        ColumnSlice::Float(v) => v,
        ColumnSlice::Integer(v) => {
            buffer.clear();
            buffer.extend(v.iter().map(|&x| x as f64));
            buffer
        }
        ColumnSlice::Unsigned(v) => {
            buffer.clear();
            buffer.extend(v.iter().map(|&x| x as f64));
            buffer
        }
        // Kinds the plan refused; nothing to add.
        _ => &[],
    }
}

/// What decides, row by row, which points of a tag set count.
struct RowFilter<'a> {
    condition: &'a Expr,
    regexes: &'a Regexes,
    tags: &'a [(String, String)],
    /// The measurement's fields: a name among them is a field even where this tag set has no
    /// point of it (null), as on the general path.
    field_names: &'a super::FieldNames<'a>,
}

/// One time of a tag set's columns, as the condition sees it.
struct PointRow<'a> {
    time: i64,
    filter: &'a RowFilter<'a>,
    /// Columns by name, with the value each has at `time` (`None`: no point there).
    values: &'a [(&'a str, Option<FieldValue>)],
}

impl Row for PointRow<'_> {
    fn time(&self) -> i64 {
        self.time
    }
    fn tag(&self, name: &str) -> Option<&str> {
        self.filter.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    fn field(&self, name: &str) -> Option<FieldValue> {
        if let Some((_, value)) = self.values.iter().find(|(n, _)| *n == name) {
            return Some(value.clone().unwrap_or(FieldValue::Null));
        }
        self.filter.field_names.contains(name).then_some(FieldValue::Null)
    }
}

/// Adds the points of one tag set whose rows pass the condition: its columns (the aggregated
/// fields and the condition's) are read whole over the range and walked together by time, the
/// condition evaluated once per time without building rows. True when some row passed (the
/// tag set then gives its group a series, as its non-empty table does on the general path).
#[allow(clippy::too_many_arguments)] // the parts of one read, named at the call
fn add_filtered(
    context: &Context<'_>,
    fields: TagSetSeries<'_>,
    filter: &RowFilter<'_>,
    range: TimeRange,
    per_field: &mut BTreeMap<&str, Vec<Acc>>,
    grid: Option<&[i64]>,
    budget: &Budget,
) -> Result<bool, QueryError> {
    let mut names: Vec<String> = per_field.keys().map(|f| f.to_string()).collect();
    super::collect_names(filter.condition, &mut names);
    names.sort();
    names.dedup();
    // Float columns are read as floats and filtered a column at a time where the condition
    // allows; anything else is read as values and walked row by row.
    let present: Vec<(&str, &StoredSeries)> = names.iter().filter_map(|n| fields.get(n.as_str()).map(|s| (n.as_str(), s))).collect();
    let mut columns: Vec<(&str, ColumnPoints)> = Vec::new();
    if present.iter().all(|(_, s)| s.kind == FieldKind::Float) {
        let mut floats = Vec::with_capacity(present.len());
        for (name, series) in &present {
            floats.push((*name, read_floats(context, series, range, budget)?));
        }
        if let Some(passed) = add_filtered_columns(&floats, filter, per_field, grid) {
            return Ok(passed);
        }
        // A condition of another shape: the row walk takes the columns already read.
        for (name, (times, values)) in floats {
            columns.push((name, ColumnPoints { times, values: values.into_iter().map(FieldValue::Float).collect(), exhausted: true }));
        }
    } else {
        for (name, series) in &present {
            columns.push((name, read_column(context.storage, series, range, ScanOrder::OldestFirst, None, budget)?));
        }
    }
    let mut positions = vec![0usize; columns.len()];
    let mut values: Vec<(&str, Option<FieldValue>)> = columns.iter().map(|(n, _)| (*n, None)).collect();
    let mut passed_any = false;
    // Bounded: each turn moves at least one column past one point.
    loop {
        let next = columns.iter().zip(&positions).filter_map(|((_, c), &p)| c.times.get(p).copied()).min();
        let Some(time) = next else { break };
        for (((_, column), position), slot) in columns.iter().zip(positions.iter_mut()).zip(values.iter_mut()) {
            slot.1 = None;
            if column.times.get(*position) == Some(&time) {
                slot.1 = Some(column.values[*position].clone());
                *position += 1;
            }
        }
        if !holds(filter.condition, &PointRow { time, filter, values: &values }, filter.regexes) {
            continue;
        }
        passed_any = true;
        for (name, value) in &values {
            let (Some(accs), Some(value)) = (per_field.get_mut(*name), value.as_ref().and_then(FieldValue::as_f64)) else { continue };
            add_run(accs, grid, &[time], &[value]);
        }
    }
    Ok(passed_any)
}

/// Times and values of a float series.
type FloatPoints = (Vec<i64>, Vec<f64>);

/// The points of a float series over `range`.
fn read_floats(context: &Context<'_>, series: &StoredSeries, range: TimeRange, budget: &Budget) -> Result<FloatPoints, QueryError> {
    let (mut times, mut values) = (Vec::new(), Vec::new());
    let mut failed = Ok(());
    context.storage.read(series, range.from, range.to, &mut |t: &[i64], v: ColumnSlice<'_>| {
        if failed.is_err() {
            return;
        }
        failed = budget.take(t.len());
        if let ColumnSlice::Float(v) = v {
            times.extend_from_slice(t);
            values.extend_from_slice(v);
        }
    })?;
    failed?;
    Ok((times, values))
}

/// [`add_filtered`] a column at a time, for the common shape: float columns (aligned on the
/// union of their times, a missing point null), and a condition of comparisons between them and
/// number literals, joined by AND and OR, and conditions on tags. `None` for any other shape.
fn add_filtered_columns(
    columns: &[(&str, FloatPoints)],
    filter: &RowFilter<'_>,
    per_field: &mut BTreeMap<&str, Vec<Acc>>,
    grid: Option<&[i64]>,
) -> Option<bool> {
    // Usually every column has the same times (a sensor's fields written together): the
    // columns are then taken as they were read, with no nulls to mark.
    let same_times = columns.iter().all(|(_, c)| c.0 == columns[0].1 .0);
    let union: Vec<i64>;
    let times: &[i64] = if same_times {
        columns.first().map_or(&[], |(_, c)| &c.0)
    } else {
        union = columns.iter().fold(Vec::new(), |union, (_, c)| merge_union(&union, &c.0));
        &union
    };
    let aligned: Vec<AlignedColumn<'_>> = columns
        .iter()
        .map(|(name, (column_times, column_values))| {
            if same_times {
                return AlignedColumn { name, values: Cow::Borrowed(column_values), present: None };
            }
            let (values, present) = align(times, column_times, column_values);
            AlignedColumn { name, values: Cow::Owned(values), present: Some(present) }
        })
        .collect();
    let mask = column_mask(filter.condition, &aligned, times.len(), filter)?;
    let (mut kept_times, mut kept_values) = (Vec::new(), Vec::new());
    for column in &aligned {
        let Some(accs) = per_field.get_mut(column.name) else { continue };
        keep_masked(times, &column.values, &mask, column.present.as_deref(), &mut kept_times, &mut kept_values);
        add_run(accs, grid, &kept_times, &kept_values);
    }
    Some(mask.iter().any(|&keep| keep))
}

/// The points of a column the mask keeps (and where `present` is given, that are there), into
/// `kept_times` and `kept_values`. Every point is written and the write position moves past the
/// kept ones: no branch on the mask, which a condition such as `velocity > 1` makes as good as
/// random (a branch per row cost a third of such a query).
fn keep_masked(
    times: &[i64],
    values: &[f64],
    mask: &[bool],
    present: Option<&[bool]>,
    kept_times: &mut Vec<i64>,
    kept_values: &mut Vec<f64>,
) {
    let rows = times.len();
    assert!(values.len() == rows && mask.len() == rows && present.is_none_or(|p| p.len() == rows), "BUG: columns of unequal length");
    kept_times.clear();
    kept_values.clear();
    kept_times.resize(rows + 1, 0);
    kept_values.resize(rows + 1, 0.0);
    let mut kept = 0;
    match present {
        None => {
            for ((&t, &x), &keep) in times.iter().zip(values).zip(mask) {
                kept_times[kept] = t;
                kept_values[kept] = x;
                kept += usize::from(keep);
            }
        }
        Some(present) => {
            for (((&t, &x), &keep), &there) in times.iter().zip(values).zip(mask).zip(present) {
                kept_times[kept] = t;
                kept_values[kept] = x;
                kept += usize::from(keep & there);
            }
        }
    }
    kept_times.truncate(kept);
    kept_values.truncate(kept);
}

/// Times compared at once where two lists of times are walked together: the columns of one tag
/// set mostly share their times (a sensor's fields written together, a few missing), so most
/// of a walk is runs the lists share, compared and copied a chunk at a time instead of a time
/// at a time (a step per time, each waiting on the last, was most of a filtered aggregate).
const SHARED_RUN: usize = 16;

/// Whether `a[i..]` and `b[j..]` start with the same [`SHARED_RUN`] times.
fn shared_run(a: &[i64], i: usize, b: &[i64], j: usize) -> bool {
    i + SHARED_RUN <= a.len() && j + SHARED_RUN <= b.len() && a[i..i + SHARED_RUN] == b[j..j + SHARED_RUN]
}

/// The sorted union of two ascending lists without repeats.
fn merge_union(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = vec![0; a.len() + b.len()];
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        if shared_run(a, i, b, j) {
            out[k..k + SHARED_RUN].copy_from_slice(&a[i..i + SHARED_RUN]);
            (i, j, k) = (i + SHARED_RUN, j + SHARED_RUN, k + SHARED_RUN);
            continue;
        }
        // The smaller head, moving past it in either list or both.
        let (x, y) = (a[i], b[j]);
        out[k] = x.min(y);
        k += 1;
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    out[k..k + a.len() - i].copy_from_slice(&a[i..]);
    k += a.len() - i;
    out[k..k + b.len() - j].copy_from_slice(&b[j..]);
    k += b.len() - j;
    out.truncate(k);
    out
}

/// A column's values placed at their times in `union` (which holds every time of the column,
/// both ascending), with where it has a point.
fn align(union: &[i64], times: &[i64], values: &[f64]) -> (Vec<f64>, Vec<bool>) {
    let (mut aligned, mut present) = (vec![0.0; union.len()], vec![false; union.len()]);
    let (mut at, mut c) = (0, 0);
    while c < times.len() {
        if shared_run(union, at, times, c) {
            aligned[at..at + SHARED_RUN].copy_from_slice(&values[c..c + SHARED_RUN]);
            present[at..at + SHARED_RUN].fill(true);
            (at, c) = (at + SHARED_RUN, c + SHARED_RUN);
            continue;
        }
        while union[at] < times[c] {
            at += 1;
        }
        aligned[at] = values[c];
        present[at] = true;
        (at, c) = (at + 1, c + 1);
    }
    (aligned, present)
}

/// A float column by name, one value per time of the union; where `present` is false the
/// column has no point at that time (a null), and its value there means nothing.
struct AlignedColumn<'a> {
    name: &'a str,
    values: Cow<'a, [f64]>,
    /// `None`: a point at every time.
    present: Option<Vec<bool>>,
}

/// Which rows `condition` keeps, computed over whole columns; `None` when it is not made of
/// the parts [`add_filtered_columns`] takes.
fn column_mask(condition: &Expr, columns: &[AlignedColumn<'_>], rows: usize, filter: &RowFilter<'_>) -> Option<Vec<bool>> {
    let column = |e: &Expr| match e {
        Expr::VarRef(v) if matches!(v.data_type, None | Some(DataType::Float | DataType::Field)) => {
            columns.iter().find(|c| c.name == v.name)
        }
        _ => None,
    };
    let number = |e: &Expr| match e {
        Expr::Float(x) => Some(*x),
        // Exactly representable, so the float comparison is the integer one.
        Expr::Integer(n) if n.unsigned_abs() < (1 << 53) => Some(*n as f64),
        _ => None,
    };
    match condition {
        Expr::Paren(inner) => column_mask(inner, columns, rows, filter),
        Expr::Binary(b) if matches!(b.op, BinaryOp::And | BinaryOp::Or) => {
            let (left, right) = (column_mask(&b.lhs, columns, rows, filter)?, column_mask(&b.rhs, columns, rows, filter)?);
            let and = b.op == BinaryOp::And;
            Some(left.iter().zip(&right).map(|(&l, &r)| if and { l && r } else { l || r }).collect())
        }
        Expr::Binary(b) => {
            // `field op number` or `number op field`, the operator turned to read field-first.
            let (column, limit, op) = match (column(&b.lhs), number(&b.rhs), column(&b.rhs), number(&b.lhs)) {
                (Some(values), Some(limit), _, _) => (values, limit, b.op),
                (_, _, Some(values), Some(limit)) => (values, limit, mirrored(b.op)?),
                _ => {
                    // Field-free parts are decided by the tags alone.
                    let is_field = |name: &str| filter.field_names.contains(name);
                    return match tag_condition(condition, filter.tags, &is_field, filter.regexes) {
                        Verdict::True => Some(vec![true; rows]),
                        Verdict::False => Some(vec![false; rows]),
                        Verdict::Unknown => None,
                    };
                }
            };
            // A null (no point at that time) compares false, as on the row path.
            let present = column.present.as_deref();
            Some(match op {
                BinaryOp::Gt => compare(&column.values, present, |x| x > limit),
                BinaryOp::GtEq => compare(&column.values, present, |x| x >= limit),
                BinaryOp::Lt => compare(&column.values, present, |x| x < limit),
                BinaryOp::LtEq => compare(&column.values, present, |x| x <= limit),
                BinaryOp::Eq => compare(&column.values, present, |x| x == limit),
                _ => return None,
            })
        }
        _ => {
            let is_field = |name: &str| filter.field_names.contains(name);
            match tag_condition(condition, filter.tags, &is_field, filter.regexes) {
                Verdict::True => Some(vec![true; rows]),
                Verdict::False => Some(vec![false; rows]),
                Verdict::Unknown => None,
            }
        }
    }
}

/// `keep` of each value, false where `present` says there is none. Generic over the comparison
/// so that each is its own loop (a function pointer called per row cost a tenth of a query).
fn compare(values: &[f64], present: Option<&[bool]>, keep: impl Fn(f64) -> bool) -> Vec<bool> {
    match present {
        None => values.iter().map(|&x| keep(x)).collect(),
        Some(present) => values.iter().zip(present).map(|(&x, &there)| there & keep(x)).collect(),
    }
}

/// The comparison with its sides swapped (`1 < x` is `x > 1`).
fn mirrored(op: BinaryOp) -> Option<BinaryOp> {
    Some(match op {
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::GtEq => BinaryOp::LtEq,
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::LtEq => BinaryOp::GtEq,
        BinaryOp::Eq => BinaryOp::Eq,
        _ => return None,
    })
}

/// Adds one sorted run of points to the buckets it covers (`grid`: the buckets' edges, bucket
/// `i` being `[grid[i], grid[i + 1])`; without it, one bucket of everything).
fn add_run(accs: &mut [Acc], grid: Option<&[i64]>, times: &[i64], values: &[f64]) {
    let Some(edges) = grid else {
        accs[0].add(times, values);
        return;
    };
    let mut lo = 0;
    while lo < times.len() {
        let after = edges.partition_point(|&e| e <= times[lo]);
        if after == 0 {
            // Before the first bucket (the read's range starts at it; kept for safety).
            lo += times[lo..].partition_point(|&t| t < edges[0]);
            continue;
        }
        let bucket = after - 1;
        if bucket >= accs.len() {
            break;
        }
        let hi = lo + crate::runs::points_before(&times[lo..], edges[bucket + 1]);
        accs[bucket].add(&times[lo..hi], &values[lo..hi]);
        lo = hi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keep_masked_keeps_exactly_the_masked_present_points(
            rows in proptest::collection::vec((any::<bool>(), any::<bool>(), -1e6f64..1e6), 0..200),
            with_presence in any::<bool>(),
        ) {
            let times: Vec<i64> = (0..rows.len() as i64).map(|i| i * 10).collect();
            let mask: Vec<bool> = rows.iter().map(|r| r.0).collect();
            let present: Vec<bool> = rows.iter().map(|r| r.1).collect();
            let values: Vec<f64> = rows.iter().map(|r| r.2).collect();
            let present = with_presence.then_some(&present[..]);
            let (mut kept_times, mut kept_values) = (vec![7], vec![7.0]);
            keep_masked(&times, &values, &mask, present, &mut kept_times, &mut kept_values);
            let expected: Vec<(i64, f64)> = (0..rows.len())
                .filter(|&i| mask[i] && present.is_none_or(|p| p[i]))
                .map(|i| (times[i], values[i]))
                .collect();
            let kept: Vec<(i64, f64)> = kept_times.into_iter().zip(kept_values).collect();
            prop_assert_eq!(kept, expected);
        }
    }

    proptest! {
        #[test]
        fn merge_union_is_the_sorted_set_union_and_align_places_each_point(
            a in proptest::collection::btree_set(-50i64..50, 0..90),
            b in proptest::collection::btree_set(-50i64..50, 0..90),
        ) {
            // Sets drawn from a small range share long runs, which the chunked walks take.
            let a: Vec<i64> = a.into_iter().collect();
            let b: Vec<i64> = b.into_iter().collect();
            let expected: Vec<i64> = a.iter().chain(&b).copied().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            let union = merge_union(&a, &b);
            prop_assert_eq!(&union, &expected);
            let values: Vec<f64> = a.iter().map(|&t| t as f64 * 0.5).collect();
            let (aligned, present) = align(&union, &a, &values);
            for (at, &t) in union.iter().enumerate() {
                let there = a.binary_search(&t).is_ok();
                prop_assert_eq!(present[at], there);
                if there {
                    prop_assert_eq!(aligned[at], t as f64 * 0.5);
                }
            }
        }
    }

    #[test]
    fn long_shared_runs_with_a_few_points_missing_merge_and_align() {
        let a: Vec<i64> = (0..1000).filter(|t| t % 97 != 5).collect();
        let b: Vec<i64> = (0..1000).filter(|t| t % 89 != 7).collect();
        let union = merge_union(&a, &b);
        assert_eq!(union, (0..1000).collect::<Vec<i64>>());
        let values: Vec<f64> = a.iter().map(|&t| t as f64).collect();
        let (aligned, present) = align(&union, &a, &values);
        for t in 0..1000 {
            assert_eq!(present[t], t % 97 != 5, "time {t}");
            if present[t] {
                assert_eq!(aligned[t], t as f64);
            }
        }
    }

    #[test]
    fn compare_is_false_where_a_point_is_missing() {
        assert_eq!(compare(&[1.0, 2.0, 3.0], None, |x| x >= 2.0), [false, true, true]);
        assert_eq!(compare(&[1.0, 2.0, 3.0], Some(&[true, false, true]), |x| x >= 2.0), [false, false, true]);
    }
}
