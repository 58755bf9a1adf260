//! The ends of each series, answered without reading history: its newest point (dashboards ask
//! for the current value of every sensor, and a store that kept years of data must not scan
//! them for it) and a bound of its oldest point's time (a query that wants the oldest rows of a
//! measurement reads only the series that can hold them).
//!
//! The newest point is the newest of three places: the active memtable, the frozen one, and the
//! sealed blocks. For the blocks a cache keeps each series' newest sealed point:
//! - filled lazily: the first ask lists the series' blocks (index only), reads the one ending
//!   last (the highest flush sequence among equals) and takes its last point;
//! - kept current by every flush, which knows the newest point of each series it seals (an entry
//!   is replaced only by a point at the same or a later time: late data never hides newer data);
//! - dropped for series written directly to blocks and for deleted series.
//!
//! The oldest sealed time is cached the same way: filled from the store's index (no block is
//! read), lowered by a flush that seals older points, dropped with the newest point. Nothing
//! else adds sealed points; compaction and reclaim only remove them, so a cached time stays a
//! time no later than the oldest point (a bound, not the exact time), and the caller raises
//! it to the series' cutoff.
//!
//! A lazy fill races a flush: the fill may have listed blocks before the flush published its
//! group, and would then insert an older point after the flush updated (or did not find) the
//! entry. The cache therefore counts flushes; a fill inserts only if no flush finished since it
//! began listing. Retention is applied when answering: a newest point older than the series'
//! cutoff means every point is dead.

use crate::batch::IdHasher;
use crate::error::Result;
use crate::memtable::Memtable;
use crate::model::{SeriesId, Timestamp, Value};
use crate::store::BlockStore;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A series' newest point.
pub type LastPoint = (Timestamp, Value);

#[derive(Default)]
pub(super) struct SeriesEnds {
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    sealed: HashMap<SeriesId, LastPoint, BuildHasherDefault<IdHasher>>,
    /// The oldest sealed point's time of the series asked, or a time before it.
    oldest: HashMap<SeriesId, Timestamp, BuildHasherDefault<IdHasher>>,
    /// Flushes (and direct writes) finished: a fill that began before one must not insert.
    epoch: u64,
}

impl SeriesEnds {
    /// Records the newest points and the oldest times of a flushed memtable, once its group is
    /// in the store: for the series the cache holds, walking the cache or the memtable,
    /// whichever is smaller (a fleet's flush holds a million series; nobody may have asked for
    /// one).
    pub(super) fn after_flush(&self, flushed: &Memtable) {
        let mut state = self.state.lock();
        state.epoch += 1;
        let state = &mut *state;
        let mut walk = FlushedSeries { memtable: flushed, count: flushed.series_count(), ids: None };
        walk.update(&mut state.sealed, |id, entry| {
            // Late data never hides newer data.
            if let Some(point) = flushed.last_point(id).filter(|point| point.0 >= entry.0) {
                *entry = point;
            }
        });
        walk.update(&mut state.oldest, |id, entry| {
            if let Some(time) = flushed.oldest_timestamp(id) {
                *entry = time.min(*entry);
            }
        });
    }

    /// Forgets series whose sealed data changed other than by a flush (direct writes, deletes).
    pub(super) fn forget(&self, ids: impl IntoIterator<Item = SeriesId>) {
        let mut state = self.state.lock();
        state.epoch += 1;
        for id in ids {
            state.sealed.remove(&id);
            state.oldest.remove(&id);
        }
    }

    /// The newest sealed point of `series`, from the cache or from its newest block.
    fn sealed(&self, store: &dyn BlockStore, series: SeriesId) -> Result<Option<LastPoint>> {
        let epoch = {
            let state = self.state.lock();
            if let Some(point) = state.sealed.get(&series) {
                return Ok(Some(point.clone()));
            }
            state.epoch
        };
        let blocks = store.blocks(series, Timestamp::MIN, Timestamp::MAX);
        let Some(newest) = blocks.iter().max_by_key(|b| (b.block.entry.max_timestamp, b.block.entry.sequence)) else {
            return Ok(None);
        };
        let block = store.read_block(newest)?;
        let Some(last) = block.timestamps.len().checked_sub(1) else { return Ok(None) };
        let point = (block.timestamps[last], block.values.get(last));
        let mut state = self.state.lock();
        if state.epoch == epoch {
            state.sealed.insert(series, point.clone());
        }
        Ok(Some(point))
    }

    /// The newest point of each of `series` that is not older than its cutoff: the newest of
    /// the memtables (`memtables`, read before this call) and the sealed blocks. The cache is
    /// locked once for the batch (a dashboard asks for 10,000 series at once); series not in
    /// it are filled one by one.
    pub(super) fn newest(
        &self,
        store: &dyn BlockStore,
        memtables: &[&Memtable],
        series: &[SeriesId],
        cutoff: impl Fn(SeriesId) -> Timestamp,
    ) -> Result<Vec<Option<LastPoint>>> {
        let cached: Vec<Option<LastPoint>> = {
            let state = self.state.lock();
            series.iter().map(|id| state.sealed.get(id).cloned()).collect()
        };
        series
            .iter()
            .zip(cached)
            .map(|(&id, cached)| {
                // Memtables rank above blocks on a repeated timestamp, the active one above the
                // frozen.
                let mut best: Option<LastPoint> = None;
                for memtable in memtables {
                    if let Some(point) = memtable.last_point(id) {
                        if best.as_ref().is_none_or(|b| point.0 >= b.0) {
                            best = Some(point);
                        }
                    }
                }
                let sealed = match cached {
                    Some(point) => Some(point),
                    None => self.sealed(store, id)?,
                };
                if let Some(sealed) = sealed {
                    if best.as_ref().is_none_or(|b| sealed.0 > b.0) {
                        best = Some(sealed);
                    }
                }
                Ok(best.filter(|p| p.0 >= cutoff(id)))
            })
            .collect()
    }

    /// For each of `series`, a time no later than its oldest point that is not older than its
    /// cutoff (`None`: no points): the oldest of the memtables (`memtables`, read before this
    /// call) and of the sealed blocks, raised to the cutoff. Series not in the cache are filled
    /// from the store's index ([`BlockStore::oldest_timestamp`]).
    pub(super) fn oldest(
        &self,
        store: &dyn BlockStore,
        memtables: &[&Memtable],
        series: &[SeriesId],
        cutoff: impl Fn(SeriesId) -> Timestamp,
    ) -> Vec<Option<Timestamp>> {
        let (cached, epoch): (Vec<Option<Timestamp>>, u64) = {
            let state = self.state.lock();
            (series.iter().map(|id| state.oldest.get(id).copied()).collect(), state.epoch)
        };
        let mut filled = Vec::new();
        let bounds = series
            .iter()
            .zip(cached)
            .map(|(&id, cached)| {
                let buffered = memtables.iter().filter_map(|memtable| memtable.oldest_timestamp(id)).min();
                let sealed = cached.or_else(|| {
                    let sealed = store.oldest_timestamp(id);
                    filled.extend(sealed.map(|time| (id, time)));
                    sealed
                });
                Some(buffered.into_iter().chain(sealed).min()?.max(cutoff(id)))
            })
            .collect();
        if !filled.is_empty() {
            let mut state = self.state.lock();
            // A flush that finished since the fill began may have sealed older points.
            if state.epoch == epoch {
                state.oldest.extend(filled);
            }
        }
        bounds
    }
}

/// The series of a flushed memtable, for updating caches of a few of them or of all.
struct FlushedSeries<'m> {
    memtable: &'m Memtable,
    count: usize,
    /// Listed at the first cache larger than the flush, once.
    ids: Option<Vec<SeriesId>>,
}

impl FlushedSeries<'_> {
    /// Calls `update` on each entry of `cached` whose series the flush holds, walking the cache
    /// or the flush's series, whichever is smaller.
    fn update<V>(&mut self, cached: &mut HashMap<SeriesId, V, BuildHasherDefault<IdHasher>>, mut update: impl FnMut(SeriesId, &mut V)) {
        if cached.len() <= self.count {
            for (&id, entry) in cached.iter_mut() {
                update(id, entry);
            }
        } else {
            for id in self.ids.get_or_insert_with(|| self.memtable.series_ids()) {
                if let Some(entry) = cached.get_mut(id) {
                    update(*id, entry);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::store::test_groups::group;
    use crate::store::MemoryStore;

    /// A flushed memtable of `points` (series, timestamp), each valued its timestamp, also put
    /// in `store` as the flush would.
    fn flush(store: &MemoryStore, points: &[(u32, i64)]) -> Memtable {
        let memtable = Memtable::new(2);
        let mut batch = WriteBatch::new();
        for &(series, t) in points {
            batch.push(SeriesId(series), t, Value::I64(t)).expect("push");
            store.put_group(group(series, t, 1), 0).expect("put");
        }
        batch.entries().iter().for_each(|e| memtable.insert(e));
        memtable
    }

    fn oldest(ends: &SeriesEnds, store: &MemoryStore, memtables: &[&Memtable], series: &[u32]) -> Vec<Option<i64>> {
        let ids: Vec<SeriesId> = series.iter().map(|&s| SeriesId(s)).collect();
        ends.oldest(store, memtables, &ids, |_| Timestamp::MIN)
    }

    /// The oldest sealed times are filled from the store, lowered by a flush of older points
    /// (late data), kept by a flush of newer ones, and dropped with a series; the memtables'
    /// points count beside them, and the cutoff raises the bound.
    #[test]
    fn the_oldest_times_follow_flushes_of_older_points() {
        let store = MemoryStore::new(1);
        let ends = SeriesEnds::default();
        flush(&store, &[(1, 50), (2, 50)]);
        assert_eq!(oldest(&ends, &store, &[], &[1, 2, 3]), [Some(50), Some(50), None], "filled from the store");
        assert_eq!(ends.state.lock().oldest.len(), 2, "only series with blocks are kept");
        // Late data for series 1, newer data for series 2.
        ends.after_flush(&flush(&store, &[(1, 20), (2, 80)]));
        let cached = |s: u32| ends.state.lock().oldest.get(&SeriesId(s)).copied();
        assert_eq!([cached(1), cached(2)], [Some(20), Some(50)]);
        // Buffered points older than the sealed ones.
        let buffered = flush(&MemoryStore::new(1), &[(2, 10)]);
        assert_eq!(oldest(&ends, &store, &[&buffered], &[1, 2]), [Some(20), Some(10)]);
        let raised = ends.oldest(&store, &[], &[SeriesId(1)], |_| 30);
        assert_eq!(raised, [Some(30)], "no bound below the cutoff");
        ends.forget([SeriesId(1)]);
        assert_eq!(cached(1), None);
    }

    fn newest(last: &SeriesEnds, store: &MemoryStore, series: &[u32]) -> Vec<Option<i64>> {
        let ids: Vec<SeriesId> = series.iter().map(|&s| SeriesId(s)).collect();
        last.newest(store, &[], &ids, |_| Timestamp::MIN).expect("newest").into_iter().map(|p| p.map(|(t, _)| t)).collect()
    }

    /// A flush updates the cached points of its series whichever is larger, the cache or the
    /// flush, and leaves the others as they were.
    #[test]
    fn a_flush_updates_the_cached_newest_points_of_its_series_only() {
        let store = MemoryStore::new(1);
        let last = SeriesEnds::default();
        flush(&store, &[(1, 10), (2, 10), (3, 10)]);
        assert_eq!(newest(&last, &store, &[1, 2, 3]), [Some(10); 3], "filled from the blocks");
        // One series flushed, three cached: the flush is walked.
        last.after_flush(&flush(&store, &[(2, 20)]));
        assert_eq!(last.state.lock().sealed.get(&SeriesId(2)).map(|p| p.0), Some(20));
        // Five flushed, three cached: the cache is walked; series 4 and 5 are not cached.
        last.after_flush(&flush(&store, &[(1, 30), (3, 5), (4, 30), (5, 30), (6, 30)]));
        let cached = |s: u32| last.state.lock().sealed.get(&SeriesId(s)).map(|p| p.0);
        assert_eq!([cached(1), cached(2), cached(3), cached(4)], [Some(30), Some(20), Some(10), None], "3 keeps its newer point");
        assert_eq!(newest(&last, &store, &[1, 2, 3, 4]), [Some(30), Some(20), Some(10), Some(30)]);
    }
}
