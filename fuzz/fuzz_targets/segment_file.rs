//! Fuzzes segment files: the input is written as `<dir>/segments/00000000000000000001.seg`,
//! then `segment::scan_segment(&RealFs, path)` builds its index (trailer and footer, or the
//! flush-group walk of an unsealed file, which leaves a torn last group out) and `segment::read_block`
//! reads every block it lists (shared timestamp records included).
//!
//! Asserts: nothing panics (errors are fine); a block that reads matches its index entry's
//! count and time range; and scanning the file again after the first scan repaired it finds the
//! same entries and the same sealed state, and that the runs of a version-2 footer, read one by one
//! after `scan_segment_directory` (what start-up does), hold the same entries.
//!
//! Each input runs twice: as it is, and with every segment checksum that can be located recomputed
//! (`sensordb_fuzz::fixup`), so mutations get past the checksums to the parsers behind them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::segment::{read_block, read_directory_chunks, read_run, scan_segment, scan_segment_directory};
use sensordb_engine::RealFs;
use sensordb_fuzz::{fixup, scratch_dir, SEGMENT_NAME};

fn run(data: &[u8]) {
    let dir = scratch_dir();
    let segments = dir.path().join("segments");
    std::fs::create_dir(&segments).expect("mkdir");
    let path = segments.join(SEGMENT_NAME);
    std::fs::write(&path, data).expect("write input");
    let Ok(scan) = scan_segment(&RealFs, &path) else { return };
    for entry in &scan.entries {
        if let Ok(block) = read_block(&path, scan.file.as_ref(), entry) {
            assert_eq!(block.header.count, entry.count);
            assert_eq!(block.timestamps.len(), entry.count as usize);
            assert_eq!(block.values.len(), entry.count as usize);
            assert_eq!(block.timestamps.first(), Some(&entry.min_timestamp));
            assert_eq!(block.timestamps.last(), Some(&entry.max_timestamp));
        }
    }
    let (entries, sealed) = (scan.entries.clone(), scan.sealed);
    drop(scan);
    let again = scan_segment(&RealFs, &path).expect("a scanned segment scans again");
    assert_eq!(again.entries, entries, "second scan found other blocks");
    assert_eq!(again.sealed, sealed, "second scan changed the sealed state");
    drop(again);
    // Start-up's scan reads the series directory alone; its runs, read one by one, hold the
    // blocks the full scan found.
    let lazy = scan_segment_directory(&RealFs, &path).expect("a scanned segment scans again");
    if let (true, Some(directory)) = (sealed, &lazy.directory) {
        // The directory was checked whole by the scan: its chunks read back pass their checks.
        let listed = read_directory_chunks(&path, lazy.file.as_ref(), directory, 0..directory.chunks())
            .expect("the chunks of a directory the scan accepted read back");
        assert_eq!(listed.len(), directory.len, "directory entries");
        let runs: Result<Vec<_>, _> = listed.iter().map(|run| read_run(&path, lazy.file.as_ref(), &run.shape())).collect();
        if let Ok(runs) = runs {
            let mut found: Vec<_> = runs.into_iter().flatten().collect();
            found.sort_by_key(|e| e.offset);
            assert_eq!(found, entries, "runs read one by one differ from the full scan");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    run(data);
    let mut fixed = data.to_vec();
    fixup::segment_file(&mut fixed);
    if fixed != data {
        run(&fixed);
    }
});
