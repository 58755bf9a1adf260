//! The socket side of a native connection: the reader task that cuts frames from the byte
//! stream (taking byte permits before each body), the writer task that coalesces answers into
//! writes, and the drain of a closing connection. What they exchange with the state machine
//! is [`Incoming`] frames and outgoing [`Frame`]s, whether the handshake succeeded
//! (`authenticated`) and whether the reader is held back waiting for permits ([`HeldBack`]).
//!
//! Before a successful HELLO a client is trusted with nothing: a frame longer than the longest
//! HELLO ([`HELLO_BODY_MAX`]) is refused (fatal FRAME_TOO_LARGE) without reading its body, one
//! that does not decode (a malformed HELLO) is refused with a fatal MALFORMED, and
//! a frame body beyond what the read buffer holds anyway takes permits from the small
//! handshake pool ([`crate::state::HANDSHAKE_BYTES`]), never from `max_in_flight_bytes`: clients
//! without a token cannot stall the writers that have one. After a HELLO has been handed on,
//! the reader reads nothing more until the state machine has answered it, so frames pipelined
//! behind a good HELLO take their permits as those of an authenticated connection.
//!
//! An authenticated connection's frames take permits from its own pool
//! (`max_connection_in_flight_bytes` + `max_frame_bytes`: room for its open transactions and one
//! more frame, so a frame the state machine will refuse is still read) and then from the shared
//! one, so one connection cannot hold all of `max_in_flight_bytes`.

use crate::native::transaction::HeldBytes;
use crate::state::ServerState;
use bytes::{Buf, BytesMut};
use parking_lot::Mutex;
use sensordb_protocol::frame::{Frame, FrameError, FrameType, Header, HEADER_LEN, HELLO_BODY_MAX};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Semaphore};

/// The reader's buffer: one `read` takes every frame a client pipelined (a small transaction's
/// CREATE, SENDs and CONFIRM are well under 4 KiB) instead of two reads per frame. Allocated
/// per connection, so 40 MB for 10,000 connections; it is also about the most a connection
/// reads ahead of its byte permits.
const READ_BUFFER_BYTES: usize = 4096;
/// Before the handshake, bodies up to this long fit the read buffer and take no permits.
const UNCOUNTED_BODY_BYTES: usize = READ_BUFFER_BYTES - HEADER_LEN;

/// What the reader hands the state machine.
pub(super) enum Incoming {
    Frame(Frame, Option<HeldBytes>),
    /// A frame that cannot be used; `fatal` when the byte stream can no longer be trusted.
    /// `context`: the short id of a DEFINE_SERIES that does not decode (its first 4 bytes), so
    /// the ERROR names the definition it refuses; else 0.
    Bad {
        error: FrameError,
        fatal: bool,
        context: u32,
    },
}

/// Whether the server is holding back a connection's reads (its reader waits for byte
/// permits), and when it last stopped doing so. The time the server holds a client back is
/// not the client's: idle and transaction clocks do not run while held back, and start again
/// from the end of the hold.
#[derive(Debug, Default)]
pub(super) struct HeldBack {
    state: Mutex<HoldState>,
}

#[derive(Debug, Default)]
struct HoldState {
    held: bool,
    last_released: Option<Instant>,
}

impl HeldBack {
    fn hold(&self) {
        self.state.lock().held = true;
    }

    fn release(&self) {
        let mut state = self.state.lock();
        state.held = false;
        state.last_released = Some(Instant::now());
    }

    /// When the client's clock last started, given its own last activity `last`: the later of
    /// `last` and the end of the last hold; `None` while the server holds it back.
    pub(super) fn client_clock_from(&self, last: Instant) -> Option<Instant> {
        let state = self.state.lock();
        if state.held {
            return None;
        }
        Some(state.last_released.map_or(last, |released| released.max(last)))
    }
}

/// What the reader shares with the state machine besides the frames.
pub(super) struct ReaderLink {
    pub incoming: mpsc::Sender<Incoming>,
    /// Turned true by the state machine once HELLO succeeded.
    pub authenticated: watch::Receiver<bool>,
    pub held_back: Arc<HeldBack>,
}

/// Reads frames until the end of the stream, a fatal framing error or the state machine going.
///
/// Frames are cut from one buffer per connection: a body is a slice of it (`Bytes`), not an
/// allocation of its own. The buffer is read into only when the frame being cut needs more
/// bytes, at most [`READ_BUFFER_BYTES`] beyond them.
pub(super) async fn read_loop<R: AsyncRead + Unpin>(mut reader: R, state: Arc<ServerState>, link: ReaderLink) {
    let ReaderLink { incoming, mut authenticated, held_back } = link;
    let mut buffer = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let config = &state.config;
    let max_body = u32::try_from(config.max_frame_bytes).unwrap_or(u32::MAX);
    let connection_cap = (config.max_connection_in_flight_bytes + config.max_frame_bytes).clamp(1, u32::MAX as usize);
    let permit_cap = config.max_in_flight_bytes.clamp(1, u32::MAX as usize).min(connection_cap);
    let connection_pool = Arc::new(Semaphore::new(connection_cap));
    // A HELLO went to the state machine, which has not answered it yet.
    let mut hello_pending = false;
    loop {
        if !fill(&mut reader, &mut buffer, HEADER_LEN).await {
            return;
        }
        state.metrics.bytes_received.fetch_add(HEADER_LEN as u64, Ordering::Relaxed);
        let head: &[u8; HEADER_LEN] = buffer[..HEADER_LEN].try_into().expect("a whole header is buffered");
        if hello_pending {
            // Nothing more is read until the HELLO is answered: a refused one closes the
            // connection (the sender goes), an accepted one turns `authenticated`.
            if authenticated.wait_for(|yes| *yes).await.is_err() {
                return drain(reader).await;
            }
            hello_pending = false;
        }
        let trusted = *authenticated.borrow();
        let header = match Header::parse(head, if trusted { max_body } else { HELLO_BODY_MAX.min(max_body) }) {
            Ok(header) => header,
            Err(error) => {
                let error = match error {
                    FrameError::TooLarge { len, limit } if !trusted && limit == HELLO_BODY_MAX => {
                        FrameError::TooLargeBeforeHello { len, limit }
                    }
                    other => other,
                };
                let _ = incoming.send(Incoming::Bad { error, fatal: true, context: 0 }).await;
                return drain(reader).await;
            }
        };
        let len = header.len as usize;
        let held = if len == 0 || (!trusted && len <= UNCOUNTED_BODY_BYTES) {
            None
        } else if !trusted {
            // Handshake bytes: their own small pool, never `max_in_flight_bytes`.
            let Ok(permit) = state.handshake_bytes.clone().acquire_many_owned(len as u32).await else { return };
            Some(HeldBytes { _permit: Some(permit), _connection_permit: None, bytes: 0, state: state.clone() })
        } else {
            // Permits before the body: beyond the limit this connection is simply not read.
            let want = len.min(permit_cap) as u32;
            held_back.hold();
            let permits = async {
                let mine = connection_pool.clone().acquire_many_owned(want).await.ok()?;
                let shared = state.in_flight_bytes.clone().acquire_many_owned(want).await.ok()?;
                Some((mine, shared))
            }
            .await;
            held_back.release();
            let Some((mine, shared)) = permits else { return };
            state.metrics.in_flight_bytes.fetch_add(want as i64, Ordering::Relaxed);
            Some(HeldBytes { _permit: Some(shared), _connection_permit: Some(mine), bytes: want as usize, state: state.clone() })
        };
        if !fill(&mut reader, &mut buffer, HEADER_LEN + len).await {
            return;
        }
        state.metrics.bytes_received.fetch_add(len as u64, Ordering::Relaxed);
        buffer.advance(HEADER_LEN);
        let body = buffer.split_to(len).freeze();
        if len > READ_BUFFER_BYTES {
            // The body grew the buffer; once it is dropped `reserve` would take back its whole
            // allocation, and the connection would keep it. What follows it moves to a small one.
            buffer = BytesMut::from(&buffer[..]);
        }
        let short_id = match body.get(..4) {
            Some(&[a, b, c, d]) if header.frame_type == FrameType::DefineSeries as u8 => u32::from_le_bytes([a, b, c, d]),
            _ => 0,
        };
        let message = match header.decode_body(body) {
            Ok(frame) => {
                hello_pending = !trusted && frame.frame_type() == FrameType::Hello;
                Incoming::Frame(frame, held)
            }
            Err(error) => {
                // The checksum held (or was not reached): the stream is in step unless it did not.
                // Before a successful HELLO nothing is worth going on for: a HELLO that does not
                // decode fails the handshake as a bad token does (fatal, closed).
                let bad_checksum = matches!(error, FrameError::BadChecksum { .. });
                let fatal = bad_checksum || !trusted;
                Incoming::Bad { error, fatal, context: if bad_checksum { 0 } else { short_id } }
            }
        };
        let fatal = matches!(message, Incoming::Bad { fatal: true, .. });
        if incoming.send(message).await.is_err() || fatal {
            return drain(reader).await;
        }
    }
}

/// Reads until `buffer` holds at least `needed` bytes; false at the end of the stream or an
/// error.
async fn fill<R: AsyncRead + Unpin>(reader: &mut R, buffer: &mut BytesMut, needed: usize) -> bool {
    while buffer.len() < needed {
        // Room for what is missing and a buffer's worth more: one read takes every frame a
        // client pipelined. Once the frames cut before are dropped, `reserve` reuses the
        // same allocation.
        buffer.reserve(needed - buffer.len() + READ_BUFFER_BYTES);
        match reader.read_buf(buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
    }
    true
}

/// Reads and discards until the peer closes (bounded by the caller's linger).
pub(super) async fn drain<R: AsyncRead + Unpin>(mut reader: R) {
    let mut scratch = vec![0u8; 8192];
    while let Ok(n) = reader.read(&mut scratch).await {
        if n == 0 {
            break;
        }
    }
}

/// Writes answers, coalescing those already queued into one write.
pub(super) async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut out: mpsc::UnboundedReceiver<Frame>) {
    let mut buffer = Vec::with_capacity(4096);
    while let Some(frame) = out.recv().await {
        frame.encode(&mut buffer);
        while buffer.len() < 256 << 10 {
            match out.try_recv() {
                Ok(frame) => frame.encode(&mut buffer),
                Err(_) => break,
            }
        }
        if writer.write_all(&buffer).await.is_err() {
            return;
        }
        buffer.clear();
    }
    let _ = writer.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerConfig;
    use sensordb_protocol::frame::TxId;
    use std::time::Duration;

    fn state(dir: &std::path::Path, config: ServerConfig) -> Arc<ServerState> {
        let engine = sensordb_engine::Engine::open(dir, sensordb_engine::EngineOptions::default()).expect("engine");
        Arc::new(ServerState {
            engine: Arc::new(engine),
            tokens: crate::auth::Tokens::new(Vec::new()),
            metrics: crate::metrics::Metrics::default(),
            connections: Arc::new(Semaphore::new(1)),
            in_flight_bytes: Arc::new(Semaphore::new(config.max_in_flight_bytes)),
            handshake_bytes: Arc::new(Semaphore::new(crate::state::HANDSHAKE_BYTES)),
            tls: None,
            config,
        })
    }

    /// A connection whose frames are not handled (a state machine busy elsewhere) holds at most
    /// its own pool, `max_connection_in_flight_bytes` + `max_frame_bytes`, of the shared one.
    #[tokio::test]
    async fn one_connection_holds_at_most_its_own_pool_of_the_shared_permits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = ServerConfig {
            max_in_flight_bytes: 64 << 20,
            max_connection_in_flight_bytes: 1 << 20,
            max_frame_bytes: 1 << 20,
            ..ServerConfig::default()
        };
        let state = state(dir.path(), config);
        let (client, server_side) = tokio::io::duplex(64 << 10);
        let (incoming, _unhandled) = mpsc::channel(16);
        let (_authenticated, authenticated_rx) = watch::channel(true);
        let link = ReaderLink { incoming, authenticated: authenticated_rx, held_back: Arc::new(HeldBack::default()) };
        let reader = tokio::spawn(read_loop(server_side, state.clone(), link));
        let writer = tokio::spawn(async move {
            let mut client = client;
            let records = bytes::Bytes::from(vec![0u8; (1 << 20) - 16]);
            for n in 0..20 {
                let frame = Frame::Send { tx: TxId::from_u64(n), records: records.clone() };
                if client.write_all(&frame.to_bytes()).await.is_err() {
                    return;
                }
            }
        });
        // Wait until the reader stops taking permits (bounded).
        let in_use = || (64 << 20) - state.in_flight_bytes.available_permits();
        let mut last = usize::MAX;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(40)).await;
            if in_use() == last && last > 0 {
                break;
            }
            last = in_use();
        }
        assert_eq!(in_use(), 2 << 20, "two frames of 1 MiB read and queued, the third waits for the connection's pool");
        reader.abort();
        writer.abort();
    }
}
