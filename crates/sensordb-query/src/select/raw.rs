//! Raw queries: rows projected through the SELECT fields, one output row per stored row that has
//! a value in at least one selected field.

use super::plan::{column_name, dedupe_names};
use super::table::Table;
use crate::bound::{compares_with_number, Bound, RowTest};
use crate::error::QueryError;
use crate::eval::Regexes;
use crate::value::FieldValue;
use sensordb_influxql::{Dimension, Expr, SelectStatement, VarRef, WildcardType};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// A raw SELECT's rows as one flat table (unnamed, untagged): a subquery's rows go to the outer
/// query as a table, and a vector a row would be made only to be taken apart again (432,000 rows
/// in TSBS breakdown-frequency at scale 100).
pub(super) fn run_table(statement: &SelectStatement, members: &[&Table], regexes: &Regexes) -> Result<Table, QueryError> {
    let (columns, mut projected) = project(statement, members, regexes);
    let width = columns.len();
    let (times, values) = if projected.len() == 1 && projected[0].0.is_sorted() {
        projected.pop().unwrap_or_default()
    } else {
        merge_by_time(projected, width)
    };
    Ok(Table { name: Arc::from(""), tags: Arc::from(Vec::new()), columns, times, values })
}

/// [`run_table`]'s rows left as one table a member (unnamed, untagged, the empty ones left
/// out), not merged: for an aggregate that merges the rows of its group by time itself, the
/// merged table was a copy of every value (a quarter of TSBS breakdown-frequency) that it then
/// read row by row again. Merged in member order, they are [`run_table`]'s rows.
pub(super) fn run_members(statement: &SelectStatement, members: &[&Table], regexes: &Regexes) -> Result<Vec<Table>, QueryError> {
    let (columns, projected) = project(statement, members, regexes);
    Ok(projected
        .into_iter()
        .filter(|(times, _)| !times.is_empty())
        .map(|(times, values)| Table { name: Arc::from(""), tags: Arc::from(Vec::new()), columns: columns.clone(), times, values })
        .collect())
}

/// One member's output rows: their times, and their values one row after another.
pub(super) type Rows = (Vec<i64>, Vec<FieldValue>);

/// The output columns, and each member's output rows.
pub(super) fn project(statement: &SelectStatement, members: &[&Table], regexes: &Regexes) -> (Vec<Arc<str>>, Vec<Rows>) {
    let (exprs, mut names) = expand(statement, members);
    dedupe_names(&mut names);
    let width = exprs.len();
    // Each member's output rows, projected front to back: a member's rows are read in the
    // order they lie in memory. Projected in time order across hundreds of members (TSBS
    // breakdown-frequency reads 500 tables into one group), nearly every row was a cache miss.
    let projected = members
        .iter()
        .map(|table| {
            let projection = Projection::new(&exprs, table, regexes);
            // Most rows give a row (each holds a selected field): room for all, not regrown.
            let (mut times, mut values) = (Vec::with_capacity(table.times.len()), Vec::with_capacity(table.times.len() * width));
            for (index, &time) in table.times.iter().enumerate() {
                if projection.row_into(table, index, &mut values) {
                    times.push(time);
                }
            }
            (times, values)
        })
        .collect();
    (names.into_iter().map(|n| Arc::from(n.as_str())).collect(), projected)
}

/// The members' rows (each member's sorted by time, or newest first) merged by time, a tie
/// keeping the members' order: rows (one after another, `width` values each) with their times.
/// Each member's rows are taken in [`merge_order`]: on a shared clock front to back, each member
/// read as a stream of its own (100 members in a TSBS breakdown-frequency group), not scattered.
fn merge_by_time(mut members: Vec<Rows>, width: usize) -> (Vec<i64>, Vec<FieldValue>) {
    let order = merge_order(&members.iter().map(|(times, _)| times.as_slice()).collect::<Vec<_>>());
    let (mut times, mut values) = (Vec::with_capacity(order.len()), Vec::with_capacity(order.len() * width));
    for (member, index) in order {
        let (member_times, member_values) = &mut members[member as usize];
        times.push(member_times[index as usize]);
        let row = index as usize * width..(index as usize + 1) * width;
        values.extend(member_values[row].iter_mut().map(|v| std::mem::replace(v, FieldValue::Null)));
    }
    (times, values)
}

/// The (member, row) of each row of `members` (each a run of times, ascending or newest first)
/// merged by time, a tie keeping the members' order: by [`by_shared_clock`] where it applies,
/// otherwise by a stable sort of every row (it finds the members' sorted runs and merges them;
/// an unstable sort of the whole entries gave the same order at twice the cost).
pub(super) fn merge_order(members: &[&[i64]]) -> Vec<(u32, u32)> {
    let total: usize = members.iter().map(|times| times.len()).sum();
    assert!(u32::try_from(total).is_ok() && u32::try_from(members.len()).is_ok(), "a group of more than 2^32 rows");
    if let Some(order) = by_shared_clock(members) {
        let mut next = vec![0u32; members.len()];
        return order
            .into_iter()
            .map(|member| {
                let row = &mut next[member as usize];
                *row += 1;
                (member, *row - 1)
            })
            .collect();
    }
    let mut order: Vec<(i64, u32, u32)> = Vec::with_capacity(total);
    for (m, times) in members.iter().enumerate() {
        order.extend(times.iter().enumerate().map(|(i, &t)| (t, m as u32, i as u32)));
    }
    if !order.is_sorted_by_key(|&(t, _, _)| t) {
        order.sort_by_key(|&(t, _, _)| t);
    }
    order.into_iter().map(|(_, member, row)| (member, row)).collect()
}

/// The member of each merged row, in order, where every member's times ascend and the members
/// share a clock (TSBS trucks report every 10 s: a group of 172,800 rows holds 8,640 times):
/// the rows of each distinct time are counted, the counts give each time its first place, and
/// the members' rows fill them in member order. `None` when a member's times do not ascend or
/// more than a quarter of the rows have distinct times (then sorting costs about the same).
pub(super) fn by_shared_clock(members: &[&[i64]]) -> Option<Vec<u32>> {
    if members.iter().any(|times| !times.is_sorted()) {
        return None;
    }
    let total: usize = members.iter().map(|times| times.len()).sum();
    if members.len() == 1 {
        return Some(vec![0; total]);
    }
    let mut slot_of: HashMap<i64, u32, foldhash::fast::FixedState> = HashMap::default();
    let mut distinct: Vec<i64> = Vec::new();
    // Each row's slot (its time's index in `distinct`), member after member.
    let mut slots: Vec<u32> = Vec::with_capacity(total);
    for times in members {
        let mut previous = None;
        for &time in times.iter() {
            // A member's rows of one time are one lookup.
            let slot = match previous {
                Some((t, slot)) if t == time => slot,
                _ => *slot_of.entry(time).or_insert_with(|| {
                    distinct.push(time);
                    (distinct.len() - 1) as u32
                }),
            };
            previous = Some((time, slot));
            slots.push(slot);
        }
        if distinct.len() > total / 4 + 1 {
            return None;
        }
    }
    // Where each slot's rows begin, slots in time order.
    let mut by_time: Vec<u32> = (0..distinct.len() as u32).collect();
    by_time.sort_unstable_by_key(|&slot| distinct[slot as usize]);
    let mut next = vec![0u32; distinct.len()];
    for &slot in &slots {
        next[slot as usize] += 1;
    }
    let mut start = 0;
    for &slot in &by_time {
        let count = next[slot as usize];
        next[slot as usize] = start;
        start += count;
    }
    // The members' rows to their places: 4 bytes a row, where the rows themselves (tens of
    // bytes each, 8 MB a group) missed the cache at nearly every write.
    let mut order = vec![0u32; total];
    let mut slots = slots.into_iter();
    for (m, times) in members.iter().enumerate() {
        for slot in slots.by_ref().take(times.len()) {
            order[next[slot as usize] as usize] = m as u32;
            next[slot as usize] += 1;
        }
    }
    Some(order)
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

    /// The indices of the first `wanted` rows of `table` that count, in the limit's order:
    /// from the first row onwards, or from the last backwards when `newest_first`. Rows
    /// beyond the last one needed are not looked at: TSBS low-fuel's newest row under 10 %
    /// fuel lies 500-700 rows back in a round of 1,024, of which a third pass the condition.
    pub(super) fn first_counted(&self, table: &Table, newest_first: bool, wanted: usize) -> Vec<usize> {
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
        match condition.as_ref().map(Bound::row_test) {
            // The comparison read straight from the column's values: 15 instructions a row
            // where the general test took 70.
            Some(RowTest::FloatComparison { column, op, number }) => {
                let width = table.width();
                first_rows(table.times.len(), newest_first, wanted, |index| {
                    compares_with_number(op, &table.values[index * width + column], number) && projection.gives_row(table, index)
                })
            }
            test => first_rows(table.times.len(), newest_first, wanted, |index| {
                let holds = test.as_ref().is_none_or(|test| test.holds(table.times[index], table.row(index)));
                holds && projection.gives_row(table, index)
            }),
        }
    }
}

/// The first `wanted` of `rows` rows for which `counts` holds, from the first row onwards or
/// from the last backwards, in that order.
#[inline]
fn first_rows(rows: usize, backwards: bool, wanted: usize, counts: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut found = Vec::with_capacity(wanted.min(rows));
    if wanted == 0 {
        return found;
    }
    for step in 0..rows {
        let index = if backwards { rows - 1 - step } else { step };
        if counts(index) {
            found.push(index);
            if found.len() == wanted {
                break;
            }
        }
    }
    found
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
        self.gives_by(|i| self.exprs[i].is_null_on(time, row), row)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The merge as a stable sort of every row by time gives it: the reference.
    fn merged_by_sort(members: &[(Vec<i64>, Vec<FieldValue>)], width: usize) -> (Vec<i64>, Vec<FieldValue>) {
        let mut order: Vec<(i64, usize, usize)> = Vec::new();
        for (m, (times, _)) in members.iter().enumerate() {
            order.extend(times.iter().enumerate().map(|(i, &t)| (t, m, i)));
        }
        order.sort_by_key(|&(t, _, _)| t);
        let times = order.iter().map(|&(t, _, _)| t).collect();
        let values = order.iter().flat_map(|&(_, m, i)| members[m].1[i * width..(i + 1) * width].iter().cloned()).collect();
        (times, values)
    }

    /// Members of rows `width` wide, each row's values naming its member and row.
    fn members_of(times: Vec<Vec<i64>>, width: usize) -> Vec<(Vec<i64>, Vec<FieldValue>)> {
        times
            .into_iter()
            .enumerate()
            .map(|(m, times)| {
                let values = (0..times.len() * width).map(|v| FieldValue::Integer((m * 1_000_000 + v) as i64)).collect();
                (times, values)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn rows_merge_by_time_with_ties_in_member_order(
            times in proptest::collection::vec(proptest::collection::vec(0i64..40, 0..30), 1..12),
            spread in prop_oneof![Just(1i64), Just(1_000_003)],
            descending in proptest::collection::vec(any::<bool>(), 12),
            width in 1usize..4,
        ) {
            // A small range of times makes a shared clock (the counting path); a wide spread
            // makes nearly every time distinct (the sorting path); a member newest first (a
            // subquery's rows under ORDER BY time DESC) is sorted too.
            let times: Vec<Vec<i64>> = times
                .into_iter()
                .zip(&descending)
                .enumerate()
                .map(|(m, (mut t, &down))| {
                    t.iter_mut().for_each(|x| *x = if spread > 1 { *x * spread + m as i64 } else { *x / 8 });
                    t.sort_unstable();
                    if down { t.reverse(); }
                    t
                })
                .collect();
            let members = members_of(times, width);
            let expected = merged_by_sort(&members, width);
            prop_assert_eq!(merge_by_time(members, width), expected);
        }
    }

    #[test]
    fn shared_clocks_are_merged_time_by_time_and_sparse_ones_are_not() {
        let shared: [&[i64]; 3] = [&[10, 20, 30], &[10, 30], &[20, 20, 30]];
        assert_eq!(by_shared_clock(&shared), Some(vec![0, 1, 0, 2, 2, 0, 1, 2]), "three times among eight rows");
        let sparse: Vec<Vec<i64>> = (0..100).map(|m| (0..20).map(|i| i * 100 + m).collect()).collect();
        let sparse: Vec<&[i64]> = sparse.iter().map(Vec::as_slice).collect();
        assert_eq!(by_shared_clock(&sparse), None, "2,000 distinct times among 2,000 rows of 100 members are sorted");
        let repeated: [&[i64]; 2] = [&[5, 5, 5, 7], &[5, 7, 7]];
        assert_eq!(by_shared_clock(&repeated), Some(vec![0, 0, 0, 1, 0, 1, 1]), "a member's rows of one time stay together");
        let newest_first: [&[i64]; 2] = [&[30, 20, 10], &[30, 20, 10]];
        assert_eq!(by_shared_clock(&newest_first), None, "rows newest first are sorted");
    }
}
