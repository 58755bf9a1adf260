//! Fuzzes WAL recovery: the input is written as `<dir>/wal/00000000000000000001.wal` and the
//! log opened with `wal::Wal::open(Arc::new(RealFs), dir, WalOptions { durability: Os, .. })`,
//! which checks the header, replays intact records and cuts a torn or corrupt tail.
//!
//! Asserts: nothing panics (errors are fine); and opening the log again after the first open
//! repaired it replays exactly the same records (what recovery kept stays recoverable).
//!
//! Each input runs twice: as it is, and with every WAL checksum that can be located recomputed
//! (`sensordb_fuzz::fixup`), so mutations get past the checksums to the parsers behind them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::wal::{Wal, WalOptions};
use sensordb_engine::{Durability, RealFs};
use sensordb_fuzz::{fixup, scratch_dir, WAL_NAME};
use std::path::Path;
use std::sync::Arc;

fn open(dir: &Path) -> sensordb_engine::Result<Vec<Vec<u8>>> {
    let mut records = Vec::new();
    let options = WalOptions { durability: Durability::Os, ..Default::default() };
    let (wal, _recovery) = Wal::open(Arc::new(RealFs), dir, options, &mut |record: &[u8]| {
        records.push(record.to_vec());
        Ok(())
    })?;
    drop(wal);
    Ok(records)
}

fn run(data: &[u8]) {
    let dir = scratch_dir();
    let wal_dir = dir.path().join("wal");
    std::fs::create_dir(&wal_dir).expect("mkdir");
    std::fs::write(wal_dir.join(WAL_NAME), data).expect("write input");
    let Ok(records) = open(&wal_dir) else { return };
    let again = open(&wal_dir).expect("a recovered log opens again");
    assert_eq!(again.len(), records.len(), "second open replayed another number of records");
    assert!(again == records, "second open replayed other records");
}

fuzz_target!(|data: &[u8]| {
    run(data);
    let mut fixed = data.to_vec();
    fixup::wal_file(&mut fixed);
    if fixed != data {
        run(&fixed);
    }
});
