//! Acknowledged writes kept in Cassandra (issue 15 item 5): with `ack_writes`, every write the
//! engine acknowledges is also a row of the `wal` table, written at the store's consistency
//! before the acknowledgement, so losing a sensordb node and its disk loses nothing
//! acknowledged; and every completion mark (a native transaction id) is a row of
//! `transactions`, so a retry sent to another node is recognised.
//!
//! ```text
//! wal          PRIMARY KEY ((node int, slot bigint), sequence bigint)   record blob   USING TTL
//! wal_nodes    PRIMARY KEY (node int)   heartbeat_ms bigint, flushed_before bigint
//! transactions PRIMARY KEY ((client blob, tx blob))   completed_at bigint, points bigint, node int   USING TTL
//! ```
//!
//! - **Rows.** One row per engine write (a native commit group, an HTTP request), after the
//!   local WAL record is durable: [`WalRecord`] holds the keys of the write's series (the
//!   node's ids mean nothing elsewhere) and the batch as the engine encodes it. `sequence` is a
//!   hybrid clock (`max(last + 1, wall-clock µs)`), `slot = sequence >> SLOT_BITS` (~16.8 s of
//!   a node's writes per partition).
//! - **Trim.** Rows are never deleted: a flush moves the node's `flushed_before` (the engine's
//!   `log_frozen` token: every row below it is in stored blocks, published at the same
//!   consistency), and readers ignore rows below it; rows expire by `wal_ttl`.
//! - **Recovery by another node.** Every `visibility` each node writes its heartbeat and reads
//!   the others'. A node silent for `dead_after` is adopted by the live node of the smallest
//!   id: its rows from `flushed_before` on are written into the adopter's engine (under the
//!   adopter's ids, logged again in its own rows), then its `flushed_before` is moved past
//!   them. Its flushed blocks were readable everywhere already (see `cluster`). A node started
//!   again with the same `node_id` replays its own rows the same way first (its disk may be
//!   new), which only repeats points its local WAL replayed.
//! - **Exactly once.** A replayed point lands on the same (series, timestamp) as the original:
//!   reads keep one value per timestamp (the later sequence wins), so a point replayed twice, or
//!   replayed while its original is also flushed, is read once.

use crate::error::{boxed, CassandraError};
use crate::store::CassandraStore;
use futures_util::future::try_join_all;
use parking_lot::Mutex;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;
use sensordb_engine::{Engine, SeriesDirectory, SeriesId, SeriesKey, TxMark, ValueKind, WriteBatch};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A `wal` partition holds the rows of 2^24 µs (~16.8 s) of one node.
const SLOT_BITS: u32 = 24;
/// Version byte of a [`WalRecord`].
const RECORD_VERSION: u8 = 1;

/// The prepared CQL of the acknowledged-write tables.
pub(crate) struct WalStatements {
    insert_row: PreparedStatement,
    select_slot: PreparedStatement,
    upsert_heartbeat: PreparedStatement,
    upsert_flushed: PreparedStatement,
    select_nodes: PreparedStatement,
    insert_transaction: PreparedStatement,
    select_transaction: PreparedStatement,
}

impl WalStatements {
    pub async fn prepare(session: &Session, keyspace: &str, consistency: Consistency) -> Result<WalStatements, CassandraError> {
        let prepare = |cql: String| crate::schema::prepare_idempotent(session, cql, consistency);
        Ok(WalStatements {
            insert_row: prepare(format!("INSERT INTO {keyspace}.wal (node, slot, sequence, record) VALUES (?, ?, ?, ?) USING TTL ?"))
                .await?,
            select_slot: prepare(format!("SELECT sequence, record FROM {keyspace}.wal WHERE node = ? AND slot = ? AND sequence >= ?"))
                .await?,
            upsert_heartbeat: prepare(format!("UPDATE {keyspace}.wal_nodes SET heartbeat_ms = ? WHERE node = ?")).await?,
            upsert_flushed: prepare(format!("UPDATE {keyspace}.wal_nodes SET flushed_before = ? WHERE node = ?")).await?,
            select_nodes: prepare(format!("SELECT node, heartbeat_ms, flushed_before FROM {keyspace}.wal_nodes")).await?,
            insert_transaction: prepare(format!(
                "INSERT INTO {keyspace}.transactions (client, tx, completed_at, points, node) VALUES (?, ?, ?, ?, ?) USING TTL ?"
            ))
            .await?,
            select_transaction: prepare(format!("SELECT completed_at, points FROM {keyspace}.transactions WHERE client = ? AND tx = ?"))
                .await?,
        })
    }
}

/// The CQL that creates the tables (with the others, see `schema`).
pub(crate) fn create_statements(keyspace: &str) -> [String; 3] {
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.wal (node int, slot bigint, sequence bigint, record blob, \
             PRIMARY KEY ((node, slot), sequence))"
        ),
        format!("CREATE TABLE IF NOT EXISTS {keyspace}.wal_nodes (node int PRIMARY KEY, heartbeat_ms bigint, flushed_before bigint)"),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.transactions (client blob, tx blob, completed_at bigint, points bigint, node int, \
             PRIMARY KEY ((client, tx)))"
        ),
    ]
}

/// A node's row of `wal_nodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalNode {
    pub node: u16,
    /// Unix ms of its last heartbeat (0: none yet).
    pub heartbeat_ms: i64,
    /// Its rows below this sequence are in stored blocks (or were adopted).
    pub flushed_before: i64,
}

/// What a replay of a node's rows did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub rows: u64,
    pub points: u64,
}

/// This node's acknowledged-write state, kept by the store.
pub(crate) struct AckLog {
    pub node: u16,
    pub ttl: Duration,
    pub dead_after: Duration,
    pub statements: WalStatements,
    /// The last sequence handed out.
    sequence: Mutex<u64>,
    /// Set once this node's own rows were replayed at start: `flushed_before` moves only then
    /// (a flush before would skip rows whose points this engine may not have).
    recovered: AtomicBool,
    /// Rows logged and transactions recorded, for tests and metrics.
    pub rows_written: AtomicU64,
    /// Transaction ids looked up in `transactions`, for tests and metrics.
    pub lookups: AtomicU64,
    /// The heartbeat each adopted node had when adopted: adopted again only if it changes.
    adopted: Mutex<HashMap<u16, i64>>,
    /// This node's advertised address and the live peers (see `peers`).
    pub peers: crate::peers::Peers,
}

impl AckLog {
    pub fn new(node: u16, ttl: Duration, dead_after: Duration, statements: WalStatements, peers: crate::peers::Peers) -> AckLog {
        AckLog {
            node,
            ttl,
            dead_after,
            statements,
            sequence: Mutex::new(0),
            recovered: AtomicBool::new(false),
            rows_written: AtomicU64::new(0),
            lookups: AtomicU64::new(0),
            adopted: Mutex::new(HashMap::new()),
            peers,
        }
    }

    fn ttl_seconds(&self) -> i32 {
        i32::try_from(self.ttl.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    fn next_sequence(&self) -> u64 {
        let mut last = self.sequence.lock();
        *last = (*last + 1).max(wall_clock_micros());
        *last
    }

    /// The next sequence to be handed out: every row logged so far is below it.
    pub fn frozen_token(&self) -> u64 {
        (*self.sequence.lock() + 1).max(wall_clock_micros())
    }
}

pub(crate) fn wall_clock_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn slot_of(sequence: u64) -> i64 {
    (sequence >> SLOT_BITS) as i64
}

/// The key and kind of each series id a [`WalRecord`] names.
pub type WalKeys = HashMap<SeriesId, (SeriesKey, ValueKind)>;

/// A `wal` row's record: the write's series keys, then the batch as the engine encodes it.
///
/// ```text
/// u8 version (1) | u32 LE series count | per series: u32 LE id, u8 kind, u32 LE key length,
/// canonical key (UTF-8) | the batch (`WriteBatch::encode`)
/// ```
pub struct WalRecord;

impl WalRecord {
    /// Encodes `batch` with the keys `directory` gives its series; `None` if one is unknown.
    pub fn encode(batch: &WriteBatch, directory: &dyn SeriesDirectory) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(64 + batch.value_bytes() + 16 * batch.len());
        out.push(RECORD_VERSION);
        out.extend_from_slice(&(batch.entries().len() as u32).to_le_bytes());
        for entry in batch.entries() {
            let (key, kind) = directory.series(entry.series)?;
            let key = key.canonical();
            out.extend_from_slice(&entry.series.0.to_le_bytes());
            out.push(kind as u8);
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
        }
        batch.encode(&mut out);
        Some(out)
    }

    /// Decodes a record into its batch and the key and kind of each series id it names.
    pub fn decode(record: &[u8]) -> Result<(WriteBatch, WalKeys), String> {
        let mut position = 0usize;
        let mut take = |n: usize| -> Result<&[u8], String> {
            let bytes = record.get(position..position + n).ok_or("truncated wal record")?;
            position += n;
            Ok(bytes)
        };
        let u32_at = |bytes: &[u8]| u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if take(1)?[0] != RECORD_VERSION {
            return Err("unknown wal record version".into());
        }
        let count = u32_at(take(4)?) as usize;
        let mut keys = HashMap::with_capacity(count.min(1 << 16));
        for _ in 0..count {
            let id = u32_at(take(4)?);
            let kind = ValueKind::try_from(take(1)?[0]).map_err(|_| "unknown value kind in wal record".to_string())?;
            let len = u32_at(take(4)?) as usize;
            let text = std::str::from_utf8(take(len)?).map_err(|_| "series key is not UTF-8".to_string())?;
            let key = SeriesKey::parse(text).map_err(|e| format!("series key {text:?}: {e}"))?;
            keys.insert(SeriesId(id), (key, kind));
        }
        let batch = WriteBatch::decode(&record[position..])?;
        Ok((batch, keys))
    }
}

fn request(what: &'static str) -> impl FnOnce(scylla::errors::ExecutionError) -> CassandraError {
    move |e| CassandraError::Request { what, source: boxed(e) }
}

/// Writes the row of one acknowledged write and the rows of its completion marks, at the
/// store's consistency; returns once all are written.
pub(crate) fn log_write(store: &CassandraStore, log: &Arc<AckLog>, batch: &WriteBatch, marks: &[TxMark]) -> Result<(), CassandraError> {
    let record = if batch.is_empty() {
        None
    } else {
        let directory = store.directory().ok_or_else(|| CassandraError::InvalidOptions("no series directory yet".into()))?;
        let record = WalRecord::encode(batch, directory.as_ref())
            .ok_or_else(|| CassandraError::MalformedGroup("a written series is not in the catalog".into()))?;
        Some((log.next_sequence(), record))
    };
    let marks = marks.to_vec();
    let log = log.clone();
    store.client.bridge.run(move |c| async move {
        let ttl = log.ttl_seconds();
        let node = i32::from(log.node);
        let row = async {
            if let Some((sequence, record)) = &record {
                let _permit = c.permit().await?;
                let values = (node, slot_of(*sequence), *sequence as i64, &record[..], ttl);
                c.session.execute_unpaged(&log.statements.insert_row, values).await.map_err(request("write wal row"))?;
            }
            Ok::<_, CassandraError>(())
        };
        let transactions = try_join_all(marks.iter().map(|mark| {
            let (c, log) = (&c, &log);
            async move {
                let _permit = c.permit().await?;
                let values = (&mark.client[..], &mark.tx[..], mark.completed_at_ns, mark.points as i64, node, ttl);
                c.session.execute_unpaged(&log.statements.insert_transaction, values).await.map_err(request("write transaction"))
            }
        }));
        let (row, transactions) = futures_util::join!(row, transactions);
        row?;
        transactions?;
        log.rows_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}

/// The completion marks of several (client, tx) ids some node logged, in order (`None` where no
/// row is left): the reads go out concurrently, so a commit group's lookups cost one round trip.
pub(crate) fn logged_marks(
    store: &CassandraStore,
    log: &Arc<AckLog>,
    ids: &[([u8; 16], [u8; 16])],
) -> Result<Vec<Option<TxMark>>, CassandraError> {
    log.lookups.fetch_add(ids.len() as u64, Ordering::Relaxed);
    let log = log.clone();
    let ids = ids.to_vec();
    store.client.bridge.run(move |c| async move {
        let lookups = ids.iter().map(|&(client, tx)| {
            let (c, log) = (&c, &log);
            async move {
                let _permit = c.permit().await?;
                let result = c
                    .session
                    .execute_unpaged(&log.statements.select_transaction, (&client[..], &tx[..]))
                    .await
                    .map_err(request("read transaction"))?;
                let rows = result.into_rows_result().map_err(|e| CassandraError::Request { what: "read transaction", source: boxed(e) })?;
                let row = rows
                    .maybe_first_row::<(i64, i64)>()
                    .map_err(|e| CassandraError::Request { what: "read transaction", source: boxed(e) })?;
                Ok::<_, CassandraError>(row.map(|(completed_at_ns, points)| TxMark {
                    client,
                    tx,
                    completed_at_ns,
                    points: points.max(0) as u64,
                }))
            }
        });
        try_join_all(lookups).await
    })
}

/// Every node's `wal_nodes` row.
pub(crate) fn nodes(store: &CassandraStore, log: &Arc<AckLog>) -> Result<Vec<WalNode>, CassandraError> {
    let log = log.clone();
    store.client.bridge.run(move |c| async move {
        let rows: Vec<(i32, Option<i64>, Option<i64>)> = c.select_all(&log.statements.select_nodes, (), "read wal nodes").await?;
        Ok(rows
            .into_iter()
            .filter_map(|(node, heartbeat, flushed)| {
                let node = u16::try_from(node).ok()?;
                Some(WalNode { node, heartbeat_ms: heartbeat.unwrap_or(0), flushed_before: flushed.unwrap_or(0) })
            })
            .collect())
    })
}

fn set_flushed_before(store: &CassandraStore, log: &Arc<AckLog>, node: u16, sequence: u64) -> Result<(), CassandraError> {
    let log = log.clone();
    store.client.bridge.run(move |c| async move {
        let _permit = c.permit().await?;
        c.session
            .execute_unpaged(&log.statements.upsert_flushed, (sequence as i64, i32::from(node)))
            .await
            .map(drop)
            .map_err(request("write wal checkpoint"))
    })
}

fn heartbeat(store: &CassandraStore, log: &Arc<AckLog>) -> Result<(), CassandraError> {
    let log = log.clone();
    store.client.bridge.run(move |c| async move {
        let _permit = c.permit().await?;
        c.session
            .execute_unpaged(&log.statements.upsert_heartbeat, (now_ms(), i32::from(log.node)))
            .await
            .map(drop)
            .map_err(request("write heartbeat"))
    })
}

/// Called by the engine's flush: the rows below `token` are in stored blocks. Only once this
/// node's own rows were replayed at start.
pub(crate) fn flushed(store: &CassandraStore, log: &Arc<AckLog>, token: u64) {
    if !log.recovered.load(Ordering::Acquire) {
        return;
    }
    if let Err(error) = set_flushed_before(store, log, log.node, token) {
        // Only costs a longer replay should this node die: its rows stay.
        tracing::warn!(%error, "could not record which acknowledged writes are flushed");
    }
}

/// The rows of `node` from `from` on (sequence order), at most up to now plus a minute.
fn read_rows(store: &CassandraStore, log: &Arc<AckLog>, node: u16, from: u64) -> Result<Vec<(u64, Vec<u8>)>, CassandraError> {
    let now = wall_clock_micros();
    // Rows older than the TTL are gone: no need to read their partitions.
    let oldest = now.saturating_sub(log.ttl.as_micros() as u64);
    let first_slot = slot_of(from.max(oldest));
    let last_slot = slot_of(now + 60_000_000);
    let log = log.clone();
    store.client.bridge.run(move |c| async move {
        let mut rows = Vec::new();
        for slot in first_slot..=last_slot {
            let slot_rows: Vec<(i64, Vec<u8>)> =
                c.select_all(&log.statements.select_slot, (i32::from(node), slot, from as i64), "read wal rows").await?;
            rows.extend(slot_rows.into_iter().map(|(sequence, record)| (sequence as u64, record)));
        }
        Ok(rows)
    })
}

/// Writes `node`'s acknowledged rows not known flushed into `engine` (under its own ids), then
/// moves `node`'s `flushed_before` past them.
pub(crate) fn replay(store: &CassandraStore, log: &Arc<AckLog>, node: u16, engine: &Engine) -> Result<Replayed, CassandraError> {
    let from = nodes(store, log)?.into_iter().find(|n| n.node == node).map_or(0, |n| n.flushed_before.max(0) as u64);
    let rows = read_rows(store, log, node, from)?;
    let mut replayed = Replayed::default();
    let mut through = None;
    for (sequence, record) in rows {
        let (batch, keys) = WalRecord::decode(&record).map_err(|detail| CassandraError::Damaged {
            keyspace: store.keyspace.to_string(),
            segment: -1,
            detail,
        })?;
        let mut local = WriteBatch::new();
        for entry in batch.entries() {
            let Some((key, kind)) = keys.get(&entry.series) else { continue };
            let id = engine.series_id(key, *kind).map_err(CassandraError::Engine)?;
            local.push_column(id, &entry.timestamps, &entry.values).map_err(|e| CassandraError::MalformedGroup(e.to_string()))?;
        }
        engine.write(&local).map_err(CassandraError::Engine)?;
        replayed.rows += 1;
        replayed.points += local.len() as u64;
        through = Some(sequence);
    }
    if let Some(through) = through {
        set_flushed_before(store, log, node, through + 1)?;
    }
    Ok(replayed)
}

/// At start: this node's heartbeat, its own rows replayed into `engine` (a new disk lost them;
/// an old one repeats them harmlessly), then the thread that keeps the heartbeat and adopts
/// dead nodes every `visibility`.
pub(crate) fn start(store: &Arc<CassandraStore>, log: &Arc<AckLog>, engine: &Arc<Engine>) -> Result<Replayed, CassandraError> {
    refuse_if_id_in_use(store, log)?;
    let own = if nodes(store, log)?.iter().any(|n| n.node == log.node) {
        replay(store, log, log.node, engine)?
    } else {
        // A node never seen: nothing of it to replay, and nothing logged before now.
        set_flushed_before(store, log, log.node, log.frozen_token())?;
        Replayed::default()
    };
    heartbeat(store, log)?;
    crate::peers::advertise(store, log)?;
    crate::peers::refresh(store, log)?;
    log.recovered.store(true, Ordering::Release);
    let (store_weak, engine_weak): (Weak<CassandraStore>, Weak<Engine>) = (Arc::downgrade(store), Arc::downgrade(engine));
    let log = log.clone();
    let pause = store.visibility;
    std::thread::Builder::new()
        .name("sensordb-cassandra-ack".into())
        .spawn(move || loop {
            std::thread::sleep(pause);
            let Some(store) = store_weak.upgrade() else { break };
            if engine_weak.strong_count() == 0 {
                break;
            }
            // The engine is held only while adopting: whoever closes it must not find it
            // shared for longer (the peers' refresh below does not need it).
            let adopted = heartbeat(&store, &log).and_then(|()| match engine_weak.upgrade() {
                Some(engine) => adopt_dead_nodes(&store, &log, &engine).map(drop),
                None => Ok(()),
            });
            let polled = adopted.and_then(|()| crate::peers::refresh(&store, &log));
            if let Err(error) = polled {
                tracing::warn!(%error, "heartbeat or adoption of dead nodes failed; tried again at the next poll");
            }
        })
        .map_err(CassandraError::Runtime)?;
    Ok(own)
}

/// Refuses to start when another live process heartbeats under this node id. A heartbeat of
/// this id fresher than `dead_after` may be this node's own, written just before a crash or a
/// restart: the row is watched for two heartbeat periods (`visibility`, plus a margin) and only
/// a heartbeat that moves meanwhile counts as another live process. A quick restart thus
/// waits about two `visibility` periods; a start after `dead_after` not at all.
fn refuse_if_id_in_use(store: &CassandraStore, log: &Arc<AckLog>) -> Result<(), CassandraError> {
    let heartbeat_of = |nodes: Vec<WalNode>| nodes.into_iter().find(|n| n.node == log.node).map(|n| n.heartbeat_ms);
    let Some(first) = heartbeat_of(nodes(store, log)?) else { return Ok(()) };
    let age_ms = now_ms() - first;
    if age_ms >= log.dead_after.as_millis() as i64 {
        return Ok(());
    }
    let watch = store.visibility * 2 + Duration::from_millis(500);
    let started = std::time::Instant::now();
    while started.elapsed() < watch {
        std::thread::sleep((store.visibility / 2).max(Duration::from_millis(10)));
        let latest = heartbeat_of(nodes(store, log)?);
        if latest.is_some_and(|latest| latest != first) {
            let age_ms = now_ms() - latest.unwrap_or(first);
            return Err(CassandraError::NodeIdInUse { node: log.node, keyspace: store.keyspace.to_string(), age_ms });
        }
    }
    Ok(())
}

/// Replays the rows of every node silent for `dead_after`, when this node has the smallest id
/// of the live ones; returns the nodes adopted.
pub(crate) fn adopt_dead_nodes(store: &CassandraStore, log: &Arc<AckLog>, engine: &Engine) -> Result<Vec<(u16, Replayed)>, CassandraError> {
    let now = now_ms();
    let dead_after = log.dead_after.as_millis() as i64;
    let nodes = nodes(store, log)?;
    let is_live = |n: &WalNode| n.node == log.node || now - n.heartbeat_ms < dead_after;
    let first_live = nodes.iter().filter(|n| is_live(n)).map(|n| n.node).min();
    if first_live != Some(log.node) {
        return Ok(Vec::new());
    }
    let mut adopted = Vec::new();
    for dead in nodes.iter().filter(|n| !is_live(n)) {
        if log.adopted.lock().get(&dead.node) == Some(&dead.heartbeat_ms) {
            continue;
        }
        let replayed = replay(store, log, dead.node, engine)?;
        tracing::info!(node = dead.node, rows = replayed.rows, points = replayed.points, "adopted the acknowledged writes of a dead node");
        log.adopted.lock().insert(dead.node, dead.heartbeat_ms);
        adopted.push((dead.node, replayed));
    }
    Ok(adopted)
}

impl CassandraStore {
    /// With `ack_writes`: replays this node's own acknowledged rows not known flushed into
    /// `engine` (its data directory may be new), then starts the thread that writes this node's
    /// heartbeat and adopts dead nodes' rows every `visibility` (see `wal`). Call once, after
    /// the engine opened over this store and before serving. Without `ack_writes`: nothing.
    pub fn acknowledge_writes(
        store: &Arc<CassandraStore>,
        engine: &Arc<sensordb_engine::Engine>,
    ) -> std::result::Result<crate::Replayed, CassandraError> {
        match &store.ack {
            Some(log) => crate::wal::start(store, log, engine),
            None => Ok(crate::Replayed::default()),
        }
    }

    /// Replays the acknowledged rows of every node silent for `dead_after` into `engine` when
    /// this node is the live one of smallest id (what the thread of
    /// [`CassandraStore::acknowledge_writes`] does every `visibility`); the nodes adopted.
    pub fn adopt_dead_nodes(&self, engine: &sensordb_engine::Engine) -> std::result::Result<Vec<(u16, crate::Replayed)>, CassandraError> {
        match &self.ack {
            Some(log) => crate::wal::adopt_dead_nodes(self, log, engine),
            None => Ok(Vec::new()),
        }
    }

    /// Every node's acknowledged-write state (`wal_nodes`); empty without `ack_writes`.
    pub fn wal_nodes(&self) -> std::result::Result<Vec<crate::WalNode>, CassandraError> {
        match &self.ack {
            Some(log) => crate::wal::nodes(self, log),
            None => Ok(Vec::new()),
        }
    }

    /// Transaction ids this process has looked up in `transactions` (a COMPLETE of an id its
    /// window lacks, not flagged a first attempt).
    pub fn transactions_looked_up(&self) -> u64 {
        self.ack.as_ref().map_or(0, |log| log.lookups.load(Ordering::Relaxed))
    }

    /// `wal` rows this process has written.
    pub fn wal_rows_written(&self) -> u64 {
        self.ack.as_ref().map_or(0, |log| log.rows_written.load(Ordering::Relaxed))
    }
}
