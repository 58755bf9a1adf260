//! Client library for sensordb's native transactional protocol (`docs/PROTOCOL.md`).
//!
//! ```no_run
//! # async fn example() -> Result<(), sensordb_client::ClientError> {
//! use sensordb_client::{Client, SeriesKey, Value, ValueKind};
//! let client = Client::connect("127.0.0.1:7070".parse().expect("address"), "token").await?;
//! let key = SeriesKey::new("engine", [("truck", "7")], "rpm").expect("key");
//! let rpm = client.series(&key, ValueKind::F64).await?;
//! let mut tx = client.transaction();
//! tx.push(&rpm, 1_700_000_000_000_000_000, Value::F64(2100.0))?;
//! let stats = tx.commit().await?; // returns once the points are durable
//! # let _ = stats; Ok(()) }
//! ```
//!
//! A commit is CREATE → SEND… → CONFIRM (the server's CRC32C of what it received is compared
//! with the client's; a mismatch cancels and resends) → COMPLETE. CREATE, the SENDs and CONFIRM
//! are written together without waiting for answers ([`ClientOptions::pipeline`]); with a
//! version-2 server COMPLETE_CHECKED goes in the same write and the server compares the
//! checksums before storing ([`ClientOptions::checked_complete`]: one round trip), otherwise
//! COMPLETE waits for CONFIRMED. When the connection fails or an
//! answer does not come, the client reconnects and resends the whole transaction under the same
//! id; the server's completed-transaction window answers a transaction it already stored without
//! storing it again. Several transactions may run at once over one client (one connection,
//! frames interleaved). Given several nodes ([`Client::connect_to_any`]), the client starts on
//! the one its id picks and each retry after a lost connection goes to the next node
//! (docs/PROTOCOL.md, "Several nodes"). With a version-4 server the client also asks the node
//! it connected to for its peers (PEERS) and adds their addresses to the nodes it fails over to
//! ([`ClientOptions::learn_peers`], [`Client::peers`]).
//!
//! The client offers protocol versions 1 to 4 ([`sensordb_protocol::frame::VERSION`]). Under
//! version 3 an ERROR naming a transaction says which frame it answers; the client does not need
//! that count: after an ERROR in a pipelined transaction it resends on a new connection, so no
//! late answer of the failed attempt can be taken for the retry's.

mod connection;
mod transaction;

pub use connection::ServerLimits;
pub use sensordb_model::{SeriesKey, Timestamp, Value, ValueColumn, ValueKind};
pub use sensordb_protocol::frame::{ErrorCode, Peer, TxId};
pub use transaction::{Transaction, TxStats};

use connection::Conn;
use parking_lot::{Mutex, RwLock};
use sensordb_protocol::frame::{Frame, PEERS_VERSION};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame error: {0}")]
    Frame(#[from] sensordb_protocol::frame::FrameError),
    #[error("the connection was lost")]
    ConnectionLost,
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("server error {code:?}: {message}")]
    Server { code: ErrorCode, message: String },
    #[error("the server received other bytes than were sent (CRC32C {server:#010x}, expected {client:#010x})")]
    ChecksumMismatch { server: u32, client: u32 },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("TLS setup: {0}")]
    Tls(String),
    #[error("series {key} holds {kind} values, not {attempted}")]
    KindMismatch { key: String, kind: ValueKind, attempted: ValueKind },
}

impl ClientError {
    /// True when resending the whole transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Io(_) | ClientError::Frame(_) | ClientError::ConnectionLost | ClientError::Timeout(_) => true,
            ClientError::ChecksumMismatch { .. } => true,
            ClientError::Server { code, .. } => code.is_retryable(),
            ClientError::Protocol(_) | ClientError::Tls(_) | ClientError::KindMismatch { .. } => false,
        }
    }
}

/// Connection and retry settings.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Access token sent in HELLO ("" for none).
    pub token: String,
    /// Names this client for the server's completed-transaction window; keep it across restarts
    /// to retry transactions of an earlier process. Random by default.
    pub client_id: [u8; 16],
    pub client_name: String,
    /// Attempts per commit, the first included.
    pub max_attempts: u32,
    /// Wait before the n-th retry: n × this.
    pub retry_backoff: Duration,
    /// Longest wait for any one answer (COMPLETE's waits for durability).
    pub reply_timeout: Duration,
    /// Largest SEND body; also bounded by the server's frame limit.
    pub packet_bytes: usize,
    /// TLS, for a server started with `tls_cert`/`tls_key`; `None` (the default) is plaintext.
    pub tls: Option<ClientTls>,
    /// Write a transaction's CREATE, SENDs and CONFIRM together, then COMPLETE once CONFIRMED's
    /// checksum matched: two round trips per commit. Off, each frame waits for the answer of
    /// the one before (CREATE, SENDs, CONFIRM, COMPLETE: three round trips and a write per
    /// frame). Both store the same, once; on by default.
    pub pipeline: bool,
    /// With `pipeline`, and a server speaking protocol version 2: COMPLETE_CHECKED (carrying
    /// the client's checksum, bytes and points) goes in the same write as CREATE, the SENDs and
    /// CONFIRM, and the server stores the transaction only if what it received matches: one
    /// round trip per commit. Off (or with a version-1 server), COMPLETE waits for CONFIRMED.
    /// On by default.
    pub checked_complete: bool,
    /// With [`Client::connect_to_any`] and a server speaking protocol version 4: after the first
    /// connection, ask the node for its peers (the live nodes sharing its store) and add their
    /// addresses to the nodes to fail over to. On by default.
    pub learn_peers: bool,
}

/// How the client verifies a TLS server: the CA certificate(s) it trusts and the name the
/// server's certificate must carry.
#[derive(Clone)]
pub struct ClientTls {
    /// PEM with one or more CERTIFICATE blocks (a self-signed server certificate will do).
    pub ca_pem: Vec<u8>,
    /// A DNS name or IP address in the server certificate (e.g. "localhost", "127.0.0.1").
    pub server_name: String,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").field("ca_pem_bytes", &self.ca_pem.len()).field("server_name", &self.server_name).finish()
    }
}

impl ClientTls {
    pub fn new(ca_pem: impl Into<Vec<u8>>, server_name: impl Into<String>) -> ClientTls {
        ClientTls { ca_pem: ca_pem.into(), server_name: server_name.into() }
    }

    /// Trusts the CA certificate(s) in the PEM file at `path`.
    pub fn from_ca_file(path: impl AsRef<std::path::Path>, server_name: impl Into<String>) -> std::io::Result<ClientTls> {
        Ok(ClientTls::new(std::fs::read(path)?, server_name))
    }

    /// The rustls connector and server name (`ring` provider, no client certificate), for this
    /// client and for other TLS clients of the same server (the bench's HTTP client).
    pub fn connector(&self) -> Result<(tokio_rustls::TlsConnector, tokio_rustls::rustls::pki_types::ServerName<'static>), ClientError> {
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&self.ca_pem) {
            let cert = cert.map_err(|e| ClientError::Tls(format!("CA certificate PEM: {e}")))?;
            roots.add(cert).map_err(|e| ClientError::Tls(format!("CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(ClientError::Tls("no CERTIFICATE in the CA PEM".into()));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from(self.server_name.clone())
            .map_err(|e| ClientError::Tls(format!("server name {:?}: {e}", self.server_name)))?;
        Ok((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: String::new(),
            client_id: rand::random(),
            client_name: format!("sensordb-client {}", env!("CARGO_PKG_VERSION")),
            max_attempts: 5,
            retry_backoff: Duration::from_millis(50),
            reply_timeout: Duration::from_secs(30),
            packet_bytes: 1 << 20,
            tls: None,
            pipeline: true,
            checked_complete: true,
            learn_peers: true,
        }
    }
}

/// A series registered with the client, usable in its transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeriesHandle {
    pub(crate) short_id: u32,
    pub(crate) kind: ValueKind,
}

impl SeriesHandle {
    pub fn kind(&self) -> ValueKind {
        self.kind
    }
}

pub(crate) struct Inner {
    /// The nodes this client may use (one for [`Client::connect_with`]), the given ones first,
    /// then the peers learnt from them.
    addrs: RwLock<Vec<SocketAddr>>,
    /// Index (modulo `addrs.len()`) of the node the next connection goes to.
    next_addr: AtomicUsize,
    pub(crate) options: ClientOptions,
    /// Short id - 1 → (canonical key, kind).
    series: Mutex<Vec<(String, ValueKind)>>,
    series_by_key: Mutex<HashMap<String, u32>>,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    pub(crate) drop_before_complete_reply: AtomicU32,
    pub(crate) corrupt_next_sends: AtomicU32,
}

/// A connection to a sensordb server's native listener. Cheap to clone; clones share the
/// connection.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl Client {
    /// Connects with `token` and default options.
    pub async fn connect(addr: SocketAddr, token: &str) -> Result<Client, ClientError> {
        Self::connect_with(addr, ClientOptions { token: token.to_string(), ..ClientOptions::default() }).await
    }

    /// Connects to one node; it does not learn peers (see [`Client::connect_to_any`]).
    pub async fn connect_with(addr: SocketAddr, options: ClientOptions) -> Result<Client, ClientError> {
        Self::open(&[addr], options, false).await
    }

    /// Connects to one of several sensordb nodes sharing a store (docs/CASSANDRA.md): the first
    /// tried is picked from the client id, so that clients spread over the nodes; when a
    /// connection fails or an answer does not come, the retry goes to the next node (the same
    /// transaction id, which the nodes recognise cluster-wide under `[cassandra] ack =
    /// "cassandra"`). A node that refuses the connection is skipped. Fails only when none
    /// answers. With [`ClientOptions::learn_peers`] (the default) and a version-4 server, the
    /// node's peers are then added to the addresses given ([`Client::peers`]): one address of a
    /// cluster is enough to fail over to every live node.
    pub async fn connect_to_any(addrs: &[SocketAddr], options: ClientOptions) -> Result<Client, ClientError> {
        let learn_peers = options.learn_peers;
        Self::open(addrs, options, learn_peers).await
    }

    async fn open(addrs: &[SocketAddr], options: ClientOptions, learn_peers: bool) -> Result<Client, ClientError> {
        if addrs.is_empty() {
            return Err(ClientError::Protocol("no server address given".into()));
        }
        let first = usize::from(options.client_id[0]) % addrs.len();
        let client = Client {
            inner: Arc::new(Inner {
                addrs: RwLock::new(addrs.to_vec()),
                next_addr: AtomicUsize::new(first),
                options,
                series: Mutex::new(Vec::new()),
                series_by_key: Mutex::new(HashMap::new()),
                conn: tokio::sync::Mutex::new(None),
                drop_before_complete_reply: AtomicU32::new(0),
                corrupt_next_sends: AtomicU32::new(0),
            }),
        };
        client.connection().await?;
        if learn_peers {
            // A hint: without it the client fails over among the addresses it was given.
            if let Err(error) = client.peers().await {
                tracing::debug!(%error, "could not learn the node's peers");
            }
        }
        Ok(client)
    }

    /// Asks the connected node for its peers (protocol version 4: the live nodes sharing its
    /// store, with their advertised native addresses) and adds the addresses this client does
    /// not have to those it fails over to. Empty from an older server or one that shares no
    /// store; an address that does not parse as `ip:port` or resolve is skipped.
    pub async fn peers(&self) -> Result<Vec<Peer>, ClientError> {
        let conn = self.connection().await?;
        if conn.limits.version < PEERS_VERSION {
            return Ok(Vec::new());
        }
        let answer = conn.route_peers();
        conn.write(&Frame::Peers.to_bytes()).await?;
        let peers = match tokio::time::timeout(self.inner.options.reply_timeout, answer).await {
            Err(_) => return Err(ClientError::Timeout("PEERS_OK")),
            Ok(Err(_)) => return Err(ClientError::ConnectionLost),
            Ok(Ok(Frame::PeersOk { peers })) => peers,
            Ok(Ok(other)) => return Err(ClientError::Protocol(format!("expected PEERS_OK, got {:?}", other.frame_type()))),
        };
        for peer in &peers {
            let resolved = match peer.address.parse::<SocketAddr>() {
                Ok(addr) => Some(addr),
                Err(_) => tokio::net::lookup_host(peer.address.as_str()).await.ok().and_then(|mut found| found.next()),
            };
            match resolved {
                Some(addr) => self.add_address(addr),
                None => tracing::debug!(address = %peer.address, node = peer.node_id, "peer address does not resolve; skipped"),
            }
        }
        Ok(peers)
    }

    /// Adds `addr` to the nodes to fail over to, unless known; the current node stays current.
    fn add_address(&self, addr: SocketAddr) {
        let mut addrs = self.inner.addrs.write();
        if addrs.contains(&addr) {
            return;
        }
        // Under the write lock: the index keeps naming the same node as the list grows.
        let current = self.inner.next_addr.load(Ordering::SeqCst) % addrs.len();
        self.inner.next_addr.store(current, Ordering::SeqCst);
        addrs.push(addr);
    }

    /// The nodes this client may connect to: those given, then the peers it learnt.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.inner.addrs.read().clone()
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// The node the current (or next) connection goes to.
    pub fn current_address(&self) -> SocketAddr {
        let addrs = self.inner.addrs.read();
        addrs[self.inner.next_addr.load(Ordering::SeqCst) % addrs.len()]
    }

    /// Sends the next connection to the next node (with one address: the same one again).
    pub(crate) fn fail_over(&self) {
        if self.inner.addrs.read().len() > 1 {
            self.inner.next_addr.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The server's limits from the current connection's handshake.
    pub async fn limits(&self) -> Result<ServerLimits, ClientError> {
        Ok(self.connection().await?.limits.clone())
    }

    /// The open connection, or a new one.
    pub(crate) async fn connection(&self) -> Result<Arc<Conn>, ClientError> {
        // Without waiting when the slot is free and the connection open (the common case).
        if let Ok(slot) = self.inner.conn.try_lock() {
            if let Some(conn) = slot.as_ref().filter(|conn| !conn.is_closed()) {
                return Ok(conn.clone());
            }
        }
        let mut slot = self.inner.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            if !conn.is_closed() {
                return Ok(conn.clone());
            }
        }
        let options = &self.inner.options;
        // Each node at most once: a dead one refuses at once (or times out), then the next.
        let mut failed = None;
        let nodes = self.inner.addrs.read().len();
        for _ in 0..nodes {
            let addr = self.current_address();
            match Conn::open(addr, options.client_id, &options.token, &options.client_name, options.reply_timeout, options.tls.as_ref())
                .await
            {
                Ok(conn) => {
                    *slot = Some(conn.clone());
                    return Ok(conn);
                }
                Err(error) if error.is_retryable() && nodes > 1 => {
                    tracing::debug!(%addr, %error, "node unreachable; trying the next");
                    self.fail_over();
                    failed = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(failed.unwrap_or(ClientError::ConnectionLost))
    }

    /// Drops the current connection; the next call reconnects.
    pub async fn disconnect(&self) {
        if let Some(conn) = self.inner.conn.lock().await.take() {
            conn.close().await;
        }
    }

    /// Registers `key` (creating the series on the server with `kind` if new) and returns its
    /// handle. Fails when the series exists with another kind.
    pub async fn series(&self, key: &SeriesKey, kind: ValueKind) -> Result<SeriesHandle, ClientError> {
        let canonical = key.canonical();
        let short_id = {
            let mut by_key = self.inner.series_by_key.lock();
            let mut series = self.inner.series.lock();
            match by_key.get(&canonical) {
                Some(&id) => {
                    let existing = series[id as usize - 1].1;
                    if existing != kind {
                        return Err(ClientError::KindMismatch { key: canonical, kind: existing, attempted: kind });
                    }
                    id
                }
                None => {
                    series.push((canonical.clone(), kind));
                    let id = series.len() as u32;
                    by_key.insert(canonical, id);
                    id
                }
            }
        };
        let conn = self.connection().await?;
        let defined = self.define(&conn, &[short_id]).await;
        if let Err(ClientError::Server { .. }) = &defined {
            // Forget a series the server refused, so a later call asks again.
            let mut by_key = self.inner.series_by_key.lock();
            by_key.retain(|_, id| *id != short_id);
        }
        defined?;
        Ok(SeriesHandle { short_id, kind })
    }

    /// Makes sure `short_ids` are defined on `conn` (see [`Client::define`]), without waiting or
    /// allocating when they are (the common case).
    pub(crate) async fn define_all(&self, conn: &Conn, short_ids: impl Iterator<Item = u32> + Clone) -> Result<(), ClientError> {
        if let Ok(defined) = conn.defined.try_lock() {
            if short_ids.clone().all(|id| defined.contains(&id)) {
                return Ok(());
            }
        }
        let short_ids: Vec<u32> = short_ids.collect();
        self.define(conn, &short_ids).await
    }

    /// Makes sure `short_ids` are defined on `conn` (DEFINE_SERIES, pipelined).
    pub(crate) async fn define(&self, conn: &Conn, short_ids: &[u32]) -> Result<(), ClientError> {
        let mut defined = conn.defined.lock().await;
        let missing: Vec<u32> = short_ids.iter().copied().filter(|id| !defined.contains(id)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        let mut waits = Vec::with_capacity(missing.len());
        {
            let series = self.inner.series.lock();
            for &short_id in &missing {
                let (key, kind) = series[short_id as usize - 1].clone();
                waits.push((short_id, conn.route_series(short_id)));
                Frame::DefineSeries { short_id, kind, key }.encode(&mut bytes);
            }
        }
        conn.write(&bytes).await?;
        for (short_id, wait) in waits {
            let answer = tokio::time::timeout(self.inner.options.reply_timeout, wait)
                .await
                .map_err(|_| ClientError::Timeout("DEFINE_SERIES"))?
                .map_err(|_| ClientError::ConnectionLost)?;
            match answer {
                Frame::SeriesOk { .. } => {
                    defined.insert(short_id);
                }
                Frame::Error { code, message, .. } => return Err(ClientError::Server { code, message }),
                other => return Err(ClientError::Protocol(format!("unexpected answer {other:?}"))),
            }
        }
        Ok(())
    }

    /// A new transaction with a random id.
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.clone(), TxId(rand::random()), true)
    }

    /// A new transaction with a chosen id (to retry one of an earlier process).
    pub fn transaction_with_id(&self, id: TxId) -> Transaction {
        Transaction::new(self.clone(), id, false)
    }

    /// Test hook: the next `n` commits close the connection right after sending COMPLETE,
    /// before its answer is read, as a network failure would (then retry).
    #[doc(hidden)]
    pub fn drop_connection_before_complete_reply(&self, n: u32) {
        self.inner.drop_before_complete_reply.store(n, Ordering::SeqCst);
    }

    /// Test hook: the next `n` commits flip a bit in the records of their first SEND after the
    /// client's checksum was taken, as corruption above the frame checksum would.
    #[doc(hidden)]
    pub fn corrupt_next_sends(&self, n: u32) {
        self.inner.corrupt_next_sends.store(n, Ordering::SeqCst);
    }
}

/// Takes one from a test-hook counter if it is nonzero.
pub(crate) fn take_one(counter: &AtomicU32) -> bool {
    counter.load(Ordering::SeqCst) != 0 && counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}
