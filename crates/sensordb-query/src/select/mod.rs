//! `SELECT`: reads the tables of its sources (measurements or subqueries), keeps the rows its
//! WHERE clause holds for, groups them by the GROUP BY tags and either projects rows (a raw
//! query) or computes each field over time buckets (an aggregate query), then fills, orders and
//! limits the series as InfluxDB 1.x does.

mod accumulator;
mod aggregate;
pub(crate) mod fast;
mod newest;
pub(crate) mod plan;
mod raw;
mod subquery;
pub(crate) mod table;

use crate::bound::Bound;
use crate::error::QueryError;
use crate::eval::Regexes;
use crate::result::ResultSeries;
use crate::storage::ScanOrder;
use crate::storage::Storage;
use crate::time::{split_condition, TimeRange};
use sensordb_influxql::{Dimension, Expr, MeasurementName, SelectStatement, SortOrder, Source};
use std::collections::BTreeMap;
use table::{read_measurement, Budget, RowLimit, Table};

/// Bounds on what one query may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Points read from storage over the whole query.
    pub max_points_scanned: u64,
    /// GROUP BY time buckets per series.
    pub max_buckets: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_points_scanned: 100_000_000, max_buckets: 1_000_000 }
    }
}

#[cfg(test)]
thread_local! {
    /// Tests set the first round's points of limited reads, so that every shape reads in rounds.
    pub(super) static FIRST_ROUND: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// Tests turn off raw subqueries answered as members (see [`run_as_tables`]) to compare.
    pub(super) static MERGED_SUBQUERIES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Above this LIMIT (plus OFFSET) a raw query reads its tables whole: the rows it returns are
/// most of what it reads anyway.
const MAX_LIMITED_ROWS: usize = 1 << 20;

/// What a statement runs against.
pub struct Context<'a> {
    pub storage: &'a dyn Storage,
    /// The `db` of the request; a source naming its own database overrides it.
    pub database: &'a str,
    /// The query's `now()`, nanoseconds.
    pub now: i64,
    pub limits: Limits,
}

/// A `tag = 'value'` that `condition` cannot hold without (a conjunct of its top-level AND), taking
/// every name that is not `time` for a tag: a caller estimating which series a read of a
/// measurement under `condition` may touch (the read itself knows the fields and may read more).
pub fn required_tag(condition: &Expr) -> Option<(&str, &str)> {
    table::required_tag_value(condition, &|_| false)
}

/// Runs a SELECT statement.
pub fn select(context: &Context<'_>, statement: &SelectStatement) -> Result<Vec<ResultSeries>, QueryError> {
    let budget = Budget { max_points: context.limits.max_points_scanned, used: std::cell::Cell::new(0) };
    run(context, statement, TimeRange::ALL, None, &budget)
}

/// Runs `statement` within `outer_range`; `per_series_limit` (the outer query's GROUP BY) makes
/// raw LIMIT and OFFSET count as InfluxDB's engine does then (see [`limit_per_series`]).
fn run(
    context: &Context<'_>,
    statement: &SelectStatement,
    outer_range: TimeRange,
    per_series_limit: Option<&[Dimension]>,
    budget: &Budget,
) -> Result<Vec<ResultSeries>, QueryError> {
    let (groups, order_rows) = run_groups(context, statement, outer_range, per_series_limit, false, budget)?;
    Ok(finish(statement, groups.into_iter().map(GroupRows::into_series).collect(), order_rows))
}

/// [`run`] for a subquery: its answer as the tables the outer query reads. With
/// `raw_as_members` (an outer aggregate that merges its group's rows itself), a raw group of the
/// subquery may come as several tables, one a stored series, under the group's name and tags
/// (see [`raw::run_members`]); only where nothing orders, offsets or limits its rows or groups.
fn run_as_tables(
    context: &Context<'_>,
    statement: &SelectStatement,
    outer_range: TimeRange,
    per_series_limit: Option<&[Dimension]>,
    raw_as_members: bool,
    budget: &Budget,
) -> Result<Vec<Table>, QueryError> {
    #[cfg(test)]
    let raw_as_members = raw_as_members && !MERGED_SUBQUERIES.with(|m| m.get());
    let raw_as_members = raw_as_members
        && statement.order == SortOrder::Ascending
        && statement.limit.is_none()
        && statement.offset.is_none()
        && statement.series_limit.is_none()
        && statement.series_offset.is_none();
    let (groups, order_rows) = run_groups(context, statement, outer_range, per_series_limit, raw_as_members, budget)?;
    Ok(finish(statement, groups.into_iter().map(GroupRows::into_table).collect(), order_rows))
}

/// The answer of one group: result series (aggregates, rows limited per stored series) or raw
/// rows as a flat table.
enum GroupRows {
    Series(ResultSeries),
    Table(Table),
}

impl GroupRows {
    fn into_series(self) -> ResultSeries {
        match self {
            GroupRows::Series(series) => series,
            GroupRows::Table(table) => table::series_of_table(table),
        }
    }

    fn into_table(self) -> Table {
        match self {
            GroupRows::Series(series) => table::table_of_series(series),
            GroupRows::Table(table) => table,
        }
    }
}

/// The groups of `statement`'s answer, named and tagged, and whether their rows are still to be
/// ordered and limited (rows limited per stored series are already).
fn run_groups(
    context: &Context<'_>,
    statement: &SelectStatement,
    outer_range: TimeRange,
    per_series_limit: Option<&[Dimension]>,
    raw_as_members: bool,
    budget: &Budget,
) -> Result<(Vec<GroupRows>, bool), QueryError> {
    if statement.into.is_some() {
        return Err(QueryError::invalid("SELECT ... INTO is not supported"));
    }

    let zone = crate::time::zone_of(statement)?;
    let (mut range, condition) = split_condition(statement.condition.as_ref(), context.now, zone.as_ref())?;
    range = range.intersect(outer_range);
    let interval = statement.group_by.iter().find_map(|d| match d {
        Dimension::Time { interval, offset } => Some((interval.nanos(), *offset)),
        _ => None,
    });
    for field in &statement.fields {
        plan::check_functions(&field.expr)?;
    }
    let aggregate = statement.fields.iter().any(|f| plan::is_aggregate(&f.expr));
    if interval.is_some() && !aggregate {
        return Err(QueryError::invalid("GROUP BY requires at least one aggregate function"));
    }
    let mut regex_sources: Vec<&Expr> = statement.fields.iter().map(|f| &f.expr).collect();
    regex_sources.extend(condition.as_ref());
    let regexes = Regexes::compile(regex_sources)?;
    if aggregate && per_series_limit.is_none() {
        if let Some(series) = fast::run(context, statement, range, condition.as_ref(), interval, &regexes, budget)? {
            return Ok((series.into_iter().map(GroupRows::Series).collect(), true));
        }
    }
    let wanted = wanted_columns(statement, condition.as_ref());
    // A raw query with a LIMIT reads only the rows it can return.
    let row_filter = raw::RowFilter::new(statement, condition.as_ref(), &regexes);
    let counted = |table: &Table, newest_first: bool, wanted: usize| row_filter.first_counted(table, newest_first, wanted);
    let row_limit = match statement.limit {
        Some(limit) if !aggregate => {
            // Under an outer query grouped differently, each stored series gives one row more
            // (see `limit_per_series`).
            let extra = usize::from(per_series_limit.is_some());
            let rows = (limit as usize).saturating_add(statement.offset.unwrap_or(0) as usize).saturating_add(extra);
            let order = if statement.order == SortOrder::Descending { ScanOrder::NewestFirst } else { ScanOrder::OldestFirst };
            // A condition on fields may pass few rows: rounds of a block's worth then.
            #[cfg(not(test))]
            let first_round = 1024;
            #[cfg(test)]
            let first_round = FIRST_ROUND.with(|f| f.get()).unwrap_or(1024);
            // Tag dimensions make groups of tables, each limited alone.
            let one_group = per_series_limit.is_none() && statement.group_by.iter().all(|d| matches!(d, Dimension::Time { .. }));
            (rows <= MAX_LIMITED_ROWS).then_some(RowLimit { order, rows, counted: &counted, first_round, one_group })
        }
        _ => None,
    };
    let mut tables = Vec::new();
    // `GROUP BY *` and `/regex/` name every tag key of a measurement, found or not.
    let needs_keys =
        statement.group_by.iter().chain(per_series_limit.unwrap_or(&[])).any(|d| matches!(d, Dimension::Wildcard | Dimension::Regex(_)));
    let mut keys = TagKeys::new();
    for source in &statement.sources {
        match source {
            Source::Subquery(inner) => {
                let (inner, per_series) = subquery::under(inner, statement);
                let outer_dimensions = per_series.then_some(statement.group_by.as_slice());
                // An aggregate merges its group's rows itself: a raw subquery's need not be.
                let members = aggregate && per_series_limit.is_none() && !per_series;
                let result = run_as_tables(context, &inner, range, outer_dimensions, members, budget)?;
                if needs_keys {
                    for table in &result {
                        let known = keys.entry(table.name.to_string()).or_default();
                        let mut all: Vec<String> = known.drain(..).chain(tag_keys([&*table.tags])).collect();
                        all.sort();
                        all.dedup();
                        *known = all;
                    }
                }
                tables.extend(result);
            }
            Source::Measurement(m) => {
                let database = m.database.as_deref().unwrap_or(context.database);
                let names: Vec<String> = match &m.name {
                    MeasurementName::Name(name) => vec![name.clone()],
                    MeasurementName::Regex(pattern) => {
                        let re = Regexes::one(pattern.as_str())?;
                        measurements(context.storage, database).into_iter().filter(|n| re.is_match(n)).collect()
                    }
                };
                for name in names {
                    if needs_keys {
                        let series = table::measurement_series(context.storage, database, &name, condition.as_ref());
                        keys.insert(name.clone(), series.tag_keys().to_vec());
                    }
                    tables.extend(read_measurement(
                        context.storage,
                        database,
                        &name,
                        wanted.as_deref(),
                        condition.as_ref(),
                        &regexes,
                        range,
                        budget,
                        row_limit.as_ref(),
                    )?);
                }
            }
        }
    }
    // Rows the condition rejects go. A subquery's rows are not cut to the range again: its
    // buckets carry their start times, which may lie before the range that made them, and
    // InfluxDB keeps them (`WHERE time > '00:00'` around `GROUP BY time(10m)` keeps 00:00).
    for table in &mut tables {
        keep_rows(table, condition.as_ref(), &regexes);
    }
    tables.retain(|t| !t.times.is_empty());
    let mut limited = match per_series_limit {
        Some(outer) if !aggregate => Some(limit_per_series(statement, &tables, outer, &keys, &regexes)?),
        _ => None,
    };
    let groups = group(&tables, &statement.group_by, &keys)?;
    let mut out = Vec::new();
    for (key, members) in groups {
        let limited_series = limited.as_mut().map(|limited| limited.remove(&key).unwrap_or_default());
        let GroupKey { name, tags, .. } = key;
        let series = if aggregate {
            aggregate::run(statement, &members, range, interval, context, &regexes)?
        } else if let Some(series) = limited_series {
            series
        } else if raw_as_members {
            let (name, tags): (std::sync::Arc<str>, table::Tags) = (name.into(), tags.into());
            for table in raw::run_members(statement, &members, &regexes)? {
                out.push(GroupRows::Table(Table { name: name.clone(), tags: tags.clone(), ..table }));
            }
            continue;
        } else {
            let mut table = raw::run_table(statement, &members, &regexes)?;
            table.name = name.into();
            table.tags = tags.into();
            out.push(GroupRows::Table(table));
            continue;
        };
        out.push(GroupRows::Series(ResultSeries { name: name.into(), tags: tags.into(), ..series }));
    }
    // Rows already limited per stored series keep their order and count.
    let rows_limited = limited.is_some();
    Ok((out, !rows_limited))
}

/// A group's answer as [`finish`] orders and limits it: result rows, or a subquery's table.
trait GroupAnswer {
    /// Puts the rows in the statement's order and applies its OFFSET and LIMIT.
    fn order_and_limit(&mut self, statement: &SelectStatement);
    fn has_rows(&self) -> bool;
}

impl GroupAnswer for ResultSeries {
    fn order_and_limit(&mut self, statement: &SelectStatement) {
        if statement.order == SortOrder::Descending {
            self.rows.reverse();
        }
        let offset = statement.offset.unwrap_or(0) as usize;
        self.rows.drain(..offset.min(self.rows.len()));
        if let Some(limit) = statement.limit {
            self.rows.truncate(limit as usize);
        }
    }

    fn has_rows(&self) -> bool {
        !self.rows.is_empty()
    }
}

impl GroupAnswer for Table {
    fn order_and_limit(&mut self, statement: &SelectStatement) {
        if statement.order == SortOrder::Descending {
            self.reverse_rows();
        }
        self.cut_rows(statement.offset.unwrap_or(0) as usize, statement.limit.map(|l| l as usize));
    }

    fn has_rows(&self) -> bool {
        !self.times.is_empty()
    }
}

/// Orders and limits the rows of each group (unless `order_rows` is false: they were limited
/// already), drops empty groups, then orders the groups and applies SOFFSET and SLIMIT.
fn finish<G: GroupAnswer>(statement: &SelectStatement, all: Vec<G>, order_rows: bool) -> Vec<G> {
    let mut groups = Vec::with_capacity(all.len());
    for mut group in all {
        if order_rows {
            group.order_and_limit(statement);
        }
        if group.has_rows() {
            groups.push(group);
        }
    }
    if statement.order == SortOrder::Descending {
        groups.reverse();
    }
    let series_offset = statement.series_offset.unwrap_or(0) as usize;
    groups.drain(..series_offset.min(groups.len()));
    if let Some(limit) = statement.series_limit {
        groups.truncate(limit as usize);
    }
    groups
}

/// The rows of a raw subquery limited as InfluxDB 1.8's engine limits them when the outer
/// query groups differently (`createVarRefIterator` with `len(opt.Dimensions) !=
/// len(opt.GroupBy)`): each stored series (table) first gives its first OFFSET + LIMIT + 1 rows
/// (the engine's per-series limit iterator checks the count before it reads, so it lets one
/// more through and leaves OFFSET to the next step); the series of one outer group are then
/// merged in time order and limited with OFFSET and LIMIT, the count starting over whenever the
/// inner group changes from one row to the next (`query.NewLimitIterator`). By inner group.
/// Checked against InfluxDB 1.8.10 on TSBS high-load, whose trucks are stored under several tag
/// sets.
fn limit_per_series(
    statement: &SelectStatement,
    tables: &[Table],
    outer: &[Dimension],
    keys: &TagKeys,
    regexes: &Regexes,
) -> Result<BTreeMap<GroupKey, ResultSeries>, QueryError> {
    let offset = statement.offset.unwrap_or(0) as usize;
    // Rows each table gives the merge (see above). A storage that reads by the statement's
    // limit gives no more; one that reads whole is cut here.
    let per_table = statement.limit.map_or(usize::MAX, |limit| (limit as usize).saturating_add(offset).saturating_add(1));
    let descending = statement.order == SortOrder::Descending;
    let mut kept: BTreeMap<GroupKey, ResultSeries> = BTreeMap::new();
    // Compiled once, not once a tag set.
    let inner_regexes = dimension_regexes(&statement.group_by)?;
    for members in group(tables, outer, keys)?.into_values() {
        // The group's tables projected together: the statement's fields are expanded and their
        // names deduplicated once a group, not once a table (TSBS high-load projects 140 tables
        // of two rows each), and only the rows kept become result rows.
        let (names, mut projected) = raw::project(statement, &members, regexes);
        let width = names.len();
        let columns = crate::result::time_and(names.iter().map(|n| n.to_string()));
        // Each row names its inner group by an index into `inner_keys` (a key a table, equal
        // keys one index): a clone of the key a row was an eighth of TSBS high-load's CPU.
        let mut inner_keys: Vec<GroupKey> = Vec::new();
        // (inner group, time, table, row) of each table's first rows in the statement's order.
        let mut rows: Vec<(usize, i64, usize, usize)> = Vec::new();
        for (member, (table, (times, _))) in members.iter().zip(&projected).enumerate() {
            let key = table_group_key(table, &statement.group_by, &inner_regexes, keys);
            let key = match inner_keys.iter().position(|k| *k == key) {
                Some(index) => index,
                None => {
                    inner_keys.push(key);
                    inner_keys.len() - 1
                }
            };
            // The first rows in the statement's order: newest first, from the end.
            let row_at = |k: usize| if descending { times.len() - 1 - k } else { k };
            rows.extend((0..times.len().min(per_table)).map(row_at).map(|row| (key, times[row], member, row)));
        }
        // Stable: rows of equal times keep the tables' order.
        if descending {
            rows.sort_by_key(|&(_, time, _, _)| std::cmp::Reverse(time));
        } else {
            rows.sort_by_key(|&(_, time, _, _)| time);
        }
        let mut previous: Option<usize> = None;
        let mut count = 0;
        for (key, time, member, row) in rows {
            if previous != Some(key) {
                previous = Some(key);
                count = 0;
            }
            count += 1;
            if count <= offset || statement.limit.is_some_and(|l| count - offset > l as usize) {
                continue;
            }
            let series = kept.entry(inner_keys[key].clone()).or_insert_with(|| ResultSeries {
                columns: columns.clone(),
                has_time: true,
                ..ResultSeries::default()
            });
            // Each row is kept at most once: its values are taken, not cloned.
            let values = projected[member].1[row * width..(row + 1) * width]
                .iter_mut()
                .map(|value| std::mem::replace(value, crate::value::FieldValue::Null))
                .collect();
            series.rows.push(crate::result::ResultRow { time, values });
        }
    }
    Ok(kept)
}

/// The measurements of a database, sorted.
pub(crate) fn measurements(storage: &dyn Storage, database: &str) -> Vec<String> {
    let mut names: Vec<String> = storage.series(database, None).iter().map(|s| s.measurement.to_string()).collect();
    names.sort();
    names.dedup();
    names
}

/// The field columns a statement needs from storage: every name it mentions (tags among them
/// are simply not found), or `None` for all of them (`SELECT *`).
fn wanted_columns(statement: &SelectStatement, condition: Option<&Expr>) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for field in &statement.fields {
        if !collect_names(&field.expr, &mut names) {
            return None;
        }
    }
    if let Some(condition) = condition {
        collect_names(condition, &mut names);
    }
    Some(names)
}

/// Adds the names `expr` refers to; false on a wildcard.
fn collect_names(expr: &Expr, out: &mut Vec<String>) -> bool {
    match expr {
        Expr::VarRef(v) => {
            out.push(v.name.clone());
            true
        }
        Expr::Distinct(name) => {
            out.push(name.clone());
            true
        }
        Expr::Wildcard(_) | Expr::Regex(_) => false,
        Expr::Call(call) => call.args.iter().all(|a| collect_names(a, out)),
        Expr::Binary(b) => collect_names(&b.lhs, out) & collect_names(&b.rhs, out),
        Expr::Paren(inner) | Expr::Negate(inner) => collect_names(inner, out),
        _ => true,
    }
}

fn keep_rows(table: &mut Table, condition: Option<&Expr>, regexes: &Regexes) {
    let Some(condition) = condition else { return };
    // A condition the tags decide (`"sensor" = 's00'`: the time part is split off already)
    // keeps or drops the whole table without a look at its rows.
    let is_field = |name: &str| table.column(name).is_some();
    let verdict = if crate::time::mentions_time(condition) {
        crate::eval::Verdict::Unknown
    } else {
        crate::eval::tag_condition(condition, &table.tags, &is_field, regexes)
    };
    match verdict {
        crate::eval::Verdict::True => return,
        crate::eval::Verdict::False => {
            table.times.clear();
            table.values.clear();
            return;
        }
        crate::eval::Verdict::Unknown => {}
    }
    let bound = Bound::new(condition, &table.scope(), regexes).into_condition();
    if let Some(constant) = bound.constant() {
        if !matches!(constant, crate::value::FieldValue::Boolean(true)) {
            table.times.clear();
            table.values.clear();
        }
        return;
    }
    let test = bound.row_test();
    let keep: Vec<bool> = (0..table.times.len()).map(|i| test.holds(table.times[i], table.row(i))).collect();
    if keep.iter().all(|&k| k) {
        return;
    }
    table.retain_rows(&keep);
}

/// A group's measurement and GROUP BY tag values (sorted by key), ordered as the tuple
/// `(name, tags)` is, by one comparison of a byte string that encodes them: a query grouping
/// hundreds of tag sets compared each key's strings one `memcmp` call at a time, a fifth of
/// TSBS high-load's CPU.
#[derive(Clone, Debug)]
struct GroupKey {
    name: String,
    tags: Vec<(String, String)>,
    /// Each string with 0x00 and 0x01 escaped (0x01 0x01 and 0x01 0x02) and ended by 0x00,
    /// which sorts before any byte of an escaped string: the bytes sort as the strings do, a
    /// string before its extensions, and the encoding can be read back, so equal bytes are
    /// equal keys.
    order: Box<[u8]>,
}

impl GroupKey {
    fn new(name: String, tags: Vec<(String, String)>) -> GroupKey {
        let length = name.len() + 1 + tags.iter().map(|(k, v)| k.len() + v.len() + 2).sum::<usize>();
        let mut order = Vec::with_capacity(length);
        let mut put = |text: &str| {
            // Names and tag values hold neither byte but in tests: copied whole.
            if !text.bytes().any(|byte| byte <= 1) {
                order.extend_from_slice(text.as_bytes());
            } else {
                for &byte in text.as_bytes() {
                    match byte {
                        0 | 1 => order.extend_from_slice(&[1, byte + 1]),
                        _ => order.push(byte),
                    }
                }
            }
            order.push(0);
        };
        put(&name);
        for (key, value) in &tags {
            put(key);
            put(value);
        }
        GroupKey { name, tags, order: order.into_boxed_slice() }
    }
}

impl PartialEq for GroupKey {
    fn eq(&self, other: &GroupKey) -> bool {
        self.order == other.order
    }
}

impl Eq for GroupKey {}

impl PartialOrd for GroupKey {
    fn partial_cmp(&self, other: &GroupKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GroupKey {
    fn cmp(&self, other: &GroupKey) -> std::cmp::Ordering {
        self.order.cmp(&other.order)
    }
}

/// The tag keys of each measurement (or subquery result) a statement groups by `*` or a
/// `/regex/`: every key of its series, sorted.
type TagKeys = BTreeMap<String, Vec<String>>;

/// The distinct keys of `tag_sets`, sorted.
pub(crate) fn tag_keys<'s>(tag_sets: impl IntoIterator<Item = &'s [(String, String)]>) -> Vec<String> {
    distinct_sorted(tag_sets.into_iter().flat_map(|tags| tags.iter().map(|(k, _)| k.as_str()))).into_iter().map(str::to_string).collect()
}

/// The distinct names among `names`, sorted. A measurement's series repeat a handful of field
/// names and tag keys thousands of times: a sorted vector searched per name does no allocation
/// or reference counting per series, where a `BTreeSet` of shared names took 9% of a point
/// lookup's CPU.
pub(crate) fn distinct_sorted<'s, T: AsRef<str> + ?Sized>(names: impl IntoIterator<Item = &'s T>) -> Vec<&'s T> {
    let mut distinct: Vec<&T> = Vec::new();
    for name in names {
        // Stores share the allocation of equal names: a known pointer is a known name, found
        // without comparing text (a measurement lists the same few fields over and over; past
        // a few distinct names the search below is as quick).
        let text = name.as_ref();
        if distinct.len() <= 16 && distinct.iter().any(|known| std::ptr::eq(known.as_ref(), text)) {
            continue;
        }
        if let Err(at) = distinct.binary_search_by(|known| known.as_ref().cmp(name.as_ref())) {
            distinct.insert(at, name);
        }
    }
    distinct
}

/// The field names of a measurement's series, sorted and distinct (the series' own shared
/// names, so columns made of them allocate nothing).
pub(crate) struct FieldNames<'s>(&'s [std::sync::Arc<str>]);

impl<'s> FieldNames<'s> {
    pub(crate) fn of(series: &'s crate::SeriesList) -> FieldNames<'s> {
        FieldNames(series.field_names())
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.binary_search_by(|known| (**known).cmp(name)).is_ok()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &'s std::sync::Arc<str>> + '_ {
        self.0.iter()
    }
}

/// Tables by measurement name and GROUP BY tag values, in InfluxDB's output order.
fn group<'t>(tables: &'t [Table], dimensions: &[Dimension], keys: &TagKeys) -> Result<BTreeMap<GroupKey, Vec<&'t Table>>, QueryError> {
    let regexes = dimension_regexes(dimensions)?;
    let mut groups: BTreeMap<GroupKey, Vec<&Table>> = BTreeMap::new();
    for table in tables {
        groups.entry(table_group_key(table, dimensions, &regexes, keys)).or_default().push(table);
    }
    Ok(groups)
}

/// The compiled `/regex/` dimensions of a GROUP BY, in order.
fn dimension_regexes(dimensions: &[Dimension]) -> Result<Vec<regex::Regex>, QueryError> {
    dimensions
        .iter()
        .filter_map(|d| match d {
            Dimension::Regex(r) => Some(Regexes::one(r.as_str())),
            _ => None,
        })
        .collect()
}

/// The group of `table` under `dimensions` (`regexes`: [`dimension_regexes`] of them).
fn table_group_key(table: &Table, dimensions: &[Dimension], regexes: &[regex::Regex], keys: &TagKeys) -> GroupKey {
    let all_keys = keys.get(&*table.name).map_or(&[][..], Vec::as_slice);
    GroupKey::new(table.name.to_string(), group_key(dimensions, regexes, all_keys, &table.tags))
}

/// The GROUP BY tag values of a tag set (`regexes`: the compiled `/regex/` dimensions; `keys`:
/// every tag key of the measurement, which `*` and a regex choose from), sorted by key; a
/// missing tag is the empty string, as in InfluxDB (`GROUP BY *` names every key).
pub(crate) fn group_key(
    dimensions: &[Dimension],
    regexes: &[regex::Regex],
    keys: &[String],
    tags: &[(String, String)],
) -> Vec<(String, String)> {
    let value = |k: &str| tags.iter().find(|(t, _)| t == k).map_or(String::new(), |(_, v)| v.clone());
    let mut key: Vec<(String, String)> = Vec::new();
    for d in dimensions {
        match d {
            Dimension::Tag(k) => key.push((k.clone(), value(k))),
            Dimension::Wildcard => {
                key.extend(keys.iter().map(|k| (k.clone(), value(k))));
                key.extend(tags.iter().cloned());
            }
            Dimension::Regex(_) | Dimension::Time { .. } => {}
        }
    }
    for re in regexes {
        key.extend(keys.iter().filter(|k| re.is_match(k)).map(|k| (k.clone(), value(k))));
        key.extend(tags.iter().filter(|(k, _)| re.is_match(k)).cloned());
    }
    key.sort();
    key.dedup_by(|a, b| a.0 == b.0);
    key
}

/// The rows of a group's tables merged by time (a tie keeps the tables' order).
pub(crate) fn merged_rows<'t>(members: &[&'t Table]) -> Vec<(i64, &'t Table, usize)> {
    let times: Vec<&[i64]> = members.iter().map(|t| t.times.as_slice()).collect();
    raw::merge_order(&times)
        .into_iter()
        .map(|(member, row)| {
            let (table, row) = (members[member as usize], row as usize);
            (table.times[row], table, row)
        })
        .collect()
}

#[cfg(test)]
mod limit_tests;
#[cfg(test)]
mod members_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tsbs_tests;
