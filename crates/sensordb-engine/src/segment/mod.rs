//! Segments: append-only files of blocks, written in 4 KiB-aligned flush groups and sealed with
//! a footer index.
//!
//! Each memtable flush (and each direct payload write) appends one *flush group* to the open
//! segment: a group header, the group's blocks, and the group's index, in page-aligned writes
//! followed by fdatasync. The store pipelines them ([`SegmentWriter::stage_parts`]): a group is
//! written behind a zero header page while the group before it syncs, and its header is written
//! only once that group is durable, so a group header on disk always proves the group before it
//! synced. A segment is sealed once it reaches its size limit (or at shutdown and recovery):
//! the sealed segment ends with a footer (the index of all its blocks) and a fixed-size
//! trailer. Format version 2 groups the footer's entries by series into runs behind a series
//! directory ([`directory`]); start-up reads only trailers and directories, never blocks, and
//! a read fetches the run it needs. Version 3 stores the directory's in-memory index (a
//! checkpoint per 32 entries, see `DirectoryIndex::encode_stored`) before the trailer, which
//! then covers it, so start-up reads that instead of the directory. Version 4 lays the
//! directory's entries out compactly: times relative to the entry before within a chunk, and a
//! series with one block has its block's offset in its entry and no run (see [`directory`]).
//! Versions 1 (the flat list below), 2 and 3 are still read. A segment without a valid
//! trailer (the engine stopped while it was open) is recovered by walking its group headers,
//! which sit at known 4 KiB boundaries, and then sealed.
//!
//! ```text
//! file header, 4096 bytes (32 used, rest zero)
//!    0  8  magic "SDBSEGMT"
//!    8  2  format version (4; 1, 2, 3 still read) u16 LE
//!   10  6  reserved (0)
//!   16  8  segment id                         u64 LE
//!   24  4  reserved (0)
//!   28  4  CRC32C of [0, 28)                  u32 LE
//! flush group, starting on a 4 KiB boundary
//!    0  8  magic "SDBGROUP"
//!    8  8  group sequence (global flush order) u64 LE
//!   16  8  WAL checkpoint: every WAL file with a smaller id is in this or earlier groups
//!   24  8  length B of the blocks region      u64 LE
//!   32  4  block count N                      u32 LE
//!   36  4  CRC32C of the group index          u32 LE
//!   40  8  length I of the group index        u64 LE
//!   48 12  reserved (0)
//!   60  4  CRC32C of [0, 60)                  u32 LE
//!   64  B  blocks and shared timestamp records (see block module); writers' parts start on
//!          page boundaries (the first at the next page), so the region may hold zero gaps
//! 64+B  I  group index: an index list of the group's N blocks
//!          zero padding to the next 4 KiB boundary
//! torn mark, over the header of a last group that recovery found torn and left out
//!    0  8  magic "SDBTORNG"
//!    8 16  zero
//!   24  8  length C of the region it covers (the torn group's bytes, from its header)
//!   32 28  zero
//!   60  4  CRC32C of [0, 60)
//! footer of versions 3 and 4: series directory and runs, zero padding, then the directory's stored
//! index (see `directory::INDEX_MAGIC`), which the trailer's length and checksum cover
//! footer of version 2: series directory and runs, see [`directory`]; the trailer's length and
//! checksum cover the directory
//! footer of version 1, on a 4 KiB boundary, written when sealing
//!    0  F  index list of every block in the segment, in file order, then the replaced list:
//!          varint count R, then R varints: ids of the segments this one replaces (a compaction
//!          output names its inputs; recovery removes them if a crash left them behind),
//!          ascending, each as the difference to the previous (the first to zero)
//!          zero padding so that the trailer ends on a 4 KiB boundary
//! trailer, the last 40 bytes of a sealed file
//!    0  8  footer offset                      u64 LE
//!    8  8  footer length F                    u64 LE
//!   16  4  entry count N                      u32 LE
//!   20  4  CRC32C of the footer               u32 LE
//!   24  8  WAL checkpoint of the last group   u64 LE
//!   32  4  magic "SEAL"
//!   36  4  CRC32C of [0, 36)                  u32 LE
//! index list (unsigned LEB128 varints; "zigzag" marks signed values zigzag-encoded)
//!   varint  entry count N
//!   N times, each entry relative to the previous one (the first to zero):
//!     varint  series id
//!     u8      value kind
//!     varint  point count (≥ 1)
//!     varint  group sequence − previous sequence   (sequences never decrease in file order)
//!     varint  block offset − end of previous block (blocks never overlap and go forward)
//!     varint  block length in bytes
//!     zigzag  min timestamp − previous min timestamp
//!     varint  max timestamp − min timestamp
//! ```
//! An index entry takes about 14 bytes instead of 48 fixed ones: on small blocks the index is a
//! visible share of the bytes per value.
//! Every segment holds the points of the flushes that wrote it, and flushes happen in time
//! order, so segments are ordered by time as data arrives: expiry can drop whole files.

mod directory;
mod reader;
mod writer;

#[cfg(test)]
pub use directory::encode_footer_listed;
pub use directory::{
    decode_directory, decode_run, encode_footer, DirectoryIndex, EntryLayout, RunShape, SeriesRun, ENTRIES_PER_CHECKPOINT,
};
pub use reader::{
    decode_run_at, read_all_runs, read_block, read_directory_chunks, read_raw_block, read_run, scan_segment, scan_segment_directory,
    RawBlock, RunSpan, SegmentScan,
};
pub use writer::{GroupBuilder, GroupPart, SegmentWriter, SharedTimestamps, StagedGroup};

use crate::checksum::{get_varint, put_varint, unzigzag, zigzag};
use crate::model::{SeriesId, Timestamp, ValueKind};

/// Version written by this build; versions 1 (one flat footer list), 2 (a series directory
/// that start-up reads whole) and 3 (the directory's full entries) are still read, and a file
/// keeps its version when recovery resumes and seals it.
pub const SEGMENT_FORMAT_VERSION: u16 = 4;
pub const PAGE_BYTES: u64 = 4096;
pub const FILE_HEADER_BYTES: u64 = PAGE_BYTES;
pub const GROUP_HEADER_BYTES: usize = 64;
pub const TRAILER_BYTES: usize = 40;
const FILE_MAGIC: &[u8; 8] = b"SDBSEGMT";
const GROUP_MAGIC: &[u8; 8] = b"SDBGROUP";
const TORN_MAGIC: &[u8; 8] = b"SDBTORNG";
const TRAILER_MAGIC: &[u8; 4] = b"SEAL";

/// Where one block lives and what it covers; enough to plan a read without touching the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub series: SeriesId,
    pub kind: ValueKind,
    pub count: u32,
    pub length: u32,
    pub offset: u64,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    /// The flush group that wrote the block: a larger sequence holds newer writes.
    pub sequence: u64,
}

impl IndexEntry {
    /// Appends the index list of `entries` (in file order) to `out`.
    pub fn encode_list(entries: &[IndexEntry], out: &mut Vec<u8>) {
        put_varint(out, entries.len() as u64);
        let (mut sequence, mut end, mut min_timestamp) = (0u64, 0u64, 0i64);
        for entry in entries {
            assert!(entry.sequence >= sequence && entry.offset >= end, "BUG: index entries out of file order");
            put_varint(out, u64::from(entry.series.0));
            out.push(entry.kind as u8);
            put_varint(out, u64::from(entry.count));
            put_varint(out, entry.sequence - sequence);
            put_varint(out, entry.offset - end);
            put_varint(out, u64::from(entry.length));
            put_varint(out, zigzag(entry.min_timestamp.wrapping_sub(min_timestamp)));
            put_varint(out, crate::model::time_span(entry.min_timestamp, entry.max_timestamp));
            sequence = entry.sequence;
            end = entry.offset + u64::from(entry.length);
            min_timestamp = entry.min_timestamp;
        }
    }

    /// Parses an index list (checksum already verified); the whole of `bytes` must be used.
    pub fn decode_list(bytes: &[u8]) -> Result<Vec<IndexEntry>, String> {
        let (entries, used) = Self::decode_list_prefix(bytes)?;
        if used != bytes.len() {
            return Err(format!("{} bytes after the index list", bytes.len() - used));
        }
        Ok(entries)
    }

    /// Parses an index list at the start of `bytes`; returns it and the bytes it took.
    pub fn decode_list_prefix(bytes: &[u8]) -> Result<(Vec<IndexEntry>, usize), String> {
        let mut position = 0usize;
        let varint = |position: &mut usize| get_varint(bytes, position).ok_or_else(|| format!("index truncated at byte {position}"));
        let count = varint(&mut position)?;
        // Each entry takes at least 8 bytes.
        if count > (bytes.len() / 8) as u64 {
            return Err(format!("implausible index entry count {count}"));
        }
        let mut entries = Vec::with_capacity(count as usize);
        let (mut sequence, mut end, mut min_timestamp) = (0u64, 0u64, 0i64);
        for _ in 0..count {
            let series = u32::try_from(varint(&mut position)?).map_err(|_| "series id out of range")?;
            let kind_tag = *bytes.get(position).ok_or("index truncated")?;
            position += 1;
            let kind = ValueKind::try_from(kind_tag).map_err(|t| format!("unknown value kind {t}"))?;
            let count = u32::try_from(varint(&mut position)?).map_err(|_| "point count out of range")?;
            sequence = sequence.checked_add(varint(&mut position)?).ok_or("sequence overflow")?;
            let offset = end.checked_add(varint(&mut position)?).ok_or("offset overflow")?;
            let length = u32::try_from(varint(&mut position)?).map_err(|_| "block length out of range")?;
            min_timestamp = min_timestamp.wrapping_add(unzigzag(varint(&mut position)?));
            let span = varint(&mut position)?;
            let max_timestamp = crate::model::add_time_span(min_timestamp, span).ok_or("time span out of range")?;
            if count == 0 {
                return Err(format!("index entry for series {series} has no points"));
            }
            end = offset.checked_add(u64::from(length)).ok_or("offset overflow")?;
            entries.push(IndexEntry { series: SeriesId(series), kind, count, length, offset, min_timestamp, max_timestamp, sequence });
        }
        Ok((entries, position))
    }
}

/// Appends the replaced-segments list of a footer.
pub fn encode_replaced(ids: &[u64], out: &mut Vec<u8>) {
    put_varint(out, ids.len() as u64);
    let mut previous = 0u64;
    for &id in ids {
        assert!(id >= previous, "BUG: replaced segment ids not ascending");
        put_varint(out, id - previous);
        previous = id;
    }
}

/// Parses a replaced-segments list that must fill `bytes` exactly.
pub fn decode_replaced(bytes: &[u8]) -> Result<Vec<u64>, String> {
    let mut position = 0usize;
    let count = get_varint(bytes, &mut position).ok_or("replaced list truncated")?;
    if count > bytes.len() as u64 {
        return Err(format!("implausible replaced count {count}"));
    }
    let mut ids = Vec::with_capacity(count as usize);
    let mut previous = 0u64;
    for _ in 0..count {
        previous =
            previous.checked_add(get_varint(bytes, &mut position).ok_or("replaced list truncated")?).ok_or("replaced id overflow")?;
        ids.push(previous);
    }
    if position != bytes.len() {
        return Err(format!("{} bytes after the replaced list", bytes.len() - position));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests;
