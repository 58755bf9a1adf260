//! The socket side of a native connection: the reader task that cuts frames from the byte
//! stream (taking byte permits before each body), the writer task that coalesces answers into
//! writes, and the drain of a closing connection. What they exchange with the state machine
//! is [`Incoming`] frames and outgoing [`Frame`]s.

use crate::native::transaction::HeldBytes;
use crate::state::ServerState;
use bytes::{Buf, BytesMut};
use sensordb_protocol::frame::{Frame, FrameError, Header, HEADER_LEN};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The reader's buffer: one `read` takes every frame a client pipelined (a small transaction's
/// CREATE, SENDs and CONFIRM are well under 4 KiB) instead of two reads per frame. Allocated
/// per connection, so 40 MB for 10,000 connections; it is also about the most a connection
/// reads ahead of its byte permits.
const READ_BUFFER_BYTES: usize = 4096;

/// What the reader hands the state machine.
pub(super) enum Incoming {
    Frame(Frame, Option<HeldBytes>),
    /// A frame that cannot be used; `fatal` when the byte stream can no longer be trusted.
    Bad {
        error: FrameError,
        fatal: bool,
    },
}

/// Reads frames until the end of the stream, a fatal framing error or the state machine going.
///
/// Frames are cut from one buffer per connection: a body is a slice of it (`Bytes`), not an
/// allocation of its own. The buffer is read into only when the frame being cut needs more
/// bytes, at most [`READ_BUFFER_BYTES`] beyond them.
pub(super) async fn read_loop<R: AsyncRead + Unpin>(mut reader: R, state: Arc<ServerState>, incoming: mpsc::Sender<Incoming>) {
    let mut buffer = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let max_body = u32::try_from(state.config.max_frame_bytes).unwrap_or(u32::MAX);
    let permit_cap = state.config.max_in_flight_bytes.clamp(1, u32::MAX as usize);
    loop {
        if !fill(&mut reader, &mut buffer, HEADER_LEN).await {
            return;
        }
        state.metrics.bytes_received.fetch_add(HEADER_LEN as u64, Ordering::Relaxed);
        let head: &[u8; HEADER_LEN] = buffer[..HEADER_LEN].try_into().expect("a whole header is buffered");
        let header = match Header::parse(head, max_body) {
            Ok(header) => header,
            Err(error) => {
                let _ = incoming.send(Incoming::Bad { error, fatal: true }).await;
                return drain(reader).await;
            }
        };
        let len = header.len as usize;
        let held = if len == 0 {
            None
        } else {
            // Permits before the body: beyond the limit this connection is simply not read.
            let want = len.min(permit_cap) as u32;
            let Ok(permit) = state.in_flight_bytes.clone().acquire_many_owned(want).await else { return };
            state.metrics.in_flight_bytes.fetch_add(want as i64, Ordering::Relaxed);
            Some(HeldBytes { _permit: Some(permit), bytes: want as usize, state: state.clone() })
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
        let message = match header.decode_body(body) {
            Ok(frame) => Incoming::Frame(frame, held),
            Err(error) => {
                // The checksum held (or was not reached): the stream is in step unless it did not.
                let fatal = matches!(error, FrameError::BadChecksum { .. });
                Incoming::Bad { error, fatal }
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
