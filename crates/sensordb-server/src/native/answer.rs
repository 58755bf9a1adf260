//! The answer to a COMPLETE, whoever gives it (the connection itself, the committer thread or a
//! completion task): [`Answer`] carries what is needed to count the write's [`Outcome`] and
//! send COMPLETED or the ERROR to the connection's writer, and [`Completing`] tracks a
//! connection's transactions between COMPLETE and that answer. Its own module so that the
//! connection and the committer both use it and neither imports the other back (the connection
//! hands jobs to the committer; the committer never needs the connection).

use crate::state::ServerState;
use sensordb_engine::Error as EngineError;
use sensordb_protocol::frame::{ErrorCode, Frame, TxId};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, Notify};

/// The outcome of one transaction's write.
pub type Outcome = Result<(), Arc<EngineError>>;

/// The transactions of one connection between COMPLETE and its answer. Shared with whoever
/// answers them (the committer thread, completion tasks), which remove them.
#[derive(Default)]
pub struct Completing {
    ids: parking_lot::Mutex<HashSet<TxId>>,
    /// Told when the last one is answered.
    emptied: Notify,
}

impl Completing {
    pub(super) fn contains(&self, tx: &TxId) -> bool {
        self.ids.lock().contains(tx)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ids.lock().is_empty()
    }

    pub(super) fn insert(&self, tx: TxId) {
        self.ids.lock().insert(tx);
    }

    fn remove(&self, tx: &TxId) {
        let mut ids = self.ids.lock();
        ids.remove(tx);
        if ids.is_empty() {
            self.emptied.notify_waiters();
        }
    }

    /// Returns once no transaction is completing.
    pub(super) async fn drained(&self) {
        loop {
            let emptied = self.emptied.notified();
            tokio::pin!(emptied);
            // Registered before the check, so a removal in between is not missed.
            emptied.as_mut().enable();
            if self.is_empty() {
                return;
            }
            emptied.await;
        }
    }
}

/// The answer to one COMPLETE, whoever delivers it: the frames held back for the transaction
/// (its CREATED and CONFIRMED, to leave in the same write) and then COMPLETED or the ERROR,
/// handed to the connection's writer.
pub struct Answer {
    pub(super) state: Arc<ServerState>,
    pub(super) out: Option<mpsc::UnboundedSender<Frame>>,
    pub(super) before: Vec<Frame>,
    pub(super) completing: Arc<Completing>,
    pub(super) tx: TxId,
    pub(super) points: u64,
    /// When the write began (the write-latency metric).
    pub(super) started: Instant,
}

impl Answer {
    /// Counts the write's outcome and answers; a stored transaction's answer waits out the
    /// disk-usage throttle first (on `runtime`, or the current one), so senders slow down.
    pub fn deliver(self, outcome: Outcome, runtime: Option<&tokio::runtime::Handle>) {
        let metrics = &self.state.metrics;
        let (tx, points) = (self.tx, self.points);
        match outcome {
            Ok(()) => {
                metrics.record_write_latency(self.started.elapsed());
                metrics.native_transactions_completed.fetch_add(1, Ordering::Relaxed);
                let completed = Frame::Completed { tx, duplicate: false, points };
                match self.state.acknowledgement_delay() {
                    None => self.send(completed),
                    Some(delay) => {
                        let delayed = async move {
                            tokio::time::sleep(delay).await;
                            self.send(completed);
                        };
                        match runtime {
                            Some(runtime) => drop(runtime.spawn(delayed)),
                            None => drop(tokio::spawn(delayed)),
                        }
                    }
                }
            }
            Err(error) => {
                metrics.native_transactions_failed.fetch_add(1, Ordering::Relaxed);
                let code = engine_error_code(&error);
                tracing::warn!(%tx, %error, "native transaction failed");
                self.send(error_frame(code, false, Some(tx), 0, format!("transaction {tx} not stored: {error}")));
            }
        }
    }

    /// Answers that the transaction was completed before, with `points`.
    pub(super) fn already_completed(self, points: u64) {
        self.state.metrics.native_transactions_completed.fetch_add(1, Ordering::Relaxed);
        let tx = self.tx;
        self.send(Frame::Completed { tx, duplicate: true, points });
    }

    /// Answers with `frame` now; the transaction is no longer completing.
    fn send(self, frame: Frame) {
        self.completing.remove(&self.tx);
        if let Some(out) = self.out {
            for frame in self.before {
                let _ = out.send(frame);
            }
            let _ = out.send(frame);
        }
    }
}

pub(super) fn error_frame(code: ErrorCode, fatal: bool, tx: Option<TxId>, context: u32, message: impl Into<String>) -> Frame {
    Frame::Error { code, fatal, tx, context, message: message.into() }
}

pub(super) fn engine_error_code(error: &EngineError) -> ErrorCode {
    match error {
        EngineError::NoSpace { .. } => ErrorCode::NoSpace,
        EngineError::KindMismatch { .. } => ErrorCode::KindMismatch,
        EngineError::PayloadTooLarge { .. } | EngineError::RecordTooLarge { .. } => ErrorCode::PayloadTooLarge,
        EngineError::InvalidSeriesKey(_) => ErrorCode::InvalidSeriesKey,
        EngineError::UnknownSeries(_) => ErrorCode::UnknownSeries,
        EngineError::SeriesLimit { .. } => ErrorCode::SeriesLimitExceeded,
        _ => ErrorCode::Storage,
    }
}
