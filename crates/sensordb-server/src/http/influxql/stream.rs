//! Streamed answers: a blocking thread writes the response text and hands it over in pieces of
//! about 64 KiB through a channel of a few pieces, so an answer of many megabytes is never one
//! string, and a slow reader holds the writer back (backpressure) instead of memory filling up.
//! When the reader goes away, the writer stops at its next piece.

use super::render::Flush;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Bytes of text collected before they are handed to the connection.
const PIECE_BYTES: usize = 64 << 10;
/// Pieces waiting for the connection at most.
const PIECES_IN_FLIGHT: usize = 4;

/// A response body fed by the channel.
struct ChannelBody {
    pieces: mpsc::Receiver<Bytes>,
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.pieces.poll_recv(cx).map(|piece| piece.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// A 200 JSON response whose body `write` produces on a blocking thread: it writes into the
/// string it is given and calls the flush it is given between parts (see [`Flush`]); it returns
/// false when it stopped early.
pub fn streamed(write: impl FnOnce(&mut String, &mut Flush<'_>) -> bool + Send + 'static) -> Response {
    let (sender, pieces) = mpsc::channel::<Bytes>(PIECES_IN_FLIGHT);
    tokio::task::spawn_blocking(move || {
        let mut out = String::with_capacity(PIECE_BYTES * 2);
        let mut flush = |out: &mut String| {
            if out.len() < PIECE_BYTES {
                return true;
            }
            let piece = std::mem::replace(out, String::with_capacity(PIECE_BYTES * 2));
            sender.blocking_send(Bytes::from(piece)).is_ok()
        };
        if write(&mut out, &mut flush) && !out.is_empty() {
            // The reader may be gone; nothing is left to do then.
            let _ = sender.blocking_send(Bytes::from(out));
        }
    });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::new(ChannelBody { pieces })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_answer_arrives_whole_in_pieces() {
        let response = streamed(|out, flush| {
            for i in 0..100_000 {
                out.push_str(&format!("{i},"));
                if !flush(out) {
                    return false;
                }
            }
            true
        });
        let mut body = response.into_body();
        let (mut pieces, mut text) = (0, Vec::new());
        while let Some(frame) = body.frame().await {
            let data = frame.expect("frame").into_data().expect("data");
            assert!(data.len() < 2 * PIECE_BYTES, "a piece of {} bytes", data.len());
            text.extend_from_slice(&data);
            pieces += 1;
        }
        let expected: String = (0..100_000).map(|i| format!("{i},")).collect();
        assert_eq!(String::from_utf8(text).expect("utf-8"), expected);
        assert!(pieces > 5, "{pieces} pieces");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_stops_when_the_reader_is_gone() {
        let (done, finished) = std::sync::mpsc::channel();
        let response = streamed(move |out, flush| {
            let mut written = 0usize;
            // Bounded: far more than the channel holds.
            for _ in 0..1_000_000 {
                out.push_str("0123456789");
                written += 10;
                if !flush(out) {
                    let _ = done.send(written);
                    return false;
                }
            }
            let _ = done.send(written);
            true
        });
        drop(response);
        let written = tokio::task::spawn_blocking(move || finished.recv_timeout(std::time::Duration::from_secs(10)))
            .await
            .expect("join")
            .expect("the writer ended");
        assert!(written < 10_000_000, "the writer stopped early: {written} bytes");
    }
}
