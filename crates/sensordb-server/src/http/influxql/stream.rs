//! Streamed answers: one blocking thread runs the query and writes the response text, handing
//! it over in pieces of about 64 KiB through a channel of a few pieces, so an answer of many
//! megabytes is never one string, and a slow reader holds the writer back (backpressure)
//! instead of memory filling up. When the reader goes away, the writer stops at its next piece.
//!
//! Most answers (a dashboard's point lookups) are far smaller than a piece: they come back whole
//! and go out as one body with its length, so a query costs one hand-over between threads, not
//! a thread for the query, another for the text and a channel between them.

use super::render::Flush;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};

/// Bytes of text collected before they are handed to the connection.
const PIECE_BYTES: usize = 64 << 10;
/// Pieces waiting for the connection at most.
const PIECES_IN_FLIGHT: usize = 4;

/// How an answer begins: whole, or its first piece with the rest coming through the channel.
enum Start {
    Whole(String),
    FirstPiece(Bytes),
}

/// A response body: the first piece, then the pieces of the channel.
struct ChannelBody {
    first: Option<Bytes>,
    pieces: mpsc::Receiver<Bytes>,
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        self.pieces.poll_recv(cx).map(|piece| piece.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The writer failed before its answer began (it panicked).
#[derive(Debug)]
pub struct WriterFailed;

/// What a writer hands back: whether it wrote the whole answer (false when it stopped early), and
/// what it still owns (the results it wrote from), freed only after the answer's last text is
/// handed over: freeing 10,000 result series takes as long as writing a tenth of them, and the
/// reader need not wait for it.
pub struct Written<T> {
    pub completed: bool,
    pub leftovers: T,
}

/// A 200 JSON response whose body `write` produces on a blocking thread: it writes into the
/// string it is given and calls the flush it is given between parts (see [`Flush`]). Resolves
/// once the answer is whole or its first piece is written; when the caller stops waiting (a
/// timeout), the writer stops at its first piece.
pub async fn streamed<T: Send + 'static>(
    write: impl FnOnce(&mut String, &mut Flush<'_>) -> Written<T> + Send + 'static,
) -> Result<Response, WriterFailed> {
    let (start, started) = oneshot::channel::<Start>();
    let (sender, pieces) = mpsc::channel::<Bytes>(PIECES_IN_FLIGHT);
    tokio::task::spawn_blocking(move || {
        let mut start = Some(start);
        let mut out = String::new();
        let Written { completed, leftovers } = {
            let mut flush = |out: &mut String| {
                if out.len() < PIECE_BYTES {
                    return true;
                }
                let piece = Bytes::from(std::mem::replace(out, String::with_capacity(PIECE_BYTES * 2)));
                match start.take() {
                    Some(start) => start.send(Start::FirstPiece(piece)).is_ok(),
                    None => sender.blocking_send(piece).is_ok(),
                }
            };
            write(&mut out, &mut flush)
        };
        match start.take() {
            Some(start) => {
                // The caller may have stopped waiting; nothing is left to do then.
                let _ = start.send(Start::Whole(out));
            }
            None if completed && !out.is_empty() => {
                let _ = sender.blocking_send(Bytes::from(out));
            }
            None => {}
        }
        drop(leftovers);
    });
    let body = match started.await.map_err(|_| WriterFailed)? {
        Start::Whole(text) => Body::from(text),
        Start::FirstPiece(first) => Body::new(ChannelBody { first: Some(first), pieces }),
    };
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response())
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
                    return Written { completed: false, leftovers: () };
                }
            }
            Written { completed: true, leftovers: () }
        })
        .await
        .expect("started");
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
                    return Written { completed: false, leftovers: () };
                }
            }
            let _ = done.send(written);
            Written { completed: true, leftovers: () }
        })
        .await
        .expect("started");
        drop(response);
        let written = tokio::task::spawn_blocking(move || finished.recv_timeout(std::time::Duration::from_secs(10)))
            .await
            .expect("join")
            .expect("the writer ended");
        assert!(written < 10_000_000, "the writer stopped early: {written} bytes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_answer_goes_out_whole_with_its_length() {
        let response = streamed(|out, flush| {
            out.push_str("{\"results\":[]}");
            Written { completed: flush(out), leftovers: () }
        })
        .await
        .expect("started");
        let body = response.into_body();
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(14));
        let text = body.collect().await.expect("body").to_bytes();
        assert_eq!(&text[..], b"{\"results\":[]}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_that_fails_before_its_first_piece_is_reported() {
        let outcome = streamed::<()>(|_, _| panic!("the writer fails")).await;
        assert!(outcome.is_err());
    }

    /// Frees its results only once the reader confirms it has the whole answer (or 10 s passed).
    struct Leftovers {
        reader_has_all: std::sync::mpsc::Receiver<()>,
        freed_after_the_answer: std::sync::mpsc::Sender<bool>,
    }

    impl Drop for Leftovers {
        fn drop(&mut self) {
            let waited = self.reader_has_all.recv_timeout(std::time::Duration::from_secs(10)).is_ok();
            let _ = self.freed_after_the_answer.send(waited);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leftovers_are_freed_after_the_last_piece_is_handed_over() {
        let (has_all, reader_has_all) = std::sync::mpsc::channel();
        let (freed_after_the_answer, freed) = std::sync::mpsc::channel();
        let leftovers = Leftovers { reader_has_all, freed_after_the_answer };
        // More than one piece, ending in a short one that goes out after the writer returned.
        let text: String = (0..30_000).map(|i| format!("{i},")).collect();
        let expected = text.clone();
        let response = streamed(move |out, flush| {
            for piece in text.as_bytes().chunks(1000) {
                out.push_str(std::str::from_utf8(piece).expect("ascii"));
                if !flush(out) {
                    return Written { completed: false, leftovers };
                }
            }
            Written { completed: true, leftovers }
        })
        .await
        .expect("started");
        let mut body = response.into_body();
        let mut got = Vec::new();
        while got.len() < expected.len() {
            let frame = body.frame().await.expect("more text").expect("frame");
            got.extend_from_slice(&frame.into_data().expect("data"));
        }
        has_all.send(()).expect("the leftovers wait");
        assert_eq!(String::from_utf8(got).expect("utf-8"), expected);
        let waited = tokio::task::spawn_blocking(move || freed.recv_timeout(std::time::Duration::from_secs(20)))
            .await
            .expect("join")
            .expect("freed");
        assert!(waited, "the leftovers were freed before the reader had the whole answer");
    }
}
