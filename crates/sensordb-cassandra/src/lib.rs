//! sensordb's block store on Apache Cassandra (or ScyllaDB, which speaks the same protocol):
//! [`CassandraStore`] implements the engine's
//! [`BlockStore`](sensordb_engine::store::BlockStore), so an engine opened with
//! `Engine::open_with_store` keeps its sealed blocks in a keyspace instead of segment files
//! (issue 15; the Riak study's collector nodes writing full blocks into a distributed store).
//! The WAL, memtables and catalog stay local to each process; with a `node_id`, several
//! processes share the keyspace and each reads the others' flushed blocks (`cluster`).
//!
//! # Layout
//! - `options`: where the cluster is and the sizes that shape rows and partitions.
//! - `schema`: the tables, the prepared CQL, the time buckets.
//! - `client`: the async driver behind synchronous calls (a runtime owned by the store) and
//!   the bound on requests in flight.
//! - `segment`: a segment's rows: placing a flush group, reading and verifying a block.
//! - `store`: the `BlockStore` implementation, loading at open, removal and its sweep.
//! - `rewrite`: a compaction or merge output, installed in one batch.
//! - `ttl`: how long a block row lives (`USING TTL` from its series' storage period).
//! - `cluster`: many sensordb nodes on one keyspace: node-scoped ids, published series, and
//!   reading the other nodes' flushed blocks.
//! - `databases`: database definitions shared by those nodes.
//! - `wal`: acknowledged writes and completed transaction ids kept in Cassandra
//!   (`ack_writes`), and the adoption of a dead node's unflushed writes.
//! - `peers`: the live nodes' advertised native addresses, for clients (the PEERS frame).
//!
//! # Data model
//! One row per sealed block, partitioned by `(series, time bucket)` with the block start as
//! clustering key (then segment and position, unique per block); the block's bytes are exactly
//! those of a segment file, checksum included, and a block of a row carries a copy of the
//! shared timestamp record it refers to. A flush group is committed by a row in `groups`
//! written after its block rows; the `groups` rows of a segment are its footer, from which the
//! in-memory index is rebuilt at open. Sequences, segments, rewrites and pins behave as the
//! trait's documentation asks (see `store`).
//!
//! Partitions are keyed by series, not by (database, series): a series id belongs to exactly one
//! database (its catalog key includes it), so the database would add nothing to placement or
//! spread; per-database retention is a per-row TTL set at write.
//!
//! # Partition sizing
//! Cassandra warns about partitions over 100 MiB (`compaction_large_partition_warning_threshold`;
//! in 5.0 the `partition_size_warn_threshold` guardrail) and wants them well under that: reads
//! and compactions of a wide partition are slow, repairs stream it whole. A partition holds one
//! series over one bucket: about `rate × bytes per point × bucket`.
//! - Numbers and booleans: 1-day buckets. A 1 Hz series is 86 400 points, about 0.2-1 MiB a day
//!   compressed (2-10 bytes per point with its timestamps); 10 Hz stays under ~10 MiB. KairosDB
//!   uses 3-week rows for the same reason at a smaller per-point cost; its users met hot, wide
//!   rows with fast series, hence one day here.
//! - Payloads: 1-minute buckets: a 64 KiB frame each second is 3.75 MiB a minute. Faster
//!   payload series need a shorter `payload_bucket_ns`.
//! - One row is one block: at most `block_bytes_max` (4 MiB by default), under Cassandra's
//!   16 MiB mutation limit (half the 32 MiB commit log segment).
//!
//! Bucket sizes are stored in the keyspace when it is created and checked at every open: rows
//! are looked up where they were written.
//!
//! # Retention (issue 15 item 2)
//! The `blocks` table uses TimeWindowCompactionStrategy with 1-day windows: sensor data arrives
//! in time order, so each SSTable holds one day's writes and, once every row in it has expired by
//! TTL, Cassandra drops it whole without reading it: the paper's planing mode, done by Cassandra.
//! Block rows are written `USING TTL` = the storage period of their series (from the engine,
//! `BlockStore::set_series_directory`) past their newest point, plus a slack; removing a segment of
//! expired rows leaves them to Cassandra instead of deleting them (see `ttl` and `store`).
//! Rows still alive are deleted when their segment goes (compaction inputs, deleted series,
//! series without a period): those deletes are tombstones.
//!
//! # Crash consistency
//! Rows are written before the row that lists them, so a crash leaves at worst rows nothing
//! lists (a group that never committed); those are garbage until the TTL expires them. A failed
//! commit uses up its positions and its sequence, as it may have landed.

mod client;
mod cluster;
mod databases;
mod error;
mod options;
mod peers;
mod rewrite;
mod schema;
mod segment;
mod store;
mod ttl;
mod wal;

pub use cluster::{Refreshed, NODE_ID_MAX};
pub use databases::{DatabaseSync, DatabasesMerged};
pub use error::CassandraError;
pub use options::{consistency_from_name, CassandraOptions, Consistency};
pub use store::CassandraStore;
pub use wal::{Replayed, WalKeys, WalNode, WalRecord};
