//! Zeros ahead (`log_file`): under `Fsync` a log file is kept written with zeros past its last
//! record; recovery reads that tail as the clean end, and a crash that tears a group inside it
//! is cut off as any torn tail is.

use super::*;
use crate::wal::format::{record_len, HEADER_LEN};
use crate::wal::log_file::ZERO_AHEAD_BYTES;

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").len()
}

#[test]
fn a_synced_file_stays_zeroed_ahead_of_its_records_and_replays_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let records: Vec<Vec<u8>> = (0..600).map(|i| record(i, 4000 + i)).collect();
    let mut end = HEADER_LEN as u64;
    {
        let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 20));
        for chunk in records.chunks(10) {
            append_durably(&wal, chunk);
            end += chunk.iter().map(|r| record_len(r.len()) as u64).sum::<u64>();
            let len = file_len(&wal_path(dir.path(), 1));
            assert_eq!(len % ZERO_AHEAD_BYTES, 0, "extended in whole steps: {len}");
            assert!(len >= end + ZERO_AHEAD_BYTES / 2, "at least half a step ahead: {len} for records ending at {end}");
            assert!(len <= end + ZERO_AHEAD_BYTES * 3 / 2, "not more than a step and a half ahead: {len}");
        }
        assert!(end > 2 * ZERO_AHEAD_BYTES, "the test crosses several steps");
        let image = std::fs::read(wal_path(dir.path(), 1)).expect("read");
        assert!(image[end as usize..].iter().all(|&b| b == 0), "only zeros after the records");
    }
    let (wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 20));
    assert_eq!(replayed, records);
    assert!(recovery.truncated.is_empty(), "a zero tail is no damage: {:?}", recovery.truncated);
    drop(wal);
}

#[test]
fn without_fsync_there_are_no_zeros_ahead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let records: Vec<Vec<u8>> = (0..5).map(|i| record(i, 100)).collect();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Os, 64 << 20));
    append_durably(&wal, &records);
    let end = HEADER_LEN + records.iter().map(|r| record_len(r.len())).sum::<usize>();
    assert_eq!(file_len(&wal_path(dir.path(), 1)), end as u64);
}

#[test]
fn a_group_torn_inside_the_zeros_is_cut_off() {
    let source = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let records: Vec<Vec<u8>> = (0..20).map(|i| record(i, 300)).collect();
    {
        let (wal, _, _) = open(&fs, source.path(), options(Durability::Fsync, 64 << 20));
        append_durably(&wal, &records);
    }
    let image = std::fs::read(wal_path(source.path(), 1)).expect("read");
    let last_start = HEADER_LEN + records[..19].iter().map(|r| record_len(r.len())).sum::<usize>();
    let last_end = last_start + record_len(300);
    assert!(image.len() > last_end, "zeros ahead");
    // A crash after part of the last record reached the disk: its tail reads back as the
    // zeros that were there before (cuts in its header and in its payload).
    for cut in [last_start + 2, last_start + 9, last_start + 150, last_end - 1] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = wal_path(dir.path(), 1);
        let mut torn = image.clone();
        torn[cut..last_end].fill(0);
        std::fs::write(&path, &torn).expect("write");
        let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 20));
        assert_eq!(replayed, records[..19], "cut at {cut}");
        assert_eq!(recovery.truncated.len(), 1, "cut at {cut}: {:?}", recovery.truncated);
        assert_eq!(recovery.truncated[0].1, last_start as u64, "cut at {cut}");
        assert_eq!(file_len(&path), last_start as u64, "truncated after the last intact record");
    }
}

#[test]
fn a_group_larger_than_the_zeros_ahead_is_written_and_zeroed_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    // The second record ends 0.7 of a step past a multiple of it: the zeros after it reach the
    // multiple after next, more than one step of zeros at once.
    let records = vec![record(0, 100), record(1, (ZERO_AHEAD_BYTES * 17 / 10) as usize), record(2, 100)];
    let mut end = HEADER_LEN as u64;
    {
        let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 20));
        for r in &records {
            append_durably(&wal, std::slice::from_ref(r));
            end += record_len(r.len()) as u64;
            let len = file_len(&wal_path(dir.path(), 1));
            assert_eq!(len % ZERO_AHEAD_BYTES, 0, "{len}");
            assert!(len >= end + ZERO_AHEAD_BYTES / 2, "{len} for records ending at {end}");
        }
    }
    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 20));
    assert_eq!(replayed, records);
    assert!(recovery.truncated.is_empty(), "{:?}", recovery.truncated);
}
