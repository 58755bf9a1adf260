//! The block index: for each series, its sealed blocks ordered by time.
//!
//! Rebuilt at start-up from segment footers (never from the blocks). Readers take a copy of the
//! few references they need, so the index lock is held only briefly. [`BlockIndex`] holds every
//! block in memory (segments still taking groups, files of format version 1, the memory and
//! Cassandra stores); [`runs::ExtentIndex`] holds a sparse index over each sealed version-2
//! segment's series directory, which stays in the file with the runs that list the blocks.

pub mod runs;

use crate::batch::IdHasher;
use crate::model::{SeriesId, Timestamp};
use crate::segment::IndexEntry;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A block and the segment that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    pub segment: u64,
    pub entry: IndexEntry,
}

/// Series → blocks, each list sorted by (min timestamp, sequence).
#[derive(Default)]
pub struct BlockIndex {
    series: HashMap<SeriesId, Vec<BlockRef>, BuildHasherDefault<IdHasher>>,
    blocks: usize,
    points: u64,
}

impl BlockIndex {
    pub fn insert(&mut self, segment: u64, entries: &[IndexEntry]) {
        for entry in entries {
            let list = self.series.entry(entry.series).or_default();
            if list.capacity() == 0 {
                // Most series have one block or a few in the segment taking groups: room for one
                // first, not the four a `Vec` reserves (224 bytes; 60 MB of the peak with 350,000
                // one-point blocks held, issue 14).
                list.reserve_exact(1);
            }
            let block = BlockRef { segment, entry: *entry };
            // Flushes arrive in time order, so the new block almost always goes at the end:
            // checked first, since a binary search over each of millions of lists at start-up
            // costs a cache miss a step (78% of opening 1 M blocks, `sensordb bench large-store`).
            let key = |b: &BlockRef| (b.entry.min_timestamp, b.entry.sequence);
            let position = match list.last() {
                Some(last) if key(last) > key(&block) => list.partition_point(|b| key(b) <= key(&block)),
                _ => list.len(),
            };
            list.insert(position, block);
            self.blocks += 1;
            self.points += u64::from(entry.count);
        }
    }

    /// The oldest point's time of the blocks of `series` held here (they are kept in order of
    /// their oldest points).
    pub fn oldest_timestamp(&self, series: SeriesId) -> Option<Timestamp> {
        self.series.get(&series)?.first().map(|b| b.entry.min_timestamp)
    }

    /// Blocks of `series` that may hold points in `[from, to)`, by (min timestamp, sequence).
    pub fn blocks_in(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<BlockRef> {
        let Some(list) = self.series.get(&series) else { return Vec::new() };
        let end = list.partition_point(|b| b.entry.min_timestamp < to);
        list[..end].iter().filter(|b| b.entry.max_timestamp >= from).copied().collect()
    }

    /// Every block in the segments `ids`, grouped by series (series in id order), each series'
    /// blocks by ascending sequence.
    pub fn blocks_of_segments(&self, ids: &[u64]) -> Vec<BlockRef> {
        let mut out: Vec<BlockRef> =
            self.series.values().flat_map(|list| list.iter().filter(|b| ids.contains(&b.segment)).copied()).collect();
        out.sort_by_key(|b| (b.entry.series, b.entry.sequence, b.entry.min_timestamp));
        out
    }

    /// Forgets every block of `segment`.
    #[cfg(test)]
    pub fn remove_segment(&mut self, segment: u64) {
        let (mut blocks, mut points) = (0usize, 0u64);
        self.series.retain(|_, list| {
            list.retain(|b| {
                let keep = b.segment != segment;
                if !keep {
                    blocks += 1;
                    points += u64::from(b.entry.count);
                }
                keep
            });
            !list.is_empty()
        });
        self.blocks -= blocks;
        self.points -= points;
    }

    /// Forgets every block of `segment`, given the series it holds blocks of (repeats allowed):
    /// touches only those series' lists.
    pub fn remove_blocks(&mut self, segment: u64, series: impl IntoIterator<Item = SeriesId>) {
        let mut seen = std::collections::HashSet::<SeriesId, BuildHasherDefault<IdHasher>>::default();
        for id in series {
            if !seen.insert(id) {
                continue;
            }
            let Some(list) = self.series.get_mut(&id) else { continue };
            let before = list.len();
            let mut points = 0u64;
            list.retain(|b| {
                let keep = b.segment != segment;
                if !keep {
                    points += u64::from(b.entry.count);
                }
                keep
            });
            self.blocks -= before - list.len();
            self.points -= points;
            if list.is_empty() {
                self.series.remove(&id);
            }
        }
    }

    pub fn block_count(&self) -> usize {
        self.blocks
    }

    pub fn point_count(&self) -> u64 {
        self.points
    }

    /// Every series with blocks and the value kind of its blocks.
    pub fn series_kinds(&self) -> Vec<(SeriesId, crate::model::ValueKind)> {
        self.series.iter().filter_map(|(&id, blocks)| blocks.first().map(|b| (id, b.entry.kind))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ValueKind;

    fn entry(series: u32, min: i64, max: i64, sequence: u64) -> IndexEntry {
        IndexEntry {
            series: SeriesId(series),
            kind: ValueKind::F64,
            count: 1,
            length: 70,
            offset: 4096,
            min_timestamp: min,
            max_timestamp: max,
            sequence,
        }
    }

    /// A series with one block holds room for one, not four.
    #[test]
    fn a_series_with_one_block_holds_room_for_one() {
        let mut index = BlockIndex::default();
        let entries: Vec<IndexEntry> = (1..=1000).map(|s| entry(s, 0, 9, 1)).collect();
        index.insert(1, &entries);
        assert_eq!(index.series.values().map(Vec::capacity).sum::<usize>(), 1000);
        index.insert(2, &entries[..10]);
        assert_eq!(index.series.values().filter(|list| list.len() == 2).count(), 10);
        assert_eq!(index.blocks_in(SeriesId(3), 0, 10).len(), 2);
    }

    #[test]
    fn range_lookup_finds_exactly_the_overlapping_blocks() {
        let mut index = BlockIndex::default();
        index.insert(1, &[entry(1, 0, 9, 1), entry(1, 10, 19, 2), entry(2, 0, 100, 2)]);
        index.insert(2, &[entry(1, 5, 12, 3)]);
        let found =
            |index: &BlockIndex, from, to| index.blocks_in(SeriesId(1), from, to).iter().map(|b| b.entry.sequence).collect::<Vec<_>>();
        assert_eq!(found(&index, 0, 5), vec![1]);
        assert_eq!(found(&index, 0, 6), vec![1, 3]);
        assert_eq!(found(&index, 13, 100), vec![2]);
        assert_eq!(found(&index, 20, 100), Vec::<u64>::new());
        assert_eq!(found(&index, 9, 10), vec![1, 3]);
        index.remove_segment(2);
        assert_eq!(found(&index, 0, 100), vec![1, 2]);
        assert_eq!(index.block_count(), 3);
    }
}
