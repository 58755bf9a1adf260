//! sensordb's embedded storage engine.
//!
//! # Public API
//! A small facade; everything else is internal to the crate.
//!
//! - **Open:** [`Engine::open`], [`Engine::open_with_store`], [`EngineOptions`] (with
//!   [`Durability`], [`ReclaimOptions`], [`Clock`], and the [`FileSystem`] it does I/O through).
//! - **Write:** [`WriteBatch`] of points per [`SeriesId`], from [`Engine::series_id`].
//! - **Read:** [`Engine::read`] gives a [`RangeRead`] of [`Chunk`]s; series are found with
//!   [`Engine::find_series`], [`Engine::series`] and [`Engine::select_series`] ([`SeriesEntry`]).
//! - **Flush and close:** [`Engine::flush`], [`Engine::close`].
//! - **Statistics:** [`EngineStats`], [`RecoveryReport`], [`ReclaimStats`], [`StoreStats`].
//! - **Throttling:** [`Engine::admit`] (before a write), [`Engine::wait_for_space`] and
//!   [`Engine::acknowledgement_delay`] (after it) are the one throttle every writer goes
//!   through as the disk fills ([`Admission`]).
//! - **Databases:** [`Databases`], [`DatabasePolicy`], [`PeriodOverride`].
//! - **Administration:** [`Engine::delete_series`], [`Engine::compact`], [`Engine::reclaim`].
//! - **Model:** [`SeriesKey`], [`SeriesId`], [`Value`], [`ValueKind`], [`ValueColumn`],
//!   [`Timestamp`], [`Error`] and [`Result`].
//! - [`store`]: the [`store::BlockStore`] trait that hides where sealed blocks live, with the
//!   types a backend outside the crate needs to implement it.
//! - [`inspect`]: offline inspection of a data directory (`sensordb inspect`).
//! - [`quarantine`]: where start-up sets damaged files and cut bytes aside
//!   ([`Engine::quarantined_files`] lists them).
//!
//! A hidden `test_support` module gives the fuzz targets, benchmarks and integration tests the
//! few internals they drive directly; it is not API.
//!
//! # Layout
//! Data flows through these components, each a module (internal unless linked above):
//!
//! - `model`: series ids and stored points; series keys, values and columns re-exported from
//!   `sensordb-model`.
//! - `catalog`: the persisted map from series key to compact [`SeriesId`].
//! - `wal`: the write-ahead log, segmented files of checksummed records with group commit and
//!   three durability modes.
//! - `memtable`: per-series in-memory buffers; the active one takes writes while a frozen one
//!   is flushed (double buffering).
//! - `codec`: column compression for timestamps and values.
//! - `block`: one series over one time range, compressed, with header statistics and checksum.
//! - `segment`: append-only files of blocks, written in 4 KiB-aligned flush groups and sealed
//!   with a footer index.
//! - `index`: the in-memory map from series to its blocks, rebuilt at start-up from footers.
//! - [`store`]: where sealed blocks live (segment files, or memory, or another backend).
//! - `compaction`: rewrites segments of short blocks (frequent flushes) into long blocks.
//! - `reclaim`: bounded, cyclic storage: retention by period and capacity, removal of dead
//!   segments, Fisherman merge selection, throttling as the disk fills.
//! - `query`: range reads that merge memtables and blocks into one time-ordered stream.
//! - `engine`: ties them together: write, read, flush, recovery.
//! - `fs`: file I/O behind a trait so tests can inject faults.
//! - `retry`: backoff of failing background work and rate-limited log lines.
//!
//! A write goes catalog (series id) → WAL (durable per mode) → memtable. A flush freezes the
//! memtable, encodes one block per series into a flush group of the open segment, publishes the
//! blocks in the index and then trims the WAL.

mod batch;
mod block;
mod catalog;
mod checksum;
mod codec;
mod compaction;
mod engine;
mod error;
mod filenames;
mod flush;
mod fs;
mod index;
pub mod inspect;
mod mark;
mod memtable;
mod model;
pub mod quarantine;
mod query;
mod reclaim;
mod retry;
mod segment;
pub mod store;
#[doc(hidden)]
pub mod test_support;
mod wal;

// Open and configure.
pub use engine::{system_clock, Clock, Engine, EngineOptions, QueryStart};
pub use fs::{DiskSpace, FileSystem, RealFs, StorageFile};
pub use reclaim::ReclaimOptions;
pub use wal::Durability;
// Write.
pub use batch::{BatchKindError, SeriesPoints, WriteBatch};
pub use mark::{MarkSink, TxMark};
// Read.
pub use catalog::{SeriesCursor, SeriesEntry};
pub use memtable::SERIES_OVERHEAD_BYTES;
pub use query::{Chunk, ChunkView, Points, RangeRead};
// Statistics, recovery, maintenance.
pub use compaction::CompactionReport;
pub use engine::{EngineStats, RecoveryReport, LOST_SERIES_MAX, LOST_SERIES_MEASUREMENT, SEAL_IDLE_POINTS_MIN};
pub use reclaim::{ReclaimStats, Usage};
pub use store::{SeriesDirectory, StoreStats};
// Throttling as the disk fills.
pub use reclaim::throttle::Admission;
// Databases and retention.
pub use reclaim::policy::{DatabasePolicy, Databases, PeriodOverride};
// Model and errors.
pub use error::{CodecError, Error, Result};
pub use model::{
    timestamp_out_of_range, KeyText, Point, SeriesId, SeriesKey, SeriesKeyError, Timestamp, Value, ValueColumn, ValueKind,
    DEFAULT_DATABASE, TIMESTAMP_MAX, TIMESTAMP_MIN,
};
