//! Fuzzes whole-engine recovery from a WAL: the input is written as the only WAL file
//! (`<dir>/wal/00000000000000000001.wal`) of an otherwise fresh data directory whose catalog
//! registers the six series of `sensordb_fuzz::series_keys` (ids 1–6, one of each kind plus
//! a second f64 series in its own row), then `Engine::open` with `Durability::Os` replays it.
//!
//! Asserts: nothing panics (an error from `Engine::open` is fine); reads of every series give
//! strictly increasing timestamps; the same points come back after an explicit flush (which
//! encodes the replayed points into blocks, shared timestamp records included) and after
//! close and reopen (which reads them from the sealed segment); and the reopen reports no
//! damage the first open did not already report.
//!
//! Each input runs twice: as it is, and with every WAL checksum that can be located recomputed
//! (`sensordb_fuzz::fixup`), so mutations get past the checksums to the parsers behind them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::{Chunk, Durability, Engine, EngineOptions, SeriesId};
use sensordb_fuzz::{catalog_bytes, fixup, scratch_dir, series_keys, CATALOG_NAME, WAL_NAME};

fn read_all(engine: &Engine) -> Vec<Option<Chunk>> {
    (1..=series_keys().len() as u32)
        .map(|id| {
            let chunk =
                engine.read(SeriesId(id), i64::MIN, i64::MAX).collect_all().unwrap_or_else(|e| panic!("read of series {id} failed: {e}"));
            if let Some(chunk) = &chunk {
                assert!(chunk.timestamps.windows(2).all(|w| w[0] < w[1]), "series {id}: timestamps not strictly increasing");
                assert_eq!(chunk.timestamps.len(), chunk.values.len());
            }
            chunk
        })
        .collect()
}

fn run(data: &[u8]) {
    let dir = scratch_dir();
    std::fs::write(dir.path().join(CATALOG_NAME), catalog_bytes()).expect("write catalog");
    std::fs::create_dir(dir.path().join("wal")).expect("mkdir");
    std::fs::write(dir.path().join("wal").join(WAL_NAME), data).expect("write input");
    let options = EngineOptions { durability: Durability::Os, memtable_shards: 2, block_points_max: 64, ..Default::default() };
    let Ok(engine) = Engine::open(dir.path(), options.clone()) else { return };
    let first_problems = engine.recovery().problems.clone();
    let before = read_all(&engine);
    engine.flush().expect("flush of replayed points");
    assert!(read_all(&engine) == before, "points changed with the flush");
    engine.close().expect("close");
    let engine = Engine::open(dir.path(), options).expect("reopen after a clean close");
    // Damage the first open skipped without repairing (a WAL file with a bad header is kept
    // as evidence) is reported again; anything new is not.
    for problem in &engine.recovery().problems {
        assert!(first_problems.contains(problem), "reopen found new damage {problem:?}; first open found {first_problems:?}");
    }
    assert!(read_all(&engine) == before, "points changed across close and reopen");
    engine.close().expect("close");
}

fuzz_target!(|data: &[u8]| {
    run(data);
    let mut fixed = data.to_vec();
    fixup::wal_file(&mut fixed);
    if fixed != data {
        run(&fixed);
    }
});
