//! Point records: the compact binary body of SEND frames (after the transaction id).
//!
//! A SEND body holds any number of records back to back; varints are unsigned LEB128, signed
//! values zigzag-encoded first (the engine's WAL batch encoding, `sensordb_engine::WriteBatch::encode`):
//! ```text
//! POINTS (u8 1):  varint short series id, varint count N (≥ 1),
//!                 N timestamps: zigzag varint of the first, then zigzag varint deltas,
//!                 N values by the series' kind: f64 8 bytes LE (the IEEE 754 bits) |
//!                 i64 zigzag varint | u64 varint | bool 1 byte 0/1 | bytes varint length + bytes
//! PAYLOAD_PART (u8 2): varint short series id (a bytes series), zigzag varint timestamp,
//!                 u8 last (0 more parts follow, 1 this part ends the value),
//!                 varint length, the bytes
//! ```
//! Decoding is strict where a lenient reading would store something else than was meant: a
//! timestamp delta whose sum leaves the i64 range is refused (never wrapped), and so is a bool
//! byte other than 0 and 1, and a timestamp outside `TIMESTAMP_MIN..=TIMESTAMP_MAX` of
//! `sensordb-model` (`i64::MIN + 2` to `i64::MAX - 1`, InfluxDB's range: a point at
//! `i64::MAX` could be stored but never read back). The encoder therefore never writes a delta
//! that does not fit: it starts a new POINTS record where timestamps jump by more than an i64.
//!
//! A PAYLOAD_PART lets one large byte value span SEND frames: the parts of one value are
//! consecutive records of the same transaction (no other record in between) and concatenate to
//! the value. The series kind comes from the connection's DEFINE_SERIES.
//!
//! Decoding either returns each record in columns of its own ([`PointsDecoder::next_record`])
//! or appends a POINTS record's points straight to the caller's [`PointsSink`]
//! ([`PointsDecoder::next_into`]): the server's sink is the transaction's write batch, so a SEND
//! is decoded without allocating per record.

use bytes::Bytes;
use sensordb_model::varint::{get_varint, put_varint};
use sensordb_model::zigzag::{unzigzag, zigzag};
use sensordb_model::{Timestamp, ValueColumn, ValueKind};

const RECORD_POINTS: u8 = 1;
const RECORD_PAYLOAD_PART: u8 = 2;

/// One decoded record.
#[derive(Clone, Debug, PartialEq)]
pub enum PointRecord {
    Points { short_id: u32, timestamps: Vec<Timestamp>, values: ValueColumn },
    PayloadPart { short_id: u32, timestamp: Timestamp, last: bool, bytes: Bytes },
}

/// Appends records to a buffer.
#[derive(Debug, Default)]
pub struct PointsEncoder;

impl PointsEncoder {
    /// Appends the points as POINTS records: one, unless two neighbouring timestamps are more
    /// than `i64::MAX` apart (a delta that does not fit an i64, which a decoder refuses): the
    /// points from there on go in a record of their own. `timestamps` and `values` have the
    /// same, nonzero length.
    pub fn points(out: &mut Vec<u8>, short_id: u32, timestamps: &[Timestamp], values: &ValueColumn) {
        debug_assert_eq!(timestamps.len(), values.len());
        let mut start = 0;
        while start < timestamps.len() {
            let end = start + 1 + timestamps[start..].windows(2).take_while(|pair| pair[1].checked_sub(pair[0]).is_some()).count();
            Self::one_record(out, short_id, &timestamps[start..end], values, start..end);
            start = end;
        }
    }

    /// One POINTS record of `timestamps` and `values[range]`; every delta fits an i64.
    fn one_record(out: &mut Vec<u8>, short_id: u32, timestamps: &[Timestamp], values: &ValueColumn, range: std::ops::Range<usize>) {
        out.push(RECORD_POINTS);
        put_varint(out, u64::from(short_id));
        put_varint(out, timestamps.len() as u64);
        let mut previous = 0i64;
        for &t in timestamps {
            // Checked by the caller; wrapping would give the same bytes anyway.
            put_varint(out, zigzag(t.wrapping_sub(previous)));
            previous = t;
        }
        match values {
            ValueColumn::F64(v) => v[range].iter().for_each(|x| out.extend_from_slice(&x.to_bits().to_le_bytes())),
            ValueColumn::I64(v) => v[range].iter().for_each(|&x| put_varint(out, zigzag(x))),
            ValueColumn::U64(v) => v[range].iter().for_each(|&x| put_varint(out, x)),
            ValueColumn::Bool(v) => v[range].iter().for_each(|&x| out.push(u8::from(x))),
            ValueColumn::Bytes(v) => v[range].iter().for_each(|x| {
                put_varint(out, x.len() as u64);
                out.extend_from_slice(x);
            }),
        }
    }

    /// Appends a PAYLOAD_PART record.
    pub fn payload_part(out: &mut Vec<u8>, short_id: u32, timestamp: Timestamp, last: bool, bytes: &[u8]) {
        out.push(RECORD_PAYLOAD_PART);
        put_varint(out, u64::from(short_id));
        put_varint(out, zigzag(timestamp));
        out.push(u8::from(last));
        put_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
}

/// Iterates over the records of one SEND body.
pub struct PointsDecoder {
    body: Bytes,
    position: usize,
}

impl PointsDecoder {
    pub fn new(body: Bytes) -> Self {
        PointsDecoder { body, position: 0 }
    }

    /// The next record; `kind_of` gives the kind of a defined short id (`None`: undefined).
    /// `Err` carries what is wrong; the rest of the body is then unusable.
    pub fn next_record(&mut self, kind_of: impl Fn(u32) -> Option<ValueKind>) -> Option<Result<PointRecord, DecodeError>> {
        if self.position >= self.body.len() {
            return None;
        }
        Some(self.decode_one(kind_of).inspect_err(|_| self.position = self.body.len()))
    }

    /// Like [`PointsDecoder::next_record`], but a POINTS record's points are appended to `sink`
    /// ([`PointsSink::append_points`]) instead of being returned in columns of their own; the
    /// sink also says which short ids are defined and their kinds. After an `Err`, `sink` holds
    /// what the records before it appended (the record in error appended nothing).
    pub fn next_into<S: PointsSink>(&mut self, sink: &mut S) -> Option<Result<Appended, DecodeError>> {
        if self.position >= self.body.len() {
            return None;
        }
        let decoded = self.decode_head(|short_id| sink.kind_of(short_id)).and_then(|head| match head {
            Head::Points { short_id, count, kind } => {
                let (body, position) = (&self.body, &mut self.position);
                sink.append_points(short_id, kind, |timestamps, values| decode_points(body, position, count, timestamps, values))?;
                Ok(Appended::Points { short_id, count })
            }
            Head::PayloadPart { short_id, timestamp, last, bytes } => Ok(Appended::PayloadPart { short_id, timestamp, last, bytes }),
        });
        Some(decoded.inspect_err(|_| self.position = self.body.len()))
    }

    fn decode_one(&mut self, kind_of: impl Fn(u32) -> Option<ValueKind>) -> Result<PointRecord, DecodeError> {
        match self.decode_head(kind_of)? {
            Head::Points { short_id, count, kind } => {
                let mut timestamps = Vec::new();
                let mut values = ValueColumn::new(kind);
                decode_points(&self.body, &mut self.position, count, &mut timestamps, &mut values)?;
                Ok(PointRecord::Points { short_id, timestamps, values })
            }
            Head::PayloadPart { short_id, timestamp, last, bytes } => Ok(PointRecord::PayloadPart { short_id, timestamp, last, bytes }),
        }
    }

    /// Decodes a record's type and short id, and then either a POINTS record's count (its
    /// points are left for [`decode_points`]) or a whole PAYLOAD_PART.
    fn decode_head(&mut self, kind_of: impl Fn(u32) -> Option<ValueKind>) -> Result<Head, DecodeError> {
        let body = &self.body[..];
        let position = &mut self.position;
        let malformed = |what: &str| DecodeError::Malformed(what.to_string());
        let varint = |position: &mut usize| get_varint(body, position).ok_or_else(|| malformed("truncated varint"));
        let record_type = body[*position];
        *position += 1;
        let short_id = u32::try_from(varint(position)?).map_err(|_| malformed("short series id out of range"))?;
        let kind = kind_of(short_id).ok_or(DecodeError::UnknownSeries(short_id))?;
        match record_type {
            RECORD_POINTS => {
                let count = varint(position)? as usize;
                // Every point takes at least one byte per column: a larger count is corrupt.
                if count == 0 || count > body.len() - *position {
                    return Err(malformed("implausible point count"));
                }
                Ok(Head::Points { short_id, count, kind })
            }
            RECORD_PAYLOAD_PART => {
                if kind != ValueKind::Bytes {
                    return Err(DecodeError::KindMismatch { short_id, kind });
                }
                let timestamp = storable(unzigzag(varint(position)?))?;
                let last = *body.get(*position).ok_or_else(|| malformed("truncated payload part"))?;
                *position += 1;
                let len = varint(position)? as usize;
                let end = position.checked_add(len).ok_or_else(|| malformed("truncated payload part"))?;
                if end > body.len() || last > 1 {
                    return Err(malformed("bad payload part"));
                }
                let bytes = self.body.slice(*position..end);
                *position = end;
                Ok(Head::PayloadPart { short_id, timestamp, last: last == 1, bytes })
            }
            other => Err(DecodeError::Malformed(format!("unknown record type {other}"))),
        }
    }
}

/// Where [`PointsDecoder::next_into`] puts the points of POINTS records: the decoder parses
/// the record and leaves the storing to the sink (the server's is the transaction's write batch,
/// whose columns the points are decoded into directly).
pub trait PointsSink {
    /// The kind of values of a short series id defined on the connection; `None`: undefined.
    fn kind_of(&self, short_id: u32) -> Option<ValueKind>;

    /// Stores the points of one POINTS record of `short_id` (whose kind [`PointsSink::kind_of`]
    /// said is `kind`): `decode` appends the record's timestamps and values to columns of that
    /// kind (one timestamp per value; `values` must have the kind `kind`). When `decode` fails
    /// the sink must keep nothing of this record and return its error; a sink may refuse the
    /// record for reasons of its own with an error of its choosing.
    fn append_points<D>(&mut self, short_id: u32, kind: ValueKind, decode: D) -> Result<(), DecodeError>
    where
        D: FnOnce(&mut Vec<Timestamp>, &mut ValueColumn) -> Result<(), DecodeError>;
}

/// What [`PointsDecoder::next_into`] did with a record.
#[derive(Clone, Debug, PartialEq)]
pub enum Appended {
    /// A POINTS record's `count` points went into the sink.
    Points {
        short_id: u32,
        count: usize,
    },
    PayloadPart {
        short_id: u32,
        timestamp: Timestamp,
        last: bool,
        bytes: Bytes,
    },
}

enum Head {
    Points { short_id: u32, count: usize, kind: ValueKind },
    PayloadPart { short_id: u32, timestamp: Timestamp, last: bool, bytes: Bytes },
}

/// Appends a POINTS record's `count` timestamps and values, from `position`, to the columns
/// (`values` has the series' kind).
fn decode_points(
    body: &[u8],
    position: &mut usize,
    count: usize,
    timestamps: &mut Vec<Timestamp>,
    values: &mut ValueColumn,
) -> Result<(), DecodeError> {
    let malformed = |what: &str| DecodeError::Malformed(what.to_string());
    let varint = |position: &mut usize| get_varint(body, position).ok_or_else(|| malformed("truncated varint"));
    timestamps.reserve(count);
    let mut previous = 0i64;
    for _ in 0..count {
        previous = previous.checked_add(unzigzag(varint(position)?)).ok_or_else(|| malformed("timestamp delta overflows i64"))?;
        timestamps.push(storable(previous)?);
    }
    match values {
        ValueColumn::F64(values) => {
            let end = position.checked_add(count * 8).ok_or_else(|| malformed("truncated f64 values"))?;
            let bytes = body.get(*position..end).ok_or_else(|| malformed("truncated f64 values"))?;
            *position = end;
            values.extend(bytes.chunks_exact(8).map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                f64::from_bits(u64::from_le_bytes(a))
            }));
        }
        ValueColumn::I64(values) => {
            values.reserve(count);
            for _ in 0..count {
                values.push(unzigzag(varint(position)?));
            }
        }
        ValueColumn::U64(values) => {
            values.reserve(count);
            for _ in 0..count {
                values.push(varint(position)?);
            }
        }
        ValueColumn::Bool(values) => {
            let bytes = body.get(*position..*position + count).ok_or_else(|| malformed("truncated bool values"))?;
            if let Some(&bad) = bytes.iter().find(|&&b| b > 1) {
                return Err(DecodeError::Malformed(format!("bool value byte {bad} is not 0 or 1")));
            }
            *position += count;
            values.extend(bytes.iter().map(|&b| b == 1));
        }
        ValueColumn::Bytes(values) => {
            values.reserve(count);
            for _ in 0..count {
                let len = varint(position)? as usize;
                let end = position.checked_add(len).ok_or_else(|| malformed("truncated payload"))?;
                if end > body.len() {
                    return Err(malformed("truncated payload"));
                }
                // A copy, not a slice: the body is a slice of the connection's read buffer,
                // which a value kept in the memtable until the next flush would otherwise keep
                // alive whole, beyond the memtable's accounting.
                values.push(Bytes::copy_from_slice(&body[*position..end]));
                *position = end;
            }
        }
    }
    Ok(())
}

/// `timestamp`, or why a point may not carry it.
fn storable(timestamp: Timestamp) -> Result<Timestamp, DecodeError> {
    match sensordb_model::timestamp_out_of_range(timestamp) {
        None => Ok(timestamp),
        Some(why) => Err(DecodeError::Malformed(why)),
    }
}

/// Why a SEND body does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("short series id {0} was not defined on this connection")]
    UnknownSeries(u32),
    #[error("payload parts sent for short series id {short_id}, which holds {kind} values")]
    KindMismatch { short_id: u32, kind: ValueKind },
    #[error("malformed point records: {0}")]
    Malformed(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sensordb_model::{TIMESTAMP_MAX, TIMESTAMP_MIN};

    fn kind_of(id: u32) -> Option<ValueKind> {
        ValueKind::try_from((id % 5 + 1) as u8).ok()
    }

    fn column(kind: ValueKind, seed: &[i64]) -> ValueColumn {
        match kind {
            ValueKind::F64 => ValueColumn::F64(seed.iter().map(|&x| x as f64 / 3.0).collect()),
            ValueKind::I64 => ValueColumn::I64(seed.to_vec()),
            ValueKind::U64 => ValueColumn::U64(seed.iter().map(|&x| x as u64).collect()),
            ValueKind::Bool => ValueColumn::Bool(seed.iter().map(|&x| x & 1 == 1).collect()),
            ValueKind::Bytes => ValueColumn::Bytes(seed.iter().map(|&x| Bytes::from(x.to_string())).collect()),
        }
    }

    /// Keeps each POINTS record's columns apart, as `next_record` returns them; refuses the
    /// records of the short id `refused`.
    struct Records {
        records: Vec<(u32, Vec<Timestamp>, ValueColumn)>,
        refused: Option<u32>,
    }

    impl PointsSink for Records {
        fn kind_of(&self, short_id: u32) -> Option<ValueKind> {
            kind_of(short_id)
        }

        fn append_points<D>(&mut self, short_id: u32, kind: ValueKind, decode: D) -> Result<(), DecodeError>
        where
            D: FnOnce(&mut Vec<Timestamp>, &mut ValueColumn) -> Result<(), DecodeError>,
        {
            if Some(short_id) == self.refused {
                return Err(DecodeError::Malformed(format!("short id {short_id} refused")));
            }
            let (mut timestamps, mut values) = (Vec::new(), ValueColumn::new(kind));
            decode(&mut timestamps, &mut values)?;
            self.records.push((short_id, timestamps, values));
            Ok(())
        }
    }

    fn decode_all(body: Vec<u8>) -> Vec<Result<PointRecord, DecodeError>> {
        let mut decoder = PointsDecoder::new(Bytes::from(body));
        std::iter::from_fn(|| decoder.next_record(kind_of)).collect()
    }

    /// Found by the issue 13 review: bool bytes 2 and 255 were read as true.
    #[test]
    fn bool_bytes_other_than_0_and_1_are_refused() {
        // Short id 3 holds bools (see `kind_of`).
        for (byte, expected) in [(0u8, Some(false)), (1, Some(true)), (2, None), (255, None)] {
            let body = vec![RECORD_POINTS, 3, 1, 0, byte];
            match (decode_all(body).remove(0), expected) {
                (Ok(PointRecord::Points { values, .. }), Some(value)) => assert_eq!(values, ValueColumn::Bool(vec![value])),
                (Err(DecodeError::Malformed(message)), None) => assert!(message.contains(&format!("byte {byte}")), "{message}"),
                (other, _) => panic!("byte {byte}: {other:?}"),
            }
        }
    }

    /// Found by the issue 13 review: timestamp deltas that overflow wrapped around silently.
    #[test]
    fn overflowing_timestamp_deltas_are_refused_and_never_encoded() {
        // Short id 1 holds i64s: the latest storable timestamp, then a delta of +2.
        let mut body = vec![RECORD_POINTS, 1, 2];
        put_varint(&mut body, zigzag(TIMESTAMP_MAX));
        put_varint(&mut body, zigzag(2));
        body.extend_from_slice(&[0, 0]);
        assert!(matches!(&decode_all(body)[0], Err(DecodeError::Malformed(m)) if m.contains("overflows")));
        // The encoder splits where timestamps jump by more than an i64, so what it writes decodes.
        let timestamps = [TIMESTAMP_MIN, 3, TIMESTAMP_MAX, TIMESTAMP_MIN + 1, -5];
        let mut body = Vec::new();
        PointsEncoder::points(&mut body, 1, &timestamps, &ValueColumn::I64(vec![1, 2, 3, 4, 5]));
        let decoded: Vec<PointRecord> = decode_all(body).into_iter().map(|r| r.expect("decodes")).collect();
        let record = |timestamps: &[i64], values: &[i64]| PointRecord::Points {
            short_id: 1,
            timestamps: timestamps.to_vec(),
            values: ValueColumn::I64(values.to_vec()),
        };
        assert_eq!(
            decoded,
            vec![record(&[TIMESTAMP_MIN], &[1]), record(&[3, TIMESTAMP_MAX], &[2, 3]), record(&[TIMESTAMP_MIN + 1, -5], &[4, 5])]
        );
    }

    /// A point at `i64::MAX` could be stored but never read back (reads end before it).
    #[test]
    fn timestamps_outside_the_storable_range_are_refused() {
        for (timestamp, storable) in
            [(i64::MIN, false), (i64::MIN + 1, false), (TIMESTAMP_MIN, true), (0, true), (TIMESTAMP_MAX, true), (i64::MAX, false)]
        {
            // Short id 1 holds i64s, short id 4 bytes (see `kind_of`).
            let mut points = Vec::new();
            PointsEncoder::points(&mut points, 1, &[timestamp], &ValueColumn::I64(vec![7]));
            let mut part = Vec::new();
            PointsEncoder::payload_part(&mut part, 4, timestamp, true, b"x");
            for body in [points, part] {
                match decode_all(body).remove(0) {
                    Ok(_) => assert!(storable, "{timestamp} decoded"),
                    Err(DecodeError::Malformed(m)) => assert!(!storable && m.contains("out of range"), "{timestamp}: {m}"),
                    Err(other) => panic!("{timestamp}: {other:?}"),
                }
            }
        }
    }

    proptest! {
        #[test]
        fn records_round_trip(runs in proptest::collection::vec((0u32..20, proptest::collection::vec(TIMESTAMP_MIN..=TIMESTAMP_MAX, 1..20)), 0..8),
                              part in proptest::option::of((TIMESTAMP_MIN..=TIMESTAMP_MAX, any::<bool>(), proptest::collection::vec(any::<u8>(), 0..50)))) {
            let mut body = Vec::new();
            let mut expected = Vec::new();
            for (short_id, seed) in runs {
                let kind = kind_of(short_id).expect("kind");
                let values = column(kind, &seed);
                PointsEncoder::points(&mut body, short_id, &seed, &values);
                // Arbitrary timestamps may jump by more than an i64: a record per stretch.
                let mut start = 0;
                for end in 1..=seed.len() {
                    if end == seed.len() || seed[end].checked_sub(seed[end - 1]).is_none() {
                        let part = seed[start..end].to_vec();
                        expected.push(PointRecord::Points { short_id, values: column(kind, &part), timestamps: part });
                        start = end;
                    }
                }
            }
            if let Some((timestamp, last, bytes)) = part {
                PointsEncoder::payload_part(&mut body, 4, timestamp, last, &bytes);
                expected.push(PointRecord::PayloadPart { short_id: 4, timestamp, last, bytes: Bytes::from(bytes) });
            }
            let mut decoder = PointsDecoder::new(Bytes::from(body));
            let mut decoded = Vec::new();
            while let Some(record) = decoder.next_record(kind_of) {
                decoded.push(record.expect("decodes"));
            }
            prop_assert_eq!(decoded, expected);
        }

        /// Decoding into a sink stores what decoding into columns would return, and a record the
        /// sink refuses ends the body as a malformed one does.
        #[test]
        fn next_into_fills_a_sink_as_next_record_does(runs in proptest::collection::vec((0u32..20, proptest::collection::vec(TIMESTAMP_MIN..=TIMESTAMP_MAX, 1..20)), 0..8),
                                                      cut in any::<proptest::sample::Index>(),
                                                      refused in proptest::option::of(0u32..20)) {
            let mut body = Vec::new();
            for (short_id, seed) in &runs {
                let kind = kind_of(*short_id).expect("kind");
                PointsEncoder::points(&mut body, *short_id, seed, &column(kind, seed));
            }
            // A body cut anywhere: both decoders fail at the same record, having kept the same.
            let body = if body.is_empty() { body } else { body[..cut.index(body.len() + 1)].to_vec() };
            let mut expected = Vec::new();
            let mut failed_expected = false;
            let mut columns = PointsDecoder::new(Bytes::from(body.clone()));
            while let Some(record) = columns.next_record(kind_of) {
                match record {
                    Ok(PointRecord::Points { short_id, .. }) if Some(short_id) == refused => {
                        failed_expected = true;
                        break;
                    }
                    Ok(PointRecord::Points { short_id, timestamps, values }) => expected.push((short_id, timestamps, values)),
                    Ok(other) => prop_assert!(false, "unexpected {:?}", other),
                    Err(_) => failed_expected = true,
                }
            }
            let mut sink = Records { records: Vec::new(), refused };
            let mut direct = PointsDecoder::new(Bytes::from(body));
            let mut failed = false;
            let mut counted = 0;
            while let Some(record) = direct.next_into(&mut sink) {
                match record {
                    Ok(Appended::Points { count, .. }) => counted += count,
                    Ok(other) => prop_assert!(false, "unexpected {:?}", other),
                    Err(_) => failed = true,
                }
            }
            prop_assert_eq!(failed, failed_expected);
            prop_assert_eq!(counted, sink.records.iter().map(|(_, timestamps, _)| timestamps.len()).sum::<usize>());
            prop_assert_eq!(sink.records, expected);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut decoder = PointsDecoder::new(Bytes::from(bytes.clone()));
            let mut n = 0;
            while let Some(_record) = decoder.next_record(kind_of) {
                n += 1;
                prop_assert!(n < 1000);
            }
            let mut sink = Records { records: Vec::new(), refused: None };
            let mut direct = PointsDecoder::new(Bytes::from(bytes));
            let mut n = 0;
            while let Some(_record) = direct.next_into(&mut sink) {
                n += 1;
                prop_assert!(n < 1000);
            }
            for (short_id, timestamps, values) in &sink.records {
                prop_assert!(!timestamps.is_empty());
                prop_assert_eq!(timestamps.len(), values.len());
                prop_assert_eq!(Some(values.kind()), kind_of(*short_id));
            }
        }
    }
}
