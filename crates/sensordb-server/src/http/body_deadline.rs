//! A request body that must keep coming: a stalled or very slow body fails instead of holding
//! its handler (and the handler's `in_flight_bytes` permits) forever.
//!
//! The clock starts when the handler first asks for body bytes, not when the request arrives:
//! time the handler spends waiting for permits before reading is the server's, not the
//! client's. Likewise time between handing the handler bytes and its next ask (a body without
//! length waiting for its permits halfway) does not count. From then on the body fails when,
//! while the handler waits for bytes,
//!
//! - no byte has come for `http_body_read_timeout_ms` (a stall), or
//! - fewer than `http_body_min_bytes_per_second` × (seconds since the start − the same grace)
//!   bytes have come (a slow drip), as Apache's `mod_reqtimeout` does with `body=…,MinRate=…`.
//!
//! The handler sees a read error (the write endpoints answer 400 `cannot read request body`),
//! drops the body and with it its permits; hyper then closes the connection, since the rest of
//! the body was never read.

use crate::metrics::Metrics;
use crate::state::ServerState;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The limits of [`BodyDeadline`], from the server configuration.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Longest wait for the next bytes, and the grace before the minimum rate applies.
    pub stall: Duration,
    /// Bytes per second the body must average after the grace; 0 for no minimum.
    pub min_bytes_per_second: u64,
}

impl BodyLimits {
    pub fn from_config(config: &crate::ServerConfig) -> BodyLimits {
        BodyLimits {
            stall: Duration::from_millis(config.http_body_read_timeout_ms.max(1)),
            min_bytes_per_second: config.http_body_min_bytes_per_second,
        }
    }

    /// When a body that started reading at `started` and got `received` bytes, the last of
    /// them at `last_bytes`, has run out of time.
    pub fn deadline(&self, started: Instant, last_bytes: Instant, received: u64) -> Instant {
        let stalled = last_bytes + self.stall;
        if self.min_bytes_per_second == 0 {
            return stalled;
        }
        // Every min_bytes_per_second bytes received buy one more second after the grace.
        let earned = Duration::from_secs_f64(received as f64 / self.min_bytes_per_second as f64);
        stalled.min(started + self.stall + earned)
    }
}

/// Why a body read failed.
#[derive(Debug, thiserror::Error)]
#[error("request body too slow: {received} bytes in {elapsed_ms} ms, none for the last {idle_ms} ms (limits: a gap of {stall_ms} ms, {min_rate} bytes/s on average after that)")]
pub struct BodyTooSlow {
    received: u64,
    elapsed_ms: u128,
    idle_ms: u128,
    stall_ms: u128,
    min_rate: u64,
}

/// `B` under [`BodyLimits`].
pub struct BodyDeadline<B> {
    body: B,
    limits: BodyLimits,
    state: Arc<ServerState>,
    /// First poll, and the last time bytes came; set on the first poll.
    started: Option<(Instant, Instant)>,
    received: u64,
    /// When bytes were last handed to the handler, until it asks again: the server's time.
    away_since: Option<Instant>,
    /// Armed while the handler waits for bytes.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> BodyDeadline<B> {
    pub fn new(body: B, limits: BodyLimits, state: Arc<ServerState>) -> BodyDeadline<B> {
        BodyDeadline { body, limits, state, started: None, received: 0, away_since: None, timer: None }
    }
}

impl<B> Body for BodyDeadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let (Some(away_since), Some((started, last_bytes))) = (this.away_since.take(), this.started) {
            // The handler was busy (or waiting for permits): the clock moves on by that much.
            let away = away_since.elapsed();
            this.started = Some((started + away, last_bytes + away));
        }
        let (started, last_bytes) = *this.started.get_or_insert_with(|| {
            let now = Instant::now();
            (now, now)
        });
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let bytes = frame.data_ref().map_or(0, Bytes::len);
                if bytes > 0 {
                    this.received += bytes as u64;
                    this.started = Some((started, Instant::now()));
                }
                this.away_since = Some(Instant::now());
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let deadline = this.limits.deadline(started, last_bytes, this.received);
                let timer = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                Metrics::add(&this.state.metrics.http_body_timeouts, 1);
                let now = Instant::now();
                let error = BodyTooSlow {
                    received: this.received,
                    elapsed_ms: now.duration_since(started).as_millis(),
                    idle_ms: now.duration_since(last_bytes).as_millis(),
                    stall_ms: this.limits.stall.as_millis(),
                    min_rate: this.limits.min_bytes_per_second,
                };
                tracing::debug!(%error, "giving up on a request body");
                Poll::Ready(Some(Err(Box::new(error))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_earlier_of_stall_and_rate() {
        let limits = BodyLimits { stall: Duration::from_secs(10), min_bytes_per_second: 1000 };
        let start = Instant::now();
        // Nothing yet: the grace.
        assert_eq!(limits.deadline(start, start, 0), start + Duration::from_secs(10));
        // 5,000 bytes at once, then silence: the stall limit comes first.
        let at = start + Duration::from_secs(1);
        assert_eq!(limits.deadline(start, at, 5_000), at + Duration::from_secs(10));
        // A drip: 2,000 bytes over 30 s, the last just now: the rate limit has passed.
        let at = start + Duration::from_secs(30);
        assert_eq!(limits.deadline(start, at, 2_000), start + Duration::from_secs(12));
        // No minimum rate: only the stall.
        let limits = BodyLimits { min_bytes_per_second: 0, ..limits };
        assert_eq!(limits.deadline(start, at, 2_000), at + Duration::from_secs(10));
    }
}
