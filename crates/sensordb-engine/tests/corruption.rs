//! Corruption test: bytes flipped or cut in WAL, segment and catalog files. Every case must be
//! reported with the file and the offset, and the undamaged data must stay readable.

use sensordb_engine::{Durability, Engine, EngineOptions, Error, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::path::{Path, PathBuf};

const SERIES: u32 = 4;
const POINTS: i64 = 2_000;

fn options() -> EngineOptions {
    EngineOptions { durability: Durability::Fsync, block_points_max: 500, ..EngineOptions::default() }
}

fn key(series: u32) -> SeriesKey {
    SeriesKey::new("corrupt", [("sensor", format!("s{series}"))], "value").expect("valid key")
}

fn write_range(engine: &Engine, from: i64, to: i64) -> Vec<SeriesId> {
    let ids: Vec<SeriesId> = (0..SERIES).map(|s| engine.series_id(&key(s), ValueKind::F64).expect("id")).collect();
    for chunk_start in (from..to).step_by(100) {
        let mut batch = WriteBatch::new();
        for t in chunk_start..(chunk_start + 100).min(to) {
            for (s, &id) in ids.iter().enumerate() {
                batch.push(id, t, Value::F64(t as f64 + s as f64 / 10.0)).expect("push");
            }
        }
        engine.write(&batch).expect("write");
    }
    ids
}

fn files(dir: &Path, sub: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(sub)).expect("dir").map(|e| e.expect("entry").path()).collect();
    files.sort();
    files
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset as usize] ^= 0x5a;
    std::fs::write(path, bytes).expect("write");
}

/// Where the records of a WAL file end: under `fsync` the log keeps zeros written ahead of its
/// records, so the file is longer.
fn wal_records_end(path: &Path) -> u64 {
    use sensordb_engine::test_support::wal::format::{decode_record, RecordStep, HEADER_LEN};
    let data = std::fs::read(path).expect("read");
    let mut offset = HEADER_LEN;
    while let RecordStep::Record { next, .. } = decode_record(&data, offset) {
        offset = next;
    }
    assert!(data[offset..].iter().all(|&b| b == 0), "only zeros after the records");
    offset as u64
}

/// Reads every series fully; returns (points read, errors) per series.
fn read_all(engine: &Engine, ids: &[SeriesId]) -> Vec<(usize, Vec<Error>)> {
    ids.iter()
        .map(|&id| {
            let (mut points, mut errors) = (0, Vec::new());
            let mut read = engine.read(id, i64::MIN, i64::MAX);
            while let Some(chunk) = read.next_chunk() {
                match chunk {
                    Ok(chunk) => points += chunk.len(),
                    Err(e) => errors.push(e),
                }
            }
            (points, errors)
        })
        .collect()
}

#[test]
fn a_damaged_block_is_reported_with_file_and_offset_and_the_rest_stays_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    let ids = write_range(&engine, 0, POINTS);
    engine.close().expect("close");
    let segment = files(dir.path(), "segments").pop().expect("a segment");
    // The first group's header fills page 1 and its first block starts on page 2; hit that
    // block's timestamp column, just past the block header.
    let victim_offset = 8192;
    flip(&segment, victim_offset + 62);
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let results = read_all(&engine, &ids);
    let errors: Vec<&Error> = results.iter().flat_map(|(_, e)| e).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    match errors[0] {
        Error::Corruption { path, offset, .. } => {
            assert_eq!(path, &segment);
            assert_eq!(*offset, victim_offset);
        }
        other => panic!("expected corruption, got {other}"),
    }
    let total: usize = results.iter().map(|(p, _)| p).sum();
    assert_eq!(total, (SERIES as usize) * POINTS as usize - 500, "all but the damaged block readable");
}

#[test]
fn a_damaged_block_does_not_take_unflushed_points_of_its_time_range_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    let ids = write_range(&engine, 0, POINTS);
    engine.close().expect("close");
    let segment = files(dir.path(), "segments").pop().expect("a segment");
    flip(&segment, 8192 + 62);
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let results = read_all(&engine, &ids);
    let victim = results.iter().position(|(_, errors)| !errors.is_empty()).expect("one series lost a block");
    // A late point inside the damaged block's range, still in the memtable.
    let mut batch = WriteBatch::new();
    batch.push(ids[victim], 250, Value::F64(-1.0)).expect("push");
    engine.write(&batch).expect("write");
    for backwards in [false, true] {
        let mut read = engine.read(ids[victim], i64::MIN, i64::MAX);
        let (mut points, mut errors, mut late) = (0, 0, false);
        for _ in 0..100 {
            let Some(chunk) = (if backwards { read.next_chunk_back() } else { read.next_chunk() }) else { break };
            match chunk {
                Ok(chunk) => {
                    points += chunk.len();
                    late |= chunk.timestamps.contains(&250);
                }
                Err(_) => errors += 1,
            }
        }
        assert_eq!(errors, 1, "backwards {backwards}");
        assert!(late, "backwards {backwards}: the memtable point inside the damaged range is answered");
        assert_eq!(points, POINTS as usize - 500 + 1, "backwards {backwards}");
    }
}

#[test]
fn a_damaged_footer_is_reported_and_all_data_still_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    let ids = write_range(&engine, 0, POINTS);
    engine.close().expect("close");
    let segment = files(dir.path(), "segments").pop().expect("a segment");
    let len = std::fs::metadata(&segment).expect("meta").len();
    let trailer = std::fs::read(&segment).expect("read")[len as usize - 40..].to_vec();
    // What start-up reads of the footer: the directory's stored index, before the trailer,
    // which gives its length (format version 3).
    let stored_len = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
    let stored_at = len - 40 - stored_len;
    flip(&segment, stored_at + 10);
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let problems = &engine.recovery().problems;
    assert!(problems.iter().any(|(file, offset, _)| file == &segment && *offset == stored_at), "{problems:?}");
    for (points, errors) in read_all(&engine, &ids) {
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(points, POINTS as usize);
    }
}

/// Writes one flushed range and one range left only in the WAL by a crash; returns the ids.
fn crash_with_wal_tail(dir: &Path) -> Vec<SeriesId> {
    let engine = Engine::open(dir, options()).expect("open");
    write_range(&engine, 0, 1_000);
    engine.flush().expect("flush");
    let ids = write_range(&engine, 1_000, 1_500);
    engine.abandon();
    ids
}

#[test]
fn a_torn_wal_tail_is_cut_and_reported_and_earlier_records_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = crash_with_wal_tail(dir.path());
    let wal = files(dir.path(), "wal").pop().expect("a WAL file");
    // The last 7 bytes written never reached the disk: they read back as the zeros ahead.
    let len = wal_records_end(&wal);
    let mut bytes = std::fs::read(&wal).expect("read");
    bytes[len as usize - 7..len as usize].fill(0);
    std::fs::write(&wal, bytes).expect("write");
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let problems = &engine.recovery().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, wal);
    assert!(problems[0].1 < len - 7, "offset {} names where the torn record starts", problems[0].1);
    for (points, errors) in read_all(&engine, &ids) {
        assert!(errors.is_empty());
        // The last batch (100 points per series) was torn; everything before it survived.
        assert_eq!(points, 1_400);
    }
}

#[test]
fn a_flipped_wal_byte_is_reported_and_the_records_before_it_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = crash_with_wal_tail(dir.path());
    let wal = files(dir.path(), "wal").pop().expect("a WAL file");
    let len = wal_records_end(&wal);
    // Damage the middle of the records: some batches before the damage survive, none after.
    flip(&wal, len / 2);
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let problems = &engine.recovery().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, wal);
    assert!(problems[0].1 <= len / 2);
    for (points, errors) in read_all(&engine, &ids) {
        assert!(errors.is_empty());
        assert!((1_000..1_500).contains(&points), "{points} points: flushed data intact, WAL cut at the damage");
        assert_eq!(points % 100, 0, "whole batches only");
    }
}

#[test]
fn a_damaged_catalog_tail_is_cut_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    write_range(&engine, 0, 100);
    engine.close().expect("close");
    let catalog = dir.path().join("series.catalog");
    let len = std::fs::metadata(&catalog).expect("meta").len();
    flip(&catalog, len - 3);
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let problems = &engine.recovery().problems;
    assert!(problems.iter().any(|(file, offset, _)| file == &catalog && *offset < len), "{problems:?}");
    // The last series lost its catalog record, but its points are in a segment: it comes back
    // under a placeholder key with its old id, and its data stays readable.
    let lost = SeriesId(SERIES);
    let entry = engine.series(lost).expect("placeholder registered");
    assert_eq!(entry.key.measurement(), sensordb_engine::LOST_SERIES_MEASUREMENT);
    assert_eq!(engine.read(lost, 0, 100).points().count(), 100);
    // A new series never takes over the lost id.
    let fresh = engine.series_id(&key(99), ValueKind::F64).expect("new series");
    assert_eq!(fresh, SeriesId(SERIES + 1));
}

/// Found by the `engine_wal` fuzz target (out of memory): a WAL record with a valid checksum that
/// names series id 2^30 made start-up register a billion placeholder series.
#[test]
fn a_wal_record_naming_an_absurd_series_id_is_damage_not_a_billion_placeholders() {
    use sensordb_engine::test_support::wal::{Wal, WalOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    let ids = write_range(&engine, 0, 100);
    engine.close().expect("close");
    {
        let fs: std::sync::Arc<dyn sensordb_engine::FileSystem> = std::sync::Arc::new(sensordb_engine::RealFs);
        let (wal, _) = Wal::open(fs, &dir.path().join("wal"), WalOptions::default(), &mut |_| Ok(())).expect("wal");
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(1 << 30), 5, Value::F64(1.0)).expect("push");
        batch.push(ids[0], 1_000, Value::F64(7.0)).expect("push");
        let mut record = Vec::new();
        batch.encode(&mut record);
        let position = wal.append(&record).expect("append");
        wal.wait_durable(position).expect("durable");
    }
    let started = std::time::Instant::now();
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(engine.stats().series, SERIES as usize, "no placeholders");
    assert!(engine.recovery().problems.iter().any(|(_, _, what)| what.contains("far beyond")), "{:?}", engine.recovery().problems);
    assert_eq!(engine.read(ids[0], 1_000, 1_001).points().count(), 1, "the record's sound entry is replayed");
}
