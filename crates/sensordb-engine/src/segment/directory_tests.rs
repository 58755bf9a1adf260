//! Tests of the footers of versions 2 to 4: directory and run codecs in both entry layouts, and
//! segment files written with them (and with version 1) as the readers see them, damage
//! included.

use super::*;
use crate::error::Error;
use crate::fs::{FileSystem, RealFs};
use crate::model::ValueColumn;
use crate::segment::{
    read_all_runs, read_block, read_run, scan_segment, scan_segment_directory, GroupBuilder, SegmentWriter, PAGE_BYTES,
    SEGMENT_FORMAT_VERSION,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn entry(series: u32, offset: u64, sequence: u64, min: i64) -> IndexEntry {
    IndexEntry {
        series: SeriesId(series),
        kind: ValueKind::F64,
        count: 10,
        length: 100,
        offset,
        min_timestamp: min,
        max_timestamp: min + 9,
        sequence,
    }
}

const LAYOUTS: [EntryLayout; 2] = [EntryLayout::Full, EntryLayout::Compact];

/// Decodes a footer made by `encode_footer` back into entries in file order.
fn decode_footer(
    directory_bytes: &[u8],
    runs: &[u8],
    footer_offset: u64,
    layout: EntryLayout,
) -> (Vec<SeriesRun>, Vec<u64>, Vec<IndexEntry>) {
    let runs_start = footer_offset + directory_bytes.len() as u64;
    let (directory, replaced) = decode_directory(directory_bytes, runs_start, layout).expect("directory decodes");
    let mut entries = Vec::new();
    for run in &directory {
        let run_bytes = if run.run_length == 0 {
            &[][..]
        } else {
            let at = (run.run_offset - runs_start) as usize;
            &runs[at..at + run.run_length as usize]
        };
        entries.extend(decode_run(run, run_bytes).expect("run decodes"));
    }
    entries.sort_by_key(|e| e.offset);
    (directory, replaced, entries)
}

#[test]
fn a_footer_groups_entries_by_series_behind_a_directory() {
    // Two series interleaved in file order, over two groups.
    let entries = vec![entry(7, 4160, 1, 0), entry(3, 4260, 1, 5), entry(7, 8256, 2, 10), entry(3, 8356, 2, 20)];
    for layout in LAYOUTS {
        let (directory_bytes, runs, directory) = encode_footer_listed(&entries, &[2, 5], 16384, layout);
        assert_eq!(directory.iter().map(|r| r.series.0).collect::<Vec<_>>(), vec![3, 7], "series in id order");
        let three = directory[0];
        assert_eq!((three.blocks, three.points, three.bytes), (2, 20, 200));
        assert_eq!((three.min_timestamp, three.max_timestamp), (5, 29));
        assert_eq!((three.min_sequence, three.max_sequence), (1, 2));
        assert_eq!(three.run_offset, 16384 + directory_bytes.len() as u64, "the first run follows the directory");
        assert_eq!(directory[1].run_offset, three.run_offset + u64::from(three.run_length), "runs are back to back");
        let (decoded, replaced, decoded_entries) = decode_footer(&directory_bytes, &runs, 16384, layout);
        assert_eq!(decoded, directory);
        assert_eq!(replaced, vec![2, 5]);
        assert_eq!(decoded_entries, entries);
    }
}

/// In the compact layout (version 4) a series with one block has no run: its entry holds the
/// block's offset and says all the block's index entry says: over 20 bytes a series fewer in
/// all than an entry and a run here (series a second apart), with times relative to the entry
/// before.
#[test]
fn a_one_block_series_has_no_run_in_a_compact_directory() {
    // 40 series of one block each (more than a chunk of 32), all from about the same time, and
    // one series of two blocks.
    let start = 1_451_606_400_000_000_000i64;
    let mut entries: Vec<IndexEntry> =
        (1..=40u32).map(|s| entry(s, 4096 + u64::from(s) * 100, 3, start + i64::from(s) * 1_000_000_000)).collect();
    entries.push(entry(41, 8192, 3, start));
    entries.push(entry(41, 8292, 4, start + 86_400_000_000_000));
    let (full_bytes, full_runs, full) = encode_footer_listed(&entries, &[], 1 << 20, EntryLayout::Full);
    let (compact_bytes, compact_runs, compact) = encode_footer_listed(&entries, &[], 1 << 20, EntryLayout::Compact);
    let full_total = full_bytes.len() + full_runs.len();
    let compact_total = compact_bytes.len() + compact_runs.len();
    assert!(compact_total + 40 * 20 < full_total, "compact {compact_total} bytes against full {full_total} for 41 series");
    assert_eq!(compact_runs.len(), full.last().expect("series 41").run_length as usize, "only the two-block series has a run");
    for (one, run) in compact.iter().zip(&entries).take(40) {
        assert_eq!((one.run_length, one.run_checksum, one.run_offset), (0, 0, run.offset), "series {}", one.series.0);
        assert_eq!(decode_run(one, &[]).expect("no run to read"), vec![*run]);
        assert!(decode_run(one, &[0]).is_err(), "bytes given for a run that does not exist");
    }
    assert_eq!(compact.last().map(|r| r.run_offset), Some((1 << 20) + compact_bytes.len() as u64), "the run follows the directory");
    let (decoded, _, decoded_entries) = decode_footer(&compact_bytes, &compact_runs, 1 << 20, EntryLayout::Compact);
    assert_eq!(decoded, compact);
    let mut in_file_order = entries.clone();
    in_file_order.sort_by_key(|e| e.offset);
    assert_eq!(decoded_entries, in_file_order);
    assert!(
        decode_directory(&compact_bytes, (1 << 20) + compact_bytes.len() as u64, EntryLayout::Full).is_err(),
        "read in the wrong layout"
    );
    // A full entry may not claim a run of no bytes: that is the compact layout's mark alone.
    let mut zero_run = Vec::new();
    put_varint(&mut zero_run, 1);
    put_entry(&mut zero_run, &SeriesRun { run_length: 0, run_checksum: 0, ..full[0] }, 0, EntryLayout::Full, None);
    super::super::encode_replaced(&[], &mut zero_run);
    let refused = decode_directory(&zero_run, 1 << 20, EntryLayout::Full).expect_err("a full entry without a run");
    assert!(refused.contains("run of 0 bytes"), "{refused}");
}

#[test]
fn a_directory_of_the_smallest_entries_decodes() {
    // Series ids 1-5 of one one-point block each at time 0, sequence 0, in the first group: each
    // directory entry takes its 14 bytes at least (found by the engine_wal fuzz target: a bound
    // of 15 refused such a directory as implausible).
    let entries: Vec<IndexEntry> = (1..=5u32)
        .map(|series| IndexEntry {
            series: SeriesId(series),
            kind: ValueKind::F64,
            count: 1,
            length: 20,
            offset: 64 + u64::from(series) * 20,
            min_timestamp: 0,
            max_timestamp: 0,
            sequence: 0,
        })
        .collect();
    for (layout, bound) in [(EntryLayout::Full, 15), (EntryLayout::Compact, 10)] {
        let (directory_bytes, runs, directory) = encode_footer_listed(&entries, &[], 4096, layout);
        assert!(directory_bytes.len() < 5 * bound, "{} bytes: the smallest entries ({layout:?})", directory_bytes.len());
        let (decoded, replaced, decoded_entries) = decode_footer(&directory_bytes, &runs, 4096, layout);
        assert_eq!(decoded, directory);
        assert!(replaced.is_empty());
        assert_eq!(decoded_entries, entries);
    }
}

#[test]
fn a_run_disagreeing_with_its_directory_entry_is_refused() {
    let entries = vec![entry(1, 4160, 1, 0), entry(1, 4260, 1, 100)];
    let (_, runs, directory) = encode_footer_listed(&entries, &[], 8192, EntryLayout::Compact);
    let run = directory[0];
    assert!(decode_run(&run, &runs).is_ok());
    let mut flipped = runs.clone();
    flipped[3] ^= 1;
    assert!(decode_run(&run, &flipped).expect_err("checksum").contains("checksum"));
    // Checksums right, contents not what the directory promised.
    for wrong in [
        SeriesRun { points: 21, ..run },
        SeriesRun { bytes: 201, ..run },
        SeriesRun { max_timestamp: 110, ..run },
        SeriesRun { min_sequence: 0, ..run },
        SeriesRun { blocks: 1, ..run },
    ] {
        assert!(decode_run(&wrong, &runs).is_err(), "{wrong:?} accepted");
    }
    assert!(decode_run(&SeriesRun { run_length: run.run_length - 1, ..run }, &runs[..runs.len() - 1]).is_err());
}

fn entries_in_file_order() -> impl Strategy<Value = Vec<IndexEntry>> {
    let kinds = prop_oneof![Just(ValueKind::F64), Just(ValueKind::I64), Just(ValueKind::Bytes)];
    proptest::collection::vec((0u32..6, kinds, 1u32..5000, 0u64..3, 0u64..5000, 1u32..100_000, any::<i64>(), 0u64..(1 << 40)), 0..60)
        .prop_map(|raw| {
            let (mut sequence, mut end) = (0u64, 4096u64);
            raw.into_iter()
                .map(|(series, kind, count, sequence_step, gap, length, min_timestamp, span)| {
                    sequence += sequence_step;
                    let offset = end + gap;
                    end = offset + u64::from(length);
                    let max_timestamp = min_timestamp.saturating_add(span as i64);
                    IndexEntry { series: SeriesId(series), kind, count, length, offset, min_timestamp, max_timestamp, sequence }
                })
                .collect()
        })
}

proptest! {
    #[test]
    fn footers_round_trip(
        entries in entries_in_file_order(),
        replaced in proptest::collection::btree_set(any::<u32>(), 0..4),
        compact in any::<bool>(),
    ) {
        let layout = if compact { EntryLayout::Compact } else { EntryLayout::Full };
        let replaced: Vec<u64> = replaced.into_iter().map(u64::from).collect();
        let footer_offset = entries.last().map_or(4096, |e| e.offset + u64::from(e.length)).next_multiple_of(PAGE_BYTES);
        let (directory_bytes, runs, directory) = encode_footer_listed(&entries, &replaced, footer_offset, layout);
        let (decoded, decoded_replaced, decoded_entries) = decode_footer(&directory_bytes, &runs, footer_offset, layout);
        prop_assert_eq!(decoded, directory);
        prop_assert_eq!(decoded_replaced, replaced);
        prop_assert_eq!(decoded_entries, entries);
    }

    #[test]
    fn damaged_directories_and_runs_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        for layout in LAYOUTS {
            if let Ok((directory, _)) = decode_directory(&bytes, 4096, layout) {
                for run in directory {
                    let _ = decode_run(&run, &bytes);
                    let _ = decode_run(&run, &[]);
                }
            }
        }
        let run = SeriesRun {
            series: SeriesId(1),
            kind: ValueKind::F64,
            blocks: 3,
            points: 3,
            bytes: 3,
            min_timestamp: 0,
            max_timestamp: 10,
            min_sequence: 0,
            max_sequence: 5,
            run_offset: 0,
            run_length: bytes.len() as u32,
            run_checksum: crc32c(&bytes),
        };
        let _ = decode_run(&run, &bytes);
    }
}

fn group(start: i64) -> GroupBuilder {
    let mut group = GroupBuilder::new();
    for series in [4u32, 1, 9] {
        let timestamps: Vec<i64> = (0..50).map(|i| start + i * 1000).collect();
        group.add_block(SeriesId(series), &timestamps, &ValueColumn::I64(timestamps.iter().map(|t| t / 7).collect()));
    }
    group
}

/// Writes and seals segment 3 of `dir` in format `version`: three groups of three series.
fn sealed_segment(dir: &Path, version: u16) -> (PathBuf, Vec<IndexEntry>) {
    let mut writer = SegmentWriter::create_with_version(&RealFs, dir, 3, true, version).expect("create");
    let mut written = Vec::new();
    for g in 0..3u64 {
        written.extend(writer.append_group(group(g as i64 * 1_000_000), g + 1, g + 20).expect("append"));
    }
    let directory = writer.seal().expect("seal");
    assert_eq!(directory.is_some(), version >= 2, "from version 2 on, a series directory");
    (crate::filenames::numbered_file(dir, 3, crate::filenames::SEGMENT_EXTENSION), written)
}

/// Every entry of a scanned segment's directory, read back from the file.
fn all_runs(scan: &crate::segment::SegmentScan) -> Vec<SeriesRun> {
    let directory = scan.directory.as_ref().expect("a directory");
    crate::segment::read_directory_chunks(&scan.path, scan.file.as_ref(), directory, 0..directory.chunks()).expect("directory reads")
}

#[test]
fn start_up_reads_the_directory_alone_and_runs_give_every_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), SEGMENT_FORMAT_VERSION);
    let scan = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(scan.sealed && scan.problems.is_empty(), "{:?}", scan.problems);
    assert!(scan.entries.is_empty(), "no block entry is read at start-up");
    assert_eq!(scan.version, SEGMENT_FORMAT_VERSION);
    assert_eq!(scan.wal_checkpoint, 22);
    let directory = all_runs(&scan);
    assert_eq!(directory.iter().map(|r| (r.series.0, r.blocks)).collect::<Vec<_>>(), vec![(1, 3), (4, 3), (9, 3)]);
    let nine = read_run(&path, scan.file.as_ref(), &directory[2].shape()).expect("run of series 9");
    assert_eq!(nine, written.iter().filter(|e| e.series == SeriesId(9)).copied().collect::<Vec<_>>());
    for entry in &nine {
        assert_eq!(read_block(&path, scan.file.as_ref(), entry).expect("block").timestamps.len(), 50);
    }
    assert_eq!(read_all_runs(&path, scan.file.as_ref(), &directory).expect("runs"), written);
    let full = scan_segment(&RealFs, &path).expect("full scan");
    assert_eq!(full.entries, written, "a full scan reads the runs too");
}

#[test]
fn a_version_one_segment_is_still_read_and_resealed_in_version_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), 1);
    let scan = scan_segment_directory(&RealFs, &path).expect("scan");
    assert_eq!(scan.version, 1);
    assert!(scan.sealed && scan.directory.is_none());
    assert_eq!(scan.entries, written, "a flat footer lists every block");
    // Recovery of a version-1 file whose footer is damaged seals it again as version 1.
    let footer_offset = trailer_field(&path, 0);
    let file = RealFs.open_rw(&path).expect("open");
    file.write_all_at(&[0xFF], footer_offset + 1).expect("damage");
    let damaged = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(!damaged.sealed && damaged.problems[0].0 == footer_offset, "{:?}", damaged.problems);
    assert!(SegmentWriter::resume(&damaged, true).seal().expect("reseal").is_none(), "kept in version 1");
    let resealed = scan_segment(&RealFs, &path).expect("scan");
    assert!(resealed.sealed && resealed.problems.is_empty(), "{:?}", resealed.problems);
    assert_eq!((resealed.version, resealed.entries), (1, written));
}

/// The u64 at `at` in the trailer (the last 40 bytes) of `path`: 0 the footer offset, 8 the
/// length the trailer's checksum covers.
fn trailer_field(path: &Path, at: usize) -> u64 {
    let bytes = std::fs::read(path).expect("read");
    let trailer = &bytes[bytes.len() - 40..];
    u64::from_le_bytes(trailer[at..at + 8].try_into().expect("8 bytes"))
}

/// Flips one byte of `path` at `offset`.
fn flip(path: &Path, offset: u64) {
    let file = RealFs.open_rw(path).expect("open");
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).expect("read");
    file.write_all_at(&[byte[0] ^ 0x40], offset).expect("write");
}

#[test]
fn a_damaged_run_is_reported_with_file_and_offset_and_the_index_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), SEGMENT_FORMAT_VERSION);
    let directory = all_runs(&scan_segment_directory(&RealFs, &path).expect("scan"));
    let run = directory[1];
    flip(&path, run.run_offset + 2);
    // Start-up does not read runs: the directory is intact.
    let lazy = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(lazy.sealed && lazy.problems.is_empty());
    // The read that needs the run names the file and the run's offset.
    match read_run(&path, lazy.file.as_ref(), &run.shape()) {
        Err(Error::Corruption { path: reported, offset, .. }) => assert_eq!((reported, offset), (path.clone(), run.run_offset)),
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(read_run(&path, lazy.file.as_ref(), &directory[0].shape()).is_ok(), "other runs still read");
    // A full scan (inspect, recovery tools) reports it there and rebuilds the index from groups.
    drop(lazy);
    let full = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(full.problems.len(), 1, "{:?}", full.problems);
    assert_eq!(full.problems[0].0, run.run_offset);
    assert!(full.problems[0].1.contains("series run"), "{:?}", full.problems);
    assert_eq!(full.entries, written);
}

#[test]
fn a_version_two_segment_opens_from_its_directory_and_is_resealed_in_version_two() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), 2);
    let scan = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(scan.sealed && scan.problems.is_empty() && scan.entries.is_empty(), "{:?}", scan.problems);
    assert_eq!((scan.version, scan.wal_checkpoint), (2, 22));
    assert_eq!(read_all_runs(&path, scan.file.as_ref(), &all_runs(&scan)).expect("runs"), written);
    let stored = scan_segment_directory(&RealFs, &sealed_segment(tempfile::tempdir().expect("tempdir").path(), 3).0);
    assert_eq!(scan.directory, stored.expect("scan").directory, "both versions give the same index");
}

/// Version 3: start-up reads the stored index only, so damage to the directory is found by
/// the read needing the chunk (file and chunk offset) and by a full scan, which rebuilds.
#[test]
fn a_damaged_directory_behind_a_stored_index_fails_the_reads_needing_it_and_a_full_scan_rebuilds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), 3);
    let footer_offset = trailer_field(&path, 0);
    flip(&path, footer_offset + 3);
    let lazy = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(lazy.sealed && lazy.problems.is_empty(), "{:?}", lazy.problems);
    let directory = lazy.directory.as_ref().expect("stored index");
    match crate::segment::read_directory_chunks(&path, lazy.file.as_ref(), directory, 0..1) {
        Err(Error::Corruption { path: reported, offset, .. }) => assert_eq!((reported, offset), (path.clone(), footer_offset + 1)),
        other => panic!("expected corruption, got {other:?}"),
    }
    drop(lazy);
    let full = scan_segment(&RealFs, &path).expect("scan");
    assert!(!full.sealed && full.problems.len() == 1 && full.problems[0].0 == footer_offset, "{:?}", full.problems);
    assert_eq!(full.entries, written, "rebuilt from the group headers");
}

#[test]
fn a_damaged_stored_index_is_reported_at_its_offset_and_the_segment_sealed_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), 3);
    let bytes = std::fs::read(&path).expect("read");
    let stored_at = bytes.len() as u64 - 40 - trailer_field(&path, 8);
    assert_eq!(&bytes[stored_at as usize..stored_at as usize + 8], b"SDBDIRIX");
    flip(&path, stored_at + 130);
    let scan = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(!scan.sealed && scan.problems.len() == 1 && scan.problems[0].0 == stored_at, "{:?}", scan.problems);
    assert_eq!(scan.entries, written, "rebuilt from the group headers");
    assert!(SegmentWriter::resume(&scan, true).seal().expect("reseal").is_some());
    let resealed = scan_segment(&RealFs, &path).expect("scan");
    assert!(resealed.sealed && resealed.problems.is_empty(), "{:?}", resealed.problems);
    assert_eq!((resealed.version, resealed.entries), (3, written));
}

/// A stored index whose checksum holds but whose layout points outside the footer is refused.
#[test]
fn a_stored_index_pointing_outside_its_footer_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = sealed_segment(dir.path(), 3);
    let scan = scan_segment_directory(&RealFs, &path).expect("scan");
    let directory = scan.directory.expect("index");
    let footer_offset = scan.end;
    let stored = directory.encode_stored(directory.runs_end - footer_offset, &[7]);
    // Claims a directory as long as everything up to the runs' end: the runs then start past it.
    assert!(DirectoryIndex::decode_stored(&stored, footer_offset, directory.runs_end + 100, directory.layout).is_err());
    let wrong_length =
        DirectoryIndex::decode_stored(&directory.encode_stored(100, &[7]), footer_offset, directory.runs_end, directory.layout);
    // 100 is not this directory's length: its first run would not follow it.
    assert!(wrong_length.is_err());
    for cut in [0, 8, 119, stored.len() - 1] {
        assert!(
            DirectoryIndex::decode_stored(&stored[..cut], footer_offset, directory.runs_end + 100, directory.layout).is_err(),
            "cut at {cut}"
        );
    }
}

#[test]
fn a_damaged_directory_is_reported_at_the_footer_and_the_index_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, written) = sealed_segment(dir.path(), 2);
    let footer_offset = trailer_field(&path, 0);
    flip(&path, footer_offset + 3);
    let scan = scan_segment_directory(&RealFs, &path).expect("scan");
    assert!(!scan.sealed, "a damaged directory is no seal");
    assert_eq!(scan.problems.len(), 1, "{:?}", scan.problems);
    assert_eq!(scan.problems[0].0, footer_offset);
    assert_eq!(scan.entries, written, "rebuilt from the group headers");
    let directory = SegmentWriter::resume(&scan, true).seal().expect("reseal").expect("version 2 again");
    assert_eq!(scan.version, 2);
    assert_eq!(directory.blocks, 9);
    let resealed = scan_segment(&RealFs, &path).expect("scan");
    assert!(resealed.sealed && resealed.problems.is_empty(), "{:?}", resealed.problems);
    assert_eq!(resealed.entries, written);
}

#[test]
fn the_directory_costs_per_series_not_per_block() {
    // 100 series × 50 blocks: the part start-up reads is a small share of the footer.
    let entries: Vec<IndexEntry> = (0..50u64)
        .flat_map(|g| (0..100u32).map(move |s| entry(s + 1, 4160 + (g * 100 + u64::from(s)) * 100, g + 1, g as i64 * 10)))
        .collect();
    let (directory_bytes, runs, _) = encode_footer_listed(&entries, &[], 1 << 20, EntryLayout::Compact);
    assert!(directory_bytes.len() < 100 * 30, "{} directory bytes for 100 series", directory_bytes.len());
    assert!(runs.len() < 5000 * 12, "{} run bytes for 5,000 blocks", runs.len());
}

/// The in-memory index of a directory: a checkpoint every 32 entries (under a byte a
/// series); any range of chunks decodes to the same entries as the whole directory, and the
/// chunks an id is looked up in hold all of its entries.
#[test]
fn a_directory_index_costs_under_a_byte_a_series_and_its_chunks_decode_as_the_whole() {
    let mut offset = 4096;
    // Ids with gaps, one of them wide; every seventh id holds a second kind beside its first.
    let mut entries = Vec::new();
    for s in (1..=20_000u32).map(|s| s * 3).filter(|s| !(30_001..45_000).contains(s)) {
        offset += 100;
        entries.push(IndexEntry {
            series: SeriesId(s),
            kind: ValueKind::F64,
            count: 2,
            length: 100,
            offset,
            min_timestamp: i64::from(s),
            max_timestamp: i64::from(s) + 5,
            sequence: 1,
        });
        if s % 7 == 0 {
            offset += 100;
            entries.push(IndexEntry {
                series: SeriesId(s),
                kind: ValueKind::I64,
                count: 2,
                length: 100,
                offset,
                min_timestamp: 0,
                max_timestamp: 1,
                sequence: 1,
            });
        }
    }
    let footer_offset = 1 << 20;
    for layout in LAYOUTS {
        directory_index_of(&entries, footer_offset, layout);
    }
}

fn directory_index_of(entries: &[IndexEntry], footer_offset: u64, layout: EntryLayout) {
    let (bytes, runs, expected) = encode_footer_listed(entries, &[4, 8], footer_offset, layout);
    let (index, replaced) = DirectoryIndex::of(&bytes, footer_offset, layout).expect("index");
    assert_eq!(replaced, vec![4, 8]);
    assert_eq!(index.len, expected.len());
    assert_eq!(index.blocks, expected.len() as u64);
    assert_eq!(index.series_ids, (3, 60_000));
    assert_eq!(index.series_gap, (30_000, 45_000), "the widest stretch of ids missing");
    assert_eq!((index.min_timestamp, index.max_timestamp), (0, 60_005));
    assert_eq!(index.runs_end, footer_offset + (bytes.len() + runs.len()) as u64);
    assert!(index.memory_bytes() < expected.len(), "{} bytes for {} entries", index.memory_bytes(), expected.len());
    let chunk_bytes = |chunks: std::ops::Range<usize>| {
        let (at, length) = index.span(chunks);
        bytes[(at - footer_offset) as usize..(at - footer_offset) as usize + length].to_vec()
    };
    let all = index.decode_chunks(0..index.chunks(), &chunk_bytes(0..index.chunks())).expect("decodes");
    assert_eq!(all, expected);
    for (first, last) in [(0, 1), (3, 9), (index.chunks() - 2, index.chunks())] {
        let part = index.decode_chunks(first..last, &chunk_bytes(first..last)).expect("decodes");
        assert_eq!(part, expected[first * ENTRIES_PER_CHECKPOINT..(last * ENTRIES_PER_CHECKPOINT).min(expected.len())]);
    }
    for series in [1, 3, 4, 21, 42, 96, 30_000, 42_000, 45_000, 59_997, 60_000, 60_001] {
        let chunks = index.chunks_of(SeriesId(series));
        let found: Vec<SeriesRun> = if chunks.is_empty() {
            Vec::new()
        } else {
            index
                .decode_chunks(chunks.clone(), &chunk_bytes(chunks))
                .expect("decodes")
                .into_iter()
                .filter(|r| r.series.0 == series)
                .collect()
        };
        let wanted: Vec<SeriesRun> = expected.iter().filter(|r| r.series.0 == series).copied().collect();
        assert_eq!(found, wanted, "series {series}");
    }
    // A chunk's bytes damaged: refused with the chunk's offset.
    let mut damaged = chunk_bytes(5..6);
    damaged[7] ^= 1;
    assert_eq!(index.decode_chunks(5..6, &damaged).map_err(|(at, _)| at), Err(index.span(5..6).0));
}
