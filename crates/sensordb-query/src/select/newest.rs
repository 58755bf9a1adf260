//! Latest values: `SELECT last(a)[, last(b)...] FROM m [WHERE tags and time] [GROUP BY tags]`
//! without time buckets, answered from each series' newest point, which the store keeps
//! ([`crate::Storage::last`]), instead of from history. A dashboard's "current value of every
//! sensor" is 10,000 series here: the work per series is one lookup and one result series
//! that shares its tag set and column names with the catalog's list and the other series, so
//! building and freeing the answer costs little beside writing it.
//!
//! A condition on fields is not this path's shape (the newest point need not pass it): the
//! streaming path in `fast` answers those.

use super::plan::{column_name, dedupe_names};
use super::Context;
use crate::error::QueryError;
use crate::eval::{tag_condition, Regexes, Verdict};
use crate::reduce::Reducer;
use crate::result::{ResultRow, ResultSeries, TagSet};
use crate::storage::StoredSeries;
use crate::time::TimeRange;
use crate::value::{ColumnSlice, FieldValue};
use sensordb_influxql::{Dimension, Expr, SelectStatement};
use std::sync::Arc;

/// The statement, named at the call: its measurement and database, the WHERE clause's time
/// range and remaining condition, and the `last()` calls as (reducer, field).
pub(super) struct LatestQuery<'a> {
    pub statement: &'a SelectStatement,
    pub measurement: &'a str,
    pub database: Option<&'a str>,
    pub range: TimeRange,
    pub condition: Option<&'a Expr>,
    pub regexes: &'a Regexes,
    pub calls: &'a [(Reducer, String)],
}

/// The answer, or `None` when the condition names a field.
pub(super) fn run(context: &Context<'_>, query: &LatestQuery<'_>) -> Result<Option<Vec<ResultSeries>>, QueryError> {
    let LatestQuery { statement, measurement, range, condition, regexes, calls, .. } = *query;
    let database = query.database.unwrap_or(context.database);
    let all = super::table::measurement_series(context.storage, database, measurement, condition);
    let field_names = super::FieldNames::of(&all);
    let is_field = |name: &str| field_names.contains(name);
    let keys = all.tag_keys();
    let only_wildcard = matches!(statement.group_by.as_slice(), [Dimension::Wildcard]);
    let no_tags = statement.group_by.iter().all(|d| matches!(d, Dimension::Time { .. }));
    let ungrouped: TagSet = Arc::from(Vec::new());

    // The wanted series in the catalog's order (by tag set), and the groups as runs of them
    // with their keys. Where the key is the tag set itself (or there is one group), the runs
    // come out in key order without comparing keys.
    let mut wanted: Vec<&StoredSeries> = Vec::new();
    let mut groups: Vec<(TagSet, std::ops::Range<usize>)> = Vec::new();
    let mut keys_in_order = true;
    for run in super::table::candidate_tag_sets(&all, condition, &is_field).iter().map(|set| set.series()) {
        let tags = &run[0].tags;
        if let Some(condition) = condition {
            match tag_condition(condition, tags, &is_field, regexes) {
                Verdict::False => continue,
                Verdict::True => {}
                Verdict::Unknown => return Ok(None),
            }
        }
        let first = wanted.len();
        wanted.extend(run.iter().filter(|series| calls.iter().any(|(_, field)| field.as_str() == &*series.field)));
        if wanted.len() == first {
            continue;
        }
        if no_tags {
            match groups.last_mut() {
                Some((_, members)) => members.end = wanted.len(),
                None => groups.push((ungrouped.clone(), first..wanted.len())),
            }
        } else if only_wildcard && tags.len() == keys.len() {
            // Every key present: the group is the tag set itself, shared.
            groups.push((tags.clone(), first..wanted.len()));
        } else {
            groups.push((Arc::from(super::group_key(&statement.group_by, &[], keys, tags)), first..wanted.len()));
            keys_in_order = false;
        }
    }
    if !keys_in_order {
        (wanted, groups) = merge_groups(&wanted, groups);
    }
    let mut names: Vec<String> = statement.fields.iter().map(|f| f.alias.clone().unwrap_or_else(|| column_name(&f.expr))).collect();
    dedupe_names(&mut names);
    let columns = crate::result::time_and(names);
    let name: Arc<str> = Arc::from(measurement);
    // One call for every series: the store answers a batch at once.
    let lasts = context.storage.last(&wanted)?;
    debug_assert_eq!(lasts.len(), wanted.len());
    let mut out = Vec::new();
    // The newest point of each call's field in the current group.
    let mut best: Vec<Option<(i64, FieldValue)>> = vec![None; calls.len()];
    for (key, members) in groups {
        best.iter_mut().for_each(|slot| *slot = None);
        for (&series, last) in wanted[members.clone()].iter().zip(&lasts[members]) {
            let Some((t, v)) = point_in_range(context, series, last, range)? else { continue };
            for (slot, _) in best.iter_mut().zip(calls).filter(|(_, (_, field))| field.as_str() == &*series.field) {
                // The newest wins; of equal times the larger value, as InfluxDB's last().
                let newer = match slot {
                    None => true,
                    Some((time, value)) => t > *time || (t == *time && v.compare(value) == Some(std::cmp::Ordering::Greater)),
                };
                if newer {
                    *slot = Some((t, v.clone()));
                }
            }
        }
        if best.iter().any(Option::is_some) {
            let time = if calls.len() == 1 {
                best[0].as_ref().map_or(0, |p| p.0)
            } else if range.has_lower_bound() {
                range.from
            } else {
                0
            };
            let values = best.iter_mut().map(|slot| slot.take().map_or(FieldValue::Null, |p| p.1)).collect();
            out.push(ResultSeries {
                name: name.clone(),
                tags: key,
                columns: columns.clone(),
                rows: vec![ResultRow { time, values }],
                has_time: true,
            });
        }
    }
    Ok(Some(out))
}

/// Groups whose keys are not the tag sets: runs of equal keys (from tag sets apart in the
/// catalog's order, e.g. `GROUP BY dc`) become one group, in key order.
type Groups = Vec<(TagSet, std::ops::Range<usize>)>;

fn merge_groups<'s>(wanted: &[&'s StoredSeries], mut groups: Groups) -> (Vec<&'s StoredSeries>, Groups) {
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut merged_wanted = Vec::with_capacity(wanted.len());
    let mut merged: Groups = Vec::new();
    for (key, members) in groups {
        let first = merged_wanted.len();
        merged_wanted.extend_from_slice(&wanted[members]);
        match merged.last_mut() {
            Some((last, range)) if same_tags(last, &key) => range.end = merged_wanted.len(),
            _ => merged.push((key, first..merged_wanted.len())),
        }
    }
    (merged_wanted, merged)
}

/// Tag sets of one catalog list are shared allocations: equal pointers, equal sets.
fn same_tags(a: &TagSet, b: &TagSet) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// The newest point of `series` within `range`, given its newest point of all (`last`): history
/// is read only when that point lies after the range.
fn point_in_range(
    context: &Context<'_>,
    series: &StoredSeries,
    last: &Option<(i64, FieldValue)>,
    range: TimeRange,
) -> Result<Option<(i64, FieldValue)>, QueryError> {
    Ok(match last {
        Some((t, _)) if *t < range.from => None,
        Some((t, v)) if *t <= range.to => Some((*t, v.clone())),
        Some(_) => {
            let mut newest = None;
            context.storage.read(series, range.from, range.to, &mut |times: &[i64], values: ColumnSlice<'_>| {
                if let Some(&t) = times.last() {
                    newest = Some((t, values.get(times.len() - 1)));
                }
            })?;
            newest
        }
        None => None,
    })
}
