//! i64 and u64 columns: CONSTANT, PCO, RAW.
//!
//! Integer sensor fields are counters, states and quantised readings: pcodec's binning plus its
//! automatic delta choice fits both monotonic counters and noisy levels, and it covers the full
//! range of both types, extremes included. CONSTANT is kept as its own tag because idle
//! counters and status codes are constant for whole blocks and 9 bytes beats any pco header.
//! RAW is for columns too short for pco to pay.

use super::{pco_blob, read_u64, tag, CodecError};
use pco::data_types::Number;

/// The two integer types share one layout; this trait gives their 8-byte little-endian form.
pub(crate) trait Int: Number + Default + Eq {
    fn to_le(self) -> [u8; 8];
    fn from_le(bytes: &[u8]) -> Self;
}

impl Int for i64 {
    fn to_le(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn from_le(bytes: &[u8]) -> Self {
        read_u64(bytes) as i64
    }
}

impl Int for u64 {
    fn to_le(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn from_le(bytes: &[u8]) -> Self {
        read_u64(bytes)
    }
}

pub(crate) fn encode<T: Int>(values: &[T], out: &mut Vec<u8>) {
    let start = out.len();
    let raw_len = values.len() * 8;
    if let [first, rest @ ..] = values {
        if rest.iter().all(|x| x == first) {
            out.push(tag::CONSTANT);
            out.extend_from_slice(&first.to_le());
            return;
        }
        out.push(tag::PCO);
        if pco_blob::compress(values, pco_blob::Delta::Auto, out) && out.len() - start - 1 < raw_len {
            return;
        }
        out.truncate(start);
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
        assert_eq!(encoded(&[u64::MAX])[0], tag::CONSTANT);
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
        let out = encoded(&[i64::MIN, i64::MAX, 0, -1]);
        assert_eq!(out[0], tag::RAW);
        encoded(&[u64::MAX, 0, u64::MAX, 1].repeat(300));
        encoded(&[i64::MIN, i64::MAX].repeat(300));
        assert_eq!(encoded::<u64>(&[]), [tag::RAW]);
    }
}
