//! COMPLETE on a native connection: the checks against what was confirmed, then the hand-off of
//! the transaction's batch, straight to the [`Committer`] in the common case, or to a
//! completion task ([`finish`]) when that may mean waiting (a large batch, a disk that is full
//! or about to be, an id another connection is completing, a full committer queue). With
//! `[cassandra] ack = "cassandra"` an id the node's window does not know may have been completed
//! on another node: the committer looks up a small transaction's id with its group's others
//! (one round of reads a group); [`finish`] looks up a large one's itself.

use super::Connection;
use crate::native::answer::{error_frame, Answer, Outcome};
use crate::native::committer::{Committer, Job, Reply, SMALL_TRANSACTION_BYTES};
use crate::native::transaction::{HeldBytes, OpenTransaction};
use crate::native::txlog::{now_ns, Begin, TxKey, TxLog};
use sensordb_engine::{Admission, Error as EngineError, WriteBatch};
use sensordb_protocol::frame::{ErrorCode, Frame, TxId};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl Connection {
    /// COMPLETE, or with `expected` (the client's checksum, bytes and points) COMPLETE_CHECKED,
    /// which stores the transaction only if the server received exactly that. `first_attempt`
    /// (COMPLETE_FIRST): the client never completed this id before, anywhere, so no other node's
    /// completions need be looked up.
    pub(super) fn complete(&mut self, client_id: [u8; 16], tx: TxId, expected: Option<(u32, u64, u64)>, first_attempt: bool) {
        let confirmed = self.open.get(&tx).map(|open| (open.confirmed, (open.crc, open.bytes, open.points)));
        match confirmed {
            Some((true, received)) => {
                if let Some(expected) = expected.filter(|&expected| expected != received) {
                    self.roll_back(tx);
                    let ((crc, bytes, points), (their_crc, their_bytes, their_points)) = (received, expected);
                    return self.send(error_frame(
                        ErrorCode::ChecksumMismatch,
                        false,
                        Some(tx),
                        0,
                        format!(
                            "transaction {tx} rolled back: received crc32c {crc:#010x}, {bytes} bytes, {points} points; \
                         the client sent crc32c {their_crc:#010x}, {their_bytes} bytes, {their_points} points"
                        ),
                    ));
                }
            }
            Some((false, _)) => {
                return self.send(error_frame(
                    ErrorCode::WrongState,
                    false,
                    Some(tx),
                    0,
                    format!("COMPLETE for transaction {tx} before CONFIRM"),
                ));
            }
            None => {
                // A retry may go straight to COMPLETE for an id that was completed before.
                if let Some(points) = self.txlog.lookup(&(client_id, tx.0)) {
                    return self.send(Frame::Completed { tx, duplicate: true, points });
                }
                return self.not_open(tx, "COMPLETE");
            }
        }
        let Some(open) = self.open.remove(&tx) else { return };
        self.open_bytes -= open.bytes;
        self.completing.insert(tx);
        let answer = Answer {
            state: self.state.clone(),
            out: self.out.clone(),
            before: self.take_outgoing_of(tx),
            completing: self.completing.clone(),
            tx,
            answers: self.answering,
            points: open.points,
            started: Instant::now(),
        };
        let key = (client_id, tx.0);
        let OpenTransaction { batch, points, held, .. } = open;
        // The common case answers without a task: a small batch, room on the disk, an id
        // nobody else is completing, room in the committer's queue.
        let small = batch.value_bytes() <= SMALL_TRANSACTION_BYTES;
        // With acknowledgements in Cassandra an id unknown here may have been completed on
        // another node: the committer looks it up (with its group's others) before writing.
        let look_up = acks_in_cassandra(&self.state) && !first_attempt;
        if small && self.state.engine.admit(Instant::now()).is_ok_and(|admission| admission != Admission::WaitForSpace) {
            match self.txlog.try_begin(key) {
                Some(Begin::Known(points)) => {
                    drop(held);
                    return answer.already_completed(points);
                }
                Some(Begin::Started(guard)) => {
                    let job = Job { batch, points, guard, held, reply: Reply::Connection(answer), look_up };
                    if let Err(job) = self.committer.try_submit(job) {
                        let committer = self.committer.clone();
                        tokio::spawn(async move { committer.submit(job).await });
                    }
                    return;
                }
                None => {}
            }
        }
        let (txlog, committer) = (self.txlog.clone(), self.committer.clone());
        tokio::spawn(finish(txlog, committer, key, batch, points, held, answer, look_up));
    }
}

/// Makes a transaction durable (once) and answers its COMPLETE, when that may mean waiting;
/// with `look_up`, first asks whether another node completed the id (a large transaction's own
/// lookup; a small one's is the committer's).
// The transaction's parts as the connection hands them over; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
async fn finish(
    txlog: Arc<TxLog>,
    committer: Arc<Committer>,
    key: TxKey,
    batch: WriteBatch,
    points: u64,
    held: Vec<HeldBytes>,
    mut answer: Answer,
    look_up: bool,
) {
    let state = answer.state.clone();
    let guard = match txlog.begin(key).await {
        Begin::Known(points) => {
            // Permits go before the answer leaves: once answered, the bytes are released.
            drop(held);
            return answer.already_completed(points);
        }
        Begin::Started(guard) => guard,
    };
    let small = batch.value_bytes() <= SMALL_TRANSACTION_BYTES;
    if look_up && !small {
        // (A small one is looked up by the committer, with its group's others.)
        // A retry sent here after its first attempt completed on another node: that node
        // logged the id in Cassandra with the points (see sensordb-cassandra's `wal`).
        let engine = state.engine.clone();
        let (client, tx) = key;
        let found = tokio::task::spawn_blocking(move || engine.logged_mark(&client, &tx)).await;
        match found {
            Ok(Ok(Some(mark))) => {
                drop(held);
                let points = mark.points;
                txlog.remember_all(vec![(guard, mark)]);
                return answer.already_completed(points);
            }
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                // Unknown whether it completed elsewhere: the client retries.
                drop(held);
                return answer.deliver(Err(Arc::new(error)), None);
            }
            Err(_) => {
                drop(held);
                return answer.deliver(Err(Arc::new(EngineError::Closed)), None);
            }
        }
    }
    if let Err(error) = state.wait_for_space().await {
        drop(held);
        return answer.deliver(Err(Arc::new(error)), None);
    }
    answer.started = Instant::now();
    if small {
        return committer.submit(Job { batch, points, guard, held, reply: Reply::Connection(answer), look_up }).await;
    }
    let writer = state.clone();
    let task = tokio::task::spawn_blocking(move || {
        if writer.engine.logs_marks() {
            // The id in the WAL record of the points, as the committer writes it.
            let mark = guard.mark(points, now_ns());
            writer.engine.write_with_marks(&batch, &[mark]).map_err(Arc::new)?;
            writer.metrics.points_written.fetch_add(points, Ordering::Relaxed);
            txlog.remember_all(vec![(guard, mark)]);
            return Ok(());
        }
        if !batch.is_empty() {
            writer.engine.write(&batch).map_err(Arc::new)?;
        }
        // Counted before the id is recorded, as the committer does.
        writer.metrics.points_written.fetch_add(points, Ordering::Relaxed);
        if let Err(error) = guard.record(points) {
            // The points are durable; only a retry after a restart could write them
            // again, which stores nothing twice (same series, timestamps and values).
            tracing::warn!(%error, "cannot record a completed transaction id");
        }
        Ok(())
    });
    let path = state.engine.data_dir().to_path_buf();
    let written: Outcome = task
        .await
        .unwrap_or_else(|error| Err(Arc::new(EngineError::Io { path, source: std::io::Error::other(format!("write task: {error}")) })));
    drop(held);
    answer.deliver(written, None);
}

/// Whether this server acknowledges writes once they are in Cassandra (`[cassandra] ack`), and
/// so looks up in Cassandra the completed transaction ids it does not know.
fn acks_in_cassandra(state: &crate::state::ServerState) -> bool {
    state.config.cassandra.as_ref().is_some_and(|c| c.acks_in_cassandra())
}
