//! Writes the seed corpora in `fuzz/seeds/<target>/`: small valid inputs made with the engine's
//! own encoders (and, for the file targets, files a real `Engine` wrote), so the fuzzer starts
//! past the magic numbers and checksums.
//!
//! Run from the repository root (stable is fine):
//! `cargo run --manifest-path fuzz/Cargo.toml --example make_seeds`
//! `codec_roundtrip` and `engine_model` take `arbitrary` input and start from an empty corpus.

use sensordb_engine::test_support::block::{self, TimestampColumn};
use sensordb_engine::test_support::codec;
use sensordb_engine::test_support::segment::IndexEntry;
use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, SeriesKey, ValueColumn, ValueKind, WriteBatch};
use sensordb_fuzz::{catalog_bytes, scratch_dir, series_keys, value_of, write_catalog, CATALOG_NAME, KINDS, SEGMENT_NAME, WAL_NAME};
use std::path::{Path, PathBuf};

fn write(root: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

/// A column of `kind` with `n` values that mix repeats and changes.
fn column(kind: ValueKind, n: usize) -> ValueColumn {
    let mut values = ValueColumn::new(kind);
    for i in 0..n as u64 {
        let bits = match kind {
            ValueKind::F64 => (20.0 + (i % 7) as f64 * 0.25).to_bits(),
            _ => i * i % 11,
        };
        values.push(value_of(kind, bits)).expect("same kind");
    }
    values
}

fn timestamps(n: usize, step: i64, jitter: bool) -> Vec<i64> {
    (0..n as i64).map(|i| 1_700_000_000_000_000_000 + i * step + if jitter { (i * 7919) % 13 } else { 0 }).collect()
}

fn codec_seeds(root: &Path) {
    let with_count = |count: usize, column: &[u8]| {
        let mut out = (count as u32).to_le_bytes().to_vec();
        out.extend_from_slice(column);
        out
    };
    for (name, ts) in
        [("regular", timestamps(50, 10_000_000_000, false)), ("jitter", timestamps(50, 1_000, true)), ("one", timestamps(1, 1, false))]
    {
        let mut out = Vec::new();
        codec::encode_timestamps(&ts, &mut out);
        write(root, "codec_decode", &format!("timestamps-{name}"), &with_count(ts.len(), &out));
    }
    for kind in KINDS {
        for n in [1, 3, 40] {
            let values = column(kind, n);
            let mut out = Vec::new();
            codec::encode_values(&values, &mut out);
            write(root, "codec_decode", &format!("{kind}-{n}"), &with_count(n, &out));
        }
    }
    let mut out = Vec::new();
    codec::encode_values(&ValueColumn::F64((0..64).map(|i| f64::from(i) / 100.0).collect()), &mut out);
    write(root, "codec_decode", "float-decimal", &with_count(64, &out));
    let mut out = Vec::new();
    codec::encode_values(&ValueColumn::F64((0..64).map(|i| f64::from(i).sin()).collect()), &mut out);
    write(root, "codec_decode", "float-sine", &with_count(64, &out));
}

fn batch_seeds(root: &Path) {
    for (i, kind) in KINDS.iter().enumerate() {
        let mut batch = WriteBatch::new();
        for j in 0..5u64 {
            batch.push(SeriesId(i as u32 + 1), 1_000 + j as i64 * 10, value_of(*kind, j * 3)).expect("push");
        }
        let mut out = Vec::new();
        batch.encode(&mut out);
        write(root, "batch_decode", &format!("{kind}"), &out);
    }
    let mut batch = WriteBatch::new();
    for j in 0..4u64 {
        for (i, kind) in KINDS.iter().enumerate() {
            batch.push(SeriesId(300 + i as u32), -5 + j as i64, value_of(*kind, j)).expect("push");
        }
    }
    let mut out = Vec::new();
    batch.encode(&mut out);
    write(root, "batch_decode", "all-kinds", &out);
}

fn block_seeds(root: &Path) {
    for kind in KINDS {
        for n in [1, 30] {
            let mut out = Vec::new();
            block::encode(SeriesId(7), &timestamps(n, 10_000_000_000, false), &column(kind, n), TimestampColumn::Inline, &mut out);
            write(root, "block_decode", &format!("inline-{kind}-{n}"), &out);
        }
    }
    // Split form: u16 LE length of the shared record, the record, then a block referring to it.
    let shared_ts = timestamps(20, 1_000, true);
    let mut shared = Vec::new();
    block::encode_shared_timestamps(&shared_ts, &mut shared);
    write(root, "block_decode", "shared-record", &shared);
    for (name, missing) in [("all", vec![]), ("missing", vec![0u32, 5, 19])] {
        let kept: Vec<i64> = shared_ts.iter().enumerate().filter(|(i, _)| !missing.contains(&(*i as u32))).map(|(_, &t)| t).collect();
        let mut out = (shared.len() as u16).to_le_bytes().to_vec();
        out.extend_from_slice(&shared);
        let column_ref = TimestampColumn::Shared { distance: shared.len() as u32, length: shared.len() as u32, missing: &missing };
        block::encode(SeriesId(3), &kept, &column(ValueKind::F64, kept.len()), column_ref, &mut out);
        write(root, "block_decode", &format!("shared-{name}"), &out);
    }
}

fn index_seeds(root: &Path) {
    let entries: Vec<IndexEntry> = (0..4u64)
        .map(|i| IndexEntry {
            series: SeriesId(i as u32 % 3 + 1),
            kind: KINDS[i as usize % 5],
            count: 10 + i as u32,
            length: 100,
            offset: 4096 + 64 + i * 100,
            min_timestamp: -50 + i as i64 * 1_000,
            max_timestamp: 900 + i as i64 * 1_000,
            sequence: 1 + i / 2,
        })
        .collect();
    for n in [0, 1, 4] {
        let mut out = Vec::new();
        IndexEntry::encode_list(&entries[..n], &mut out);
        write(root, "index_list", &format!("entries-{n}"), &out);
    }
}

fn series_key_seeds(root: &Path) {
    let keys = [
        SeriesKey::new("cpu", [("host", "a")], "usage").expect("key"),
        SeriesKey::new("readings", [("fleet", "South"), ("name", "truck_1")], "velocity").expect("key"),
        SeriesKey::new("odd name", [("k,=", "v\\ x")], "f=1").expect("key"),
        SeriesKey::new("m", Vec::<(String, String)>::new(), "f").expect("key"),
        SeriesKey::new("cpu", [("host", "a")], "usage").and_then(|k| k.in_database("plant 7")).expect("key"),
    ];
    for (i, key) in keys.iter().enumerate() {
        write(root, "series_key", &format!("key-{i}"), key.canonical().as_bytes());
    }
}

fn databases_file_seeds(root: &Path) {
    use sensordb_engine::{DatabasePolicy, Databases, PeriodOverride};
    let mut databases = Databases::default();
    write(root, "databases_file", "empty", databases.encode().as_bytes());
    databases.policies.insert("default".into(), DatabasePolicy::default());
    databases.policies.insert(
        "plant 7".into(),
        DatabasePolicy {
            period: Some(std::time::Duration::from_secs(30 * 86_400)),
            capacity_bytes: Some(1 << 30),
            overrides: vec![PeriodOverride {
                measurement: Some("debug".into()),
                tags: vec![("line".into(), "a".into())],
                period: std::time::Duration::from_secs(3600),
            }],
        },
    );
    write(root, "databases_file", "two-databases", databases.encode().as_bytes());
}

fn catalog_seeds(root: &Path) {
    write(root, "catalog_file", "engine-series", catalog_bytes());
    let dir = scratch_dir();
    let path = dir.path().join(CATALOG_NAME);
    write_catalog(&path);
    let (catalog, _) = sensordb_engine::test_support::catalog::Catalog::open(&sensordb_engine::RealFs, &path, false).expect("open");
    for i in 0..20 {
        let key = SeriesKey::new("diagnostics", [("name", format!("truck_{i}")), ("fleet", "East".into())], "fuel_state").expect("key");
        catalog.get_or_create(&key, KINDS[i % 5]).expect("register");
    }
    drop(catalog);
    write(root, "catalog_file", "prefix-shared", &std::fs::read(&path).expect("read"));
    write(root, "catalog_file", "empty", &std::fs::read(&path).expect("read")[..16]);
}

/// Writes rows of all six engine series (ids as in `series_keys`).
fn write_rows(engine: &Engine, ids: &[(SeriesId, ValueKind)], start: i64, rows: i64, points_per_batch: i64) {
    for first in (start..start + rows).step_by(points_per_batch as usize) {
        let mut batch = WriteBatch::new();
        for t in first..(first + points_per_batch).min(start + rows) {
            for (n, &(id, kind)) in ids.iter().enumerate() {
                // Series 3 (u64) skips some rows: its blocks list missing positions.
                if n == 2 && t % 5 == 0 {
                    continue;
                }
                batch.push(id, t * 1_000_000_000, value_of(kind, (t * 37 + n as i64) as u64 % 50)).expect("push");
            }
        }
        engine.write(&batch).expect("write");
    }
}

fn open_engine(dir: &Path, durability: Durability) -> (Engine, Vec<(SeriesId, ValueKind)>) {
    let options = EngineOptions { durability, block_points_max: 16, memtable_shards: 2, ..Default::default() };
    let engine = Engine::open(dir, options).expect("engine opens");
    let ids = series_keys().into_iter().map(|(key, kind)| (engine.series_id(&key, kind).expect("register"), kind)).collect();
    (engine, ids)
}

fn engine_file_seeds(root: &Path) {
    // WAL: batches left behind by a killed engine, for wal_file and engine_wal (whose catalog
    // holds the same series with the same ids).
    for (name, rows, per_batch) in [("small", 3, 1), ("rows", 40, 8)] {
        let dir = scratch_dir();
        let (engine, ids) = open_engine(dir.path(), Durability::Os);
        write_rows(&engine, &ids, 0, rows, per_batch);
        engine.abandon();
        let wal = std::fs::read(dir.path().join("wal").join(WAL_NAME)).expect("first WAL file");
        write(root, "wal_file", name, &wal);
        write(root, "engine_wal", name, &wal);
    }
    // Segments: an unsealed one (two flush groups, the engine killed) and a sealed one.
    for sealed in [false, true] {
        let dir = scratch_dir();
        let (engine, ids) = open_engine(dir.path(), Durability::None);
        write_rows(&engine, &ids, 0, 40, 10);
        engine.flush().expect("flush");
        write_rows(&engine, &ids, 30, 20, 10);
        engine.flush().expect("flush");
        if sealed {
            engine.close().expect("close");
        } else {
            engine.abandon();
        }
        let segment = std::fs::read(dir.path().join("segments").join(SEGMENT_NAME)).expect("first segment");
        write(root, "segment_file", if sealed { "sealed" } else { "unsealed" }, &segment);
    }
}

fn main() {
    let root = std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds"));
    codec_seeds(&root);
    batch_seeds(&root);
    block_seeds(&root);
    index_seeds(&root);
    series_key_seeds(&root);
    databases_file_seeds(&root);
    catalog_seeds(&root);
    engine_file_seeds(&root);
    println!("seeds written to {}", root.display());
}
