//! [`MemoryStore`]: a [`BlockStore`] that keeps every block in memory. It shares nothing with
//! the segment files but the block encoding, so running the engine's tests over it shows that
//! the engine, compaction and reclaim depend on the trait alone; it also serves embedded uses
//! that want no files for sealed data.
//!
//! A segment is a list of groups, each the bytes of one [`GroupBuilder`] placed at the
//! segment's running end, so a block's offset locates its group. Groups are shared with reads
//! through their pins and never change, so a removed segment stays readable to the reads that
//! listed its blocks. Everything is "durable" once in memory: an engine reopened over the same
//! store (an `Arc` kept by the caller) finds every group it acknowledged, as after a crash.

use super::{BlockLife, BlockPin, BlockSource, BlockStore, ListedBlock, SegmentRewrite, SegmentSummary, StoreStats};
use crate::block::{self, Block, BlockError, BlockHeader};
use crate::error::{Error, Result};
use crate::index::{BlockIndex, BlockRef};
use crate::model::{SeriesId, Timestamp, ValueKind};
use crate::segment::{GroupBuilder, IndexEntry, RawBlock};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Blocks in memory; see the module documentation.
pub struct MemoryStore {
    /// A segment stops taking groups once it holds at least this many bytes.
    segment_bytes_max: u64,
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    index: BlockIndex,
    segments: BTreeMap<u64, MemorySegment>,
    /// The segment taking groups, if any.
    open: Option<u64>,
    /// When the open segment took its first group.
    open_since: Option<Instant>,
    next_id: u64,
    /// Sequence of the last group stored.
    sequence: u64,
}

struct MemorySegment {
    summary: SegmentSummary,
    lives: Vec<BlockLife>,
    /// By ascending `base`.
    groups: Vec<Arc<MemoryGroup>>,
}

impl MemorySegment {
    fn new(id: u64) -> MemorySegment {
        MemorySegment { summary: SegmentSummary::of(id, false, 0, &[], 0), lives: Vec::new(), groups: Vec::new() }
    }

    /// Places the blocks of `group` at the segment's end with `sequence`; returns their entries.
    fn append(&mut self, group: GroupBuilder, sequence: u64, wal_checkpoint: u64) -> Vec<IndexEntry> {
        let base = self.summary.bytes;
        let (bytes, mut entries) = group.into_blocks();
        for entry in &mut entries {
            entry.offset += base;
            entry.sequence = sequence;
        }
        let end = base + bytes.len() as u64;
        self.groups.push(Arc::new(MemoryGroup { segment: self.summary.id, base, bytes }));
        self.summary.add(&entries, end, wal_checkpoint);
        self.lives.extend(entries.iter().map(BlockLife::of));
        entries
    }

    /// The group holding the block at `offset`.
    fn group_of(&self, offset: u64) -> Option<&Arc<MemoryGroup>> {
        let after = self.groups.partition_point(|g| g.base <= offset);
        self.groups.get(after.checked_sub(1)?)
    }
}

/// The bytes of one group, at `base` in its segment: what a listed block pins.
struct MemoryGroup {
    segment: u64,
    base: u64,
    bytes: bytes::Bytes,
}

impl MemoryGroup {
    /// A name for error reports, in place of a file.
    fn name(&self) -> PathBuf {
        PathBuf::from(format!("memory-segment-{}", self.segment))
    }

    fn corrupt(&self, offset: u64, detail: impl Into<String>) -> Error {
        Error::corruption(self.name(), offset, detail)
    }

    /// `length` bytes at segment position `offset`, if they lie within this group.
    fn slice(&self, offset: u64, length: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset.checked_sub(self.base)?).ok()?;
        let end = start.checked_add(usize::try_from(length).ok()?)?;
        self.bytes.get(start..end)
    }

    /// Segment position of the shared record `distance` bytes before the block at `offset`,
    /// checked to lie in this group and end before the block.
    fn shared_start(&self, offset: u64, distance: u32, length: u32) -> std::result::Result<u64, String> {
        offset
            .checked_sub(u64::from(distance))
            .filter(|&start| start >= self.base && length <= distance)
            .ok_or_else(|| format!("shared timestamp record {distance} bytes back is outside its group"))
    }

    fn block_bytes(&self, entry: &IndexEntry) -> Result<&[u8]> {
        self.slice(entry.offset, u64::from(entry.length)).ok_or_else(|| self.corrupt(entry.offset, "block lies outside its group"))
    }

    fn check_header(&self, header: &BlockHeader, entry: &IndexEntry) -> Result<()> {
        if header.series != entry.series
            || header.count != entry.count
            || header.min_timestamp != entry.min_timestamp
            || header.max_timestamp != entry.max_timestamp
        {
            return Err(self.corrupt(entry.offset, "block does not match its index entry"));
        }
        Ok(())
    }

    fn read_raw(&self, entry: &IndexEntry, records: &mut HashMap<u64, Arc<[u8]>>) -> Result<RawBlock> {
        let bytes = self.block_bytes(entry)?.to_vec();
        let header = BlockHeader::verified(&bytes).map_err(|e| self.corrupt(entry.offset, e.to_string()))?;
        self.check_header(&header, entry)?;
        let shared = match block::shared_reference(&bytes, &header).map_err(|e| self.corrupt(entry.offset, e.to_string()))? {
            None => None,
            Some((distance, length)) => {
                let start = self.shared_start(entry.offset, distance, length).map_err(|what| self.corrupt(entry.offset, what))?;
                let record = match records.get(&start) {
                    Some(record) if record.len() == length as usize => record.clone(),
                    _ => {
                        let record = self.slice(start, u64::from(length)).ok_or_else(|| self.corrupt(start, "record outside its group"))?;
                        block::verify_shared_record(record).map_err(|e| self.corrupt(start, e.to_string()))?;
                        let record: Arc<[u8]> = record.into();
                        records.insert(start, record.clone());
                        record
                    }
                };
                Some((start, record))
            }
        };
        Ok(RawBlock { entry: *entry, header, bytes, shared })
    }
}

impl BlockSource for MemoryGroup {
    fn read(&self, entry: &IndexEntry) -> Result<Block> {
        let bytes = self.block_bytes(entry)?;
        let mut load_shared = |distance: u32, length: u32| {
            let start = self.shared_start(entry.offset, distance, length).map_err(BlockError::SharedTimestamps)?;
            let record = self
                .slice(start, u64::from(length))
                .ok_or_else(|| BlockError::SharedTimestamps(format!("record at {start} outside its group")))?;
            block::decode_shared_timestamps(record)
        };
        let block = block::decode_with_shared(bytes, &mut load_shared).map_err(|e| self.corrupt(entry.offset, e.to_string()))?;
        self.check_header(&block.header, entry)?;
        Ok(block)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(64 << 20)
    }
}

impl MemoryStore {
    /// An empty store whose segments stop taking groups at `segment_bytes_max` bytes.
    pub fn new(segment_bytes_max: u64) -> MemoryStore {
        MemoryStore { segment_bytes_max: segment_bytes_max.max(1), state: RwLock::new(State { next_id: 1, ..State::default() }) }
    }

    /// Groups of segment `id` (0 when there is no such segment).
    #[cfg(test)]
    pub(crate) fn group_count(&self, id: u64) -> usize {
        self.state.read().segments.get(&id).map_or(0, |s| s.groups.len())
    }

    /// The group holding `block`, for maintenance reads.
    fn group_of(&self, block: &BlockRef) -> Result<Arc<MemoryGroup>> {
        let state = self.state.read();
        let segment = state.segments.get(&block.segment);
        segment
            .and_then(|s| s.group_of(block.entry.offset))
            .cloned()
            .ok_or_else(|| Error::corruption(format!("memory-segment-{}", block.segment), block.entry.offset, "segment or block is gone"))
    }
}

impl State {
    fn seal_open(&mut self) {
        self.open_since = None;
        if let Some(id) = self.open.take() {
            if let Some(segment) = self.segments.get_mut(&id) {
                segment.summary.sealed = true;
            }
        }
    }

    /// Takes segments out of the index and the map.
    fn remove(&mut self, ids: &[u64]) -> Vec<MemorySegment> {
        let removed: Vec<MemorySegment> = ids.iter().filter_map(|id| self.segments.remove(id)).collect();
        for old in &removed {
            self.index.remove_blocks(old.summary.id, old.lives.iter().map(|l| l.series));
        }
        removed
    }
}

impl BlockStore for MemoryStore {
    fn put_group(&self, group: GroupBuilder, wal_checkpoint: u64) -> Result<u64> {
        let mut state = self.state.write();
        let id = match state.open {
            Some(id) => id,
            None => {
                let id = state.next_id;
                state.next_id += 1;
                state.segments.insert(id, MemorySegment::new(id));
                state.open = Some(id);
                state.open_since = Some(Instant::now());
                id
            }
        };
        let sequence = state.sequence + 1;
        state.sequence = sequence;
        let segment = state.segments.get_mut(&id).expect("BUG: the open memory segment vanished");
        let entries = segment.append(group, sequence, wal_checkpoint);
        let full = segment.summary.bytes >= self.segment_bytes_max;
        state.index.insert(id, &entries);
        if full {
            state.seal_open();
        }
        Ok(sequence)
    }

    fn seal(&self) -> Result<()> {
        self.state.write().seal_open();
        Ok(())
    }

    fn open_segment_age(&self) -> Option<Duration> {
        self.state.read().open_since.map(|since| since.elapsed())
    }

    fn seal_if_older_than(&self, age: Duration) -> Result<bool> {
        let mut state = self.state.write();
        let due = state.open_since.is_some_and(|since| since.elapsed() >= age);
        if due {
            state.seal_open();
        }
        Ok(due)
    }

    fn blocks(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<ListedBlock> {
        let state = self.state.read();
        state
            .index
            .blocks_in(series, from, to)
            .into_iter()
            .filter_map(|block| {
                let group = state.segments.get(&block.segment)?.group_of(block.entry.offset)?.clone();
                Some(ListedBlock { block, pin: BlockPin::new(group) })
            })
            .collect()
    }

    fn stats(&self) -> StoreStats {
        let state = self.state.read();
        StoreStats {
            segments: state.segments.len(),
            blocks: state.index.block_count(),
            points: state.index.point_count(),
            bytes: state.segments.values().map(|s| s.summary.bytes).sum(),
        }
    }

    fn series_kinds(&self) -> Vec<(SeriesId, ValueKind)> {
        self.state.read().index.series_kinds()
    }

    fn wal_checkpoint(&self) -> u64 {
        self.state.read().segments.values().map(|s| s.summary.wal_checkpoint).max().unwrap_or(0)
    }

    fn summaries(&self) -> Vec<SegmentSummary> {
        self.state.read().segments.values().map(|s| s.summary).collect()
    }

    fn visit_segments(&self, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife])) {
        for segment in self.state.read().segments.values() {
            visit(&segment.summary, &segment.lives);
        }
    }

    fn blocks_of_segments(&self, ids: &[u64]) -> Vec<BlockRef> {
        self.state.read().index.blocks_of_segments(ids)
    }

    fn read_indexed_block(&self, block: &BlockRef) -> Result<Block> {
        self.group_of(block)?.read(&block.entry)
    }

    fn read_raw_block(&self, block: &BlockRef, records: &mut HashMap<u64, Arc<[u8]>>) -> Result<RawBlock> {
        self.group_of(block)?.read_raw(&block.entry, records)
    }

    fn remove_segments(&self, ids: &[u64]) -> Result<u64> {
        let mut state = self.state.write();
        let open = state.open;
        let removable: Vec<u64> = ids.iter().copied().filter(|&id| Some(id) != open).collect();
        Ok(state.remove(&removable).iter().map(|s| s.summary.bytes).sum())
    }

    fn begin_rewrite(&self, replaced: &[u64], sequence: u64, wal_checkpoint: u64) -> Result<Box<dyn SegmentRewrite + '_>> {
        let id = {
            let mut state = self.state.write();
            state.next_id += 1;
            state.next_id - 1
        };
        let output = MemorySegment::new(id);
        Ok(Box::new(MemoryRewrite { store: self, output, entries: Vec::new(), replaced: replaced.to_vec(), sequence, wal_checkpoint }))
    }
}

/// A rewrite output, built aside and swapped in under the store's lock.
struct MemoryRewrite<'a> {
    store: &'a MemoryStore,
    output: MemorySegment,
    entries: Vec<IndexEntry>,
    replaced: Vec<u64>,
    sequence: u64,
    wal_checkpoint: u64,
}

impl SegmentRewrite for MemoryRewrite<'_> {
    fn append(&mut self, parts: Vec<GroupBuilder>) -> Result<u64> {
        let before = self.output.summary.bytes;
        for part in parts {
            let entries = self.output.append(part, self.sequence, self.wal_checkpoint);
            self.entries.extend(entries);
        }
        Ok(self.output.summary.bytes - before)
    }

    fn install(self: Box<Self>) -> Result<Vec<SegmentSummary>> {
        let MemoryRewrite { store, mut output, entries, replaced, .. } = *self;
        output.summary.sealed = true;
        let summary = output.summary;
        let mut state = store.state.write();
        state.remove(&replaced);
        state.index.insert(summary.id, &entries);
        state.segments.insert(summary.id, output);
        Ok(vec![summary])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ValueColumn;
    use crate::store::test_groups::group;

    /// A group of two fields of one row sharing a timestamp record, as flushes write them.
    fn row_group(start: i64, points: i64) -> GroupBuilder {
        let mut group = GroupBuilder::new();
        let timestamps: Vec<i64> = (start..start + points).collect();
        let shared = group.add_shared_timestamps(&timestamps);
        for series in [1, 2] {
            let values = ValueColumn::I64(timestamps.iter().map(|t| t * series).collect());
            group.add_block_sharing(SeriesId(series as u32), &timestamps, &values, shared, &[]);
        }
        group
    }

    fn read_all(store: &MemoryStore, series: u32) -> Vec<i64> {
        store.blocks(SeriesId(series), i64::MIN, i64::MAX).iter().flat_map(|b| store.read_block(b).expect("read").timestamps).collect()
    }

    #[test]
    fn groups_fill_segments_and_blocks_read_back_with_shared_timestamps() {
        let store = MemoryStore::new(1);
        assert_eq!(store.put_group(group(1, 0, 10), 3).expect("put"), 1);
        assert_eq!(store.put_group(row_group(10, 5), 4).expect("put"), 2);
        let summaries = store.summaries();
        assert_eq!(summaries.len(), 2, "each group filled its own segment");
        assert!(summaries.iter().all(|s| s.sealed));
        assert_eq!(read_all(&store, 1), (0..15).collect::<Vec<_>>());
        let second = store.read_block(&store.blocks(SeriesId(2), 0, 100)[0]).expect("shared block");
        assert_eq!(second.values, ValueColumn::I64((10..15).map(|t| t * 2).collect()));
        assert_eq!(store.wal_checkpoint(), 4);
        assert_eq!(store.stats().blocks, 3);
        assert_eq!(store.stats().points, 20);
    }

    #[test]
    fn a_removed_segment_stays_readable_to_a_read_that_listed_it() {
        let store = MemoryStore::new(1);
        store.put_group(group(1, 0, 100), 0).expect("put");
        store.put_group(group(1, 100, 100), 0).expect("put");
        let listed = store.blocks(SeriesId(1), 0, 100);
        let first = store.summaries()[0].id;
        assert!(store.remove_segments(&[first]).expect("remove") > 0);
        assert!(store.blocks(SeriesId(1), 0, 100).is_empty(), "the index forgot the removed blocks");
        assert_eq!(store.read_block(&listed[0]).expect("pinned").timestamps.len(), 100);
        assert!(store.read_indexed_block(&listed[0].block).is_err(), "maintenance reads see the removal");
    }

    #[test]
    fn the_segment_taking_groups_is_never_removed() {
        let store = MemoryStore::new(u64::MAX);
        store.put_group(group(1, 0, 10), 0).expect("put");
        let open = store.summaries()[0];
        assert!(!open.sealed);
        assert_eq!(store.remove_segments(&[open.id]).expect("remove"), 0);
        assert_eq!(read_all(&store, 1).len(), 10);
        store.seal().expect("seal");
        assert!(store.summaries()[0].sealed);
    }

    #[test]
    fn a_rewrite_is_invisible_until_installed_and_then_replaces_its_inputs() {
        let store = MemoryStore::new(1);
        store.put_group(row_group(0, 10), 1).expect("put");
        store.put_group(row_group(10, 10), 2).expect("put");
        let run: Vec<u64> = store.summaries().iter().map(|s| s.id).collect();
        let blocks = store.blocks_of_segments(&run);
        assert_eq!(blocks.len(), 4);
        let mut rewrite = store.begin_rewrite(&run, 2, 2).expect("begin");
        // Raw copies bring their shared record along, once per source record.
        let mut copied = GroupBuilder::new();
        let mut copies = HashMap::new();
        for block in &blocks {
            let mut records = HashMap::new();
            copied.add_raw_block(block.segment, store.read_raw_block(block, &mut records).expect("raw"), &mut copies);
        }
        assert!(rewrite.append(vec![copied]).expect("append") > 0);
        assert_eq!(store.summaries().len(), 2, "not installed yet");
        let installed = rewrite.install().expect("install").remove(0);
        assert_eq!(installed.blocks, 4);
        assert_eq!(installed.max_sequence, 2);
        assert_eq!(store.summaries(), vec![installed]);
        assert_eq!(read_all(&store, 1), (0..20).collect::<Vec<_>>());
        let values: Vec<i64> = store
            .blocks(SeriesId(2), 0, 20)
            .iter()
            .flat_map(|b| match store.read_block(b).expect("read").values {
                ValueColumn::I64(values) => values,
                other => panic!("kind {other:?}"),
            })
            .collect();
        assert_eq!(values, (0..20).map(|t| t * 2).collect::<Vec<_>>());
    }
}
