//! One connection to the server: the handshake, a writer shared by the transactions using the
//! connection, and a reader task that routes each answer to whoever waits for it (transaction
//! answers by transaction id, DEFINE_SERIES answers by short series id).

use crate::{ClientError, ClientTls};
use bytes::BytesMut;
use parking_lot::Mutex;
use sensordb_protocol::frame::{Frame, FrameError, Header, TxId, HEADER_LEN, MIN_VERSION, VERSION};
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::poll_fn;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

#[derive(Default)]
struct Routes {
    by_tx: HashMap<TxId, Arc<Inbox>, BuildHasherDefault<TxIdHasher>>,
    by_series: HashMap<u32, oneshot::Sender<Frame>>,
    /// PEERS asked on this connection, answered in order.
    peers: VecDeque<oneshot::Sender<Frame>>,
}

impl Routes {
    /// Tells every waiter the connection is gone (after the answers already queued for it).
    fn close_all(&mut self) {
        for (_, inbox) in self.by_tx.drain() {
            inbox.close();
        }
        self.by_series.clear();
        self.peers.clear();
    }
}

/// Hashes a transaction id (16 bytes the client chose, random by default) by folding its two
/// halves: the route map is looked up for every answer, and SipHash cost more than the lookup.
#[derive(Default)]
struct TxIdHasher(u64);

impl Hasher for TxIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(29) ^ u64::from_le_bytes(word)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write(&(n as u64).to_le_bytes());
    }

    fn finish(&self) -> u64 {
        // Mix the high bits down: the map takes its bucket from the low bits.
        let h = self.0;
        (h ^ (h >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (h >> 29)
    }
}

/// The answers for one transaction, as the reader task routes them; `closed` once the
/// connection is gone.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
}

#[derive(Default)]
struct InboxState {
    frames: VecDeque<Frame>,
    waker: Option<Waker>,
    closed: bool,
}

impl Inbox {
    fn push(&self, frame: Frame) {
        let waker = {
            let mut state = self.state.lock();
            state.frames.push_back(frame);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn close(&self) {
        let waker = {
            let mut state = self.state.lock();
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// What the server said in HELLO_OK.
#[derive(Clone, Debug)]
pub struct ServerLimits {
    /// The protocol version the connection speaks (the highest both ends know).
    pub version: u16,
    pub max_frame_bytes: u32,
    pub max_transaction_bytes: u64,
    pub transaction_timeout_ms: u32,
    pub server: String,
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// The reader's buffer: answers that arrive together are taken with one `read`, and decoded
/// from the buffer without a copy or an allocation per frame.
const READ_BUFFER_BYTES: usize = 4096;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

pub(crate) struct Conn {
    writer: tokio::sync::Mutex<Writer>,
    routes: Arc<Mutex<Routes>>,
    closed: Arc<AtomicBool>,
    reader: JoinHandle<()>,
    pub(crate) limits: ServerLimits,
    /// Short series ids defined on this connection; the lock is held while defining.
    pub(crate) defined: tokio::sync::Mutex<HashSet<u32>>,
}

/// Answers for one transaction; unregisters on drop.
pub(crate) struct TxRoute {
    inbox: Arc<Inbox>,
    routes: Arc<Mutex<Routes>>,
    tx: TxId,
}

impl TxRoute {
    /// The next answer, or `None` once the connection is gone and every answer that came
    /// before was taken.
    pub(crate) async fn recv(&mut self) -> Option<Frame> {
        poll_fn(|cx| {
            let mut state = self.inbox.state.lock();
            if let Some(frame) = state.frames.pop_front() {
                return Poll::Ready(Some(frame));
            }
            if state.closed {
                return Poll::Ready(None);
            }
            match &mut state.waker {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                slot => *slot = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }
}

impl Drop for TxRoute {
    fn drop(&mut self) {
        let mut routes = self.routes.lock();
        // A later route under the same id (a retry) has an inbox of its own: leave it.
        if routes.by_tx.get(&self.tx).is_some_and(|inbox| Arc::ptr_eq(inbox, &self.inbox)) {
            routes.by_tx.remove(&self.tx);
        }
    }
}

impl Conn {
    pub(crate) async fn open(
        addr: SocketAddr,
        client_id: [u8; 16],
        token: &str,
        client_name: &str,
        timeout: Duration,
        tls: Option<&ClientTls>,
    ) -> Result<Arc<Conn>, ClientError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr)).await.map_err(|_| ClientError::Timeout("connect"))??;
        let _ = stream.set_nodelay(true);
        let (mut read_half, mut write_half): (Reader, Writer) = match tls {
            None => {
                let (read_half, write_half) = stream.into_split();
                (Box::new(read_half), Box::new(write_half))
            }
            Some(tls) => {
                let (connector, server_name) = tls.connector()?;
                let stream = tokio::time::timeout(timeout, connector.connect(server_name, stream))
                    .await
                    .map_err(|_| ClientError::Timeout("TLS handshake"))??;
                let (read_half, write_half) = tokio::io::split(stream);
                (Box::new(read_half), Box::new(write_half))
            }
        };
        let hello = Frame::Hello {
            min_version: MIN_VERSION,
            max_version: VERSION,
            client_id,
            token: token.to_string(),
            client_name: client_name.to_string(),
        };
        write_half.write_all(&hello.to_bytes()).await?;
        let mut buffer = BytesMut::with_capacity(READ_BUFFER_BYTES);
        let answer = tokio::time::timeout(timeout, read_frame(&mut read_half, &mut buffer))
            .await
            .map_err(|_| ClientError::Timeout("handshake"))??;
        let limits = match answer {
            Some(Frame::HelloOk { version, max_frame_bytes, max_transaction_bytes, transaction_timeout_ms, server }) => {
                if !(MIN_VERSION..=VERSION).contains(&version) {
                    return Err(ClientError::Protocol(format!(
                        "the server chose protocol version {version}, not in {MIN_VERSION}..={VERSION}"
                    )));
                }
                ServerLimits { version, max_frame_bytes, max_transaction_bytes, transaction_timeout_ms, server }
            }
            Some(Frame::Error { code, message, .. }) => return Err(ClientError::Server { code, message }),
            Some(other) => return Err(ClientError::Protocol(format!("expected HELLO_OK, got {:?}", other.frame_type()))),
            None => return Err(ClientError::ConnectionLost),
        };
        let routes = Arc::new(Mutex::new(Routes::default()));
        let closed = Arc::new(AtomicBool::new(false));
        let reader = {
            let routes = routes.clone();
            let closed = closed.clone();
            tokio::spawn(async move {
                let _ = read_answers(&mut read_half, buffer, &routes, &closed).await;
                closed.store(true, Ordering::SeqCst);
                routes.lock().close_all();
            })
        };
        Ok(Arc::new(Conn {
            writer: tokio::sync::Mutex::new(write_half),
            routes,
            closed,
            reader,
            limits,
            defined: tokio::sync::Mutex::new(HashSet::new()),
        }))
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Closes the connection at once (both directions).
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.writer.lock().await.shutdown().await;
        self.reader.abort();
        self.routes.lock().close_all();
    }

    /// Writes already-encoded frames.
    pub(crate) async fn write(&self, bytes: &[u8]) -> Result<(), ClientError> {
        if self.is_closed() {
            return Err(ClientError::ConnectionLost);
        }
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(_) => self.writer.lock().await,
        };
        if let Err(error) = writer.write_all(bytes).await {
            self.closed.store(true, Ordering::SeqCst);
            return Err(error.into());
        }
        Ok(())
    }

    pub(crate) fn route_tx(&self, tx: TxId) -> TxRoute {
        let inbox = Arc::new(Inbox::default());
        let mut routes = self.routes.lock();
        if self.is_closed() {
            // The reader has ended (or is ending): nothing will answer.
            inbox.close();
        } else {
            routes.by_tx.insert(tx, inbox.clone());
        }
        TxRoute { inbox, routes: self.routes.clone(), tx }
    }

    /// Where the answer to a PEERS written next goes (answers come in the order asked).
    pub(crate) fn route_peers(&self) -> oneshot::Receiver<Frame> {
        let (sender, receiver) = oneshot::channel();
        self.routes.lock().peers.push_back(sender);
        receiver
    }

    pub(crate) fn route_series(&self, short_id: u32) -> oneshot::Receiver<Frame> {
        let (sender, receiver) = oneshot::channel();
        self.routes.lock().by_series.insert(short_id, sender);
        receiver
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Decodes the frame at the front of `buffer` when it is whole: its body is a view into the
/// buffer, whose memory is reused once the frames taken from it are dropped (no allocation or
/// copy per frame).
fn decode_front(buffer: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
    let Some(head) = buffer.get(..HEADER_LEN) else { return Ok(None) };
    let mut array = [0u8; HEADER_LEN];
    array.copy_from_slice(head);
    let header = Header::parse(&array, u32::MAX)?;
    let end = HEADER_LEN + header.len as usize;
    if buffer.len() < end {
        buffer.reserve(end - buffer.len());
        return Ok(None);
    }
    let mut frame = buffer.split_to(end);
    let body = frame.split_off(HEADER_LEN).freeze();
    header.decode_body(body).map(Some)
}

/// Reads more into `buffer`; `Ok(false)` at the end of the stream (an error when it ends inside
/// a frame, as `read_frame` of the protocol module says).
async fn fill(reader: &mut Reader, buffer: &mut BytesMut) -> Result<bool, FrameError> {
    if buffer.capacity() - buffer.len() < READ_BUFFER_BYTES / 2 {
        buffer.reserve(READ_BUFFER_BYTES);
    }
    if reader.read_buf(buffer).await? > 0 {
        return Ok(true);
    }
    if buffer.len() >= HEADER_LEN {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
    }
    Ok(false)
}

/// The next frame (`None` at the end of the stream), reading through `buffer`.
async fn read_frame(reader: &mut Reader, buffer: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
    loop {
        if let Some(frame) = decode_front(buffer)? {
            return Ok(Some(frame));
        }
        if !fill(reader, buffer).await? {
            return Ok(None);
        }
    }
}

/// The reader task's loop: decodes every whole frame that came in one read and routes them
/// under one lock. Returns at the end of the stream or on the first error.
async fn read_answers(reader: &mut Reader, mut buffer: BytesMut, routes: &Mutex<Routes>, closed: &AtomicBool) -> Result<(), FrameError> {
    let mut frames = Vec::new();
    loop {
        while let Some(frame) = decode_front(&mut buffer)? {
            frames.push(frame);
        }
        if !frames.is_empty() {
            let mut routes = routes.lock();
            for frame in frames.drain(..) {
                dispatch(&mut routes, closed, frame);
            }
        }
        if !fill(reader, &mut buffer).await? {
            return Ok(());
        }
    }
}

fn dispatch(routes: &mut Routes, closed: &AtomicBool, frame: Frame) {
    match &frame {
        Frame::SeriesOk { short_id, .. } | Frame::Error { tx: None, context: short_id, fatal: false, .. } if *short_id != 0 => {
            if let Some(sender) = routes.by_series.remove(short_id) {
                let _ = sender.send(frame);
            }
        }
        Frame::PeersOk { .. } => {
            if let Some(sender) = routes.peers.pop_front() {
                let _ = sender.send(frame);
            }
        }
        Frame::Error { tx: None, fatal: true, .. } => {
            tracing::warn!(?frame, "the server closes the connection");
            closed.store(true, Ordering::SeqCst);
            routes.close_all();
        }
        _ => match frame.tx() {
            Some(tx) => {
                if let Some(inbox) = routes.by_tx.get(&tx) {
                    inbox.push(frame);
                }
            }
            None => tracing::debug!(?frame, "unrouted answer"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn tx_id_hashes_spread_over_the_low_and_high_bits() {
        let build = BuildHasherDefault::<TxIdHasher>::default();
        let mut low = HashSet::new();
        let mut high = HashSet::new();
        for n in 0..4096u64 {
            let hash = build.hash_one(TxId::from_u64(n));
            low.insert(hash & 0xFFF);
            high.insert(hash >> 57);
        }
        assert!(low.len() > 2400, "{} distinct low 12 bits of 4096", low.len());
        assert_eq!(high.len(), 128);
    }
}
