//! Column compression: timestamps and values of one block.
//!
//! Every encoded column starts with a one-byte encoding tag, so the encoder can choose per block
//! what pays best (as VictoriaMetrics' lib/encoding does) and the decoder needs no outside hint
//! beyond the value kind and count the block header already holds. Each kind lives in its own
//! file with the reasons for its encodings; the byte layouts are specified in
//! `docs/format/codec.md`, and `tests.rs` freezes them.
//!
//! Decoders treat input as untrusted: any bytes give a value or an `Err`, never a panic, and
//! every allocation is bounded by `count` or by the input's length.

mod bools;
mod floats;
mod integers;
mod payload;
mod pco_blob;
#[cfg(test)]
mod tests;
mod timestamps;
mod varints;

use crate::error::CodecError;
use crate::model::{ValueColumn, ValueKind};

/// Encoding tags: the first byte of every column. One namespace for all kinds, so a tag names
/// the same idea everywhere; each kind accepts only the tags listed for it in the spec.
pub mod tag {
    /// Fixed-width little-endian values (timestamps, f64, i64, u64).
    pub const RAW: u8 = 0;
    /// One value repeated `count` times (f64, i64, u64, bool).
    pub const CONSTANT: u8 = 1;
    /// Arithmetic sequence: first value and common difference (timestamps).
    pub const CONSTANT_DELTA: u8 = 2;
    /// A pcodec wrapped-format chunk holding all values (timestamps, f64, i64, u64).
    pub const PCO: u8 = 3;
    /// f64s that are `k / 10^d`: `d` and a pcodec chunk of the i64 `k`s (f64).
    pub const DECIMAL: u8 = 4;
    /// One bit per value (bool).
    pub const BITPACKED: u8 = 5;
    /// Lengths column, then the payloads concatenated (bytes).
    pub const PAYLOAD_RAW: u8 = 6;
    /// Lengths column, then one LZ4 block of the concatenated payloads (bytes).
    pub const PAYLOAD_LZ4: u8 = 7;
    /// Zigzag varints of first- or second-order differences (timestamps, i64, u64); block
    /// format 2.
    pub const DELTA_VARINT: u8 = 8;
    /// f64s that are `k / 10^d`: `d` and the `k`s as in DELTA_VARINT (f64); block format 2.
    pub const DECIMAL_VARINT: u8 = 9;
}

/// Runs `f` with quick encodings on this thread, for the short blocks of a memtable flush,
/// which compaction later rewrites into long blocks at full effort. Columns shorter than 2,048
/// numbers take varints (DELTA_VARINT, DECIMAL_VARINT) wherever they apply, as columns under
/// 32 always do; the rest (floats that are not short decimals) go to pco with first-order
/// deltas at compression level 4 instead of 8. pco at level 4 took the flush's encoding time
/// down by about two thirds (`sensordb bench engine --file` on a TSBS IoT day, flushing every
/// 500,000 points: ingest CPU 1.7-2.0 s → 1.1-1.2 s) for 2-4% more bytes before compaction;
/// varints then took the server's CPU per million values of a TSBS load at scale 1000 (blocks
/// of about 100 points, where pco was 12% of the samples) from 0.51 to 0.45 CPU-s, for larger
/// blocks until compaction and the same bytes after it. Decoders need no hint: a column's tag
/// names its encoding, and a pco chunk its delta encoding and bins.
///
/// A thread-local setting rather than a parameter, so the block and segment writers between
/// the flush and the codec stay as they are; it is restored when `f` returns or unwinds.
pub fn with_quick_encoding<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            pco_blob::QUICK.with(|q| q.set(self.0));
        }
    }
    let _restore = Restore(pco_blob::QUICK.with(|q| q.replace(true)));
    f()
}

/// Appends the encoding of `timestamps` (any order, repeats allowed) to `out`.
pub fn encode_timestamps(timestamps: &[i64], out: &mut Vec<u8>) {
    timestamps::encode(timestamps, out);
}

/// Decodes `count` timestamps written by [`encode_timestamps`]; `input` is exactly the column.
pub fn decode_timestamps(input: &[u8], count: usize) -> Result<Vec<i64>, CodecError> {
    timestamps::decode(input, count)
}

/// Appends the encoding of `values` to `out`.
pub fn encode_values(values: &ValueColumn, out: &mut Vec<u8>) {
    match values {
        ValueColumn::F64(v) => floats::encode(v, out),
        ValueColumn::I64(v) => integers::encode(v, out),
        ValueColumn::U64(v) => integers::encode(v, out),
        ValueColumn::Bool(v) => bools::encode(v, out),
        ValueColumn::Bytes(v) => payload::encode(v, out),
    }
}

/// Like [`encode_values`], but uncompressed byte payloads are left out: when it returns them,
/// the caller appends them, concatenated, right after the column written so far.
pub fn encode_values_leaving_payloads<'a>(values: &'a ValueColumn, out: &mut Vec<u8>) -> Option<&'a [bytes::Bytes]> {
    match values {
        ValueColumn::Bytes(v) => payload::encode_leaving_raw(v, out).then_some(v.as_slice()),
        other => {
            encode_values(other, out);
            None
        }
    }
}

/// Decodes `count` values of `kind` written by [`encode_values`]; `input` is exactly the column.
pub fn decode_values(kind: ValueKind, input: &[u8], count: usize) -> Result<ValueColumn, CodecError> {
    Ok(match kind {
        ValueKind::F64 => ValueColumn::F64(floats::decode(input, count)?),
        ValueKind::I64 => ValueColumn::I64(integers::decode(input, count)?),
        ValueKind::U64 => ValueColumn::U64(integers::decode(input, count)?),
        ValueKind::Bool => ValueColumn::Bool(bools::decode(input, count)?),
        ValueKind::Bytes => ValueColumn::Bytes(payload::decode(input, count)?),
    })
}

fn encode_raw_i64(values: &[i64], out: &mut Vec<u8>) {
    out.push(tag::RAW);
    out.reserve(values.len() * 8);
    for x in values {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

fn decode_raw_i64(body: &[u8], count: usize) -> Result<Vec<i64>, CodecError> {
    expect_len(body, count.checked_mul(8).ok_or(CodecError::Invalid("count overflow".into()))?)?;
    Ok(body.chunks_exact(8).map(read_i64).collect())
}

/// The body after the tag must be exactly `len` bytes: shorter is truncation, longer is garbage.
fn expect_len(body: &[u8], len: usize) -> Result<(), CodecError> {
    match body.len() {
        n if n < len => Err(CodecError::Truncated { needed: len + 1, available: n + 1 }),
        n if n > len => Err(CodecError::Invalid(format!("{} bytes after a {len}-byte column body", n - len))),
        _ => Ok(()),
    }
}

/// Little-endian u64 from the first 8 bytes; callers have checked the length.
fn read_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("BUG: caller checked 8 bytes"))
}

fn read_i64(bytes: &[u8]) -> i64 {
    read_u64(bytes) as i64
}

fn read_u32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().expect("BUG: caller checked 4 bytes"))
}
