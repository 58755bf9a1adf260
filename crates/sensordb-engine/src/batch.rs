//! The write batch: the unit of one write, grouped by series, and its encoding as a WAL record.
//!
//! Points are grouped by series as they are pushed, so the memtable takes each series' points
//! with one lock and the WAL record stores each series id once.
//!
//! WAL record payload (version 1, or 2 with completion marks), all varints unsigned LEB128,
//! signed ones zigzag-encoded:
//! ```text
//! u8       batch format version: 1 without marks, 2 with
//! varint   number of series entries E
//! E times:
//!   varint   series id
//!   u8       value kind
//!   varint   point count N (≥ 1)
//!   N times  timestamp: the first as zigzag varint, then zigzag varint deltas to the previous
//!   N times  value: f64 as 8 bytes LE | i64 zigzag varint | u64 varint | bool as one byte 0/1 |
//!            bytes as varint length + the bytes
//! version 2 only, the marks section (see [`crate::mark`]):
//!   varint   number of marks M (≥ 1)
//!   M times  [16] client id | [16] transaction id | i64 LE completed at (Unix ns) | varint points
//! ```
//! A batch written without marks is version 1, byte for byte what earlier builds wrote; both
//! versions are read. The record's framing and checksum (which covers the marks too) belong to
//! the WAL.

#[cfg(doc)]
use crate::checksum::put_varint;
use crate::checksum::{get_varint, unzigzag, zigzag};
use crate::mark::{decode_marks, encode_marks, TxMark};
use crate::model::{SeriesId, Timestamp, Value, ValueColumn, ValueKind};
use bytes::Bytes;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The batch format of a record without marks.
const BATCH_FORMAT_VERSION: u8 = 1;
/// The batch format of a record with a marks section.
const BATCH_FORMAT_VERSION_MARKED: u8 = 2;

/// Points of one series within a batch, in the order they were pushed.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesPoints {
    pub series: SeriesId,
    pub timestamps: Vec<Timestamp>,
    pub values: ValueColumn,
}

/// A set of points to write at once: they are logged in one WAL record and acknowledged together.
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    entries: Vec<SeriesPoints>,
    position_of: HashMap<SeriesId, usize, BuildHasherDefault<IdHasher>>,
    points: usize,
    value_bytes: usize,
    /// Entries emptied by [`WriteBatch::clear`], with their allocations, for the next series
    /// pushed: a batch reused for similar writes stops allocating once it has grown.
    spare: Vec<SeriesPoints>,
}

/// Why a batch cannot take a point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("series {series} already holds {existing} values in this batch, not {attempted}")]
pub struct BatchKindError {
    pub series: u32,
    pub existing: ValueKind,
    pub attempted: ValueKind,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, series: SeriesId, timestamp: Timestamp, value: Value) -> Result<(), BatchKindError> {
        let index = match self.position_of.get(&series) {
            Some(&index) => index,
            None => self.add_entry(series, value.kind()),
        };
        self.push_at(index, timestamp, value)
    }

    /// The index of the entry of `series` (made when new), for [`WriteBatch::push_at`]: a
    /// writer that pushes many points of the same series looks it up once instead of per point.
    /// Indices stay valid until the batch is cleared.
    pub fn entry_index(&mut self, series: SeriesId, kind: ValueKind) -> Result<usize, BatchKindError> {
        match self.position_of.get(&series) {
            Some(&index) if self.entries[index].values.kind() == kind => Ok(index),
            Some(&index) => Err(BatchKindError { series: series.0, existing: self.entries[index].values.kind(), attempted: kind }),
            None => Ok(self.add_entry(series, kind)),
        }
    }

    /// [`WriteBatch::push`] to the entry at `index` (from [`WriteBatch::entry_index`]). Panics
    /// when there is no such entry.
    pub fn push_at(&mut self, index: usize, timestamp: Timestamp, value: Value) -> Result<(), BatchKindError> {
        // Counted as `ValueColumn::heap_bytes` counts, as the other ways of filling a batch do.
        let value_bytes = match &value {
            Value::Bytes(b) => b.len() + 32,
            Value::Bool(_) => 1,
            _ => 8,
        };
        let entry = &mut self.entries[index];
        entry.values.push(value).map_err(|value| BatchKindError {
            series: entry.series.0,
            existing: entry.values.kind(),
            attempted: value.kind(),
        })?;
        entry.timestamps.push(timestamp);
        self.points += 1;
        self.value_bytes += value_bytes;
        Ok(())
    }

    /// Appends points to the entry at `index` (from [`WriteBatch::entry_index`]) through
    /// `append`, which pushes onto its timestamp and value columns, as many onto each: a
    /// decoder can fill the batch without columns of its own. When `append` fails, or leaves
    /// the columns of unequal length, the entry is cut back to what it held and the batch is
    /// unchanged. Returns the number of points appended.
    pub fn append_with<E>(
        &mut self,
        index: usize,
        append: impl FnOnce(&mut Vec<Timestamp>, &mut ValueColumn) -> Result<(), E>,
    ) -> Result<usize, E> {
        let entry = &mut self.entries[index];
        let before = entry.timestamps.len();
        debug_assert_eq!(before, entry.values.len());
        let appended = append(&mut entry.timestamps, &mut entry.values);
        let unequal = entry.timestamps.len() != entry.values.len();
        if appended.is_err() || unequal {
            entry.timestamps.truncate(before);
            entry.values.truncate(before);
        }
        assert!(!unequal || appended.is_err(), "BUG: append_with left columns of unequal length");
        let (added, added_bytes) = (entry.timestamps.len() - before, entry.values.heap_bytes_from(before));
        if appended.is_err() && before == 0 && index + 1 == self.entries.len() {
            // The entry was made for this append: no empty entry stays behind.
            let entry = self.entries.pop().expect("the entry at index");
            self.position_of.remove(&entry.series);
            self.spare.push(entry);
        }
        appended?;
        self.points += added;
        self.value_bytes += added_bytes;
        Ok(added)
    }

    /// Appends many points of one series at once.
    pub fn push_column(&mut self, series: SeriesId, timestamps: &[Timestamp], values: &ValueColumn) -> Result<(), BatchKindError> {
        assert_eq!(timestamps.len(), values.len(), "BUG: column lengths differ");
        let index = match self.position_of.get(&series) {
            Some(&index) => index,
            None => self.add_entry(series, values.kind()),
        };
        let entry = &mut self.entries[index];
        if !entry.values.extend_from(values) {
            return Err(BatchKindError { series: series.0, existing: entry.values.kind(), attempted: values.kind() });
        }
        entry.timestamps.extend_from_slice(timestamps);
        self.points += timestamps.len();
        self.value_bytes += values.heap_bytes();
        Ok(())
    }

    /// A new, empty entry for `series`, made from a spare one when there is one; its index.
    fn add_entry(&mut self, series: SeriesId, kind: ValueKind) -> usize {
        let entry = match self.spare.pop() {
            Some(mut entry) => {
                debug_assert!(entry.timestamps.is_empty() && entry.values.is_empty());
                entry.series = series;
                if entry.values.kind() != kind {
                    entry.values = ValueColumn::new(kind);
                }
                entry
            }
            None => SeriesPoints { series, timestamps: Vec::new(), values: ValueColumn::new(kind) },
        };
        self.entries.push(entry);
        self.position_of.insert(series, self.entries.len() - 1);
        self.entries.len() - 1
    }

    pub fn entries(&self) -> &[SeriesPoints] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Approximate bytes of the points' values (payload bytes for byte values, 8 otherwise).
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// Empties the batch but keeps its allocations (see [`WriteBatch::capacity_points`]).
    pub fn clear(&mut self) {
        for mut entry in self.entries.drain(..) {
            entry.timestamps.clear();
            entry.values.clear();
            self.spare.push(entry);
        }
        self.position_of.clear();
        self.points = 0;
        self.value_bytes = 0;
    }

    /// Points the batch can hold without allocating (timestamps, with or without their entries
    /// in use): what a cleared batch keeps.
    pub fn capacity_points(&self) -> usize {
        self.entries.iter().chain(&self.spare).map(|entry| entry.timestamps.capacity()).sum()
    }

    /// Appends the WAL record encoding of this batch to `out`.
    ///
    /// The record is written into room reserved for its largest possible size, through a
    /// cursor with no capacity check per byte. Most of the time goes into reading the entries'
    /// points, scattered over the heap in thousands of small vectors (a TSBS body: ~9,000
    /// entries of ~5 points), so the next entries' points are prefetched while one is written.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_with_marks(&[], out);
    }

    /// [`WriteBatch::encode`] with a marks section (version 2) when `marks` is not empty.
    pub fn encode_with_marks(&self, marks: &[TxMark], out: &mut Vec<u8>) {
        // Varints take at most 10 bytes; payloads are counted in `value_bytes`.
        let bound = 1 + 10 + self.entries.len() * (10 + 1 + 10) + self.points * (10 + 10) + self.value_bytes;
        out.reserve(bound + if marks.is_empty() { 0 } else { crate::mark::encoded_bound(marks.len()) });
        let mut cursor = Cursor { buf: &mut out.spare_capacity_mut()[..bound], len: 0 };
        cursor.byte(if marks.is_empty() { BATCH_FORMAT_VERSION } else { BATCH_FORMAT_VERSION_MARKED });
        cursor.varint(self.entries.len() as u64);
        for (i, entry) in self.entries.iter().enumerate() {
            if let Some(ahead) = self.entries.get(i + PREFETCH_AHEAD) {
                prefetch(ahead);
            }
            cursor.varint(u64::from(entry.series.0));
            cursor.byte(entry.values.kind() as u8);
            cursor.varint(entry.timestamps.len() as u64);
            let mut previous = 0i64;
            for &t in &entry.timestamps {
                cursor.varint(zigzag(t.wrapping_sub(previous)));
                previous = t;
            }
            match &entry.values {
                ValueColumn::F64(v) => v.iter().for_each(|x| cursor.bytes(&x.to_bits().to_le_bytes())),
                ValueColumn::I64(v) => v.iter().for_each(|&x| cursor.varint(zigzag(x))),
                ValueColumn::U64(v) => v.iter().for_each(|&x| cursor.varint(x)),
                ValueColumn::Bool(v) => v.iter().for_each(|&x| cursor.byte(u8::from(x))),
                ValueColumn::Bytes(v) => v.iter().for_each(|x| {
                    cursor.varint(x.len() as u64);
                    cursor.bytes(x);
                }),
            }
        }
        let written = cursor.len;
        // SAFETY: the cursor initialized the first `written` bytes of the spare capacity (it
        // only ever writes at `len` and advances it), and `written <= bound <= spare capacity`.
        unsafe { out.set_len(out.len() + written) };
        if !marks.is_empty() {
            encode_marks(marks, out);
        }
    }

    /// Decodes a record written by [`WriteBatch::encode`]; the error says what is wrong. The
    /// marks of a version 2 record are checked and dropped.
    pub fn decode(record: &[u8]) -> Result<WriteBatch, String> {
        WriteBatch::decode_with_marks(record).map(|(batch, _)| batch)
    }

    /// Decodes a record written by [`WriteBatch::encode_with_marks`] (or an earlier build's
    /// version 1 record, which has no marks).
    pub fn decode_with_marks(record: &[u8]) -> Result<(WriteBatch, Vec<TxMark>), String> {
        let mut position = 0usize;
        let version = *record.first().ok_or("empty batch record")?;
        if version != BATCH_FORMAT_VERSION && version != BATCH_FORMAT_VERSION_MARKED {
            return Err(format!("unknown batch format version {version}"));
        }
        position += 1;
        let varint = |position: &mut usize| get_varint(record, position).ok_or("truncated varint");
        let entry_count = varint(&mut position)?;
        let mut batch = WriteBatch::new();
        for _ in 0..entry_count {
            let series = u32::try_from(varint(&mut position)?).map_err(|_| "series id out of range")?;
            let kind_tag = *record.get(position).ok_or("truncated kind")?;
            position += 1;
            let kind = ValueKind::try_from(kind_tag).map_err(|tag| format!("unknown value kind {tag}"))?;
            let count = varint(&mut position)? as usize;
            // Every point takes at least one byte per column: a larger count is corrupt.
            if count == 0 || count > record.len() - position {
                return Err(format!("implausible point count {count}"));
            }
            let mut timestamps = Vec::with_capacity(count);
            let mut previous = 0i64;
            for _ in 0..count {
                previous = previous.wrapping_add(unzigzag(varint(&mut position)?));
                timestamps.push(previous);
            }
            let values = match kind {
                ValueKind::F64 => {
                    let bytes = record.get(position..position + count * 8).ok_or("truncated f64 values")?;
                    position += count * 8;
                    ValueColumn::F64(
                        bytes.chunks_exact(8).map(|c| f64::from_bits(u64::from_le_bytes(c.try_into().expect("8 bytes")))).collect(),
                    )
                }
                ValueKind::I64 => ValueColumn::I64((0..count).map(|_| varint(&mut position).map(unzigzag)).collect::<Result<_, _>>()?),
                ValueKind::U64 => ValueColumn::U64((0..count).map(|_| varint(&mut position)).collect::<Result<_, _>>()?),
                ValueKind::Bool => {
                    let bytes = record.get(position..position + count).ok_or("truncated bool values")?;
                    position += count;
                    ValueColumn::Bool(bytes.iter().map(|&b| b != 0).collect())
                }
                ValueKind::Bytes => {
                    let mut values = Vec::with_capacity(count);
                    for _ in 0..count {
                        let len = varint(&mut position)? as usize;
                        let bytes = record.get(position..position.saturating_add(len)).ok_or("truncated payload")?;
                        position += len;
                        values.push(Bytes::copy_from_slice(bytes));
                    }
                    ValueColumn::Bytes(values)
                }
            };
            batch.push_column(SeriesId(series), &timestamps, &values).map_err(|e| e.to_string())?;
        }
        let marks = if version == BATCH_FORMAT_VERSION_MARKED { decode_marks(record, &mut position)? } else { Vec::new() };
        if position != record.len() {
            return Err(format!("{} trailing bytes after batch", record.len() - position));
        }
        Ok((batch, marks))
    }
}

/// Entries ahead whose points [`WriteBatch::encode`] prefetches.
const PREFETCH_AHEAD: usize = 4;

/// Asks the CPU to start loading the first points of `entry` (no effect where unsupported).
#[inline]
pub fn prefetch(entry: &SeriesPoints) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let values: *const i8 = match &entry.values {
            ValueColumn::F64(v) => v.as_ptr().cast(),
            ValueColumn::I64(v) => v.as_ptr().cast(),
            ValueColumn::U64(v) => v.as_ptr().cast(),
            ValueColumn::Bool(v) => v.as_ptr().cast(),
            ValueColumn::Bytes(v) => v.as_ptr().cast(),
        };
        // SAFETY: a prefetch is only a hint: it never faults, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(entry.timestamps.as_ptr().cast());
            _mm_prefetch::<_MM_HINT_T0>(values);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = entry;
}

/// Writes into uninitialized room sized beforehand for everything written; running past it is
/// a bug and panics (the bounds check of the slice index), never undefined behaviour.
struct Cursor<'a> {
    buf: &'a mut [std::mem::MaybeUninit<u8>],
    len: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.buf[self.len].write(b);
        self.len += 1;
    }

    #[inline(always)]
    fn bytes(&mut self, bytes: &[u8]) {
        for (slot, &b) in self.buf[self.len..self.len + bytes.len()].iter_mut().zip(bytes) {
            slot.write(b);
        }
        self.len += bytes.len();
    }

    /// Unsigned LEB128, as [`put_varint`] writes it.
    #[inline(always)]
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }
}

/// A fast hasher for small integer keys (Fibonacci multiplicative hashing); series ids are dense
/// small integers, so SipHash's protection against hash flooding buys nothing here.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (u64::from(n) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A batch counts the same value bytes however it was filled.
        #[test]
        fn push_and_push_column_count_the_same_bytes(values in proptest::collection::vec(value_strategy(), 1..30)) {
            let mut by_point = WriteBatch::new();
            let mut by_column = WriteBatch::new();
            for (n, value) in values.into_iter().enumerate() {
                let series = SeriesId(1 + value.kind() as u32);
                let mut column = ValueColumn::new(value.kind());
                column.push(value.clone()).expect("same kind");
                by_point.push(series, n as i64, value).expect("push");
                by_column.push_column(series, &[n as i64], &column).expect("push_column");
            }
            prop_assert_eq!(by_point.value_bytes(), by_column.value_bytes());
        }
    }

    #[test]
    fn append_with_appends_or_leaves_the_batch_as_it_was() {
        let mut batch = WriteBatch::new();
        let a = batch.entry_index(SeriesId(1), ValueKind::F64).expect("entry");
        let added = batch.append_with(a, |ts, values| -> Result<(), ()> {
            ts.extend([1, 2]);
            values.push(Value::F64(1.0)).map_err(drop)?;
            values.push(Value::F64(2.0)).map_err(drop)
        });
        assert_eq!(added, Ok(2));
        assert_eq!((batch.len(), batch.value_bytes()), (2, 16));
        // A failing append to an existing entry is cut back to what it held.
        let failed = batch.append_with(a, |ts, values| {
            ts.push(3);
            values.push(Value::F64(3.0)).map_err(drop)?;
            Err(())
        });
        assert_eq!(failed, Err(()));
        assert_eq!((batch.len(), batch.value_bytes()), (2, 16));
        assert_eq!(batch.entries()[0].timestamps, vec![1, 2]);
        assert_eq!(batch.entries()[0].values.len(), 2);
        // One for a new series leaves no empty entry behind, and the series can come back.
        let b = batch.entry_index(SeriesId(2), ValueKind::I64).expect("entry");
        assert_eq!(
            batch.append_with(b, |ts, _| -> Result<(), ()> {
                ts.push(9);
                Err(())
            }),
            Err(())
        );
        assert_eq!(batch.entries().len(), 1);
        let b = batch.entry_index(SeriesId(2), ValueKind::I64).expect("entry");
        assert_eq!(batch.append_with(b, |ts, values| values.push(Value::I64(7)).map(|()| ts.push(5)).map_err(drop)), Ok(1));
        assert_eq!(batch.entries().len(), 2);
        assert_eq!(batch.len(), 3);
    }

    #[test]
    #[should_panic(expected = "unequal length")]
    fn append_with_refuses_columns_of_unequal_length() {
        let mut batch = WriteBatch::new();
        let a = batch.entry_index(SeriesId(1), ValueKind::F64).expect("entry");
        let _ = batch.append_with(a, |ts, _| -> Result<(), ()> {
            ts.push(1);
            Ok(())
        });
    }

    fn value_strategy() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<u64>().prop_map(|bits| Value::F64(f64::from_bits(bits))),
            any::<i64>().prop_map(Value::I64),
            any::<u64>().prop_map(Value::U64),
            any::<bool>().prop_map(Value::Bool),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Value::Bytes(Bytes::from(b))),
        ]
    }

    /// The encoding as the layout in the module documentation reads, a push per byte: what
    /// [`WriteBatch::encode`] must match byte for byte.
    fn encode_plainly(batch: &WriteBatch, out: &mut Vec<u8>) {
        use crate::checksum::put_varint;
        out.push(BATCH_FORMAT_VERSION);
        put_varint(out, batch.entries.len() as u64);
        for entry in &batch.entries {
            put_varint(out, u64::from(entry.series.0));
            out.push(entry.values.kind() as u8);
            put_varint(out, entry.timestamps.len() as u64);
            let mut previous = 0i64;
            for &t in &entry.timestamps {
                put_varint(out, zigzag(t.wrapping_sub(previous)));
                previous = t;
            }
            match &entry.values {
                ValueColumn::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_bits().to_le_bytes())),
                ValueColumn::I64(v) => v.iter().for_each(|&x| put_varint(out, zigzag(x))),
                ValueColumn::U64(v) => v.iter().for_each(|&x| put_varint(out, x)),
                ValueColumn::Bool(v) => v.iter().for_each(|&x| out.push(u8::from(x))),
                ValueColumn::Bytes(v) => v.iter().for_each(|x| {
                    put_varint(out, x.len() as u64);
                    out.extend_from_slice(x);
                }),
            }
        }
    }

    /// Values at the extremes of every encoding's width, and in between.
    fn wide_value_strategy() -> impl Strategy<Value = Value> {
        let wide = prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 63), (0u32..64).prop_map(|b| 1u64 << b), any::<u64>()];
        prop_oneof![
            wide.clone().prop_map(|bits| Value::F64(f64::from_bits(bits))),
            wide.clone().prop_map(|x| Value::I64(x as i64)),
            wide.prop_map(Value::U64),
            any::<bool>().prop_map(Value::Bool),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| Value::Bytes(Bytes::from(b))),
        ]
    }

    proptest! {
        #[test]
        fn the_record_is_the_plain_encoding(
            prefix in proptest::collection::vec(any::<u8>(), 0..5),
            points in proptest::collection::vec((0u32..40, prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), any::<i64>()], wide_value_strategy()), 0..200),
        ) {
            let mut batch = WriteBatch::new();
            for (series, t, v) in points {
                let _ = batch.push(SeriesId(series), t, v);
            }
            let (mut ours, mut plain) = (prefix.clone(), prefix);
            batch.encode(&mut ours);
            encode_plainly(&batch, &mut plain);
            prop_assert_eq!(ours, plain);
        }

        #[test]
        fn batches_round_trip_through_their_record(points in proptest::collection::vec((1u32..6, any::<i64>(), value_strategy()), 0..60)) {
            let mut batch = WriteBatch::new();
            for (series, t, v) in points {
                // Kinds are per series; a clash is a legitimate rejection, not a failure.
                let _ = batch.push(SeriesId(series), t, v);
            }
            let mut record = Vec::new();
            batch.encode(&mut record);
            let decoded = WriteBatch::decode(&record).expect("decodes");
            prop_assert_eq!(decoded.entries(), batch.entries());
            prop_assert_eq!(decoded.len(), batch.len());
        }

        #[test]
        fn a_cleared_batch_takes_new_points_like_a_fresh_one(
            first in proptest::collection::vec((1u32..6, any::<i64>(), value_strategy()), 0..60),
            second in proptest::collection::vec((1u32..9, any::<i64>(), value_strategy()), 0..60),
        ) {
            let mut reused = WriteBatch::new();
            for (series, t, v) in first {
                let _ = reused.push(SeriesId(series), t, v);
            }
            reused.clear();
            prop_assert!(reused.is_empty() && reused.entries().is_empty());
            let mut fresh = WriteBatch::new();
            for (series, t, v) in second {
                prop_assert_eq!(reused.push(SeriesId(series), t, v.clone()), fresh.push(SeriesId(series), t, v));
            }
            prop_assert_eq!(reused.entries(), fresh.entries());
            prop_assert_eq!((reused.len(), reused.value_bytes()), (fresh.len(), fresh.value_bytes()));
            let (mut a, mut b) = (Vec::new(), Vec::new());
            reused.encode(&mut a);
            fresh.encode(&mut b);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn garbage_records_never_panic(record in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = WriteBatch::decode(&record);
        }
    }

    #[test]
    fn points_are_grouped_by_series_and_kinds_checked() {
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(1), 10, Value::F64(1.0)).expect("push");
        batch.push(SeriesId(2), 10, Value::Bool(true)).expect("push");
        batch.push(SeriesId(1), 20, Value::F64(2.0)).expect("push");
        assert_eq!(batch.entries().len(), 2);
        assert_eq!(batch.entries()[0].timestamps, vec![10, 20]);
        let err = batch.push(SeriesId(2), 30, Value::I64(3)).expect_err("kind clash");
        assert_eq!(err.existing, ValueKind::Bool);
        assert_eq!(batch.len(), 3);
    }

    #[test]
    fn pushes_at_an_entry_index_land_in_that_series() {
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(1), 10, Value::F64(1.0)).expect("push");
        let two = batch.entry_index(SeriesId(2), ValueKind::I64).expect("new entry");
        let one = batch.entry_index(SeriesId(1), ValueKind::F64).expect("existing entry");
        assert_eq!((one, two), (0, 1));
        batch.push_at(two, 5, Value::I64(7)).expect("push");
        batch.push_at(one, 20, Value::F64(2.0)).expect("push");
        assert_eq!(batch.push_at(two, 6, Value::F64(0.5)).expect_err("kind clash").existing, ValueKind::I64);
        assert_eq!(batch.entry_index(SeriesId(1), ValueKind::Bool).expect_err("kind clash").existing, ValueKind::F64);
        assert_eq!(batch.len(), 3);
        assert_eq!(batch.entries()[0].timestamps, vec![10, 20]);
        assert_eq!(batch.entries()[1], SeriesPoints { series: SeriesId(2), timestamps: vec![5], values: ValueColumn::I64(vec![7]) });
        batch.clear();
        assert_eq!(batch.entry_index(SeriesId(3), ValueKind::Bool).expect("entry after clear"), 0);
    }

    /// Freezes the record layout: the bytes were worked out from the layout in the module
    /// documentation (by a separate script), not printed by this code.
    #[test]
    fn the_record_layout_is_frozen() {
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(300), 1_700_000_000_000_000_000, Value::F64(1.25)).expect("push");
        batch.push(SeriesId(2), 5, Value::I64(-3)).expect("push");
        batch.push(SeriesId(2), 7, Value::I64(200)).expect("push");
        batch.push(SeriesId(1), -1, Value::Bytes(Bytes::from_static(b"ab"))).expect("push");
        batch.push(SeriesId(4), 0, Value::Bool(true)).expect("push");
        batch.push(SeriesId(9), 3, Value::U64(u64::MAX)).expect("push");
        let mut record = vec![0xAA];
        batch.encode(&mut record);
        let expected: &[u8] = &[
            0xAA, 1, 5, 172, 2, 1, 1, 128, 128, 208, 226, 198, 191, 206, 151, 47, 0, 0, 0, 0, 0, 0, 244, 63, 2, 2, 2, 10, 4, 5, 144, 3, 1,
            5, 1, 1, 2, 97, 98, 4, 4, 1, 0, 1, 9, 3, 1, 6, 255, 255, 255, 255, 255, 255, 255, 255, 255, 1,
        ];
        assert_eq!(record, expected, "appended after what `out` held");
    }

    #[test]
    fn truncated_records_are_rejected() {
        let mut batch = WriteBatch::new();
        batch.push(SeriesId(300), 1_700_000_000_000_000_000, Value::F64(1.25)).expect("push");
        let mut record = Vec::new();
        batch.encode(&mut record);
        for len in 0..record.len() {
            assert!(WriteBatch::decode(&record[..len]).is_err(), "prefix of {len} bytes accepted");
        }
    }
}
