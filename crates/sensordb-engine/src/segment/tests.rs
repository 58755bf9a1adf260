use super::*;
use crate::error::Error;
use crate::fs::{FileSystem, RealFs};
use crate::model::ValueColumn;
use std::path::Path;

fn group(series_base: u32, start: i64) -> GroupBuilder {
    let mut group = GroupBuilder::new();
    for s in 0..5 {
        let timestamps: Vec<i64> = (0..300).map(|i| start + i * 1000).collect();
        let values = ValueColumn::F64(timestamps.iter().map(|&t| (t as f64).sqrt()).collect());
        group.add_block(SeriesId(series_base + s), &timestamps, &values);
    }
    group
}

/// Writes `groups` flush groups into segment 7 of `dir`; returns the writer (unsealed) and the
/// entries written.
fn write_segment(dir: &Path, groups: u32) -> (SegmentWriter, Vec<IndexEntry>) {
    let mut writer = SegmentWriter::create(&RealFs, dir, 7, true).expect("create");
    let mut all = Vec::new();
    for g in 0..groups {
        all.extend(writer.append_group(group(1, i64::from(g) * 1_000_000), u64::from(g) + 1, u64::from(g) + 10).expect("append"));
    }
    (writer, all)
}

fn segment_path(dir: &Path) -> std::path::PathBuf {
    crate::filenames::numbered_file(dir, 7, crate::filenames::SEGMENT_EXTENSION)
}

#[test]
fn sealed_segments_are_indexed_from_the_footer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 3);
    writer.seal().expect("seal");
    let len = std::fs::metadata(segment_path(dir.path())).expect("meta").len();
    assert_eq!(len % PAGE_BYTES, 0, "sealed segments end on a page boundary");
    let scan = scan_segment(&RealFs, &segment_path(dir.path())).expect("scan");
    assert!(scan.sealed);
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert_eq!(scan.entries, written);
    assert_eq!(scan.wal_checkpoint, 12);
    for entry in &scan.entries {
        let block = read_block(&scan.path, scan.file.as_ref(), entry).expect("block reads");
        assert_eq!(block.header.series, entry.series);
        assert_eq!(block.timestamps.len(), 300);
    }
}

#[test]
fn unsealed_segments_are_indexed_from_group_headers_and_torn_tails_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 2);
    let two_groups_end = writer.bytes();
    drop(writer);
    // A third group that only half reached the disk.
    let path = segment_path(dir.path());
    let file = RealFs.open_rw(&path).expect("open");
    let mut partial = group(1, 9_000_000);
    let (bytes, _) = {
        let g = std::mem::take(&mut partial);
        g.finish(3, 13, two_groups_end)
    };
    file.write_all_at(&bytes[..bytes.len() / 2], two_groups_end).expect("write");
    drop(file);
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert!(!scan.sealed);
    assert_eq!(scan.entries, written);
    assert_eq!(scan.end, two_groups_end);
    assert_eq!(scan.wal_checkpoint, 11);
    assert_eq!(scan.problems.len(), 1, "{:?}", scan.problems);
    let len = std::fs::metadata(&path).expect("meta").len();
    assert!(len > two_groups_end, "the torn tail is kept: it shows the groups before it were synced");
    assert_eq!(scan.append_at, len.next_multiple_of(PAGE_BYTES));
    // Writing continues past the torn tail, and the result seals cleanly.
    let mut writer = SegmentWriter::resume(&scan, true);
    writer.append_group(group(1, 9_000_000), 3, 13).expect("append");
    writer.seal().expect("seal");
    let scan = scan_segment(&RealFs, &path).expect("rescan");
    assert!(scan.sealed);
    assert_eq!(scan.entries.len(), 15);
}

#[test]
fn a_damaged_footer_falls_back_to_group_headers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 3);
    let footer_offset = writer.bytes();
    writer.seal().expect("seal");
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[footer_offset as usize + 5] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert!(!scan.sealed);
    assert_eq!(scan.entries, written);
    assert_eq!(scan.problems[0].0, footer_offset, "{:?}", scan.problems);
}

/// Found by the `segment_file` fuzz target: a sealed segment with a damaged footer and a
/// decayed block in its last group. The first scan kept the group (a sealed file's groups are
/// not torn) but cut the trailer away, so a second scan (after a crash, or a full disk that kept
/// the new seal from being written) took the file for unsealed and dropped the acknowledged
/// group as a torn write.
#[test]
fn a_damaged_footer_keeps_its_trailer_until_a_new_seal_replaces_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 2);
    let footer_offset = writer.bytes();
    writer.seal().expect("seal");
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    let sealed_len = bytes.len() as u64;
    bytes[footer_offset as usize + 5] ^= 0xff;
    bytes[written[7].offset as usize + 40] ^= 0x10;
    std::fs::write(&path, &bytes).expect("write");
    let first = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(first.entries, written, "a sealed file's last group is decayed, not torn");
    assert_eq!(first.end, footer_offset);
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), sealed_len, "the trailer stays");
    drop(first);
    let second = scan_segment(&RealFs, &path).expect("rescan");
    assert_eq!(second.entries, written, "a second scan drops nothing");
    assert_eq!(second.wal_checkpoint, 11);
    // The new seal replaces the old footer and trailer and ends the file.
    SegmentWriter::resume(&second, true).seal().expect("seal again");
    drop(second);
    let resealed = scan_segment(&RealFs, &path).expect("scan the new seal");
    assert!(resealed.sealed, "{:?}", resealed.problems);
    assert!(resealed.problems.is_empty(), "{:?}", resealed.problems);
    assert_eq!(resealed.entries, written);
    assert_eq!(resealed.wal_checkpoint, 11);
}

/// A new seal that lists fewer blocks than the damaged footer it replaces is shorter: the old
/// trailer past it is cut, so the new one ends the file.
#[test]
fn a_shorter_new_seal_cuts_the_old_footer_and_trailer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut writer, written) = write_segment(dir.path(), 1);
    let mut many = GroupBuilder::new();
    for s in 0..600 {
        many.add_block(SeriesId(100 + s), &[5_000_000], &ValueColumn::F64(vec![1.0]));
    }
    let second_group = writer.bytes();
    writer.append_group(many, 2, 11).expect("append");
    let footer_offset = writer.bytes();
    writer.seal().expect("seal");
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    let sealed_len = bytes.len() as u64;
    assert!(sealed_len - footer_offset > PAGE_BYTES, "the footer of 605 blocks takes more than a page");
    bytes[footer_offset as usize + 5] ^= 0xff;
    bytes[second_group as usize + 9] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(scan.entries, written, "the damaged second group is skipped");
    SegmentWriter::resume(&scan, true).seal().expect("seal again");
    drop(scan);
    assert!(std::fs::metadata(&path).expect("meta").len() < sealed_len, "the stale tail is cut");
    let resealed = scan_segment(&RealFs, &path).expect("scan the new seal");
    assert!(resealed.sealed, "{:?}", resealed.problems);
    assert_eq!(resealed.entries, written);
}

#[test]
fn a_damaged_group_is_skipped_and_later_groups_stay_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 3);
    drop(writer);
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    // The group header sits on the page before the group's first block.
    let second_group = written[5].offset - PAGE_BYTES;
    bytes[second_group as usize + 9] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    let expected: Vec<IndexEntry> = written[..5].iter().chain(&written[10..]).copied().collect();
    assert_eq!(scan.entries, expected);
    assert_eq!(scan.problems.len(), 1);
    assert_eq!(scan.problems[0].0, second_group);
}

#[test]
fn a_flipped_block_byte_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 1);
    writer.seal().expect("seal");
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    let victim = written[2];
    bytes[victim.offset as usize + 100] ^= 0x10;
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    for entry in &scan.entries {
        let result = read_block(&path, scan.file.as_ref(), entry);
        if entry.offset == victim.offset {
            match result {
                Err(Error::Corruption { path: p, offset, .. }) => {
                    assert_eq!(p, path);
                    assert_eq!(offset, victim.offset);
                }
                other => panic!("expected corruption, got {:?}", other.map(|b| b.header)),
            }
        } else {
            result.expect("undamaged block reads");
        }
    }
}

/// Found by the `segment_file` fuzz target: a group header with a valid checksum and a blocks
/// length near u64::MAX overflowed the index offset computation.
#[test]
fn a_group_header_with_absurd_lengths_is_damage_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 2);
    drop(writer);
    let path = segment_path(dir.path());
    let bytes = std::fs::read(&path).expect("read");
    let second_group = (written[5].offset - PAGE_BYTES) as usize;
    for (field, value) in [(24, u64::MAX - 10), (40, u64::MAX - 10), (24, u64::MAX / 2)] {
        let mut damaged = bytes.clone();
        damaged[second_group + field..second_group + field + 8].copy_from_slice(&value.to_le_bytes());
        let checksum = crate::checksum::crc32c(&damaged[second_group..second_group + 60]);
        damaged[second_group + 60..second_group + 64].copy_from_slice(&checksum.to_le_bytes());
        std::fs::write(&path, &damaged).expect("write");
        let scan = scan_segment(&RealFs, &path).expect("scan");
        assert_eq!(scan.entries, written[..5], "field {field}: the first group survives");
        assert!(!scan.problems.is_empty());
    }
}

/// Found by the power-loss simulation (`tests/crash_sim.rs`): a power loss during the last
/// group's fdatasync kept its header and index but not one of its block pages. The group was
/// never acknowledged; kept, it made reads of the series fail, and its WAL checkpoint let
/// recovery delete the WAL files still holding its points.
#[test]
fn a_last_group_missing_a_block_page_is_cut_with_its_wal_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 2);
    drop(writer);
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    let second_group = written[5].offset - PAGE_BYTES;
    let lost_page = written[5].offset as usize;
    bytes[lost_page..lost_page + PAGE_BYTES as usize].fill(0);
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(scan.entries, written[..5], "the torn group is not indexed");
    assert_eq!(scan.wal_checkpoint, 10, "the first group's checkpoint, not the torn one's (11)");
    assert_eq!(scan.end, second_group);
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), bytes.len() as u64, "its bytes stay, under a torn mark");
    assert_eq!(scan.problems.len(), 1, "{:?}", scan.problems);
    assert_eq!(scan.problems[0].0, second_group);
    drop(scan);
    let again = scan_segment(&RealFs, &path).expect("rescan");
    assert_eq!((again.entries.as_slice(), again.wal_checkpoint, again.end), (&written[..5], 10, second_group), "the same on a rescan");
    assert!(again.problems.is_empty(), "the torn mark is not reported again: {:?}", again.problems);
    drop(again);
    // The same damage in a group before the last is decay, not a torn write: the group stays.
    std::fs::remove_file(&path).expect("remove");
    let (writer, written) = write_segment(dir.path(), 3);
    drop(writer);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[written[5].offset as usize..written[5].offset as usize + PAGE_BYTES as usize].fill(0);
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(scan_segment(&RealFs, &path).expect("scan").entries, written, "only the last group can be torn");
}

/// Found by the `segment_file` fuzz target: a torn last group cut off exposed the group before
/// it, which a second scan (after a crash, or a full disk that kept the seal from being
/// written) took for torn in turn; with a decayed block it dropped that acknowledged group.
#[test]
fn leaving_out_a_torn_group_never_exposes_the_group_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, written) = write_segment(dir.path(), 3);
    drop(writer);
    let path = segment_path(dir.path());
    let mut bytes = std::fs::read(&path).expect("read");
    // The second group decays (a flipped bit), the third is torn (a block page never written).
    bytes[written[7].offset as usize + 40] ^= 0x10;
    let torn = written[10];
    bytes[torn.offset as usize..(torn.offset + u64::from(torn.length)) as usize].fill(0);
    std::fs::write(&path, &bytes).expect("write");
    for round in 0..3 {
        let scan = scan_segment(&RealFs, &path).expect("scan");
        assert_eq!(scan.entries, written[..10], "round {round}: only the torn group is left out");
        assert_eq!(scan.wal_checkpoint, 11, "round {round}");
    }
    // The torn group stays out once groups follow it, and when a damaged footer makes a scan
    // walk the groups of a sealed file (where no group is taken for torn): its mark says so.
    let scan = scan_segment(&RealFs, &path).expect("scan");
    let mut writer = SegmentWriter::resume(&scan, true);
    drop(scan);
    let appended = writer.append_group(group(1, 9_000_000), 4, 13).expect("append");
    let footer_offset = writer.bytes();
    let expected: Vec<IndexEntry> = written[..10].iter().chain(&appended).copied().collect();
    assert_eq!(scan_segment(&RealFs, &path).expect("scan").entries, expected, "a group after the torn one");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    SegmentWriter::resume(&scan, true).seal().expect("seal");
    drop(scan);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[footer_offset as usize + 3] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(scan.entries, expected, "rebuilt from the groups: {:?}", scan.problems);
    drop(scan);
    // Nothing written after the second group but zeros: then it is the last group and torn.
    std::fs::remove_file(&path).expect("remove");
    let (writer, written) = write_segment(dir.path(), 2);
    drop(writer);
    let mut bytes = std::fs::read(&path).expect("read");
    let torn = written[7];
    bytes[torn.offset as usize..(torn.offset + u64::from(torn.length)) as usize].fill(0);
    let groups_end = bytes.len() as u64;
    bytes.extend_from_slice(&[0u8; 3 * PAGE_BYTES as usize]);
    std::fs::write(&path, &bytes).expect("write");
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(scan.entries, written[..5]);
    assert_eq!(scan.append_at, groups_end, "the torn group stays under its mark; the zeros after it are cut: {:?}", scan.problems);
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), groups_end);
}

#[test]
fn a_file_without_a_complete_header_is_reported_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(segment_path(dir.path()), [0u8; 100]).expect("write");
    let scan = scan_segment(&RealFs, &segment_path(dir.path())).expect("scan");
    assert!(scan.entries.is_empty());
    assert_eq!(scan.end, 0);
}

mod index_list {
    use super::*;
    use proptest::prelude::*;

    fn entries() -> impl Strategy<Value = Vec<IndexEntry>> {
        proptest::collection::vec((any::<u32>(), 1u32.., 0u64..3, 0u64..5000, 1u32..100_000, any::<i64>(), 0u64..(1 << 40)), 0..50)
            .prop_map(|raw| {
                let (mut sequence, mut end) = (0u64, 4096u64);
                raw.into_iter()
                    .map(|(series, count, sequence_step, gap, length, min_timestamp, span)| {
                        sequence += sequence_step;
                        let offset = end + gap;
                        end = offset + u64::from(length);
                        let max_timestamp = min_timestamp.saturating_add(span as i64);
                        IndexEntry {
                            series: SeriesId(series),
                            kind: ValueKind::F64,
                            count,
                            length,
                            offset,
                            min_timestamp,
                            max_timestamp,
                            sequence,
                        }
                    })
                    .collect()
            })
    }

    proptest! {
        #[test]
        fn index_lists_round_trip(list in entries()) {
            let mut bytes = Vec::new();
            IndexEntry::encode_list(&list, &mut bytes);
            prop_assert_eq!(IndexEntry::decode_list(&bytes).expect("decodes"), list);
        }

        #[test]
        fn damaged_index_lists_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = IndexEntry::decode_list(&bytes);
        }
    }

    #[test]
    fn a_typical_entry_takes_well_under_twenty_bytes() {
        let list: Vec<IndexEntry> = (0..100u32)
            .map(|i| IndexEntry {
                series: SeriesId(i + 1),
                kind: ValueKind::F64,
                count: 8640,
                length: 6000,
                offset: 4096 + 64 + u64::from(i) * 6000,
                min_timestamp: 1_451_606_400_000_000_000,
                max_timestamp: 1_451_606_400_000_000_000 + 86_390_000_000_000,
                sequence: 7,
            })
            .collect();
        let mut bytes = Vec::new();
        IndexEntry::encode_list(&list, &mut bytes);
        assert!(bytes.len() < 100 * 20, "{} bytes for 100 entries", bytes.len());
    }
}

/// Pipelined group commit stages a group (everything but its header, behind a zero page) while
/// the group before it is still syncing. Until its header is written, a staged group proves
/// nothing about that group: damage there is still a torn write, and the staged bytes are cut
/// off. Once the header is written, the group before is proven synced and its damage is decay.
#[test]
fn a_group_staged_without_its_header_does_not_prove_the_group_before_it_synced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = segment_path(dir.path());
    let lose_a_page_of_the_second_group = |written: &[IndexEntry]| {
        let mut bytes = std::fs::read(&path).expect("read");
        let lost_page = written[5].offset as usize;
        bytes[lost_page..lost_page + PAGE_BYTES as usize].fill(0);
        std::fs::write(&path, &bytes).expect("write");
    };
    let (mut writer, written) = write_segment(dir.path(), 2);
    let staged = writer.stage_parts(vec![group(1, 9_000_000).into_part()], 3, 12).expect("stage");
    let second_group_end = staged.entries()[0].offset - PAGE_BYTES;
    assert!(std::fs::metadata(&path).expect("meta").len() > second_group_end, "the staged group is on disk");
    drop(staged);
    drop(writer);
    lose_a_page_of_the_second_group(&written);
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(scan.entries, written[..5], "the second group may be torn: left out ({:?})", scan.problems);
    assert_eq!(scan.wal_checkpoint, 10);
    assert_eq!(scan.append_at, second_group_end, "the torn group stays under its mark");
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), second_group_end, "the staged group without a header is cut off");
    drop(scan);

    std::fs::remove_file(&path).expect("remove");
    let (mut writer, written) = write_segment(dir.path(), 2);
    let staged = writer.stage_parts(vec![group(1, 9_000_000).into_part()], 3, 12).expect("stage");
    staged.commit(true).expect("commit");
    writer.record(&staged);
    drop(writer);
    lose_a_page_of_the_second_group(&written);
    let expected: Vec<IndexEntry> = written.iter().chain(staged.entries()).copied().collect();
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert_eq!(scan.entries, expected, "with the third header written, the second group is decayed, not torn");
    assert_eq!(scan.wal_checkpoint, 12);
}

/// A staged group's header goes where its zero page was; after a failed commit, `unstage`
/// cuts every staged byte off and the next group takes its place.
#[test]
fn unstaging_cuts_the_staged_groups_and_the_next_group_takes_their_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = segment_path(dir.path());
    let (mut writer, written) = write_segment(dir.path(), 1);
    let end = writer.bytes();
    let first = writer.stage_parts(vec![group(1, 2_000_000).into_part()], 2, 11).expect("stage");
    let second = writer.stage_parts(vec![group(1, 3_000_000).into_part()], 3, 11).expect("stage");
    assert!(second.entries()[0].offset > first.entries()[4].offset, "staged one after the other");
    assert_eq!(writer.bytes(), end, "nothing recorded yet");
    writer.unstage().expect("unstage");
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), end);
    let again = writer.stage_parts(vec![group(1, 4_000_000).into_part()], 2, 11).expect("stage");
    assert_eq!(again.entries()[0].offset, first.entries()[0].offset, "the next group starts where the cut ones did");
    again.commit(true).expect("commit");
    writer.record(&again);
    writer.seal().expect("seal");
    let expected: Vec<IndexEntry> = written.iter().chain(again.entries()).copied().collect();
    let scan = scan_segment(&RealFs, &path).expect("scan");
    assert!(scan.sealed && scan.problems.is_empty(), "{:?}", scan.problems);
    assert_eq!(scan.entries, expected);
}
