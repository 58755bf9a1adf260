//! The coarse index of sealed segments whose footer has a series directory (segment format
//! version 2): per series, one [`SeriesExtent`] per segment holding it, 52 bytes whatever the
//! number of blocks. A read lists the extents that overlap its range and gets their blocks
//! from the series' run in the segment footer, through the bounded [`RunCache`].

use crate::model::{SeriesId, Timestamp, ValueKind};
use crate::segment::{IndexEntry, RunShape, SeriesRun};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One series' blocks in one sealed segment: what its directory entry says, less the sequences
/// and the point count, which a read does not need before it has the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesExtent {
    pub segment: u64,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    /// Sum of the blocks' lengths.
    pub bytes: u64,
    pub run_offset: u64,
    pub blocks: u32,
    pub run_length: u32,
    pub run_checksum: u32,
    pub kind: ValueKind,
}

impl SeriesExtent {
    #[cfg(test)]
    pub fn of(segment: u64, run: &SeriesRun) -> SeriesExtent {
        StoredExtent::of(run).in_segment(segment)
    }

    /// What reading and checking the run of `series` needs.
    pub fn shape(&self, series: SeriesId) -> RunShape {
        RunShape {
            series,
            kind: self.kind,
            blocks: self.blocks,
            bytes: self.bytes,
            min_timestamp: self.min_timestamp,
            max_timestamp: self.max_timestamp,
            offset: self.run_offset,
            length: self.run_length,
            checksum: self.run_checksum,
        }
    }

    pub fn overlaps(&self, from: Timestamp, to: Timestamp) -> bool {
        overlaps((self.min_timestamp, self.max_timestamp), from, to)
    }
}

/// Whether points from `span.0` to `span.1` (both included) may fall in `[from, to)`.
fn overlaps(span: (Timestamp, Timestamp), from: Timestamp, to: Timestamp) -> bool {
    span.0 < to && span.1 >= from
}

/// Sealed segments → their series' extents, in flat arrays per segment.
///
/// A segment's extents are its directory, copied: series ids in one sorted array (4 bytes
/// each, searched by bisection), the extents beside them in another (48 bytes each, without
/// the segment id, which the array belongs to). No list per series: a series costs 52 bytes in
/// each segment holding it and nothing else, where per-series `Vec`s of 56-byte extents cost
/// 224 bytes once a series was in a second segment (four slots reserved, the `Vec` header in
/// a vector indexed by id besides): 528 MB of the 1.7 GB peak at 2 M series (issue 14,
/// heaptrack). A read bisects each segment whose time range overlaps its own; building the
/// index is a copy of each directory in its order.
#[derive(Default)]
pub struct ExtentIndex {
    /// Shared with readers that walk a whole segment (compaction, reclaim) after the index
    /// lock is released, without a copy of its extents.
    segments: BTreeMap<u64, Arc<SegmentExtents>>,
    blocks: usize,
}

/// One segment's part of the [`ExtentIndex`].
pub struct SegmentExtents {
    segment: u64,
    /// Ascending; an id holding two kinds appears twice, next to each other.
    series: Box<[SeriesId]>,
    extents: Box<[StoredExtent]>,
    min_timestamp: Timestamp,
    max_timestamp: Timestamp,
    blocks: usize,
}

/// A [`SeriesExtent`] without its segment, as a segment's array holds it.
#[derive(Clone, Copy, Debug)]
struct StoredExtent {
    min_timestamp: Timestamp,
    max_timestamp: Timestamp,
    bytes: u64,
    run_offset: u64,
    blocks: u32,
    run_length: u32,
    run_checksum: u32,
    kind: ValueKind,
}

impl StoredExtent {
    fn of(run: &SeriesRun) -> StoredExtent {
        StoredExtent {
            min_timestamp: run.min_timestamp,
            max_timestamp: run.max_timestamp,
            bytes: run.bytes,
            run_offset: run.run_offset,
            blocks: run.blocks,
            run_length: run.run_length,
            run_checksum: run.run_checksum,
            kind: run.kind,
        }
    }

    fn in_segment(&self, segment: u64) -> SeriesExtent {
        SeriesExtent {
            segment,
            min_timestamp: self.min_timestamp,
            max_timestamp: self.max_timestamp,
            bytes: self.bytes,
            run_offset: self.run_offset,
            blocks: self.blocks,
            run_length: self.run_length,
            run_checksum: self.run_checksum,
            kind: self.kind,
        }
    }
}

impl SegmentExtents {
    fn of(segment: u64, directory: &[SeriesRun]) -> SegmentExtents {
        let mut runs: Vec<&SeriesRun> = directory.iter().collect();
        // A directory is in id order already (its encoder asserts it); a stable sort keeps the
        // order of an id's two kinds and costs one pass when sorted.
        runs.sort_by_key(|run| run.series);
        SegmentExtents {
            segment,
            series: runs.iter().map(|run| run.series).collect(),
            extents: runs.iter().map(|run| StoredExtent::of(run)).collect(),
            min_timestamp: runs.iter().map(|run| run.min_timestamp).min().unwrap_or(Timestamp::MAX),
            max_timestamp: runs.iter().map(|run| run.max_timestamp).max().unwrap_or(Timestamp::MIN),
            blocks: runs.iter().map(|run| run.blocks as usize).sum(),
        }
    }

    /// The positions of `series` (one, or two for an id holding two kinds).
    fn positions(&self, series: SeriesId) -> std::ops::Range<usize> {
        let start = self.series.partition_point(|&s| s < series);
        let end = start + self.series[start..].iter().take_while(|&&s| s == series).count();
        start..end
    }

    fn overlaps(&self, from: Timestamp, to: Timestamp) -> bool {
        overlaps((self.min_timestamp, self.max_timestamp), from, to)
    }

    /// Series in the segment (an id holding two kinds counts twice).
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// The `at`-th series of the directory and its extent.
    pub fn get(&self, at: usize) -> (SeriesId, SeriesExtent) {
        (self.series[at], self.extents[at].in_segment(self.segment))
    }

    /// The series and their extents, in directory order.
    pub fn iter(&self) -> impl Iterator<Item = (SeriesId, SeriesExtent)> + '_ {
        (0..self.len()).map(|at| self.get(at))
    }
}

impl ExtentIndex {
    /// Adds the directory of `segment` (replacing what the index held of it).
    pub fn insert(&mut self, segment: u64, directory: &[SeriesRun]) {
        let extents = Arc::new(SegmentExtents::of(segment, directory));
        self.blocks += extents.blocks;
        if let Some(old) = self.segments.insert(segment, extents) {
            self.blocks -= old.blocks;
        }
    }

    /// Forgets `segment`.
    pub fn remove(&mut self, segment: u64) {
        if let Some(old) = self.segments.remove(&segment) {
            self.blocks -= old.blocks;
        }
    }

    /// Extents of `series` that may hold points in `[from, to)`, by segment id.
    pub fn extents_in(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<SeriesExtent> {
        let mut found = Vec::new();
        for (&segment, extents) in self.segments.iter().filter(|(_, extents)| extents.overlaps(from, to)) {
            for at in extents.positions(series) {
                let extent = extents.extents[at].in_segment(segment);
                if extent.overlaps(from, to) {
                    found.push(extent);
                }
            }
        }
        found
    }

    /// The extent of `series` in `segment` (its first kind's, should it hold two).
    #[cfg(test)]
    pub fn extent(&self, series: SeriesId, segment: u64) -> Option<SeriesExtent> {
        let extents = self.segments.get(&segment)?;
        let at = extents.positions(series).next()?;
        Some(extents.extents[at].in_segment(segment))
    }

    /// The series of `segment` with their extents, in directory order; `None` if the segment
    /// is not indexed here.
    pub fn segment(&self, segment: u64) -> Option<Arc<SegmentExtents>> {
        self.segments.get(&segment).cloned()
    }

    pub fn block_count(&self) -> usize {
        self.blocks
    }

    /// Every series with extents and its value kind, once per segment holding it.
    pub fn series_kinds(&self) -> impl Iterator<Item = (SeriesId, ValueKind)> + '_ {
        self.segments.values().flat_map(|extents| extents.series.iter().zip(extents.extents.iter()).map(|(&series, e)| (series, e.kind)))
    }
}

/// Decoded runs of recent reads, by (segment, series), at most `limit` bytes of entries
/// (least recently used go first). Segment ids are never reused, so an entry cannot go stale;
/// a removed segment's runs are dropped all the same, to give the room back.
pub struct RunCache {
    limit: usize,
    used: usize,
    clock: u64,
    /// (segment, series) → the run's entries and the clock of its last use.
    runs: HashMap<RunKey, (Arc<[IndexEntry]>, u64)>,
}

type RunKey = (u64, SeriesId);

/// Bytes one cached run takes: its entries and the map slot.
fn cost(entries: &[IndexEntry]) -> usize {
    std::mem::size_of_val(entries) + 64
}

impl RunCache {
    pub fn new(limit: usize) -> RunCache {
        RunCache { limit, used: 0, clock: 0, runs: HashMap::new() }
    }

    pub fn get(&mut self, segment: u64, series: SeriesId) -> Option<Arc<[IndexEntry]>> {
        self.clock += 1;
        let now = self.clock;
        let (entries, used) = self.runs.get_mut(&(segment, series))?;
        *used = now;
        Some(entries.clone())
    }

    /// Keeps `entries`, evicting the least recently used runs beyond the limit; a run larger
    /// than an eighth of the limit is not kept.
    pub fn insert(&mut self, segment: u64, series: SeriesId, entries: Arc<[IndexEntry]>) {
        let size = cost(&entries);
        if size > self.limit / 8 {
            return;
        }
        self.clock += 1;
        if let Some((old, _)) = self.runs.insert((segment, series), (entries, self.clock)) {
            self.used -= cost(&old);
        }
        self.used += size;
        if self.used > self.limit {
            // Down to three quarters at once, so the sort is paid once per many inserts.
            let mut by_age: Vec<(u64, RunKey)> = self.runs.iter().map(|(key, (_, used))| (*used, *key)).collect();
            by_age.sort_unstable();
            for (_, key) in by_age {
                if self.used <= self.limit / 4 * 3 {
                    break;
                }
                if let Some((old, _)) = self.runs.remove(&key) {
                    self.used -= cost(&old);
                }
            }
        }
    }

    /// Drops every run of `segment`.
    pub fn remove_segment(&mut self, segment: u64) {
        let mut freed = 0;
        self.runs.retain(|(id, _), (entries, _)| {
            let keep = *id != segment;
            if !keep {
                freed += cost(entries);
            }
            keep
        });
        self.used -= freed;
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.used
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(series: u32, min: i64, max: i64, blocks: u32) -> SeriesRun {
        SeriesRun {
            series: SeriesId(series),
            kind: ValueKind::F64,
            blocks,
            points: u64::from(blocks) * 10,
            bytes: u64::from(blocks) * 100,
            min_timestamp: min,
            max_timestamp: max,
            min_sequence: 1,
            max_sequence: 1,
            run_offset: 8192,
            run_length: 40,
            run_checksum: 7,
        }
    }

    fn entries(n: usize) -> Arc<[IndexEntry]> {
        let entry = IndexEntry {
            series: SeriesId(1),
            kind: ValueKind::F64,
            count: 1,
            length: 1,
            offset: 4096,
            min_timestamp: 0,
            max_timestamp: 0,
            sequence: 1,
        };
        vec![entry; n].into()
    }

    #[test]
    fn extents_overlapping_a_range_are_found_and_removed_segments_forgotten() {
        let mut index = ExtentIndex::default();
        index.insert(3, &[run(1, 100, 199, 5), run(2, 100, 150, 1)]);
        index.insert(1, &[run(1, 0, 99, 4)]);
        index.insert(2, &[run(1, 50, 120, 2)]);
        let segments =
            |index: &ExtentIndex, from, to| index.extents_in(SeriesId(1), from, to).iter().map(|e| e.segment).collect::<Vec<_>>();
        assert_eq!(segments(&index, 0, 50), vec![1]);
        assert_eq!(segments(&index, 0, 51), vec![1, 2]);
        assert_eq!(segments(&index, 120, 121), vec![2, 3]);
        assert_eq!(segments(&index, 200, 300), Vec::<u64>::new());
        assert_eq!(index.block_count(), 12);
        assert_eq!(index.extent(SeriesId(1), 2).map(|e| e.blocks), Some(2));
        assert_eq!(index.extent(SeriesId(2), 2), None);
        index.remove(3);
        assert_eq!(segments(&index, 0, 1000), vec![1, 2]);
        assert_eq!(index.block_count(), 6);
        let series: std::collections::BTreeSet<SeriesId> = index.series_kinds().map(|(s, _)| s).collect();
        assert_eq!(series.into_iter().collect::<Vec<_>>(), [SeriesId(1)], "series 2 had blocks in segment 3 only");
    }

    /// A series costs one id and one extent in each segment holding it, with no room to spare.
    #[test]
    fn a_segment_holds_one_id_and_one_extent_per_series_without_slack() {
        assert_eq!(std::mem::size_of::<StoredExtent>() + std::mem::size_of::<SeriesId>(), 52);
        let mut index = ExtentIndex::default();
        let directory: Vec<SeriesRun> = (1..=1000).map(|s| run(s, 0, 99, 1)).collect();
        index.insert(1, &directory);
        index.insert(2, &directory[..10]);
        let lengths: Vec<(usize, usize)> = index.segments.values().map(|e| (e.series.len(), e.extents.len())).collect();
        assert_eq!(lengths, [(1000, 1000), (10, 10)]);
        assert_eq!(index.extents_in(SeriesId(5), 0, 100).len(), 2);
        assert_eq!(index.extents_in(SeriesId(500), 0, 100).len(), 1);
    }

    /// An id may hold two kinds in one segment (its runs sit side by side in the directory):
    /// both extents are found, whatever ids surround them.
    #[test]
    fn an_id_with_two_kinds_in_a_segment_is_found_twice() {
        let mut index = ExtentIndex::default();
        let mut other_kind = run(7, 50, 60, 2);
        other_kind.kind = ValueKind::I64;
        index.insert(1, &[run(3, 0, 9, 1), run(7, 0, 9, 1), other_kind, run(u32::MAX - 1, 0, 9, 1)]);
        let kinds: Vec<ValueKind> = index.extents_in(SeriesId(7), 0, 100).iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [ValueKind::F64, ValueKind::I64]);
        assert_eq!(index.extents_in(SeriesId(7), 50, 51).len(), 1, "each extent is checked against the range");
        assert_eq!(index.extent(SeriesId(u32::MAX - 1), 1).map(|e| e.blocks), Some(1));
        assert_eq!(index.block_count(), 5);
        assert_eq!(index.series_kinds().count(), 4);
        index.remove(1);
        assert_eq!(index.block_count(), 0);
        assert!(index.extents_in(SeriesId(7), 0, 100).is_empty());
    }

    proptest::proptest! {
        /// Against a plain list of (segment, run): every lookup agrees after any sequence of
        /// inserts (a segment inserted again replaces its extents) and removals.
        #[test]
        fn lookups_agree_with_a_list_of_every_run(
            steps in proptest::collection::vec(
                (0u64..6, proptest::option::of(proptest::collection::btree_map(1u32..40, (0i64..100, 0i64..50, 1u32..4), 0..12))),
                1..20,
            ),
            queries in proptest::collection::vec((1u32..42, 0i64..160, 1i64..80), 1..30),
        ) {
            let mut index = ExtentIndex::default();
            let mut model: BTreeMap<u64, Vec<SeriesRun>> = BTreeMap::new();
            for (segment, directory) in steps {
                match directory {
                    Some(runs) => {
                        let directory: Vec<SeriesRun> =
                            runs.iter().map(|(&s, &(min, span, blocks))| run(s, min, min + span, blocks)).collect();
                        index.insert(segment, &directory);
                        model.insert(segment, directory);
                    }
                    None => {
                        index.remove(segment);
                        model.remove(&segment);
                    }
                }
                let blocks: usize = model.values().flatten().map(|r| r.blocks as usize).sum();
                proptest::prop_assert_eq!(index.block_count(), blocks);
            }
            for (series, from, length) in queries {
                let (series, to) = (SeriesId(series), from + length);
                let expected: Vec<SeriesExtent> = model
                    .iter()
                    .flat_map(|(&segment, runs)| runs.iter().filter(|r| r.series == series).map(move |r| SeriesExtent::of(segment, r)))
                    .filter(|e| e.overlaps(from, to))
                    .collect();
                proptest::prop_assert_eq!(index.extents_in(series, from, to), expected);
                for (&segment, runs) in &model {
                    let expected = runs.iter().find(|r| r.series == series).map(|r| SeriesExtent::of(segment, r));
                    proptest::prop_assert_eq!(index.extent(series, segment), expected);
                }
            }
            for (&segment, runs) in &model {
                let listed: Vec<(SeriesId, SeriesExtent)> = runs.iter().map(|r| (r.series, SeriesExtent::of(segment, r))).collect();
                let indexed = index.segment(segment).map(|extents| extents.iter().collect::<Vec<_>>());
                proptest::prop_assert_eq!(indexed, Some(listed));
            }
            let kinds = index.series_kinds().count();
            proptest::prop_assert_eq!(kinds, model.values().map(Vec::len).sum::<usize>());
        }
    }

    #[test]
    fn the_run_cache_stays_within_its_limit_and_keeps_the_recently_used() {
        let one = cost(&entries(10));
        let mut cache = RunCache::new(one * 16);
        cache.insert(1, SeriesId(1), entries(10));
        for series in 2..=100 {
            assert!(cache.get(1, SeriesId(1)).is_some(), "the run read every time stays");
            cache.insert(1, SeriesId(series), entries(10));
            assert!(cache.bytes() <= one * 16, "{} bytes held after {series} runs", cache.bytes());
        }
        assert!(cache.len() >= 8, "eviction keeps most of the limit: {} runs", cache.len());
        assert!(cache.get(1, SeriesId(2)).is_none(), "the oldest runs went");
        // Over an eighth of the limit, under the whole of it.
        assert!(cost(&entries(30)) > one * 2 && cost(&entries(30)) < one * 16);
        cache.insert(1, SeriesId(1000), entries(30));
        assert!(cache.get(1, SeriesId(1000)).is_none(), "a run over an eighth of the limit is not kept");
        cache.insert(2, SeriesId(5), entries(10));
        cache.remove_segment(1);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.bytes(), one);
    }
}
