//! File I/O behind a small trait, so tests can inject crashes, short writes and ENOSPC.
//!
//! Every WAL, segment, catalog and databases file the engine reads or writes goes through a
//! [`FileSystem`], and so does the statvfs of the disk usage ([`FileSystem::space`]). Outside this
//! module the engine's code uses `std::fs` in two places only (tests aside), both in the `engine`
//! module: the data directory's `LOCK` file is opened with `std::fs::OpenOptions`
//! (`engine/recovery.rs`), because `flock` needs the raw descriptor that a [`StorageFile`] does
//! not expose (and a lock is no data to inject faults into); and `own_bytes`
//! (`engine/admission.rs`) sums the WAL files' sizes with `std::fs::read_dir`, a best-effort
//! figure for the usage `U` (0 when the directory cannot be read). So an engine over [`CrashFs`]
//! needs its data directory in the real file system too (for the lock), and counts no WAL bytes
//! in `U`. The server's completed-transaction log (`sensordb-server`, `native/txlog.rs`) is
//! outside the engine and uses `std::fs` itself.
//!
//! [`RealFs`] is the production implementation; [`FaultyFs`] wraps another file system and fails
//! writes on command (disk full after N bytes, short writes, failed fsync), and can report a
//! chosen statvfs (a disk filled by another process); [`CrashFs`] (in `crash`) keeps files in
//! memory and knows which writes a power loss would keep, for crash tests.
//! Reads and writes are positional (`pread`/`pwrite`), so a file handle can be shared between a
//! writer and concurrent readers without a seek position.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod crash;
pub use crash::{CrashFs, CrashMode};

/// One open file. All offsets are absolute.
#[allow(clippy::len_without_is_empty)] // a file's length is a size, not a collection's
pub trait StorageFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns 0 at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes up to `buf.len()` bytes at `offset`; may write fewer.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Makes written data durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Tells the kernel the whole file will be read soon (`POSIX_FADV_WILLNEED`): it starts
    /// reading it into the page cache in large requests. For reads that jump between several
    /// interleaved streams in one file, which defeat readahead. A hint: errors are ignored.
    fn will_need(&self) {}

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with `UnexpectedEof`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read")),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes all of `buf` at `offset`, retrying short writes.
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes `parts` back to back starting at `offset`, as one request where the file allows
    /// (for direct I/O one request lets the device stream instead of waiting per part).
    fn write_all_vectored_at(&self, parts: &[&[u8]], mut offset: u64) -> io::Result<()> {
        for part in parts {
            self.write_all_at(part, offset)?;
            offset += part.len() as u64;
        }
        Ok(())
    }

    /// Reads the whole file.
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.len()?).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large"))?;
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
}

/// The directory-level operations the engine needs.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates a new file for reading and writing; fails if it exists.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Like [`FileSystem::create`], for large sequential appends: where the platform allows,
    /// writes of whole 4 KiB pages from 4 KiB-aligned memory bypass the page cache (O_DIRECT),
    /// so appending costs no memory copy in the kernel. Other writes and all reads behave as
    /// usual.
    fn create_for_appends(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.create(path)
    }
    /// Opens an existing file for reading and writing.
    fn open_rw(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Opens an existing file read-only.
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// The entries of `dir` (full paths), sorted by name.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Size and free space of the file system holding `dir` (statvfs).
    fn space(&self, dir: &Path) -> io::Result<DiskSpace> {
        statvfs_space(dir)
    }
}

/// Creates `dir` and its missing parents; with `sync`, also makes each new directory's entry
/// durable (a `sync_dir` of its parent). Without that, a power loss can take a new directory
/// away with every file synced inside it: `sync_dir(dir)` makes `dir`'s entries durable, not
/// `dir`'s own entry in its parent.
pub fn create_dir_all_durably(fs: &dyn FileSystem, dir: &Path, sync: bool) -> io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !fs.exists(d)).collect();
    fs.create_dir_all(dir)?;
    if sync {
        // Outermost first: the parent of each is durable by the time it is synced.
        for new in missing.into_iter().rev() {
            match new.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => fs.sync_dir(parent)?,
                _ => fs.sync_dir(Path::new("."))?,
            }
        }
    }
    Ok(())
}

/// Size of a file system and how much of it is in use, as `df` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSpace {
    pub total_bytes: u64,
    /// Bytes an unprivileged writer can still use.
    pub available_bytes: u64,
}

impl DiskSpace {
    /// The used share `U` in [0, 1]: what `df` calls Use%, counting the root-reserved blocks as
    /// unavailable.
    pub fn used_share(&self) -> f64 {
        if self.total_bytes == 0 {
            return 1.0;
        }
        (1.0 - self.available_bytes as f64 / self.total_bytes as f64).clamp(0.0, 1.0)
    }
}

fn statvfs_space(dir: &Path) -> io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid NUL-terminated string and `stats` a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let fragment = stats.f_frsize as u64;
    // Blocks reserved for root (f_bfree − f_bavail) count as used, as in `df`.
    let total = (stats.f_blocks as u64).saturating_sub(stats.f_bfree as u64 - (stats.f_bavail as u64).min(stats.f_bfree as u64)) * fragment;
    Ok(DiskSpace { total_bytes: total, available_bytes: stats.f_bavail as u64 * fragment })
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(std::fs::File);

impl StorageFile for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::write_at(&self.0, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn will_need(&self) {
        will_need(&self.0);
    }
}

/// `POSIX_FADV_WILLNEED` over all of `file`.
fn will_need(file: &std::fs::File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a valid descriptor; the call reads no memory of ours.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED);
    }
}

/// Direct I/O needs page-aligned memory, offsets and lengths.
pub const DIRECT_IO_ALIGNMENT: usize = 4096;

/// A file with a second descriptor opened with O_DIRECT: page-aligned writes go through it,
/// everything else through the ordinary one.
struct AppendFile {
    buffered: std::fs::File,
    direct: std::fs::File,
}

impl AppendFile {
    fn is_aligned(buf: &[u8], offset: u64) -> bool {
        (buf.as_ptr() as usize).is_multiple_of(DIRECT_IO_ALIGNMENT)
            && buf.len().is_multiple_of(DIRECT_IO_ALIGNMENT)
            && offset.is_multiple_of(DIRECT_IO_ALIGNMENT as u64)
    }
}

impl StorageFile for AppendFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.buffered, buf, offset)
    }
    fn will_need(&self) {
        will_need(&self.buffered);
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if Self::is_aligned(buf, offset) {
            std::os::unix::fs::FileExt::write_at(&self.direct, buf, offset)
        } else {
            std::os::unix::fs::FileExt::write_at(&self.buffered, buf, offset)
        }
    }
    fn sync_data(&self) -> io::Result<()> {
        // One inode: syncing either descriptor covers writes made through both.
        self.buffered.sync_data()
    }
    fn write_all_vectored_at(&self, parts: &[&[u8]], offset: u64) -> io::Result<()> {
        use std::os::unix::io::AsRawFd;
        let aligned = parts.iter().all(|p| Self::is_aligned(p, 0)) && offset.is_multiple_of(DIRECT_IO_ALIGNMENT as u64);
        let total: usize = parts.iter().map(|p| p.len()).sum();
        // IOV_MAX is 1024 on Linux; longer lists take the part-by-part path.
        if aligned && !parts.is_empty() && parts.len() <= 1024 {
            let iovecs: Vec<libc::iovec> =
                parts.iter().map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() }).collect();
            let Ok(file_offset) = libc::off_t::try_from(offset) else {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"));
            };
            // SAFETY: the iovecs point into `parts`, which outlive the call; the descriptor is ours.
            let written = unsafe { libc::pwritev(self.direct.as_raw_fd(), iovecs.as_ptr(), iovecs.len() as libc::c_int, file_offset) };
            if written < 0 {
                return Err(io::Error::last_os_error());
            }
            if written as usize == total {
                return Ok(());
            }
            // A short write: finish the rest part by part (rare; direct I/O writes whole pages).
            let mut done = written as usize;
            let mut at = offset;
            for part in parts {
                let skip = done.min(part.len());
                done -= skip;
                if skip < part.len() {
                    self.write_all_at(&part[skip..], at + skip as u64)?;
                }
                at += part.len() as u64;
            }
            return Ok(());
        }
        let mut at = offset;
        for part in parts {
            self.write_all_at(part, at)?;
            at += part.len() as u64;
        }
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.buffered.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.buffered.set_len(len)
    }
}

impl FileSystem for RealFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        Ok(Arc::new(RealFile(file)))
    }
    fn create_for_appends(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let buffered = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        // File systems without direct I/O (tmpfs) refuse O_DIRECT: then plain writes it is.
        match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path) {
            Ok(direct) => Ok(Arc::new(AppendFile { buffered, direct })),
            Err(_) => Ok(Arc::new(RealFile(buffered))),
        }
    }
    fn open_rw(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(RealFile(file)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(RealFile(std::fs::File::open(path)?)))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut entries = std::fs::read_dir(dir)?.map(|entry| entry.map(|e| e.path())).collect::<io::Result<Vec<_>>>()?;
        entries.sort();
        Ok(entries)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
}

/// A reusable buffer whose contents start on a [`DIRECT_IO_ALIGNMENT`] boundary, for writes
/// through [`FileSystem::create_for_appends`] files.
#[derive(Default)]
pub struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuffer {
    /// Replaces the contents with a copy of `bytes`.
    #[cfg(test)]
    pub fn fill_from(&mut self, bytes: &[u8]) {
        let needed = bytes.len() + DIRECT_IO_ALIGNMENT;
        if self.storage.len() < needed {
            self.storage = vec![0u8; needed];
        }
        let address = self.storage.as_ptr() as usize;
        self.start = address.next_multiple_of(DIRECT_IO_ALIGNMENT) - address;
        self.storage[self.start..self.start + bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    /// Takes `storage` as it is: its `len` bytes from `start` must sit on a
    /// [`DIRECT_IO_ALIGNMENT`] boundary (so a buffer encoded in place needs no copy).
    pub fn from_aligned_vec(storage: Vec<u8>, start: usize, len: usize) -> Self {
        assert!(start + len <= storage.len(), "BUG: aligned contents past the buffer");
        assert!((storage.as_ptr() as usize + start).is_multiple_of(DIRECT_IO_ALIGNMENT), "BUG: contents not aligned");
        AlignedBuffer { storage, start, len }
    }

    /// Replaces the contents with `len` zero bytes and returns them for filling in.
    pub fn zeroed(&mut self, len: usize) -> &mut [u8] {
        let needed = len + DIRECT_IO_ALIGNMENT;
        if self.storage.len() < needed {
            self.storage = vec![0u8; needed];
        }
        let address = self.storage.as_ptr() as usize;
        self.start = address.next_multiple_of(DIRECT_IO_ALIGNMENT) - address;
        self.len = len;
        let contents = &mut self.storage[self.start..self.start + len];
        contents.fill(0);
        contents
    }
}

/// What [`FaultyFs`] does to writes.
#[derive(Debug, Default)]
struct Faults {
    /// Bytes that may still be written before every write fails with ENOSPC (`u64::MAX`: no limit).
    space_left_bytes: AtomicU64,
    /// When set, each write stores at most half its bytes (at least one).
    short_writes: AtomicBool,
    /// When set, every fsync fails with EIO.
    fail_sync: AtomicBool,
    /// When set, renames and removals fail with EIO (a crash between steps of a compaction).
    fail_renames: AtomicBool,
    fail_removes: AtomicBool,
    /// When set, creating files fails with EMFILE (too many open files).
    fail_creates: AtomicBool,
    /// When set, every write panics (a bug in code under the caller, say).
    panic_writes: AtomicBool,
    /// File syncs (`sync_data`) that succeeded: what a write path costs in fdatasyncs.
    data_syncs: AtomicU64,
    /// When set, [`FileSystem::space`] reports this instead of the real file system's figures
    /// (a disk filled by another process, say).
    reported_space: std::sync::Mutex<Option<DiskSpace>>,
}

/// A file system that injects faults into another one; for tests.
#[derive(Clone)]
pub struct FaultyFs {
    inner: Arc<dyn FileSystem>,
    faults: Arc<Faults>,
}

impl FaultyFs {
    pub fn new(inner: Arc<dyn FileSystem>) -> Self {
        let faults = Faults { space_left_bytes: AtomicU64::new(u64::MAX), ..Faults::default() };
        FaultyFs { inner, faults: Arc::new(faults) }
    }
    /// After `bytes` more bytes, every write fails with ENOSPC (`None`: unlimited again).
    pub fn set_space_left(&self, bytes: Option<u64>) {
        self.faults.space_left_bytes.store(bytes.unwrap_or(u64::MAX), Ordering::SeqCst);
    }
    pub fn set_short_writes(&self, on: bool) {
        self.faults.short_writes.store(on, Ordering::SeqCst);
    }
    pub fn set_fail_sync(&self, on: bool) {
        self.faults.fail_sync.store(on, Ordering::SeqCst);
    }
    pub fn set_fail_creates(&self, on: bool) {
        self.faults.fail_creates.store(on, Ordering::SeqCst);
    }
    pub fn set_fail_renames(&self, on: bool) {
        self.faults.fail_renames.store(on, Ordering::SeqCst);
    }
    pub fn set_fail_removes(&self, on: bool) {
        self.faults.fail_removes.store(on, Ordering::SeqCst);
    }
    pub fn set_panic_writes(&self, on: bool) {
        self.faults.panic_writes.store(on, Ordering::SeqCst);
    }
    /// Makes [`FileSystem::space`] report `space` (`None`: the real figures again).
    pub fn set_reported_space(&self, space: Option<DiskSpace>) {
        *self.faults.reported_space.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = space;
    }
    /// Successful `sync_data` calls on files opened through this file system so far.
    pub fn data_syncs(&self) -> u64 {
        self.faults.data_syncs.load(Ordering::SeqCst)
    }
    fn wrap(&self, file: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(FaultyFile { inner: file, faults: self.faults.clone() })
    }
}

struct FaultyFile {
    inner: Arc<dyn StorageFile>,
    faults: Arc<Faults>,
}

/// The error a full disk gives.
pub fn no_space_error() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

/// True when `error` says the disk is full.
pub fn is_no_space(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOSPC) || error.kind() == io::ErrorKind::StorageFull
}

impl StorageFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn will_need(&self) {
        self.inner.will_need();
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        assert!(!self.faults.panic_writes.load(Ordering::SeqCst), "injected panic in a write");
        let mut len = buf.len();
        if self.faults.short_writes.load(Ordering::SeqCst) && len > 1 {
            len /= 2;
        }
        let left = self.faults.space_left_bytes.load(Ordering::SeqCst);
        if left != u64::MAX {
            if left == 0 {
                return Err(no_space_error());
            }
            len = len.min(usize::try_from(left).unwrap_or(usize::MAX));
            self.faults.space_left_bytes.fetch_sub(len as u64, Ordering::SeqCst);
        }
        self.inner.write_at(&buf[..len], offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        if self.faults.fail_sync.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.sync_data()?;
        self.faults.data_syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
}

impl FaultyFs {
    fn check_create(&self) -> io::Result<()> {
        if self.faults.fail_creates.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        Ok(())
    }
}

impl FileSystem for FaultyFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.check_create()?;
        Ok(self.wrap(self.inner.create(path)?))
    }
    fn create_for_appends(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.check_create()?;
        Ok(self.wrap(self.inner.create_for_appends(path)?))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.open_rw(path)?))
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.open_read(path)?))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        if self.faults.fail_removes.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected remove failure"));
        }
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.faults.fail_renames.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected rename failure"));
        }
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
        if self.faults.fail_sync.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.sync_dir(dir)
    }
    fn space(&self, dir: &Path) -> io::Result<DiskSpace> {
        if let Some(space) = *self.faults.reported_space.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            return Ok(space);
        }
        self.inner.space(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faulty_fs_runs_out_of_space_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultyFs::new(Arc::new(RealFs));
        let file = fs.create(&dir.path().join("f")).expect("create");
        fs.set_space_left(Some(10));
        file.write_all_at(&[1u8; 8], 0).expect("fits");
        let err = file.write_all_at(&[2u8; 8], 8).expect_err("disk full");
        assert!(is_no_space(&err), "{err}");
        assert_eq!(file.len().expect("len"), 10, "the two bytes that fitted were written");
        fs.set_space_left(None);
        file.write_all_at(&[3u8; 4], 10).expect("space again");
        assert_eq!(file.read_all().expect("read").len(), 14);
    }

    #[test]
    fn short_writes_are_completed_by_write_all() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultyFs::new(Arc::new(RealFs));
        fs.set_short_writes(true);
        let file = fs.create(&dir.path().join("f")).expect("create");
        assert_eq!(file.write_at(&[7u8; 10], 0).expect("write"), 5);
        file.write_all_at(&[9u8; 100], 0).expect("write all");
        assert_eq!(file.read_all().expect("read"), vec![9u8; 100]);
    }

    #[test]
    fn append_files_take_aligned_and_unaligned_writes_alike() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = RealFs.create_for_appends(&dir.path().join("f")).expect("create");
        let mut buffer = AlignedBuffer::default();
        buffer.fill_from(&[7u8; 8192]);
        file.write_all_at(buffer.as_slice(), 0).expect("aligned write");
        file.write_all_at(&[9u8; 10], 8192).expect("unaligned write");
        let all = file.read_all().expect("read");
        assert_eq!(all.len(), 8202);
        assert!(all[..8192].iter().all(|&b| b == 7) && all[8192..].iter().all(|&b| b == 9));
        let mut second = AlignedBuffer::default();
        second.fill_from(&[5u8; 4096]);
        file.write_all_vectored_at(&[buffer.as_slice(), second.as_slice()], 16384).expect("vectored write");
        let all = file.read_all().expect("read");
        assert_eq!(all.len(), 16384 + 12288);
        assert!(all[16384..24576].iter().all(|&b| b == 7) && all[24576..].iter().all(|&b| b == 5));
    }

    #[test]
    fn failed_sync_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultyFs::new(Arc::new(RealFs));
        let file = fs.create(&dir.path().join("f")).expect("create");
        fs.set_fail_sync(true);
        assert!(file.sync_data().is_err());
    }
}
