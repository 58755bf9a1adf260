//! Fuzzes the column decoders `codec::decode_timestamps` and `codec::decode_values` (every
//! `ValueKind`) with arbitrary bytes.
//!
//! Input: a u32 LE whose value modulo 100_001 is the count (so at most 100_000), then the
//! column. Asserts: no decoder panics, and a column that decodes has exactly `count` entries of
//! the requested kind.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::codec;
use sensordb_fuzz::KINDS;

const COUNT_MAX: u32 = 100_000;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let count = (u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) % (COUNT_MAX + 1)) as usize;
    let column = &data[4..];
    if let Ok(timestamps) = codec::decode_timestamps(column, count) {
        assert_eq!(timestamps.len(), count, "timestamp column length differs from count");
    }
    for kind in KINDS {
        if let Ok(values) = codec::decode_values(kind, column, count) {
            assert_eq!(values.len(), count, "{kind} column length differs from count");
            assert_eq!(values.kind(), kind, "decoded another kind");
        }
    }
});
