//! Damage that start-up sets aside instead of refusing to start or destroying it: a segment or
//! WAL file with a damaged header is moved into `<data>/quarantine` while everything else
//! serves, and the bytes recovery cuts off a damaged WAL or catalog tail are copied there first.

use sensordb_engine::{Durability, Engine, EngineOptions, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::path::{Path, PathBuf};

const SERIES: u32 = 4;

fn options() -> EngineOptions {
    EngineOptions {
        durability: Durability::Fsync,
        block_points_max: 500,
        // Every flush group seals its segment: one segment per flush.
        segment_bytes_max: 1,
        background_compaction: false,
        background_reclaim: false,
        ..EngineOptions::default()
    }
}

fn key(series: u32) -> SeriesKey {
    SeriesKey::new("damage", [("sensor", format!("s{series}"))], "value").expect("valid key")
}

/// Writes `[from, to)` for every series in acknowledged batches of 100 timestamps.
fn write_range(engine: &Engine, from: i64, to: i64) -> Vec<SeriesId> {
    let ids: Vec<SeriesId> = (0..SERIES).map(|s| engine.series_id(&key(s), ValueKind::F64).expect("id")).collect();
    for chunk_start in (from..to).step_by(100) {
        let mut batch = WriteBatch::new();
        for t in chunk_start..(chunk_start + 100).min(to) {
            for &id in &ids {
                batch.push(id, t, Value::F64(t as f64)).expect("push");
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

fn quarantine(dir: &Path) -> Vec<PathBuf> {
    if !dir.join("quarantine").exists() {
        return Vec::new();
    }
    files(dir, "quarantine")
}

fn flip(path: &Path, offset: u64, mask: u8) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset as usize] ^= mask;
    std::fs::write(path, bytes).expect("write");
}

/// Points of each series over all time; panics on a read error.
fn points(engine: &Engine, ids: &[SeriesId]) -> Vec<usize> {
    ids.iter().map(|&id| engine.read(id, i64::MIN, i64::MAX).points().count()).collect()
}

#[test]
fn a_segment_with_a_damaged_header_is_set_aside_and_everything_else_serves() {
    // One flipped byte in each field of the 32-byte header: magic, version (one bit), id, checksum.
    for (offset, mask) in [(0u64, 0x5au8), (8, 0x01), (9, 0x80), (17, 0x5a), (29, 0x5a)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(dir.path(), options()).expect("open");
        let ids = write_range(&engine, 0, 1_000);
        engine.flush().expect("first segment");
        write_range(&engine, 1_000, 2_000);
        engine.close().expect("close");
        let segments = files(dir.path(), "segments");
        assert_eq!(segments.len(), 2, "one segment per flush");
        let damaged = segments[0].clone();
        let damaged_bytes = {
            flip(&damaged, offset, mask);
            std::fs::read(&damaged).expect("read")
        };

        let engine = Engine::open(dir.path(), options()).unwrap_or_else(|e| panic!("byte {offset}: the store did not start: {e}"));
        let name = damaged.file_name().expect("name");
        let set_aside = dir.path().join("quarantine").join(name);
        assert_eq!(quarantine(dir.path()), vec![set_aside.clone()], "byte {offset}");
        assert_eq!(std::fs::read(&set_aside).expect("read"), damaged_bytes, "byte {offset}: moved as it was");
        assert!(!damaged.exists(), "byte {offset}");
        let problems = &engine.recovery().problems;
        assert!(
            problems.iter().any(|(file, at, what)| file == &damaged && *at <= 16 && what.contains("set aside")),
            "byte {offset}: {problems:?}"
        );
        assert_eq!(engine.quarantined_files().expect("list"), vec![(set_aside, damaged_bytes.len() as u64)]);
        // The other segment serves; the damaged one's points are gone from answers.
        assert_eq!(points(&engine, &ids), vec![1_000; SERIES as usize], "byte {offset}");
        // Writes go on, and the next start finds nothing new.
        write_range(&engine, 2_000, 2_100);
        engine.close().expect("close");
        let engine = Engine::open(dir.path(), options()).expect("restart");
        assert!(engine.recovery().problems.is_empty(), "byte {offset}: {:?}", engine.recovery().problems);
        assert_eq!(points(&engine, &ids), vec![1_100; SERIES as usize], "byte {offset}");
    }
}

#[test]
fn a_segment_of_a_newer_format_still_stops_the_start_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    write_range(&engine, 0, 100);
    engine.close().expect("close");
    let segment = files(dir.path(), "segments").pop().expect("segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    let newer = sensordb_engine::test_support::segment::SEGMENT_FORMAT_VERSION + 1;
    bytes[8..10].copy_from_slice(&newer.to_le_bytes());
    let checksum = crc32c::crc32c(&bytes[..28]);
    bytes[28..32].copy_from_slice(&checksum.to_le_bytes());
    std::fs::write(&segment, &bytes).expect("write");
    match Engine::open(dir.path(), options()) {
        Err(sensordb_engine::Error::UnsupportedVersion { found, .. }) if found == newer => {}
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("started over a segment of an unknown version"),
    }
    assert_eq!(std::fs::read(&segment).expect("read"), bytes, "left alone");
    assert!(quarantine(dir.path()).is_empty());
}

#[test]
fn a_flipped_bit_in_a_wal_version_field_sets_that_file_aside_and_the_other_files_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Every group rotates the log: one acknowledged batch per WAL file.
    let options = EngineOptions { wal_file_bytes_max: 1, ..options() };
    let engine = Engine::open(dir.path(), options.clone()).expect("open");
    let ids = write_range(&engine, 0, 1_000);
    engine.flush().expect("flush");
    write_range(&engine, 1_000, 1_500);
    engine.abandon();
    let wal = files(dir.path(), "wal");
    assert!(wal.len() >= 5, "{wal:?}");
    let damaged = wal[wal.len() / 2].clone();
    flip(&damaged, 8, 0x02);
    let damaged_bytes = std::fs::read(&damaged).expect("read");

    let engine = Engine::open(dir.path(), options).unwrap_or_else(|e| panic!("the store did not start: {e}"));
    let set_aside = dir.path().join("quarantine").join(damaged.file_name().expect("name"));
    assert_eq!(quarantine(dir.path()), vec![set_aside.clone()]);
    assert_eq!(std::fs::read(&set_aside).expect("read"), damaged_bytes);
    let problems = &engine.recovery().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!((&problems[0].0, problems[0].1), (&damaged, 0));
    assert!(problems[0].2.contains("version") && problems[0].2.contains("set aside"), "{}", problems[0].2);
    // The flushed points and every batch of the other WAL files; one batch of 100 is set aside.
    assert_eq!(points(&engine, &ids), vec![1_400; SERIES as usize]);
}

#[test]
fn bytes_cut_off_a_damaged_wal_tail_are_kept_in_the_quarantine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    let ids = write_range(&engine, 0, 1_000);
    engine.flush().expect("flush");
    write_range(&engine, 1_000, 1_500);
    engine.abandon();
    let wal = files(dir.path(), "wal").pop().expect("a WAL file");
    let records_end = {
        use sensordb_engine::test_support::wal::format::{decode_record, RecordStep, HEADER_LEN};
        let data = std::fs::read(&wal).expect("read");
        let mut offset = HEADER_LEN;
        while let RecordStep::Record { next, .. } = decode_record(&data, offset) {
            offset = next;
        }
        offset as u64
    };
    flip(&wal, records_end / 2, 0x5a);
    let damaged_bytes = std::fs::read(&wal).expect("read");

    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let problems = engine.recovery().problems.clone();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let (file, offset, what) = &problems[0];
    assert_eq!(file, &wal);
    assert!(*offset <= records_end / 2);
    let kept = dir.path().join("quarantine").join(format!("{}.cut-at-{offset}", wal.file_name().expect("name").to_string_lossy()));
    assert!(what.contains(&kept.display().to_string()), "{what}");
    assert_eq!(quarantine(dir.path()), vec![kept.clone()]);
    assert_eq!(std::fs::read(&kept).expect("read"), damaged_bytes[*offset as usize..], "the cut bytes, as they were");
    assert_eq!(std::fs::metadata(&wal).expect("meta").len(), *offset, "the file is cut where the kept bytes start");
    for count in points(&engine, &ids) {
        assert!((1_000..1_500).contains(&count), "{count}");
    }
}

#[test]
fn bytes_cut_off_a_damaged_catalog_tail_are_kept_in_the_quarantine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    write_range(&engine, 0, 100);
    engine.close().expect("close");
    let catalog = dir.path().join("series.catalog");
    let len = std::fs::metadata(&catalog).expect("meta").len();
    flip(&catalog, len - 3, 0x5a);
    let damaged_bytes = std::fs::read(&catalog).expect("read");

    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let problems = &engine.recovery().problems;
    let (_, offset, what) = problems.iter().find(|(file, _, _)| file == &catalog).unwrap_or_else(|| panic!("{problems:?}"));
    let kept = dir.path().join("quarantine").join(format!("series.catalog.cut-at-{offset}"));
    assert!(what.contains("kept"), "{what}");
    assert_eq!(std::fs::read(&kept).expect("read"), damaged_bytes[*offset as usize..]);
}
