//! Where sealed blocks live, behind the small [`BlockStore`] trait: put the blocks of a flush,
//! list the blocks of a series in a time range, read a block, drop a segment.
//!
//! The write and read paths only talk to this trait, so a distributed backend
//! (Cassandra/ScyllaDB) can stand in for local segment files without touching them.
//! [`SegmentStore`] is the local implementation.

mod segments;

pub use segments::{BlockLife, CompactedSegment, SegmentHandle, SegmentStore, SegmentStoreOptions, SegmentSummary, StoreRecovery};

use crate::block::Block;
use crate::error::Result;
use crate::index::BlockRef;
use crate::model::{SeriesId, Timestamp};
use crate::segment::GroupBuilder;

/// Sizes of what a store holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub segments: usize,
    pub blocks: usize,
    pub points: u64,
    /// Bytes of data files on disk.
    pub bytes: u64,
}

/// A block listed for a read, with a pin on whatever holds it (for segments, the open file),
/// so the block stays readable until the read drops it even if the store removes it meanwhile.
#[derive(Clone)]
pub struct ListedBlock {
    pub block: BlockRef,
    pub pin: std::sync::Arc<dyn std::any::Any + Send + Sync>,
}

pub trait BlockStore: Send + Sync {
    /// Makes the blocks of one flush or direct write durable; afterwards [`BlockStore::blocks`]
    /// lists them. Concurrent calls may be committed together. Returns the group's sequence:
    /// groups are numbered in the order they become durable, and a newer group wins on repeated
    /// timestamps. `wal_checkpoint` is the id of the first WAL file not covered by this and
    /// earlier groups.
    fn put_group(&self, group: GroupBuilder, wal_checkpoint: u64) -> Result<u64>;
    /// Blocks of `series` that may hold points in `[from, to)`, ordered by min timestamp.
    fn blocks(&self, series: SeriesId, from: Timestamp, to: Timestamp) -> Vec<ListedBlock>;
    /// Reads and verifies one listed block.
    fn read_block(&self, block: &ListedBlock) -> Result<Block>;
    /// Removes a whole segment (expiry) without reading it.
    fn drop_segment(&self, segment: u64) -> Result<()>;
    fn stats(&self) -> StoreStats;
    /// Seals whatever is open; the store stays usable.
    fn seal(&self) -> Result<()>;
}
