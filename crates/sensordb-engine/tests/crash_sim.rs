//! Power-loss simulation: the engine runs a seeded workload (writes of float and payload series,
//! new series synced and unsynced, flushes, compactions, WAL rotations, segment seals, clean
//! restarts) on a [`CrashFs`], the file system in memory that knows which writes are durable.
//! For each crash point (every Nth mutating file-system operation of the workload, a little
//! jittered) the workload runs again and the power goes out at that operation; the engine is
//! reopened on what a power loss would have kept ([`CrashMode`]: unsynced writes dropped, the
//! last one torn, kept in order up to a torn one, or pages written back in any order), and:
//!
//! - recovery succeeds (also after a second power loss during recovery, for one crash point
//!   in three);
//! - under `Durability::Fsync` every acknowledged point is there with its value, and so is every
//!   series whose creation returned (synced) or that an acknowledged write named;
//! - under `Durability::Os` every point acknowledged before the last flush, compaction or clean
//!   close that returned is there (docs/format/wal.md: `os` survives a process crash only; the
//!   flush syncs segments and catalog);
//! - whatever the mode, every point read back was written (to that series, at that timestamp,
//!   with that value), once.
//!
//! `SENSORDB_CRASH_POINTS` (default 96 in this suite) sets how many crash points run, spread over
//! both durabilities and one workload seed per 200 crash points (at least two);
//! `SENSORDB_CRASH_SEED` changes the first seed. The long run of
//! docs/BENCHMARKS.md: `SENSORDB_CRASH_POINTS=5000 cargo test --release -p sensordb-engine
//! --test crash_sim -- --nocapture`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sensordb_engine::test_support::fs::{CrashFs, CrashMode};
use sensordb_engine::{Durability, Engine, EngineOptions, ReclaimOptions, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Float series, then one payload series whose big batches take the direct-write path.
const FLOAT_SERIES: usize = 6;
const PAYLOAD_SERIES: usize = FLOAT_SERIES;
const SERIES: usize = FLOAT_SERIES + 1;
const STEPS: usize = 90;
const DEFAULT_CRASH_POINTS: u64 = 96;
const DEFAULT_SEED: u64 = 0xc0a5_7e55;
/// Crash points per workload seed (split between the two durabilities); a workload issues
/// about 300-500 mutating operations.
const CRASH_POINTS_PER_SEED: u64 = 200;

fn options(fs: &CrashFs, durability: Durability) -> EngineOptions {
    EngineOptions {
        durability,
        // Flushes happen where the workload asks (deterministic), never in the background.
        memtable_bytes_max: 256 << 20,
        flush_interval: Duration::from_secs(3600),
        background_compaction: false,
        background_reclaim: false,
        throttle_writes: false,
        reclaim: ReclaimOptions { file_system_usage: false, ..ReclaimOptions::default() },
        // Small files: WAL rotations, segment seals and compactions every few steps.
        wal_file_bytes_max: 4 << 10,
        segment_bytes_max: 48 << 10,
        block_points_max: 64,
        compaction_small_block_points: 48,
        direct_write_bytes_min: 1 << 10,
        memtable_shards: 2,
        fs: Arc::new(fs.clone()),
        ..EngineOptions::default()
    }
}

fn key(series: usize) -> SeriesKey {
    SeriesKey::new("sim", [("sensor", format!("s{series}"))], "value").expect("valid key")
}

fn kind(series: usize) -> ValueKind {
    if series == PAYLOAD_SERIES {
        ValueKind::Bytes
    } else {
        ValueKind::F64
    }
}

/// The value written at `timestamp` of `series`: derivable, so a point read back can be checked
/// without a log of values.
fn value_at(series: usize, timestamp: i64) -> Value {
    if series == PAYLOAD_SERIES {
        let unit = format!("{series}:{timestamp};");
        Value::Bytes(unit.repeat(400 / unit.len() + 1).into_bytes().into())
    } else {
        Value::F64(timestamp as f64 * 0.25 + series as f64)
    }
}

/// What the workload did, as the checker needs it.
#[derive(Default)]
struct Record {
    /// Every timestamp a write of the series was attempted at, acknowledged or not.
    attempted: Vec<BTreeSet<i64>>,
    /// Points that must survive a power loss.
    required: Vec<BTreeSet<i64>>,
    /// Acknowledged points not yet required (`Os`: until the next sync point).
    pending: Vec<BTreeSet<i64>>,
    /// Series that must be in the catalog after a power loss.
    series_required: BTreeSet<usize>,
    /// Series created since the last sync point (`Os`), or unsynced and not yet written (`Fsync`).
    series_pending: BTreeSet<usize>,
    /// Acknowledged writes, sync points passed.
    writes_acknowledged: u64,
    sync_points: u64,
}

impl Record {
    fn new() -> Self {
        Record {
            attempted: vec![BTreeSet::new(); SERIES],
            required: vec![BTreeSet::new(); SERIES],
            pending: vec![BTreeSet::new(); SERIES],
            ..Record::default()
        }
    }

    /// A flush, compaction or clean close returned: under `Os` what was acknowledged is now
    /// synced.
    fn sync_point(&mut self) {
        self.sync_points += 1;
        for (required, pending) in self.required.iter_mut().zip(&mut self.pending) {
            required.append(pending);
        }
        self.series_required.append(&mut self.series_pending);
    }
}

/// One workload under one durability, from one seed.
#[derive(Clone, Copy, Debug)]
struct Workload {
    seed: u64,
    durability: Durability,
}

/// What one run left: the file system at its end, what it did, and why it stopped.
struct Run {
    fs: CrashFs,
    record: Record,
    /// The first error, which must come from the crash.
    stopped_by: Option<String>,
}

/// The data directory under `root`: the engine creates it, so that its directory entry is
/// subject to power loss as well (in the real file system it exists, for the directory lock).
fn data_dir(root: &Path) -> PathBuf {
    let data = root.join("data");
    std::fs::create_dir_all(&data).expect("real data directory for the lock file");
    data
}

/// Runs `workload` on a fresh file system rooted at `root` (the engine's data directory is
/// created in it), the power going out at mutating operation `crash_at` (`None`: after the last
/// step). Every error must come from the crash.
fn run(workload: Workload, root: &Path, crash_at: Option<u64>) -> Result<Run, String> {
    let fs = CrashFs::new(root);
    let root = &data_dir(root);
    fs.crash_at(crash_at);
    let mut record = Record::new();
    let mut rng = StdRng::seed_from_u64(workload.seed);
    let fsync = workload.durability == Durability::Fsync;
    let unexpected = |what: &str, error: &dyn std::fmt::Display, fs: &CrashFs| -> Result<(), String> {
        if fs.crashed() {
            Ok(())
        } else {
            Err(format!("{what} failed before any crash: {error}"))
        }
    };
    let mut engine = match Engine::open(root, options(&fs, workload.durability)) {
        Ok(engine) => Some(engine),
        Err(e) => {
            unexpected("the first open", &e, &fs)?;
            None
        }
    };
    let mut ids: Vec<Option<SeriesId>> = vec![None; SERIES];
    let mut next_timestamp = [1_000i64; SERIES];
    let mut stopped_by = None;
    for _step in 0..STEPS {
        let Some(live) = engine.as_ref() else { break };
        let action = rng.gen_range(0..100);
        let outcome: Result<(), sensordb_engine::Error> = if action < 78 {
            // A write to one to three series, creating those that are new.
            let mut batch = WriteBatch::new();
            let mut written: Vec<(usize, std::ops::Range<i64>)> = Vec::new();
            let payload = rng.gen_bool(0.12);
            let chosen: Vec<usize> = if payload {
                vec![PAYLOAD_SERIES]
            } else {
                let count = rng.gen_range(1..=3);
                (0..count).map(|_| rng.gen_range(0..FLOAT_SERIES)).collect::<BTreeSet<_>>().into_iter().collect()
            };
            let mut failed = None;
            for &series in &chosen {
                let id = match ids[series] {
                    Some(id) => id,
                    None => {
                        let synced = rng.gen_bool(0.5);
                        let created = if synced {
                            live.series_id(&key(series), kind(series))
                        } else {
                            live.series_id_unsynced(&key(series), kind(series))
                        };
                        match created {
                            Ok(id) => {
                                ids[series] = Some(id);
                                if synced && fsync {
                                    record.series_required.insert(series);
                                } else {
                                    record.series_pending.insert(series);
                                }
                                id
                            }
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                };
                let points = if payload { rng.gen_range(3..=8) } else { rng.gen_range(1..=40) };
                let range = next_timestamp[series]..next_timestamp[series] + points;
                next_timestamp[series] = range.end + rng.gen_range(0..3);
                for t in range.clone() {
                    batch.push(id, t, value_at(series, t)).expect("one kind per series");
                }
                written.push((series, range));
            }
            match failed {
                Some(e) => Err(e),
                None => {
                    for (series, range) in &written {
                        record.attempted[*series].extend(range.clone());
                    }
                    let result = live.write(&batch);
                    if result.is_ok() {
                        record.writes_acknowledged += 1;
                        for (series, range) in written {
                            if fsync {
                                record.required[series].extend(range);
                                record.series_pending.remove(&series);
                                record.series_required.insert(series);
                            } else {
                                record.pending[series].extend(range);
                            }
                        }
                    }
                    result
                }
            }
        } else if action < 90 {
            live.flush().map(|()| record.sync_point())
        } else if action < 96 {
            live.compact().map(|_| record.sync_point())
        } else {
            // A clean restart: close flushes and seals, the next open recovers nothing.
            let closing = engine.take().expect("engine is open");
            match closing.close() {
                Ok(()) => {
                    record.sync_point();
                    match Engine::open(root, options(&fs, workload.durability)) {
                        Ok(reopened) => {
                            engine = Some(reopened);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        };
        if let Err(e) = outcome {
            unexpected("a workload step", &e, &fs)?;
            stopped_by = Some(e.to_string());
            break;
        }
    }
    // The power goes out now if it has not yet: nothing the engine does from here reaches disk.
    if !fs.crashed() {
        fs.crash_at(Some(fs.operations()));
    }
    if let Some(engine) = engine {
        engine.abandon();
    }
    Ok(Run { fs, record, stopped_by })
}

/// Reopens the engine on `fs` and checks what it holds against `record`.
fn check(workload: Workload, root: &Path, fs: &CrashFs, record: &Record) -> Result<u64, String> {
    let root = &data_dir(root);
    let engine = Engine::open(root, options(fs, workload.durability)).map_err(|e| format!("recovery failed: {e}"))?;
    let mut points_checked = 0u64;
    for series in 0..SERIES {
        let Some(id) = engine.find_series(&key(series)) else {
            if record.series_required.contains(&series) || !record.required[series].is_empty() {
                return Err(format!("series {series} is gone ({} required points)", record.required[series].len()));
            }
            continue;
        };
        let entry = engine.series(id).ok_or_else(|| format!("series {series}: id {} has no entry", id.0))?;
        if entry.kind != kind(series) {
            return Err(format!("series {series} came back as {:?}", entry.kind));
        }
        let mut seen = BTreeSet::new();
        for point in engine.read(id, i64::MIN, i64::MAX).points() {
            let point = point.map_err(|e| format!("series {series}: read failed: {e}"))?;
            if !record.attempted[series].contains(&point.timestamp) {
                return Err(format!("series {series}: point at {} was never written", point.timestamp));
            }
            if point.value != value_at(series, point.timestamp) {
                return Err(format!("series {series}: point at {} holds a value never written there", point.timestamp));
            }
            if !seen.insert(point.timestamp) {
                return Err(format!("series {series}: point at {} read twice", point.timestamp));
            }
        }
        let missing: Vec<&i64> = record.required[series].difference(&seen).collect();
        if !missing.is_empty() {
            return Err(format!(
                "series {series}: {} of {} required points lost, the first at {:?}",
                missing.len(),
                record.required[series].len(),
                missing.iter().take(3).collect::<Vec<_>>()
            ));
        }
        points_checked += seen.len() as u64;
    }
    // The recovered store takes new series and points, and keeps them across a clean restart.
    let after = SeriesKey::new("sim_after", [("sensor", "new")], "value").expect("valid key");
    let write_after = |engine: &Engine| -> sensordb_engine::Result<()> {
        let mut batch = WriteBatch::new();
        batch.push(engine.series_id(&after, ValueKind::F64)?, 7, Value::F64(7.5)).expect("one kind");
        engine.write(&batch)
    };
    write_after(&engine).map_err(|e| format!("write after recovery failed: {e}"))?;
    engine.close().map_err(|e| format!("close after recovery failed: {e}"))?;
    let engine = Engine::open(root, options(fs, workload.durability)).map_err(|e| format!("restart after recovery failed: {e}"))?;
    let id = engine.find_series(&after).ok_or("the series created after recovery is gone")?;
    let points: Vec<_> = engine.read(id, i64::MIN, i64::MAX).points().collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    if points.len() != 1 || points[0].value != Value::F64(7.5) {
        return Err(format!("the point written after recovery came back as {points:?}"));
    }
    engine.close().map_err(|e| format!("close after restart failed: {e}"))?;
    Ok(points_checked)
}

/// One crash point: run to it, lose power, maybe lose it again during recovery, check.
fn crash_point(workload: Workload, crash_at: u64, mode: CrashMode, image_seed: u64) -> Result<(u64, bool), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let root = dir.path();
    let run = run(workload, root, Some(crash_at))?;
    let _ = &run.stopped_by;
    let mut image = run.fs.crash_image(mode, image_seed);
    let mut rng = StdRng::seed_from_u64(image_seed);
    let recovery_crashed = rng.gen_ratio(1, 3);
    if recovery_crashed {
        // The power goes out again while recovery repairs the first crash's damage.
        image.crash_at(Some(rng.gen_range(0..24)));
        match Engine::open(data_dir(root), options(&image, workload.durability)) {
            Ok(engine) => {
                if !image.crashed() {
                    image.crash_at(Some(image.operations()));
                }
                engine.abandon();
            }
            Err(e) if image.crashed() => drop(e),
            Err(e) => return Err(format!("recovery failed before the second crash: {e}")),
        }
        let second = CrashMode::ALL[rng.gen_range(0..CrashMode::ALL.len())];
        image = image.crash_image(second, rng.gen());
    }
    let points = check(workload, root, &image, &run.record)?;
    Ok((points, recovery_crashed))
}

struct Failure {
    workload: Workload,
    crash_at: u64,
    mode: CrashMode,
    image_seed: u64,
    what: String,
}

#[test]
fn crash_sim_power_loss_keeps_what_each_durability_promises() {
    let crash_points: u64 = std::env::var("SENSORDB_CRASH_POINTS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CRASH_POINTS);
    let seed: u64 = std::env::var("SENSORDB_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_SEED);
    let started = Instant::now();
    // One workload seed per CRASH_POINTS_PER_SEED crash points (at least two), each run under
    // both durabilities: a long run covers many workloads, not one workload many times over.
    let seeds = crash_points.div_ceil(CRASH_POINTS_PER_SEED).max(2);
    let workloads: Vec<Workload> = (0..seeds)
        .map(|n| seed.wrapping_add(n))
        .flat_map(|seed| [Durability::Fsync, Durability::Os].map(|durability| Workload { seed, durability }))
        .collect();
    let per_workload = crash_points.div_ceil(workloads.len() as u64).max(1);
    let mut failures: Vec<Failure> = Vec::new();
    let (mut runs, mut points_checked, mut recovery_crashes) = (0u64, 0u64, 0u64);
    let mut mode_runs: BTreeMap<String, u64> = BTreeMap::new();
    for (index, &workload) in workloads.iter().enumerate() {
        // A run without a crash counts the operations and checks the workload acknowledges.
        let dir = tempfile::tempdir().expect("tempdir");
        let full = run(workload, dir.path(), None).unwrap_or_else(|e| panic!("{workload:?}: {e}"));
        assert!(full.stopped_by.is_none(), "{workload:?}: the run without a crash stopped: {:?}", full.stopped_by);
        assert!(full.record.writes_acknowledged > STEPS as u64 / 2, "{workload:?}: too few writes acknowledged");
        assert!(full.record.sync_points > 3, "{workload:?}: too few flushes, compactions or restarts");
        let operations = full.fs.operations();
        // Crash point n must mean the same moment in every run (and the same in a rerun of a
        // failure): the workload is deterministic down to the file-system operations.
        let again = tempfile::tempdir().expect("tempdir");
        let rerun = run(workload, again.path(), None).unwrap_or_else(|e| panic!("{workload:?}: {e}"));
        assert_eq!(rerun.fs.operations(), operations, "{workload:?}: two runs of one seed issued different operations");
        let relative = |fs: &CrashFs, root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            fs.files().into_iter().map(|(path, bytes)| (path.strip_prefix(root).expect("under the root").to_path_buf(), bytes)).collect()
        };
        assert!(
            relative(&rerun.fs, again.path()) == relative(&full.fs, dir.path()),
            "{workload:?}: two runs of one seed left different files"
        );
        let stride = (operations / per_workload).max(1);
        let mut rng = StdRng::seed_from_u64(seed ^ (index as u64) << 32);
        for point in 0..per_workload {
            let crash_at = (point * stride + rng.gen_range(0..stride)).min(operations);
            let mode = CrashMode::ALL[(point as usize + index) % CrashMode::ALL.len()];
            let image_seed: u64 = rng.gen();
            let outcome = std::panic::catch_unwind(|| crash_point(workload, crash_at, mode, image_seed))
                .unwrap_or_else(|panic| Err(format!("panicked: {:?}", panic.downcast_ref::<String>().map(String::as_str))));
            runs += 1;
            *mode_runs.entry(format!("{mode:?}")).or_default() += 1;
            match outcome {
                Ok((points, recovery_crashed)) => {
                    points_checked += points;
                    recovery_crashes += u64::from(recovery_crashed);
                }
                Err(what) => failures.push(Failure { workload, crash_at, mode, image_seed, what }),
            }
        }
    }
    println!(
        "crash_sim: {runs} crash points ({recovery_crashes} with a second power loss during recovery; modes {mode_runs:?}), \
         {points_checked} points read back and checked, {} failures, {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    for failure in failures.iter().take(10) {
        println!(
            "  {:?} seed {} crash at operation {} ({:?}, image seed {}): {}",
            failure.workload.durability, failure.workload.seed, failure.crash_at, failure.mode, failure.image_seed, failure.what
        );
    }
    assert!(failures.is_empty(), "{} of {runs} crash points failed (listed above)", failures.len());
}
