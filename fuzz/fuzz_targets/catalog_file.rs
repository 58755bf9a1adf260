//! Fuzzes the series catalog file: the input is written as `<dir>/series.catalog` and opened
//! with `catalog::Catalog::open(&RealFs, path, false)`, which parses every record and cuts a
//! torn or corrupt tail.
//!
//! Asserts: nothing panics (errors are fine); every series of an opened catalog can be looked
//! up by id, and its key finds a series with that key; and opening the repaired file again
//! reports no damage and finds the same series.
//!
//! Each input runs twice: as it is, and with every catalog checksum that can be located recomputed
//! (`sensordb_fuzz::fixup`), so mutations get past the checksums to the parsers behind them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::catalog::Catalog;
use sensordb_engine::{RealFs, SeriesId};
use sensordb_fuzz::{fixup, scratch_dir, CATALOG_NAME};

fn run(data: &[u8]) {
    let dir = scratch_dir();
    let path = dir.path().join(CATALOG_NAME);
    std::fs::write(&path, data).expect("write input");
    let Ok((catalog, _recovery)) = Catalog::open(&RealFs, &path, false) else { return };
    let mut series = Vec::with_capacity(catalog.len());
    for id in 1..=catalog.len() as u32 {
        let entry = catalog.get(SeriesId(id)).unwrap_or_else(|| panic!("series {id} of {} missing", catalog.len()));
        assert_eq!(entry.id, SeriesId(id));
        // A damaged file can list one key twice; `find` then names one of the ids.
        let found = catalog.find(&entry.key).unwrap_or_else(|| panic!("key {} not found", entry.key));
        assert_eq!(catalog.get(found).map(|e| e.key), Some(entry.key.clone()));
        assert_eq!(catalog.kind(entry.id), Some(entry.kind));
        series.push((entry.key.canonical(), entry.kind));
    }
    drop(catalog);
    let (again, recovery) = Catalog::open(&RealFs, &path, false).expect("a repaired catalog opens");
    assert_eq!(recovery.truncated_at, None, "second open found damage");
    assert_eq!(again.len(), series.len(), "second open found another number of series");
    for (i, (key, kind)) in series.iter().enumerate() {
        let entry = again.get(SeriesId(i as u32 + 1)).expect("series present");
        assert_eq!(&entry.key.canonical(), key);
        assert_eq!(entry.kind, *kind);
    }
}

fuzz_target!(|data: &[u8]| {
    run(data);
    let mut fixed = data.to_vec();
    fixup::catalog_file(&mut fixed);
    if fixed != data {
        run(&fixed);
    }
});
