//! The write-ahead log: segmented files of length-prefixed, CRC32C-checked records with group
//! commit.
//!
//! # What it owns
//! The directory of log files `<dir>/<20-digit id>.wal`, ids ascending. Each file is a header
//! (magic, version, file id, checksum) followed by records `[len u32][crc u32][payload]`; the
//! payloads are opaque bytes to the log (the engine encodes batches of points into them). The
//! byte layout is in [`format`](mod@format) and `docs/format/wal.md`.
//!
//! - [`format`](mod@format): encoding and decoding of headers and records, no I/O.
//! - `recovery`: replay at open, and the rules for torn and corrupt files.
//! - `commit`: group commit, backpressure, failure handling (poison, recoverable ENOSPC).
//! - `log_file`: the file being appended to, and creating new ones.
//!
//! # Invariants
//! - Records are replayed in append order: files by id, records by offset. Files are never
//!   appended to after recovery, and never rewritten except to cut off a damaged tail at open or
//!   a failed group after ENOSPC.
//! - `append` returns a [`WalPosition`]; `wait_durable` returns `Ok` only once the record is
//!   durable under the configured mode. Once the log is poisoned (failed write or fsync), no
//!   record that was not durable already is ever reported durable. `NoSpace` is the one
//!   recoverable failure: only the records of the failed group are lost (see `commit`).
//! - `rotate` returns an id such that every record appended before the call lies in a file
//!   with a smaller id: `remove_files_before(id)` then drops exactly those records.
//! - Opened on a full disk, the log has no file to append to (`LogFile::missing`): it opens
//!   all the same (so the store serves reads), and its first group or rotation creates the
//!   file, failing with `NoSpace` until there is room.
//!
//! # Crash analysis
//! - [`Durability::Fsync`]: a record for which `wait_durable` returned `Ok` survives power
//!   loss: its group was synced with `sync_data`, and its file's header and directory entry were
//!   synced when the file was created.
//! - [`Durability::Os`]: such a record survives a crash of the process (it is in the kernel's
//!   page cache), not a power loss or kernel crash.
//! - [`Durability::None`]: the engine keeps no log in this mode. A log opened with it anyway
//!   behaves exactly like `Os` (written to the OS at group commit, never synced), which is the
//!   cheapest behaviour that still keeps `wait_durable`'s meaning ("the log has it").
//! - Whatever the mode, a crash can leave a torn last group; recovery cuts it off, reports it,
//!   and replays everything before it. None of its records had been acknowledged.

mod commit;
pub mod format;
mod log_file;
mod recovery;
pub(crate) use recovery::list_files;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What an acknowledged write survives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Memory only: nothing is logged; a crash loses everything not yet flushed to a segment.
    /// (A [`Wal`] opened with `None` anyway behaves like `Os`.)
    None,
    /// Written to the operating system before the acknowledgement: survives a process crash,
    /// not a power loss.
    Os,
    /// Group-committed fdatasync before the acknowledgement: survives power loss.
    #[default]
    Fsync,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "none" => Ok(Durability::None),
            "os" => Ok(Durability::Os),
            "fsync" => Ok(Durability::Fsync),
            other => Err(format!("unknown durability {other:?}: expected none, os or fsync")),
        }
    }
}

/// Tuning of the log.
#[derive(Clone, Debug)]
pub struct WalOptions {
    /// `Os` or `Fsync`; the engine keeps no log at all under `None`.
    pub durability: Durability,
    /// A file is rotated once it grows past this size.
    pub file_bytes_max: u64,
    /// Largest single record accepted.
    pub record_bytes_max: usize,
    /// Appended bytes not yet written to the OS; `append` waits while more are pending.
    pub pending_bytes_max: usize,
    /// Where recovery sets aside files with a damaged header and keeps the bytes it cuts off a
    /// damaged tail (see `recovery`). Without one, such files are skipped where they lie and
    /// cut tails are dropped.
    pub quarantine: Option<crate::quarantine::Quarantine>,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            durability: Durability::Fsync,
            file_bytes_max: 64 << 20,
            record_bytes_max: 64 << 20,
            pending_bytes_max: 16 << 20,
            quarantine: None,
        }
    }
}

/// A position in the log: the sequence number of one appended record.
///
/// Sequences start at 1 for each opened [`Wal`] and grow by one per record in append order, so
/// positions of one log compare like the records they name. A position is only meaningful to
/// the `Wal` that handed it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WalPosition {
    pub sequence: u64,
}

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalRecovery {
    /// Records replayed.
    pub records: u64,
    /// Payload bytes replayed (framing not counted).
    pub bytes: u64,
    /// A torn or corrupt tail that was cut off: (file, offset, reason). Also damage in older
    /// files, whose rest was skipped, and bad headers (offset 0). See `recovery` for the rules.
    pub truncated: Vec<(PathBuf, u64, String)>,
    /// The new file appends go to; every replayed record lies in a file with a smaller id.
    pub active_file_id: u64,
}

/// The log.
pub struct Wal {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    options: WalOptions,
    /// True under `Fsync`: sync every group, new files and the directory.
    sync: bool,
    state: Mutex<commit::State>,
    /// Signalled when a leader takes the pending buffer or publishes a group's outcome.
    changed: Condvar,
    /// The file being appended to; locked only by the group-commit leader.
    active: Mutex<log_file::LogFile>,
}

impl Wal {
    /// Opens (creating if needed) the log in `dir` and feeds every intact record, oldest first,
    /// to `replay`.
    ///
    /// Damaged files are repaired or skipped as `recovery` describes and listed in
    /// [`WalRecovery::truncated`]. New appends go to a new file. Fails with
    /// [`Error::UnsupportedVersion`] (before replaying anything) if a file has a version this
    /// build cannot read under an intact header checksum (a newer build's file; an unknown
    /// version under a bad checksum is damage), and with the callback's error if `replay` fails.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        options: WalOptions,
        replay: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<(Wal, WalRecovery)> {
        let sync = options.durability == Durability::Fsync;
        let existed = fs.exists(dir);
        fs.create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        if !existed && sync {
            let parent = match dir.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            fs.sync_dir(parent).map_err(|e| Error::io(parent, e))?;
        }
        let (mut recovery, last_file_id) = recovery::recover(&*fs, dir, options.quarantine.as_ref(), replay)?;
        let file_id = last_file_id.checked_add(1).ok_or_else(|| Error::corruption(dir, 0, "log file ids exhausted"))?;
        let active = match log_file::create(&*fs, dir, file_id, sync) {
            Ok(active) => active,
            // A full disk: open without a file, so the store still serves reads; appends fail
            // with `NoSpace` until the first group finds room for the new file.
            Err(failure) if failure.clean && failure.error.is_no_space() => {
                tracing::warn!(error = %failure.error, "disk full: the write-ahead log opens without a new file; writes wait for space");
                log_file::LogFile::missing(dir, last_file_id)
            }
            Err(failure) => return Err(failure.error),
        };
        recovery.active_file_id = active.id;
        let wal = Wal {
            fs,
            dir: dir.to_path_buf(),
            options,
            sync,
            state: Mutex::new(commit::State::new(active.id)),
            changed: Condvar::new(),
            active: Mutex::new(active),
        };
        Ok((wal, recovery))
    }

    /// Queues `record`; cheap: copies into the group-commit buffer.
    ///
    /// Waits while the buffer holds more than `pending_bytes_max` bytes (flushing it itself if
    /// no other thread is). Fails with [`Error::RecordTooLarge`] above `record_bytes_max`, and
    /// with [`Error::Poisoned`] once the log has stopped.
    pub fn append(&self, record: &[u8]) -> Result<WalPosition> {
        self.append_record(record)
    }

    /// Returns once everything up to `position` is durable under the configured mode.
    ///
    /// `Err(NoSpace)`: the record's group did not fit on the disk and is not in the log; the log
    /// stays usable. `Err(Poisoned)`: the log stopped before the record was durable. A record
    /// that was durable before the log stopped still reports `Ok`.
    ///
    /// # Panics
    /// If `position` was not handed out by this log's [`Wal::append`].
    pub fn wait_durable(&self, position: WalPosition) -> Result<()> {
        self.wait_settled(position)
    }

    /// Starts a new file and returns its id: every record appended before lies in older files.
    ///
    /// Pending records are first written (and synced, under `Fsync`) to the current file; if
    /// that fails, no new file is started and the error is returned.
    pub fn rotate(&self) -> Result<u64> {
        self.rotate_after_pending()
    }

    /// Deletes every file older than `file_id`, then syncs the directory. Never deletes the
    /// file being appended to, even if `file_id` is larger.
    pub fn remove_files_before(&self, file_id: u64) -> Result<()> {
        let limit = file_id.min(self.state.lock().active_file_id);
        let mut removed = false;
        for (id, path) in recovery::list_files(&*self.fs, &self.dir)? {
            if id >= limit {
                break;
            }
            match self.fs.remove(&path) {
                Ok(()) => removed = true,
                // Someone else removed it first: the goal is reached.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        if removed {
            self.fs.sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        }
        Ok(())
    }

    /// The id of the file new records are appended to.
    pub fn active_file_id(&self) -> u64 {
        self.state.lock().active_file_id
    }

    /// The directory of the log files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Wal {
    /// Writes records that were appended but never waited for, best effort: they were not
    /// acknowledged, so losing them is allowed, but keeping them is kinder.
    fn drop(&mut self) {
        let mut state = self.state.lock();
        if state.has_pending() && !state.is_poisoned() {
            if let Err(error) = self.lead(&mut state, false) {
                tracing::warn!(%error, "write-ahead log: pending records lost at close");
            }
        }
    }
}
