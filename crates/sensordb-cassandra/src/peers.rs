//! The nodes a client may use (issue 15 item 6, "a node can tell clients its peers"): each node
//! with `ack_writes` and an advertised address writes it to `node_addresses`; the nodes whose
//! heartbeat (`wal_nodes`, see `wal`) is fresher than `dead_after` are the live ones. The list is
//! refreshed by the heartbeat thread every `visibility` and kept in memory, so answering a
//! client (the native protocol's PEERS) costs no request to Cassandra.
//!
//! ```text
//! node_addresses   PRIMARY KEY (node int)   native text   the host:port clients reach it at
//! ```
//!
//! A table of its own rather than a column of `wal_nodes`: keyspaces made before it gain it by
//! `CREATE TABLE IF NOT EXISTS` at open, with no `ALTER TABLE` to run by hand.

use crate::error::{boxed, CassandraError};
use crate::store::CassandraStore;
use crate::wal::{now_ms, AckLog};
use parking_lot::Mutex;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;
use std::collections::HashMap;
use std::sync::Arc;

/// The CQL that creates the table (with the others, see `schema`).
pub(crate) fn create_statement(keyspace: &str) -> String {
    format!("CREATE TABLE IF NOT EXISTS {keyspace}.node_addresses (node int PRIMARY KEY, native text)")
}

/// This node's advertised address and the live peers last read.
pub(crate) struct Peers {
    upsert: PreparedStatement,
    select: PreparedStatement,
    /// `host:port` of this node's native listener as clients reach it; `None`: not advertised.
    advertise: Option<String>,
    /// (node id, native address) of the live nodes with an address, by node id; this one first
    /// read at start.
    live: Mutex<Vec<(u16, String)>>,
}

impl Peers {
    pub async fn prepare(
        session: &Session,
        keyspace: &str,
        consistency: Consistency,
        advertise: Option<String>,
    ) -> Result<Peers, CassandraError> {
        let prepare = |cql: String| crate::schema::prepare_idempotent(session, cql, consistency);
        Ok(Peers {
            upsert: prepare(format!("UPDATE {keyspace}.node_addresses SET native = ? WHERE node = ?")).await?,
            select: prepare(format!("SELECT node, native FROM {keyspace}.node_addresses")).await?,
            advertise,
            live: Mutex::new(Vec::new()),
        })
    }

    /// The live peers last read (this node included when it advertises an address).
    pub fn live(&self) -> Vec<(u16, String)> {
        self.live.lock().clone()
    }
}

/// Writes this node's advertised address (nothing without one).
pub(crate) fn advertise(store: &CassandraStore, log: &Arc<AckLog>) -> Result<(), CassandraError> {
    let Some(address) = log.peers.advertise.clone() else { return Ok(()) };
    let log = log.clone();
    store.client.bridge.run(move |c| async move {
        let _permit = c.permit().await?;
        c.session
            .execute_unpaged(&log.peers.upsert, (address.as_str(), i32::from(log.node)))
            .await
            .map(drop)
            .map_err(|e| CassandraError::Request { what: "write node address", source: boxed(e) })
    })
}

/// Reads the heartbeats and addresses and keeps the live nodes that have an address.
pub(crate) fn refresh(store: &CassandraStore, log: &Arc<AckLog>) -> Result<(), CassandraError> {
    let nodes = crate::wal::nodes(store, log)?;
    let addresses = {
        let log = log.clone();
        store.client.bridge.run(move |c| async move {
            let rows: Vec<(i32, Option<String>)> = c.select_all(&log.peers.select, (), "read node addresses").await?;
            Ok(rows.into_iter().filter_map(|(node, native)| Some((u16::try_from(node).ok()?, native?))).collect::<HashMap<u16, String>>())
        })?
    };
    let now = now_ms();
    let dead_after = log.dead_after.as_millis() as i64;
    let mut live: Vec<(u16, String)> = nodes
        .iter()
        .filter(|n| n.node == log.node || now - n.heartbeat_ms < dead_after)
        .filter_map(|n| addresses.get(&n.node).map(|address| (n.node, address.clone())))
        .collect();
    live.sort();
    *log.peers.live.lock() = live;
    Ok(())
}

impl CassandraStore {
    /// The live nodes sharing the keyspace with an advertised native address, as last read by
    /// the heartbeat thread (see `peers`); empty without `ack_writes`.
    pub fn live_peers(&self) -> Vec<(u16, String)> {
        self.ack.as_ref().map_or_else(Vec::new, |log| log.peers.live())
    }
}
