//! One connection to the server: the handshake, a writer shared by the transactions using the
//! connection, and a reader task that routes each answer to whoever waits for it (transaction
//! answers by transaction id, DEFINE_SERIES answers by short series id).

use crate::{ClientError, ClientTls};
use parking_lot::Mutex;
use sensordb_server::protocol::frame::{read_frame, Frame, TxId, MIN_VERSION, VERSION};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

#[derive(Default)]
struct Routes {
    by_tx: HashMap<TxId, mpsc::UnboundedSender<Frame>>,
    by_series: HashMap<u32, oneshot::Sender<Frame>>,
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
/// The reader's buffer: answers that arrive together are taken with one `read` (two reads per
/// frame without it).
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
    pub(crate) receiver: mpsc::UnboundedReceiver<Frame>,
    routes: Arc<Mutex<Routes>>,
    tx: TxId,
}

impl Drop for TxRoute {
    fn drop(&mut self) {
        self.routes.lock().by_tx.remove(&self.tx);
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
        let (read_half, mut write_half): (Reader, Writer) = match tls {
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
        let mut read_half = tokio::io::BufReader::with_capacity(READ_BUFFER_BYTES, read_half);
        write_half.write_all(&hello.to_bytes()).await?;
        let answer = tokio::time::timeout(timeout, read_frame(&mut read_half, u32::MAX))
            .await
            .map_err(|_| ClientError::Timeout("handshake"))??;
        let limits = match answer {
            Some(Frame::HelloOk { version, max_frame_bytes, max_transaction_bytes, transaction_timeout_ms, server }) => {
                if !(MIN_VERSION..=VERSION).contains(&version) {
                    return Err(ClientError::Protocol(format!("the server chose protocol version {version}, not in {MIN_VERSION}..={VERSION}")));
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
                while let Ok(Some(frame)) = read_frame(&mut read_half, u32::MAX).await {
                    dispatch(&routes, &closed, frame);
                }
                closed.store(true, Ordering::SeqCst);
                // Dropping the senders tells every waiter the connection is gone.
                let mut routes = routes.lock();
                routes.by_tx.clear();
                routes.by_series.clear();
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
        let mut routes = self.routes.lock();
        routes.by_tx.clear();
        routes.by_series.clear();
    }

    /// Writes already-encoded frames.
    pub(crate) async fn write(&self, bytes: &[u8]) -> Result<(), ClientError> {
        if self.is_closed() {
            return Err(ClientError::ConnectionLost);
        }
        let mut writer = self.writer.lock().await;
        if let Err(error) = writer.write_all(bytes).await {
            self.closed.store(true, Ordering::SeqCst);
            return Err(error.into());
        }
        Ok(())
    }

    pub(crate) fn route_tx(&self, tx: TxId) -> TxRoute {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.routes.lock().by_tx.insert(tx, sender);
        TxRoute { receiver, routes: self.routes.clone(), tx }
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

fn dispatch(routes: &Mutex<Routes>, closed: &AtomicBool, frame: Frame) {
    let mut routes = routes.lock();
    match &frame {
        Frame::SeriesOk { short_id, .. } | Frame::Error { tx: None, context: short_id, fatal: false, .. } if *short_id != 0 => {
            if let Some(sender) = routes.by_series.remove(short_id) {
                let _ = sender.send(frame);
            }
        }
        Frame::Error { tx: None, fatal: true, .. } => {
            tracing::warn!(?frame, "the server closes the connection");
            closed.store(true, Ordering::SeqCst);
            routes.by_tx.clear();
            routes.by_series.clear();
        }
        _ => match frame.tx() {
            Some(tx) => {
                if let Some(sender) = routes.by_tx.get(&tx) {
                    let _ = sender.send(frame);
                }
            }
            None => tracing::debug!(?frame, "unrouted answer"),
        },
    }
}
