//! Range reads: one series over `[from, to)`, merged from sealed blocks and memtables into one
//! time-ordered stream without repeated timestamps.
//!
//! Blocks are grouped into *clusters* of transitively overlapping time ranges; the usual case is
//! a chain of non-overlapping blocks, each its own cluster, returned as it is decoded. Within a
//! cluster (out-of-order data that arrived after a flush) points are merged and a repeated
//! timestamp keeps the value of the newest source: the memtable, then the block with the highest
//! flush sequence. Memtable points are copied once when the read starts (they are bounded by the
//! memtable limit) and woven into the block stream by time. The stream yields chunks, one
//! cluster at a time, so memory stays bounded by the largest cluster, not the whole range.
//! [`RangeRead::next_chunk_back`] walks the same clusters newest first, for reads that want the
//! newest points and stop early (`ORDER BY time DESC LIMIT n`).

use crate::block::Block;
use crate::engine::block_cache::{BlockCache, QueryStart};
use crate::error::Result;
use crate::memtable::ResolvedSeries;
use crate::model::{last_write_wins, Point, SeriesId, Timestamp, ValueColumn};
use crate::store::{BlockStore, ListedBlock};
use std::collections::VecDeque;
use std::sync::Arc;

/// Points of one series, sorted by timestamp without repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub timestamps: Vec<Timestamp>,
    pub values: ValueColumn,
}

impl Chunk {
    pub fn len(&self) -> usize {
        self.timestamps.len()
    }
    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }
}

/// A chunk handed out without copying where it can be: a window of a decoded block that the
/// block cache shares (a graph over a week reads 600,000 cached points per request, and copying
/// them cost a fifth of its time), or an owned chunk (merged clusters, memtable points, reads
/// without a cache).
#[derive(Debug)]
pub struct ChunkView(View);

#[derive(Debug)]
enum View {
    Owned(Chunk),
    Shared { block: Arc<Block>, range: std::ops::Range<usize> },
}

impl ChunkView {
    fn owned(chunk: Chunk) -> ChunkView {
        ChunkView(View::Owned(chunk))
    }

    pub fn timestamps(&self) -> &[Timestamp] {
        match &self.0 {
            View::Owned(chunk) => &chunk.timestamps,
            View::Shared { block, range } => &block.timestamps[range.clone()],
        }
    }

    /// The values, and the window of them that is this chunk's.
    pub fn values(&self) -> (&ValueColumn, std::ops::Range<usize>) {
        match &self.0 {
            View::Owned(chunk) => (&chunk.values, 0..chunk.len()),
            View::Shared { block, range } => (&block.values, range.clone()),
        }
    }

    pub fn into_chunk(self) -> Chunk {
        match self.0 {
            View::Owned(chunk) => chunk,
            View::Shared { block, range } => {
                Chunk { timestamps: block.timestamps[range.clone()].to_vec(), values: block.values.slice(range) }
            }
        }
    }
}

/// A streaming range read. Iterate chunks with [`RangeRead::next_chunk`], or points with
/// [`RangeRead::points`].
pub struct RangeRead {
    store: Arc<dyn BlockStore>,
    from: Timestamp,
    to: Timestamp,
    /// Clusters of overlapping blocks, in time order, each ordered by ascending sequence.
    clusters: VecDeque<Vec<ListedBlock>>,
    /// Memtable points still to emit (newest memtable already resolved over older ones).
    memory: Option<Chunk>,
    /// Memtable points `[memory_position, memory_end)` are not emitted yet: forward reads take
    /// from the front, backward reads from the back.
    memory_position: usize,
    memory_end: usize,
    /// Decoded blocks of recent reads, if the engine keeps them, and when the read's query
    /// began (what it read since then, it does not push out).
    cache: Option<(Arc<BlockCache>, QueryStart)>,
    /// Memtable points of a cluster whose blocks could not be read: handed out by the next
    /// call, so a damaged block never takes points with it that were never in it.
    deferred: Option<Chunk>,
}

impl RangeRead {
    /// `memtables` are ordered oldest first (frozen, then active).
    pub fn new(store: Arc<dyn BlockStore>, series: SeriesId, from: Timestamp, to: Timestamp, memtables: Vec<ResolvedSeries>) -> RangeRead {
        let blocks = if from < to { store.blocks(series, from, to) } else { Vec::new() };
        let memory = merge_sorted_sources(memtables.into_iter().map(|m| Chunk { timestamps: m.timestamps, values: m.values }).collect());
        let memory_end = memory.as_ref().map_or(0, Chunk::len);
        RangeRead { store, from, to, clusters: clusters(blocks), memory, memory_position: 0, memory_end, cache: None, deferred: None }
    }

    /// Reads blocks through `cache`, as a query of its own.
    pub(crate) fn with_cache(self, cache: Arc<BlockCache>) -> RangeRead {
        let start = cache.query_start();
        RangeRead { cache: Some((cache, start)), ..self }
    }

    /// Reads as part of the query that began at `start` (see [`crate::Engine::query_start`]):
    /// the blocks it reads do not push out those the query's other reads have read.
    pub fn in_query(mut self, start: QueryStart) -> RangeRead {
        if let Some((_, own)) = &mut self.cache {
            *own = start;
        }
        self
    }

    /// The next chunk of points, or `None` at the end.
    pub fn next_chunk(&mut self) -> Option<Result<Chunk>> {
        self.next_view().map(|view| view.map(ChunkView::into_chunk))
    }

    /// [`RangeRead::next_chunk`], a cached block's points lent instead of copied.
    pub fn next_view(&mut self) -> Option<Result<ChunkView>> {
        if let Some(deferred) = self.deferred.take() {
            return Some(Ok(ChunkView::owned(deferred)));
        }
        loop {
            let Some(cluster) = self.clusters.front() else {
                return self.take_memory_before(Timestamp::MAX).map(|c| Ok(ChunkView::owned(c)));
            };
            let cluster_min = cluster.iter().map(|b| b.block.entry.min_timestamp).min().unwrap_or(Timestamp::MIN);
            let cluster_max = cluster.iter().map(|b| b.block.entry.max_timestamp).max().unwrap_or(Timestamp::MAX);
            if let Some(before) = self.take_memory_before(cluster_min) {
                return Some(Ok(ChunkView::owned(before)));
            }
            let cluster = self.clusters.pop_front().expect("BUG: cluster vanished");
            let memory = self.take_memory_before(cluster_max.saturating_add(1));
            if let Some(view) = self.merge_cluster(&cluster, memory) {
                return Some(view);
            }
        }
    }

    /// The previous chunk, walking from the newest points to the oldest (points within a chunk
    /// still ascend), or `None` when every point was handed out. Mixing it with
    /// [`RangeRead::next_chunk`] hands out each point once: the two meet in the middle.
    pub fn next_chunk_back(&mut self) -> Option<Result<Chunk>> {
        self.next_view_back().map(|view| view.map(ChunkView::into_chunk))
    }

    /// [`RangeRead::next_chunk_back`], a cached block's points lent instead of copied.
    pub fn next_view_back(&mut self) -> Option<Result<ChunkView>> {
        if let Some(deferred) = self.deferred.take() {
            return Some(Ok(ChunkView::owned(deferred)));
        }
        loop {
            let Some(cluster) = self.clusters.back() else {
                return self.take_memory_from(Timestamp::MIN).map(|c| Ok(ChunkView::owned(c)));
            };
            let cluster_min = cluster.iter().map(|b| b.block.entry.min_timestamp).min().unwrap_or(Timestamp::MIN);
            let cluster_max = cluster.iter().map(|b| b.block.entry.max_timestamp).max().unwrap_or(Timestamp::MAX);
            if let Some(after) = self.take_memory_from(cluster_max.saturating_add(1)) {
                return Some(Ok(ChunkView::owned(after)));
            }
            let cluster = self.clusters.pop_back().expect("BUG: cluster vanished");
            let memory = self.take_memory_from(cluster_min);
            if let Some(view) = self.merge_cluster(&cluster, memory) {
                return Some(view);
            }
        }
    }

    /// The points of one cluster merged with the memtable points among them (`None` when there
    /// are none). A lone cached block without memtable points is lent as it is. When a block
    /// cannot be read, the memtable points wait for the next call.
    fn merge_cluster(&mut self, cluster: &[ListedBlock], memory: Option<Chunk>) -> Option<Result<ChunkView>> {
        if let (Some((cache, start)), [listed], None) = (&self.cache, cluster, &memory) {
            let block = match cache.get_or_read(listed, *start, || self.store.read_block(listed)) {
                Ok(block) => block,
                Err(e) => return Some(Err(e)),
            };
            let range = within(&block.timestamps, self.from, self.to);
            return (!range.is_empty()).then_some(Ok(ChunkView(View::Shared { block, range })));
        }
        match self.read_cluster(cluster) {
            Ok(mut sources) => {
                sources.extend(memory);
                merge_sorted_sources(sources).map(|chunk| Ok(ChunkView::owned(chunk)))
            }
            Err(e) => {
                self.deferred = memory;
                Some(Err(e))
            }
        }
    }

    /// The points of one cluster of blocks, one source per block, clipped to the read's range.
    fn read_cluster(&self, cluster: &[ListedBlock]) -> Result<Vec<Chunk>> {
        let mut sources = Vec::with_capacity(cluster.len() + 1);
        for listed in cluster {
            match &self.cache {
                Some((cache, start)) => {
                    let block = cache.get_or_read(listed, *start, || self.store.read_block(listed))?;
                    sources.push(clip_block(&block, self.from, self.to));
                }
                None => {
                    let block = self.store.read_block(listed)?;
                    sources.push(clip(Chunk { timestamps: block.timestamps, values: block.values }, self.from, self.to));
                }
            }
        }
        Ok(sources)
    }

    /// Memtable points before `bound` not yet emitted, from the front.
    fn take_memory_before(&mut self, bound: Timestamp) -> Option<Chunk> {
        let memory = self.memory.as_ref()?;
        let (start, limit) = (self.memory_position, self.memory_end);
        let end = start + memory.timestamps[start..limit].partition_point(|&t| t < bound);
        if start == end {
            return None;
        }
        self.memory_position = end;
        Some(Chunk { timestamps: memory.timestamps[start..end].to_vec(), values: memory.values.slice(start..end) })
    }

    /// Memtable points at or after `bound` not yet emitted, from the back.
    fn take_memory_from(&mut self, bound: Timestamp) -> Option<Chunk> {
        let memory = self.memory.as_ref()?;
        let (first, end) = (self.memory_position, self.memory_end);
        let start = first + memory.timestamps[first..end].partition_point(|&t| t < bound);
        if start == end {
            return None;
        }
        self.memory_end = start;
        Some(Chunk { timestamps: memory.timestamps[start..end].to_vec(), values: memory.values.slice(start..end) })
    }

    /// The points one by one.
    pub fn points(self) -> Points {
        Points { read: self, chunk: None, position: 0 }
    }

    /// Reads everything into one chunk; convenient for tests and small ranges.
    pub fn collect_all(mut self) -> Result<Option<Chunk>> {
        let mut all: Option<Chunk> = None;
        while let Some(chunk) = self.next_chunk() {
            let chunk = chunk?;
            match &mut all {
                None => all = Some(chunk),
                Some(all) => {
                    all.timestamps.extend_from_slice(&chunk.timestamps);
                    assert!(all.values.extend_from(&chunk.values), "BUG: value kind changed within a series");
                }
            }
        }
        Ok(all)
    }
}

/// Iterator over single points of a [`RangeRead`].
pub struct Points {
    read: RangeRead,
    chunk: Option<Chunk>,
    position: usize,
}

impl Iterator for Points {
    type Item = Result<Point>;
    fn next(&mut self) -> Option<Result<Point>> {
        loop {
            if let Some(chunk) = &self.chunk {
                if self.position < chunk.len() {
                    let point = Point { timestamp: chunk.timestamps[self.position], value: chunk.values.get(self.position) };
                    self.position += 1;
                    return Some(Ok(point));
                }
            }
            match self.read.next_chunk()? {
                Ok(chunk) => {
                    self.chunk = Some(chunk);
                    self.position = 0;
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Groups blocks (sorted by min timestamp) into clusters of overlapping time ranges, each
/// cluster sorted by ascending sequence so later sources win in the merge.
fn clusters(blocks: Vec<ListedBlock>) -> VecDeque<Vec<ListedBlock>> {
    let mut out: VecDeque<Vec<ListedBlock>> = VecDeque::new();
    let mut cluster_max = Timestamp::MIN;
    for listed in blocks {
        let entry = listed.block.entry;
        match out.back_mut() {
            Some(cluster) if entry.min_timestamp <= cluster_max => {
                cluster.push(listed);
                cluster_max = cluster_max.max(entry.max_timestamp);
            }
            _ => {
                out.push_back(vec![listed]);
                cluster_max = entry.max_timestamp;
            }
        }
    }
    for cluster in &mut out {
        cluster.sort_by_key(|b| b.block.entry.sequence);
    }
    out
}

fn clip(chunk: Chunk, from: Timestamp, to: Timestamp) -> Chunk {
    let start = chunk.timestamps.partition_point(|&t| t < from);
    let end = chunk.timestamps.partition_point(|&t| t < to);
    if start == 0 && end == chunk.len() {
        return chunk;
    }
    Chunk { timestamps: chunk.timestamps[start..end].to_vec(), values: chunk.values.slice(start..end) }
}

/// The points of a shared decoded block within `[from, to)`.
fn clip_block(block: &Block, from: Timestamp, to: Timestamp) -> Chunk {
    let range = within(&block.timestamps, from, to);
    Chunk { timestamps: block.timestamps[range.clone()].to_vec(), values: block.values.slice(range) }
}

/// The positions of the sorted `timestamps` in `[from, to)`. A range that takes in the whole
/// block (a read without bounds, or over many blocks) looks at its two ends only: a binary
/// search over a cached block's thousands of timestamps costs a cache miss a step, and a query
/// over hundreds of series pays it for every block.
fn within(timestamps: &[Timestamp], from: Timestamp, to: Timestamp) -> std::ops::Range<usize> {
    let start = match timestamps.first() {
        Some(&first) if first >= from => 0,
        _ => timestamps.partition_point(|&t| t < from),
    };
    let end = match timestamps.last() {
        Some(&last) if last < to => timestamps.len(),
        _ => timestamps.partition_point(|&t| t < to),
    };
    start..end.max(start)
}

/// Merges sorted, repeat-free sources given oldest first; a repeated timestamp keeps the value
/// of the latest source. `None` when all are empty.
fn merge_sorted_sources(mut sources: Vec<Chunk>) -> Option<Chunk> {
    sources.retain(|s| !s.is_empty());
    if sources.len() <= 1 {
        return sources.pop();
    }
    let mut timestamps = Vec::with_capacity(sources.iter().map(Chunk::len).sum());
    let mut values = ValueColumn::new(sources[0].values.kind());
    for source in &sources {
        timestamps.extend_from_slice(&source.timestamps);
        assert!(values.extend_from(&source.values), "BUG: value kind changed within a series");
    }
    let resolved = last_write_wins(&timestamps, (0..timestamps.len()).collect());
    Some(Chunk { timestamps: resolved.iter().map(|&i| timestamps[i]).collect(), values: values.gather(&resolved) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(points: &[(i64, i64)]) -> Chunk {
        Chunk { timestamps: points.iter().map(|p| p.0).collect(), values: ValueColumn::I64(points.iter().map(|p| p.1).collect()) }
    }

    #[test]
    fn later_sources_win_on_repeated_timestamps() {
        let merged = merge_sorted_sources(vec![chunk(&[(1, 10), (3, 30)]), chunk(&[(2, 200), (3, 300)])]).expect("points");
        assert_eq!(merged, chunk(&[(1, 10), (2, 200), (3, 300)]));
        assert_eq!(merge_sorted_sources(vec![chunk(&[]), chunk(&[])]), None);
    }

    #[test]
    fn clipping_keeps_the_half_open_range() {
        assert_eq!(clip(chunk(&[(1, 1), (2, 2), (3, 3)]), 2, 3), chunk(&[(2, 2)]));
    }

    proptest::proptest! {
        #[test]
        fn within_is_the_binary_search(mut timestamps in proptest::collection::vec(-20i64..20, 0..12), from in -25i64..25, length in 0i64..50) {
            timestamps.sort_unstable();
            timestamps.dedup();
            let to = from + length;
            let start = timestamps.partition_point(|&t| t < from);
            let end = timestamps.partition_point(|&t| t < to);
            proptest::prop_assert_eq!(within(&timestamps, from, to), start..end);
        }
    }
}
