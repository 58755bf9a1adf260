//! Completion marks through the engine: durable with the points of their write, replayed after a
//! crash, given to the sink by a flush before their WAL files go, carried forward in the WAL
//! while no sink is registered, and written with the points in one fdatasync.

use parking_lot::Mutex;
use sensordb_engine::test_support::fs::FaultyFs;
use sensordb_engine::RealFs;
use sensordb_engine::WriteBatch;
use sensordb_engine::{Durability, Engine, EngineOptions, MarkSink, SeriesKey, TxMark, Value, ValueKind};
use std::path::Path;
use std::sync::Arc;

fn options(fs: Arc<FaultyFs>) -> EngineOptions {
    EngineOptions { durability: Durability::Fsync, background_compaction: false, background_reclaim: false, fs, ..Default::default() }
}

fn open(dir: &Path) -> (Engine, Arc<FaultyFs>) {
    let fs = Arc::new(FaultyFs::new(Arc::new(RealFs)));
    (Engine::open(dir, options(fs.clone())).expect("engine opens"), fs)
}

fn mark(n: u8, points: u64) -> TxMark {
    TxMark { client: [9; 16], tx: [n; 16], completed_at_ns: 1_000 + i64::from(n), points }
}

fn write(engine: &Engine, from: i64, count: i64, marks: &[TxMark]) {
    let series = engine.series_id(&SeriesKey::new("m", [("s", "a")], "v").expect("key"), ValueKind::F64).expect("series");
    let mut batch = WriteBatch::new();
    for t in from..from + count {
        batch.push(series, t, Value::F64(t as f64)).expect("push");
    }
    engine.write_with_marks(&batch, marks).expect("written");
}

fn points(engine: &Engine) -> usize {
    let series = engine.find_series(&SeriesKey::new("m", [("s", "a")], "v").expect("key")).expect("series");
    engine.read(series, i64::MIN, i64::MAX).points().count()
}

#[derive(Default)]
struct Collected(Mutex<Vec<TxMark>>);

impl MarkSink for Collected {
    fn checkpoint(&self, marks: &[TxMark]) -> std::io::Result<()> {
        self.0.lock().extend_from_slice(marks);
        Ok(())
    }
}

#[test]
fn marks_are_replayed_after_a_crash_and_handed_to_the_sink_by_a_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = open(dir.path());
    write(&engine, 0, 10, &[mark(1, 10)]);
    // A transaction with no points: its mark is logged alone.
    write(&engine, 0, 0, &[mark(2, 0)]);
    write(&engine, 10, 5, &[]);
    assert_eq!(engine.unflushed_marks(), [mark(1, 10), mark(2, 0)]);
    engine.abandon();

    let (engine, _) = open(dir.path());
    assert_eq!(engine.recovery().marks_replayed, 2);
    assert_eq!(engine.unflushed_marks(), [mark(1, 10), mark(2, 0)]);
    let sink = Arc::new(Collected::default());
    engine.set_mark_sink(Some(sink.clone()));
    write(&engine, 20, 5, &[mark(3, 5)]);
    engine.flush().expect("flushed");
    assert_eq!(*sink.0.lock(), [mark(1, 10), mark(2, 0), mark(3, 5)], "given to the sink, in write order");
    assert!(engine.unflushed_marks().is_empty());
    engine.abandon();

    // The WAL files that held them are gone: nothing is replayed twice.
    let (engine, _) = open(dir.path());
    assert_eq!(engine.recovery().marks_replayed, 0);
    assert!(engine.unflushed_marks().is_empty());
    assert_eq!(points(&engine), 20);
    engine.close().expect("closes");
}

#[test]
fn without_a_sink_a_flush_carries_marks_forward_in_the_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = open(dir.path());
    write(&engine, 0, 10, &[mark(1, 10), mark(2, 0)]);
    engine.flush().expect("flushed");
    assert_eq!(engine.unflushed_marks(), [mark(1, 10), mark(2, 0)], "still held");
    write(&engine, 10, 1, &[mark(3, 1)]);
    engine.flush().expect("flushed again");
    engine.abandon();

    let (engine, _) = open(dir.path());
    assert_eq!(engine.unflushed_marks(), [mark(1, 10), mark(2, 0), mark(3, 1)], "survived two flushes and a crash");
    assert_eq!(points(&engine), 11, "the points were flushed, not replayed twice");
    let sink = Arc::new(Collected::default());
    engine.set_mark_sink(Some(sink.clone()));
    // Nothing but marks unflushed: a flush has no points to write and leaves the WAL be.
    engine.flush().expect("flushed");
    write(&engine, 11, 1, &[]);
    engine.flush().expect("flushed");
    assert_eq!(*sink.0.lock(), [mark(1, 10), mark(2, 0), mark(3, 1)]);
    engine.close().expect("closes");
}

#[test]
fn a_write_with_marks_costs_one_fdatasync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, fs) = open(dir.path());
    // The series' catalog sync comes first, out of the count.
    write(&engine, 0, 1, &[]);
    let before = fs.data_syncs();
    for n in 0..10u8 {
        write(&engine, 100 + i64::from(n) * 10, 10, &[mark(n, 10), mark(n + 100, 0)]);
    }
    assert_eq!(fs.data_syncs() - before, 10, "one fdatasync per write, marks included");
    engine.close().expect("closes");
}
