//! A block: one series over one time range, compressed, self-checking.
//!
//! Blocks are the unit of sealed storage. A block is written once and never changed; its header
//! carries what a downsampling query needs without decoding the columns (count, time range,
//! min/max/sum of the values). The CRC32C at the end covers every byte before it, so a block read
//! on its own is verified before any column is decoded.
//!
//! ```text
//! offset size  field
//!      0    1  block format version (1)
//!      1    1  value kind (model::ValueKind tag)
//!      2    2  flags (reserved, 0)
//!      4    4  series id                      u32 LE
//!      8    4  point count (≥ 1)              u32 LE
//!     12    8  min timestamp (ns)             i64 LE
//!     20    8  max timestamp (ns)             i64 LE
//!     28    8  min value  (see ValueStats)    8 bytes LE
//!     36    8  max value                      8 bytes LE
//!     44    8  sum of values                  f64 LE
//!     52    4  timestamp column length T      u32 LE
//!     56    4  value column length V          u32 LE
//!     60    T  timestamp column (codec)
//!   60+T    V  value column (codec)
//! 60+T+V    4  CRC32C of bytes [0, 60+T+V)    u32 LE
//! ```
//! Points in a block are sorted by timestamp with no repeated timestamp: repeats are resolved
//! (last write wins) before a block is built.

mod stats;

pub use stats::ValueStats;

use crate::checksum::{crc32c, LeReader};
use crate::codec;
use crate::error::CodecError;
use crate::model::{SeriesId, Timestamp, ValueColumn, ValueKind};

pub const BLOCK_FORMAT_VERSION: u8 = 1;
pub const HEADER_BYTES: usize = 60;
pub const CHECKSUM_BYTES: usize = 4;

/// The fixed-size part of a block.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockHeader {
    pub kind: ValueKind,
    pub series: SeriesId,
    pub count: u32,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    pub stats: ValueStats,
    pub timestamp_column_bytes: u32,
    pub value_column_bytes: u32,
}

/// A decoded block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub header: BlockHeader,
    pub timestamps: Vec<Timestamp>,
    pub values: ValueColumn,
}

/// Why bytes are not a valid block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    #[error("block of {0} bytes is shorter than its header")]
    TooShort(usize),
    #[error("block checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("unsupported block version {0}")]
    Version(u8),
    #[error("unknown value kind {0}")]
    Kind(u8),
    #[error("block lengths disagree: header says {declared} bytes, block has {actual}")]
    Length { declared: usize, actual: usize },
    #[error("column: {0}")]
    Column(#[from] CodecError),
    #[error("decoded block breaks an invariant: {0}")]
    Invariant(&'static str),
}

/// Encodes one block from points already sorted by timestamp without repeats.
/// Panics (a bug in the caller) when that precondition does not hold.
pub fn encode(series: SeriesId, timestamps: &[Timestamp], values: &ValueColumn, out: &mut Vec<u8>) {
    assert!(!timestamps.is_empty(), "BUG: empty block");
    assert_eq!(timestamps.len(), values.len(), "BUG: column lengths differ");
    assert!(timestamps.len() <= u32::MAX as usize, "BUG: block too large");
    debug_assert!(timestamps.windows(2).all(|w| w[0] < w[1]), "BUG: block timestamps not strictly increasing");
    let start = out.len();
    out.resize(start + HEADER_BYTES, 0);
    let timestamps_start = out.len();
    codec::encode_timestamps(timestamps, out);
    let values_start = out.len();
    codec::encode_values(values, out);
    let end = out.len();
    let header = BlockHeader {
        kind: values.kind(),
        series,
        count: timestamps.len() as u32,
        min_timestamp: timestamps[0],
        max_timestamp: timestamps[timestamps.len() - 1],
        stats: ValueStats::of(values),
        timestamp_column_bytes: u32::try_from(values_start - timestamps_start).expect("BUG: column over 4 GiB"),
        value_column_bytes: u32::try_from(end - values_start).expect("BUG: column over 4 GiB"),
    };
    header.write(&mut out[start..start + HEADER_BYTES]);
    let checksum = crc32c(&out[start..]);
    out.extend_from_slice(&checksum.to_le_bytes());
}

impl BlockHeader {
    fn write(&self, out: &mut [u8]) {
        out[0] = BLOCK_FORMAT_VERSION;
        out[1] = self.kind as u8;
        out[2..4].copy_from_slice(&0u16.to_le_bytes());
        out[4..8].copy_from_slice(&self.series.0.to_le_bytes());
        out[8..12].copy_from_slice(&self.count.to_le_bytes());
        out[12..20].copy_from_slice(&self.min_timestamp.to_le_bytes());
        out[20..28].copy_from_slice(&self.max_timestamp.to_le_bytes());
        out[28..36].copy_from_slice(&self.stats.min_bits.to_le_bytes());
        out[36..44].copy_from_slice(&self.stats.max_bits.to_le_bytes());
        out[44..52].copy_from_slice(&self.stats.sum.to_le_bytes());
        out[52..56].copy_from_slice(&self.timestamp_column_bytes.to_le_bytes());
        out[56..60].copy_from_slice(&self.value_column_bytes.to_le_bytes());
    }

    /// Parses the header of `block` after checking the block's checksum and length.
    pub fn verified(block: &[u8]) -> Result<BlockHeader, BlockError> {
        if block.len() < HEADER_BYTES + CHECKSUM_BYTES {
            return Err(BlockError::TooShort(block.len()));
        }
        let (body, stored) = block.split_at(block.len() - CHECKSUM_BYTES);
        let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
        let computed = crc32c(body);
        if stored != computed {
            return Err(BlockError::Checksum { stored, computed });
        }
        let mut r = LeReader::new(body);
        let version = r.u8().ok_or(BlockError::TooShort(block.len()))?;
        if version != BLOCK_FORMAT_VERSION {
            return Err(BlockError::Version(version));
        }
        let kind_tag = r.u8().ok_or(BlockError::TooShort(block.len()))?;
        let kind = ValueKind::try_from(kind_tag).map_err(BlockError::Kind)?;
        let short = || BlockError::TooShort(block.len());
        let _flags = r.u16().ok_or_else(short)?;
        let header = BlockHeader {
            kind,
            series: SeriesId(r.u32().ok_or_else(short)?),
            count: r.u32().ok_or_else(short)?,
            min_timestamp: r.i64().ok_or_else(short)?,
            max_timestamp: r.i64().ok_or_else(short)?,
            stats: ValueStats {
                min_bits: r.u64().ok_or_else(short)?,
                max_bits: r.u64().ok_or_else(short)?,
                sum: f64::from_bits(r.u64().ok_or_else(short)?),
            },
            timestamp_column_bytes: r.u32().ok_or_else(short)?,
            value_column_bytes: r.u32().ok_or_else(short)?,
        };
        let declared = HEADER_BYTES
            + header.timestamp_column_bytes as usize
            + header.value_column_bytes as usize
            + CHECKSUM_BYTES;
        if declared != block.len() {
            return Err(BlockError::Length { declared, actual: block.len() });
        }
        if header.count == 0 {
            return Err(BlockError::Invariant("empty block"));
        }
        Ok(header)
    }
}

/// Verifies and decodes a whole block.
pub fn decode(block: &[u8]) -> Result<Block, BlockError> {
    let header = BlockHeader::verified(block)?;
    let timestamps_end = HEADER_BYTES + header.timestamp_column_bytes as usize;
    let values_end = timestamps_end + header.value_column_bytes as usize;
    let count = header.count as usize;
    let timestamps = codec::decode_timestamps(&block[HEADER_BYTES..timestamps_end], count)?;
    let values = codec::decode_values(header.kind, &block[timestamps_end..values_end], count)?;
    if timestamps.len() != count || values.len() != count {
        return Err(BlockError::Invariant("decoded column length differs from count"));
    }
    if timestamps.first() != Some(&header.min_timestamp) || timestamps.last() != Some(&header.max_timestamp) {
        return Err(BlockError::Invariant("time range differs from header"));
    }
    Ok(Block { header, timestamps, values })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn sample() -> (Vec<i64>, ValueColumn) {
        let timestamps: Vec<i64> = (0..1000).map(|i| 1_600_000_000_000_000_000 + i * 10_000_000_000).collect();
        let values = ValueColumn::F64((0..1000).map(|i| (i as f64 * 0.1).sin()).collect());
        (timestamps, values)
    }

    #[test]
    fn blocks_round_trip_for_every_kind() {
        let timestamps = vec![-5i64, 0, 7, 1_000_000];
        let columns = [
            ValueColumn::F64(vec![f64::NAN, -0.0, f64::INFINITY, 1.5]),
            ValueColumn::I64(vec![i64::MIN, -1, 0, i64::MAX]),
            ValueColumn::U64(vec![0, 1, u64::MAX, 42]),
            ValueColumn::Bool(vec![true, false, false, true]),
            ValueColumn::Bytes(vec![Bytes::new(), Bytes::from_static(b"a"), Bytes::from(vec![0u8; 5000]), Bytes::from_static(b"xyz")]),
        ];
        for values in columns {
            let mut out = Vec::new();
            encode(SeriesId(9), &timestamps, &values, &mut out);
            let block = decode(&out).expect("decodes");
            assert_eq!(block.header.series, SeriesId(9));
            assert_eq!(block.header.count, 4);
            assert_eq!((block.header.min_timestamp, block.header.max_timestamp), (-5, 1_000_000));
            assert_eq!(block.timestamps, timestamps);
            match (&block.values, &values) {
                (ValueColumn::F64(a), ValueColumn::F64(b)) => {
                    assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()))
                }
                (a, b) => assert_eq!(a, b),
            }
        }
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let (timestamps, values) = sample();
        let mut out = Vec::new();
        encode(SeriesId(1), &timestamps, &values, &mut out);
        for position in (0..out.len()).step_by(7) {
            let mut damaged = out.clone();
            damaged[position] ^= 0x40;
            assert!(decode(&damaged).is_err(), "flip at {position} not detected");
        }
    }

    #[test]
    fn truncated_blocks_are_rejected() {
        let (timestamps, values) = sample();
        let mut out = Vec::new();
        encode(SeriesId(1), &timestamps, &values, &mut out);
        for len in [0, 10, HEADER_BYTES, out.len() - 1] {
            assert!(decode(&out[..len]).is_err());
        }
    }

    #[test]
    fn header_statistics_describe_the_values() {
        let mut out = Vec::new();
        encode(SeriesId(3), &[1, 2, 3], &ValueColumn::F64(vec![2.0, f64::NAN, -1.0]), &mut out);
        let header = BlockHeader::verified(&out).expect("valid");
        assert_eq!(header.stats.min_f64(ValueKind::F64), Some(-1.0));
        assert_eq!(header.stats.max_f64(ValueKind::F64), Some(2.0));
        assert_eq!(header.stats.sum, 1.0);
    }

    #[test]
    #[should_panic(expected = "BUG")]
    fn empty_blocks_are_a_bug() {
        encode(SeriesId(1), &[], &ValueColumn::F64(vec![]), &mut Vec::new());
    }
}
