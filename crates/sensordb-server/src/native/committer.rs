//! The committer: one thread that makes small transactions durable in groups.
//!
//! A COMPLETE of a small transaction (at most [`SMALL_TRANSACTION_BYTES`] of values) hands its
//! batch, its completion guard and how to answer it ([`Reply`]) to the committer
//! ([`Committer::try_submit`] from the connection itself, [`Committer::submit`] or
//! [`Committer::commit`] from a task). The committer thread takes every
//! transaction queued at that moment (at most [`GROUP_TRANSACTIONS_MAX`], or until
//! [`GROUP_VALUE_BYTES_MAX`]), writes their points and their completed ids (completion marks)
//! with one `Engine::write_with_marks` (one WAL record, one fdatasync under `fsync`), remembers
//! the ids in the completed-transaction log's memory, and answers each. One fdatasync per group:
//! the log's file is written by the engine's flushes, off this path (see `txlog`). Without a WAL
//! (durability `none`) the ids are appended to the log's file instead, unsynced. While it does
//! I/O the next group gathers in the queue: the busier the server, the larger the groups.
//!
//! It answers a connection's transaction itself, handing COMPLETED to the connection's writer
//! ([`Reply::Connection`]): no task per transaction waits for it, so a COMPLETE costs the
//! server's async workers one wake (the writer's) instead of four.
//!
//! Why a thread of its own: with a blocking-pool thread per transaction, 10,000 small
//! transactions a second cost more CPU in futex wake-ups and context switches (each writer
//! sleeping in the WAL's group commit, then in the log's) than in storing the points
//! (`docs/BENCHMARKS.md`, `bench tx`). Larger transactions still go to the blocking pool: there
//! several are written in parallel, and copying them into a group would cost more than the
//! hand-off saves.
//!
//! Atomicity and ordering: the group's merged batch is stored whole or not at all, so each
//! transaction's points are too, with the group's ids in the same WAL record (so an id is
//! durable exactly when its points are; without a WAL: data first, ids second). When the merged write fails for a
//! reason that may belong to one transaction (a kind mismatch, a series deleted meanwhile, a
//! value or WAL record too large), each transaction of the group is written alone, so only the
//! guilty one fails. Any other failure (disk full after the engine's wait, I/O, a stopped
//! engine) is the group's, and every transaction in it gets it, as each would have alone.
//!
//! One thread writes one group at a time, so anything that makes `Engine::write` sleep holds
//! up every small transaction: the server's engine does not throttle inside `write`
//! (`ServerConfig::engine_options`); the server delays acknowledgements itself, per transaction,
//! after the write.
//!
//! Groups in flight: with `[cassandra] ack = "cassandra"` a write returns only once its `wal`
//! row is in Cassandra, a network round trip during which the local disk and CPU are idle. There
//! the committer runs several threads (`groups_in_flight`, `[cassandra] commit_groups_in_flight`)
//! that share the queue: the free thread takes everything queued, so while some groups wait for
//! Cassandra the next one gathers and goes out; the bound (threads) and the queue's length are the
//! backpressure. Groups of concurrent threads are independent writes, as concurrent HTTP writes
//! are (`Engine::write` is safe to call from many threads; a transaction id is completed by one
//! group at a time, its `CompletionGuard` sees to that). Locally it stays one thread (above).
//!
//! Cluster-wide ids: a job marked `look_up` (a COMPLETE of an id the node's window does not know,
//! with `ack = "cassandra"`) may have been completed on another node. Its thread looks up all such
//! ids of the group at once (`Engine::logged_marks`, one concurrent round of reads), answers those
//! found *duplicate* without writing them, and writes the rest.

use super::answer::{Answer, Outcome};
use super::transaction::HeldBytes;
use super::txlog::{now_ns, CompletionGuard, TxLog};
use sensordb_engine::{Engine, Error as EngineError, TxMark, WriteBatch};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Transactions with at most this many bytes of values (8 per number) are written by the
/// committer; larger ones on the blocking pool.
pub const SMALL_TRANSACTION_BYTES: usize = 64 << 10;
/// Most transactions in one group.
const GROUP_TRANSACTIONS_MAX: usize = 1024;
/// A group takes no more transactions once it holds this many bytes of values.
const GROUP_VALUE_BYTES_MAX: usize = 4 << 20;
/// Transactions waiting for the committer; beyond it COMPLETEs wait to be queued.
const QUEUE_LEN: usize = 4096;

/// Told the points of each group's stored transactions, after they are durable and before
/// their ids are recorded (so a retry answered from the log never sees them uncounted).
pub type OnStored = Arc<dyn Fn(u64) + Send + Sync>;

/// Where a transaction's outcome goes.
pub enum Reply {
    /// To a task awaiting [`Committer::commit`].
    Waiter(oneshot::Sender<Outcome>),
    /// Straight to the connection (its writer), as the answer to COMPLETE.
    Connection(Answer),
}

/// One transaction for the committer.
pub struct Job {
    pub batch: WriteBatch,
    pub points: u64,
    pub guard: CompletionGuard,
    /// The received bytes' permits, released once the batch is written (or failed).
    pub held: Vec<HeldBytes>,
    pub reply: Reply,
    /// Look the id up among the marks other nodes logged before writing (see the module doc).
    pub look_up: bool,
}

/// The handle that queues transactions for the committer thread; the thread ends when every
/// handle is dropped, after the queued transactions.
pub struct Committer {
    queue: mpsc::Sender<Job>,
}

fn closed() -> Arc<EngineError> {
    Arc::new(EngineError::Closed)
}

/// The committer's threads; [`CommitterThreads::join`] them after dropping the [`Committer`].
pub struct CommitterThreads(Vec<std::thread::JoinHandle<()>>);

impl CommitterThreads {
    /// Waits for every thread; the first panic's payload if one panicked.
    pub fn join(self) -> std::thread::Result<()> {
        let mut outcome = Ok(());
        for thread in self.0 {
            if let Err(panic) = thread.join() {
                outcome = outcome.and(Err(panic));
            }
        }
        outcome
    }
}

impl Committer {
    /// Starts the committer with one thread (one group at a time, as without Cassandra).
    pub fn start(engine: Arc<Engine>, txlog: Arc<TxLog>, on_stored: OnStored) -> std::io::Result<(Committer, CommitterThreads)> {
        Committer::start_with(engine, txlog, on_stored, 1)
    }

    /// Starts the committer with `groups_in_flight` threads (at least one) sharing its queue:
    /// that many groups may be written at once (see the module doc).
    pub fn start_with(
        engine: Arc<Engine>,
        txlog: Arc<TxLog>,
        on_stored: OnStored,
        groups_in_flight: usize,
    ) -> std::io::Result<(Committer, CommitterThreads)> {
        let (queue, jobs) = mpsc::channel(QUEUE_LEN);
        let jobs = Arc::new(parking_lot::Mutex::new(jobs));
        // Answers delayed by the disk-usage throttle wait on the runtime, not on this thread.
        let runtime = tokio::runtime::Handle::current();
        let mut threads = Vec::new();
        for n in 0..groups_in_flight.max(1) {
            let (engine, txlog, on_stored, runtime, jobs) =
                (engine.clone(), txlog.clone(), on_stored.clone(), runtime.clone(), jobs.clone());
            let name = if n == 0 { "sensordb-commit".to_string() } else { format!("sensordb-commit-{n}") };
            let thread = std::thread::Builder::new().name(name).spawn(move || run(&engine, &txlog, &*on_stored, &runtime, &jobs));
            match thread {
                Ok(thread) => threads.push(thread),
                // The queue closes with the threads' receiver once the started ones end.
                Err(error) if threads.is_empty() => return Err(error),
                Err(error) => {
                    tracing::warn!(%error, started = threads.len(), "could not start every committer thread");
                    break;
                }
            }
        }
        Ok((Committer { queue }, CommitterThreads(threads)))
    }

    /// Queues `job` unless the queue is full (then it is given back) or the committer has
    /// stopped (then it is answered with `Closed`).
    // The job comes back by value: boxing it would cost an allocation per transaction to save
    // a move on the rare full queue.
    #[allow(clippy::result_large_err)]
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        match self.queue.try_send(job) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(job)) => Err(job),
            Err(mpsc::error::TrySendError::Closed(job)) => {
                job.refuse();
                Ok(())
            }
        }
    }

    /// Queues `job`, waiting for room.
    pub async fn submit(&self, job: Job) {
        debug_assert!(job.batch.value_bytes() <= SMALL_TRANSACTION_BYTES);
        if let Err(mpsc::error::SendError(job)) = self.queue.send(job).await {
            job.refuse();
        }
    }

    /// Writes `batch` durably, then records the transaction of `guard` as completed with
    /// `points`; returns once both are durable, or why the points were not stored (then the
    /// guard is dropped unrecorded and a retry may write).
    pub async fn commit(&self, batch: WriteBatch, points: u64, guard: CompletionGuard) -> Outcome {
        let (done, answer) = oneshot::channel();
        self.submit(Job { batch, points, guard, held: Vec::new(), reply: Reply::Waiter(done), look_up: false }).await;
        answer.await.unwrap_or_else(|_| Err(closed()))
    }
}

impl Job {
    /// Answers `Closed`, the byte permits released first (as every answer does).
    fn refuse(self) {
        let Job { held, reply, .. } = self;
        drop(held);
        reply.send(Err(closed()), None);
    }
}

impl Reply {
    /// Answers that the transaction was completed before (by another node), with `points`.
    fn already_completed(self, points: u64) {
        match self {
            Reply::Waiter(done) => drop(done.send(Ok(()))),
            Reply::Connection(answer) => answer.already_completed(points),
        }
    }

    fn send(self, outcome: Outcome, runtime: Option<&tokio::runtime::Handle>) {
        match self {
            // The task may have gone meanwhile; its transaction is stored all the same.
            Reply::Waiter(done) => drop(done.send(outcome)),
            Reply::Connection(answer) => answer.deliver(outcome, runtime),
        }
    }
}

/// Takes the next group: waits for one job, then takes what is queued behind it. Under the
/// queue's lock, so with several threads the one waiting takes the whole backlog.
fn next_group(jobs: &parking_lot::Mutex<mpsc::Receiver<Job>>, group: &mut Vec<Job>) -> bool {
    let mut jobs = jobs.lock();
    let Some(first) = jobs.blocking_recv() else { return false };
    let mut value_bytes = first.batch.value_bytes();
    group.push(first);
    while group.len() < GROUP_TRANSACTIONS_MAX && value_bytes < GROUP_VALUE_BYTES_MAX {
        match jobs.try_recv() {
            Ok(job) => {
                value_bytes += job.batch.value_bytes();
                group.push(job);
            }
            Err(_) => break,
        }
    }
    true
}

/// Answers the group's jobs whose ids another node completed (found in the store's marks) and
/// takes them out of `group`; on a failed lookup, answers every job that needed one with the
/// error (whether it completed elsewhere is unknown: the client retries).
fn answer_completed_elsewhere(engine: &Engine, txlog: &TxLog, group: &mut Vec<Job>) {
    let ids: Vec<([u8; 16], [u8; 16])> = group.iter().filter(|job| job.look_up).map(|job| job.guard.key()).collect();
    if ids.is_empty() {
        return;
    }
    let found = engine.logged_marks(&ids);
    let mut found = match found {
        Ok(found) => found.into_iter(),
        Err(error) => {
            let error = Arc::new(error);
            for job in group.extract_if(.., |job| job.look_up) {
                let Job { held, reply, .. } = job;
                drop(held);
                reply.send(Err(error.clone()), None);
            }
            return;
        }
    };
    let mut remembered = Vec::new();
    let mut kept = Vec::with_capacity(group.len());
    for job in group.drain(..) {
        let mark = if job.look_up { found.next().flatten() } else { None };
        match mark {
            Some(mark) => {
                let Job { guard, held, reply, .. } = job;
                drop(held);
                remembered.push((guard, mark));
                reply.already_completed(mark.points);
            }
            None => kept.push(job),
        }
    }
    *group = kept;
    if !remembered.is_empty() {
        txlog.remember_all(remembered);
    }
}

fn run(
    engine: &Engine,
    txlog: &TxLog,
    on_stored: &(dyn Fn(u64) + Send + Sync),
    runtime: &tokio::runtime::Handle,
    jobs: &parking_lot::Mutex<mpsc::Receiver<Job>>,
) {
    let mut merged = WriteBatch::new();
    let mut group = Vec::new();
    while next_group(jobs, &mut group) {
        answer_completed_elsewhere(engine, txlog, &mut group);
        if group.is_empty() {
            continue;
        }
        let logs_marks = engine.logs_marks();
        let at_ns = now_ns();
        let marks: Vec<TxMark> = if logs_marks { group.iter().map(|job| job.guard.mark(job.points, at_ns)).collect() } else { Vec::new() };
        let outcomes = write_group(engine, &mut merged, &group, &marks);
        debug_assert_eq!(outcomes.len(), group.len());
        let mut stored = Vec::with_capacity(group.len());
        let mut answers = Vec::with_capacity(group.len());
        for (job, outcome) in group.drain(..).zip(outcomes) {
            let Job { points, guard, reply, .. } = job;
            if outcome.is_ok() {
                stored.push((guard, points));
            }
            // A failed transaction's guard goes here, unrecorded, and its byte permits with
            // every job's batch.
            answers.push((reply, outcome));
        }
        on_stored(stored.iter().map(|(_, points)| points).sum());
        if logs_marks {
            // Durable already, in the WAL record with the points.
            let marked = stored.into_iter().map(|(guard, points)| {
                let mark = guard.mark(points, at_ns);
                (guard, mark)
            });
            txlog.remember_all(marked.collect());
        } else if let Err(error) = txlog.record_all(stored) {
            // The points are written; only a retry after a restart could write them again,
            // which stores nothing twice (same series, timestamps and values).
            tracing::warn!(%error, "cannot record completed transaction ids");
        }
        for (reply, outcome) in answers {
            reply.send(outcome, Some(runtime));
        }
    }
}

/// Writes the group's batches, merged into one write when there are several, with `marks`
/// (one per job, in order, or none when the engine keeps no WAL); one outcome per job, in order.
fn write_group(engine: &Engine, merged: &mut WriteBatch, group: &[Job], marks: &[TxMark]) -> Vec<Outcome> {
    debug_assert!(marks.is_empty() || marks.len() == group.len());
    let alone = |(i, job): (usize, &Job)| -> Outcome {
        let mark = marks.get(i..=i).unwrap_or(&[]);
        if job.batch.is_empty() && mark.is_empty() {
            return Ok(());
        }
        engine.write_with_marks(&job.batch, mark).map_err(Arc::new)
    };
    if group.len() == 1 {
        return group.iter().enumerate().map(alone).collect();
    }
    merged.clear();
    let mut mergeable = true;
    'merge: for job in group {
        for entry in job.batch.entries() {
            // A series has one kind; should two batches disagree, each is written alone.
            if merged.push_column(entry.series, &entry.timestamps, &entry.values).is_err() {
                mergeable = false;
                break 'merge;
            }
        }
    }
    if !mergeable {
        return group.iter().enumerate().map(alone).collect();
    }
    let written = if merged.is_empty() && marks.is_empty() { Ok(()) } else { engine.write_with_marks(merged, marks) };
    match written {
        Ok(()) => group.iter().map(|_| Ok(())).collect(),
        Err(error) if may_belong_to_one(&error) => group.iter().enumerate().map(alone).collect(),
        Err(error) => {
            let error = Arc::new(error);
            group.iter().map(|_| Err(error.clone())).collect()
        }
    }
}

/// True for errors caused by some points of a batch rather than by the store's state.
fn may_belong_to_one(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::KindMismatch { .. }
            | EngineError::UnknownSeries(_)
            | EngineError::SeriesDeleted(_)
            | EngineError::PayloadTooLarge { .. }
            | EngineError::RecordTooLarge { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::txlog::{Begin, TxLogOptions};
    use sensordb_engine::{Durability, EngineOptions, SeriesId, SeriesKey, Value, ValueKind};

    async fn job(log: &Arc<TxLog>, n: u8, series: SeriesId, timestamps: std::ops::Range<i64>) -> (Job, oneshot::Receiver<Outcome>) {
        let Begin::Started(guard) = log.begin(([1; 16], [n; 16])).await else { panic!("new id") };
        let mut batch = WriteBatch::new();
        for t in timestamps {
            batch.push(series, t, Value::F64(t as f64)).expect("push");
        }
        let (done, answer) = oneshot::channel();
        (Job { points: batch.len() as u64, batch, guard, held: Vec::new(), reply: Reply::Waiter(done), look_up: false }, answer)
    }

    #[tokio::test]
    async fn a_group_is_one_write_and_a_failing_transaction_fails_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(dir.path(), EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine");
        let (log, _) = TxLog::open(dir.path(), TxLogOptions { sync: false, ..Default::default() }).expect("log");
        let key = |name: &str| SeriesKey::new("m", [("s", name)], "v").expect("key");
        let live = engine.series_id(&key("live"), ValueKind::F64).expect("series");
        let doomed = engine.series_id(&key("doomed"), ValueKind::F64).expect("series");
        assert_eq!(engine.delete_series("default", Some("m"), &[("s", "doomed")]).expect("deleted"), 1);

        let mut merged = WriteBatch::new();
        let (a, _) = job(&log, 1, live, 0..10).await;
        let (b, _) = job(&log, 2, doomed, 0..10).await;
        let (c, _) = job(&log, 3, live, 10..25).await;
        let outcomes = write_group(&engine, &mut merged, &[a, b, c], &[]);
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(matches!(&outcomes[1], Err(error) if matches!(**error, EngineError::SeriesDeleted(_))), "{outcomes:?}");
        let stored: Vec<i64> = engine.read(live, i64::MIN, i64::MAX).points().map(|p| p.expect("reads").timestamp).collect();
        assert_eq!(stored, (0..25).collect::<Vec<_>>());

        // Through the thread: every queued transaction answered, ids recorded once durable.
        let engine = Arc::new(engine);
        let (counted, on_stored) = counting_on_stored();
        let (committer, thread) = Committer::start(engine.clone(), log.clone(), on_stored).expect("committer");
        let committer = Arc::new(committer);
        let commits: Vec<_> = (10u8..40)
            .map(|n| {
                let (log, committer) = (log.clone(), committer.clone());
                tokio::spawn(async move {
                    let Begin::Started(guard) = log.begin(([2; 16], [n; 16])).await else { panic!("new id") };
                    let mut batch = WriteBatch::new();
                    let t = 100 + i64::from(n);
                    batch.push(live, t, Value::F64(t as f64)).expect("push");
                    committer.commit(batch, 1, guard).await
                })
            })
            .collect();
        for commit in commits {
            commit.await.expect("joins").expect("stored");
        }
        drop(committer);
        thread.join().expect("the thread ends with its last handle");
        assert_eq!(log.lookup(&([2; 16], [39; 16])), Some(1));
        assert_eq!(engine.read(live, 100, 200).points().count(), 30);
        assert_eq!(counted.load(std::sync::atomic::Ordering::Relaxed), 30);
    }

    /// A stored-points callback and the count it keeps.
    fn counting_on_stored() -> (Arc<std::sync::atomic::AtomicU64>, OnStored) {
        let counted = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let on_stored: OnStored = {
            let counted = counted.clone();
            Arc::new(move |points| {
                counted.fetch_add(points, std::sync::atomic::Ordering::Relaxed);
            })
        };
        (counted, on_stored)
    }

    /// Several groups in flight (as with `ack = "cassandra"`): every transaction of many
    /// concurrent ones is stored once and remembered, whichever thread took it; jobs marked
    /// `look_up` that no store knows are written like the others.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn groups_in_flight_store_every_transaction_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine =
            Arc::new(Engine::open(dir.path(), EngineOptions { durability: Durability::Os, ..Default::default() }).expect("engine"));
        let (log, _) = TxLog::open(dir.path(), TxLogOptions { sync: false, ..Default::default() }).expect("log");
        engine.set_mark_sink(Some(log.clone()));
        let series = engine.series_id(&SeriesKey::new("m", [("s", "many")], "v").expect("key"), ValueKind::F64).expect("series");
        let (counted, on_stored) = counting_on_stored();
        let (committer, threads) = Committer::start_with(engine.clone(), log.clone(), on_stored, 3).expect("committer");
        assert_eq!(threads.0.len(), 3);
        let committer = Arc::new(committer);
        let commits: Vec<_> = (0u8..60)
            .map(|n| {
                let (log, committer) = (log.clone(), committer.clone());
                tokio::spawn(async move {
                    let Begin::Started(guard) = log.begin(([6; 16], [n; 16])).await else { panic!("new id") };
                    let mut batch = WriteBatch::new();
                    batch.push(series, i64::from(n), Value::F64(f64::from(n))).expect("push");
                    let (done, answer) = oneshot::channel();
                    let job = Job { batch, points: 1, guard, held: Vec::new(), reply: Reply::Waiter(done), look_up: n % 2 == 0 };
                    committer.submit(job).await;
                    answer.await.expect("answered")
                })
            })
            .collect();
        for commit in commits {
            commit.await.expect("joins").expect("stored");
        }
        drop(committer);
        threads.join().expect("every thread ends with the last handle");
        assert_eq!(engine.read(series, 0, 100).points().count(), 60);
        assert_eq!(counted.load(std::sync::atomic::Ordering::Relaxed), 60, "each counted once");
        assert!((0u8..60).all(|n| log.lookup(&([6; 16], [n; 16])) == Some(1)), "every id remembered");
    }

    /// A commit group costs one fdatasync, the WAL's: the ids travel in its record, and the
    /// log's file is written (and synced) by the engine's flush, off the commit path. Before,
    /// each group also synced the log's file.
    #[tokio::test]
    async fn a_commit_group_costs_one_fdatasync_and_a_flush_checkpoints_its_ids() {
        use sensordb_engine::test_support::fs::FaultyFs;
        use sensordb_engine::RealFs;
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = Arc::new(FaultyFs::new(Arc::new(RealFs)));
        let options = EngineOptions { durability: Durability::Fsync, fs: fs.clone(), ..Default::default() };
        let engine = Arc::new(Engine::open(dir.path(), options).expect("engine"));
        let (log, _) = TxLog::open(dir.path(), TxLogOptions::default()).expect("log");
        engine.set_mark_sink(Some(log.clone()));
        let series = engine.series_id(&SeriesKey::new("m", [("s", "one")], "v").expect("key"), ValueKind::F64).expect("series");
        let mut first = WriteBatch::new();
        first.push(series, 0, Value::F64(0.0)).expect("push");
        // The new series' catalog sync, out of the count.
        engine.write(&first).expect("written");

        let (committer, thread) = Committer::start(engine.clone(), log.clone(), Arc::new(|_| {})).expect("committer");
        let (syncs_before, log_syncs_before) = (fs.data_syncs(), log.appends_synced());
        for n in 1..=5u8 {
            let Begin::Started(guard) = log.begin(([4; 16], [n; 16])).await else { panic!("new id") };
            let mut batch = WriteBatch::new();
            batch.push(series, i64::from(n), Value::F64(1.0)).expect("push");
            // One at a time: each commit is a group of its own.
            committer.commit(batch, 1, guard).await.expect("stored");
        }
        assert_eq!(fs.data_syncs() - syncs_before, 5, "one fdatasync per group");
        assert_eq!(log.appends_synced(), log_syncs_before, "none of the log's");
        assert_eq!(log.lookup(&([4; 16], [5; 16])), Some(1), "remembered");
        drop(committer);
        thread.join().expect("the thread ends");

        engine.flush().expect("flushed");
        assert_eq!(log.appends_synced(), log_syncs_before + 1, "the flush checkpointed the ids with one sync");
        drop(log);
        let (reopened, report) = TxLog::open(dir.path(), TxLogOptions::default()).expect("reopened");
        assert_eq!(report.loaded, 5, "the checkpoint holds every id of the flushed data");
        assert_eq!(reopened.lookup(&([4; 16], [3; 16])), Some(1));
    }
}
