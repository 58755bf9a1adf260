//! A transaction: points gathered by series, cut into SEND packets, committed with retries.

use crate::connection::{Conn, TxRoute};
use crate::{take_one, Client, ClientError, SeriesHandle};
use sensordb_engine::{Timestamp, Value, ValueColumn};
use sensordb_server::protocol::frame::{ErrorCode, Frame, TxId, CHECKED_COMPLETE_VERSION};
use sensordb_server::protocol::points::PointsEncoder;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Frames of a pipelined transaction are written in pieces of about this many bytes, so a large
/// transaction is not copied into one buffer whole.
const PIPELINE_WRITE_BYTES: usize = 64 << 10;

/// Timings and counts of a committed transaction.
///
/// With [`ClientOptions::pipeline`](crate::ClientOptions::pipeline) CREATE, the SENDs and
/// CONFIRM go out together: `create` and `confirm` then both count from that first write (so
/// `confirm` includes `create`), and `send` is the time the writes took. With
/// [`ClientOptions::checked_complete`](crate::ClientOptions::checked_complete) COMPLETE_CHECKED
/// goes in that write too, and `complete` also counts from it: the whole commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// CREATE sent → CREATED received (of the successful attempt).
    pub create: Duration,
    /// Writing every SEND frame.
    pub send: Duration,
    /// CONFIRM sent (pipelined: CREATE sent) → CONFIRMED received.
    pub confirm: Duration,
    /// COMPLETE sent → COMPLETED received (the points are durable).
    pub complete: Duration,
    /// The commit took one round trip (COMPLETE_CHECKED with the first write).
    pub checked_complete: bool,
    pub attempts: u32,
    pub points: u64,
    /// Bytes of point records sent (one attempt).
    pub bytes: u64,
    /// The server had completed this id before and stored nothing this time.
    pub duplicate: bool,
}

/// Points of one series in a transaction.
struct Run {
    timestamps: Vec<Timestamp>,
    values: ValueColumn,
}

/// Points to commit together. Nothing is sent before [`Transaction::commit`].
pub struct Transaction {
    client: Client,
    id: TxId,
    runs: BTreeMap<u32, Run>,
    points: u64,
}

impl Transaction {
    pub(crate) fn new(client: Client, id: TxId) -> Self {
        Transaction { client, id, runs: BTreeMap::new(), points: 0 }
    }

    pub fn id(&self) -> TxId {
        self.id
    }

    pub fn len(&self) -> usize {
        self.points as usize
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Adds a point; fails when the value's kind is not the series'.
    pub fn push(&mut self, series: &SeriesHandle, timestamp: Timestamp, value: Value) -> Result<(), ClientError> {
        let run = self
            .runs
            .entry(series.short_id)
            .or_insert_with(|| Run { timestamps: Vec::new(), values: ValueColumn::new(series.kind) });
        run.values.push(value).map_err(|value| ClientError::KindMismatch {
            key: format!("short id {}", series.short_id),
            kind: series.kind,
            attempted: value.kind(),
        })?;
        run.timestamps.push(timestamp);
        self.points += 1;
        Ok(())
    }

    /// Sends the transaction and returns once the server has it durably. Retries (reconnecting,
    /// resending everything under the same id) on lost connections, lost answers, checksum
    /// mismatches and retryable server errors.
    pub async fn commit(self) -> Result<TxStats, ClientError> {
        let options = &self.client.inner.options;
        let attempts = options.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt().await {
                Ok(mut stats) => {
                    stats.attempts = attempt;
                    return Ok(stats);
                }
                Err(error) if error.is_retryable() && attempt < attempts => {
                    tracing::debug!(tx = %self.id, attempt, %error, "retrying transaction");
                    if matches!(error, ClientError::Io(_) | ClientError::ConnectionLost | ClientError::Timeout(_) | ClientError::Frame(_)) {
                        self.client.disconnect().await;
                    }
                    tokio::time::sleep(options.retry_backoff * attempt).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn attempt(&self) -> Result<TxStats, ClientError> {
        let client = &self.client;
        let options = &client.inner.options;
        let conn = client.connection().await?;
        client.define_all(&conn, self.runs.keys().copied()).await?;
        let max_records = options.packet_bytes.min((conn.limits.max_frame_bytes as usize).saturating_sub(16)).max(64);
        let packets = cut_packets(&self.runs, max_records);
        let mut route = conn.route_tx(self.id);
        let timeout = options.reply_timeout;
        let mut stats = TxStats { points: self.points, ..TxStats::default() };

        // The SEND frames, and the CRC32C of their records as the client sent them.
        let mut crc = 0u32;
        let mut corrupt = take_one(&client.inner.corrupt_next_sends);
        let mut sends = Vec::with_capacity(packets.len());
        for packet in packets {
            crc = crc32c::crc32c_append(crc, &packet);
            stats.bytes += packet.len() as u64;
            let mut records = packet;
            if corrupt {
                if let Some(last) = records.last_mut() {
                    *last ^= 0x01;
                }
                corrupt = false;
            }
            sends.push(Frame::Send { tx: self.id, records: records.into() });
        }

        if options.pipeline && options.checked_complete && conn.limits.version >= CHECKED_COMPLETE_VERSION {
            return self.attempt_checked(client, &conn, route, sends, crc, stats).await;
        }
        if options.pipeline {
            // CREATE, SENDs and CONFIRM without waiting in between: the server handles a
            // connection's frames in order, and nothing is stored before COMPLETE, which is
            // only sent below, once CONFIRMED's checksum matched.
            let started = Instant::now();
            self.write_pipelined(&conn, &sends, stats.bytes, None).await?;
            stats.send = started.elapsed();
            let answers = async {
                expect_created(&mut route, timeout).await?;
                stats.create = started.elapsed();
                expect_confirmed(&mut route, timeout, crc, stats.bytes, self.points).await
            };
            if let Err(error) = answers.await {
                // After a CONFIRMED every pipelined frame is answered. After an ERROR, answers
                // to the frames behind the failed one (ERRORs naming this id) may still come,
                // and a later attempt under this id could take one for its own: close the
                // connection (the next commit opens a new one).
                if !matches!(error, ClientError::ChecksumMismatch { .. }) {
                    close(client, &conn).await;
                }
                return self.cancel_on_mismatch(client, &conn, &mut route, timeout, error).await;
            }
            stats.confirm = started.elapsed();
        } else {
            let started = Instant::now();
            conn.write(&Frame::Create { tx: self.id }.to_bytes()).await?;
            expect_created(&mut route, timeout).await?;
            stats.create = started.elapsed();

            let started = Instant::now();
            for frame in &sends {
                conn.write(&frame.to_bytes()).await?;
            }
            stats.send = started.elapsed();

            let started = Instant::now();
            conn.write(&Frame::Confirm { tx: self.id }.to_bytes()).await?;
            if let Err(error) = expect_confirmed(&mut route, timeout, crc, stats.bytes, self.points).await {
                return self.cancel_on_mismatch(client, &conn, &mut route, timeout, error).await;
            }
            stats.confirm = started.elapsed();
        }

        let started = Instant::now();
        conn.write(&Frame::Complete { tx: self.id }.to_bytes()).await?;
        if take_one(&client.inner.drop_before_complete_reply) {
            drop(route);
            close(client, &conn).await;
            return Err(ClientError::ConnectionLost);
        }
        match expect(&mut route, timeout, "COMPLETED").await? {
            Frame::Completed { duplicate, .. } => stats.duplicate = duplicate,
            other => return Err(unexpected(other)),
        }
        stats.complete = started.elapsed();
        Ok(stats)
    }

    /// Writes CREATE, the SENDs, CONFIRM and then `last` (if any) without waiting for answers,
    /// in writes of about [`PIPELINE_WRITE_BYTES`] (one write for a small transaction).
    async fn write_pipelined(&self, conn: &Conn, sends: &[Frame], bytes: u64, last: Option<Frame>) -> Result<(), ClientError> {
        let mut out = Vec::with_capacity(PIPELINE_WRITE_BYTES.min(bytes as usize + 64 * (sends.len() + 3)));
        Frame::Create { tx: self.id }.encode(&mut out);
        for frame in sends {
            frame.encode(&mut out);
            if out.len() >= PIPELINE_WRITE_BYTES {
                conn.write(&out).await?;
                out.clear();
            }
        }
        Frame::Confirm { tx: self.id }.encode(&mut out);
        if let Some(frame) = last {
            frame.encode(&mut out);
        }
        conn.write(&out).await
    }

    /// One round trip: CREATE, the SENDs, CONFIRM and COMPLETE_CHECKED in one write. The server
    /// compares its checksum, bytes and points with the client's before storing anything, so a
    /// mismatch stores nothing (it answers CONFIRMED, then ERROR CHECKSUM_MISMATCH, and has rolled
    /// the transaction back) exactly as a CANCEL after CONFIRMED would.
    async fn attempt_checked(
        &self,
        client: &Client,
        conn: &Conn,
        mut route: TxRoute,
        sends: Vec<Frame>,
        crc: u32,
        mut stats: TxStats,
    ) -> Result<TxStats, ClientError> {
        let timeout = client.inner.options.reply_timeout;
        stats.checked_complete = true;
        let started = Instant::now();
        let complete = Frame::CompleteChecked { tx: self.id, crc, bytes: stats.bytes, points: self.points };
        self.write_pipelined(conn, &sends, stats.bytes, Some(complete)).await?;
        stats.send = started.elapsed();
        if take_one(&client.inner.drop_before_complete_reply) {
            drop(route);
            close(client, conn).await;
            return Err(ClientError::ConnectionLost);
        }
        // The three answers come together (the server sends CREATED and CONFIRMED with
        // COMPLETED), so one timer bounds them all: a timer per answer cost the client more
        // CPU than reading them.
        let answers = async {
            match next_answer(&mut route).await? {
                Frame::Created { .. } => stats.create = started.elapsed(),
                other => return Err(unexpected(other)),
            }
            compare_confirmed(next_answer(&mut route).await?, crc, stats.bytes, self.points)?;
            stats.confirm = started.elapsed();
            match next_answer(&mut route).await? {
                Frame::Completed { duplicate, .. } => Ok(duplicate),
                other => Err(unexpected(other)),
            }
        };
        let answered = tokio::time::timeout(timeout, answers).await.unwrap_or(Err(ClientError::Timeout("COMPLETED")));
        match answered {
            Ok(duplicate) => {
                stats.duplicate = duplicate;
                stats.complete = started.elapsed();
                Ok(stats)
            }
            Err(error @ ClientError::ChecksumMismatch { .. }) => {
                // The server saw the same difference and refuses COMPLETE_CHECKED: wait for that
                // ERROR so no answer of this attempt is left for a retry under the same id.
                match expect(&mut route, timeout, "ERROR").await {
                    Ok(Frame::Error { code: ErrorCode::ChecksumMismatch, .. }) => {}
                    _ => close(client, conn).await,
                }
                Err(error)
            }
            Err(error) => {
                // Answers to the frames behind the failed one (ERRORs naming this id) may still
                // come, and a later attempt under this id could take one for its own: close the
                // connection (the next commit opens a new one).
                close(client, conn).await;
                Err(error)
            }
        }
    }

    /// Returns `error`; when it is a checksum mismatch, first cancels the transaction (and
    /// closes the connection when the CANCEL is not answered, so the transaction cannot stay
    /// open under an id the retry uses again).
    async fn cancel_on_mismatch(&self, client: &Client, conn: &Conn, route: &mut TxRoute, timeout: Duration, error: ClientError) -> Result<TxStats, ClientError> {
        if let ClientError::ChecksumMismatch { .. } = error {
            let cancelled = match conn.write(&Frame::Cancel { tx: self.id }.to_bytes()).await {
                Ok(()) => matches!(expect(route, timeout, "CANCELLED").await, Ok(Frame::Cancelled { .. })),
                Err(_) => false,
            };
            if !cancelled {
                close(client, conn).await;
            }
        }
        Err(error)
    }
}

async fn expect_created(route: &mut TxRoute, timeout: Duration) -> Result<(), ClientError> {
    match expect(route, timeout, "CREATED").await? {
        Frame::Created { .. } => Ok(()),
        other => Err(unexpected(other)),
    }
}

/// Waits for CONFIRMED and compares the server's checksum, bytes and points with the client's.
async fn expect_confirmed(route: &mut TxRoute, timeout: Duration, crc: u32, bytes: u64, points: u64) -> Result<(), ClientError> {
    compare_confirmed(expect(route, timeout, "CONFIRMED").await?, crc, bytes, points)
}

/// Checks that `answer` is CONFIRMED with the client's checksum, bytes and points.
fn compare_confirmed(answer: Frame, crc: u32, bytes: u64, points: u64) -> Result<(), ClientError> {
    match answer {
        Frame::Confirmed { crc: server, bytes: server_bytes, points: server_points, .. } => {
            if server != crc || server_bytes != bytes || server_points != points {
                return Err(ClientError::ChecksumMismatch { server, client: crc });
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}

/// The next answer for the transaction, without a timer of its own (the caller bounds it).
async fn next_answer(route: &mut TxRoute) -> Result<Frame, ClientError> {
    route.recv().await.ok_or(ClientError::ConnectionLost)
}

/// The records cut into SEND bodies of at most `max` bytes (a value too large for one body is
/// split into payload parts).
fn cut_packets(runs: &BTreeMap<u32, Run>, max: usize) -> Vec<Vec<u8>> {
    {
        let mut packets = Vec::new();
        let mut current = Vec::new();
        let flush = |current: &mut Vec<u8>, packets: &mut Vec<Vec<u8>>| {
            if !current.is_empty() {
                packets.push(std::mem::take(current));
            }
        };
        for (&short_id, run) in runs {
            match &run.values {
                ValueColumn::Bytes(values) => {
                    for (i, value) in values.iter().enumerate() {
                        let timestamp = run.timestamps[i];
                        if value.len() + 32 <= max {
                            if current.len() + value.len() + 32 > max {
                                flush(&mut current, &mut packets);
                            }
                            PointsEncoder::points(&mut current, short_id, &[timestamp], &ValueColumn::Bytes(vec![value.clone()]));
                        } else {
                            let part = max - 32;
                            let mut offset = 0;
                            while offset < value.len() {
                                flush(&mut current, &mut packets);
                                let end = (offset + part).min(value.len());
                                PointsEncoder::payload_part(&mut current, short_id, timestamp, end == value.len(), &value[offset..end]);
                                offset = end;
                            }
                        }
                    }
                }
                values => {
                    // At most 10 bytes of timestamp and 10 of value per point.
                    let per_chunk = ((max - 32) / 20).max(1);
                    let mut start = 0;
                    while start < run.timestamps.len() {
                        let end = (start + per_chunk).min(run.timestamps.len());
                        if current.len() + (end - start) * 20 + 32 > max {
                            flush(&mut current, &mut packets);
                        }
                        PointsEncoder::points(&mut current, short_id, &run.timestamps[start..end], &values.slice(start..end));
                        start = end;
                    }
                }
            }
        }
        flush(&mut current, &mut packets);
        packets
    }
}

async fn close(client: &Client, conn: &Conn) {
    conn.close().await;
    client.disconnect().await;
}

fn unexpected(frame: Frame) -> ClientError {
    match frame {
        Frame::Error { code, message, .. } => ClientError::Server { code, message },
        other => ClientError::Protocol(format!("unexpected answer {:?}", other.frame_type())),
    }
}

async fn expect(route: &mut TxRoute, timeout: Duration, what: &'static str) -> Result<Frame, ClientError> {
    match tokio::time::timeout(timeout, route.recv()).await {
        Ok(Some(frame)) => Ok(frame),
        Ok(None) => Err(ClientError::ConnectionLost),
        Err(_) => Err(ClientError::Timeout(what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sensordb_engine::ValueKind;
    use sensordb_server::protocol::points::{PointRecord, PointsDecoder};

    #[test]
    fn packets_respect_the_size_and_carry_every_point() {
        let mut runs = BTreeMap::new();
        runs.insert(1, Run { timestamps: (0..1000).collect(), values: ValueColumn::F64((0..1000).map(f64::from).collect()) });
        let big = Bytes::from(vec![7u8; 5000]);
        runs.insert(2, Run { timestamps: vec![5, 6], values: ValueColumn::Bytes(vec![Bytes::from_static(b"small"), big.clone()]) });
        let packets = cut_packets(&runs, 1024);
        assert!(packets.len() > 10);
        let kind_of = |id: u32| Some(if id == 1 { ValueKind::F64 } else { ValueKind::Bytes });
        let (mut floats, mut payloads, mut assembled) = (0, Vec::new(), Vec::new());
        for packet in packets {
            assert!(packet.len() <= 1024, "packet of {} bytes", packet.len());
            let mut decoder = PointsDecoder::new(Bytes::from(packet));
            while let Some(record) = decoder.next_record(kind_of) {
                match record.expect("decodes") {
                    PointRecord::Points { short_id: 1, timestamps, .. } => floats += timestamps.len(),
                    PointRecord::Points { values: ValueColumn::Bytes(v), .. } => payloads.extend(v),
                    PointRecord::PayloadPart { bytes, last, .. } => {
                        assembled.extend_from_slice(&bytes);
                        if last {
                            payloads.push(Bytes::from(std::mem::take(&mut assembled)));
                        }
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert_eq!(floats, 1000);
        assert_eq!(payloads, vec![Bytes::from_static(b"small"), big]);
    }
}
