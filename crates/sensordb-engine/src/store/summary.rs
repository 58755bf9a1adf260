//! What maintenance knows of stored data without reading it: a summary per segment and the
//! life of each block.

use crate::model::{SeriesId, Timestamp};
use crate::segment::IndexEntry;

/// What deciding whether a block is dead needs: its series, its newest point, its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLife {
    pub series: SeriesId,
    pub max_timestamp: Timestamp,
    pub bytes: u32,
}

impl BlockLife {
    pub fn of(entry: &IndexEntry) -> Self {
        BlockLife { series: entry.series, max_timestamp: entry.max_timestamp, bytes: entry.length }
    }
}

/// What compaction planning needs to know of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    pub id: u64,
    /// False for the segment still taking flush groups.
    pub sealed: bool,
    pub bytes: u64,
    /// The sum of its blocks' lengths (`bytes` less headers, indexes and page padding).
    pub block_bytes: u64,
    pub blocks: u64,
    pub points: u64,
    /// Series with blocks in it, as its series directory lists them; 0 when not known (a
    /// segment taking groups, or a store whose segments have no directory).
    pub series: u64,
    /// The smallest and largest series id its directory lists (when `series` is known).
    pub series_ids: (u32, u32),
    /// The widest stretch of ids its directory lacks between those two (see
    /// [`crate::segment::DirectoryIndex::series_gap`]).
    pub series_gap: (u32, u32),
    pub min_sequence: u64,
    pub max_sequence: u64,
    pub wal_checkpoint: u64,
}

impl SegmentSummary {
    pub fn of(id: u64, sealed: bool, bytes: u64, entries: &[IndexEntry], wal_checkpoint: u64) -> Self {
        SegmentSummary {
            id,
            sealed,
            bytes,
            block_bytes: entries.iter().map(|e| u64::from(e.length)).sum(),
            blocks: entries.len() as u64,
            points: entries.iter().map(|e| u64::from(e.count)).sum(),
            series: 0,
            series_ids: (0, 0),
            series_gap: (0, 0),
            min_sequence: entries.iter().map(|e| e.sequence).min().unwrap_or(u64::MAX),
            max_sequence: entries.iter().map(|e| e.sequence).max().unwrap_or(0),
            wal_checkpoint,
        }
    }

    /// The summary of a sealed segment from its series directory.
    pub fn of_directory(id: u64, bytes: u64, directory: &crate::segment::DirectoryIndex, wal_checkpoint: u64) -> Self {
        let mut summary = SegmentSummary {
            id,
            sealed: true,
            bytes,
            block_bytes: directory.block_bytes,
            blocks: directory.blocks,
            points: directory.points,
            series: 0,
            series_ids: (0, 0),
            series_gap: (0, 0),
            min_sequence: directory.min_sequence,
            max_sequence: directory.max_sequence,
            wal_checkpoint,
        };
        summary.describe_series(directory);
        summary
    }

    /// Takes the series count and id range of a sealed segment from its series `directory`.
    pub(crate) fn describe_series(&mut self, directory: &crate::segment::DirectoryIndex) {
        self.series = directory.len as u64;
        self.series_ids = directory.series_ids;
        self.series_gap = directory.series_gap;
    }

    pub fn add(&mut self, entries: &[IndexEntry], bytes: u64, wal_checkpoint: u64) {
        let more = SegmentSummary::of(self.id, self.sealed, bytes, entries, wal_checkpoint);
        // A backend committing groups concurrently may add a group placed before the last.
        self.bytes = self.bytes.max(bytes);
        self.blocks += more.blocks;
        self.block_bytes += more.block_bytes;
        self.points += more.points;
        self.min_sequence = self.min_sequence.min(more.min_sequence);
        self.max_sequence = self.max_sequence.max(more.max_sequence);
        self.wal_checkpoint = self.wal_checkpoint.max(wal_checkpoint);
    }
}
