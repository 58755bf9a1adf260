//! What every connection handler of both listeners shares: the engine, the configuration, the
//! tokens, the metrics and the semaphores (connections, bytes in flight, handshake bytes) that bound them, with
//! the disk-full waits and acknowledgement throttling every writer applies; and the shutdown
//! signal the listeners watch. Started by [`crate::server`], used by [`crate::http`] and
//! [`crate::native`].

use crate::auth::Tokens;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use sensordb_engine::Engine;
use std::sync::Arc;
use tokio::sync::{watch, Semaphore};

/// Permits for native frames read before a successful HELLO that do not fit a connection's
/// read buffer anyway (a HELLO with a token of kilobytes), over all connections: 64 of the
/// longest HELLO. Clients without a token who hold them delay only other such handshakes.
pub const HANDSHAKE_BYTES: usize = 8 << 20;

/// What every connection handler shares.
pub struct ServerState {
    pub engine: Arc<Engine>,
    pub config: ServerConfig,
    pub tokens: Tokens,
    pub metrics: Metrics,
    pub connections: Arc<Semaphore>,
    pub in_flight_bytes: Arc<Semaphore>,
    /// Bytes of native frames read before a successful HELLO, over all connections
    /// ([`HANDSHAKE_BYTES`]): unauthenticated clients take these, never `in_flight_bytes`.
    pub handshake_bytes: Arc<Semaphore>,
    /// Set when both listeners speak TLS only (`tls_cert`/`tls_key`).
    pub tls: Option<crate::tls::TlsAcceptor>,
}

impl ServerState {
    /// Waits (asynchronously) while the engine's admission says to wait for space (usage at
    /// `U_h`); fails with `NoSpace` after the engine's `full_wait_max`. The decision is
    /// [`Engine::admit`]'s; only the waiting is done here, off the async workers.
    pub async fn wait_for_space(&self) -> Result<(), sensordb_engine::Error> {
        let started = std::time::Instant::now();
        while self.engine.admit(started)? == sensordb_engine::Admission::WaitForSpace {
            let engine = self.engine.clone();
            // The wait for the next reclaim cycle blocks a thread (at most 200 ms): keep it off
            // the async workers.
            let _ = tokio::task::spawn_blocking(move || engine.wait_for_space()).await;
        }
        let waited = started.elapsed();
        if waited > std::time::Duration::from_millis(1) {
            crate::metrics::Metrics::add(&self.metrics.throttle_delay_us, waited.as_micros() as u64);
        }
        Ok(())
    }

    /// Delays an acknowledgement by [`ServerState::acknowledgement_delay`], so synchronous
    /// senders slow down and reclaim keeps up.
    pub async fn throttle_acknowledgement(&self) {
        if let Some(delay) = self.acknowledgement_delay() {
            tokio::time::sleep(delay).await;
        }
    }

    /// The engine's [`Engine::acknowledgement_delay`] (counted in the metrics), for a caller that
    /// waits otherwise.
    pub fn acknowledgement_delay(&self) -> Option<std::time::Duration> {
        let delay = self.engine.acknowledgement_delay()?;
        crate::metrics::Metrics::add(&self.metrics.throttle_delay_us, delay.as_micros() as u64);
        Some(delay)
    }
}

/// Receives `true` when the server is shutting down.
pub type ShutdownSignal = watch::Receiver<bool>;
