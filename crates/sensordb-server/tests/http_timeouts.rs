//! The HTTP listener's time limits over real sockets on 127.0.0.1: a kept-alive connection idle
//! longer than `idle_timeout_ms` is closed (plain and TLS) and frees its `max_connections` slot;
//! a request whose headers come too slowly is cut off; a stalled or dripping body is answered
//! 400 and its in-flight byte permits are given back; a client that keeps sending requests, or
//! whose request takes longer than the idle limit, is never cut.
//!
//! Limits are a few hundred milliseconds; every wait is bounded, and lower bounds on elapsed time
//! are only asserted where the server must have waited.

use sensordb_engine::{Durability, Engine, EngineOptions};
use sensordb_server::{RunningServer, Server, ServerConfig};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

const LIMIT: Duration = Duration::from_secs(60);
/// The short limit under test.
const SHORT: Duration = Duration::from_millis(300);
/// Longest a close that is due may take to be seen.
const DUE: Duration = Duration::from_secs(5);

async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future).await.expect("test finished in time")
}

struct TestServer {
    server: RunningServer,
    dir: tempfile::TempDir,
}

async fn start(tls: bool, adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut config = ServerConfig {
        data_dir: data.clone(),
        durability: Durability::Os,
        http_listen: "127.0.0.1:0".parse().expect("address"),
        native_listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerConfig::default()
    };
    if tls {
        make_cert(dir.path());
        config.tls_cert = Some(dir.path().join("cert.pem"));
        config.tls_key = Some(dir.path().join("key.pem"));
    }
    adjust(&mut config);
    let engine = Arc::new(
        Engine::open(&data, {
            let mut options = EngineOptions { durability: Durability::Os, ..Default::default() };
            // The host disk's usage must not delay acknowledgements here.
            options.reclaim.file_system_usage = false;
            options
        })
        .expect("engine opens"),
    );
    let server = Server::start(config, engine).await.expect("server starts");
    TestServer { server, dir }
}

impl TestServer {
    fn count(&self, pick: impl Fn(&sensordb_server::metrics::Metrics) -> &std::sync::atomic::AtomicU64) -> u64 {
        pick(&self.server.state.metrics).load(Ordering::Relaxed)
    }

    async fn plain(&self) -> Client<TcpStream> {
        Client::new(TcpStream::connect(self.server.http_addr).await.expect("connect"))
    }

    async fn tls(&self) -> Client<tokio_rustls::client::TlsStream<TcpStream>> {
        let ca = std::fs::read(self.dir.path().join("cert.pem")).expect("read cert");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.expect("CA PEM")).expect("CA certificate");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = TcpStream::connect(self.server.http_addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("TLS handshake");
        Client::new(stream)
    }

    async fn stop(self) {
        tokio::time::timeout(Duration::from_secs(10), self.server.shutdown()).await.expect("shutdown drains in time");
    }
}

fn make_cert(dir: &Path) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    std::fs::write(dir.join("cert.pem"), certified.cert.pem()).expect("write cert");
    std::fs::write(dir.join("key.pem"), certified.key_pair.serialize_pem()).expect("write key");
}

/// A kept-alive HTTP/1.1 client connection.
struct Client<S> {
    stream: S,
    buffer: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    fn new(stream: S) -> Self {
        Client { stream, buffer: Vec::new() }
    }

    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Sends a request with `body` and reads the answer: (status, body).
    async fn request(&mut self, method: &str, target: &str, body: &str) -> (u16, String) {
        let head = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n", body.len());
        self.send(format!("{head}{body}").as_bytes()).await.expect("send request");
        self.answer().await.expect("an answer")
    }

    /// Reads one answer (Content-Length framed, or none for 204).
    async fn answer(&mut self) -> Option<(u16, String)> {
        let head_end = loop {
            if let Some(at) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            if !self.fill().await {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
        let length = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().expect("length")))
            .unwrap_or(0);
        self.buffer.drain(..head_end + 4);
        while self.buffer.len() < length {
            assert!(self.fill().await, "the body is cut short");
        }
        let body = String::from_utf8_lossy(&self.buffer[..length]).into_owned();
        self.buffer.drain(..length);
        Some((status, body))
    }

    /// Reads more; false at the end of the stream (or an error: a reset or a TLS session cut
    /// without close_notify is a close too).
    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// Waits (at most `DUE`) for the server to close; returns the bytes it sent before.
    async fn closed(&mut self) -> Vec<u8> {
        let waited = tokio::time::timeout(DUE, async { while self.fill().await {} }).await;
        assert!(waited.is_ok(), "the server did not close the connection within {DUE:?}");
        std::mem::take(&mut self.buffer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_timeout() {
    bounded(async {
        let server = start(false, |c| c.idle_timeout_ms = SHORT.as_millis() as u64).await;
        let mut client = server.plain().await;
        assert_eq!(client.request("GET", "/ping", "").await.0, 204);
        let idle_from = Instant::now();
        let leftover = client.closed().await;
        assert!(leftover.is_empty(), "nothing more was sent: {:?}", String::from_utf8_lossy(&leftover));
        assert!(idle_from.elapsed() >= SHORT - Duration::from_millis(50), "closed after {:?}", idle_from.elapsed());

        // A client that connects and never says a word is idle from the start.
        let connected = Instant::now();
        let mut silent = server.plain().await;
        silent.closed().await;
        assert!(connected.elapsed() >= SHORT - Duration::from_millis(50), "closed after {:?}", connected.elapsed());

        assert_eq!(server.count(|m| &m.connections_closed_idle), 2);
        assert_eq!(server.count(|m| &m.http_header_timeouts), 0);
        let (status, text) = server.plain().await.request("GET", "/metrics", "").await;
        assert_eq!(status, 200);
        assert!(text.contains("\nsensordb_connections_closed_idle_total 2\n"), "{text}");
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tls_connection_is_closed_after_the_timeout() {
    bounded(async {
        let server = start(true, |c| c.idle_timeout_ms = SHORT.as_millis() as u64).await;
        let mut client = server.tls().await;
        let (status, body) = client.request("POST", "/write?db=tls", "m,host=a v=1 1700000000000000000\n").await;
        assert_eq!(status, 204, "{body}");
        assert_eq!(client.request("GET", "/ping", "").await.0, 204);
        let idle_from = Instant::now();
        client.closed().await;
        assert!(idle_from.elapsed() >= SHORT - Duration::from_millis(50), "closed after {:?}", idle_from.elapsed());
        assert_eq!(server.count(|m| &m.connections_closed_idle), 1);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_header_sender_is_cut_off_but_an_idle_wait_is_not_a_header_timeout() {
    bounded(async {
        let server = start(false, |c| {
            c.idle_timeout_ms = 3_000;
            c.http_header_read_timeout_ms = SHORT.as_millis() as u64;
        })
        .await;

        // Between requests the idle limit applies, not the (shorter) header limit.
        let mut patient = server.plain().await;
        assert_eq!(patient.request("GET", "/ping", "").await.0, 204);
        tokio::time::sleep(SHORT * 3).await;
        assert_eq!(patient.request("GET", "/ping", "").await.0, 204, "the kept-alive connection still serves");

        // Slowloris: a header line a byte at a time, 50 ms apart, never finished.
        let mut slow = server.plain().await;
        let started = Instant::now();
        slow.send(b"GET /ping HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.expect("send");
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if slow.send(b"a").await.is_err() || started.elapsed() > SHORT * 4 {
                break;
            }
        }
        let answer = slow.closed().await;
        let elapsed = started.elapsed();
        assert!(answer.is_empty(), "no HTTP answer: {:?}", String::from_utf8_lossy(&answer));
        assert!(elapsed >= SHORT - Duration::from_millis(50), "cut after {elapsed:?}");
        assert!(elapsed < Duration::from_millis(3_000), "cut by the header limit, not the idle one: {elapsed:?}");
        assert_eq!(server.count(|m| &m.http_header_timeouts), 1);
        assert_eq!(server.count(|m| &m.connections_closed_idle), 0);

        // The patient client is still served.
        assert_eq!(patient.request("GET", "/ping", "").await.0, 204);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_client_is_not_cut() {
    bounded(async {
        let server = start(false, |c| c.idle_timeout_ms = SHORT.as_millis() as u64).await;
        let mut client = server.plain().await;
        // Requests back to back on one connection for five idle limits.
        let started = Instant::now();
        let mut requests = 0;
        while started.elapsed() < SHORT * 5 {
            let line = format!("active,host=a v={requests} {}\n", 1_700_000_000_000_000_000i64 + requests);
            let (status, body) = client.request("POST", "/write?db=a", &line).await;
            assert_eq!(status, 204, "request {requests}: {body}");
            requests += 1;
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        assert!(requests >= 10, "{requests} requests");

        // A request in progress is never idle, even when it takes longer than the idle limit:
        // here the body comes 2 idle limits after the headers.
        let line = "active,host=a v=-1 1600000000000000000\n";
        let head = format!("POST /write?db=a HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n", line.len());
        client.send(head.as_bytes()).await.expect("send head");
        tokio::time::sleep(SHORT * 2).await;
        client.send(line.as_bytes()).await.expect("send body");
        let (status, body) = client.answer().await.expect("an answer");
        assert_eq!(status, 204, "{body}");
        assert_eq!(server.count(|m| &m.connections_closed_idle), 0);
        assert_eq!(server.count(|m| &m.connections_accepted), 1, "one connection all along");
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_closed_frees_its_slot() {
    bounded(async {
        let server = start(false, |c| {
            c.idle_timeout_ms = SHORT.as_millis() as u64;
            c.max_connections = 1;
        })
        .await;
        let mut first = server.plain().await;
        assert_eq!(first.request("GET", "/ping", "").await.0, 204);
        // The second client's connection waits in the accept queue until the first idles out.
        let started = Instant::now();
        let mut second = server.plain().await;
        second.send(b"GET /ping HTTP/1.1\r\nHost: localhost\r\n\r\n").await.expect("send");
        let answer = tokio::time::timeout(DUE, second.answer()).await.expect("answered once the slot is free");
        assert_eq!(answer.map(|a| a.0), Some(204));
        assert!(started.elapsed() >= SHORT - Duration::from_millis(100), "served after {:?}", started.elapsed());
        first.closed().await;
        assert_eq!(server.count(|m| &m.connections_closed_idle), 1);
        assert_eq!(server.server.state.metrics.connections_open.load(Ordering::Relaxed), 1);
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_dripping_body_is_answered_and_gives_back_its_permits() {
    bounded(async {
        let server = start(false, |c| {
            c.http_body_read_timeout_ms = SHORT.as_millis() as u64;
            c.http_body_min_bytes_per_second = 1_000;
        })
        .await;
        let permits = server.server.state.in_flight_bytes.available_permits();

        // Stalled: 1,000 bytes announced, 20 sent.
        let mut stalled = server.plain().await;
        stalled
            .send(b"POST /write?db=s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\nstalled,host=a v=1 1")
            .await
            .expect("send");
        let (status, body) = tokio::time::timeout(DUE, stalled.answer()).await.expect("answered in time").expect("an answer");
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("too slow"), "{body}");
        stalled.closed().await;

        // Dripping: a byte every 50 ms, faster than the gap limit but far below 1,000 bytes/s.
        let mut drip = server.plain().await;
        drip.send(b"POST /write?db=s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n").await.expect("send");
        let started = Instant::now();
        let mut answered = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if drip.send(b"d").await.is_err() {
                break;
            }
            if let Ok(answer) = tokio::time::timeout(Duration::from_millis(1), drip.answer()).await {
                answered = answer;
                break;
            }
        }
        let (status, body) = match answered {
            Some(answer) => answer,
            None => tokio::time::timeout(DUE, drip.answer()).await.expect("answered in time").expect("an answer"),
        };
        assert_eq!(status, 400, "{body}");
        assert!(started.elapsed() < DUE, "cut after {:?}", started.elapsed());

        assert_eq!(server.count(|m| &m.http_body_timeouts), 2);
        assert_eq!(server.server.state.in_flight_bytes.available_permits(), permits, "every permit given back");
        assert_eq!(server.server.state.metrics.in_flight_bytes.load(Ordering::Relaxed), 0);

        // A body that comes in time is stored.
        let (status, body) = server.plain().await.request("POST", "/write?db=s", "fine,host=a v=1 1\n").await;
        assert_eq!(status, 204, "{body}");
        server.stop().await;
    })
    .await;
}
