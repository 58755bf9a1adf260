//! sensordb's data model and the byte-level primitives its encodings are built from: the
//! foundation the storage engine (`sensordb-engine`) and the native protocol's wire format
//! (`sensordb-protocol`) share, so neither depends on the other.
//!
//! - [`series_key`]: the identity of a series (database, measurement, tags, field).
//! - [`value`]: timestamps, values, value kinds and value columns.
//! - [`varint`]: unsigned LEB128 varints.
//! - [`zigzag`]: the zigzag mapping of signed to unsigned integers.
//! - [`le_reader`]: a reader of fixed-width little-endian fields.

pub mod le_reader;
pub mod series_key;
pub mod value;
pub mod varint;
pub mod zigzag;

pub use series_key::{KeyText, SeriesKey, SeriesKeyError, DEFAULT_DATABASE};
pub use value::{timestamp_out_of_range, Timestamp, Value, ValueColumn, ValueKind, TIMESTAMP_MAX, TIMESTAMP_MIN};
