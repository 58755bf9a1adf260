//! The keyspace's tables, the CQL the store sends, and the time buckets that size partitions.
//!
//! ```text
//! blocks    PRIMARY KEY ((series, bucket), block_start, segment, position)
//!           block blob, shared_timestamps blob                  TWCS, 1-day windows
//! groups    PRIMARY KEY (segment, position)
//!           end_position, wal_checkpoint bigint, index_entries blob (the segment's "footer"),
//!           expiries blob (each block row's expiry, see `ttl`; unset when none has one)
//! segments  PRIMARY KEY (scope, id)   state tinyint, sealed boolean   one partition per node
//! settings  PRIMARY KEY (name)        value bigint               bucket sizes, fixed at creation
//! nodes     PRIMARY KEY (scope, id)                              the sensordb nodes sharing it
//! series    PRIMARY KEY ((node, bucket), id)   key text, kind tinyint   each node's series ids
//! databases PRIMARY KEY (name)        definition text            shared database definitions
//! wal, wal_nodes, transactions                                   acknowledged writes (see `wal`)
//! ```
//!
//! A block row's partition is its series and the time bucket of its first point; the block
//! start clusters it, and (segment, position) tell apart blocks of one series that start at
//! the same time (an overwrite, a rewrite). `shared_timestamps` holds the shared timestamp
//! record a block of a row refers to (absent for inline timestamps): copied into each block's
//! row so a read is one request. A group row commits a flush group: its block rows are written
//! first, so a crash in between leaves rows nothing lists (see the crate documentation).
//! `segments` keeps every segment of a node in one partition (`scope` = the node id, 0 for a
//! keyspace of one process) so that installing a rewrite (new segment live, replaced ones being
//! removed) is one atomic, isolated single-partition batch; `sealed` tells other nodes that a
//! segment takes no more groups. `series` maps a node's series ids to their keys
//! (`bucket` = id >> 16 bounds a partition to 65 536 series), so other nodes can read its blocks.
//!
//! Block rows are written `USING TTL` (0, no TTL, for series without a storage period; see
//! `ttl`).
//!
//! Absent values are bound as *unset*, never as null: a null written by an INSERT is a
//! tombstone.

use crate::error::{boxed, CassandraError};
use crate::CassandraOptions;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;
use sensordb_engine::store::IndexEntry;
use sensordb_engine::ValueKind;

/// Bucket sizes (ns) that decide a block row's partition. Stored in the keyspace when it is
/// created and read back at every open, so rows are always found where they were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Buckets {
    pub numbers_ns: i64,
    pub payloads_ns: i64,
}

impl Buckets {
    /// The partition bucket of a block: the bucket of its first point, by kind.
    pub fn of(&self, entry: &IndexEntry) -> i64 {
        let width = if entry.kind == ValueKind::Bytes { self.payloads_ns } else { self.numbers_ns };
        entry.min_timestamp.div_euclid(width)
    }
}

/// Segment states in the `segments` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegmentState {
    /// A rewrite's output, not installed: invisible; removed at the next open.
    Writing = 0,
    /// Listed and read.
    Live = 1,
    /// Removed from reads; its rows are being deleted.
    Removing = 2,
}

impl SegmentState {
    pub fn from_i8(value: i8) -> Option<SegmentState> {
        match value {
            0 => Some(SegmentState::Writing),
            1 => Some(SegmentState::Live),
            2 => Some(SegmentState::Removing),
            _ => None,
        }
    }
}

/// The one partition of the `nodes` table.
const NODES_SCOPE: i32 = 0;

/// The `series` partition of a series id.
pub(crate) fn series_bucket(id: u32) -> i32 {
    (id >> 16) as i32
}

/// Creates the keyspace and tables if missing (schema agreement is awaited by the driver).
pub(crate) async fn create(session: &Session, options: &CassandraOptions) -> Result<(), CassandraError> {
    let keyspace = &options.keyspace;
    let statements = [
        format!("CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {}", options.replication),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.blocks (series bigint, bucket bigint, block_start bigint, segment bigint, \
             position bigint, block blob, shared_timestamps blob, PRIMARY KEY ((series, bucket), block_start, segment, position)) \
             WITH compaction = {{'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'DAYS', \
             'compaction_window_size': 1}}"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.groups (segment bigint, position bigint, end_position bigint, \
             wal_checkpoint bigint, index_entries blob, expiries blob, PRIMARY KEY (segment, position))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.segments (scope int, id bigint, state tinyint, sealed boolean, PRIMARY KEY (scope, id))"
        ),
        format!("CREATE TABLE IF NOT EXISTS {keyspace}.settings (name text PRIMARY KEY, value bigint)"),
        format!("CREATE TABLE IF NOT EXISTS {keyspace}.nodes (scope int, id int, PRIMARY KEY (scope, id))"),
        format!("CREATE TABLE IF NOT EXISTS {keyspace}.databases (name text PRIMARY KEY, definition text)"),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.series (node int, bucket int, id bigint, key text, kind tinyint, \
             PRIMARY KEY ((node, bucket), id))"
        ),
    ];
    let peers = crate::peers::create_statement(keyspace);
    for statement in statements.into_iter().chain(crate::wal::create_statements(keyspace)).chain([peers]) {
        session.query_unpaged(statement, ()).await.map_err(|e| CassandraError::Request { what: "create schema", source: boxed(e) })?;
    }
    Ok(())
}

/// Stores the bucket sizes of `options` unless the keyspace has some, and returns the stored
/// ones; a mismatch with the options is an error (the rows would be looked for elsewhere).
pub(crate) async fn settle_buckets(session: &Session, options: &CassandraOptions) -> Result<Buckets, CassandraError> {
    let keyspace = &options.keyspace;
    let insert = format!("INSERT INTO {keyspace}.settings (name, value) VALUES (?, ?) IF NOT EXISTS");
    let select = format!("SELECT value FROM {keyspace}.settings WHERE name = ?");
    let mut stored = Vec::new();
    for (name, asked) in [("bucket_ns", options.bucket_ns), ("payload_bucket_ns", options.payload_bucket_ns)] {
        session
            .query_unpaged(insert.as_str(), (name, asked))
            .await
            .map_err(|e| CassandraError::Request { what: "store settings", source: boxed(e) })?;
        let rows = session
            .query_unpaged(select.as_str(), (name,))
            .await
            .map_err(boxed)
            .and_then(|r| r.into_rows_result().map_err(boxed))
            .and_then(|r| r.single_row::<(i64,)>().map_err(boxed))
            .map_err(CassandraError::request("read settings"))?;
        if rows.0 != asked {
            return Err(CassandraError::SettingMismatch { keyspace: keyspace.clone(), setting: name, stored: rows.0, asked });
        }
        stored.push(rows.0);
    }
    Ok(Buckets { numbers_ns: stored[0], payloads_ns: stored[1] })
}

/// The prepared statements of the store's requests.
pub(crate) struct Statements {
    pub insert_block: PreparedStatement,
    pub select_block: PreparedStatement,
    pub delete_block: PreparedStatement,
    pub insert_group: PreparedStatement,
    pub select_groups: PreparedStatement,
    pub delete_groups: PreparedStatement,
    pub set_segment_state: PreparedStatement,
    pub seal_segment: PreparedStatement,
    pub select_segments: PreparedStatement,
    pub delete_segment: PreparedStatement,
    pub insert_node: PreparedStatement,
    pub select_nodes: PreparedStatement,
    pub insert_series: PreparedStatement,
    pub select_series: PreparedStatement,
    pub upsert_database: PreparedStatement,
    pub select_databases: PreparedStatement,
    /// This node's partition of `segments` (its node id; 0 for a keyspace of one process).
    pub scope: i32,
}

/// `cql` prepared at `consistency` and marked idempotent. Every statement of this crate reads,
/// or writes or deletes whole rows by key: repeating one is harmless, so the driver may retry
/// after a timeout.
pub(crate) async fn prepare_idempotent(
    session: &Session,
    cql: String,
    consistency: Consistency,
) -> Result<PreparedStatement, CassandraError> {
    let mut statement = session.prepare(cql).await.map_err(|e| CassandraError::Request { what: "prepare", source: boxed(e) })?;
    statement.set_consistency(consistency);
    statement.set_is_idempotent(true);
    Ok(statement)
}

impl Statements {
    pub async fn prepare(session: &Session, keyspace: &str, consistency: Consistency, scope: i32) -> Result<Statements, CassandraError> {
        let prepare = |cql: String| prepare_idempotent(session, cql, consistency);
        let block_key = "series = ? AND bucket = ? AND block_start = ? AND segment = ? AND position = ?";
        Ok(Statements {
            insert_block: prepare(format!(
                "INSERT INTO {keyspace}.blocks (series, bucket, block_start, segment, position, block, shared_timestamps) \
                 VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?"
            ))
            .await?,
            select_block: prepare(format!("SELECT block, shared_timestamps FROM {keyspace}.blocks WHERE {block_key}")).await?,
            delete_block: prepare(format!("DELETE FROM {keyspace}.blocks WHERE {block_key}")).await?,
            insert_group: prepare(format!(
                "INSERT INTO {keyspace}.groups (segment, position, end_position, wal_checkpoint, index_entries, expiries) \
                 VALUES (?, ?, ?, ?, ?, ?)"
            ))
            .await?,
            select_groups: prepare(format!(
                "SELECT position, end_position, wal_checkpoint, index_entries, expiries FROM {keyspace}.groups WHERE segment = ?"
            ))
            .await?,
            delete_groups: prepare(format!("DELETE FROM {keyspace}.groups WHERE segment = ?")).await?,
            set_segment_state: prepare(format!("UPDATE {keyspace}.segments SET state = ? WHERE scope = ? AND id = ?")).await?,
            seal_segment: prepare(format!("UPDATE {keyspace}.segments SET sealed = true WHERE scope = ? AND id = ?")).await?,
            select_segments: prepare(format!("SELECT id, state, sealed FROM {keyspace}.segments WHERE scope = ?")).await?,
            delete_segment: prepare(format!("DELETE FROM {keyspace}.segments WHERE scope = ? AND id = ?")).await?,
            insert_node: prepare(format!("INSERT INTO {keyspace}.nodes (scope, id) VALUES ({NODES_SCOPE}, ?)")).await?,
            select_nodes: prepare(format!("SELECT id FROM {keyspace}.nodes WHERE scope = {NODES_SCOPE}")).await?,
            insert_series: prepare(format!("INSERT INTO {keyspace}.series (node, bucket, id, key, kind) VALUES (?, ?, ?, ?, ?)")).await?,
            select_series: prepare(format!("SELECT id, key, kind FROM {keyspace}.series WHERE node = ? AND bucket = ?")).await?,
            upsert_database: prepare(format!("INSERT INTO {keyspace}.databases (name, definition) VALUES (?, ?)")).await?,
            select_databases: prepare(format!("SELECT name, definition FROM {keyspace}.databases")).await?,
            scope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sensordb_engine::SeriesId;

    fn entry(kind: ValueKind, min_timestamp: i64) -> IndexEntry {
        IndexEntry { series: SeriesId(1), kind, count: 1, length: 1, offset: 0, min_timestamp, max_timestamp: min_timestamp, sequence: 1 }
    }

    #[test]
    fn a_block_lies_in_the_bucket_of_its_first_point_by_kind() {
        let buckets = Buckets { numbers_ns: 100, payloads_ns: 10 };
        assert_eq!(buckets.of(&entry(ValueKind::F64, 0)), 0);
        assert_eq!(buckets.of(&entry(ValueKind::F64, 199)), 1);
        assert_eq!(buckets.of(&entry(ValueKind::F64, -1)), -1, "times before 1970 round down");
        assert_eq!(buckets.of(&entry(ValueKind::Bytes, 199)), 19);
    }

    #[test]
    fn segment_states_round_trip_and_unknown_ones_are_refused() {
        for state in [SegmentState::Writing, SegmentState::Live, SegmentState::Removing] {
            assert_eq!(SegmentState::from_i8(state as i8), Some(state));
        }
        assert_eq!(SegmentState::from_i8(3), None);
    }
}
