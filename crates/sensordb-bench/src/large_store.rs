//! Large stores for start-up and memory measurements (`sensordb bench large-store`, issue 14
//! item 4): builds a store of N series × M blocks spread over years of simulated time in
//! minutes, then measures what grows with the store: `Engine::open` time, resident memory after
//! open, and one-series range reads beside the same read on a small store.
//!
//! The builder registers the series in the catalog through the engine, then writes sealed
//! segment files directly with the engine's own segment writer (no WAL, no memtable, no
//! network): 50 million blocks through the write path would take hours. Segments are cut by
//! time, as a store fed for years holds them: segment k covers a run of consecutive time windows
//! for all series (or for a slice of the series when one window of all of them would exceed
//! `blocks_per_segment`), one flush group per window, one block per series and window. Every
//! point is a pure function of (series, window, position), so tests and reads check exactly what
//! was built.

use sensordb_engine::test_support::codec::with_quick_encoding;
use sensordb_engine::test_support::segment::{segment_dir, GroupBuilder, SegmentWriter};
use sensordb_engine::{Durability, Engine, EngineOptions, RealFs, SeriesId, SeriesKey, Timestamp, ValueColumn, ValueKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// 2023-01-01T00:00:00Z: the simulated history starts here.
const START_NS: Timestamp = 1_672_531_200_000_000_000;
const YEAR_NS: f64 = 365.25 * 86_400e9;

#[derive(Debug, thiserror::Error)]
pub enum LargeStoreError {
    #[error("engine: {0}")]
    Engine(#[from] sensordb_engine::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("series key: {0}")]
    Key(#[from] sensordb_engine::SeriesKeyError),
    #[error("store shape: {0}")]
    Shape(String),
    #[error("read back differs from what was built: {0}")]
    Mismatch(String),
}

pub type Result<T> = std::result::Result<T, LargeStoreError>;

/// The shape of a store to build.
#[derive(Clone, Debug)]
pub struct LargeStoreConfig {
    /// Data directory; removed and recreated by [`build`].
    pub dir: PathBuf,
    pub series: u32,
    pub blocks_per_series: u32,
    pub points_per_block: u32,
    /// Simulated time the blocks of each series cover, from 2023-01-01.
    pub years: f64,
    /// Blocks per segment file at most (a segment holds whole windows of all series when they fit).
    pub blocks_per_segment: u64,
    /// Threads encoding and writing segments.
    pub threads: usize,
    pub seed: u64,
}

impl Default for LargeStoreConfig {
    fn default() -> Self {
        LargeStoreConfig {
            dir: PathBuf::from("target/bench-large-store"),
            series: 10_000,
            blocks_per_series: 100,
            points_per_block: 32,
            years: 3.0,
            blocks_per_segment: 500_000,
            threads: 2,
            seed: 123,
        }
    }
}

impl LargeStoreConfig {
    pub fn blocks(&self) -> u64 {
        u64::from(self.series) * u64::from(self.blocks_per_series)
    }

    /// Nanoseconds of simulated time each block covers.
    fn window_ns(&self) -> i64 {
        (self.years * YEAR_NS / f64::from(self.blocks_per_series.max(1))) as i64
    }

    fn point_interval_ns(&self) -> i64 {
        self.window_ns() / i64::from(self.points_per_block.max(1))
    }

    /// Timestamp of point `position` of window `window` (the same for every series).
    pub fn timestamp(&self, window: u32, position: u32) -> Timestamp {
        START_NS + i64::from(window) * self.window_ns() + i64::from(position) * self.point_interval_ns()
    }

    /// The points of series number `series` (0-based, catalog order) in window `window`.
    pub fn points(&self, series: u32, window: u32) -> (Vec<Timestamp>, Vec<f64>) {
        let timestamps = (0..self.points_per_block).map(|i| self.timestamp(window, i)).collect();
        // A temperature-like random walk with two decimals, restarting at a random level in
        // each window (so a window is built without the ones before it).
        let noise = |i: u64| mix(self.seed ^ (u64::from(series) << 40) ^ (u64::from(window) << 20) ^ i);
        let mut hundredths = 1_500 + (noise(u64::MAX) % 2_000) as i64;
        let values = (0..u64::from(self.points_per_block))
            .map(|i| {
                hundredths += (noise(i) % 21) as i64 - 10;
                hundredths as f64 / 100.0
            })
            .collect();
        (timestamps, values)
    }

    /// The series key of series number `series`.
    pub fn key(series: u32) -> std::result::Result<SeriesKey, sensordb_engine::SeriesKeyError> {
        SeriesKey::new("large", [("device", format!("d{series:08}"))], "value")
    }

    fn layout(&self) -> Result<Layout> {
        if self.series == 0 || self.blocks_per_series == 0 || self.points_per_block == 0 || self.blocks_per_segment == 0 {
            return Err(LargeStoreError::Shape("series, blocks, points and blocks per segment must all be at least 1".into()));
        }
        if self.point_interval_ns() < 1 {
            return Err(LargeStoreError::Shape(format!(
                "{} years hold no {} distinct points in each of {} windows",
                self.years, self.points_per_block, self.blocks_per_series
            )));
        }
        let series_per_segment = u64::from(self.series).min(self.blocks_per_segment) as u32;
        let windows_per_segment =
            (self.blocks_per_segment / u64::from(series_per_segment)).clamp(1, u64::from(self.blocks_per_series)) as u32;
        Ok(Layout {
            series_per_segment,
            windows_per_segment,
            series_chunks: self.series.div_ceil(series_per_segment),
            window_chunks: self.blocks_per_series.div_ceil(windows_per_segment),
        })
    }
}

/// splitmix64's finaliser: cheap, well-mixed noise.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// How the blocks are cut into segments: segment k holds windows of chunk k / `series_chunks`
/// for the series of chunk k % `series_chunks`.
#[derive(Clone, Copy, Debug)]
struct Layout {
    series_per_segment: u32,
    windows_per_segment: u32,
    series_chunks: u32,
    window_chunks: u32,
}

impl Layout {
    fn segments(&self) -> u64 {
        u64::from(self.series_chunks) * u64::from(self.window_chunks)
    }
}

/// What [`build`] made.
#[derive(Clone, Debug)]
pub struct BuildFigures {
    pub series: u32,
    pub blocks: u64,
    pub points: u64,
    pub segments: u64,
    pub bytes: u64,
    pub took: Duration,
}

fn engine_options() -> EngineOptions {
    EngineOptions {
        durability: Durability::Os,
        // Compaction would rewrite the whole store of short blocks after every open.
        background_compaction: false,
        ..EngineOptions::default()
    }
}

/// File in a built store's directory naming its shape, so a later run can measure it again
/// without building it (see [`build_or_reuse`]).
const SHAPE_FILE: &str = "large-store.shape";

impl LargeStoreConfig {
    /// What decides the store's contents (not where it is, nor how fast it is built).
    fn shape(&self) -> String {
        format!(
            "series={} blocks_per_series={} points_per_block={} years={} blocks_per_segment={} seed={}\n",
            self.series, self.blocks_per_series, self.points_per_block, self.years, self.blocks_per_segment, self.seed
        )
    }
}

/// [`build`], unless `config.dir` already holds a store of the same shape that [`build`]
/// finished: then its figures, with a build time of zero.
pub fn build_or_reuse(config: &LargeStoreConfig) -> Result<BuildFigures> {
    let layout = config.layout()?;
    match std::fs::read_to_string(config.dir.join(SHAPE_FILE)) {
        Ok(shape) if shape == config.shape() => Ok(BuildFigures {
            series: config.series,
            blocks: config.blocks(),
            points: config.blocks() * u64::from(config.points_per_block),
            segments: layout.segments(),
            bytes: crate::engine_bench::directory_bytes(&config.dir),
            took: Duration::ZERO,
        }),
        _ => build(config),
    }
}

/// Builds the store `config` describes in a fresh `config.dir`.
pub fn build(config: &LargeStoreConfig) -> Result<BuildFigures> {
    let started = Instant::now();
    let layout = config.layout()?;
    if config.dir.exists() {
        std::fs::remove_dir_all(&config.dir)?;
    }
    std::fs::create_dir_all(&config.dir)?;
    let ids = register_series(config)?;
    let segments = segment_dir(&config.dir);
    if std::fs::read_dir(&segments)?.next().is_some() {
        return Err(LargeStoreError::Shape(format!("{} is not empty after registering the series", segments.display())));
    }
    let next = AtomicU64::new(0);
    let failure = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..config.threads.max(1) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= layout.segments() {
                    return;
                }
                if let Err(e) = write_segment(config, layout, &ids, &segments, k) {
                    if let Ok(mut failure) = failure.lock() {
                        failure.get_or_insert(e);
                    }
                    // Stops the other threads too.
                    next.store(u64::MAX / 2, Ordering::Relaxed);
                    return;
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    std::fs::write(config.dir.join(SHAPE_FILE), config.shape())?;
    Ok(BuildFigures {
        series: config.series,
        blocks: config.blocks(),
        points: config.blocks() * u64::from(config.points_per_block),
        segments: layout.segments(),
        bytes: crate::engine_bench::directory_bytes(&config.dir),
        took: started.elapsed(),
    })
}

/// Registers the series through the engine (so the catalog is the engine's own) and returns
/// their ids in series order.
fn register_series(config: &LargeStoreConfig) -> Result<Vec<SeriesId>> {
    let engine = Engine::open(&config.dir, EngineOptions { durability: Durability::None, ..engine_options() })?;
    let ids = (0..config.series)
        .map(|s| Ok(engine.series_id_unsynced(&LargeStoreConfig::key(s)?, ValueKind::F64)?))
        .collect::<Result<Vec<_>>>()?;
    engine.close()?;
    Ok(ids)
}

/// Writes and seals segment number `k` (id k + 1): one flush group per window.
fn write_segment(config: &LargeStoreConfig, layout: Layout, ids: &[SeriesId], dir: &Path, k: u64) -> Result<()> {
    let window_chunk = (k / u64::from(layout.series_chunks)) as u32;
    let series_chunk = (k % u64::from(layout.series_chunks)) as u32;
    let first_series = series_chunk * layout.series_per_segment;
    let series_end = (first_series + layout.series_per_segment).min(config.series);
    let first_window = window_chunk * layout.windows_per_segment;
    let window_end = (first_window + layout.windows_per_segment).min(config.blocks_per_series);
    // Synced once, at the end: a group sync each would make the build wait on the disk.
    let mut writer = SegmentWriter::create(&RealFs, dir, k + 1, false)?;
    let path = writer.path().to_path_buf();
    for window in first_window..window_end {
        let mut group = GroupBuilder::new();
        // Short blocks are encoded as a flush encodes them.
        with_quick_encoding(|| {
            for series in first_series..series_end {
                let (timestamps, values) = config.points(series, window);
                group.add_block(ids[series as usize], &timestamps, &ValueColumn::F64(values));
            }
        });
        // Sequences grow in file order within a segment and never repeat across segments.
        let sequence = k * u64::from(layout.windows_per_segment) + u64::from(window - first_window) + 1;
        writer.append_parts(vec![group.into_part()], sequence, 0)?;
    }
    writer.seal()?;
    std::fs::File::open(&path)?.sync_all()?;
    Ok(())
}

/// Resident memory of this process from /proc/self/status, bytes: (VmRSS, VmHWM). Zero where
/// the file is missing.
pub fn resident_memory() -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return (0, 0) };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets VmHWM to the current RSS (Linux 4.0 and later), so the peak is that of what follows.
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// What opening and reading a built store measured.
#[derive(Clone, Debug)]
pub struct OpenFigures {
    pub blocks: usize,
    pub segments: usize,
    /// Each of the opens, in order; the figure is their median.
    pub opens: Vec<Duration>,
    /// Resident bytes before the opens, after the last one, and the peak during them.
    pub rss_before: u64,
    pub rss_open: u64,
    pub peak: u64,
    pub reads: ReadFigures,
}

impl OpenFigures {
    pub fn open_median(&self) -> Duration {
        let mut opens = self.opens.clone();
        opens.sort();
        opens.get(opens.len() / 2).copied().unwrap_or_default()
    }
}

/// Latency of one-series range reads of `blocks` consecutive blocks each: `first`, each of
/// `reads` distinct series read for the first time since the open (nothing of it in the
/// engine's caches: its directory chunk aside, which holds 32 series, so a store of more
/// series has more of them to read), then `again`, the same reads in the same order once
/// more. Reads of random series with repeats would compare a small store that fits the block
/// cache with a large one that does not: cache hits against decodes, not the stores' indexes.
#[derive(Clone, Debug, Default)]
pub struct ReadFigures {
    pub reads: usize,
    pub blocks: u32,
    pub first: Latency,
    pub again: Latency,
}

/// Median and 99th percentile of a set of reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    pub median: Duration,
    pub p99: Duration,
}

impl Latency {
    fn of(mut times: Vec<Duration>) -> Latency {
        times.sort();
        let at =
            |share: f64| times.get(((times.len() as f64 * share) as usize).min(times.len().saturating_sub(1))).copied().unwrap_or_default();
        Latency { median: at(0.5), p99: at(0.99) }
    }
}

/// Opens the store at `config.dir` `opens` times (median reported), measures resident memory
/// with the last open, then one-series reads of `read_blocks` consecutive blocks in the middle
/// of the history (see [`ReadFigures`]), each checked against what was built.
pub fn measure(config: &LargeStoreConfig, opens: usize, reads: usize, read_blocks: u32) -> Result<OpenFigures> {
    let (rss_before, _) = resident_memory();
    reset_peak_memory();
    let mut times = Vec::new();
    let mut engine = None;
    for _ in 0..opens.max(1) {
        if let Some(open) = engine.take() {
            Engine::close(open)?;
        }
        let started = Instant::now();
        let open = Engine::open(&config.dir, engine_options())?;
        times.push(started.elapsed());
        engine = Some(open);
    }
    let engine = engine.ok_or_else(|| LargeStoreError::Shape("no open".into()))?;
    let (rss_open, peak) = resident_memory();
    let stats = engine.stats().store;
    let reads = measure_reads(config, &engine, reads, read_blocks)?;
    engine.close()?;
    Ok(OpenFigures { blocks: stats.blocks, segments: stats.segments, opens: times, rss_before, rss_open, peak, reads })
}

/// `reads` distinct series (at most all of them) in an order fixed by the seed.
fn distinct_series(config: &LargeStoreConfig, reads: usize) -> Vec<u32> {
    let mut series: Vec<u32> = (0..config.series).collect();
    series.sort_by_key(|&s| mix(config.seed ^ u64::from(s)));
    series.truncate(reads);
    series
}

fn measure_reads(config: &LargeStoreConfig, engine: &Engine, reads: usize, read_blocks: u32) -> Result<ReadFigures> {
    let read_blocks = read_blocks.clamp(1, config.blocks_per_series);
    let first_window = (config.blocks_per_series - read_blocks) / 2;
    let (from, to) = (config.timestamp(first_window, 0), config.timestamp(first_window + read_blocks, 0));
    let series = distinct_series(config, reads);
    let ids = series
        .iter()
        .map(|&s| {
            engine
                .find_series(&LargeStoreConfig::key(s)?)
                .ok_or_else(|| LargeStoreError::Mismatch(format!("series {s} not in the catalog")))
        })
        .collect::<Result<Vec<_>>>()?;
    let pass = || -> Result<Latency> {
        let mut times = Vec::with_capacity(ids.len());
        for (&id, &s) in ids.iter().zip(&series) {
            let started = Instant::now();
            let chunk = engine.read(id, from, to).collect_all()?;
            times.push(started.elapsed());
            let found = chunk.map_or(0, |c| c.len());
            let wanted = (read_blocks * config.points_per_block) as usize;
            if found != wanted {
                return Err(LargeStoreError::Mismatch(format!("series {s}: {found} points in the range, built {wanted}")));
            }
        }
        Ok(Latency::of(times))
    };
    let first = pass()?;
    let again = pass()?;
    Ok(ReadFigures { reads: ids.len(), blocks: read_blocks, first, again })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(dir: &Path, series: u32, blocks_per_series: u32, blocks_per_segment: u64) -> LargeStoreConfig {
        LargeStoreConfig {
            dir: dir.to_path_buf(),
            series,
            blocks_per_series,
            points_per_block: 5,
            years: 2.0,
            blocks_per_segment,
            threads: 2,
            seed: 7,
        }
    }

    fn check_reads_back_exactly(config: &LargeStoreConfig) {
        let figures = build(config).expect("build");
        let layout = config.layout().expect("layout");
        assert_eq!(figures.blocks, config.blocks());
        let engine = Engine::open(&config.dir, engine_options()).expect("open");
        let stats = engine.stats().store;
        assert_eq!(stats.blocks as u64, config.blocks());
        assert_eq!(stats.points, config.blocks() * u64::from(config.points_per_block));
        assert_eq!(stats.segments as u64, layout.segments());
        for series in 0..config.series {
            let id = engine.find_series(&LargeStoreConfig::key(series).expect("key")).expect("registered");
            let chunk = engine.read(id, i64::MIN, i64::MAX).collect_all().expect("read").expect("points");
            let (mut timestamps, mut values) = (Vec::new(), Vec::new());
            for window in 0..config.blocks_per_series {
                let (t, v) = config.points(series, window);
                timestamps.extend(t);
                values.extend(v);
            }
            assert_eq!(chunk.timestamps, timestamps, "series {series}");
            assert_eq!(chunk.values, ValueColumn::F64(values), "series {series}");
            // A range inside the history: exactly the windows it covers.
            let part = engine.read(id, config.timestamp(1, 0), config.timestamp(3, 0)).collect_all().expect("read").expect("points");
            assert_eq!(part.timestamps, timestamps[config.points_per_block as usize..3 * config.points_per_block as usize]);
        }
        engine.close().expect("close");
        let reused = build_or_reuse(config).expect("reuse");
        assert_eq!((reused.took, reused.blocks), (Duration::ZERO, config.blocks()), "the finished store is measured again as it is");
        let measured = measure(config, 2, 20, 2).expect("measure");
        assert_eq!(measured.blocks as u64, config.blocks());
        assert_eq!(measured.opens.len(), 2);
        // Distinct series: at most every series once, each read twice.
        assert_eq!(measured.reads.reads, (config.series as usize).min(20));
        assert!(measured.reads.first.median > Duration::ZERO && measured.reads.again.median > Duration::ZERO);
    }

    #[test]
    fn a_built_store_opens_and_reads_back_exactly_the_built_points() {
        let dir = tempfile::tempdir().expect("tempdir");
        // All series in each segment, 3 windows a segment: 4 segments, the last one short.
        check_reads_back_exactly(&small(dir.path(), 6, 10, 20));
    }

    #[test]
    fn series_are_split_across_segments_when_a_window_does_not_fit() {
        let dir = tempfile::tempdir().expect("tempdir");
        // 4 series a segment, one window each: 2 series chunks × 5 windows.
        let config = small(dir.path(), 7, 5, 4);
        let layout = config.layout().expect("layout");
        assert_eq!((layout.series_per_segment, layout.windows_per_segment, layout.segments()), (4, 1, 10));
        check_reads_back_exactly(&config);
    }

    #[test]
    fn a_shape_without_room_for_distinct_timestamps_is_refused() {
        let config = LargeStoreConfig { years: 1e-15, ..LargeStoreConfig::default() };
        assert!(matches!(config.layout(), Err(LargeStoreError::Shape(_))));
    }
}
