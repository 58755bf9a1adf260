//! Model-based test: a random sequence of appends, rotations, trims and reopens; every reopen
//! replays exactly what the model (a plain list of records) holds.

use super::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Append(Vec<u8>),
    /// Append without waiting; the record is written by the next group or at close.
    AppendUnwaited(Vec<u8>),
    Rotate,
    /// Rotate, then remove every file before the new one: the log is empty again.
    RotateAndTrim,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::Append),
        2 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::AppendUnwaited),
        1 => Just(Op::Rotate),
        1 => Just(Op::RotateAndTrim),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn replay_equals_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = real_fs();
        let opts = WalOptions { pending_bytes_max: 200, ..options(Durability::Os, 256) };
        let mut model: Vec<Vec<u8>> = Vec::new();
        let (mut wal, _, replayed) = open(&fs, dir.path(), opts.clone());
        prop_assert!(replayed.is_empty());
        for op in ops {
            match op {
                Op::Append(record) => {
                    append_durably(&wal, std::slice::from_ref(&record));
                    model.push(record);
                }
                Op::AppendUnwaited(record) => {
                    wal.append(&record).expect("append");
                    model.push(record);
                }
                Op::Rotate => {
                    let id = wal.rotate().expect("rotate");
                    prop_assert_eq!(id, wal.active_file_id());
                }
                Op::RotateAndTrim => {
                    let id = wal.rotate().expect("rotate");
                    wal.remove_files_before(id).expect("trim");
                    model.clear();
                }
                Op::Reopen => {
                    drop(wal);
                    let (reopened, recovery, replayed) = open(&fs, dir.path(), opts.clone());
                    prop_assert!(recovery.truncated.is_empty());
                    prop_assert_eq!(&replayed, &model);
                    wal = reopened;
                }
            }
        }
        drop(wal);
        let (_wal, _, replayed) = open(&fs, dir.path(), opts);
        prop_assert_eq!(&replayed, &model);
    }
}
