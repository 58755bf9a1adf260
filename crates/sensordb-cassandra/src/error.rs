//! The crate's typed errors, and how they enter the engine's: a failed Cassandra request is an
//! I/O error of the store (retried by the engine like a failed disk write), never corruption.

use sensordb_engine::Error;
use std::path::PathBuf;

type Source = Box<dyn std::error::Error + Send + Sync>;

/// Errors of the Cassandra store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CassandraError {
    #[error("connecting to Cassandra at {contact_points}: {source}")]
    Connect { contact_points: String, source: Source },
    /// A request failed or timed out, or its answer did not have the expected shape.
    #[error("Cassandra request ({what}) failed: {source}")]
    Request { what: &'static str, source: Source },
    #[error("keyspace {keyspace:?} was made with {setting} = {stored}, this store was asked for {asked}")]
    SettingMismatch { keyspace: String, setting: &'static str, stored: i64, asked: i64 },
    /// A segment's rows in the keyspace do not make sense (the store does not open).
    #[error("damaged segment {segment} in keyspace {keyspace:?}: {detail}")]
    Damaged { keyspace: String, segment: i64, detail: String },
    #[error("BUG: a flush group handed to the store does not parse: {0}")]
    MalformedGroup(String),
    #[error("invalid Cassandra store options: {0}")]
    InvalidOptions(String),
    #[error("starting the store's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the store's runtime stopped before the request finished")]
    RuntimeStopped,
    /// Another live process heartbeats under this node id (two nodes must never share one:
    /// their segments, series and acknowledged writes would mix).
    #[error("node_id {node} is in use: another live sensordb process heartbeats under it in keyspace {keyspace:?} (last heartbeat {age_ms} ms ago); give this node another node_id, or stop the other")]
    NodeIdInUse { node: u16, keyspace: String, age_ms: i64 },
    /// The engine refused what another node asked of it (a database definition).
    #[error("the engine refused a shared change: {0}")]
    Engine(#[source] sensordb_engine::Error),
}

impl CassandraError {
    pub(crate) fn request(what: &'static str) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> CassandraError {
        move |source| CassandraError::Request { what, source }
    }

    /// The engine error for a failure on `keyspace`.
    pub(crate) fn into_engine(self, keyspace: &str) -> Error {
        Error::io(PathBuf::from(format!("cassandra:{keyspace}")), std::io::Error::other(self))
    }
}

/// Boxes a driver error for [`CassandraError::Request`].
pub(crate) fn boxed(error: impl std::error::Error + Send + Sync + 'static) -> Source {
    Box::new(error)
}
