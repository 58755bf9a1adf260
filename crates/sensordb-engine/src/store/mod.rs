//! Where sealed blocks live, behind the [`BlockStore`] trait. The engine holds its store as an
//! `Arc<dyn BlockStore>` and its write path, reads, compaction and reclaim talk only to this
//! trait, so another backend (Cassandra/ScyllaDB) can stand in for local segment files without
//! touching them. `SegmentStore` is the local implementation; [`MemoryStore`] keeps
//! everything in memory and runs the engine's model tests to prove the seam.
//!
//! Dynamic dispatch costs a virtual call per store call: one `blocks` listing per read and one
//! `read_block` per block decoded (itself a checksum and a decompression of thousands of
//! points), negligible next to the work each call does.
//!
//! # What a backend provides
//! - **Groups.** Writes arrive as flush groups ([`GroupBuilder`]): encoded blocks and the shared
//!   timestamp records they refer to (see the `block` module). [`BlockStore::put_group`] makes a
//!   group durable and numbers it: a later group wins over an earlier one on a repeated
//!   timestamp, so sequences must grow in the order groups become durable.
//! - **Segments.** Blocks are kept in *segments*, the unit maintenance lists, rewrites and
//!   removes whole: a segment file here, a time bucket of rows in a distributed table. Each has
//!   a [`SegmentSummary`] and the [`BlockLife`] of each block, so compaction and reclaim decide
//!   from metadata alone ([`BlockStore::visit_segments_against`] lets a store that keeps one
//!   summary per series and segment, as the segment store does, read block lists only where a
//!   reclaim cutoff falls inside one). A segment still taking groups is not `sealed` and is never rewritten.
//! - **Reads.** [`BlockStore::blocks`] lists a series' blocks in a time range, each with a
//!   [`BlockPin`]: a handle on whatever holds the block, so it stays readable until the read
//!   drops it, even if maintenance removes its segment meanwhile.
//! - **Rewrites.** [`BlockStore::begin_rewrite`] writes a new segment, invisible to reads, that
//!   [`SegmentRewrite::install`] swaps in for the segments it replaces in one step (readers see
//!   the old blocks or the new ones, never both or neither); a crash before that leaves the
//!   old ones in place.
//! - **Sealing by age.** A segment is sealed when it is full, and also when it has been open
//!   for the engine's `segment_seal_age` ([`BlockStore::seal_if_older_than`]), so the short
//!   blocks of a quiet server reach compaction without a restart.
//! - **Recovery.** After opening, the store names the series it holds blocks of and the WAL
//!   checkpoint its groups cover, so the engine replays only newer WAL files.
//! - **Series.** The engine hands the store a [`SeriesDirectory`] at open
//!   ([`BlockStore::set_series_directory`]): the storage period of each series, for a backend
//!   that can expire data by itself (Cassandra's TTLs; reclaim still decides what is dead), and
//!   the catalog's keys, for a backend shared by several engines that publishes its series and
//!   registers those of the others. A store that ignores it (the segment store) loses nothing.

mod memory;
mod segments;
mod summary;

pub use memory::MemoryStore;
pub(crate) use segments::{SegmentStore, SegmentStoreOptions, SEGMENT_BLOCKS_MAX};
pub use summary::{BlockLife, SegmentSummary};

// The types the trait's signatures use, public here for backends outside the crate.
pub use crate::block::{Block, BlockHeader, ValueStats};
pub use crate::index::BlockRef;
pub use crate::segment::{GroupBuilder, IndexEntry, RawBlock};
// What a backend outside the crate needs to index, verify and decode the blocks it keeps.
pub use crate::block::{decode_shared_timestamps, decode_with_shared, shared_reference, verify_shared_record, BlockError};
pub use crate::index::BlockIndex;

use crate::error::Result;
use crate::model::{SeriesId, SeriesKey, Timestamp, ValueKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Sizes of what a store holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub segments: usize,
    pub blocks: usize,
    pub points: u64,
    /// Bytes the store takes (for segment files, bytes on disk).
    pub bytes: u64,
}

/// Reads the blocks of one unit a store pins for readers (a segment file, a group in memory).
pub trait BlockSource: Send + Sync {
    /// Reads and verifies the block `entry` describes.
    fn read(&self, entry: &IndexEntry) -> Result<Block>;
}

/// A pin on whatever holds a listed block: while a [`ListedBlock`] holds it, the block stays
/// readable (for segments, the file stays open), whatever the store removes meanwhile.
#[derive(Clone)]
pub struct BlockPin(Arc<dyn BlockSource>);

impl BlockPin {
    pub fn new(source: Arc<dyn BlockSource>) -> BlockPin {
        BlockPin(source)
    }
}

/// A block listed for a read, with the pin that keeps it readable.
#[derive(Clone)]
pub struct ListedBlock {
    pub block: BlockRef,
    pub pin: BlockPin,
}

impl ListedBlock {
    /// Reads and verifies the block through its pin.
    pub fn read(&self) -> Result<Block> {
        self.pin.0.read(&self.block.entry)
    }
}

/// What the engine tells its store about series: see [`BlockStore::set_series_directory`].
pub trait SeriesDirectory: Send + Sync {
    /// The storage period of `series`, as its database's retention policy sets it now (see
    /// [`crate::DatabasePolicy::period_of`]); `None` when the data is kept until capacity runs
    /// out, or the series is unknown.
    fn period(&self, series: SeriesId) -> Option<Duration>;
    /// The key and value kind of `series` (deleted or not), if the catalog has it.
    fn series(&self, series: SeriesId) -> Option<(Arc<SeriesKey>, ValueKind)>;
    /// The id of `key`, registered with `kind` when new, as [`crate::Engine::series_id`] does:
    /// for a store that reads blocks other engines wrote, under this engine's ids.
    fn register(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesId>;
    /// Tells the engine that blocks of `series` appeared in or left the store other than by
    /// its own flushes and rewrites (another engine's, say), after the store lists them: caches
    /// of what the blocks hold (each series' newest point) are dropped.
    fn blocks_changed(&self, series: &[SeriesId]);
}

/// A segment being written by a rewrite (compaction, reclaim merge): invisible to reads until
/// [`SegmentRewrite::install`]. Dropping it unfinished leaves the replaced segments as they are.
pub trait SegmentRewrite {
    /// Appends one group made of `parts`; every block gets the rewrite's sequence. Returns the
    /// bytes written for it.
    fn append(&mut self, parts: Vec<GroupBuilder>) -> Result<u64>;
    /// Makes the new segments durable and puts them in place of the replaced ones, which are
    /// removed, in one step; returns their summaries. A backend may cut a large rewrite into
    /// several segments, between appends.
    fn install(self: Box<Self>) -> Result<Vec<SegmentSummary>>;
}

/// Sealed blocks: the write, read, recovery and maintenance calls the engine makes. See the
/// module documentation for what each part asks of a backend.
pub trait BlockStore: Send + Sync {
    // Write path.

    /// Makes the blocks of one flush or direct write durable; afterwards [`BlockStore::blocks`]
    /// lists them. Concurrent calls may be committed together. Returns the group's sequence:
    /// groups are numbered in the order they become durable, and a newer group wins on repeated
    /// timestamps. `wal_checkpoint` is the id of the first WAL file not covered by this and
    /// earlier groups.
    fn put_group(&self, group: GroupBuilder, wal_checkpoint: u64) -> Result<u64>;
    /// Seals whatever is open; the store stays usable.
    fn seal(&self) -> Result<()>;
    /// How long ago the segment still taking groups took its first one; `None` when no segment
    /// is open (or the backend has no such thing). The engine's flusher asks every second, so
    /// this must not wait for a group being written.
    fn open_segment_age(&self) -> Option<Duration> {
        None
    }
    /// Seals the open segment if it took its first group at least `age` ago (checked under the
    /// store's own lock, so a segment opened meanwhile is left alone); returns whether it did.
    fn seal_if_older_than(&self, age: Duration) -> Result<bool> {
        let _ = age;
        Ok(false)
    }

    /// Takes the engine's series directory, once, before the engine's first flush. A store
    /// that expires rows by itself may take their lifetime from it (the engine keeps deciding
    /// what is dead, in reads and reclaim), and a store shared by several engines may publish
    /// its series' keys and register the others'. Ignoring it (the default) is correct for a
    /// store of one engine.
    fn set_series_directory(&self, directory: Arc<dyn SeriesDirectory>) {
        let _ = directory;
    }

    // Acknowledged writes kept by the store too (the Cassandra store's `wal` table, issue 15
    // item 5): a store that keeps nothing but blocks leaves these as they are.

    /// Called by `Engine::write` once the write is durable locally (its WAL record synced under
    /// the engine's durability) and its points are in the active memtable, before the write
    /// returns: an error fails the write (its points may be stored here all the same, as after
    /// any failed write). Default: nothing.
    fn log_write(&self, batch: &crate::batch::WriteBatch, marks: &[crate::mark::TxMark]) -> Result<()> {
        let _ = (batch, marks);
        Ok(())
    }
    /// Called under the lock that freezes the active memtable for a flush: a token standing
    /// for every `log_write` that has returned or is past its memtable insert, given back to
    /// [`BlockStore::log_flushed`] once that memtable's blocks are stored. Default: 0.
    fn log_frozen(&self) -> u64 {
        0
    }
    /// The writes before `token` (see [`BlockStore::log_frozen`]) are in stored blocks.
    fn log_flushed(&self, token: u64) {
        let _ = token;
    }
    /// A completion mark given to [`BlockStore::log_write`] by this or another engine sharing
    /// the store, when the store keeps them (a retried transaction sent to another node).
    /// Default: none.
    fn logged_mark(&self, client: &[u8; 16], tx: &[u8; 16]) -> Result<Option<crate::mark::TxMark>> {
        let _ = (client, tx);
        Ok(None)
    }
    /// The live nodes sharing this store, each with the native address clients reach it at
    /// (node id, `host:port`), when the store knows them (a store shared by several servers).
    /// Answered from memory: a server calls it on its async workers. Default: none.
    fn peers(&self) -> Vec<(u16, String)> {
        Vec::new()
    }
    /// [`BlockStore::logged_mark`] of several ids at once, in order: a store that asks over the
    /// network overlaps the lookups (one wait for all). Default: one after the other.
    fn logged_marks(&self, ids: &[([u8; 16], [u8; 16])]) -> Result<Vec<Option<crate::mark::TxMark>>> {
        ids.iter().map(|(client, tx)| self.logged_mark(client, tx)).collect()
    }

    // Read path.

    /// Blocks of `series` that may hold points in `[from, to)`, ordered by min timestamp.
    fn blocks(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<ListedBlock>;
    /// The time of the oldest point of `series` in the store, or a time before it (`None`:
    /// no blocks): a query that wants only a measurement's oldest rows skips the series that
    /// cannot hold them. A store that indexes its blocks' extents answers from the index; the
    /// default lists every block.
    fn oldest_timestamp(&self, series: SeriesId) -> Option<Timestamp> {
        self.blocks(series, Timestamp::MIN, Timestamp::MAX).iter().map(|b| b.block.entry.min_timestamp).min()
    }
    /// Reads and verifies one listed block.
    fn read_block(&self, block: &ListedBlock) -> Result<Block> {
        block.read()
    }
    fn stats(&self) -> StoreStats;

    // Recovery.

    /// Every series with blocks, and the kind of its values.
    fn series_kinds(&self) -> Vec<(SeriesId, ValueKind)>;
    /// [`BlockStore::series_kinds`] of the series whose id is above `id`: what start-up asks,
    /// to find series the catalog lost. A store that can answer without listing every series
    /// should: start-up otherwise pays for each series of a large store.
    fn series_kinds_above(&self, id: SeriesId) -> Vec<(SeriesId, ValueKind)> {
        self.series_kinds().into_iter().filter(|(series, _)| *series > id).collect()
    }
    /// Every WAL file with a smaller id is fully contained in the store (0 when empty).
    fn wal_checkpoint(&self) -> u64;

    // Maintenance: compaction and reclaim.

    /// Summaries of all segments, by id.
    fn summaries(&self) -> Vec<SegmentSummary>;
    /// Calls `visit` with the summary and block lives of every segment, possibly under a lock:
    /// keep `visit` short.
    fn visit_segments(&self, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife]));
    /// [`BlockStore::visit_segments`] for a caller that only asks of each block whether its
    /// newest point is older than `cutoff(series)` (dead), and sums or takes the newest of the
    /// rest: the lives of one series in one segment that are all dead or all live may come
    /// merged (that series, their newest point, their bytes), so a store that keeps one summary
    /// per series and segment reads block lists only where a cutoff falls inside one.
    fn visit_segments_against(&self, cutoff: &dyn Fn(SeriesId) -> Timestamp, visit: &mut dyn FnMut(&SegmentSummary, &[BlockLife])) {
        let _ = cutoff;
        self.visit_segments(visit)
    }
    /// Every block of the segments `ids`, grouped by series (series in id order), each series'
    /// blocks by ascending sequence.
    fn blocks_of_segments(&self, ids: &[u64]) -> Vec<BlockRef>;
    /// [`BlockStore::blocks_of_segments`] for a store that reads block lists from storage:
    /// fails when one cannot be read, so a rewrite never drops the blocks it could not list.
    fn try_blocks_of_segments(&self, ids: &[u64]) -> Result<Vec<BlockRef>> {
        Ok(self.blocks_of_segments(ids))
    }
    /// [`BlockStore::try_blocks_of_segments`] for the series `low..=high` only, so a rewrite
    /// of many series can list its blocks a range of series at a time. The default lists
    /// everything and keeps the range; a store that can read a range alone should.
    fn try_blocks_of_segments_in(&self, ids: &[u64], low: SeriesId, high: SeriesId) -> Result<Vec<BlockRef>> {
        let mut blocks = self.try_blocks_of_segments(ids)?;
        blocks.retain(|b| (low..=high).contains(&b.entry.series));
        Ok(blocks)
    }
    /// Hints that every block of the segments `ids` is about to be read (a compaction reads
    /// them series by series, jumping between the segments and between the groups of each).
    fn will_read_segments(&self, ids: &[u64]) {
        let _ = ids;
    }
    /// Reads and verifies a block by its index entry, for maintenance that holds the segment in
    /// place (only maintenance removes segments, one at a time).
    fn read_indexed_block(&self, block: &BlockRef) -> Result<Block>;
    /// Reads one block without decoding it, checksums verified, with the shared timestamp record
    /// it refers to; `records` caches records by position and must belong to `block.segment`
    /// alone.
    fn read_raw_block(&self, block: &BlockRef, records: &mut HashMap<u64, Arc<[u8]>>) -> Result<RawBlock>;
    /// Removes whole segments (all their data dead) without reading them; returns the bytes they
    /// took. A segment still taking groups is never removed.
    fn remove_segments(&self, ids: &[u64]) -> Result<u64>;
    /// Starts a segment that will replace `replaced` (contiguous in sequence); its blocks get
    /// `sequence` and it covers the WAL up to `wal_checkpoint`.
    fn begin_rewrite(&self, replaced: &[u64], sequence: u64, wal_checkpoint: u64) -> Result<Box<dyn SegmentRewrite + '_>>;
}

/// Groups the stores' unit tests write.
#[cfg(test)]
pub(crate) mod test_groups {
    use crate::model::{SeriesId, ValueColumn};
    use crate::segment::GroupBuilder;

    /// One block of `series`: `points` integer points at `start, start + 1, ...`, each valued
    /// its own timestamp.
    pub(crate) fn group(series: u32, start: i64, points: i64) -> GroupBuilder {
        let mut group = GroupBuilder::new();
        let timestamps: Vec<i64> = (start..start + points).collect();
        group.add_block(SeriesId(series), &timestamps, &ValueColumn::I64(timestamps.clone()));
        group
    }
}
