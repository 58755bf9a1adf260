//! The engine's side of the data model: compact series ids, stored points, time spans and the
//! rule of which write of a timestamp wins.
//!
//! Series keys, values, value kinds, value columns and timestamps live in `sensordb-model`
//! (shared with the native protocol's crate) and are re-exported here, at their old paths.

pub use sensordb_model::{
    timestamp_out_of_range, KeyText, SeriesKey, SeriesKeyError, Timestamp, Value, ValueColumn, ValueKind, DEFAULT_DATABASE, TIMESTAMP_MAX,
    TIMESTAMP_MIN,
};

/// Compact id of a series, assigned densely from 1 by the series catalog (0 is never used).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesId(pub u32);

/// One stored point of a series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    pub timestamp: Timestamp,
    pub value: Value,
}

/// `min + span` where `span` is `max - min` computed in u64 (it may exceed i64::MAX, e.g. from a
/// negative min to i64::MAX); `None` when no i64 lies that far above `min`.
pub fn add_time_span(min: Timestamp, span: u64) -> Option<Timestamp> {
    let max = min.wrapping_add(span as i64);
    // Wrapping is exact modulo 2^64; the true result lies in range exactly when the distance
    // from `min` to it, taken in u64, is `span`.
    (max >= min && max.wrapping_sub(min) as u64 == span).then_some(max)
}

/// `max - min` as u64, for `max >= min`: never overflows.
pub fn time_span(min: Timestamp, max: Timestamp) -> u64 {
    debug_assert!(max >= min, "BUG: time range reversed");
    max.wrapping_sub(min) as u64
}

/// Indices of `indices` (positions into `timestamps`, in write order) sorted by timestamp, one
/// per timestamp: a repeated timestamp keeps the index written last. The one place that decides
/// what "the last write wins" means, for memtables, direct writes and merged reads alike.
pub fn last_write_wins(timestamps: &[Timestamp], mut indices: Vec<usize>) -> Vec<usize> {
    // Stable: among equal timestamps the write order stays, so the last one is the newest.
    // (Sorting (timestamp, position) pairs unstably was measured slower: the stable sort
    // merges the sorted runs that writers' batches leave; `benches/engine.rs`, memtable.)
    indices.sort_by_key(|&i| timestamps[i]);
    let mut kept: Vec<usize> = Vec::with_capacity(indices.len());
    for i in indices {
        match kept.last_mut() {
            Some(last) if timestamps[*last] == timestamps[i] => *last = i,
            _ => kept.push(i),
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_spans_wider_than_i64_round_trip() {
        for (min, max) in [(i64::MIN, i64::MAX), (-4_774_451_407_313_060_419, i64::MAX), (5, 5), (i64::MIN, i64::MIN)] {
            assert_eq!(add_time_span(min, time_span(min, max)), Some(max));
        }
        assert_eq!(add_time_span(1, u64::MAX), None, "no i64 lies that far above 1");
        assert_eq!(add_time_span(i64::MAX, 1), None);
    }

    #[test]
    fn the_last_write_of_a_timestamp_wins_even_when_indices_are_not_ascending() {
        let timestamps = [5, 1, 5, 3, 1];
        assert_eq!(last_write_wins(&timestamps, vec![0, 1, 2, 3, 4]), vec![4, 3, 2]);
        // Write order is the order of `indices`, not of the index values.
        assert_eq!(last_write_wins(&timestamps, vec![4, 2, 0, 1]), vec![1, 0]);
        assert_eq!(last_write_wins(&timestamps, vec![1, 3, 0]), vec![1, 3, 0], "already sorted");
        assert!(last_write_wins(&timestamps, Vec::new()).is_empty());
    }
}
