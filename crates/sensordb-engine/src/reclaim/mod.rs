//! Bounded, cyclic storage: deciding which stored data is dead, giving its space back, and
//! slowing writers down as the disk fills, so the store runs for years on a fixed disk without
//! locking up (the failure modes and remedies of Zhivchikova & Shevchuk's Riak study).
//!
//! - [`policy`]: databases with a storage period and/or a capacity, per-series period overrides.
//! - [`fisherman`]: which partly dead segments to merge, and when (the Fisherman algorithm).
//! - [`throttle`]: the acknowledgement delay between the thresholds `U_l` and `U_h`.
//! - [`Reclaimer`] (here): one reclaim cycle, run by a background thread of the engine.
//!
//! A block is dead when its newest point is older than its series' *cutoff*: the latest of
//! now − storage period, the database's capacity cutoff (the oldest blocks beyond its capacity),
//! and the node's eviction cutoff (see below); every block of a deleted series is dead. Reads
//! never return points older than the cutoff, so data disappears at once and in time order even
//! before its space is reclaimed.
//!
//! Each cycle measures disk usage `U` = the larger of the data file system's used share
//! (statvfs) and sensordb's own bytes over the configured capacity, then:
//! 1. removes every sealed segment whose blocks are all dead, without reading it. Segments are
//!    written in time order (flushes of the memtable), so plain expiry always finds whole dead
//!    segments: the paper's "planing" mode;
//! 2. merges partly dead segments chosen by the Fisherman algorithm while usage is above the
//!    target `U_m` (hunger is full at `U_l`: from there any segment with dead data is taken),
//!    copying only the live blocks, by index and without decoding them, at a limited byte rate;
//! 3. as a last resort, when sensordb's OWN files reach `U_l` of its capacity (`capacity_bytes`,
//!    or the file system's size) and the dead data cannot bring them back to `U_m`, evicts the
//!    oldest data of the node (a cyclic store keeps the newest data when the disk is full),
//!    logged and counted. A file system filled by other processes never evicts: `U` counts
//!    their files for the throttle (writers wait, then get `NoSpace`, logged and counted in
//!    [`ReclaimStats`]), but deleting live data would not keep them from taking the space.
//!
//! Removed segments are closed by the store at once (reads in progress hold their own handle
//! until they end), so the file system really gets the space back.

pub mod fisherman;
pub mod policy;
pub mod throttle;

use crate::catalog::Catalog;
use crate::compaction::{BlockCopy, CompactionOptions, RateLimit};
use crate::error::Result;
use crate::fs::FileSystem;
use crate::model::{KeyText, SeriesId, SeriesKey, Timestamp};
use crate::store::{BlockLife, BlockStore};
use fisherman::{Candidate, Fisherman};
use parking_lot::{Mutex, RwLock};
use policy::Databases;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use throttle::{Admission, Throttle};

/// The warning that the file system is full of other processes' files, at most every 10 s.
static FULL_BY_OTHERS_LOG: crate::retry::LogLimiter = crate::retry::LogLimiter::new(crate::retry::LOG_INTERVAL);

/// The default [`ReclaimOptions::full_wait_max`].
pub const DEFAULT_FULL_WAIT_MAX: Duration = Duration::from_secs(4);

/// Knobs of reclaim and throttling. Defaults follow the paper's experience with a margin: merge
/// from 80% usage, throttle from 90%, stop writers at 95%.
#[derive(Clone, Debug)]
pub struct ReclaimOptions {
    /// `U_m`: the usage the Fisherman algorithm holds the disk at.
    pub target_usage: f64,
    /// `U_l`: acknowledgements are delayed above this usage.
    pub throttle_low: f64,
    /// `U_h`: writers wait for reclaim at this usage.
    pub throttle_high: f64,
    /// Bytes sensordb may use on its file system; `None` for the whole file system. Usage is
    /// the larger of the file system's used share and sensordb's own bytes over this (at most
    /// the file system's size). Only the latter, sensordb's own files, ever evicts live data.
    pub capacity_bytes: Option<u64>,
    /// Smoothing constant of the Fisherman's moving average.
    pub ewma_alpha: f64,
    /// Merge reads plus writes per second; 0 for no limit. Lifted at `U_h`.
    pub merge_bytes_per_second: u64,
    /// Evict the node's oldest data when sensordb's own files reach `U_l` of its capacity and
    /// reclaiming dead data cannot bring them back to `U_m`. Without it writers wait at `U_h`
    /// until data expires. A file system filled by others never evicts anything.
    pub evict_oldest_when_full: bool,
    /// Pause between reclaim cycles (a flush or a full disk starts one sooner).
    pub interval: Duration,
    /// How long a write waits at `U_h`, or after ENOSPC, for space before it fails with
    /// `NoSpace` (HTTP 503). 4 s by default: under the timeouts of common clients (Telegraf 5 s,
    /// influxdb-client 10 s), so they get an answer and retry instead of timing out.
    pub full_wait_max: Duration,
    /// Count the data file system's used share in `U` (statvfs). Off, only sensordb's own
    /// bytes over `capacity_bytes` count: for tests and benchmarks that must not depend on how
    /// full the host's disk is.
    pub file_system_usage: bool,
}

impl Default for ReclaimOptions {
    fn default() -> Self {
        ReclaimOptions {
            target_usage: 0.80,
            throttle_low: 0.90,
            throttle_high: 0.95,
            capacity_bytes: None,
            ewma_alpha: 0.1,
            merge_bytes_per_second: 64 << 20,
            evict_oldest_when_full: true,
            interval: Duration::from_secs(1),
            full_wait_max: DEFAULT_FULL_WAIT_MAX,
            file_system_usage: true,
        }
    }
}

impl ReclaimOptions {
    /// Checks the thresholds: `0 < U_m < U_l < U_h ≤ 1`.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let (m, l, h) = (self.target_usage, self.throttle_low, self.throttle_high);
        if !(0.0 < m && m < l && l < h && h <= 1.0) {
            return Err(format!("disk usage thresholds must satisfy 0 < target ({m}) < throttle_low ({l}) < throttle_high ({h}) ≤ 1"));
        }
        if !(self.ewma_alpha > 0.0 && self.ewma_alpha <= 1.0) {
            return Err(format!("ewma_alpha must be in (0, 1], got {}", self.ewma_alpha));
        }
        Ok(())
    }
}

/// Disk usage as measured by one cycle.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// `U`, the larger of the two shares below.
    pub share: f64,
    /// Used share of the data file system (statvfs), 0 when it cannot be read.
    pub file_system_share: f64,
    /// sensordb's own bytes over `capacity_bytes` below (0 when neither a capacity is
    /// configured nor the file system measured). Only this share evicts live data.
    pub own_share: f64,
    /// sensordb's bytes: segments, WAL, catalog.
    pub own_bytes: u64,
    /// The capacity `C` that `own_share` is relative to: the configured `capacity_bytes`, at
    /// most the file system's size; the file system's size without one.
    pub capacity_bytes: u64,
}

/// Counters and gauges for `/metrics` and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReclaimStats {
    pub usage: Usage,
    pub hunger: f64,
    /// The Fisherman's current take threshold `D_m`.
    pub dead_share_threshold: f64,
    pub dead_share_ewma: f64,
    /// Current acknowledgement delay (seconds; infinite while writers wait for space).
    pub throttle_seconds: f64,
    pub cycles: u64,
    pub segments_removed: u64,
    pub bytes_removed: u64,
    pub segments_merged: u64,
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    /// Bytes of live data made dead by eviction because the disk was full.
    pub bytes_evicted: u64,
    /// Dead bytes still on disk after the last cycle.
    pub dead_bytes: u64,
    /// Writes refused with `NoSpace` after waiting for space (the disk full, by sensordb or
    /// by others).
    pub writes_refused_no_space: u64,
    /// True while the file system is at `U_h` although sensordb's own files are under `U_l`:
    /// full of other processes' files. Writers wait and are refused; nothing live is evicted.
    pub full_by_others: bool,
}

/// Per-series cutoffs, published for readers after each cycle.
#[derive(Debug, Default)]
struct Cutoffs {
    /// Class of each series (index = id − 1); series beyond the end have no cutoff yet.
    class_of: Vec<u32>,
    /// Cutoff of each class: points older than it are dead.
    cutoff: Vec<Timestamp>,
}

impl Cutoffs {
    fn of(&self, series: SeriesId) -> Timestamp {
        let Some(index) = (series.0 as usize).checked_sub(1) else { return Timestamp::MIN };
        self.class_of.get(index).map_or(Timestamp::MIN, |&class| self.cutoff[class as usize])
    }
}

/// A retention class: the series of one database sharing one storage period.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Class {
    database: u32,
    period: Option<Duration>,
    deleted: bool,
}

/// What the reclaim thread keeps between cycles.
struct CycleState {
    fisherman: Fisherman,
    classes: Vec<Class>,
    class_index: HashMap<Class, u32>,
    /// Database names by index.
    database_names: Vec<String>,
    class_of: Vec<u32>,
    /// Catalog deletions and database version the classes were computed for.
    seen_deletions: u64,
    seen_databases_version: u64,
    /// The node eviction cutoff only moves forward.
    eviction_cutoff: Timestamp,
}

/// Runs reclaim cycles and answers writers' admission questions.
pub struct Reclaimer {
    options: ReclaimOptions,
    throttle: Throttle,
    databases_path: PathBuf,
    databases: RwLock<(Databases, u64)>,
    state: Mutex<CycleState>,
    cutoffs: RwLock<Arc<Cutoffs>>,
    usage_bits: AtomicU64,
    /// When `usage_bits` was last measured (never, at first).
    measured_at: Mutex<Option<std::time::Instant>>,
    /// Bytes writers reported since the last measurement began, and the capacity it found:
    /// admission adds them to the measured usage, so a fast writer cannot run past `U_h` on a
    /// small disk between two measurements.
    written_since_measure: AtomicU64,
    measured_capacity: AtomicU64,
    stats: Mutex<ReclaimStats>,
    /// Notified after every cycle, for writers waiting for space.
    cycled: parking_lot::Condvar,
    cycled_lock: Mutex<u64>,
}

impl Reclaimer {
    pub fn open(fs: &dyn FileSystem, data_dir: &Path, options: ReclaimOptions) -> Result<Reclaimer> {
        options.validate().map_err(crate::error::Error::InvalidOptions)?;
        let databases_path = data_dir.join(policy::DATABASES_FILE);
        let databases = Databases::load(fs, &databases_path)?;
        Ok(Reclaimer {
            throttle: Throttle::new(options.throttle_low, options.throttle_high),
            state: Mutex::new(CycleState {
                fisherman: Fisherman::with_full_usage(options.target_usage, options.throttle_low, options.ewma_alpha),
                classes: Vec::new(),
                class_index: HashMap::new(),
                database_names: Vec::new(),
                class_of: Vec::new(),
                seen_deletions: u64::MAX,
                seen_databases_version: u64::MAX,
                eviction_cutoff: Timestamp::MIN,
            }),
            options,
            databases_path,
            databases: RwLock::new((databases, 0)),
            cutoffs: RwLock::new(Arc::new(Cutoffs::default())),
            usage_bits: AtomicU64::new(0f64.to_bits()),
            measured_at: Mutex::new(None),
            written_since_measure: AtomicU64::new(0),
            measured_capacity: AtomicU64::new(0),
            stats: Mutex::new(ReclaimStats::default()),
            cycled: parking_lot::Condvar::new(),
            cycled_lock: Mutex::new(0),
        })
    }

    /// The databases and their policies.
    pub fn databases(&self) -> Databases {
        self.databases.read().0.clone()
    }

    /// The storage period of `key` under the current policies (see [`DatabasePolicy::period_of`]).
    ///
    /// [`DatabasePolicy::period_of`]: policy::DatabasePolicy::period_of
    pub fn period_of(&self, key: &crate::model::SeriesKey) -> Option<Duration> {
        self.databases.read().0.policies.get(key.database()).and_then(|p| p.period_of(key))
    }

    /// Changes the databases (durably) with `change`; the next cycle applies them.
    pub fn update_databases(&self, fs: &dyn FileSystem, change: impl FnOnce(&mut Databases)) -> Result<()> {
        let mut guard = self.databases.write();
        let mut next = guard.0.clone();
        change(&mut next);
        if next != guard.0 {
            next.save(fs, &self.databases_path)?;
            guard.0 = next;
            guard.1 += 1;
        }
        Ok(())
    }

    /// The last measured usage `U`.
    pub fn usage(&self) -> f64 {
        f64::from_bits(self.usage_bits.load(Ordering::Relaxed))
    }

    /// What a writer must do before acknowledging, at the last measured usage plus what writers
    /// reported since ([`Reclaimer::note_written`]).
    pub fn admission(&self) -> Admission {
        let capacity = self.measured_capacity.load(Ordering::Relaxed);
        let written = self.written_since_measure.load(Ordering::Relaxed);
        let since = if capacity == 0 { 0.0 } else { written as f64 / capacity as f64 };
        self.throttle.admission(self.usage() + since)
    }

    /// Counts `bytes` a writer just added to the disk (counted until the next measurement).
    pub fn note_written(&self, bytes: u64) {
        self.written_since_measure.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn stats(&self) -> ReclaimStats {
        self.stats.lock().clone()
    }

    /// Points of `series` older than this are dead and never returned by reads.
    pub fn cutoff(&self, series: SeriesId) -> Timestamp {
        self.cutoffs.read().of(series)
    }

    /// Waits until a cycle ends or `timeout` passes; returns the number of cycles so far.
    pub fn wait_for_cycle(&self, timeout: Duration) -> u64 {
        let mut cycles = self.cycled_lock.lock();
        let before = *cycles;
        self.cycled.wait_while_for(&mut cycles, |c| *c == before, timeout);
        *cycles
    }

    /// Measures usage `U` now.
    pub fn measure(&self, fs: &dyn FileSystem, data_dir: &Path, own_bytes: u64) -> Usage {
        // Reset before measuring: a write that lands meanwhile is counted twice at worst.
        self.written_since_measure.store(0, Ordering::Relaxed);
        let space = if self.options.file_system_usage { fs.space(data_dir).ok() } else { None };
        let file_system_share = space.map_or(0.0, |s| s.used_share());
        let capacity_bytes = match (self.options.capacity_bytes, space) {
            (Some(c), Some(s)) => c.min(s.total_bytes),
            (Some(c), None) => c,
            (None, Some(s)) => s.total_bytes,
            (None, None) => 0,
        };
        // sensordb's own files only: what other processes store never counts here.
        let own_share = if capacity_bytes == 0 { 0.0 } else { own_bytes as f64 / capacity_bytes as f64 };
        let usage = Usage { share: file_system_share.max(own_share), file_system_share, own_share, own_bytes, capacity_bytes };
        self.usage_bits.store(usage.share.to_bits(), Ordering::Relaxed);
        self.measured_capacity.store(capacity_bytes, Ordering::Relaxed);
        *self.measured_at.lock() = Some(std::time::Instant::now());
        self.stats.lock().usage = usage;
        usage
    }

    /// How long ago usage was last measured (`Duration::MAX` before the first measurement).
    pub fn measurement_age(&self) -> Duration {
        self.measured_at.lock().map_or(Duration::MAX, |at| at.elapsed())
    }

    /// One reclaim cycle. `own_bytes` reports sensordb's current bytes on disk; `now` is the
    /// wall clock in nanoseconds since the epoch; `compaction` gives block sizes for merges.
    #[allow(clippy::too_many_arguments)] // one call site, the engine; a struct would only rename them
    pub fn run_cycle(
        &self,
        fs: &dyn FileSystem,
        data_dir: &Path,
        store: &dyn BlockStore,
        catalog: &Catalog,
        compaction: &CompactionOptions,
        own_bytes: &dyn Fn() -> u64,
        now: Timestamp,
    ) -> Result<()> {
        let mut state = self.state.lock();
        let mut usage = self.measure(fs, data_dir, own_bytes());
        self.refresh_classes(&mut state, catalog);
        let mut cutoffs = self.compute_cutoffs(&state, store, now);
        let mut evicted = 0u64;
        // Last resort: make room by declaring the oldest data dead, when sensordb's OWN files
        // fill its capacity. A file system filled by other processes never evicts: deleting live
        // data would not stop them taking the space (they did, in issue 13); writers wait there.
        if self.options.evict_oldest_when_full && usage.own_share >= self.options.throttle_low && usage.capacity_bytes > 0 {
            let needed = ((usage.own_share - self.options.target_usage) * usage.capacity_bytes as f64).max(0.0) as u64;
            let dead = dead_bytes(store, &state.class_of, &cutoffs).0;
            if dead < needed {
                if let Some((cutoff, bytes)) = eviction_cutoff(store, &state.class_of, &cutoffs, needed - dead) {
                    if cutoff > state.eviction_cutoff {
                        tracing::warn!(
                            usage = usage.share,
                            needed,
                            evicted_bytes = bytes,
                            "disk full of live data: evicting the oldest data"
                        );
                        state.eviction_cutoff = cutoff;
                        evicted = bytes;
                        cutoffs = self.compute_cutoffs(&state, store, now);
                    }
                }
            }
        }
        let published = Arc::new(Cutoffs { class_of: state.class_of.clone(), cutoff: cutoffs.clone() });
        *self.cutoffs.write() = published;

        // 1. Whole dead segments, always, without reading them.
        let evaluated = evaluate_segments(store, &state.class_of, &cutoffs);
        let whole: Vec<u64> = evaluated.iter().filter(|c| c.dead_share >= 1.0).map(|c| c.segment).collect();
        let mut removed_bytes = 0;
        if !whole.is_empty() {
            // Not fed to the Fisherman's memory: removing a dead file costs no merge, and in
            // planing mode such files are most of what is reclaimed, so counting them would
            // hold his average near 1 and keep him from ever learning the partly dead fish.
            removed_bytes = store.remove_segments(&whole)?;
            usage = self.measure(fs, data_dir, own_bytes());
        }
        // 2. Partly dead segments, by the Fisherman's choice, while hungry.
        let mut merged = 0u64;
        let mut merge_error = None;
        let (mut merge_read, mut merge_written) = (0u64, 0u64);
        let mut remaining: Vec<Candidate> = evaluated.into_iter().filter(|c| c.dead_share < 1.0).collect();
        while let Some(best) = state.fisherman.select(usage.share, &remaining).into_iter().next() {
            remaining.retain(|c| c.segment != best.segment);
            let rate = if usage.share >= self.options.throttle_high { 0 } else { self.options.merge_bytes_per_second };
            let blocks = match store.try_blocks_of_segments(&[best.segment]) {
                Ok(blocks) => blocks,
                Err(e) => {
                    merge_error = Some(e);
                    break;
                }
            };
            let blocks: Vec<_> =
                blocks.into_iter().filter(|b| b.entry.max_timestamp >= class_cutoff(&state.class_of, &cutoffs, b.entry.series)).collect();
            let report = match crate::compaction::rewrite(
                store,
                catalog,
                &[best.segment],
                blocks,
                compaction,
                &mut RateLimit::new(rate),
                BlockCopy::Raw,
            ) {
                Ok(report) => report,
                // The inputs stay in place; the cycle's bookkeeping is still done, and the
                // caller retries later.
                Err(e) => {
                    merge_error = Some(e);
                    break;
                }
            };
            tracing::info!(
                segment = best.segment,
                dead_share = best.dead_share,
                usage = usage.share,
                ?report,
                "merged a partly dead segment"
            );
            state.fisherman.ate(best.dead_share);
            merged += 1;
            merge_read += report.bytes_read;
            merge_written += report.bytes_after;
            usage = self.measure(fs, data_dir, own_bytes());
        }
        let (dead_now, _) = dead_bytes(store, &state.class_of, &cutoffs);
        let full_by_others = usage.share >= self.options.throttle_high && usage.own_share < self.options.throttle_low;
        if full_by_others {
            if let Some(suppressed) = FULL_BY_OTHERS_LOG.allow("full by others") {
                tracing::warn!(
                    file_system_usage = usage.file_system_share,
                    own_usage = usage.own_share,
                    own_bytes = usage.own_bytes,
                    suppressed,
                    "disk full of other processes' files (sensordb's own are under its capacity): writers wait, then are refused; no live data is deleted"
                );
            }
        }
        let hunger = state.fisherman.hunger(usage.share);
        let threshold = state.fisherman.threshold(usage.share);
        let ewma = state.fisherman.ewma();
        drop(state);
        {
            let mut stats = self.stats.lock();
            stats.usage = usage;
            stats.hunger = hunger;
            stats.dead_share_threshold = threshold;
            stats.dead_share_ewma = ewma;
            stats.throttle_seconds = match self.throttle.admission(usage.share) {
                Admission::Now => 0.0,
                Admission::After(delay) => delay.as_secs_f64(),
                Admission::WaitForSpace => f64::INFINITY,
            };
            stats.cycles += 1;
            stats.segments_removed += whole.len() as u64;
            stats.bytes_removed += removed_bytes;
            stats.segments_merged += merged;
            stats.merge_bytes_read += merge_read;
            stats.merge_bytes_written += merge_written;
            stats.bytes_evicted += evicted;
            stats.dead_bytes = dead_now;
            stats.full_by_others = full_by_others;
        }
        *self.cycled_lock.lock() += 1;
        self.cycled.notify_all();
        match merge_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Counts a write refused with `NoSpace` after its wait for space.
    pub fn count_refused_write(&self) {
        self.stats.lock().writes_refused_no_space += 1;
    }

    /// Brings the per-series classes up to date with the catalog and the databases.
    fn refresh_classes(&self, state: &mut CycleState, catalog: &Catalog) {
        let (databases, version) = {
            let guard = self.databases.read();
            (guard.0.clone(), guard.1)
        };
        let deletions = catalog.deletions();
        if deletions != state.seen_deletions || version != state.seen_databases_version {
            state.class_of.clear();
            state.seen_deletions = deletions;
            state.seen_databases_version = version;
        }
        let first = SeriesId(state.class_of.len() as u32 + 1);
        let state = &mut *state;
        catalog.visit_texts_from(first, |text, deleted| {
            // Most keys are taken apart in place; only those a period override may match, or
            // escaped ones, are parsed (parsing every key of 2 M series was 1.7 s of CPU at
            // the first cycle after a start).
            let parts = KeyText::split(text).map(|parts| (parts.database(), databases.policies.get(parts.database())));
            let (database, period): (Cow<'_, str>, _) = match parts {
                Some((database, policy)) if policy.is_none_or(|p| p.overrides.is_empty()) => {
                    (Cow::Borrowed(database), policy.and_then(|p| p.period))
                }
                _ => {
                    let key = SeriesKey::parse(text).expect("BUG: catalog key texts are canonical keys");
                    let period = databases.policies.get(key.database()).and_then(|p| p.period_of(&key));
                    (Cow::Owned(key.database().to_string()), period)
                }
            };
            let database = match state.database_names.iter().position(|d| *d == database) {
                Some(index) => index as u32,
                None => {
                    state.database_names.push(database.into_owned());
                    state.database_names.len() as u32 - 1
                }
            };
            let class = Class { database, period, deleted };
            let index = match state.class_index.get(&class) {
                Some(&index) => index,
                None => {
                    state.classes.push(class.clone());
                    let index = state.classes.len() as u32 - 1;
                    state.class_index.insert(class, index);
                    index
                }
            };
            state.class_of.push(index);
        });
    }

    /// The cutoff of every class: period, database capacity, node eviction, deletion.
    fn compute_cutoffs(&self, state: &CycleState, store: &dyn BlockStore, now: Timestamp) -> Vec<Timestamp> {
        let databases = self.databases.read().0.clone();
        let mut cutoffs: Vec<Timestamp> = state
            .classes
            .iter()
            .map(|class| {
                if class.deleted {
                    return Timestamp::MAX;
                }
                let expiry = class.period.map_or(Timestamp::MIN, |p| now.saturating_sub(i64::try_from(p.as_nanos()).unwrap_or(i64::MAX)));
                expiry.max(state.eviction_cutoff)
            })
            .collect();
        // Capacity: per database, newest data first, the oldest beyond the capacity is dead.
        for (index, name) in state.database_names.iter().enumerate() {
            let Some(capacity) = databases.policies.get(name).and_then(|p| p.capacity_bytes) else { continue };
            // (newest point of this database in a segment, its live bytes there)
            let mut per_segment: Vec<(Timestamp, u64)> = Vec::new();
            let cutoff_of = |series: SeriesId| class_cutoff(&state.class_of, &cutoffs, series);
            store.visit_segments_against(&cutoff_of, &mut |summary, lives| {
                let (mut newest, mut bytes, mut all) = (Timestamp::MIN, 0u64, 0u64);
                for life in lives {
                    all += u64::from(life.bytes);
                    let Some(&class) = state.class_of.get(life.series.0 as usize - 1) else { continue };
                    if state.classes[class as usize].database as usize != index || life.max_timestamp < cutoffs[class as usize] {
                        continue;
                    }
                    newest = newest.max(life.max_timestamp);
                    bytes += u64::from(life.bytes);
                }
                if bytes > 0 {
                    // Capacity is disk bytes: the database's share of the file, headers,
                    // index and padding included.
                    let file_share = (summary.bytes as f64 * bytes as f64 / all as f64) as u64;
                    per_segment.push((newest, file_share.max(bytes)));
                }
            });
            per_segment.sort_by_key(|s| std::cmp::Reverse(s.0));
            let mut kept = 0u64;
            for (newest, bytes) in per_segment {
                kept += bytes;
                if kept > capacity {
                    let cutoff = newest.saturating_add(1);
                    for (class, c) in state.classes.iter().zip(cutoffs.iter_mut()) {
                        if class.database as usize == index {
                            *c = (*c).max(cutoff);
                        }
                    }
                    break;
                }
            }
        }
        cutoffs
    }
}

/// Whether no block can be dead under `cutoffs` (no retention period, deletion or eviction
/// applies: every cutoff is the start of time). A cycle then skips visiting every block of the
/// store, which it would otherwise do twice per cycle, every second: on a store of millions of
/// series that walk cost seconds of CPU each time, at start-up and while idle.
fn nothing_can_be_dead(cutoffs: &[Timestamp]) -> bool {
    cutoffs.iter().all(|&cutoff| cutoff == Timestamp::MIN)
}

fn class_cutoff(class_of: &[u32], cutoffs: &[Timestamp], series: SeriesId) -> Timestamp {
    match class_of.get((series.0 as usize).wrapping_sub(1)) {
        Some(&class) => cutoffs[class as usize],
        // Registered after this cycle began: live.
        None => Timestamp::MIN,
    }
}

fn is_dead(class_of: &[u32], cutoffs: &[Timestamp], life: &BlockLife) -> bool {
    life.max_timestamp < class_cutoff(class_of, cutoffs, life.series)
}

/// Dead share of every sealed segment that holds blocks.
fn evaluate_segments(store: &dyn BlockStore, class_of: &[u32], cutoffs: &[Timestamp]) -> Vec<Candidate> {
    if nothing_can_be_dead(cutoffs) {
        // What visiting every block would find, from the summaries alone.
        let summaries = store.summaries();
        return summaries
            .iter()
            .filter(|s| s.sealed && s.blocks > 0)
            .map(|s| Candidate { segment: s.id, dead_share: 0.0, bytes: s.bytes })
            .collect();
    }
    evaluate_segments_block_by_block(store, class_of, cutoffs)
}

/// [`evaluate_segments`] from every block's life.
fn evaluate_segments_block_by_block(store: &dyn BlockStore, class_of: &[u32], cutoffs: &[Timestamp]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let cutoff_of = |series: SeriesId| class_cutoff(class_of, cutoffs, series);
    store.visit_segments_against(&cutoff_of, &mut |summary, lives| {
        if !summary.sealed || lives.is_empty() {
            return;
        }
        let (mut dead, mut all) = (0u64, 0u64);
        for life in lives {
            all += u64::from(life.bytes);
            if is_dead(class_of, cutoffs, life) {
                dead += u64::from(life.bytes);
            }
        }
        let dead_share = if dead == all { 1.0 } else { dead as f64 / all.max(1) as f64 };
        out.push(Candidate { segment: summary.id, dead_share, bytes: summary.bytes });
    });
    out
}

/// (dead bytes, all bytes) of the whole store, in disk bytes: each segment's file size split
/// by the share of dead block bytes in it.
fn dead_bytes(store: &dyn BlockStore, class_of: &[u32], cutoffs: &[Timestamp]) -> (u64, u64) {
    if nothing_can_be_dead(cutoffs) {
        return (0, store.summaries().iter().map(|s| s.bytes).sum());
    }
    dead_bytes_block_by_block(store, class_of, cutoffs)
}

/// [`dead_bytes`] from every block's life.
fn dead_bytes_block_by_block(store: &dyn BlockStore, class_of: &[u32], cutoffs: &[Timestamp]) -> (u64, u64) {
    let (mut dead_total, mut all_total) = (0u64, 0u64);
    let cutoff_of = |series: SeriesId| class_cutoff(class_of, cutoffs, series);
    store.visit_segments_against(&cutoff_of, &mut |summary, lives| {
        let (mut dead, mut all) = (0u64, 0u64);
        for life in lives {
            all += u64::from(life.bytes);
            if is_dead(class_of, cutoffs, life) {
                dead += u64::from(life.bytes);
            }
        }
        all_total += summary.bytes;
        if all > 0 {
            dead_total += (summary.bytes as f64 * dead as f64 / all as f64) as u64;
        }
    });
    (dead_total, all_total)
}

/// The cutoff that makes at least `bytes` more of the oldest live data dead, segment by
/// segment (so whole segments die), with the bytes it makes dead; `None` when nothing is live.
fn eviction_cutoff(store: &dyn BlockStore, class_of: &[u32], cutoffs: &[Timestamp], bytes: u64) -> Option<(Timestamp, u64)> {
    let mut per_segment: Vec<(Timestamp, u64)> = Vec::new();
    let cutoff_of = |series: SeriesId| class_cutoff(class_of, cutoffs, series);
    store.visit_segments_against(&cutoff_of, &mut |summary, lives| {
        if !summary.sealed {
            return;
        }
        let (mut newest, mut live, mut all) = (Timestamp::MIN, 0u64, 0u64);
        for life in lives {
            all += u64::from(life.bytes);
            if !is_dead(class_of, cutoffs, life) {
                newest = newest.max(life.max_timestamp);
                live += u64::from(life.bytes);
            }
        }
        if live > 0 {
            // In disk bytes: the live share of the whole file.
            per_segment.push((newest, ((summary.bytes as f64 * live as f64 / all as f64) as u64).max(live)));
        }
    });
    per_segment.sort();
    let mut freed = 0u64;
    for (newest, live) in per_segment {
        freed += live;
        if freed >= bytes {
            return Some((newest.saturating_add(1), freed));
        }
    }
    None
}

#[cfg(test)]
mod tests;
