//! Encode and decode speed of the column codecs on one day of 1 Hz data (86,400 values), the
//! block size the engine aims at, plus the bytes/value each encoding achieves (printed once).

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use sensordb_engine::test_support::codec::{decode_timestamps, decode_values, encode_timestamps, encode_values};
use sensordb_engine::{ValueColumn, ValueKind};

const N: usize = 86_400;
const T0: i64 = 1_700_000_000_000_000_000;
const SEC: i64 = 1_000_000_000;

fn rng() -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(42)
}

fn timestamp_sets() -> Vec<(&'static str, Vec<i64>)> {
    let mut r = rng();
    let regular = (0..N as i64).map(|i| T0 + i * SEC).collect();
    // ±20 ms of scheduling jitter, as a sensor gateway's clock gives.
    let jittered = (0..N as i64).map(|i| T0 + i * SEC + r.gen_range(-20_000_000..20_000_000)).collect();
    vec![("regular", regular), ("jittered", jittered)]
}

fn value_sets() -> Vec<(&'static str, ValueColumn)> {
    let mut r = rng();
    let mut k: i64 = 2137;
    let walk = (0..N)
        .map(|_| {
            k += r.gen_range(-3..=3);
            k as f64 / 100.0
        })
        .collect();
    let noise = (0..N).map(|_| r.gen::<f64>() * 40.0 - 20.0).collect();
    let text = (0..N / 10).map(|i| Bytes::from(format!("{{\"state\":\"{}\",\"seq\":{i}}}", ["ok", "warn", "fault"][i % 7 % 3]))).collect();
    let frames = (0..N / 100).map(|_| Bytes::from((0..r.gen_range(64..512)).map(|_| r.gen::<u8>()).collect::<Vec<u8>>())).collect();
    vec![
        ("f64 walk 2 decimals", ValueColumn::F64(walk)),
        ("f64 noise", ValueColumn::F64(noise)),
        ("bytes json text", ValueColumn::Bytes(text)),
        ("bytes random frames", ValueColumn::Bytes(frames)),
        // Two points of a sensor: what compaction writes when it joins one-point blocks of a
        // fleet's flushes.
        ("f64 two readings", ValueColumn::F64(vec![21.37, 21.41])),
    ]
}

fn timestamps(c: &mut Criterion) {
    let mut group = c.benchmark_group("timestamps");
    group.throughput(Throughput::Elements(N as u64));
    for (name, ts) in timestamp_sets() {
        let mut encoded = Vec::new();
        encode_timestamps(&ts, &mut encoded);
        println!("timestamps {name}: tag {} {:.4} bytes/value", encoded[0], encoded.len() as f64 / N as f64);
        group.bench_with_input(BenchmarkId::new("encode", name), &ts, |b, ts| {
            let mut out = Vec::with_capacity(N * 8);
            b.iter(|| {
                out.clear();
                encode_timestamps(black_box(ts), &mut out);
            })
        });
        group.bench_with_input(BenchmarkId::new("decode", name), &encoded, |b, enc| {
            b.iter(|| decode_timestamps(black_box(enc), N).expect("decodes"))
        });
    }
    group.finish();
}

fn values(c: &mut Criterion) {
    let mut group = c.benchmark_group("values");
    for (name, col) in value_sets() {
        let mut encoded = Vec::new();
        encode_values(&col, &mut encoded);
        let raw: usize = match &col {
            ValueColumn::Bytes(v) => v.iter().map(Bytes::len).sum(),
            _ => col.len() * 8,
        };
        println!(
            "values {name}: tag {} {:.4} bytes/value, {:.3} of raw",
            encoded[0],
            encoded.len() as f64 / col.len() as f64,
            encoded.len() as f64 / raw as f64
        );
        if let ValueColumn::F64(v) = &col {
            // Reference point: the floats handed straight to pco at its default settings.
            let plain = pco::standalone::simple_compress(v, &pco::ChunkConfig::default()).expect("pco compresses");
            println!("values {name}: plain pco would take {:.4} bytes/value", plain.len() as f64 / v.len() as f64);
        }
        group.throughput(Throughput::Elements(col.len() as u64));
        group.bench_with_input(BenchmarkId::new("encode", name), &col, |b, col| {
            let mut out = Vec::with_capacity(raw * 2);
            b.iter(|| {
                out.clear();
                encode_values(black_box(col), &mut out);
            })
        });
        let kind: ValueKind = col.kind();
        let count = col.len();
        group.bench_with_input(BenchmarkId::new("decode", name), &encoded, |b, enc| {
            b.iter(|| decode_values(kind, black_box(enc), count).expect("decodes"))
        });
    }
    group.finish();
}

criterion_group!(benches, timestamps, values);
criterion_main!(benches);
