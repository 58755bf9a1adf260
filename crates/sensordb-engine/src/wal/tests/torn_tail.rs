//! A crash mid-write leaves the last file cut anywhere inside its last record: recovery replays
//! exactly the complete records, reports the cut, and the log goes on in a new file.

use super::*;
use crate::wal::format::{record_len, HEADER_LEN};

#[test]
fn a_torn_last_record_is_cut_off_at_every_offset() {
    let source = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    // The last record's length (300 = 0x12c) has a non-zero low byte, so no cut leaves only
    // zeros behind (which would read as a zero-filled tail, not a tear).
    let records: Vec<Vec<u8>> = (0..20).map(|i| record(i, if i == 19 { 300 } else { i * 5 })).collect();
    {
        let (wal, _, _) = open(&fs, source.path(), options(Durability::Os, 1 << 20));
        append_durably(&wal, &records);
    }
    let image = std::fs::read(wal_path(source.path(), 1)).expect("read");
    let last_start = HEADER_LEN + records[..19].iter().map(|r| record_len(r.len())).sum::<usize>();
    assert_eq!(image.len(), last_start + record_len(300));

    // Every offset in the record header, a sample of the payload, and the very last byte.
    let cuts = (last_start + 1..last_start + 9).chain((last_start + 9..image.len()).step_by(23)).chain([image.len() - 1]);
    for cut in cuts {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = wal_path(dir.path(), 1);
        std::fs::write(&path, &image[..cut]).expect("write");

        let (wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
        assert_eq!(replayed, records[..19], "cut at {cut}");
        assert_eq!(recovery.truncated.len(), 1, "cut at {cut}");
        assert_eq!(recovery.truncated[0].0, path);
        assert_eq!(recovery.truncated[0].1, last_start as u64, "cut at {cut}");
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), last_start as u64);
        assert_eq!(recovery.active_file_id, 2, "appends go to a new file");

        append_durably(&wal, &[record(100, 7)]);
        drop(wal);
        let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
        let mut expected = records[..19].to_vec();
        expected.push(record(100, 7));
        assert_eq!(replayed, expected, "cut at {cut}");
        assert!(recovery.truncated.is_empty(), "the repair holds: {:?}", recovery.truncated);
    }
}

#[test]
fn a_cut_at_a_record_boundary_is_a_clean_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let records: Vec<Vec<u8>> = (0..5).map(|i| record(i, 20)).collect();
    {
        let (wal, _, _) = open(&fs, dir.path(), options(Durability::Os, 1 << 20));
        append_durably(&wal, &records);
    }
    let path = wal_path(dir.path(), 1);
    let boundary = HEADER_LEN + 4 * record_len(20);
    let image = std::fs::read(&path).expect("read");
    std::fs::write(&path, &image[..boundary]).expect("write");
    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Os, 1 << 20));
    assert_eq!(replayed, records[..4]);
    assert!(recovery.truncated.is_empty());
}
