//! Point records: the compact binary body of SEND frames (after the transaction id).
//!
//! A SEND body holds any number of records back to back; varints are unsigned LEB128, signed
//! values zigzag-encoded first (the engine's WAL batch encoding, `sensordb_engine::batch`):
//! ```text
//! POINTS (u8 1):  varint short series id, varint count N (≥ 1),
//!                 N timestamps: zigzag varint of the first, then zigzag varint deltas,
//!                 N values by the series' kind: f64 8 bytes LE | i64 zigzag varint |
//!                 u64 varint | bool 1 byte 0/1 | bytes varint length + bytes
//! PAYLOAD_PART (u8 2): varint short series id (a bytes series), zigzag varint timestamp,
//!                 u8 last (0 more parts follow, 1 this part ends the value),
//!                 varint length, the bytes
//! ```
//! A PAYLOAD_PART lets one large byte value span SEND frames: the parts of one value are
//! consecutive records of the same transaction (no other record in between) and concatenate to
//! the value. The series kind comes from the connection's DEFINE_SERIES.

use bytes::Bytes;
use sensordb_engine::checksum::{get_varint, put_varint, unzigzag, zigzag};
use sensordb_engine::{Timestamp, ValueColumn, ValueKind};

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
    /// Appends a POINTS record. `timestamps` and `values` have the same, nonzero length.
    pub fn points(out: &mut Vec<u8>, short_id: u32, timestamps: &[Timestamp], values: &ValueColumn) {
        debug_assert_eq!(timestamps.len(), values.len());
        out.push(RECORD_POINTS);
        put_varint(out, u64::from(short_id));
        put_varint(out, timestamps.len() as u64);
        let mut previous = 0i64;
        for &t in timestamps {
            put_varint(out, zigzag(t.wrapping_sub(previous)));
            previous = t;
        }
        match values {
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

    fn decode_one(&mut self, kind_of: impl Fn(u32) -> Option<ValueKind>) -> Result<PointRecord, DecodeError> {
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
                let mut timestamps = Vec::with_capacity(count);
                let mut previous = 0i64;
                for _ in 0..count {
                    previous = previous.wrapping_add(unzigzag(varint(position)?));
                    timestamps.push(previous);
                }
                let values = match kind {
                    ValueKind::F64 => {
                        let end = position.checked_add(count * 8).ok_or_else(|| malformed("truncated f64 values"))?;
                        let bytes = body.get(*position..end).ok_or_else(|| malformed("truncated f64 values"))?;
                        *position = end;
                        ValueColumn::F64(
                            bytes
                                .chunks_exact(8)
                                .map(|c| {
                                    let mut a = [0u8; 8];
                                    a.copy_from_slice(c);
                                    f64::from_bits(u64::from_le_bytes(a))
                                })
                                .collect(),
                        )
                    }
                    ValueKind::I64 => ValueColumn::I64((0..count).map(|_| varint(position).map(unzigzag)).collect::<Result<_, _>>()?),
                    ValueKind::U64 => ValueColumn::U64((0..count).map(|_| varint(position)).collect::<Result<_, _>>()?),
                    ValueKind::Bool => {
                        let bytes = body.get(*position..*position + count).ok_or_else(|| malformed("truncated bool values"))?;
                        *position += count;
                        ValueColumn::Bool(bytes.iter().map(|&b| b != 0).collect())
                    }
                    ValueKind::Bytes => {
                        let mut values = Vec::with_capacity(count);
                        for _ in 0..count {
                            let len = varint(position)? as usize;
                            let end = position.checked_add(len).ok_or_else(|| malformed("truncated payload"))?;
                            if end > body.len() {
                                return Err(malformed("truncated payload"));
                            }
                            // A copy, not a slice: the body is a slice of the connection's read
                            // buffer, which a value kept in the memtable until the next flush would
                            // otherwise keep alive whole, beyond the memtable's accounting.
                            values.push(Bytes::copy_from_slice(&body[*position..end]));
                            *position = end;
                        }
                        ValueColumn::Bytes(values)
                    }
                };
                Ok(PointRecord::Points { short_id, timestamps, values })
            }
            RECORD_PAYLOAD_PART => {
                if kind != ValueKind::Bytes {
                    return Err(DecodeError::KindMismatch { short_id, kind });
                }
                let timestamp = unzigzag(varint(position)?);
                let last = *body.get(*position).ok_or_else(|| malformed("truncated payload part"))?;
                *position += 1;
                let len = varint(position)? as usize;
                let end = position.checked_add(len).ok_or_else(|| malformed("truncated payload part"))?;
                if end > body.len() || last > 1 {
                    return Err(malformed("bad payload part"));
                }
                let bytes = self.body.slice(*position..end);
                *position = end;
                Ok(PointRecord::PayloadPart { short_id, timestamp, last: last == 1, bytes })
            }
            other => Err(DecodeError::Malformed(format!("unknown record type {other}"))),
        }
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

    proptest! {
        #[test]
        fn records_round_trip(runs in proptest::collection::vec((0u32..20, proptest::collection::vec(any::<i64>(), 1..20)), 0..8),
                              part in proptest::option::of((any::<i64>(), any::<bool>(), proptest::collection::vec(any::<u8>(), 0..50)))) {
            let mut body = Vec::new();
            let mut expected = Vec::new();
            for (short_id, seed) in runs {
                let kind = kind_of(short_id).expect("kind");
                let values = column(kind, &seed);
                PointsEncoder::points(&mut body, short_id, &seed, &values);
                expected.push(PointRecord::Points { short_id, timestamps: seed, values });
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

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut decoder = PointsDecoder::new(Bytes::from(bytes));
            let mut n = 0;
            while let Some(_record) = decoder.next_record(kind_of) {
                n += 1;
                prop_assert!(n < 1000);
            }
        }
    }
}
