//! The write-ahead log: segmented files of length-prefixed, CRC32C-checked records with group
//! commit. (Interface placeholder; the implementation lands with the WAL work.)

use crate::error::Result;
use crate::fs::FileSystem;
use std::path::Path;
use std::sync::Arc;

/// What an acknowledged write survives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Memory only: nothing is logged; a crash loses everything not yet flushed to a segment.
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
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            durability: Durability::Fsync,
            file_bytes_max: 64 << 20,
            record_bytes_max: 64 << 20,
            pending_bytes_max: 16 << 20,
        }
    }
}

/// A position in the log: the record ends before `end` in file `file_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WalPosition {
    pub sequence: u64,
}

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalRecovery {
    pub records: u64,
    pub bytes: u64,
    /// A torn or corrupt tail that was cut off: (file, offset, reason).
    pub truncated: Vec<(std::path::PathBuf, u64, String)>,
}

/// The log.
pub struct Wal {
    _fs: Arc<dyn FileSystem>,
}

impl Wal {
    /// Opens (creating if needed) the log in `dir` and feeds every intact record, oldest first,
    /// to `replay`.
    pub fn open(
        _fs: Arc<dyn FileSystem>,
        _dir: &Path,
        _options: WalOptions,
        _replay: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<(Wal, WalRecovery)> {
        todo!("WAL implementation")
    }

    /// Queues `record`; cheap: copies into the group-commit buffer.
    pub fn append(&self, _record: &[u8]) -> Result<WalPosition> {
        todo!("WAL implementation")
    }

    /// Returns once everything up to `position` is durable under the configured mode.
    pub fn wait_durable(&self, _position: WalPosition) -> Result<()> {
        todo!("WAL implementation")
    }

    /// Starts a new file and returns its id: every record appended before lies in older files.
    pub fn rotate(&self) -> Result<u64> {
        todo!("WAL implementation")
    }

    /// Deletes every file older than `file_id`.
    pub fn remove_files_before(&self, _file_id: u64) -> Result<()> {
        todo!("WAL implementation")
    }
}
