//! The coarse index of sealed segments whose footer has a series directory (segment format
//! version 2): per series, one [`SeriesExtent`] per segment holding it, about 56 bytes whatever
//! the number of blocks. A read lists the extents that overlap its range and gets their blocks
//! from the series' run in the segment footer, through the bounded [`RunCache`].

use crate::batch::IdHasher;
use crate::model::{SeriesId, Timestamp, ValueKind};
use crate::segment::{IndexEntry, RunShape, SeriesRun};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
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
    pub fn of(segment: u64, run: &SeriesRun) -> SeriesExtent {
        SeriesExtent {
            segment,
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
        self.min_timestamp < to && self.max_timestamp >= from
    }
}

/// Series → their extents, each list ordered by segment id.
///
/// Lists are found by id in a vector (`dense[id]`): the catalog gives ids densely from 1, and a
/// directory lists its series in id order, so building the index at start-up walks memory in
/// order, where a hash table sent each of millions of series to a random cache line (3 s of a
/// 2 M-series start, 7 segments). An id too far beyond the vector to grow it for (damage, or a
/// store whose low ids are long gone) is kept in a hash table instead.
#[derive(Default)]
pub struct ExtentIndex {
    dense: Vec<Vec<SeriesExtent>>,
    sparse: HashMap<SeriesId, Vec<SeriesExtent>, BuildHasherDefault<IdHasher>>,
    blocks: usize,
}

/// The dense vector grows to take an id up to twice its length plus this (a directory of a new
/// store starts it); beyond that, ids go to the hash table.
const DENSE_GROWTH_MIN: usize = 1 << 20;

impl ExtentIndex {
    /// Adds the directory of `segment`.
    pub fn insert(&mut self, segment: u64, directory: &[SeriesRun]) {
        let reach = 2 * self.dense.len() + DENSE_GROWTH_MIN;
        self.grow_for(directory.iter().map(|run| run.series.0 as usize).filter(|&id| id <= reach).max().unwrap_or(0));
        for run in directory {
            let list = self.list_mut(run.series);
            if list.capacity() == 0 {
                // Most series of a store sit in one segment or a few: a first allocation of
                // one extent, not the four `Vec` reserves (224 bytes a series), which at 2 M
                // series held 336 MB of never-used room.
                list.reserve_exact(1);
            }
            let extent = SeriesExtent::of(segment, run);
            let position = match list.last() {
                Some(last) if last.segment > segment => list.partition_point(|e| e.segment < segment),
                _ => list.len(),
            };
            list.insert(position, extent);
            self.blocks += run.blocks as usize;
        }
    }

    /// Makes the dense vector reach `id` if that is not too far beyond it, taking over the
    /// lists of the hash table that it then covers.
    fn grow_for(&mut self, id: usize) {
        if id < self.dense.len() || id > 2 * self.dense.len() + DENSE_GROWTH_MIN {
            return;
        }
        self.dense.resize_with(id + 1, Vec::new);
        if !self.sparse.is_empty() {
            let covered: Vec<SeriesId> = self.sparse.keys().filter(|s| (s.0 as usize) <= id).copied().collect();
            for series in covered {
                if let Some(list) = self.sparse.remove(&series) {
                    self.dense[series.0 as usize] = list;
                }
            }
        }
    }

    fn list_mut(&mut self, series: SeriesId) -> &mut Vec<SeriesExtent> {
        match self.dense.get_mut(series.0 as usize) {
            Some(list) => list,
            None => self.sparse.entry(series).or_default(),
        }
    }

    fn list(&self, series: SeriesId) -> Option<&Vec<SeriesExtent>> {
        match self.dense.get(series.0 as usize) {
            Some(list) => Some(list),
            None => self.sparse.get(&series),
        }
    }

    /// Forgets `segment`, given the series its directory lists.
    pub fn remove(&mut self, segment: u64, series: &[SeriesId]) {
        for &id in series {
            let list = match self.dense.get_mut(id.0 as usize) {
                Some(list) => list,
                None => match self.sparse.get_mut(&id) {
                    Some(list) => list,
                    None => continue,
                },
            };
            let before: usize = list.iter().map(|e| e.blocks as usize).sum();
            list.retain(|e| e.segment != segment);
            let after: usize = list.iter().map(|e| e.blocks as usize).sum();
            self.blocks -= before - after;
            if list.is_empty() {
                // Its room goes too: a series whose data is gone costs an empty slot.
                *list = Vec::new();
                self.sparse.remove(&id);
            }
        }
    }

    /// Extents of `series` that may hold points in `[from, to)`.
    pub fn extents_in(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<SeriesExtent> {
        let Some(list) = self.list(series) else { return Vec::new() };
        list.iter().filter(|e| e.overlaps(from, to)).copied().collect()
    }

    /// The extent of `series` in `segment`.
    pub fn extent(&self, series: SeriesId, segment: u64) -> Option<SeriesExtent> {
        let list = self.list(series)?;
        let at = list.partition_point(|e| e.segment < segment);
        list.get(at).filter(|e| e.segment == segment).copied()
    }

    pub fn block_count(&self) -> usize {
        self.blocks
    }

    /// Every series with extents and its value kind.
    pub fn series_kinds(&self) -> impl Iterator<Item = (SeriesId, ValueKind)> + '_ {
        let dense = self.dense.iter().enumerate().filter_map(|(id, list)| list.first().map(|e| (SeriesId(id as u32), e.kind)));
        dense.chain(self.sparse.iter().filter_map(|(&id, list)| list.first().map(|e| (id, e.kind))))
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
        index.remove(3, &[SeriesId(1), SeriesId(2)]);
        assert_eq!(segments(&index, 0, 1000), vec![1, 2]);
        assert_eq!(index.block_count(), 6);
        assert_eq!(index.series_kinds().count(), 1, "series 2 had blocks in segment 3 only");
    }

    /// A series in one segment costs one extent of room, not the four a `Vec` reserves first
    /// (issue 14: 224 bytes a series at 2 M series); a second segment still grows the list.
    #[test]
    fn a_series_in_one_segment_holds_room_for_one_extent() {
        let mut index = ExtentIndex::default();
        let directory: Vec<SeriesRun> = (1..=1000).map(|s| run(s, 0, 99, 1)).collect();
        index.insert(1, &directory);
        let room: usize = index.dense.iter().map(Vec::capacity).sum();
        assert_eq!(room, 1000);
        assert_eq!(index.dense.len(), 1001, "found by id, slot 0 unused");
        index.insert(2, &directory[..10]);
        assert!(index.dense.iter().filter(|list| list.len() == 2).all(|list| list.capacity() >= 2));
        assert_eq!(index.extents_in(SeriesId(5), 0, 100).len(), 2);
    }

    /// An id far beyond the others (damage, or a store whose low ids are gone) does not make
    /// the vector of lists billions of slots long: it is kept aside, found, removed, and taken
    /// over once the vector grows to it.
    #[test]
    fn ids_far_beyond_the_rest_are_kept_aside_and_found_alike() {
        let mut index = ExtentIndex::default();
        let far = u32::MAX - 1;
        index.insert(1, &[run(3, 0, 9, 1), run(far, 0, 9, 2)]);
        assert!(index.dense.len() < 1 << 22, "{} slots", index.dense.len());
        assert_eq!(index.extent(SeriesId(far), 1).map(|e| e.blocks), Some(2));
        assert_eq!(index.extents_in(SeriesId(far), 0, 10).len(), 1);
        let mut kinds: Vec<u32> = index.series_kinds().map(|(s, _)| s.0).collect();
        kinds.sort_unstable();
        assert_eq!(kinds, [3, far]);
        index.insert(2, &[run(far, 10, 19, 1)]);
        assert_eq!(index.extents_in(SeriesId(far), 0, 100).iter().map(|e| e.segment).collect::<Vec<_>>(), [1, 2]);
        index.remove(1, &[SeriesId(3), SeriesId(far)]);
        assert_eq!(index.block_count(), 1);
        assert_eq!(index.extents_in(SeriesId(3), 0, 100), []);
        index.remove(2, &[SeriesId(far)]);
        assert!(index.sparse.is_empty() && index.block_count() == 0);
        // Lists kept aside move into the vector once it grows past them.
        index.insert(3, &[run(1_000_000, 0, 9, 1)]);
        assert!(index.dense.len() == 1_000_001 && index.sparse.is_empty());
        index.insert(4, &[run(5_000_000, 0, 9, 1)]);
        assert_eq!(index.sparse.len(), 1, "beyond twice the vector and a million");
        index.insert(5, &[run(3_000_000, 0, 9, 1)]);
        assert_eq!(index.sparse.len(), 1);
        index.insert(5, &[run(5_000_001, 0, 9, 1)]);
        assert_eq!(index.sparse.len(), 0, "taken over when the vector grew to it");
        assert_eq!(index.extent(SeriesId(5_000_000), 4).map(|e| e.segment), Some(4));
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
