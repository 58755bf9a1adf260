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
    prefetch_address(entry.timestamps.as_ptr());
    prefetch_address(values_range(&entry.values).start);
}

/// Where the values of `values` lie in memory, as bytes.
#[inline]
pub(crate) fn values_range(values: &ValueColumn) -> std::ops::Range<*const u8> {
    fn bytes_of<T>(v: &[T]) -> std::ops::Range<*const u8> {
        let range = v.as_ptr_range();
        range.start.cast()..range.end.cast()
    }
    match values {
        ValueColumn::F64(v) => bytes_of(v),
        ValueColumn::I64(v) => bytes_of(v),
        ValueColumn::U64(v) => bytes_of(v),
        ValueColumn::Bool(v) => bytes_of(v),
        ValueColumn::Bytes(v) => bytes_of(v),
    }
}

/// Asks the CPU to start loading the cache line at `address` (no effect where unsupported).
#[inline]
pub(crate) fn prefetch_address<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
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
mod tests;
