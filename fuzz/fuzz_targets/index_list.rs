//! Fuzzes `segment::IndexEntry::decode_list`, the parser of segment footers and flush-group
//! indexes, with arbitrary bytes.
//!
//! Asserts: decoding never panics; a decoded list is in file order (sequences never decrease,
//! blocks go forward without overlapping, every entry has points and min ≤ max timestamp), and
//! re-encoding it with `encode_list` decodes to the same entries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::test_support::segment::IndexEntry;

fuzz_target!(|data: &[u8]| {
    let Ok(entries) = IndexEntry::decode_list(data) else { return };
    let (mut sequence, mut end) = (0u64, 0u64);
    for entry in &entries {
        assert!(entry.count > 0, "entry without points");
        assert!(entry.min_timestamp <= entry.max_timestamp, "time range reversed");
        assert!(entry.sequence >= sequence, "sequence decreased");
        assert!(entry.offset >= end, "blocks overlap or go backwards");
        sequence = entry.sequence;
        end = entry.offset + u64::from(entry.length);
    }
    let mut encoded = Vec::new();
    IndexEntry::encode_list(&entries, &mut encoded);
    let again = IndexEntry::decode_list(&encoded).expect("a re-encoded index list decodes");
    assert_eq!(again, entries, "round trip changed the entries");
});
