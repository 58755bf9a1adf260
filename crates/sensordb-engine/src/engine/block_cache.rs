//! Decoded blocks kept for the reads that come again: a dashboard refreshes the same hours, and a
//! `LIMIT 1` lookup decodes a whole block for one point, so the second read of a block costs a
//! copy instead of a decompression. Bounded by bytes (`EngineOptions::block_cache_bytes`); the
//! least recently read go first. A block is named by its segment, offset, series, flush
//! sequence and point count: a segment's bytes never change once written and a segment id is
//! not given twice while the engine runs, so a name always means the same points (dead points
//! are cut by the reader, after the cache). Blocks larger than an eighth of the bound (payload
//! blocks) are not kept.
//!
//! Scans larger than the cache: a read never pushes out a block read since its query began
//! ([`QueryStart`]); a block it cannot make room for is decoded and not kept. Plain LRU would
//! evict each block of a repeated scan just before the scan came back to it (a TSBS query over a
//! day of 100 trucks reads 41 MB of decoded blocks through the 32 MiB cache: every read missed,
//! and the cache cost more than it saved); this way the part that fits stays and is hit.
//!
//! A hit only notes when the block was read: the recency order is put right when room is made
//! (an entry whose block was read since is moved to its place then). Moving it on every hit
//! cost a removal and an insertion in the order for each read, and a query over 140 trucks
//! right after a load reads thousands of short blocks.

use crate::block::Block;
use crate::error::Result;
use crate::model::SeriesId;
use crate::store::ListedBlock;
use foldhash::fast::RandomState;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

type BlockName = (u64, u64, SeriesId, u64, u32);

/// When a query began, on the block cache's clock: the blocks the query reads never push out
/// blocks read since then (see the module doc). Taken once per query by
/// [`crate::Engine::query_start`] and given to each of its reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryStart(pub(crate) u64);

pub(crate) struct BlockCache {
    limit: usize,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    blocks: HashMap<BlockName, Cached, RandomState>,
    /// Each kept block once, by when it was kept or last put in order (each read takes a new
    /// tick), oldest first. A block read since has a later `Cached::used` than its key here.
    by_use: BTreeMap<u64, BlockName>,
    bytes: usize,
    clock: u64,
    /// Reads answered from the cache.
    hits: u64,
}

struct Cached {
    block: Arc<Block>,
    size: usize,
    used: u64,
}

impl CacheState {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

fn size_of(block: &Block) -> usize {
    block.timestamps.len() * 8 + block.values.heap_bytes() + 128
}

impl BlockCache {
    pub(crate) fn new(limit: usize) -> BlockCache {
        BlockCache { limit, state: Mutex::new(CacheState::default()) }
    }

    /// Now, on the cache's clock: reads given this start keep what they read from each other.
    pub(crate) fn query_start(&self) -> QueryStart {
        QueryStart(self.state.lock().tick())
    }

    /// The decoded block, from the cache or read now, and kept if there is room for it without
    /// pushing out a block read since `start`.
    pub(crate) fn get_or_read(&self, listed: &ListedBlock, start: QueryStart, read: impl FnOnce() -> Result<Block>) -> Result<Arc<Block>> {
        if self.limit == 0 {
            return read().map(Arc::new);
        }
        let entry = &listed.block.entry;
        let name = (listed.block.segment, entry.offset, entry.series, entry.sequence, entry.count);
        {
            let mut state = self.state.lock();
            let now = state.tick();
            if let Some(cached) = state.blocks.get_mut(&name) {
                cached.used = now;
                let block = cached.block.clone();
                state.hits += 1;
                return Ok(block);
            }
        }
        // Decoded outside the lock: two readers of one block may both decode it.
        let block = Arc::new(read()?);
        let size = size_of(&block);
        if size <= self.limit / 8 {
            let mut state = self.state.lock();
            if !state.blocks.contains_key(&name) {
                if state.bytes + size > self.limit {
                    // Room for a quarter of the bound at once: the search for the oldest is not
                    // repeated for every block of a scan.
                    make_room(&mut state, (self.limit / 4 * 3).saturating_sub(size), start);
                }
                if state.bytes + size <= self.limit {
                    let now = state.tick();
                    state.blocks.insert(name, Cached { block: block.clone(), size, used: now });
                    state.by_use.insert(now, name);
                    state.bytes += size;
                }
            }
            debug_assert!(state.bytes <= self.limit, "BUG: the block cache holds {} bytes over its {}", state.bytes, self.limit);
            debug_assert_eq!(state.blocks.len(), state.by_use.len(), "BUG: the recency order lost a block");
        }
        Ok(block)
    }

    /// Bytes held, for tests and stats.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.state.lock().bytes
    }

    /// Reads answered from the cache so far.
    #[cfg(test)]
    pub(crate) fn hits(&self) -> u64 {
        self.state.lock().hits
    }
}

/// Drops the least recently read blocks until at most `target` bytes remain, but none read
/// since `start`. An entry of the order whose block was read after its key goes to its place
/// (its key then is its last read, so it is moved once).
fn make_room(state: &mut CacheState, target: usize, start: QueryStart) {
    while state.bytes > target {
        let Some((&key, &name)) = state.by_use.first_key_value() else { break };
        // Keys are at most the blocks' last reads: from here on every block was read since.
        if key >= start.0 {
            break;
        }
        state.by_use.remove(&key);
        let used = state.blocks.get(&name).map(|cached| cached.used);
        match used {
            Some(used) if used > key => {
                state.by_use.insert(used, name);
            }
            _ => {
                if let Some(cached) = state.blocks.remove(&name) {
                    state.bytes -= cached.size;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::batch::WriteBatch;
    use crate::engine::{Engine, EngineOptions};
    use crate::model::{SeriesKey, Value, ValueKind};
    use crate::wal::Durability;

    /// Four series of 2,000 points in blocks of 500: 16 blocks of about 8 KiB decoded.
    fn engine(dir: &std::path::Path, block_cache_bytes: usize) -> (Engine, Vec<crate::model::SeriesId>) {
        let options = EngineOptions { durability: Durability::None, block_points_max: 500, block_cache_bytes, ..EngineOptions::default() };
        let engine = Engine::open(dir, options).expect("open");
        let ids: Vec<_> = (0..4)
            .map(|s| engine.series_id(&SeriesKey::new("m", [("s", format!("{s}"))], "v").expect("key"), ValueKind::F64).expect("id"))
            .collect();
        let mut batch = WriteBatch::new();
        for t in 0..2_000 {
            for (s, &id) in ids.iter().enumerate() {
                batch.push(id, t, Value::F64((t * 10 + s as i64) as f64)).expect("push");
            }
        }
        engine.write(&batch).expect("write");
        engine.flush().expect("flush");
        (engine, ids)
    }

    fn read_all(engine: &Engine, ids: &[crate::model::SeriesId]) -> Vec<Vec<(i64, Value)>> {
        ids.iter()
            .map(|&id| engine.read(id, 100, 1_900).points().map(|p| p.map(|p| (p.timestamp, p.value)).expect("point")).collect())
            .collect()
    }

    #[test]
    fn cached_reads_answer_as_uncached_ones_and_the_cache_stays_within_its_bound() {
        let (with_cache, without_cache) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
        let limit = 64 << 10;
        let (cached, ids) = engine(with_cache.path(), limit);
        let (plain, plain_ids) = engine(without_cache.path(), 0);
        let expected = read_all(&plain, &plain_ids);
        assert_eq!(expected[0].len(), 1_800);
        // Twice: once decoding, once from the cache.
        assert_eq!(read_all(&cached, &ids), expected);
        assert!(cached.inner.block_cache.bytes() > 0, "blocks kept");
        assert_eq!(read_all(&cached, &ids), expected);
        assert!(cached.inner.block_cache.bytes() <= limit, "{} bytes over {limit}", cached.inner.block_cache.bytes());
        assert_eq!(plain.inner.block_cache.bytes(), 0, "a zero bound keeps nothing");
    }

    /// The points of every view of a read, oldest or newest first, in time order.
    fn views(engine: &Engine, id: crate::model::SeriesId, from: i64, to: i64, backwards: bool) -> Vec<(i64, Value)> {
        let mut read = engine.read(id, from, to);
        let mut runs = Vec::new();
        loop {
            let view = if backwards { read.next_view_back() } else { read.next_view() };
            let Some(view) = view else { break };
            let view = view.expect("view");
            let (values, window) = view.values();
            assert_eq!(view.timestamps().len(), window.len());
            runs.push(view.timestamps().iter().zip(window).map(|(&t, i)| (t, values.get(i))).collect::<Vec<_>>());
        }
        if backwards {
            runs.reverse();
        }
        runs.concat()
    }

    #[test]
    fn lent_views_of_cached_blocks_hold_the_points_of_copied_chunks() {
        let (with_cache, without_cache) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
        let (cached, ids) = engine(with_cache.path(), 1 << 20);
        let (plain, plain_ids) = engine(without_cache.path(), 0);
        // Ranges that cut blocks at both ends, fall inside one, and cover all.
        for (from, to) in [(100, 1_900), (0, 2_000), (510, 520), (499, 501), (1_999, 5_000), (-10, 0)] {
            for (&id, &plain_id) in ids.iter().zip(&plain_ids) {
                let expected: Vec<(i64, Value)> =
                    plain.read(plain_id, from, to).points().map(|p| p.map(|p| (p.timestamp, p.value)).expect("point")).collect();
                assert_eq!(expected.len(), (to.min(2_000) - from.max(0)).max(0) as usize);
                for round in 0..2 {
                    assert_eq!(views(&cached, id, from, to, false), expected, "[{from}, {to}) forwards, round {round}");
                    assert_eq!(views(&cached, id, from, to, true), expected, "[{from}, {to}) backwards, round {round}");
                }
            }
        }
    }

    /// Every block of `ids` over `[100, 1900)`, as one query; the cache's hits it took.
    fn scan(engine: &Engine, ids: &[crate::model::SeriesId]) -> u64 {
        let hits = engine.inner.block_cache.hits();
        let start = engine.query_start();
        for &id in ids {
            let points = engine.read(id, 100, 1_900).in_query(start).points().count();
            assert_eq!(points, 1_800);
        }
        engine.inner.block_cache.hits() - hits
    }

    #[test]
    fn a_scan_larger_than_the_cache_keeps_what_fits_and_hits_it_again() {
        let dir = tempfile::tempdir().expect("dir");
        // 16 blocks of 8,128 bytes each; the cache holds 12 of them.
        let limit = 100 << 10;
        let (engine, ids) = engine(dir.path(), limit);
        assert_eq!(scan(&engine, &ids), 0, "the first scan finds nothing");
        for round in 0..3 {
            let hits = scan(&engine, &ids);
            // Least-recently-used alone evicted each block just before the scan came back to it.
            assert!(hits >= 10, "round {round}: {hits} of 16 blocks from the cache");
        }
        assert!(engine.inner.block_cache.bytes() <= limit);
    }

    #[test]
    fn blocks_read_again_outlast_blocks_read_once() {
        let dir = tempfile::tempdir().expect("dir");
        // 8 blocks fill the cache: series 0 and 1, series 0 read first.
        let (engine, ids) = engine(dir.path(), 64 << 10);
        scan(&engine, &ids[..2]);
        // Series 0 read again: its blocks are now the most recently read.
        assert_eq!(scan(&engine, &ids[..1]), 4);
        // Series 2 needs room for 4 blocks: series 1's go first, then the oldest of series 0.
        assert_eq!(scan(&engine, &ids[2..3]), 0);
        assert!(scan(&engine, &ids[..1]) >= 2, "series 0, read again, lost its blocks before series 1");
    }

    #[test]
    fn a_new_working_set_replaces_the_old_one() {
        let dir = tempfile::tempdir().expect("dir");
        // Two series at a time: 8 blocks, as many as the cache holds.
        let (engine, ids) = engine(dir.path(), 64 << 10);
        let (first, second) = ids.split_at(2);
        scan(&engine, first);
        assert_eq!(scan(&engine, first), 8);
        // A later query pushes out what the earlier ones read.
        assert_eq!(scan(&engine, second), 0);
        let hits = scan(&engine, second);
        assert!(hits >= 6, "{hits} of 8 blocks of the second working set from the cache");
    }
}
