//! Fuzzes `WriteBatch::decode`, the parser of WAL record payloads, with arbitrary bytes.
//!
//! Asserts: decoding never panics; when a record decodes, re-encoding the batch with
//! `WriteBatch::encode` and decoding that again gives the same entries (f64 compared bitwise)
//! and the same point count.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sensordb_engine::WriteBatch;

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = WriteBatch::decode(data) else { return };
    let mut record = Vec::new();
    batch.encode(&mut record);
    let again = WriteBatch::decode(&record).expect("a re-encoded batch decodes");
    assert_eq!(again.entries(), batch.entries(), "round trip changed the entries");
    assert_eq!(again.len(), batch.len(), "round trip changed the point count");
    let points: usize = batch.entries().iter().map(|e| e.timestamps.len()).sum();
    assert_eq!(points, batch.len());
    for entry in batch.entries() {
        assert_eq!(entry.timestamps.len(), entry.values.len(), "column lengths differ");
    }
});
