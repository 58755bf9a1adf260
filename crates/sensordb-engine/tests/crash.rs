//! Crash test: the engine runs in a child process that is killed with SIGKILL at random moments
//! during ingestion (while flushes, WAL rotations and segment seals are under way), then the
//! data directory is reopened and every acknowledged point must be there exactly once, with its
//! value, and no point may hold a value that was never written.
//!
//! The child is this same test binary, re-run with an environment variable that makes
//! `crash_child` do the writing; it prints one line per acknowledged batch.

use rand::{Rng, SeedableRng};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesKey, Value, ValueKind, WriteBatch};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "SENSORDB_CRASH_CHILD_DIR";
const SERIES: u32 = 16;
const WRITERS: u32 = 2;
const POINTS_PER_BATCH: i64 = 50;
const ROUNDS: u64 = 8;

fn options(durability: Durability) -> EngineOptions {
    EngineOptions {
        durability,
        // Tiny limits so that kills land in flushes, WAL rotations and segment seals.
        memtable_bytes_max: 256 * 1024,
        segment_bytes_max: 64 * 1024,
        wal_file_bytes_max: 64 * 1024,
        block_points_max: 500,
        // The host disk's usage must not throttle or evict here.
        reclaim: sensordb_engine::ReclaimOptions { file_system_usage: false, ..Default::default() },
        ..EngineOptions::default()
    }
}

fn key(series: u32) -> SeriesKey {
    SeriesKey::new("crash", [("sensor", format!("s{series:02}"))], "value").expect("valid key")
}

/// The value written at `timestamp` of `series`: derivable, so the checker needs no log.
fn value_at(series: u32, timestamp: i64) -> f64 {
    (timestamp as f64) * 0.5 + f64::from(series)
}

/// Timestamps of batch `batch` of writer `writer` in round `round`; rounds and writers never
/// overlap, batches of one writer are consecutive.
fn batch_timestamps(round: u64, writer: u32, batch: u64) -> std::ops::Range<i64> {
    let start = (round as i64) * 1_000_000_000 + i64::from(writer) * 100_000_000 + (batch as i64) * POINTS_PER_BATCH;
    start..start + POINTS_PER_BATCH
}

fn durability_of(round: u64) -> Durability {
    if round.is_multiple_of(2) {
        Durability::Fsync
    } else {
        Durability::Os
    }
}

#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let round: u64 = std::env::var("SENSORDB_CRASH_ROUND").expect("round").parse().expect("number");
    let engine = Engine::open(&dir, options(durability_of(round))).expect("child open");
    let ids: Vec<_> = (0..SERIES).map(|s| engine.series_id(&key(s), ValueKind::F64).expect("id")).collect();
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let (engine, ids) = (&engine, &ids);
            scope.spawn(move || {
                // Bounded: the parent kills us long before this ends.
                for batch in 0..200_000u64 {
                    let mut points = WriteBatch::new();
                    for t in batch_timestamps(round, writer, batch) {
                        for (s, &id) in ids.iter().enumerate() {
                            points.push(id, t, Value::F64(value_at(s as u32, t))).expect("push");
                        }
                    }
                    engine.write(&points).expect("write");
                    println!("ack {writer} {batch}");
                }
            });
        }
    });
}

#[test]
fn sigkill_during_ingest_loses_no_acknowledged_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x05e5_00db);
    let mut acknowledged: Vec<(u64, u32, u64)> = Vec::new();
    for round in 0..ROUNDS {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env("SENSORDB_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let parts: Vec<&str> = line.split_whitespace().collect();
                if parts.len() == 3 && parts[0] == "ack" {
                    acks.push((parts[1].parse::<u32>().expect("writer"), parts[2].parse::<u64>().expect("batch")));
                }
            }
            acks
        });
        // Let the child get going (opening, recovering), then kill it at a random moment.
        let kill_after = Duration::from_millis(rng.gen_range(150..900));
        let started = Instant::now();
        while started.elapsed() < kill_after {
            if child.try_wait().expect("wait").is_some() {
                panic!("child exited by itself in round {round}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let acks = reader.join().expect("reader");
        assert!(!acks.is_empty(), "round {round}: the child acknowledged nothing in {kill_after:?}");
        acknowledged.extend(acks.into_iter().map(|(w, b)| (round, w, b)));

        // Recover in this process and check every acknowledged point of every round so far.
        let engine = Engine::open(dir.path(), options(durability_of(round))).expect("reopen after kill");
        verify(&engine, &acknowledged, round);
        // Some rounds restart from a crash image that recovery itself left (no clean close).
        if round % 3 == 2 {
            engine.abandon();
        } else {
            engine.close().expect("close");
        }
    }
}

fn verify(engine: &Engine, acknowledged: &[(u64, u32, u64)], round: u64) {
    let expected: BTreeSet<i64> = acknowledged.iter().flat_map(|&(r, w, b)| batch_timestamps(r, w, b)).collect();
    for s in 0..SERIES {
        let id = engine.find_series(&key(s)).expect("series survived");
        let mut seen = BTreeSet::new();
        let mut previous = i64::MIN;
        for point in engine.read(id, i64::MIN, i64::MAX).points() {
            let point = point.expect("no corruption after a crash");
            assert!(point.timestamp > previous, "round {round}: series {s} not strictly ordered at {}", point.timestamp);
            previous = point.timestamp;
            assert_eq!(point.value, Value::F64(value_at(s, point.timestamp)), "round {round}: wrong value");
            seen.insert(point.timestamp);
        }
        let missing: Vec<_> = expected.difference(&seen).take(5).collect();
        assert!(missing.is_empty(), "round {round}: series {s} lost acknowledged points, e.g. {missing:?}");
    }
}
