//! Database definitions shared by the sensordb nodes of a keyspace (issue 15 item 3): each
//! database's retention (period, capacity, overrides) is a row of the `databases` table, in
//! the line format of the engine's `databases` file (`Databases::encode` of that database
//! alone). Each node keeps its engine's own copy and merges both ways every `visibility`:
//!
//! - a definition changed on this node since the last merge is written to the table (a plain
//!   upsert: definitions are rare administrative changes, and the last write wins, as for any
//!   Cassandra cell);
//! - otherwise a definition the table holds that differs from the engine's is applied to the
//!   engine (`Engine::set_database_policy`).
//!
//! At the first merge after start the table wins: a database it defines is applied to the
//! engine even if the node's `[[databases]]` said otherwise (logged), and only databases the
//! table lacks are written to it. So a node started with a stale configuration does not undo
//! a change made through another node.
//!
//! Databases are never dropped (the engine has no such operation); series deletes are not
//! shared yet (docs/CASSANDRA.md).

use crate::error::CassandraError;
use crate::store::CassandraStore;
use sensordb_engine::{DatabasePolicy, Databases, Engine};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// What the merge remembers: the engine's definitions as the last merge left them (`None`
/// before the first).
#[derive(Default)]
pub struct DatabaseSync {
    last: Option<BTreeMap<String, DatabasePolicy>>,
}

/// What one merge did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabasesMerged {
    /// Databases written to the table.
    pub published: Vec<String>,
    /// Databases applied to the engine from the table.
    pub applied: Vec<String>,
}

/// The definition text of one database.
fn encode(name: &str, policy: &DatabasePolicy) -> String {
    Databases { policies: BTreeMap::from([(name.to_string(), policy.clone())]) }.encode()
}

/// The policy of `name` in a definition text; `None` if it does not parse or names another.
fn decode(name: &str, text: &str) -> Option<DatabasePolicy> {
    Databases::decode(text).ok()?.policies.remove(name)
}

/// Merges the engine's definitions with the table's; see the module documentation.
pub(crate) fn merge(store: &CassandraStore, engine: &Engine, sync: &mut DatabaseSync) -> Result<DatabasesMerged, CassandraError> {
    let local = engine.databases().policies;
    let rows = store.client.bridge.run(|c| async move { c.select_databases().await })?;
    let mut shared = BTreeMap::new();
    for (name, text) in rows {
        match decode(&name, &text) {
            Some(policy) => {
                shared.insert(name, policy);
            }
            None => tracing::warn!(keyspace = %store.keyspace, database = %name, "a shared database definition does not parse; ignored"),
        }
    }
    let mut merged = DatabasesMerged::default();
    let mut publish = Vec::new();
    for (name, policy) in &local {
        let changed_here = match &sync.last {
            Some(last) => last.get(name) != Some(policy),
            // First merge: the table wins where it has the database.
            None => !shared.contains_key(name),
        };
        if changed_here {
            publish.push((name.clone(), encode(name, policy)));
            merged.published.push(name.clone());
        }
    }
    let mut next = local.clone();
    for (name, policy) in shared {
        if local.get(&name) == Some(&policy) || merged.published.contains(&name) {
            continue;
        }
        if sync.last.is_none() && local.contains_key(&name) {
            tracing::warn!(keyspace = %store.keyspace, database = %name, "this node's definition of the database differs from the keyspace's; the keyspace's applies");
        }
        engine.set_database_policy(&name, policy.clone()).map_err(CassandraError::Engine)?;
        merged.applied.push(name.clone());
        next.insert(name, policy);
    }
    if !publish.is_empty() {
        store.client.bridge.run(|c| async move { c.upsert_databases(publish).await })?;
    }
    sync.last = Some(next);
    Ok(merged)
}

/// Merges every `visibility` on a thread of its own while both the store and the engine live.
pub(crate) fn share(store: &Arc<CassandraStore>, engine: &Arc<Engine>) -> std::io::Result<()> {
    let (store, engine): (Weak<CassandraStore>, Weak<Engine>) = (Arc::downgrade(store), Arc::downgrade(engine));
    std::thread::Builder::new().name("sensordb-cassandra-databases".into()).spawn(move || {
        let mut sync = DatabaseSync::default();
        while let Some(pause) = store.upgrade().map(|s| s.visibility) {
            std::thread::sleep(pause);
            // Ends once the store or the engine is dropped.
            let (Some(store), Some(engine)) = (store.upgrade(), engine.upgrade()) else { break };
            if let Err(error) = merge(&store, &engine, &mut sync) {
                tracing::warn!(keyspace = %store.keyspace, %error, "merging shared database definitions failed; retried at the next poll");
            }
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_definition_round_trips_and_must_name_its_database() {
        let policy = DatabasePolicy { period: Some(Duration::from_secs(86_400)), capacity_bytes: Some(1 << 30), overrides: Vec::new() };
        let text = encode("plant 7", &policy);
        assert_eq!(decode("plant 7", &text), Some(policy));
        assert_eq!(decode("other", &text), None, "a row whose text names another database is not taken");
        assert_eq!(decode("plant 7", "garbage"), None);
    }
}
