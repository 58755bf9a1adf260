//! The engine's typed errors.
//!
//! Bad data from outside is an `Err`; a broken internal invariant is a panic whose message starts
//! with "BUG:". Corruption always names the file and the byte offset where it was found.

use crate::model::{SeriesKeyError, ValueKind};
use std::io;
use std::path::PathBuf;

/// Errors of the codecs: the bytes handed to a decoder do not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    #[error("column truncated: needed {needed} bytes, had {available}")]
    Truncated { needed: usize, available: usize },
    #[error("unknown column encoding tag {0}")]
    UnknownEncoding(u8),
    #[error("invalid column: {0}")]
    Invalid(String),
}

/// Errors of the storage engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("disk full writing {path}")]
    NoSpace { path: PathBuf },
    #[error("corruption in {path} at offset {offset}: {detail}")]
    Corruption { path: PathBuf, offset: u64, detail: String },
    #[error("{path} has format version {found}, this build reads version {supported}")]
    UnsupportedVersion { path: PathBuf, found: u16, supported: u16 },
    #[error("invalid series key: {0}")]
    InvalidSeriesKey(#[from] SeriesKeyError),
    #[error("series {key} holds {existing} values, cannot write a {attempted} value")]
    KindMismatch { key: String, existing: ValueKind, attempted: ValueKind },
    #[error("unknown series id {0}")]
    UnknownSeries(u32),
    #[error("payload of {len} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge { len: usize, limit: usize },
    #[error("record of {len} bytes exceeds the limit of {limit} bytes")]
    RecordTooLarge { len: usize, limit: usize },
    #[error("the engine stopped accepting writes after an earlier failure: {0}")]
    Poisoned(String),
    #[error("the engine is closed")]
    Closed,
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    #[error("series {0} was deleted")]
    SeriesDeleted(u32),
    #[error("unknown database {0:?}")]
    UnknownDatabase(String),
    /// A new series would take database `database` past its series limit.
    #[error("max-series-per-database limit exceeded: ({limit}) in database {database:?}")]
    SeriesLimit { database: String, limit: usize },
}

impl Error {
    /// Wraps an I/O error, turning ENOSPC into [`Error::NoSpace`].
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if crate::fs::is_no_space(&source) {
            Error::NoSpace { path }
        } else {
            Error::Io { path, source }
        }
    }

    pub fn corruption(path: impl Into<PathBuf>, offset: u64, detail: impl Into<String>) -> Self {
        Error::Corruption { path: path.into(), offset, detail: detail.into() }
    }

    /// True for errors that a retry after freeing disk space may cure.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// True when the engine cannot go on safely: a log that stopped after a failed fsync, or
    /// damaged data. Everything else (a full disk, a descriptor table that ran out, a file that
    /// could not be created) left the files as they were, and a retry may succeed.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Error::Poisoned(_) | Error::Corruption { .. } | Error::UnsupportedVersion { .. })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
