//! Segments: append-only files of blocks, written in 4 KiB-aligned flush groups and sealed with
//! a footer index.
//!
//! Each memtable flush appends one *flush group* to the open segment with a single aligned
//! write followed by fdatasync: a group header, the group's blocks, and the group's index. A
//! segment is sealed once it reaches its size limit (or at shutdown and recovery): the sealed
//! segment ends with a footer (the index of all its blocks) and a fixed-size trailer. Start-up
//! reads only trailers and footers, never blocks. A segment without a valid trailer (the engine
//! stopped while it was open) is recovered by walking its group headers, which sit at known
//! 4 KiB boundaries, and then sealed.
//!
//! ```text
//! file header, 4096 bytes (32 used, rest zero)
//!    0  8  magic "SDBSEGMT"
//!    8  2  format version (1)                 u16 LE
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
//!   40 20  reserved (0)
//!   60  4  CRC32C of [0, 60)                  u32 LE
//!   64  B  blocks (see block module), back to back
//! 64+B 48N group index: one IndexEntry per block
//!          zero padding to the next 4 KiB boundary
//! footer, on a 4 KiB boundary, written when sealing
//!    0 48N IndexEntry of every block in the segment, in file order
//!          zero padding so that the trailer ends on a 4 KiB boundary
//! trailer, the last 32 bytes of a sealed file
//!    0  8  footer offset                      u64 LE
//!    8  4  entry count N                      u32 LE
//!   12  4  CRC32C of the footer entries       u32 LE
//!   16  8  WAL checkpoint of the last group   u64 LE
//!   24  4  magic "SEAL"
//!   28  4  CRC32C of [0, 28)                  u32 LE
//! IndexEntry, 48 bytes
//!    0  4  series id                          u32 LE
//!    4  1  value kind
//!    5  3  reserved (0)
//!    8  4  point count                        u32 LE
//!   12  4  block length in bytes              u32 LE
//!   16  8  block offset in the file           u64 LE
//!   24  8  min timestamp                      i64 LE
//!   32  8  max timestamp                      i64 LE
//!   40  8  group sequence                     u64 LE
//! ```
//! Every segment holds the points of the flushes that wrote it, and flushes happen in time
//! order, so segments are ordered by time as data arrives: expiry can drop whole files.

mod reader;
mod writer;

pub use reader::{read_block, scan_segment, SegmentScan};
pub use writer::{GroupBuilder, SegmentWriter, SharedTimestamps};

use crate::checksum::LeReader;
use crate::model::{SeriesId, Timestamp, ValueKind};

pub const SEGMENT_FORMAT_VERSION: u16 = 1;
pub const PAGE_BYTES: u64 = 4096;
pub const FILE_HEADER_BYTES: u64 = PAGE_BYTES;
pub const GROUP_HEADER_BYTES: usize = 64;
pub const INDEX_ENTRY_BYTES: usize = 48;
pub const TRAILER_BYTES: usize = 32;
const FILE_MAGIC: &[u8; 8] = b"SDBSEGMT";
const GROUP_MAGIC: &[u8; 8] = b"SDBGROUP";
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
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.series.0.to_le_bytes());
        out.push(self.kind as u8);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.min_timestamp.to_le_bytes());
        out.extend_from_slice(&self.max_timestamp.to_le_bytes());
        out.extend_from_slice(&self.sequence.to_le_bytes());
    }

    /// Parses `bytes` (a multiple of 48 long, checksum already verified).
    fn parse_all(bytes: &[u8]) -> Result<Vec<IndexEntry>, String> {
        if !bytes.len().is_multiple_of(INDEX_ENTRY_BYTES) {
            return Err(format!("index of {} bytes is not a whole number of entries", bytes.len()));
        }
        bytes
            .chunks_exact(INDEX_ENTRY_BYTES)
            .map(|chunk| {
                let mut r = LeReader::new(chunk);
                let short = || "short index entry".to_string();
                let series = SeriesId(r.u32().ok_or_else(short)?);
                let kind_tag = r.u8().ok_or_else(short)?;
                let kind = ValueKind::try_from(kind_tag).map_err(|t| format!("unknown value kind {t}"))?;
                r.take(3).ok_or_else(short)?;
                let entry = IndexEntry {
                    series,
                    kind,
                    count: r.u32().ok_or_else(short)?,
                    length: r.u32().ok_or_else(short)?,
                    offset: r.u64().ok_or_else(short)?,
                    min_timestamp: r.i64().ok_or_else(short)?,
                    max_timestamp: r.i64().ok_or_else(short)?,
                    sequence: r.u64().ok_or_else(short)?,
                };
                if entry.count == 0 || entry.min_timestamp > entry.max_timestamp {
                    return Err(format!("index entry for series {} is inconsistent", series.0));
                }
                Ok(entry)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
