//! `sensordb bench engine`: in-process benchmarks of the storage engine, printed as a table of
//! figures with the parameters that produced them.
//!
//! - ingest: TSBS-IoT-like rows (generated before the clock starts) written by `threads`
//!   writers, each owning its trucks' series (Akumuli's lesson: writers that own their series
//!   never meet on a lock); points/s of wall time and points per CPU-second (user + system
//!   time of the whole process, so flushing and WAL work are charged too).
//! - disk: bytes on disk per value after flush and close (segments, catalog and WAL included).
//! - payload: MB/s of B-byte portions under the chosen durability, next to the disk's sequential
//!   write bandwidth measured with `dd oflag=direct` in the same directory and run.
//! - decode: one series over one day at 1 Hz (86,400 points) read back from sealed segments.
//! - startup: open time of a data directory of `startup_gib` GiB.

use crate::row::SeriesMap;
use crate::tsbs::{TsbsConfig, TsbsGenerator};
use sensordb_engine::{Durability, Engine, EngineOptions, EngineStats, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Parameters of one benchmark run.
#[derive(Clone, Debug)]
pub struct EngineBenchConfig {
    pub dir: PathBuf,
    pub durability: Durability,
    pub threads: usize,
    /// Trucks of the TSBS fleet.
    pub scale: u32,
    /// Hours of data per truck.
    pub hours: u32,
    pub seed: u64,
    /// Points per write batch.
    pub batch_points: usize,
    pub payload_sizes: Vec<usize>,
    /// Concurrent writers (sources) in the payload part.
    pub payload_writers: usize,
    /// Bytes written per payload size.
    pub payload_total_bytes: u64,
    pub startup_gib: f64,
    pub memtable_bytes_max: usize,
    /// Line protocol to load instead of generated rows (e.g. `tsbs_generate_data` output).
    pub input_file: Option<PathBuf>,
    /// Flush after every this many points (per writer), as time-driven flushes of a store fed in
    /// real time would: a day of TSBS IoT data arrives at about 42,700 points per 5 minutes.
    pub flush_every_points: Option<usize>,
}

impl Default for EngineBenchConfig {
    fn default() -> Self {
        EngineBenchConfig {
            dir: PathBuf::from("target/bench-engine"),
            durability: Durability::Fsync,
            threads: 2,
            scale: 100,
            hours: 24,
            seed: 123,
            batch_points: 10_000,
            payload_sizes: vec![4096, 65_536, 1 << 20],
            payload_writers: 8,
            payload_total_bytes: 2 << 30,
            startup_gib: 10.0,
            memtable_bytes_max: 1 << 30,
            input_file: None,
            flush_every_points: None,
        }
    }
}

/// Result of the ingest part.
#[derive(Clone, Debug)]
pub struct IngestFigures {
    pub points: u64,
    pub series: usize,
    pub wall: Duration,
    pub cpu: Duration,
    pub points_per_second: f64,
    pub points_per_cpu_second: f64,
    pub bytes_on_disk: u64,
    pub bytes_per_value: f64,
    pub stats: EngineStats,
    /// With `flush_every_points`: bytes on disk before compaction, and the compaction time.
    pub before_compaction: Option<(u64, Duration)>,
}

fn engine_options(config: &EngineBenchConfig) -> EngineOptions {
    EngineOptions {
        durability: config.durability,
        memtable_bytes_max: config.memtable_bytes_max,
        // Measured explicitly after the load, so it does not compete with ingestion here.
        background_compaction: false,
        ..EngineOptions::default()
    }
}

fn fresh_dir(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        std::fs::remove_dir_all(path)?;
    }
    std::fs::create_dir_all(path)
}

/// `len` bytes of xorshift noise: incompressible, reproducible from `seed`.
pub fn noise_bytes(len: usize, seed: u64) -> bytes::Bytes {
    let mut state = seed | 1;
    let noise: Vec<u8> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    noise.into()
}

/// User + system CPU time of this process so far.
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Bytes of all files under `dir`.
pub fn directory_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => directory_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Generates the TSBS rows and cuts them into per-writer batches (writer = truck id % threads).
fn prepare_batches(engine: &Engine, config: &EngineBenchConfig) -> Result<(Vec<Vec<WriteBatch>>, u64), String> {
    let rows: Box<dyn Iterator<Item = Result<crate::row::Row, String>>> = match &config.input_file {
        Some(path) => {
            let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let reader = crate::line_protocol::LineProtocolReader::new(std::io::BufReader::with_capacity(1 << 20, file));
            Box::new(reader.map(|row| row.map_err(|e| e.to_string())))
        }
        None => {
            let tsbs = TsbsConfig { scale: config.scale, seed: config.seed, ..TsbsConfig::default() }
                .with_duration(i64::from(config.hours) * 3_600_000_000_000);
            Box::new(TsbsGenerator::new(tsbs).map(Ok))
        }
    };
    let mut ids: SeriesMap<SeriesId> = SeriesMap::new();
    let threads = config.threads.max(1);
    let mut per_writer: Vec<Vec<WriteBatch>> = vec![Vec::new(); threads];
    let mut current: Vec<WriteBatch> = vec![WriteBatch::new(); threads];
    let mut points = 0u64;
    for row in rows {
        let row = row?;
        let writer = row.tags.id as usize % threads;
        for (field, value) in &row.fields {
            let kind = value.kind();
            let id = *ids
                .get_or_insert_with(&row.tags, &row.measurement, field, |key: SeriesKey| engine.series_id(&key, kind))
                .map_err(|e| e.to_string())?;
            current[writer].push(id, row.timestamp, value.clone()).map_err(|e| e.to_string())?;
            points += 1;
        }
        if current[writer].len() >= config.batch_points {
            per_writer[writer].push(std::mem::take(&mut current[writer]));
        }
    }
    for (writer, batch) in current.into_iter().enumerate() {
        if !batch.is_empty() {
            per_writer[writer].push(batch);
        }
    }
    Ok((per_writer, points))
}

/// Ingests the TSBS data set, flushes, closes, and measures rate and bytes on disk.
pub fn ingest(config: &EngineBenchConfig) -> Result<IngestFigures, String> {
    let dir = config.dir.join("ingest");
    fresh_dir(&dir).map_err(|e| e.to_string())?;
    let engine = Engine::open(&dir, engine_options(config)).map_err(|e| e.to_string())?;
    let (batches, points) = prepare_batches(&engine, config)?;
    let cpu_before = process_cpu_time();
    let started = Instant::now();
    let failure: Option<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = batches
            .iter()
            .map(|writer_batches| {
                let engine = &engine;
                let flush_every = config.flush_every_points;
                scope.spawn(move || {
                    let mut since_flush = 0usize;
                    for batch in writer_batches {
                        engine.write(batch).map_err(|e| e.to_string())?;
                        since_flush += batch.len();
                        if flush_every.is_some_and(|every| since_flush >= every) {
                            engine.flush().map_err(|e| e.to_string())?;
                            since_flush = 0;
                        }
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok().and_then(Result::err)).next()
    });
    if let Some(error) = failure {
        return Err(error);
    }
    // The rate includes making everything durable in segments, not just in the WAL.
    engine.flush().map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let cpu = process_cpu_time().saturating_sub(cpu_before);
    let before_compaction = match config.flush_every_points {
        Some(_) => {
            let bytes = directory_bytes(&dir);
            let compacting = Instant::now();
            engine.compact().map_err(|e| e.to_string())?;
            Some((bytes, compacting.elapsed()))
        }
        None => None,
    };
    let stats = engine.stats();
    engine.close().map_err(|e| e.to_string())?;
    let bytes_on_disk = directory_bytes(&dir);
    Ok(IngestFigures {
        points,
        series: stats.series,
        wall,
        cpu,
        points_per_second: points as f64 / wall.as_secs_f64(),
        points_per_cpu_second: points as f64 / cpu.as_secs_f64().max(1e-9),
        bytes_on_disk,
        bytes_per_value: bytes_on_disk as f64 / points as f64,
        stats,
        before_compaction,
    })
}

/// Sequential write bandwidth of the disk holding `dir`, bytes/s, measured with
/// `dd if=/dev/zero bs=1M count=<mib> oflag=direct conv=fdatasync`.
pub fn disk_bandwidth(dir: &Path, mib: u64) -> Result<f64, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let target = dir.join("dd-bandwidth.tmp");
    let started = Instant::now();
    let status = std::process::Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", target.display()))
        .args(["bs=1M", &format!("count={mib}"), "oflag=direct", "conv=fdatasync"])
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("dd: {e}"))?;
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&target);
    if !status.success() {
        return Err(format!("dd failed: {status}"));
    }
    Ok((mib << 20) as f64 / elapsed.as_secs_f64())
}

/// The data directory of the payload part for `portion_bytes`-byte portions (recreated by
/// [`payload`]).
pub fn payload_dir(config: &EngineBenchConfig, portion_bytes: usize) -> PathBuf {
    config.dir.join(format!("payload-{portion_bytes}"))
}

/// Payload ingest: `portion_bytes`-byte portions from 64 sensors written by `payload_writers`
/// concurrent sources, each write carrying about 1 MiB (at least one portion). Returns bytes/s.
pub fn payload(config: &EngineBenchConfig, portion_bytes: usize) -> Result<f64, String> {
    let dir = payload_dir(config, portion_bytes);
    fresh_dir(&dir).map_err(|e| e.to_string())?;
    let engine = Engine::open(&dir, engine_options(config)).map_err(|e| e.to_string())?;
    let sensors = 64u32;
    let ids: Vec<SeriesId> = (0..sensors)
        .map(|s| {
            let key = SeriesKey::new("waveform", [("sensor", format!("s{s}"))], "samples").map_err(|e| e.to_string())?;
            engine.series_id(&key, ValueKind::Bytes).map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    // Incompressible: the worst case for the disk path.
    let portion = noise_bytes(portion_bytes, config.seed);
    let portions_total = (config.payload_total_bytes / portion_bytes as u64).max(sensors as u64);
    let writers = config.payload_writers.max(1);
    let per_batch = ((1 << 20) / portion_bytes).clamp(1, sensors as usize / writers);
    let started = Instant::now();
    let failure = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (engine, ids, portion) = (&engine, &ids, &portion);
                scope.spawn(move || -> Result<(), String> {
                    let mut written = 0u64;
                    let mut t = 0i64;
                    let share = portions_total / writers as u64;
                    while written < share {
                        let mut batch = WriteBatch::new();
                        for i in 0..per_batch {
                            let id = ids[(w + i * writers) % ids.len()];
                            batch.push(id, t, Value::Bytes(portion.clone())).map_err(|e| e.to_string())?;
                        }
                        t += 1;
                        written += per_batch as u64;
                        engine.write(&batch).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok().and_then(Result::err)).next()
    });
    if let Some(error) = failure {
        return Err(error);
    }
    engine.flush().map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    engine.close().map_err(|e| e.to_string())?;
    let bytes = (portions_total / writers as u64) * writers as u64 * portion_bytes as u64;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(bytes as f64 / elapsed.as_secs_f64())
}

/// Median and minimum time of `rounds` full reads of one series over one day at 1 Hz.
#[derive(Clone, Copy, Debug)]
pub struct DecodeTimes {
    pub median: Duration,
    pub min: Duration,
}

/// Reads of one series over one day at 1 Hz from sealed segments: decoded every time (the block
/// cache off), and with the default block cache, where every read after the first finds the
/// decoded blocks. Returns (decoded, cached, points). With the cache on for both, the figure
/// named "decode" measured cache hits (0.04 ms against 0.44 for a decode).
pub fn decode(config: &EngineBenchConfig, rounds: usize) -> Result<(DecodeTimes, DecodeTimes, usize), String> {
    let dir = config.dir.join("decode");
    fresh_dir(&dir).map_err(|e| e.to_string())?;
    let start = 1_451_606_400_000_000_000i64;
    let id;
    {
        let engine = Engine::open(&dir, engine_options(config)).map_err(|e| e.to_string())?;
        let key = SeriesKey::new("sensor", [("id", "decode")], "temperature").map_err(|e| e.to_string())?;
        id = engine.series_id(&key, ValueKind::F64).map_err(|e| e.to_string())?;
        let mut value = 20.0f64;
        let mut state = config.seed | 1;
        for hour in 0..24i64 {
            let mut batch = WriteBatch::new();
            for s in 0..3600i64 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                value += ((state % 21) as f64 - 10.0) / 100.0;
                let rounded = (value * 100.0).round() / 100.0;
                batch.push(id, start + (hour * 3600 + s) * 1_000_000_000, Value::F64(rounded)).map_err(|e| e.to_string())?;
            }
            engine.write(&batch).map_err(|e| e.to_string())?;
        }
        engine.close().map_err(|e| e.to_string())?;
    }
    let mut points = 0;
    let mut timed = |block_cache_bytes: usize| -> Result<DecodeTimes, String> {
        let options = EngineOptions { block_cache_bytes, ..engine_options(config) };
        let engine = Engine::open(&dir, options).map_err(|e| e.to_string())?;
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let started = Instant::now();
            let mut read = engine.read(id, start, start + 86_400_000_000_000);
            points = 0;
            while let Some(chunk) = read.next_chunk() {
                points += chunk.map_err(|e| e.to_string())?.len();
            }
            times.push(started.elapsed());
        }
        engine.close().map_err(|e| e.to_string())?;
        times.sort();
        Ok(DecodeTimes { median: times[times.len() / 2], min: times[0] })
    };
    let decoded = timed(0)?;
    let cached = timed(EngineOptions::default().block_cache_bytes)?;
    Ok((decoded, cached, points))
}

/// Median of 3 opens of an existing data directory: (open time, blocks indexed).
pub fn open_time(dir: &Path, durability: Durability) -> Result<(Duration, usize), String> {
    let options = EngineOptions { durability, ..EngineOptions::default() };
    let mut times = Vec::new();
    let mut blocks = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let engine = Engine::open(dir, options.clone()).map_err(|e| e.to_string())?;
        times.push(started.elapsed());
        blocks = engine.stats().store.blocks;
        engine.close().map_err(|e| e.to_string())?;
    }
    times.sort();
    Ok((times[1], blocks))
}

/// Fills a data directory with about `gib` GiB (64 KiB payload portions), closes it, and
/// measures how long opening takes (median of 3 opens). Returns (median open time, bytes, blocks).
pub fn startup(config: &EngineBenchConfig) -> Result<(Duration, u64, usize), String> {
    let dir = config.dir.join("startup");
    fresh_dir(&dir).map_err(|e| e.to_string())?;
    let options = EngineOptions { durability: Durability::None, ..engine_options(config) };
    {
        let engine = Engine::open(&dir, options.clone()).map_err(|e| e.to_string())?;
        let key = SeriesKey::new("waveform", [("sensor", "startup")], "samples").map_err(|e| e.to_string())?;
        let id = engine.series_id(&key, ValueKind::Bytes).map_err(|e| e.to_string())?;
        // Incompressible, so the bytes on disk are the bytes written.
        let portion = noise_bytes(65_536, config.seed);
        let portions = (config.startup_gib * f64::from(1u32 << 30) / 65_536.0) as i64;
        for chunk in 0..portions / 64 {
            let mut batch = WriteBatch::new();
            for i in 0..64 {
                batch.push(id, chunk * 64 + i, Value::Bytes(portion.clone())).map_err(|e| e.to_string())?;
            }
            engine.write(&batch).map_err(|e| e.to_string())?;
        }
        engine.close().map_err(|e| e.to_string())?;
    }
    let bytes = directory_bytes(&dir);
    let mut times = Vec::new();
    let mut blocks = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let engine = Engine::open(&dir, options.clone()).map_err(|e| e.to_string())?;
        times.push(started.elapsed());
        blocks = engine.stats().store.blocks;
        engine.close().map_err(|e| e.to_string())?;
    }
    times.sort();
    Ok((times[1], bytes, blocks))
}
