//! Completion marks: ids of completed transactions that travel in the WAL record of the
//! transaction's points, so a server's "this transaction is completed" becomes durable with the
//! points, in the same fdatasync, instead of in a log of its own.
//!
//! The engine does not interpret a mark: it stores the marks given to
//! [`Engine::write_with_marks`](crate::Engine::write_with_marks) in the batch's WAL record (the
//! marks section of batch format version 2, see [`crate::batch`] and `docs/format/wal.md`),
//! hands the marks found by WAL replay back ([`Engine::unflushed_marks`](crate::Engine::unflushed_marks)),
//! and, since a flush deletes the WAL files it covers, gives the marks of every flushed memtable
//! to the registered [`MarkSink`] (made durable there) before the flush's checkpoint lets those
//! files go. While no sink is registered, a flush carries the marks forward instead: it appends
//! them again, as a record of marks only, to the new WAL file, so no mark is ever lost to a
//! trimmed file.

use crate::checksum::get_varint;

/// Bytes of a mark in the WAL record, besides its varint point count.
const MARK_FIXED_LEN: usize = 16 + 16 + 8;

/// One completed transaction: who completed it, its id, when, and how many points it stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxMark {
    pub client: [u8; 16],
    pub tx: [u8; 16],
    /// Unix nanoseconds.
    pub completed_at_ns: i64,
    pub points: u64,
}

/// Takes the marks of flushed data and makes them durable, before the WAL files that held them
/// may be deleted. Called by the flushing thread (never on a writer's path), one call per flush.
pub trait MarkSink: Send + Sync {
    /// Makes `marks` durable. An error is logged and the flush goes on: the marks' points are
    /// stored either way; only the recognition of a retry after a later crash is lost.
    fn checkpoint(&self, marks: &[TxMark]) -> std::io::Result<()>;
}

/// The most bytes [`encode_marks`] writes for `count` marks.
pub(crate) fn encoded_bound(count: usize) -> usize {
    10 + count * (MARK_FIXED_LEN + 10)
}

/// Appends the marks section: varint count, then per mark client, tx, completed at (i64 LE) and
/// varint points.
pub(crate) fn encode_marks(marks: &[TxMark], out: &mut Vec<u8>) {
    crate::checksum::put_varint(out, marks.len() as u64);
    for mark in marks {
        out.extend_from_slice(&mark.client);
        out.extend_from_slice(&mark.tx);
        out.extend_from_slice(&mark.completed_at_ns.to_le_bytes());
        crate::checksum::put_varint(out, mark.points);
    }
}

/// Decodes a marks section starting at `*position`, advancing it.
pub(crate) fn decode_marks(record: &[u8], position: &mut usize) -> Result<Vec<TxMark>, String> {
    let count = get_varint(record, position).ok_or("truncated mark count")? as usize;
    if count == 0 || count > (record.len() - *position) / (MARK_FIXED_LEN + 1) {
        return Err(format!("implausible mark count {count}"));
    }
    let mut marks = Vec::with_capacity(count);
    for _ in 0..count {
        let fixed = record.get(*position..*position + MARK_FIXED_LEN).ok_or("truncated mark")?;
        *position += MARK_FIXED_LEN;
        let mut client = [0u8; 16];
        let mut tx = [0u8; 16];
        client.copy_from_slice(&fixed[..16]);
        tx.copy_from_slice(&fixed[16..32]);
        let mut at = [0u8; 8];
        at.copy_from_slice(&fixed[32..40]);
        let points = get_varint(record, position).ok_or("truncated mark points")?;
        marks.push(TxMark { client, tx, completed_at_ns: i64::from_le_bytes(at), points });
    }
    Ok(marks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::model::{SeriesId, Value};

    fn mark(n: u8, points: u64) -> TxMark {
        TxMark { client: [n; 16], tx: [n + 1; 16], completed_at_ns: -5 + i64::from(n), points }
    }

    #[test]
    fn marks_round_trip_through_a_version_2_record() {
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(3), 10, Value::F64(1.5)).expect("push");
        batch.push(SeriesId(3), 11, Value::F64(2.5)).expect("push");
        let marks = [mark(1, 2), mark(7, 300), mark(9, 0)];
        let mut record = Vec::new();
        batch.encode_with_marks(&marks, &mut record);
        assert_eq!(record[0], 2, "version 2 with marks");
        let (decoded, decoded_marks) = WriteBatch::decode_with_marks(&record).expect("decodes");
        assert_eq!(decoded.entries(), batch.entries());
        assert_eq!(decoded_marks, marks);
        // The points alone, as `decode` gives them.
        assert_eq!(WriteBatch::decode(&record).expect("decodes").entries(), batch.entries());
        // A record of marks only: an empty batch.
        let mut only = Vec::new();
        WriteBatch::new().encode_with_marks(&marks[..1], &mut only);
        let (empty, only_marks) = WriteBatch::decode_with_marks(&only).expect("decodes");
        assert!(empty.is_empty());
        assert_eq!(only_marks, &marks[..1]);
        // Every cut of the record is refused, as is a byte too many.
        for len in 0..record.len() {
            assert!(WriteBatch::decode_with_marks(&record[..len]).is_err(), "prefix of {len} bytes accepted");
        }
        record.push(0);
        assert!(WriteBatch::decode_with_marks(&record).is_err());
    }

    /// The layout of the marks section, worked out by hand from the documentation, and a
    /// version 1 record (as earlier builds wrote it) read with no marks.
    #[test]
    fn the_marks_layout_is_frozen_and_version_1_records_still_read() {
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(2), 5, Value::I64(-3)).expect("push");
        let marks = [TxMark { client: [0xC1; 16], tx: [0x7A; 16], completed_at_ns: 0x0102_0304_0506_0708, points: 300 }];
        let mut record = Vec::new();
        batch.encode_with_marks(&marks, &mut record);
        let mut expected = vec![2, 1, 2, 2, 1, 10, 5, 1];
        expected.extend_from_slice(&[0xC1; 16]);
        expected.extend_from_slice(&[0x7A; 16]);
        expected.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
        expected.extend_from_slice(&[172, 2]);
        assert_eq!(record, expected);

        // Version 1: what `encode` writes, and what every earlier build wrote.
        let version_1: &[u8] = &[1, 1, 2, 2, 1, 10, 5];
        let mut plain = Vec::new();
        batch.encode(&mut plain);
        assert_eq!(plain, version_1);
        let (decoded, no_marks) = WriteBatch::decode_with_marks(version_1).expect("decodes");
        assert_eq!(decoded.entries(), batch.entries());
        assert!(no_marks.is_empty());
        // A version 2 record must hold at least one mark; version 3 is unknown.
        assert!(WriteBatch::decode_with_marks(&[2, 1, 2, 2, 1, 10, 5, 0]).is_err());
        assert!(WriteBatch::decode_with_marks(&[3, 0]).is_err());
    }
}
