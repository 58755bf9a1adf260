//! Fuzzes the block decoders: `block::decode`, `block::decode_with_shared` and
//! `block::decode_shared_timestamps`.
//!
//! The whole input goes to `decode` and to `decode_shared_timestamps`. For
//! `decode_with_shared` the input is split: a u16 LE length L, then L bytes of a shared
//! timestamp record (what the loader hands back, decoded with `decode_shared_timestamps`), then
//! the block.
//!
//! Asserts: nothing panics; a decoded block has `count` timestamps and values and its first
//! and last timestamps equal the header's range; a block whose timestamps are strictly
//! increasing re-encodes (inline timestamps) to a block that decodes to the same columns.
//!
//! Each input runs twice: as it is, and with the trailing checksums of the whole input, of the
//! shared record and of the block recomputed (`sensordb_fuzz::fixup`), so mutations get past
//! the checksums to the header and column parsers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::block::{self, Block, BlockError, TimestampColumn};
use sensordb_fuzz::fixup;

fn check(block: &Block) {
    let count = block.header.count as usize;
    assert_eq!(block.timestamps.len(), count, "timestamp count differs from header");
    assert_eq!(block.values.len(), count, "value count differs from header");
    assert_eq!(block.values.kind(), block.header.kind, "value kind differs from header");
    assert_eq!(block.timestamps.first(), Some(&block.header.min_timestamp));
    assert_eq!(block.timestamps.last(), Some(&block.header.max_timestamp));
    if block.timestamps.windows(2).all(|w| w[0] < w[1]) {
        let mut bytes = Vec::new();
        block::encode(block.header.series, &block.timestamps, &block.values, TimestampColumn::Inline, &mut bytes);
        let again = block::decode(&bytes).expect("a re-encoded block decodes");
        assert_eq!(again.header.series, block.header.series);
        assert_eq!(again.timestamps, block.timestamps, "round trip changed the timestamps");
        assert_eq!(again.values, block.values, "round trip changed the values");
    }
}

fn run(data: &[u8], fix: bool) {
    let mut whole = data.to_vec();
    if fix {
        fixup::trailing_crc(&mut whole);
    }
    let data = &whole[..];
    if let Ok(block) = block::decode(data) {
        check(&block);
    }
    if let Ok(timestamps) = block::decode_shared_timestamps(data) {
        let declared = u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) as usize;
        assert_eq!(timestamps.len(), declared, "shared record count differs from its header");
    }
    if data.len() >= 2 {
        let shared_len = u16::from_le_bytes([data[0], data[1]]) as usize;
        let rest = &data[2..];
        let (shared, block_bytes) = rest.split_at(shared_len.min(rest.len()));
        let (mut shared, mut block_bytes) = (shared.to_vec(), block_bytes.to_vec());
        if fix {
            fixup::trailing_crc(&mut shared);
            fixup::trailing_crc(&mut block_bytes);
        }
        let mut calls = 0;
        let mut load = |_distance: u32, _length: u32| -> Result<Vec<i64>, BlockError> {
            calls += 1;
            block::decode_shared_timestamps(&shared)
        };
        if let Ok(block) = block::decode_with_shared(&block_bytes, &mut load) {
            check(&block);
        }
        assert!(calls <= 1, "the shared record was loaded {calls} times");
    }
}

fuzz_target!(|data: &[u8]| {
    run(data, false);
    run(data, true);
});
