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
    if !insertion_sorted(timestamps, &mut indices) {
        indices.sort_by_key(|&i| timestamps[i]);
    }
    let mut kept: Vec<usize> = Vec::with_capacity(indices.len());
    for i in indices {
        match kept.last_mut() {
            Some(last) if timestamps[*last] == timestamps[i] => *last = i,
            _ => kept.push(i),
        }
    }
    kept
}

/// Moves an insertion sort may make per index before [`insertion_sorted`] gives up.
const INSERTION_MOVES_PER_INDEX: usize = 8;

/// Sorts `indices` by timestamp, stably, by insertion, when that takes at most
/// [`INSERTION_MOVES_PER_INDEX`] moves an index; otherwise stops and returns false, leaving a
/// stably sorted prefix and the rest untouched, so a stable sort after it still keeps the write
/// order of equal timestamps.
///
/// Why: concurrent writers' bodies reach a series' buffer out of order, a few points at a time
/// (two TSBS loader workers at scale 1000: 2-4 points a series and body, neighbouring bodies
/// swapped). That is nearly sorted but in runs too short for the library's stable sort to merge:
/// it fell back to its quicksort, and sorting at flushes was 4% of a load's instructions. An
/// insertion sort does it in a few moves a point (half the time of the whole resolution in a
/// model of that shape); the bound keeps anything else (a buffer written backwards) off its
/// quadratic worst case.
fn insertion_sorted(timestamps: &[Timestamp], indices: &mut [usize]) -> bool {
    let budget = indices.len().saturating_mul(INSERTION_MOVES_PER_INDEX);
    let mut moves = 0usize;
    for p in 1..indices.len() {
        let moving = indices[p];
        let t = timestamps[moving];
        let mut q = p;
        // Strictly greater only: an equal timestamp stays before, as written.
        while q > 0 && timestamps[indices[q - 1]] > t {
            indices[q] = indices[q - 1];
            q -= 1;
        }
        indices[q] = moving;
        moves += p - q;
        if moves > budget {
            return false;
        }
    }
    true
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

    #[test]
    fn nearly_sorted_indices_are_sorted_by_insertion_and_others_are_left_to_the_sort() {
        // Two writers' bodies of a few points each, neighbours swapped, one repeat (40).
        let timestamps = [30, 40, 10, 20, 40, 60, 50];
        let mut indices: Vec<usize> = (0..timestamps.len()).collect();
        assert!(insertion_sorted(&timestamps, &mut indices));
        assert_eq!(indices, vec![2, 3, 0, 1, 4, 6, 5], "stable: the 40 written first stays first");
        assert_eq!(last_write_wins(&timestamps, (0..timestamps.len()).collect()), vec![2, 3, 0, 4, 6, 5]);
        // Written backwards: n(n-1)/2 moves, over the bound; the sort takes over from a
        // stably sorted prefix and still keeps the last write of the repeated timestamp.
        let mut backwards: Vec<Timestamp> = (0..100).rev().collect();
        backwards.push(99);
        let mut indices: Vec<usize> = (0..backwards.len()).collect();
        assert!(!insertion_sorted(&backwards, &mut indices));
        let kept = last_write_wins(&backwards, (0..backwards.len()).collect());
        assert_eq!(kept.len(), 100);
        assert_eq!(kept[99], 100, "the second 99, written last, wins");
        assert!(kept.windows(2).all(|w| backwards[w[0]] < backwards[w[1]]));
    }

    proptest::proptest! {
        /// Whatever the input (nearly sorted or not, repeats or not), the result is the one a
        /// stable sort gives: sorted, one index per timestamp, the last written.
        #[test]
        fn last_write_wins_matches_a_stable_sort(
            blocks in proptest::collection::vec((0i64..400, 1usize..6), 0..60),
            noise in proptest::collection::vec(0i64..40, 0..80),
        ) {
            let mut nearly: Vec<Timestamp> = Vec::new();
            for (start, len) in &blocks {
                nearly.extend((0..*len as i64).map(|k| start + k));
            }
            for timestamps in [nearly, noise] {
                let mut expected: Vec<usize> = (0..timestamps.len()).collect();
                expected.sort_by_key(|&i| timestamps[i]);
                let mut dedup: Vec<usize> = Vec::new();
                for i in expected {
                    match dedup.last_mut() {
                        Some(last) if timestamps[*last] == timestamps[i] => *last = i,
                        _ => dedup.push(i),
                    }
                }
                proptest::prop_assert_eq!(last_write_wins(&timestamps, (0..timestamps.len()).collect()), dedup);
            }
        }
    }
}
