//! Named corruption cases, each with the records expected to survive and the damage expected
//! to be reported.
//!
//! The log under test: file 1 holds records 0–4, file 2 (the last) records 5–9.

use super::*;
use crate::error::Error;
use crate::wal::format::{record_len, HEADER_LEN};

/// The two files of the log under test, and where each record starts in its file.
struct Image {
    files: [Vec<u8>; 2],
    starts: [Vec<usize>; 2],
}

/// Where a cut is expected, computed from the undamaged layout.
type OffsetOf = fn(&Image) -> usize;

struct Case {
    name: &'static str,
    damage: fn(&mut Image),
    /// Indices of the records that must be replayed, in order.
    survivors: Vec<usize>,
    /// (file id, offset) of every reported cut.
    reports: Vec<(u64, OffsetOf)>,
    /// Whether file 2 must be gone after recovery.
    last_file_removed: bool,
}

fn records() -> Vec<Vec<u8>> {
    (0..10).map(|i| record(i, 10 + i * 3)).collect()
}

fn build(dir: &Path) -> Image {
    let fs = real_fs();
    let records = records();
    let (wal, _, _) = open(&fs, dir, options(Durability::Os, 1 << 20));
    append_durably(&wal, &records[..5]);
    assert_eq!(wal.rotate().expect("rotate"), 2);
    append_durably(&wal, &records[5..]);
    drop(wal);
    let starts = |records: &[Vec<u8>]| -> Vec<usize> {
        let mut offset = HEADER_LEN;
        records
            .iter()
            .map(|r| {
                let start = offset;
                offset += record_len(r.len());
                start
            })
            .collect()
    };
    Image {
        files: [std::fs::read(wal_path(dir, 1)).expect("read"), std::fs::read(wal_path(dir, 2)).expect("read")],
        starts: [starts(&records[..5]), starts(&records[5..])],
    }
}

fn range(from: usize, to: usize) -> Vec<usize> {
    (from..to).collect()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "flipped byte in a record body, last file",
            damage: |i| i.files[1][i.starts[1][2] + 8 + 3] ^= 0x10,
            survivors: range(0, 7),
            reports: vec![(2, |i| i.starts[1][2])],
            last_file_removed: false,
        },
        Case {
            name: "flipped byte in a record length, last file",
            damage: |i| i.files[1][i.starts[1][3]] ^= 0x01,
            survivors: range(0, 8),
            reports: vec![(2, |i| i.starts[1][3])],
            last_file_removed: false,
        },
        Case {
            name: "flipped byte in a record checksum, last file",
            damage: |i| i.files[1][i.starts[1][0] + 5] ^= 0x80,
            survivors: range(0, 5),
            reports: vec![(2, |i| i.starts[1][0])],
            last_file_removed: false,
        },
        Case {
            name: "flipped byte in a record body, older file",
            damage: |i| i.files[0][i.starts[0][2] + 9] ^= 0x04,
            survivors: [0, 1].into_iter().chain(5..10).collect(),
            reports: vec![(1, |i| i.starts[0][2])],
            last_file_removed: false,
        },
        Case {
            name: "huge length in an older file",
            damage: |i| i.files[0][i.starts[0][3] + 3] = 0x7f,
            survivors: [0, 1, 2].into_iter().chain(5..10).collect(),
            reports: vec![(1, |i| i.starts[0][3])],
            last_file_removed: false,
        },
        Case {
            name: "older file cut inside its last record",
            damage: |i| {
                let cut = i.files[0].len() - 3;
                i.files[0].truncate(cut);
            },
            survivors: range(0, 4).into_iter().chain(5..10).collect(),
            reports: vec![(1, |i| i.starts[0][4])],
            last_file_removed: false,
        },
        Case {
            name: "flipped byte in the file id of an older file's header",
            damage: |i| i.files[0][14] ^= 0x01,
            survivors: range(5, 10),
            reports: vec![(1, |_| 0)],
            last_file_removed: false,
        },
        Case {
            name: "flipped byte in the header checksum of the last file",
            damage: |i| i.files[1][21] ^= 0x01,
            survivors: range(0, 5),
            reports: vec![(2, |_| 0)],
            last_file_removed: false,
        },
        Case {
            name: "bad magic in the last file",
            damage: |i| i.files[1][1] = b'X',
            survivors: range(0, 5),
            reports: vec![(2, |_| 0)],
            last_file_removed: false,
        },
        Case {
            name: "header of another file (id mismatch)",
            damage: |i| {
                let header = i.files[0][..HEADER_LEN].to_vec();
                i.files[1][..HEADER_LEN].copy_from_slice(&header);
            },
            survivors: range(0, 5),
            reports: vec![(2, |_| 0)],
            last_file_removed: false,
        },
        Case {
            name: "last file cut inside its header",
            damage: |i| i.files[1].truncate(10),
            survivors: range(0, 5),
            reports: vec![(2, |_| 0)],
            last_file_removed: true,
        },
        Case {
            name: "empty last file",
            damage: |i| i.files[1].clear(),
            survivors: range(0, 5),
            reports: vec![(2, |_| 0)],
            last_file_removed: true,
        },
        Case {
            name: "torn file followed by an empty last file: the torn one is repaired as last",
            damage: |i| {
                let cut = i.files[0].len() - 3;
                i.files[0].truncate(cut);
                i.files[1].clear();
            },
            survivors: range(0, 4),
            reports: vec![(2, |_| 0), (1, |i| i.starts[0][4])],
            last_file_removed: true,
        },
        Case {
            name: "all-zero last file",
            damage: |i| i.files[1].fill(0),
            survivors: range(0, 5),
            reports: vec![(2, |_| 0)],
            last_file_removed: true,
        },
        Case {
            name: "zeroed tail from a record boundary",
            damage: |i| {
                let start = i.starts[1][4];
                i.files[1][start..].fill(0);
            },
            survivors: range(0, 9),
            reports: vec![],
            last_file_removed: false,
        },
        Case {
            name: "zeroed tail from inside a record",
            damage: |i| {
                let start = i.starts[1][4] + 10;
                i.files[1][start..].fill(0);
            },
            survivors: range(0, 9),
            reports: vec![(2, |i| i.starts[1][4])],
            last_file_removed: false,
        },
        Case {
            name: "zeros appended (preallocated tail)",
            damage: |i| i.files[1].extend_from_slice(&[0u8; 4096]),
            survivors: range(0, 10),
            reports: vec![],
            last_file_removed: false,
        },
        Case {
            name: "zeros then data appended",
            damage: |i| {
                i.files[1].extend_from_slice(&[0u8; 100]);
                i.files[1].push(1);
            },
            survivors: range(0, 10),
            reports: vec![(2, |i| i.starts[1][4] + record_len(37))],
            last_file_removed: false,
        },
        Case {
            name: "garbage appended to the last file",
            damage: |i| i.files[1].extend_from_slice(b"garbage, not a record"),
            survivors: range(0, 10),
            reports: vec![(2, |i| i.starts[1][4] + record_len(37))],
            last_file_removed: false,
        },
        Case {
            name: "garbage appended to an older file",
            damage: |i| i.files[0].extend_from_slice(b"\x05\x00\x00\x00junkjunk"),
            survivors: range(0, 10),
            reports: vec![(1, |i| i.starts[0][4] + record_len(22))],
            last_file_removed: false,
        },
    ]
}

#[test]
fn corruption_cases() {
    let records = records();
    let fs = real_fs();
    for case in cases() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut image = build(dir.path());
        assert_eq!(image.files[1].len(), image.starts[1][4] + record_len(37), "layout");
        (case.damage)(&mut image);
        std::fs::write(wal_path(dir.path(), 1), &image.files[0]).expect("write");
        std::fs::write(wal_path(dir.path(), 2), &image.files[1]).expect("write");

        let (wal, recovery, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
        let expected: Vec<Vec<u8>> = case.survivors.iter().map(|&i| records[i].clone()).collect();
        assert_eq!(replayed, expected, "{}", case.name);
        let reported: Vec<(PathBuf, u64)> = recovery.truncated.iter().map(|(path, offset, _)| (path.clone(), *offset)).collect();
        let wanted: Vec<(PathBuf, u64)> =
            case.reports.iter().map(|(id, offset)| (wal_path(dir.path(), *id), offset(&image) as u64)).collect();
        assert_eq!(reported, wanted, "{}: {:?}", case.name, recovery.truncated);
        assert_eq!(!wal_path(dir.path(), 2).exists(), case.last_file_removed, "{}", case.name);
        assert_eq!(recovery.active_file_id, 3, "{}", case.name);

        // The log goes on, and a second recovery sees the same records plus the new one.
        append_durably(&wal, &[record(99, 9)]);
        drop(wal);
        let (_wal, again, replayed) = open(&fs, dir.path(), options(Durability::Fsync, 1 << 20));
        // Repairs hold: only damage in files that were skipped, not cut, is reported again.
        assert!(again.truncated.iter().all(|cut| recovery.truncated.contains(cut)), "{}: {:?}", case.name, again.truncated);
        let mut expected = expected;
        expected.push(record(99, 9));
        assert_eq!(replayed, expected, "{} (second recovery)", case.name);
    }
}

#[test]
fn an_unknown_version_stops_recovery_before_any_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    let path = wal_path(dir.path(), 2);
    let mut bytes = std::fs::read(&path).expect("read");
    // A newer build's file: its header checksum matches. (A version under a bad checksum is
    // damage, set aside: see the engine's tests/quarantine.rs.)
    bytes[8] = 9;
    let checksum = crc32c::crc32c(&bytes[..20]);
    bytes[20..24].copy_from_slice(&checksum.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write");
    let mut replayed = 0;
    let result = Wal::open(real_fs(), dir.path(), options(Durability::Fsync, 1 << 20), &mut |_| {
        replayed += 1;
        Ok(())
    });
    match result {
        Err(Error::UnsupportedVersion { path: found_path, found: 9, supported: 1 }) => {
            assert_eq!(found_path, path);
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("opened a file of an unknown version"),
    }
    assert_eq!(replayed, 0);
    assert_eq!(std::fs::read(&path).expect("read"), bytes, "the file is left alone");
}
