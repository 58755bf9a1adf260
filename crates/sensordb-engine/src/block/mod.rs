//! A block: one series over one time range, compressed, self-checking.
//!
//! Blocks are the unit of sealed storage. A block is written once and never changed; its header
//! carries what a downsampling query needs without decoding the columns (count, time range,
//! min/max/sum of the values). The CRC32C at the end covers every byte before it, so a block read
//! on its own is verified before any column is decoded.
//!
//! ```text
//! size  field                                   (varints: unsigned LEB128)
//!    1  block format version (1)
//!    1  value kind (model::ValueKind tag)
//!    1  flags: bit 0 = timestamps shared (see below), other bits 0
//!    v  series id                               varint
//!    v  point count N (≥ 1)                     varint
//!    8  min timestamp (ns)                      i64 LE
//!    v  max timestamp − min timestamp           varint
//!    8  min value  (see ValueStats)             8 bytes LE
//!    8  max value                               8 bytes LE
//!    8  sum of values                           f64 LE
//!    v  timestamp column length T               varint
//!    v  value column length V                   varint
//!    T  timestamp column (codec, or a shared reference)
//!    V  value column (codec)
//!    4  CRC32C of every byte before it          u32 LE
//! ```
//! The header takes 40-50 bytes: on the small blocks that out-of-order data and rare series
//! make, fixed-width fields were a visible share of the bytes per value.
//! Points in a block are sorted by timestamp with no repeated timestamp: repeats are resolved
//! (last write wins) before a block is built.
//!
//! ## Shared timestamps
//! The fields of one row (same measurement and tag set) are usually sampled at the same
//! instants, so a flush stores their union once, in a *shared timestamp record* in front of the
//! row's blocks, and each block refers to it. With flag bit 0 set, a block's timestamp column is
//! a reference instead of a codec column:
//! ```text
//!   0  4  distance: bytes from the start of the shared record to the start of this block  u32 LE
//!   4  4  length of the shared record in bytes                                           u32 LE
//!   8  …  varint M: how many of the record's timestamps this block does not have, then M varints:
//!         the first missing position, then for each further one (position - previous - 1)
//! ```
//! The block's timestamps are the record's, minus the missing positions. The shared record:
//! ```text
//!   0  4  timestamp count N                  u32 LE
//!   4  …  timestamp column (codec), N stamps
//!  end 4  CRC32C of everything before it     u32 LE
//! ```

mod stats;

pub use stats::ValueStats;

use crate::checksum::{crc32c, get_varint, put_varint, LeReader};
use crate::codec;
use crate::error::CodecError;
use crate::model::{SeriesId, Timestamp, ValueColumn, ValueKind};

/// The block format written. Version 2 is version 1 with two more column encodings
/// (DELTA_VARINT and DECIMAL_VARINT, docs/format/codec.md), which a version-1 reader would
/// report as unknown; blocks of version 1 are still read.
pub const BLOCK_FORMAT_VERSION: u8 = 2;
/// The oldest block format still read.
const BLOCK_FORMAT_VERSION_OLDEST: u8 = 1;
/// Flag bit: the timestamp column is a reference to a shared timestamp record.
pub const FLAG_SHARED_TIMESTAMPS: u8 = 1;
/// Smallest possible header: three bytes, five one-byte varints, three 8-byte fields and the
/// 8-byte min timestamp.
pub const HEADER_BYTES_MIN: usize = 3 + 5 + 32;
pub const CHECKSUM_BYTES: usize = 4;
/// Most points in one block or shared timestamp record (the engine's `block_points_max` is
/// held to it). A few bytes can describe any number of points (a constant-delta timestamp
/// column), so a reader bounds what a header may ask it to allocate: 8 MiB per column.
pub const BLOCK_POINTS_LIMIT: u32 = 1 << 20;

/// The fixed-size part of a block.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockHeader {
    pub kind: ValueKind,
    pub flags: u8,
    pub series: SeriesId,
    pub count: u32,
    pub min_timestamp: Timestamp,
    pub max_timestamp: Timestamp,
    pub stats: ValueStats,
    pub timestamp_column_bytes: u32,
    pub value_column_bytes: u32,
    /// Length of the encoded header: the timestamp column starts here.
    pub header_bytes: u32,
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
    #[error("shared timestamp record: {0}")]
    SharedTimestamps(String),
}

/// Where a block's timestamps are stored.
#[derive(Clone, Copy, Debug)]
pub enum TimestampColumn<'a> {
    /// In the block itself.
    Inline,
    /// In a shared timestamp record that starts `distance` bytes before the block and is
    /// `length` bytes long; the block has all its timestamps except those at `missing`
    /// positions (strictly increasing).
    Shared { distance: u32, length: u32, missing: &'a [u32] },
}

/// Encodes one block from points already sorted by timestamp without repeats; with
/// [`TimestampColumn::Shared`] the caller guarantees that the shared record minus the missing
/// positions equals `timestamps`. Panics (a bug in the caller) when a precondition does not hold.
pub fn encode(series: SeriesId, timestamps: &[Timestamp], values: &ValueColumn, column: TimestampColumn<'_>, out: &mut Vec<u8>) {
    assert!(!timestamps.is_empty(), "BUG: empty block");
    assert_eq!(timestamps.len(), values.len(), "BUG: column lengths differ");
    assert!(timestamps.len() <= u32::MAX as usize, "BUG: block too large");
    debug_assert!(timestamps.windows(2).all(|w| w[0] < w[1]), "BUG: block timestamps not strictly increasing");
    let mut columns = Vec::with_capacity(64 + timestamps.len() * 2);
    let flags = match column {
        TimestampColumn::Inline => {
            codec::encode_timestamps(timestamps, &mut columns);
            0
        }
        TimestampColumn::Shared { distance, length, missing } => {
            columns.extend_from_slice(&distance.to_le_bytes());
            columns.extend_from_slice(&length.to_le_bytes());
            put_varint(&mut columns, missing.len() as u64);
            let mut previous: Option<u32> = None;
            for &position in missing {
                let gap = match previous {
                    None => position,
                    Some(p) => {
                        assert!(position > p, "BUG: missing positions not increasing");
                        position - p - 1
                    }
                };
                put_varint(&mut columns, u64::from(gap));
                previous = Some(position);
            }
            FLAG_SHARED_TIMESTAMPS
        }
    };
    let timestamp_column_bytes = columns.len();
    // Uncompressed payloads go from the caller's buffers straight into `out`.
    let payloads = codec::encode_values_leaving_payloads(values, &mut columns);
    let payload_bytes: usize = payloads.map_or(0, |p| p.iter().map(|v| v.len()).sum());
    let header = BlockHeader {
        kind: values.kind(),
        flags,
        series,
        count: timestamps.len() as u32,
        min_timestamp: timestamps[0],
        max_timestamp: timestamps[timestamps.len() - 1],
        stats: ValueStats::of(values),
        timestamp_column_bytes: u32::try_from(timestamp_column_bytes).expect("BUG: column over 4 GiB"),
        value_column_bytes: u32::try_from(columns.len() - timestamp_column_bytes + payload_bytes).expect("BUG: column over 4 GiB"),
        // Only meaningful for parsed headers; `write` derives the layout itself.
        header_bytes: 0,
    };
    let start = out.len();
    out.reserve(64 + columns.len() + payload_bytes + CHECKSUM_BYTES);
    header.write(out);
    out.extend_from_slice(&columns);
    for payload in payloads.unwrap_or_default() {
        out.extend_from_slice(payload);
    }
    let checksum = crc32c(&out[start..]);
    out.extend_from_slice(&checksum.to_le_bytes());
}

impl BlockHeader {
    fn write(&self, out: &mut Vec<u8>) {
        debug_assert!(self.max_timestamp >= self.min_timestamp, "BUG: time range reversed");
        out.push(BLOCK_FORMAT_VERSION);
        out.push(self.kind as u8);
        out.push(self.flags);
        put_varint(out, u64::from(self.series.0));
        put_varint(out, u64::from(self.count));
        out.extend_from_slice(&self.min_timestamp.to_le_bytes());
        put_varint(out, crate::model::time_span(self.min_timestamp, self.max_timestamp));
        out.extend_from_slice(&self.stats.min_bits.to_le_bytes());
        out.extend_from_slice(&self.stats.max_bits.to_le_bytes());
        out.extend_from_slice(&self.stats.sum.to_le_bytes());
        put_varint(out, u64::from(self.timestamp_column_bytes));
        put_varint(out, u64::from(self.value_column_bytes));
    }

    /// Parses the header of `block` after checking the block's checksum and length.
    pub fn verified(block: &[u8]) -> Result<BlockHeader, BlockError> {
        if block.len() < HEADER_BYTES_MIN + CHECKSUM_BYTES {
            return Err(BlockError::TooShort(block.len()));
        }
        let (body, stored) = block.split_at(block.len() - CHECKSUM_BYTES);
        let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
        let computed = crc32c(body);
        if stored != computed {
            return Err(BlockError::Checksum { stored, computed });
        }
        let short = || BlockError::TooShort(block.len());
        let version = body[0];
        if !(BLOCK_FORMAT_VERSION_OLDEST..=BLOCK_FORMAT_VERSION).contains(&version) {
            return Err(BlockError::Version(version));
        }
        let kind = ValueKind::try_from(body[1]).map_err(BlockError::Kind)?;
        let flags = body[2];
        if flags & !FLAG_SHARED_TIMESTAMPS != 0 {
            return Err(BlockError::Invariant("unknown flag bits"));
        }
        let mut position = 3;
        let varint = |position: &mut usize| get_varint(body, position).ok_or_else(short);
        let fixed = |position: &mut usize| -> Result<u64, BlockError> {
            let bytes = body.get(*position..*position + 8).ok_or_else(short)?;
            *position += 8;
            Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
        };
        let series = u32::try_from(varint(&mut position)?).map_err(|_| BlockError::Invariant("series id out of range"))?;
        let count = u32::try_from(varint(&mut position)?).map_err(|_| BlockError::Invariant("count out of range"))?;
        let min_timestamp = fixed(&mut position)? as i64;
        let span = varint(&mut position)?;
        // The span of a block from a negative time to near i64::MAX exceeds i64::MAX: u64 it is.
        let max_timestamp = crate::model::add_time_span(min_timestamp, span).ok_or(BlockError::Invariant("time span out of range"))?;
        let stats =
            ValueStats { min_bits: fixed(&mut position)?, max_bits: fixed(&mut position)?, sum: f64::from_bits(fixed(&mut position)?) };
        let column_length = |value: u64| u32::try_from(value).map_err(|_| BlockError::Invariant("column length out of range"));
        let timestamp_column_bytes = column_length(varint(&mut position)?)?;
        let value_column_bytes = column_length(varint(&mut position)?)?;
        let header = BlockHeader {
            kind,
            flags,
            series: SeriesId(series),
            count,
            min_timestamp,
            max_timestamp,
            stats,
            timestamp_column_bytes,
            value_column_bytes,
            header_bytes: position as u32,
        };
        let declared = position + timestamp_column_bytes as usize + value_column_bytes as usize + CHECKSUM_BYTES;
        if declared != block.len() {
            return Err(BlockError::Length { declared, actual: block.len() });
        }
        if header.count == 0 {
            return Err(BlockError::Invariant("empty block"));
        }
        if header.count > BLOCK_POINTS_LIMIT {
            return Err(BlockError::Invariant("more points than a block may hold"));
        }
        Ok(header)
    }
}

/// Verifies and decodes a block whose timestamps are inline.
pub fn decode(block: &[u8]) -> Result<Block, BlockError> {
    decode_with_shared(block, &mut |_, _| Err(BlockError::SharedTimestamps("no shared timestamp record available".into())))
}

/// Verifies and decodes a block; `load_shared(distance, length)` returns the timestamps of the
/// shared record a block with [`FLAG_SHARED_TIMESTAMPS`] refers to.
pub fn decode_with_shared(
    block: &[u8],
    load_shared: &mut dyn FnMut(u32, u32) -> Result<Vec<Timestamp>, BlockError>,
) -> Result<Block, BlockError> {
    let header = BlockHeader::verified(block)?;
    let timestamps_start = header.header_bytes as usize;
    let timestamps_end = timestamps_start + header.timestamp_column_bytes as usize;
    let values_end = timestamps_end + header.value_column_bytes as usize;
    let count = header.count as usize;
    let column = &block[timestamps_start..timestamps_end];
    let timestamps = if header.flags & FLAG_SHARED_TIMESTAMPS == 0 {
        codec::decode_timestamps(column, count)?
    } else {
        let (distance, length, missing) = parse_shared_reference(column)?;
        let shared = load_shared(distance, length)?;
        remove_positions(shared, &missing, count)?
    };
    let values = codec::decode_values(header.kind, &block[timestamps_end..values_end], count)?;
    if timestamps.len() != count || values.len() != count {
        return Err(BlockError::Invariant("decoded column length differs from count"));
    }
    if timestamps.first() != Some(&header.min_timestamp) || timestamps.last() != Some(&header.max_timestamp) {
        return Err(BlockError::Invariant("time range differs from header"));
    }
    Ok(Block { header, timestamps, values })
}

fn parse_shared_reference(column: &[u8]) -> Result<(u32, u32, Vec<u32>), BlockError> {
    let bad = |what: &str| BlockError::SharedTimestamps(what.to_string());
    let mut r = LeReader::new(column);
    let distance = r.u32().ok_or_else(|| bad("reference truncated"))?;
    let length = r.u32().ok_or_else(|| bad("reference truncated"))?;
    let mut position = r.position();
    let count = get_varint(column, &mut position).ok_or_else(|| bad("missing count truncated"))?;
    // Every position takes at least one byte.
    if count > (column.len() - position) as u64 {
        return Err(bad("implausible missing count"));
    }
    let mut missing = Vec::with_capacity(count as usize);
    let mut next = 0u64;
    for _ in 0..count {
        let gap = get_varint(column, &mut position).ok_or_else(|| bad("missing position truncated"))?;
        let at = next.checked_add(gap).filter(|&p| p <= u64::from(u32::MAX)).ok_or_else(|| bad("missing position out of range"))?;
        missing.push(at as u32);
        next = at + 1;
    }
    if position != column.len() {
        return Err(bad("trailing bytes after the reference"));
    }
    Ok((distance, length, missing))
}

/// `shared` without the entries at `missing` (increasing), which must leave `count` stamps.
fn remove_positions(shared: Vec<Timestamp>, missing: &[u32], count: usize) -> Result<Vec<Timestamp>, BlockError> {
    if missing.last().is_some_and(|&last| last as usize >= shared.len()) || shared.len() - missing.len() != count {
        return Err(BlockError::SharedTimestamps(format!(
            "record of {} stamps minus {} missing does not give {count}",
            shared.len(),
            missing.len()
        )));
    }
    if missing.is_empty() {
        return Ok(shared);
    }
    let mut out = Vec::with_capacity(count);
    let mut skip = missing.iter().peekable();
    for (i, t) in shared.into_iter().enumerate() {
        if skip.peek().is_some_and(|&&m| m as usize == i) {
            skip.next();
        } else {
            out.push(t);
        }
    }
    Ok(out)
}

/// Where a verified block's shared timestamp record is: `(distance, length)` from its reference,
/// `None` for a block with inline timestamps. For copying blocks without decoding them.
pub fn shared_reference(block: &[u8], header: &BlockHeader) -> Result<Option<(u32, u32)>, BlockError> {
    if header.flags & FLAG_SHARED_TIMESTAMPS == 0 {
        return Ok(None);
    }
    let start = header.header_bytes as usize;
    let column = block.get(start..start + header.timestamp_column_bytes as usize).ok_or(BlockError::TooShort(block.len()))?;
    let (distance, length, _) = parse_shared_reference(column)?;
    Ok(Some((distance, length)))
}

/// Changes the distance to the shared record of a verified block with shared timestamps, in
/// place, and renews its checksum: a block copied elsewhere, with its record, keeps its bytes
/// otherwise.
pub fn set_shared_distance(block: &mut [u8], header: &BlockHeader, distance: u32) {
    assert!(header.flags & FLAG_SHARED_TIMESTAMPS != 0, "BUG: block has inline timestamps");
    let at = header.header_bytes as usize;
    block[at..at + 4].copy_from_slice(&distance.to_le_bytes());
    let body_end = block.len() - CHECKSUM_BYTES;
    let checksum = crc32c(&block[..body_end]);
    block[body_end..].copy_from_slice(&checksum.to_le_bytes());
}

/// Checks a shared timestamp record's checksum without decoding it.
pub fn verify_shared_record(record: &[u8]) -> Result<(), BlockError> {
    if record.len() < 8 {
        return Err(BlockError::SharedTimestamps(format!("record of {} bytes is too short", record.len())));
    }
    let (body, stored) = record.split_at(record.len() - CHECKSUM_BYTES);
    let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
    let computed = crc32c(body);
    if stored != computed {
        return Err(BlockError::SharedTimestamps(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")));
    }
    Ok(())
}

/// Appends a shared timestamp record; `timestamps` sorted without repeats.
pub fn encode_shared_timestamps(timestamps: &[Timestamp], out: &mut Vec<u8>) {
    assert!(!timestamps.is_empty() && timestamps.len() <= u32::MAX as usize, "BUG: bad shared timestamp record size");
    let start = out.len();
    out.extend_from_slice(&(timestamps.len() as u32).to_le_bytes());
    codec::encode_timestamps(timestamps, out);
    let checksum = crc32c(&out[start..]);
    out.extend_from_slice(&checksum.to_le_bytes());
}

/// Verifies and decodes a shared timestamp record.
pub fn decode_shared_timestamps(record: &[u8]) -> Result<Vec<Timestamp>, BlockError> {
    let bad = |what: String| BlockError::SharedTimestamps(what);
    verify_shared_record(record)?;
    let body = &record[..record.len() - CHECKSUM_BYTES];
    let count = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
    if count > BLOCK_POINTS_LIMIT as usize {
        return Err(bad(format!("count {count} over the limit of {BLOCK_POINTS_LIMIT}")));
    }
    // A column needs at least 17 bytes for any count above a handful; bound the allocation.
    if count > body.len().saturating_mul(64).max(1 << 16) {
        return Err(bad(format!("implausible count {count}")));
    }
    Ok(codec::decode_timestamps(&body[4..], count)?)
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

    /// A header may not ask for more than [`BLOCK_POINTS_LIMIT`] points: a constant-delta
    /// column of a few bytes would otherwise make the reader allocate gigabytes (found by the
    /// `block_decode` fuzz target: a count of 436 million, 3.5 GB).
    #[test]
    fn a_block_over_the_point_limit_is_refused_and_one_at_it_decodes() {
        for (count, ok) in [(BLOCK_POINTS_LIMIT, true), (BLOCK_POINTS_LIMIT + 1, false)] {
            let timestamps: Vec<i64> = (0..i64::from(count)).collect();
            let values = ValueColumn::Bool(vec![true; count as usize]);
            let mut bytes = Vec::new();
            encode(SeriesId(3), &timestamps, &values, TimestampColumn::Inline, &mut bytes);
            assert!(bytes.len() < 4096, "a few bytes describe {count} points: {}", bytes.len());
            match decode(&bytes) {
                Ok(block) => assert!(ok && block.timestamps.len() == count as usize),
                Err(error) => assert!(!ok && error.to_string().contains("more points than a block may hold"), "{error}"),
            }
        }
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
            encode(SeriesId(9), &timestamps, &values, TimestampColumn::Inline, &mut out);
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
        encode(SeriesId(1), &timestamps, &values, TimestampColumn::Inline, &mut out);
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
        encode(SeriesId(1), &timestamps, &values, TimestampColumn::Inline, &mut out);
        for len in [0, 10, HEADER_BYTES_MIN, out.len() - 1] {
            assert!(decode(&out[..len]).is_err());
        }
    }

    #[test]
    fn header_statistics_describe_the_values() {
        let mut out = Vec::new();
        encode(SeriesId(3), &[1, 2, 3], &ValueColumn::F64(vec![2.0, f64::NAN, -1.0]), TimestampColumn::Inline, &mut out);
        let header = BlockHeader::verified(&out).expect("valid");
        assert_eq!(header.stats.min_f64(ValueKind::F64), Some(-1.0));
        assert_eq!(header.stats.max_f64(ValueKind::F64), Some(2.0));
        assert_eq!(header.stats.sum, 1.0);
    }

    #[test]
    fn shared_timestamps_are_the_record_minus_the_missing_positions() {
        let shared: Vec<i64> = (0..100).map(|i| i * 10).collect();
        let mut record = Vec::new();
        encode_shared_timestamps(&shared, &mut record);
        let missing = [0u32, 5, 6, 99];
        let own: Vec<i64> = shared.iter().enumerate().filter(|(i, _)| !missing.contains(&(*i as u32))).map(|(_, &t)| t).collect();
        let values = ValueColumn::I64(own.iter().map(|t| t * 2).collect());
        let mut block = Vec::new();
        let column = TimestampColumn::Shared { distance: 4242, length: record.len() as u32, missing: &missing };
        encode(SeriesId(5), &own, &values, column, &mut block);
        let mut asked = None;
        let decoded = decode_with_shared(&block, &mut |distance, length| {
            asked = Some((distance, length));
            decode_shared_timestamps(&record)
        })
        .expect("decodes");
        assert_eq!(asked, Some((4242, record.len() as u32)));
        assert_eq!(decoded.timestamps, own);
        assert_eq!(decoded.values, values);
        assert!(decode(&block).is_err(), "a shared block cannot decode without its record");
        let mut damaged = record.clone();
        damaged[5] ^= 1;
        assert!(decode_with_shared(&block, &mut |_, _| decode_shared_timestamps(&damaged)).is_err());
        let fewer: Vec<i64> = shared[..50].to_vec();
        assert!(decode_with_shared(&block, &mut |_, _| Ok(fewer.clone())).is_err(), "a record of the wrong size is caught");
    }

    /// Freezes the block format: if this fails, the bytes on disk changed. Bump
    /// `BLOCK_FORMAT_VERSION`, update docs/FORMAT.md, and only then the expected values.
    #[test]
    fn encoding_is_frozen() {
        let timestamps = [1_451_606_400_000_000_000i64, 1_451_606_410_000_000_000, 1_451_606_420_000_000_000];
        let mut inline = Vec::new();
        encode(SeriesId(42), &timestamps, &ValueColumn::F64(vec![1.5, -2.25, 3.0]), TimestampColumn::Inline, &mut inline);
        let mut shared = Vec::new();
        let column = TimestampColumn::Shared { distance: 300, length: 40, missing: &[1, 4] };
        encode(SeriesId(7), &timestamps, &ValueColumn::I64(vec![1, 2, 3]), column, &mut shared);
        let mut record = Vec::new();
        encode_shared_timestamps(&timestamps, &mut record);
        // The stored checksum: a CRC over the whole block including it would be the constant
        // CRC32C residue whatever the contents.
        let frozen = |bytes: &[u8]| (bytes.len(), u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().expect("4 bytes")));
        assert_eq!(frozen(&inline), (74, 0xcc4b_424a), "inline block");
        assert_eq!(frozen(&shared), (64, 0x5568_5340), "shared-timestamp block");
        assert_eq!(frozen(&record), (25, 0xcf68_5562), "shared timestamp record");
    }

    /// A block of version 1 (written before the varint encodings) still decodes; a version
    /// from a newer build is refused as such.
    #[test]
    fn older_block_versions_are_read_newer_ones_refused() {
        let timestamps = [10i64, 20, 40];
        let values = ValueColumn::F64(vec![1.5, -2.25, 3.0]);
        let mut block = Vec::new();
        encode(SeriesId(3), &timestamps, &values, TimestampColumn::Inline, &mut block);
        assert_eq!(block[0], BLOCK_FORMAT_VERSION);
        let with_version = |version: u8| {
            let mut copy = block.clone();
            copy[0] = version;
            let body = copy.len() - CHECKSUM_BYTES;
            let checksum = crc32c(&copy[..body]);
            copy[body..].copy_from_slice(&checksum.to_le_bytes());
            copy
        };
        let old = decode(&with_version(1)).expect("a version-1 block decodes");
        assert_eq!((old.timestamps, old.values), (timestamps.to_vec(), values));
        assert!(matches!(decode(&with_version(BLOCK_FORMAT_VERSION + 1)), Err(BlockError::Version(3))));
        assert!(matches!(decode(&with_version(0)), Err(BlockError::Version(0))));
    }

    #[test]
    #[should_panic(expected = "BUG")]
    fn empty_blocks_are_a_bug() {
        encode(SeriesId(1), &[], &ValueColumn::F64(vec![]), TimestampColumn::Inline, &mut Vec::new());
    }
}
