//! The file the log currently appends to, and the creation of new log files.
//!
//! Invariant: a file is handed to the writer only after its header is written (and, under
//! `Fsync`, synced together with its directory entry), so a record acknowledged in a file never
//! depends on a header or a directory entry that a power loss could still take away.

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
}

impl LogFile {
    /// True when the file holds no record yet.
    pub fn is_empty(&self) -> bool {
        self.end_offset == HEADER_LEN as u64
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
pub(crate) fn create(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    sync: bool,
) -> Result<LogFile, CreateFailure> {
    let path = numbered_file(dir, id, WAL_EXTENSION);
    let file =
        fs.create(&path).map_err(|e| CreateFailure { error: Error::io(&path, e), clean: true })?;
    let header =
        format::encode_header(&FileHeader { version: FormatVersion::CURRENT, file_id: id });
    if let Err(e) = file.write_all_at(&header, 0) {
        // Nothing in the file was ever acknowledged, so removing it restores the old state.
        let clean = fs.remove(&path).is_ok();
        return Err(CreateFailure { error: Error::io(&path, e), clean });
    }
    if sync {
        file.sync_data().map_err(|e| CreateFailure { error: Error::io(&path, e), clean: false })?;
        fs.sync_dir(dir).map_err(|e| CreateFailure { error: Error::io(dir, e), clean: false })?;
    }
    Ok(LogFile { id, path, file, end_offset: HEADER_LEN as u64 })
}
