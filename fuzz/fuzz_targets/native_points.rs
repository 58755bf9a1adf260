//! Fuzzes the SEND body decoder, `sensordb_protocol::points::PointsDecoder`: the input is
//! a SEND body (the records after the transaction id), read once with `next_record` (records in
//! columns of their own) and once with `next_into` (POINTS appended straight to a `WriteBatch`
//! through the server's `BatchSink`).
//!
//! The connection's definitions (`resolve` below) cover every kind, two short ids per series (as
//! two definitions of one key), two short ids whose kind conflicts with another's series inside
//! the batch, and undefined ids. Both batches start with points of two series already in them, so
//! appends to existing entries (and their rollback) are fuzzed too.
//!
//! Asserts: no panic, and each decoder ends after at most one record per input byte and gives
//! nothing more after an error; after every `next_into` call each batch entry has columns of
//! equal length and is not empty, `batch.len()` is the sum of the entries' lengths and
//! `value_bytes()` the sum of their columns' `heap_bytes()`; the two decoders agree: the same
//! records (a POINTS record's short id and count), the error at the same record (a kind conflict
//! in the batch counts as one for `next_record` + `WriteBatch::push_column`), and the same batch
//! (entries, f64 bitwise, `len`, `value_bytes`); the counts `next_into` reports add up to the
//! points it added. Decoded records re-encoded with `PointsEncoder` decode to the same records,
//! and the batch survives `WriteBatch::encode` → `decode` (the WAL record it goes to).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sensordb_engine::{SeriesId, ValueColumn, ValueKind, WriteBatch};
use sensordb_protocol::points::{Appended, PointRecord, PointsDecoder, PointsEncoder};
use sensordb_server::native::batch_sink::BatchSink;

const KINDS: [ValueKind; 5] = [ValueKind::F64, ValueKind::I64, ValueKind::U64, ValueKind::Bool, ValueKind::Bytes];

/// The connection's short ids, by `short_id % 16`: 0–4 one kind each on series 1–5, 5–9 the same
/// series and kinds again, 10 f64 values on the i64 series 2 and 11 bools on the bytes series 5
/// (kind conflicts within a batch), 12–15 undefined.
fn resolve(short_id: u32) -> Option<(SeriesId, ValueKind)> {
    match short_id % 16 {
        n @ 0..=9 => Some((SeriesId(n % 5 + 1), KINDS[(n % 5) as usize])),
        10 => Some((SeriesId(2), ValueKind::F64)),
        11 => Some((SeriesId(5), ValueKind::Bool)),
        _ => None,
    }
}

fn kind_of(short_id: u32) -> Option<ValueKind> {
    resolve(short_id).map(|(_, kind)| kind)
}

/// A batch that already holds points of series 1 (f64) and 5 (bytes).
fn prefilled() -> WriteBatch {
    let mut batch = WriteBatch::new();
    batch.push_column(SeriesId(1), &[10, 20], &ValueColumn::F64(vec![1.5, f64::NAN])).expect("new series");
    batch.push_column(SeriesId(5), &[7], &ValueColumn::Bytes(vec![Bytes::from_static(b"abc")])).expect("new series");
    batch
}

/// The batch's own bookkeeping agrees with its entries.
fn check_batch(batch: &WriteBatch) {
    let mut points = 0;
    let mut bytes = 0;
    for entry in batch.entries() {
        assert_eq!(entry.timestamps.len(), entry.values.len(), "columns of unequal length in {entry:?}");
        assert!(!entry.timestamps.is_empty(), "an empty entry stayed in the batch: {entry:?}");
        points += entry.timestamps.len();
        bytes += entry.values.heap_bytes();
    }
    assert_eq!(batch.len(), points, "batch.len() is not the sum of its entries' lengths");
    assert_eq!(batch.value_bytes(), bytes, "value_bytes() is not the sum of the entries' heap bytes");
}

/// Decodes `body` with `next_record`: the records before the first error, and whether there was
/// one.
fn records(body: &Bytes) -> (Vec<PointRecord>, bool) {
    let mut decoder = PointsDecoder::new(body.clone());
    let mut records = Vec::new();
    while let Some(record) = decoder.next_record(kind_of) {
        assert!(records.len() < body.len(), "more records than bytes");
        match record {
            Ok(record) => records.push(record),
            Err(error) => {
                let _ = error.to_string();
                assert!(decoder.next_record(kind_of).is_none(), "a record after an error");
                return (records, true);
            }
        }
    }
    (records, false)
}

fuzz_target!(|data: &[u8]| {
    let body = Bytes::copy_from_slice(data);

    // next_record, and the batch that pushing its columns would make.
    let (decoded, decode_failed) = records(&body);
    let mut expected = prefilled();
    let mut accepted = decoded.len();
    for (i, record) in decoded.iter().enumerate() {
        match record {
            PointRecord::Points { short_id, timestamps, values } => {
                let (series, kind) = resolve(*short_id).expect("a decoded record's short id is defined");
                assert!(!timestamps.is_empty(), "a POINTS record without points");
                assert_eq!(timestamps.len(), values.len());
                assert_eq!(values.kind(), kind);
                if expected.push_column(series, timestamps, values).is_err() {
                    accepted = i;
                    break;
                }
            }
            PointRecord::PayloadPart { short_id, .. } => {
                assert_eq!(kind_of(*short_id), Some(ValueKind::Bytes), "payload part of a non-bytes series");
            }
        }
    }
    let failed_expected = decode_failed || accepted < decoded.len();
    check_batch(&expected);

    // next_into, straight into a batch.
    let mut batch = prefilled();
    let start = batch.len();
    let mut appended = Vec::new();
    let mut failed = false;
    let mut decoder = PointsDecoder::new(body.clone());
    while let Some(result) = decoder.next_into(&mut BatchSink::new(resolve, &mut batch)) {
        check_batch(&batch);
        assert!(appended.len() < body.len(), "more records than bytes");
        match result {
            Ok(record) => appended.push(record),
            Err(error) => {
                let _ = error.to_string();
                assert!(decoder.next_into(&mut BatchSink::new(resolve, &mut batch)).is_none(), "a record after an error");
                failed = true;
                break;
            }
        }
    }
    check_batch(&batch);

    // The two agree.
    assert_eq!(failed, failed_expected, "one decoder failed, the other did not");
    assert_eq!(appended.len(), accepted, "the decoders took different numbers of records");
    let mut counted = 0;
    for (a, d) in appended.iter().zip(&decoded) {
        match (a, d) {
            (Appended::Points { short_id, count }, PointRecord::Points { short_id: id, timestamps, .. }) => {
                assert_eq!((short_id, *count), (id, timestamps.len()), "POINTS records differ");
                counted += count;
            }
            (
                Appended::PayloadPart { short_id, timestamp, last, bytes },
                PointRecord::PayloadPart { short_id: id, timestamp: t, last: l, bytes: b },
            ) => assert_eq!((short_id, timestamp, last, bytes), (id, t, l, b), "payload parts differ"),
            _ => panic!("records of different types: {a:?} and {d:?}"),
        }
    }
    assert_eq!(counted, batch.len() - start, "next_into's counts do not add up to the points it added");
    assert_eq!(batch.entries(), expected.entries(), "the decoders filled different batches");
    assert_eq!(batch.len(), expected.len());
    assert_eq!(batch.value_bytes(), expected.value_bytes());

    // Re-encoded records decode to the same records.
    let mut encoded = Vec::new();
    for record in &decoded {
        match record {
            PointRecord::Points { short_id, timestamps, values } => PointsEncoder::points(&mut encoded, *short_id, timestamps, values),
            PointRecord::PayloadPart { short_id, timestamp, last, bytes } => {
                PointsEncoder::payload_part(&mut encoded, *short_id, *timestamp, *last, bytes)
            }
        }
    }
    let (again, again_failed) = records(&Bytes::from(encoded));
    assert!(!again_failed, "re-encoded records do not decode");
    assert_eq!(again, decoded, "records changed in an encode/decode round trip");

    // The batch is what a WAL record holds: it round-trips through the engine's encoding.
    let mut record = Vec::new();
    batch.encode(&mut record);
    let wal = WriteBatch::decode(&record).expect("an encoded batch decodes");
    assert_eq!(wal.entries(), batch.entries(), "the batch changed in a WAL encode/decode round trip");
});
