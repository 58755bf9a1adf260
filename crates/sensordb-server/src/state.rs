//! What every connection handler of both listeners shares: the engine, the configuration, the
//! tokens, the metrics and the two semaphores (connections, bytes in flight) that bound them, with
//! the disk-full waits and acknowledgement throttling every writer applies; and the shutdown
//! signal the listeners watch. Started by [`crate::server`], used by [`crate::http`] and
//! [`crate::native`].

use crate::auth::Tokens;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use sensordb_engine::Engine;
use std::sync::Arc;
use tokio::sync::{watch, Semaphore};

/// What every connection handler shares.
pub struct ServerState {
    pub engine: Arc<Engine>,
    pub config: ServerConfig,
    pub tokens: Tokens,
    pub metrics: Metrics,
    pub connections: Arc<Semaphore>,
    pub in_flight_bytes: Arc<Semaphore>,
    /// Set when both listeners speak TLS only (`tls_cert`/`tls_key`).
    pub tls: Option<crate::tls::TlsAcceptor>,
}

impl ServerState {
    /// Waits (asynchronously) while disk usage is at `U_h`, where writers wait for reclaim;
    /// fails with `NoSpace` after the engine's `full_wait_max`.
    pub async fn wait_for_space(&self) -> Result<(), sensordb_engine::Error> {
        let started = std::time::Instant::now();
        let wait_max = self.engine.reclaim_options().full_wait_max;
        while self.engine.admission() == sensordb_engine::Admission::WaitForSpace {
            if started.elapsed() >= wait_max {
                return Err(sensordb_engine::Error::NoSpace { path: self.engine.data_dir().to_path_buf() });
            }
            let engine = self.engine.clone();
            // The wait for the next reclaim cycle blocks a thread: bound it and keep it off
            // the async workers.
            let _ = tokio::task::spawn_blocking(move || engine.wait_for_reclaim(std::time::Duration::from_millis(200))).await;
        }
        let waited = started.elapsed();
        if waited.as_micros() > 0 && waited > std::time::Duration::from_millis(1) {
            crate::metrics::Metrics::add(&self.metrics.throttle_delay_us, waited.as_micros() as u64);
        }
        Ok(())
    }

    /// Delays an acknowledgement by `T = (U − U_l)/(U_h − U_l)` seconds while usage is between
    /// the throttle thresholds, so synchronous senders slow down and reclaim keeps up.
    pub async fn throttle_acknowledgement(&self) {
        if let Some(delay) = self.acknowledgement_delay() {
            tokio::time::sleep(delay).await;
        }
    }

    /// The delay [`ServerState::throttle_acknowledgement`] waits (counted in the metrics), for
    /// a caller that waits otherwise.
    pub fn acknowledgement_delay(&self) -> Option<std::time::Duration> {
        match self.engine.admission() {
            sensordb_engine::Admission::After(delay) => {
                crate::metrics::Metrics::add(&self.metrics.throttle_delay_us, delay.as_micros() as u64);
                Some(delay)
            }
            _ => None,
        }
    }
}

/// Receives `true` when the server is shutting down.
pub type ShutdownSignal = watch::Receiver<bool>;
