//! i64 and u64 columns: CONSTANT, DELTA_VARINT, PCO, RAW.
//!
//! Integer sensor fields are counters, states and quantised readings: pcodec's binning plus its
//! automatic delta choice fits both monotonic counters and noisy levels, and it covers the full
//! range of both types, extremes included. CONSTANT is kept as its own tag because idle
//! counters and status codes are constant for whole blocks and 9 bytes beats any pco header.
//! Columns too short for pco to pay (fewer than [`varints::SMALL_N`] values) get varints of their
//! differences (DELTA_VARINT, u64s taken as their i64 bits), or RAW when that is no smaller.

use super::{pco_blob, read_u64, tag, varints, CodecError};
use pco::data_types::Number;

/// The two integer types share one layout; this trait gives their 8-byte little-endian form.
pub(crate) trait Int: Number + Default + Eq {
    fn to_le(self) -> [u8; 8];
    fn from_le(bytes: &[u8]) -> Self;
    /// The same 64 bits as an i64 (what DELTA_VARINT takes differences of).
    fn to_bits(self) -> i64;
    fn from_bits(bits: i64) -> Self;
}

impl Int for i64 {
    fn to_le(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn from_le(bytes: &[u8]) -> Self {
        read_u64(bytes) as i64
    }
    fn to_bits(self) -> i64 {
        self
    }
    fn from_bits(bits: i64) -> Self {
        bits
    }
}

impl Int for u64 {
    fn to_le(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn from_le(bytes: &[u8]) -> Self {
        read_u64(bytes)
    }
    fn to_bits(self) -> i64 {
        self as i64
    }
    fn from_bits(bits: i64) -> Self {
        bits as u64
    }
}

pub(crate) fn encode<T: Int>(values: &[T], out: &mut Vec<u8>) {
    let start = out.len();
    let raw_len = values.len() * 8;
    if let [first, rest @ ..] = values {
        let constant = rest.iter().all(|x| x == first);
        if values.len() < varints::limit() {
            // Sized even for a constant column: a small count or state read once takes 2-4
            // bytes as varints against CONSTANT's 8.
            let bits: Vec<i64> = values.iter().map(|&x| x.to_bits()).collect();
            let (len, order) = varints::best(&bits);
            if len < raw_len && !(constant && len >= 8) {
                out.push(tag::DELTA_VARINT);
                varints::encode(&bits, order, out);
                return;
            }
        }
        if constant {
            out.push(tag::CONSTANT);
            out.extend_from_slice(&first.to_le());
            return;
        }
        if values.len() >= varints::SMALL_N {
            out.push(tag::PCO);
            if pco_blob::compress(values, pco_blob::Delta::Auto, out) && out.len() - start - 1 < raw_len {
                return;
            }
            out.truncate(start);
        }
    }
    out.push(tag::RAW);
    out.reserve(raw_len);
    for x in values {
        out.extend_from_slice(&x.to_le());
    }
}

pub(crate) fn decode<T: Int>(input: &[u8], count: usize) -> Result<Vec<T>, CodecError> {
    let (&t, body) = input.split_first().ok_or(CodecError::Truncated { needed: 1, available: 0 })?;
    match t {
        tag::CONSTANT => {
            super::expect_len(body, 8)?;
            Ok(vec![T::from_le(body); count])
        }
        tag::PCO => pco_blob::decompress::<T>(body, count),
        tag::DELTA_VARINT => Ok(varints::decode(body, count)?.into_iter().map(T::from_bits).collect()),
        tag::RAW => {
            super::expect_len(body, count.checked_mul(8).ok_or(CodecError::Invalid("count overflow".into()))?)?;
            Ok(body.chunks_exact(8).map(T::from_le).collect())
        }
        other => Err(CodecError::UnknownEncoding(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded<T: Int + std::fmt::Debug>(values: &[T]) -> Vec<u8> {
        let mut out = vec![];
        encode(values, &mut out);
        assert_eq!(decode::<T>(&out, values.len()).expect("decodes"), values);
        out
    }

    #[test]
    fn constant_column() {
        let out = encoded(&[i64::MIN; 500]);
        assert_eq!((out[0], out.len()), (tag::CONSTANT, 9));
        assert_eq!(encoded(&[0x1234_5678_9abc_def0u64])[0], tag::CONSTANT, "a wide number: 9 bytes as a varint");
        assert_eq!(encoded(&[u64::MAX]), [tag::DELTA_VARINT, 1, 1], "-1 in i64 bits: one byte");
    }

    #[test]
    fn counters_go_to_pco_and_shrink() {
        let counter: Vec<u64> = (0..8640u64).map(|i| 1_000_000 + i * 17 + i % 5).collect();
        let out = encoded(&counter);
        assert_eq!(out[0], tag::PCO);
        assert!(out.len() < counter.len() / 2, "{} bytes", out.len());
        let levels: Vec<i64> = (0..8640i64).map(|i| (i * 7919) % 200 - 100).collect();
        assert_eq!(encoded(&levels)[0], tag::PCO);
    }

    #[test]
    fn extremes_and_short_columns() {
        // MIN, then steps of -1, MIN + 1, -1: 10 + 1 + 10 + 1 varint bytes and the order byte.
        let out = encoded(&[i64::MIN, i64::MAX, 0, -1]);
        assert_eq!((out[0], out.len()), (tag::DELTA_VARINT, 1 + 23));
        // Differences as wide as the numbers: varints take more than 8 bytes each.
        let out = encoded::<i64>(&[0x1234_5678_9abc_def0, -0x7edc_ba98_7654_3210, 0x4f00_0000_0000_0001, -0x3fff_0000_0000_0000]);
        assert_eq!((out[0], out.len()), (tag::RAW, 1 + 32));
        let small: Vec<u64> = vec![u64::MAX, 3, 5, u64::MAX - 1];
        assert_eq!(encoded(&small)[0], tag::DELTA_VARINT);
        encoded(&[u64::MAX, 0, u64::MAX, 1].repeat(300));
        encoded(&[i64::MIN, i64::MAX].repeat(300));
        assert_eq!(encoded::<u64>(&[]), [tag::RAW]);
    }
}
