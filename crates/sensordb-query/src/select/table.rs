//! The rows a SELECT works on: one table per series of tags (a measurement's fields joined on
//! time, or one series of a subquery's result), read from storage within the query's range.

use crate::bound::Scope;
use crate::error::QueryError;
use crate::eval::{tag_condition, Regexes, Verdict};
use crate::result::{ResultRow, ResultSeries};
use crate::series_list::SeriesList;
use crate::storage::{ScanOrder, Storage, StoredSeries};
use crate::time::TimeRange;
use crate::value::{ColumnSlice, FieldValue};
use sensordb_influxql::{BinaryOp, DataType, Expr, VarRef};
use std::cell::Cell;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Rows of one series of tags, sorted by time.
#[derive(Debug)]
pub(crate) struct Table {
    pub name: Arc<str>,
    pub tags: Arc<[(String, String)]>,
    pub columns: Vec<Arc<str>>,
    pub times: Vec<i64>,
    /// The rows one after another: row `i` is `values[i * width..(i + 1) * width]`, its column
    /// `c` at `times[i]` (one allocation a table, not one a row).
    pub values: Vec<FieldValue>,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| &**c == name)
    }

    /// Values a row.
    pub fn width(&self) -> usize {
        self.columns.len()
    }

    /// The values of row `i`, by column.
    pub fn row(&self, i: usize) -> &[FieldValue] {
        let width = self.width();
        &self.values[i * width..(i + 1) * width]
    }

    /// Puts the rows in reverse order.
    pub fn reverse_rows(&mut self) {
        self.times.reverse();
        let width = self.width();
        if width > 0 {
            // Reversed as a whole, each row's values come out reversed too: put them back.
            self.values.reverse();
            self.values.chunks_mut(width).for_each(<[FieldValue]>::reverse);
        }
    }

    /// Drops the first `skip` rows and keeps at most `keep` of the rest.
    pub fn cut_rows(&mut self, skip: usize, keep: Option<usize>) {
        let width = self.width();
        let skip = skip.min(self.times.len());
        self.times.drain(..skip);
        self.values.drain(..skip * width);
        if let Some(keep) = keep {
            self.times.truncate(keep);
            self.values.truncate(keep.min(self.times.len()) * width);
        }
    }

    /// What expressions see of this table.
    pub fn scope(&self) -> Scope<'_> {
        Scope { columns: &self.columns, tags: &self.tags }
    }

    /// Keeps the rows `keep` says (one verdict a row).
    pub fn retain_rows(&mut self, keep: &[bool]) {
        assert_eq!(keep.len(), self.times.len(), "BUG: a verdict per row");
        let width = self.width();
        let mut times = keep.iter();
        self.times.retain(|_| *times.next().unwrap_or(&false));
        if width > 0 {
            let mut i = 0;
            self.values.retain(|_| {
                i += 1;
                keep[(i - 1) / width]
            });
        }
        debug_assert_eq!(self.values.len(), self.times.len() * width);
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

/// The series of one tag set: a run of the store's list (sorted by tag set, then field).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TagSetSeries<'a>(&'a [StoredSeries]);

impl<'a> TagSetSeries<'a> {
    pub fn tags(&self) -> &'a Tags {
        &self.0[0].tags
    }

    /// Its series, one a field, sorted by field.
    pub fn series(&self) -> &'a [StoredSeries] {
        self.0
    }

    /// The series of field `name`, if this tag set has one.
    pub fn get(&self, name: &str) -> Option<&'a StoredSeries> {
        self.0.binary_search_by(|s| (*s.field).cmp(name)).ok().map(|i| &self.0[i])
    }
}

/// The tag sets of a series list of one measurement that can satisfy `condition`, in list
/// order: where the condition requires `tag = 'value'` (a conjunct of its top-level AND), only
/// the tag sets carrying that value, from the list's index; otherwise all. The condition is
/// still decided on each (this only leaves out tag sets it must reject).
pub(crate) fn candidate_tag_sets<'l>(
    list: &'l SeriesList,
    condition: Option<&Expr>,
    is_field: &dyn Fn(&str) -> bool,
) -> Vec<TagSetSeries<'l>> {
    match condition.and_then(|c| required_tag_value(c, is_field)) {
        Some((key, value)) => list.tag_sets_with(key, value).map(TagSetSeries).collect(),
        None => list.tag_sets().map(TagSetSeries).collect(),
    }
}

/// The series a read of `measurement` under `condition` needs: where the condition requires
/// `tag = 'value'` and the store lists those series alone, only them; otherwise the whole
/// measurement's. Which names are fields is only known from the list, so the store is asked
/// first and its answer dropped when the name is a field's.
pub(crate) fn measurement_series(storage: &dyn Storage, database: &str, measurement: &str, condition: Option<&Expr>) -> Arc<SeriesList> {
    let required = condition.and_then(|c| required_tag_value(c, &|_| false));
    if let Some((key, value)) = required {
        if let Some(part) = storage.series_with_tag(database, measurement, key, value) {
            let fields = super::FieldNames::of(&part);
            // The same pair with the measurement's fields known: the condition requires it.
            if condition.and_then(|c| required_tag_value(c, &|name| fields.contains(name))) == Some((key, value)) {
                return part;
            }
        }
    }
    storage.series(database, Some(measurement))
}

/// A `tag = 'value'` (value not empty: an empty one also matches series without the tag) that
/// `condition` cannot hold without.
pub(crate) fn required_tag_value<'e>(condition: &'e Expr, is_field: &dyn Fn(&str) -> bool) -> Option<(&'e str, &'e str)> {
    match condition {
        Expr::Paren(inner) => required_tag_value(inner, is_field),
        Expr::Binary(b) if b.op == BinaryOp::And => required_tag_value(&b.lhs, is_field).or_else(|| required_tag_value(&b.rhs, is_field)),
        Expr::Binary(b) if b.op == BinaryOp::Eq => match (&b.lhs, &b.rhs) {
            (Expr::VarRef(tag), Expr::String(value)) | (Expr::String(value), Expr::VarRef(tag))
                if !value.is_empty() && names_tag(tag, is_field) =>
            {
                Some((tag.name.as_str(), value.as_str()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether a name in a condition is a tag's, as the condition's evaluation takes it.
fn names_tag(name: &VarRef, is_field: &dyn Fn(&str) -> bool) -> bool {
    match name.data_type {
        Some(DataType::Tag) => true,
        Some(_) => false,
        None => !name.name.eq_ignore_ascii_case("time") && !is_field(&name.name),
    }
}

/// What a raw query with a LIMIT needs of each table: its first `rows` counted rows in `order`.
/// A group's rows are its tables' rows merged by time, so the first rows of a group are among
/// the first rows of its tables, and a table read stops once it has them.
pub(crate) struct RowLimit<'a> {
    pub order: ScanOrder,
    pub rows: usize,
    /// Which rows of a table count towards `rows` (the WHERE clause holds and the row gives an
    /// output row): called with a table, whether to look from its last row backwards, and how
    /// many are wanted, it gives the indices of the first of them in that order.
    pub counted: &'a dyn Fn(&Table, bool, usize) -> Vec<usize>,
    /// Points of each column the first round reads where a condition on fields decides the
    /// rows (it may pass few, and each round reads its blocks again); 16 elsewhere.
    pub first_round: usize,
    /// The tables read form one group (no GROUP BY tags), whose first `rows` rows are wanted
    /// of all of them together, not of each: a table that cannot hold one is not read.
    pub one_group: bool,
}

/// Reads the tables of `measurement` whose tags can satisfy `condition`, with the columns
/// `wanted` (`None`: every field), over `range`; with a `limit`, only the rows it needs.
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
    limit: Option<&RowLimit<'_>>,
) -> Result<Vec<Table>, QueryError> {
    let all = measurement_series(storage, database, measurement, condition);
    let field_names = super::FieldNames::of(&all);
    let is_field = |name: &str| field_names.contains(name);
    let name: Arc<str> = Arc::from(measurement);
    let columns: Vec<Arc<str>> = match wanted {
        None => field_names.iter().cloned().collect(),
        Some(names) => field_names.iter().filter(|f| names.iter().any(|n| n.as_str() == &***f)).cloned().collect(),
    };
    // The tag sets to read, in list order: their tags, their series of each column, and
    // whether their rows must pass the condition one by one (it names fields).
    let mut reads: Vec<(Tags, Vec<Option<&StoredSeries>>, bool)> = Vec::new();
    for fields in candidate_tag_sets(&all, condition, &is_field) {
        let mut rows_decide = false;
        if let Some(condition) = condition {
            match tag_condition(condition, fields.tags(), &is_field, regexes) {
                Verdict::False => continue,
                Verdict::True => {}
                Verdict::Unknown => rows_decide = true,
            }
        }
        reads.push((fields.tags().clone(), columns.iter().map(|c| fields.get(c)).collect(), rows_decide));
    }
    if range.is_empty() {
        return Ok(Vec::new());
    }
    let schedule = match limit {
        Some(limit) if limit.one_group && limit.rows > 0 && reads.len() > 1 => Schedule::by_bounds(storage, &reads, range, limit)?,
        _ => Schedule { order: (0..reads.len()).map(|i| (i, None)).collect(), best: None },
    };
    let Schedule { order, mut best } = schedule;
    let mut tables: Vec<(usize, Table)> = Vec::with_capacity(order.len());
    for (index, bound) in order {
        if let (Some(best), Some(bound)) = (&best, bound) {
            if best.excludes(bound) {
                // The rest lie as far or further: none can give one of the first rows.
                break;
            }
        }
        let (tags, series, rows_decide) = &reads[index];
        let table = Table { name: name.clone(), tags: tags.clone(), columns: columns.clone(), times: Vec::new(), values: Vec::new() };
        let table = match limit {
            None => {
                let per_column = series
                    .iter()
                    .map(|s| {
                        s.map_or(Ok(ColumnPoints::default()), |s| read_column(storage, s, range, ScanOrder::OldestFirst, None, budget))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let (times, values) = join_on_time(per_column.into_iter().map(|c| (c.times, c.values)).collect());
                Table { times, values, ..table }
            }
            Some(limit) => match newest_row(storage, &table, series, range, limit, *rows_decide, budget)? {
                Some(newest) => newest,
                None => {
                    let first_round = if *rows_decide { limit.first_round } else { 16 };
                    read_limited(storage, table, series, range, limit, first_round, budget)?
                }
            },
        };
        if let Some(best) = &mut best {
            best.add(&table.times);
        }
        if !table.times.is_empty() {
            tables.push((index, table));
        }
    }
    // Back in list order: rows of equal times merge in the order of their tables.
    tables.sort_unstable_by_key(|(index, _)| *index);
    Ok(tables.into_iter().map(|(_, table)| table).collect())
}

/// The order in which a limited read of one group visits its tag sets, and what it has found.
struct Schedule {
    /// Tag sets by their place in the list, each with its bound where known: no row of it lies
    /// before the bound (oldest first) or after it (newest first). Sorted by bound in the
    /// limit's order.
    order: Vec<(usize, Option<i64>)>,
    best: Option<BestTimes>,
}

impl Schedule {
    /// Where the tables read form one group that wants only its first `limit.rows` rows (a
    /// raw `LIMIT` without GROUP BY tags: TSBS single-last-loc reads the oldest row of a truck
    /// whose points lie in five tag sets, four of them a few stray points late in the day):
    /// the tag sets in order of their bounds, so a read can stop at the first whose bound lies
    /// beyond the rows already found. Oldest first the bounds come from
    /// [`Storage::oldest_bounds`] (the engine's index, no points read); newest first from each
    /// series' newest point ([`Storage::last`]). A tag set without points is left out.
    fn by_bounds(
        storage: &dyn Storage,
        reads: &[(Tags, Vec<Option<&StoredSeries>>, bool)],
        range: TimeRange,
        limit: &RowLimit<'_>,
    ) -> Result<Schedule, QueryError> {
        let newest_first = limit.order == ScanOrder::NewestFirst;
        let present: Vec<&StoredSeries> = reads.iter().flat_map(|(_, series, _)| series.iter().flatten().copied()).collect();
        let bounds: Vec<Option<i64>> = if newest_first {
            storage.last(&present)?.into_iter().map(|point| point.map(|(time, _)| time)).collect()
        } else {
            storage.oldest_bounds(&present)?
        };
        assert_eq!(bounds.len(), present.len(), "BUG: a bound per series");
        let mut bounds = bounds.into_iter();
        let best = BestTimes::new(limit.rows, newest_first);
        let mut order = Vec::with_capacity(reads.len());
        for (index, (_, series, _)) in reads.iter().enumerate() {
            // Of a tag set, the bound of its columns' points nearest the limit's end.
            let of_columns = bounds.by_ref().take(series.iter().flatten().count()).flatten();
            let bound = if newest_first { of_columns.max().map(|t| t.min(range.to)) } else { of_columns.min().map(|t| t.max(range.from)) };
            if let Some(bound) = bound {
                order.push((index, Some(bound)));
            }
        }
        // Stable: tag sets of equal bounds keep list order.
        order.sort_by_key(|&(_, bound)| best.key(bound.expect("BUG: pushed with a bound")));
        Ok(Schedule { order, best: Some(best) })
    }
}

/// The times of the first `rows` rows found so far in the limit's order (the smallest times
/// oldest first, the largest newest first), as keys that grow away from the limit's end.
struct BestTimes {
    rows: usize,
    newest_first: bool,
    /// At most `rows` keys, the greatest on top.
    keys: std::collections::BinaryHeap<i64>,
}

impl BestTimes {
    fn new(rows: usize, newest_first: bool) -> BestTimes {
        assert!(rows > 0, "BUG: a limit of no rows reads nothing");
        BestTimes { rows, newest_first, keys: std::collections::BinaryHeap::with_capacity(rows.min(1024)) }
    }

    /// Orders times from the limit's end: ascending oldest first, descending newest first
    /// (`!t` reverses the order of every i64).
    fn key(&self, time: i64) -> i64 {
        if self.newest_first {
            !time
        } else {
            time
        }
    }

    fn add(&mut self, times: &[i64]) {
        for &time in times {
            let key = self.key(time);
            if self.keys.len() < self.rows {
                self.keys.push(key);
            } else if self.keys.peek().is_some_and(|&top| key < top) {
                self.keys.pop();
                self.keys.push(key);
            }
        }
    }

    /// Whether a tag set whose rows all lie at or beyond `bound` can give none of the first
    /// rows: `rows` rows were found strictly nearer the limit's end. A row at the same time as
    /// the last of them may still be one (rows of equal times keep their tables' order).
    fn excludes(&self, bound: i64) -> bool {
        self.keys.len() == self.rows && self.keys.peek().is_some_and(|&top| self.key(bound) > top)
    }
}

/// Points of one column read in ascending order.
#[derive(Default)]
pub(crate) struct ColumnPoints {
    pub times: Vec<i64>,
    pub values: Vec<FieldValue>,
    /// The read reached the end of its range (it did not stop at `enough`).
    pub exhausted: bool,
}

/// Reads `series` over `range` in `order`, stopping once `enough` points are read.
pub(crate) fn read_column(
    storage: &dyn Storage,
    series: &StoredSeries,
    range: TimeRange,
    order: ScanOrder,
    enough: Option<usize>,
    budget: &Budget,
) -> Result<ColumnPoints, QueryError> {
    // Newest first, each run is appended backwards and the whole reversed at the end: one copy
    // of each point, no vector a run.
    let mut times: Vec<i64> = Vec::with_capacity(enough.unwrap_or(0).min(1 << 16));
    let mut values: Vec<FieldValue> = Vec::with_capacity(times.capacity());
    let mut count = 0;
    let mut exhausted = true;
    let mut failed = Ok(());
    let mut sink = |t: &[i64], v: ColumnSlice<'_>| {
        // Of a run longer than what is still wanted, only the wanted end: a block of thousands
        // of points gives the one a `LIMIT 1` asks for. Only those count as scanned: the rest
        // of the block is neither copied nor looked at.
        let wanted = enough.map_or(t.len(), |enough| (enough - count).min(t.len()));
        failed = budget.take(wanted);
        if failed.is_err() {
            return ControlFlow::Break(());
        }
        match order {
            ScanOrder::OldestFirst => {
                times.extend_from_slice(&t[..wanted]);
                v.push_values(0..wanted, false, &mut values);
            }
            ScanOrder::NewestFirst => {
                let part = t.len() - wanted..t.len();
                times.extend(t[part.clone()].iter().rev());
                v.push_values(part, true, &mut values);
            }
        }
        count += wanted;
        if enough.is_some_and(|enough| count >= enough) {
            exhausted = false;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    };
    // A read that stops after `enough` points lets the store skip what lies beyond them.
    match enough {
        Some(limit) => storage.scan_at_most(series, range.from, range.to, order, limit, &mut sink)?,
        None => storage.scan(series, range.from, range.to, order, &mut sink)?,
    }
    failed?;
    if order == ScanOrder::NewestFirst {
        times.reverse();
        values.reverse();
    }
    debug_assert_eq!(times.len(), count);
    Ok(ColumnPoints { times, values, exhausted })
}

/// `ORDER BY time DESC LIMIT 1` over a tag set whose rows the condition does not decide (the
/// inner query of TSBS high-load, a dashboard's latest row): the newest row lies at the newest
/// time of any column and holds the columns whose newest point is at that time (the others have
/// none there). Answered from the store's newest points ([`Storage::last`], a lookup a column
/// in the engine) instead of reading blocks. `None` when that does not settle it (another
/// limit, a newest point after the range, a row that does not count) and the rows are read.
fn newest_row(
    storage: &dyn Storage,
    table: &Table,
    series: &[Option<&StoredSeries>],
    range: TimeRange,
    limit: &RowLimit<'_>,
    rows_decide: bool,
    budget: &Budget,
) -> Result<Option<Table>, QueryError> {
    if limit.order != ScanOrder::NewestFirst || limit.rows != 1 || rows_decide {
        return Ok(None);
    }
    let present: Vec<&StoredSeries> = series.iter().flatten().copied().collect();
    let lasts = storage.last(&present)?;
    let mut newest: Option<i64> = None;
    for &(time, _) in lasts.iter().flatten() {
        if time > range.to {
            return Ok(None);
        }
        if time >= range.from {
            newest = newest.max(Some(time));
        }
    }
    let empty =
        Table { name: table.name.clone(), tags: table.tags.clone(), columns: table.columns.clone(), times: Vec::new(), values: Vec::new() };
    let Some(time) = newest else { return Ok(Some(empty)) };
    budget.take(present.len())?;
    let mut lasts = lasts.into_iter();
    let values = series
        .iter()
        .map(|s| match s.and_then(|_| lasts.next().flatten()) {
            Some((t, value)) if t == time => value,
            _ => FieldValue::Null,
        })
        .collect();
    let row = Table { times: vec![time], values, ..empty };
    Ok((!(limit.counted)(&row, false, 1).is_empty()).then_some(row))
}

/// The first `limit.rows` counted rows of `table` in `limit.order`. Reads its columns in rounds
/// of a growing number of points each; a round's rows are complete (every column's point at
/// their time read) up to the nearest place where one column stopped, and the next round reads
/// on from there until enough rows count or every column is read to the end of `range`.
fn read_limited(
    storage: &dyn Storage,
    mut table: Table,
    series: &[Option<&StoredSeries>],
    mut range: TimeRange,
    limit: &RowLimit<'_>,
    first_round: usize,
    budget: &Budget,
) -> Result<Table, QueryError> {
    let newest_first = limit.order == ScanOrder::NewestFirst;
    let mut batch = limit.rows.max(first_round).clamp(1, 1 << 20);
    // Counted rows in the limit's order: their times and values.
    let mut kept_times: Vec<i64> = Vec::new();
    let mut kept_values: Vec<FieldValue> = Vec::new();
    // Bounded: each round reads at least `batch` new points of some column, or ends the read.
    while kept_times.len() < limit.rows && !range.is_empty() {
        let mut per_column = Vec::with_capacity(series.len());
        // Where the complete rows end: the newest place a column stopped (newest first), the oldest (oldest first).
        let mut frontier: Option<i64> = None;
        for s in series {
            let column = match s {
                Some(s) => read_column(storage, s, range, limit.order, Some(batch), budget)?,
                None => ColumnPoints { exhausted: true, ..ColumnPoints::default() },
            };
            if !column.exhausted {
                // A read that stopped holds at least one point.
                let edge = if newest_first { column.times[0] } else { column.times[column.times.len() - 1] };
                frontier = Some(match frontier {
                    None => edge,
                    Some(f) if newest_first => f.max(edge),
                    Some(f) => f.min(edge),
                });
            }
            per_column.push(column);
        }
        if let Some(frontier) = frontier {
            for column in &mut per_column {
                let cut = column.times.partition_point(|&t| t < frontier);
                if newest_first {
                    column.times.drain(..cut);
                    column.values.drain(..cut);
                } else {
                    let keep = cut + usize::from(column.times.get(cut) == Some(&frontier));
                    column.times.truncate(keep);
                    column.values.truncate(keep);
                }
            }
        }
        let (times, values) = join_on_time(per_column.into_iter().map(|c| (c.times, c.values)).collect());
        let round = Table { times, values, ..table };
        for i in (limit.counted)(&round, newest_first, limit.rows - kept_times.len()) {
            assert!(i < round.times.len(), "BUG: a counted row beyond the round");
            kept_times.push(round.times[i]);
            kept_values.extend_from_slice(round.row(i));
        }
        assert!(kept_times.len() <= limit.rows, "BUG: more rows counted than wanted");
        table = Table { times: Vec::new(), values: Vec::new(), ..round };
        let Some(frontier) = frontier else { break };
        if newest_first {
            let Some(to) = frontier.checked_sub(1) else { break };
            range.to = to;
        } else {
            let Some(from) = frontier.checked_add(1) else { break };
            range.from = from;
        }
        batch = batch.saturating_mul(2);
    }
    if newest_first {
        kept_times.reverse();
        let width = table.width();
        if width > 0 {
            // Rows reversed, each row's columns in order.
            kept_values = kept_values.chunks_exact(width).rev().flatten().cloned().collect();
        }
    }
    table.times = kept_times;
    table.values = kept_values;
    Ok(table)
}

/// Joins per-column sorted points into rows (one after another, as [`Table::values`]), null
/// where a column has no point at a time.
fn join_on_time(mut columns: Vec<(Vec<i64>, Vec<FieldValue>)>) -> (Vec<i64>, Vec<FieldValue>) {
    match columns.len() {
        0 => return (Vec::new(), Vec::new()),
        1 => return columns.pop().unwrap_or_default(),
        _ => {}
    }
    // The fields of one line share their times: the rows are the columns interleaved.
    if columns.iter().all(|(t, _)| *t == columns[0].0) {
        let width = columns.len();
        let length = columns[0].0.len();
        let mut values = Vec::with_capacity(length * width);
        let mut iterators: Vec<_> = columns.iter_mut().map(|(_, v)| std::mem::take(v).into_iter()).collect();
        for _ in 0..length {
            for column in &mut iterators {
                values.push(column.next().unwrap_or(FieldValue::Null));
            }
        }
        let times = std::mem::take(&mut columns[0].0);
        return (times, values);
    }
    let mut positions = vec![0usize; columns.len()];
    let mut times = Vec::new();
    let mut values = Vec::new();
    loop {
        let next = columns.iter().zip(&positions).filter_map(|((t, _), &p)| t.get(p).copied()).min();
        let Some(time) = next else { break };
        for ((t, v), p) in columns.iter_mut().zip(positions.iter_mut()) {
            if t.get(*p) == Some(&time) {
                values.push(std::mem::replace(&mut v[*p], FieldValue::Null));
                *p += 1;
            } else {
                values.push(FieldValue::Null);
            }
        }
        times.push(time);
    }
    (times, values)
}

/// A subquery's result series as a table: its group tags become tags, its columns fields.
pub(crate) fn table_of_series(s: ResultSeries) -> Table {
    let columns: Vec<Arc<str>> = s.columns.iter().skip(usize::from(s.has_time)).map(|c| Arc::from(c.as_str())).collect();
    let width = columns.len();
    let mut times = Vec::with_capacity(s.rows.len());
    let mut values = Vec::with_capacity(s.rows.len() * width);
    for row in s.rows {
        assert_eq!(row.values.len(), width, "BUG: a result row has a value a column");
        times.push(row.time);
        values.extend(row.values);
    }
    Table { name: s.name, tags: s.tags, columns, times, values }
}

/// A table's rows as a result series (with a time column).
pub(crate) fn series_of_table(table: Table) -> ResultSeries {
    let width = table.width();
    let columns = crate::result::time_and(table.columns.iter().map(|c| c.to_string()));
    let mut values = table.values.into_iter();
    let rows = table.times.iter().map(|&time| ResultRow { time, values: values.by_ref().take(width).collect() }).collect();
    ResultSeries { name: table.name, tags: table.tags, columns, rows, has_time: true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_join_on_time_with_nulls_for_missing_points() {
        let a = (vec![1, 2, 4], vec![FieldValue::Integer(1), FieldValue::Integer(2), FieldValue::Integer(4)]);
        let b = (vec![2, 3], vec![FieldValue::Float(2.5), FieldValue::Float(3.5)]);
        let (times, values) = join_on_time(vec![a, b]);
        assert_eq!(times, vec![1, 2, 3, 4]);
        assert_eq!(values[0..2], [FieldValue::Integer(1), FieldValue::Null]);
        assert_eq!(values[2..4], [FieldValue::Integer(2), FieldValue::Float(2.5)]);
        assert_eq!(values[4..6], [FieldValue::Null, FieldValue::Float(3.5)]);
        assert_eq!(values[6..8], [FieldValue::Integer(4), FieldValue::Null]);
        assert_eq!(values.len(), 8);
    }

    #[test]
    fn columns_of_equal_times_interleave() {
        let a = (vec![1, 2], vec![FieldValue::Integer(1), FieldValue::Integer(2)]);
        let b = (vec![1, 2], vec![FieldValue::Float(1.5), FieldValue::Float(2.5)]);
        let c = (vec![1, 2], vec![FieldValue::Boolean(true), FieldValue::Null]);
        let (times, values) = join_on_time(vec![a, b, c]);
        assert_eq!(times, vec![1, 2]);
        assert_eq!(
            values,
            vec![
                FieldValue::Integer(1),
                FieldValue::Float(1.5),
                FieldValue::Boolean(true),
                FieldValue::Integer(2),
                FieldValue::Float(2.5),
                FieldValue::Null
            ]
        );
        let single = (vec![5], vec![FieldValue::Integer(7)]);
        assert_eq!(join_on_time(vec![single.clone()]), single);
        assert_eq!(join_on_time(Vec::new()), (Vec::new(), Vec::new()));
    }

    #[test]
    fn candidate_tag_sets_leave_out_only_tag_sets_the_condition_rejects() {
        let mut storage = crate::memory::MemoryStorage::default();
        for (name, fleet) in [("a", "x"), ("b", "x"), ("c", "y"), ("", "y")] {
            let tags: Vec<(&str, &str)> = [("fleet", fleet), ("name", name)].into_iter().filter(|(_, v)| !v.is_empty()).collect();
            storage.insert("db", "m", &tags, "v", vec![(1, FieldValue::Float(1.0))]);
            storage.insert("db", "m", &tags, "w", vec![(1, FieldValue::Float(2.0))]);
        }
        let list = storage.series("db", Some("m"));
        let is_field = |name: &str| name == "v" || name == "w";
        let names = |sets: Vec<TagSetSeries<'_>>| -> Vec<String> {
            sets.iter().map(|s| s.tags().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")).collect()
        };
        let regexes = crate::eval::Regexes::default();
        for (condition, expected) in [
            (r#""name" = 'a'"#, vec!["fleet=x,name=a"]),
            (r#"'b' = "name" AND v > 0"#, vec!["fleet=x,name=b"]),
            ("(fleet = 'y') AND (v > 0 OR w > 0)", vec!["fleet=y", "fleet=y,name=c"]),
            // Not required by the condition as a whole: every tag set stays a candidate.
            (r#""name" = 'a' OR "name" = 'c'"#, vec!["fleet=x,name=a", "fleet=x,name=b", "fleet=y", "fleet=y,name=c"]),
            (r#""name" = ''"#, vec!["fleet=x,name=a", "fleet=x,name=b", "fleet=y", "fleet=y,name=c"]),
            (r#""name"::field = 'a'"#, vec!["fleet=x,name=a", "fleet=x,name=b", "fleet=y", "fleet=y,name=c"]),
            ("v = 'a'", vec!["fleet=x,name=a", "fleet=x,name=b", "fleet=y", "fleet=y,name=c"]),
            (r#""name" = 'nobody'"#, vec![]),
        ] {
            let parsed = sensordb_influxql::parse(&format!("SELECT v FROM m WHERE {condition}")).expect("parses");
            let sensordb_influxql::Statement::Select(select) = &parsed.statements[0] else { panic!("a select") };
            let condition = select.condition.as_ref();
            let candidates = candidate_tag_sets(&list, condition, &is_field);
            assert_eq!(names(candidate_tag_sets(&list, condition, &is_field)), expected, "{condition:?}");
            // Every tag set left out is one the condition rejects.
            for set in list.tag_sets().map(TagSetSeries) {
                let kept = candidates.iter().any(|c| Arc::ptr_eq(c.tags(), set.tags()));
                if !kept {
                    let verdict = tag_condition(condition.expect("a condition"), set.tags(), &is_field, &regexes);
                    assert!(matches!(verdict, Verdict::False), "{condition:?} left out {:?}", set.tags());
                }
            }
        }
    }

    #[test]
    fn rows_reverse_and_cut_as_whole_rows() {
        let int = FieldValue::Integer;
        let mut table = Table {
            name: Arc::from("m"),
            tags: Arc::from(Vec::new()),
            columns: vec![Arc::from("a"), Arc::from("b")],
            times: vec![1, 2, 3, 4],
            values: vec![int(10), int(11), int(20), int(21), int(30), int(31), int(40), int(41)],
        };
        table.reverse_rows();
        assert_eq!(table.times, [4, 3, 2, 1]);
        assert_eq!(table.row(0), [int(40), int(41)]);
        assert_eq!(table.row(3), [int(10), int(11)]);
        table.cut_rows(1, Some(2));
        assert_eq!(table.times, [3, 2]);
        assert_eq!(table.values, [int(30), int(31), int(20), int(21)]);
        table.cut_rows(5, None);
        assert!(table.times.is_empty() && table.values.is_empty());
        // A table and its result series carry the same rows.
        let table = Table { times: vec![7, 8], values: vec![int(1), int(2), int(3), int(4)], ..table };
        let series = series_of_table(table);
        assert_eq!(series.columns.as_ref(), ["time", "a", "b"]);
        assert_eq!(series.rows[1], ResultRow { time: 8, values: vec![int(3), int(4)] });
        let back = table_of_series(series);
        assert_eq!((back.times, back.values), (vec![7, 8], vec![int(1), int(2), int(3), int(4)]));
    }
}
