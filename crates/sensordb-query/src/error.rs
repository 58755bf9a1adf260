//! Why a query failed, in words a client can act on.

/// A query's error; the message is what `/query` puts in a result's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The statement cannot be run as written.
    #[error("{0}")]
    Invalid(String),
    /// A limit of the server was reached (points scanned, buckets, series).
    #[error("{0}")]
    Limit(String),
    /// The store failed to deliver points.
    #[error("{0}")]
    Storage(String),
}

impl QueryError {
    pub fn invalid(message: impl Into<String>) -> QueryError {
        QueryError::Invalid(message.into())
    }
}

impl From<crate::storage::StorageError> for QueryError {
    fn from(e: crate::storage::StorageError) -> QueryError {
        QueryError::Storage(e.0)
    }
}
