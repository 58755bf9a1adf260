//! The crash model itself: what each [`CrashMode`] keeps of synced and unsynced changes.

use super::*;
use crate::fs::create_dir_all_durably;

fn root() -> PathBuf {
    PathBuf::from("/sim/data")
}

fn contents(fs: &CrashFs, path: &Path) -> Option<Vec<u8>> {
    let file = fs.open_read(path).ok()?;
    Some(file.read_all().expect("read"))
}

#[test]
fn synced_data_and_entries_survive_and_unsynced_ones_do_not() {
    let fs = CrashFs::new(&root());
    let path = root().join("a");
    let file = fs.create(&path).expect("create");
    file.write_all_at(b"hello", 0).expect("write");
    file.sync_data().expect("sync");
    let image = fs.crash_image(CrashMode::DropUnsynced, 1);
    assert_eq!(contents(&image, &path), None, "the directory entry was never synced");
    fs.sync_dir(&root()).expect("sync dir");
    file.write_all_at(b" world", 5).expect("write");
    let image = fs.crash_image(CrashMode::DropUnsynced, 1);
    assert_eq!(contents(&image, &path).as_deref(), Some(&b"hello"[..]), "the unsynced append is dropped");
    assert_eq!(contents(&fs, &path).as_deref(), Some(&b"hello world"[..]), "readers see every write");
}

#[test]
fn unsynced_renames_and_removals_are_undone() {
    let fs = CrashFs::new(&root());
    let (from, to) = (root().join("tmp"), root().join("final"));
    let file = fs.create(&from).expect("create");
    file.write_all_at(b"x", 0).expect("write");
    file.sync_data().expect("sync");
    fs.sync_dir(&root()).expect("sync dir");
    fs.rename(&from, &to).expect("rename");
    let image = fs.crash_image(CrashMode::DropUnsynced, 1);
    assert!(image.exists(&from) && !image.exists(&to), "an unsynced rename is undone");
    fs.sync_dir(&root()).expect("sync dir");
    fs.remove(&to).expect("remove");
    let image = fs.crash_image(CrashMode::DropUnsynced, 1);
    assert_eq!(contents(&image, &to).as_deref(), Some(&b"x"[..]), "an unsynced removal is undone");
}

#[test]
fn a_directory_lives_only_if_its_parent_was_synced() {
    let fs = CrashFs::new(&root());
    let dir = root().join("sub");
    fs.create_dir_all(&dir).expect("mkdir");
    let path = dir.join("f");
    let file = fs.create(&path).expect("create");
    file.sync_data().expect("sync");
    fs.sync_dir(&dir).expect("sync dir");
    assert!(!fs.crash_image(CrashMode::DropUnsynced, 1).exists(&path), "the directory itself was not synced in its parent");
    fs.sync_dir(&root()).expect("sync parent");
    assert!(fs.crash_image(CrashMode::DropUnsynced, 1).exists(&path));
}

#[test]
fn a_torn_write_keeps_a_prefix_of_the_last_write_only() {
    let fs = CrashFs::new(&root());
    let path = root().join("log");
    let file = fs.create(&path).expect("create");
    fs.sync_dir(&root()).expect("sync dir");
    file.write_all_at(&[1u8; 10], 0).expect("write");
    file.sync_data().expect("sync");
    file.write_all_at(&[2u8; 10], 10).expect("write");
    file.write_all_at(&[3u8; 10], 20).expect("write");
    let mut lengths = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let image = contents(&fs.crash_image(CrashMode::TearLastWrite, seed), &path).expect("file");
        assert_eq!(&image[..10], &[1u8; 10], "synced bytes never change");
        // The dropped write leaves a hole of zeros before the kept prefix of the torn one.
        assert!(image.len() == 10 || image.len() > 20, "length {}", image.len());
        assert!(image[10..].iter().take(10).all(|&b| b == 0) && image.iter().skip(20).all(|&b| b == 3));
        lengths.insert(image.len());
    }
    assert!(lengths.len() > 3, "tears land at many lengths: {lengths:?}");
}

#[test]
fn in_order_prefixes_keep_earlier_changes_before_later_ones() {
    let fs = CrashFs::new(&root());
    let path = root().join("log");
    let file = fs.create(&path).expect("create");
    fs.sync_dir(&root()).expect("sync dir");
    for i in 0..8u8 {
        file.write_all_at(&[i + 1; 4], u64::from(i) * 4).expect("write");
    }
    let mut seen_whole = false;
    for seed in 0..64 {
        let image = contents(&fs.crash_image(CrashMode::InOrderPrefix, seed), &path).expect("file");
        // A prefix of the writes, the last one maybe torn: every kept byte is the written one.
        for (at, &byte) in image.iter().enumerate() {
            assert_eq!(byte, at as u8 / 4 + 1, "seed {seed}: byte {at}");
        }
        seen_whole |= image.len() == 32;
    }
    assert!(seen_whole, "some prefix keeps every write");
}

#[test]
fn random_write_back_keeps_pages_of_unsynced_writes_in_any_combination() {
    let fs = CrashFs::new(&root());
    let path = root().join("seg");
    let file = fs.create(&path).expect("create");
    fs.sync_dir(&root()).expect("sync dir");
    let bytes: Vec<u8> = (0..4 * PAGE_BYTES).map(|i| (i / PAGE_BYTES) as u8 + 1).collect();
    file.write_all_at(&bytes, 0).expect("write");
    let mut patterns = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let image = contents(&fs.crash_image(CrashMode::RandomWriteback, seed), &path).expect("file");
        let pattern: Vec<bool> = (0..4).map(|page| image.get((page * PAGE_BYTES) as usize).is_some_and(|&b| b == page as u8 + 1)).collect();
        patterns.insert(pattern);
    }
    assert!(patterns.len() > 8, "pages are written back independently: {patterns:?}");
}

#[test]
fn everything_fails_from_the_crash_point_on() {
    let fs = CrashFs::new(&root());
    let file = fs.create(&root().join("a")).expect("create");
    fs.crash_at(Some(fs.operations() + 1));
    file.write_all_at(b"kept in the cache", 0).expect("one more operation");
    assert!(file.sync_data().is_err(), "the crash point");
    assert!(fs.crashed());
    assert!(fs.create(&root().join("b")).is_err() && file.read_all().is_err(), "a dead machine does nothing");
    let image = fs.crash_image(CrashMode::DropUnsynced, 0);
    assert!(!image.exists(&root().join("a")), "nothing was synced before the crash");
    assert!(image.create(&root().join("c")).is_ok(), "the image is a live file system");
}

#[test]
fn new_directories_made_durably_survive_a_power_loss_with_their_files() {
    let root = Path::new("/sim");
    for durably in [false, true] {
        let fs = CrashFs::new(root);
        let dir = root.join("data/segments");
        if durably {
            create_dir_all_durably(&fs, &dir, true).expect("mkdir");
        } else {
            fs.create_dir_all(&dir).expect("mkdir");
        }
        let file = fs.create(&dir.join("1.seg")).expect("create");
        file.sync_data().and_then(|()| fs.sync_dir(&dir)).expect("synced file and entry");
        let image = fs.crash_image(CrashMode::DropUnsynced, 0);
        assert_eq!(image.exists(&dir.join("1.seg")), durably, "durably: {durably}");
    }
}
