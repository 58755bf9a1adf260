//! Fuzzes the column encoders against their decoders: `codec::encode_timestamps` /
//! `decode_timestamps` and `codec::encode_values` / `decode_values` for every value kind, on
//! columns built with `arbitrary` (raw values, and shaped ones — arithmetic sequences with
//! jitter, constants, decimal floats — that reach the specialised encodings).
//!
//! Asserts: encoding never panics, and decoding the encoding with the column's length gives the
//! column back exactly (f64 compared bitwise, so NaN payloads and -0.0 must survive).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::codec;
use sensordb_engine::ValueColumn;

/// Longest column built (keeps one run fast).
const LEN_MAX: usize = 4096;

#[derive(Arbitrary, Debug)]
enum Ints {
    Raw(Vec<i64>),
    /// `start + i * step + jitter[i % jitter.len()]`, wrapping.
    Linear {
        start: i64,
        step: i64,
        len: u16,
        jitter: Vec<i8>,
    },
    Constant {
        value: i64,
        len: u16,
    },
    /// Small values (bit-packing friendly).
    Small(Vec<i8>),
}

impl Ints {
    fn build(&self) -> Vec<i64> {
        match self {
            Ints::Raw(v) => v.iter().copied().take(LEN_MAX).collect(),
            Ints::Linear { start, step, len, jitter } => (0..(*len as usize).min(LEN_MAX))
                .map(|i| {
                    let j = if jitter.is_empty() { 0 } else { i64::from(jitter[i % jitter.len()]) };
                    start.wrapping_add(step.wrapping_mul(i as i64)).wrapping_add(j)
                })
                .collect(),
            Ints::Constant { value, len } => vec![*value; (*len as usize).min(LEN_MAX)],
            Ints::Small(v) => v.iter().take(LEN_MAX).map(|&x| i64::from(x)).collect(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Column {
    Timestamps(Ints),
    /// f64 from raw bits: NaNs, infinities, subnormals, -0.0.
    F64Bits(Vec<u64>),
    /// `k / 10^digits`: what the decimal encoding looks for.
    F64Decimal {
        digits: u8,
        ints: Ints,
    },
    /// Integers as f64 (sensor readings often are).
    F64Ints(Ints),
    I64(Ints),
    U64(Ints),
    Bool(Vec<bool>),
    BoolConstant {
        value: bool,
        len: u16,
    },
    Bytes(Vec<Vec<u8>>),
    /// Repetitive payloads (what LZ4 compresses).
    BytesRepeated {
        payload: Vec<u8>,
        len: u16,
    },
}

fn check_values(values: ValueColumn) {
    let mut encoded = Vec::new();
    codec::encode_values(&values, &mut encoded);
    let decoded = codec::decode_values(values.kind(), &encoded, values.len())
        .unwrap_or_else(|e| panic!("encoded {} column of {} values does not decode: {e}", values.kind(), values.len()));
    assert_eq!(decoded, values, "value round trip changed the column");
}

fuzz_target!(|column: Column| {
    match column {
        Column::Timestamps(ints) => {
            let timestamps = ints.build();
            let mut encoded = Vec::new();
            codec::encode_timestamps(&timestamps, &mut encoded);
            let decoded = codec::decode_timestamps(&encoded, timestamps.len())
                .unwrap_or_else(|e| panic!("encoded timestamp column of {} does not decode: {e}", timestamps.len()));
            assert_eq!(decoded, timestamps, "timestamp round trip changed the column");
        }
        Column::F64Bits(bits) => check_values(ValueColumn::F64(bits.into_iter().take(LEN_MAX).map(f64::from_bits).collect())),
        Column::F64Decimal { digits, ints } => {
            let scale = 10f64.powi(i32::from(digits % 19));
            check_values(ValueColumn::F64(ints.build().into_iter().map(|k| k as f64 / scale).collect()))
        }
        Column::F64Ints(ints) => check_values(ValueColumn::F64(ints.build().into_iter().map(|k| k as f64).collect())),
        Column::I64(ints) => check_values(ValueColumn::I64(ints.build())),
        Column::U64(ints) => check_values(ValueColumn::U64(ints.build().into_iter().map(|x| x as u64).collect())),
        Column::Bool(v) => check_values(ValueColumn::Bool(v.into_iter().take(LEN_MAX).collect())),
        Column::BoolConstant { value, len } => check_values(ValueColumn::Bool(vec![value; (len as usize).min(LEN_MAX)])),
        Column::Bytes(v) => check_values(ValueColumn::Bytes(v.into_iter().take(LEN_MAX).map(Into::into).collect())),
        Column::BytesRepeated { payload, len } => {
            let payload: Vec<u8> = payload.into_iter().take(256).collect();
            check_values(ValueColumn::Bytes(vec![payload.into(); (len as usize).min(LEN_MAX)]))
        }
    }
});
