//! The byte layout of a log file: the file header and the record framing.
//!
//! This module owns encoding and decoding only; it does no I/O. Everything is little-endian and
//! every checksum is CRC32C. `docs/format/wal.md` draws the same layout with the recovery rules.
//!
//! Invariants:
//! - A file is `[header][record]*`, records back to back with no padding.
//! - A record's checksum covers its length field and its payload, so a flipped bit in either is
//!   caught, and a record can never be "valid" with a length that does not match its payload.
//! - Eight zero bytes are never a valid record header: the checksum of a zero length is
//!   `crc32c([0, 0, 0, 0]) != 0`. That is what lets the reader tell a zero-filled tail
//!   (preallocation, a file system that extended the size but lost the data) from a record.
//! - The version is read before the header checksum is trusted: a file written by a newer build
//!   may lay out its header differently, and treating it as corrupt would truncate data that is
//!   merely unreadable to us (see [`decode_header`]).

use std::fmt;

/// First bytes of every log file. The leading non-ASCII byte and the trailing newline catch
/// transfers that mangle text.
pub const MAGIC: [u8; 8] = *b"\x89SDBWAL\n";

/// Size of the file header in bytes.
pub const HEADER_LEN: usize = 24;

/// Size of a record header (length + checksum) in bytes.
pub const RECORD_HEADER_LEN: usize = 8;

/// Largest payload the framing can express.
pub const RECORD_PAYLOAD_MAX: usize = u32::MAX as usize;

/// The on-disk format versions this build knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum FormatVersion {
    /// `[len u32][crc u32][payload]` records after a 24-byte header.
    V1 = 1,
}

impl FormatVersion {
    /// The version new files are written with.
    pub const CURRENT: FormatVersion = FormatVersion::V1;
}

impl TryFrom<u16> for FormatVersion {
    type Error = u16;
    fn try_from(value: u16) -> Result<Self, u16> {
        match value {
            1 => Ok(FormatVersion::V1),
            other => Err(other),
        }
    }
}

/// Why a file header was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer than [`HEADER_LEN`] bytes: the header write was torn.
    Short { len: usize },
    /// The magic bytes do not match: not a log file, or a damaged one.
    BadMagic,
    /// The magic matches but the version is one this build does not read.
    UnsupportedVersion(u16),
    /// The header checksum does not match.
    BadChecksum { stored: u32, computed: u32 },
    /// The reserved flags are not zero.
    BadFlags(u16),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Short { len } => {
                write!(f, "file header torn: {len} of {HEADER_LEN} bytes")
            }
            HeaderError::BadMagic => write!(f, "bad magic bytes in file header"),
            HeaderError::UnsupportedVersion(found) => write!(f, "unsupported version {found}"),
            HeaderError::BadChecksum { stored, computed } => {
                write!(f, "file header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")
            }
            HeaderError::BadFlags(flags) => write!(f, "unknown header flags {flags:#06x}"),
        }
    }
}

/// The header at the start of every log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Format of the records that follow.
    pub version: FormatVersion,
    /// The id in the file's name; a mismatch means the file was renamed or copied wrongly.
    pub file_id: u64,
}

// File header, 24 bytes, little-endian:
//
//   0         8         10        12                  20            24
//   +---------+---------+---------+-------------------+-------------+
//   |  magic  | version |  flags  |      file id      | header crc  |
//   |  8 B    |  u16    | u16 = 0 |        u64        |    u32      |
//   +---------+---------+---------+-------------------+-------------+
//   header crc = CRC32C(bytes 0..20)

/// Encodes `header` into its 24 bytes.
pub fn encode_header(header: &FileHeader) -> [u8; HEADER_LEN] {
    let mut bytes = [0u8; HEADER_LEN];
    bytes[0..8].copy_from_slice(&MAGIC);
    bytes[8..10].copy_from_slice(&(header.version as u16).to_le_bytes());
    bytes[10..12].copy_from_slice(&0u16.to_le_bytes());
    bytes[12..20].copy_from_slice(&header.file_id.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[0..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Decodes the header at the start of `bytes` (the file's first bytes, possibly fewer than 24).
///
/// Checks in this order: length, magic, version, checksum, flags. The version comes before the
/// checksum on purpose: a newer format may change the header after the version field, and a file
/// we cannot read must stop recovery, not be cut off as "corrupt".
pub fn decode_header(bytes: &[u8]) -> Result<FileHeader, HeaderError> {
    if bytes.len() < HEADER_LEN {
        return Err(HeaderError::Short { len: bytes.len() });
    }
    if bytes[0..8] != MAGIC {
        return Err(HeaderError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let version = FormatVersion::try_from(version).map_err(HeaderError::UnsupportedVersion)?;
    let stored = read_u32(bytes, 20);
    let computed = crc32c::crc32c(&bytes[0..20]);
    if stored != computed {
        return Err(HeaderError::BadChecksum { stored, computed });
    }
    let flags = u16::from_le_bytes([bytes[10], bytes[11]]);
    if flags != 0 {
        return Err(HeaderError::BadFlags(flags));
    }
    let file_id = u64::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15], bytes[16], bytes[17], bytes[18], bytes[19]]);
    Ok(FileHeader { version, file_id })
}

/// True when the checksum at bytes 20..24 matches bytes 0..20, whatever the version says. Every
/// version keeps this: it tells a file of a newer build (an unknown version under a matching
/// checksum, which recovery refuses to touch) from a damaged version field (which it sets aside).
pub fn header_checksum_matches(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_LEN && read_u32(bytes, 20) == crc32c::crc32c(&bytes[0..20])
}

// Record, 8 + len bytes, little-endian, records back to back after the file header:
//
//   0          4          8                    8 + len
//   +----------+----------+--------------------+
//   |   len    |   crc    |  payload (len B)   |
//   |   u32    |   u32    |                    |
//   +----------+----------+--------------------+
//   crc = CRC32C(len as 4 LE bytes ‖ payload)

/// The checksum stored in a record header.
pub fn record_checksum(payload: &[u8]) -> u32 {
    let len = u32::try_from(payload.len()).expect("BUG: record length checked by the caller");
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload)
}

/// The encoded size of a record with a payload of `payload_len` bytes.
pub fn record_len(payload_len: usize) -> usize {
    RECORD_HEADER_LEN + payload_len
}

/// Appends the framed `payload` to `out`, given its precomputed [`record_checksum`].
pub fn encode_record(payload: &[u8], checksum: u32, out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).expect("BUG: record length checked by the caller");
    debug_assert_eq!(checksum, record_checksum(payload));
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&checksum.to_le_bytes());
    out.extend_from_slice(payload);
}

/// What [`decode_record`] found at an offset.
#[derive(Debug, PartialEq, Eq)]
pub enum RecordStep<'a> {
    /// An intact record; the next one starts at `next`.
    Record { payload: &'a [u8], next: usize },
    /// The offset is the end of the data: a clean end of the log.
    End,
    /// Only zero bytes from here to the end: a preallocated or zero-filled tail, also an end.
    ZeroTail,
    /// Not a valid record; `reason` says why. Everything from this offset on is unreadable.
    Bad { reason: String },
}

/// Decodes the record starting at `offset` of `data` (a whole file, header included).
pub fn decode_record(data: &[u8], offset: usize) -> RecordStep<'_> {
    assert!(offset <= data.len(), "BUG: record offset past the end of the data");
    let rest = &data[offset..];
    if rest.is_empty() {
        return RecordStep::End;
    }
    if rest.len() < RECORD_HEADER_LEN || rest[..RECORD_HEADER_LEN] == [0u8; RECORD_HEADER_LEN] {
        if rest.iter().all(|&b| b == 0) {
            return RecordStep::ZeroTail;
        }
        if rest.len() < RECORD_HEADER_LEN {
            return RecordStep::Bad { reason: format!("torn record header: {} of {RECORD_HEADER_LEN} bytes", rest.len()) };
        }
        return RecordStep::Bad { reason: "zero record header followed by data".to_string() };
    }
    let len = read_u32(rest, 0) as usize;
    let stored = read_u32(rest, 4);
    let available = rest.len() - RECORD_HEADER_LEN;
    if len > available {
        return RecordStep::Bad { reason: format!("record of {len} bytes extends past the end of the file ({available} bytes left)") };
    }
    let payload = &rest[RECORD_HEADER_LEN..RECORD_HEADER_LEN + len];
    let computed = record_checksum(payload);
    if stored != computed {
        return RecordStep::Bad { reason: format!("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}") };
    }
    RecordStep::Record { payload, next: offset + RECORD_HEADER_LEN + len }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let header = FileHeader { version: FormatVersion::V1, file_id: 0x0102_0304_0506_0708 };
        let bytes = encode_header(&header);
        assert_eq!(decode_header(&bytes), Ok(header));
        assert_eq!(decode_header(&bytes[..23]), Err(HeaderError::Short { len: 23 }));
    }

    /// Freezes the encoding: an accidental format change must fail here, loudly.
    #[test]
    fn encoding_is_frozen() {
        let header = encode_header(&FileHeader { version: FormatVersion::V1, file_id: 7 });
        assert_eq!(&header[..20], b"\x89SDBWAL\n\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00");
        assert_eq!(u32::from_le_bytes([header[20], header[21], header[22], header[23]]), 0x4ff1_ffe0);
        let mut record = Vec::new();
        encode_record(b"abc", record_checksum(b"abc"), &mut record);
        assert_eq!(record.len(), record_len(3));
        assert_eq!(&record[..4], &[3, 0, 0, 0]);
        assert_eq!(u32::from_le_bytes([record[4], record[5], record[6], record[7]]), 0x5514_83f8);
        assert_eq!(&record[8..], b"abc");
    }

    #[test]
    fn zero_header_is_never_a_valid_record() {
        assert_ne!(record_checksum(&[]), 0);
        let mut data = vec![0u8; 40];
        assert_eq!(decode_record(&data, 0), RecordStep::ZeroTail);
        assert_eq!(decode_record(&data, 37), RecordStep::ZeroTail);
        data[39] = 1;
        assert!(matches!(decode_record(&data, 0), RecordStep::Bad { .. }));
        assert!(matches!(decode_record(&data, 37), RecordStep::Bad { .. }));
    }

    #[test]
    fn version_is_checked_before_the_checksum() {
        let mut bytes = encode_header(&FileHeader { version: FormatVersion::V1, file_id: 1 });
        bytes[8] = 2;
        assert_eq!(decode_header(&bytes), Err(HeaderError::UnsupportedVersion(2)));
        bytes[8] = 1;
        bytes[13] ^= 1;
        assert!(matches!(decode_header(&bytes), Err(HeaderError::BadChecksum { .. })));
        bytes[0] = b'X';
        assert_eq!(decode_header(&bytes), Err(HeaderError::BadMagic));
    }

    #[test]
    fn records_decode_and_reject_damage() {
        let mut data = Vec::new();
        for payload in [&b""[..], b"x", b"hello"] {
            encode_record(payload, record_checksum(payload), &mut data);
        }
        let mut offset = 0;
        let mut seen = Vec::new();
        while let RecordStep::Record { payload, next } = decode_record(&data, offset) {
            seen.push(payload.to_vec());
            offset = next;
        }
        assert_eq!(seen, vec![b"".to_vec(), b"x".to_vec(), b"hello".to_vec()]);
        assert_eq!(offset, data.len());
        assert_eq!(decode_record(&data, offset), RecordStep::End);
        let mut flipped = data.clone();
        *flipped.last_mut().expect("not empty") ^= 0x40;
        assert!(matches!(decode_record(&flipped, 17), RecordStep::Bad { .. }));
        assert!(matches!(decode_record(&data[..data.len() - 1], 17), RecordStep::Bad { .. }));
    }
}
