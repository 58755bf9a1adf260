//! The bridge from the engine's synchronous [`BlockStore`](sensordb_engine::store::BlockStore)
//! calls to the async `scylla` driver, and the requests the store makes.
//!
//! The store owns a small multi-threaded tokio runtime ([`Runtime`]) that runs the driver's
//! connections and every request. A synchronous call spawns its request onto that runtime and
//! waits on a std channel for the answer ([`Bridge::run`]) rather than calling `block_on`: the
//! engine is called from plain threads and from the server's own tokio workers alike, and
//! `block_on` panics inside another runtime, while a blocked channel receive only blocks (as a
//! disk read would). The runtime is shut down in the background when the store drops, so
//! dropping it inside an async context does not panic either.
//!
//! Every request holds a permit of one semaphore while it is in flight: at most
//! `requests_in_flight_per_node` × contact points at once, whatever mix of group writes, reads
//! and deletes is running (256 in flight timed out on this machine with RF=3; 32 per node did
//! not).
//!
//! Group rows are written together: a commit hands its row to one task per store
//! ([`GroupCommitter`]) that writes every row waiting for it, one unlogged batch per segment
//! (a segment is one partition of `groups`, so the batch is one mutation, atomic and isolated),
//! one batch at a time. Concurrent direct writes (a 64 KiB payload portion is a group of one
//! block) each sent their own small group row: with 32 writers, 4,063 rows now go in 400
//! requests, and the node's CPU per 256 MiB fell from 1.25 to 1.12 s (Cassandra's own CPU
//! moved more with its state than with this; docs/CASSANDRA.md).

use crate::error::{boxed, CassandraError};
use crate::schema::{series_bucket, SegmentState, Statements};
use futures_util::future::try_join_all;
use futures_util::StreamExt;
use scylla::client::session::Session;
use scylla::deserialize::row::DeserializeRow;
use scylla::serialize::row::SerializeRow;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::MaybeUnset;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Most group rows one batch carries, and most bytes of their index entries and expiries
/// (a flush of a large fleet has a row of hundreds of KB: it goes alone).
const GROUP_BATCH_ROWS_MAX: usize = 64;
const GROUP_BATCH_BYTES_MAX: usize = 256 << 10;

/// The session and what requests need, shared by every task.
pub(crate) struct Connection {
    pub session: Session,
    pub statements: Statements,
    in_flight: Semaphore,
    /// Where commits send their group rows (see [`GroupCommitter`]).
    group_rows: mpsc::Sender<WaitingGroup>,
    /// Group rows written, and the requests that wrote them.
    pub group_rows_written: AtomicU64,
    pub group_row_requests: AtomicU64,
}

/// A group row waiting to be written, and where its answer goes.
struct WaitingGroup {
    row: GroupRow,
    answer: oneshot::Sender<Result<(), Arc<dyn std::error::Error + Send + Sync>>>,
}

/// One block row as written and read.
pub(crate) struct BlockRow {
    pub key: BlockKey,
    /// A slice of the group's buffer, not a copy.
    pub block: bytes::Bytes,
    pub shared_timestamps: Option<Arc<[u8]>>,
    /// Seconds the row lives (`USING TTL`); 0 for ever.
    pub ttl: i32,
}

/// The primary key of a block row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockKey {
    pub series: i64,
    pub bucket: i64,
    pub block_start: i64,
    pub segment: i64,
    pub position: i64,
}

impl BlockKey {
    fn values(&self) -> (i64, i64, i64, i64, i64) {
        (self.series, self.bucket, self.block_start, self.segment, self.position)
    }
}

/// One row of the `groups` table: a committed flush group or rewrite part.
pub(crate) struct GroupRow {
    pub segment: i64,
    pub position: i64,
    pub end_position: i64,
    pub wal_checkpoint: i64,
    /// `IndexEntry::encode_list` of the group's blocks, offsets in the segment.
    pub entries: Vec<u8>,
    /// `ttl::encode_expiries` of the blocks' rows; `None` when no row has a TTL.
    pub expiries: Option<Vec<u8>>,
}

/// A cheap handle that runs requests on the store's runtime; pins of listed blocks keep one.
#[derive(Clone)]
pub(crate) struct Bridge {
    handle: Handle,
    pub connection: Arc<Connection>,
}

/// The runtime and the bridge; dropping it stops the runtime.
pub(crate) struct Client {
    runtime: Option<Runtime>,
    pub bridge: Bridge,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Client {
    /// Starts the runtime and runs `connect` on it to make the connection; returns what
    /// `connect` found besides.
    pub fn start<T, F>(worker_threads: usize, in_flight_max: usize, connect: F) -> Result<(Client, T), CassandraError>
    where
        T: Send + 'static,
        F: Future<Output = Result<(Session, Statements, T), CassandraError>> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("sensordb-cassandra")
            .enable_all()
            .build()
            .map_err(CassandraError::Runtime)?;
        let handle = runtime.handle().clone();
        let (session, statements, found) = wait(&handle, connect)??;
        let in_flight_max = in_flight_max.max(1);
        let (group_rows, waiting) = mpsc::channel(in_flight_max);
        let connection = Arc::new(Connection {
            session,
            statements,
            in_flight: Semaphore::new(in_flight_max),
            group_rows,
            group_rows_written: AtomicU64::new(0),
            group_row_requests: AtomicU64::new(0),
        });
        handle.spawn(GroupCommitter { connection: Arc::downgrade(&connection), waiting }.run());
        Ok((Client { runtime: Some(runtime), bridge: Bridge { handle, connection } }, found))
    }
}

/// The task that writes group rows for the commits of one store: it takes every row waiting
/// (up to a batch's bounds), writes them (one batch per segment, the segments' batches
/// concurrently), answers each commit, and takes the rows that came meanwhile. A lone commit
/// is written at once; under concurrent commits the rows of one round trip go together.
struct GroupCommitter {
    connection: Weak<Connection>,
    waiting: mpsc::Receiver<WaitingGroup>,
}

impl GroupCommitter {
    async fn run(mut self) {
        let mut taken = Vec::new();
        // Ends when the connection (which holds the sender) is gone.
        while self.waiting.recv_many(&mut taken, GROUP_BATCH_ROWS_MAX).await > 0 {
            let Some(connection) = self.connection.upgrade() else { return };
            let batches = batches_by_segment(std::mem::take(&mut taken));
            futures_util::future::join_all(batches.into_iter().map(|batch| {
                let connection = &connection;
                async move {
                    let (rows, answers): (Vec<GroupRow>, Vec<_>) = batch.into_iter().map(|w| (w.row, w.answer)).unzip();
                    let result =
                        connection.write_group_rows(&rows).await.map_err(|e| Arc::new(e) as Arc<dyn std::error::Error + Send + Sync>);
                    for answer in answers {
                        // A commit that stopped waiting (its thread died) needs no answer.
                        let _ = answer.send(result.clone());
                    }
                }
            }))
            .await;
        }
    }
}

/// `waiting` (in arrival order) as batches of one segment each, in the order of each
/// segment's first row, each within [`GROUP_BATCH_ROWS_MAX`] and [`GROUP_BATCH_BYTES_MAX`]
/// (a row larger than the bytes bound is a batch of its own).
fn batches_by_segment(waiting: Vec<WaitingGroup>) -> Vec<Vec<WaitingGroup>> {
    let mut batches: Vec<(Vec<WaitingGroup>, usize)> = Vec::new();
    for group in waiting {
        let bytes = group.row.entries.len() + group.row.expiries.as_ref().map_or(0, Vec::len);
        let open = batches.iter_mut().find(|(batch, batch_bytes)| {
            batch[0].row.segment == group.row.segment && batch.len() < GROUP_BATCH_ROWS_MAX && batch_bytes + bytes <= GROUP_BATCH_BYTES_MAX
        });
        match open {
            Some((batch, batch_bytes)) => {
                batch.push(group);
                *batch_bytes += bytes;
            }
            None => batches.push((vec![group], bytes)),
        }
    }
    batches.into_iter().map(|(batch, _)| batch).collect()
}

/// A batch of `statement` `times` over, at the statement's consistency (a batch has its own,
/// which would otherwise be the session's default).
fn repeated(statement: &PreparedStatement, times: usize, kind: BatchType) -> Batch {
    let mut batch = Batch::new(kind);
    for _ in 0..times {
        batch.append_statement(statement.clone());
    }
    if let Some(consistency) = statement.get_consistency() {
        batch.set_consistency(consistency);
    }
    batch
}

/// Runs `future` on `handle`'s runtime and blocks the calling thread until it finishes.
fn wait<T: Send + 'static>(handle: &Handle, future: impl Future<Output = T> + Send + 'static) -> Result<T, CassandraError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        // The receiver is gone only if the caller's thread died; nothing to tell then.
        let _ = sender.send(future.await);
    });
    receiver.recv().map_err(|_| CassandraError::RuntimeStopped)
}

impl Bridge {
    /// Runs `request(connection)` on the store's runtime; blocks until it finishes.
    pub fn run<T, F, Fut>(&self, request: F) -> Result<T, CassandraError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Connection>) -> Fut,
        Fut: Future<Output = Result<T, CassandraError>> + Send + 'static,
    {
        wait(&self.handle, request(self.connection.clone()))?
    }
}

impl Connection {
    pub(crate) async fn permit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, CassandraError> {
        self.in_flight.acquire().await.map_err(|_| CassandraError::RuntimeStopped)
    }

    /// Writes block rows, at most the in-flight bound at a time.
    pub async fn insert_blocks(&self, rows: Vec<BlockRow>) -> Result<(), CassandraError> {
        try_join_all(rows.iter().map(|row| async move {
            let _permit = self.permit().await?;
            let shared = match &row.shared_timestamps {
                Some(record) => MaybeUnset::Set(&record[..]),
                None => MaybeUnset::Unset,
            };
            let (series, bucket, block_start, segment, position) = row.key.values();
            let values = (series, bucket, block_start, segment, position, &row.block[..], shared, row.ttl);
            self.session
                .execute_unpaged(&self.statements.insert_block, values)
                .await
                .map_err(|e| CassandraError::Request { what: "write block", source: boxed(e) })
        }))
        .await
        .map(drop)
    }

    /// Reads one block row; `None` when it is not there.
    pub async fn select_block(&self, key: BlockKey) -> Result<Option<(Vec<u8>, Option<Vec<u8>>)>, CassandraError> {
        let _permit = self.permit().await?;
        self.session
            .execute_unpaged(&self.statements.select_block, key.values())
            .await
            .map_err(boxed)
            .and_then(|r| r.into_rows_result().map_err(boxed))
            .and_then(|r| r.maybe_first_row::<(Vec<u8>, Option<Vec<u8>>)>().map_err(boxed))
            .map_err(CassandraError::request("read block"))
    }

    /// Deletes block rows by key, at most the in-flight bound at a time.
    pub async fn delete_blocks(&self, keys: Vec<BlockKey>) -> Result<(), CassandraError> {
        try_join_all(keys.iter().map(|key| async move {
            let _permit = self.permit().await?;
            self.session
                .execute_unpaged(&self.statements.delete_block, key.values())
                .await
                .map_err(|e| CassandraError::Request { what: "delete block", source: boxed(e) })
        }))
        .await
        .map(drop)
    }

    /// Commits a group: its block rows must be written already. The row goes to the store's
    /// [`GroupCommitter`] and is written with the others waiting then.
    pub async fn insert_group(&self, row: GroupRow) -> Result<(), CassandraError> {
        let (answer, answered) = oneshot::channel();
        self.group_rows.send(WaitingGroup { row, answer }).await.map_err(|_| CassandraError::RuntimeStopped)?;
        match answered.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(shared)) => Err(CassandraError::Request { what: "commit group", source: Box::new(shared) }),
            Err(_) => Err(CassandraError::RuntimeStopped),
        }
    }

    /// Writes `rows` (all of one segment) in one unlogged batch: one partition, one mutation.
    async fn write_group_rows(&self, rows: &[GroupRow]) -> Result<(), scylla::errors::ExecutionError> {
        debug_assert!(rows.windows(2).all(|w| w[0].segment == w[1].segment), "a batch of group rows is one partition");
        let _permit = self.in_flight.acquire().await.expect("the in-flight semaphore is never closed");
        let values: Vec<_> = rows
            .iter()
            .map(|group| {
                let expiries = match &group.expiries {
                    Some(bytes) => MaybeUnset::Set(&bytes[..]),
                    None => MaybeUnset::Unset,
                };
                (group.segment, group.position, group.end_position, group.wal_checkpoint, &group.entries[..], expiries)
            })
            .collect();
        let result = match values.len() {
            1 => self.session.execute_unpaged(&self.statements.insert_group, &values[0]).await.map(drop),
            _ => {
                let mut batch = repeated(&self.statements.insert_group, values.len(), BatchType::Unlogged);
                // Repeating the batch rewrites the same rows: harmless, so it may be retried.
                batch.set_is_idempotent(true);
                self.session.batch(&batch, values).await.map(drop)
            }
        };
        self.group_row_requests.fetch_add(1, Ordering::Relaxed);
        if result.is_ok() {
            self.group_rows_written.fetch_add(rows.len() as u64, Ordering::Relaxed);
        }
        result
    }

    /// Every row of `statement` bound to `values`, read page by page under one in-flight
    /// permit; `what` names the read in its errors.
    pub(crate) async fn select_all<R>(
        &self,
        statement: &PreparedStatement,
        values: impl SerializeRow,
        what: &'static str,
    ) -> Result<Vec<R>, CassandraError>
    where
        R: for<'frame, 'metadata> DeserializeRow<'frame, 'metadata> + Unpin,
    {
        let _permit = self.permit().await?;
        let mut rows = self
            .session
            .execute_iter(statement.clone(), values)
            .await
            .map_err(boxed)
            .and_then(|pager| pager.rows_stream::<R>().map_err(boxed))
            .map_err(CassandraError::request(what))?;
        let mut all = Vec::new();
        while let Some(row) = rows.next().await {
            all.push(row.map_err(|e| CassandraError::Request { what, source: boxed(e) })?);
        }
        Ok(all)
    }

    /// Every group row of `segment`, by position.
    pub async fn select_groups(&self, segment: i64) -> Result<Vec<GroupRow>, CassandraError> {
        // Position, end position, WAL checkpoint, entries, expiries.
        type Columns = (i64, i64, i64, Vec<u8>, Option<Vec<u8>>);
        let rows: Vec<Columns> = self.select_all(&self.statements.select_groups, (segment,), "read groups").await?;
        Ok(rows
            .into_iter()
            .map(|(position, end_position, wal_checkpoint, entries, expiries)| GroupRow {
                segment,
                position,
                end_position,
                wal_checkpoint,
                entries,
                expiries,
            })
            .collect())
    }

    /// Deletes the group rows of `segment` (one partition tombstone).
    pub async fn delete_groups(&self, segment: i64) -> Result<(), CassandraError> {
        let _permit = self.permit().await?;
        self.session
            .execute_unpaged(&self.statements.delete_groups, (segment,))
            .await
            .map(drop)
            .map_err(|e| CassandraError::Request { what: "delete groups", source: boxed(e) })
    }

    /// Sets the state of segments in one atomic, isolated batch (they share one partition).
    pub async fn set_segment_states(&self, states: Vec<(i64, SegmentState)>) -> Result<(), CassandraError> {
        let _permit = self.permit().await?;
        let batch = repeated(&self.statements.set_segment_state, states.len(), BatchType::Logged);
        let scope = self.statements.scope;
        let values: Vec<(i8, i32, i64)> = states.iter().map(|&(id, state)| (state as i8, scope, id)).collect();
        self.session
            .batch(&batch, values)
            .await
            .map(drop)
            .map_err(|e| CassandraError::Request { what: "set segment state", source: boxed(e) })
    }

    /// Every segment row of node `scope`: id, raw state, and whether it is sealed.
    pub async fn select_segments(&self, scope: i32) -> Result<Vec<(i64, i8, bool)>, CassandraError> {
        let rows: Vec<(i64, Option<i8>, Option<bool>)> =
            self.select_all(&self.statements.select_segments, (scope,), "read segments").await?;
        // A row whose state was never set is a segment being created: treat it as unfinished.
        Ok(rows
            .into_iter()
            .map(|(id, state, sealed)| (id, state.unwrap_or(SegmentState::Writing as i8), sealed.unwrap_or(false)))
            .collect())
    }

    /// Tells other nodes that this node's segment takes no more groups.
    pub async fn seal_segment(&self, segment: i64) -> Result<(), CassandraError> {
        let _permit = self.permit().await?;
        self.session
            .execute_unpaged(&self.statements.seal_segment, (self.statements.scope, segment))
            .await
            .map(drop)
            .map_err(|e| CassandraError::Request { what: "seal segment", source: boxed(e) })
    }

    /// Lists this node among those sharing the keyspace.
    pub async fn insert_node(&self, node: i32) -> Result<(), CassandraError> {
        let _permit = self.permit().await?;
        self.session
            .execute_unpaged(&self.statements.insert_node, (node,))
            .await
            .map(drop)
            .map_err(|e| CassandraError::Request { what: "register node", source: boxed(e) })
    }

    /// The ids of the nodes sharing the keyspace.
    pub async fn select_nodes(&self) -> Result<Vec<i32>, CassandraError> {
        let rows: Vec<(i32,)> = self.select_all(&self.statements.select_nodes, (), "read nodes").await?;
        Ok(rows.into_iter().map(|(node,)| node).collect())
    }

    /// Publishes series of this node: (id, canonical key, kind), at most the in-flight bound at
    /// a time.
    pub async fn insert_series(&self, node: i32, series: Vec<(u32, String, i8)>) -> Result<(), CassandraError> {
        try_join_all(series.iter().map(|(id, key, kind)| async move {
            let _permit = self.permit().await?;
            let values = (node, series_bucket(*id), i64::from(*id), key.as_str(), *kind);
            self.session
                .execute_unpaged(&self.statements.insert_series, values)
                .await
                .map_err(|e| CassandraError::Request { what: "publish series", source: boxed(e) })
        }))
        .await
        .map(drop)
    }

    /// The series node `node` published in `bucket`: (id, canonical key, kind).
    pub async fn select_series(&self, node: i32, bucket: i32) -> Result<Vec<(i64, String, i8)>, CassandraError> {
        self.select_all(&self.statements.select_series, (node, bucket), "read series").await
    }

    /// Writes database definitions: (name, definition), last write wins.
    pub async fn upsert_databases(&self, definitions: Vec<(String, String)>) -> Result<(), CassandraError> {
        for (name, definition) in &definitions {
            let _permit = self.permit().await?;
            self.session
                .execute_unpaged(&self.statements.upsert_database, (name.as_str(), definition.as_str()))
                .await
                .map_err(|e| CassandraError::Request { what: "write database definition", source: boxed(e) })?;
        }
        Ok(())
    }

    /// Every shared database definition: (name, definition).
    pub async fn select_databases(&self) -> Result<Vec<(String, String)>, CassandraError> {
        self.select_all(&self.statements.select_databases, (), "read database definitions").await
    }

    /// Deletes a segment's row, the last step of removing it.
    pub async fn delete_segment(&self, segment: i64) -> Result<(), CassandraError> {
        let _permit = self.permit().await?;
        self.session
            .execute_unpaged(&self.statements.delete_segment, (self.statements.scope, segment))
            .await
            .map(drop)
            .map_err(|e| CassandraError::Request { what: "delete segment", source: boxed(e) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(segment: i64, position: i64, entry_bytes: usize) -> WaitingGroup {
        let row =
            GroupRow { segment, position, end_position: position + 1, wal_checkpoint: 0, entries: vec![0; entry_bytes], expiries: None };
        WaitingGroup { row, answer: oneshot::channel().0 }
    }

    fn shape(batches: &[Vec<WaitingGroup>]) -> Vec<Vec<(i64, i64)>> {
        batches.iter().map(|b| b.iter().map(|w| (w.row.segment, w.row.position)).collect()).collect()
    }

    #[test]
    fn group_rows_are_batched_by_segment_in_arrival_order_within_the_bounds() {
        let rows = vec![waiting(1, 0, 10), waiting(2, 0, 10), waiting(1, 1, 10), waiting(2, 1, 10), waiting(1, 2, 10)];
        assert_eq!(shape(&batches_by_segment(rows)), vec![vec![(1, 0), (1, 1), (1, 2)], vec![(2, 0), (2, 1)]]);

        // A row over the bytes bound goes alone, and nothing joins it.
        let rows = vec![waiting(1, 0, 10), waiting(1, 1, GROUP_BATCH_BYTES_MAX), waiting(1, 2, 10)];
        assert_eq!(shape(&batches_by_segment(rows)), vec![vec![(1, 0), (1, 2)], vec![(1, 1)]]);

        // At most GROUP_BATCH_ROWS_MAX rows a batch.
        let rows = (0..GROUP_BATCH_ROWS_MAX as i64 + 1).map(|p| waiting(3, p, 1)).collect();
        let batches = batches_by_segment(rows);
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), vec![GROUP_BATCH_ROWS_MAX, 1]);
    }
}
