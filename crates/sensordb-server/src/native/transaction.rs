//! An open transaction: the points received so far (decoded into a write batch, nothing reaches
//! the engine before COMPLETE), the running CRC32C of the SEND records, and the byte permits
//! that keep its memory accounted until the batch is durable or dropped.

use super::batch_sink::BatchSink;
use bytes::{Bytes, BytesMut};
use sensordb_engine::{SeriesId, Timestamp, Value, ValueKind, WriteBatch};
use sensordb_protocol::frame::ErrorCode;
use sensordb_protocol::points::{Appended, DecodeError, PointsDecoder};
use std::collections::HashMap;
use std::time::Instant;

/// Byte permits held for received data, released (and the gauge lowered by `bytes`) when
/// dropped: the shared pool's (or the handshake pool's, with `bytes` 0) and the connection's own.
pub struct HeldBytes {
    pub(crate) _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    pub(crate) _connection_permit: Option<tokio::sync::OwnedSemaphorePermit>,
    pub(crate) bytes: usize,
    pub(crate) state: std::sync::Arc<crate::state::ServerState>,
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.state.metrics.in_flight_bytes.fetch_sub(self.bytes as i64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A payload value being assembled from PAYLOAD_PART records.
struct Partial {
    short_id: u32,
    series: SeriesId,
    timestamp: Timestamp,
    bytes: BytesMut,
}

pub struct OpenTransaction {
    pub batch: WriteBatch,
    pub crc: u32,
    pub bytes: u64,
    pub points: u64,
    pub confirmed: bool,
    pub last_activity: Instant,
    pub held: Vec<HeldBytes>,
    partial: Option<Partial>,
}

/// Why a SEND was refused; the transaction is rolled back.
#[derive(Debug)]
pub struct SendError {
    pub code: ErrorCode,
    pub message: String,
}

impl OpenTransaction {
    pub fn new() -> Self {
        OpenTransaction {
            batch: WriteBatch::new(),
            crc: 0,
            bytes: 0,
            points: 0,
            confirmed: false,
            last_activity: Instant::now(),
            held: Vec::new(),
            partial: None,
        }
    }

    /// Adds the records of one SEND. `series` maps the connection's short ids.
    pub fn add(&mut self, records: Bytes, series: &HashMap<u32, (SeriesId, ValueKind)>) -> Result<(), SendError> {
        self.crc = crc32c::crc32c_append(self.crc, &records);
        self.bytes += records.len() as u64;
        let mut decoder = PointsDecoder::new(records);
        let resolve = |short: u32| series.get(&short).copied();
        let malformed = |message: String| SendError { code: ErrorCode::Malformed, message };
        // POINTS records are decoded straight into the batch: no columns per record.
        while let Some(record) = decoder.next_into(&mut BatchSink::new(resolve, &mut self.batch)) {
            let record = record.map_err(|e| SendError {
                code: match e {
                    DecodeError::UnknownSeries(_) => ErrorCode::UnknownSeries,
                    DecodeError::KindMismatch { .. } => ErrorCode::KindMismatch,
                    DecodeError::Malformed(_) => ErrorCode::Malformed,
                },
                message: e.to_string(),
            })?;
            match record {
                Appended::Points { count, .. } => {
                    // Appended already; the error rolls the whole transaction back.
                    if self.partial.is_some() {
                        return Err(malformed("a POINTS record inside an unfinished payload".into()));
                    }
                    self.points += count as u64;
                }
                Appended::PayloadPart { short_id, timestamp, last, bytes } => {
                    let Some(&(id, _)) = series.get(&short_id) else {
                        return Err(SendError {
                            code: ErrorCode::UnknownSeries,
                            message: format!("short series id {short_id} is not defined"),
                        });
                    };
                    if last && self.partial.is_none() {
                        // A value in one part: its bytes as received (a slice of the SEND frame),
                        // not a copy; the block encoder copies them once, into aligned memory.
                        self.batch.push(id, timestamp, Value::Bytes(bytes)).map_err(|e| malformed(e.to_string()))?;
                        self.points += 1;
                        continue;
                    }
                    let partial = self.partial.get_or_insert_with(|| Partial { short_id, series: id, timestamp, bytes: BytesMut::new() });
                    if partial.short_id != short_id || partial.timestamp != timestamp {
                        return Err(malformed("payload parts of two values interleaved".into()));
                    }
                    partial.bytes.extend_from_slice(&bytes);
                    if last {
                        let done = self.partial.take().map(|p| (p.series, p.timestamp, p.bytes.freeze()));
                        if let Some((id, ts, bytes)) = done {
                            self.batch.push(id, ts, Value::Bytes(bytes)).map_err(|e| malformed(e.to_string()))?;
                            self.points += 1;
                        }
                    }
                }
            }
        }
        self.last_activity = Instant::now();
        Ok(())
    }

    /// True while a payload value is incomplete.
    pub fn has_partial(&self) -> bool {
        self.partial.is_some()
    }
}

impl Default for OpenTransaction {
    fn default() -> Self {
        Self::new()
    }
}
