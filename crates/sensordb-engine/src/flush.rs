//! Turning a frozen memtable into a flush group: rows, shared timestamps, block splitting.
//!
//! Series are grouped into *rows* (same measurement and tag set: the fields of one line of line
//! protocol). A row of several series gets the union of its series' timestamps cut into windows
//! of at most `block_points_max` stamps; per window the union is stored once as a shared
//! timestamp record and each series' block refers to it, listing the positions it lacks. A block
//! that lacks more than an eighth of the window stores its own timestamps instead, since the
//! list of missing positions would then cost more than it saves. Single-series rows store their
//! timestamps inline, split every `block_points_max` points or `block_bytes_max` payload bytes,
//! whichever comes first (byte payloads: a block stays a sensible unit of I/O).

use crate::catalog::Catalog;
use crate::memtable::{Memtable, ResolvedSeries};
use crate::model::{SeriesId, Timestamp, ValueColumn};
use crate::segment::{GroupBuilder, SharedTimestamps};
use std::collections::HashMap;

/// Encodes every series of `memtable` into one flush group, calling `pace` after each row: the
/// background flush pauses there (see `Engine`'s flush pacing).
pub fn encode_group_paced(
    memtable: &Memtable,
    catalog: &Catalog,
    block_points_max: usize,
    block_bytes_max: usize,
    pace: &mut dyn FnMut(),
) -> GroupBuilder {
    // One row at a time is resolved (copied out of the memtable, sorted), so a flush holds at
    // most one row's copy besides the memtable itself, not a second copy of everything.
    let ids = memtable.series_ids();
    let mut group = GroupBuilder::new();
    crate::codec::with_quick_encoding(|| {
        for row in rows_of(&ids, catalog) {
            let resolved: Vec<ResolvedSeries> = row.iter().filter_map(|&id| memtable.read_all(id)).collect();
            add_row_blocks(&mut group, &resolved.iter().collect::<Vec<_>>(), block_points_max, block_bytes_max);
            pace();
        }
    });
    group
}

/// Encodes resolved series (sorted by id) into one group: rows share timestamps.
pub fn encode_series(series: &[ResolvedSeries], catalog: &Catalog, block_points_max: usize, block_bytes_max: usize) -> GroupBuilder {
    let ids: Vec<SeriesId> = series.iter().map(|s| s.series).collect();
    let position: HashMap<SeriesId, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut group = GroupBuilder::new();
    for row in rows_of(&ids, catalog) {
        let members: Vec<&ResolvedSeries> = row.iter().map(|id| &series[position[id]]).collect();
        add_row_blocks(&mut group, &members, block_points_max, block_bytes_max);
    }
    group
}

/// Groups series ids (in id order) into rows: same measurement and tag set. A series the
/// catalog does not know is a row of its own. Rows are told apart by key text, without parsing
/// keys: a flush may hold millions of series.
fn rows_of(ids: &[SeriesId], catalog: &Catalog) -> Vec<Vec<SeriesId>> {
    // foldhash, not SipHash: a flush of a fleet hashes millions of key texts here.
    let mut row_of: HashMap<String, usize, foldhash::fast::RandomState> = HashMap::default();
    let mut rows: Vec<Vec<SeriesId>> = Vec::new();
    for &id in ids {
        let known = catalog.with_text(id, |text| {
            let part = row_part(text);
            match row_of.get(part) {
                Some(&row) => row,
                None => {
                    rows.push(Vec::new());
                    row_of.insert(part.to_string(), rows.len() - 1);
                    rows.len() - 1
                }
            }
        });
        let row = known.unwrap_or_else(|| {
            rows.push(Vec::new());
            rows.len() - 1
        });
        rows[row].push(id);
    }
    rows
}

/// The measurement and tag set of a canonical key text (`[database ]measurement,tags field`):
/// what lies between the database's space, if any, and the field's.
fn row_part(text: &str) -> &str {
    let mut spaces = [0usize; 2];
    let mut found = 0;
    let mut escaped = false;
    for (i, byte) in text.bytes().enumerate() {
        if escaped {
            escaped = false;
        } else if byte == b'\\' {
            escaped = true;
        } else if byte == b' ' && found < 2 {
            spaces[found] = i;
            found += 1;
        }
    }
    match found {
        2 => &text[spaces[0] + 1..spaces[1]],
        1 => &text[..spaces[0]],
        _ => text,
    }
}

/// Adds the blocks of one row: shared timestamps for several numeric fields, inline otherwise.
fn add_row_blocks(group: &mut GroupBuilder, row: &[&ResolvedSeries], block_points_max: usize, block_bytes_max: usize) {
    assert!(block_points_max > 0 && block_bytes_max > 0, "BUG: block limits must be positive");
    let payload_row = row.iter().any(|s| matches!(s.values, ValueColumn::Bytes(_)));
    if row.len() == 1 || payload_row {
        for series in row {
            add_inline(group, series, block_points_max, block_bytes_max);
        }
    } else if !row.is_empty() {
        add_row(group, row, block_points_max);
    }
}

/// Adds the blocks of one series with inline timestamps.
pub fn add_inline(group: &mut GroupBuilder, series: &ResolvedSeries, block_points_max: usize, block_bytes_max: usize) {
    let count = series.timestamps.len();
    if count <= block_points_max && series.values.heap_bytes() <= block_bytes_max {
        group.add_block(series.series, &series.timestamps, &series.values);
        return;
    }
    let mut start = 0;
    while start < count {
        let end = block_end(&series.values, start, block_points_max, block_bytes_max);
        group.add_block(series.series, &series.timestamps[start..end], &series.values.slice(start..end));
        start = end;
    }
}

/// End of the block that starts at `start`: at most `block_points_max` points and, for byte
/// payloads, at most `block_bytes_max` bytes (but always at least one point).
fn block_end(values: &ValueColumn, start: usize, block_points_max: usize, block_bytes_max: usize) -> usize {
    let end = (start + block_points_max).min(values.len());
    let ValueColumn::Bytes(payloads) = values else { return end };
    let mut bytes = 0usize;
    for (i, payload) in payloads[start..end].iter().enumerate() {
        bytes += payload.len();
        if bytes > block_bytes_max && i > 0 {
            return start + i;
        }
    }
    end
}

/// Whether a shared timestamp record of `window` costs fewer bytes than the columns of the
/// `blocks` that would refer to it (a row's fields each keeping its own column otherwise). A
/// record costs its count and checksum (8 bytes) and the column, a reference about 9 bytes a
/// block; the column is sized only for short windows, where it is cheap to encode and where
/// sharing may lose: a row of two fields with one stamp each (a fleet's flush) took 43 bytes
/// shared against 22 in its blocks. Longer windows always share (their column is most of a
/// block's bytes).
fn sharing_pays(window: &[Timestamp], blocks: usize) -> bool {
    const REFERENCE_BYTES: usize = 9;
    const RECORD_OVERHEAD: usize = 8;
    if window.len() >= SHARING_SIZED_BELOW {
        return true;
    }
    let mut column = Vec::with_capacity(32);
    crate::codec::encode_timestamps(window, &mut column);
    RECORD_OVERHEAD + column.len() + REFERENCE_BYTES * blocks < column.len() * blocks
}

/// Windows shorter than this are sized before they share a record ([`sharing_pays`]).
const SHARING_SIZED_BELOW: usize = 32;

fn add_row(group: &mut GroupBuilder, row: &[&ResolvedSeries], block_points_max: usize) {
    let union = union_of(row);
    let mut missing = Vec::new();
    for window in union.chunks(block_points_max) {
        let (low, high) = (window[0], window[window.len() - 1]);
        let share = sharing_pays(window, row.len());
        let mut shared: Option<SharedTimestamps> = None;
        for series in row {
            let start = series.timestamps.partition_point(|&t| t < low);
            let end = series.timestamps.partition_point(|&t| t <= high);
            if start == end {
                continue;
            }
            let own = &series.timestamps[start..end];
            let values = if start == 0 && end == series.timestamps.len() { series.values.clone() } else { series.values.slice(start..end) };
            if share {
                missing_positions(window, own, &mut missing);
            }
            // A block lacking more than an eighth of the window's stamps keeps its own column.
            if !share || missing.len() * 8 > window.len() {
                group.add_block(series.series, own, &values);
                continue;
            }
            let record = *shared.get_or_insert_with(|| group.add_shared_timestamps(window));
            group.add_block_sharing(series.series, own, &values, record, &missing);
        }
    }
}

/// The sorted union of the rows' timestamps (each sorted and unique). The fields of a row
/// mostly share all their stamps, so each series is first checked against the union so far
/// (one linear pass) and merged in only when it adds stamps: sorting the concatenation cost
/// the flush more than a tenth of its time.
fn union_of(row: &[&ResolvedSeries]) -> Vec<Timestamp> {
    let Some(longest) = row.iter().max_by_key(|s| s.timestamps.len()) else { return Vec::new() };
    let mut union = longest.timestamps.clone();
    let mut merged = Vec::new();
    for series in row {
        let own = &series.timestamps;
        if own.len() <= union.len() && is_subset(own, &union) {
            continue;
        }
        merged.clear();
        merged.reserve(union.len() + own.len());
        let (mut a, mut b) = (0, 0);
        while a < union.len() && b < own.len() {
            let (x, y) = (union[a], own[b]);
            merged.push(x.min(y));
            a += usize::from(x <= y);
            b += usize::from(y <= x);
        }
        merged.extend_from_slice(&union[a..]);
        merged.extend_from_slice(&own[b..]);
        std::mem::swap(&mut union, &mut merged);
    }
    union
}

/// Whether every element of `small` is in `large` (both sorted, unique).
fn is_subset(small: &[Timestamp], large: &[Timestamp]) -> bool {
    let mut large = large.iter();
    small.iter().all(|t| large.by_ref().find(|&u| u >= t) == Some(t))
}

/// Positions of `window` (sorted, unique) that `own` (a sorted subset of it) lacks.
fn missing_positions(window: &[Timestamp], own: &[Timestamp], out: &mut Vec<u32>) {
    out.clear();
    let mut own = own.iter().peekable();
    for (position, t) in window.iter().enumerate() {
        if own.peek() == Some(&t) {
            own.next();
        } else {
            out.push(position as u32);
        }
    }
    debug_assert!(own.next().is_none(), "BUG: a series has a timestamp outside its row's union");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SeriesKey;
    use proptest::prelude::*;

    proptest! {
        /// Two keys share a row part exactly when they share measurement and tag set, whatever
        /// their databases, fields and escapes.
        #[test]
        fn row_part_is_the_measurement_and_tag_set(
            keys in proptest::collection::vec((
                proptest::option::of("[ab ,=\\\\]{1,2}"),
                "[ab ,=\\\\]{1,2}",
                proptest::collection::btree_map("[ab ,=\\\\]{1,2}", "[ab ,=\\\\]{1,2}", 0..3),
                "[ab ,=\\\\]{1,2}",
            ), 2..6),
        ) {
            let keys: Vec<SeriesKey> = keys
                .into_iter()
                .map(|(database, measurement, tags, field)| {
                    let key = SeriesKey::new(measurement, tags, field).expect("valid");
                    match database {
                        Some(database) => key.in_database(database).expect("valid"),
                        None => key,
                    }
                })
                .collect();
            for a in &keys {
                for b in &keys {
                    let same_row = a.measurement() == b.measurement() && a.tags() == b.tags();
                    let (text_a, text_b) = (a.canonical(), b.canonical());
                    prop_assert_eq!(row_part(&text_a) == row_part(&text_b), same_row, "{} / {}", text_a, text_b);
                }
            }
        }
    }

    /// A row of two fields with a stamp each (a fleet's flush) keeps its stamps in its blocks:
    /// a shared record and two references took more bytes than the two columns. A long row
    /// still shares.
    #[test]
    fn a_row_shares_its_stamps_only_where_that_takes_fewer_bytes() {
        let row_of = |points: i64| -> Vec<ResolvedSeries> {
            let timestamps: Vec<Timestamp> =
                (0..points).map(|i| 1_700_000_000_000_000_000 + i * 10_000_000_000 + (i % 3) * 1_000_000).collect();
            (1..=2)
                .map(|id| ResolvedSeries {
                    series: SeriesId(id),
                    timestamps: timestamps.clone(),
                    values: ValueColumn::F64((0..points).map(|i| (200 + (i * 7 + i64::from(id)) % 13) as f64 / 10.0).collect()),
                })
                .collect()
        };
        for (points, shares) in [(1, false), (2, false), (100, true)] {
            let row = row_of(points);
            let mut in_row = GroupBuilder::new();
            add_row_blocks(&mut in_row, &row.iter().collect::<Vec<_>>(), 1 << 20, 1 << 20);
            let mut inline = GroupBuilder::new();
            for series in &row {
                add_inline(&mut inline, series, 1 << 20, 1 << 20);
            }
            if shares {
                assert!(in_row.bytes() < inline.bytes(), "{points} points: {} shared against {} inline", in_row.bytes(), inline.bytes());
            } else {
                assert_eq!(in_row.bytes(), inline.bytes(), "{points} points: the stamps stay in the blocks");
            }
        }
    }

    #[test]
    fn payload_blocks_are_cut_by_bytes_as_well_as_points() {
        let payloads = ValueColumn::Bytes((0..10).map(|_| bytes::Bytes::from(vec![0u8; 300])).collect());
        assert_eq!(block_end(&payloads, 0, 100, 1000), 3, "three payloads fit in 1000 bytes");
        assert_eq!(block_end(&payloads, 9, 100, 1000), 10);
        assert_eq!(block_end(&payloads, 0, 100, 10), 1, "a payload larger than the limit still goes alone");
        assert_eq!(block_end(&ValueColumn::F64(vec![0.0; 10]), 0, 4, 1), 4, "numbers only count points");
    }

    #[test]
    fn union_of_a_row_is_every_stamp_once_in_order() {
        let series = |id: u32, timestamps: Vec<Timestamp>| ResolvedSeries {
            series: SeriesId(id),
            values: ValueColumn::I64(vec![0; timestamps.len()]),
            timestamps,
        };
        let row =
            [series(1, vec![2, 4, 6]), series(2, vec![1, 4, 9]), series(3, vec![4]), series(4, vec![]), series(5, vec![0, 1, 2, 3, 10])];
        for order in [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]] {
            let members: Vec<&ResolvedSeries> = order.iter().map(|&i| &row[i]).collect();
            assert_eq!(union_of(&members), vec![0, 1, 2, 3, 4, 6, 9, 10]);
        }
        assert_eq!(union_of(&[&row[0], &row[0]]), vec![2, 4, 6]);
        assert!(union_of(&[]).is_empty());
        assert!(is_subset(&[2, 6], &[1, 2, 4, 6]) && !is_subset(&[2, 5], &[1, 2, 4, 6]) && !is_subset(&[7], &[1, 2]));
        assert!(is_subset(&[], &[]) && !is_subset(&[1], &[]));
    }

    #[test]
    fn missing_positions_are_the_gaps_of_a_subset() {
        let mut out = Vec::new();
        missing_positions(&[1, 2, 3, 4, 5], &[2, 3, 5], &mut out);
        assert_eq!(out, vec![0, 3]);
        missing_positions(&[1, 2], &[1, 2], &mut out);
        assert!(out.is_empty());
    }
}
