//! [`CassandraStore`]: the engine's [`BlockStore`] over a Cassandra keyspace.
//!
//! The block index, segment summaries and block lives are in memory, rebuilt at open from the
//! `segments` and `groups` tables (never from the blocks), as the segment store rebuilds them
//! from footers; block bytes are read from Cassandra by primary key. Groups are placed one at a
//! time under `writer` (segment, positions, sequence: a group placed after another returned
//! has the larger sequence) and committed concurrently: each writes its block rows (at most the
//! in-flight bound at once) and then its commit row, and enters the index when that returns. A
//! segment full or sealed while groups of it are in flight is sealed by the last of them, so a
//! sealed segment's groups are all committed (other nodes read it whole once sealed).
//!
//! Removal is crash-complete in three steps: the segment's state becomes `Removing` (so a
//! restart finishes the job), it leaves the index, and once no listed block pins it its rows are
//! deleted (`sweep`), then its group and segment rows. Abandoned rewrites (state `Writing`) go
//! the same way.
//!
//! Block rows written with a TTL (see `ttl`) that are gone, or go within the hour after the
//! slack, are left to expire instead of deleted: that is what a reclaim of expired data
//! removes, and deleting them would only write tombstones. Listings leave out blocks whose rows
//! expire within the slack (the engine counts them dead already), so no read or rewrite looks
//! for a row Cassandra has dropped.

use crate::client::{BlockKey, BlockRow, Client, Connection, GroupRow};
use crate::cluster::{first_segment_id, Cluster, Refreshed};
use crate::error::CassandraError;
use crate::options::CassandraOptions;
use crate::rewrite::CassandraRewrite;
use crate::schema::{self, Buckets, SegmentState, Statements};
use crate::segment::{bigint, place_group, Lifetimes, PlacedGroup, SegmentSource, StoredSegment};
use crate::ttl::{decode_expiries, expires_within, now_seconds, row_expiry};
use futures_util::future::try_join_all;
use parking_lot::{Mutex, RwLock};
use scylla::client::session_builder::SessionBuilder;
use sensordb_engine::store::{
    Block, BlockIndex, BlockLife, BlockPin, BlockRef, BlockSource, BlockStore, GroupBuilder, IndexEntry, ListedBlock, RawBlock,
    SegmentRewrite, SegmentSummary, SeriesDirectory,
};
use sensordb_engine::{Error, Result, SeriesId, StoreStats, Timestamp, ValueKind};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Beyond the slack, how soon a removed row must expire to be left to expire rather than
/// deleted: reclaim removes a segment once its newest block is dead, when the row has at most
/// the slack and a second or two left; an hour more covers slow cycles and clocks, and holds
/// the space of a dead row an hour at worst.
const LEFT_TO_EXPIRE_HORIZON: Duration = Duration::from_secs(3_600);

/// Blocks in a Cassandra keyspace; see the module documentation.
pub struct CassandraStore {
    pub(crate) client: Client,
    pub(crate) keyspace: Arc<str>,
    pub(crate) buckets: Buckets,
    segment_bytes_max: u64,
    /// Added to every row's lifetime (see `ttl`).
    ttl_slack: Duration,
    /// The engine's series and storage periods, once it gives them.
    directory: RwLock<Option<Arc<dyn SeriesDirectory>>>,
    /// This node among those sharing the keyspace (`None`: alone), and how often it reads
    /// theirs (see `cluster`).
    pub(crate) node_id: Option<u16>,
    pub(crate) visibility: Duration,
    removal_grace: Duration,
    /// Series whose `series` row this process has written (with `node_id`).
    published: Mutex<HashSet<SeriesId>>,
    /// What reading other nodes' segments remembers; `refreshing` keeps it to one at a time.
    pub(crate) cluster: Mutex<Cluster>,
    pub(crate) refreshing: Mutex<()>,
    /// Block rows deleted by sweeps (each a tombstone), and removed rows left to expire.
    block_rows_deleted: AtomicU64,
    block_rows_left_to_expire: AtomicU64,
    /// Held while a group is placed (not while it commits).
    writer: Mutex<()>,
    pub(crate) state: RwLock<State>,
    /// With `ack_writes`: the acknowledged-write log (see `wal`).
    pub(crate) ack: Option<Arc<crate::wal::AckLog>>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) index: BlockIndex,
    segments: BTreeMap<u64, StoredSegment>,
    /// The segment taking groups, and the end of the positions it has handed out.
    open: Option<(u64, u64)>,
    next_id: u64,
    /// Sequence of the last group attempted (a failed commit still uses its number up: it may
    /// have landed).
    sequence: u64,
    /// Segments out of the index whose rows are still to delete.
    pub(crate) graveyard: Vec<Removed>,
    /// Other nodes' segments whose blocks are in the index, under this node's series ids.
    pub(crate) foreign: BTreeMap<u64, StoredSegment>,
}

/// A segment to delete once nothing pins it.
pub(crate) struct Removed {
    pub id: u64,
    /// Not deleted before this (other nodes may still list the segment until their next
    /// poll); `None`: as soon as nothing here pins it.
    pub not_before: Option<Instant>,
    /// Block rows and their expiries.
    pub keys: Vec<(BlockKey, Option<i64>)>,
    pub pin: Weak<SegmentSource>,
}

impl CassandraStore {
    /// Connects, creates the keyspace and tables if missing, and loads what the keyspace holds.
    pub fn open(options: CassandraOptions) -> std::result::Result<CassandraStore, CassandraError> {
        options.validate()?;
        let connect = options.clone();
        let (client, (buckets, wal)) = Client::start(options.runtime_threads, options.requests_in_flight_max(), async move {
            let session = SessionBuilder::new()
                .known_nodes(&connect.contact_points)
                .build()
                .await
                .map_err(|e| CassandraError::Connect { contact_points: connect.contact_points.join(","), source: Box::new(e) })?;
            schema::create(&session, &connect).await?;
            let buckets = schema::settle_buckets(&session, &connect).await?;
            let scope = i32::from(connect.node_id.unwrap_or(0));
            let statements = Statements::prepare(&session, &connect.keyspace, connect.consistency, scope).await?;
            let wal = match connect.ack_writes {
                true => Some((
                    crate::wal::WalStatements::prepare(&session, &connect.keyspace, connect.consistency).await?,
                    crate::peers::Peers::prepare(&session, &connect.keyspace, connect.consistency, connect.advertise.clone()).await?,
                )),
                false => None,
            };
            Ok((session, statements, (buckets, wal)))
        })?;
        let store = CassandraStore {
            client,
            keyspace: options.keyspace.as_str().into(),
            buckets,
            segment_bytes_max: options.segment_bytes_max.max(1),
            ttl_slack: options.ttl_slack,
            directory: RwLock::new(None),
            node_id: options.node_id,
            visibility: options.visibility,
            removal_grace: options.removal_grace,
            published: Mutex::new(HashSet::new()),
            cluster: Mutex::new(Cluster::default()),
            refreshing: Mutex::new(()),
            block_rows_deleted: AtomicU64::new(0),
            block_rows_left_to_expire: AtomicU64::new(0),
            writer: Mutex::new(()),
            state: RwLock::new(State { next_id: first_segment_id(options.node_id), ..State::default() }),
            ack: match (wal, options.node_id) {
                (Some((statements, peers)), Some(node)) => {
                    Some(Arc::new(crate::wal::AckLog::new(node, options.wal_ttl, options.dead_after, statements, peers)))
                }
                _ => None,
            },
        };
        if let Some(node) = options.node_id {
            store.client.bridge.run(move |c| async move { c.insert_node(i32::from(node)).await })?;
        }
        store.load()?;
        store.sweep();
        Ok(store)
    }

    /// Rebuilds the in-memory state from the `segments` and `groups` tables.
    fn load(&self) -> std::result::Result<(), CassandraError> {
        let scope = i32::from(self.node_id.unwrap_or(0));
        let segments = self.client.bridge.run(move |c| async move {
            let rows = c.select_segments(scope).await?;
            try_join_all(rows.into_iter().map(|(id, state, _sealed)| {
                let c = c.clone();
                async move { Ok::<_, CassandraError>((id, state, c.select_groups(id).await?)) }
            }))
            .await
        })?;
        let mut state = self.state.write();
        for (id, raw_state, groups) in segments {
            let damaged = |detail: String| CassandraError::Damaged { keyspace: self.keyspace.to_string(), segment: id, detail };
            let id = u64::try_from(id).map_err(|_| damaged("negative segment id".into()))?;
            let segment_state = SegmentState::from_i8(raw_state).ok_or_else(|| damaged(format!("unknown state {raw_state}")))?;
            let mut segment = StoredSegment::new(self.source(id), true);
            for group in groups {
                let entries = IndexEntry::decode_list(&group.entries).map_err(|e| damaged(format!("group at {}: {e}", group.position)))?;
                let end = u64::try_from(group.end_position).map_err(|_| damaged("negative position".into()))?;
                let wal_checkpoint = u64::try_from(group.wal_checkpoint).map_err(|_| damaged("negative checkpoint".into()))?;
                let expiries = decode_expiries(group.expiries.as_deref(), entries.len())
                    .ok_or_else(|| damaged(format!("group at {}: expiries do not match its blocks", group.position)))?;
                segment.add(&entries, &expiries, end, wal_checkpoint);
            }
            state.next_id = state.next_id.max(id + 1);
            state.sequence = state.sequence.max(segment.entries.iter().map(|e| e.sequence).max().unwrap_or(0));
            if segment_state == SegmentState::Live && !segment.entries.is_empty() {
                state.index.insert(id, &segment.entries);
                state.segments.insert(id, segment);
            } else {
                // An unfinished rewrite, an unfinished removal, or a segment whose first group
                // never committed.
                state.graveyard.push(Removed { id, not_before: self.removal_deadline(), keys: segment.keys(), pin: Weak::new() });
            }
        }
        Ok(())
    }

    fn source(&self, id: u64) -> SegmentSource {
        SegmentSource { id, bridge: self.client.bridge.clone(), buckets: self.buckets, keyspace: self.keyspace.clone(), origin: None }
    }

    /// Another node's segment `id`, empty, sealed (never rewritten here).
    pub(crate) fn new_foreign_segment(&self, id: u64) -> StoredSegment {
        StoredSegment::new(SegmentSource { origin: Some(RwLock::new(Vec::new())), ..self.source(id) }, true)
    }

    /// The engine's series directory, once given.
    pub(crate) fn directory(&self) -> Option<Arc<dyn SeriesDirectory>> {
        self.directory.read().clone()
    }

    /// Reads the other nodes' segments into the index now (what the watcher thread does every
    /// `visibility`); nothing without a `node_id` or before the engine gave its directory.
    pub fn refresh(&self) -> std::result::Result<Refreshed, CassandraError> {
        crate::cluster::refresh(self)
    }

    /// Starts a thread that calls [`CassandraStore::refresh`] every `visibility` while the store
    /// lives, so that other nodes' flushed points become readable here.
    pub fn watch_other_nodes(store: &Arc<CassandraStore>) -> std::io::Result<()> {
        crate::cluster::watch(store)
    }

    /// Merges the engine's database definitions with the keyspace's once (what the thread of
    /// [`CassandraStore::share_databases`] does every `visibility`); see `databases`.
    pub fn merge_databases(
        &self,
        engine: &sensordb_engine::Engine,
        sync: &mut crate::DatabaseSync,
    ) -> std::result::Result<crate::DatabasesMerged, CassandraError> {
        crate::databases::merge(self, engine, sync)
    }

    /// Starts a thread that merges `engine`'s database definitions with the keyspace's every
    /// `visibility` while both live, so that every node sharing the keyspace applies the same.
    pub fn share_databases(store: &Arc<CassandraStore>, engine: &Arc<sensordb_engine::Engine>) -> std::io::Result<()> {
        crate::databases::share(store, engine)
    }

    /// The `series` rows of this node not written yet for the series of `entries`: (id, key,
    /// kind). Empty without a `node_id`.
    fn unpublished_series(&self, entries: &[IndexEntry]) -> Vec<(u32, String, i8)> {
        let Some(directory) = self.node_id.and_then(|_| self.directory()) else { return Vec::new() };
        let published = self.published.lock();
        let mut ids: Vec<SeriesId> = entries.iter().map(|e| e.series).filter(|s| !published.contains(s)).collect();
        drop(published);
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().filter_map(|id| directory.series(id).map(|(key, kind)| (id.0, key.canonical(), kind as i8))).collect()
    }

    /// Tells other nodes that segment `id` takes no more groups (with a `node_id`). A failure
    /// only makes them read its groups again at each poll: logged, not returned.
    fn publish_sealed(&self, id: Option<u64>) {
        let (Some(id), Some(_)) = (id, self.node_id) else { return };
        if let Err(error) = self.client.bridge.run(move |c| async move { c.seal_segment(bigint(id)).await }) {
            tracing::warn!(keyspace = %self.keyspace, segment = id, %error, "marking a segment sealed failed");
        }
    }

    /// Runs `place` with the lifetimes of rows written now: each block's expiry under the
    /// engine's storage period of its series (none before the engine gives its periods).
    pub(crate) fn with_lifetimes<T>(&self, place: impl FnOnce(&Lifetimes<'_>) -> T) -> T {
        let directory = self.directory();
        let slack = self.ttl_slack;
        let expiry = move |entry: &IndexEntry| row_expiry(entry.max_timestamp, directory.as_ref()?.period(entry.series), slack);
        place(&Lifetimes { expiry: &expiry, now: now_seconds() })
    }

    /// Whether a block's row is gone or goes within the slack: the engine counts such a block
    /// dead already, and no read must look for its row.
    fn expiring(&self, segment: &StoredSegment, offset: u64, now: i64) -> bool {
        expires_within(segment.expiry_at(offset), now, self.ttl_slack)
    }

    pub(crate) fn engine_error(&self, error: CassandraError) -> Error {
        error.into_engine(&self.keyspace)
    }

    /// Runs a request on the store's runtime, as an engine result.
    pub(crate) fn run<T, F, Fut>(&self, request: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, CassandraError>> + Send + 'static,
    {
        self.client.bridge.run(request).map_err(|e| self.engine_error(e))
    }

    /// A new segment id, with its row in state `state`.
    pub(crate) fn create_segment(&self, state: SegmentState) -> Result<u64> {
        let id = {
            let mut guard = self.state.write();
            guard.next_id += 1;
            guard.next_id - 1
        };
        self.run(|c| async move { c.set_segment_states(vec![(bigint(id), state)]).await })?;
        Ok(id)
    }

    pub(crate) fn new_segment(&self, id: u64, sealed: bool) -> StoredSegment {
        StoredSegment::new(self.source(id), sealed)
    }

    /// Writes the rows of a placed group, and the `series` rows of its series not published
    /// yet, then its commit row: a node that reads the group finds every series it names.
    pub(crate) fn commit(&self, rows: Vec<BlockRow>, group: GroupRow, entries: &[IndexEntry]) -> Result<()> {
        let series = self.unpublished_series(entries);
        let ids: Vec<SeriesId> = series.iter().map(|(id, _, _)| SeriesId(*id)).collect();
        let node = i32::from(self.node_id.unwrap_or(0));
        self.run(|c| async move {
            if !series.is_empty() {
                c.insert_series(node, series).await?;
            }
            c.insert_blocks(rows).await?;
            c.insert_group(group).await
        })?;
        self.published.lock().extend(ids);
        Ok(())
    }

    /// Puts segment `id`'s blocks in the index and the segment in the map.
    pub(crate) fn install_segments(&self, segment: StoredSegment, replaced: &[u64]) {
        let mut state = self.state.write();
        state.remove(replaced, self.removal_deadline());
        state.index.insert(segment.summary.id, &segment.entries);
        state.segments.insert(segment.summary.id, segment);
    }

    /// Deletes the rows of removed segments nothing pins any more. A failure leaves them for
    /// the next sweep (or the next open) and is logged, not returned: the removal itself is
    /// already durable.
    pub(crate) fn sweep(&self) {
        let ready: Vec<Removed> = {
            let mut state = self.state.write();
            let now = Instant::now();
            let (ready, pinned) = std::mem::take(&mut state.graveyard)
                .into_iter()
                .partition(|r| r.pin.strong_count() == 0 && r.not_before.is_none_or(|t| t <= now));
            state.graveyard = pinned;
            ready
        };
        let now = now_seconds();
        let horizon = self.ttl_slack + LEFT_TO_EXPIRE_HORIZON;
        for removed in ready {
            // Rows that expire by themselves are left to: a delete would only add a tombstone.
            let (expiring, keys): (Vec<_>, Vec<_>) =
                removed.keys.iter().copied().partition(|(_, expiry)| expires_within(*expiry, now, horizon));
            let keys: Vec<BlockKey> = keys.into_iter().map(|(key, _)| key).collect();
            let (id, deleted) = (bigint(removed.id), keys.len() as u64);
            let result = self.client.bridge.run(|c| async move {
                c.delete_blocks(keys).await?;
                c.delete_groups(id).await?;
                c.delete_segment(id).await
            });
            match result {
                Ok(()) => {
                    self.block_rows_deleted.fetch_add(deleted, Ordering::Relaxed);
                    self.block_rows_left_to_expire.fetch_add(expiring.len() as u64, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::warn!(keyspace = %self.keyspace, segment = removed.id, %error, "deleting a removed segment's rows failed; retried later");
                    self.state.write().graveyard.push(removed);
                }
            }
        }
    }

    /// The source of a live segment, for maintenance reads.
    fn live_source(&self, block: &BlockRef) -> Result<Arc<SegmentSource>> {
        let state = self.state.read();
        state.segments.get(&block.segment).map(|s| s.source.clone()).ok_or_else(|| {
            Error::corruption(format!("cassandra:{}/segment-{}", self.keyspace, block.segment), block.entry.offset, "segment is gone")
        })
    }

    /// When a segment removed now may have its rows deleted: after `removal_grace` when other
    /// nodes may list it (with a `node_id`), else as soon as nothing here pins it.
    fn removal_deadline(&self) -> Option<Instant> {
        self.node_id.map(|_| Instant::now() + self.removal_grace)
    }

    /// Segments whose rows wait to be deleted (pinned by a read, within the removal grace, or
    /// after a failed delete).
    pub fn segments_awaiting_deletion(&self) -> usize {
        self.state.read().graveyard.len()
    }

    /// Block rows of removed segments deleted so far by this store (each delete is a tombstone
    /// Cassandra keeps `gc_grace_seconds`).
    pub fn block_rows_deleted(&self) -> u64 {
        self.block_rows_deleted.load(Ordering::Relaxed)
    }

    /// Block rows of removed segments left to expire by their TTL instead of deleted.
    pub fn block_rows_left_to_expire(&self) -> u64 {
        self.block_rows_left_to_expire.load(Ordering::Relaxed)
    }

    /// Group rows written so far, and the requests (single rows or batches) that wrote them.
    pub fn group_rows_written(&self) -> (u64, u64) {
        let connection = &self.client.bridge.connection;
        (connection.group_rows_written.load(Ordering::Relaxed), connection.group_row_requests.load(Ordering::Relaxed))
    }
}

/// The sequence after `last`: the next number, or with a clock (nodes sharing the keyspace)
/// the clock's reading if later, so that sequences still grow in commit order here and
/// compare across nodes by commit time (a later flush wins on a repeated timestamp).
fn next_sequence(last: u64, clock: Option<u64>) -> u64 {
    (last + 1).max(clock.unwrap_or(0))
}

fn wall_clock_micros() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.as_micros()).unwrap_or(u64::MAX)
}

impl State {
    /// Ends the open segment: it takes no more groups, and is sealed now if none is in flight
    /// (returns its id, to publish), else by the commit of its last group in flight.
    fn seal_open(&mut self) -> Option<u64> {
        let (id, _) = self.open.take()?;
        let segment = self.segments.get_mut(&id)?;
        segment.seal_pending = true;
        (segment.in_flight == 0).then(|| {
            segment.summary.sealed = true;
            id
        })
    }

    /// Takes segments out of the index and the map, into the graveyard (their rows deleted once
    /// unpinned and past `not_before`); returns their bytes.
    fn remove(&mut self, ids: &[u64], not_before: Option<Instant>) -> u64 {
        let mut bytes = 0;
        for id in ids {
            let Some(segment) = self.segments.remove(id) else { continue };
            self.index.remove_blocks(*id, segment.lives.iter().map(|l| l.series));
            bytes += segment.summary.bytes;
            self.graveyard.push(Removed { id: *id, not_before, keys: segment.keys(), pin: Arc::downgrade(&segment.source) });
        }
        bytes
    }
}

impl BlockStore for CassandraStore {
    fn put_group(&self, group: GroupBuilder, wal_checkpoint: u64) -> Result<u64> {
        // Placement (segment, positions, sequence) is serial; commits are not: a commit is
        // round trips to Cassandra, and one at a time (64 KiB payload portions, each its own
        // group) kept Cassandra a third busy at 40 % of the raw driver's rate (issue 15).
        let (id, sequence, placed) = {
            let _writer = self.writer.lock();
            let open = self.state.read().open;
            let (id, base) = match open {
                Some(open) => open,
                None => {
                    let id = self.create_segment(SegmentState::Live)?;
                    let mut state = self.state.write();
                    state.segments.insert(id, self.new_segment(id, false));
                    state.open = Some((id, 0));
                    (id, 0)
                }
            };
            let sequence = {
                let mut state = self.state.write();
                state.sequence = next_sequence(state.sequence, self.node_id.map(|_| wall_clock_micros()));
                state.sequence
            };
            let placed = self
                .with_lifetimes(|lifetimes| place_group(group, id, base, sequence, wal_checkpoint, &self.buckets, lifetimes))
                .map_err(|e| self.engine_error(e))?;
            // The positions are handed out whether or not the commit succeeds: rows never change.
            let mut state = self.state.write();
            state.open = Some((id, placed.end_position));
            state.segments.get_mut(&id).expect("BUG: the open Cassandra segment vanished").in_flight += 1;
            if placed.end_position >= self.segment_bytes_max {
                // Full: later groups go to a new segment while this one's groups still commit.
                let sealed = state.seal_open();
                debug_assert_eq!(sealed, None, "a segment with a group in flight was sealed");
            }
            (id, sequence, placed)
        };
        let PlacedGroup { rows, group, entries, expiries, end_position } = placed;
        let committed = self.commit(rows, group, &entries);
        let sealed = {
            let mut state = self.state.write();
            let segment = state.segments.get_mut(&id).expect("BUG: a Cassandra segment with a group in flight vanished");
            segment.in_flight -= 1;
            if committed.is_ok() {
                segment.add(&entries, &expiries, end_position, wal_checkpoint);
            }
            let sealed = (segment.seal_pending && segment.in_flight == 0).then(|| {
                segment.summary.sealed = true;
                id
            });
            if committed.is_ok() {
                state.index.insert(id, &entries);
            }
            sealed
        };
        self.publish_sealed(sealed);
        committed.map(|()| sequence)
    }

    fn seal(&self) -> Result<()> {
        {
            let _writer = self.writer.lock();
            let sealed = self.state.write().seal_open();
            self.publish_sealed(sealed);
        }
        self.sweep();
        Ok(())
    }

    fn log_write(&self, batch: &sensordb_engine::WriteBatch, marks: &[sensordb_engine::TxMark]) -> Result<()> {
        match &self.ack {
            Some(log) if !batch.is_empty() || !marks.is_empty() => {
                crate::wal::log_write(self, log, batch, marks).map_err(|e| self.engine_error(e))
            }
            _ => Ok(()),
        }
    }

    fn log_frozen(&self) -> u64 {
        self.ack.as_ref().map_or(0, |log| log.frozen_token())
    }

    fn log_flushed(&self, token: u64) {
        if let Some(log) = &self.ack {
            crate::wal::flushed(self, log, token);
        }
    }

    fn logged_mark(&self, client: &[u8; 16], tx: &[u8; 16]) -> Result<Option<sensordb_engine::TxMark>> {
        match &self.ack {
            Some(log) => match crate::wal::logged_marks(self, log, &[(*client, *tx)]) {
                Ok(mut found) => Ok(found.pop().flatten()),
                Err(e) => Err(self.engine_error(e)),
            },
            None => Ok(None),
        }
    }

    fn peers(&self) -> Vec<(u16, String)> {
        self.live_peers()
    }

    fn logged_marks(&self, ids: &[([u8; 16], [u8; 16])]) -> Result<Vec<Option<sensordb_engine::TxMark>>> {
        match &self.ack {
            Some(log) if !ids.is_empty() => crate::wal::logged_marks(self, log, ids).map_err(|e| self.engine_error(e)),
            _ => Ok(vec![None; ids.len()]),
        }
    }

    fn set_series_directory(&self, directory: Arc<dyn SeriesDirectory>) {
        *self.directory.write() = Some(directory);
    }

    fn blocks(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<ListedBlock> {
        let now = now_seconds();
        let state = self.state.read();
        state
            .index
            .blocks_in(series, from, to)
            .into_iter()
            .filter_map(|block| {
                let segment = state.segments.get(&block.segment).or_else(|| state.foreign.get(&block.segment))?;
                if self.expiring(segment, block.entry.offset, now) {
                    return None;
                }
                Some(ListedBlock { block, pin: BlockPin::new(segment.source.clone() as Arc<dyn BlockSource>) })
            })
            .collect()
    }

    fn stats(&self) -> StoreStats {
        let state = self.state.read();
        StoreStats {
            segments: state.segments.len(),
            blocks: state.index.block_count(),
            points: state.index.point_count(),
            bytes: state.segments.values().map(|s| s.summary.bytes).sum(),
        }
    }

    fn series_kinds(&self) -> Vec<(SeriesId, ValueKind)> {
        self.state.read().index.series_kinds()
    }

    fn wal_checkpoint(&self) -> u64 {
        self.state.read().segments.values().map(|s| s.summary.wal_checkpoint).max().unwrap_or(0)
    }

    fn summaries(&self) -> Vec<SegmentSummary> {
        self.state.read().segments.values().map(|s| s.summary).collect()
    }

    fn visit_segments(&self, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife])) {
        for segment in self.state.read().segments.values() {
            visit(&segment.summary, &segment.lives);
        }
    }

    fn blocks_of_segments(&self, ids: &[u64]) -> Vec<BlockRef> {
        let now = now_seconds();
        let state = self.state.read();
        let mut blocks = state.index.blocks_of_segments(ids);
        // A rewrite must not look for rows Cassandra drops: those blocks are dead.
        blocks.retain(|b| state.segments.get(&b.segment).is_none_or(|segment| !self.expiring(segment, b.entry.offset, now)));
        blocks
    }

    fn read_indexed_block(&self, block: &BlockRef) -> Result<Block> {
        self.live_source(block)?.read(&block.entry)
    }

    fn read_raw_block(&self, block: &BlockRef, records: &mut HashMap<u64, Arc<[u8]>>) -> Result<RawBlock> {
        self.live_source(block)?.read_raw(&block.entry, records)
    }

    fn remove_segments(&self, ids: &[u64]) -> Result<u64> {
        let removable: Vec<u64> = {
            let state = self.state.read();
            let open = state.open.map(|(id, _)| id);
            ids.iter().copied().filter(|id| Some(*id) != open && state.segments.contains_key(id)).collect()
        };
        if removable.is_empty() {
            return Ok(0);
        }
        let states = removable.iter().map(|&id| (bigint(id), SegmentState::Removing)).collect();
        self.run(|c| async move { c.set_segment_states(states).await })?;
        let bytes = self.state.write().remove(&removable, self.removal_deadline());
        self.sweep();
        Ok(bytes)
    }

    fn begin_rewrite(&self, replaced: &[u64], sequence: u64, wal_checkpoint: u64) -> Result<Box<dyn SegmentRewrite + '_>> {
        let id = self.create_segment(SegmentState::Writing)?;
        // A rewrite's output takes no flush groups: other nodes read it once, whole.
        self.publish_sealed(Some(id));
        Ok(Box::new(CassandraRewrite::new(self, id, replaced.to_vec(), sequence, wal_checkpoint)))
    }
}

#[cfg(test)]
mod tests {
    use super::next_sequence;

    #[test]
    fn sequences_count_alone_and_follow_the_clock_when_shared() {
        assert_eq!(next_sequence(0, None), 1);
        assert_eq!(next_sequence(41, None), 42);
        assert_eq!(next_sequence(41, Some(1_000)), 1_000, "the clock when it is ahead");
        assert_eq!(next_sequence(5_000, Some(1_000)), 5_001, "still growing when the clock steps back");
    }
}
