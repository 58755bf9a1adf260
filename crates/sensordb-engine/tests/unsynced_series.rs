//! Series created with `series_id_unsynced` (the HTTP write path) are made durable by the first
//! write that names them, with one catalog fsync for the whole batch; when that fsync fails the
//! write is refused and the engine refuses every later write, since a record could otherwise name
//! a series the catalog may have lost.

use sensordb_engine::test_support::fs::FaultyFs;
use sensordb_engine::{Durability, Engine, EngineOptions, Error, RealFs, SeriesKey, Value, ValueKind, WriteBatch};
use std::sync::Arc;

fn key(sensor: u32) -> SeriesKey {
    SeriesKey::new("m", [("sensor", format!("s{sensor}"))], "v").expect("key")
}

#[test]
fn unsynced_series_become_durable_with_the_write_that_names_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyFs::new(Arc::new(RealFs));
    let options = EngineOptions { durability: Durability::Fsync, fs: Arc::new(disk.clone()), ..EngineOptions::default() };
    let engine = Engine::open(dir.path(), options.clone()).expect("open");
    let mut batch = WriteBatch::new();
    for sensor in 0..10 {
        let id = engine.series_id_unsynced(&key(sensor), ValueKind::F64).expect("id");
        batch.push(id, 1, Value::F64(f64::from(sensor))).expect("push");
    }
    engine.write(&batch).expect("acknowledged");

    // A new series whose catalog fsync fails: the write naming it is refused, and so is every
    // later one (a later fsync may report success although the failed one's pages are gone).
    let id = engine.series_id_unsynced(&key(10), ValueKind::F64).expect("no fsync yet");
    disk.set_fail_sync(true);
    let mut failing = WriteBatch::new();
    failing.push(id, 1, Value::F64(10.0)).expect("push");
    engine.write(&failing).expect_err("catalog fsync fails");
    disk.set_fail_sync(false);
    let refused = engine.write(&batch).expect_err("poisoned");
    assert!(matches!(refused, Error::Poisoned(_)), "{refused}");
    engine.abandon();

    let engine = Engine::open(dir.path(), EngineOptions { fs: Arc::new(RealFs), ..options }).expect("reopen");
    for sensor in 0..10 {
        let id = engine.find_series(&key(sensor)).expect("durable series");
        let values: Vec<Value> = engine.read(id, 0, 10).points().map(|p| p.expect("read").value).collect();
        assert_eq!(values, [Value::F64(f64::from(sensor))]);
    }
}
