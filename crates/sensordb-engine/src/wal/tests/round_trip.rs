//! Records written across rotations and reopens come back in order, byte for byte.

use super::*;
use crate::error::Error;

#[test]
fn records_round_trip_across_rotations_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let mut expected = Vec::new();
    let mut index = 0;
    for round in 0..3 {
        let (wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Os, 4096));
        assert_eq!(replayed, expected, "round {round}");
        assert!(recovery.truncated.is_empty(), "{:?}", recovery.truncated);
        assert_eq!(wal.active_file_id(), recovery.active_file_id);
        for _ in 0..200 {
            let batch = vec![record(index, index % 97)];
            append_durably(&wal, &batch);
            expected.extend(batch);
            index += 1;
            if index % 150 == 0 {
                let before = wal.active_file_id();
                let id = wal.rotate().expect("rotate");
                assert!(id > before);
                assert_eq!(wal.active_file_id(), id);
            }
        }
    }
    let (_wal, _, replayed) = open(&fs, dir.path(), options(Durability::Os, 4096));
    assert_eq!(replayed, expected);
    assert!(file_ids(dir.path()).len() > 10, "automatic rotation at 4 KiB");
}

#[test]
fn empty_tiny_and_large_records_round_trip_under_fsync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let records = vec![Vec::new(), vec![7], record(2, (1 << 20) + 17), Vec::new(), record(4, 3 << 20), vec![0]];
    {
        let (wal, _, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
        assert!(replayed.is_empty());
        append_durably(&wal, &records);
    }
    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert_eq!(replayed, records);
    assert!(recovery.truncated.is_empty());
}

#[test]
fn records_above_the_limit_are_rejected_and_the_log_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let opts = WalOptions { record_bytes_max: 100, ..options(Durability::Os, 1 << 20) };
    let (wal, _, _) = open(&fs, dir.path(), opts.clone());
    let error = wal.append(&[1u8; 101]).expect_err("too large");
    assert!(matches!(error, Error::RecordTooLarge { len: 101, limit: 100 }), "{error}");
    append_durably(&wal, &[vec![1u8; 100]]);
    drop(wal);
    let (_wal, _, replayed) = open(&fs, dir.path(), opts);
    assert_eq!(replayed, vec![vec![1u8; 100]]);
}

#[test]
fn backpressure_lets_a_single_appender_run_without_waiting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let opts = WalOptions { pending_bytes_max: 1000, ..options(Durability::Fsync, 8192) };
    let records: Vec<Vec<u8>> = (0..500).map(|i| record(i, i % 300)).collect();
    {
        let (wal, _, _) = open(&fs, dir.path(), opts.clone());
        let mut last = None;
        for r in &records {
            last = Some(wal.append(r).expect("append never blocks forever"));
        }
        wal.wait_durable(last.expect("appended")).expect("durable");
        // Earlier positions were settled by the groups the appender flushed itself.
        wal.wait_durable(crate::wal::WalPosition { sequence: 1 }).expect("first durable");
    }
    let (_wal, _, replayed) = open(&fs, dir.path(), opts);
    assert_eq!(replayed, records);
}

#[test]
fn remove_files_before_drops_exactly_the_rotated_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    append_durably(&wal, &[record(0, 10), record(1, 10)]);
    let id = wal.rotate().expect("rotate");
    append_durably(&wal, &[record(2, 10)]);
    wal.remove_files_before(id).expect("remove");
    assert_eq!(file_ids(dir.path()), vec![id]);
    // Never removes the active file, whatever the argument.
    wal.remove_files_before(u64::MAX).expect("remove");
    assert_eq!(file_ids(dir.path()), vec![id]);
    drop(wal);
    let (_wal, _, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert_eq!(replayed, vec![record(2, 10)]);
}

#[test]
fn durability_none_behaves_like_os() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    {
        let (wal, _, _) = open(&fs, dir.path(), options(Durability::None, 1 << 20));
        append_durably(&wal, &[record(0, 5)]);
    }
    let (_wal, _, replayed) = open(&fs, dir.path(), options(Durability::None, 1 << 20));
    assert_eq!(replayed, vec![record(0, 5)]);
}

#[test]
fn a_failing_replay_callback_fails_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    {
        let (wal, _, _) = open(&fs, dir.path(), options(Durability::Os, 1 << 20));
        append_durably(&wal, &[record(0, 5), record(1, 5), record(2, 5)]);
    }
    let mut seen = 0;
    let result = Wal::open(fs, dir.path(), options(Durability::Os, 1 << 20), &mut |_| {
        seen += 1;
        if seen == 2 {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    });
    assert!(matches!(result, Err(Error::Closed)));
    assert_eq!(seen, 2);
}

#[test]
fn open_creates_a_missing_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal_dir = dir.path().join("data").join("wal");
    let (wal, recovery, _) = open(&real_fs(), &wal_dir, options(Durability::Fsync, 1 << 20));
    assert_eq!(recovery.active_file_id, 1);
    assert_eq!(wal.dir(), wal_dir.as_path());
    assert_eq!(file_ids(&wal_dir), vec![1]);
}
