//! Many appenders under `Fsync`: every record is durable exactly once, in each thread's order,
//! and group commit really groups.

use super::*;
use std::sync::atomic::Ordering;

const THREADS: usize = 8;
const RECORDS_PER_THREAD: u32 = 1000;

#[test]
fn concurrent_appenders_are_group_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counting = Arc::new(CountingFs::new());
    let syncs = counting.syncs.clone();
    let fs: Arc<dyn FileSystem> = counting;
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 10));
    let wal = Arc::new(wal);
    let syncs_before = syncs.load(Ordering::SeqCst);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let wal = wal.clone();
            scope.spawn(move || {
                for n in 0..RECORDS_PER_THREAD {
                    let mut payload = vec![thread as u8];
                    payload.extend_from_slice(&n.to_le_bytes());
                    payload.resize(5 + (n as usize % 40), 0xAB);
                    let position = wal.append(&payload).expect("append");
                    wal.wait_durable(position).expect("durable");
                }
            });
        }
    });
    let group_syncs = syncs.load(Ordering::SeqCst) - syncs_before;
    let total = THREADS as u64 * u64::from(RECORDS_PER_THREAD);
    assert!(group_syncs < total, "{group_syncs} syncs for {total} records: no grouping");
    drop(wal);

    let (_wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 64 << 10));
    assert!(recovery.truncated.is_empty(), "{:?}", recovery.truncated);
    assert_eq!(replayed.len() as u64, total);
    let mut next = [0u32; THREADS];
    for payload in &replayed {
        let thread = payload[0] as usize;
        let n = u32::from_le_bytes([payload[1], payload[2], payload[3], payload[4]]);
        assert_eq!(n, next[thread], "thread {thread} out of order or repeated");
        next[thread] += 1;
    }
    assert_eq!(next, [RECORDS_PER_THREAD; THREADS]);
    assert!(file_ids(dir.path()).len() > 2, "rotation under concurrency");
}

#[test]
fn rotate_separates_records_appended_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = real_fs();
    let (wal, _, _) = open(&fs, dir.path(), options(Durability::Os, 1 << 20));
    // Appended but never waited for: rotate must still put them in the old file.
    let position = wal.append(&record(0, 10)).expect("append");
    let id = wal.rotate().expect("rotate");
    wal.wait_durable(position).expect("written by the rotation");
    append_durably(&wal, &[record(1, 10)]);
    wal.remove_files_before(id).expect("remove");
    drop(wal);
    let (_wal, _, replayed) = open(&fs, dir.path(), options(Durability::Os, 1 << 20));
    assert_eq!(replayed, vec![record(1, 10)]);
}
