//! The engine: ties catalog, WAL, memtables, block store and reads together, and runs the
//! background flusher, compactor and reclaimer.
//!
//! Write: check kinds against the catalog → append the batch to the WAL and insert it into the
//! active memtable (under a shared lock that only a memtable swap takes exclusively) → wait
//! until the WAL group holding it is durable → acknowledge.
//!
//! Flush (background thread, or [`Engine::flush`]): swap the active memtable for an empty one
//! and rotate the WAL (both under the exclusive lock, so every record in older WAL files is in
//! the frozen memtable or earlier) → encode one block per series (split at
//! `block_points_max`, fields of one row sharing one timestamp record; see [`crate::flush`])
//! into a flush group → hand the frozen memtable's completion marks to the mark sink (or carry
//! them forward in the WAL; see [`crate::mark`]) → hand the group to the block store, which makes it durable (the segment store:
//! append it to the open segment and fsync) → publish the blocks in the index → drop the frozen
//! memtable → delete the WAL files it covered. The group records the first WAL file it does not
//! cover, so recovery replays only newer files even if the deletion never happened.
//!
//! Recovery: open the catalog and the store (the segment store scans footers only), delete WAL
//! files covered by the store, replay the rest into the memtable.
//!
//! # How the pieces fit
//! This module holds the [`Engine`] facade and its shared state, `Inner`: catalog, WAL,
//! memtables and store, plus one struct per kind of coordination, each with its own locks:
//! `FlushState` (one flush at a time, writers waiting for memory), `WorkerSignals` (waking the
//! background threads), `Health` (closed or poisoned), `Maintenance` (one compaction or reclaim
//! cycle at a time, and the reclaimer). The submodules each implement one concern on `Inner` or
//! `Engine`:
//! - `options`: [`EngineOptions`] and the clock;
//! - `recovery`: opening a directory (lock, catalog, store, WAL replay) into the parts
//!   [`Engine::open`] assembles;
//! - `write`: the write path, direct writes, memory backpressure, waiting out ENOSPC;
//! - `admission`: the throttle every writer goes through as the disk fills (wait at `U_h`,
//!   delayed acknowledgements between `U_l` and `U_h`), for the engine's writes and the server's;
//! - `workers`: the background flush, compaction and reclaim loops and the flush itself;
//! - `pacer`: how a background flush yields the CPU to writers;
//! - `admin`: databases, series deletion, reclaim controls and statistics.
//!
//! Sealed blocks live behind `Arc<dyn BlockStore>` ([`crate::store`]): the segment files of the
//! data directory for [`Engine::open`], any store for [`Engine::open_with_store`]. Flushes and
//! direct writes put groups, reads list and read blocks, and compaction and reclaim rewrite and
//! remove segments, all through that trait.
//!
//! Dependencies go one way: `options`, `pacer` and `recovery` import nothing from this module,
//! which imports their types; `write`, `admission`, `workers` and `admin` use this module's types and only add
//! `impl` blocks, so nothing here imports from them.

mod activity;
mod admin;
mod admission;
pub(crate) mod block_cache;
mod ends;
mod options;
mod pacer;
mod recovery;
mod workers;
mod write;

pub use activity::SEAL_IDLE_POINTS_MIN;
pub use block_cache::QueryStart;
pub use ends::LastPoint;
pub use options::{system_clock, Clock, EngineOptions};
pub use recovery::{RecoveryReport, LOST_SERIES_MAX, LOST_SERIES_MEASUREMENT};

use crate::batch::WriteBatch;
use crate::catalog::{Catalog, SeriesCursor, SeriesEntry};
use crate::error::{Error, Result};
use crate::mark::{MarkSink, TxMark};
use crate::memtable::Memtable;
use crate::model::{SeriesId, SeriesKey, Timestamp, ValueKind};
use crate::query::RangeRead;
use crate::reclaim::Reclaimer;
use crate::store::{BlockStore, SeriesDirectory, StoreStats};
use crate::wal::Wal;
use parking_lot::{Condvar, Mutex, RwLock};
use recovery::DirectoryLock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Sizes and counters.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    pub series: usize,
    pub memtable_points: usize,
    pub memtable_bytes: usize,
    pub store: StoreStats,
    pub catalog_bytes: u64,
    pub flushes: u64,
    /// Flush attempts that failed (a full disk, say); the background flush retries them with
    /// a growing pause.
    pub flush_failures: u64,
    /// Compaction attempts that failed; retried the same way.
    pub compaction_failures: u64,
}

/// The memtables a reader sees, taken before it lists the store's blocks: a flush publishes
/// its blocks before it drops the frozen memtable, so every point is in one or the other.
struct ReadableMemtables {
    frozen: Option<Arc<Memtable>>,
    active: Arc<Memtable>,
}

impl ReadableMemtables {
    fn of(inner: &Inner) -> ReadableMemtables {
        let memtables = inner.memtables.read();
        ReadableMemtables { frozen: memtables.frozen.clone(), active: memtables.active.clone() }
    }

    /// Oldest first: the frozen one (a flush under way), then the active one, which ranks
    /// above it on a repeated timestamp.
    fn oldest_first(&self) -> impl Iterator<Item = &Memtable> {
        self.frozen.iter().map(|m| m.as_ref()).chain([self.active.as_ref()])
    }
}

struct Memtables {
    active: Arc<Memtable>,
    /// Being flushed; readers still see it.
    frozen: Option<Arc<Memtable>>,
    /// WAL files before this id are covered once `frozen` is flushed.
    frozen_wal_checkpoint: u64,
    /// The completion marks of the records whose points are in `active`, in write order
    /// (pushed under the shared lock, like the points).
    active_marks: Mutex<Vec<TxMark>>,
    /// The marks of `frozen`'s records, given to the [`MarkSink`] by the flush.
    frozen_marks: Vec<TxMark>,
    /// [`BlockStore::log_frozen`] when `frozen` was frozen, for `log_flushed` after its flush.
    frozen_log_token: u64,
}

/// What the background threads are asked to do; they all wait on `changed`.
struct WorkerSignals {
    state: Mutex<SignalState>,
    changed: Condvar,
    /// Set to start a reclaim cycle before the interval is up.
    reclaim_requested: AtomicBool,
}

struct SignalState {
    flush_requested: bool,
    shutdown: bool,
}

/// Flush bookkeeping.
struct FlushState {
    /// Serialises flushes (background thread and explicit calls).
    running: Mutex<()>,
    /// Notified after every flush attempt, for writers waiting for memory.
    attempted: Condvar,
    attempted_lock: Mutex<()>,
    count: AtomicU64,
    /// WAL checkpoint of the last flush: direct writes repeat it.
    wal_checkpoint: Mutex<u64>,
    last: Mutex<Instant>,
    /// Failed flush attempts, all told.
    failures: AtomicU64,
    /// True while the last flush attempt failed for lack of space: writers waiting for memory
    /// then give up after `full_wait_max` instead of waiting for ever.
    failed_no_space: AtomicBool,
    /// Writes taken, for sealing a segment whose load has ended.
    activity: activity::WriteActivity,
}

/// Whether the engine still takes writes.
struct Health {
    closed: AtomicBool,
    /// Why the engine refuses writes after a fatal error.
    poisoned: Mutex<Option<String>>,
}

impl Health {
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

    fn is_poisoned(&self) -> bool {
        self.poisoned.lock().is_some()
    }
}

/// Compaction and reclaim: both rewrite or remove segments, so they run one at a time.
struct Maintenance {
    /// Serialises compactions and reclaim cycles (background threads and explicit calls).
    running: Mutex<()>,
    reclaimer: Reclaimer,
    /// Failed compaction attempts, all told.
    compaction_failures: AtomicU64,
}

/// The state every thread of the engine shares.
struct Inner {
    options: EngineOptions,
    data_dir: PathBuf,
    catalog: Catalog,
    wal: Option<Wal>,
    wal_dir: PathBuf,
    store: Arc<dyn BlockStore>,
    memtables: RwLock<Memtables>,
    flush: FlushState,
    signals: WorkerSignals,
    health: Health,
    maintenance: Maintenance,
    /// Each series' newest sealed point and oldest sealed time, for [`Engine::last_points`]
    /// and [`Engine::oldest_bounds`].
    ends: ends::SeriesEnds,
    /// Decoded blocks of recent reads.
    block_cache: Arc<block_cache::BlockCache>,
    /// Where flushes hand completion marks before their WAL files go (see [`crate::mark`]).
    mark_sink: Mutex<Option<Arc<dyn MarkSink>>>,
}

/// What the engine tells its store about series: the catalog, and each series' period under
/// the reclaimer's current policies.
struct Directory(Weak<Inner>);

impl SeriesDirectory for Directory {
    fn period(&self, series: SeriesId) -> Option<Duration> {
        let inner = self.0.upgrade()?;
        let entry = inner.catalog.get(series)?;
        inner.maintenance.reclaimer.period_of(&entry.key)
    }

    fn series(&self, series: SeriesId) -> Option<(Arc<SeriesKey>, ValueKind)> {
        let entry = self.0.upgrade()?.catalog.get(series)?;
        Some((entry.key, entry.kind))
    }

    fn register(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId> {
        self.0.upgrade().ok_or(Error::Closed)?.catalog.get_or_create(key, kind)
    }

    fn blocks_changed(&self, series: &[SeriesId]) {
        if let Some(inner) = self.0.upgrade() {
            inner.ends.forget(series.iter().copied());
        }
    }
}

/// The background threads, joined at close.
#[derive(Default)]
struct Workers {
    flusher: Mutex<Option<JoinHandle<()>>>,
    compactor: Mutex<Option<JoinHandle<()>>>,
    reclaimer: Mutex<Option<JoinHandle<()>>>,
}

impl Workers {
    fn join(&self) {
        for worker in [&self.flusher, &self.compactor, &self.reclaimer] {
            if let Some(handle) = worker.lock().take() {
                let _ = handle.join();
            }
        }
    }
}

/// The storage engine. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Engine {
    data_dir: PathBuf,
    inner: Arc<Inner>,
    workers: Workers,
    recovery: RecoveryReport,
    _lock: DirectoryLock,
}

impl Engine {
    /// Opens (or creates) the data directory `dir`, recovering whatever a crash left behind.
    pub fn open(dir: impl AsRef<Path>, options: EngineOptions) -> Result<Engine> {
        Engine::start(dir.as_ref(), options, None)
    }

    /// [`Engine::open`] over `store` instead of the segment files in `dir` (which still holds
    /// the catalog, the WAL and the databases). The store is open already, so the options that
    /// shape segment files (`segment_bytes_max`, and `durability` for the store's own writes)
    /// are its own business. The engine takes the WAL checkpoint and the series of stored blocks
    /// from it, as it does from its own segments.
    pub fn open_with_store(dir: impl AsRef<Path>, options: EngineOptions, store: Arc<dyn BlockStore>) -> Result<Engine> {
        Engine::start(dir.as_ref(), options, Some(store))
    }

    fn start(dir: &Path, mut options: EngineOptions, store: Option<Arc<dyn BlockStore>>) -> Result<Engine> {
        let started = Instant::now();
        let block_points_max = options.block_points_max.clamp(1, crate::block::BLOCK_POINTS_LIMIT as usize);
        if block_points_max != options.block_points_max {
            tracing::warn!(asked = options.block_points_max, used = block_points_max, "block_points_max held to the block format's limits");
            options.block_points_max = block_points_max;
        }
        let block_points_max = options.block_points_max as u64;
        if options.compaction_small_block_points > block_points_max {
            // Full blocks would count as short, and each output would be rewritten again.
            let used = (block_points_max / 2).max(1);
            tracing::warn!(
                asked = options.compaction_small_block_points,
                used,
                block_points_max,
                "compaction_small_block_points held to half of block_points_max"
            );
            options.compaction_small_block_points = used;
        }
        let recovered = recovery::recover(dir, &options, store)?;
        recovered.catalog.set_series_per_database_max(options.series_per_database_max);
        let mut report = recovered.report;
        let reclaimer = Reclaimer::open(options.fs.as_ref(), dir, options.reclaim.clone())?;
        let inner = Arc::new(Inner {
            data_dir: dir.to_path_buf(),
            catalog: recovered.catalog,
            wal: recovered.wal,
            wal_dir: recovered.wal_dir,
            store: recovered.store,
            memtables: RwLock::new(Memtables {
                active: Arc::new(recovered.memtable),
                frozen: None,
                frozen_wal_checkpoint: 0,
                active_marks: Mutex::new(recovered.marks),
                frozen_marks: Vec::new(),
                frozen_log_token: 0,
            }),
            flush: FlushState {
                running: Mutex::new(()),
                attempted: Condvar::new(),
                attempted_lock: Mutex::new(()),
                count: AtomicU64::new(0),
                wal_checkpoint: Mutex::new(recovered.wal_checkpoint),
                last: Mutex::new(Instant::now()),
                failures: AtomicU64::new(0),
                failed_no_space: AtomicBool::new(false),
                activity: activity::WriteActivity::new(),
            },
            signals: WorkerSignals {
                state: Mutex::new(SignalState { flush_requested: false, shutdown: false }),
                changed: Condvar::new(),
                reclaim_requested: AtomicBool::new(false),
            },
            health: Health { closed: AtomicBool::new(false), poisoned: Mutex::new(None) },
            maintenance: Maintenance { running: Mutex::new(()), reclaimer, compaction_failures: AtomicU64::new(0) },
            ends: ends::SeriesEnds::default(),
            block_cache: Arc::new(block_cache::BlockCache::new(options.block_cache_bytes)),
            mark_sink: Mutex::new(None),
            options,
        });
        // A weak reference: the store is part of `Inner`, which must not keep itself alive.
        inner.store.set_series_directory(Arc::new(Directory(Arc::downgrade(&inner))));
        let workers = Workers::default();
        inner.start_workers(dir, &workers)?;
        report.duration = started.elapsed();
        for (file, offset, what) in &report.problems {
            tracing::warn!(file = %file.display(), offset, problem = %what, "recovery repaired damage");
        }
        Ok(Engine { data_dir: dir.to_path_buf(), inner, workers, recovery: report, _lock: recovered.lock })
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

    /// Live series of `database`, which [`EngineOptions::series_per_database_max`] bounds.
    pub fn series_in_database(&self, database: &str) -> usize {
        self.inner.catalog.series_in_database(database)
    }

    /// Changes [`EngineOptions::series_per_database_max`] of a running engine.
    pub fn set_series_per_database_max(&self, max: usize) {
        self.inner.catalog.set_series_per_database_max(max);
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

    /// Calls `visit` with the id, kind and canonical key text ([`SeriesKey::canonical`]; take it
    /// apart with [`KeyText::split`](crate::KeyText::split), or parse it) of every live series
    /// of `database` (and `measurement` when given, and tag `tag.0` = `tag.1` when given)
    /// created after `since` (every one without it), in id order. Returns the cursor after
    /// them, or `None` when a series was deleted since `since` (visit everything again). A list
    /// of millions of series is built without a parsed key per series; series are not created
    /// while it runs.
    pub fn visit_series(
        &self,
        since: Option<SeriesCursor>,
        database: &str,
        measurement: Option<&str>,
        tag: Option<(&str, &str)>,
        visit: impl FnMut(SeriesId, ValueKind, &str),
    ) -> Option<SeriesCursor> {
        self.inner.catalog.visit_selected(since, database, measurement, tag, visit)
    }

    /// Where the catalog stands now: it changes whenever a series is created or deleted, so a
    /// caller may keep what [`Engine::select_series`] answered until it changes.
    pub fn series_cursor(&self) -> SeriesCursor {
        self.inner.catalog.cursor()
    }

    /// Writes `batch`; returns once it is durable under the configured durability.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.inner.write(batch, &[])
    }

    /// [`Engine::write`] with completion marks stored in the same WAL record as the points (see
    /// [`crate::mark`]): once this returns `Ok`, the marks are as durable as the points. Marks
    /// with an empty batch are logged alone. Without a WAL (`Durability::None`, see
    /// [`Engine::logs_marks`]) the marks are only kept in memory until the next flush gives them
    /// to the sink.
    pub fn write_with_marks(&self, batch: &WriteBatch, marks: &[TxMark]) -> Result<()> {
        self.inner.write(batch, marks)
    }

    /// Whether [`Engine::write_with_marks`] makes marks durable (the engine keeps a WAL).
    pub fn logs_marks(&self) -> bool {
        self.inner.wal.is_some()
    }

    /// Registers where flushes give the marks of flushed data (replacing any sink before). Until
    /// one is registered, flushes carry marks forward in the WAL (see [`crate::mark`]).
    pub fn set_mark_sink(&self, sink: Option<Arc<dyn MarkSink>>) {
        *self.inner.mark_sink.lock() = sink;
    }

    /// The marks whose data is not flushed yet: those found by WAL replay at open, carried
    /// forward, or written since, not yet given to the sink. A server rebuilding its set of
    /// completed transactions takes these after registering its sink: every mark is then in
    /// this list, or given to the sink, or both.
    pub fn unflushed_marks(&self) -> Vec<TxMark> {
        let memtables = self.inner.memtables.read();
        let mut marks = memtables.frozen_marks.clone();
        marks.extend_from_slice(&memtables.active_marks.lock());
        marks
    }

    /// A completion mark the store keeps beside its blocks ([`BlockStore::logged_mark`]): one
    /// logged by this engine or by another sharing the store. `None` from stores that keep none.
    pub fn logged_mark(&self, client: &[u8; 16], tx: &[u8; 16]) -> Result<Option<TxMark>> {
        self.inner.store.logged_mark(client, tx)
    }

    /// The start of a query that reads many series: given to each of its reads
    /// ([`RangeRead::in_query`]), it keeps the query's reads from pushing each other's blocks
    /// out of the block cache.
    pub fn query_start(&self) -> QueryStart {
        self.inner.block_cache.query_start()
    }

    /// The live nodes sharing the store and their native addresses ([`BlockStore::peers`]).
    pub fn store_peers(&self) -> Vec<(u16, String)> {
        self.inner.store.peers()
    }

    /// [`Engine::logged_mark`] of several (client, transaction) ids, in order, looked up at once
    /// ([`BlockStore::logged_marks`]).
    pub fn logged_marks(&self, ids: &[([u8; 16], [u8; 16])]) -> Result<Vec<Option<TxMark>>> {
        self.inner.store.logged_marks(ids)
    }

    /// Points of `series` in `[from, to)`, in time order, repeated timestamps resolved.
    pub fn read(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> RangeRead {
        self.read_with_edge(series, from, to, None)
    }

    /// A read of `series` in `[from, to)` whose consumer takes at most `limit` points, oldest
    /// first (`newest` false, read with `next_view`) or newest first (`next_view_back`): of
    /// the memtables only the `limit` points at that end are copied. The first `limit` points
    /// in that order are the full read's; past them the read may lack points.
    pub fn read_edge(&self, series: SeriesId, from: Timestamp, to: Timestamp, newest: bool, limit: usize) -> RangeRead {
        self.read_with_edge(series, from, to, Some((newest, limit)))
    }

    fn read_with_edge(&self, series: SeriesId, from: Timestamp, to: Timestamp, edge: Option<(bool, usize)>) -> RangeRead {
        let inner = &self.inner;
        // Dead points (expired, beyond capacity, evicted) are gone for readers at once, even
        // before their space is reclaimed.
        let from = from.max(inner.maintenance.reclaimer.cutoff(series));
        // Each memtable's points at the consumer's end suffice: a point past its first
        // `limit` of one memtable has `limit` points of that memtable before it in the read.
        let read = |memtable: &Memtable| match edge {
            None => memtable.read(series, from, to),
            Some((newest, limit)) => memtable.read_edge(series, from, to, newest, limit),
        };
        let memory: Vec<_> = ReadableMemtables::of(inner).oldest_first().filter_map(read).collect();
        RangeRead::new(inner.store.clone(), series, from, to, memory).with_cache(inner.block_cache.clone())
    }

    /// The newest live point of each of `series` (`None` for a series without one), without
    /// reading history: the memtables, then a cache of each series' newest sealed point (see
    /// `engine/ends.rs`). Costs a hash lookup or two per series once the cache is warm.
    pub fn last_points(&self, series: &[SeriesId]) -> Result<Vec<Option<LastPoint>>> {
        let inner = &self.inner;
        let readable = ReadableMemtables::of(inner);
        let memtables: Vec<&Memtable> = readable.oldest_first().collect();
        inner.ends.newest(inner.store.as_ref(), &memtables, series, |id| inner.maintenance.reclaimer.cutoff(id))
    }

    /// For each of `series`, a time no later than its oldest live point (`None`: it has no
    /// points), from the memtables and a cache of each series' oldest sealed time filled from
    /// the store's index (see `engine/ends.rs`), no block read: a query that wants only the
    /// oldest rows of many series reads those whose bound lets them hold one.
    /// Dead points (older than the series' cutoff) do not count, so the bound is at least the
    /// cutoff; a series whose points are all dead may still get one.
    pub fn oldest_bounds(&self, series: &[SeriesId]) -> Vec<Option<Timestamp>> {
        let inner = &self.inner;
        let readable = ReadableMemtables::of(inner);
        let memtables: Vec<&Memtable> = readable.oldest_first().collect();
        inner.ends.oldest(inner.store.as_ref(), &memtables, series, |id| inner.maintenance.reclaimer.cutoff(id))
    }

    /// Flushes, seals the open segment, and compacts until no segment is worth rewriting.
    /// Returns what each compaction did.
    pub fn compact(&self) -> Result<Vec<crate::compaction::CompactionReport>> {
        self.flush()?;
        self.inner.store.seal()?;
        let mut reports = Vec::new();
        // Bounded: every round leaves fewer segments, or fewer segments of several groups.
        for _ in 0..10_000 {
            match self.inner.compact_once(false)? {
                Some(report) => reports.push(report),
                None => break,
            }
        }
        Ok(reports)
    }

    /// Flushes everything buffered into the store and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.health.check_writable()?;
        // A frozen memtable left by a failed attempt is flushed first, then the active one.
        for _ in 0..2 {
            self.inner.flush_once()?;
        }
        Ok(())
    }

    /// Flushes, seals the open segment and stops the flusher. Dropping the engine does the same
    /// but cannot report errors.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// Stops the engine the way a killed process stops: no flush, no seal, buffered points
    /// stay only in the WAL. For crash and recovery tests.
    pub fn abandon(self) {
        self.inner.health.closed.store(true, Ordering::SeqCst);
        self.stop_workers();
    }

    fn stop_workers(&self) {
        {
            let mut signal = self.inner.signals.state.lock();
            signal.shutdown = true;
            self.inner.signals.changed.notify_all();
        }
        self.workers.join();
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.health.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.stop_workers();
        let flushed = if self.inner.health.is_poisoned() {
            Ok(())
        } else {
            self.inner.flush_once().and_then(|_| self.inner.flush_once()).map(|_| ())
        };
        let sealed = self.inner.store.seal();
        // Under `Fsync` the WAL holds every acknowledged point not in a segment, durably, and
        // the next start replays it (and seals an unsealed segment): a final flush or seal that
        // fails (a full disk) loses nothing, so it must neither block the stop nor fail it.
        // Under `Os` the WAL's last writes may be only in the page cache, where a clean close
        // promises more (power-loss safety up to it), so the error is returned; without a WAL
        // (`Durability::None`) the buffered points are lost, and the error says so.
        if self.inner.wal.is_some() && self.inner.options.durability == crate::wal::Durability::Fsync {
            for (what, outcome) in [("flush", &flushed), ("seal", &sealed)] {
                if let Err(e) = outcome {
                    tracing::warn!(error = %e, "final {what} at close failed; the WAL keeps the points for the next start");
                }
            }
            return Ok(());
        }
        flushed.and(sealed)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "engine shutdown failed; the WAL still holds unflushed data");
        }
    }
}
