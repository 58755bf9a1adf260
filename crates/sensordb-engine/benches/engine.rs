//! Engine write and read paths under criterion: a 10,000-point batch written into a memory-only
//! engine (memtable insert; no WAL, no fsync), and a day of one series at 1 Hz read back from
//! sealed segments; and resolving (sorting) a memtable series that 100 writers filled with
//! interleaved runs, the flush's main sorting cost under `sensordb bench tx`, and copying out a
//! fleet's in-order series, what a flush of many short series spends most on. End-to-end figures
//! on real TSBS data come from `sensordb bench engine`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};

const T0: i64 = 1_451_606_400_000_000_000;
const SEC: i64 = 1_000_000_000;

fn batch(ids: &[SeriesId], round: i64) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for i in 0..1_000i64 {
        for (s, &id) in ids.iter().enumerate() {
            let t = T0 + (round * 1_000 + i) * 10 * SEC;
            batch.push(id, t, Value::F64(((i + s as i64) % 97) as f64 * 0.5)).expect("push");
        }
    }
    batch
}

fn write_path(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EngineOptions { durability: Durability::None, memtable_bytes_max: 4 << 30, ..EngineOptions::default() };
    let engine = Engine::open(dir.path(), options).expect("open");
    let ids: Vec<SeriesId> = (0..10)
        .map(|s| {
            engine.series_id(&SeriesKey::new("bench", [("sensor", format!("s{s}"))], "value").expect("key"), ValueKind::F64).expect("id")
        })
        .collect();
    let mut group = c.benchmark_group("engine_write");
    group.throughput(Throughput::Elements(10_000));
    let mut round = 0i64;
    group.bench_function("batch_10k_points_memory_only", |b| {
        b.iter_batched(
            || {
                round += 1;
                batch(&ids, round)
            },
            |batch| engine.write(black_box(&batch)).expect("write"),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn read_path(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let id;
    {
        let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::None, ..EngineOptions::default() }).expect("open");
        id = engine.series_id(&SeriesKey::new("bench", [("sensor", "day")], "value").expect("key"), ValueKind::F64).expect("id");
        let mut batch = WriteBatch::new();
        let mut value = 20.0f64;
        for s in 0..86_400i64 {
            value += if s % 7 < 3 { 0.01 } else { -0.01 };
            batch.push(id, T0 + s * SEC, Value::F64((value * 100.0).round() / 100.0)).expect("push");
        }
        engine.write(&batch).expect("write");
        engine.close().expect("close");
    }
    let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::None, ..EngineOptions::default() }).expect("reopen");
    let mut group = c.benchmark_group("engine_read");
    group.throughput(Throughput::Elements(86_400));
    group.bench_function("one_day_1hz_from_segments", |b| {
        b.iter(|| {
            let mut read = engine.read(id, T0, T0 + 86_400 * SEC);
            let mut points = 0;
            while let Some(chunk) = read.next_chunk() {
                points += chunk.expect("read").len();
            }
            assert_eq!(points, 86_400);
        })
    });
    group.finish();
}

/// 100 series fed as under `sensordb bench tx` for one flush (100 clients per series, each
/// transaction 50 points 10,000 ns apart, the clients' runs overlapping): per series 2 rounds of
/// 100 runs of 50 sorted timestamps. Reading them back sorts 1,000,000 points, about what one
/// flush of that bench sorts.
fn memtable_resolve(c: &mut Criterion) {
    use sensordb_engine::test_support::memtable::Memtable;
    let memtable = Memtable::new(16);
    for round in 0..2i64 {
        let mut batch = WriteBatch::new();
        for series in 0..100u32 {
            for client in 0..100i64 {
                for k in 0..50i64 {
                    batch.push(SeriesId(series), T0 + client * 100 + (round * 50 + k) * 10_000, Value::F64(k as f64)).expect("push");
                }
            }
        }
        batch.entries().iter().for_each(|entry| memtable.insert(entry));
    }
    let mut group = c.benchmark_group("memtable");
    group.throughput(Throughput::Elements(100 * 2 * 100 * 50));
    group.bench_function("resolve_100_series_of_100_interleaved_writers", |b| {
        b.iter(|| {
            for series in 0..100u32 {
                let resolved = memtable.read_all(black_box(SeriesId(series))).expect("points");
                assert_eq!(resolved.timestamps.len(), 2 * 100 * 50);
            }
        })
    });
    // A fleet's flush: 20,000 series of 16 points each, every one written in order (TSBS IoT
    // at scale 1000 buffers about that many points a series between flushes). Reading them
    // copies what the flush encodes.
    let fleet = Memtable::new(16);
    let mut batch = WriteBatch::new();
    for k in 0..16i64 {
        for series in 0..20_000u32 {
            batch.push(SeriesId(series), T0 + k * 10 * SEC, Value::F64(series as f64 + k as f64 * 0.25)).expect("push");
        }
    }
    fleet.insert_all(batch.entries());
    group.throughput(Throughput::Elements(20_000 * 16));
    group.bench_function("read_20000_in_order_series_of_16", |b| {
        b.iter(|| {
            for series in 0..20_000u32 {
                let resolved = fleet.read_all(black_box(SeriesId(series))).expect("points");
                assert_eq!(resolved.timestamps.len(), 16);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, write_path, read_path, memtable_resolve);
criterion_main!(benches);
