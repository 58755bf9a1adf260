//! sensordb's embedded storage engine.
//!
//! # Layout
//! Data flows through these components, each a module:
//!
//! - [`model`]: series ids and stored points; series keys, values and columns re-exported from
//!   `sensordb-model`.
//! - [`catalog`]: the persisted map from series key to compact [`model::SeriesId`].
//! - [`wal`]: the write-ahead log, segmented files of checksummed records with group commit and
//!   three durability modes.
//! - [`memtable`]: per-series in-memory buffers; the active one takes writes while a frozen one
//!   is flushed (double buffering).
//! - [`codec`]: column compression for timestamps and values.
//! - [`block`]: one series over one time range, compressed, with header statistics and checksum.
//! - [`segment`]: append-only files of blocks, written in 4 KiB-aligned flush groups and sealed
//!   with a footer index.
//! - [`index`]: the in-memory map from series to its blocks, rebuilt at start-up from footers.
//! - [`store`]: the [`store::BlockStore`] trait that hides where sealed blocks live.
//! - [`compaction`]: rewrites segments of short blocks (frequent flushes) into long blocks.
//! - [`reclaim`]: bounded, cyclic storage: retention by period and capacity, removal of dead
//!   segments, Fisherman merge selection, throttling as the disk fills.
//! - [`query`]: range reads that merge memtables and blocks into one time-ordered stream.
//! - [`engine`]: ties them together: write, read, flush, recovery.
//! - [`fs`]: file I/O behind a trait so tests can inject faults.
//!
//! A write goes catalog (series id) → WAL (durable per mode) → memtable. A flush freezes the
//! memtable, encodes one block per series into a flush group of the open segment, publishes the
//! blocks in the index and then trims the WAL.

pub mod batch;
pub mod block;
pub mod catalog;
pub mod checksum;
pub mod codec;
pub mod compaction;
pub mod engine;
pub mod error;
pub mod filenames;
pub mod flush;
pub mod fs;
pub mod index;
pub mod inspect;
mod mark;
pub mod memtable;
pub mod model;
pub mod query;
pub mod reclaim;
pub mod segment;
pub mod store;
pub mod wal;

pub use engine::{Engine, EngineOptions};
pub use error::{Error, Result};
pub use mark::{MarkSink, TxMark};
pub use model::{Point, SeriesId, SeriesKey, Timestamp, Value, ValueColumn, ValueKind};
pub use wal::Durability;
