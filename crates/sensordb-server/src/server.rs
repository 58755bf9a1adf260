//! Starting and stopping the listeners over one engine.
//!
//! Every listener gets the shared [`ServerState`] (its own module, [`crate::state`], which the
//! listeners import without importing this one back); connections over all listeners are
//! bounded by one semaphore (`max_connections`), bytes received but not yet durable by another
//! (`max_in_flight_bytes`, in permits of one byte): a sender that exceeds them waits (TCP
//! backpressure), it is never refused. Shutdown is a broadcast that stops accepting, then a
//! drain of the connections in progress.

use crate::auth::Tokens;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::state::ServerState;
use sensordb_engine::Engine;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

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
        // The server's limit holds whatever options the engine was opened with.
        engine.set_series_per_database_max(config.max_series_per_database);
        let http_listener = bind(config.http_listen, config.listen_backlog)?;
        let native_listener = bind(config.native_listen, config.listen_backlog)?;
        let state = Arc::new(ServerState {
            connections: Arc::new(Semaphore::new(config.max_connections)),
            in_flight_bytes: Arc::new(Semaphore::new(config.max_in_flight_bytes)),
            handshake_bytes: Arc::new(Semaphore::new(crate::state::HANDSHAKE_BYTES)),
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

/// A listener on `addr` whose accept queue holds `backlog` connections. Tokio's
/// `TcpListener::bind` asks for 128, as the standard library does: too few for thousands of
/// sources that connect together (the SYNs beyond it are dropped and retried a second later).
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // A restarted server binds again at once, though its old connections linger in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// With the usual backlog of 128, connections beyond it wait for a SYN retry a second
    /// later; with ours every one of a burst completes at once, before any is accepted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_connections_beyond_128_is_queued_without_a_retry() {
        let somaxconn: usize =
            std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(4096);
        let burst = 400.min(somaxconn.saturating_sub(1));
        if burst <= 200 {
            // CI must never pass a test it did not run.
            assert!(std::env::var("CI").as_deref() != Ok("true"), "net.core.somaxconn is {somaxconn}: this test cannot run under CI=true");
            eprintln!("net.core.somaxconn is {somaxconn}: the kernel caps every backlog below this test's burst; skipped");
            return;
        }
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0)), 1024).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connects: Vec<_> = (0..burst)
            .map(|_| {
                tokio::spawn(async move { tokio::time::timeout(Duration::from_millis(700), tokio::net::TcpStream::connect(addr)).await })
            })
            .collect();
        let mut streams = Vec::new();
        for connect in connects {
            let stream = connect.await.expect("joins").expect("connected before a SYN retry (1 s)").expect("connects");
            streams.push(stream);
        }
        // Every one of them waits in the accept queue.
        for n in 0..burst {
            tokio::time::timeout(Duration::from_millis(700), listener.accept())
                .await
                .unwrap_or_else(|_| panic!("connection {n} queued"))
                .expect("accepts");
        }
    }
}
