//! `inspect` verifies every file kind of a data directory, not only segments: damage in a WAL
//! file, the catalog or the `databases` file is reported with its file and offset, and files in
//! the quarantine are listed. It never changes a file.

use sensordb_engine::inspect::inspect;
use sensordb_engine::{Durability, Engine, EngineOptions, RealFs, SeriesId, SeriesKey, Value, ValueKind, WriteBatch};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn options() -> EngineOptions {
    EngineOptions { durability: Durability::Fsync, block_points_max: 500, ..EngineOptions::default() }
}

/// A directory with 4 series: 1,000 points flushed into a segment, 500 more only in the WAL (the
/// engine stopped the way a killed process stops).
fn directory() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), options()).expect("open");
    let ids: Vec<SeriesId> = (0..4)
        .map(|s| engine.series_id(&SeriesKey::new("m", [("s", format!("{s}"))], "v").expect("key"), ValueKind::F64).expect("id"))
        .collect();
    for (from, to) in [(0, 1_000), (1_000, 1_500)] {
        for start in (from..to).step_by(100) {
            let mut batch = WriteBatch::new();
            for t in start..start + 100 {
                for &id in &ids {
                    batch.push(id, t, Value::F64(t as f64)).expect("push");
                }
            }
            engine.write(&batch).expect("write");
        }
        if from == 0 {
            engine.flush().expect("flush");
        }
    }
    engine.abandon();
    dir
}

fn wal_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("wal")).expect("dir").map(|e| e.expect("entry").path()).collect();
    files.sort();
    files.pop().expect("a WAL file")
}

fn flip(path: &Path, offset: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset] ^= 0x5a;
    std::fs::write(path, &bytes).expect("write");
    bytes
}

fn problems(dir: &Path) -> Vec<(PathBuf, u64, String)> {
    inspect(Arc::new(RealFs), dir).expect("inspect").problems
}

#[test]
fn a_sound_directory_has_no_problems() {
    let dir = directory();
    let report = inspect(Arc::new(RealFs), dir.path()).expect("inspect");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.quarantined.is_empty());
    assert!(report.wal_bytes > 0 && report.catalog_bytes > 0 && report.blocks > 0);
}

#[test]
fn a_damaged_wal_record_is_reported_with_file_and_offset_and_left_alone() {
    let dir = directory();
    let wal = wal_file(dir.path());
    let bytes = std::fs::read(&wal).expect("read");
    // The third record of the file: header (24 bytes), then records of one batch each.
    let (first_len, record_header) = (u32::from_le_bytes(bytes[24..28].try_into().expect("4")) as usize, 8);
    let second = 24 + record_header + first_len;
    let damaged = flip(&wal, second + record_header + 40);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((&found[0].0, found[0].1), (&wal, second as u64), "{}", found[0].2);
    assert_eq!(std::fs::read(&wal).expect("read"), damaged, "inspect cuts nothing");
}

#[test]
fn a_damaged_wal_header_is_reported_at_offset_0() {
    let dir = directory();
    let wal = wal_file(dir.path());
    let mut bytes = std::fs::read(&wal).expect("read");
    bytes[8] ^= 0x02;
    std::fs::write(&wal, &bytes).expect("write");
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((&found[0].0, found[0].1), (&wal, 0));
    assert!(found[0].2.contains("header"), "{}", found[0].2);
}

#[test]
fn catalog_damage_is_reported_with_its_offset() {
    let dir = directory();
    let catalog = dir.path().join("series.catalog");
    let len = std::fs::metadata(&catalog).expect("meta").len() as usize;
    // The last record, then the header.
    let damaged = flip(&catalog, len - 3);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, catalog);
    assert!(found[0].1 > 16 && (found[0].1 as usize) < len, "offset {} inside the records", found[0].1);
    assert_eq!(std::fs::read(&catalog).expect("read"), damaged, "inspect cuts nothing");
    flip(&catalog, len - 3);
    flip(&catalog, 2);
    let found = problems(dir.path());
    assert_eq!(found.iter().map(|(file, offset, _)| (file, *offset)).collect::<Vec<_>>(), vec![(&catalog, 0)], "{found:?}");
}

#[test]
fn a_damaged_databases_file_is_reported() {
    let dir = directory();
    let engine = Engine::open(dir.path(), options()).expect("open");
    engine.create_database("plant").expect("database");
    engine.close().expect("close");
    let path = dir.path().join("databases");
    flip(&path, 22);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, path);
}

#[test]
fn quarantined_files_are_listed() {
    let dir = directory();
    let wal = wal_file(dir.path());
    let bytes = std::fs::read(&wal).expect("read");
    let records_end = bytes.len() - bytes.iter().rev().take_while(|&&b| b == 0).count();
    flip(&wal, records_end - 4);
    drop(Engine::open(dir.path(), options()).expect("start cuts the damaged tail"));
    let report = inspect(Arc::new(RealFs), dir.path()).expect("inspect");
    assert_eq!(report.quarantined.len(), 1, "{:?}", report.quarantined);
    assert!(report.quarantined[0].0.starts_with(dir.path().join("quarantine")));
    assert!(report.quarantined[0].1 > 0);
}
