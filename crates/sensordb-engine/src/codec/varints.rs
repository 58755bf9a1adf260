//! Short integer columns (timestamps, i64, u64, the `k`s of decimal floats): zigzag LEB128
//! varints of first- or second-order differences (DELTA_VARINT, DECIMAL_VARINT).
//!
//! A memtable flush of a fleet writes a block per sensor with one point or a few, and
//! compaction then joins them a few at a time: columns of 2 to 30 numbers, by the hundred
//! thousand. pco costs 7-25 µs to encode such a column whatever its length (its bin
//! optimisation, histograms and delta search are per chunk), which was nearly half of a
//! compaction's CPU over one-point blocks (`perf`, 400,000 series), and its chunk header is
//! most of what it writes: a 16-number decimal walk took 23 bytes under pco and takes about 20
//! here, jittered stamps 73 against about 70. Below [`SMALL_N`] numbers pco is not tried at all;
//! this encoding is a loop of shifts and costs well under a microsecond.
//!
//! Layout after the tag: the order (1 or 2), then `n` varints: the first number, then in
//! order 1 each wrapping difference from the number before, in order 2 the first difference
//! and then each wrapping change of difference. Zigzag maps signed to unsigned first. Regular
//! stamps with jitter cost fewer bytes in order 2 (the changes of interval are the jitter),
//! random walks fewer in order 1; the encoder sizes both and keeps the smaller.

use super::CodecError;
use sensordb_model::varint::{get_varint, put_varint};
use sensordb_model::zigzag::{unzigzag, zigzag};

/// Columns with fewer numbers than this never try pco: the varints are as small as its
/// output up to about this length (measured on decimal walks and jittered stamps) and cost a
/// fraction of its time.
pub(crate) const SMALL_N: usize = 32;

/// Columns shorter than this take varints where they can: [`SMALL_N`], or under quick
/// encoding (a memtable flush, whose short blocks compaction rewrites at full effort) every
/// column quick encoding covers.
pub(crate) fn limit() -> usize {
    if super::pco_blob::QUICK.with(|q| q.get()) {
        super::pco_blob::QUICK_N_MAX
    } else {
        SMALL_N
    }
}

/// Bytes of the LEB128 varint of `value`.
fn varint_len(value: u64) -> usize {
    // 1 byte per 7 bits, at least one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// The differences of the given order, as zigzag-mapped numbers; the first number of the
/// column (and for order 2 its first difference) stays as it is.
fn differences(values: &[i64], order: u8) -> impl Iterator<Item = u64> + '_ {
    let mut previous = 0i64;
    let mut previous_delta = 0i64;
    values.iter().enumerate().map(move |(i, &x)| {
        let delta = x.wrapping_sub(previous);
        let stored = if order == 2 && i >= 2 { delta.wrapping_sub(previous_delta) } else { delta };
        previous = x;
        previous_delta = delta;
        zigzag(stored)
    })
}

/// Bytes the body (order byte and varints) takes in `order`.
fn body_len(values: &[i64], order: u8) -> usize {
    1 + differences(values, order).map(varint_len).sum::<usize>()
}

/// Bytes [`encode`] appends for `values` (order byte and varints, not the tag), with the order
/// it would choose.
pub(crate) fn best(values: &[i64]) -> (usize, u8) {
    let (first, second) = (body_len(values, 1), body_len(values, 2));
    if second < first {
        (second, 2)
    } else {
        (first, 1)
    }
}

/// Appends the order byte and the varints of `values` in `order`.
pub(crate) fn encode(values: &[i64], order: u8, out: &mut Vec<u8>) {
    debug_assert!(order == 1 || order == 2);
    out.push(order);
    for stored in differences(values, order) {
        put_varint(out, stored);
    }
}

/// Decodes `count` numbers from `body` (order byte and varints, exactly).
pub(crate) fn decode(body: &[u8], count: usize) -> Result<Vec<i64>, CodecError> {
    let (&order, varints) = body.split_first().ok_or(CodecError::Truncated { needed: 2, available: 1 })?;
    if order != 1 && order != 2 {
        return Err(CodecError::Invalid(format!("varint column of difference order {order}")));
    }
    // Every number takes at least one byte: a count beyond the bytes cannot be right, and no
    // allocation is sized by more than the input.
    if count > varints.len() {
        return Err(CodecError::Truncated { needed: count.saturating_add(2), available: body.len() + 1 });
    }
    let mut values = Vec::with_capacity(count);
    let (mut position, mut previous, mut delta) = (0usize, 0i64, 0i64);
    for i in 0..count {
        // The message is made only on failure: formatted per number, it was most of a decode.
        let at = position;
        let stored =
            get_varint(varints, &mut position).map(unzigzag).ok_or_else(|| CodecError::Invalid(format!("bad varint at byte {at}")))?;
        delta = if order == 2 && i >= 2 { delta.wrapping_add(stored) } else { stored };
        previous = previous.wrapping_add(delta);
        values.push(previous);
    }
    if position != varints.len() {
        return Err(CodecError::Invalid(format!("{} bytes after {count} varints", varints.len() - position)));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(values: &[i64], order: u8) -> Vec<u8> {
        let mut out = Vec::new();
        encode(values, order, &mut out);
        assert_eq!(decode(&out, values.len()).expect("own encoding decodes"), values);
        out
    }

    #[test]
    fn sizes_are_as_computed_and_the_smaller_order_is_chosen() {
        let jittered: Vec<i64> = (0..16).map(|i| 1_700_000_000_000_000_000 + i * 10_000_000_000 + (i % 3) * 7_000_000).collect();
        let (len, order) = best(&jittered);
        assert_eq!(order, 2, "stamps on a period with jitter: changes of interval are small");
        assert_eq!(round_trip(&jittered, order).len(), len);
        let walk = [2137i64, 2139, 2136, 2140, 2138, 2135];
        let (len, order) = best(&walk);
        assert_eq!(order, 1, "a random walk: first differences are smaller");
        assert_eq!(round_trip(&walk, order).len(), len);
        // Order byte, the first value (2137 zigzagged: 2 bytes), five one-byte steps.
        assert_eq!(len, 8);
    }

    #[test]
    fn varint_lengths_match_the_encoder() {
        for value in [0u64, 1, 127, 128, 16_383, 16_384, u64::MAX >> 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(varint_len(value), out.len(), "{value}");
        }
    }

    #[test]
    fn damaged_bodies_are_errors() {
        let mut out = Vec::new();
        encode(&[5, 6, 7], 1, &mut out);
        assert!(decode(&out, 4).is_err(), "too few varints");
        assert!(decode(&out, 2).is_err(), "bytes left over");
        assert!(decode(&[3, 0, 0], 2).is_err(), "unknown order");
        assert!(decode(&[], 0).is_err(), "no order byte");
        assert!(decode(&[1, 0x80], 1).is_err(), "truncated varint");
        let message = decode(&[1, 4, 0x80, 0x80], 2).expect_err("truncated varint").to_string();
        assert!(message.contains("bad varint at byte 1"), "names where the bad varint starts: {message}");
        assert!(decode(&[1], usize::MAX).is_err(), "count beyond the input");
        assert_eq!(decode(&[1], 0).expect("an empty column"), Vec::<i64>::new());
    }

    proptest! {
        #[test]
        fn any_numbers_round_trip_in_both_orders(values in proptest::collection::vec(any::<i64>(), 0..40)) {
            for order in [1, 2] {
                let mut out = Vec::new();
                encode(&values, order, &mut out);
                prop_assert_eq!(out.len(), body_len(&values, order));
                prop_assert_eq!(decode(&out, values.len()).expect("decodes"), values.clone());
            }
        }
    }
}
