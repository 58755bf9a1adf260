//! Injected faults: a full disk is survivable, a failed fsync stops the log for good, short
//! writes are invisible.

use super::*;
use crate::error::Error;
use crate::fs::FaultyFs;
use crate::wal::{format, WalPosition};

fn faulty() -> (FaultyFs, Arc<dyn FileSystem>) {
    let faulty = FaultyFs::new(real_fs());
    let fs: Arc<dyn FileSystem> = Arc::new(faulty.clone());
    (faulty, fs)
}

#[test]
fn disk_full_fails_the_group_and_the_log_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    let before: Vec<Vec<u8>> = (0..5).map(|i| record(i, 40)).collect();
    append_durably(&wal, &before);
    // Where the acknowledged records end (the file is longer: zeros ahead, see `log_file`).
    let records_end = (format::HEADER_LEN + before.iter().map(|r| format::record_len(r.len())).sum::<usize>()) as u64;
    assert!(std::fs::metadata(wal_path(dir.path(), 1)).expect("stat").len() > records_end, "zeros ahead");

    // Room for part of the group only: the first record lands whole, the second in part.
    faults.set_space_left(Some(70));
    let lost_a = wal.append(&record(10, 40)).expect("append");
    let lost_b = wal.append(&record(11, 40)).expect("append");
    assert!(wal.wait_durable(lost_b).expect_err("disk full").is_no_space());
    assert!(wal.wait_durable(lost_a).expect_err("same group").is_no_space());
    assert_eq!(
        std::fs::metadata(wal_path(dir.path(), 1)).expect("stat").len(),
        records_end,
        "the part of the group that landed (and the zeros after it) was cut off again"
    );
    // Records acknowledged before stay acknowledged.
    wal.wait_durable(WalPosition { sequence: 5 }).expect("still durable");

    // Still full: fails again, without poisoning.
    let lost_c = wal.append(&record(12, 40)).expect("append");
    assert!(matches!(wal.wait_durable(lost_c), Err(Error::NoSpace { .. })));

    faults.set_space_left(None);
    let after = vec![record(20, 40)];
    append_durably(&wal, &after);
    assert!(wal.wait_durable(lost_a).expect_err("a failure stays a failure").is_no_space());
    drop(wal);

    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert!(recovery.truncated.is_empty(), "{:?}", recovery.truncated);
    let expected: Vec<Vec<u8>> = before.into_iter().chain(after).collect();
    assert_eq!(replayed, expected, "no failed record reappears, no acknowledged one is lost");
}

#[test]
fn disk_full_while_rotating_keeps_the_old_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    append_durably(&wal, &[record(0, 10)]);
    faults.set_space_left(Some(0));
    assert!(wal.rotate().expect_err("no room for a header").is_no_space());
    assert_eq!(file_ids(dir.path()), vec![1], "the half-made file was removed");
    assert_eq!(wal.active_file_id(), 1);
    faults.set_space_left(None);
    append_durably(&wal, &[record(1, 10)]);
    assert_eq!(wal.rotate().expect("rotate"), 2);
    drop(wal);
    let (_wal, _, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert_eq!(replayed, vec![record(0, 10), record(1, 10)]);
}

#[test]
fn a_failed_fsync_poisons_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    let acknowledged: Vec<Vec<u8>> = (0..3).map(|i| record(i, 30)).collect();
    append_durably(&wal, &acknowledged);

    faults.set_fail_sync(true);
    let doomed = wal.append(&record(10, 30)).expect("append");
    assert!(matches!(wal.wait_durable(doomed), Err(Error::Poisoned(_))));
    faults.set_fail_sync(false);

    // Nothing is acknowledged after, even with a healthy disk again.
    assert!(matches!(wal.wait_durable(doomed), Err(Error::Poisoned(_))));
    assert!(matches!(wal.append(&record(11, 30)), Err(Error::Poisoned(_))));
    assert!(matches!(wal.rotate(), Err(Error::Poisoned(_))));
    // What was durable before stays so.
    wal.wait_durable(WalPosition { sequence: 3 }).expect("durable before the failure");
    drop(wal);

    let (_wal, _, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert_eq!(replayed[..3], acknowledged, "no acknowledged record is lost");
    assert!(replayed.len() <= 4, "at most the unacknowledged record may have reached the disk");
}

#[test]
fn a_failed_fsync_wakes_every_waiter_with_the_poison() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    faults.set_fail_sync(true);
    let wal = Arc::new(wal);
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let wal = wal.clone();
            scope.spawn(move || {
                for n in 0..50 {
                    match wal.append(&record(thread * 100 + n, 16)) {
                        Ok(position) => {
                            let result = wal.wait_durable(position);
                            assert!(matches!(result, Err(Error::Poisoned(_))), "{result:?}");
                        }
                        Err(error) => assert!(matches!(error, Error::Poisoned(_)), "{error}"),
                    }
                }
            });
        }
    });
}

#[test]
fn short_writes_are_completed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    faults.set_short_writes(true);
    let records: Vec<Vec<u8>> = (0..50).map(|i| record(i, i * 7)).collect();
    {
        let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1024));
        append_durably(&wal, &records);
    }
    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1024));
    assert_eq!(replayed, records);
    assert!(recovery.truncated.is_empty());
}

#[test]
fn a_panicking_group_commit_poisons_the_log_instead_of_hanging_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    append_durably(&wal, &[record(0, 40)]);
    faults.set_panic_writes(true);
    let lost = wal.append(&record(1, 40)).expect("append");
    // The leader's write panics: its waiters get the poison, not a hang or the panic.
    assert!(matches!(wal.wait_durable(lost), Err(Error::Poisoned(reason)) if reason.contains("panicked")));
    faults.set_panic_writes(false);
    // Every later caller learns it at once too.
    assert!(matches!(wal.append(&record(2, 40)), Err(Error::Poisoned(_))));
    assert!(matches!(wal.rotate(), Err(Error::Poisoned(_))));
    wal.wait_durable(WalPosition { sequence: 1 }).expect("what was durable stays durable");
}

/// Opened on a full disk (no room for the new file's header), the log opens all the same and
/// replays what it has; appends and rotations fail with `NoSpace` (nothing left behind) until
/// there is room, and the first group then creates the file after the last one.
#[test]
fn a_log_opened_on_a_full_disk_opens_and_starts_its_file_once_there_is_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (faults, fs) = faulty();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    append_durably(&wal, &[record(0, 10)]);
    drop(wal);

    faults.set_space_left(Some(0));
    let (wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert_eq!(replayed, vec![record(0, 10)]);
    assert_eq!(recovery.active_file_id, 1, "no new file: the last one stays the newest");
    let lost = wal.append(&record(1, 10)).expect("append");
    assert!(wal.wait_durable(lost).expect_err("no room").is_no_space());
    assert!(wal.rotate().expect_err("no room for a header").is_no_space());
    assert_eq!(file_ids(dir.path()), vec![1], "nothing was left behind");

    faults.set_space_left(None);
    append_durably(&wal, &[record(2, 10)]);
    assert_eq!(file_ids(dir.path()), vec![1, 2], "the group started file 2; file 1 was never appended to");
    assert_eq!(wal.rotate().expect("rotate"), 3);
    drop(wal);
    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
    assert!(recovery.truncated.is_empty(), "{:?}", recovery.truncated);
    assert_eq!(replayed, vec![record(0, 10), record(2, 10)], "the refused record never reappears");
}
