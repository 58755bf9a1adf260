//! The background threads (flush, compaction, reclaim) and the work they share with explicit
//! calls: one flush of the memtable, one compaction, one reclaim cycle.
//!
//! Compaction while serving: the flusher, which wakes at least every second, also seals the
//! open segment once it is `segment_seal_age` old (flushing the memtable into it first, so the
//! points of a load that has ended go into the sealed segment, not into a new one); the
//! compactor, woken after every flush and seal (and every few seconds), rewrites sealed runs of
//! short blocks at nice 19 with its I/O paced to `merge_bytes_per_second`, and only when the
//! file system has room for the output beside its inputs below `U_l` (otherwise it backs off as on
//! ENOSPC). Neither adds work to the write path.

use super::pacer::FlushPacer;
use super::{Inner, Workers};
use crate::error::{Error, Result};
use crate::flush::encode_group_paced;
use crate::memtable::Memtable;
use crate::retry::{Backoff, LogLimiter, LOG_INTERVAL};
use crate::wal::Durability;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requested reclaim cycles (writers waiting for space request one each) run at most this often.
const RECLAIM_REQUEST_GAP: Duration = Duration::from_millis(100);

/// The background threads' failure lines, each at most every 10 s.
static FLUSH_LOG: LogLimiter = LogLimiter::new(LOG_INTERVAL);
static COMPACTION_LOG: LogLimiter = LogLimiter::new(LOG_INTERVAL);
static RECLAIM_LOG: LogLimiter = LogLimiter::new(LOG_INTERVAL);

/// Background threads (flush, compaction) run at the lowest priority, nice 19: their work can
/// wait a few milliseconds, a writer's acknowledgement should not. At nice 0 a flush's encoding
/// slices took a core from the threads answering writers for milliseconds at a time, and each
/// flush showed as a cluster of slow acknowledgements (`docs/BENCHMARKS.md`, `bench tx`). They
/// are not starved: when writers wait for them (a full memtable), the CPU is theirs.
fn background_priority() {
    #[cfg(target_os = "linux")]
    {
        // On Linux the nice value is per thread; raising it needs no privilege.
        // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
        let failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) } != 0;
        if failed {
            tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower a background thread's priority");
        }
    }
}

/// Starts a named thread running `work` on the engine's shared state.
fn spawn(inner: &Arc<Inner>, dir: &Path, name: &str, lowered: bool, work: fn(&Inner)) -> Result<JoinHandle<()>> {
    let inner = inner.clone();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if lowered {
                background_priority();
            }
            work(&inner)
        })
        .map_err(|e| Error::io(dir, e))
}

impl Inner {
    /// Starts the flusher, and the compactor and reclaimer if the options ask for them, into
    /// `workers`.
    pub(super) fn start_workers(self: &Arc<Self>, dir: &Path, workers: &Workers) -> Result<()> {
        *workers.flusher.lock() = Some(spawn(self, dir, "sensordb-flush", true, Inner::run_flusher)?);
        if self.options.background_compaction {
            *workers.compactor.lock() = Some(spawn(self, dir, "sensordb-compact", true, Inner::run_compactor)?);
        }
        if self.options.background_reclaim {
            // Not lowered: reclaim measures usage for writers.
            *workers.reclaimer.lock() = Some(spawn(self, dir, "sensordb-reclaim", false, Inner::run_reclaimer)?);
        }
        Ok(())
    }

    pub(super) fn request_reclaim(&self) {
        self.signals.reclaim_requested.store(true, Ordering::SeqCst);
        let _signal = self.signals.state.lock();
        self.signals.changed.notify_all();
    }

    fn run_flusher(&self) {
        // After a failure the next attempt waits for the backoff, whatever asks for a flush
        // meanwhile (writers waiting for memory ask all the time).
        let mut backoff = Backoff::background();
        loop {
            {
                let mut signal = self.signals.state.lock();
                loop {
                    if signal.shutdown {
                        return;
                    }
                    let now = Instant::now();
                    let wait = match backoff.retry_at() {
                        Some(at) if at > now => at - now,
                        Some(_) => break,
                        None if signal.flush_requested => break,
                        None if self.flush.last.lock().elapsed() >= self.options.flush_interval => break,
                        None if self.seal_due() || self.load_ended() => break,
                        None => Duration::from_secs(1),
                    };
                    self.signals.changed.wait_for(&mut signal, wait);
                }
                signal.flush_requested = false;
            }
            // A segment open too long, or whose load has ended, takes the memtable's points, then
            // is sealed for compaction.
            let seal =
                if self.load_ended() { Some(Duration::ZERO) } else { self.seal_due().then_some(self.options.segment_seal_age).flatten() };
            match self.flush_once_paced(true).and_then(|_| seal.map_or(Ok(()), |age| self.seal_older_than(age))) {
                Ok(()) => {
                    backoff.succeeded();
                    // A new segment may have pushed usage over a threshold; the wake-up also
                    // tells the compactor that a sealed segment may be waiting.
                    self.request_reclaim();
                }
                Err(e) => {
                    let retry_in = backoff.failed();
                    let failures = backoff.failures();
                    let retry_ms = retry_in.as_millis() as u64;
                    if e.is_no_space() {
                        self.request_reclaim();
                        if let Some(suppressed) = FLUSH_LOG.allow("flush postponed") {
                            tracing::warn!(error = %e, failures, retry_ms, suppressed, "flush postponed: disk full");
                        }
                    } else if !e.is_fatal() {
                        // A failed flush changes nothing on disk (the segment is cut back, the
                        // frozen memtable kept), so transient errors are retried rather than fatal.
                        if let Some(suppressed) = FLUSH_LOG.allow("flush failed") {
                            tracing::warn!(error = %e, failures, retry_ms, suppressed, "flush failed; will retry");
                        }
                    } else {
                        self.health.poison(&e);
                    }
                }
            }
            let _guard = self.flush.attempted_lock.lock();
            self.flush.attempted.notify_all();
        }
    }

    /// Whether the open segment has reached `segment_seal_age`.
    fn seal_due(&self) -> bool {
        match (self.options.segment_seal_age, self.store.open_segment_age()) {
            (Some(limit), Some(age)) => age >= limit,
            _ => false,
        }
    }

    /// Whether writes have paused for `segment_seal_idle` after a load (see
    /// [`activity::WriteActivity::load_ended`](super::activity::WriteActivity::load_ended)).
    fn load_ended(&self) -> bool {
        self.options.segment_seal_idle.is_some_and(|idle| self.flush.activity.load_ended(idle))
    }

    /// Seals the open segment if it is still at least `age` old (not one opened meanwhile).
    fn seal_older_than(&self, age: Duration) -> Result<()> {
        if self.store.seal_if_older_than(age)? {
            tracing::debug!(age_s = age.as_secs_f64(), "open segment sealed");
        }
        // Points count towards the next load from here, whether a segment was open or not.
        self.flush.activity.sealed();
        Ok(())
    }

    fn compaction_options(&self) -> crate::compaction::CompactionOptions {
        crate::compaction::CompactionOptions {
            small_block_points: self.options.compaction_small_block_points.max(1),
            short_block_bytes_max: crate::compaction::SHORT_BLOCK_BYTES_MAX,
            run_bytes_max: self.options.segment_bytes_max.max(1 << 20),
            short_block_run_bytes_max: 4 * self.options.segment_bytes_max.max(1 << 20),
            // Four segments full of blocks: their small files merge four at a time.
            run_blocks_max: 4 * self.options.segment_blocks_max.max(1) as u64,
            small_file_bytes: self.options.segment_bytes_max / 2,
            block_points_max: self.options.block_points_max,
            block_bytes_max: self.options.block_bytes_max,
            points_per_group: 4 << 20,
            // Groups of at most a quarter of a segment's blocks: an output is cut into segments
            // between groups, so none passes the block limit by more than that.
            group_series_max: (self.options.segment_blocks_max / 4).clamp(1, 65_536),
        }
    }

    /// One compaction, if one is worth doing. `paced` (the background compactor) limits its
    /// I/O to `merge_bytes_per_second`; an explicit call runs at full speed.
    pub(super) fn compact_once(&self, paced: bool) -> Result<Option<crate::compaction::CompactionReport>> {
        let _compacting = self.maintenance.running.lock();
        // The pace leaves the disk to writers; with none, compaction goes at full speed.
        let writing = || self.flush.activity.written_within(super::activity::WRITES_RECENT);
        let mut limit = if paced {
            // The background compactor gives up when the engine closes: its inputs stay, and
            // the next start compacts them.
            crate::compaction::RateLimit::new(self.options.reclaim.merge_bytes_per_second)
                .stopping_when(&self.health.closed)
                .paced_only_while(&writing)
        } else {
            crate::compaction::RateLimit::unlimited()
        };
        let room = |bytes| self.compaction_room(bytes);
        let outcome = crate::compaction::compact_once(self.store.as_ref(), &self.catalog, &self.compaction_options(), &room, &mut limit);
        if outcome.is_err() {
            self.maintenance.compaction_failures.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }

    /// Whether the file system takes a compaction output of up to `bytes` beside its inputs
    /// (removed only after the output is installed) with its used share staying below `U_l`,
    /// where writers are throttled; `NoSpace` otherwise, so the compactor backs off as on
    /// ENOSPC. `capacity_bytes` is not asked: a compaction shrinks sensordb's own bytes once
    /// installed, and reclaim (which could evict over it) does not run during one.
    fn compaction_room(&self, bytes: u64) -> Result<()> {
        let reclaim = &self.options.reclaim;
        if !reclaim.file_system_usage {
            return Ok(());
        }
        let Ok(space) = self.options.fs.space(&self.data_dir) else { return Ok(()) };
        let used = space.total_bytes.saturating_sub(space.available_bytes);
        let share_after = used.saturating_add(bytes) as f64 / space.total_bytes.max(1) as f64;
        if share_after >= reclaim.throttle_low {
            return Err(Error::NoSpace { path: crate::filenames::segment_dir(&self.data_dir) });
        }
        Ok(())
    }

    /// Background compaction: looks for work every few seconds (or when woken) until shutdown;
    /// after a failure, not before the backoff has passed, however often it is woken.
    fn run_compactor(&self) {
        const PERIOD: Duration = Duration::from_secs(5);
        let mut backoff = Backoff::background();
        // Whether the last attempt compacted a run: others may be waiting, so the next attempt
        // comes at once instead of a period later (a fleet of 2 M sensors left runs of 6-9 s
        // each 5 s apart, the compactor idle 40 % of its time with gigabytes to merge).
        let mut compacted = false;
        loop {
            {
                let mut signal = self.signals.state.lock();
                let mut woken = compacted;
                loop {
                    if signal.shutdown {
                        return;
                    }
                    let now = Instant::now();
                    match backoff.retry_at() {
                        Some(at) if at > now => {
                            self.signals.changed.wait_for(&mut signal, at - now);
                        }
                        Some(_) => break,
                        None if woken => break,
                        None => {
                            self.signals.changed.wait_for(&mut signal, PERIOD);
                            woken = true;
                        }
                    }
                }
            }
            if self.health.is_poisoned() {
                continue;
            }
            compacted = false;
            match self.compact_once(true) {
                Ok(report) => {
                    // Only a rewrite that gained something hurries the next: one that did not
                    // would repeat at full speed if the planner offered it again.
                    compacted = report.is_some_and(|r| r.blocks_after < r.blocks_before || r.bytes_after < r.bytes_before);
                    backoff.succeeded();
                }
                // Stopped by close: the loop sees the shutdown next.
                Err(Error::Closed) => {}
                // Inputs stay in place when a compaction fails; it is retried later.
                Err(e) if e.is_no_space() => {
                    let retry_ms = backoff.failed().as_millis() as u64;
                    if let Some(suppressed) = COMPACTION_LOG.allow("compaction postponed") {
                        tracing::warn!(error = %e, failures = backoff.failures(), retry_ms, suppressed, "compaction postponed: no room on the disk for its output");
                    }
                }
                Err(e) => {
                    let retry_ms = backoff.failed().as_millis() as u64;
                    if let Some(suppressed) = COMPACTION_LOG.allow("compaction failed") {
                        tracing::warn!(error = %e, failures = backoff.failures(), retry_ms, suppressed, "compaction failed; will retry");
                    }
                }
            }
        }
    }

    pub(super) fn reclaim_once(&self) -> Result<()> {
        let _maintenance = self.maintenance.running.lock();
        self.signals.reclaim_requested.store(false, Ordering::SeqCst);
        let now = (self.options.clock)();
        self.maintenance.reclaimer.run_cycle(
            self.options.fs.as_ref(),
            &self.data_dir,
            self.store.as_ref(),
            &self.catalog,
            &self.compaction_options(),
            &|| self.own_bytes(),
            now,
        )
    }

    /// Background reclaim: a cycle every interval, or sooner when asked (at most one every
    /// [`RECLAIM_REQUEST_GAP`]); after a failed cycle, not before the backoff has passed.
    fn run_reclaimer(&self) {
        let mut backoff = Backoff::background();
        // The first cycle comes an interval after the start, or sooner when asked.
        let mut last_cycle: Option<Instant> = Some(Instant::now());
        loop {
            {
                let mut signal = self.signals.state.lock();
                loop {
                    if signal.shutdown {
                        return;
                    }
                    let now = Instant::now();
                    let requested = self.signals.reclaim_requested.load(Ordering::SeqCst);
                    let earliest = match backoff.retry_at() {
                        Some(at) => Some(at),
                        None if requested => last_cycle.map(|at| at + RECLAIM_REQUEST_GAP),
                        None => None,
                    };
                    let wait = match earliest {
                        Some(at) if at > now => at - now,
                        Some(_) => break,
                        None if requested => break,
                        None => match last_cycle {
                            Some(at) if at + self.options.reclaim.interval > now => at + self.options.reclaim.interval - now,
                            _ => break,
                        },
                    };
                    self.signals.changed.wait_for(&mut signal, wait);
                }
            }
            last_cycle = Some(Instant::now());
            if self.health.is_poisoned() {
                self.signals.reclaim_requested.store(false, Ordering::SeqCst);
                continue;
            }
            match self.reclaim_once() {
                Ok(()) => backoff.succeeded(),
                Err(e) => {
                    // Inputs stay in place when a merge fails; a later cycle tries again.
                    let retry_ms = backoff.failed().as_millis() as u64;
                    if let Some(suppressed) = RECLAIM_LOG.allow("reclaim failed") {
                        tracing::warn!(error = %e, failures = backoff.failures(), retry_ms, suppressed, "reclaim cycle failed; will retry");
                    }
                }
            }
        }
    }

    /// Flushes the frozen memtable, freezing the active one first if nothing is frozen.
    /// Returns whether anything was written.
    pub(super) fn flush_once(&self) -> Result<bool> {
        self.flush_once_paced(false)
    }

    /// [`Self::flush_once`]; `paced` (the background flush) lets the encoding pause (see
    /// [`FLUSH_PACE_SLICE`](super::pacer::FLUSH_PACE_SLICE)).
    fn flush_once_paced(&self, paced: bool) -> Result<bool> {
        let outcome = self.flush_once_unrecorded(paced);
        self.flush.failed_no_space.store(outcome.as_ref().is_err_and(|e| e.is_no_space()), Ordering::Relaxed);
        if outcome.is_err() {
            self.flush.failures.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }

    /// [`Self::flush_once_paced`] without counting its outcome.
    fn flush_once_unrecorded(&self, paced: bool) -> Result<bool> {
        let _flushing = self.flush.running.lock();
        let began = Instant::now();
        let (frozen, wal_checkpoint) = {
            let mut memtables = self.memtables.write();
            if memtables.frozen.is_none() {
                if memtables.active.is_empty() {
                    *self.flush.last.lock() = Instant::now();
                    return Ok(false);
                }
                let checkpoint = match &self.wal {
                    Some(wal) => wal.rotate()?,
                    None => 0,
                };
                let fresh = Arc::new(Memtable::new(self.options.memtable_shards));
                let old = std::mem::replace(&mut memtables.active, fresh);
                memtables.frozen = Some(old);
                memtables.frozen_wal_checkpoint = checkpoint;
                let marks = std::mem::take(memtables.active_marks.get_mut());
                memtables.frozen_marks.extend(marks);
                // Under the exclusive lock: every write logged before this token inserted its
                // points before the freeze (it inserts, then logs).
                memtables.frozen_log_token = self.store.log_frozen();
            }
            (memtables.frozen.clone().expect("BUG: frozen memtable vanished"), memtables.frozen_wal_checkpoint)
        };
        let log_token = self.memtables.read().frozen_log_token;
        self.hand_over_frozen_marks()?;
        let frozen_at = began.elapsed();
        let mut pacer = FlushPacer::new(paced);
        let group = encode_group_paced(&frozen, &self.catalog, self.options.block_points_max, self.options.block_bytes_max, &mut || {
            pacer.pace(|| self.memtables.read().active.bytes() < self.flush_threshold_bytes() / 2 && !self.signals.state.lock().shutdown)
        });
        let encoded_at = began.elapsed();
        let (blocks, group_bytes) = (group.block_count(), group.bytes());
        if !group.is_empty() {
            if self.options.durability != Durability::None {
                self.catalog.sync()?;
            }
            self.store.put_group(group, wal_checkpoint)?;
            *self.flush.wal_checkpoint.lock() = wal_checkpoint;
            // Before the frozen memtable goes: readers find its newest points in one or the other.
            self.ends.after_flush(&frozen);
        }
        self.store.log_flushed(log_token);
        tracing::debug!(
            pauses = pacer.pauses,
            blocks,
            group_bytes,
            memtable_bytes = frozen.bytes(),
            freeze_ms = frozen_at.as_secs_f64() * 1e3,
            encode_ms = (encoded_at - frozen_at).as_secs_f64() * 1e3,
            store_ms = (began.elapsed() - encoded_at).as_secs_f64() * 1e3,
            "memtable flushed"
        );
        {
            let mut memtables = self.memtables.write();
            memtables.frozen = None;
            memtables.frozen_marks.clear();
        }
        drop(frozen);
        self.flush.count.fetch_add(1, Ordering::Relaxed);
        *self.flush.last.lock() = Instant::now();
        if let Some(wal) = &self.wal {
            // The data is in the store; failing to delete old WAL files only costs replay time.
            if let Err(e) = wal.remove_files_before(wal_checkpoint) {
                tracing::warn!(error = %e, dir = %self.wal_dir.display(), "could not trim the WAL");
            }
        }
        Ok(true)
    }

    /// Makes the frozen memtable's completion marks durable outside the WAL files the flush
    /// will let go, before its group (and so its WAL checkpoint) is stored: given to the sink,
    /// or with no sink registered, carried forward into the WAL file written now (and into the
    /// active memtable's marks, so the next flush takes them again). See [`crate::mark`].
    fn hand_over_frozen_marks(&self) -> Result<()> {
        let marks = self.memtables.read().frozen_marks.clone();
        if marks.is_empty() {
            return Ok(());
        }
        let sink = self.mark_sink.lock().clone();
        if let Some(sink) = sink {
            // Kept (frozen) until the flush ends: `unflushed_marks` lists them meanwhile.
            if let Err(error) = sink.checkpoint(&marks) {
                tracing::warn!(%error, marks = marks.len(), "completion marks not checkpointed; their WAL files go all the same");
            }
            return Ok(());
        }
        if let Some(wal) = &self.wal {
            let mut record = Vec::new();
            crate::batch::WriteBatch::new().encode_with_marks(&marks, &mut record);
            // After the rotation: the record lies in a file the flush does not cover.
            let position = wal.append(&record)?;
            wal.wait_durable(position)?;
        }
        let mut memtables = self.memtables.write();
        let carried = std::mem::take(&mut memtables.frozen_marks);
        let active = memtables.active_marks.get_mut();
        let newer = std::mem::replace(active, carried);
        active.extend(newer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Engine, EngineOptions};

    /// The nice value of this process's threads called `name` (field 19 of their stat files).
    #[cfg(target_os = "linux")]
    fn nice_of_threads_named(name: &str) -> Vec<i64> {
        let mut nice = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").expect("task list") {
            let dir = task.expect("task").path();
            if std::fs::read_to_string(dir.join("comm")).map(|comm| comm.trim() == name).unwrap_or(false) {
                let stat = std::fs::read_to_string(dir.join("stat")).expect("stat");
                // After the parenthesised name: state is field 3, nice field 19.
                let after_name = &stat[stat.rfind(')').expect("name") + 2..];
                nice.push(after_name.split(' ').nth(16).expect("nice field").parse().expect("number"));
            }
        }
        nice
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_run_at_the_lowest_priority() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(dir.path(), EngineOptions { background_compaction: true, ..Default::default() }).expect("engine");
        // The threads lower their own priority first thing; give them a moment to start.
        let deadline = Instant::now() + Duration::from_secs(10);
        // (Thread names in /proc are cut to 15 bytes.)
        while nice_of_threads_named("sensordb-compac").is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        // Other tests' engines may run in this process too: all of them are lowered.
        for name in ["sensordb-flush", "sensordb-compac"] {
            let nice = nice_of_threads_named(name);
            assert!(!nice.is_empty() && nice.iter().all(|&nice| nice == 19), "{name}: {nice:?}");
        }
        assert!(nice_of_threads_named("sensordb-reclai").iter().all(|&nice| nice == 0), "reclaim measures usage for writers: not lowered");
        engine.close().expect("closes");
    }
}
