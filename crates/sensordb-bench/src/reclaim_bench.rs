//! `sensordb bench reclaim`: sustained ingest with the store kept full (issue 4).
//!
//! One run opens an engine in a fresh directory and feeds it a time-ordered stream of
//! random-walk floats (unrounded, so every value carries noise down to its last bits and stores
//! at several bytes a point) from `writers` threads, each owning its share of the sensors. The
//! run has two phases, both counted in bytes as the store writes them (points × the stream's
//! own bytes per point, measured early in the same run, before anything is reclaimed):
//!
//! 1. fill: `fill_capacities` × C, so the store is full and reclaim is removing segments;
//! 2. measure: `measure_capacities` × C more, timed. The rate is the points of this phase over
//!    its wall time.
//!
//! With a live share V the node has an own-byte capacity C (`ReclaimOptions::capacity_bytes`)
//! and the one database written a capacity of V·C, so the database's oldest data dies by
//! capacity in time order and live data stays at V of the disk. Without V (the empty-store
//! baseline) there is no capacity and no policy: the same stream, the same amounts, nothing
//! reclaimed. Disk usage is sensordb's own bytes only: the bench's file system reports no
//! statvfs figures, so how full the real disk is does not matter.
//!
//! Writers go through the engine's admission themselves, as the server does ([`Engine::admit`]
//! before and [`Engine::acknowledgement_delay`] after each write, with `throttle_writes` off), so the time they were delayed or waited
//! for space can be counted.
//!
//! Partly dead data: a share of the series (tag `class=short`) gets a storage-period override of
//! a fraction of the capacity horizon (how much time V·C holds), so their blocks die long before
//! the segments that hold them, and space comes back only by merging (the Fisherman). Storage
//! periods run on a simulated clock: the newest timestamp written (each sensor writes at 1 Hz of
//! data time, far faster than real time).

use crate::engine_bench::{directory_bytes, process_cpu_time};
use sensordb_engine::{
    Admission, DatabasePolicy, DiskSpace, Durability, Engine, EngineOptions, FileSystem, PeriodOverride, RealFs, ReclaimOptions,
    ReclaimStats, SeriesId, SeriesKey, StorageFile, ValueColumn, ValueKind, WriteBatch,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The database every series is written to.
const DATABASE: &str = "bench";
/// 2024-01-01T00:00:00Z: where data time starts.
const START_NANOS: i64 = 1_704_067_200_000_000_000;
const SECOND_NANOS: i64 = 1_000_000_000;

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct ReclaimBenchConfig {
    /// Scratch directory; each run uses (and removes) a fresh subdirectory.
    pub dir: PathBuf,
    pub durability: Durability,
    pub writers: usize,
    /// Series, each a random walk written at 1 Hz of data time.
    pub sensors: u32,
    /// Points per write batch.
    pub batch_points: usize,
    pub seed: u64,
    /// The node's own-byte capacity C.
    pub capacity_bytes: u64,
    /// Live-data share V: the database's capacity is V·C. `None`: the empty-store baseline.
    pub live_share: Option<f64>,
    pub segment_bytes_max: u64,
    pub memtable_bytes_max: usize,
    pub reclaim_interval: Duration,
    /// Merge byte rate (`ReclaimOptions::merge_bytes_per_second`; 0 for no limit).
    pub merge_bytes_per_second: u64,
    pub background_compaction: bool,
    /// Bytes written before the measurement, in units of C.
    pub fill_capacities: f64,
    /// Bytes written during the measurement, in units of C.
    pub measure_capacities: f64,
    /// Share of the series with a short storage period (0: none).
    pub short_share: f64,
    /// Their period, as a share of the capacity horizon.
    pub short_period_share: f64,
    /// `ReclaimOptions`' `target_usage`, `throttle_low` and `throttle_high` (U_m, U_l, U_h).
    pub disk_usage_limits: (f64, f64, f64),
}

impl Default for ReclaimBenchConfig {
    fn default() -> Self {
        ReclaimBenchConfig {
            dir: PathBuf::from("target/bench-reclaim"),
            durability: Durability::Fsync,
            writers: 2,
            sensors: 1000,
            batch_points: 10_000,
            seed: 123,
            capacity_bytes: 256 << 20,
            live_share: None,
            segment_bytes_max: 4 << 20,
            memtable_bytes_max: 16 << 20,
            reclaim_interval: Duration::from_millis(200),
            merge_bytes_per_second: ReclaimOptions::default().merge_bytes_per_second,
            background_compaction: false,
            fill_capacities: 2.0,
            measure_capacities: 2.0,
            short_share: 0.0,
            short_period_share: 0.25,
            disk_usage_limits: {
                let defaults = ReclaimOptions::default();
                (defaults.target_usage, defaults.throttle_low, defaults.throttle_high)
            },
        }
    }
}

/// What one run measured. Counters are differences over the measured phase.
#[derive(Clone, Debug, Default)]
pub struct ReclaimFigures {
    /// Points written in the measured phase and its wall time.
    pub points: u64,
    pub wall: Duration,
    pub points_per_second: f64,
    /// User + system CPU time of the whole process in the measured phase (writers, flusher,
    /// WAL, reclaim): less sensitive than wall time to other work on a shared machine.
    pub cpu: Duration,
    pub points_per_cpu_second: f64,
    /// Stored bytes per point of this stream (segment bytes over flushed points, measured before
    /// the first reclaim).
    pub bytes_per_point: f64,
    /// Bytes ingested in the measured phase: points × bytes per point.
    pub bytes_ingested: u64,
    /// Usage `U` as reclaim last measured it at the end, and the largest it measured.
    pub usage_end: f64,
    pub usage_max: f64,
    /// Largest own bytes over C sampled from the directory (every 100 ms).
    pub directory_share_max: f64,
    pub segments_removed: u64,
    pub segments_merged: u64,
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    pub bytes_evicted: u64,
    pub cycles: u64,
    /// Writer time spent in throttle delays and waiting for space, summed over writers.
    pub throttle_delay: Duration,
    pub space_wait: Duration,
    /// Data time the database's capacity holds (seconds), and the short period, if any.
    pub horizon_seconds: f64,
    pub short_period: Option<Duration>,
    /// Segments on disk at the end.
    pub segments_end: usize,
}

impl ReclaimFigures {
    /// Merge bytes written per byte ingested.
    pub fn write_amplification(&self) -> f64 {
        self.merge_bytes_written as f64 / self.bytes_ingested.max(1) as f64
    }

    pub fn stored_bytes_per_second(&self) -> f64 {
        self.points_per_second * self.bytes_per_point
    }
}

/// The real file system without statvfs figures, so usage is sensordb's own bytes over C.
struct OwnBytesOnly(RealFs);

impl FileSystem for OwnBytesOnly {
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        self.0.create(path)
    }
    fn create_for_appends(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        self.0.create_for_appends(path)
    }
    fn open_rw(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        self.0.open_rw(path)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        self.0.open_read(path)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.0.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.0.rename(from, to)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        self.0.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.0.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.0.sync_dir(dir)
    }
    fn space(&self, _dir: &Path) -> std::io::Result<DiskSpace> {
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "the bench measures sensordb's own bytes only"))
    }
}

/// One sensor: its series and the state of its random walk.
struct Sensor {
    id: SeriesId,
    value: f64,
    rng: u64,
}

impl Sensor {
    /// The next value: a step of up to ±0.1, every bit of it noise.
    fn next(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.value += ((self.rng >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.2;
        self.value
    }
}

/// The counters at the start of the measured phase.
#[derive(Clone)]
struct Snapshot {
    at: Instant,
    cpu: Duration,
    points: u64,
    stats: ReclaimStats,
    throttle_delay_nanos: u64,
    space_wait_nanos: u64,
}

/// Shared between the writers and the coordinating thread.
struct Progress {
    /// Points acknowledged so far.
    written: AtomicU64,
    /// Writers stop starting batches at this many points (`u64::MAX` until calibrated).
    target: AtomicU64,
    /// The measured phase starts at this many points (`u64::MAX` until calibrated).
    fill_points: AtomicU64,
    /// Newest timestamp written: the simulated clock.
    now: Arc<AtomicI64>,
    throttle_delay_nanos: AtomicU64,
    space_wait_nanos: AtomicU64,
    /// When the measured phase started.
    started: OnceLock<Snapshot>,
    /// When the last writer finished, and the process's CPU time then.
    finished: Mutex<Option<(Instant, Duration)>>,
}

fn series_key(sensor: u32, short: bool) -> Result<SeriesKey, String> {
    let class = if short { "short" } else { "long" };
    SeriesKey::new("walk", [("sensor", format!("s{sensor}")), ("class", class.to_string())], "value")
        .and_then(|k| k.in_database(DATABASE))
        .map_err(|e| e.to_string())
}

fn engine_options(config: &ReclaimBenchConfig, now: &Arc<AtomicI64>) -> EngineOptions {
    let clock_source = now.clone();
    EngineOptions {
        durability: config.durability,
        memtable_bytes_max: config.memtable_bytes_max,
        segment_bytes_max: config.segment_bytes_max,
        background_compaction: config.background_compaction,
        reclaim: ReclaimOptions {
            capacity_bytes: config.live_share.map(|_| config.capacity_bytes),
            interval: config.reclaim_interval,
            merge_bytes_per_second: config.merge_bytes_per_second,
            target_usage: config.disk_usage_limits.0,
            throttle_low: config.disk_usage_limits.1,
            throttle_high: config.disk_usage_limits.2,
            ..ReclaimOptions::default()
        },
        background_reclaim: true,
        // The writers apply the admission themselves, to count the delay.
        throttle_writes: false,
        clock: Arc::new(move || clock_source.load(Ordering::Relaxed)),
        fs: Arc::new(OwnBytesOnly(RealFs)),
        ..EngineOptions::default()
    }
}

/// Writes batches until the target; each batch is `steps` seconds of data time of every sensor
/// the writer owns.
fn writer_loop(engine: &Engine, progress: &Progress, mut sensors: Vec<Sensor>, batch_points: usize) -> Result<(), String> {
    let steps = (batch_points / sensors.len().max(1)).max(1);
    let mut step = 0i64;
    let mut timestamps = Vec::with_capacity(steps);
    let mut values = Vec::with_capacity(steps);
    while progress.written.load(Ordering::Relaxed) < progress.target.load(Ordering::Relaxed) {
        let mut batch = WriteBatch::new();
        timestamps.clear();
        timestamps.extend((0..steps as i64).map(|k| START_NANOS + (step + k) * SECOND_NANOS));
        for sensor in &mut sensors {
            values.clear();
            values.extend((0..steps).map(|_| sensor.next()));
            batch.push_column(sensor.id, &timestamps, &ValueColumn::F64(values.clone())).map_err(|e| e.to_string())?;
        }
        step += steps as i64;
        let waiting = Instant::now();
        let mut waited = false;
        while engine.admit(waiting).map_err(|e| format!("waited too long for space: {e}"))? == Admission::WaitForSpace {
            engine.wait_for_space();
            waited = true;
        }
        if waited {
            progress.space_wait_nanos.fetch_add(waiting.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        engine.write(&batch).map_err(|e| e.to_string())?;
        progress.now.fetch_max(timestamps[steps - 1], Ordering::Relaxed);
        if let Some(delay) = engine.acknowledgement_delay() {
            std::thread::sleep(delay);
            progress.throttle_delay_nanos.fetch_add(delay.as_nanos() as u64, Ordering::Relaxed);
        }
        let before = progress.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let fill = progress.fill_points.load(Ordering::Relaxed);
        if before < fill && before + batch.len() as u64 >= fill {
            let _ = progress.started.set(Snapshot {
                at: Instant::now(),
                cpu: process_cpu_time(),
                points: before + batch.len() as u64,
                stats: engine.reclaim_stats(),
                throttle_delay_nanos: progress.throttle_delay_nanos.load(Ordering::Relaxed),
                space_wait_nanos: progress.space_wait_nanos.load(Ordering::Relaxed),
            });
        }
    }
    let mut finished = progress.finished.lock().map_err(|_| "BUG: poisoned finish lock".to_string())?;
    *finished = Some((Instant::now(), process_cpu_time()));
    Ok(())
}

/// Watches the store while the writers run: calibrates bytes per point, sets the phase targets
/// and the short period, and samples usage.
struct Watch {
    bytes_per_point: f64,
    horizon_seconds: f64,
    short_period: Option<Duration>,
    usage_max: f64,
    directory_share_max: f64,
}

fn watch(
    engine: &Engine,
    config: &ReclaimBenchConfig,
    progress: &Progress,
    dir: &Path,
    writers_done: &dyn Fn() -> bool,
) -> Result<Watch, String> {
    let capacity = config.capacity_bytes as f64;
    let mut watch = Watch { bytes_per_point: 0.0, horizon_seconds: 0.0, short_period: None, usage_max: 0.0, directory_share_max: 0.0 };
    let mut last_directory_sample = Instant::now();
    while !writers_done() {
        std::thread::sleep(Duration::from_millis(20));
        if watch.bytes_per_point == 0.0 {
            // Calibrate once a tenth of C is in segments, before anything is reclaimed.
            let stats = engine.stats();
            let flushed = progress.written.load(Ordering::Relaxed).saturating_sub(stats.memtable_points as u64);
            if stats.store.bytes as f64 >= capacity / 10.0 && flushed > 0 {
                if engine.reclaim_stats().segments_removed > 0 {
                    return Err("reclaim removed segments before calibration: raise the live share".to_string());
                }
                watch.bytes_per_point = stats.store.bytes as f64 / flushed as f64;
                let fill = (config.fill_capacities * capacity / watch.bytes_per_point) as u64;
                let measure = (config.measure_capacities * capacity / watch.bytes_per_point) as u64;
                progress.fill_points.store(fill, Ordering::Relaxed);
                progress.target.store(fill + measure, Ordering::Relaxed);
                if let Some(live_share) = config.live_share {
                    // Data time that V·C holds: long series all of it, short ones their period.
                    let (s, p) = (config.short_share, config.short_period_share);
                    let bytes_per_second = watch.bytes_per_point * f64::from(config.sensors);
                    watch.horizon_seconds = live_share * capacity / (bytes_per_second * (1.0 - s + s * p));
                    if config.short_share > 0.0 {
                        let period = Duration::from_secs((p * watch.horizon_seconds).max(1.0) as u64);
                        watch.short_period = Some(period);
                        let policy = DatabasePolicy {
                            period: None,
                            capacity_bytes: Some((live_share * capacity) as u64),
                            overrides: vec![PeriodOverride {
                                measurement: None,
                                tags: vec![("class".to_string(), "short".to_string())],
                                period,
                            }],
                        };
                        engine.set_database_policy(DATABASE, policy).map_err(|e| e.to_string())?;
                    }
                }
            }
        }
        if progress.started.get().is_some() {
            watch.usage_max = watch.usage_max.max(engine.reclaim_stats().usage.share);
            if last_directory_sample.elapsed() >= Duration::from_millis(100) {
                last_directory_sample = Instant::now();
                watch.directory_share_max = watch.directory_share_max.max(directory_bytes(dir) as f64 / capacity);
            }
        }
    }
    Ok(watch)
}

/// One run: fill, then measure. The directory is removed afterwards.
pub fn run(config: &ReclaimBenchConfig) -> Result<ReclaimFigures, String> {
    let name = match config.live_share {
        Some(v) => format!("full-{v}"),
        None => "empty".to_string(),
    };
    let dir = config.dir.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let progress = Progress {
        written: AtomicU64::new(0),
        target: AtomicU64::new(u64::MAX),
        fill_points: AtomicU64::new(u64::MAX),
        now: Arc::new(AtomicI64::new(START_NANOS)),
        throttle_delay_nanos: AtomicU64::new(0),
        space_wait_nanos: AtomicU64::new(0),
        started: OnceLock::new(),
        finished: Mutex::new(None),
    };
    let engine = Engine::open(&dir, engine_options(config, &progress.now)).map_err(|e| e.to_string())?;
    if let Some(live_share) = config.live_share {
        let policy =
            DatabasePolicy { capacity_bytes: Some((live_share * config.capacity_bytes as f64) as u64), ..DatabasePolicy::default() };
        engine.set_database_policy(DATABASE, policy).map_err(|e| e.to_string())?;
    }
    let writers = config.writers.max(1);
    let short_sensors = (config.short_share * f64::from(config.sensors)).round() as u32;
    let mut owned: Vec<Vec<Sensor>> = (0..writers).map(|_| Vec::new()).collect();
    for n in 0..config.sensors {
        let id = engine.series_id(&series_key(n, n < short_sensors)?, ValueKind::F64).map_err(|e| e.to_string())?;
        let rng = (config.seed ^ (u64::from(n) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
        owned[n as usize % writers].push(Sensor { id, value: 20.0, rng });
    }
    let running = AtomicU64::new(writers as u64);
    let (watched, failure) = std::thread::scope(|scope| {
        let handles: Vec<_> = owned
            .into_iter()
            .map(|sensors| {
                let (engine, progress, running) = (&engine, &progress, &running);
                scope.spawn(move || {
                    let result = writer_loop(engine, progress, sensors, config.batch_points);
                    if result.is_err() {
                        // Stop the others too.
                        progress.target.store(0, Ordering::Relaxed);
                    }
                    running.fetch_sub(1, Ordering::Relaxed);
                    result
                })
            })
            .collect();
        let watched = watch(&engine, config, &progress, &dir, &|| running.load(Ordering::Relaxed) == 0);
        if watched.is_err() {
            progress.target.store(0, Ordering::Relaxed);
        }
        let failure = handles.into_iter().filter_map(|h| h.join().map_err(|_| "writer panicked".to_string()).and_then(|r| r).err()).next();
        (watched, failure)
    });
    if let Some(error) = failure {
        return Err(error);
    }
    let watched = watched?;
    let (finished, cpu_finished) = progress
        .finished
        .lock()
        .map_err(|_| "BUG: poisoned finish lock".to_string())?
        .unwrap_or_else(|| (Instant::now(), process_cpu_time()));
    let Some(start) = progress.started.get().cloned() else {
        return Err("the measured phase never started".to_string());
    };
    let end = engine.reclaim_stats();
    let points = progress.written.load(Ordering::Relaxed) - start.points;
    let wall = finished.duration_since(start.at);
    let cpu = cpu_finished.saturating_sub(start.cpu);
    let stats_at_start = &start.stats;
    let figures = ReclaimFigures {
        points,
        wall,
        points_per_second: points as f64 / wall.as_secs_f64(),
        cpu,
        points_per_cpu_second: points as f64 / cpu.as_secs_f64().max(1e-9),
        bytes_per_point: watched.bytes_per_point,
        bytes_ingested: (points as f64 * watched.bytes_per_point) as u64,
        usage_end: end.usage.share,
        usage_max: watched.usage_max,
        directory_share_max: watched.directory_share_max,
        segments_removed: end.segments_removed - stats_at_start.segments_removed,
        segments_merged: end.segments_merged - stats_at_start.segments_merged,
        merge_bytes_read: end.merge_bytes_read - stats_at_start.merge_bytes_read,
        merge_bytes_written: end.merge_bytes_written - stats_at_start.merge_bytes_written,
        bytes_evicted: end.bytes_evicted - stats_at_start.bytes_evicted,
        cycles: end.cycles - stats_at_start.cycles,
        throttle_delay: Duration::from_nanos(progress.throttle_delay_nanos.load(Ordering::Relaxed) - start.throttle_delay_nanos),
        space_wait: Duration::from_nanos(progress.space_wait_nanos.load(Ordering::Relaxed) - start.space_wait_nanos),
        horizon_seconds: watched.horizon_seconds,
        short_period: watched.short_period,
        segments_end: engine.stats().store.segments,
    };
    engine.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(figures)
}

/// The median of `values` (the upper one of an even count); `NaN` when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}
