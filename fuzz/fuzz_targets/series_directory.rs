//! Fuzzes the segment footer parsers of versions 2 to 4, `segment::decode_directory`,
//! `segment::DirectoryIndex` and `segment::decode_run`, with arbitrary bytes: the first byte
//! picks the entry layout (odd: compact, version 4), the next two (u16 LE) give the length of
//! the directory part, the rest is the runs, placed right after it.
//!
//! Asserts: decoding never panics; the directory index accepts exactly the directories the
//! decoder accepts, and its chunks decode to the same entries; a decoded run agrees with its directory entry (as many
//! entries as its blocks, its points and bytes, entries in file order within the entry's time
//! and sequence ranges); and when every run decodes, encoding the entries again (`encode_footer`)
//! gives a footer that decodes to the same directory and entries. The index as format version 3
//! stores it (`DirectoryIndex::encode_stored`) decodes to the same index and replaced list, and
//! the runs' bytes read as a stored index never panic its parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::segment::{decode_directory, decode_run, encode_footer, DirectoryIndex, EntryLayout, IndexEntry};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, data)) = data.split_first() else { return };
    let layout = if pick % 2 == 1 { EntryLayout::Compact } else { EntryLayout::Full };
    let Some((length, rest)) = data.split_first_chunk::<2>() else { return };
    let directory_length = (u16::from_le_bytes(*length) as usize).min(rest.len());
    let (directory_bytes, runs) = rest.split_at(directory_length);
    let runs_start = directory_length as u64;
    let _ = DirectoryIndex::decode_stored(runs, 0, runs.len() as u64, layout);
    let _ = DirectoryIndex::decode_stored(runs, directory_length as u64, u64::MAX, layout);
    let decoded = decode_directory(directory_bytes, runs_start, layout);
    let indexed = DirectoryIndex::of(directory_bytes, 0, layout);
    assert_eq!(decoded.is_ok(), indexed.is_ok(), "the index and the decoder disagree on {directory_bytes:?}");
    let Ok((directory, replaced)) = decoded else { return };
    let (index, _) = indexed.expect("checked above");
    let stored = index.encode_stored(directory_bytes.len() as u64, &replaced);
    let (stored_index, stored_replaced, stored_length) =
        DirectoryIndex::decode_stored(&stored, 0, index.runs_end, layout).expect("a stored index of a valid directory");
    assert_eq!((stored_index, stored_replaced, stored_length), (index.clone(), replaced.clone(), directory_bytes.len() as u64));
    if index.chunks() > 0 {
        let (start, length) = index.span(0..index.chunks());
        let chunks = index.decode_chunks(0..index.chunks(), &directory_bytes[start as usize..start as usize + length]);
        assert_eq!(chunks.expect("chunks of a valid directory"), directory, "chunks decode as the whole");
    }
    let mut entries: Vec<IndexEntry> = Vec::new();
    let mut all_decoded = true;
    for run in &directory {
        // A compact entry of one block has no run (length 0, the block's offset).
        let start = if run.run_length == 0 { 0 } else { (run.run_offset - runs_start) as usize };
        let Some(bytes) = runs.get(start..start + run.run_length as usize) else {
            all_decoded = false;
            continue;
        };
        let Ok(decoded) = decode_run(run, bytes) else {
            all_decoded = false;
            continue;
        };
        assert_eq!(decoded.len(), run.blocks as usize, "blocks");
        assert_eq!(decoded.iter().map(|e| u64::from(e.count)).sum::<u64>(), run.points, "points");
        assert_eq!(decoded.iter().map(|e| u64::from(e.length)).sum::<u64>(), run.bytes, "bytes");
        let mut end = 0u64;
        for entry in &decoded {
            assert!(entry.series == run.series && entry.kind == run.kind, "series or kind");
            assert!(entry.count > 0 && entry.min_timestamp <= entry.max_timestamp, "entry");
            assert!(entry.min_timestamp >= run.min_timestamp && entry.max_timestamp <= run.max_timestamp, "time range");
            assert!(entry.sequence >= run.min_sequence && entry.sequence <= run.max_sequence, "sequence range");
            assert!(entry.offset >= end, "blocks overlap or go backwards");
            end = entry.offset + u64::from(entry.length);
        }
        entries.extend(decoded);
    }
    // Runs of distinct series may interleave in any way in a file; a footer is encoded from
    // entries in file order, so only inputs whose blocks never overlap can round-trip.
    entries.sort_by_key(|e| e.offset);
    let in_file_order = entries.windows(2).all(|w| w[0].offset + u64::from(w[0].length) <= w[1].offset && w[0].sequence <= w[1].sequence);
    let one_entry_per_series = directory.windows(2).all(|w| w[0].series != w[1].series);
    if all_decoded && in_file_order && one_entry_per_series {
        let (directory_again, runs_again) = encode_footer(&entries, &replaced, layout);
        let (decoded_again, replaced_again) =
            decode_directory(&directory_again, directory_again.len() as u64, layout).expect("re-encoded directory");
        let series = |runs: &[sensordb_engine::test_support::segment::SeriesRun]| {
            runs.iter().map(|r| (r.series, r.blocks, r.points)).collect::<Vec<_>>()
        };
        assert_eq!(series(&decoded_again), series(&directory), "directory round trip");
        assert_eq!(replaced_again, replaced, "replaced round trip");
        let mut again: Vec<IndexEntry> = Vec::new();
        for run in &decoded_again {
            let start = if run.run_length == 0 { 0 } else { (run.run_offset - directory_again.len() as u64) as usize };
            again.extend(decode_run(run, &runs_again[start..start + run.run_length as usize]).expect("re-encoded run"));
        }
        again.sort_by_key(|e| e.offset);
        assert_eq!(again, entries, "entries round trip");
    }
});
