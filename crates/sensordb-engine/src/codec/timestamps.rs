//! Timestamp columns: CONSTANT_DELTA, DELTA_VARINT, PCO, RAW.
//!
//! Sensors mostly report on a fixed period, so a gap-free block is an arithmetic sequence and
//! two numbers describe it whatever its length (CONSTANT_DELTA). Everything else (jitter, gaps,
//! out-of-order or repeated stamps) goes to pcodec with first-order deltas, which stores the
//! small spread of the intervals in a few bits per stamp; a column too short for pco to pay
//! (fewer than [`varints::SMALL_N`] stamps) gets varints of its changes of interval instead
//! (DELTA_VARINT). RAW exists only for columns nothing else shrinks.
//!
//! Deltas use wrapping arithmetic on both sides, so any i64 sequence, however it jumps,
//! round-trips.

use super::{pco_blob, read_i64, tag, varints, CodecError};

/// Bytes of a CONSTANT_DELTA column after its tag: first stamp and difference.
const CONSTANT_DELTA_BODY: usize = 16;

pub(crate) fn encode(timestamps: &[i64], out: &mut Vec<u8>) {
    // Sized first even where CONSTANT_DELTA applies: one stamp or two (a fleet's flush writes
    // a block per sensor and point) take 10-15 bytes as varints against its 16.
    let varint = (!timestamps.is_empty() && timestamps.len() < varints::limit()).then(|| varints::best(timestamps));
    if let Some(delta) = constant_delta(timestamps) {
        if varint.is_none_or(|(len, _)| len >= CONSTANT_DELTA_BODY) {
            out.push(tag::CONSTANT_DELTA);
            out.extend_from_slice(&timestamps.first().copied().unwrap_or(0).to_le_bytes());
            out.extend_from_slice(&delta.to_le_bytes());
            return;
        }
    }
    let raw_len = timestamps.len() * 8;
    if let Some((len, order)) = varint {
        if len < raw_len {
            out.push(tag::DELTA_VARINT);
            varints::encode(timestamps, order, out);
        } else {
            super::encode_raw_i64(timestamps, out);
        }
        return;
    }
    let start = out.len();
    out.push(tag::PCO);
    if pco_blob::compress(timestamps, pco_blob::Delta::Consecutive1, out) && out.len() - start - 1 < raw_len {
        return;
    }
    out.truncate(start);
    super::encode_raw_i64(timestamps, out);
}

/// The common difference when `timestamps` is an arithmetic sequence (0 for fewer than two).
fn constant_delta(timestamps: &[i64]) -> Option<i64> {
    let delta = match timestamps {
        [a, b, ..] => b.wrapping_sub(*a),
        _ => return Some(0),
    };
    timestamps.windows(2).all(|w| w[1].wrapping_sub(w[0]) == delta).then_some(delta)
}

pub(crate) fn decode(input: &[u8], count: usize) -> Result<Vec<i64>, CodecError> {
    let (&t, body) = input.split_first().ok_or(CodecError::Truncated { needed: 1, available: 0 })?;
    match t {
        tag::CONSTANT_DELTA => {
            super::expect_len(body, 16)?;
            let (first, delta) = (read_i64(&body[..8]), read_i64(&body[8..]));
            // Multiplying is the repeated wrapping addition (arithmetic mod 2^64) without the
            // loop-carried dependency, so the loop vectorises.
            Ok((0..count as i64).map(|i| first.wrapping_add(i.wrapping_mul(delta))).collect())
        }
        tag::PCO => pco_blob::decompress::<i64>(body, count),
        tag::DELTA_VARINT => varints::decode(body, count),
        tag::RAW => super::decode_raw_i64(body, count),
        other => Err(CodecError::UnknownEncoding(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(ts: &[i64]) -> Vec<u8> {
        let mut out = vec![];
        encode(ts, &mut out);
        assert_eq!(decode(&out, ts.len()).expect("decodes"), ts);
        out
    }

    const T0: i64 = 1_700_000_000_000_000_000;
    const SEC: i64 = 1_000_000_000;

    #[test]
    fn regular_intervals_are_constant_delta() {
        let ts: Vec<i64> = (0..4320).map(|i| T0 + i * 10 * SEC).collect();
        let out = encoded(&ts);
        assert_eq!(out[0], tag::CONSTANT_DELTA);
        assert_eq!(out.len(), 17);
        assert_eq!(encoded(&[])[0], tag::CONSTANT_DELTA);
        // One stamp or two take fewer bytes raw (8) or as varints (order byte, T0 in 9 bytes,
        // -5 in one) than as first and difference (16).
        assert_eq!((encoded(&[T0])[0], encoded(&[T0]).len()), (tag::RAW, 9));
        assert_eq!((encoded(&[T0, T0 - 5])[0], encoded(&[T0, T0 - 5]).len()), (tag::DELTA_VARINT, 12));
        let three: Vec<i64> = (0..3).map(|i| T0 + i * 10 * SEC).collect();
        assert_eq!(encoded(&three)[0], tag::CONSTANT_DELTA, "as many bytes as varints: the constant form");
        let wrapping: Vec<i64> = (0..40i64).map(|i| i.wrapping_mul(i64::MAX)).collect();
        assert_eq!(encoded(&wrapping)[0], tag::CONSTANT_DELTA, "wrapping deltas");
        assert_eq!(encoded(&wrapping[..3])[0], tag::DELTA_VARINT, "order 2 of a constant difference is zeros");
    }

    #[test]
    fn jitter_and_gaps_go_to_pco_and_stay_small() {
        // ±50 ms of jitter on 1 s stamps, with a 10-minute outage.
        let mut state = 12345u64;
        let ts: Vec<i64> = (0..86_400i64)
            .filter(|i| !(40_000..40_600).contains(i))
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                T0 + i * SEC + ((state >> 33) % 100_000_000) as i64 - 50_000_000
            })
            .collect();
        let out = encoded(&ts);
        assert_eq!(out[0], tag::PCO);
        let per_value = out.len() as f64 / ts.len() as f64;
        assert!(per_value < 4.0, "{per_value} bytes/stamp");
    }

    #[test]
    fn tiny_irregular_columns_take_varints_or_raw() {
        // Order 1: 5, -4, +8 zigzagged, one byte each.
        assert_eq!(encoded(&[5, 1, 9]), [tag::DELTA_VARINT, 1, 10, 7, 16]);
        let out = encoded(&[0x1234_5678_9abc_def0, -0x7edc_ba98_7654_3210, 0x4f00_0000_0000_0001]);
        assert_eq!((out[0], out.len()), (tag::RAW, 1 + 24), "varints of these would be longer");
    }

    #[test]
    fn rejects_bad_lengths_and_tags() {
        assert!(decode(&[], 0).is_err());
        assert!(decode(&[tag::CONSTANT_DELTA, 0], 1).is_err());
        assert!(decode(&[tag::RAW, 0, 0, 0, 0, 0, 0, 0], 1).is_err());
        assert_eq!(decode(&[tag::DECIMAL], 0), Err(CodecError::UnknownEncoding(tag::DECIMAL)));
    }
}
