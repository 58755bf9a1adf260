//! A rewrite's output segment in Cassandra (compaction, reclaim merges): written in state
//! `Writing`, invisible to reads and removed at the next open if the process dies first;
//! installed by one batch that makes it `Live` and the replaced segments `Removing` at once.

use crate::schema::SegmentState;
use crate::segment::{bigint, place_group, PlacedGroup, StoredSegment};
use crate::store::{CassandraStore, Removed};
use sensordb_engine::store::{GroupBuilder, SegmentRewrite, SegmentSummary};
use sensordb_engine::Result;
use std::sync::Weak;

/// A segment being written by a rewrite; see the module documentation.
pub(crate) struct CassandraRewrite<'a> {
    store: &'a CassandraStore,
    segment: StoredSegment,
    /// The end of the positions handed out.
    end_position: u64,
    replaced: Vec<u64>,
    sequence: u64,
    wal_checkpoint: u64,
    installed: bool,
}

impl<'a> CassandraRewrite<'a> {
    pub fn new(store: &'a CassandraStore, id: u64, replaced: Vec<u64>, sequence: u64, wal_checkpoint: u64) -> CassandraRewrite<'a> {
        let segment = store.new_segment(id, true);
        CassandraRewrite { store, segment, end_position: 0, replaced, sequence, wal_checkpoint, installed: false }
    }
}

impl SegmentRewrite for CassandraRewrite<'_> {
    fn append(&mut self, parts: Vec<GroupBuilder>) -> Result<u64> {
        let before = self.end_position;
        let id = self.segment.summary.id;
        for part in parts {
            let (base, sequence, wal_checkpoint) = (self.end_position, self.sequence, self.wal_checkpoint);
            let placed = self
                .store
                .with_lifetimes(|lifetimes| place_group(part, id, base, sequence, wal_checkpoint, &self.store.buckets, lifetimes))
                .map_err(|e| self.store.engine_error(e))?;
            let PlacedGroup { rows, group, entries, expiries, end_position } = placed;
            self.end_position = end_position;
            self.store.commit(rows, group, &entries)?;
            self.segment.add(&entries, &expiries, end_position, self.wal_checkpoint);
        }
        Ok(self.end_position - before)
    }

    fn install(mut self: Box<Self>) -> Result<Vec<SegmentSummary>> {
        let id = self.segment.summary.id;
        let mut states = vec![(bigint(id), SegmentState::Live)];
        states.extend(self.replaced.iter().map(|&r| (bigint(r), SegmentState::Removing)));
        self.store.run(|c| async move { c.set_segment_states(states).await })?;
        self.installed = true;
        let store = self.store;
        let replaced = std::mem::take(&mut self.replaced);
        let segment = std::mem::replace(&mut self.segment, store.new_segment(id, true));
        let summary = segment.summary;
        store.install_segments(segment, &replaced);
        store.sweep();
        Ok(vec![summary])
    }
}

impl Drop for CassandraRewrite<'_> {
    fn drop(&mut self) {
        if !self.installed {
            // Nothing reads an uninstalled segment: its rows go at the next sweep.
            // Never live: no other node lists it, so no grace either.
            let removed = Removed { id: self.segment.summary.id, not_before: None, keys: self.segment.keys(), pin: Weak::new() };
            self.store.state.write().graveyard.push(removed);
        }
    }
}
