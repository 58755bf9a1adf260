//! The engine: ties catalog, WAL, memtables, block store and reads together, and runs the
//! background flusher.
//!
//! Write: check kinds against the catalog → append the batch to the WAL and insert it into the
//! active memtable (under a shared lock that only a memtable swap takes exclusively) → wait
//! until the WAL group holding it is durable → acknowledge.
//!
//! Flush (background thread, or [`Engine::flush`]): swap the active memtable for an empty one
//! and rotate the WAL (both under the exclusive lock, so every record in older WAL files is in
//! the frozen memtable or earlier) → encode one block per series (split at
//! `block_points_max`, fields of one row sharing one timestamp record; see [`crate::flush`])
//! into a flush group → append it to the open segment and fsync → publish
//! the blocks in the index → drop the frozen memtable → delete the WAL files it covered. The
//! group records the first WAL file it does not cover, so recovery replays only newer files even
//! if the deletion never happened.
//!
//! Recovery: open the catalog, scan segments (footers only), delete WAL files covered by the
//! segments, replay the rest into the memtable.

use crate::batch::WriteBatch;
use crate::catalog::{Catalog, SeriesEntry};
use crate::error::{Error, Result};
use crate::filenames::{catalog_path, parse_numbered_file, segment_dir, wal_dir, LOCK_FILE, WAL_EXTENSION};
use crate::flush::{add_inline, encode_group_paced};
use crate::fs::{FileSystem, RealFs};
use crate::memtable::Memtable;
use crate::memtable::ResolvedSeries;
use crate::model::{last_write_wins, SeriesId, SeriesKey, Timestamp, ValueColumn, ValueKind};
use crate::query::RangeRead;
use crate::reclaim::policy::{DatabasePolicy, Databases};
use crate::reclaim::throttle::Admission;
use crate::reclaim::{ReclaimOptions, ReclaimStats, Reclaimer};
use crate::segment::GroupBuilder;
use crate::store::{BlockStore, SegmentStore, SegmentStoreOptions, StoreStats};
use crate::wal::{Durability, Wal, WalOptions};
use parking_lot::{Condvar, Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Engine settings. `Default` gives the documented defaults on the real file system.
#[derive(Clone)]
pub struct EngineOptions {
    pub durability: Durability,
    /// Memory for buffered points, active plus frozen memtable. The active memtable is flushed at
    /// half of it; writers wait while it is over half and the previous flush still runs.
    pub memtable_bytes_max: usize,
    /// A segment is sealed once it reaches this size (R).
    pub segment_bytes_max: u64,
    /// Most points in one block; longer runs of a series are split.
    pub block_points_max: usize,
    /// Most payload bytes in one block of a byte series.
    pub block_bytes_max: usize,
    /// Largest accepted byte payload.
    pub payload_bytes_max: usize,
    /// A batch of only byte payloads holding at least this many bytes is written straight into
    /// a segment (one write, one fsync, group-committed with concurrent ones) instead of through
    /// the WAL and a later flush, which would write every byte twice. `usize::MAX` disables.
    pub direct_write_bytes_min: usize,
    /// Buffered points older than this are flushed even if the memtable is not full, so the WAL
    /// stays short.
    pub flush_interval: Duration,
    /// WAL file size before rotation.
    pub wal_file_bytes_max: u64,
    /// Memtable shards; more shards mean fewer writers meeting on one lock.
    pub memtable_shards: usize,
    /// Sealed segments whose blocks average fewer points than this are rewritten into long
    /// blocks (see [`crate::compaction`]).
    pub compaction_small_block_points: u64,
    /// Compact in a background thread; otherwise only [`Engine::compact`] does.
    pub background_compaction: bool,
    /// Retention, reclaim and throttling (see [`crate::reclaim`]).
    pub reclaim: ReclaimOptions,
    /// Reclaim in a background thread; otherwise only [`Engine::reclaim`] does.
    pub background_reclaim: bool,
    /// [`Engine::write`] itself delays its return as the disk fills (see
    /// [`crate::reclaim::throttle`]). A server that delays acknowledgements asynchronously turns
    /// this off and asks [`Engine::admission`] instead.
    pub throttle_writes: bool,
    /// The wall clock in nanoseconds since the epoch, against which storage periods run.
    pub clock: Clock,
    pub fs: Arc<dyn FileSystem>,
}

/// A source of "now" in nanoseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Usage older than this is measured again before a writer is admitted (a statvfs and a
/// directory listing).
const ADMISSION_MEASURE_AGE: Duration = Duration::from_millis(10);

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

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    })
}

impl Default for EngineOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        EngineOptions {
            durability: Durability::Fsync,
            memtable_bytes_max: 512 << 20,
            segment_bytes_max: 64 << 20,
            block_points_max: 16_384,
            block_bytes_max: 4 << 20,
            payload_bytes_max: 1 << 20,
            direct_write_bytes_min: 64 << 10,
            flush_interval: Duration::from_secs(300),
            wal_file_bytes_max: 64 << 20,
            memtable_shards: cores * 8,
            compaction_small_block_points: 2048,
            background_compaction: true,
            reclaim: ReclaimOptions::default(),
            background_reclaim: true,
            throttle_writes: true,
            clock: system_clock(),
            fs: Arc::new(RealFs),
        }
    }
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("durability", &self.durability)
            .field("memtable_bytes_max", &self.memtable_bytes_max)
            .field("segment_bytes_max", &self.segment_bytes_max)
            .field("block_points_max", &self.block_points_max)
            .field("payload_bytes_max", &self.payload_bytes_max)
            .field("flush_interval", &self.flush_interval)
            .field("reclaim", &self.reclaim)
            .finish_non_exhaustive()
    }
}

/// What start-up found and repaired.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub series: usize,
    pub segments: usize,
    pub wal_records_replayed: u64,
    pub points_replayed: u64,
    /// Every damaged spot worked around: (file, offset, what).
    pub problems: Vec<(PathBuf, u64, String)>,
    pub duration: Duration,
}

/// Sizes and counters.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    pub series: usize,
    pub memtable_points: usize,
    pub memtable_bytes: usize,
    pub store: StoreStats,
    pub catalog_bytes: u64,
    pub flushes: u64,
}

struct Memtables {
    active: Arc<Memtable>,
    /// Being flushed; readers still see it.
    frozen: Option<Arc<Memtable>>,
    /// WAL files before this id are covered once `frozen` is flushed.
    frozen_wal_checkpoint: u64,
}

struct FlushSignal {
    requested: bool,
    shutdown: bool,
}

struct Inner {
    options: EngineOptions,
    catalog: Catalog,
    wal: Option<Wal>,
    wal_dir: PathBuf,
    store: Arc<SegmentStore>,
    memtables: RwLock<Memtables>,
    /// Serialises flushes (background thread and explicit calls).
    flush_lock: Mutex<()>,
    signal: Mutex<FlushSignal>,
    signal_changed: Condvar,
    /// Notified after every flush attempt, for writers waiting for memory.
    flushed: Condvar,
    flushed_lock: Mutex<()>,
    flushes: AtomicU64,
    /// WAL checkpoint of the last flush: direct writes repeat it.
    flushed_wal_checkpoint: Mutex<u64>,
    poisoned: Mutex<Option<String>>,
    closed: AtomicBool,
    /// Serialises compactions and reclaim cycles (background threads and explicit calls).
    compaction_lock: Mutex<()>,
    last_flush: Mutex<Instant>,
    reclaimer: Reclaimer,
    data_dir: PathBuf,
    /// Set to start a reclaim cycle before the interval is up.
    reclaim_requested: AtomicBool,
}

/// The storage engine. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Engine {
    data_dir: PathBuf,
    inner: Arc<Inner>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    compactor: Mutex<Option<JoinHandle<()>>>,
    reclaim_thread: Mutex<Option<JoinHandle<()>>>,
    recovery: RecoveryReport,
    _lock: DirectoryLock,
}

impl Engine {
    /// Opens (or creates) the data directory `dir`, recovering whatever a crash left behind.
    pub fn open(dir: impl AsRef<Path>, mut options: EngineOptions) -> Result<Engine> {
        let started = Instant::now();
        let block_points_max = options.block_points_max.clamp(1, crate::block::BLOCK_POINTS_LIMIT as usize);
        if block_points_max != options.block_points_max {
            tracing::warn!(asked = options.block_points_max, used = block_points_max, "block_points_max held to the block format's limits");
            options.block_points_max = block_points_max;
        }
        let dir = dir.as_ref();
        let fs = options.fs.clone();
        fs.create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock = DirectoryLock::acquire(dir)?;
        let mut report = RecoveryReport::default();

        let (catalog, catalog_recovery) = Catalog::open(fs.as_ref(), &catalog_path(dir), options.durability == Durability::Fsync)?;
        if let Some((offset, what)) = catalog_recovery.truncated_at {
            report.problems.push((catalog_path(dir), offset, what));
        }
        report.series = catalog.len();

        let store_options =
            SegmentStoreOptions { segment_bytes_max: options.segment_bytes_max, sync: options.durability != Durability::None };
        let (store, store_recovery) = SegmentStore::open(fs.clone(), &segment_dir(dir), store_options)?;
        report.segments = store_recovery.segments;
        report.problems.extend(store_recovery.problems.iter().cloned());
        for (id, kind) in store.series_kinds() {
            adopt_lost_series(&catalog, &catalog_path(dir), id, kind, &mut report)?;
        }

        let active = Memtable::new(options.memtable_shards);
        let wal_dir = wal_dir(dir);
        let wal = if options.durability == Durability::None {
            None
        } else {
            remove_covered_wal_files(fs.as_ref(), &wal_dir, store_recovery.wal_checkpoint)?;
            let wal_options =
                WalOptions { durability: options.durability, file_bytes_max: options.wal_file_bytes_max, ..WalOptions::default() };
            let catalog_file = catalog_path(dir);
            let mut replay = |record: &[u8]| -> Result<()> {
                let batch =
                    WriteBatch::decode(record).map_err(|what| Error::corruption(&wal_dir, 0, format!("undecodable WAL batch: {what}")))?;
                for entry in batch.entries() {
                    adopt_lost_series(&catalog, &catalog_file, entry.series, entry.values.kind(), &mut report)?;
                    match catalog.kind(entry.series) {
                        Some(kind) if kind == entry.values.kind() => active.insert(entry),
                        _ => {
                            tracing::error!(
                                series = entry.series.0,
                                "WAL names a series the catalog lacks, or points of another kind; skipped"
                            );
                            continue;
                        }
                    }
                    report.points_replayed += entry.timestamps.len() as u64;
                }
                report.wal_records_replayed += 1;
                Ok(())
            };
            let (wal, wal_recovery) = Wal::open(fs.clone(), &wal_dir, wal_options, &mut replay)?;
            report.problems.extend(wal_recovery.truncated.iter().cloned());
            Some(wal)
        };

        let reclaimer = Reclaimer::open(fs.as_ref(), dir, options.reclaim.clone())?;
        let inner = Arc::new(Inner {
            reclaimer,
            data_dir: dir.to_path_buf(),
            reclaim_requested: AtomicBool::new(false),
            catalog,
            wal,
            wal_dir,
            store: Arc::new(store),
            memtables: RwLock::new(Memtables { active: Arc::new(active), frozen: None, frozen_wal_checkpoint: 0 }),
            flush_lock: Mutex::new(()),
            signal: Mutex::new(FlushSignal { requested: false, shutdown: false }),
            signal_changed: Condvar::new(),
            flushed: Condvar::new(),
            flushed_lock: Mutex::new(()),
            flushes: AtomicU64::new(0),
            flushed_wal_checkpoint: Mutex::new(store_recovery.wal_checkpoint),
            poisoned: Mutex::new(None),
            closed: AtomicBool::new(false),
            compaction_lock: Mutex::new(()),
            last_flush: Mutex::new(Instant::now()),
            options,
        });
        let flusher = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("sensordb-flush".into())
                .spawn(move || {
                    background_priority();
                    inner.run_flusher()
                })
                .map_err(|e| Error::io(dir, e))?
        };
        let compactor = if inner.options.background_compaction {
            let inner = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("sensordb-compact".into())
                    .spawn(move || {
                        background_priority();
                        inner.run_compactor()
                    })
                    .map_err(|e| Error::io(dir, e))?,
            )
        } else {
            None
        };
        let reclaim_thread = if inner.options.background_reclaim {
            let inner = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("sensordb-reclaim".into())
                    .spawn(move || inner.run_reclaimer())
                    .map_err(|e| Error::io(dir, e))?,
            )
        } else {
            None
        };
        report.duration = started.elapsed();
        for (file, offset, what) in &report.problems {
            tracing::warn!(file = %file.display(), offset, problem = %what, "recovery repaired damage");
        }
        Ok(Engine {
            data_dir: dir.to_path_buf(),
            inner,
            flusher: Mutex::new(Some(flusher)),
            compactor: Mutex::new(compactor),
            reclaim_thread: Mutex::new(reclaim_thread),
            recovery: report,
            _lock: lock,
        })
    }

    /// The data directory this engine owns.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// What start-up found.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The id of `key`, registering the series with `kind` when it is new (durably, before any
    /// write to it can be acknowledged).
    pub fn series_id(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId> {
        self.inner.catalog.get_or_create(key, kind)
    }

    /// [`Engine::series_id`] for a caller that writes the id before handing it to anyone: a
    /// new series is made durable by the first write naming it (one fsync for all the new
    /// series of a batch) instead of before this returns.
    pub fn series_id_unsynced(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId> {
        self.inner.catalog.get_or_create_unsynced(key, kind)
    }

    /// The id of `key` if the series exists.
    pub fn find_series(&self, key: &SeriesKey) -> Option<SeriesId> {
        self.inner.catalog.find(key)
    }

    pub fn series(&self, id: SeriesId) -> Option<SeriesEntry> {
        self.inner.catalog.get(id)
    }

    /// Live series of `database` and `measurement` (any when `None`) carrying every tag of
    /// `tag_filter`.
    pub fn select_series(&self, database: Option<&str>, measurement: Option<&str>, tag_filter: &[(&str, &str)]) -> Vec<SeriesEntry> {
        self.inner.catalog.select(database, measurement, tag_filter)
    }

    /// Writes `batch`; returns once it is durable under the configured durability.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// Points of `series` in `[from, to)`, in time order, repeated timestamps resolved.
    pub fn read(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> RangeRead {
        let inner = &self.inner;
        // Dead points (expired, beyond capacity, evicted) are gone for readers at once, even
        // before their space is reclaimed.
        let from = from.max(inner.reclaimer.cutoff(series));
        let (active, frozen) = {
            let memtables = inner.memtables.read();
            (memtables.active.clone(), memtables.frozen.clone())
        };
        // Memtables before the index: a flush publishes blocks before it drops the frozen
        // memtable, so every point is in one or the other.
        let mut memory = Vec::with_capacity(2);
        if let Some(frozen) = frozen {
            memory.extend(frozen.read(series, from, to));
        }
        memory.extend(active.read(series, from, to));
        let store: Arc<dyn BlockStore> = inner.store.clone();
        RangeRead::new(store, series, from, to, memory)
    }

    /// Flushes, seals the open segment, and compacts until no segment is worth rewriting.
    /// Returns what each compaction did.
    pub fn compact(&self) -> Result<Vec<crate::compaction::CompactionReport>> {
        self.flush()?;
        self.inner.store.seal()?;
        let mut reports = Vec::new();
        // Bounded: every round removes at least one segment of short blocks for good.
        for _ in 0..10_000 {
            match self.inner.compact_once()? {
                Some(report) => reports.push(report),
                None => break,
            }
        }
        Ok(reports)
    }

    /// Flushes everything buffered into the store and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable()?;
        // A frozen memtable left by a failed attempt is flushed first, then the active one.
        for _ in 0..2 {
            self.inner.flush_once()?;
        }
        Ok(())
    }

    /// Runs one reclaim cycle now (the background thread runs them every
    /// [`ReclaimOptions::interval`]): removes dead segments, merges as the Fisherman chooses,
    /// evicts when full. See [`crate::reclaim`].
    pub fn reclaim(&self) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.reclaim_once()
    }

    pub fn reclaim_options(&self) -> &ReclaimOptions {
        &self.inner.options.reclaim
    }

    pub fn reclaim_stats(&self) -> ReclaimStats {
        self.inner.reclaimer.stats()
    }

    /// What a writer should do before acknowledging at the current disk usage; for servers
    /// that run with [`EngineOptions::throttle_writes`] off and delay acknowledgements
    /// themselves.
    pub fn admission(&self) -> Admission {
        self.inner.admission()
    }

    /// Blocks until a reclaim cycle ends or `timeout` passes, asking for a cycle now.
    pub fn wait_for_reclaim(&self, timeout: Duration) {
        self.inner.request_reclaim();
        self.inner.reclaimer.wait_for_cycle(timeout);
    }

    /// Databases and their retention policies.
    pub fn databases(&self) -> Databases {
        self.inner.reclaimer.databases()
    }

    /// Creates `name` (durably) unless it exists; its policy starts empty (keep until full).
    pub fn create_database(&self, name: &str) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidSeriesKey(crate::model::SeriesKeyError::EmptyDatabase));
        }
        if self.inner.reclaimer.databases().policies.contains_key(name) {
            return Ok(());
        }
        self.inner.reclaimer.update_databases(self.inner.options.fs.as_ref(), |d| {
            d.policies.entry(name.to_string()).or_default();
        })
    }

    /// Sets the retention policy of `name`, creating the database if needed; the next reclaim
    /// cycle applies it.
    pub fn set_database_policy(&self, name: &str, policy: DatabasePolicy) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidSeriesKey(crate::model::SeriesKeyError::EmptyDatabase));
        }
        self.inner.reclaimer.update_databases(self.inner.options.fs.as_ref(), |d| {
            d.policies.insert(name.to_string(), policy);
        })?;
        self.inner.request_reclaim();
        Ok(())
    }

    /// Deletes the series of `database` and `measurement` carrying every tag of `tag_filter`
    /// (durably); their data is dead from now on and their keys free for new series. Returns
    /// how many series were deleted.
    pub fn delete_series(&self, database: &str, measurement: Option<&str>, tag_filter: &[(&str, &str)]) -> Result<usize> {
        self.inner.check_writable()?;
        let ids: Vec<SeriesId> = self.inner.catalog.select(Some(database), measurement, tag_filter).iter().map(|e| e.id).collect();
        let deleted = self.inner.catalog.delete_many(&ids)?;
        if deleted > 0 {
            self.inner.request_reclaim();
        }
        Ok(deleted)
    }

    pub fn stats(&self) -> EngineStats {
        let inner = &self.inner;
        let memtables = inner.memtables.read();
        let frozen_points = memtables.frozen.as_ref().map_or(0, |m| m.points());
        let frozen_bytes = memtables.frozen.as_ref().map_or(0, |m| m.bytes());
        EngineStats {
            series: inner.catalog.len(),
            memtable_points: memtables.active.points() + frozen_points,
            memtable_bytes: memtables.active.bytes() + frozen_bytes,
            store: inner.store.stats(),
            catalog_bytes: inner.catalog.file_bytes(),
            flushes: inner.flushes.load(Ordering::Relaxed),
        }
    }

    /// Flushes, seals the open segment and stops the flusher. Dropping the engine does the same
    /// but cannot report errors.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// Stops the engine the way a killed process stops: no flush, no seal, buffered points
    /// stay only in the WAL. For crash and recovery tests.
    pub fn abandon(self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        {
            let mut signal = self.inner.signal.lock();
            signal.shutdown = true;
            self.inner.signal_changed.notify_all();
        }
        if let Some(handle) = self.flusher.lock().take() {
            let _ = handle.join();
        }
        if let Some(handle) = self.compactor.lock().take() {
            let _ = handle.join();
        }
        if let Some(handle) = self.reclaim_thread.lock().take() {
            let _ = handle.join();
        }
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        {
            let mut signal = self.inner.signal.lock();
            signal.shutdown = true;
            self.inner.signal_changed.notify_all();
        }
        if let Some(handle) = self.flusher.lock().take() {
            let _ = handle.join();
        }
        if let Some(handle) = self.compactor.lock().take() {
            let _ = handle.join();
        }
        if let Some(handle) = self.reclaim_thread.lock().take() {
            let _ = handle.join();
        }
        let flushed = if self.inner.poisoned.lock().is_none() {
            self.inner.flush_once().and_then(|_| self.inner.flush_once()).map(|_| ())
        } else {
            Ok(())
        };
        flushed.and(self.inner.store.seal())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "engine shutdown failed; the WAL still holds unflushed data");
        }
    }
}

impl Inner {
    fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        if let Some(reason) = self.poisoned.lock().as_ref() {
            return Err(Error::Poisoned(reason.clone()));
        }
        Ok(())
    }

    fn poison(&self, error: &Error) {
        let mut poisoned = self.poisoned.lock();
        if poisoned.is_none() {
            tracing::error!(error = %error, "engine refuses further writes");
            *poisoned = Some(error.to_string());
        }
    }

    fn flush_threshold_bytes(&self) -> usize {
        (self.options.memtable_bytes_max / 2).max(1)
    }

    /// Writes `batch`; on a full disk, waits for reclaim (up to
    /// [`ReclaimOptions::full_wait_max`]) and tries again instead of failing; with
    /// [`EngineOptions::throttle_writes`], delays the return as the disk fills.
    fn write(&self, batch: &WriteBatch) -> Result<()> {
        let started = Instant::now();
        let wait_max = self.options.reclaim.full_wait_max;
        loop {
            if self.options.throttle_writes && self.admission() == Admission::WaitForSpace {
                self.wait_for_space(started, wait_max)?;
                continue;
            }
            match self.write_once(batch) {
                Err(e) if e.is_no_space() && started.elapsed() < wait_max => {
                    tracing::warn!(error = %e, "write paused: disk full; waiting for reclaim");
                    self.request_reclaim();
                    self.reclaimer.wait_for_cycle(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
                Ok(()) => break,
            }
        }
        if self.options.throttle_writes {
            if let Admission::After(delay) = self.admission() {
                std::thread::sleep(delay);
            }
        }
        Ok(())
    }

    /// Waits while usage is at `U_h`, until reclaim brings it down or `wait_max` since
    /// `started` passes.
    fn wait_for_space(&self, started: Instant, wait_max: Duration) -> Result<()> {
        if started.elapsed() >= wait_max {
            return Err(Error::NoSpace { path: self.data_dir.clone() });
        }
        self.check_writable()?;
        self.request_reclaim();
        self.reclaimer.wait_for_cycle(Duration::from_millis(200));
        Ok(())
    }

    fn write_once(&self, batch: &WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
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
            self.poison(&e);
            return Err(e);
        }
        if self.writes_direct(batch) {
            return self.write_direct(batch);
        }
        self.wait_for_memory()?;
        let record = self.wal.as_ref().map(|_| {
            let mut record = Vec::new();
            batch.encode(&mut record);
            record
        });
        let (position, active_bytes) = {
            let memtables = self.memtables.read();
            let position = match (&self.wal, &record) {
                (Some(wal), Some(record)) => Some(wal.append(record)?),
                _ => None,
            };
            memtables.active.insert_all(batch.entries());
            (position, memtables.active.bytes())
        };
        if active_bytes >= self.flush_threshold_bytes() {
            self.request_flush();
        }
        if let (Some(wal), Some(position)) = (&self.wal, position) {
            if let Err(e) = wal.wait_durable(position) {
                if e.is_fatal() {
                    self.poison(&e);
                }
                return Err(e);
            }
        }
        Ok(())
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
        let mut group = GroupBuilder::new();
        for entry in batch.entries() {
            let resolved = resolve(entry);
            add_inline(&mut group, &resolved, self.options.block_points_max, self.options.block_bytes_max);
        }
        // A direct group covers no WAL record: it must not move the checkpoint past what flushes
        // have covered.
        let checkpoint = *self.flushed_wal_checkpoint.lock();
        match self.store.put_group(group, checkpoint) {
            Ok(_) => Ok(()),
            Err(e) if !e.is_fatal() => Err(e),
            Err(e) => {
                self.poison(&e);
                Err(e)
            }
        }
    }

    /// Backpressure: waits while the active memtable is over its threshold and the previous
    /// flush has not finished, or while it is over the whole memory budget.
    fn wait_for_memory(&self) -> Result<()> {
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
            self.check_writable()?;
            let mut guard = self.flushed_lock.lock();
            self.flushed.wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    fn request_flush(&self) {
        let mut signal = self.signal.lock();
        if !signal.requested {
            signal.requested = true;
            // The compactor waits on the same condition variable: wake both.
            self.signal_changed.notify_all();
        }
    }

    fn run_flusher(&self) {
        let mut failures = 0u32;
        loop {
            {
                let mut signal = self.signal.lock();
                let timeout = if failures > 0 { Duration::from_millis(100) } else { Duration::from_secs(1) };
                if !signal.requested && !signal.shutdown {
                    self.signal_changed.wait_for(&mut signal, timeout);
                }
                if signal.shutdown {
                    return;
                }
                let due = self.last_flush.lock().elapsed() >= self.options.flush_interval;
                if !signal.requested && !due && failures == 0 {
                    continue;
                }
                signal.requested = false;
            }
            match self.flush_once_paced(true) {
                Ok(_) => {
                    failures = 0;
                    // A new segment may have pushed usage over a threshold.
                    self.request_reclaim();
                }
                Err(e) if e.is_no_space() => {
                    failures += 1;
                    self.request_reclaim();
                    tracing::warn!(error = %e, failures, "flush postponed: disk full");
                }
                // A failed flush changes nothing on disk (the segment is cut back, the frozen
                // memtable kept), so transient errors are retried rather than fatal.
                Err(e) if !e.is_fatal() => {
                    failures += 1;
                    tracing::warn!(error = %e, failures, "flush failed; will retry");
                }
                Err(e) => {
                    self.poison(&e);
                    failures += 1;
                }
            }
            let _guard = self.flushed_lock.lock();
            self.flushed.notify_all();
        }
    }

    fn compaction_options(&self) -> crate::compaction::CompactionOptions {
        crate::compaction::CompactionOptions {
            small_block_points: self.options.compaction_small_block_points.max(1),
            run_bytes_max: self.options.segment_bytes_max.max(1 << 20),
            block_points_max: self.options.block_points_max,
            block_bytes_max: self.options.block_bytes_max,
            points_per_group: 4 << 20,
        }
    }

    fn compact_once(&self) -> Result<Option<crate::compaction::CompactionReport>> {
        let _compacting = self.compaction_lock.lock();
        crate::compaction::compact_once(&self.store, &self.catalog, &self.compaction_options())
    }

    /// Background compaction: looks for work every few seconds until shutdown.
    fn run_compactor(&self) {
        const PERIOD: Duration = Duration::from_secs(5);
        loop {
            {
                let mut signal = self.signal.lock();
                if !signal.shutdown {
                    self.signal_changed.wait_for(&mut signal, PERIOD);
                }
                if signal.shutdown {
                    return;
                }
            }
            if self.poisoned.lock().is_some() {
                continue;
            }
            match self.compact_once() {
                Ok(_) => {}
                // Inputs stay in place when a compaction fails; it is retried later.
                Err(e) => tracing::warn!(error = %e, "compaction failed; will retry"),
            }
        }
    }

    /// Admission at usage measured at most [`ADMISSION_MEASURE_AGE`] ago, so writers faster
    /// than reclaim cycles cannot run far past a threshold between two cycles.
    fn admission(&self) -> Admission {
        if self.reclaimer.measurement_age() > ADMISSION_MEASURE_AGE {
            self.reclaimer.measure(self.options.fs.as_ref(), &self.data_dir, self.own_bytes());
        }
        self.reclaimer.admission()
    }

    fn request_reclaim(&self) {
        self.reclaim_requested.store(true, Ordering::SeqCst);
        let _signal = self.signal.lock();
        self.signal_changed.notify_all();
    }

    /// sensordb's bytes on disk: segments, catalog, WAL.
    fn own_bytes(&self) -> u64 {
        let wal_bytes: u64 = std::fs::read_dir(&self.wal_dir)
            .map(|entries| entries.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
            .unwrap_or(0);
        self.store.stats().bytes + self.catalog.file_bytes() + wal_bytes
    }

    fn reclaim_once(&self) -> Result<()> {
        let _maintenance = self.compaction_lock.lock();
        self.reclaim_requested.store(false, Ordering::SeqCst);
        let now = (self.options.clock)();
        self.reclaimer.run_cycle(
            self.options.fs.as_ref(),
            &self.data_dir,
            &self.store,
            &self.catalog,
            &self.compaction_options(),
            &|| self.own_bytes(),
            now,
        )
    }

    /// Background reclaim: a cycle every interval, or sooner when asked.
    fn run_reclaimer(&self) {
        loop {
            {
                let mut signal = self.signal.lock();
                if !signal.shutdown && !self.reclaim_requested.load(Ordering::SeqCst) {
                    self.signal_changed.wait_for(&mut signal, self.options.reclaim.interval);
                }
                if signal.shutdown {
                    return;
                }
            }
            if self.poisoned.lock().is_some() {
                std::thread::sleep(self.options.reclaim.interval);
                continue;
            }
            if let Err(e) = self.reclaim_once() {
                // Inputs stay in place when a merge fails; the next cycle tries again.
                tracing::warn!(error = %e, "reclaim cycle failed; will retry");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Flushes the frozen memtable, freezing the active one first if nothing is frozen.
    /// Returns whether anything was written.
    fn flush_once(&self) -> Result<bool> {
        self.flush_once_paced(false)
    }

    /// [`Self::flush_once`]; `paced` (the background flush) lets the encoding pause (see
    /// [`FLUSH_PACE_SLICE`]).
    fn flush_once_paced(&self, paced: bool) -> Result<bool> {
        let _flushing = self.flush_lock.lock();
        let began = Instant::now();
        let (frozen, wal_checkpoint) = {
            let mut memtables = self.memtables.write();
            if memtables.frozen.is_none() {
                if memtables.active.is_empty() {
                    *self.last_flush.lock() = Instant::now();
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
            }
            (memtables.frozen.clone().expect("BUG: frozen memtable vanished"), memtables.frozen_wal_checkpoint)
        };
        let frozen_at = began.elapsed();
        let mut pacer = FlushPacer::new(paced);
        let group = encode_group_paced(&frozen, &self.catalog, self.options.block_points_max, self.options.block_bytes_max, &mut || {
            pacer.pace(|| self.memtables.read().active.bytes() < self.flush_threshold_bytes() / 2 && !self.signal.lock().shutdown)
        });
        let encoded_at = began.elapsed();
        let (blocks, group_bytes) = (group.block_count(), group.bytes());
        if !group.is_empty() {
            if self.options.durability != Durability::None {
                self.catalog.sync()?;
            }
            self.store.put_group(group, wal_checkpoint)?;
            *self.flushed_wal_checkpoint.lock() = wal_checkpoint;
        }
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
        self.memtables.write().frozen = None;
        drop(frozen);
        self.flushes.fetch_add(1, Ordering::Relaxed);
        *self.last_flush.lock() = Instant::now();
        if let Some(wal) = &self.wal {
            // The data is in the store; failing to delete old WAL files only costs replay time.
            if let Err(e) = wal.remove_files_before(wal_checkpoint) {
                tracing::warn!(error = %e, dir = %self.wal_dir.display(), "could not trim the WAL");
            }
        }
        Ok(true)
    }
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

/// Encoding a flush in one go takes a whole core for tens of milliseconds (~70 ms per 16 MiB
/// memtable of `sensordb bench tx`), and on a small machine every writer's latency then waits
/// for CPU behind it. The background flush therefore pauses for `FLUSH_PACE_PAUSE` after every
/// `FLUSH_PACE_SLICE` of encoding (a third of a core at most) while it has time: while the active
/// memtable is under half its flush threshold, so writers are far from waiting for this flush.
/// Once it is half full, or the engine closes, the flush runs at full speed. Explicit flushes
/// (`Engine::flush`, close) never pause. A lower thread priority was tried instead and did not
/// help: the scheduler still gives an idle-priority thread whole slices (docs/BENCHMARKS.md).
pub const FLUSH_PACE_SLICE: Duration = Duration::from_millis(2);
/// See [`FLUSH_PACE_SLICE`].
pub const FLUSH_PACE_PAUSE: Duration = Duration::from_millis(4);

/// Times the encoding between pauses.
struct FlushPacer {
    enabled: bool,
    since_pause: Instant,
    pauses: u32,
}

impl FlushPacer {
    fn new(enabled: bool) -> FlushPacer {
        FlushPacer { enabled, since_pause: Instant::now(), pauses: 0 }
    }

    /// Called between rows: pauses when a slice is used up and `has_time()` says so.
    fn pace(&mut self, has_time: impl FnOnce() -> bool) {
        if !self.enabled || self.since_pause.elapsed() < FLUSH_PACE_SLICE {
            return;
        }
        if has_time() {
            std::thread::sleep(FLUSH_PACE_PAUSE);
            self.pauses += 1;
        } else {
            // Writers may soon wait for this flush: no more pauses.
            self.enabled = false;
        }
        self.since_pause = Instant::now();
    }
}

/// Measurement under which series whose catalog record was lost to damage are re-registered.
pub const LOST_SERIES_MEASUREMENT: &str = "sensordb_lost_series";

/// Most series ids re-registered as lost at once. An id further beyond the catalog's end is
/// taken for damage in whatever names it, not for lost catalog records: re-registering it would
/// make start-up create (and under `fsync` sync) millions of placeholder records.
pub const LOST_SERIES_MAX: usize = 65_536;

/// When stored data names series `id` but the catalog (cut after damage) ends before it,
/// registers placeholder series `sensordb_lost_series,id=<n> value` up to `id`, so the data stays
/// readable and the id is never handed to a new, unrelated series. Returns false (registering
/// nothing) when `id` lies more than [`LOST_SERIES_MAX`] beyond the catalog's end.
fn adopt_lost_series(catalog: &Catalog, catalog_file: &Path, id: SeriesId, kind: ValueKind, report: &mut RecoveryReport) -> Result<bool> {
    let known = catalog.len();
    let wanted = id.0 as usize;
    if wanted <= known {
        return Ok(true);
    }
    if wanted - known > LOST_SERIES_MAX {
        report.problems.push((
            catalog_file.to_path_buf(),
            0,
            format!("data names series id {wanted}, far beyond the catalog's last id {known}: taken for damage, not adopted"),
        ));
        return Ok(false);
    }
    for next in known + 1..=wanted {
        let key = SeriesKey::new(LOST_SERIES_MEASUREMENT, [("id", next.to_string())], "value")?;
        // Ids below `id` with no data of their own take the same kind; nothing reads them.
        catalog.get_or_create(&key, kind)?;
    }
    report.problems.push((
        catalog_file.to_path_buf(),
        0,
        format!(
            "series ids {}..={wanted} had data but no catalog record; registered as {LOST_SERIES_MEASUREMENT},id=<id> value",
            known + 1
        ),
    ));
    Ok(true)
}

/// Deletes WAL files whose records are all in segments already.
fn remove_covered_wal_files(fs: &dyn FileSystem, dir: &Path, checkpoint: u64) -> Result<()> {
    if !fs.exists(dir) {
        return Ok(());
    }
    let mut removed = false;
    for path in fs.list(dir).map_err(|e| Error::io(dir, e))? {
        if parse_numbered_file(&path, WAL_EXTENSION).is_some_and(|id| id < checkpoint) {
            fs.remove(&path).map_err(|e| Error::io(&path, e))?;
            removed = true;
        }
    }
    if removed {
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}

/// An exclusive advisory lock on the data directory, so two engines never share it.
struct DirectoryLock {
    _file: std::fs::File,
}

impl DirectoryLock {
    fn acquire(dir: &Path) -> Result<DirectoryLock> {
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| Error::io(&path, e))?;
        // SAFETY: flock on a valid descriptor owned by `file` for the duration of the call.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if locked != 0 {
            return Err(Error::io(&path, std::io::Error::other("data directory is in use by another sensordb process")));
        }
        Ok(DirectoryLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_flush_pacer_pauses_after_each_slice_only_while_there_is_time() {
        // Disabled (explicit flushes): never asks, never pauses.
        let mut pacer = FlushPacer::new(false);
        std::thread::sleep(FLUSH_PACE_SLICE);
        pacer.pace(|| panic!("a disabled pacer asks nothing"));
        assert_eq!(pacer.pauses, 0);

        let mut pacer = FlushPacer::new(true);
        // Within the slice: no pause, no question.
        pacer.since_pause = Instant::now();
        pacer.pace(|| panic!("asked within the slice"));
        // Slice used up, time left: a pause of FLUSH_PACE_PAUSE.
        pacer.since_pause = Instant::now() - FLUSH_PACE_SLICE;
        let started = Instant::now();
        pacer.pace(|| true);
        assert!(started.elapsed() >= FLUSH_PACE_PAUSE);
        assert_eq!(pacer.pauses, 1);
        // No time left (the active memtable is half full): no pause, and none after.
        pacer.since_pause = Instant::now() - FLUSH_PACE_SLICE;
        pacer.pace(|| false);
        assert_eq!(pacer.pauses, 1);
        pacer.since_pause = Instant::now() - FLUSH_PACE_SLICE;
        pacer.pace(|| panic!("once out of time, a flush runs to its end"));
        assert_eq!(pacer.pauses, 1);
    }
}
