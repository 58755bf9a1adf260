//! The write path: validation against the catalog, WAL append and memtable insert, direct
//! writes of large payload batches straight into the store and memory backpressure. Writers are
//! admitted as the disk fills by the `admission` module.

use super::Inner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::flush::add_inline;
use crate::mark::TxMark;
use crate::memtable::{Memtable, ResolvedSeries};
use crate::model::{last_write_wins, SeriesId, Timestamp, ValueColumn};
use crate::reclaim::throttle::Admission;
use crate::retry::{Backoff, LogLimiter, LOG_INTERVAL};
use crate::segment::GroupBuilder;
use std::time::{Duration, Instant};

/// The first pause of a write after ENOSPC; it doubles with each retry up to
/// [`NO_SPACE_RETRY_MAX`], within the write's `full_wait_max`.
const NO_SPACE_RETRY_FIRST: Duration = Duration::from_millis(50);
/// See [`NO_SPACE_RETRY_FIRST`].
const NO_SPACE_RETRY_MAX: Duration = Duration::from_secs(1);

/// "write paused: disk full", at most every 10 s.
static PAUSED_LOG: LogLimiter = LogLimiter::new(LOG_INTERVAL);

impl Inner {
    pub(super) fn flush_threshold_bytes(&self) -> usize {
        (self.options.memtable_bytes_max / 2).max(1)
    }

    /// Writes `batch` (with `marks` in its WAL record); on a full disk, waits for reclaim (up to
    /// [`ReclaimOptions::full_wait_max`]) and tries again instead of failing; with
    /// [`EngineOptions::throttle_writes`], goes through the admission of the `admission` module
    /// (waits at `U_h`, delays the return between `U_l` and `U_h`).
    pub(super) fn write(&self, batch: &WriteBatch, marks: &[TxMark]) -> Result<()> {
        let started = Instant::now();
        let wait_max = self.options.reclaim.full_wait_max;
        // Each retry after ENOSPC costs a WAL group (write, cut back, sync): pause longer each
        // time instead of retrying as fast as reclaim cycles end.
        let mut pause = Backoff::new(NO_SPACE_RETRY_FIRST, NO_SPACE_RETRY_MAX);
        loop {
            if self.options.throttle_writes && self.admit(started)? == Admission::WaitForSpace {
                self.wait_for_space();
                continue;
            }
            match self.write_once(batch, marks, started) {
                Err(e) if e.is_no_space() && started.elapsed() < wait_max => {
                    if let Some(suppressed) = PAUSED_LOG.allow("write paused") {
                        tracing::warn!(error = %e, suppressed, "write paused: disk full; waiting for reclaim");
                    }
                    self.request_reclaim();
                    std::thread::sleep(pause.failed().min(wait_max.saturating_sub(started.elapsed())));
                }
                Err(e) if e.is_no_space() => return Err(self.refuse_for_space()),
                Err(e) => return Err(e),
                Ok(()) => {
                    self.maintenance.reclaimer.note_written(batch.value_bytes() as u64);
                    break;
                }
            }
        }
        if self.options.throttle_writes {
            if let Some(delay) = self.acknowledgement_delay() {
                std::thread::sleep(delay);
            }
        }
        Ok(())
    }

    fn write_once(&self, batch: &WriteBatch, marks: &[TxMark], started: Instant) -> Result<()> {
        if batch.is_empty() && marks.is_empty() {
            return Ok(());
        }
        self.health.check_writable()?;
        let mut newest = SeriesId(0);
        for entry in batch.entries() {
            newest = newest.max(entry.series);
            let kind = self.catalog.kind(entry.series).ok_or(Error::UnknownSeries(entry.series.0))?;
            if self.catalog.is_deleted(entry.series) {
                return Err(Error::SeriesDeleted(entry.series.0));
            }
            if kind != entry.values.kind() {
                let key = self.catalog.get(entry.series).map_or_else(|| entry.series.0.to_string(), |e| e.key.canonical());
                return Err(Error::KindMismatch { key, existing: kind, attempted: entry.values.kind() });
            }
            if let ValueColumn::Bytes(payloads) = &entry.values {
                if let Some(large) = payloads.iter().find(|p| p.len() > self.options.payload_bytes_max) {
                    return Err(Error::PayloadTooLarge { len: large.len(), limit: self.options.payload_bytes_max });
                }
            }
        }
        // Series created by `series_id_unsynced` become durable before a record names them.
        if let Err(e) = self.catalog.sync_through(newest) {
            self.health.poison(&e);
            return Err(e);
        }
        if !batch.is_empty() && self.writes_direct(batch) {
            self.write_direct(batch)?;
            // The points are durable in the store; their marks go to the WAL alone, after them.
            return if marks.is_empty() { Ok(()) } else { self.log_and_insert(&WriteBatch::new(), marks) };
        }
        self.wait_for_memory(started)?;
        self.log_and_insert(batch, marks)
    }

    /// Appends `batch` and `marks` as one WAL record, inserts them into the active memtable and
    /// its marks, and waits until the record is durable.
    fn log_and_insert(&self, batch: &WriteBatch, marks: &[TxMark]) -> Result<()> {
        let record = self.wal.as_ref().map(|_| {
            let mut record = Vec::new();
            batch.encode_with_marks(marks, &mut record);
            record
        });
        let (position, active_bytes) = {
            let memtables = self.memtables.read();
            let position = match (&self.wal, &record) {
                (Some(wal), Some(record)) => Some(wal.append(record)?),
                _ => None,
            };
            memtables.active.insert_all(batch.entries());
            if !marks.is_empty() {
                // Under the same shared lock as the points: a flush freezes both together, so
                // the marks of every record in the WAL files it covers reach its sink.
                memtables.active_marks.lock().extend_from_slice(marks);
            }
            (position, memtables.active.bytes())
        };
        self.flush.activity.wrote(batch.len());
        if active_bytes >= self.flush_threshold_bytes() {
            self.request_flush();
        }
        if let (Some(wal), Some(position)) = (&self.wal, position) {
            if let Err(e) = wal.wait_durable(position) {
                if e.is_fatal() {
                    self.health.poison(&e);
                }
                return Err(e);
            }
        }
        // After the memtable insert: a flush frozen after this call's token covers the points.
        self.store.log_write(batch, marks)
    }

    /// Whether `batch` bypasses WAL and memtable: large byte payloads only, and no buffered
    /// point of the same series in the batch's time range (a buffered point would shadow the
    /// newer direct block on reads, since memtables rank above all blocks).
    fn writes_direct(&self, batch: &WriteBatch) -> bool {
        if batch.value_bytes() < self.options.direct_write_bytes_min
            || !batch.entries().iter().all(|e| matches!(e.values, ValueColumn::Bytes(_)))
        {
            return false;
        }
        let memtables = self.memtables.read();
        batch.entries().iter().all(|entry| {
            let (min, max) = entry.timestamps.iter().fold((Timestamp::MAX, Timestamp::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
            let overlaps = |m: &Memtable| m.has_points_in(entry.series, min, max);
            !overlaps(&memtables.active) && !memtables.frozen.as_deref().is_some_and(overlaps)
        })
    }

    /// Encodes `batch` into blocks and commits them straight into the store.
    fn write_direct(&self, batch: &WriteBatch) -> Result<()> {
        let mut group = GroupBuilder::with_capacity(direct_group_bytes_max(batch, self.options.block_bytes_max));
        for entry in batch.entries() {
            let resolved = resolve(entry);
            add_inline(&mut group, &resolved, self.options.block_points_max, self.options.block_bytes_max);
        }
        // A direct group covers no WAL record: it must not move the checkpoint past what flushes
        // have covered.
        let checkpoint = *self.flush.wal_checkpoint.lock();
        let result = self.store.put_group(group, checkpoint);
        self.flush.activity.wrote(batch.len());
        // Whatever the outcome, the newest sealed points of these series may have changed.
        self.ends.forget(batch.entries().iter().map(|e| e.series));
        match result {
            Ok(_) => Ok(()),
            Err(e) if !e.is_fatal() => Err(e),
            Err(e) => {
                self.health.poison(&e);
                Err(e)
            }
        }
    }

    /// Backpressure: waits while the active memtable is over its threshold and the previous
    /// flush has not finished, or while it is over the whole memory budget. While flushes fail
    /// for lack of space, a writer that began at `started` gives up with `NoSpace` after
    /// [`ReclaimOptions::full_wait_max`](crate::ReclaimOptions::full_wait_max), as it does
    /// waiting for space.
    fn wait_for_memory(&self, started: Instant) -> Result<()> {
        let threshold = self.flush_threshold_bytes();
        loop {
            {
                let memtables = self.memtables.read();
                let active = memtables.active.bytes();
                if active < threshold || (memtables.frozen.is_none() && active < 2 * threshold) {
                    return Ok(());
                }
            }
            self.request_flush();
            self.health.check_writable()?;
            if self.flush.failed_no_space.load(std::sync::atomic::Ordering::Relaxed)
                && started.elapsed() >= self.options.reclaim.full_wait_max
            {
                return Err(Error::NoSpace { path: self.data_dir.clone() });
            }
            let mut guard = self.flush.attempted_lock.lock();
            self.flush.attempted.wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    pub(super) fn request_flush(&self) {
        let mut signal = self.signals.state.lock();
        if !signal.flush_requested {
            signal.flush_requested = true;
            // The compactor waits on the same condition variable: wake both.
            self.signals.changed.notify_all();
        }
    }
}

/// An upper bound of the encoded size of `batch` as a direct group, so its builder never moves
/// (a moved buffer loses its page alignment and costs a copy): the payloads, an LZ4 attempt's
/// worst-case expansion, and per block and per point more than a header, timestamps and lengths
/// take.
fn direct_group_bytes_max(batch: &WriteBatch, block_bytes_max: usize) -> usize {
    let points: usize = batch.entries().iter().map(|e| e.timestamps.len()).sum();
    let blocks = batch.entries().len() + batch.value_bytes() / block_bytes_max.max(1) + points.min(1);
    batch.value_bytes() + batch.value_bytes() / 128 + blocks * 512 + points * 32
}

/// The points of one batch entry sorted by timestamp, a repeated timestamp keeping the value
/// written last.
fn resolve(entry: &crate::batch::SeriesPoints) -> ResolvedSeries {
    let kept = last_write_wins(&entry.timestamps, (0..entry.timestamps.len()).collect());
    ResolvedSeries {
        series: entry.series,
        timestamps: kept.iter().map(|&i| entry.timestamps[i]).collect(),
        values: entry.values.gather(&kept),
    }
}
