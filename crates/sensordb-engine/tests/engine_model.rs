//! Write → flush → restart → read (and newest point, and the bound of the oldest) equivalence
//! against a simple in-memory model (a `BTreeMap` keyed by (series, timestamp), last write
//! wins), over both block stores: the segment files of `Engine::open` and the `MemoryStore`
//! given to `Engine::open_with_store`.

use proptest::prelude::*;
use sensordb_engine::store::{BlockStore, MemoryStore};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    /// (series index, timestamp, value bits)
    Write(Vec<(u8, i64, i64)>),
    /// Both fields of a row (series 2r and 2r+1) at the same timestamps, as line protocol does.
    WriteRows(Vec<(u8, i64, i64)>),
    Flush,
    Reopen,
    /// Stop like a killed process (no flush) and reopen: only the WAL has the buffered points.
    Crash,
    Read {
        series: u8,
        from: i64,
        len: i64,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => proptest::collection::vec((0u8..4, -200i64..200, any::<i64>()), 1..40).prop_map(Op::Write),
        3 => proptest::collection::vec((0u8..2, -200i64..200, any::<i64>()), 1..60).prop_map(Op::WriteRows),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        2 => (0u8..4, -250i64..250, 0i64..300).prop_map(|(series, from, len)| Op::Read { series, from, len }),
    ]
}

fn options(durability: Durability) -> EngineOptions {
    EngineOptions {
        durability,
        // Small blocks and segments so that splitting and sealing happen in short runs.
        block_points_max: 16,
        segment_bytes_max: 16 * 1024,
        memtable_shards: 2,
        ..EngineOptions::default()
    }
}

/// Series 2r and 2r+1 are two fields of row r, so flushes share their timestamps.
fn key(series: u8) -> SeriesKey {
    SeriesKey::new("m", [("sensor", format!("s{}", series / 2))], format!("f{}", series % 2)).expect("valid key")
}

fn check_read(engine: &Engine, ids: &[SeriesId], model: &BTreeMap<(u8, i64), i64>, series: u8, from: i64, to: i64) {
    let expected: Vec<(i64, i64)> = model.range((series, from)..(series, to)).map(|(&(_, t), &v)| (t, v)).collect();
    let actual: Vec<(i64, i64)> = engine
        .read(ids[series as usize], from, to)
        .points()
        .map(|p| {
            let p = p.expect("read");
            match p.value {
                Value::I64(v) => (p.timestamp, v),
                other => panic!("wrong kind {other:?}"),
            }
        })
        .collect();
    assert_eq!(actual, expected, "series {series} over [{from}, {to})");

    // Newest first, chunk by chunk: the same points in reverse.
    let mut read = engine.read(ids[series as usize], from, to);
    let mut backward = Vec::new();
    while let Some(chunk) = read.next_chunk_back() {
        backward.extend(pairs(&chunk.expect("read back")).into_iter().rev());
    }
    backward.reverse();
    assert_eq!(backward, expected, "series {series} over [{from}, {to}) read newest first");

    // Alternating ends meet in the middle: every point once.
    let mut read = engine.read(ids[series as usize], from, to);
    let (mut front, mut back) = (Vec::new(), Vec::new());
    for step in 0.. {
        let chunk = if step % 2 == 0 { read.next_chunk() } else { read.next_chunk_back() };
        let Some(chunk) = chunk else { break };
        let chunk = pairs(&chunk.expect("read"));
        if step % 2 == 0 {
            front.extend(chunk);
        } else {
            back.splice(0..0, chunk);
        }
    }
    front.extend(back);
    assert_eq!(front, expected, "series {series} over [{from}, {to}) read from both ends");
}

fn pairs(chunk: &sensordb_engine::Chunk) -> Vec<(i64, i64)> {
    (0..chunk.len())
        .map(|i| match chunk.values.get(i) {
            Value::I64(v) => (chunk.timestamps[i], v),
            other => panic!("wrong kind {other:?}"),
        })
        .collect()
}

/// The newest point of every series, as `Engine::last_points` answers without reading history,
/// is the model's newest.
fn check_last(engine: &Engine, ids: &[SeriesId], model: &BTreeMap<(u8, i64), i64>) {
    let actual = engine.last_points(ids).expect("last points");
    for (series, got) in actual.into_iter().enumerate() {
        let series = series as u8;
        let expected = model.range((series, i64::MIN)..=(series, i64::MAX)).next_back().map(|(&(_, t), &v)| (t, Value::I64(v)));
        assert_eq!(got, expected, "newest point of series {series}");
    }
}

/// The bound of every series' oldest point, as `Engine::oldest_bounds` answers from the
/// memtables and the store's index: without retention it is the model's oldest time exactly
/// (a block's extent starts at its oldest point), and `None` only for a series without points.
fn check_oldest(engine: &Engine, ids: &[SeriesId], model: &BTreeMap<(u8, i64), i64>) {
    for (series, got) in engine.oldest_bounds(ids).into_iter().enumerate() {
        let series = series as u8;
        let expected = model.range((series, i64::MIN)..=(series, i64::MAX)).next().map(|(&(_, t), _)| t);
        assert_eq!(got, expected, "oldest point of series {series}");
    }
}

/// Where sealed blocks live in a run.
#[derive(Clone, Copy, Debug)]
enum Backend {
    Segments,
    Memory,
}

/// Opens engines over one backend; the memory store outlives each engine, as files would.
struct Opener {
    durability: Durability,
    memory: Option<Arc<MemoryStore>>,
}

impl Opener {
    fn new(backend: Backend, durability: Durability) -> Opener {
        // Small segments, as in `options`, so that sealing happens in short runs.
        let memory = match backend {
            Backend::Segments => None,
            Backend::Memory => Some(Arc::new(MemoryStore::new(16 * 1024))),
        };
        Opener { durability, memory }
    }

    fn open(&self, dir: &Path) -> sensordb_engine::Result<Engine> {
        match &self.memory {
            None => Engine::open(dir, options(self.durability)),
            Some(store) => Engine::open_with_store(dir, options(self.durability), store.clone() as Arc<dyn BlockStore>),
        }
    }
}

fn run(backend: Backend, durability: Durability, ops: Vec<Op>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opener = Opener::new(backend, durability);
    let mut engine = Some(opener.open(dir.path()).expect("open"));
    let ids: Vec<SeriesId> = (0..4).map(|s| engine.as_ref().expect("open").series_id(&key(s), ValueKind::I64).expect("id")).collect();
    let mut model = BTreeMap::new();
    for op in ops {
        let e = engine.as_ref().expect("open");
        match op {
            Op::Write(points) => {
                let mut batch = WriteBatch::new();
                for (series, t, v) in points {
                    batch.push(ids[series as usize], t, Value::I64(v)).expect("push");
                    model.insert((series, t), v);
                }
                e.write(&batch).expect("write");
            }
            Op::WriteRows(rows) => {
                let mut batch = WriteBatch::new();
                for (row, t, v) in rows {
                    for series in [2 * row, 2 * row + 1] {
                        let value = v.wrapping_add(i64::from(series));
                        batch.push(ids[series as usize], t, Value::I64(value)).expect("push");
                        model.insert((series, t), value);
                    }
                }
                e.write(&batch).expect("write");
            }
            Op::Flush => e.flush().expect("flush"),
            Op::Reopen => {
                engine.take().expect("open").close().expect("close");
                let reopened = opener.open(dir.path()).expect("reopen");
                assert!(reopened.recovery().problems.is_empty(), "{:?}", reopened.recovery().problems);
                engine = Some(reopened);
            }
            Op::Crash if durability == Durability::None => {}
            Op::Crash => {
                engine.take().expect("open").abandon();
                let reopened = opener.open(dir.path()).expect("reopen after crash");
                assert!(reopened.recovery().problems.is_empty(), "{:?}", reopened.recovery().problems);
                engine = Some(reopened);
            }
            Op::Read { series, from, len } => {
                check_read(e, &ids, &model, series, from, from + len);
                check_last(e, &ids, &model);
                check_oldest(e, &ids, &model);
            }
        }
    }
    let e = engine.as_ref().expect("open");
    for series in 0..4 {
        check_read(e, &ids, &model, series, i64::MIN, i64::MAX);
    }
    check_last(e, &ids, &model);
    check_oldest(e, &ids, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn memory_only_engine_matches_the_model(ops in proptest::collection::vec(op_strategy(), 1..30)) {
        run(Backend::Segments, Durability::None, ops);
    }

    #[test]
    fn logged_engine_matches_the_model_across_crashes(ops in proptest::collection::vec(op_strategy(), 1..30)) {
        run(Backend::Segments, Durability::Os, ops);
    }

    #[test]
    fn memory_only_engine_over_the_memory_store_matches_the_model(ops in proptest::collection::vec(op_strategy(), 1..30)) {
        run(Backend::Memory, Durability::None, ops);
    }

    #[test]
    fn logged_engine_over_the_memory_store_matches_the_model_across_crashes(ops in proptest::collection::vec(op_strategy(), 1..30)) {
        run(Backend::Memory, Durability::Os, ops);
    }
}

#[test]
fn every_value_kind_round_trips_through_flush_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let values = [
        (ValueKind::F64, Value::F64(-0.0)),
        (ValueKind::F64, Value::F64(f64::from_bits(0x7ff8_dead_beef_0001))),
        (ValueKind::I64, Value::I64(i64::MIN)),
        (ValueKind::U64, Value::U64(u64::MAX)),
        (ValueKind::Bool, Value::Bool(true)),
        (ValueKind::Bytes, Value::Bytes(bytes::Bytes::from(vec![7u8; 100_000]))),
    ];
    let mut ids = Vec::new();
    {
        let engine = Engine::open(dir.path(), options(Durability::None)).expect("open");
        let mut batch = WriteBatch::new();
        for (i, (kind, value)) in values.iter().enumerate() {
            let id = engine.series_id(&SeriesKey::new("kinds", [("i", i.to_string())], "v").expect("key"), *kind).expect("id");
            batch.push(id, 1_000 + i as i64, value.clone()).expect("push");
            ids.push(id);
        }
        engine.write(&batch).expect("write");
        engine.close().expect("close");
    }
    let engine = Engine::open(dir.path(), options(Durability::None)).expect("reopen");
    assert!(engine.stats().store.blocks >= values.len());
    for (i, (_, value)) in values.iter().enumerate() {
        let points: Vec<_> = engine.read(ids[i], 0, 10_000).points().collect::<Result<_, _>>().expect("read");
        assert_eq!(points.len(), 1);
        assert_eq!(&points[0].value, value);
        assert_eq!(points[0].timestamp, 1_000 + i as i64);
    }
}

#[test]
fn kind_mismatch_and_unknown_series_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options(Durability::None)).expect("open");
    let id = engine.series_id(&key(0), ValueKind::F64).expect("id");
    let mut batch = WriteBatch::new();
    batch.push(id, 1, Value::Bool(true)).expect("push");
    assert!(matches!(engine.write(&batch), Err(sensordb_engine::Error::KindMismatch { .. })));
    let mut batch = WriteBatch::new();
    batch.push(SeriesId(99), 1, Value::F64(1.0)).expect("push");
    assert!(matches!(engine.write(&batch), Err(sensordb_engine::Error::UnknownSeries(99))));
    let mut batch = WriteBatch::new();
    let payload_id = engine.series_id(&key(1), ValueKind::Bytes).expect("id");
    batch.push(payload_id, 1, Value::Bytes(bytes::Bytes::from(vec![0u8; (1 << 20) + 1]))).expect("push");
    assert!(matches!(engine.write(&batch), Err(sensordb_engine::Error::PayloadTooLarge { .. })));
}

#[test]
fn a_second_engine_cannot_open_the_same_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _engine = Engine::open(dir.path(), options(Durability::None)).expect("open");
    assert!(Engine::open(dir.path(), options(Durability::None)).is_err());
}

#[test]
fn large_payload_batches_go_straight_to_segments_and_last_write_still_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EngineOptions { durability: Durability::Fsync, direct_write_bytes_min: 1000, ..EngineOptions::default() };
    let payload = |fill: u8, len: usize| Value::Bytes(bytes::Bytes::from(vec![fill; len]));
    let id;
    {
        let engine = Engine::open(dir.path(), options.clone()).expect("open");
        id = engine.series_id(&SeriesKey::new("wave", [("s", "1")], "samples").expect("key"), ValueKind::Bytes).expect("id");
        // Small: through the WAL into the memtable.
        let mut batch = WriteBatch::new();
        batch.push(id, 5, payload(1, 10)).expect("push");
        engine.write(&batch).expect("small write");
        assert_eq!(engine.stats().memtable_points, 1);
        // Large and not overlapping buffered points: straight into a segment.
        let mut batch = WriteBatch::new();
        for t in 10..20 {
            batch.push(id, t, payload(t as u8, 500)).expect("push");
        }
        engine.write(&batch).expect("direct write");
        assert_eq!(engine.stats().memtable_points, 1, "the direct write bypassed the memtable");
        assert_eq!(engine.stats().store.points, 10);
        // Large but overlapping the buffered point at 5: must go through the memtable and win.
        let mut batch = WriteBatch::new();
        batch.push(id, 5, payload(2, 2000)).expect("push");
        engine.write(&batch).expect("overlapping write");
        assert_eq!(engine.stats().memtable_points, 2);
        // Large, overlapping an earlier direct block: a newer group, so it wins too.
        let mut batch = WriteBatch::new();
        batch.push(id, 12, payload(3, 2000)).expect("push");
        engine.write(&batch).expect("rewrite");
        // A crash now: the direct blocks are durable without any WAL record.
        engine.abandon();
    }
    let engine = Engine::open(dir.path(), options).expect("reopen");
    let points: Vec<_> = engine.read(id, 0, 100).points().collect::<Result<_, _>>().expect("read");
    assert_eq!(points.len(), 11);
    assert_eq!(points[0].value, payload(2, 2000), "the later write at 5 won");
    let at_12 = points.iter().find(|p| p.timestamp == 12).expect("point at 12");
    assert_eq!(at_12.value, payload(3, 2000), "the later direct write at 12 won");
    assert_eq!(points.iter().find(|p| p.timestamp == 13).expect("13").value, payload(13, 500));
}

/// Found by the `engine_model` fuzz target: a point of one field was lost at flush when another
/// field of its row had a point at `i64::MAX`.
#[test]
fn a_row_with_a_point_at_the_largest_timestamp_keeps_its_other_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EngineOptions {
        durability: Durability::None,
        block_points_max: 10,
        segment_bytes_max: 4096 * 6,
        memtable_shards: 2,
        ..EngineOptions::default()
    };
    let row = |field: &str| SeriesKey::new("sensor", [("host", "a")], field).expect("key");
    let (integer, boolean);
    {
        let engine = Engine::open(dir.path(), options.clone()).expect("open");
        integer = engine.series_id(&row("i"), ValueKind::I64).expect("id");
        boolean = engine.series_id(&row("b"), ValueKind::Bool).expect("id");
        let mut batch = WriteBatch::new();
        batch.push(boolean, i64::MAX, Value::Bool(true)).expect("push");
        batch.push(integer, 5, Value::I64(-7)).expect("push");
        batch.push(boolean, -4_774_451_407_313_060_419, Value::Bool(false)).expect("push");
        engine.write(&batch).expect("write");
        engine.close().expect("close");
    }
    let engine = Engine::open(dir.path(), options).expect("reopen");
    let points: Vec<_> = engine.read(integer, i64::MIN, i64::MAX).points().collect::<Result<_, _>>().expect("read");
    assert_eq!(points.len(), 1, "{points:?}");
    assert_eq!(points[0].value, Value::I64(-7));
    let booleans = engine.read(boolean, i64::MIN, i64::MAX).points().count();
    assert_eq!(booleans, 1, "i64::MAX lies outside every half-open range");
}

/// Compaction and reclaim reach the store only through the `BlockStore` trait: over the memory
/// store, short blocks are rewritten into long ones and a deleted series' blocks are merged
/// away, while reads keep returning exactly what was written.
#[test]
fn compaction_and_reclaim_run_over_the_memory_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(MemoryStore::new(4096));
    let reclaim = sensordb_engine::ReclaimOptions {
        // Far over capacity, so the Fisherman takes every segment with dead data at once.
        capacity_bytes: Some(100),
        evict_oldest_when_full: false,
        merge_bytes_per_second: 0,
        file_system_usage: false,
        ..Default::default()
    };
    let options = EngineOptions {
        background_compaction: false,
        background_reclaim: false,
        // Flushes write blocks of 10 points, compaction blocks of 200.
        compaction_small_block_points: 100,
        block_points_max: 1000,
        throttle_writes: false,
        reclaim,
        ..options(Durability::None)
    };
    let engine = Engine::open_with_store(dir.path(), options, store.clone() as Arc<dyn BlockStore>).expect("open");
    let series = |measurement: &str| {
        let key = SeriesKey::new(measurement, [("sensor", "1")], "value").and_then(|k| k.in_database("plant")).expect("key");
        engine.series_id(&key, ValueKind::I64).expect("id")
    };
    let (kept, doomed) = (series("kept"), series("doomed"));
    for flush in 0..20i64 {
        let mut batch = WriteBatch::new();
        for t in flush * 10..flush * 10 + 10 {
            batch.push(kept, t, Value::I64(t)).expect("push");
            batch.push(doomed, t, Value::I64(-t)).expect("push");
        }
        engine.write(&batch).expect("write");
        engine.flush().expect("flush");
    }
    let values = |id: SeriesId| -> Vec<(i64, Value)> {
        engine.read(id, i64::MIN, i64::MAX).points().map(|p| p.map(|p| (p.timestamp, p.value))).collect::<Result<_, _>>().expect("read")
    };
    let expected_kept: Vec<(i64, Value)> = (0..200).map(|t| (t, Value::I64(t))).collect();
    let blocks_before = store.stats().blocks;
    assert_eq!(blocks_before, 20 * 2, "one block per series and flush");

    let reports = engine.compact().expect("compact");
    assert!(!reports.is_empty(), "short blocks are worth rewriting");
    assert!(store.stats().blocks < blocks_before, "{:?}", store.stats());
    assert_eq!(store.stats().points, 400);
    assert_eq!(values(kept), expected_kept);
    assert_eq!(values(doomed), (0..200).map(|t| (t, Value::I64(-t))).collect::<Vec<_>>());

    assert_eq!(engine.delete_series("plant", Some("doomed"), &[]).expect("delete"), 1);
    engine.reclaim().expect("reclaim");
    let stats = engine.reclaim_stats();
    assert!(stats.segments_merged + stats.segments_removed > 0, "{stats:?}");
    assert_eq!(store.stats().points, 200, "only the kept series' points are left: {:?}", store.stats());
    assert_eq!(values(kept), expected_kept);
}
