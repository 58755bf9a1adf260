//! A transaction: points gathered by series, cut into SEND packets, committed with retries.

use crate::connection::{Conn, TxRoute};
use crate::{take_one, Client, ClientError, SeriesHandle};
use sensordb_model::{Timestamp, Value, ValueColumn};
use sensordb_protocol::frame::{ErrorCode, Frame, FrameType, TxId, CHECKED_COMPLETE_VERSION, FIRST_ATTEMPT_VERSION, HEADER_LEN};
use sensordb_protocol::points::PointsEncoder;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Frames of a pipelined transaction are written in pieces of about this many bytes (at frame
/// boundaries), so a large transaction does not hold the connection's writer for all of it.
pub(crate) const PIPELINE_WRITE_BYTES: usize = 64 << 10;

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
    /// Bytes of the bytes values pushed (for the size of the encoding).
    payload_bytes: usize,
    /// The id was made for this transaction ([`Client::transaction`]), so before its first
    /// COMPLETE no node can have completed it: the first attempt may say so (COMPLETE_FIRST).
    /// False for an id chosen by the caller, who may be retrying an earlier process's.
    fresh_id: bool,
}

impl Transaction {
    pub(crate) fn new(client: Client, id: TxId, fresh_id: bool) -> Self {
        Transaction { client, id, runs: BTreeMap::new(), points: 0, payload_bytes: 0, fresh_id }
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

    /// Makes room for `additional` more points of `series`, so that pushing a number of points
    /// known beforehand does not grow the transaction's buffers again and again.
    pub fn reserve(&mut self, series: &SeriesHandle, additional: usize) {
        let run = self.run(series);
        run.timestamps.reserve(additional);
        match &mut run.values {
            ValueColumn::F64(values) => values.reserve(additional),
            ValueColumn::I64(values) => values.reserve(additional),
            ValueColumn::U64(values) => values.reserve(additional),
            ValueColumn::Bool(values) => values.reserve(additional),
            ValueColumn::Bytes(values) => values.reserve(additional),
        }
    }

    fn run(&mut self, series: &SeriesHandle) -> &mut Run {
        self.runs.entry(series.short_id).or_insert_with(|| Run { timestamps: Vec::new(), values: ValueColumn::new(series.kind) })
    }

    /// Adds a point; fails when the value's kind is not the series'.
    pub fn push(&mut self, series: &SeriesHandle, timestamp: Timestamp, value: Value) -> Result<(), ClientError> {
        let run = self.run(series);
        let payload = if let Value::Bytes(bytes) = &value { bytes.len() } else { 0 };
        run.values.push(value).map_err(|value| ClientError::KindMismatch {
            key: format!("short id {}", series.short_id),
            kind: series.kind,
            attempted: value.kind(),
        })?;
        run.timestamps.push(timestamp);
        self.points += 1;
        self.payload_bytes += payload;
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
            // Only the first attempt of a fresh id: any later one may follow a COMPLETE that
            // reached a node whose answer was lost.
            match self.attempt(attempt == 1 && self.fresh_id).await {
                Ok(mut stats) => {
                    stats.attempts = attempt;
                    return Ok(stats);
                }
                Err(error) if error.is_retryable() && attempt < attempts => {
                    tracing::debug!(tx = %self.id, attempt, %error, "retrying transaction");
                    if matches!(error, ClientError::Io(_) | ClientError::ConnectionLost | ClientError::Timeout(_) | ClientError::Frame(_)) {
                        self.client.disconnect().await;
                        // The node may be gone: the retry (same id) goes to the next one.
                        self.client.fail_over();
                    }
                    tokio::time::sleep(options.retry_backoff * attempt).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn attempt(&self, first_attempt: bool) -> Result<TxStats, ClientError> {
        let client = &self.client;
        let options = &client.inner.options;
        let conn = client.connection().await?;
        client.define_all(&conn, self.runs.keys().copied()).await?;
        let max_records = options.packet_bytes.min((conn.limits.max_frame_bytes as usize).saturating_sub(16)).max(64);
        let mut route = conn.route_tx(self.id);
        let timeout = options.reply_timeout;
        let mut stats = TxStats { points: self.points, ..TxStats::default() };
        let corrupt = take_one(&client.inner.corrupt_next_sends);
        let mut out = FrameBuffer::take();
        out.reserve(self.encoded_estimate(max_records));

        if options.pipeline {
            // CREATE, the SENDs, CONFIRM (and COMPLETE_CHECKED) in one buffer, written together.
            Frame::Create { tx: self.id }.encode(&mut out);
            let (crc, bytes) = encode_sends(&mut out, self.id, &self.runs, max_records, corrupt);
            stats.bytes = bytes;
            Frame::Confirm { tx: self.id }.encode(&mut out);
            if options.checked_complete && conn.limits.version >= CHECKED_COMPLETE_VERSION {
                let (tx, bytes, points) = (self.id, stats.bytes, self.points);
                if first_attempt && conn.limits.version >= FIRST_ATTEMPT_VERSION {
                    Frame::CompleteFirst { tx, crc, bytes, points }.encode(&mut out);
                } else {
                    Frame::CompleteChecked { tx, crc, bytes, points }.encode(&mut out);
                }
                return self.attempt_checked(client, &conn, route, out, crc, stats).await;
            }
            // CREATE, SENDs and CONFIRM without waiting in between: the server handles a
            // connection's frames in order, and nothing is stored before COMPLETE, which is
            // only sent below, once CONFIRMED's checksum matched.
            let started = Instant::now();
            write_pipelined(&conn, &out).await?;
            stats.send = started.elapsed();
            drop(out);
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
            let (crc, bytes) = encode_sends(&mut out, self.id, &self.runs, max_records, corrupt);
            stats.bytes = bytes;
            let started = Instant::now();
            conn.write(&Frame::Create { tx: self.id }.to_bytes()).await?;
            expect_created(&mut route, timeout).await?;
            stats.create = started.elapsed();

            let started = Instant::now();
            let mut rest = &out[..];
            while !rest.is_empty() {
                let (frame, after) = rest.split_at(frame_len(rest));
                conn.write(frame).await?;
                rest = after;
            }
            stats.send = started.elapsed();
            drop(out);

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

    /// About the bytes of this transaction's frames (a capacity hint).
    fn encoded_estimate(&self, max_records: usize) -> usize {
        let packets = (self.points as usize * 20 + self.payload_bytes) / max_records + self.runs.len() + 1;
        4 * 64 + self.points as usize * 20 + self.payload_bytes + packets * 64
    }

    /// One round trip: CREATE, the SENDs, CONFIRM and COMPLETE_CHECKED (encoded in `frames`),
    /// written together. The server compares its checksum, bytes and points with the client's before
    /// storing anything, so a mismatch stores nothing (it answers CONFIRMED, then ERROR
    /// CHECKSUM_MISMATCH, and has rolled the transaction back) exactly as a CANCEL after
    /// CONFIRMED would.
    async fn attempt_checked(
        &self,
        client: &Client,
        conn: &Conn,
        mut route: TxRoute,
        frames: FrameBuffer,
        crc: u32,
        mut stats: TxStats,
    ) -> Result<TxStats, ClientError> {
        let timeout = client.inner.options.reply_timeout;
        stats.checked_complete = true;
        let started = Instant::now();
        write_pipelined(conn, &frames).await?;
        stats.send = started.elapsed();
        drop(frames);
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
    async fn cancel_on_mismatch(
        &self,
        client: &Client,
        conn: &Conn,
        route: &mut TxRoute,
        timeout: Duration,
        error: ClientError,
    ) -> Result<TxStats, ClientError> {
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

/// Appends the SEND frames of `runs`: the records cut into bodies of at most `max` bytes (a
/// value too large for one body is split into payload parts), encoded in place. Returns the
/// CRC32C and the length of the records as the client sent them; with `corrupt` the last
/// byte of the first SEND's records is flipped after that checksum was taken (the frame's own
/// checksum covers the flipped byte, as corruption above the frame checksum would).
fn encode_sends(out: &mut Vec<u8>, tx: TxId, runs: &BTreeMap<u32, Run>, max: usize, corrupt: bool) -> (u32, u64) {
    let mut sends = SendWriter { out, tx, open: None, crc: 0, bytes: 0, corrupt };
    // Chunks of a run's values for POINTS records, reused.
    let mut chunk: Option<ValueColumn> = None;
    for (&short_id, run) in runs {
        match &run.values {
            ValueColumn::Bytes(values) => {
                for (i, value) in values.iter().enumerate() {
                    let timestamp = run.timestamps[i];
                    if value.len() + 32 <= max {
                        if sends.records_len() + value.len() + 32 > max {
                            sends.flush();
                        }
                        let one = chunk_of(&mut chunk, &run.values, i..i + 1);
                        PointsEncoder::points(sends.records(), short_id, &[timestamp], one);
                    } else {
                        let part = max - 32;
                        let mut offset = 0;
                        while offset < value.len() {
                            sends.flush();
                            let end = (offset + part).min(value.len());
                            PointsEncoder::payload_part(sends.records(), short_id, timestamp, end == value.len(), &value[offset..end]);
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
                    if sends.records_len() + (end - start) * 20 + 32 > max {
                        sends.flush();
                    }
                    let part = if start == 0 && end == values.len() { values } else { chunk_of(&mut chunk, values, start..end) };
                    PointsEncoder::points(sends.records(), short_id, &run.timestamps[start..end], part);
                    start = end;
                }
            }
        }
    }
    sends.flush();
    (sends.crc, sends.bytes)
}

thread_local! {
    /// A buffer for the frames of a commit, kept between the commits of a thread.
    static SPARE_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A buffer to encode a commit's frames into: taken from the thread's spare one (or new when a
/// commit waiting for its write has that), given back to the thread it is dropped on, so a
/// commit allocates nothing for its frames once a thread's buffer is large enough.
struct FrameBuffer(Vec<u8>);

impl FrameBuffer {
    /// Buffers larger than this are not kept.
    const KEEP_BYTES: usize = 2 * PIPELINE_WRITE_BYTES;

    fn take() -> FrameBuffer {
        FrameBuffer(SPARE_BUFFER.try_with(|spare| spare.take()).unwrap_or_default())
    }
}

impl Drop for FrameBuffer {
    fn drop(&mut self) {
        let mut buffer = std::mem::take(&mut self.0);
        if buffer.capacity() == 0 || buffer.capacity() > Self::KEEP_BYTES {
            return;
        }
        buffer.clear();
        let _ = SPARE_BUFFER.try_with(|spare| {
            let kept = spare.take();
            spare.set(if kept.capacity() >= buffer.capacity() { kept } else { buffer });
        });
    }
}

impl std::ops::Deref for FrameBuffer {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for FrameBuffer {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

/// Writes encoded frames (a pipelined transaction's) in writes of about
/// [`PIPELINE_WRITE_BYTES`], each ending at a frame boundary (one write for a small transaction).
async fn write_pipelined(conn: &Conn, frames: &[u8]) -> Result<(), ClientError> {
    let mut rest = frames;
    while rest.len() > PIPELINE_WRITE_BYTES {
        let mut end = 0;
        while end < PIPELINE_WRITE_BYTES {
            end += frame_len(&rest[end..]);
        }
        let (piece, after) = rest.split_at(end);
        conn.write(piece).await?;
        rest = after;
    }
    conn.write(rest).await
}

/// The length of the encoded frame at the front of `frames` (header included).
fn frame_len(frames: &[u8]) -> usize {
    HEADER_LEN + u32::from_le_bytes([frames[0], frames[1], frames[2], frames[3]]) as usize
}

/// Fills the header of the frame encoded from `start` to the end of `out` as `Frame::encode`
/// does: body length, type, zero flags and reserved bits, CRC32C of header bytes 0..8 and body.
fn finish_frame(out: &mut [u8], start: usize, frame_type: FrameType) {
    let len = (out.len() - start - HEADER_LEN) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4] = frame_type as u8;
    out[start + 5..start + 8].fill(0);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..start + 8]), &out[start + HEADER_LEN..]);
    out[start + 8..start + HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// Appends SEND frames to a buffer, their records written in place.
struct SendWriter<'a> {
    out: &'a mut Vec<u8>,
    tx: TxId,
    /// Where the open SEND frame begins, if one is open.
    open: Option<usize>,
    /// CRC32C and length of the records of the finished frames, before any corruption.
    crc: u32,
    bytes: u64,
    /// Test hook: flip the last record byte of the first frame.
    corrupt: bool,
}

impl SendWriter<'_> {
    /// Header and transaction id before a SEND's records.
    const RECORDS_AT: usize = HEADER_LEN + 16;

    /// Record bytes in the open frame.
    fn records_len(&self) -> usize {
        self.open.map_or(0, |start| self.out.len() - start - Self::RECORDS_AT)
    }

    /// The buffer to append records to, a frame opened for them if none is.
    fn records(&mut self) -> &mut Vec<u8> {
        if self.open.is_none() {
            self.open = Some(self.out.len());
            self.out.extend_from_slice(&[0u8; HEADER_LEN]);
            self.out.extend_from_slice(&self.tx.0);
        }
        self.out
    }

    /// Finishes the open frame, if any.
    fn flush(&mut self) {
        let Some(start) = self.open.take() else { return };
        let records = start + Self::RECORDS_AT;
        self.crc = crc32c::crc32c_append(self.crc, &self.out[records..]);
        self.bytes += (self.out.len() - records) as u64;
        if std::mem::take(&mut self.corrupt) && self.out.len() > records {
            if let Some(last) = self.out.last_mut() {
                *last ^= 0x01;
            }
        }
        finish_frame(self.out, start, FrameType::Send);
    }
}

/// `values[range]` in `chunk` (reused between calls; replaced when its kind differs).
fn chunk_of<'a>(chunk: &'a mut Option<ValueColumn>, values: &ValueColumn, range: std::ops::Range<usize>) -> &'a ValueColumn {
    if chunk.as_ref().is_some_and(|column| column.kind() != values.kind()) {
        *chunk = None;
    }
    let chunk = chunk.get_or_insert_with(|| ValueColumn::new(values.kind()));
    chunk.clear();
    let same_kind = chunk.extend_from_range(values, range);
    debug_assert!(same_kind, "a chunk of another kind was replaced above");
    chunk
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
mod tests;
