//! f64 columns: CONSTANT, DECIMAL, DECIMAL_VARINT, PCO, RAW — every value comes back bit for bit.
//!
//! Sensor readings are usually printed with a fixed, small number of decimals (21.37 °C), so
//! the f64s are the doubles nearest to `k / 10^d`. DECIMAL stores `d` and the integers `k`;
//! integers with small deltas compress better under pcodec than the float bit patterns do
//! (0.35 against 0.42 bytes/value on the benchmark's 2-decimal random walk). Whether a column qualifies is
//! decided by recomputing each value through the very expression the decoder uses, compared by
//! bits, so the encoding is exact by construction: -0.0, NaN, ±inf and anything not short in
//! decimal simply fail the check and fall through to PCO, which is lossless on any f64 bits.
//! CONSTANT catches stuck sensors and flags. Columns too short for pco to pay (fewer than
//! [`varints::SMALL_N`] values) never try it: decimals go to DECIMAL_VARINT, the rest to RAW.

use super::{pco_blob, read_u64, tag, varints, CodecError};

/// `POW10[d]` is exactly 10^d: every power of ten up to 10^22 is representable, and a table,
/// unlike `powi`, is the same on every platform and optimisation level.
const POW10: [f64; MAX_DECIMALS as usize + 1] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// Most decimals tried. Beyond about nine, `k` carries as many significant bits as the float
/// itself and pco on the raw floats does as well.
pub(crate) const MAX_DECIMALS: u8 = 9;

/// Bound on `|k|` that keeps `k as f64` exact. With it, a value that is `k / 10^d` is also
/// `10k / 10^(d+1)` (both quotients are the correctly rounded same rational), so raising `d`
/// never loses a value that already fitted and detection can simply move `d` up.
const MAX_K: f64 = (1u64 << 53) as f64;

/// The decoder's formula, shared with detection so that the two cannot disagree.
#[inline]
fn decimal_value(k: i64, d: u8) -> f64 {
    k as f64 / POW10[usize::from(d)]
}

/// `Some(k)` when `x` is exactly `k / 10^d` under [`decimal_value`].
#[inline]
fn decimal_k(x: f64, d: u8) -> Option<i64> {
    let scaled = x * POW10[usize::from(d)];
    // Rounding cannot carry a value over the bound: from 2^52 up every double is an integer
    // already.
    if scaled.is_nan() || scaled.abs() > MAX_K {
        return None;
    }
    let k = round_half_away(scaled);
    (decimal_value(k, d).to_bits() == x.to_bits()).then_some(k)
}

/// `s.round() as i64` for `|s| <= MAX_K`, without the library's `round` (a call of about 25
/// instructions on the x86-64 baseline, which has no rounding instruction; half of detection's
/// work in a flush of short columns): truncation and the exact fraction left over.
#[inline]
fn round_half_away(s: f64) -> i64 {
    debug_assert!(s.abs() <= MAX_K);
    let truncated = s as i64;
    // Exact: `s` and its truncation share their high bits, and from 2^52 up `s` is integral.
    let fraction = s - truncated as f64;
    if fraction >= 0.5 {
        truncated + 1
    } else if fraction <= -0.5 {
        truncated - 1
    } else {
        truncated
    }
}

/// Columns this long are sampled before the full pass (see [`detect_decimal`]).
const SAMPLE_FROM_VALUES: usize = 256;

/// Finds the fewest decimals that express every value and writes their `k`s to `ks`.
///
/// One pass: a value that needs more decimals than those before it moves their `k`s up by the
/// power of ten between (exact, see [`MAX_K`]) instead of starting the pass again; a `k` moved
/// past [`MAX_K`] ends detection, as it would fail at every larger `d`. Long columns are sampled
/// first, so noise is rejected in a few dozen checks and the usual `d` is known before the pass.
fn detect_decimal(values: &[f64], ks: &mut Vec<i64>) -> Option<u8> {
    let mut d = 0u8;
    if values.len() >= SAMPLE_FROM_VALUES {
        for &x in values.iter().step_by(values.len() / 32) {
            d = fewest_decimals_from(x, d)?;
        }
    }
    ks.clear();
    ks.reserve(values.len());
    for &x in values {
        let k = match decimal_k(x, d) {
            Some(k) => k,
            None => {
                let more = fewest_decimals_from(x, d + 1)?;
                let factor = 10i64.pow(u32::from(more - d));
                for k in ks.iter_mut() {
                    *k = k.checked_mul(factor).filter(|moved| moved.unsigned_abs() <= MAX_K as u64)?;
                }
                d = more;
                decimal_k(x, d).expect("BUG: fewest_decimals_from found a d that does not fit")
            }
        };
        ks.push(k);
    }
    debug_assert!(ks.iter().zip(values).all(|(&k, &x)| decimal_value(k, d).to_bits() == x.to_bits()));
    Some(d)
}

fn fewest_decimals_from(x: f64, from: u8) -> Option<u8> {
    (from..=MAX_DECIMALS).find(|&d| decimal_k(x, d).is_some())
}

pub(crate) fn encode(values: &[f64], out: &mut Vec<u8>) {
    let start = out.len();
    let raw_len = values.len() * 8;
    if let [first, rest @ ..] = values {
        let constant = rest.iter().all(|x| x.to_bits() == first.to_bits());
        let mut ks = Vec::new();
        let mut decimal = None;
        if values.len() < varints::limit() {
            // Sized even for a constant column: one reading of a sensor (a fleet's flush writes
            // a block per sensor and point) takes 4-6 bytes as varints against CONSTANT's 9.
            decimal = Some(detect_decimal(values, &mut ks));
            if let Some(Some(d)) = decimal {
                let (len, order) = varints::best(&ks);
                if 1 + len < raw_len && !(constant && 1 + len >= 8) {
                    out.push(tag::DECIMAL_VARINT);
                    out.push(d);
                    varints::encode(&ks, order, out);
                    return;
                }
            }
        }
        if constant {
            out.push(tag::CONSTANT);
            out.extend_from_slice(&first.to_bits().to_le_bytes());
            return;
        }
        if values.len() >= varints::SMALL_N {
            if let Some(d) = decimal.unwrap_or_else(|| detect_decimal(values, &mut ks)) {
                out.push(tag::DECIMAL);
                out.push(d);
                if pco_blob::compress(&ks, pco_blob::Delta::Auto, out) && out.len() - start < raw_len {
                    return;
                }
                out.truncate(start);
            }
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
        out.extend_from_slice(&x.to_bits().to_le_bytes());
    }
}

/// The decimals byte of a DECIMAL or DECIMAL_VARINT body, checked, and the `k`s after it.
fn split_decimals(body: &[u8]) -> Result<(u8, &[u8]), CodecError> {
    let (&d, ks) = body.split_first().ok_or(CodecError::Truncated { needed: 2, available: 1 })?;
    if d > MAX_DECIMALS {
        return Err(CodecError::Invalid(format!("decimal column with {d} decimals")));
    }
    Ok((d, ks))
}

pub(crate) fn decode(input: &[u8], count: usize) -> Result<Vec<f64>, CodecError> {
    let (&t, body) = input.split_first().ok_or(CodecError::Truncated { needed: 1, available: 0 })?;
    match t {
        tag::CONSTANT => {
            super::expect_len(body, 8)?;
            Ok(vec![f64::from_bits(read_u64(body)); count])
        }
        tag::DECIMAL => {
            let (d, ks) = split_decimals(body)?;
            let ks = pco_blob::decompress::<i64>(ks, count)?;
            Ok(ks.into_iter().map(|k| decimal_value(k, d)).collect())
        }
        tag::DECIMAL_VARINT => {
            let (d, ks) = split_decimals(body)?;
            Ok(varints::decode(ks, count)?.into_iter().map(|k| decimal_value(k, d)).collect())
        }
        tag::PCO => pco_blob::decompress::<f64>(body, count),
        tag::RAW => {
            super::expect_len(body, count.checked_mul(8).ok_or(CodecError::Invalid("count overflow".into()))?)?;
            Ok(body.chunks_exact(8).map(|c| f64::from_bits(read_u64(c))).collect())
        }
        other => Err(CodecError::UnknownEncoding(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(values: &[f64]) -> Vec<u8> {
        let mut out = vec![];
        encode(values, &mut out);
        let back = decode(&out, values.len()).expect("decodes");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(values));
        out
    }

    fn random_walk(n: usize, decimals: i32, seed: u64) -> Vec<f64> {
        let mut state = seed;
        let mut k: i64 = 2137;
        let scale = 10f64.powi(decimals);
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                k += (state >> 60) as i64 - 7;
                k as f64 / scale
            })
            .collect()
    }

    #[test]
    fn constant_column() {
        let out = encoded(&[f64::NAN; 100]);
        assert_eq!((out[0], out.len()), (tag::CONSTANT, 9));
        assert_eq!(encoded(&[-0.0])[0], tag::CONSTANT);
    }

    #[test]
    fn decimals_are_detected_and_beat_plain_pco() {
        for decimals in [0, 1, 2, 3] {
            let values = random_walk(8640, decimals, 7);
            let out = encoded(&values);
            assert_eq!((out[0], out[1]), (tag::DECIMAL, decimals as u8), "{decimals} decimals");
            let mut plain = vec![];
            assert!(pco_blob::compress(&values, pco_blob::Delta::Auto, &mut plain));
            assert!(out.len() < plain.len(), "{decimals} decimals: {} vs plain pco {}", out.len(), plain.len());
        }
    }

    #[test]
    fn decimal_detection_takes_the_fewest_decimals_needed_by_any_value() {
        assert_eq!(encoded(&[1.0, 2.5, 3.0, 0.125, 7.0])[..2], [tag::DECIMAL_VARINT, 3], "too short for pco to pay");
        let long: Vec<f64> = [1.0, 2.5, 3.0, 0.125, 7.0].repeat(8);
        assert_eq!(encoded(&long)[..2], [tag::DECIMAL, 3]);
        // Tag, d = 1, order 1, k = 10 and 25 - 10 as one-byte zigzag varints.
        assert_eq!(encoded(&[1.0, 2.5]), [tag::DECIMAL_VARINT, 1, 1, 20, 30]);
        assert_eq!(encoded(&[0.1, -0.0])[0], tag::RAW, "not decimals, too short for pco");
        let mut ks = vec![];
        assert_eq!(detect_decimal(&[1.0, 2.5, 3.0, 0.125, 7.0], &mut ks), Some(3));
        assert_eq!(ks, [1000, 2500, 3000, 125, 7000]);
        assert_eq!(detect_decimal(&[0.1, -0.0], &mut ks), None);
        assert_eq!(detect_decimal(&[0.1, f64::INFINITY], &mut ks), None);
        assert_eq!(detect_decimal(&[0.1, f64::NAN], &mut ks), None);
        assert_eq!(detect_decimal(&[0.1, 1e-10], &mut ks), None);
        assert_eq!(detect_decimal(&[1e300], &mut ks), None);
    }

    #[test]
    fn noise_goes_to_pco() {
        let mut state = 99u64;
        let values: Vec<f64> = (0..4096)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 * 40.0 - 20.0
            })
            .collect();
        let out = encoded(&values);
        assert_eq!(out[0], tag::PCO);
        assert!(out.len() <= 1 + values.len() * 8);
    }

    #[test]
    fn special_values_survive() {
        let specials = [
            f64::NAN,
            f64::from_bits(0x7ff0_0000_0000_0001),
            f64::from_bits(0xfff8_dead_beef_0000),
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            f64::MIN_POSITIVE / 3.0,
            -5e-324,
            f64::MAX,
            f64::MIN,
        ];
        let values: Vec<f64> = specials.iter().cycle().take(1000).copied().collect();
        encoded(&values);
        encoded(&specials);
    }

    #[test]
    fn rounding_by_truncation_matches_the_library_round() {
        let edges = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            0.5000000000000001,
            4503599627370495.5,
            -4503599627370495.5,
            4503599627370496.0,
            9007199254740992.0,
            -9007199254740992.0,
            123.456e3,
        ];
        for s in edges {
            assert_eq!(round_half_away(s), s.round() as i64, "{s:?}");
        }
        let mut state = 7u64;
        for _ in 0..100_000 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let s = f64::from_bits(state) % MAX_K;
            if s.is_finite() {
                assert_eq!(round_half_away(s), s.round() as i64, "{s:?}");
            }
        }
    }

    #[test]
    fn moving_earlier_ks_past_the_bound_ends_detection() {
        let mut ks = vec![];
        // 9e15 fits at d = 0 (k = 9e15 <= 2^53), but at d = 1, which 0.5 needs, k would be 9e16.
        assert_eq!(detect_decimal(&[9e15, 0.5], &mut ks), None);
        assert_eq!(detect_decimal(&[9e14, 0.5], &mut ks), Some(1));
        assert_eq!(ks, [9_000_000_000_000_000, 5]);
    }

    /// Detection as it was: a pass started again whenever a value needed more decimals.
    fn detect_decimal_restarting(values: &[f64]) -> Option<u8> {
        let mut d = 0u8;
        'restart: loop {
            for &x in values {
                if decimal_k(x, d).is_none() {
                    d = fewest_decimals_from(x, d + 1)?;
                    continue 'restart;
                }
            }
            return Some(d);
        }
    }

    proptest::proptest! {
        /// The one-pass detection finds the decimals the restarting one did, and its `k`s decode
        /// to the very values, bit for bit.
        #[test]
        fn one_pass_detection_agrees_with_restarting(
            picks in proptest::collection::vec((-2_000_000i64..2_000_000, 0u8..5, 0u8..20), 0..300),
        ) {
            // Mostly decimals of 0-4 places, a few values of no short decimal form.
            let values: Vec<f64> = picks
                .iter()
                .map(|&(k, d, odd)| if odd == 0 { (k as f64).sqrt() * 1.1 } else { decimal_value(k, d) })
                .collect();
            let mut ks = vec![];
            let found = detect_decimal(&values, &mut ks);
            proptest::prop_assert_eq!(found, detect_decimal_restarting(&values));
            if let Some(d) = found {
                proptest::prop_assert_eq!(ks.len(), values.len());
                for (&k, &x) in ks.iter().zip(&values) {
                    proptest::prop_assert_eq!(decimal_value(k, d).to_bits(), x.to_bits());
                }
            }
        }
    }
}
