//! Decoded blocks kept for the reads that come again: a dashboard refreshes the same hours, and a
//! `LIMIT 1` lookup decodes a whole block for one point, so the second read of a block costs a
//! copy instead of a decompression. Bounded by bytes (`EngineOptions::block_cache_bytes`); the
//! least recently read go first. A block is named by its segment, offset, series, flush
//! sequence and point count: a segment's bytes never change once written and a segment id is
//! not given twice while the engine runs, so a name always means the same points (dead points
//! are cut by the reader, after the cache). Blocks larger than an eighth of the bound (payload
//! blocks) are not kept.

use crate::block::Block;
use crate::error::Result;
use crate::model::SeriesId;
use crate::store::ListedBlock;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

type BlockName = (u64, u64, SeriesId, u64, u32);

pub(crate) struct BlockCache {
    limit: usize,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    /// Block, its size in bytes, and when it was last read.
    blocks: HashMap<BlockName, (Arc<Block>, usize, u64)>,
    bytes: usize,
    clock: u64,
}

fn size_of(block: &Block) -> usize {
    block.timestamps.len() * 8 + block.values.heap_bytes() + 128
}

impl BlockCache {
    pub(crate) fn new(limit: usize) -> BlockCache {
        BlockCache { limit, state: Mutex::new(CacheState::default()) }
    }

    /// The decoded block, from the cache or read (and kept) now.
    pub(crate) fn get_or_read(&self, listed: &ListedBlock, read: impl FnOnce() -> Result<Block>) -> Result<Arc<Block>> {
        if self.limit == 0 {
            return read().map(Arc::new);
        }
        let entry = &listed.block.entry;
        let name = (listed.block.segment, entry.offset, entry.series, entry.sequence, entry.count);
        {
            let mut state = self.state.lock();
            state.clock += 1;
            let now = state.clock;
            if let Some((block, _, used)) = state.blocks.get_mut(&name) {
                *used = now;
                return Ok(block.clone());
            }
        }
        // Decoded outside the lock: two readers of one block may both decode it.
        let block = Arc::new(read()?);
        let size = size_of(&block);
        if size <= self.limit / 8 {
            let mut state = self.state.lock();
            let now = state.clock;
            if state.blocks.insert(name, (block.clone(), size, now)).is_none() {
                state.bytes += size;
            }
            if state.bytes > self.limit {
                evict(&mut state, self.limit / 4 * 3);
            }
            debug_assert!(state.bytes <= self.limit, "BUG: the block cache holds {} bytes over its {}", state.bytes, self.limit);
        }
        Ok(block)
    }

    /// Bytes held, for tests and stats.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.state.lock().bytes
    }
}

/// Drops the least recently read blocks until at most `target` bytes remain.
fn evict(state: &mut CacheState, target: usize) {
    let mut by_age: Vec<(u64, BlockName, usize)> = state.blocks.iter().map(|(name, (_, size, used))| (*used, *name, *size)).collect();
    by_age.sort_unstable_by_key(|(used, _, _)| *used);
    for (_, name, size) in by_age {
        if state.bytes <= target {
            break;
        }
        state.blocks.remove(&name);
        state.bytes -= size;
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
}
