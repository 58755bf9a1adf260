//! Tests of the write-ahead log, one scenario per file; shared helpers here.

mod concurrency;
mod corruption;
mod faults;
mod model;
mod round_trip;
mod torn_tail;
mod zeros_ahead;

use super::{Durability, Wal, WalOptions, WalRecovery};
use crate::filenames::{numbered_file, WAL_EXTENSION};
use crate::fs::{FileSystem, RealFs, StorageFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub(super) fn options(durability: Durability, file_bytes_max: u64) -> WalOptions {
    WalOptions { durability, file_bytes_max, ..WalOptions::default() }
}

pub(super) fn real_fs() -> Arc<dyn FileSystem> {
    Arc::new(RealFs)
}

/// Opens the log and returns it with everything it replayed.
pub(super) fn open(fs: &Arc<dyn FileSystem>, dir: &Path, options: WalOptions) -> (Wal, WalRecovery, Vec<Vec<u8>>) {
    let mut replayed = Vec::new();
    let (wal, recovery) = Wal::open(fs.clone(), dir, options, &mut |record| {
        replayed.push(record.to_vec());
        Ok(())
    })
    .expect("open");
    assert_eq!(recovery.records, replayed.len() as u64);
    assert_eq!(recovery.bytes, replayed.iter().map(|r| r.len() as u64).sum::<u64>());
    (wal, recovery, replayed)
}

/// Appends and waits for each record in turn.
pub(super) fn append_durably(wal: &Wal, records: &[Vec<u8>]) {
    for record in records {
        let position = wal.append(record).expect("append");
        wal.wait_durable(position).expect("durable");
    }
}

/// A record that names itself: `len` bytes derived from `index`, never all zero unless empty.
pub(super) fn record(index: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (index.wrapping_mul(31).wrapping_add(i) % 251) as u8 + 1).collect()
}

pub(super) fn wal_path(dir: &Path, id: u64) -> PathBuf {
    numbered_file(dir, id, WAL_EXTENSION)
}

/// The ids of the log files in `dir`, ascending.
pub(super) fn file_ids(dir: &Path) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|entry| crate::filenames::parse_numbered_file(&entry.expect("entry").path(), WAL_EXTENSION))
        .collect();
    ids.sort_unstable();
    ids
}

/// A file system that counts `sync_data` calls, to check that group commit groups.
pub(super) struct CountingFs {
    inner: Arc<dyn FileSystem>,
    pub syncs: Arc<AtomicU64>,
}

impl CountingFs {
    pub fn new() -> CountingFs {
        CountingFs { inner: real_fs(), syncs: Arc::new(AtomicU64::new(0)) }
    }
    fn wrap(&self, file: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(CountingFile { inner: file, syncs: self.syncs.clone() })
    }
}

struct CountingFile {
    inner: Arc<dyn StorageFile>,
    syncs: Arc<AtomicU64>,
}

impl StorageFile for CountingFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.inner.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
}

impl FileSystem for CountingFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.create(path)?))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.open_rw(path)?))
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.open_read(path)?))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}
