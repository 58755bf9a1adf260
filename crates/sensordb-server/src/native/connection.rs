//! One native-protocol connection.
//!
//! Three tasks: the reader parses frames, taking `in_flight_bytes` permits for each frame body
//! *before* reading it (a sender beyond the limit is not read from: TCP backpressure); the state
//! machine ([`Connection`]) handles frames in order; the writer sends answers, batching those
//! that are ready together. A COMPLETE hands the transaction's batch on with an [`Answer`](super::answer::Answer), so
//! later frames and other transactions go on while it becomes durable; its answer carries the
//! transaction id. A small batch goes straight to the [`Committer`], which writes many
//! transactions' batches together and hands each COMPLETED to the writer itself. A completion
//! task is spawned only for the rest: a large batch (written on the blocking pool), a disk
//! that is full or about to be, an id another connection is completing, a full committer
//! queue.
//!
//! Errors: a frame whose framing cannot be trusted (bad checksum, too long, reserved bits set),
//! a frame before a successful HELLO and a failed HELLO (malformed included) get a fatal ERROR, then the connection
//! is closed (after draining what the peer still sends, briefly, so the ERROR is not lost to a
//! reset). Everything else gets a non-fatal ERROR (naming the transaction, which is rolled back
//! if it was open) and the connection goes on.
//!
//! Hostile clients: before a successful HELLO frames are capped at the longest HELLO and take
//! no `in_flight_bytes` permits (see `io`), and a connection still without one after
//! `hello_timeout_ms` is closed. While the reader waits for permits the client's idle and
//! transaction clocks stop: the server is holding it back, it is not idle.
//!
//! This file holds the state machine; `io` the reader and writer tasks, `complete` the handling
//! of COMPLETE and the completion task.

mod complete;
mod io;

use super::answer::{engine_error_code, error_frame, Completing};
use super::committer::Committer;
use super::transaction::{HeldBytes, OpenTransaction};
use super::txlog::TxLog;
use crate::auth::{AuthError, Scope};
use crate::state::{ServerState, ShutdownSignal};
use bytes::Bytes;
use io::{read_loop, write_loop, HeldBack, Incoming, ReaderLink};
use sensordb_engine::{SeriesId, SeriesKey, ValueKind};
use sensordb_protocol::frame::{
    ErrorCode, Frame, Peer, TxId, ANSWERED_FRAME_VERSION, CHECKED_COMPLETE_VERSION, FIRST_ATTEMPT_VERSION, MIN_VERSION, PEERS_MAX,
    PEERS_VERSION, VERSION,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

/// Most transactions open at once on one connection.
pub const MAX_OPEN_TRANSACTIONS: usize = 1024;
/// Most short series ids defined on one connection.
pub const MAX_SERIES_PER_CONNECTION: usize = 1 << 20;
/// How long a closing connection keeps reading (and discarding) so its last ERROR arrives.
const LINGER: Duration = Duration::from_millis(500);
/// Frames read and not yet handled, per connection. Room for a pipelined transaction's frames
/// lets the reader queue them all from one `read` before the state machine runs, so their
/// answers (CREATED, CONFIRMED) leave in one write. Each queued frame holds its byte permits.
const INCOMING_FRAMES_MAX: usize = 16;
/// Answers held back while more frames of the same burst wait to be handled; beyond this many
/// they are handed to the writer anyway (a client that never pauses still gets its answers).
const OUTGOING_FRAMES_MAX: usize = 64;

enum Flow {
    Continue,
    Close,
}

/// The state machine of one connection.
pub struct Connection {
    state: Arc<ServerState>,
    txlog: Arc<TxLog>,
    committer: Arc<Committer>,
    peer: SocketAddr,
    out: Option<mpsc::UnboundedSender<Frame>>,
    /// Answers of the frames handled since the last hand-off to the writer (see `flush`).
    outgoing: Vec<Frame>,
    client_id: Option<[u8; 16]>,
    /// The protocol version negotiated in HELLO.
    version: u16,
    series: HashMap<u32, (SeriesId, ValueKind)>,
    open: HashMap<TxId, OpenTransaction>,
    open_bytes: u64,
    completing: Arc<Completing>,
    /// Told to the reader once HELLO succeeded (it reads frames longer than a HELLO only then).
    authenticated: watch::Sender<bool>,
    /// Whether the reader waits for byte permits: the client's clocks stop meanwhile.
    held_back: Arc<HeldBack>,
    /// From version 3, the type of the transaction frame being handled: the `context` of the
    /// ERRORs naming a transaction that answer it. 0 otherwise (and for timeouts).
    answering: u32,
}

impl Connection {
    pub fn new(state: Arc<ServerState>, txlog: Arc<TxLog>, committer: Arc<Committer>, peer: SocketAddr) -> Self {
        Connection {
            state,
            txlog,
            committer,
            peer,
            out: None,
            outgoing: Vec::new(),
            client_id: None,
            version: MIN_VERSION,
            series: HashMap::new(),
            open: HashMap::new(),
            open_bytes: 0,
            completing: Arc::new(Completing::default()),
            authenticated: watch::Sender::new(false),
            held_back: Arc::new(HeldBack::default()),
            answering: 0,
        }
    }

    /// Serves the connection to its end; `_permit` is its `connections` slot.
    pub async fn run(self, stream: TcpStream, shutdown: ShutdownSignal, permit: OwnedSemaphorePermit) {
        let _ = stream.set_nodelay(true);
        let (read_half, write_half) = stream.into_split();
        self.run_halves(read_half, write_half, shutdown, permit).await;
    }

    /// [`Connection::run`] over any byte stream (a TLS session, say).
    pub async fn run_io<S>(self, stream: S, shutdown: ShutdownSignal, permit: OwnedSemaphorePermit)
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read_half, write_half) = tokio::io::split(stream);
        self.run_halves(read_half, write_half, shutdown, permit).await;
    }

    async fn run_halves<R, W>(mut self, read_half: R, write_half: W, shutdown: ShutdownSignal, _permit: OwnedSemaphorePermit)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let metrics = &self.state.metrics;
        metrics.connections_accepted.fetch_add(1, Ordering::Relaxed);
        metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        self.out = Some(out_tx);
        let writer = tokio::spawn(write_loop(write_half, out_rx));
        let (in_tx, in_rx) = mpsc::channel(INCOMING_FRAMES_MAX);
        let link = ReaderLink { incoming: in_tx, authenticated: self.authenticated.subscribe(), held_back: self.held_back.clone() };
        let mut reader = tokio::spawn(read_loop(read_half, self.state.clone(), link));
        self.process(in_rx, shutdown).await;
        let state = self.state.clone();
        drop(self);
        let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
        if tokio::time::timeout(LINGER, &mut reader).await.is_err() {
            reader.abort();
        }
        state.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Queues an answer. Answers go to the writer once the frames already read are handled
    /// (`flush`), so the answers to one burst of pipelined frames leave in one write, and
    /// those of a transaction completed in the same burst leave with its COMPLETED.
    ///
    /// An answer naming a transaction being completed waits for the COMPLETE's answer and
    /// follows it ([`Completing::defer`]): answers of one transaction leave in order.
    fn send(&mut self, mut frame: Frame) {
        if let Frame::Error { tx: Some(_), context: context @ 0, .. } = &mut frame {
            *context = self.answering;
        }
        let frame = match frame.tx() {
            Some(tx) if !self.completing.is_empty() => match self.completing.defer(&tx, frame) {
                Ok(()) => return,
                Err(frame) => frame,
            },
            _ => frame,
        };
        self.outgoing.push(frame);
        if self.outgoing.len() >= OUTGOING_FRAMES_MAX {
            self.flush();
        }
    }

    /// Hands the queued answers to the writer.
    fn flush(&mut self) {
        if let Some(out) = &self.out {
            for frame in self.outgoing.drain(..) {
                let _ = out.send(frame);
            }
        } else {
            self.outgoing.clear();
        }
    }

    /// Takes the queued answers of `tx` (its CREATED and CONFIRMED, say), in order, so they
    /// can be sent just before its COMPLETED: one write for the whole transaction.
    fn take_outgoing_of(&mut self, tx: TxId) -> Vec<Frame> {
        if !self.outgoing.iter().any(|frame| frame.tx() == Some(tx)) {
            return Vec::new();
        }
        let (mine, others) = std::mem::take(&mut self.outgoing).into_iter().partition(|frame| frame.tx() == Some(tx));
        self.outgoing = others;
        mine
    }

    async fn process(&mut self, mut incoming: mpsc::Receiver<Incoming>, mut shutdown: ShutdownSignal) {
        let config = &self.state.config;
        let tx_timeout = Duration::from_millis(config.transaction_timeout_ms.max(1));
        let idle_timeout = Duration::from_millis(config.idle_timeout_ms.max(1));
        let hello_timeout_ms = config.hello_timeout_ms.max(1);
        let hello_deadline = Instant::now() + Duration::from_millis(hello_timeout_ms);
        // Timeouts are checked when the earliest deadline known at the last check comes, and at
        // least every `check_max`. Frames only move deadlines later, and a transaction opened
        // after a check expires after that check's `now + check_max`, so a check is never late.
        // The idle deadline is looked at once nothing is open or completing, so a connection
        // left idle by a completion closes up to `check_max` after its idle timeout. A busy
        // connection is thus woken about once per timeout, not once per period.
        // While the reader waits for byte permits the server is holding the client back: its
        // clocks (idle, transactions) stop, and start again from the end of the hold.
        let check_max = tx_timeout.min(idle_timeout);
        let timer = tokio::time::sleep_until(hello_deadline.min(Instant::now() + check_max).into());
        tokio::pin!(timer);
        // One registration with the shutdown signal for the whole loop.
        let stopping = shutdown.changed();
        tokio::pin!(stopping);
        let mut last_frame = Instant::now();
        loop {
            tokio::select! {
                message = incoming.recv() => match message {
                    None => break,
                    Some(Incoming::Frame(frame, held)) => {
                        last_frame = Instant::now();
                        if let Flow::Close = self.handle(frame, held).await {
                            break;
                        }
                    }
                    Some(Incoming::Bad { error, fatal, context }) => {
                        last_frame = Instant::now();
                        tracing::debug!(peer = %self.peer, %error, fatal, "bad frame");
                        self.send(error_frame(error.code(), fatal, None, context, error.to_string()));
                        if fatal {
                            break;
                        }
                    }
                },
                () = &mut timer => {
                    let now = Instant::now();
                    if self.client_id.is_none() && now >= hello_deadline {
                        self.state.metrics.native_hello_timeouts.fetch_add(1, Ordering::Relaxed);
                        self.send(error_frame(ErrorCode::IdleTimeout, true, None, 0,
                            format!("no successful HELLO within {} ms of connecting: closing", hello_timeout_ms)));
                        break;
                    }
                    let held_back = self.held_back.clone();
                    let expired: Vec<TxId> = self.open.iter()
                        .filter(|(_, tx)| held_back.client_clock_from(tx.last_activity).is_some_and(|from| now.duration_since(from) >= tx_timeout))
                        .map(|(id, _)| *id)
                        .collect();
                    for id in expired {
                        self.roll_back(id);
                        self.send(error_frame(ErrorCode::TransactionTimeout, false, Some(id), 0,
                            format!("transaction {id} rolled back: no frame for {} ms", tx_timeout.as_millis())));
                    }
                    // `None` while held back: the client is waiting for the server, not idle.
                    let idle_from = held_back.client_clock_from(last_frame);
                    let busy = !self.open.is_empty() || !self.completing.is_empty();
                    if let Some(idle_from) = idle_from.filter(|from| !busy && now.duration_since(*from) >= idle_timeout) {
                        tracing::debug!(peer = %self.peer, idle_ms = now.duration_since(idle_from).as_millis(), "closing an idle connection");
                        self.state.metrics.connections_closed_idle.fetch_add(1, Ordering::Relaxed);
                        self.send(error_frame(ErrorCode::IdleTimeout, true, None, 0,
                            format!("no frame for {} ms: closing", idle_timeout.as_millis())));
                        break;
                    }
                    let mut next = now + check_max;
                    for tx in self.open.values() {
                        if let Some(from) = held_back.client_clock_from(tx.last_activity) {
                            next = next.min(from + tx_timeout);
                        }
                    }
                    if let Some(from) = idle_from.filter(|_| !busy) {
                        next = next.min(from + idle_timeout);
                    }
                    if self.client_id.is_none() {
                        next = next.min(hello_deadline);
                    }
                    timer.as_mut().reset(next.into());
                }
                _ = &mut stopping => {
                    self.send(error_frame(ErrorCode::ShuttingDown, true, None, 0, "the server is shutting down"));
                    break;
                }
            }
            if incoming.is_empty() {
                self.flush();
            }
        }
        self.flush();
        drop(incoming);
        let open: Vec<TxId> = self.open.keys().copied().collect();
        for id in open {
            self.roll_back(id);
        }
        // Transactions being written finish and are answered (a drain, not an abort).
        self.completing.drained().await;
    }

    fn roll_back(&mut self, id: TxId) {
        if let Some(tx) = self.open.remove(&id) {
            self.open_bytes -= tx.bytes;
            self.state.metrics.native_transactions_failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn handle(&mut self, frame: Frame, held: Option<HeldBytes>) -> Flow {
        if self.version >= ANSWERED_FRAME_VERSION && frame.tx().is_some() {
            self.answering = u32::from(frame.frame_type() as u8);
        }
        let flow = self.handle_frame(frame, held).await;
        self.answering = 0;
        flow
    }

    async fn handle_frame(&mut self, frame: Frame, held: Option<HeldBytes>) -> Flow {
        // Only a SEND keeps its bytes (its records, in the transaction's batch). Any other
        // frame's permits go before it is handled: a COMPLETE's before its transaction is
        // handed to whoever answers it, so every permit of a transaction is released by the
        // time COMPLETED leaves.
        let held = if matches!(frame, Frame::Send { .. }) {
            held
        } else {
            drop(held);
            None
        };
        let Some(client_id) = self.client_id else {
            return self.hello(frame).await;
        };
        match frame {
            Frame::Hello { .. } => {
                self.send(error_frame(ErrorCode::WrongState, true, None, 0, "HELLO after the handshake"));
                return Flow::Close;
            }
            Frame::DefineSeries { short_id, kind, key } => self.define_series(short_id, kind, key).await,
            Frame::Ping { nonce } => self.send(Frame::Pong { nonce }),
            Frame::Peers if self.version < PEERS_VERSION => self.send(error_frame(
                ErrorCode::UnknownFrameType,
                false,
                None,
                0,
                format!("PEERS needs protocol version {PEERS_VERSION}; this connection speaks version {}", self.version),
            )),
            Frame::Peers => {
                // From the store's memory (the heartbeat thread's last read): no wait here.
                let peers = self.state.engine.store_peers().into_iter().take(PEERS_MAX);
                let peers = peers.map(|(node_id, address)| Peer { node_id, address }).collect();
                self.send(Frame::PeersOk { peers });
            }
            Frame::Create { tx } => {
                if self.open.contains_key(&tx) || self.completing.contains(&tx) {
                    self.send(error_frame(
                        ErrorCode::DuplicateTransaction,
                        false,
                        Some(tx),
                        0,
                        format!("transaction {tx} is already open on this connection"),
                    ));
                } else if self.open.len() >= MAX_OPEN_TRANSACTIONS {
                    self.send(error_frame(
                        ErrorCode::TooManyTransactions,
                        false,
                        Some(tx),
                        0,
                        format!("at most {MAX_OPEN_TRANSACTIONS} transactions may be open on one connection"),
                    ));
                } else {
                    self.open.insert(tx, OpenTransaction::new());
                    let already_completed = self.txlog.lookup(&(client_id, tx.0)).is_some();
                    self.send(Frame::Created { tx, already_completed });
                }
            }
            Frame::Send { tx, records } => self.receive(tx, records, held),
            Frame::Confirm { tx } => match self.open.get_mut(&tx) {
                Some(open) if open.has_partial() => {
                    self.roll_back(tx);
                    self.send(error_frame(
                        ErrorCode::Malformed,
                        false,
                        Some(tx),
                        0,
                        "CONFIRM with a payload value unfinished; rolled back",
                    ));
                }
                Some(open) => {
                    open.confirmed = true;
                    open.last_activity = Instant::now();
                    let (crc, bytes, points) = (open.crc, open.bytes, open.points);
                    self.send(Frame::Confirmed { tx, crc, bytes, points });
                }
                None => self.not_open(tx, "CONFIRM"),
            },
            Frame::Complete { tx } => self.complete(client_id, tx, None, false),
            Frame::CompleteChecked { tx, crc, bytes, points } => {
                if self.version < CHECKED_COMPLETE_VERSION {
                    self.send(error_frame(
                        ErrorCode::UnknownFrameType,
                        false,
                        Some(tx),
                        0,
                        format!(
                            "COMPLETE_CHECKED needs protocol version {CHECKED_COMPLETE_VERSION}; this connection speaks version {}",
                            self.version
                        ),
                    ));
                } else {
                    self.complete(client_id, tx, Some((crc, bytes, points)), false);
                }
            }
            Frame::CompleteFirst { tx, .. } if self.version < FIRST_ATTEMPT_VERSION => self.send(error_frame(
                ErrorCode::UnknownFrameType,
                false,
                Some(tx),
                0,
                format!("COMPLETE_FIRST needs protocol version {FIRST_ATTEMPT_VERSION}; this connection speaks version {}", self.version),
            )),
            Frame::CompleteFirst { tx, crc, bytes, points } => self.complete(client_id, tx, Some((crc, bytes, points)), true),
            Frame::Cancel { tx } => {
                if self.completing.contains(&tx) {
                    self.send(error_frame(
                        ErrorCode::WrongState,
                        false,
                        Some(tx),
                        0,
                        format!("transaction {tx} is already being completed"),
                    ));
                } else {
                    self.roll_back(tx);
                    self.send(Frame::Cancelled { tx });
                }
            }
            other => {
                self.send(error_frame(
                    ErrorCode::WrongState,
                    true,
                    None,
                    0,
                    format!("{:?} frames go from server to client", other.frame_type()),
                ));
                return Flow::Close;
            }
        }
        Flow::Continue
    }

    fn not_open(&mut self, tx: TxId, what: &str) {
        let message = if self.completing.contains(&tx) {
            format!("{what} for transaction {tx}, which is being completed")
        } else {
            format!("{what} for transaction {tx}, which is not open on this connection (never created, cancelled, timed out or failed)")
        };
        self.send(error_frame(ErrorCode::WrongState, false, Some(tx), 0, message));
    }

    async fn hello(&mut self, frame: Frame) -> Flow {
        let Frame::Hello { min_version, max_version, client_id, token, client_name } = frame else {
            self.send(error_frame(ErrorCode::WrongState, true, None, 0, format!("expected HELLO, got {:?}", frame.frame_type())));
            return Flow::Close;
        };
        // The highest version both ends speak.
        let version = max_version.min(VERSION);
        if version < min_version.max(MIN_VERSION) {
            self.send(error_frame(
                ErrorCode::UnsupportedVersion,
                true,
                None,
                0,
                format!("client speaks versions {min_version}..={max_version}, this server speaks {MIN_VERSION}..={VERSION}"),
            ));
            return Flow::Close;
        }
        let presented = (!token.is_empty()).then_some(token.as_str());
        if let Err(error) = self.state.tokens.check(presented, Scope::Write) {
            let code = match error {
                AuthError::Unauthenticated => ErrorCode::Unauthenticated,
                AuthError::Forbidden(_) => ErrorCode::Forbidden,
            };
            self.send(error_frame(code, true, None, 0, error.to_string()));
            return Flow::Close;
        }
        tracing::debug!(peer = %self.peer, client = %client_name, "native handshake");
        self.client_id = Some(client_id);
        self.authenticated.send_replace(true);
        self.version = version;
        let config = &self.state.config;
        let hello_ok = Frame::HelloOk {
            version,
            max_frame_bytes: u32::try_from(config.max_frame_bytes).unwrap_or(u32::MAX),
            max_transaction_bytes: config.max_connection_in_flight_bytes as u64,
            transaction_timeout_ms: u32::try_from(config.transaction_timeout_ms).unwrap_or(u32::MAX),
            server: format!("sensordb {}", env!("CARGO_PKG_VERSION")),
        };
        self.send(hello_ok);
        Flow::Continue
    }

    async fn define_series(&mut self, short_id: u32, kind: ValueKind, key: String) {
        let fail = |code, message: String| error_frame(code, false, None, short_id, message);
        if short_id == 0 {
            self.send(fail(ErrorCode::Malformed, "short series id 0 is reserved".into()));
            return;
        }
        if self.series.len() >= MAX_SERIES_PER_CONNECTION && !self.series.contains_key(&short_id) {
            self.send(fail(ErrorCode::TooManyTransactions, format!("at most {MAX_SERIES_PER_CONNECTION} series per connection")));
            return;
        }
        let parsed = match SeriesKey::parse(&key) {
            Ok(parsed) => parsed,
            Err(error) => return self.send(fail(ErrorCode::InvalidSeriesKey, format!("series key {key:?}: {error}"))),
        };
        let engine = self.state.engine.clone();
        match tokio::task::spawn_blocking(move || engine.series_id(&parsed, kind)).await {
            Ok(Ok(id)) => {
                self.series.insert(short_id, (id, kind));
                self.send(Frame::SeriesOk { short_id, series_id: id.0 });
            }
            Ok(Err(error)) => self.send(fail(engine_error_code(&error), error.to_string())),
            Err(error) => self.send(fail(ErrorCode::Storage, error.to_string())),
        }
    }

    fn receive(&mut self, tx: TxId, records: Bytes, held: Option<HeldBytes>) {
        let limit = self.state.config.max_connection_in_flight_bytes as u64;
        let len = records.len() as u64;
        let Some(open) = self.open.get_mut(&tx) else {
            return self.not_open(tx, "SEND");
        };
        if open.confirmed {
            self.roll_back(tx);
            return self.send(error_frame(ErrorCode::WrongState, false, Some(tx), 0, "SEND after CONFIRM; rolled back"));
        }
        if self.open_bytes + len > limit {
            self.roll_back(tx);
            return self.send(error_frame(
                ErrorCode::TransactionTooLarge,
                false,
                Some(tx),
                0,
                format!("open transactions on this connection would hold more than {limit} bytes; rolled back"),
            ));
        }
        match open.add(records, &self.series) {
            Ok(()) => {
                open.held.extend(held);
                self.open_bytes += len;
            }
            Err(error) => {
                // `add` counted the bytes already.
                self.open_bytes += len;
                self.roll_back(tx);
                self.send(error_frame(error.code, false, Some(tx), 0, format!("{}; transaction rolled back", error.message)));
            }
        }
    }
}
