//! The native transactional TCP protocol (specified in `docs/PROTOCOL.md`, wire format in
//! the `sensordb-protocol` crate).
//!
//! - [`serve`]: the accept loop. Each connection accepted waits for a `connections` permit
//!   before the next accept (more wait in the listen backlog; a listener waiting for clients
//!   holds no permit); shutdown stops accepting and drains the connections.
//! - [`connection`]: one connection: a reader task (frames, byte permits for backpressure), a
//!   writer task (answers, batched), and the state machine between them.
//! - [`answer`]: the answer to a COMPLETE, shared by the connection and the committer.
//! - [`committer`]: the thread that writes small transactions in groups (one engine write, with
//!   the completed ids in its WAL record: one fdatasync per group).
//! - [`transaction`]: an open transaction's buffered points.
//! - [`batch_sink`]: SEND records decoded straight into a transaction's write batch.
//! - [`txlog`]: the durable window of completed transaction ids that makes retries idempotent.

pub mod answer;
pub mod batch_sink;
pub mod committer;
pub mod connection;
pub mod transaction;
pub mod txlog;

use crate::state::{ServerState, ShutdownSignal};
use committer::Committer;
use sensordb_engine::Durability;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use txlog::{TxLog, TxLogOptions};

/// Serves the native protocol on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, state: Arc<ServerState>, mut shutdown: ShutdownSignal) {
    let options = TxLogOptions { sync: state.config.durability == Durability::Fsync, ..TxLogOptions::default() };
    // Beside the engine's files: the log is part of the same store (and a test server whose
    // config keeps the default data_dir must not write into the working directory).
    let dir = state.engine.data_dir().to_path_buf();
    let txlog = match tokio::task::spawn_blocking(move || TxLog::open(&dir, options)).await {
        Ok(Ok((log, report))) => {
            tracing::info!(path = %log.path().display(), remembered = report.loaded, expired = report.expired,
                damaged = report.damaged, "completed-transaction log opened");
            log
        }
        Ok(Err(error)) => {
            tracing::error!(%error, "cannot open the completed-transaction log; the native listener is closed");
            return;
        }
        Err(error) => {
            tracing::error!(%error, "opening the completed-transaction log failed");
            return;
        }
    };
    if state.engine.logs_marks() {
        // Completed ids travel in the WAL with their points; flushes checkpoint them into the
        // log. The sink first, then the marks not flushed yet: every mark is in one or the other.
        state.engine.set_mark_sink(Some(txlog.clone()));
        let unflushed = state.engine.unflushed_marks();
        txlog.remember(&unflushed);
        tracing::info!(remembered = txlog.len(), from_wal = unflushed.len(), "completed transaction ids of the WAL remembered");
    }
    let on_stored = {
        let state = state.clone();
        Arc::new(move |points| {
            state.metrics.points_written.fetch_add(points, std::sync::atomic::Ordering::Relaxed);
        })
    };
    // Groups wait for Cassandra's round trip with `ack = "cassandra"`: several in flight then.
    let groups_in_flight = state.config.cassandra.as_ref().filter(|c| c.acks_in_cassandra()).map_or(1, |c| c.commit_groups_in_flight);
    let (committer, committer_thread) = match Committer::start_with(state.engine.clone(), txlog.clone(), on_stored, groups_in_flight) {
        Ok(started) => started,
        Err(error) => {
            tracing::error!(%error, "cannot start the committer thread; the native listener is closed");
            return;
        }
    };
    let committer = Arc::new(committer);
    let mut connections = JoinSet::new();
    'accept: loop {
        if *shutdown.borrow() {
            break;
        }
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little, keep serving.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        // No more accepts until this connection has its slot: excess clients wait in the
        // kernel's accept queue, and a listener waiting for clients holds no slot.
        let permit = loop {
            tokio::select! {
                permit = state.connections.clone().acquire_owned() => match permit {
                    Ok(permit) => break permit,
                    Err(_) => break 'accept,
                },
                _ = shutdown.changed() => break 'accept,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        };
        let conn = connection::Connection::new(state.clone(), txlog.clone(), committer.clone(), peer);
        match &state.tls {
            None => {
                connections.spawn(conn.run(stream, shutdown.clone(), permit));
            }
            Some(tls) => {
                // The handshake runs in the connection's task, under a timeout.
                let tls = tls.clone();
                let mut shutdown = shutdown.clone();
                connections.spawn(async move {
                    let _ = stream.set_nodelay(true);
                    let handshake = tokio::select! {
                        handshake = tls.accept(stream) => handshake,
                        // Shutting down: a handshake in progress is abandoned.
                        _ = shutdown.wait_for(|stop| *stop) => return,
                    };
                    match handshake {
                        Ok(stream) => conn.run_io(stream, shutdown, permit).await,
                        Err(error) => tracing::debug!(%error, %peer, "TLS handshake failed"),
                    }
                });
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    // Every connection has finished its transactions: the committer's queue is empty, and
    // the thread ends once its last handle goes.
    drop(committer);
    let _ = tokio::task::spawn_blocking(move || committer_thread.join()).await;
}
