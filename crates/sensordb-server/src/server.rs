//! Starting and stopping the listeners over one engine.
//!
//! Every listener gets the shared [`ServerState`]; connections over all listeners are bounded by
//! one semaphore (`max_connections`), bytes received but not yet durable by another
//! (`max_in_flight_bytes`, in permits of one byte): a sender that exceeds them waits (TCP
//! backpressure), it is never refused. Shutdown is a broadcast that stops accepting, then a
//! drain of the connections in progress.

use crate::auth::Tokens;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use sensordb_engine::Engine;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

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
        while self.engine.admission() == sensordb_engine::reclaim::throttle::Admission::WaitForSpace {
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
        if let sensordb_engine::reclaim::throttle::Admission::After(delay) = self.engine.admission() {
            crate::metrics::Metrics::add(&self.metrics.throttle_delay_us, delay.as_micros() as u64);
            tokio::time::sleep(delay).await;
        }
    }
}

/// Receives `true` when the server is shutting down.
pub type ShutdownSignal = watch::Receiver<bool>;

pub struct Server;

/// A started server.
pub struct RunningServer {
    pub http_addr: SocketAddr,
    pub native_addr: SocketAddr,
    pub state: Arc<ServerState>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Server {
    /// Binds both listeners and starts serving `engine`.
    pub async fn start(config: ServerConfig, engine: Arc<Engine>) -> std::io::Result<RunningServer> {
        let tokens = Tokens::new(config.tokens.clone());
        if tokens.is_open() {
            tracing::warn!("no access tokens configured: every client may read and write");
        }
        // Certificate and key problems fail the start, before anything listens.
        let tls = crate::tls::TlsAcceptor::from_config(&config)?;
        let http_listener = TcpListener::bind(config.http_listen).await?;
        let native_listener = TcpListener::bind(config.native_listen).await?;
        let state = Arc::new(ServerState {
            connections: Arc::new(Semaphore::new(config.max_connections)),
            in_flight_bytes: Arc::new(Semaphore::new(config.max_in_flight_bytes)),
            engine,
            tokens,
            metrics: Metrics::default(),
            tls,
            config,
        });
        let (shutdown, signal) = watch::channel(false);
        let http_addr = http_listener.local_addr()?;
        let native_addr = native_listener.local_addr()?;
        let tasks = vec![
            tokio::spawn(crate::http::serve(http_listener, state.clone(), signal.clone())),
            tokio::spawn(crate::native::serve(native_listener, state.clone(), signal)),
        ];
        tracing::info!(%http_addr, %native_addr, tls = state.tls.is_some(), "sensordb listening");
        Ok(RunningServer { http_addr, native_addr, state, shutdown, tasks })
    }
}

impl RunningServer {
    /// Stops accepting, lets connections in progress finish, and returns.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}
