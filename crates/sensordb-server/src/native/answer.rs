//! The answer to a COMPLETE, whoever gives it (the connection itself, the committer thread or a
//! completion task): [`Answer`] carries what is needed to count the write's [`Outcome`] and
//! send COMPLETED or the ERROR to the connection's writer, and [`Completing`] tracks a
//! connection's transactions between COMPLETE and that answer. Its own module so that the
//! connection and the committer both use it and neither imports the other back (the connection
//! hands jobs to the committer; the committer never needs the connection).

use crate::state::ServerState;
use sensordb_engine::Error as EngineError;
use sensordb_protocol::frame::{ErrorCode, Frame, TxId};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, Notify};

/// The outcome of one transaction's write.
pub type Outcome = Result<(), Arc<EngineError>>;

/// The transactions of one connection between COMPLETE and its answer. Shared with whoever
/// answers them (the committer thread, completion tasks), which remove them.
///
/// Answers of one transaction leave in the order of its frames: the answer to a frame of a
/// transaction being completed (a CANCEL, a second CREATE, ...) is deferred here and sent right
/// after the COMPLETE's own answer, under the same lock, so no answer of that transaction can
/// overtake it.
#[derive(Default)]
pub struct Completing {
    /// Each transaction being completed, with the answers deferred until its COMPLETE's.
    ids: parking_lot::Mutex<HashMap<TxId, Vec<Frame>>>,
    /// Told when the last one is answered.
    emptied: Notify,
}

impl Completing {
    pub(super) fn contains(&self, tx: &TxId) -> bool {
        self.ids.lock().contains_key(tx)
    }

    /// Defers `frame`, an answer naming `tx`, until the answer of `tx`'s COMPLETE if `tx` is
    /// being completed; otherwise gives it back.
    pub(super) fn defer(&self, tx: &TxId, frame: Frame) -> Result<(), Frame> {
        match self.ids.lock().get_mut(tx) {
            Some(deferred) => {
                deferred.push(frame);
                Ok(())
            }
            None => Err(frame),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ids.lock().is_empty()
    }

    pub(super) fn insert(&self, tx: TxId) {
        self.ids.lock().insert(tx, Vec::new());
    }

    /// Ends `tx`'s completion: hands `answer` (the frames held for it and its COMPLETED or
    /// ERROR) and then the answers deferred meanwhile to `out`, all under the lock, so an answer
    /// of `tx` handled after this leaves after them.
    fn finish(&self, tx: &TxId, answer: Vec<Frame>, out: Option<&mpsc::UnboundedSender<Frame>>) {
        let mut ids = self.ids.lock();
        let deferred = ids.remove(tx).unwrap_or_default();
        if let Some(out) = out {
            for frame in answer.into_iter().chain(deferred) {
                let _ = out.send(frame);
            }
        }
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
    /// The `context` of an ERROR answering the COMPLETE: from version 3 the type of the frame
    /// answered (COMPLETE or COMPLETE_CHECKED), else 0.
    pub(super) answers: u32,
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
                let context = self.answers;
                self.send(error_frame(code, false, Some(tx), context, format!("transaction {tx} not stored: {error}")));
            }
        }
    }

    /// Answers that the transaction was completed before, with `points`.
    pub(super) fn already_completed(self, points: u64) {
        self.state.metrics.native_transactions_completed.fetch_add(1, Ordering::Relaxed);
        let tx = self.tx;
        self.send(Frame::Completed { tx, duplicate: true, points });
    }

    /// Answers with `frame` now (after the frames held for it, before those deferred); the
    /// transaction is no longer completing.
    fn send(self, frame: Frame) {
        let mut answer = self.before;
        answer.push(frame);
        self.completing.finish(&self.tx, answer, self.out.as_ref());
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
