//! A full disk (and an exhausted descriptor table): a write waits for space (reclaim, or the
//! disk freeing up) and goes on by itself; one that waits longer than its limit fails with a
//! clear `NoSpace` error instead of poisoning the engine; nothing acknowledged is lost.

use sensordb_engine::test_support::fs::FaultyFs;
use sensordb_engine::{Durability, Engine, EngineOptions, Error, RealFs, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options whose writes give up waiting for space after a fraction of a second.
fn impatient(disk: &FaultyFs) -> EngineOptions {
    let mut options = EngineOptions { durability: Durability::Fsync, fs: Arc::new(disk.clone()), ..EngineOptions::default() };
    options.reclaim.full_wait_max = Duration::from_millis(300);
    // The host disk's usage must not throttle here; the faults are injected.
    options.reclaim.file_system_usage = false;
    options
}

fn batch(id: SeriesId, from: i64) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for t in from..from + 100 {
        batch.push(id, t, Value::F64(t as f64)).expect("push");
    }
    batch
}

#[test]
fn a_full_disk_refuses_writes_cleanly_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyFs::new(Arc::new(RealFs));
    let options = impatient(&disk);
    let engine = Engine::open(dir.path(), options.clone()).expect("open");
    let id = engine.series_id(&SeriesKey::new("m", [("s", "1")], "v").expect("key"), ValueKind::F64).expect("id");
    engine.write(&batch(id, 0)).expect("acknowledged");

    disk.set_space_left(Some(0));
    let refused = engine.write(&batch(id, 100)).expect_err("disk full");
    assert!(matches!(refused, Error::NoSpace { .. }), "{refused}");
    let flush = engine.flush().expect_err("flush needs space too");
    assert!(flush.is_no_space(), "{flush}");

    disk.set_space_left(None);
    engine.write(&batch(id, 200)).expect("writes resume by themselves");
    engine.flush().expect("flush resumes");
    engine.close().expect("close");

    let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(RealFs), ..options }).expect("reopen");
    let timestamps: Vec<i64> = engine.read(id, 0, 1_000).points().map(|p| p.expect("read").timestamp).collect();
    assert!(timestamps.windows(2).all(|w| w[0] < w[1]), "each point once, in order");
    assert!((0..100).chain(200..300).all(|t| timestamps.contains(&t)), "acknowledged points survive");
    // The refused batch reached the memtable before its WAL group failed: it may be stored or
    // not (a retry rewrites the same points), but it cannot be half of something else.
    assert!(timestamps.iter().all(|t| (0..300).contains(t)));
}

#[test]
fn a_disk_that_fills_during_a_flush_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyFs::new(Arc::new(RealFs));
    let options = impatient(&disk);
    let engine = Engine::open(dir.path(), options.clone()).expect("open");
    let id = engine.series_id(&SeriesKey::new("m", [("s", "1")], "v").expect("key"), ValueKind::F64).expect("id");
    for round in 0..10 {
        engine.write(&batch(id, round * 100)).expect("acknowledged");
    }
    // Room for the new WAL file's header but not for the segment's group.
    disk.set_space_left(Some(5_000));
    assert!(engine.flush().is_err());
    disk.set_space_left(None);
    engine.flush().expect("the frozen memtable is flushed once there is room");
    engine.abandon();
    let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(RealFs), ..options }).expect("reopen");
    assert!(engine.recovery().problems.is_empty(), "{:?}", engine.recovery().problems);
    assert_eq!(engine.read(id, 0, 1_000).points().count(), 1_000);
}

/// ENOSPC pauses a write instead of failing it: once space comes back (here the disk frees up;
/// in production, reclaim removes dead segments) the same call goes on and succeeds.
#[test]
fn a_write_that_meets_a_full_disk_waits_and_resumes_when_space_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyFs::new(Arc::new(RealFs));
    let mut options = impatient(&disk);
    options.reclaim.full_wait_max = Duration::from_secs(60);
    let engine = Engine::open(dir.path(), options.clone()).expect("open");
    let id = engine.series_id(&SeriesKey::new("m", [("s", "1")], "v").expect("key"), ValueKind::F64).expect("id");
    engine.write(&batch(id, 0)).expect("acknowledged");
    disk.set_space_left(Some(0));
    let started = Instant::now();
    let freer = {
        let disk = disk.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            disk.set_space_left(None);
        })
    };
    engine.write(&batch(id, 100)).expect("the write waited for space instead of failing");
    assert!(started.elapsed() >= Duration::from_millis(500), "it cannot have been durable before space returned");
    freer.join().expect("freer");
    engine.close().expect("close");
    let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(RealFs), ..options }).expect("reopen");
    assert_eq!(engine.read(id, 0, 1_000).points().count(), 200);
}

/// Found by `sensordb bench tx` with 10,000 clients: "too many open files" while the WAL
/// started a new file stopped the engine for good. Nothing had changed on disk, so it must not.
#[test]
fn running_out_of_file_descriptors_is_not_fatal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyFs::new(Arc::new(RealFs));
    let options = impatient(&disk);
    let engine = Engine::open(dir.path(), options.clone()).expect("open");
    let id = engine.series_id(&SeriesKey::new("m", [("s", "1")], "v").expect("key"), ValueKind::F64).expect("id");
    engine.write(&batch(id, 0)).expect("acknowledged");
    disk.set_fail_creates(true);
    assert!(engine.flush().is_err(), "the WAL cannot start its next file");
    disk.set_fail_creates(false);
    engine.write(&batch(id, 100)).expect("writes go on");
    engine.flush().expect("flushes go on");
    engine.close().expect("close");
    let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(RealFs), ..options }).expect("reopen");
    assert_eq!(engine.read(id, 0, 1_000).points().count(), 200);
}
