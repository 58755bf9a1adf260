//! The file the log currently appends to, and the creation of new log files.
//!
//! Invariant: a file is handed to the writer only after its header is written (and, under
//! `Fsync`, synced together with its directory entry), so a record acknowledged in a file never
//! depends on a header or a directory entry that a power loss could still take away.
//!
//! Zeros ahead: under `Fsync` the writer keeps the file written with zeros up to
//! [`ZERO_AHEAD_BYTES`] past its last record (`zeroed_to`), extending it a step at a time. A
//! group then overwrites blocks that are already allocated and inside the file's size, so its
//! fdatasync writes only the data, not the inode and extent tree that an appending write must
//! change (ext4 without a journal writes them on every such sync: the first ~100 ms of a new
//! file saw fdatasyncs of 3-14 ms instead of ~0.3 ms; see docs/BENCHMARKS.md). Recovery already
//! treats a zero-filled tail as the clean end of a file (`format`: eight zero bytes are never a
//! record header).

use super::format::{self, FileHeader, FormatVersion, HEADER_LEN};
use crate::error::Error;
use crate::filenames::{numbered_file, WAL_EXTENSION};
use crate::fs::{FileSystem, StorageFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The open log file that group commits append to.
pub(crate) struct LogFile {
    /// Id in the file name and header; ids only grow.
    pub id: u64,
    pub path: PathBuf,
    pub file: Arc<dyn StorageFile>,
    /// Where the next group is written: just after the last record that reached the file.
    pub end_offset: u64,
    /// The file holds zeros from `end_offset` up to here (its size when beyond `end_offset`).
    pub zeroed_to: u64,
    /// True when no file could be created at open for lack of space ([`LogFile::missing`]):
    /// the next group starts file `id + 1` first.
    pub missing: bool,
}

/// How far ahead of its records a synced log file is kept written with zeros, and the step it
/// is extended by.
pub(crate) const ZERO_AHEAD_BYTES: u64 = 1 << 20;

/// Zeros to extend files with.
pub(crate) static ZEROS: [u8; ZERO_AHEAD_BYTES as usize] = [0; ZERO_AHEAD_BYTES as usize];

impl LogFile {
    /// True when the file holds no record yet.
    pub fn is_empty(&self) -> bool {
        self.end_offset == HEADER_LEN as u64
    }

    /// The stand-in for a log opened on a full disk, after file `last_id` (0: none): no file
    /// exists for it, and nothing is ever written through it (its writes fail with ENOSPC).
    /// The log opens, so the store serves reads; a group first creates file `last_id + 1`,
    /// and fails with `NoSpace` until there is room for it.
    pub fn missing(dir: &Path, last_id: u64) -> LogFile {
        LogFile {
            id: last_id,
            path: numbered_file(dir, last_id.saturating_add(1), WAL_EXTENSION),
            file: Arc::new(NoFile),
            end_offset: HEADER_LEN as u64,
            zeroed_to: HEADER_LEN as u64,
            missing: true,
        }
    }
}

/// The file of a [`LogFile::missing`]: empty, and full.
struct NoFile;

impl StorageFile for NoFile {
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> std::io::Result<usize> {
        Ok(0)
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> std::io::Result<usize> {
        Err(crate::fs::no_space_error())
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn len(&self) -> std::io::Result<u64> {
        Ok(0)
    }
    fn set_len(&self, _len: u64) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why creating a file failed, and whether it left the directory as it was.
pub(crate) struct CreateFailure {
    pub error: Error,
    /// True when nothing was left behind: the log may go on with its old file.
    pub clean: bool,
}

/// Creates log file `id` in `dir` and writes its header; with `sync`, makes the header and the
/// directory entry durable before returning.
pub(crate) fn create(fs: &dyn FileSystem, dir: &Path, id: u64, sync: bool) -> Result<LogFile, CreateFailure> {
    let path = numbered_file(dir, id, WAL_EXTENSION);
    let file = fs.create(&path).map_err(|e| CreateFailure { error: Error::io(&path, e), clean: true })?;
    let header = format::encode_header(&FileHeader { version: FormatVersion::CURRENT, file_id: id });
    if let Err(e) = file.write_all_at(&header, 0) {
        // Nothing in the file was ever acknowledged, so removing it restores the old state.
        let clean = fs.remove(&path).is_ok();
        return Err(CreateFailure { error: Error::io(&path, e), clean });
    }
    if sync {
        file.sync_data().map_err(|e| CreateFailure { error: Error::io(&path, e), clean: false })?;
        fs.sync_dir(dir).map_err(|e| CreateFailure { error: Error::io(dir, e), clean: false })?;
    }
    Ok(LogFile { id, path, file, end_offset: HEADER_LEN as u64, zeroed_to: HEADER_LEN as u64, missing: false })
}
