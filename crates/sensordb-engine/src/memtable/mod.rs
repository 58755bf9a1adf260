//! The memtable: per-series in-memory buffers of points not yet in sealed blocks.
//!
//! Series are spread over independently locked shards (by series id), so writers that own
//! different series rarely meet on a lock, and there is no global lock on the write path. Each
//! series keeps its points in arrival order in two columns (timestamps, values) and remembers
//! whether they are still strictly increasing; sorting and resolving repeated timestamps (the
//! last write wins) happens only when a reader or the flush needs it.
//!
//! The memory bound counts what a series costs besides its points ([`SERIES_OVERHEAD_BYTES`]):
//! a fleet of a million sensors sending one point each fills a memtable with a million buffers
//! whose points are a tenth of their cost, and a bound on points alone let it grow tenfold.
//!
//! The engine holds one active memtable that takes writes and at most one frozen memtable being
//! flushed (double buffering), so flushing never stops ingestion.

use crate::batch::{prefetch, prefetch_address, values_range, IdHasher, SeriesPoints};
use crate::model::{last_write_wins, SeriesId, Timestamp, ValueColumn, ValueKind};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Entries ahead whose points [`Memtable::insert_all`] prefetches.
const PREFETCH_AHEAD: usize = 4;

/// Fixed bytes counted per point besides its value: the timestamp.
const TIMESTAMP_BYTES: usize = 8;

/// Bytes counted for each series a memtable holds, besides its points: its entry in the shard's
/// hash table (with the table's control byte) and its buffer in the shard's list, each with the
/// free share of a table or list between growths, and the first allocation of each of its two
/// columns (room for four points each: what `Vec` reserves first for 8-byte items).
pub const SERIES_OVERHEAD_BYTES: usize =
    (std::mem::size_of::<(SeriesId, u32)>() + 1 + std::mem::size_of::<SeriesBuffer>()) * 3 / 2 + 2 * 4 * 8;

/// The points of one series, in arrival order.
#[derive(Debug)]
struct SeriesBuffer {
    timestamps: Vec<Timestamp>,
    values: ValueColumn,
    /// True while `timestamps` is strictly increasing: then it is already in final form.
    strictly_increasing: bool,
}

impl SeriesBuffer {
    /// Asks the CPU to load the ends of both columns, where the next points go.
    #[inline]
    fn prefetch_ends(&self) {
        prefetch_address(self.timestamps.as_ptr_range().end.wrapping_sub(1));
        prefetch_address(values_range(&self.values).end.wrapping_sub(1));
    }

    fn append(&mut self, timestamps: &[Timestamp], values: &ValueColumn) -> bool {
        if !self.values.extend_from(values) {
            return false;
        }
        if self.strictly_increasing {
            let continues = match (self.timestamps.last(), timestamps.first()) {
                (Some(last), Some(first)) => last < first,
                _ => true,
            };
            self.strictly_increasing = continues && timestamps.windows(2).all(|w| w[0] < w[1]);
        }
        self.timestamps.extend_from_slice(timestamps);
        true
    }

    /// Puts the buffer in final form (sorted, one point per timestamp, the last written) when
    /// points arrived out of order. Done at the first read after such a write, once: a
    /// dashboard re-reads the same buffered series on every refresh, and sorting 4,000 points
    /// per read cost a point lookup a fifth of its time. Later appends keep the order-of-arrival
    /// rule: they come after the settled points, so the last written still wins.
    fn settle(&mut self) {
        if self.strictly_increasing {
            return;
        }
        let indices = last_write_wins(&self.timestamps, (0..self.timestamps.len()).collect());
        self.timestamps = indices.iter().map(|&i| self.timestamps[i]).collect();
        self.values = self.values.gather(&indices);
        self.strictly_increasing = true;
        debug_assert!(self.timestamps.windows(2).all(|w| w[0] < w[1]));
    }

    /// The points in `[from, to)` (`to` of `None`: no upper bound), or with `edge` (newest,
    /// limit) only the oldest or newest `limit` of them. Settles the buffer first, so the range
    /// is one slice of each column, copied whole (a flush copies every buffered point this way;
    /// gathering them by index took half of its time at scale 1000 of TSBS IoT).
    fn resolved(&mut self, from: Timestamp, to: Option<Timestamp>, edge: Option<(bool, usize)>) -> (Vec<Timestamp>, ValueColumn) {
        self.settle();
        let mut start = self.timestamps.partition_point(|&t| t < from);
        let mut end = match to {
            Some(to) => self.timestamps.partition_point(|&t| t < to).max(start),
            None => self.timestamps.len(),
        };
        match edge {
            Some((true, limit)) => start = start.max(end.saturating_sub(limit)),
            Some((false, limit)) => end = end.min(start.saturating_add(limit)),
            None => {}
        }
        (self.timestamps[start..end].to_vec(), self.values.slice(start..end))
    }
}

/// The series of one shard: buffers in a list, found by a hash table of their positions.
///
/// Positions rather than the buffers in the table, so that [`Memtable::insert_all`] can look up
/// all of a batch's series in a shard before appending to any: the lookups are independent, so
/// their cache misses overlap, where a lookup and an append per series made two misses in a
/// row (a table group and the buffer's last stamp: 70% of the insert's samples at scale 1000
/// of TSBS IoT, with 2.5 points a series and body). A position stays valid while the table
/// grows; buffers are never removed but with the whole memtable.
#[derive(Default)]
struct Shard {
    positions: HashMap<SeriesId, u32, BuildHasherDefault<IdHasher>>,
    buffers: Vec<(SeriesId, SeriesBuffer)>,
}

impl Shard {
    fn get(&self, series: &SeriesId) -> Option<&SeriesBuffer> {
        self.positions.get(series).map(|&p| &self.buffers[p as usize].1)
    }

    fn get_mut(&mut self, series: &SeriesId) -> Option<&mut SeriesBuffer> {
        self.positions.get(series).map(|&p| &mut self.buffers[p as usize].1)
    }

    fn len(&self) -> usize {
        self.buffers.len()
    }

    /// The position of the buffer of `series`, made (empty, of `kind`) when it has none; and
    /// whether it was made.
    fn position_or_new(&mut self, series: SeriesId, kind: ValueKind) -> (usize, bool) {
        if let Some(&p) = self.positions.get(&series) {
            return (p as usize, false);
        }
        let position = self.buffers.len();
        let stored = u32::try_from(position).expect("fewer than 2^32 series in a memtable shard");
        self.buffers.push((series, SeriesBuffer { timestamps: Vec::new(), values: ValueColumn::new(kind), strictly_increasing: true }));
        self.positions.insert(series, stored);
        (position, true)
    }

    /// Appends the (non-empty) points of one series to its buffer at `position`; returns the
    /// bytes it added to the memtable (the points, and [`SERIES_OVERHEAD_BYTES`] for a new
    /// series). Panics (a caller bug) if the series holds another kind.
    fn append_at(&mut self, position: usize, new: bool, points: &SeriesPoints) -> usize {
        let (series, buffer) = &mut self.buffers[position];
        debug_assert_eq!(*series, points.series);
        assert!(buffer.append(&points.timestamps, &points.values), "BUG: value kind changed within a series");
        points.timestamps.len() * TIMESTAMP_BYTES + points.values.heap_bytes() + if new { SERIES_OVERHEAD_BYTES } else { 0 }
    }
}

/// Appends the (non-empty) points of one series to its buffer in `shard`; returns the bytes
/// it added to the memtable (see [`Shard::append_at`]).
fn append_to(shard: &mut Shard, points: &SeriesPoints) -> usize {
    let (position, new) = shard.position_or_new(points.series, points.values.kind());
    shard.append_at(position, new, points)
}

/// A set of per-series buffers.
pub struct Memtable {
    shards: Box<[Mutex<Shard>]>,
    bytes: AtomicUsize,
    points: AtomicUsize,
    /// The shard [`Memtable::insert_all`] starts at, advanced by each call.
    next_start: AtomicUsize,
}

/// Points of one series, sorted by timestamp without repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSeries {
    pub series: SeriesId,
    pub timestamps: Vec<Timestamp>,
    pub values: ValueColumn,
}

impl Memtable {
    /// A memtable with `shard_count` shards (rounded up to a power of two).
    pub fn new(shard_count: usize) -> Self {
        let shard_count = shard_count.max(1).next_power_of_two();
        Memtable {
            shards: (0..shard_count).map(|_| Mutex::new(Shard::default())).collect(),
            bytes: AtomicUsize::new(0),
            points: AtomicUsize::new(0),
            next_start: AtomicUsize::new(0),
        }
    }

    fn shard_index(&self, series: SeriesId) -> usize {
        series.0 as usize & (self.shards.len() - 1)
    }

    fn shard(&self, series: SeriesId) -> &Mutex<Shard> {
        &self.shards[self.shard_index(series)]
    }

    /// Adds the points of one series. Panics (a caller bug) if the series already holds another
    /// kind: the engine checks kinds against the catalog before inserting.
    pub fn insert(&self, points: &SeriesPoints) {
        if points.timestamps.is_empty() {
            return;
        }
        let mut shard = self.shard(points.series).lock();
        let bytes = append_to(&mut shard, points);
        drop(shard);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.points.fetch_add(points.timestamps.len(), Ordering::Relaxed);
    }

    /// [`Memtable::insert`] for every entry of a batch (each series at most once). Each shard
    /// is locked once for all its entries, and the counters are updated once: per entry, the
    /// lock and the two shared counters (whose cache lines concurrent writers bounce between
    /// cores) cost more than appending its few points. Shards are visited from a rotating
    /// start, so concurrent writers do not queue behind each other shard after shard.
    pub fn insert_all(&self, entries: &[SeriesPoints]) {
        if entries.len() < 2 * self.shards.len() {
            entries.iter().for_each(|entry| self.insert(entry));
            return;
        }
        let shard_count = self.shards.len();
        // Entry indices grouped by shard (a counting sort): `order[starts[s]..starts[s + 1]]`.
        let mut starts = vec![0u32; shard_count + 1];
        for entry in entries {
            starts[self.shard_index(entry.series) + 1] += 1;
        }
        for s in 0..shard_count {
            starts[s + 1] += starts[s];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; entries.len()];
        for (i, entry) in entries.iter().enumerate() {
            let slot = &mut next[self.shard_index(entry.series)];
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
        let first = self.next_start.fetch_add(1, Ordering::Relaxed);
        // Per entry of a shard, its buffer's position; `None` for a series new to the shard,
        // whose buffer is made when its points are appended.
        let mut positions: Vec<Option<u32>> = Vec::new();
        let (mut bytes, mut points) = (0usize, 0usize);
        for k in 0..shard_count {
            let s = (first + k) & (shard_count - 1);
            let (from, to) = (starts[s] as usize, starts[s + 1] as usize);
            if from == to {
                continue;
            }
            let mut shard = self.shards[s].lock();
            // Every entry's buffer first (see `Shard`): independent lookups, whose misses
            // overlap, each loading its buffer's end for the appends below.
            positions.clear();
            positions.extend(order[from..to].iter().map(|&i| {
                let series = entries[i as usize].series;
                let position = shard.positions.get(&series).copied();
                if let Some(p) = position {
                    shard.buffers[p as usize].1.prefetch_ends();
                }
                position
            }));
            for (j, (&i, &position)) in order[from..to].iter().zip(&positions).enumerate() {
                // The entries' points are scattered over the heap: load the next ones early.
                if let Some(&ahead) = order[from..to].get(j + PREFETCH_AHEAD) {
                    prefetch(&entries[ahead as usize]);
                }
                let points_of = &entries[i as usize];
                if points_of.timestamps.is_empty() {
                    continue;
                }
                bytes += match position {
                    Some(p) => shard.append_at(p as usize, false, points_of),
                    None => append_to(&mut shard, points_of),
                };
                points += points_of.timestamps.len();
            }
        }
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.points.fetch_add(points, Ordering::Relaxed);
    }

    /// Approximate bytes held: points and per-series overhead.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Points written (a repeated timestamp counts each time it was written).
    pub fn points(&self) -> usize {
        self.points.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.points() == 0
    }

    /// A copy of the points of `series` in `[from, to)`, sorted, repeats resolved.
    pub fn read(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Option<ResolvedSeries> {
        self.read_bounded(series, from, Some(to), None)
    }

    /// The oldest (`newest` false) or newest `limit` points of `series` in `[from, to)`, sorted,
    /// repeats resolved: what a read that stops after `limit` points can reach of this memtable
    /// (a `LIMIT 1` over a day buffered here copied the whole day before).
    pub fn read_edge(&self, series: SeriesId, from: Timestamp, to: Timestamp, newest: bool, limit: usize) -> Option<ResolvedSeries> {
        self.read_bounded(series, from, Some(to), Some((newest, limit)))
    }

    fn read_bounded(
        &self,
        series: SeriesId,
        from: Timestamp,
        to: Option<Timestamp>,
        edge: Option<(bool, usize)>,
    ) -> Option<ResolvedSeries> {
        let mut shard = self.shard(series).lock();
        let (timestamps, values) = shard.get_mut(&series)?.resolved(from, to, edge);
        if timestamps.is_empty() {
            return None;
        }
        Some(ResolvedSeries { series, timestamps, values })
    }

    /// Whether `series` has a buffered point in `[from, to]` (both ends included).
    pub fn has_points_in(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> bool {
        let shard = self.shard(series).lock();
        shard.get(&series).is_some_and(|b| b.timestamps.iter().any(|&t| t >= from && t <= to))
    }

    /// How many series have buffered points.
    pub fn series_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Ids of every series with buffered points, ascending.
    pub fn series_ids(&self) -> Vec<SeriesId> {
        let mut ids: Vec<SeriesId> =
            self.shards.iter().flat_map(|s| s.lock().buffers.iter().map(|(id, _)| *id).collect::<Vec<_>>()).collect();
        ids.sort();
        ids
    }

    /// The newest buffered point of `series` (of repeated newest timestamps, the last written).
    pub fn last_point(&self, series: SeriesId) -> Option<(Timestamp, crate::model::Value)> {
        let shard = self.shard(series).lock();
        let buffer = shard.get(&series)?;
        let index = if buffer.strictly_increasing {
            buffer.timestamps.len().checked_sub(1)?
        } else {
            // The last written of the greatest timestamp.
            let newest = *buffer.timestamps.iter().max()?;
            buffer.timestamps.iter().rposition(|&t| t == newest)?
        };
        Some((buffer.timestamps[index], buffer.values.get(index)))
    }

    /// The time of the oldest buffered point of `series`.
    pub fn oldest_timestamp(&self, series: SeriesId) -> Option<Timestamp> {
        let shard = self.shard(series).lock();
        let buffer = shard.get(&series)?;
        if buffer.strictly_increasing {
            buffer.timestamps.first().copied()
        } else {
            buffer.timestamps.iter().min().copied()
        }
    }

    /// All buffered points of `series`, sorted, repeats resolved.
    pub fn read_all(&self, series: SeriesId) -> Option<ResolvedSeries> {
        self.read_bounded(series, Timestamp::MIN, None, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::model::Value;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn insert_all(memtable: &Memtable, batch: &WriteBatch) {
        batch.entries().iter().for_each(|e| memtable.insert(e));
    }

    #[test]
    fn out_of_order_and_repeated_points_resolve_to_the_last_write() {
        let memtable = Memtable::new(4);
        let mut batch = WriteBatch::new();
        for (t, v) in [(30, 3.0), (10, 1.0), (20, 2.0), (10, 1.5)] {
            batch.push(SeriesId(7), t, Value::F64(v)).expect("push");
        }
        insert_all(&memtable, &batch);
        let read = memtable.read(SeriesId(7), 0, 100).expect("points");
        assert_eq!(read.timestamps, vec![10, 20, 30]);
        assert_eq!(read.values, ValueColumn::F64(vec![1.5, 2.0, 3.0]));
        assert_eq!(memtable.read(SeriesId(7), 11, 30).expect("points").timestamps, vec![20]);
        assert!(memtable.read(SeriesId(7), 31, 100).is_none());
        assert!(memtable.read(SeriesId(8), 0, 100).is_none());
        assert_eq!(memtable.points(), 4);
    }

    #[test]
    fn resolved_series_come_in_id_order_and_include_the_largest_timestamp() {
        let memtable = Memtable::new(2);
        let mut batch = WriteBatch::new();
        for id in [5, 1, 3] {
            batch.push(SeriesId(id), 1, Value::I64(id.into())).expect("push");
        }
        batch.push(SeriesId(3), Timestamp::MAX, Value::I64(7)).expect("push");
        insert_all(&memtable, &batch);
        let resolved: Vec<ResolvedSeries> = memtable.series_ids().into_iter().filter_map(|id| memtable.read_all(id)).collect();
        assert_eq!(resolved.iter().map(|s| s.series.0).collect::<Vec<_>>(), vec![1, 3, 5]);
        assert_eq!(resolved[1].timestamps, vec![1, Timestamp::MAX]);
        assert!(memtable.read(SeriesId(1), 0, 10).is_some(), "the memtable stays intact");
    }

    #[test]
    fn bytes_count_each_series_once_beside_its_points() {
        let memtable = Memtable::new(4);
        let mut batch = WriteBatch::new();
        for id in 1..=100 {
            batch.push(SeriesId(id), 1, Value::F64(1.0)).expect("push");
        }
        memtable.insert_all(batch.entries());
        assert_eq!(memtable.bytes(), 100 * (16 + SERIES_OVERHEAD_BYTES));
        let mut more = WriteBatch::new();
        more.push(SeriesId(1), 2, Value::F64(2.0)).expect("push");
        memtable.insert_all(more.entries());
        assert_eq!(memtable.bytes(), 100 * (16 + SERIES_OVERHEAD_BYTES) + 16, "a known series adds its points only");
        const { assert!(SERIES_OVERHEAD_BYTES >= 100, "the entry and two first allocations") };
    }

    /// A buffer not yet settled gives the points at either end of a range, repeats resolved
    /// to the last write, as a settled one does.
    #[test]
    fn an_unsettled_buffer_gives_the_points_at_either_end() {
        let unsettled = || SeriesBuffer {
            timestamps: vec![5, 1, 3, 1, 9],
            values: ValueColumn::I64(vec![50, 10, 30, 11, 90]),
            strictly_increasing: false,
        };
        let mut settled = unsettled();
        settled.settle();
        for (edge, timestamps, values) in [
            (None, vec![1, 3, 5], vec![11, 30, 50]),
            (Some((false, 2)), vec![1, 3], vec![11, 30]),
            (Some((true, 2)), vec![3, 5], vec![30, 50]),
            (Some((true, 9)), vec![1, 3, 5], vec![11, 30, 50]),
            (Some((false, 0)), vec![], vec![]),
        ] {
            let expected = (timestamps, ValueColumn::I64(values));
            assert_eq!(unsettled().resolved(0, Some(9), edge), expected, "{edge:?}");
            assert_eq!(settled.resolved(0, Some(9), edge), expected, "{edge:?}, settled");
        }
    }

    proptest! {
        /// A buffer written in order is read as slices of its columns: any range gives exactly
        /// the points inside it, as one written out of order (and so gathered point by point)
        /// would.
        #[test]
        fn in_order_buffers_read_each_range_exactly(
            steps in proptest::collection::vec(1i64..5, 0..60),
            from in -5i64..150,
            length in -5i64..150,
        ) {
            let memtable = Memtable::new(2);
            let mut batch = WriteBatch::new();
            let mut t = 0;
            for &step in &steps {
                t += step;
                batch.push(SeriesId(1), t, Value::I64(t * 3)).expect("push");
            }
            memtable.insert_all(batch.entries());
            let to = from + length;
            let expected: Vec<i64> = batch.entries().iter().flat_map(|e| e.timestamps.clone()).filter(|&t| t >= from && t < to).collect();
            match memtable.read(SeriesId(1), from, to) {
                None => prop_assert!(expected.is_empty()),
                Some(read) => {
                    prop_assert_eq!(&read.timestamps, &expected);
                    prop_assert_eq!(read.values, ValueColumn::I64(expected.iter().map(|t| t * 3).collect()));
                }
            }
            let all = memtable.read_all(SeriesId(1)).map(|r| r.timestamps.len()).unwrap_or(0);
            prop_assert_eq!(all, steps.len());
        }

        #[test]
        fn inserting_a_whole_batch_is_inserting_each_entry(
            batches in proptest::collection::vec(proptest::collection::vec((0u32..80, -20i64..20, any::<i64>()), 0..150), 1..5),
            shards in 1usize..9,
        ) {
            let (whole, each) = (Memtable::new(shards), Memtable::new(shards));
            for points in &batches {
                let mut batch = WriteBatch::new();
                for &(series, t, v) in points {
                    batch.push(SeriesId(series), t, Value::I64(v)).expect("push");
                }
                whole.insert_all(batch.entries());
                insert_all(&each, &batch);
            }
            prop_assert_eq!(whole.series_ids(), each.series_ids());
            prop_assert_eq!((whole.points(), whole.bytes()), (each.points(), each.bytes()));
            for id in each.series_ids() {
                prop_assert_eq!(whole.read_all(id), each.read_all(id));
            }
        }

        #[test]
        fn reads_match_a_last_write_wins_model(
            writes in proptest::collection::vec((1u32..4, -50i64..50, any::<i64>()), 1..200),
            from in -60i64..60,
            len in 0i64..120,
            reads_between in any::<bool>(),
        ) {
            let memtable = Memtable::new(2);
            let mut model: BTreeMap<(u32, i64), i64> = BTreeMap::new();
            for chunk in writes.chunks(7) {
                let mut batch = WriteBatch::new();
                for &(series, t, v) in chunk {
                    batch.push(SeriesId(series), t, Value::I64(v)).expect("push");
                    model.insert((series, t), v);
                }
                insert_all(&memtable, &batch);
                // Reads between writes settle buffers that later writes append to.
                if reads_between {
                    let series = chunk[0].0;
                    let expected: Vec<(i64, i64)> = model.range((series, i64::MIN)..(series + 1, i64::MIN)).map(|(&(_, t), &v)| (t, v)).collect();
                    let actual: Vec<(i64, i64)> = match memtable.read_all(SeriesId(series)) {
                        Some(ResolvedSeries { timestamps, values: ValueColumn::I64(values), .. }) => timestamps.into_iter().zip(values).collect(),
                        other => panic!("expected points, got {other:?}"),
                    };
                    prop_assert_eq!(actual, expected);
                    let newest = model.range((series, i64::MIN)..(series + 1, i64::MIN)).next_back().map(|(&(_, t), &v)| (t, Value::I64(v)));
                    prop_assert_eq!(memtable.last_point(SeriesId(series)), newest);
                }
            }
            for series in 1u32..4 {
                let expected: Vec<(i64, i64)> = model.range((series, from)..(series, from + len)).map(|(&(_, t), &v)| (t, v)).collect();
                let actual: Vec<(i64, i64)> = match memtable.read(SeriesId(series), from, from + len) {
                    Some(ResolvedSeries { timestamps, values: ValueColumn::I64(values), .. }) => timestamps.into_iter().zip(values).collect(),
                    Some(other) => panic!("wrong kind {other:?}"),
                    None => Vec::new(),
                };
                prop_assert_eq!(actual, expected);
            }
        }
    }
}
