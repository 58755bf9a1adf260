//! Cross-encoding tests through the public interface: property round-trips for every kind,
//! garbage input that must give `Err` rather than a panic, and frozen encodings that make an
//! accidental format change fail loudly.

use super::*;
use bytes::Bytes;
use proptest::prelude::*;

fn f64_bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn round_trip(col: &ValueColumn) -> Vec<u8> {
    let mut out = vec![];
    encode_values(col, &mut out);
    let back = decode_values(col.kind(), &out, col.len()).expect("own encoding decodes");
    match (col, &back) {
        (ValueColumn::F64(a), ValueColumn::F64(b)) => assert_eq!(f64_bits(a), f64_bits(b)),
        _ => assert_eq!(col, &back),
    }
    out
}

/// Any f64 bit pattern, biased towards the awkward ones and towards short decimals.
fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        (0x7ff0_0000_0000_0001u64..=0x7fff_ffff_ffff_ffff, any::<bool>())
            .prop_map(|(nan, neg)| f64::from_bits(nan | if neg { 1 << 63 } else { 0 })),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(0.0),
        (1u64..(1 << 52)).prop_map(f64::from_bits), // subnormals
        (-100_000i64..100_000, 0i32..4).prop_map(|(k, d)| k as f64 / 10f64.powi(d)),
    ]
}

/// Columns that exercise each encoder's choices: constant runs, short decimals, arbitrary.
fn f64_column() -> impl Strategy<Value = Vec<f64>> {
    prop_oneof![
        prop::collection::vec(any_f64(), 0..600),
        (any_f64(), 1usize..300).prop_map(|(x, n)| vec![x; n]),
        (prop::collection::vec(-5000i64..5000, 1..600), 0i32..7).prop_map(|(ks, d)| ks.iter().map(|&k| k as f64 / 10f64.powi(d)).collect()),
        (prop::collection::vec(-5000i64..5000, 1..600), any_f64()).prop_map(|(ks, odd)| {
            let mut v: Vec<f64> = ks.iter().map(|&k| k as f64 / 100.0).collect();
            let at = v.len() / 2;
            v[at] = odd;
            v
        }),
    ]
}

fn i64_column() -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![
        prop::collection::vec(any::<i64>(), 0..600),
        prop::collection::vec(prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0), Just(-1)], 0..600),
        (any::<i64>(), 1usize..300).prop_map(|(x, n)| vec![x; n]),
        prop::collection::vec(-3i64..3, 1..600),
    ]
}

fn u64_column() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        prop::collection::vec(any::<u64>(), 0..600),
        prop::collection::vec(prop_oneof![Just(u64::MAX), Just(0), Just(u64::MAX - 1)], 0..600),
        prop::collection::vec(0u64..10, 1..600),
    ]
}

/// Timestamps: sorted with jitter and gaps, regular, equal, decreasing, arbitrary.
fn timestamp_column() -> impl Strategy<Value = Vec<i64>> {
    prop_oneof![
        (any::<i64>(), prop::collection::vec(-1_000_000i64..1_000_000_000, 0..600)).prop_map(|(start, steps)| {
            steps
                .iter()
                .scan(start, |t, s| {
                    *t = t.wrapping_add(*s);
                    Some(*t)
                })
                .collect()
        }),
        (any::<i64>(), any::<i64>(), 0usize..600)
            .prop_map(|(start, step, n)| (0..n as i64).map(|i| start.wrapping_add(i.wrapping_mul(step))).collect()),
        (any::<i64>(), 0usize..300).prop_map(|(t, n)| vec![t; n]),
        prop::collection::vec(any::<i64>(), 0..600),
        prop::collection::vec(prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0)], 0..100),
    ]
}

fn bytes_column() -> impl Strategy<Value = Vec<Bytes>> {
    prop_oneof![
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from), 0..60),
        prop::collection::vec("[a-c]{0,40}".prop_map(Bytes::from), 0..200),
        (prop::collection::vec(any::<u8>(), 0..64), 1usize..100).prop_map(|(v, n)| vec![Bytes::from(v); n]),
    ]
}

proptest! {
    #[test]
    fn f64_round_trip(v in f64_column()) {
        round_trip(&ValueColumn::F64(v));
    }

    #[test]
    fn i64_round_trip(v in i64_column()) {
        round_trip(&ValueColumn::I64(v));
    }

    #[test]
    fn u64_round_trip(v in u64_column()) {
        round_trip(&ValueColumn::U64(v));
    }

    #[test]
    fn bool_round_trip(v in prop_oneof![prop::collection::vec(any::<bool>(), 0..600),
                                        (any::<bool>(), 1usize..100).prop_map(|(b, n)| vec![b; n])]) {
        round_trip(&ValueColumn::Bool(v));
    }

    #[test]
    fn bytes_round_trip(v in bytes_column()) {
        let out = round_trip(&ValueColumn::Bytes(v.clone()));
        let raw: usize = v.iter().map(Bytes::len).sum();
        // Lengths column at worst raw u64s; the data never grows.
        prop_assert!(out.len() <= 1 + 4 + 1 + 8 * v.len() + raw);
    }

    #[test]
    fn timestamps_round_trip(ts in timestamp_column()) {
        let mut out = vec![];
        encode_timestamps(&ts, &mut out);
        prop_assert_eq!(decode_timestamps(&out, ts.len()).expect("own encoding decodes"), ts);
    }

    /// A memtable flush's encodings (varints up to 2,048 numbers) come back bit for bit too.
    #[test]
    fn quick_encodings_round_trip(v in f64_column(), i in i64_column(), ts in timestamp_column()) {
        with_quick_encoding(|| {
            round_trip(&ValueColumn::F64(v));
            round_trip(&ValueColumn::I64(i));
            let mut out = vec![];
            encode_timestamps(&ts, &mut out);
            assert_eq!(decode_timestamps(&out, ts.len()).expect("own encoding decodes"), ts);
        });
    }

    /// Garbage, valid tags with garbage bodies, and truncated or extended real encodings.
    #[test]
    fn decoders_never_panic(
        garbage in prop::collection::vec(any::<u8>(), 0..200),
        t in 0u8..9,
        count in 0usize..700,
        v in f64_column(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
    ) {
        let mut tagged = vec![t];
        tagged.extend_from_slice(&garbage);
        for input in [&garbage, &tagged] {
            let _ = decode_timestamps(input, count);
            for kind in [ValueKind::F64, ValueKind::I64, ValueKind::U64, ValueKind::Bool, ValueKind::Bytes] {
                let _ = decode_values(kind, input, count);
            }
        }
        let mut real = vec![];
        encode_values(&ValueColumn::F64(v.clone()), &mut real);
        let cut_at = cut.index(real.len());
        prop_assert!(decode_values(ValueKind::F64, &real[..cut_at], v.len()).is_err());
        let mut flipped = real.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= 0x5a;
        let _ = decode_values(ValueKind::F64, &flipped, v.len());
        let _ = decode_values(ValueKind::F64, &real, v.len() + 1);
        let mut ts = vec![];
        encode_timestamps(&v.iter().map(|x| x.to_bits() as i64).collect::<Vec<_>>(), &mut ts);
        let cut_at = cut.index(ts.len());
        prop_assert!(decode_timestamps(&ts[..cut_at], v.len()).is_err());
        let at = flip.index(ts.len());
        ts[at] ^= 0xa5;
        let last = ts.len() - 1;
        ts[last - at / 2] ^= 0x3c;
        let _ = decode_timestamps(&ts, v.len());
        let _ = decode_values(ValueKind::I64, &ts, v.len());
    }
}

/// Under quick encoding (a memtable flush) columns up to 2,048 numbers take varints, which cost
/// a fraction of pco's time; outside it only columns under 32 do.
#[test]
fn quick_encoding_takes_varints_below_2048_numbers() {
    let walk: Vec<f64> = (0..500).map(|i| f64::from((i * 7919) % 613) / 100.0).collect();
    let counts: Vec<i64> = (0..500).map(|i| (i * 37) % 101).collect();
    let jittered: Vec<i64> = (0..500).map(|i| 1_000_000 * i + (i * 7) % 13).collect();
    let long_walk: Vec<f64> = (0..2048).map(|i| f64::from((i * 7919) % 613) / 100.0).collect();
    let tags = || {
        let (mut f, mut n, mut t, mut long) = (vec![], vec![], vec![], vec![]);
        encode_values(&ValueColumn::F64(walk.clone()), &mut f);
        encode_values(&ValueColumn::I64(counts.clone()), &mut n);
        encode_timestamps(&jittered, &mut t);
        encode_values(&ValueColumn::F64(long_walk.clone()), &mut long);
        [f[0], n[0], t[0], long[0]]
    };
    assert_eq!(tags(), [tag::DECIMAL, tag::PCO, tag::PCO, tag::DECIMAL]);
    assert_eq!(
        with_quick_encoding(tags),
        [tag::DECIMAL_VARINT, tag::DELTA_VARINT, tag::DELTA_VARINT, tag::DECIMAL],
        "quick encoding stops at 2,048 numbers"
    );
}

/// Bytes-payload garbage gets its own test because its nested length column is the likeliest
/// place for a length to leak into an allocation.
#[test]
fn payload_garbage_is_refused() {
    let mut real = vec![];
    let frames: Vec<Bytes> = (0..50).map(|i| Bytes::from(format!("frame {i} ").repeat(i))).collect();
    encode_values(&ValueColumn::Bytes(frames.clone()), &mut real);
    for cut in 0..real.len() {
        assert!(decode_values(ValueKind::Bytes, &real[..cut], frames.len()).is_err(), "cut at {cut}");
    }
    for at in 0..real.len() {
        let mut bad = real.clone();
        bad[at] = bad[at].wrapping_add(0x41);
        let _ = decode_values(ValueKind::Bytes, &bad, frames.len());
    }
}

/// One fixed input per encoding, with its length and CRC-32C. A failure means the bytes written
/// changed: either the format did (existing files would no longer decode: bump the block format
/// version and update `docs/format/codec.md`) or an encoder now chooses differently, e.g. after
/// a pco upgrade (check that old columns still decode before updating these numbers).
#[test]
fn encodings_are_frozen() {
    let sec = 1_000_000_000i64;
    let t0 = 1_700_000_000 * sec;
    let jittered: Vec<i64> = (0..64).map(|i| t0 + i * sec + (i * 7919 % 13) * 1_000_000).collect();
    let walk: Vec<f64> = (0..64).map(|i| (2000 + (i * 37 % 11) - 5 * (i % 3)) as f64 / 100.0).collect();
    let noise: Vec<f64> = (0..64u64).map(|i| f64::from_bits(0x4000_0000_0000_0000 ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 12)).collect();
    let counter: Vec<u64> = (0..64).map(|i| 1000 + i * i).collect();
    let mixed_bools: Vec<bool> = (0..20).map(|i| i % 3 == 0).collect();
    let text: Vec<Bytes> = (0..20).map(|i| Bytes::from(format!("status=ok seq={i}"))).collect();
    let binary: Vec<Bytes> = vec![Bytes::from_static(b"\x01\x02"), Bytes::from_static(b"\xff")];

    let mut cases: Vec<(&str, Vec<u8>)> = vec![];
    let mut ts = |name, v: &[i64]| {
        let mut out = vec![];
        encode_timestamps(v, &mut out);
        cases.push((name, out));
    };
    ts("ts constant delta", &(0..64).map(|i| t0 + 10 * i * sec).collect::<Vec<_>>());
    ts("ts pco", &jittered);
    ts("ts raw", &[0x1234_5678_9abc_def0, -0x7edc_ba98_7654_3210, 0x4f00_0000_0000_0001]);
    ts("ts delta varint", &jittered[..16]);
    let mut vals = |name, col: ValueColumn| {
        let mut out = vec![];
        encode_values(&col, &mut out);
        cases.push((name, out));
    };
    vals("f64 constant", ValueColumn::F64(vec![21.5; 10]));
    vals("f64 decimal", ValueColumn::F64(walk.clone()));
    vals("f64 pco", ValueColumn::F64(noise));
    vals("f64 raw", ValueColumn::F64(vec![f64::NAN, -0.0]));
    vals("f64 decimal varint", ValueColumn::F64(walk[..16].to_vec()));
    vals("i64 constant", ValueColumn::I64(vec![-7; 10]));
    vals("i64 raw", ValueColumn::I64(vec![0x1234_5678_9abc_def0, -0x7edc_ba98_7654_3210, 0x4f00_0000_0000_0001]));
    vals("i64 delta varint", ValueColumn::I64(vec![i64::MIN, i64::MAX, 0, -1]));
    vals("u64 pco", ValueColumn::U64(counter));
    vals("bool constant", ValueColumn::Bool(vec![true; 10]));
    vals("bool bitpacked", ValueColumn::Bool(mixed_bools));
    vals("bytes lz4", ValueColumn::Bytes(text));
    vals("bytes raw", ValueColumn::Bytes(binary));

    let got: Vec<String> =
        cases.iter().map(|(name, out)| format!("{name}: tag {} len {} crc {:08x}", out[0], out.len(), crc32c::crc32c(out))).collect();
    let expected = [
        "ts constant delta: tag 2 len 17 crc 1046dcee",
        "ts pco: tag 3 len 62 crc dfb789db",
        "ts raw: tag 0 len 25 crc 103d0fb7",
        "ts delta varint: tag 8 len 42 crc 1ee0a36b",
        "f64 constant: tag 1 len 9 crc 98e13f3c",
        "f64 decimal: tag 4 len 57 crc db4c0e16",
        "f64 pco: tag 3 len 54 crc 875bf7ec",
        "f64 raw: tag 0 len 17 crc fb2e109d",
        "f64 decimal varint: tag 9 len 20 crc fc4d71d3",
        "i64 constant: tag 1 len 9 crc 38f13f85",
        "i64 raw: tag 0 len 25 crc 103d0fb7",
        "i64 delta varint: tag 8 len 24 crc a262a31c",
        "u64 pco: tag 3 len 32 crc 3dfc7c3a",
        "bool constant: tag 1 len 2 crc 10a86ca6",
        "bool bitpacked: tag 5 len 4 crc 90ac5067",
        "bytes lz4: tag 7 len 124 crc 0252a33c",
        "bytes raw: tag 6 len 12 crc 693f0c98",
    ];
    assert_eq!(got, expected, "encoded bytes changed:\n{}", got.join("\n"));
}

/// Small-format examples from `docs/format/codec.md`, byte for byte.
#[test]
fn documented_examples() {
    let mut out = vec![];
    encode_timestamps(&(0..33).map(|i| 1000 + 10 * i).collect::<Vec<_>>(), &mut out);
    assert_eq!(out, [2, 0xe8, 3, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0]);
    out.clear();
    encode_timestamps(&[1000, 1010, 1020], &mut out);
    assert_eq!(out, [8, 1, 0xd0, 0x0f, 0x14, 0x14], "3 small stamps: varints are smaller");
    out.clear();
    encode_values(&ValueColumn::Bool(vec![true, false, true]), &mut out);
    assert_eq!(out, [5, 0b101]);
    out.clear();
    encode_values(&ValueColumn::F64(vec![1.5; 40]), &mut out);
    assert_eq!(out, [1, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f]);
    out.clear();
    // One reading: d = 1, order 1, k = 15 (zigzag 30), against CONSTANT's 9 bytes.
    encode_values(&ValueColumn::F64(vec![1.5]), &mut out);
    assert_eq!(out, [9, 1, 1, 30]);
    out.clear();
    encode_values(&ValueColumn::Bytes(vec![Bytes::from_static(b"hi"), Bytes::from_static(b"!")]), &mut out);
    assert_eq!(out, [6, 4, 0, 0, 0, 8, 1, 4, 1, b'h', b'i', b'!']);
    out.clear();
    encode_timestamps(&[5, 1, 9], &mut out);
    assert_eq!(out, [8, 1, 10, 7, 16]);
    out.clear();
    encode_timestamps(&[1000, 2010, 3030, 4040], &mut out);
    assert_eq!(out, [8, 2, 0xd0, 0x0f, 0xe4, 0x0f, 0x14, 0x13]);
    out.clear();
    encode_values(&ValueColumn::F64(vec![21.37, 21.41, 21.38]), &mut out);
    assert_eq!(out, [9, 2, 1, 0xb2, 0x21, 8, 5]);
    out.clear();
    let decimals: Vec<f64> = (0..100).map(|i| f64::from(i % 7) / 10.0).collect();
    encode_values(&ValueColumn::F64(decimals), &mut out);
    assert_eq!(out[..4], [4, 1, 4, 1], "DECIMAL, d = 1, pco format version 4.1");
}
