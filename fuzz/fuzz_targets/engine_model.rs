//! Model-based fuzzing of the engine (in the manner of redb's fuzz_redb.rs): a sequence of
//! `arbitrary` operations — write batches of points to six series (all value kinds, five of
//! them in one row so flushes share timestamp records), flush, close and reopen, range reads —
//! runs against an `Engine` with `Durability::None`, a small `block_points_max` and a small
//! `segment_bytes_max` (many blocks, many sealed segments), and against a reference model: one
//! `BTreeMap<timestamp, value>` per series where the last write of a timestamp wins.
//!
//! Asserts: nothing panics, no operation fails, and every range read (and a full read of every
//! series at the end) returns exactly the model's points in `[from, to)`, in order, f64
//! compared bitwise.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, Value, ValueKind, WriteBatch};
use sensordb_fuzz::{scratch_dir, series_keys, value_of};
use std::collections::BTreeMap;
use std::path::Path;

const OPS_MAX: usize = 48;
const POINTS_MAX: usize = 64;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Time {
    /// Many collisions: overwrites within and across blocks and segments.
    Near(i8),
    Mid(i16),
    Any(i64),
}

impl Time {
    fn get(self) -> i64 {
        match self {
            Time::Near(t) => i64::from(t),
            Time::Mid(t) => i64::from(t) * 7,
            Time::Any(t) => t,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// One batch: (series index, timestamp, value bits).
    Write(Vec<(u8, Time, u64)>),
    Flush,
    Reopen,
    Read {
        series: u8,
        from: Time,
        to: Time,
        by_points: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    block_points_max: u8,
    segment_pages: u8,
    ops: Vec<Op>,
}

struct Db {
    engine: Engine,
    ids: Vec<(SeriesId, ValueKind)>,
}

fn open(dir: &Path, options: &EngineOptions) -> Db {
    let engine = Engine::open(dir, options.clone()).expect("engine opens");
    let ids = series_keys().into_iter().map(|(key, kind)| (engine.series_id(&key, kind).expect("series registers"), kind)).collect();
    Db { engine, ids }
}

fn read(db: &Db, series: usize, from: i64, to: i64, by_points: bool) -> Vec<(i64, Value)> {
    let read = db.engine.read(db.ids[series].0, from, to);
    if by_points {
        return read.points().map(|p| p.map(|p| (p.timestamp, p.value)).expect("read point")).collect();
    }
    match read.collect_all().expect("read") {
        None => Vec::new(),
        Some(chunk) => {
            assert_eq!(chunk.timestamps.len(), chunk.values.len());
            chunk.timestamps.iter().enumerate().map(|(i, &t)| (t, chunk.values.get(i))).collect()
        }
    }
}

fn expected(model: &BTreeMap<i64, Value>, from: i64, to: i64) -> Vec<(i64, Value)> {
    if from >= to {
        return Vec::new();
    }
    model.range(from..to).map(|(&t, v)| (t, v.clone())).collect()
}

fuzz_target!(|input: Input| {
    let dir = scratch_dir();
    let options = EngineOptions {
        durability: Durability::None,
        block_points_max: 1 + usize::from(input.block_points_max % 32),
        segment_bytes_max: 4096 * (1 + u64::from(input.segment_pages % 8)),
        memtable_shards: 2,
        ..Default::default()
    };
    let series_count = series_keys().len();
    let mut model: Vec<BTreeMap<i64, Value>> = vec![BTreeMap::new(); series_count];
    let mut db = Some(open(dir.path(), &options));
    for op in input.ops.iter().take(OPS_MAX) {
        let current = db.as_ref().expect("open");
        match op {
            Op::Write(points) => {
                let mut batch = WriteBatch::new();
                for &(series, time, bits) in points.iter().take(POINTS_MAX) {
                    let series = usize::from(series) % series_count;
                    let (id, kind) = current.ids[series];
                    let value = value_of(kind, bits);
                    batch.push(id, time.get(), value.clone()).expect("kinds match");
                    model[series].insert(time.get(), value);
                }
                current.engine.write(&batch).expect("write");
            }
            Op::Flush => current.engine.flush().expect("flush"),
            Op::Reopen => {
                db.take().expect("open").engine.close().expect("close");
                db = Some(open(dir.path(), &options));
            }
            &Op::Read { series, from, to, by_points } => {
                let series = usize::from(series) % series_count;
                let (from, to) = (from.get(), to.get());
                let got = read(current, series, from, to, by_points);
                let want = expected(&model[series], from, to);
                assert!(got == want, "series {series} [{from}, {to}): engine has {got:?}, model {want:?}");
            }
        }
    }
    let db = db.expect("open");
    for (series, model) in model.iter().enumerate() {
        let got = read(&db, series, i64::MIN, i64::MAX, false);
        let want = expected(model, i64::MIN, i64::MAX);
        assert!(got == want, "series {series} in full: engine has {got:?}, model {want:?}");
    }
    db.engine.close().expect("close");
});
