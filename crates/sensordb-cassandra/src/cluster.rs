//! Many sensordb nodes on one keyspace (issue 15 items 3-4; design in docs/CASSANDRA.md):
//! node-scoped ids, the series each node publishes, and reading the other nodes' flushed data.
//!
//! - **Ids.** A node's segment ids are `node << 48 | n` ([`first_segment_id`]), its segments
//!   live in its own partition of `segments`, and its series ids are its engine's own dense
//!   ids, published in `series` (node, id → key, kind) by the flush that first stores a block
//!   of the series (`store`). No id is ever allocated across nodes, so nothing on the write path
//!   waits for another node or for a lightweight transaction.
//! - **Import** ([`refresh`], every `visibility` on a watcher thread): for every other node
//!   listed in `nodes`, its live segments are read from its `segments` partition; a segment
//!   not seen yet has its groups read, one seen while not sealed has its groups past the
//!   position read so far; segments gone or no longer live leave the index. Each imported block
//!   is indexed under this node's id of its series: the writer's id is looked up in the
//!   writer's `series` rows and the key registered in this node's catalog through the engine's
//!   [`SeriesDirectory`]. The block's row is still fetched by the writer's id (the segment's
//!   source keeps it per block).
//! - **What stays local**: summaries, compaction and reclaim see only the node's own segments;
//!   another node's segments are its own to rewrite, expire and remove.
//!
//! - **Removal grace**: a writer deletes a removed segment's rows only `removal_grace` after the
//!   removal (the watcher sweeps), so a read elsewhere that listed it before its poll finishes.
//! - **Sequences** are `max(last + 1, wall-clock µs)` with a `node_id` (`store`): a later flush
//!   wins on a repeated timestamp whichever node made it.
//!
//! Not done yet (see docs/CASSANDRA.md): shared database definitions and series deletes, a
//! lease on the node id.

use crate::error::CassandraError;
use crate::schema::{series_bucket, SegmentState};
use crate::store::CassandraStore;
use crate::ttl::decode_expiries;
use sensordb_engine::store::{IndexEntry, SeriesDirectory};
use sensordb_engine::{SeriesId, SeriesKey, ValueKind};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

/// Bits of a segment id below the node id.
const NODE_SHIFT: u32 = 48;

/// The largest node id: segment ids stay positive Cassandra bigints.
pub const NODE_ID_MAX: u16 = (1 << (63 - NODE_SHIFT)) - 1;

/// The first segment id of node `node` (`None`: a keyspace of one process, node 0).
pub(crate) fn first_segment_id(node: Option<u16>) -> u64 {
    (u64::from(node.unwrap_or(0)) << NODE_SHIFT) + 1
}

/// The node whose segment `id` is.
pub(crate) fn node_of_segment(id: u64) -> u16 {
    (id >> NODE_SHIFT) as u16
}

/// What the importer remembers between polls: this node's id for each writer's series id
/// (`None`: refused here, a value kind that differs, say), and which foreign segments it has
/// read whole.
#[derive(Default)]
pub(crate) struct Cluster {
    translations: HashMap<(u16, SeriesId), Option<SeriesId>>,
    /// Foreign segments read after they were sealed: nothing more to read in them.
    complete: std::collections::HashSet<u64>,
    /// Foreign segments: which of their groups have been read.
    read_to: HashMap<u64, GroupsRead>,
}

/// The groups of one foreign segment read so far. Its writer commits groups concurrently, so
/// a group may land after one placed behind it: a high-water mark would skip it for good. Kept
/// as the end of the run of groups read from position 0 without a gap, and the groups read
/// beyond it; each poll reads from that end. A failed commit leaves a gap that never fills:
/// polls then read the groups past it again (and skip them) until the segment is sealed.
#[derive(Debug, Default, PartialEq, Eq)]
struct GroupsRead {
    contiguous_end: u64,
    /// Position → end position of groups read past `contiguous_end`.
    beyond: std::collections::BTreeMap<u64, u64>,
}

impl GroupsRead {
    fn from(&self) -> u64 {
        self.contiguous_end
    }

    fn contains(&self, position: u64) -> bool {
        position < self.contiguous_end || self.beyond.contains_key(&position)
    }

    fn record(&mut self, position: u64, end_position: u64) {
        if position >= self.contiguous_end {
            self.beyond.insert(position, end_position);
        }
        while let Some(end) = self.beyond.remove(&self.contiguous_end) {
            self.contiguous_end = end;
        }
    }
}

/// What one [`refresh`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Other nodes' blocks indexed.
    pub blocks_imported: usize,
    /// Other nodes' segments that left the index.
    pub segments_dropped: usize,
}

/// A foreign group read from Cassandra: entries under the writer's ids.
struct ReadGroup {
    position: u64,
    entries: Vec<IndexEntry>,
    expiries: Vec<Option<i64>>,
    end_position: u64,
}

/// Reads the other nodes' segments into the index; see the module documentation.
pub(crate) fn refresh(store: &CassandraStore) -> Result<Refreshed, CassandraError> {
    let (Some(me), Some(directory)) = (store.node_id, store.directory()) else { return Ok(Refreshed::default()) };
    let _one_at_a_time = store.refreshing.lock();
    let nodes = store.client.bridge.run(|c| async move { c.select_nodes().await })?;
    let mut refreshed = Refreshed::default();
    for node in nodes.into_iter().filter_map(|n| u16::try_from(n).ok()).filter(|&n| n != me) {
        refresh_node(store, directory.as_ref(), node, &mut refreshed)?;
    }
    Ok(refreshed)
}

fn refresh_node(
    store: &CassandraStore,
    directory: &dyn SeriesDirectory,
    node: u16,
    refreshed: &mut Refreshed,
) -> Result<(), CassandraError> {
    let rows = store.client.bridge.run(move |c| async move { c.select_segments(i32::from(node)).await })?;
    let live: BTreeMap<u64, bool> = rows
        .into_iter()
        .filter(|&(id, state, _)| state == SegmentState::Live as i8 && id > 0)
        .map(|(id, _, sealed)| (id as u64, sealed))
        .filter(|&(id, _)| node_of_segment(id) == node)
        .collect();
    // Segments the writer removed (or is removing) leave the index.
    let mut changed: Vec<SeriesId> = Vec::new();
    {
        let mut state = store.state.write();
        let gone: Vec<u64> = state.foreign.keys().copied().filter(|&id| node_of_segment(id) == node && !live.contains_key(&id)).collect();
        let mut cluster = store.cluster.lock();
        for id in gone {
            cluster.complete.remove(&id);
            cluster.read_to.remove(&id);
            if let Some(segment) = state.foreign.remove(&id) {
                state.index.remove_blocks(id, segment.lives.iter().map(|l| l.series));
                changed.extend(segment.lives.iter().map(|l| l.series));
                refreshed.segments_dropped += 1;
            }
        }
    }
    for (&id, &sealed) in &live {
        if store.cluster.lock().complete.contains(&id) {
            continue;
        }
        let from = store.cluster.lock().read_to.get(&id).map_or(0, GroupsRead::from);
        let mut groups = read_groups(store, id, from)?;
        if let Some(read) = store.cluster.lock().read_to.get(&id) {
            groups.retain(|g| !read.contains(g.position));
        }
        let Some(translated) = translate(store, directory, node, &groups)? else {
            // A series row not readable yet: this segment waits for the next poll.
            continue;
        };
        let mut state = store.state.write();
        let state = &mut *state;
        let segment = state.foreign.entry(id).or_insert_with(|| store.new_foreign_segment(id));
        for (group, (entries, expiries, origin)) in groups.iter().zip(translated) {
            if let Some(source_origin) = &segment.source.origin {
                source_origin.write().extend(origin);
            }
            segment.add(&entries, &expiries, group.end_position, 0);
            state.index.insert(id, &entries);
            changed.extend(entries.iter().map(|e| e.series));
            refreshed.blocks_imported += entries.len();
        }
        let mut cluster = store.cluster.lock();
        let read = cluster.read_to.entry(id).or_default();
        for group in &groups {
            read.record(group.position, group.end_position);
        }
        if sealed {
            // Sealed before its groups were read: every group is in.
            cluster.complete.insert(id);
        }
    }
    if !changed.is_empty() {
        // After the index lists them: a cache filled from here on sees them.
        changed.sort_unstable();
        changed.dedup();
        directory.blocks_changed(&changed);
    }
    Ok(())
}

/// The groups of foreign segment `id` from position `from` on, their entries under the writer's
/// series ids.
fn read_groups(store: &CassandraStore, id: u64, from: u64) -> Result<Vec<ReadGroup>, CassandraError> {
    let segment = crate::segment::bigint(id);
    let rows = store.client.bridge.run(move |c| async move { c.select_groups(segment).await })?;
    let damaged = |detail: String| CassandraError::Damaged { keyspace: store.keyspace.to_string(), segment, detail };
    let mut groups = Vec::new();
    for row in rows.into_iter().filter(|g| g.position >= 0 && g.position as u64 >= from) {
        let entries = IndexEntry::decode_list(&row.entries).map_err(|e| damaged(format!("group at {}: {e}", row.position)))?;
        let expiries = decode_expiries(row.expiries.as_deref(), entries.len())
            .ok_or_else(|| damaged(format!("group at {}: expiries do not match its blocks", row.position)))?;
        let end_position = u64::try_from(row.end_position).map_err(|_| damaged("negative position".into()))?;
        groups.push(ReadGroup { position: row.position as u64, entries, expiries, end_position });
    }
    Ok(groups)
}

/// Per group: its entries under this node's series ids, their expiries, and the writer's id of
/// each (by offset); blocks of series refused here are left out. `None` when a series row of
/// the writer is not readable yet.
#[allow(clippy::type_complexity)] // one private caller, which destructures it at once
fn translate(
    store: &CassandraStore,
    directory: &dyn SeriesDirectory,
    node: u16,
    groups: &[ReadGroup],
) -> Result<Option<Vec<(Vec<IndexEntry>, Vec<Option<i64>>, Vec<(u64, SeriesId)>)>>, CassandraError> {
    let mut missing: Vec<SeriesId> = groups
        .iter()
        .flat_map(|g| g.entries.iter().map(|e| e.series))
        .filter(|&series| !store.cluster.lock().translations.contains_key(&(node, series)))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() && !learn_series(store, directory, node, &missing)? {
        return Ok(None);
    }
    let cluster = store.cluster.lock();
    Ok(Some(
        groups
            .iter()
            .map(|group| {
                let mut out = (Vec::new(), Vec::new(), Vec::new());
                for (entry, expiry) in group.entries.iter().zip(&group.expiries) {
                    let Some(Some(local)) = cluster.translations.get(&(node, entry.series)) else { continue };
                    out.0.push(IndexEntry { series: *local, ..*entry });
                    out.1.push(*expiry);
                    out.2.push((entry.offset, entry.series));
                }
                out
            })
            .collect(),
    ))
}

/// Reads the `series` rows of `node` holding `wanted` and registers their keys here; returns
/// false when one of them is not there (yet).
fn learn_series(store: &CassandraStore, directory: &dyn SeriesDirectory, node: u16, wanted: &[SeriesId]) -> Result<bool, CassandraError> {
    let mut buckets: Vec<i32> = wanted.iter().map(|s| series_bucket(s.0)).collect();
    buckets.dedup();
    let mut published: HashMap<SeriesId, (String, i8)> = HashMap::new();
    for bucket in buckets {
        let rows = store.client.bridge.run(move |c| async move { c.select_series(i32::from(node), bucket).await })?;
        for (id, key, kind) in rows {
            if let Ok(id) = u32::try_from(id) {
                published.insert(SeriesId(id), (key, kind));
            }
        }
    }
    let mut learned = Vec::with_capacity(wanted.len());
    for series in wanted {
        let Some((key, kind)) = published.get(series) else { return Ok(false) };
        let local = match (SeriesKey::parse(key), u8::try_from(*kind).ok().and_then(|k| ValueKind::try_from(k).ok())) {
            (Ok(key), Some(kind)) => match directory.register(&key, kind) {
                Ok(local) => Some(local),
                Err(error) => {
                    tracing::warn!(node, series = series.0, key = %key.canonical(), %error, "another node's series is refused here; its blocks are not read");
                    None
                }
            },
            _ => {
                tracing::warn!(node, series = series.0, key, kind, "another node published a series key or kind this node cannot read");
                None
            }
        };
        learned.push((*series, local));
    }
    let mut cluster = store.cluster.lock();
    for (series, local) in learned {
        cluster.translations.insert((node, series), local);
    }
    Ok(true)
}

/// Polls the other nodes every `visibility` on a thread of its own while the store lives.
pub(crate) fn watch(store: &Arc<CassandraStore>) -> std::io::Result<()> {
    let weak: Weak<CassandraStore> = Arc::downgrade(store);
    let pause = store.visibility;
    std::thread::Builder::new().name("sensordb-cassandra-watch".into()).spawn(move || loop {
        std::thread::sleep(pause);
        // Ends once the store is dropped.
        let Some(store) = weak.upgrade() else { break };
        if let Err(error) = refresh(&store) {
            tracing::warn!(keyspace = %store.keyspace, %error, "reading other nodes' segments failed; retried at the next poll");
        }
        // Deletes the rows of removed segments whose grace is over.
        store.sweep();
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_ids_carry_their_node_and_node_zero_keeps_the_single_process_numbering() {
        assert_eq!(first_segment_id(None), 1);
        assert_eq!(first_segment_id(Some(0)), 1);
        assert_eq!(first_segment_id(Some(1)), (1 << 48) + 1);
        assert_eq!(node_of_segment(first_segment_id(Some(NODE_ID_MAX)) + 1_000_000), NODE_ID_MAX);
        assert_eq!(node_of_segment(first_segment_id(Some(7))), 7);
        assert_eq!(node_of_segment(12_345), 0);
        // Positive as a Cassandra bigint for every node, with room for 2^47 segments.
        assert_eq!(NODE_ID_MAX, 32_767);
        assert!(i64::try_from(first_segment_id(Some(NODE_ID_MAX)) + (1 << 47)).is_ok());
    }

    #[test]
    fn groups_committed_out_of_order_are_each_read_once() {
        let mut read = GroupsRead::default();
        // Groups [0, 10), [10, 25), [25, 30): the second lands last.
        read.record(0, 10);
        read.record(25, 30);
        assert_eq!(read.from(), 10, "a poll reads again from the first group not seen");
        assert!(read.contains(0) && read.contains(25) && !read.contains(10));
        read.record(10, 25);
        assert_eq!(read.from(), 30);
        assert!(read.beyond.is_empty());
        // A failed commit's gap at [30, 40) holds the start back; later groups are still known.
        read.record(40, 50);
        assert_eq!((read.from(), read.contains(40), read.contains(30)), (30, true, false));
    }

    #[test]
    fn series_partitions_hold_65536_ids() {
        assert_eq!(series_bucket(1), 0);
        assert_eq!(series_bucket(65_535), 0);
        assert_eq!(series_bucket(65_536), 1);
        assert_eq!(series_bucket(u32::MAX), 65_535);
    }
}
